package judge

import (
	"fmt"
	"strings"

	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/result"
)

var _ = register(Code{
	Name:     "split-brain",
	Doc:      "voting members report member lists that share no member: separate etcd clusters",
	Diagnose: splitBrain,
	Remedy: func(r RemedyFor) []string {
		return []string{fmt.Sprintf("talosctl -n %s reset --system-labels-to-wipe EPHEMERAL --reboot --graceful=false   # its etcd data is lost; it joins the main cluster", r.Addr)}
	},
})

// splitBrain: voting members report member lists that share no member: separate
// etcd clusters (talos #5500, Bootstrap on two nodes).
func splitBrain(ev *Evidence) []result.Diagnosis {
	clusters := ev.Final.Clusters()
	if len(clusters) < 2 {
		return nil
	}

	var parts []string

	for _, c := range clusters {
		var names []string
		for _, m := range c.Members {
			names = append(names, history.DisplayName(m))
		}

		parts = append(parts, fmt.Sprintf("{%s} seen by %s", strings.Join(names, ", "), strings.Join(c.Seen, ",")))
	}

	var out []result.Diagnosis

	for _, c := range clusters[1:] {
		for _, node := range c.Seen {
			out = append(out, diag("split-brain", node,
				fmt.Sprintf("%s runs a separate etcd cluster: %d clusters exist", node, len(clusters)),
				strings.Join(parts, "; "), ev.Now))
		}
	}

	return out
}
