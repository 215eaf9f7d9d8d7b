package main

import (
	"fmt"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/talchaos/talchaos/harness/shard"
)

// Bounds of the numbers the commands take, checked before anything starts
// or is created: a flag is input like a scenario file.
const (
	// maxSeeds bounds a hunt's or a night's seeds per scenario.
	maxSeeds = 10000
	// maxParallel bounds the clusters run at once: each has its nodes,
	// ports and processes.
	maxParallel = 256
)

var seedItemRE = regexp.MustCompile(`^(-?[0-9]+)(?:-(-?[0-9]+))?$`)

// parseSeeds reads --seeds: FROM-TO, or a comma-separated list of seeds and
// FROM-TO ranges. A seed given twice is refused (it would count twice), as
// are more than maxSeeds seeds; ranges are counted, never looped to their
// end, so an end at the top of int64 cannot overflow.
func parseSeeds(s string) ([]int64, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("--seeds %s: %s", strconv.Quote(s), fmt.Sprintf(format, a...))
	}

	if strings.TrimSpace(s) == "" {
		return nil, bad("want FROM-TO or a comma-separated list of seeds")
	}

	var out []int64

	seen := map[int64]bool{}

	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)

		m := seedItemRE.FindStringSubmatch(item)
		if m == nil {
			return nil, bad("%s is neither a seed nor FROM-TO", strconv.Quote(item))
		}

		from, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil {
			return nil, bad("%s: not a 64-bit integer", m[1])
		}

		to := from
		if m[2] != "" {
			if to, err = strconv.ParseInt(m[2], 10, 64); err != nil {
				return nil, bad("%s: not a 64-bit integer", m[2])
			}
		}

		if from > to {
			return nil, bad("range %s ends before it starts", item)
		}

		// to-from can overflow int64 (e.g. -9e18 to 9e18): compare as uint64.
		if n := uint64(to) - uint64(from) + 1; n == 0 || n > uint64(maxSeeds-len(out)) {
			return nil, bad("more than %d seeds", maxSeeds)
		}

		for i := uint64(0); i <= uint64(to)-uint64(from); i++ {
			seed := from + int64(i) //nolint:gosec // i is at most to-from, so from+i <= to
			if seen[seed] {
				return nil, bad("seed %d is given twice", seed)
			}

			seen[seed] = true
			out = append(out, seed)
		}
	}

	return out, nil
}

// checkParallel checks --parallel.
func checkParallel(p int) error {
	if p < 1 || p > maxParallel {
		return fmt.Errorf("--parallel: must be between 1 and %d, got %d", maxParallel, p)
	}

	return nil
}

// checkRange checks a float flag: finite and within [lo, hi] (NaN compares
// false with everything, so it is tested for first).
func checkRange(flag string, v, lo, hi float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < lo || v > hi {
		return fmt.Errorf("%s: must be between %g and %g, got %g", flag, lo, hi, v)
	}

	return nil
}

// quoteShort quotes a value given by the user for a message: Go-quoted (no
// control character reaches the terminal raw), at most 80 bytes of it.
func quoteShort(s string) string {
	const max = 80
	if len(s) > max {
		return strconv.Quote(s[:max]) + "..."
	}

	return strconv.Quote(s)
}

// shardFlagHelp is --shard's help, the same on hunt, nightly and certify.
var shardFlagHelp = "run only shard K of N of the (scenario, seed) pairs, 1 <= K <= N (the same pairs on every machine; 'talchaos merge' combines the shards); " +
	"without it $" + shard.EnvShard + "=K/N, or $" + shard.EnvShards + "=N with a Kubernetes Indexed Job's 0-based $" + shard.EnvIndex

// addShardFlag adds --shard to a command that runs (scenario, seed) pairs.
func addShardFlag(cmd *cobra.Command, to *string) {
	cmd.Flags().StringVar(to, "shard", "", shardFlagHelp)
}

// shardOf is the shard a command runs: --shard when given, else what the
// environment says (shard.FromEnv), else the whole run.
func shardOf(cmd *cobra.Command, flag string) (shard.Shard, error) {
	if !cmd.Flags().Changed("shard") {
		return shard.FromEnv(os.Getenv)
	}

	s, err := shard.Parse(flag)
	if err != nil {
		return shard.Shard{}, fmt.Errorf("--shard %s: %w", quoteShort(flag), err)
	}

	return s, nil
}

// printShard says which pairs a shard runs, before it runs them.
func printShard(cmd *cobra.Command, plan shard.Plan, pairs int) {
	if plan.Shard.Whole() {
		return
	}

	fmt.Fprintf(cmd.OutOrStdout(), "shard %s: %d of the %d (scenario, seed) pairs of %d scenario(s) x seeds %s\n",
		plan.Shard, pairs, len(plan.Scenarios)*len(plan.Seeds), len(plan.Scenarios), shard.Ranges(plan.Seeds))
}
