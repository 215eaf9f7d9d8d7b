package judge

import "github.com/talchaos/talchaos/harness/result"

var _ = register(Code{
	Name:     "config-invalid",
	Doc:      "the node refused the machine configuration with InvalidArgument: it fails Talos's validation",
	Diagnose: configInvalid,
	Remedy: func(r RemedyFor) []string {
		return []string{"talosctl validate --config <the node's machine config> --mode metal"}
	},
})

// configInvalid: the node refused the config with InvalidArgument (field report FR-001).
func configInvalid(ev *Evidence) []result.Diagnosis {
	var out []result.Diagnosis

	seen := map[string]bool{}

	for _, c := range ev.Calls {
		if c.RPC != "ApplyConfiguration" || c.Code != "InvalidArgument" || seen[c.Node] {
			continue
		}

		seen[c.Node] = true

		out = append(out, diag("config-invalid", c.Node, "the machine configuration for "+c.Node+" fails Talos's validation", describeCall(c), c.At))
	}

	return out
}
