package harness

import (
	"context"
	"fmt"
	"time"

	"github.com/talchaos/talchaos/harness/eventlog"
	"github.com/talchaos/talchaos/harness/history"
)

// stallGap is how long this process may go without running a goroutine
// that asked to be woken every stallTick before the run says the host
// stalled. A starved machine delays a wake-up by tens of milliseconds, a
// loaded one by a second at most; a paused VM, a swapping host or a
// process stopped outright by many seconds, and whatever the run saw then
// (deadlines that all ran out at once, log lines that arrived together) is
// of the host, not of the cluster.
const (
	stallTick = 250 * time.Millisecond
	stallGap  = 5 * time.Second
)

// watchStalls records in the history and tells the event log (run.stalled)
// every time this process was not scheduled for gap or more (waking every
// tick), until ctx ends. A run whose history has a silent gap without one
// was held inside the process (a lock, a blocked call), not by the host.
// The judge does not blame the cluster for what failed across a long one
// (judge.Judge). since is when the watch began, taken by the caller before
// it started the goroutine: a stall that comes before the goroutine first
// runs (a loaded machine schedules it late) is measured from there too.
func watchStalls(ctx context.Context, log *eventlog.Log, rec *history.Recorder, tick, gap time.Duration, since time.Time) {
	t := time.NewTicker(tick)
	defer t.Stop()

	last := since

	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			// The monotonic clock counts the time the process did not run.
			now := time.Now()
			if d := now.Sub(last); d >= gap {
				rec.Stall(d)
				log.Add("", "run.stalled", fmt.Sprintf("this process was not scheduled for %s (the host stalled: a paused VM, a swapping or starved machine, a stopped process); deadlines that ran out and lines that arrived together then are the host's, not the cluster's",
					d.Round(time.Millisecond)))
			}

			last = now
		}
	}
}
