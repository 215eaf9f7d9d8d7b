package talosapi

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distribution/reference"
	"github.com/google/uuid"
	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Constants of the upgrade's checks (v1.12.6): the mutex's key
// (constants.EtcdTalosEtcdUpgradeMutex, "talos:v1" + ":etcdUpgradeMutex"),
// its session's lease (MinimumEtcdUpgradeLeaseLockSeconds,
// v1alpha1_server.go) and the quorum check's timeout (etcd.QuorumCheckTimeout).
const (
	upgradeMutexKey    = "talos:v1:etcdUpgradeMutex"
	UpgradeMutexTTL    = 60 * time.Second
	quorumCheckTimeout = 15 * time.Second
)

// UpgradeMutexTTLFloor is the least the lease's TTL is scaled to: etcd runs
// at real speed, and a lease of a second would lapse on a loaded machine.
// The TTL is Talos time like every other Talos timer (a mutex an interrupted
// upgrade left behind blocks the next upgrade for a minute of the cluster's
// time, not for an hour of it at 60x); a target reports the floor.
const UpgradeMutexTTLFloor = 3 * time.Second

// upgradeMutexTTLSeconds is the lease's TTL in whole wall seconds, as etcd
// takes it.
func (s *Server) upgradeMutexTTLSeconds() int {
	return int(max(s.wall(UpgradeMutexTTL), UpgradeMutexTTLFloor).Round(time.Second) / time.Second)
}

// Upgrade is machined's Upgrade on a metal node (v1alpha1_server.go,
// v1.12.6): the installer image is validated, a control plane (unless
// forced) takes the cluster's upgrade mutex in etcd and checks that every
// member is started and healthy, and the upgrade sequence runs after the
// reply. The image is named, never pulled: its reference must parse as
// containerd's does (image.Pull's reference.ParseDockerRef), and the backend
// says whether the registry has it (PullInstaller: the image-missing fault).
// A staged upgrade is refused: the sim has no staged-upgrade sequence.
func (m *machineServer) Upgrade(ctx context.Context, in *machine.UpgradeRequest) (*machine.UpgradeResponse, error) {
	actorID := uuid.New().String()

	m.machinedLog("upgrade request received: staged %v, force %v, reboot mode %v", in.GetStage(), in.GetForce(), in.GetRebootMode().String())

	if in.GetStage() {
		return nil, status.Error(codes.Unimplemented, "staged upgrades are not simulated")
	}

	m.machinedLog("validating %q", in.GetImage())

	named, err := reference.ParseDockerRef(in.GetImage())
	if err != nil {
		return nil, fmt.Errorf("error validating installer image %q: failed to parse image reference %q: %w", in.GetImage(), in.GetImage(), err)
	}

	if err := m.backend().PullInstaller(ctx, named.String()); err != nil {
		return nil, fmt.Errorf("error validating installer image %q: %w", in.GetImage(), err)
	}

	if m.isControlPlane() && !in.GetForce() {
		client, done, err := m.backend().EtcdClient(ctx, false)
		if err != nil {
			return nil, fmt.Errorf("failed to create etcd client: %w", err)
		}

		defer done()

		unlock, err := m.tryLockUpgradeMutex(ctx, client)
		if err != nil {
			return nil, fmt.Errorf("failed to acquire upgrade mutex: %w", err)
		}

		// The mutex protects the checks only (v1alpha1_server.go).
		defer unlock()

		if err = m.validateForUpgrade(ctx, client); err != nil {
			return nil, fmt.Errorf("error validating etcd for upgrade: %w", err)
		}
	}

	if err := m.backend().Upgrade(in, actorID); err != nil {
		return nil, err
	}

	return &machine.UpgradeResponse{Messages: []*machine.Upgrade{{Ack: "Upgrade request received", ActorId: actorID}}}, nil
}

// tryLockUpgradeMutex is v1alpha1_server.go's: a session with a 60 s lease
// (Talos time, UpgradeMutexTTLFloor) and a TryLock, so a second control
// plane's upgrade in the same window is refused ("mutex: Locked by another
// session") instead of waiting.
func (m *machineServer) tryLockUpgradeMutex(ctx context.Context, client *clientv3.Client) (func(), error) {
	sess, err := concurrency.NewSession(client, concurrency.WithContext(ctx), concurrency.WithTTL(m.s.upgradeMutexTTLSeconds()))
	if err != nil {
		return nil, fmt.Errorf("error establishing etcd concurrency session: %w", err)
	}

	mu := concurrency.NewMutex(sess, upgradeMutexKey)

	if err = mu.TryLock(ctx); err != nil {
		sess.Close() //nolint:errcheck

		return nil, fmt.Errorf("error trying to lock etcd upgrade mutex: %w", err)
	}

	m.machinedLog("etcd upgrade mutex locked with session ID %08x", sess.Lease())

	return func() {
		unlockCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()

		if err := mu.Unlock(unlockCtx); err != nil {
			m.machinedLog("error unlocking etcd upgrade mutex: %v", err)
		}

		if err := sess.Close(); err != nil {
			m.machinedLog("error closing etcd upgrade mutex session: %v", err)
		}

		m.machinedLog("etcd upgrade mutex unlocked and session closed")
	}, nil
}

// validateForUpgrade is internal/pkg/etcd's Client.ValidateForUpgrade for a
// control plane: two members cannot lose one, every member must have started
// (a learner that never ran has no name) and answer a read through
// consensus at its own client URLs within the quorum check's timeout.
func (m *machineServer) validateForUpgrade(ctx context.Context, client *clientv3.Client) error {
	resp, err := client.MemberList(ctx)
	if err != nil {
		return err
	}

	if len(resp.Members) == 2 {
		return fmt.Errorf("etcd member count(%d) is insufficient to maintain quorum if upgrade commences", len(resp.Members))
	}

	for _, member := range resp.Members {
		if len(member.Name) == 0 {
			return fmt.Errorf("etcd member %016x is not started, all members must be running to perform an upgrade", member.ID)
		}

		if err = m.validateMemberHealth(ctx, member.GetClientURLs()); err != nil {
			return fmt.Errorf("etcd member %016x is not healthy; all members must be healthy to perform an upgrade: %w", member.ID, err)
		}
	}

	return nil
}

// validateMemberHealth is etcd.go's: a client to the member's URLs, and
// ValidateQuorum's Get of "health" (permission denied counts as a quorum:
// the refusal went through consensus).
func (m *machineServer) validateMemberHealth(ctx context.Context, urls []string) error {
	c, err := m.backend().EtcdClientTo(ctx, urls)
	if err != nil {
		return fmt.Errorf("failed to create client to member: %w", err)
	}

	defer c.Close() //nolint:errcheck

	checkCtx, cancel := context.WithTimeout(ctx, m.s.wall(quorumCheckTimeout))
	defer cancel()

	if _, err = c.Get(checkCtx, "health"); err != nil && !errors.Is(err, rpctypes.ErrPermissionDenied) {
		return err
	}

	return nil
}

// UpgradeSequenceLocked is the event a sequence that cannot take the
// sequencer's lock publishes (v1alpha1_controller.go Run), for Backend.Upgrade
// implementations.
func UpgradeSequenceLocked() *machine.SequenceEvent {
	return &machine.SequenceEvent{
		Sequence: "upgrade",
		Action:   machine.SequenceEvent_NOOP,
		Error:    &common.Error{Code: common.Code_LOCKED, Message: "sequence not started: locked"},
	}
}
