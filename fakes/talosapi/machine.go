package talosapi

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/siderolabs/gen/xslices"
	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/siderolabs/talos/pkg/machinery/constants"
	timeres "github.com/siderolabs/talos/pkg/machinery/resources/time"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// machineServer is machined's MachineService (v1alpha1_server.go) for a node that
// has a config, behind apid's mutual TLS.
type machineServer struct {
	machine.UnimplementedMachineServiceServer

	s *Server
}

func (m *machineServer) backend() Backend { return m.s.opts.Backend }

func (m *machineServer) machinedLog(format string, args ...any) {
	if l := m.backend().Log("machined"); l != nil {
		l.Printf(format, args...)
	}
}

func (m *machineServer) isControlPlane() bool {
	cfg := m.backend().Config()

	return cfg != nil && cfg.Machine().Type().IsControlPlane()
}

func (m *machineServer) checkControlplane(apiName string) error {
	if m.isControlPlane() {
		return nil
	}

	return status.Errorf(codes.Unimplemented, "%s is only available on control plane nodes", apiName)
}

// ApplyConfiguration on a configured node, as v1alpha1_server.go serves it:
// the mode decided by what the change touches (canApplyImmediate).
func (m *machineServer) ApplyConfiguration(ctx context.Context, in *machine.ApplyConfigurationRequest) (*machine.ApplyConfigurationResponse, error) {
	// One apply at a time from v1.13.9 on (v1alpha1_server.go:184 there; not
	// in v1.12.6 or v1.13.0): the v1.13 profile models the line's latest patch.
	if m.s.opts.Profile.AtLeast(V113) {
		if !m.s.applyMu.TryLock() {
			return nil, status.Error(codes.FailedPrecondition, "another apply configuration is already in progress")
		}
		defer m.s.applyMu.Unlock()
	}

	cfg, err := configloader.NewFromBytes(in.GetData())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}

	if cfg.RawV1Alpha1() == nil {
		return nil, status.Error(codes.InvalidArgument, "the applied machine configuration doesn't contain v1alpha1 config, did you mean to patch the machine config instead?")
	}

	// v1.14 dropped the REBOOT mode on configured nodes.
	if in.Mode == machine.ApplyConfigurationRequest_REBOOT && m.s.opts.Profile.AtLeast(V114) { //nolint:staticcheck // the mode is what is being refused
		return nil, status.Error(codes.Unimplemented, "the REBOOT mode is not supported, please use AUTO or NO_REBOOT modes instead")
	}

	mode := validationMode{installed: true}

	warnings, err := cfg.Validate(mode)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}

	warningsRuntime, err := cfg.RuntimeValidate(ctx, m.backend().Resources(), mode)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}

	warnings = slices.Concat(warnings, warningsRuntime)
	modeName := in.Mode.String()
	details := "Applied configuration with a reboot"
	modeErr := ""

	// v1alpha1_server.go ApplyConfiguration: TRY and NO_REBOOT only for a
	// change machined applies live, AUTO picks NO_REBOOT or REBOOT and says why.
	switch in.Mode { //nolint:exhaustive
	case machine.ApplyConfigurationRequest_TRY, machine.ApplyConfigurationRequest_NO_REBOOT:
		if err := canApplyImmediate(m.backend().Config(), cfg); err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}

		details = "Applied configuration without a reboot"
	case machine.ApplyConfigurationRequest_STAGED:
		details = "Staged configuration to be applied after the next reboot"
	case machine.ApplyConfigurationRequest_AUTO:
		if err := canApplyImmediate(m.backend().Config(), cfg); err != nil {
			in.Mode = machine.ApplyConfigurationRequest_REBOOT //nolint:staticcheck // what AUTO becomes
			modeErr = ": " + err.Error()
		} else {
			in.Mode = machine.ApplyConfigurationRequest_NO_REBOOT
			details = "Applied configuration without a reboot"
		}

		modeName = fmt.Sprintf("%s(%s)", modeName, in.Mode)
	}

	if in.DryRun {
		diff, err := configDiff(m.backend().Config(), cfg)
		if err != nil {
			return nil, fmt.Errorf("failed to generate diff: %w", err)
		}

		return &machine.ApplyConfigurationResponse{Messages: []*machine.ApplyConfiguration{{
			Mode:        in.Mode,
			ModeDetails: fmt.Sprintf("Dry run summary:\n%s (skipped in dry-run).\n%s", details, diff),
		}}}, nil
	}

	m.machinedLog("apply config request: mode %s", strings.ToLower(modeName))

	if in.Mode == machine.ApplyConfigurationRequest_TRY {
		timeout := constants.ConfigTryTimeout
		if in.TryModeTimeout != nil {
			timeout = in.TryModeTimeout.AsDuration()
		}

		details += fmt.Sprintf("\nThe config is applied in 'try' mode and will be automatically reverted back in %s", timeout.String())

		if err := m.backend().TryConfig(cfg, timeout); err != nil {
			return nil, err
		}
	} else if err := m.backend().ApplyConfig(ctx, cfg, in.Mode); err != nil {
		return nil, err
	}

	return &machine.ApplyConfigurationResponse{Messages: []*machine.ApplyConfiguration{{
		Mode:        in.Mode,
		Warnings:    warnings,
		ModeDetails: details + modeErr,
	}}}, nil
}

// bootstrapTimeSyncWait is how long Bootstrap waits for the time to be in
// sync (Talos time).
const bootstrapTimeSyncWait = 5 * time.Second

// Bootstrap checks, in Talos's order (v1alpha1_server.go Bootstrap, v1.12.6),
// then starts a new single-member cluster. It looks only at the local data
// directory: a second node still in its join loop bootstraps a second
// cluster (talos #5500).
func (m *machineServer) Bootstrap(ctx context.Context, _ *machine.BootstrapRequest) (*machine.BootstrapResponse, error) {
	m.machinedLog("bootstrap request received")

	if !m.backend().BootstrapAllowed() {
		return nil, status.Error(codes.FailedPrecondition, "bootstrap is not available yet")
	}

	if !m.isControlPlane() {
		if m.s.opts.Profile.AtLeast(V114) {
			return nil, status.Error(codes.Unimplemented, "bootstrap is only available on control plane nodes")
		}

		return nil, status.Error(codes.FailedPrecondition, "bootstrap can only be performed on a control plane node")
	}

	// Talos waits 5 s for the time to be in sync (the TimeStatus resource,
	// timeresource.NewSyncCondition) before it looks at the data directory.
	timeCtx, timeCancel := context.WithTimeout(ctx, m.s.wall(bootstrapTimeSyncWait))
	defer timeCancel()

	if err := timeres.NewSyncCondition(m.backend().Resources()).Wait(timeCtx); err != nil {
		return nil, status.Error(codes.FailedPrecondition, "time is not in sync yet")
	}

	if !m.backend().EtcdDataDirEmpty() {
		return nil, status.Error(codes.AlreadyExists, "etcd data directory is not empty")
	}

	if err := m.backend().BootstrapEtcd(ctx); err != nil {
		return nil, err
	}

	return &machine.BootstrapResponse{Messages: []*machine.Bootstrap{{}}}, nil
}

// EtcdMemberList asks the discovered control-plane endpoints (or the local member
// with QueryLocal) and passes etcd's errors through unchanged, as Talos does.
func (m *machineServer) EtcdMemberList(ctx context.Context, in *machine.EtcdMemberListRequest) (*machine.EtcdMemberListResponse, error) {
	if err := m.checkControlplane("member list"); err != nil {
		return nil, err
	}

	client, done, err := m.backend().EtcdClient(ctx, in.QueryLocal)
	if err != nil {
		return nil, err
	}

	defer done()

	resp, err := client.MemberList(clientv3.WithRequireLeader(ctx))
	if err != nil {
		return nil, err
	}

	return &machine.EtcdMemberListResponse{Messages: []*machine.EtcdMembers{{
		LegacyMembers: xslices.Map(resp.Members, (*etcdserverpb.Member).GetName),
		Members: xslices.Map(resp.Members, func(member *etcdserverpb.Member) *machine.EtcdMember {
			return &machine.EtcdMember{
				Id:         member.GetID(),
				Hostname:   member.GetName(),
				PeerUrls:   member.GetPeerURLs(),
				ClientUrls: member.GetClientURLs(),
				IsLearner:  member.GetIsLearner(),
			}
		}),
	}}}, nil
}

// EtcdRemoveMemberByID removes a member through the discovered endpoints.
func (m *machineServer) EtcdRemoveMemberByID(ctx context.Context, in *machine.EtcdRemoveMemberByIDRequest) (*machine.EtcdRemoveMemberByIDResponse, error) {
	client, done, err := m.etcdClient(ctx, "etcd remove member", false)
	if err != nil {
		return nil, err
	}

	defer done()

	if _, err = client.MemberRemove(clientv3.WithRequireLeader(ctx), in.MemberId); err != nil {
		err = fmt.Errorf("failed to remove member %d: %w", in.MemberId, err)

		if errors.Is(err, rpctypes.ErrMemberNotFound) {
			return nil, status.Error(codes.NotFound, err.Error())
		}

		return nil, fmt.Errorf("failed to remove member: %w", err)
	}

	return &machine.EtcdRemoveMemberByIDResponse{Messages: []*machine.EtcdRemoveMemberByID{{}}}, nil
}

// EtcdStatus queries the local member; it works on a learner.
//
// Talos calls client.Status(ctx, "localhost:2379") on its local client, and
// clientv3's Status dials a connection of its own to the endpoint it is
// given, closed after the call: a TLS handshake on both sides (and etcd
// loading its key pair again) per status. The local client has that one
// endpoint, so the fake asks over the client's own connection (clientv3's
// maintenance client over a given connection, its retries and call options
// as Status has them): the same member answers the same request, and the
// observer's ten looks a second at every control plane no longer cost a
// handshake each (they were about two fifths of the connections a happy
// path's etcd members took, docs/measurements.md "Stop 39").
func (m *machineServer) EtcdStatus(ctx context.Context, _ *emptypb.Empty) (*machine.EtcdStatusResponse, error) {
	client, done, err := m.etcdClient(ctx, "etcd status", true)
	if err != nil {
		return nil, err
	}

	defer done()

	own := clientv3.NewMaintenanceFromMaintenanceClient(clientv3.RetryMaintenanceClient(client, client.ActiveConnection()), client)

	resp, err := own.Status(ctx, m.backend().EtcdClientEndpoint())
	if err != nil {
		return nil, fmt.Errorf("failed to query etcd status: %w", err)
	}

	return &machine.EtcdStatusResponse{Messages: []*machine.EtcdStatus{{MemberStatus: &machine.EtcdMemberStatus{
		MemberId:         resp.Header.MemberId,
		ProtocolVersion:  resp.Version,
		DbSize:           resp.DbSize,
		DbSizeInUse:      resp.DbSizeInUse,
		Leader:           resp.Leader,
		RaftIndex:        resp.RaftIndex,
		RaftTerm:         resp.RaftTerm,
		RaftAppliedIndex: resp.RaftAppliedIndex,
		StorageVersion:   resp.StorageVersion,
		Errors:           resp.Errors,
		IsLearner:        resp.IsLearner,
	}}}}, nil
}

// ServiceList returns the registered services and their state.
func (m *machineServer) ServiceList(context.Context, *emptypb.Empty) (*machine.ServiceListResponse, error) {
	return &machine.ServiceListResponse{Messages: []*machine.ServiceList{{Services: m.backend().Services()}}}, nil
}

// Version reports the profile's Talos version (or the one an upgrade
// installed) and platform mode "container".
func (m *machineServer) Version(context.Context, *emptypb.Empty) (*machine.VersionResponse, error) {
	tag := m.s.opts.Version
	if t := m.backend().UpgradedTo(); t != "" {
		tag = t
	}

	return &machine.VersionResponse{Messages: []*machine.Version{{
		Version: &machine.VersionInfo{
			Tag:       tag,
			Sha:       "talchaos",
			GoVersion: runtime.Version(),
			Os:        runtime.GOOS,
			Arch:      runtime.GOARCH,
		},
		Platform: &machine.PlatformInfo{Name: "container", Mode: "container"},
		Features: &machine.FeaturesInfo{Rbac: true},
	}}}, nil
}

// Reboot is asynchronous: the reply goes out, then the node goes down.
func (m *machineServer) Reboot(context.Context, *machine.RebootRequest) (*machine.RebootResponse, error) {
	actorID := uuid.New().String()
	m.machinedLog("reboot via API received. actor id: %s", actorID)

	if err := m.backend().Reboot(actorID); err != nil {
		return nil, err
	}

	return &machine.RebootResponse{Messages: []*machine.Reboot{{ActorId: actorID}}}, nil
}

// Shutdown powers the node off after the reply (the shutdown sequence: services
// stopped, etcd with SIGTERM, no leaving the cluster), as on metal, the kind of
// node the sim models for reboots.
func (m *machineServer) Shutdown(_ context.Context, in *machine.ShutdownRequest) (*machine.ShutdownResponse, error) {
	actorID := uuid.New().String()
	m.machinedLog("shutdown via API received. actor id: %s", actorID)

	if err := m.backend().Shutdown(in.GetForce(), actorID); err != nil {
		return nil, err
	}

	return &machine.ShutdownResponse{Messages: []*machine.Shutdown{{ActorId: actorID}}}, nil
}

// Reset is asynchronous; graceful=false leaves the etcd member behind.
func (m *machineServer) Reset(_ context.Context, in *machine.ResetRequest) (*machine.ResetResponse, error) {
	actorID := uuid.New().String()
	m.machinedLog("reset request received. actorID: %s", actorID)

	if err := m.backend().Reset(in, actorID); err != nil {
		return nil, err
	}

	return &machine.ResetResponse{Messages: []*machine.Reset{{ActorId: actorID}}}, nil
}

// Logs streams a service log (namespace "system" or the kubelet), as machined's
// circular buffers do.
func (m *machineServer) Logs(req *machine.LogsRequest, srv machine.MachineService_LogsServer) error {
	if req.Namespace != constants.SystemContainerdNamespace && req.Id != "kubelet" {
		return status.Errorf(codes.Unimplemented, "logs of namespace %q are not simulated", req.Namespace)
	}

	buf := m.backend().Log(req.Id)
	if buf == nil {
		return nil // machined creates an empty log for an unknown id
	}

	return buf.Stream(srv.Context(), int(req.TailLines), req.Follow, func(line string) error {
		return srv.Send(&common.Data{Bytes: []byte(line + "\n")})
	})
}

// LogsContainers lists the registered logs.
func (m *machineServer) LogsContainers(context.Context, *emptypb.Empty) (*machine.LogsContainersResponse, error) {
	return &machine.LogsContainersResponse{Messages: []*machine.LogsContainer{{Ids: []string{"etcd", "machined"}}}}, nil
}
