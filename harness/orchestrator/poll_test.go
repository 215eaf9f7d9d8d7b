package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/talchaos/talchaos/harness/clock"
	"github.com/talchaos/talchaos/harness/eventlog"
)

func TestWait(t *testing.T) {
	errGone := errors.New("gone for good")

	for _, tc := range []struct {
		name   string
		c      condition
		want   string // "" for nil
		logged []string
	}{
		{"holds at the third look", condition{what: "x", node: "cp1", log: true, every: time.Second, check: func(_ context.Context, n int) error {
			if n < 3 {
				return errors.New("not yet")
			}

			return nil
		}}, "", []string{"not yet"}},
		{"logs a state once, each change", condition{what: "x", log: true, every: time.Second, check: func(_ context.Context, n int) error {
			switch {
			case n < 3:
				return errors.New("a")
			case n < 5:
				return errors.New("b")
			}

			return nil
		}}, "", []string{"a", "b"}},
		{"stops", condition{what: "x", every: time.Second, check: func(_ context.Context, n int) error {
			if n == 2 {
				return stop(errGone)
			}

			return errors.New("not yet")
		}}, "gone for good", nil},
		{"within", condition{what: "cp2 to leave maintenance", every: time.Second, within: 3 * time.Second, check: func(context.Context, int) error {
			return errors.New("x509: certificate signed by unknown authority")
		}}, "waiting for cp2 to leave maintenance: not within its time after ", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := eventlog.New()
			env := &Env{Clock: clock.New(1000), Log: log}

			err := env.wait(context.Background(), tc.c)

			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("wait: %v", err)
			case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
				t.Fatalf("wait: %v, want %q...", err, tc.want)
			}

			var logged []string

			for _, e := range log.Events() {
				if e.Kind == "orchestrator.wait" {
					logged = append(logged, e.Msg)
				}
			}

			if strings.Join(logged, "|") != strings.Join(tc.logged, "|") {
				t.Errorf("logged %q, want %q", logged, tc.logged)
			}
		})
	}

	// The context ending ends the wait, saying what was awaited and last seen.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()

	env := &Env{Clock: clock.New(1000), Log: eventlog.New()}
	err := env.wait(ctx, condition{what: "3 non-learner etcd members", every: time.Second, check: func(context.Context, int) error {
		return errors.New("2 of 3 non-learner members")
	}})

	if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.HasSuffix(err.Error(), "(last: 2 of 3 non-learner members)") {
		t.Errorf("wait: %v", err)
	}

	// A look still under way when the context ends fails with the context's
	// error; the state last seen is the one before it (a loaded machine
	// made the naive orchestrator's apply report "DeadlineExceeded" instead
	// of the node's "Unavailable").
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()

	err = env.wait(ctx, condition{what: "cp1 to take its configuration", every: time.Second, check: func(ctx context.Context, attempt int) error {
		if attempt == 1 {
			return errors.New("rpc error: code = Unavailable")
		}

		<-ctx.Done()

		return fmt.Errorf("rpc error: code = DeadlineExceeded desc = %w", ctx.Err())
	}})

	if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.HasSuffix(err.Error(), "after 2 looks (last: rpc error: code = Unavailable)") {
		t.Errorf("wait cut short: %v", err)
	}
}
