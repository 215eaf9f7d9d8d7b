// Package merge combines the output directories of a sharded run — `talchaos
// nightly`, `hunt` or `certify` with --shard K/N, run on N machines — into
// what one unsharded run writes: the night's ledger and hunts, the hunt, the
// certification. The writers are the unsharded commands' own (package
// reports); this package only reads the shards and puts their runs together.
//
// Every file it reads comes from another machine and is read as untrusted
// input, by the readers of reports and reports/stats (regular files only,
// size limits, strict decoding, self-consistency). Beyond that, the shards
// must be of one run: each stamped (shard.Stamp), by one talchaos build, of
// one count, seeds and scenario set, every shard present once; and each must
// hold exactly the pairs its stamp gives it (shard.Plan), no more (a pair of
// another shard) and no fewer (an interrupted shard). Anything else is an
// error naming the file and what is wrong, and nothing is merged.
//
// The runs' own reports (report.json, report.html) stay where the shards
// wrote them: the merged files point at them by paths relative to the output
// directory, so the output and the shard directories are published together.
package merge

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/shard"
	"github.com/talchaos/talchaos/harness/strictjson"
	"github.com/talchaos/talchaos/reports"
	"github.com/talchaos/talchaos/reports/stats"
)

// Kind is what was sharded.
type Kind string

// The kinds of run, by the file a shard's directory holds.
const (
	Nightly Kind = "nightly" // ledger.json
	Hunt    Kind = "hunt"    // hunt.json
	Certify Kind = "certify" // certify.json
)

// files are the file each kind's shard directory holds at its top.
var files = []struct {
	kind Kind
	name string
}{{Nightly, reports.LedgerFile}, {Hunt, reports.HuntJSONFile}, {Certify, reports.CertifyJSONFile}}

// Merged is what the shards make together: one of Ledger with Hunts
// (Nightly), Hunt, or Certify. Each run's report path is relative to the
// directory its file is written to (OUT/SCENARIO for a night's hunts, OUT
// otherwise), as an unsharded run's are.
type Merged struct {
	Kind   Kind
	Shards int
	// Seeds and Scenarios are the whole run's, sorted.
	Seeds     []int64
	Scenarios []string

	Ledger  *stats.Ledger
	Hunts   []*reports.Hunt
	Hunt    *reports.Hunt
	Certify *reports.Certify
}

// Error is a reason the shards cannot be merged: bad input, whose message
// names the file and what is wrong with it.
type Error struct{ Msg string }

func (e *Error) Error() string { return e.Msg }

func errorf(format string, a ...any) error { return &Error{Msg: fmt.Sprintf(format, a...)} }

// Read reads the shard directories and merges them for writing into out.
// Every problem with the input is an error (an *Error, or the
// *strictjson.Error of a file that does not read).
func Read(dirs []string, out string) (*Merged, error) {
	switch {
	case len(dirs) == 0:
		return nil, errorf("no shard directory given")
	case len(dirs) > shard.MaxCount:
		return nil, errorf("%d shard directories: at most %d", len(dirs), shard.MaxCount)
	}

	absOut, err := filepath.Abs(out)
	if err != nil {
		return nil, err
	}

	kind := Kind("")
	first := ""

	for _, d := range dirs {
		k, err := kindOf(d, absOut)
		if err != nil {
			return nil, err
		}

		if kind != "" && k != kind {
			return nil, errorf("%s holds a %s shard, %s a %s one: merge the shards of one run", first, kind, d, k)
		}

		kind, first = k, d
	}

	m := &Merged{Kind: kind, Shards: len(dirs)}

	switch kind {
	case Nightly:
		err = m.readNight(dirs, absOut)
	case Hunt:
		err = m.readHunts(dirs, absOut)
	case Certify:
		err = m.readCertifications(dirs, absOut)
	}

	if err != nil {
		return nil, err
	}

	return m, nil
}

// kindOf is what dir is the output of, by the one file at its top. out,
// where the merged files go, may not be a shard: writing there would
// overwrite the shard's own files.
func kindOf(dir, absOut string) (Kind, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return "", errorf("%s: %s", dir, problem(err))
	}

	if !fi.IsDir() {
		return "", errorf("%s: not a directory (give the directories the shards wrote)", dir)
	}

	if abs, err := filepath.Abs(dir); err == nil && abs == absOut {
		return "", errorf("%s: the output directory is one of the shards: merge into another (--out)", dir)
	}

	if ofi, err := os.Stat(absOut); err == nil && os.SameFile(fi, ofi) {
		return "", errorf("%s: the output directory is this shard (another name of it): merge into another (--out)", dir)
	}

	var found []Kind

	for _, f := range files {
		if _, err := os.Lstat(filepath.Join(dir, f.name)); err == nil {
			found = append(found, f.kind)
		}
	}

	switch len(found) {
	case 0:
		return "", errorf("%s: holds no %s, %s or %s: not the directory of a nightly, hunt or certify --shard", dir, reports.LedgerFile, reports.HuntJSONFile, reports.CertifyJSONFile)
	case 1:
		return found[0], nil
	}

	return "", errorf("%s: holds the files of a %s and of a %s: which run is it?", dir, found[0], found[1])
}

func problem(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Op + ": " + pe.Err.Error()
	}

	return err.Error()
}

// part is what every shard's file says of the run it belongs to.
type part struct {
	dir, file string
	stamp     *shard.Stamp
	tool      string
}

// readParts reads each shard directory's file name with read, and checks
// (checkParts) the shards are of one run: it returns them in shard order,
// with what read returned by directory. stamp says what a file's stamp and
// tool are.
func readParts[T any](dirs []string, name string, read func(string) (T, error), stamp func(T) (*shard.Stamp, string)) ([]part, map[string]T, error) {
	parts := make([]part, len(dirs))
	got := make(map[string]T, len(dirs))

	for i, d := range dirs {
		file := filepath.Join(d, name)

		v, err := read(file)
		if err != nil {
			return nil, nil, err
		}

		st, tool := stamp(v)
		parts[i] = part{dir: d, file: file, stamp: st, tool: tool}
		got[d] = v
	}

	parts, err := checkParts(parts)

	return parts, got, err
}

// checkParts checks the shards are the shards of one run, each once and
// all of them, and returns them in shard order.
func checkParts(parts []part) ([]part, error) {
	for _, p := range parts {
		if p.stamp == nil {
			return nil, errorf("%s: has no shard stamp: it is the output of an unsharded run (run each part with --shard K/N)", p.file)
		}
	}

	a := parts[0]

	for _, b := range parts[1:] {
		if d := a.stamp.SameRun(b.stamp); d != "" {
			return nil, errorf("%s and %s are shards of different runs: %s", a.file, b.file, d)
		}

		if a.tool != b.tool {
			return nil, errorf("%s and %s were written by different talchaos builds (tool %s and %s): shards merge only from one build, which splits the pairs alike",
				a.file, b.file, strictjson.Quote(a.tool), strictjson.Quote(b.tool))
		}
	}

	byIndex := make([]*part, a.stamp.Count+1)

	for i := range parts {
		p := &parts[i]
		if q := byIndex[p.stamp.Index]; q != nil {
			return nil, errorf("%s and %s are both shard %d/%d: each shard once", q.file, p.file, p.stamp.Index, p.stamp.Count)
		}

		byIndex[p.stamp.Index] = p
	}

	var missing []string

	for k := 1; k <= a.stamp.Count; k++ {
		if byIndex[k] == nil {
			missing = append(missing, fmt.Sprintf("%d/%d", k, a.stamp.Count))
		}
	}

	if len(missing) > 0 {
		return nil, errorf("shard %s missing: %d of %d shards given (%s)", strings.Join(missing, ", "), len(parts), a.stamp.Count, given(parts))
	}

	for _, s := range a.stamp.Scenarios {
		if !scenario.ValidName(s) {
			return nil, errorf("%s: shard.scenarios: %s is not a scenario name", a.file, strictjson.Quote(s))
		}
	}

	out := make([]part, 0, len(parts))
	for _, p := range byIndex[1:] {
		out = append(out, *p)
	}

	return out, nil
}

func given(parts []part) string {
	var s []string
	for _, p := range parts {
		s = append(s, fmt.Sprintf("%s is %d/%d", p.dir, p.stamp.Index, p.stamp.Count))
	}

	return strings.Join(s, ", ")
}

// span is the time from the first shard's start to the last one's end: the
// wall time of a run whose shards ran side by side.
type span struct{ start, end time.Time }

func (s *span) add(start time.Time, wallMs int64) {
	end := start.Add(time.Duration(wallMs) * time.Millisecond)
	if s.start.IsZero() || start.Before(s.start) {
		s.start = start
	}

	if end.After(s.end) {
		s.end = end
	}
}

func (s *span) wallMs() int64 { return s.end.Sub(s.start).Milliseconds() }

// checkSeeds checks the seeds a shard's file ran of one scenario are the
// ones its plan gives it: each once, none of another shard's, none missing.
func checkSeeds(file, name string, plan shard.Plan, ran []int64) error {
	want := plan.SeedsOf(name)

	for _, s := range ran {
		if !slices.Contains(want, s) {
			return errorf("%s: holds a run of %s at seed %d, which is not shard %s's", file, name, s, plan.Shard)
		}
	}

	for _, s := range want {
		if !slices.Contains(ran, s) {
			return errorf("%s: has no run of %s at seed %d, which is shard %s's (an interrupted shard? run it again)", file, name, s, plan.Shard)
		}
	}

	return nil
}

// relative is where a shard's run directory is as seen from the directory
// a merged file is written to, with forward slashes (pages link it).
func relative(from, dir, run string) string {
	abs, err := filepath.Abs(filepath.Join(dir, run))
	if err != nil {
		abs = filepath.Join(dir, run)
	}

	rel, err := filepath.Rel(from, abs)
	if err != nil {
		return filepath.ToSlash(abs)
	}

	return filepath.ToSlash(rel)
}

// huntParts merges the parts of one scenario's hunt: their runs (the seeds
// checked, each report pointed at from outDir), the target they share.
type huntParts struct {
	scenario, target, tool string
	timeScale              float64
	span                   span
	parallel               int
	runs                   []reports.HuntRun
}

// add adds a shard's hunt of the scenario, read from file in dir.
func (hp *huntParts) add(file, dir, outDir string, plan shard.Plan, h *reports.Hunt) error {
	if h.Scenario != hp.scenario {
		return errorf("%s: scenario is %s, want %s", file, strictjson.Quote(h.Scenario), hp.scenario)
	}

	if hp.target == "" {
		hp.target = h.Target
	} else if h.Target != hp.target {
		return errorf("%s: target is %s, another shard's %s: shards of one run have one target", file, strictjson.Quote(h.Target), strictjson.Quote(hp.target))
	}

	ran := make([]int64, len(h.Runs))

	for i, r := range h.Runs {
		if want := fmt.Sprintf("seed-%d", r.Seed); r.Report != want {
			return errorf("%s: runs[%d].report is %s: a shard's run is in %s", file, i, strictjson.Quote(r.Report), want)
		}

		ran[i] = r.Seed
	}

	if err := checkSeeds(file, hp.scenario, plan, ran); err != nil {
		return err
	}

	for _, r := range h.Runs {
		r.Report = relative(outDir, dir, r.Report)
		hp.runs = append(hp.runs, r)
	}

	hp.span.add(h.Started, h.WallMs)
	hp.parallel += h.Parallel

	return nil
}

// hunt is the merged hunt. Parallel is the shards' sum: how many ran at
// once when the shards ran side by side.
func (hp *huntParts) hunt() *reports.Hunt {
	slices.SortFunc(hp.runs, func(a, b reports.HuntRun) int { return cmp.Compare(a.Seed, b.Seed) })

	runs := make([]stats.Run, len(hp.runs))
	for i, r := range hp.runs {
		runs[i] = r.Run
	}

	return &reports.Hunt{
		Scenario: hp.scenario, Target: hp.target, Started: hp.span.start, WallMs: hp.span.wallMs(), Parallel: max(hp.parallel, 1),
		Tool: hp.tool, TimeScale: hp.timeScale, Summary: stats.Summarize(hp.scenario, runs), Runs: hp.runs,
	}
}
