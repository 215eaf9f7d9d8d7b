package judge

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/target"
)

// The errors a client sees, as gRPC returns them.
var (
	applyRefused  = injected()
	applyDeadline = status.Error(codes.DeadlineExceeded, "context deadline exceeded")
	applyNoConn   = status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial tcp 127.0.9.3:50000: connect: connection refused"`)
	applyTLS      = status.Error(codes.Unavailable, `connection error: desc = "error reading server preface: remote error: tls: certificate required"`)
	applyEOF      = status.Error(codes.Unavailable, "error reading from server: EOF")
)

// injected is an api-fail refusal as talchaos's fault interceptors make it.
func injected() error {
	st, err := status.New(codes.Unavailable, "talchaos: injected fault: ApplyConfiguration refused before it had any effect").
		WithDetails(&errdetails.ErrorInfo{Reason: history.InjectedReason, Domain: history.InjectedDomain})
	if err != nil {
		panic(err)
	}

	return st.Err()
}

// applyCall is an insecure ApplyConfiguration to node that ended at ms.
// applyCall is an apply to node that ended at ms. A call that ran into the
// client's deadline took it (2 s, the orchestrators' floor); the others
// ended in 50 ms.
func applyCall(ms int64, node string, err error) history.Entry {
	code, msg := history.CodeOf(err)

	duration := int64(50)
	if errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded {
		duration = 2000
	}

	return history.Entry{WallMs: ms, Node: node, Call: &history.Call{
		RPC: "ApplyConfiguration", Client: history.ClientInsecure, Code: code, Message: msg, Failure: history.Classify(err),
		DurationMs: duration,
	}}
}

func applyFailed(ms int64, err error) history.Entry { return applyCall(ms, "cp2", err) }

func applied(ms int64) history.Entry { return applyCall(ms, "cp2", nil) }

// seen is cp2 observed in a mode at ms.
func seen(ms int64, mode string) history.Entry {
	return history.Entry{WallMs: ms, Node: "cp2", Observed: &history.NodeObservation{Name: "cp2", Address: cp2, Role: target.ControlPlane, Mode: mode}}
}

func left(ms int64) history.Entry { return seen(ms, history.ModeConfigured) }

// runOf is a run's history: cp2 in maintenance at the start, the entries,
// then a converged cluster as the final look.
func runOf(scale float64, entries ...history.Entry) history.History {
	h := history.History{Scale: scale}
	for _, n := range []string{"cp1", "cp2", "cp3"} {
		h.Nodes = append(h.Nodes, history.Node{Name: n, Role: target.ControlPlane, Address: map[string]string{"cp1": cp1, "cp2": cp2, "cp3": cp3}[n]})
	}

	h.Entries = append([]history.Entry{seen(0, history.ModeMaintenance)}, entries...)

	final := obs(converged)
	for _, n := range final.Ordered() {
		h.Entries = append(h.Entries, history.Entry{WallMs: 20000, Node: n.Name, Observed: n, Final: true})
	}

	return h
}

func TestApplyReplyLost(t *testing.T) {
	for _, tc := range []struct {
		name    string
		scale   float64
		entries []history.Entry
		// want is the failed call the diagnosis must quote; nil for no diagnosis.
		want error
	}{
		{
			name:    "refused before it had any effect, retried, applied",
			entries: []history.Entry{applyFailed(100, applyRefused), applied(1200), left(1500)},
		},
		{
			name:    "refused, and the success is seen only after the node left",
			entries: []history.Entry{applyFailed(100, applyRefused), left(1100), applied(1300)},
		},
		{
			name:    "refused, then the node left with no call seen succeeding",
			entries: []history.Entry{applyFailed(100, applyRefused), left(1500)},
		},
		{
			name:    "no connection: the request never left the client",
			entries: []history.Entry{applyFailed(100, applyNoConn), left(1500)},
		},
		{
			name:    "insecure retry after the node switched to mutual TLS",
			entries: []history.Entry{applied(100), left(400), applyFailed(900, applyTLS)},
		},
		{
			name:    "ambiguous failure, then a retry that succeeded",
			entries: []history.Entry{applyFailed(2100, applyDeadline), applied(3000), left(3300)},
		},
		{
			name:    "ambiguous failure, the retry's reply racing the observer",
			entries: []history.Entry{applyFailed(2100, applyDeadline), left(3000), applied(3100)},
		},
		{
			name:    "reply lost: the node left while the call was in flight",
			scale:   60,
			entries: []history.Entry{left(600), applyFailed(2000, applyDeadline), applyFailed(3000, applyTLS), applyFailed(4000, applyTLS)},
			want:    applyDeadline,
		},
		{
			name:  "reply lost: a loaded machine ended the call late, long after the node left",
			scale: 60,
			entries: []history.Entry{left(600), func() history.Entry {
				e := applyFailed(3500, applyDeadline)
				e.Call.DurationMs = 3400

				return e
			}(), applyFailed(4000, applyTLS)},
			want: applyDeadline,
		},
		{
			name:    "reply lost: the node left after the client gave up",
			entries: []history.Entry{applyFailed(2000, applyDeadline), left(2600), applyFailed(3000, applyTLS)},
			want:    applyDeadline,
		},
		{
			name:    "reply lost: connection closed mid-call",
			entries: []history.Entry{applyFailed(200, applyEOF), left(900)},
			want:    applyEOF,
		},
		{
			name:    "reply lost after an earlier refusal",
			scale:   60,
			entries: []history.Entry{applyFailed(100, applyRefused), left(1500), applyFailed(3000, applyDeadline)},
			want:    applyDeadline,
		},
		{
			name:    "a failure long after the node left did not make it leave",
			scale:   60,
			entries: []history.Entry{applied(100), left(400), applyFailed(9000, applyDeadline)},
		},
		{
			name: "second time in maintenance, reply lost",
			entries: []history.Entry{
				applied(100), left(400),
				seen(5000, history.ModeMaintenance),
				applyFailed(7000, applyDeadline), left(7500),
			},
			want: applyDeadline,
		},
		{
			name:    "another node's lost reply is not this one's",
			entries: []history.Entry{applyCall(2000, "cp3", applyDeadline), left(2500)},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := applyReplyLost(FromHistory(runOf(tc.scale, tc.entries...), Options{}))

			switch {
			case tc.want == nil && len(got) > 0:
				t.Fatalf("unexpected %s on %s: %s", got[0].Code, got[0].Node, got[0].Evidence)
			case tc.want == nil:
				return
			case len(got) != 1:
				t.Fatalf("want one apply-reply-lost, got %v", got)
			}

			code, msg := history.CodeOf(tc.want)
			want := "ApplyConfiguration cp2 (insecure): rpc error: code = " + code + " desc = " + msg

			d := got[0]
			if d.Code != "apply-reply-lost" || d.Node != "cp2" || !strings.HasPrefix(d.Evidence, want+"; then cp2 left maintenance") {
				t.Fatalf("got %s on %s with evidence %q, want it to quote %q", d.Code, d.Node, d.Evidence, want)
			}
		})
	}
}
