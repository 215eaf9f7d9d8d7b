package check

import (
	"testing"
	"time"
)

func TestSlowestPollSince(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }

	type poll struct{ start, end time.Duration } // end < 0: still in flight

	for _, tc := range []struct {
		name   string
		polls  []poll
		since  time.Duration
		now    time.Duration
		want   time.Duration
		wantOK bool
	}{
		{name: "no poll yet", since: 0, now: ms(500)},
		{name: "none answered since the state began", polls: []poll{{ms(100), ms(120)}}, since: ms(200), now: ms(500)},
		{
			name:  "the slowest answered since the state began; older ones do not count",
			polls: []poll{{ms(100), ms(1900)}, {ms(300), ms(320)}, {ms(400), ms(450)}},
			since: ms(200), now: ms(500), want: ms(50), wantOK: true,
		},
		{
			name:  "a poll in flight counts by how long it has run, whenever it started",
			polls: []poll{{ms(100), -1}, {ms(300), ms(320)}},
			since: ms(200), now: ms(900), want: ms(800), wantOK: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p pollTimes

			for _, q := range tc.polls {
				end := p.begin(q.start)
				if q.end >= 0 {
					end(q.end)
				}
			}

			got, ok := p.slowestSince(tc.since, tc.now)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("slowestSince = %s, %t; want %s, %t", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

// Once more polls have finished than are kept, a state older than the oldest
// kept has lost some of its polls: the bound is the deadline's again.
func TestSlowestPollSinceForgotten(t *testing.T) {
	var p pollTimes

	for i := range pollTimesKept + 10 {
		start := time.Duration(i) * time.Millisecond
		p.begin(start)(start + time.Millisecond)
	}

	if _, ok := p.slowestSince(0, time.Hour); ok {
		t.Error("a state older than every kept poll got a bound from the polls")
	}

	if took, ok := p.slowestSince(time.Duration(pollTimesKept)*time.Millisecond, time.Hour); !ok || took != time.Millisecond {
		t.Errorf("a state within the kept polls: %s, %t; want 1ms, true", took, ok)
	}
}

func TestPollCadenceSince(t *testing.T) {
	o := &Observer{interval: 100 * time.Millisecond}

	// No answer yet: the deadline's bound.
	if got, want := o.pollCadenceAt(0, time.Second), o.PollCadence(); got != want {
		t.Errorf("with no poll: %s, want %s", got, want)
	}

	o.times.begin(200 * time.Millisecond)(230 * time.Millisecond)

	if got, want := o.pollCadenceAt(100*time.Millisecond, time.Second), 2*(100+30)*time.Millisecond; got != want {
		t.Errorf("after a 30 ms poll: %s, want %s", got, want)
	}

	// A poll that hangs brings the deadline's bound back, never more.
	o.times.begin(300 * time.Millisecond)

	if got, want := o.pollCadenceAt(100*time.Millisecond, 3*time.Second), o.PollCadence(); got != want {
		t.Errorf("with a poll in flight for 2.7 s: %s, want %s", got, want)
	}
}
