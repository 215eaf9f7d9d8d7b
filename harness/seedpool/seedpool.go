// Package seedpool runs one thing over many seeds, some at a time: the worker
// pool of `hunt` (a scenario over its seeds), of `hunt --shrink` (a
// candidate over the same seeds) and of a night's or a certification's
// (scenario, seed) pairs. Each seed is given out once, in order, as soon as
// the slots it takes are free.
package seedpool

import (
	"context"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
)

// Run calls run for each seed, at most parallel at a time (at least one),
// until every seed was given out, a call returns false (no more seeds are
// given out), or ctx ends. It returns once every call it made has returned.
func Run(ctx context.Context, seeds []int64, parallel int, run func(seed int64) (more bool)) {
	RunWeighted(ctx, seeds, parallel, nil, run)
}

// RunWeighted is Run where a seed's call takes weight(seed) of the parallel
// slots (at least one, at most parallel; nil weighs every seed 1): a heavy
// run waits until that many calls have returned, and the seeds after it wait
// behind it, so that seeds still start in order and a heavy one is never
// passed over for ever.
func RunWeighted(ctx context.Context, seeds []int64, parallel int, weight func(seed int64) int, run func(seed int64) (more bool)) {
	parallel = max(parallel, 1)

	var (
		slots = semaphore.NewWeighted(int64(parallel))
		wg    sync.WaitGroup
		done  atomic.Bool
	)

	for _, seed := range seeds {
		w := int64(1)
		if weight != nil {
			w = int64(min(max(weight(seed), 1), parallel))
		}

		if slots.Acquire(ctx, w) != nil {
			break
		}

		// A call that returned false set done before it gave its slots back.
		if done.Load() || ctx.Err() != nil {
			slots.Release(w)

			break
		}

		wg.Go(func() {
			defer slots.Release(w)

			if !run(seed) {
				done.Store(true)
			}
		})
	}

	wg.Wait()
}
