package merge

import (
	"path/filepath"
	"reflect"
	"slices"
	"time"

	"github.com/talchaos/talchaos/harness/shard"
	"github.com/talchaos/talchaos/reports"
	"github.com/talchaos/talchaos/reports/stats"
)

// readNight merges the shards of a night: each shard's ledger.json, and
// the hunt.json of every scenario it ran (DIR/SCENARIO/), which must be the
// ledger's summary of it and of the shard's seeds of it.
func (m *Merged) readNight(dirs []string, out string) error {
	parts, ledgers, err := readParts(dirs, reports.LedgerFile, stats.ReadLedger, func(l *stats.Ledger) (*shard.Stamp, string) { return l.Shard, l.Tool })
	if err != nil {
		return err
	}

	stamp := parts[0].stamp
	hunts := map[string]*huntParts{}

	var created time.Time

	for _, p := range parts {
		l, plan := ledgers[p.dir], p.stamp.Plan()

		if created.IsZero() || l.Created.Before(created) {
			created = l.Created
		}

		for _, name := range stamp.Scenarios {
			i := slices.IndexFunc(l.Scenarios, func(s stats.Summary) bool { return s.Scenario == name })

			switch runs := len(plan.SeedsOf(name)); {
			case runs == 0 && i >= 0:
				return errorf("%s: lists %s, of which shard %s has no seed", p.file, name, plan.Shard)
			case runs == 0:
				continue
			case i < 0:
				return errorf("%s: does not list %s, of which shard %s runs %d seed(s) (an interrupted shard? run it again)", p.file, name, plan.Shard, runs)
			}

			file := filepath.Join(p.dir, name, reports.HuntJSONFile)

			h, err := reports.ReadHunt(file)
			if err != nil {
				return err
			}

			switch {
			case h.Shard == nil || !reflect.DeepEqual(*h.Shard, *p.stamp):
				return errorf("%s: its shard stamp is not its ledger's (%s): a hunt of another run", file, p.file)
			case h.Tool != p.tool:
				return errorf("%s: tool is %q, its ledger's (%s) %q", file, h.Tool, p.file, p.tool)
			}

			if at, got, want := l.Scenarios[i].Mismatch(h.Summary, ""); at != "" {
				return errorf("%s: scenarios[%d] is not the summary of %s: %s is %s there, %s in the hunt", p.file, i, file, at, got, want)
			}

			hp := hunts[name]
			if hp == nil {
				hp = &huntParts{scenario: name, tool: p.tool, timeScale: stamp.TimeScale}
				hunts[name] = hp
			}

			if err := hp.add(file, filepath.Join(p.dir, name), filepath.Join(out, name), plan, h); err != nil {
				return err
			}
		}
	}

	m.Seeds, m.Scenarios = stamp.Seeds, stamp.Scenarios
	m.Ledger = &stats.Ledger{Created: created, Tool: parts[0].tool, TimeScale: stamp.TimeScale}

	for _, name := range stamp.Scenarios {
		h := hunts[name].hunt()
		m.Hunts = append(m.Hunts, h)
		m.Ledger.Scenarios = append(m.Ledger.Scenarios, h.Summary)
	}

	return nil
}
