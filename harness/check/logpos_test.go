package check

import (
	"testing"
	"time"

	"github.com/talchaos/talchaos/harness/eventlog"
	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/target"
)

// How far a node's log was read is forgotten when the node boots again,
// seen down or only seen back with another boot ID, and a stream that began
// in the boot before does not bring its position back when it ends late.
func TestLogPositionForgottenAtANewBoot(t *testing.T) {
	const key = "cp1/machined"

	look := func(mode, stage, boot string) *history.Observation {
		obs := history.NewObservation(time.Second, []string{"cp1"})
		obs.Nodes["cp1"] = &history.NodeObservation{Name: "cp1", Role: target.ControlPlane, Mode: mode, Stage: stage, BootID: boot}

		return obs
	}

	for _, tc := range []struct {
		name      string
		prev, cur *history.Observation
		forgotten bool
	}{
		{"the same boot", look(history.ModeConfigured, "running", "a"), look(history.ModeConfigured, "running", "a"), false},
		{"another boot ID, never seen down", look(history.ModeConfigured, "running", "a"), look(history.ModeConfigured, "running", "b"), true},
		{"seen down", look(history.ModeConfigured, "running", "a"), look(history.ModeDown, "", ""), true},
		{"rebooting", look(history.ModeConfigured, "running", "a"), look(history.ModeConfigured, "rebooting", "a"), true},
		{"no boot ID read (a reader talosconfig)", look(history.ModeConfigured, "running", "a"), look(history.ModeConfigured, "running", ""), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &Observer{log: eventlog.New(), seen: map[string]logPosition{}, boots: map[string]int{}, following: map[string]bool{}}
			o.seen[key] = logPosition{first: "applied configuration", count: 5}

			// A stream began in the boot before and is still open.
			o.following[key] = true
			boot := o.boots[key]

			o.transitions(tc.prev, tc.cur)

			if _, kept := o.seen[key]; kept == tc.forgotten {
				t.Errorf("after the look, the position is kept: %v, want %v", kept, !tc.forgotten)
			}

			// The stream ends late, having read further in its boot's log.
			o.streamEnded(key, boot, logPosition{first: "applied configuration", count: 7})

			switch pos, kept := o.seen[key]; {
			case o.following[key]:
				t.Error("the ended stream is still taken for following")
			case tc.forgotten && kept:
				t.Errorf("the stream of the boot before brought back its position %+v", pos)
			case !tc.forgotten && pos.count != 7:
				t.Errorf("the stream's position is %+v, want its 7 lines", pos)
			}
		})
	}
}
