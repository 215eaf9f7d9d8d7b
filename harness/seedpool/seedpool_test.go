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

	var (
		mu    sync.Mutex
		count int
	)

	// The count and the cancel are one step: a call counted between them
	// would have started before the context ended.
	Run(ctx, seeds, 2, func(int64) bool {
		mu.Lock()
		defer mu.Unlock()

		if count++; count == 2 {
			cancel()
		}

		return true
	})

	if n := count; n > 3 {
		t.Errorf("%d seeds ran after the context ended at the second", n)
	}
}

// Weighted seeds never take more than the parallel slots at once, every seed
// runs once, and a seed weighing more than every slot still runs, alone.
func TestRunWeighted(t *testing.T) {
	seeds := []int64{1, 2, 3, 4, 5, 6, 7, 8}
	weights := map[int64]int{2: 3, 5: 2, 7: 10} // the others weigh 1

	for _, parallel := range []int{1, 2, 4} {
		var (
			mu          sync.Mutex
			started     []int64
			used, peak  int
			aloneBeside int // slots in use beside seed 7, which takes them all
		)

		RunWeighted(context.Background(), seeds, parallel, func(seed int64) int { return max(weights[seed], 1) }, func(seed int64) bool {
			w := min(max(weights[seed], 1), parallel)

			mu.Lock()
			started = append(started, seed)
			used += w
			peak = max(peak, used)

			if seed == 7 {
				aloneBeside = used - w
			}
			mu.Unlock()

			time.Sleep(2 * time.Millisecond)

			mu.Lock()
			used -= w
			mu.Unlock()

			return true
		})

		if slices.Sort(started); !slices.Equal(started, seeds) {
			t.Errorf("parallel %d: ran %v, want every seed once", parallel, started)
		}

		if peak > parallel {
			t.Errorf("parallel %d: %d slots in use at once", parallel, peak)
		}

		if aloneBeside != 0 {
			t.Errorf("parallel %d: seed 7 (weight 10) ran beside %d slots' worth", parallel, aloneBeside)
		}
	}
}
