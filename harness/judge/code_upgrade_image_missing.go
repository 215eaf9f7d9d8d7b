package judge

import (
	"fmt"
	"strings"

	"github.com/talchaos/talchaos/harness/result"
)

var _ = register(Code{
	Name: "upgrade-image-missing",
	Doc: "a node's Upgrade was refused because the registry does not have the installer image it names " +
		"(a tag never published, a mistyped Image Factory schematic, a mirror that lacks it): the node keeps its version",
	Diagnose: upgradeImageMissing,
	Remedy: func(r RemedyFor) []string {
		return []string{
			fmt.Sprintf("talosctl -n %s image pull --namespace system IMAGE   # the node's own pull says whether its registry has it", r.Addr),
			"# check the tag and, for an Image Factory image, the schematic ID (factory.talos.dev/installer/SCHEMATIC:VERSION); " +
				"a registry mirror in machine.registries must carry the image too",
			fmt.Sprintf("talosctl -n %s upgrade --image IMAGE   # again, with an image the registry has", r.Addr),
		}
	},
})

// installerNotFound starts the refusal of an Upgrade whose installer image
// could not be pulled (v1alpha1_server.go Upgrade); containerd's resolver
// ends it with errdefs.ErrNotFound's text.
const installerNotFound = "error validating installer image "

// upgradeImageMissing: a node whose last failed Upgrade was refused because
// its installer image was not found, not upgraded at the end.
func upgradeImageMissing(ev *Evidence) []result.Diagnosis {
	var out []result.Diagnosis

	for _, r := range ev.refusedUpgrades(func(msg string) bool {
		return strings.HasPrefix(msg, installerNotFound) && strings.HasSuffix(msg, ": not found")
	}) {
		n, last, refused := r.node, r.last, r.count

		image, _, _ := strings.Cut(strings.TrimPrefix(last.Message, installerNotFound), ": ")

		out = append(out, diag("upgrade-image-missing", n.Name,
			fmt.Sprintf("%s's upgrade was refused: the registry does not have the installer image %s, and it keeps its version", n.Name, image),
			fmt.Sprintf("%d Upgrade call(s) refused, the last at %s: %s", refused, ev.span(last.At), describeCall(*last)), last.At))
	}

	return out
}
