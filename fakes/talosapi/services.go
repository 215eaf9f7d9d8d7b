package talosapi

import (
	"context"
	"fmt"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
)

// Service control as machined serves it (v1alpha1_server.go ServiceStart,
// ServiceStop, ServiceRestart over internal/app/machined/pkg/system/system.go
// APIStart, APIStop, APIRestart): a service that is not defined is an error;
// starting a running one or stopping a stopped one does nothing; otherwise
// the service must allow it. On v1.12 only kubelet does, and only start and
// restart (services/kubelet.go); etcd allows none of them.

// apiStartable and apiRestartable are the services whose Talos type allows
// the operation from the API.
var (
	apiStartable   = map[string]bool{"kubelet": true}
	apiRestartable = map[string]bool{"kubelet": true}
)

// service finds a service and whether it runs (its runner has not ended).
func (m *machineServer) service(id string) (running bool, err error) {
	for _, s := range m.backend().Services() {
		if s.GetId() == id {
			state := s.GetState()

			return state != "Finished" && state != "Failed", nil
		}
	}

	return false, fmt.Errorf("service %q not defined", id)
}

func (m *machineServer) apiStart(ctx context.Context, id string) error {
	running, err := m.service(id)
	if err != nil || running {
		return err
	}

	if !apiStartable[id] {
		return fmt.Errorf("service %q doesn't support start operation via API", id)
	}

	return m.backend().RestartService(ctx, id)
}

// ServiceStart starts a stopped service that allows it.
func (m *machineServer) ServiceStart(ctx context.Context, in *machine.ServiceStartRequest) (*machine.ServiceStartResponse, error) {
	if err := m.apiStart(ctx, in.GetId()); err != nil {
		return &machine.ServiceStartResponse{}, err
	}

	return &machine.ServiceStartResponse{Messages: []*machine.ServiceStart{{Resp: fmt.Sprintf("Service %q started", in.GetId())}}}, nil
}

// ServiceStop stops a running service that allows it: none on v1.12.
func (m *machineServer) ServiceStop(_ context.Context, in *machine.ServiceStopRequest) (*machine.ServiceStopResponse, error) {
	running, err := m.service(in.GetId())
	if err != nil {
		return &machine.ServiceStopResponse{}, err
	}

	if running {
		return &machine.ServiceStopResponse{}, fmt.Errorf("service %q doesn't support stop operation via API", in.GetId())
	}

	return &machine.ServiceStopResponse{Messages: []*machine.ServiceStop{{Resp: fmt.Sprintf("Service %q stopped", in.GetId())}}}, nil
}

// ServiceRestart restarts a running service that allows it, or starts a
// stopped one.
func (m *machineServer) ServiceRestart(ctx context.Context, in *machine.ServiceRestartRequest) (*machine.ServiceRestartResponse, error) {
	id := in.GetId()

	running, err := m.service(id)
	if err != nil {
		return &machine.ServiceRestartResponse{}, err
	}

	switch {
	case !running:
		err = m.apiStart(ctx, id)
	case apiRestartable[id]:
		err = m.backend().RestartService(ctx, id)
	default:
		err = fmt.Errorf("service %q doesn't support restart operation via API", id)
	}

	if err != nil {
		return &machine.ServiceRestartResponse{}, err
	}

	return &machine.ServiceRestartResponse{Messages: []*machine.ServiceRestart{{Resp: fmt.Sprintf("Service %q restarted", id)}}}, nil
}
