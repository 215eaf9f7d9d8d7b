package sim

import (
	"context"
	"fmt"
)

// RestartService implements talosapi.Backend for the services the API may
// restart or start (system.Services().Stop then Start): kubelet, the one
// service of a v1.12 node that allows it (APIRestartAllowed,
// APIStartAllowed in internal/app/machined/pkg/system/services/kubelet.go).
// The runner keeps its event history, as Talos's does.
func (n *Node) RestartService(_ context.Context, id string) error {
	if id != "kubelet" {
		return fmt.Errorf("service %q cannot be restarted by the simulator", id)
	}

	n.mu.Lock()
	svc, stop, ctx, pid := n.kubelet, n.kubeletStop, n.bootCtx, n.kubeletPID
	n.mu.Unlock()

	if svc == nil || ctx == nil {
		return fmt.Errorf("service %q not defined", id)
	}

	if state, _ := svc.status(); state != stateFinished && state != stateFailed {
		svc.update(stateStopping, "Sending SIGTERM to task kubelet (PID %d, container kubelet)", pid)
	}

	if stop != nil {
		stop()
	}

	n.startKubelet(ctx, svc)

	return nil
}
