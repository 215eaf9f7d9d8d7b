package sim

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/siderolabs/go-retry/retry"
)

// retryLoop is go-retry's retry.Constant as Talos uses it (siderolabs/go-retry
// retry.go), reproduced so that jitter comes from the run's seed and "retrying
// error" lines go to the node's log instead of the process-wide logger. The error
// it returns is go-retry's own ErrorSet, so texts match Talos to the letter.
type retryLoop struct {
	total          time.Duration // the whole budget
	interval       time.Duration // constant units between attempts
	jitter         time.Duration // up to this much added to each interval
	attemptTimeout time.Duration // 0: attempts share the overall context
	logf           func(format string, args ...any)
	rng            *rand.Rand
}

// fatal marks an error that stops the loop at once (go-retry's unexpected error).
type fatal struct{ error }

func (f fatal) Unwrap() error { return f.error }

func (r retryLoop) run(ctx context.Context, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, r.total)
	defer cancel()

	errs := &retry.ErrorSet{}

	for {
		err := func() error {
			attemptCtx := ctx

			if r.attemptTimeout > 0 {
				var attemptCancel context.CancelFunc

				attemptCtx, attemptCancel = context.WithTimeout(ctx, r.attemptTimeout)
				defer attemptCancel()
			}

			return f(attemptCtx)
		}()
		if err == nil {
			return nil
		}

		var stop fatal
		if errors.As(err, &stop) {
			errs.Append(stop.error)

			return errs
		}

		if errors.Is(err, context.DeadlineExceeded) {
			err = retry.TimeoutError{}

			if ctx.Err() != nil {
				errs.Append(err)

				return errs
			}
		}

		if exists := errs.Append(err); !exists && r.logf != nil {
			r.logf("retrying error: %s", err)
		}

		tick := r.interval
		if r.jitter > 0 && r.rng != nil {
			tick += time.Duration(r.rng.Int64N(int64(r.jitter)))
		}

		timer := time.NewTimer(tick)

		select {
		case <-ctx.Done():
			timer.Stop()

			err := ctx.Err()
			if errors.Is(err, context.DeadlineExceeded) {
				err = retry.TimeoutError{}
			}

			errs.Append(err)

			return errs
		case <-timer.C:
		}
	}
}
