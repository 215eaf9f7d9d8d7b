package seedpool

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestRun(t *testing.T) {
	seeds := []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}

	for _, tc := range []struct {
		name     string
		parallel int
		stopAt   int64 // a call for this seed returns false
		want     []int64
	}{
		{"one at a time", 1, 0, seeds},
		{"four at a time", 4, 0, seeds},
		{"more workers than seeds", 50, 0, seeds},
		{"no parallelism given", 0, 0, seeds},
		{"stopped by a call", 1, 3, []int64{1, 2, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var (
				mu            sync.Mutex
				got           []int64
				running, peak atomic.Int32
			)

			Run(context.Background(), seeds, tc.parallel, func(seed int64) bool {
				n := running.Add(1)
				defer running.Add(-1)

				for {
					p := peak.Load()
					if n <= p || peak.CompareAndSwap(p, n) {
						break
					}
				}

				time.Sleep(time.Millisecond)

				mu.Lock()
				got = append(got, seed)
				mu.Unlock()

				return seed != tc.stopAt
			})

			slices.Sort(got)

			if !slices.Equal(got, tc.want) {
				t.Errorf("ran %v, want %v", got, tc.want)
			}

			if limit := max(tc.parallel, 1); int(peak.Load()) > limit {
				t.Errorf("%d at once, want at most %d", peak.Load(), limit)
			}
		})
	}

	// A context that ends gives out no more seeds.
	ctx, cancel := context.WithCancel(context.Background())

	var count atomic.Int32

	Run(ctx, seeds, 2, func(int64) bool {
		if count.Add(1) == 2 {
			cancel()
		}

		return true
	})

	if n := count.Load(); n > 3 {
		t.Errorf("%d seeds ran after the context ended at the second", n)
	}
}
