package judge

import (
	"fmt"
	"strings"

	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/result"
)

var _ = register(Code{
	Name: "apiserver-crash-loop",
	Doc: "a control plane's kube-apiserver exits as it starts and its kubelet backs off (CrashLoopBackOff) while its " +
		"etcd member is a healthy voter: the API server itself fails (a flag it rejects, its certificates, its config), " +
		"and Kubernetes never comes up there",
	Diagnose: apiserverCrashLoop,
	Remedy: func(r RemedyFor) []string {
		return []string{
			fmt.Sprintf("talosctl -n %s get staticpodstatus   # the kube-apiserver pod: its restarts, CrashLoopBackOff", r.Addr),
			fmt.Sprintf("talosctl -n %s containers -k   # the kube-apiserver container's ID", r.Addr),
			fmt.Sprintf("talosctl -n %s logs -k <that ID>   # its last lines say why it exits", r.Addr),
			"# mend what they name in the machine config (cluster.apiServer: extraArgs, certSANs, admission control, " +
				"its image) and apply it; Talos renders the static pod again",
			"# machined's \"Authorization error (user=apiserver-kubelet-client, …)\" is the kubelet failing to ask an " +
				"API server whether Talos may read its pods (its webhook authorizer's error): a symptom, not the cause",
		}
	},
})

// apiserverCrashLoop: in a run with Kubernetes, a configured control plane
// whose kube-apiserver static pod is not ready at the end and was seen
// restarted again while its etcd member was a voter and its etcd service
// Running and healthy, as they still are: what keeps it down is the API
// server's own (talos #10602: "if the kube-apiserver doesn't come up and
// keeps crashing, the first thing to do is to check its logs"). An API
// server that exited while its member was a learner or its etcd down
// waited on etcd: apiserver-not-in-service says so. The pod is read as
// `talosctl health` reads it (Talos pkg/cluster/check:
// K8sControlPlaneStaticPods, from the StaticPodStatus resources).
func apiserverCrashLoop(ev *Evidence) []result.Diagnosis {
	if !ev.Final.Kubernetes() {
		return nil
	}

	main := ev.Final.Main()

	var out []result.Diagnosis

	for _, n := range ev.controlPlanes() {
		m, ok := main.MemberOf(n)
		if !ok || !apiServerCrashLooping(ev, n) {
			continue
		}

		pod, exits := n.APIServerPod, ev.APIServerExits[n.Name]

		evidence := []string{
			n.Name + ": kube-apiserver static pod: " + pod.String(),
			fmt.Sprintf("seen restarted again %s while its etcd member %s was a voter, service etcd Running and healthy, first at %s",
				times(len(exits)), m.IDString(), ev.span(exits[0])),
		}

		if n.APIServer != nil && !n.APIServer.Ready && n.APIServer.Error != "" {
			evidence = append(evidence, "its API server: "+n.APIServer.Error)
		}

		out = append(out, diag("apiserver-crash-loop", n.Name,
			fmt.Sprintf("%s's kube-apiserver exits as it starts (%s) while its etcd member is a healthy voter: "+
				"the API server itself fails, and its own log says why", n.Name, pod.String()),
			strings.Join(evidence, "\n"), exits[0]))
	}

	return out
}

// apiServerCrashLooping says whether n's API server is down for its own
// reasons: its pod not ready and seen restarted again while n's etcd member
// was a healthy voter, as it still is (by n's own etcd status: a list
// another member answered can lag behind it).
func apiServerCrashLooping(ev *Evidence, n *history.NodeObservation) bool {
	pod := n.APIServerPod

	return n.Mode == history.ModeConfigured && pod != nil && !pod.Ready && len(ev.APIServerExits[n.Name]) > 0 && healthyVoter(n)
}

// times is a count of looks as a sentence says it: "once", "twice", "3 times".
func times(n int) string {
	switch n {
	case 1:
		return "once"
	case 2:
		return "twice"
	default:
		return fmt.Sprintf("%d times", n)
	}
}
