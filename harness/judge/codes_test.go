package judge_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/talchaos/talchaos/harness/chaos"
	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/judge"
	"github.com/talchaos/talchaos/harness/result"
	"github.com/talchaos/talchaos/harness/target"
)

// The stable vocabulary of DESIGN.md and the codes added since: a code that
// disappears or is renamed breaks scenario files and reports.
var publicCodes = []string{
	"too-many-learners", "learner-not-synced", "learner-not-promoted", "stale-learner",
	"node-in-maintenance", "tls-certificate-required", "pki-mismatch", "split-brain",
	"peer-url-exists", "config-invalid", "apply-reply-lost", "no-quorum",
	"api-unreachable", "learner-promotion-pending", "etcd-failed", "etcd-crash-loop",
	"apiserver-not-in-service", "node-not-ready", "etcd-spec-missing",
}

func TestCodes(t *testing.T) {
	name := regexp.MustCompile(`^[a-z]+(-[a-z]+)*$`)
	seen := map[string]bool{}

	for _, c := range judge.Codes() {
		if !name.MatchString(c.Name) || seen[c.Name] {
			t.Errorf("code %q: a code is lower-case words joined by dashes, listed once", c.Name)
		}

		seen[c.Name] = true

		if c.Doc == "" || c.Diagnose == nil {
			t.Errorf("code %s has no doc or no Diagnose", c.Name)
		}

		if got, ok := judge.LookupCode(c.Name); !ok || got.Name != c.Name {
			t.Errorf("LookupCode(%s) = %v, %v", c.Name, got.Name, ok)
		}
	}

	for _, c := range publicCodes {
		if !seen[c] {
			t.Errorf("public diagnosis code %s is gone", c)
		}
	}

	// The scenario validator reads the same list.
	if got := chaos.Catalogue.DiagnosisCodes(); !slices.Equal(got, judge.CodeNames()) {
		t.Errorf("the catalogue's codes %v are not the judge's %v", got, judge.CodeNames())
	}

	if !slices.IsSorted(judge.CodeNames()) {
		t.Errorf("codes are not listed by name: %v", judge.CodeNames())
	}
}

func TestRemedyPerCode(t *testing.T) {
	obs := history.NewObservation(0, []string{"cp1", "cp2"})
	obs.Nodes["cp1"] = &history.NodeObservation{Name: "cp1", Address: "10.5.0.2", Mode: history.ModeConfigured,
		Members: []history.Member{{ID: 1, Hostname: "cp1", PeerURLs: []string{"https://10.5.0.2:2380"}}, {ID: 0xabc, Hostname: "cp2", PeerURLs: []string{"https://10.5.0.3:2380"}, IsLearner: true}}}
	obs.Nodes["cp2"] = &history.NodeObservation{Name: "cp2", Address: "10.5.0.3", Mode: history.ModeConfigured}

	for _, tc := range []struct {
		code string
		want []string
	}{
		{"learner-not-promoted", []string{
			"talosctl -n 10.5.0.2 etcd remove-member 0000000000000abc",
			"talosctl -n 10.5.0.3 reset --system-labels-to-wipe EPHEMERAL --reboot --graceful=false",
		}},
		{"too-many-learners", []string{
			"talosctl -n 10.5.0.2 etcd remove-member 0000000000000abc",
			"# then wait: 10.5.0.3's join loop adds it as the next learner",
		}},
		{"config-invalid", []string{"talosctl validate --config <the node's machine config> --mode metal"}},
		{"no-such-code", nil},
	} {
		got := judge.Remedy(result.Diagnosis{Code: tc.code, Node: "cp2"}, obs)
		if !slices.Equal(got, tc.want) {
			t.Errorf("Remedy(%s) = %q, want %q", tc.code, got, tc.want)
		}
	}
}

// A diagnosis of the whole cluster names no node: its commands go to a node
// that can carry them out, never to an empty address.
func TestRemedyOfTheCluster(t *testing.T) {
	obs := history.NewObservation(0, []string{"cp1", "cp2"})
	obs.Nodes["cp1"] = &history.NodeObservation{Name: "cp1", Address: "10.5.0.2", Role: target.ControlPlane, Mode: history.ModeDown}
	obs.Nodes["cp2"] = &history.NodeObservation{Name: "cp2", Address: "10.5.0.3", Role: target.ControlPlane, Mode: history.ModeConfigured,
		Etcd: &history.Service{State: "Running", HealthMessage: "context deadline exceeded"}}

	want := []string{
		"# bring the missing members back; if they are lost for good, restore from a snapshot:",
		"talosctl -n 10.5.0.3 etcd snapshot db.snapshot",
		"talosctl -n 10.5.0.3 bootstrap --recover-from=./db.snapshot",
	}

	if got := judge.Remedy(result.Diagnosis{Code: "no-quorum"}, obs); !slices.Equal(got, want) {
		t.Errorf("no-quorum: %q, want %q", got, want)
	}

	if got := judge.Remedy(result.Diagnosis{Code: "shared-ip-lost"}, obs); len(got) == 0 || strings.Contains(got[0], "bring  ") {
		t.Errorf("shared-ip-lost: %q", got)
	}
}
