package judge

import (
	"strings"
	"testing"

	"github.com/talchaos/talchaos/harness/history"
)

// looked is cp2 observed at ms on a version and boot ID (a rolling upgrade's
// looks), in an API mode.
func looked(ms int64, mode, version, bootID string, final bool) history.Entry {
	e := observed(ms, "cp2", mode, nil, nil, final)
	if mode == history.ModeConfigured {
		e.Observed.Version, e.Observed.BootID = version, bootID
	}

	return e
}

func upgradeCall(ms int64) history.Entry {
	return history.Entry{WallMs: ms, Node: "cp2", Call: &history.Call{RPC: "Upgrade", Client: history.ClientTalosconfig, Code: "OK", DurationMs: 20}}
}

func TestUpgradeLostFromADownNodeOrANewBootID(t *testing.T) {
	const on = history.ModeConfigured

	for _, tc := range []struct {
		name string
		h    []history.Entry
		want string // "" for no diagnosis
	}{
		{"seen down and back on the old version", []history.Entry{
			looked(100, on, "v1.12.6", "a", false), upgradeCall(200), looked(300, history.ModeDown, "", "", false),
			looked(900, on, "v1.12.6", "b", true),
		}, "the node down at"},
		// The reboot fell between two looks (a poll in flight for the
		// whole of it): only the boot ID says the node rebooted.
		{"never seen down, a new boot ID", []history.Entry{
			looked(100, on, "v1.12.6", "a", false), upgradeCall(200), looked(900, on, "v1.12.6", "b", true),
		}, "new boot ID"},
		{"upgraded", []history.Entry{
			looked(100, on, "v1.12.6", "a", false), upgradeCall(200), looked(900, on, "v1.12.7", "b", true),
		}, ""},
		{"acknowledged, not rebooted yet", []history.Entry{
			looked(100, on, "v1.12.6", "a", false), upgradeCall(200), looked(900, on, "v1.12.6", "a", true),
		}, ""},
		{"rebooted before the upgrade only", []history.Entry{
			looked(100, on, "v1.12.6", "a", false), looked(150, on, "v1.12.6", "b", false), upgradeCall(200),
			looked(900, on, "v1.12.6", "b", true),
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := codeFunc("upgrade-lost")(FromHistory(threeNodes(60, tc.h...), Options{}))

			switch {
			case tc.want == "" && len(got) > 0:
				t.Fatalf("diagnosed %+v, want none", got)
			case tc.want == "":
			case len(got) != 1 || got[0].Node != "cp2" || !strings.Contains(got[0].Evidence, tc.want):
				t.Fatalf("got %+v, want upgrade-lost on cp2 with %q", got, tc.want)
			}
		})
	}
}
