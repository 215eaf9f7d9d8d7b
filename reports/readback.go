package reports

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"unicode"

	"github.com/talchaos/talchaos/harness/inputfile"
	"github.com/talchaos/talchaos/harness/shard"
	"github.com/talchaos/talchaos/harness/strictjson"
	"github.com/talchaos/talchaos/reports/stats"
)

// ReadHunt reads a hunt.json written by WriteHunt (talchaos merge reads a
// shard's). The file is untrusted input, read as ReadJSON reads a report: a
// regular file of at most inputfile.MaxReportBytes, strictly (an unknown
// field, a duplicate key, a wrong type, a required field left out, data after
// the value), and refused when it contradicts itself (Hunt.Validate). Every
// problem is a *strictjson.Error naming the file, line, column and JSON path.
func ReadHunt(path string) (*Hunt, error) { return readFile(path, "the hunt", DecodeHunt) }

// DecodeHunt is ReadHunt of a hunt.json's content; file names it in errors.
func DecodeHunt(file string, data []byte) (*Hunt, error) {
	var h Hunt
	if err := decodeChecked(file, data, &h, "a hunt", HuntSchema, h.Validate); err != nil {
		return nil, err
	}

	return &h, nil
}

// ReadCertify reads a certify.json written by WriteCertify, as ReadHunt
// reads a hunt.json (Certify.Validate).
func ReadCertify(path string) (*Certify, error) {
	return readFile(path, "the certification", DecodeCertify)
}

// DecodeCertify is ReadCertify of a certify.json's content.
func DecodeCertify(file string, data []byte) (*Certify, error) {
	var c Certify
	if err := decodeChecked(file, data, &c, "a certification", CertifySchema, c.Validate); err != nil {
		return nil, err
	}

	return &c, nil
}

// readFile reads the untrusted file at path (what names it in a message)
// and decodes it.
func readFile[T any](path, what string, decode func(string, []byte) (T, error)) (T, error) {
	data, err := inputfile.Read(path, inputfile.MaxReportBytes)
	if err != nil {
		var zero T

		return zero, &strictjson.Error{File: path, Msg: "cannot read " + what + ": " + inputfile.Problem(err), Err: err}
	}

	return decode(path, data)
}

// decodeChecked decodes data strictly into v, a file of the one schema
// want, and validates it: a file of another schema (a report, a ledger)
// fails with that rather than with whatever its shape causes.
func decodeChecked(file string, data []byte, v any, what, want string, validate func() []*strictjson.Error) error {
	if err := strictjson.Decode(file, data, v, readOptions); err != nil {
		if serr := strictjson.SchemaError(file, data, what, want); serr != nil {
			return serr
		}

		return err
	}

	if serr := strictjson.SchemaError(file, data, what, want); serr != nil {
		return serr
	}

	if errs := validate(); len(errs) > 0 {
		return strictjson.Locate(file, data, errs)
	}

	return nil
}

// readOptions are the fields hunt.json and certify.json must have: every
// one talchaos has always written (an empty list as []).
var readOptions = strictjson.Options{Required: map[reflect.Type][]string{
	reflect.TypeFor[Hunt]():            {"schema", "scenario", "target", "started", "wallMs", "parallel", "summary", "runs"},
	reflect.TypeFor[HuntRun]():         {"seed", "verdict", "durationMs", "report"},
	reflect.TypeFor[stats.Summary]():   {"scenario", "runs", "passed", "rate", "rateLow", "rateHigh", "p50Ms", "p95Ms", "outcomes"},
	reflect.TypeFor[stats.Outcome]():   {"verdict", "seeds"},
	reflect.TypeFor[Certify]():         {"schema", "command", "target", "seeds", "started", "wallMs", "parallel", "tool", "failOn", "scenarios"},
	reflect.TypeFor[CertifyScenario](): {"name", "expected", "counts", "runs"},
	reflect.TypeFor[CertifyRun]():      {"scenario", "seed", "outcome", "expected", "diagnoses", "report", "replay", "durationMs"},
	reflect.TypeFor[CertifySkip]():     {"name", "reason"},
	reflect.TypeFor[shard.Stamp]():     {"index", "count", "seeds", "scenarios"},
}}

// Validate reports what makes a hunt contradict itself, each problem at its
// JSON path: another schema, no scenario, a negative wall time, a
// parallelism below one, more than stats.MaxRuns runs, a run of an unknown
// verdict, of a negative duration, of a seed given before or out of order,
// whose report directory is not a plain relative path, or whose faults
// that never struck are unnamed or named twice; a summary that is
// not the one its runs make (stats.Summarize); a time scale out of range;
// an unusable shard stamp, one whose run does not hunt this scenario or
// whose time scale is not the hunt's.
func (h *Hunt) Validate() []*strictjson.Error {
	var p strictjson.Problems

	if h.Schema != HuntSchema {
		p.Addf("schema", "is %s: want %s", strictjson.Quote(h.Schema), HuntSchema)
	}

	if h.Scenario == "" {
		p.Addf("scenario", "is empty")
	}

	nonNegative(&p, "wallMs", h.WallMs)

	if h.Parallel < 1 {
		p.Addf("parallel", "is %d: at least 1", h.Parallel)
	}

	shard.CheckTimeScale(&p, "timeScale", h.TimeScale)

	if h.Shard != nil {
		h.Shard.Check(&p, "shard")

		if !slices.Contains(h.Shard.Scenarios, h.Scenario) {
			p.Addf("shard.scenarios", "do not hold the hunt's scenario %s", strictjson.Quote(h.Scenario))
		}

		if h.Shard.TimeScale != h.TimeScale {
			p.Addf("timeScale", "is %s, but the shard's (shard.timeScale) is %s", shard.ScaleText(h.TimeScale), shard.ScaleText(h.Shard.TimeScale))
		}
	}

	if len(h.Runs) > stats.MaxRuns {
		p.Addf("runs", "holds %d runs: at most %d", len(h.Runs), stats.MaxRuns)

		return p.Errs()
	}

	runs := make([]stats.Run, len(h.Runs))

	for i, r := range h.Runs {
		rp := strictjson.Index("runs", i)

		if !slices.Contains(stats.Verdicts, r.Verdict) {
			p.Addf(strictjson.Key(rp, "verdict"), "is %s: want %s", strictjson.Quote(r.Verdict), stats.VerdictList)
		}

		if i > 0 && r.Seed <= h.Runs[i-1].Seed {
			p.Addf(strictjson.Key(rp, "seed"), "is %d after seed %d: runs are written once each, by seed", r.Seed, h.Runs[i-1].Seed)
		}

		nonNegative(&p, strictjson.Key(rp, "durationMs"), r.DurationMs)
		checkReportDir(&p, strictjson.Key(rp, "report"), r.Report)
		checkUnfired(&p, strictjson.Key(rp, "unfired"), r.Unfired)

		runs[i] = r.Run
	}

	if len(p.Errs()) == 0 {
		if at, got, want := h.Summary.Mismatch(stats.Summarize(h.Scenario, runs), "summary"); at != "" {
			p.Addf(at, "is %s, but the runs make %s", got, want)
		}
	}

	return p.Errs()
}

// checkUnfired checks a run's list of faults that never struck: names, each
// once.
func checkUnfired(p *strictjson.Problems, path string, names []string) {
	for i, n := range names {
		switch {
		case n == "":
			p.Addf(strictjson.Index(path, i), "is empty: a fault's name")
		case slices.Index(names, n) < i:
			p.Addf(strictjson.Index(path, i), "%s is listed twice", strictjson.Quote(n))
		}
	}
}

// Validate reports what makes a certification contradict itself, each
// problem at its JSON path: another schema, no command, seeds given twice,
// a parallelism below one, an unknown outcome in failOn; a scenario unnamed
// or listed twice, expecting neither survived nor loud, whose counts are not
// its runs' or name an unknown outcome; a run of another scenario or
// expectation, of a seed not in seeds or run twice, of an unknown outcome,
// a negative duration or a report directory that is not a plain relative
// path; an unusable shard stamp, or one of another scenario set or seeds.
func (c *Certify) Validate() []*strictjson.Error {
	var p strictjson.Problems

	if c.Schema != CertifySchema {
		p.Addf("schema", "is %s: want %s", strictjson.Quote(c.Schema), CertifySchema)
	}

	if len(c.Command) == 0 {
		p.Addf("command", "is empty: certify runs a command")
	}

	seeds := map[int64]bool{}

	for i, s := range c.Seeds {
		if seeds[s] {
			p.Addf(strictjson.Index("seeds", i), "%d is listed twice", s)
		}

		seeds[s] = true
	}

	if c.Parallel < 1 {
		p.Addf("parallel", "is %d: at least 1", c.Parallel)
	}

	nonNegative(&p, "wallMs", c.WallMs)

	for i, o := range c.FailOn {
		if !slices.Contains(CertifyOutcomes, o) {
			p.Addf(strictjson.Index("failOn", i), "is %s: want one of %s", strictjson.Quote(o), strings.Join(CertifyOutcomes, ", "))
		}
	}

	names := strictjson.Names{What: "scenario", List: "scenarios", Twice: "listed twice"}
	total := 0

	for i := range c.Results {
		if p.Full() {
			break
		}

		s := &c.Results[i]
		sp := strictjson.Index("scenarios", i)
		names.Check(&p, strictjson.Key(sp, "name"), i, s.Name)

		if s.Expected != Survived && s.Expected != Loud {
			p.Addf(strictjson.Key(sp, "expected"), "is %s: want %s or %s", strictjson.Quote(s.Expected), Survived, Loud)
		}

		if total += len(s.Runs); total > stats.MaxRuns {
			p.Addf(strictjson.Key(sp, "runs"), "bring the runs to more than %d", stats.MaxRuns)

			return p.Errs()
		}

		s.check(&p, sp, seeds)
	}

	if c.Shard != nil {
		c.Shard.Check(&p, "shard")

		given := make([]string, len(c.Results))
		for i, s := range c.Results {
			given[i] = s.Name
		}

		slices.Sort(given)

		if !slices.Equal(given, c.Shard.Scenarios) {
			p.Addf("shard.scenarios", "are not the scenarios the file lists (%s)", strictjson.Quote(strings.Join(given, ", ")))
		}

		if sorted := slices.Sorted(slices.Values(c.Seeds)); !slices.Equal(sorted, c.Shard.Seeds) {
			p.Addf("shard.seeds", "are not the file's seeds (%s)", shard.Ranges(sorted))
		}
	}

	return p.Errs()
}

// check checks one scenario's counts and runs at sp.
func (s *CertifyScenario) check(p *strictjson.Problems, sp string, seeds map[int64]bool) {
	counts := map[string]int{}
	ran := map[int64]bool{}

	for j, r := range s.Runs {
		rp := strictjson.Index(strictjson.Key(sp, "runs"), j)

		switch {
		case r.Scenario != s.Name:
			p.Addf(strictjson.Key(rp, "scenario"), "is %s, in the runs of %s", strictjson.Quote(r.Scenario), strictjson.Quote(s.Name))
		case r.Expected != s.Expected:
			p.Addf(strictjson.Key(rp, "expected"), "is %s, but the scenario expects %s", strictjson.Quote(r.Expected), strictjson.Quote(s.Expected))
		case !seeds[r.Seed]:
			p.Addf(strictjson.Key(rp, "seed"), "is %d, not one of the seeds", r.Seed)
		case ran[r.Seed]:
			p.Addf(strictjson.Key(rp, "seed"), "%d is run twice", r.Seed)
		case !slices.Contains(CertifyOutcomes, r.Outcome):
			p.Addf(strictjson.Key(rp, "outcome"), "is %s: want one of %s", strictjson.Quote(r.Outcome), strings.Join(CertifyOutcomes, ", "))
		}

		ran[r.Seed] = true
		counts[r.Outcome]++

		nonNegative(p, strictjson.Key(rp, "durationMs"), r.DurationMs)
		checkReportDir(p, strictjson.Key(rp, "report"), r.Report)
	}

	for _, o := range slices.Sorted(maps.Keys(s.Counts)) {
		if !slices.Contains(CertifyOutcomes, o) {
			p.Addf(strictjson.Key(strictjson.Key(sp, "counts"), o), "is not an outcome (%s)", strings.Join(CertifyOutcomes, ", "))
		}
	}

	for _, o := range CertifyOutcomes {
		if s.Counts[o] != counts[o] {
			p.Addf(strictjson.Key(strictjson.Key(sp, "counts"), o), "is %d, but %d run(s) are %s", s.Counts[o], counts[o], o)
		}
	}
}

// checkReportDir checks a run's report directory as a file gives it: a
// relative path with forward slashes, that a page links to (so nothing an
// href would take for a URL scheme) and a terminal may show.
func checkReportDir(p *strictjson.Problems, path, dir string) {
	switch {
	case dir == "":
		p.Addf(path, "is empty")
	case strings.HasPrefix(dir, "/"):
		p.Addf(path, "is %s: want a path relative to the file", strictjson.Quote(dir))
	case strings.ContainsAny(dir, `:\`) || strings.ContainsFunc(dir, unicode.IsControl):
		p.Addf(path, "is %s: want a plain relative path (no colon, backslash or control character)", strictjson.Quote(dir))
	}
}

func nonNegative(p *strictjson.Problems, path string, v int64) {
	if v < 0 {
		p.Addf(path, "is %d: not negative", v)
	}
}
