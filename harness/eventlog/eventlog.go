// Package eventlog records what happened during a run, with millisecond offsets
// from the run's start: orchestrator calls, fault starts and stops, observed
// transitions and node log lines.
package eventlog

import (
	"sync"
	"time"
)

// Event is one entry of the log. Kind is a dotted, stable vocabulary
// ("orchestrator.apply", "fault.start", "etcd.learner-added", "log.machined", ...).
type Event struct {
	TMs  int64  `json:"tMs"`
	Node string `json:"node,omitempty"`
	Kind string `json:"kind"`
	Msg  string `json:"msg"`
}

// Log is safe for concurrent use.
type Log struct {
	start time.Time

	mu     sync.Mutex
	events []Event
	sinks  []func(Event)
	scrub  func(string) string
}

// SetScrubber makes every later event message pass through f (to keep secrets
// out of the log and of everything printed from it).
func (l *Log) SetScrubber(f func(string) string) {
	l.mu.Lock()
	defer l.mu.Unlock()

	l.scrub = f
}

// New starts a log whose offsets count from now.
func New() *Log { return &Log{start: time.Now()} }

// Start is the instant offsets count from.
func (l *Log) Start() time.Time { return l.start }

// Since is the offset of now from the log's start.
func (l *Log) Since() time.Duration { return time.Since(l.start) }

// OnEvent registers a function called (synchronously, in order) for every new event.
func (l *Log) OnEvent(f func(Event)) {
	l.mu.Lock()
	defer l.mu.Unlock()

	l.sinks = append(l.sinks, f)
}

// Add records an event now.
func (l *Log) Add(node, kind, msg string) Event {
	l.mu.Lock()
	defer l.mu.Unlock()

	if l.scrub != nil {
		msg = l.scrub(msg)
	}

	e := Event{TMs: time.Since(l.start).Milliseconds(), Node: node, Kind: kind, Msg: msg}
	l.events = append(l.events, e)

	for _, s := range l.sinks {
		s(e)
	}

	return e
}

// Events returns a copy of all events so far.
func (l *Log) Events() []Event {
	l.mu.Lock()
	defer l.mu.Unlock()

	return append([]Event(nil), l.events...)
}
