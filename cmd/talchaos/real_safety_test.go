package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/talchaos/talchaos/harness/result"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/sim"
)

// startUpCluster starts an `up`-style cluster shaped like the scenario, whose
// nodes run their Talos timers at scale, and writes its files (the inventory
// records the scale).
func startUpCluster(t *testing.T, from string, scale float64) (*sim.Cluster, string) {
	t.Helper()

	sc, err := upScenario(upOptions{from: from, fromScale: scale})
	if err != nil {
		t.Fatal(err)
	}

	return startUp(t, sc)
}

// startUp starts the scenario's nodes as `talchaos up` does, writes its files
// into a new dir, and stops the nodes when the test ends.
func startUp(t *testing.T, sc *scenario.Scenario) (*sim.Cluster, string) {
	t.Helper()

	c, err := sim.NewCluster(context.Background(), sc, 1)
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { c.Close() }) //nolint:errcheck

	dir := t.TempDir()
	if err := writeUpFiles(dir, c); err != nil {
		t.Fatal(err)
	}

	return c, dir
}

func eventsOf(r *result.Result, kind, substr string) []string {
	var out []string

	for _, e := range r.Events {
		if strings.HasPrefix(e.Kind, kind) && strings.Contains(e.Msg, substr) {
			out = append(out, fmt.Sprintf("%dms %s %s", e.TMs, e.Kind, e.Msg))
		}
	}

	return out
}

// The field report: happy-path (timeScale 60) against real nodes whose timers
// run slower. The scenario's scale must not shrink the resilient
// orchestrator's promote window on them (at 60 it meant 11 s and a healthy
// learner was removed and its node wiped): the run uses the nodes' own time,
// and without --allow-destructive nothing is removed or reset.
func TestRealTargetRunsOnTheNodesTime(t *testing.T) {
	if testing.Short() {
		t.Skip("forms a cluster at a slow time scale")
	}

	sc, err := upScenario(upOptions{from: "happy-path", fromScale: 4})
	if err != nil {
		t.Fatal(err)
	}

	// The nodes run v1.14, which adopts a learner of its own whose add's
	// reply it lost: at scale 4 a join attempt has 7.5 s of wall time, and
	// under the race detector beside make test's other lanes this process
	// once stood still longer than that while cp2's add was applied; v1.12
	// then fails every later add for good ("Peer URLs already exists"), its
	// own race (member-add-reply-lost), which this test is not about.
	sc.Talos = "v1.14"

	_, dir := startUp(t, sc)

	code, out := run(t, "run", "happy-path", "--target", "real", "--inventory", filepath.Join(dir, "inventory.yaml"),
		"--report-dir", filepath.Join(dir, "report"))

	r := readReport(t, filepath.Join(dir, "report", "report.json"))
	if code != exitPass || r.Verdict != result.Pass {
		t.Fatalf("exit %d verdict %s:\n%s", code, r.Verdict, out)
	}

	if r.TimeScale != 4 || !strings.Contains(out, "time scale 4: the real target's nodes run their own timers (the scenario's 60 is for simulated nodes)") {
		t.Errorf("report time scale %g; output:\n%.1500s", r.TimeScale, out)
	}

	for _, what := range []string{"EtcdRemoveMemberByID", "Reset", "would "} {
		if ev := eventsOf(r, "orchestrator.", what); len(ev) > 0 {
			t.Errorf("the orchestrator acted on a healthy cluster: %v", ev)
		}
	}
}

// A stale learner blocks the join on real nodes: without --allow-destructive
// the resilient orchestrator says what it would do, with the talosctl command,
// removes nothing and stops; with it, it removes the learner, no earlier than
// Talos's 2 minutes (at the nodes' scale), and the cluster forms.
func TestRealTargetWithholdsRemediesWithoutPermission(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two bootstraps")
	}

	const scale = 60

	c, dir := startUpCluster(t, "happy-path", scale)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)

	defer cancel()

	// cp1 alone forms etcd; a learner nobody will ever start (its node was
	// wiped, say) takes the only learner slot.
	cp1 := c.Nodes()[0]
	applyTo(t, ctx, cp1)
	bootstrapOn(t, ctx, c, cp1)

	ghost := strings.TrimSuffix(cp1.Address, ".2") + ".200"

	var id uint64

	for deadline := time.Now().Add(time.Minute); ; {
		ec, err := c.EtcdClient(ctx, "cp1")
		if err == nil {
			resp, aerr := ec.MemberAddAsLearner(ctx, []string{"https://" + ghost + ":2380"})
			ec.Close() //nolint:errcheck

			if aerr == nil {
				id = resp.Member.ID

				break
			}

			err = aerr
		}

		if time.Now().After(deadline) {
			t.Fatalf("add the stale learner: %v", err)
		}

		time.Sleep(100 * time.Millisecond)
	}

	inventory := filepath.Join(dir, "inventory.yaml")

	code, out := run(t, "run", "happy-path", "--target", "real", "--inventory", inventory, "--report-dir", filepath.Join(dir, "refused"))
	r := readReport(t, filepath.Join(dir, "refused", "report.json"))

	// Exit 1; or 3 when the host stalled through the run (the verdict is
	// then void: expectations that failed across a stall say nothing), the
	// remedy withheld all the same.
	want := fmt.Sprintf("talosctl -n %s etcd remove-member %016x", cp1.Address, id)
	if (code != exitFail && !(code == exitHarness && r.Voided)) || len(eventsOf(r, "orchestrator.remedy-withheld", want)) == 0 {
		t.Fatalf("exit %d, want 1 with the withheld remedy %q:\n%s", code, want, out)
	}

	if ev := eventsOf(r, "orchestrator.", "EtcdRemoveMemberByID"); len(ev) > 0 {
		t.Fatalf("a member was removed without --allow-destructive: %v", ev)
	}

	ec, err := c.EtcdClient(ctx, "cp1")
	if err != nil {
		t.Fatal(err)
	}

	members, err := ec.MemberList(ctx)
	ec.Close() //nolint:errcheck

	if err != nil || !strings.Contains(fmt.Sprint(members.Members), ghost) {
		t.Fatalf("the stale learner is gone without permission: %v %v", members, err)
	}

	code, out = run(t, "run", "happy-path", "--target", "real", "--inventory", inventory, "--allow-destructive",
		"--report-dir", filepath.Join(dir, "allowed"))
	r = readReport(t, filepath.Join(dir, "allowed", "report.json"))

	if code != exitPass && !(code == exitHarness && r.Voided) {
		t.Fatalf("with --allow-destructive: exit %d:\n%s", code, out)
	}

	removed := eventsOf(r, "orchestrator.call", fmt.Sprintf("EtcdRemoveMemberByID %016x", id))
	if len(removed) != 1 {
		t.Fatalf("the stale learner was not removed once: %v\n%s", removed, out)
	}

	// No earlier than 2 minutes of the nodes' Talos time after the
	// orchestrator first waited on the member list.
	var waited, at int64 = -1, -1

	for _, e := range r.Events {
		if e.Kind == "orchestrator.step" && strings.HasPrefix(e.Msg, "wait for every control plane") && waited < 0 {
			waited = e.TMs
		}

		if e.Kind == "orchestrator.call" && strings.Contains(e.Msg, "EtcdRemoveMemberByID") {
			at = e.TMs
		}
	}

	if min := int64(2 * time.Minute / scale / time.Millisecond); waited < 0 || at-waited < min {
		t.Errorf("removed %d ms after the wait began, want at least %d ms (2 Talos minutes at scale %d)", at-waited, min, scale)
	}

	if _, err := os.Stat(filepath.Join(dir, "allowed", "report.json")); err != nil {
		t.Fatal(err)
	}
}
