package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/seedpool"
	"github.com/talchaos/talchaos/harness/target"
	"github.com/talchaos/talchaos/reports"
)

// A night runs all its (scenario, seed) pairs through one pool of
// opts.parallel workers rather than hunting one scenario after another: a
// hunt's last wave leaves workers idle while its slowest seed finishes, once
// per scenario, and a shard holding a few seeds of every scenario was mostly
// such waves (docs/measurements.md, Step 13). The pairs are interleaved, each
// scenario's first seed, then each one's second, and so on: a spell of
// trouble on the runner (another job's load, a slow disk) then costs every
// scenario a run or two instead of costing one scenario a run of its seeds,
// which its Fisher test would read as a regression. Each scenario's hunt
// (OUT/NAME) is written, and its summary printed in the catalogue's order,
// once its last seed has finished.

// nightScenario is one scenario of a night and its runs so far.
type nightScenario struct {
	name    string
	sc      *scenario.Scenario
	seeds   []int64
	opts    huntOptions
	runs    []reports.HuntRun
	left    int // seeds not finished
	started time.Time
	spans   []span // each counted run's, from its start to its end
	hunt    *reports.Hunt
}

// span is when one run went on.
type span struct{ from, to time.Time }

// nightPair is one run of the night: a scenario and a seed.
type nightPair struct {
	s    *nightScenario
	seed int64
}

// runNight runs every scenario of names over its seeds (seedsOf) and returns
// their hunts in the order of names; a scenario with no seed is left out.
func runNight(ctx context.Context, out io.Writer, tgt target.Target, names []string, seedsOf func(string) []int64, opts nightlyOptions) ([]*reports.Hunt, error) {
	var (
		night []*nightScenario
		pairs []nightPair
	)

	for _, name := range names {
		seeds := seedsOf(name)
		if len(seeds) == 0 {
			continue // every seed of it is another shard's
		}

		sc, err := loadScenarioAt(opts.source(name), opts.timeScale)
		if err != nil {
			return nil, &exitError{code: exitInput, err: err}
		}

		sub := opts.huntOptions
		sub.reportDir = filepath.Join(opts.reportDir, name)

		if err := os.MkdirAll(sub.reportDir, 0o755); err != nil { //nolint:gosec // reports are meant to be read
			return nil, &exitError{code: exitHarness, err: err}
		}

		night = append(night, &nightScenario{name: name, sc: sc, seeds: seeds, opts: sub, left: len(seeds)})
	}

	pairs = interleave(night)

	var (
		mu       sync.Mutex
		stop     error
		inputErr error
		printed  int
	)

	bar := newHuntProgress(out, len(pairs), isTerminal(out))

	// finish writes a scenario's hunt when its last seed is done, and prints
	// the summaries of the finished scenarios not printed yet, in order.
	finish := func(s *nightScenario) {
		s.hunt = nightHunt(s, tgt)

		if _, err := reports.WriteHunt(s.opts.reportDir, s.hunt); err != nil && stop == nil {
			stop = err
		}

		for ; printed < len(night) && night[printed].hunt != nil; printed++ {
			h := night[printed]

			bar.clear(func() {
				fmt.Fprintf(out, "== %s", h.name)
				printHunt(out, h.hunt)
				fmt.Fprintf(out, "reports in %s (hunt.json, junit.xml, summary.md, seed-N/)\n", h.opts.reportDir)
			})
		}
	}

	indexes := make([]int64, len(pairs))
	for i := range indexes {
		indexes[i] = int64(i)
	}

	weight := func(i int64) int { return slots(pairs[i].s.sc, tgt) }

	seedpool.RunWeighted(ctx, indexes, opts.parallel, weight, func(i int64) bool {
		p := pairs[i]

		began := time.Now()

		mu.Lock()
		if p.s.started.IsZero() {
			p.s.started = began
		}
		mu.Unlock()

		r := runSeed(ctx, p.s.sc, tgt, p.seed, opts.source(p.s.name), p.s.opts)

		if r.written {
			bar.finishedAs(p.s.name, r.run, r.interrupted)
		}

		mu.Lock()
		defer mu.Unlock()

		switch {
		case r.inputErr != nil:
			inputErr = cmp.Or(inputErr, r.inputErr)

			return false
		case r.stop != nil:
			stop = cmp.Or(stop, r.stop)
		}

		if !r.counted() {
			return false
		}

		p.s.runs = append(p.s.runs, r.run)
		p.s.spans = append(p.s.spans, span{began, time.Now()})

		if p.s.left--; p.s.left == 0 {
			finish(p.s)
		}

		return true
	})

	bar.done()

	if inputErr != nil {
		return nil, &exitError{code: exitInput, err: inputErr}
	}

	if stop == nil && ctx.Err() != nil {
		stop = interruptedRun(ctx, ctx.Err())
	}

	if stop != nil {
		// What was run is kept: each cut scenario's hunt with its
		// finished seeds.
		for _, s := range night {
			if s.hunt == nil && len(s.runs) > 0 {
				reports.WriteHunt(s.opts.reportDir, nightHunt(s, tgt)) //nolint:errcheck,gosec // the night ends on stop already
			}
		}

		return nil, &exitError{code: exitHarness, err: stop}
	}

	hunts := make([]*reports.Hunt, len(night))
	for i, s := range night {
		hunts[i] = s.hunt
	}

	return hunts, nil
}

// interleave lists the night's pairs round by round: every scenario's first
// seed, then every one's second, and so on; a scenario with fewer seeds (a
// shard's share) drops out when they are done.
func interleave(night []*nightScenario) []nightPair {
	var pairs []nightPair

	for _, s := range night {
		for _, seed := range s.seeds {
			pairs = append(pairs, nightPair{s: s, seed: seed})
		}
	}

	return roundRobin(pairs, func(p nightPair) string { return p.s.name })
}

// roundRobin orders items round by round: every group's first item (the
// groups in the order they first appear), then every group's second, and so
// on, each group's items in their order. A night and a certification run
// their (scenario, seed) pairs so: a spell of trouble on the runner then
// costs every scenario a run, not one scenario its seeds.
func roundRobin[T any](items []T, group func(T) string) []T {
	rank := make([]int, len(items))
	seen := map[string]int{}

	for i, it := range items {
		rank[i] = seen[group(it)]
		seen[group(it)]++
	}

	idx := make([]int, len(items))
	for i := range idx {
		idx[i] = i
	}

	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(rank[a], rank[b]) })

	out := make([]T, len(items))
	for i, j := range idx {
		out[i] = items[j]
	}

	return out
}

// nightHunt is a scenario's hunt in a night: its runs in seed order, its
// wall time the time its runs went on (busy). Its seeds are interleaved with
// the other scenarios', so from its first seed's start to its last seed's end
// is most of the night, whatever the scenario costs.
func nightHunt(s *nightScenario, tgt target.Target) *reports.Hunt {
	slices.SortFunc(s.runs, func(a, b reports.HuntRun) int { return cmp.Compare(a.Seed, b.Seed) })

	return huntOf(s.sc.Name, tgt, s.runs, s.started, busy(s.spans), s.opts)
}

// busy is how long at least one of spans went on: seeds run side by side
// count once.
func busy(spans []span) time.Duration {
	spans = slices.Clone(spans)
	slices.SortFunc(spans, func(a, b span) int { return a.from.Compare(b.from) })

	var (
		total time.Duration
		cur   span
	)

	for i, sp := range spans {
		switch {
		case i == 0:
			cur = sp
		case !sp.from.After(cur.to):
			if sp.to.After(cur.to) {
				cur.to = sp.to
			}
		default:
			total += cur.to.Sub(cur.from)
			cur = sp
		}
	}

	if len(spans) > 0 {
		total += cur.to.Sub(cur.from)
	}

	return total
}
