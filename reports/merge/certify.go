package merge

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/talchaos/talchaos/harness/shard"
	"github.com/talchaos/talchaos/harness/strictjson"
	"github.com/talchaos/talchaos/reports"
)

// readCertifications merges the shards of a certification (certify.json
// each): one command, target, --fail-on and list of scenarios (with what
// each expects) and of skipped ones, every shard with its own seeds of each.
func (m *Merged) readCertifications(dirs []string, out string) error {
	parts, certs, err := readParts(dirs, reports.CertifyJSONFile, reports.ReadCertify, func(c *reports.Certify) (*shard.Stamp, string) { return c.Shard, c.Tool })
	if err != nil {
		return err
	}

	a := certs[parts[0].dir]
	merged := *a
	merged.Shard, merged.Results = nil, nil
	merged.Parallel = 0

	var sp span

	for _, p := range parts {
		c := certs[p.dir]

		if err := sameCertification(parts[0].file, a, p.file, c); err != nil {
			return err
		}

		sp.add(c.Started, c.WallMs)
		merged.Parallel += c.Parallel
	}

	for i, s := range a.Results {
		res := s
		res.Runs, res.Counts = nil, nil

		for _, p := range parts {
			runs := certs[p.dir].Results[i].Runs
			ran := make([]int64, len(runs))

			for j, r := range runs {
				if want := filepath.Join(s.Name, fmt.Sprintf("seed-%d", r.Seed)); r.Report != want {
					return errorf("%s: scenarios[%d].runs[%d].report is %s: a shard's run is in %s", p.file, i, j, strictjson.Quote(r.Report), want)
				}

				ran[j] = r.Seed
				r.Report = relative(out, p.dir, r.Report)
				res.Runs = append(res.Runs, r)
			}

			if err := checkSeeds(p.file, s.Name, p.stamp.Plan(), ran); err != nil {
				return err
			}
		}

		slices.SortFunc(res.Runs, func(a, b reports.CertifyRun) int { return cmp.Compare(a.Seed, b.Seed) })
		merged.Results = append(merged.Results, res)
	}

	merged.Started, merged.WallMs = sp.start, sp.wallMs()
	m.Seeds, m.Scenarios = parts[0].stamp.Seeds, parts[0].stamp.Scenarios
	m.Certify = &merged

	return nil
}

// sameCertification says how certification b (from file fb) is not of the
// same run as a (from fa): what was certified, where, what fails it, and
// which scenarios ran or were skipped, with what each expects.
func sameCertification(fa string, a *reports.Certify, fb string, b *reports.Certify) error {
	differ := func(what string, x, y any) error {
		return errorf("%s and %s are not of one certification: their %s differ (%v and %v)", fa, fb, what, x, y)
	}

	switch {
	case !slices.Equal(a.Command, b.Command):
		return differ("commands", strictjson.Quote(fmt.Sprint(a.Command)), strictjson.Quote(fmt.Sprint(b.Command)))
	case a.Target != b.Target:
		return differ("targets", strictjson.Quote(a.Target), strictjson.Quote(b.Target))
	case !slices.Equal(a.FailOn, b.FailOn):
		return differ("--fail-on", a.FailOn, b.FailOn)
	case !slices.Equal(skippedNames(a), skippedNames(b)):
		// By name: a reason may name a machine's own paths.
		return differ("skipped scenarios (the machines could not run the same ones)", skippedNames(a), skippedNames(b))
	case len(a.Results) != len(b.Results):
		return differ("scenario lists", len(a.Results), len(b.Results))
	}

	for i := range a.Results {
		x, y := a.Results[i], b.Results[i]
		if x.Name != y.Name || x.Expected != y.Expected || x.Description != y.Description {
			return differ(fmt.Sprintf("scenarios[%d]", i), strictjson.Quote(x.Name+" expects "+x.Expected), strictjson.Quote(y.Name+" expects "+y.Expected))
		}
	}

	return nil
}

func skippedNames(c *reports.Certify) []string {
	var out []string
	for _, s := range c.Skipped {
		out = append(out, strictjson.Quote(s.Name))
	}

	return out
}
