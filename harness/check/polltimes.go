package check

import (
	"sync"
	"time"
)

// A settle must not judge while an answer that could change the state is on
// its way. The bound it used was a poll's deadline (pollTimeout, 2 s) after
// the slowest interval: the longest any answer can take. On a machine where
// every poll answers in milliseconds that is two seconds of every run spent
// waiting for answers that have already come. pollTimes keeps how long the
// observer's polls took, and which are in flight, so that the settle can
// wait for the answers it is really waiting for (PollCadenceSince): twice the
// slowest interval and the slowest poll since the state began, in flight
// ones counted by how long they have run, never more than the deadline's
// bound. A poll that hangs (a node blackholed, paused, going down) makes the
// bound the deadline's again.

// pollTimesKept is how many finished polls are kept: minutes of a three-node
// run, tens of seconds of a 7 + 50 one. A state older than the oldest kept
// gets the deadline's bound.
const pollTimesKept = 8192

type pollTime struct{ start, took time.Duration }

type pollTimes struct {
	mu       sync.Mutex
	done     [pollTimesKept]pollTime
	next     int
	full     bool
	inflight map[uint64]time.Duration
	seq      uint64
}

// begin notes a poll that started at start; the returned func ends it at
// the offset it is given.
func (p *pollTimes) begin(start time.Duration) func(end time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()

	if p.inflight == nil {
		p.inflight = map[uint64]time.Duration{}
	}

	p.seq++
	id := p.seq
	p.inflight[id] = start

	return func(end time.Duration) {
		p.mu.Lock()
		defer p.mu.Unlock()

		delete(p.inflight, id)

		p.done[p.next] = pollTime{start: start, took: end - start}
		p.next = (p.next + 1) % pollTimesKept
		p.full = p.full || p.next == 0
	}
}

// slowestSince is the longest of the polls that started at or after since
// and of the polls in flight at now (by how long they have run so far); ok
// is false when no poll has finished since then, or when polls since then
// are no longer all kept.
func (p *pollTimes) slowestSince(since, now time.Duration) (slowest time.Duration, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()

	kept := p.next
	if p.full {
		kept = pollTimesKept
	}

	oldest := time.Duration(-1)

	for i := range kept {
		t := p.done[i]

		if oldest < 0 || t.start < oldest {
			oldest = t.start
		}

		if t.start >= since {
			slowest, ok = max(slowest, t.took), true
		}
	}

	if p.full && oldest > since {
		return 0, false
	}

	for _, start := range p.inflight {
		slowest = max(slowest, now-start)
	}

	return slowest, ok
}
