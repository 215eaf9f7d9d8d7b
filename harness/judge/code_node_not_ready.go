package judge

import (
	"fmt"
	"strings"
	"time"

	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/result"
)

var _ = register(Code{
	Name: "node-not-ready",
	Doc: "a node's Kubernetes Node is NotReady or was never registered at the end (`kubectl get nodes`): " +
		"its kubelet stopped posting status (the node is down, isolated or rebooting) or never reached an API server",
	Diagnose: nodeNotReady,
	Remedy: func(r RemedyFor) []string {
		return []string{
			"kubectl get nodes -o wide   # STATUS NotReady: its kubelet's lease and status are older than the grace period",
			fmt.Sprintf("kubectl describe node %s   # Conditions: the Ready condition's reason and when it last changed", kubeNodeName(r)),
			fmt.Sprintf("talosctl -n %s service kubelet   # Running and healthy?", r.Addr),
			fmt.Sprintf("talosctl -n %s logs kubelet   # why it cannot reach the API servers (its KubePrism, localhost:7445)", r.Addr),
		}
	},
})

// kubeletRegisterGrace is how long a running kubelet may take to register its
// Node before its absence is diagnosed: its node lease's duration (40 s,
// real time, as Kubernetes runs).
const kubeletRegisterGrace = 40 * time.Second

// nodeNotReady: in a run with Kubernetes whose API servers could list the
// Nodes at the end, a node that was configured (it runs a kubelet) whose
// Node is missing or not Ready. A node in maintenance or refusing the
// cluster's PKI never ran a kubelet: other codes say why.
func nodeNotReady(ev *Evidence) []result.Diagnosis {
	nodes, listed := ev.Final.KubernetesNodes()
	if !listed {
		return nil
	}

	var out []result.Diagnosis

	for _, n := range ev.Final.Ordered() {
		if n.Mode != history.ModeConfigured && n.Mode != history.ModeDown {
			continue
		}

		k, ok := history.KubeNodeOf(nodes, n)

		switch {
		case ok && k.Ready:
			continue
		case ok:
			out = append(out, diag("node-not-ready", n.Name,
				fmt.Sprintf("%s's Kubernetes Node %s is NotReady", n.Name, k.Name), kubeNodeEvidence(n, &k), ev.Now))
		case n.Mode == history.ModeConfigured && n.Kubelet != nil && !n.Kubelet.Started.IsZero() &&
			ev.Final.Wall.Sub(n.Kubelet.Started) < kubeletRegisterGrace:
			// Its kubelet has run for less than a lease: too soon to say it
			// never registers (it may be retrying an API server that is not
			// ready yet).
		case n.Mode == history.ModeConfigured:
			out = append(out, diag("node-not-ready", n.Name,
				fmt.Sprintf("%s has no Kubernetes Node: its kubelet never registered", n.Name), kubeNodeEvidence(n, nil), ev.Now))
		}
	}

	return out
}

// kubeNodeEvidence is the Node's Ready condition and the node's kubelet as
// its Talos API reports it.
func kubeNodeEvidence(n *history.NodeObservation, k *history.KubeNode) string {
	var lines []string

	if k != nil {
		cond := "Ready condition: " + fallback(k.Reason, "no reason")
		if k.Message != "" {
			cond += ": " + k.Message
		}

		lines = append(lines, cond)
	}

	switch {
	case n.Mode == history.ModeDown:
		lines = append(lines, "its Talos API does not answer: "+fallback(n.APIError, "down"))
	case n.Kubelet != nil:
		health := "healthy"
		if !n.Kubelet.Healthy {
			health = "not healthy"
		}

		lines = append(lines, fmt.Sprintf("service kubelet: %s (%s), %s", n.Kubelet.State, n.Kubelet.Message, health))
	default:
		lines = append(lines, "service kubelet: not running")
	}

	return strings.Join(lines, "\n")
}

func fallback(s, otherwise string) string {
	if s == "" {
		return otherwise
	}

	return s
}

// kubeNodeName is the diagnosed node's Kubernetes Node name: as the API
// servers listed it, else the node's own.
func kubeNodeName(r RemedyFor) string {
	if r.Final != nil {
		if nodes, ok := r.Final.KubernetesNodes(); ok {
			if n, ok := r.Final.Nodes[r.Diagnosis.Node]; ok {
				if k, ok := history.KubeNodeOf(nodes, n); ok {
					return k.Name
				}
			}
		}
	}

	return r.Diagnosis.Node
}
