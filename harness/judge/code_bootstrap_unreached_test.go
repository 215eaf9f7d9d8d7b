package judge

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/talchaos/talchaos/harness/history"
)

// Bootstrap through a shared IP no node holds yet: grpc's answer when the
// dial finds no host (cozystack/talos-bootstrap#30).
var noRouteToVIP = status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial tcp 10.119.0.10:50000: connect: no route to host"`)

func TestBootstrapUnreached(t *testing.T) {
	waiting := waitingFor("etcd is waiting to join the cluster")
	voter := []history.Member{member(1, "cp1", cp1, false)}

	// Three configured control planes whose etcd waits, after the calls.
	final := func(members []history.Member, calls ...history.Entry) history.History {
		es := append([]history.Entry{}, calls...)
		for _, n := range []string{"cp1", "cp2", "cp3"} {
			es = append(es, observed(90000, n, history.ModeConfigured, waiting, members, true))
		}

		return threeNodes(60, es...)
	}

	for _, tc := range []struct {
		name string
		h    history.History
		want []string // the evidence's parts; nil: no diagnosis
	}{
		{"every Bootstrap through the VIP found no host", final(nil, bootCall(2000, "cp1", noRouteToVIP), bootCall(7000, "cp1", noRouteToVIP)),
			[]string{"2 Bootstrap call(s), none connected; the last at", "no route to host", "no node reports an etcd member"}},
		{"no Bootstrap asked for", final(nil), nil},
		{"one Bootstrap reached a node and was refused", final(nil, bootCall(2000, "cp1", noRouteToVIP), bootCall(7000, "cp1", notInSync)), nil},
		{"a Bootstrap that got no answer may have acted", final(nil, bootCall(2000, "cp1", bootDeadline)), nil},
		{"a cluster formed", final(voter, bootCall(2000, "cp1", noRouteToVIP)), nil},
		{"the nodes never left maintenance", threeNodes(60, bootCall(2000, "cp1", noRouteToVIP),
			observed(90000, "cp1", history.ModeMaintenance, nil, nil, true), observed(90000, "cp2", history.ModeMaintenance, nil, nil, true),
			observed(90000, "cp3", history.ModeMaintenance, nil, nil, true)), nil},
	} {
		t.Run(tc.name, func(t *testing.T) { wantOneDiagnosis(t, "bootstrap-unreached", tc.h, "cp1", tc.want) })
	}
}
