package judge

import (
	"fmt"
	"slices"
	"strings"

	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/result"
	"github.com/talchaos/talchaos/harness/target"
)

var _ = register(Code{
	Name: "apiserver-not-in-service",
	Doc: "a configured control plane's Kubernetes API server is missing from the kubernetes endpoints " +
		"(FR-000's \"1/3 endpoints ready\"): it talks only to its own etcd member, which is a learner, not started or failed",
	Diagnose: apiserverNotInService,
	Remedy: func(r RemedyFor) []string {
		return []string{
			"kubectl get endpoints kubernetes -n default   # the addresses the API servers serve from",
			fmt.Sprintf("talosctl -n %s etcd status   # LEARNER true: its API server cannot serve until the member is promoted", r.Addr),
			fmt.Sprintf("talosctl -n %s service etcd   # its API server needs its own member Running and healthy", r.Addr),
			fmt.Sprintf("talosctl -n %s containers -k   # then talosctl -n %s logs -k <the kube-apiserver container's ID>: why it is not ready", r.Addr, r.Addr),
		}
	},
})

// apiserverNotInService: in a run with Kubernetes, a configured control plane
// whose address the kubernetes endpoints do not list at the end. Each API
// server reaches etcd through its own node's member only
// (--etcd-servers=https://127.0.0.1:2379, Talos's control_plane.go), so the
// evidence is that member's state as the node's Talos API reports it.
func apiserverNotInService(ev *Evidence) []result.Diagnosis {
	if !ev.Final.Kubernetes() {
		return nil
	}

	endpoints, listed := ev.Final.KubernetesEndpoints()
	main := ev.Final.Main()

	var cps int

	for _, n := range ev.Final.Ordered() {
		if n.Role == target.ControlPlane {
			cps++
		}
	}

	var out []result.Diagnosis

	for _, n := range ev.Final.Ordered() {
		// A crash-looping API server is apiserver-crash-loop's: its etcd
		// member is a healthy voter, which this code's remedy would
		// send the operator to look at.
		if n.Role != target.ControlPlane || n.Mode != history.ModeConfigured || slices.Contains(endpoints, n.Address) || apiServerCrashLooping(ev, n) {
			continue
		}

		msg := fmt.Sprintf("%s's Kubernetes API server is not in the kubernetes endpoints (%d/%d listed)", n.Name, len(endpoints), cps)
		if !listed {
			msg = fmt.Sprintf("%s's Kubernetes API server is not in service: no API server of the cluster is ready to list the kubernetes endpoints", n.Name)
		}

		out = append(out, diag("apiserver-not-in-service", n.Name, msg, apiserverEvidence(n, main), ev.Now))
	}

	return out
}

// apiserverEvidence is the node's API server and its own etcd member, as seen.
func apiserverEvidence(n *history.NodeObservation, main history.Cluster) string {
	var lines []string

	if n.APIServer != nil {
		if n.APIServer.Ready {
			lines = append(lines, "its API server answers /readyz ok")
		} else {
			lines = append(lines, "its API server: "+n.APIServer.Error)
		}
	}

	switch m, ok := main.MemberOf(n); {
	case ok && m.IsLearner:
		lines = append(lines, fmt.Sprintf("its etcd member %s is a learner: it serves no reads or writes to its API server", m.IDString()))
	case ok:
		lines = append(lines, fmt.Sprintf("its etcd member %s is a voter", m.IDString()))
	default:
		lines = append(lines, "it is not a member of the etcd cluster")
	}

	if s := n.Etcd; s != nil {
		health := "healthy"

		switch {
		case s.HealthUnknown:
			health = "health unknown"
		case !s.Healthy:
			health = "unhealthy"
			if s.HealthMessage != "" {
				health += ": " + s.HealthMessage
			}
		}

		lines = append(lines, fmt.Sprintf("service etcd: %s (%s), %s", s.State, s.Message, health))
	}

	return strings.Join(lines, "\n")
}
