package judge

import "github.com/talchaos/talchaos/harness/history"

// Live is the evidence of a run's history while the run records it: the
// fold the judge reads afterwards (FromHistory), kept up to date entry by
// entry, so that a trigger and a verdict never disagree about a moment.
// State triggers watch it (Watch); the run's narration of mode changes
// reads it.
type Live struct {
	f *history.Follower
}

// Follow keeps the evidence of what rec records.
func Follow(rec *history.Recorder, opts Options) *Live {
	return &Live{f: rec.Follow(func(h history.History) history.Fold { return NewEvidence(h, opts) })}
}

// Read calls fn with the evidence of every entry recorded so far. Recording
// waits while fn runs: fn must be quick and must not record (nor wait for
// anything that records).
func (l *Live) Read(fn func(ev *Evidence)) {
	l.f.Read(func(f history.Fold) { fn(f.(*Evidence)) })
}

// Watch calls fn after each recorded entry is folded into the evidence, as
// history.Follower.Watch says: fn sees every state the history shows, even
// one that no longer holds when the evidence is next read.
func (l *Live) Watch(fn func(ev *Evidence, e history.Entry)) {
	l.f.Watch(func(f history.Fold, e history.Entry) { fn(f.(*Evidence), e) })
}
