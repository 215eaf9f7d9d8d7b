package main

import (
	"strings"
	"testing"

	"github.com/talchaos/talchaos/harness/chaos"
)

// `talchaos faults` lists every kind of the one list, with its parameters
// and the targets that support it.
func TestFaultsListsTheCatalogue(t *testing.T) {
	code, out := run(t, "faults")
	if code != exitPass {
		t.Fatalf("exit %d:\n%s", code, out)
	}

	for _, k := range chaos.Kinds {
		if !strings.Contains(out, "\n"+k.Kind()+": "+k.Doc()+"\n") || !strings.Contains(out, "example: "+k.Example()) {
			t.Errorf("kind %s is not listed with its doc and example", k.Kind())
		}

		for _, p := range chaos.Params(k) {
			if !strings.Contains(out, "  "+p.Name) {
				t.Errorf("kind %s: parameter %s not listed", k.Kind(), p.Name)
			}
		}
	}

	for _, want := range []string{"KIND", "SIM", "REAL", "port talos-api only", "trigger states: bootstrapped", "promote-refused   the leader refused", "(takes a count)"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}

	if code, out := run(t, "faults", "meteor"); code != exitInput || !strings.Contains(out, `unknown fault kind "meteor"`) {
		t.Errorf("faults meteor: exit %d:\n%s", code, out)
	}
}

// --plan says which time scale a run uses and which destructive remedies the
// orchestrator may take.
func TestPlanShowsScaleAndRemedies(t *testing.T) {
	code, out := run(t, "run", "stale-learner-resilient", "--plan")
	if code != exitPass {
		t.Fatalf("exit %d:\n%s", code, out)
	}

	for _, want := range []string{"time scale 60", "wipe-etcd", "(destructive)", "orchestrator resilient; destructive remedies",
		"it may take them (the nodes are disposable)", "talosctl -n <bootstrap node> etcd remove-member <member id>"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
}
