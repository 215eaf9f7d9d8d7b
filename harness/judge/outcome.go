package judge

import (
	"slices"

	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/result"
	"github.com/talchaos/talchaos/harness/target"
)

// Converged reports whether the control plane formed: one etcd cluster, every
// control plane a voting member with etcd running and healthy, no node left in
// maintenance.
func Converged(o *history.Observation) bool {
	if len(o.Clusters()) != 1 {
		return false
	}

	main := o.Main()

	for _, n := range o.Ordered() {
		if n.Mode != history.ModeConfigured {
			return false
		}

		if n.Role != target.ControlPlane {
			continue
		}

		m, ok := main.MemberOf(n)
		if !ok || m.IsLearner || !n.Etcd.Running() {
			return false
		}
	}

	return true
}

// KubeNodeState is a node's Kubernetes Node as `kubectl get nodes` shows
// it: Ready, NotReady with the Ready condition's reason, or not registered.
func KubeNodeState(nodes []history.KubeNode, n *history.NodeObservation) string {
	k, ok := history.KubeNodeOf(nodes, n)

	switch {
	case !ok:
		return "not registered"
	case k.Ready:
		return "Ready"
	case k.Reason != "":
		return "NotReady (" + k.Reason + ")"
	}

	return "NotReady"
}

// OutcomeOf summarises an observation (the final one) for the report.
func OutcomeOf(o *history.Observation) result.Outcome {
	main := o.Main()

	out := result.Outcome{
		Converged:          Converged(o),
		Voters:             main.Voters(),
		Learners:           main.Learners(),
		NodesInMaintenance: []string{},
	}

	for _, m := range main.Members {
		name := m.Hostname
		if name == "" {
			name = "(unstarted)"
		}

		out.Members = append(out.Members, result.Member{ID: m.IDString(), Hostname: name, PeerURLs: m.PeerURLs, IsLearner: m.IsLearner})
	}

	if ip, holder := o.SharedIPHolder(); ip != "" {
		out.SharedIP = &result.SharedIP{Address: ip, Holder: holder}
		if holder != "" {
			out.SharedIP.Error = o.Nodes[holder].SharedIPError
		}
	}

	endpoints, _ := o.KubernetesEndpoints()
	kubeNodes, listed := o.KubernetesNodes()

	if o.Kubernetes() {
		out.KubernetesEndpoints = new(len(endpoints))
		out.NodesReady = new(0)

		for _, k := range kubeNodes {
			if k.Ready {
				*out.NodesReady++
			}
		}
	}

	for _, n := range o.Ordered() {
		if n.Mode == history.ModeMaintenance {
			out.NodesInMaintenance = append(out.NodesInMaintenance, n.Name)
		}

		no := result.NodeOutcome{Name: n.Name, Address: n.Address, Role: string(n.Role), Stage: n.Stage, Version: n.Version}
		if n.Mode != history.ModeConfigured {
			no.APIError = n.APIError
			if no.Stage == "" {
				no.Stage = n.Mode
			}
		}

		if n.Etcd != nil {
			no.EtcdState, no.EtcdMessage = n.Etcd.State, n.Etcd.Message

			switch {
			case n.Etcd.HealthUnknown:
				no.EtcdHealth = "?"
			case n.Etcd.Healthy:
				no.EtcdHealth = "OK"
			default:
				no.EtcdHealth = "Fail: " + n.Etcd.HealthMessage
			}
		}

		if n.APIServer != nil {
			no.APIServer = "ready"
			if !n.APIServer.Ready {
				no.APIServer = "not ready: " + n.APIServer.Error
			}

			no.InService = slices.Contains(endpoints, n.Address)
		}

		if listed {
			no.KubeNode = KubeNodeState(kubeNodes, n)
		}

		out.Nodes = append(out.Nodes, no)
	}

	return out
}
