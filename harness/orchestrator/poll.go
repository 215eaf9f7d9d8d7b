package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// condition is one thing an orchestrator waits for, polled the way Talos's
// own checks are (pkg/conditions/poll.go PollingCondition, one per check in
// pkg/cluster/check/default.go): an assertion called every interval until it
// holds, fails for good (stop), or the wait ends. Hand-rolled rather than
// go-retry's loops for three things they do not do: intervals in Talos time
// (the run's Clock, with a floor), a state logged only when it changes, and
// an error that says what was awaited and what was last seen.
type condition struct {
	// what is awaited, as the error says it ("cp2 to leave maintenance").
	what string
	// node is the event log's node for the states ("" for the cluster); log
	// says whether states are logged at all (kind orchestrator.wait).
	node string
	log  bool
	// every is the interval between looks (Talos time); with backoff set it
	// doubles after each look, up to backoff.
	every, backoff time.Duration
	// within ends the wait (Talos time); 0: until the context ends.
	within time.Duration
	// check is one look: nil when the condition holds, stop(err) to give up
	// at once with err, any other error to look again (its text is the
	// state).
	check func(ctx context.Context, attempt int) error
}

// stopError ends a wait at once.
type stopError struct{ err error }

func (s stopError) Error() string { return s.err.Error() }
func (s stopError) Unwrap() error { return s.err }

// stop makes a check's error end the wait: it is returned as it is.
func stop(err error) error { return stopError{err} }

// errNotYet ends a wait whose within passed.
var errNotYet = errors.New("not within its time")

// wait polls c until it holds (nil), a check stops it (that error), or it
// ends: then the error says what was awaited, why the wait ended and the
// last state seen ("waiting for cp2 to leave maintenance: context deadline
// exceeded after 14 looks (last: ...)").
func (e *Env) wait(ctx context.Context, c condition) error {
	var deadline time.Time
	if c.within > 0 {
		deadline = time.Now().Add(e.Clock.Wall(c.within))
	}

	interval := c.every
	last := ""

	for attempt := 1; ; attempt++ {
		err := c.check(ctx, attempt)
		if err == nil {
			return nil
		}

		var s stopError
		if errors.As(err, &s) {
			return s.err
		}

		// A look the wait's own end cut short says only that: the state
		// last seen is the one before it.
		cut := ctx.Err() != nil && last != ""

		if state := err.Error(); !cut && state != last {
			if c.log {
				e.Log.Add(c.node, "orchestrator.wait", state)
			}

			last = state
		}

		why := errNotYet

		switch {
		case cut:
			why = ctx.Err()
		case deadline.IsZero() || time.Now().Before(deadline):
			why = sleep(ctx, e.d(interval))
		}

		if why != nil {
			return fmt.Errorf("waiting for %s: %w after %d looks (last: %s)", c.what, why, attempt, last)
		}

		if c.backoff > 0 {
			interval = min(interval*2, c.backoff)
		}
	}
}
