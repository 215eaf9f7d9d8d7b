package sim_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// eventually polls f until it returns nil or timeout has passed of the time
// this process ran. A stall of the host (a VM whose vCPUs are not run for
// minutes under load: docs/measurements.md, stop 47) is not counted: the
// nodes did not run through it either, so it says nothing of them.
func eventually(t *testing.T, timeout time.Duration, f func() error) {
	t.Helper()

	ran := startRunClock(0, nil)
	defer ran.stop()

	for {
		err := f()
		if err == nil {
			return
		}

		if ran.elapsed() > timeout {
			t.Fatalf("condition not met in %s of running time (%s): %v", timeout, ran, err)
		}

		time.Sleep(50 * time.Millisecond)
	}
}

// runningContext is context.WithTimeout in running time (runClock): a
// stall of the host does not use up a test's budget, as it does not an
// eventually's. Its cause says how the wall time went; cancel waits for its
// watch to end (goleak).
func runningContext(budget time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(context.Background())

	ran := startRunClock(budget, func(ran *runClock) {
		cancel(fmt.Errorf("the test's %s of running time ran out (%s): %w", budget, ran, context.DeadlineExceeded))
	})

	return ctx, func() {
		cancel(context.Canceled)
		ran.stop()
	}
}

// runClock counts the time since its start that the process ran: a tick
// that comes a second or more late is a stall, and its lateness is left out
// (also while that tick is still due: the poll may run first on resuming).
// Given a budget, it calls over once when that much has run.
type runClock struct {
	start    time.Time
	mu       sync.Mutex
	last     time.Time // the last tick
	stalled  time.Duration
	stalls   int
	longest  time.Duration
	done     chan struct{}
	stopOnce sync.Once
	stopped  chan struct{}
}

const (
	runClockTick  = 100 * time.Millisecond
	runClockStall = time.Second
)

func startRunClock(budget time.Duration, over func(*runClock)) *runClock {
	now := time.Now()
	c := &runClock{start: now, last: now, done: make(chan struct{}), stopped: make(chan struct{})}

	go func() {
		defer close(c.stopped)

		tick := time.NewTicker(runClockTick)
		defer tick.Stop()

		for {
			select {
			case <-c.done:
				return
			case <-tick.C:
				c.mu.Lock()
				if late := lateness(time.Since(c.last)); late > 0 {
					c.stalled += late
					c.stalls++
					c.longest = max(c.longest, late)
				}
				c.last = time.Now()
				c.mu.Unlock()

				if over != nil && c.elapsed() > budget {
					over(c)

					return
				}
			}
		}
	}()

	return c
}

// lateness is how much of a gap between ticks was a stall.
func lateness(gap time.Duration) time.Duration {
	if gap < runClockStall {
		return 0
	}

	return gap - runClockTick
}

// String says how the wall time went: how much of it the stalls took, and
// how far the calendar clock moved meanwhile. The two clocks part only when
// the machine's monotonic clock jumps (a virtual machine's can), which looks
// like a stall from inside and breaks every timer etcd has.
func (c *runClock) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()

	wall := time.Since(c.start)
	calendar := time.Now().Round(0).Sub(c.start.Round(0))

	return fmt.Sprintf("%s of wall time, %s of it in %d stalls, the longest %s; the calendar clock moved %s",
		wall.Round(time.Millisecond), c.stalled.Round(time.Millisecond), c.stalls, c.longest.Round(time.Millisecond), calendar.Round(time.Millisecond))
}

func (c *runClock) elapsed() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()

	return time.Since(c.start) - c.stalled - lateness(time.Since(c.last))
}

// stop ends the clock's watch; called again, it does nothing (a context's
// cancel may be).
func (c *runClock) stop() {
	c.stopOnce.Do(func() { close(c.done) })
	<-c.stopped
}

// A runningContext leaves a stall of the process out of its budget: the
// test binary stopped (SIGSTOP from another process, then SIGCONT: as a
// paused VM looks from inside) for longer than the budget is still running
// when it resumes, ends once it has run for the budget, and says why.
func TestRunningContextLeavesOutAStall(t *testing.T) {
	ctx, cancel := runningContext(3 * time.Second)
	defer cancel()

	time.Sleep(200 * time.Millisecond)

	stop := exec.Command("sh", "-c", fmt.Sprintf("kill -STOP %d; sleep 4; kill -CONT %d", os.Getpid(), os.Getpid()))
	if err := stop.Run(); err != nil {
		t.Fatal(err)
	}

	if err := ctx.Err(); err != nil {
		t.Fatalf("ended across a stall longer than its budget: %v", context.Cause(ctx))
	}

	select {
	case <-ctx.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("not ended 30 s after the stall")
	}

	if cause := context.Cause(ctx).Error(); !strings.Contains(cause, "3s of running time ran out") || strings.Contains(cause, " 0 stalls") {
		t.Errorf("the cause does not say how the time went: %s", cause)
	}
}
