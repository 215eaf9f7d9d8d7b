package merge

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/talchaos/talchaos/harness/shard"
	"github.com/talchaos/talchaos/harness/strictjson"
	"github.com/talchaos/talchaos/reports"
	"github.com/talchaos/talchaos/reports/stats"
)

const tool = "talchaos v1.2.3 0123456789ab (go1.26.1)"

// verdictOf is a made-up but fixed outcome of a pair: whatever a real run
// gave, the merge must carry it through unchanged.
func verdictOf(name string, seed int64) stats.Run {
	r := stats.Run{Seed: seed, Verdict: stats.Pass, DurationMs: 100*seed + int64(len(name)), Replay: fmt.Sprintf("talchaos run %s --seed %d", name, seed)}
	if seed%3 == 0 {
		r.Verdict, r.Diagnoses = stats.Fail, []string{"too-many-learners"}
	}

	return r
}

var (
	names = []string{"happy-path", "pki-mismatch", "too-many-learners"}
	seeds = []int64{1, 2, 3, 4, 5}
)

func huntOf(name string, seeds []int64, stamp *shard.Stamp, started time.Time) *reports.Hunt {
	h := &reports.Hunt{Scenario: name, Target: "sim", Started: started, WallMs: 1000, Parallel: 2, Tool: tool, Shard: stamp}

	var runs []stats.Run

	for _, s := range seeds {
		r := verdictOf(name, s)
		runs = append(runs, r)
		h.Runs = append(h.Runs, reports.HuntRun{Run: r, Report: fmt.Sprintf("seed-%d", s)})
	}

	h.Summary = stats.Summarize(name, runs)

	return h
}

// writeNight writes shard k of n of a night over names × seeds into dir as
// nightly --shard writes it (with the writers nightly uses; no run).
func writeNight(t *testing.T, dir string, k, n int) {
	t.Helper()

	plan := shard.NewPlan(shard.Shard{Index: k, Count: n}, names, seeds)
	l := &stats.Ledger{Created: time.Date(2026, 11, 25, 2, 0, k, 0, time.UTC), Tool: tool, Shard: plan.Stamp()}

	for _, name := range names {
		mine := plan.SeedsOf(name)
		if len(mine) == 0 {
			continue
		}

		h := huntOf(name, mine, plan.Stamp(), time.Date(2026, 11, 25, 2, 0, k, 0, time.UTC))
		if _, err := reports.WriteHunt(mkdir(t, filepath.Join(dir, name)), h); err != nil {
			t.Fatal(err)
		}

		for _, r := range h.Runs {
			mkdir(t, filepath.Join(dir, name, r.Report))
		}

		l.Scenarios = append(l.Scenarios, h.Summary)
	}

	if err := l.Write(filepath.Join(mkdir(t, dir), reports.LedgerFile)); err != nil {
		t.Fatal(err)
	}
}

func mkdir(t *testing.T, dir string) string {
	t.Helper()

	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}

	return dir
}

// nightShards writes the n shards of a night into root/shard-K.
func nightShards(t *testing.T, root string, n int) []string {
	t.Helper()

	var dirs []string

	for k := 1; k <= n; k++ {
		d := filepath.Join(root, fmt.Sprintf("shard-%d", k))
		writeNight(t, d, k, n)
		dirs = append(dirs, d)
	}

	return dirs
}

// The shards of a night merge into the summaries the whole night's runs
// make, whatever the number of shards (also more shards than some
// scenario has seeds), each run's report pointed at where its shard wrote it.
func TestMergeNightIsTheWholeNight(t *testing.T) {
	for _, n := range []int{1, 2, 4, 7} {
		t.Run(fmt.Sprintf("%d shards", n), func(t *testing.T) {
			root := t.TempDir()
			out := filepath.Join(root, "merged")

			m, err := Read(nightShards(t, root, n), out)
			if err != nil {
				t.Fatal(err)
			}

			if m.Kind != Nightly || m.Shards != n || m.Ledger.Shard != nil || m.Ledger.Tool != tool || len(m.Hunts) != len(names) {
				t.Fatalf("merged %+v", m)
			}

			for i, name := range names {
				var runs []stats.Run
				for _, s := range seeds {
					runs = append(runs, verdictOf(name, s))
				}

				if want := stats.Summarize(name, runs); !reflect.DeepEqual(m.Ledger.Scenarios[i], want) {
					t.Errorf("%s: merged %+v, the whole night %+v", name, m.Ledger.Scenarios[i], want)
				}

				for _, r := range m.Hunts[i].Runs {
					// The report, seen from OUT/NAME, is its shard's directory.
					if fi, err := os.Stat(filepath.Join(out, name, r.Report)); err != nil || !fi.IsDir() || !strings.HasSuffix(r.Report, fmt.Sprintf("/%s/seed-%d", name, r.Seed)) {
						t.Errorf("%s seed %d: report %q does not lead to its run: %v", name, r.Seed, r.Report, err)
					}
				}
			}
		})
	}
}

// edit rewrites a JSON file a shard wrote.
func edit(t *testing.T, file, old, new string) {
	t.Helper()

	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}

	if !strings.Contains(string(data), old) {
		t.Fatalf("%s lacks %q", file, old)
	}

	if err := os.WriteFile(file, []byte(strings.Replace(string(data), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Shards that are not one whole run are refused, naming the file and what.
func TestMergeRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		// prepare changes the three shards' directories (root/shard-K),
		// and returns the directories to merge.
		prepare func(t *testing.T, root string, dirs []string) []string
		want    string
	}{
		{"a missing shard", func(_ *testing.T, _ string, d []string) []string { return d[:2] },
			"shard 3/3 missing: 2 of 3 shards given"},
		{"two missing shards", func(_ *testing.T, _ string, d []string) []string { return d[1:2] },
			"shard 1/3, 3/3 missing"},
		{"a shard twice", func(_ *testing.T, _ string, d []string) []string { return []string{d[0], d[1], d[1], d[2]} },
			"shard-2/ledger.json and ", /* the same */
		},
		{"a shard copied", func(t *testing.T, root string, d []string) []string {
			writeNight(t, filepath.Join(root, "copy"), 2, 3)

			return append(d, filepath.Join(root, "copy"))
		}, "are both shard 2/3: each shard once"},
		{"another build", func(t *testing.T, _ string, d []string) []string {
			edit(t, filepath.Join(d[1], reports.LedgerFile), tool, "talchaos v1.2.4")

			return d
		}, `were written by different talchaos builds (tool "talchaos v1.2.3 0123456789ab (go1.26.1)" and "talchaos v1.2.4")`},
		{"other seeds", func(t *testing.T, root string, d []string) []string {
			saved := seeds
			seeds = []int64{1, 2, 3, 4, 6}
			defer func() { seeds = saved }()

			writeNight(t, filepath.Join(root, "other"), 3, 3)

			return []string{d[0], d[1], filepath.Join(root, "other")}
		}, "are shards of different runs: their seeds differ: 1-5 and 1-4,6"},
		{"other scenarios", func(t *testing.T, root string, d []string) []string {
			saved := names
			names = []string{"happy-path", "pki-mismatch", "quorum-lost"}
			defer func() { names = saved }()

			writeNight(t, filepath.Join(root, "other"), 3, 3)

			return []string{d[0], d[1], filepath.Join(root, "other")}
		}, `their scenarios differ: "too-many-learners" only in the first, "quorum-lost" only in the second`},
		{"another count", func(t *testing.T, root string, d []string) []string {
			writeNight(t, filepath.Join(root, "other"), 3, 4)

			return []string{d[0], d[1], filepath.Join(root, "other")}
		}, "are of 3 and of 4 shards"},
		{"an unsharded night", func(t *testing.T, _ string, d []string) []string {
			edit(t, filepath.Join(d[0], reports.LedgerFile), `"shard": {`, `"shardx": {`)

			return d
		}, `shard-1/ledger.json:5:3: shardx: unknown field`},
		{"an interrupted shard", func(t *testing.T, _ string, d []string) []string {
			// Shard 2 of 3 lost a seed of happy-path (seeds 2 and 5 are its).
			h := huntOf("happy-path", []int64{2}, shard.NewPlan(shard.Shard{Index: 2, Count: 3}, names, seeds).Stamp(), time.Now())
			if _, err := reports.WriteHunt(filepath.Join(d[1], "happy-path"), h); err != nil {
				t.Fatal(err)
			}

			return d
		}, "shard-2/ledger.json: scenarios[0] is not the summary of"},
		{"a shard with another shard's run", func(t *testing.T, root string, d []string) []string {
			// Ledger and hunt agree, but hold seed 1 (shard 1's).
			plan := shard.NewPlan(shard.Shard{Index: 2, Count: 3}, names, seeds)
			h := huntOf("happy-path", []int64{1, 2, 5}, plan.Stamp(), time.Now())

			if _, err := reports.WriteHunt(filepath.Join(d[1], "happy-path"), h); err != nil {
				t.Fatal(err)
			}

			l, err := stats.ReadLedger(filepath.Join(d[1], reports.LedgerFile))
			if err != nil {
				t.Fatal(err)
			}

			l.Scenarios[0] = h.Summary
			if err := l.Write(filepath.Join(d[1], reports.LedgerFile)); err != nil {
				t.Fatal(err)
			}

			return d
		}, "shard-2/happy-path/hunt.json: holds a run of happy-path at seed 1, which is not shard 2/3's"},
		{"a hand-edited count", func(t *testing.T, _ string, d []string) []string {
			edit(t, filepath.Join(d[0], "happy-path", reports.HuntJSONFile), `"passed": 2,`, `"passed": 1,`)

			return d
		}, "shard-1/happy-path/hunt.json:28:15: summary.passed: is 1, but the runs make 2"},
		{"a report outside the shard", func(t *testing.T, _ string, d []string) []string {
			edit(t, filepath.Join(d[0], "happy-path", reports.HuntJSONFile), `"report": "seed-1"`, `"report": "../../../etc"`)

			return d
		}, `shard-1/happy-path/hunt.json: runs[0].report is "../../../etc": a shard's run is in seed-1`},
		{"a hunt.json that is a FIFO", func(t *testing.T, _ string, d []string) []string {
			f := filepath.Join(d[0], "happy-path", reports.HuntJSONFile)
			if err := os.Remove(f); err != nil {
				t.Fatal(err)
			}

			if err := syscall.Mkfifo(f, 0o600); err != nil {
				t.Skip("no FIFO:", err)
			}

			return d
		}, "shard-1/happy-path/hunt.json: cannot read the hunt: is not a regular file (a named pipe)"},
		{"not a shard directory", func(t *testing.T, root string, d []string) []string {
			return append(d, mkdir(t, filepath.Join(root, "empty")))
		}, "empty: holds no ledger.json, hunt.json or certify.json"},
		{"a file", func(t *testing.T, _ string, d []string) []string {
			return append(d, filepath.Join(d[0], reports.LedgerFile))
		}, "shard-1/ledger.json: not a directory"},
		{"a hunt among nights", func(t *testing.T, root string, d []string) []string {
			dir := mkdir(t, filepath.Join(root, "hunt"))
			if _, err := reports.WriteHunt(dir, huntOf("happy-path", seeds, nil, time.Now())); err != nil {
				t.Fatal(err)
			}

			return append(d, dir)
		}, "shard-3 holds a nightly shard, "},
		{"the output is a shard", func(_ *testing.T, root string, d []string) []string {
			return append(d[1:], filepath.Join(root, "merged"))
		}, "merged: the output directory is one of the shards"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			dirs := nightShards(t, root, 3)

			if tc.name == "the output is a shard" {
				writeNight(t, filepath.Join(root, "merged"), 1, 3)
			}

			_, err := Read(tc.prepare(t, root, dirs), filepath.Join(root, "merged"))

			var (
				me *Error
				se *strictjson.Error
			)

			if err == nil || !errors.As(err, &me) && !errors.As(err, &se) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want an input error with %q", err, tc.want)
			}

			if _, err := os.Stat(filepath.Join(root, "merged", reports.NightlyIndexFile)); err == nil && tc.name != "the output is a shard" {
				t.Error("something was written")
			}
		})
	}
}

func certifyShard(k, n int) *reports.Certify {
	plan := shard.NewPlan(shard.Shard{Index: k, Count: n}, []string{"invalid-config", "happy-path"}, []int64{1, 2, 3})
	c := &reports.Certify{
		Command: []string{"./bootstrap.sh"}, Target: "sim", Seeds: []int64{1, 2, 3}, Started: time.Date(2026, 11, 25, 2, 0, k, 0, time.UTC),
		WallMs: 3000, Parallel: 2, Tool: tool, FailOn: []string{reports.Silent, reports.Hung}, Shard: plan.Stamp(),
		Results: []reports.CertifyScenario{{Name: "invalid-config", Expected: reports.Loud}, {Name: "happy-path", Expected: reports.Survived}},
		Skipped: []reports.CertifySkip{{Name: "quorum-lost", Reason: "its faults strike a formed cluster"}},
	}

	for _, p := range plan.Pairs() {
		i := 0
		if p.Scenario == "happy-path" {
			i = 1
		}

		s := &c.Results[i]
		outcome := s.Expected

		if p.Seed == 3 && i == 1 {
			outcome = reports.Silent
		}

		s.Runs = append(s.Runs, reports.CertifyRun{
			Scenario: p.Scenario, Seed: p.Seed, Outcome: outcome, Expected: s.Expected, Diagnoses: []string{},
			Report: filepath.Join(p.Scenario, fmt.Sprintf("seed-%d", p.Seed)), Replay: "talchaos certify ...", DurationMs: 1000,
		})
	}

	return c
}

// A certification's shards merge into every scenario × seed once, its
// counts those of the whole; shards of another command or machine (another
// skipped set) are refused.
func TestMergeCertify(t *testing.T) {
	root := t.TempDir()

	var dirs []string

	for k := 1; k <= 2; k++ {
		d := mkdir(t, filepath.Join(root, fmt.Sprintf("c%d", k)))
		if err := reports.WriteCertify(d, certifyShard(k, 2)); err != nil {
			t.Fatal(err)
		}

		dirs = append(dirs, d)
	}

	m, err := Read(dirs, filepath.Join(root, "out"))
	if err != nil {
		t.Fatal(err)
	}

	c := m.Certify
	if c.Shard != nil || len(c.Results) != 2 || c.Parallel != 4 || c.Results[0].Name != "invalid-config" {
		t.Fatalf("merged %+v", c)
	}

	for _, s := range c.Results {
		if len(s.Runs) != 3 {
			t.Errorf("%s: %d runs, want 3", s.Name, len(s.Runs))
		}

		for i, r := range s.Runs {
			if r.Seed != int64(i+1) || !strings.HasPrefix(r.Report, "../c") {
				t.Errorf("%s run %d: seed %d report %q", s.Name, i, r.Seed, r.Report)
			}
		}
	}

	// A skip's reason may differ between machines (it may name a path),
	// its scenario not.
	other := certifyShard(2, 2)
	other.Skipped[0].Reason = "needs /home/other/.cache/talchaos/kube"

	d := mkdir(t, filepath.Join(root, "other"))
	if err := reports.WriteCertify(d, other); err != nil {
		t.Fatal(err)
	}

	if _, err := Read([]string{dirs[0], d}, filepath.Join(root, "out")); err != nil {
		t.Errorf("another reason for the same skip: %v", err)
	}

	other.Skipped = nil

	if err := reports.WriteCertify(d, other); err != nil {
		t.Fatal(err)
	}

	if _, err := Read([]string{dirs[0], d}, filepath.Join(root, "out")); err == nil || !strings.Contains(err.Error(), "their skipped scenarios (the machines could not run the same ones) differ") {
		t.Errorf("another skipped set: %v", err)
	}

	other = certifyShard(2, 2)
	other.Command = []string{"./other.sh"}

	if err := reports.WriteCertify(d, other); err != nil {
		t.Fatal(err)
	}

	if _, err := Read([]string{dirs[0], d}, filepath.Join(root, "out")); err == nil || !strings.Contains(err.Error(), "their commands differ") {
		t.Errorf("another command: %v", err)
	}
}

// A hunt's shards merge into the whole hunt.
func TestMergeHunt(t *testing.T) {
	root := t.TempDir()

	var dirs []string

	for k := 1; k <= 3; k++ {
		plan := shard.NewPlan(shard.Shard{Index: k, Count: 3}, []string{"too-many-learners"}, seeds)
		d := mkdir(t, filepath.Join(root, fmt.Sprintf("h%d", k)))

		if _, err := reports.WriteHunt(d, huntOf("too-many-learners", plan.SeedsOf("too-many-learners"), plan.Stamp(), time.Date(2026, 1, 1, 0, 0, k, 0, time.UTC))); err != nil {
			t.Fatal(err)
		}

		dirs = append(dirs, d)
	}

	m, err := Read(dirs, filepath.Join(root, "out"))
	if err != nil {
		t.Fatal(err)
	}

	whole := huntOf("too-many-learners", seeds, nil, time.Time{})
	if !reflect.DeepEqual(m.Hunt.Summary, whole.Summary) || m.Hunt.Shard != nil || m.Hunt.WallMs != 3000 {
		t.Errorf("merged %+v, want the summary %+v and 3 s from the first start to the last end", m.Hunt, whole.Summary)
	}

	// An interrupted shard wrote the seeds it finished (1 of 1 and 4).
	plan := shard.NewPlan(shard.Shard{Index: 1, Count: 3}, []string{"too-many-learners"}, seeds)
	if _, err := reports.WriteHunt(dirs[0], huntOf("too-many-learners", []int64{4}, plan.Stamp(), time.Now())); err != nil {
		t.Fatal(err)
	}

	if _, err := Read(dirs, filepath.Join(root, "out")); err == nil || !strings.Contains(err.Error(), "h1/hunt.json: has no run of too-many-learners at seed 1, which is shard 1/3's (an interrupted shard? run it again)") {
		t.Errorf("an interrupted shard: %v", err)
	}
}
