package chaos

import (
	"context"
	"testing"
	"time"

	"github.com/talchaos/talchaos/harness/clock"
	"github.com/talchaos/talchaos/harness/eventlog"
	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/judge"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// probe is a fault that only says when it is injected and healed.
type probe struct {
	Latency
	events chan string
	name   string
}

func (p probe) Inject(context.Context, *Env) (target.Heal, error) {
	p.events <- p.name + " started"

	return func() error { p.events <- p.name + " healed"; return nil }, nil
}

// seenCP2 records cp2 itself once: a trigger waits for a node that was seen.
func seenCP2(rec *history.Recorder) {
	rec.Observe(0, &history.NodeObservation{Name: "cp2", Address: "127.0.9.3", Mode: history.ModeConfigured, Etcd: &history.Service{State: "Preparing"}}, false)
}

// cp1's look at the members: cp1 a voter, cp2 a learner or a voter.
func look(cp2Learner bool) *history.NodeObservation {
	return &history.NodeObservation{
		Name: "cp1", Address: "127.0.9.2", Mode: history.ModeConfigured, Etcd: &history.Service{State: "Running"},
		Members: []history.Member{
			{ID: 1, Hostname: "cp1", PeerURLs: []string{"https://127.0.9.2:2380"}},
			{ID: 2, Hostname: "cp2", PeerURLs: []string{"https://127.0.9.3:2380"}, IsLearner: cp2Learner},
		},
	}
}

// A state that held between two reads of the evidence fires its trigger:
// the schedule watches every entry, not the last look at each tick. The
// same for an entry recorded out of order (a poll's answer is stamped when
// the poll started), and for an until trigger once its fault is active.
func TestScheduleSeesEveryState(t *testing.T) {
	for _, tc := range []struct {
		name string
		// record records cp2 a learner, then a voter, between two ticks.
		record func(rec *history.Recorder)
	}{
		{"in order", func(rec *history.Recorder) {
			rec.Observe(10*time.Millisecond, look(true), false)
			rec.Observe(20*time.Millisecond, look(false), false)
		}},
		{"out of order", func(rec *history.Recorder) {
			rec.Observe(30*time.Millisecond, look(false), false)
			rec.Observe(10*time.Millisecond, look(true), false)
			rec.Observe(40*time.Millisecond, look(false), false)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events := make(chan string, 8)
			rec := history.NewRecorder(time.Now(), clock.New(1), []history.Node{{Name: "cp1"}, {Name: "cp2"}, {Name: "cp3"}})
			live := judge.Follow(rec, judge.Options{})

			// Seen before any trigger is armed: cp2 a voter.
			seenCP2(rec)
			rec.Observe(0, look(false), false)

			planned := []Planned{
				{Spec: scenario.Fault{Name: "on-learner", When: &scenario.When{Node: "cp2", State: "learner"}}, Kind: probe{events: events, name: "on-learner"}, Nodes: []string{"cp2"}},
			}

			_, ticks := runSchedule(t, planned, rec, live)

			// Two ticks: the first is taken once Run reads them, the second
			// once the first was handled (the channel is unbuffered).
			ticks <- struct{}{}
			ticks <- struct{}{}

			select {
			case e := <-events:
				t.Fatalf("%s before cp2 was a learner", e)
			default:
			}

			tc.record(rec)

			ticks <- struct{}{}

			if e := next(t, events); e != "on-learner started" {
				t.Fatalf("got %q, want the fault started", e)
			}
		})
	}
}

func TestScheduleHealsOnAShortState(t *testing.T) {
	events := make(chan string, 8)
	// The run began a second ago: what was seen at its start is well
	// before the fault's start, even on a clock that counts milliseconds.
	rec := history.NewRecorder(time.Now().Add(-time.Second), clock.New(1), []history.Node{{Name: "cp1"}, {Name: "cp2"}})
	live := judge.Follow(rec, judge.Options{})

	// cp2 was a voter before the fault started: that does not heal it.
	seenCP2(rec)
	rec.Observe(0, look(false), false)
	rec.Observe(time.Millisecond, look(true), false)

	planned := []Planned{
		{Spec: scenario.Fault{Name: "until-voter", Until: &scenario.When{Node: "cp2", State: "voter"}}, Kind: probe{events: events, name: "until-voter"}, Nodes: []string{"cp2"}},
	}

	s, ticks := runSchedule(t, planned, rec, live)

	if e := next(t, events); e != "until-voter started" {
		t.Fatalf("got %q, want the fault started", e)
	}

	// The probe says it started before the schedule holds its heal.
	for deadline := time.Now().Add(30 * time.Second); !s.active(0); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the fault was not active 30 s after it started")
		}
	}

	// Armed at the first tick, which the second's send waits for.
	ticks <- struct{}{}
	ticks <- struct{}{}

	select {
	case e := <-events:
		t.Fatalf("%s while cp2 is a learner", e)
	default:
	}

	at := rec.Since()
	rec.Observe(at, look(false), false)
	rec.Observe(at+time.Millisecond, look(true), false)

	ticks <- struct{}{}

	if e := next(t, events); e != "until-voter healed" {
		t.Fatalf("got %q, want the fault healed", e)
	}
}

// runSchedule runs the planned faults' schedule until the test ends, on the
// ticks the test sends.
func runSchedule(t *testing.T, planned []Planned, rec *history.Recorder, live *judge.Live) (*Schedule, chan<- struct{}) {
	t.Helper()

	s := NewSchedule(planned, nil, eventlog.New(), rec, clock.New(1))
	ticks := make(chan struct{})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})

	go func() {
		defer close(done)

		s.Run(ctx, ticks, live)
	}()

	t.Cleanup(func() {
		cancel()
		<-done
		s.Stop()
	})

	return s, ticks
}

func next(t *testing.T, events <-chan string) string {
	t.Helper()

	select {
	case e := <-events:
		return e
	case <-time.After(30 * time.Second):
		t.Fatal("no fault started or healed in 30 s")

		return ""
	}
}
