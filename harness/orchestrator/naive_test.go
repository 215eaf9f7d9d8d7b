package orchestrator

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/talchaos/talchaos/harness/clock"
	"github.com/talchaos/talchaos/harness/target"
)

func TestBootstrapDecision(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bootstrapOutcome
	}{
		{nil, bootstrapAccepted},
		{status.Error(codes.InvalidArgument, "bootstrap is not available"), bootstrapRejected},
		// Terraform's talos_machine_bootstrap retries everything else, even
		// AlreadyExists after a lost reply.
		{status.Error(codes.AlreadyExists, "etcd data directory is not empty"), bootstrapRetry},
		{status.Error(codes.FailedPrecondition, "time is not in sync yet"), bootstrapRetry},
		{status.Error(codes.Unavailable, "connection error: desc = \"error reading server preface: remote error: tls: certificate required\""), bootstrapRetry},
		{status.Error(codes.DeadlineExceeded, "context deadline exceeded"), bootstrapRetry},
		{status.Error(codes.Unimplemented, "unknown service"), bootstrapRetry},
		{status.Error(codes.PermissionDenied, "not authorized"), bootstrapRetry},
		{status.Error(codes.Unknown, "boom"), bootstrapRetry},
		{errors.New("not a gRPC error"), bootstrapRetry},
	} {
		if got := bootstrapDecision(tc.err); got != tc.want {
			t.Errorf("bootstrapDecision(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestRetryApply(t *testing.T) {
	errs := []error{
		status.Error(codes.Unavailable, "connection error: desc = \"error reading server preface: remote error: tls: certificate required\""),
		status.Error(codes.DeadlineExceeded, "context deadline exceeded"),
		status.Error(codes.InvalidArgument, "the config is invalid"),
		errors.New("plain"),
	}

	for _, err := range errs {
		if retryApply(false, err) {
			t.Errorf("without RetryApply, %v is retried", err)
		}

		if !retryApply(true, err) {
			t.Errorf("with RetryApply, %v is not retried", err)
		}
	}

	if retryApply(true, nil) || retryApply(false, nil) {
		t.Error("a successful apply is retried")
	}
}

func TestVoters(t *testing.T) {
	members := []*machine.EtcdMember{
		{Id: 1, Hostname: "cp1"},
		{Id: 2, Hostname: "cp3", IsLearner: true},
		{Id: 3, IsLearner: true},
		{Id: 4, Hostname: "cp4"},
	}

	vs, ls := voters(members)
	if !slices.Equal(vs, []string{"cp1", "cp4"}) || !slices.Equal(ls, []string{"cp3", "(unstarted)"}) {
		t.Errorf("voters = %q, learners = %q", vs, ls)
	}

	cps := []target.Node{{Name: "cp1", Address: "10.0.0.1"}, {Name: "cp2", Address: "10.0.0.2"}, {Name: "cp3", Address: "10.0.0.3"}}
	if got := missingVoters(cps, vs); !slices.Equal(got, []string{"cp2", "cp3"}) {
		t.Errorf("missing = %q", got)
	}

	if got := missingVoters(cps, []string{"cp1", "10.0.0.2", "cp3"}); got != nil {
		t.Errorf("missing = %q, want none", got)
	}
}

// The nodes of testEnv listen nowhere: every call fails with Unavailable, which
// is enough to see what the script does with failures.

func TestNaiveApplyErrorsIgnored(t *testing.T) {
	env := testEnv(t)

	for _, n := range env.Nodes {
		if err := (&Naive{}).apply(t.Context(), env, n); err != nil {
			t.Fatalf("apply %s = %v, want the error ignored", n.Name, err)
		}
	}

	errs := messages(env.Log, "orchestrator.error")
	if len(errs) != len(env.Nodes) {
		t.Fatalf("orchestrator.error events = %q, want one per node", errs)
	}

	for i, n := range env.Nodes {
		if !strings.HasPrefix(errs[i], "ApplyConfiguration "+n.Name+": rpc error: code = Unavailable") {
			t.Errorf("event %q does not carry the gRPC error", errs[i])
		}
	}
}

func TestNaiveRetryApplyUntilDeadline(t *testing.T) {
	env := testEnv(t)
	env.Clock = clock.New(1000) // 5 s polls are 20 ms

	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()

	err := (&Naive{RetryApply: true}).apply(ctx, env, env.Nodes[0])
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "Unavailable") {
		t.Fatalf("apply = %v, want a deadline error with the last gRPC error", err)
	}

	if n := len(messages(env.Log, "orchestrator.error")); n < 3 {
		t.Errorf("%d failed attempts recorded, want several", n)
	}
}

func TestNaiveRunStopsBeforeBootstrapWithRetryApply(t *testing.T) {
	env := testEnv(t)

	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()

	err := (&Naive{RetryApply: true}).Run(ctx, env)
	if err == nil || !strings.Contains(err.Error(), "waiting for cp1 to take its configuration: context deadline exceeded") {
		t.Fatalf("Run = %v, want it to give up applying to cp1", err)
	}

	for _, e := range env.Log.Events() {
		if strings.Contains(e.Msg, "Bootstrap") || strings.Contains(e.Msg, "cp2") {
			t.Errorf("went past the first failing apply: %q", e.Msg)
		}
	}
}

func TestNaiveBootstrapRetriedUntilDeadline(t *testing.T) {
	env := testEnv(t)

	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()

	err := (&Naive{}).Run(ctx, env)
	if err == nil || !strings.Contains(err.Error(), "waiting for cp2 to accept Bootstrap: context deadline exceeded") {
		t.Fatalf("Run = %v, want the bootstrap to time out", err)
	}

	var applies, boots int

	for _, m := range messages(env.Log, "orchestrator.error") {
		switch {
		case strings.HasPrefix(m, "ApplyConfiguration"):
			applies++
		case strings.HasPrefix(m, "Bootstrap cp2: rpc error"):
			boots++
		}
	}

	if applies != len(env.Nodes) || boots < 2 {
		t.Errorf("%d apply errors, %d bootstrap errors; want one per node and several", applies, boots)
	}
}
