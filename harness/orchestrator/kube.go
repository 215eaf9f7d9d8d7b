package orchestrator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/siderolabs/talos/pkg/machinery/client"
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
// bootstrap any that answers.
func waitKubernetesEndpoints(ctx context.Context, env *Env, from []target.Node, every time.Duration) error {
	cps := env.controlPlanes()

	env.step(fmt.Sprintf("take the kubeconfig from %s, then wait for the kubernetes endpoints to list the %d control planes", names(from), len(cps)))

	clients := make([]*client.Client, len(from))

	defer func() {
		for _, c := range clients {
			if c != nil {
				c.Close() //nolint:errcheck
			}
		}
	}()

	var kube *kubernetes.Clientset

	closeIdle := func() {}
	defer func() { closeIdle() }()

	// Kubernetes runs on real time: a look every 83 ms (5 s at 60x) would
	// only load the API servers.
	every = max(every, env.Clock.Talos(kubeMinPoll))

	return env.wait(ctx, condition{what: fmt.Sprintf("the kubernetes endpoints to list %d control planes", len(cps)), log: true, every: every,
		check: func(ctx context.Context, attempt int) error {
			callCtx, cancel := context.WithTimeout(ctx, max(env.d(30*time.Second), 2*time.Second))
			defer cancel()

			if kube == nil {
				i := (attempt - 1) % len(from)
				node := from[i]

				if clients[i] == nil {
					c, err := env.secure(ctx, node)
					if err != nil {
						return fmt.Errorf("kubeconfig from %s: %w", node.Name, err)
					}

					clients[i] = c
				}

				data, err := clients[i].Kubeconfig(callCtx)
				env.call(node.Name, "Kubeconfig", err)

				if err != nil {
					return fmt.Errorf("kubeconfig from %s: %w", node.Name, err)
				}

				cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
				if err != nil {
					return stop(fmt.Errorf("kubeconfig from %s: %w", node.Name, err))
				}

				cfg.WarningHandler = rest.NoWarnings{}

				hc, err := rest.HTTPClientFor(cfg)
				if err != nil {
					return stop(fmt.Errorf("kubeconfig: %w", err))
				}

				closeIdle = hc.CloseIdleConnections

				if kube, err = kubernetes.NewForConfigAndClient(cfg, hc); err != nil {
					return stop(fmt.Errorf("kubeconfig: %w", err))
				}
			}

			ep, err := kube.CoreV1().Endpoints("default").Get(callCtx, "kubernetes", metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("kubectl get endpoints kubernetes: %w", err)
			}

			var listed []string

			for _, s := range ep.Subsets {
				for _, a := range s.Addresses {
					listed = append(listed, a.IP)
				}
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
}

// names lists the nodes' names.
func names(nodes []target.Node) string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.Name
	}

	return strings.Join(out, ", ")
}
