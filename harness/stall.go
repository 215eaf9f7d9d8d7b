package harness

import (
	"context"
	"fmt"
	"time"

	"github.com/talchaos/talchaos/harness/clock"
	"github.com/talchaos/talchaos/harness/eventlog"
	"github.com/talchaos/talchaos/harness/history"
)

// stallTick is how often the watch asks to be woken. A run says the host
// stalled when this process went without running that wake-up for its stall
// gap (stallGapAt): a paused VM, a swapping host or a process stopped
// outright stands still for seconds, and whatever the run saw then
// (deadlines that all ran out at once, log lines that arrived together) is
// of the host, not of the cluster.
const stallTick = 250 * time.Millisecond

// stallGapAt is the stall gap of a run at clk's scale: a Talos minute of
// wall time (history.VoidingStall, the shortest stall across which a failed
// run is void), so that every stall that voids is seen, at 60x one of a
// second; never under minStallGap, the late wake-ups a loaded machine gives
// (tens of milliseconds when starved, up to a second), nor over maxStallGap.
// A gap of 5 s at every scale, as this was, did not see the stalls of 1 to
// 5 s that are 1 to 5 Talos minutes at 60x: a run that failed across one was
// judged failed although every promote window and deadline inside it had run
// out at once.
func stallGapAt(clk clock.Clock) time.Duration {
	return min(max(clk.Wall(history.VoidingStall), minStallGap), maxStallGap)
}

const (
	minStallGap = time.Second
	maxStallGap = 5 * time.Second
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
