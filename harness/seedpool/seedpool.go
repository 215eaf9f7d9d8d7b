// Package seedpool runs one thing over many seeds, some at a time: the worker
// pool of `hunt` (a scenario over its seeds) and of `hunt --shrink` (a
// candidate over the same seeds). Each seed is given out once, in order, to
// the first free worker.
package seedpool

import (
	"context"
	"sync"
)

// Run calls run for each seed, at most parallel at a time (at least one),
// until every seed was given out, a call returns false (no more seeds are
// given out), or ctx ends. It returns once every call it made has returned.
func Run(ctx context.Context, seeds []int64, parallel int, run func(seed int64) (more bool)) {
	var (
		mu   sync.Mutex
		next int
		done bool
		wg   sync.WaitGroup
	)

	take := func() (int64, bool) {
		mu.Lock()
		defer mu.Unlock()

		if done || next >= len(seeds) || ctx.Err() != nil {
			return 0, false
		}

		next++

		return seeds[next-1], true
	}

	for range min(max(parallel, 1), len(seeds)) {
		wg.Go(func() {
			for {
				seed, ok := take()
				if !ok {
					return
				}

				if !run(seed) {
					mu.Lock()
					done = true
					mu.Unlock()

					return
				}
			}
		})
	}

	wg.Wait()
}
