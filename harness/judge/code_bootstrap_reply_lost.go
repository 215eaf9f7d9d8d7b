package judge

import (
	"fmt"

	"github.com/talchaos/talchaos/harness/result"
)

var _ = register(Code{
	Name: "bootstrap-reply-lost",
	Doc: "a Bootstrap took effect but its reply was lost: every retry gets AlreadyExists \"etcd data directory is not empty\", " +
		"which a caller that counts it as a failure retries for ever",
	Diagnose: bootstrapReplyLost,
	Remedy: func(r RemedyFor) []string {
		return []string{
			fmt.Sprintf("talosctl -n %s etcd members   # the cluster is there: do not bootstrap again, nor another node", r.Addr),
			"# after a Bootstrap that got no answer, take AlreadyExists \"etcd data directory is not empty\" from the same node as done",
		}
	},
})

// alreadyBootstrapped is Bootstrap's answer once the node's etcd has data
// (v1alpha1_server.go Bootstrap).
const alreadyBootstrapped = "etcd data directory is not empty"

// bootstrapReplyLost: a Bootstrap call got no answer (it may have acted),
// then the same node answered a later one AlreadyExists "etcd data directory
// is not empty", with no Bootstrap answered OK to explain its data, and the
// node is a member of the cluster: the unanswered call bootstrapped it
// (dis-bzh/OpenAether-infra#67: Terraform's talos_machine_bootstrap retries
// AlreadyExists until its timeout).
func bootstrapReplyLost(ev *Evidence) []result.Diagnosis {
	var out []result.Diagnosis

	main := ev.Final.Main()

	for _, n := range ev.Final.Ordered() {
		if _, ok := main.MemberOf(n); !ok {
			continue
		}

		var (
			lost, last *CallAt
			refused    int
		)

	calls:
		for _, c := range ev.calls(n.Name, "Bootstrap") {
			switch {
			case c.OK():
				break calls // the node's data is this call's doing
			case c.Code == "AlreadyExists" && c.Message == alreadyBootstrapped && lost != nil:
				refused++
				last = &c
			case c.Failure.MayHaveActed() && last == nil:
				lost = &c
			}
		}

		if last == nil {
			continue
		}

		out = append(out, diag("bootstrap-reply-lost", n.Name,
			n.Name+" was bootstrapped, but the reply never reached the client: every retry gets AlreadyExists, which is that bootstrap having worked",
			fmt.Sprintf("%s at %s; then %d Bootstrap call(s) answered AlreadyExists %q, the last at %s; none answered OK",
				describeCall(*lost), ev.span(lost.At), refused, alreadyBootstrapped, ev.span(last.At)), lost.At))
	}

	return out
}
