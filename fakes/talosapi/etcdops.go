package talosapi

import (
	"context"
	"errors"
	"fmt"

	"github.com/siderolabs/gen/xslices"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/types/known/emptypb"
)

// The etcd maintenance RPCs of machined, as Talos v1.12.6 serves them
// (internal/app/machined/internal/server/v1alpha1/v1alpha1_server.go:
// EtcdLeaveCluster, EtcdForfeitLeadership, EtcdAlarmList, EtcdAlarmDisarm, EtcdDefragment) with
// the helpers they call (internal/pkg/etcd: ForfeitLeadership,
// GetLocalMemberID). etcd's own errors pass through, wrapped as Talos wraps
// them.

// etcdClient is how each etcd handler of machined starts: the control-plane
// check (named after the talosctl command, as Talos names it), then a client
// of the cluster or of the local member; done closes it.
func (m *machineServer) etcdClient(ctx context.Context, check string, local bool) (*clientv3.Client, func(), error) {
	if err := m.checkControlplane(check); err != nil {
		return nil, nil, err
	}

	client, done, err := m.backend().EtcdClient(ctx, local)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to create etcd client: %w", err)
	}

	return client, done, nil
}

// EtcdLeaveCluster removes the local member, stops etcd and removes its data.
func (m *machineServer) EtcdLeaveCluster(ctx context.Context, _ *machine.EtcdLeaveClusterRequest) (*machine.EtcdLeaveClusterResponse, error) {
	client, done, err := m.etcdClient(ctx, "etcd leave", false)
	if err != nil {
		return nil, err
	}

	defer done()

	if err = m.backend().LeaveEtcd(clientv3.WithRequireLeader(ctx), client); err != nil {
		return nil, fmt.Errorf("failed to leave cluster: %w", err)
	}

	return &machine.EtcdLeaveClusterResponse{Messages: []*machine.EtcdLeaveCluster{{}}}, nil
}

// EtcdForfeitLeadership moves leadership away from the local member, when it
// leads, to the first other member of the list.
func (m *machineServer) EtcdForfeitLeadership(ctx context.Context, _ *machine.EtcdForfeitLeadershipRequest) (*machine.EtcdForfeitLeadershipResponse, error) {
	client, done, err := m.etcdClient(ctx, "etcd forfeit leadership", false)
	if err != nil {
		return nil, err
	}

	defer done()

	ctx = clientv3.WithRequireLeader(ctx)

	id, err := m.backend().LocalMemberID(ctx)
	if err != nil {
		return nil, err
	}

	leader, err := m.forfeit(ctx, client, id)
	if err != nil {
		return nil, fmt.Errorf("failed to forfeit leadership: %w", err)
	}

	return &machine.EtcdForfeitLeadershipResponse{Messages: []*machine.EtcdForfeitLeadership{{Member: leader}}}, nil
}

// forfeit is internal/pkg/etcd's (*Client).ForfeitLeadership.
func (m *machineServer) forfeit(ctx context.Context, client *clientv3.Client, id uint64) (string, error) {
	resp, err := client.MemberList(ctx)
	if err != nil {
		return "", fmt.Errorf("failed to list etcd members: %w", err)
	}

	if len(resp.Members) == 1 {
		return "", errors.New("cannot forfeit leadership, only one member")
	}

	var member *etcdserverpb.Member

	for _, mm := range resp.Members {
		if mm.ID == id {
			member = mm

			break
		}
	}

	if member == nil {
		return "", fmt.Errorf("failed to find %q in list of etcd members", fmt.Sprintf("%016x", id))
	}

	for _, ep := range member.GetClientURLs() {
		status, err := client.Status(ctx, ep)
		if err != nil {
			return "", err
		}

		if status.Leader != member.GetID() {
			return "", nil
		}

		for _, other := range resp.Members {
			if other.GetID() == member.GetID() {
				continue
			}

			m.machinedLog("moving leadership from %q to %q", member.GetName(), other.GetName())

			// MoveLeader must reach the leader itself.
			leaderClient, done, err := m.backend().EtcdClient(ctx, true)
			if err != nil {
				return "", err
			}

			_, err = leaderClient.MoveLeader(ctx, other.GetID())
			done()

			if err != nil {
				if errors.Is(err, rpctypes.ErrNotLeader) {
					return "", nil
				}

				return "", err
			}

			return other.GetName(), nil
		}
	}

	return "", nil
}

// EtcdAlarmList lists the local member's view of the cluster's alarms.
func (m *machineServer) EtcdAlarmList(ctx context.Context, _ *emptypb.Empty) (*machine.EtcdAlarmListResponse, error) {
	client, done, err := m.etcdClient(ctx, "etcd alarm list", true)
	if err != nil {
		return nil, err
	}

	defer done()

	resp, err := client.AlarmList(ctx)
	if err != nil {
		return nil, fmt.Errorf("failed to list etcd alarms: %w", err)
	}

	return &machine.EtcdAlarmListResponse{Messages: []*machine.EtcdAlarm{{MemberAlarms: mapAlarms(resp.Alarms)}}}, nil
}

// EtcdAlarmDisarm disarms every alarm; Talos checks the role under the name
// "etcd alarm list" here too.
func (m *machineServer) EtcdAlarmDisarm(ctx context.Context, _ *emptypb.Empty) (*machine.EtcdAlarmDisarmResponse, error) {
	client, done, err := m.etcdClient(ctx, "etcd alarm list", true)
	if err != nil {
		return nil, err
	}

	defer done()

	resp, err := client.AlarmDisarm(ctx, &clientv3.AlarmMember{})
	if err != nil {
		return nil, fmt.Errorf("failed to disarm etcd alarm: %w", err)
	}

	return &machine.EtcdAlarmDisarmResponse{Messages: []*machine.EtcdAlarmDisarm{{MemberAlarms: mapAlarms(resp.Alarms)}}}, nil
}

// EtcdDefragment defragments the local member's backend.
func (m *machineServer) EtcdDefragment(ctx context.Context, _ *emptypb.Empty) (*machine.EtcdDefragmentResponse, error) {
	client, done, err := m.etcdClient(ctx, "etcd defragment", true)
	if err != nil {
		return nil, err
	}

	defer done()

	if _, err = client.Defragment(ctx, m.backend().EtcdClientEndpoint()); err != nil {
		return nil, fmt.Errorf("failed to defragment etcd: %w", err)
	}

	return &machine.EtcdDefragmentResponse{Messages: []*machine.EtcdDefragment{{}}}, nil
}

// mapAlarms is v1alpha1_server.go's mapAlarms.
func mapAlarms(alarms []*etcdserverpb.AlarmMember) []*machine.EtcdMemberAlarm {
	return xslices.Map(alarms, func(a *etcdserverpb.AlarmMember) *machine.EtcdMemberAlarm {
		alarm := machine.EtcdMemberAlarm_NONE

		switch a.Alarm {
		case etcdserverpb.AlarmType_NOSPACE:
			alarm = machine.EtcdMemberAlarm_NOSPACE
		case etcdserverpb.AlarmType_CORRUPT:
			alarm = machine.EtcdMemberAlarm_CORRUPT
		case etcdserverpb.AlarmType_NONE:
		}

		return &machine.EtcdMemberAlarm{MemberId: a.MemberID, Alarm: alarm}
	})
}
