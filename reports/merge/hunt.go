package merge

import (
	"github.com/talchaos/talchaos/harness/shard"
	"github.com/talchaos/talchaos/reports"
)

// readHunts merges the shards of one scenario's hunt (hunt.json each).
func (m *Merged) readHunts(dirs []string, out string) error {
	parts, hunts, err := readParts(dirs, reports.HuntJSONFile, reports.ReadHunt, func(h *reports.Hunt) (*shard.Stamp, string) { return h.Shard, h.Tool })
	if err != nil {
		return err
	}

	stamp := parts[0].stamp
	if len(stamp.Scenarios) != 1 {
		return errorf("%s: shard.scenarios holds %d scenarios: a hunt's shards are of one", parts[0].file, len(stamp.Scenarios))
	}

	hp := &huntParts{scenario: stamp.Scenarios[0], tool: parts[0].tool, timeScale: stamp.TimeScale}

	for _, p := range parts {
		if err := hp.add(p.file, p.dir, out, p.stamp.Plan(), hunts[p.dir]); err != nil {
			return err
		}
	}

	m.Seeds, m.Scenarios = stamp.Seeds, stamp.Scenarios
	m.Hunt = hp.hunt()

	return nil
}
