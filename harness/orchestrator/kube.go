package orchestrator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/client"

	"github.com/talchaos/talchaos/harness/kubeclient"
	"github.com/talchaos/talchaos/harness/target"
)

// kubeMinPoll is the shortest wall-clock interval between two looks at the
// Kubernetes API.
const kubeMinPoll = 500 * time.Millisecond

// waitKubernetesEndpoints is the field's second loop (FR-000's Terraform):
// take the kubeconfig from a control plane (talosctl kubeconfig,
// talos_cluster_kubeconfig), then poll `kubectl get endpoints kubernetes -n
// default` through the cluster endpoint until it lists every control plane.
// The kubeconfig is asked of from's control planes in turn, one per look,
// until one serves it: the field's scripts name one node, a careful
// bootstrap any that answers. With nodes, it then waits as `talosctl
// health` does for every node's kubelet to have registered its Node (by
// its InternalIP) and for each to be Ready.
func waitKubernetesEndpoints(ctx context.Context, env *Env, from []target.Node, every time.Duration, nodes bool) error {
	cps := env.controlPlanes()

	env.step(fmt.Sprintf("take the kubeconfig from %s, then wait for the kubernetes endpoints to list the %d control planes", names(from), len(cps)))

	talos := make([]*client.Client, len(from))

	defer func() {
		for _, c := range talos {
			if c != nil {
				c.Close() //nolint:errcheck
			}
		}
	}()

	var kube *kubeclient.Client

	defer func() { kube.Close() }()

	// kubeconfig asks from's attempt-th node for the kubeconfig.
	kubeconfig := func(ctx context.Context, attempt int) ([]byte, error) {
		i := (attempt - 1) % len(from)
		node := from[i]

		if talos[i] == nil {
			c, err := env.secure(ctx, node)
			if err != nil {
				return nil, fmt.Errorf("kubeconfig from %s: %w", node.Name, err)
			}

			talos[i] = c
		}

		data, err := talos[i].Kubeconfig(ctx)
		env.call(node.Name, "Kubeconfig", err)

		if err != nil {
			return nil, fmt.Errorf("kubeconfig from %s: %w", node.Name, err)
		}

		return data, nil
	}

	// Kubernetes runs on real time: a look every 83 ms (5 s at 60x) would
	// only load the API servers.
	every = max(every, env.Clock.Talos(kubeMinPoll))

	err := env.wait(ctx, condition{what: fmt.Sprintf("the kubernetes endpoints to list %d control planes", len(cps)), log: true, every: every,
		check: func(ctx context.Context, attempt int) error {
			callCtx, cancel := context.WithTimeout(ctx, env.callTimeout())
			defer cancel()

			if kube == nil {
				data, err := kubeconfig(callCtx, attempt)
				if err != nil {
					return err
				}

				if kube, err = kubeclient.New(data, kubeclient.Options{}); err != nil {
					return stop(fmt.Errorf("kubeconfig: %w", err))
				}
			}

			listed, err := kube.EndpointAddresses(callCtx)
			if err != nil {
				return fmt.Errorf("kubectl get endpoints kubernetes: %w", err)
			}

			var missing []string

			for _, n := range cps {
				if !slices.Contains(listed, n.Address) {
					missing = append(missing, n.Name)
				}
			}

			if len(missing) > 0 {
				return fmt.Errorf("%d/%d endpoints ready: missing [%s]", len(cps)-len(missing), len(cps), strings.Join(missing, " "))
			}

			env.Log.Add("", "orchestrator.wait", fmt.Sprintf("%d/%d endpoints ready", len(cps), len(cps)))

			return nil
		}})
	if err != nil || !nodes {
		return err
	}

	env.step(fmt.Sprintf("wait for the %d nodes to register their Kubernetes Nodes and report Ready (talosctl health's Kubernetes checks)", len(env.Nodes)))

	return env.wait(ctx, condition{what: fmt.Sprintf("%d Kubernetes Nodes to be Ready", len(env.Nodes)), log: true, every: every,
		check: func(ctx context.Context, _ int) error {
			callCtx, cancel := context.WithTimeout(ctx, env.callTimeout())
			defer cancel()

			list, err := kube.Nodes(callCtx)
			if err != nil {
				return fmt.Errorf("kubectl get nodes: %w", err)
			}

			ready := map[string]bool{}
			for _, k := range list {
				ready[k.Address] = k.Ready
			}

			var unregistered, notReady []string

			for _, n := range env.Nodes {
				r, ok := ready[n.Address]

				switch {
				case !ok:
					unregistered = append(unregistered, n.Name)
				case !r:
					notReady = append(notReady, n.Name)
				}
			}

			if len(unregistered)+len(notReady) > 0 {
				return fmt.Errorf("Nodes not registered [%s], not Ready [%s]", strings.Join(unregistered, " "), strings.Join(notReady, " "))
			}

			env.Log.Add("", "orchestrator.wait", fmt.Sprintf("%d/%d Nodes Ready", len(env.Nodes), len(env.Nodes)))

			return nil
		}})
}

// names lists the nodes' names.
func names(nodes []target.Node) string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.Name
	}

	return strings.Join(out, ", ")
}
