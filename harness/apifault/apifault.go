// Package apifault holds the behaviour of API faults, shared by the targets that
// inject them: the sim intercepts calls where the node serves or makes them, the
// real target in talchaos's own clients. Either way: refuse a call before it has
// any effect, or let it act and lose or delay the reply.
package apifault

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/target"
)

// Set holds the active faults of one node.
type Set struct {
	mu     sync.Mutex
	active []*Active
}

// Active is one fault in force.
type Active struct {
	f      target.APIFault
	code   codes.Code
	mu     sync.Mutex
	left   int // calls still to affect; -1: unlimited
	healed chan struct{}
}

// Add puts a fault in force until the returned heal is called.
func (s *Set) Add(f target.APIFault) (target.Heal, error) {
	if !slices.Contains(target.RPCs, f.RPC) {
		return nil, fmt.Errorf("cannot intercept %q: one of %s", f.RPC, strings.Join(target.RPCs, ", "))
	}

	a := &Active{f: f, left: -1, healed: make(chan struct{})}
	if f.Count > 0 {
		a.left = f.Count
	}

	if f.Mode == target.APIFail {
		code, ok := CodeByName(f.Code)
		if !ok {
			return nil, fmt.Errorf("unknown gRPC code %q", f.Code)
		}

		a.code = code
	}

	s.mu.Lock()
	s.active = append(s.active, a)
	s.mu.Unlock()

	return func() error {
		s.mu.Lock()
		defer s.mu.Unlock()

		if i := slices.Index(s.active, a); i >= 0 {
			s.active = slices.Delete(s.active, i, i+1)
			close(a.healed)
		}

		return nil
	}, nil
}

// Take returns the fault that affects this call of rpc, counting it, or nil.
func (s *Set) Take(rpc string) *Active {
	s.mu.Lock()
	defer s.mu.Unlock()

	for _, a := range s.active {
		if a.f.RPC == rpc && a.take() {
			return a
		}
	}

	return nil
}

func (a *Active) take() bool {
	a.mu.Lock()
	defer a.mu.Unlock()

	switch {
	case a.left < 0:
		return true
	case a.left == 0:
		return false
	}

	a.left--

	return true
}

// untake gives back a call take counted.
func (a *Active) untake() {
	a.mu.Lock()
	defer a.mu.Unlock()

	if a.left >= 0 {
		a.left++
	}
}

// Intercept runs call under the fault. ctx is the caller's: a lost reply is
// noticed when the caller's deadline passes.
func (a *Active) Intercept(ctx context.Context, call func(context.Context) (any, error)) (any, error) {
	switch a.f.Mode {
	case target.APIFail:
		st := status.Newf(a.code, "talchaos: injected fault: %s refused before it had any effect", a.f.RPC)

		// Typed, so a judge knows nothing was applied without reading the text.
		if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: history.InjectedReason, Domain: history.InjectedDomain}); err == nil {
			st = d
		}

		return nil, st.Err()
	case target.APIDropReply:
		// The call acts even though nobody will hear the answer.
		actCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		resp, err := call(actCtx)

		cancel()

		// A call the node refused took no effect: its answer goes back, and
		// the fault waits for a call that does (a Bootstrap refused with
		// "bootstrap is not available yet" is not the one whose reply a
		// network change loses).
		if err != nil {
			a.untake()

			return resp, err
		}

		<-ctx.Done()

		return nil, status.FromContextError(ctx.Err()).Err()
	case target.APIDelay:
		actCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		resp, err := call(actCtx)

		cancel()

		select {
		case <-time.After(a.f.Delay):
		case <-a.healed:
		}

		if ctx.Err() != nil {
			return nil, status.FromContextError(ctx.Err()).Err()
		}

		return resp, err
	}

	return call(ctx)
}

// CodeByName parses a gRPC code name such as "Unavailable".
func CodeByName(name string) (codes.Code, bool) {
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		if c.String() == name {
			return c, true
		}
	}

	return 0, false
}
