package reports

import (
	"strings"
	"testing"

	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/result"
	"github.com/talchaos/talchaos/harness/target"
)

// A node seen with another boot ID booted again between two looks: the
// timeline marks it and the history table says so, though it was never seen
// down. The first boot ID seen, or the same one again, is not a reboot.
func TestHTMLMarksANewBootID(t *testing.T) {
	look := func(ms int64, node, boot string) history.Entry {
		return history.Entry{WallMs: ms, TalosMs: ms * 60, Node: node, Observed: &history.NodeObservation{
			Name: node, Role: target.ControlPlane, Mode: history.ModeConfigured, Stage: "running", BootID: boot,
		}}
	}

	for _, tc := range []struct {
		name    string
		entries []history.Entry
		boots   int
	}{
		{"one boot", []history.Entry{look(10, "cp1", "a"), look(20, "cp1", "a"), look(30, "cp2", "b")}, 0},
		{"cp1 booted again", []history.Entry{look(10, "cp1", "a"), look(20, "cp2", "b"), look(30, "cp1", "c")}, 1},
		{"no boot ID (a reader talosconfig)", []history.Entry{look(10, "cp1", "a"), look(20, "cp1", ""), look(30, "cp1", "a")}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &result.Result{Scenario: "boots", Verdict: result.Pass, TimeScale: 60, History: &history.History{
				Scale:   60,
				Nodes:   []history.Node{{Name: "cp1", Role: target.ControlPlane}, {Name: "cp2", Role: target.ControlPlane}},
				Entries: tc.entries,
			}}

			page, err := HTML(r)
			if err != nil {
				t.Fatal(err)
			}

			if got := strings.Count(string(page), `<circle class="boot"`); got != tc.boots {
				t.Errorf("%d boot marks in the timeline, want %d", got, tc.boots)
			}

			if got := strings.Count(string(page), `<tr id="e2" class="boot">`); got != tc.boots {
				t.Errorf("%d boot rows in the history table, want %d:\n%s", got, tc.boots, page)
			}
		})
	}
}
