// Command bench measures talchaos on this machine and prints one table
// (`make bench`): the time to the outcome of every built-in scenario and of
// the whole catalogue, the happy path against bare embedded etcd members
// forming the same way (the floor: formation wall, CPU and peak RSS, each in
// a process of its own), a 7-control-plane + 50-worker cluster's memory,
// CPU and formation time, a 20-seed hunt at one seed at a time and at the
// default parallelism, and the catalogue over 20 seeds as 4 shards one after another
// (what a 4-runner matrix takes: the longest shard).
//
// It drives the built binary (-bin), as a user would, so that wall times,
// CPU and the peak RSS are those of a real talchaos process; the floor, etcd
// alone, runs in this command started again (-floor-child).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/talchaos/talchaos/scenarios"
)

func main() {
	bin := flag.String("bin", "bin/talchaos", "the talchaos binary")
	runs := flag.Int("runs", 5, "runs per scenario (the median is shown)")
	only := flag.String("only", "", "comma-separated figures to measure: scenarios, floor, size, kubernetes, hunt, shards (default: all)")
	list := flag.String("scenarios", "", "comma-separated built-in scenarios for figures 1 and 5 (default: all)")
	shardSeeds := flag.String("shard-seeds", "1-20", "figure 5: the seeds of the sharded night")
	shardCount := flag.Int("shards", 4, "figure 5: the shards it is split into")
	shardsOut := flag.String("shards-out", "", "figure 5: keep the shards and the merged night here (default: a temp dir, removed)")
	floorChild := flag.String("floor-child", "", "internal: form the floor in this directory, print its formation time and exit")
	floorSeed := flag.Uint64("floor-seed", 1, "internal: the floor child's seed")
	flag.Parse()

	// Figure 2's floor runs in a process of its own, so that its CPU and
	// peak RSS are its own.
	if *floorChild != "" {
		d, err := bareFormation(context.Background(), *floorChild, 3, 60, *floorSeed)
		if err != nil {
			fail(err)
		}

		fmt.Println(d)

		return
	}

	abs, err := filepath.Abs(*bin)
	if err != nil {
		fail(err)
	}

	work, err := os.MkdirTemp("", "talchaos-bench-")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(work) //nolint:errcheck

	b := &bench{bin: abs, work: work, runs: *runs}

	want := func(name string) bool { return *only == "" || slices.Contains(strings.Split(*only, ","), name) }

	names := scenarios.Names()
	if *list != "" {
		names = strings.Split(*list, ",")
	}

	fmt.Printf("talchaos bench on %d cores, %s/%s, %s\n\n", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, time.Now().UTC().Format("2006-01-02"))

	var rows [][]string

	if want("scenarios") {
		rows = append(rows, b.scenarios(names)...)
	}

	if want("floor") {
		rows = append(rows, b.floor()...)
	}

	if want("size") {
		rows = append(rows, b.size()...)
	}

	if want("kubernetes") {
		rows = append(rows, b.kubernetes()...)
	}

	if want("hunt") {
		rows = append(rows, b.hunt()...)
	}

	if want("shards") {
		rows = append(rows, b.shards(names, *list == "", *shardSeeds, *shardCount, *shardsOut)...)
	}

	fmt.Println("| figure | measured | goal |")
	fmt.Println("|---|---|---|")

	for _, r := range rows {
		fmt.Printf("| %s | %s | %s |\n", r[0], r[1], r[2])
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(3)
}

type bench struct {
	bin  string
	work string
	runs int
}

// talchaos runs the binary in dir and returns its wall time and peak RSS.
func (b *bench) talchaos(dir string, args ...string) (time.Duration, int64, []byte, error) {
	u, out, err := b.measuredIn(dir, b.bin, args...)
	if err != nil {
		// The first line, which a table row shows, says why: talchaos's
		// own last line ("talchaos: …").
		err = fmt.Errorf("%w: %s\n%s", err, lastLine(out), out)
	}

	return u.wall, u.rss, out, err
}

func asExit(err error, ee **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError) //nolint:errorlint // exec returns it unwrapped
	if ok {
		*ee = e
	}

	return ok
}

// huntJSON is the part of hunt.json read here.
type huntJSON struct {
	WallMs  int64 `json:"wallMs"`
	Summary struct {
		Runs   int   `json:"runs"`
		Passed int   `json:"passed"`
		P50Ms  int64 `json:"p50Ms"`
	} `json:"summary"`
	Runs []struct {
		Seed    int64  `json:"seed"`
		Verdict string `json:"verdict"`
		Failure string `json:"failure"`
	} `json:"runs"`
}

func (b *bench) hunt1(name, seeds string, parallel int) (*huntJSON, error) {
	dir := filepath.Join(b.work, fmt.Sprintf("hunt-%s-%s-p%d", name, seeds, parallel))

	args := []string{"hunt", name, "--seeds", seeds, "--report-dir", dir}
	if parallel > 0 {
		args = append(args, "--parallel", fmt.Sprint(parallel))
	}

	if _, _, _, err := b.talchaos(b.work, args...); err != nil {
		return nil, err
	}

	h, err := readHunt(filepath.Join(dir, "hunt.json"))
	if err != nil {
		return nil, err
	}

	os.RemoveAll(dir) //nolint:errcheck // reports of many runs: keep the temp dir small

	return h, nil
}

func readHunt(file string) (*huntJSON, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}

	var h huntJSON
	if err := json.Unmarshal(data, &h); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}

	return &h, nil
}

// scenarios is figure 1: each built-in's median time to the outcome over
// b.runs seeds, two at a time (this machine's cores), against Step 14's goal
// of 10 s; then the wall time of them all (the catalogue x b.runs seeds, hunt
// after hunt as nightly runs them) and what 20 seeds would take at that rate.
func (b *bench) scenarios(names []string) [][]string {
	const goal = "≤ 10 s"

	var (
		rows       [][]string
		total      time.Duration
		over, errs int
	)

	for _, name := range names {
		fmt.Fprintf(os.Stderr, "bench: %s, seeds 1-%d\n", name, b.runs)

		h, err := b.hunt1(name, fmt.Sprintf("1-%d", b.runs), 2)
		if err != nil {
			rows = append(rows, []string{"1. time to the outcome: " + name, "error: " + firstLine(err), goal})
			errs++

			continue
		}

		total += time.Duration(h.WallMs) * time.Millisecond

		if h.Summary.P50Ms > 10_000 {
			over++
		}

		rows = append(rows, []string{
			"1. time to the outcome: " + name,
			fmt.Sprintf("median %.1f s (%d of %d passed%s)", float64(h.Summary.P50Ms)/1000, h.Summary.Passed, h.Summary.Runs, notPassed(h)),
			goal,
		})
	}

	if len(names) > 1 {
		measured := fmt.Sprintf("%s; x 20 seeds ≈ %s; %d of %d medians over 10 s", minSec(total), minSec(total*20/time.Duration(b.runs)), over, len(names)-errs)
		if errs > 0 {
			measured += fmt.Sprintf("; %d built-ins failed to run", errs)
		}

		rows = append(rows, []string{fmt.Sprintf("1. %d built-ins x %d seeds, hunt after hunt (2 at a time)", len(names), b.runs), measured, "x 20 seeds ≤ 20 min"})
	}

	return rows
}

// notPassed names the seeds whose expectations did not hold and their
// verdicts and first failed checks ("; seed 3 fail: …"), so that a changed outcome can be run again.
func notPassed(h *huntJSON) string {
	var s string

	for _, r := range h.Runs {
		if r.Verdict != "pass" {
			s += fmt.Sprintf("; seed %d %s: %.100s", r.Seed, r.Verdict, r.Failure)
		}
	}

	return s
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")

	return s
}

// hunt is figure 4: 20 seeds of too-many-learners at one seed at a time and
// at the default parallelism.
func (b *bench) hunt() [][]string {
	var rows [][]string

	var verdicts [2][]string

	for i, p := range []int{1, 0} {
		label := "--parallel 1"
		if p == 0 {
			label = "default --parallel"
		}

		fmt.Fprintf(os.Stderr, "bench: hunt too-many-learners --seeds 1-20, %s\n", label)

		h, err := b.hunt1("too-many-learners", "1-20", p)
		if err != nil {
			rows = append(rows, []string{"4. hunt too-many-learners --seeds 1-20, " + label, "error: " + firstLine(err), ""})

			continue
		}

		for _, r := range h.Runs {
			verdicts[i] = append(verdicts[i], fmt.Sprintf("%d:%s", r.Seed, r.Verdict))
		}

		goal := ""
		if p == 0 {
			goal = "under 3 min, same verdicts as --parallel 1"
		}

		rows = append(rows, []string{
			"4. hunt too-many-learners --seeds 1-20, " + label,
			fmt.Sprintf("%.0f s wall, rate %.2f", float64(h.WallMs)/1000, float64(h.Summary.Passed)/float64(max(h.Summary.Runs, 1))),
			goal,
		})
	}

	if len(verdicts[0]) > 0 && len(verdicts[1]) > 0 {
		same := "same verdicts"
		if !slices.Equal(verdicts[0], verdicts[1]) {
			same = "verdicts differ: " + strings.Join(verdicts[0], " ") + " vs " + strings.Join(verdicts[1], " ")
		}

		rows[len(rows)-1][1] += ", " + same
	}

	return rows
}

// size is figure 3: peak RSS and formation time of 7 control planes and 50
// workers.
func (b *bench) size() [][]string {
	fmt.Fprintln(os.Stderr, "bench: 7 control planes + 50 workers")

	file := filepath.Join(b.work, "seven-fifty.yaml")
	if err := os.WriteFile(file, []byte(sevenFifty), 0o600); err != nil {
		fail(err)
	}

	dir := filepath.Join(b.work, "seven-fifty")

	u, out, err := b.measured(b.bin, "run", file, "--report-dir", dir)
	if err != nil {
		return [][]string{{"3. 7 control planes + 50 workers", "error: " + firstLine(err) + ": " + lastLine(out), "under 1 GiB"}}
	}

	rep, err := readReport(filepath.Join(dir, "report.json"))
	if err != nil {
		fail(err)
	}

	formed := "not formed"
	if last := rep.lastPromotion(); last > 0 {
		formed = fmt.Sprintf("formed %.1f s after bootstrap", (last - rep.bootstrapMs()).Seconds())
	}

	return [][]string{{
		"3. 7 control planes + 50 workers",
		fmt.Sprintf("peak RSS %.0f MiB; %s; verdict %s in %.0f s; CPU %.1f s (%.2f s a node)", float64(u.rss)/(1<<20), formed, rep.Verdict,
			u.wall.Seconds(), u.cpu.Seconds(), u.cpu.Seconds()/57),
		"under 1 GiB",
	}}
}

const sevenFifty = `apiVersion: talchaos/v1
kind: Scenario
name: seven-fifty
talos: v1.12
timeScale: 60
cluster:
  controlPlanes: 7
  workers: 50
orchestrator:
  name: resilient
expect:
  within: 30m
  converged: true
  voters: 7
  learners: 0
`

// report is the part of report.json read here.
type report struct {
	Verdict string `json:"verdict"`
	Outcome struct {
		Promotions []struct {
			PromotedMs int64 `json:"promotedMs"`
		} `json:"promotions"`
	} `json:"outcome"`
	History struct {
		Entries []struct {
			WallMs int64 `json:"wallMs"`
			Call   *struct {
				RPC  string `json:"rpc"`
				Code string `json:"code"`
			} `json:"call"`
			Observed *struct {
				APIServer *struct {
					Ready     bool     `json:"ready"`
					Endpoints []string `json:"endpoints"`
					Nodes     []struct {
						Ready bool `json:"ready"`
					} `json:"nodes"`
				} `json:"apiServer"`
			} `json:"observed"`
		} `json:"entries"`
	} `json:"history"`
}

func readReport(path string) (*report, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}

	var r report

	return &r, json.Unmarshal(data, &r)
}

// bootstrapMs is when the Bootstrap call that succeeded returned.
func (r *report) bootstrapMs() time.Duration {
	for _, e := range r.History.Entries {
		if e.Call != nil && e.Call.RPC == "Bootstrap" && e.Call.Code == "OK" {
			return time.Duration(e.WallMs) * time.Millisecond
		}
	}

	return 0
}

// lastPromotion is when the last learner was seen promoted (0: one never was).
func (r *report) lastPromotion() time.Duration {
	var last int64

	for _, p := range r.Outcome.Promotions {
		if p.PromotedMs < 0 {
			return 0
		}

		last = max(last, p.PromotedMs)
	}

	return time.Duration(last) * time.Millisecond
}

// floor is figure 2: the happy path against bare embedded etcd members
// forming the same way (the floor), each in a process of its own: the
// formation's wall time (bootstrap to the last promotion), and the whole
// process's CPU (user + sys) and peak RSS; the medians of b.runs seeds and
// their ratios (Step 14's goals: wall 1.1x, CPU 3x, RSS 1.5x).
func (b *bench) floor() [][]string {
	var sim, bare []usage

	for i := range b.runs {
		fmt.Fprintf(os.Stderr, "bench: happy path on the sim and bare etcd, seed %d\n", i+1)

		dir := filepath.Join(b.work, fmt.Sprintf("happy-%d", i))

		u, out, err := b.measured(b.bin, "run", "happy-path", "--seed", fmt.Sprint(i+1), "--report-dir", dir)
		if err != nil {
			return [][]string{{"2. happy path on the sim ÷ bare etcd", "error: " + firstLine(err) + ": " + lastLine(out), "wall ≤ 1.1, CPU ≤ 3, RSS ≤ 1.5"}}
		}

		rep, err := readReport(filepath.Join(dir, "report.json"))
		if err != nil {
			fail(err)
		}

		if last := rep.lastPromotion(); last > 0 {
			u.formed = last - rep.bootstrapMs()
			sim = append(sim, u)
		}

		self, err := os.Executable()
		if err != nil {
			fail(err)
		}

		u, out, err = b.measured(self, "-floor-child", filepath.Join(b.work, fmt.Sprintf("bare-%d", i)), "-floor-seed", fmt.Sprint(i+1))
		if err != nil {
			return [][]string{{"2. happy path on the sim ÷ bare etcd", "error: " + firstLine(err), "wall ≤ 1.1, CPU ≤ 3, RSS ≤ 1.5"}}
		}

		if u.formed, err = time.ParseDuration(lastLine(out)); err != nil {
			fail(fmt.Errorf("the floor's child printed %q: %w", out, err))
		}

		bare = append(bare, u)
	}

	if len(sim) == 0 {
		return [][]string{{"2. happy path on the sim ÷ bare etcd", "the sim never formed", "wall ≤ 1.1, CPU ≤ 3, RSS ≤ 1.5"}}
	}

	s, e := medianUsage(sim), medianUsage(bare)
	label := " (median of " + fmt.Sprint(b.runs) + ")"

	return [][]string{
		{
			"2. happy path ÷ bare etcd: formation wall" + label,
			fmt.Sprintf("%.2f (sim %.2f s, bare etcd %.2f s)", s.formed.Seconds()/e.formed.Seconds(), s.formed.Seconds(), e.formed.Seconds()),
			"≤ 1.1",
		},
		{
			"2. happy path ÷ bare etcd: CPU, user + sys, whole process" + label,
			fmt.Sprintf("%.2f (sim %.2f s, bare etcd %.2f s)", s.cpu.Seconds()/e.cpu.Seconds(), s.cpu.Seconds(), e.cpu.Seconds()),
			"≤ 3",
		},
		{
			"2. happy path ÷ bare etcd: peak RSS" + label,
			fmt.Sprintf("%.2f (sim %.0f MiB, bare etcd %.0f MiB)", float64(s.rss)/float64(e.rss), float64(s.rss)/(1<<20), float64(e.rss)/(1<<20)),
			"≤ 1.5",
		},
	}
}

// usage is what one measured process took.
type usage struct {
	wall   time.Duration // the whole process
	formed time.Duration // bootstrap to the last promotion
	cpu    time.Duration // user + sys
	rss    int64         // peak, bytes
}

// measured runs bin and returns its CPU time and peak RSS (from its rusage)
// and its standard output.
func (b *bench) measured(bin string, args ...string) (usage, []byte, error) {
	return b.measuredIn(b.work, bin, args...)
}

// measuredIn is measured with dir as the working directory; the output is
// stdout and stderr together.
func (b *bench) measuredIn(dir, bin string, args ...string) (usage, []byte, error) {
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir

	start := time.Now()
	out, err := cmd.CombinedOutput()
	wall := time.Since(start)

	// Exit 1 is a scenario whose expectations did not hold: still measured.
	if ee := (*exec.ExitError)(nil); err != nil && asExit(err, &ee) && ee.ExitCode() == 1 {
		err = nil
	}

	if err != nil {
		return usage{}, out, fmt.Errorf("%s %s: %w", filepath.Base(bin), strings.Join(args, " "), err)
	}

	u := usage{wall: wall}

	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		u.rss = ru.Maxrss * 1024 // kilobytes on Linux
	}

	u.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()

	return u, out, nil
}

// medianUsage takes the median of each figure on its own.
func medianUsage(us []usage) usage {
	var formed, cpu, rss []time.Duration

	for _, u := range us {
		formed, cpu, rss = append(formed, u.formed), append(cpu, u.cpu), append(rss, time.Duration(u.rss))
	}

	return usage{formed: median(formed), cpu: median(cpu), rss: int64(median(rss))}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)

	return s[len(s)/2]
}

// lastLine is the last non-empty line of a command's output (talchaos prints
// its verdict and the report's path last).
func lastLine(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")

	return lines[len(lines)-1]
}
