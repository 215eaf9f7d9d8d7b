package main

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/talchaos/talchaos/reports"
	"github.com/talchaos/talchaos/reports/stats"
)

// shards is figure 5: a night of the catalogue (or -scenarios) over seeds
// as n shards (nightly --shard K/N) run one after another on this machine:
// each shard's wall time, their sum (the night on one machine, sharded), and
// the longest shard, which is what a matrix of n runners like this one
// takes. The shards are then merged (talchaos merge), which must take them,
// and the merged night's runs counted. With keep, the shards and the merged
// night stay there.
func (b *bench) shards(names []string, all bool, seeds string, n int, keep string) [][]string {
	const goal = "≤ 5 min per shard"

	figure := fmt.Sprintf("5. %s x seeds %s as %d shards, one after another", catalogue(names, all), seeds, n)

	var (
		walls []time.Duration
		dirs  []string
	)

	root := cmp.Or(keep, b.work)

	for k := 1; k <= n; k++ {
		fmt.Fprintf(os.Stderr, "bench: nightly --seeds %s --shard %d/%d\n", seeds, k, n)

		dir := filepath.Join(root, fmt.Sprintf("shard-%d", k))
		args := []string{"nightly", "--seeds", seeds, "--shard", fmt.Sprintf("%d/%d", k, n), "--out", dir}

		if !all {
			args = append(args, "--scenario", strings.Join(names, ","))
		}

		wall, _, _, err := b.talchaos(b.work, args...)
		if err != nil {
			return [][]string{{figure, "error: " + firstLine(err), goal}}
		}

		walls = append(walls, wall)
		dirs = append(dirs, dir)
	}

	merged := filepath.Join(root, "merged")
	if _, _, _, err := b.talchaos(b.work, append(append([]string{"merge"}, dirs...), "--out", merged)...); err != nil {
		return [][]string{{figure, "merge: error: " + firstLine(err), goal}}
	}

	held, err := nightHeld(merged)
	if err != nil {
		held = "error: " + firstLine(err)
	}

	var (
		sum, longest time.Duration
		each         []string
	)

	for k, w := range walls {
		sum += w
		longest = max(longest, w)
		each = append(each, fmt.Sprintf("%d/%d %s", k+1, n, minSec(w)))
	}

	if keep == "" {
		for _, d := range append(dirs, merged) {
			os.RemoveAll(d) //nolint:errcheck // many runs' reports: keep the temp dir small
		}
	}

	return [][]string{
		{figure + ": each shard", strings.Join(each, ", "), goal},
		{figure + ": sum (one machine)", minSec(sum), ""},
		{figure + ": longest shard (" + fmt.Sprint(n) + " runners)", minSec(longest), goal},
		{figure + ": the merged night", held, "every run passes"},
	}
}

// nightHeld says how many of the merged night's runs held their
// expectations and names those that did not, from the merged hunts: a
// night run this fast is worth nothing if its runs fail under the load of
// --parallel.
func nightHeld(merged string) (string, error) {
	l, err := stats.ReadLedger(filepath.Join(merged, reports.LedgerFile))
	if err != nil {
		return "", err
	}

	var runs, passed int

	for _, s := range l.Scenarios {
		runs += s.Runs
		passed += s.Passed
	}

	held := fmt.Sprintf("%d of %d runs passed", passed, runs)

	for _, s := range l.Scenarios {
		if s.Passed == s.Runs {
			continue
		}

		h, err := readHunt(filepath.Join(merged, s.Scenario, reports.HuntJSONFile))
		if err != nil {
			return "", err
		}

		held += "; " + s.Scenario + strings.TrimPrefix(notPassed(h), ";")
	}

	return held, nil
}

func catalogue(names []string, all bool) string {
	if all {
		return fmt.Sprintf("the catalogue (%d built-ins)", len(names))
	}

	return strings.Join(names, ", ")
}

// minSec is a wall time as "4 min 12 s".
func minSec(d time.Duration) string {
	d = d.Round(time.Second)
	if d < time.Minute {
		return fmt.Sprintf("%.0f s", d.Seconds())
	}

	return fmt.Sprintf("%d min %d s", int(d.Minutes()), int(d.Seconds())%60)
}
