package check

import (
	"strings"
	"testing"

	"github.com/talchaos/talchaos/harness/eventlog"
)

// Exact texts of the calls the rules read (what env.call logs).
const (
	applyRefused  = "ApplyConfiguration cp2: rpc error: code = Unavailable desc = talchaos: injected fault: ApplyConfiguration refused before it had any effect"
	applyDeadline = "ApplyConfiguration cp2: rpc error: code = DeadlineExceeded desc = context deadline exceeded"
	applyOK       = "ApplyConfiguration cp2: ok"
	applyNoConn   = `ApplyConfiguration cp2: rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: dial tcp 127.0.9.3:50000: connect: connection refused"`
	applyTLS      = `ApplyConfiguration cp2: rpc error: code = Unavailable desc = connection error: desc = "error reading server preface: remote error: tls: certificate required"`
	applyEOF      = "ApplyConfiguration cp2: rpc error: code = Unavailable desc = error reading from server: EOF"
)

func applyFailed(ms int64, msg string) eventlog.Event {
	return eventlog.Event{TMs: ms, Node: "cp2", Kind: "orchestrator.error", Msg: msg}
}

func applied(ms int64) eventlog.Event {
	return eventlog.Event{TMs: ms, Node: "cp2", Kind: "orchestrator.call", Msg: applyOK}
}

func left(ms int64) eventlog.Event {
	return eventlog.Event{TMs: ms, Node: "cp2", Kind: "node.left-maintenance", Msg: "maintenance → configured"}
}

func TestApplyReplyLost(t *testing.T) {
	for _, tc := range []struct {
		name   string
		scale  float64
		events []eventlog.Event
		// want is the failed call the diagnosis must quote; "" for no diagnosis.
		want string
	}{
		{
			name:   "refused before it had any effect, retried, applied",
			events: []eventlog.Event{applyFailed(100, applyRefused), applied(1200), left(1500)},
		},
		{
			name:   "refused, and the success is seen only after the node left",
			events: []eventlog.Event{applyFailed(100, applyRefused), left(1100), applied(1300)},
		},
		{
			name:   "refused, then the node left with no call seen succeeding",
			events: []eventlog.Event{applyFailed(100, applyRefused), left(1500)},
		},
		{
			name:   "no connection: the request never left the client",
			events: []eventlog.Event{applyFailed(100, applyNoConn), left(1500)},
		},
		{
			name:   "insecure retry after the node switched to mutual TLS",
			events: []eventlog.Event{applied(100), left(400), applyFailed(900, applyTLS)},
		},
		{
			name:   "ambiguous failure, then a retry that succeeded",
			events: []eventlog.Event{applyFailed(2100, applyDeadline), applied(3000), left(3300)},
		},
		{
			name:   "ambiguous failure, the retry's reply racing the observer",
			events: []eventlog.Event{applyFailed(2100, applyDeadline), left(3000), applied(3100)},
		},
		{
			name:   "reply lost: the node left while the call was in flight",
			scale:  60,
			events: []eventlog.Event{left(600), applyFailed(2000, applyDeadline), applyFailed(3000, applyTLS), applyFailed(4000, applyTLS)},
			want:   applyDeadline,
		},
		{
			name:   "reply lost: the node left after the client gave up",
			events: []eventlog.Event{applyFailed(2000, applyDeadline), left(2600), applyFailed(3000, applyTLS)},
			want:   applyDeadline,
		},
		{
			name:   "reply lost: connection closed mid-call",
			events: []eventlog.Event{applyFailed(200, applyEOF), left(900)},
			want:   applyEOF,
		},
		{
			name:   "reply lost after an earlier refusal",
			scale:  60,
			events: []eventlog.Event{applyFailed(100, applyRefused), left(1500), applyFailed(3000, applyDeadline)},
			want:   applyDeadline,
		},
		{
			name:   "a failure long after the node left did not make it leave",
			scale:  60,
			events: []eventlog.Event{applied(100), left(400), applyFailed(9000, applyDeadline)},
		},
		{
			name: "second time in maintenance, reply lost",
			events: []eventlog.Event{
				applied(100), left(400),
				{TMs: 5000, Node: "cp2", Kind: "node.mode", Msg: "configured → maintenance"},
				applyFailed(7000, applyDeadline), left(7500),
			},
			want: applyDeadline,
		},
		{
			name:   "another node's lost reply is not this one's",
			events: []eventlog.Event{{TMs: 2000, Node: "cp3", Kind: "orchestrator.error", Msg: strings.ReplaceAll(applyDeadline, "cp2", "cp3")}, left(2500)},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := applyReplyLost(&Evidence{Final: obs(converged), Events: tc.events, Scale: tc.scale})

			switch {
			case tc.want == "" && len(got) > 0:
				t.Fatalf("unexpected %s on %s: %s", got[0].Code, got[0].Node, got[0].Evidence)
			case tc.want == "":
				return
			case len(got) != 1:
				t.Fatalf("want one apply-reply-lost, got %v", got)
			}

			d := got[0]
			if d.Code != "apply-reply-lost" || d.Node != "cp2" || !strings.HasPrefix(d.Evidence, tc.want+"; then cp2 left maintenance") {
				t.Fatalf("got %s on %s with evidence %q, want it to quote %q", d.Code, d.Node, d.Evidence, tc.want)
			}
		})
	}
}
