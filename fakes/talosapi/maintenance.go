package talosapi

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// maintenanceServer is internal/app/maintenance/server.go: the API of a node
// that has no config yet. Everything it does not implement answers
// Unimplemented "method X not implemented" (v1.12) from the embedded type.
type maintenanceServer struct {
	machine.UnimplementedMachineServiceServer

	s *Server
}

// ApplyConfiguration validates the config with the machinery and hands it to the
// node, which leaves maintenance shortly after.
func (m *maintenanceServer) ApplyConfiguration(ctx context.Context, in *machine.ApplyConfigurationRequest) (*machine.ApplyConfigurationResponse, error) {
	switch in.Mode { //nolint:exhaustive
	case machine.ApplyConfigurationRequest_TRY, machine.ApplyConfigurationRequest_REBOOT, machine.ApplyConfigurationRequest_AUTO:
	default:
		return nil, status.Errorf(codes.Unimplemented, "apply configuration --mode='%s' is not supported in maintenance mode",
			strings.ReplaceAll(strings.ToLower(in.Mode.String()), "_", "-"))
	}

	cfg, err := configloader.NewFromBytes(in.GetData())
	if err != nil {
		return nil, fmt.Errorf("failed to parse config: %w", err)
	}

	mode := validationMode{installed: false}

	warnings, err := cfg.Validate(mode)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "configuration validation failed: %s", err)
	}

	warningsRuntime, err := cfg.RuntimeValidate(ctx, m.s.opts.Backend.Resources(), mode)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "runtime configuration validation failed: %s", err)
	}

	reply := &machine.ApplyConfigurationResponse{
		Messages: []*machine.ApplyConfiguration{{Warnings: slices.Concat(warnings, warningsRuntime)}},
	}

	if in.DryRun {
		reply.Messages[0].ModeDetails = "Dry run summary:\nNode is running in maintenance mode and does not have a config yet."

		return reply, nil
	}

	m.s.opts.Backend.AcceptConfig(cfg)

	return reply, nil
}

// Version needs the admin role, which no maintenance client has.
func (m *maintenanceServer) Version(context.Context, *emptypb.Empty) (*machine.VersionResponse, error) {
	return nil, notInMaintenance
}

// notInMaintenance is maintenance's assertAdminRole failing: the insecure
// client never has the admin role (internal/app/maintenance/server.go).
var notInMaintenance = status.Error(codes.Unimplemented, "API is not implemented in maintenance mode")

// Upgrade needs the admin role.
func (m *maintenanceServer) Upgrade(context.Context, *machine.UpgradeRequest) (*machine.UpgradeResponse, error) {
	return nil, notInMaintenance
}

// Reset needs the admin role.
func (m *maintenanceServer) Reset(context.Context, *machine.ResetRequest) (*machine.ResetResponse, error) {
	return nil, notInMaintenance
}

// MetaWrite needs the admin role.
func (m *maintenanceServer) MetaWrite(context.Context, *machine.MetaWriteRequest) (*machine.MetaWriteResponse, error) {
	return nil, notInMaintenance
}

// MetaDelete needs the admin role.
func (m *maintenanceServer) MetaDelete(context.Context, *machine.MetaDeleteRequest) (*machine.MetaDeleteResponse, error) {
	return nil, notInMaintenance
}

// validationMode is the runtime mode configs are validated in: a metal node booted
// from install media, so install instructions are required until it is installed
// (which is how field report FR-001's SecureBoot conflict is found). Version still reports
// platform mode "container" so health checks skip hardware sizes.
type validationMode struct{ installed bool }

func (validationMode) String() string          { return "metal" }
func (v validationMode) RequiresInstall() bool { return !v.installed }
func (validationMode) InContainer() bool       { return false }
