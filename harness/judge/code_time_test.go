package judge

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/target"
)

// The answers a client gets, as real Talos and Go give them.
var (
	notInSync       = status.Error(codes.FailedPrecondition, "time is not in sync yet")
	notAvailable    = status.Error(codes.FailedPrecondition, "bootstrap is not available yet")
	dataNotEmpty    = status.Error(codes.AlreadyExists, "etcd data directory is not empty")
	bootDeadline    = status.Error(codes.DeadlineExceeded, "context deadline exceeded")
	notYetValid     = status.Error(codes.Unavailable, `connection error: desc = "transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate has expired or is not yet valid: current time 2026-11-25T18:31:18Z is before 2027-11-25T18:31:13Z"`)
	expiredByClient = status.Error(codes.Unavailable, `connection error: desc = "transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate has expired or is not yet valid: current time 2026-11-25T18:31:18Z is after 2026-11-25T17:31:13Z"`)
)

// bootCall is a talosconfig Bootstrap of node that ended at ms.
func bootCall(ms int64, node string, err error) history.Entry {
	code, msg := history.CodeOf(err)

	return history.Entry{WallMs: ms, Node: node, Call: &history.Call{
		RPC: "Bootstrap", Client: history.ClientTalosconfig, Code: code, Message: msg, Failure: history.Classify(err), DurationMs: 50,
	}}
}

// observed is node observed at ms with its etcd service in a state; final marks
// the run's last look.
func observed(ms int64, node, mode string, etcd *history.Service, members []history.Member, final bool) history.Entry {
	return history.Entry{WallMs: ms, Node: node, Final: final, Observed: &history.NodeObservation{
		Name: node, Address: map[string]string{"cp1": cp1, "cp2": cp2, "cp3": cp3}[node], Role: target.ControlPlane, Mode: mode,
		Etcd: etcd, Members: members,
	}}
}

// threeNodes is a history of cp1..cp3 at a time scale.
func threeNodes(scale float64, entries ...history.Entry) history.History {
	h := history.History{Scale: scale, Entries: entries}
	for _, n := range []string{"cp1", "cp2", "cp3"} {
		h.Nodes = append(h.Nodes, history.Node{Name: n, Role: target.ControlPlane, Address: map[string]string{"cp1": cp1, "cp2": cp2, "cp3": cp3}[n]})
	}

	return h
}

func waitingFor(msg string) *history.Service { return &history.Service{State: "Waiting", Message: msg} }

// diagnosis is a diagnosis's node and evidence.
type diagnosis = struct{ Node, Evidence string }

// codeFunc runs the code name alone.
func codeFunc(name string) func(*Evidence) []diagnosis {
	c, _ := LookupCode(name)

	return func(ev *Evidence) []diagnosis {
		var out []diagnosis
		for _, d := range c.Diagnose(ev) {
			if d.Code != name {
				panic("code " + name + " made a diagnosis " + d.Code)
			}

			out = append(out, diagnosis{d.Node, d.Evidence})
		}

		return out
	}
}

// wantOneDiagnosis checks that code diagnoses h once, on node, with every
// part of want in the evidence; nil want: no diagnosis at all.
func wantOneDiagnosis(t *testing.T, code string, h history.History, node string, want []string) {
	t.Helper()

	got := codeFunc(code)(FromHistory(h, Options{}))

	if want == nil {
		if len(got) != 0 {
			t.Fatalf("diagnosed %+v", got)
		}

		return
	}

	if len(got) != 1 || got[0].Node != node {
		t.Fatalf("got %+v, want one diagnosis on %s", got, node)
	}

	for _, w := range want {
		if !strings.Contains(got[0].Evidence, w) {
			t.Errorf("evidence %q lacks %q", got[0].Evidence, w)
		}
	}
}

func TestTimeBootstrapAndClockDiagnoses(t *testing.T) {
	voter := []history.Member{member(1, "cp1", cp1, false)}
	ok := running(true, "")

	for _, tc := range []struct {
		name string
		code string
		h    history.History
		// want: per diagnosed node, a text its evidence must hold.
		want map[string]string
	}{
		{
			name: "etcd waits for the time sync for minutes, Bootstrap refused for it",
			code: "time-not-synced",
			h: threeNodes(60,
				observed(100, "cp1", history.ModeConfigured, waitingFor(`Waiting for service "cri" to be "up", time sync`), nil, false),
				observed(150, "cp2", history.ModeConfigured, waitingFor(`Waiting for service "cri" to be "up", time sync, etcd spec`), nil, false),
				bootCall(200, "cp1", notAvailable),
				observed(300, "cp1", history.ModeConfigured, waitingFor("Waiting for time sync"), nil, false),
				bootCall(400, "cp1", notInSync), bootCall(4000, "cp1", notInSync),
				observed(5000, "cp1", history.ModeConfigured, waitingFor("Waiting for time sync"), nil, true),
				observed(5000, "cp2", history.ModeConfigured, waitingFor("Waiting for time sync, etcd spec"), nil, true),
				observed(5000, "cp3", history.ModeConfigured, waitingFor(`Waiting for service "cri" to be "up", etcd spec`), nil, true)),
			want: map[string]string{
				"cp1": `a service Waiting ("Waiting for time sync") since 6s Talos into the run; Bootstrap cp1 (talosconfig): rpc error: code = FailedPrecondition desc = time is not in sync yet (2 time(s), the last at 4m0s Talos (4.0s wall))`,
				"cp2": `a service Waiting ("Waiting for time sync, etcd spec")`,
			},
		},
		{
			name: "a boot's first wait names the time sync; it syncs within seconds",
			code: "time-not-synced",
			h: threeNodes(60,
				observed(100, "cp1", history.ModeConfigured, waitingFor(`Waiting for volumes /var/lib, ETCD to be mounted, service "cri" to be "up", time sync, network, etcd spec`), nil, false),
				bootCall(200, "cp1", notInSync),
				observed(500, "cp1", history.ModeConfigured, ok, voter, false),
				bootCall(600, "cp1", nil),
				observed(5000, "cp1", history.ModeConfigured, ok, voter, true)),
		},
		{
			name: "the time synced after a long wait: not at the end",
			code: "time-not-synced",
			h: threeNodes(60,
				observed(100, "cp1", history.ModeConfigured, waitingFor("Waiting for time sync"), nil, false),
				bootCall(3000, "cp1", notInSync),
				observed(3100, "cp1", history.ModeConfigured, ok, voter, false),
				bootCall(3200, "cp1", nil),
				observed(5000, "cp1", history.ModeConfigured, ok, voter, true)),
		},
		{
			name: "Bootstrap's reply lost, every retry AlreadyExists",
			code: "bootstrap-reply-lost",
			h: threeNodes(60,
				bootCall(100, "cp1", notAvailable), bootCall(2300, "cp1", bootDeadline),
				bootCall(2400, "cp1", dataNotEmpty), bootCall(2500, "cp1", dataNotEmpty),
				observed(5000, "cp1", history.ModeConfigured, ok, voter, true)),
			want: map[string]string{
				"cp1": `Bootstrap cp1 (talosconfig): rpc error: code = DeadlineExceeded desc = context deadline exceeded at 2m18s Talos (2.3s wall); then 2 Bootstrap call(s) answered AlreadyExists "etcd data directory is not empty", the last at 2m30s Talos (2.5s wall); none answered OK`,
			},
		},
		{
			name: "AlreadyExists after a Bootstrap that was answered OK",
			code: "bootstrap-reply-lost",
			h: threeNodes(60,
				bootCall(100, "cp1", nil), bootCall(2300, "cp1", bootDeadline), bootCall(2400, "cp1", dataNotEmpty),
				observed(5000, "cp1", history.ModeConfigured, ok, voter, true)),
		},
		{
			name: "AlreadyExists with no unanswered Bootstrap before it (bootstrapped by someone else)",
			code: "bootstrap-reply-lost",
			h: threeNodes(60,
				bootCall(2400, "cp1", dataNotEmpty), bootCall(2500, "cp1", bootDeadline),
				observed(5000, "cp1", history.ModeConfigured, ok, voter, true)),
		},
		{
			name: "an unanswered Bootstrap, then AlreadyExists, on a node in no cluster",
			code: "bootstrap-reply-lost",
			h: threeNodes(60,
				bootCall(2300, "cp2", bootDeadline), bootCall(2400, "cp2", dataNotEmpty),
				observed(5000, "cp1", history.ModeConfigured, ok, voter, true),
				observed(5000, "cp2", history.ModeConfigured, preparing, nil, true)),
		},
		{
			name: "the observer cannot take the node's certificate: not valid yet",
			code: "clock-skew",
			h: threeNodes(60,
				observed(5000, "cp2", history.ModeCertificateTime, nil, nil, true),
				observed(5000, "cp1", history.ModeConfigured, ok, voter, true)),
			want: map[string]string{"cp2": ""},
		},
		{
			name: "the orchestrator's calls fail on the node's expired certificate, and nothing answers after",
			code: "clock-skew",
			h: threeNodes(60,
				bootCall(100, "cp1", expiredByClient), bootCall(200, "cp1", expiredByClient),
				observed(5000, "cp1", history.ModeDown, nil, nil, true)),
			want: map[string]string{"cp1": "is after 2026-11-25T17:31:13Z"},
		},
		{
			name: "a certificate failure, then the node answered (refusing Bootstrap: TLS worked)",
			code: "clock-skew",
			h: threeNodes(60,
				bootCall(100, "cp1", notYetValid), bootCall(200, "cp1", notAvailable),
				observed(5000, "cp1", history.ModeConfigured, ok, voter, true)),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]string{}
			for _, d := range codeFunc(tc.code)(FromHistory(tc.h, Options{})) {
				got[d.Node] = d.Evidence
			}

			if len(got) != len(tc.want) {
				t.Fatalf("%s on %v, want on %v", tc.code, got, tc.want)
			}

			for node, text := range tc.want {
				if ev, ok := got[node]; !ok || !strings.Contains(ev, text) {
					t.Errorf("%s on %s: evidence %q, want it to hold %q", tc.code, node, ev, text)
				}
			}
		})
	}
}

// What an error says of the node's clock.
func TestSkewMessage(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{notYetValid, "cp2's certificate is valid only from 2027-11-25T18:31:13Z, 8759h59m55s after the client's time: cp2's clock is at least that far ahead"},
		{expiredByClient, "cp2's certificate expired at 2026-11-25T17:31:13Z by the client's clock, 1h0m5s before it: cp2's clock is behind"},
		{status.Error(codes.Unavailable, `connection error: desc = "error reading server preface: remote error: tls: expired certificate"`),
			"cp2 and the client do not take each other's certificate as valid now: one of their clocks is off"},
	} {
		if got := skewMessage("cp2", tc.err.Error()); got != tc.want {
			t.Errorf("skewMessage(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
