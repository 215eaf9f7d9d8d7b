package harness

import (
	"context"
	"fmt"
	"time"

	"github.com/talchaos/talchaos/harness/eventlog"
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

// watchStalls tells the event log (run.stalled) of every time this process
// was not scheduled for gap or more (waking every tick), until ctx ends. A
// run whose history has a silent gap without one was held inside the
// process (a lock, a blocked call), not by the host.
func watchStalls(ctx context.Context, log *eventlog.Log, tick, gap time.Duration) {
	t := time.NewTicker(tick)
	defer t.Stop()

	last := time.Now()

	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			// The monotonic clock counts the time the process did not run.
			now := time.Now()
			if d := now.Sub(last); d >= gap {
				log.Add("", "run.stalled", fmt.Sprintf("this process was not scheduled for %s (the host stalled: a paused VM, a swapping or starved machine, a stopped process); deadlines that ran out and lines that arrived together then are the host's, not the cluster's",
					d.Round(time.Millisecond)))
			}

			last = now
		}
	}
}
