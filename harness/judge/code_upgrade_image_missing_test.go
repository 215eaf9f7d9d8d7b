package judge

import (
	"strings"
	"testing"

	"github.com/talchaos/talchaos/harness/history"
)

// An Upgrade refused because the registry lacks its installer image, on a
// node that keeps its version, is upgrade-image-missing; one that a later
// Upgrade got through, a node upgraded after all, and a refusal for another
// reason are not.
func TestUpgradeImageMissing(t *testing.T) {
	const (
		on    = history.ModeConfigured
		image = `"ghcr.io/siderolabs/installer:v1.12.99"`
		// As allenporter/k8s-gitops#2384 shows it (go-retry's set of one).
		missing = "error validating installer image " + image + ": 1 error(s) occurred:\n\t" + `failed to pull image "ghcr.io/siderolabs/installer:v1.12.99": ` +
			`failed to resolve reference "ghcr.io/siderolabs/installer:v1.12.99": ghcr.io/siderolabs/installer:v1.12.99: not found`
	)

	refused := func(ms int64, msg string) history.Entry {
		return history.Entry{WallMs: ms, Node: "cp2", Call: &history.Call{RPC: "Upgrade", Client: history.ClientTalosconfig, Code: "Unknown", Message: msg, DurationMs: 5000}}
	}

	for _, tc := range []struct {
		name string
		h    []history.Entry
		want string // a word of the evidence; "" for no diagnosis
	}{
		{"refused, still on its version", []history.Entry{looked(100, on, "v1.12.6", "a", false), refused(200, missing), looked(900, on, "v1.12.6", "a", true)},
			"1 Upgrade call(s) refused"},
		{"refused, then accepted and upgraded", []history.Entry{
			looked(100, on, "v1.12.6", "a", false), refused(200, missing), upgradeCall(300), looked(900, on, "v1.12.99", "b", true),
		}, ""},
		{"refused, then accepted, not rebooted yet", []history.Entry{
			looked(100, on, "v1.12.6", "a", false), refused(200, missing), upgradeCall(300), looked(900, on, "v1.12.6", "a", true),
		}, ""},
		{"refused by the etcd checks", []history.Entry{
			looked(100, on, "v1.12.6", "a", false), refused(200, "error validating etcd for upgrade: etcd member 0000000000000abc is not healthy"),
			looked(900, on, "v1.12.6", "a", true),
		}, ""},
		{"a reference that does not parse", []history.Entry{
			looked(100, on, "v1.12.6", "a", false),
			refused(200, `error validating installer image "ghcr.io/Siderolabs/installer:v1": failed to parse image reference "ghcr.io/Siderolabs/installer:v1": invalid reference format`),
			looked(900, on, "v1.12.6", "a", true),
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := codeFunc("upgrade-image-missing")(FromHistory(threeNodes(60, tc.h...), Options{}))

			switch {
			case tc.want == "" && len(got) > 0:
				t.Fatalf("diagnosed %+v, want none", got)
			case tc.want == "":
			case len(got) != 1 || got[0].Node != "cp2" || !strings.Contains(got[0].Evidence, tc.want):
				t.Fatalf("got %+v, want upgrade-image-missing on cp2 with %q", got, tc.want)
			}
		})
	}
}
