package orchestrator

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/talchaos/talchaos/harness/clock"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A node that took its configuration and then answers nothing at all is not
// waited for past a minute of Talos time, unless it is the bootstrap node.
func TestWaitConfiguredGoesOnWithoutASilentNode(t *testing.T) {
	env := testEnv(t)          // nothing listens on the nodes' endpoints
	env.Clock = clock.New(600) // a Talos minute is 100 ms

	r := &Resilient{}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	if err := r.waitConfigured(ctx, env, env.Nodes[0], true, nil); err != nil {
		t.Fatalf("waitConfigured: %v", err)
	}

	if skips := messages(env.Log, "orchestrator.skip"); len(skips) != 1 || !strings.Contains(skips[0], "cp1 took its configuration and has not answered for 1m0s") {
		t.Errorf("skips = %q", skips)
	}

	// The bootstrap node is waited for until the run's end.
	short, cancelShort := context.WithTimeout(context.Background(), time.Second)
	defer cancelShort()

	if err := r.waitConfigured(short, env, env.Nodes[1], false, nil); err == nil || !strings.Contains(err.Error(), "waiting for cp2 to leave maintenance") {
		t.Errorf("bootstrap node: %v", err)
	}
}

func TestSameError(t *testing.T) {
	a := errors.New(`rpc error: code = Unavailable desc = "read tcp 127.0.0.1:44852->127.0.137.4:50000: read: connection reset by peer"`)
	b := errors.New(`rpc error: code = Unavailable desc = "read tcp 127.0.0.1:45014->127.0.137.4:50000: read: connection reset by peer"`)
	c := status.Error(codes.Unavailable, "connection refused")

	if !sameError(a, b) || sameError(a, c) || !sameError(nil, nil) || sameError(nil, c) {
		t.Error("sameError does not tell errors apart by what they say")
	}
}
