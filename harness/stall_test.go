package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/talchaos/talchaos/harness/clock"
	"github.com/talchaos/talchaos/harness/eventlog"
	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/strictjson"
	"github.com/talchaos/talchaos/harness/target"
)

// A process stopped for two seconds (SIGSTOP from another process, then
// SIGCONT: as a paused VM looks from inside) is told as a stall, once, and
// recorded in the history. (Anything else told is a stall too: a loaded
// machine may really hold the test for a second.)
func TestWatchStallsTellsAStoppedProcess(t *testing.T) {
	log := eventlog.New()
	rec := history.NewRecorder(log.Start(), clock.New(60), []history.Node{{Name: "cp1", Role: target.ControlPlane, Address: "10.5.0.2"}})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})

	go func() {
		defer close(done)

		watchStalls(ctx, log, rec, 50*time.Millisecond, time.Second, time.Now())
	}()

	// Running first, not stopped.
	time.Sleep(300 * time.Millisecond)

	stop := exec.Command("sh", "-c", fmt.Sprintf("kill -STOP %d; sleep 2; kill -CONT %d", os.Getpid(), os.Getpid()))
	if err := stop.Run(); err != nil {
		t.Fatal(err)
	}

	deadline := time.Now().Add(30 * time.Second)

	for !strings.Contains(kinds(log), "run.stalled") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}

	cancel()
	<-done

	stopped := 0

	for _, e := range log.Events() {
		if e.Kind != "run.stalled" {
			t.Fatalf("event %v, want only run.stalled", e)
		}

		said, _, _ := strings.Cut(strings.TrimPrefix(e.Msg, "this process was not scheduled for "), " ")

		d, err := time.ParseDuration(said)
		if err != nil || d < time.Second {
			t.Fatalf("%q does not say how long, a second or more", e.Msg)
		}

		if d >= 1900*time.Millisecond && d <= 10*time.Second {
			stopped++
		}
	}

	if stopped != 1 {
		t.Fatalf("%d stalls of about two seconds told, want the one: %v", stopped, log.Events())
	}

	// The history has each stall told, as long as told.
	h := rec.History()

	var recorded []time.Duration

	for _, e := range h.Entries {
		if e.Stall != nil {
			recorded = append(recorded, time.Duration(e.Stall.DurationMs)*time.Millisecond)
		}
	}

	if len(recorded) != len(log.Events()) || !slices.ContainsFunc(recorded, func(d time.Duration) bool { return d >= 1900*time.Millisecond && d <= 10*time.Second }) {
		t.Fatalf("the history records stalls of %v; the events: %v", recorded, log.Events())
	}

	p := &strictjson.Problems{}
	if h.Check(p, "history", history.Known{}); len(p.Errs()) > 0 {
		t.Fatalf("the history with its stalls does not check: %v", p.Errs())
	}
}

// A stall before the watching goroutine first ran (started, then the
// process stopped before it was scheduled) is measured from when the watch
// began, not missed.
func TestWatchStallsCountsFromItsStart(t *testing.T) {
	log := eventlog.New()
	rec := history.NewRecorder(log.Start(), clock.New(60), []history.Node{{Name: "cp1", Role: target.ControlPlane, Address: "10.5.0.2"}})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})

	// As if the goroutine first ran two seconds after the watch began.
	since := time.Now().Add(-2 * time.Second)

	go func() {
		defer close(done)

		watchStalls(ctx, log, rec, 50*time.Millisecond, time.Second, since)
	}()

	deadline := time.Now().Add(30 * time.Second)

	for !strings.Contains(kinds(log), "run.stalled") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}

	cancel()
	<-done

	var recorded []time.Duration

	for _, e := range rec.History().Entries {
		if e.Stall != nil {
			recorded = append(recorded, time.Duration(e.Stall.DurationMs)*time.Millisecond)
		}
	}

	if !slices.ContainsFunc(recorded, func(d time.Duration) bool { return d >= 2*time.Second }) {
		t.Fatalf("the stall before the first wake-up is not recorded: stalls %v, events %v", recorded, log.Events())
	}
}

func kinds(log *eventlog.Log) string {
	var out []string
	for _, e := range log.Events() {
		out = append(out, e.Kind)
	}

	return strings.Join(out, " ")
}

// The watch tells every stall that voids a failed run (a Talos minute) up to
// 60x, and none shorter than a second (a loaded machine's late wake-ups) nor
// only those longer than 5 s.
func TestStallGapAt(t *testing.T) {
	for _, tc := range []struct {
		scale float64
		want  time.Duration
	}{
		{1, 5 * time.Second},
		{12, 5 * time.Second},
		{20, 3 * time.Second},
		{30, 2 * time.Second},
		{60, time.Second},
		{600, time.Second},
	} {
		clk := clock.New(tc.scale)
		if got := stallGapAt(clk); got != tc.want {
			t.Errorf("stallGapAt(%gx) = %s, want %s", tc.scale, got, tc.want)
		}

		if got := stallGapAt(clk); tc.scale <= 60 && clk.Talos(got) > history.VoidingStall {
			t.Errorf("at %gx a voiding stall of %s (a Talos minute) is not told", tc.scale, clk.Wall(history.VoidingStall))
		}
	}
}
