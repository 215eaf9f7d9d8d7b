package check

import (
	"context"
	"testing"
	"time"

	"github.com/talchaos/talchaos/harness/eventlog"
	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/target"
)

// How far a node's log was read is forgotten when the node boots again: where
// it says its boot ID, when it is back with another one (never seen down, or
// seen down first), and then its streams of the boot before are ended and
// bring no position back; a node seen down and back with the same boot ID
// (cut off, not rebooted) keeps its stream and position. A node that never
// says its boot ID boots anew when seen down or rebooting.
func TestLogPositionForgottenAtANewBoot(t *testing.T) {
	const key = "cp1/machined"

	look := func(mode, stage, boot string) *history.Observation {
		obs := history.NewObservation(time.Second, []string{"cp1"})
		obs.Nodes["cp1"] = &history.NodeObservation{Name: "cp1", Role: target.ControlPlane, Mode: mode, Stage: stage, BootID: boot}

		return obs
	}

	running := func(boot string) *history.Observation { return look(history.ModeConfigured, "running", boot) }
	down := look(history.ModeDown, "", "")

	for _, tc := range []struct {
		name      string
		looks     []*history.Observation // after a first look, running with boot ID a
		forgotten bool
	}{
		{"the same boot", []*history.Observation{running("a")}, false},
		{"another boot ID, never seen down", []*history.Observation{running("b")}, true},
		{"down, back with another boot ID", []*history.Observation{down, running("b")}, true},
		{"down, back with the same boot ID (cut off)", []*history.Observation{down, down, running("a")}, false},
		{"rebooting, not yet back", []*history.Observation{look(history.ModeConfigured, "rebooting", "a")}, false},
		{"back from rebooting with another boot ID", []*history.Observation{look(history.ModeConfigured, "rebooting", "a"), down, running("b")}, true},
		{"no boot ID read (a reader talosconfig), the same boot", []*history.Observation{running(""), running("")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &Observer{log: eventlog.New(), seen: map[string]logPosition{}, boots: map[string]int{}, lastBoot: map[string]string{}, following: map[string]context.CancelFunc{}}

			first := running("a")
			if tc.looks[len(tc.looks)-1].Nodes["cp1"].BootID == "" {
				first = running("")
			}

			o.transitions(nil, first)
			o.seen[key] = logPosition{first: "applied configuration", count: 5}

			// A stream began in the first boot and is still open.
			cancelled := false
			o.following[key] = func() { cancelled = true }
			boot := o.boots[key]

			prev := first
			for _, l := range tc.looks {
				o.transitions(prev, l)
				prev = l
			}

			if _, kept := o.seen[key]; kept == tc.forgotten {
				t.Errorf("after the looks, the position is kept: %v, want %v", kept, !tc.forgotten)
			}

			if cancelled != tc.forgotten {
				t.Errorf("the stream of the first boot was ended: %v, want %v", cancelled, tc.forgotten)
			}

			// The stream ends, having read further in its boot's log.
			o.streamEnded(key, boot, logPosition{first: "applied configuration", count: 7})

			switch pos, kept := o.seen[key]; {
			case o.following[key] != nil:
				t.Error("the ended stream is still taken for following")
			case tc.forgotten && kept:
				t.Errorf("the stream of the boot before brought back its position %+v", pos)
			case !tc.forgotten && pos.count != 7:
				t.Errorf("the stream's position is %+v, want its 7 lines", pos)
			}
		})
	}

	// Without boot IDs, seen down is taken for a new boot, as before boot IDs
	// were read (the stream, maybe still reading, is not ended).
	o := &Observer{log: eventlog.New(), seen: map[string]logPosition{}, boots: map[string]int{}, lastBoot: map[string]string{}, following: map[string]context.CancelFunc{}}
	o.seen[key] = logPosition{first: "applied configuration", count: 5}
	o.transitions(running(""), down)

	if _, kept := o.seen[key]; kept {
		t.Error("a node without boot IDs seen down kept its log position")
	}
}
