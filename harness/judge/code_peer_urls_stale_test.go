package judge

import (
	"strings"
	"testing"

	"github.com/talchaos/talchaos/harness/history"
)

// What machined and etcd log when a control plane's advertised address
// went while its member's peer URLs stayed on it (talos #12720).
const (
	advertisedPeerFailedLine = `controller failed {"component": "controller-runtime", "controller": "etcd.AdvertisedPeerController", ` +
		`"error": "error updating advertised peers: error getting member list: context deadline exceeded"}`
	advertisedPeerUpdatedLine = `updated etcd peer URLs {"component": "controller-runtime", "controller": "etcd.AdvertisedPeerController", ` +
		`"new_peer_urls": ["https://10.160.0.11:2380"], "member_id": 1}`
	proberNoRoute = `{"level":"warn","ts":1795955644.6630106,"msg":"prober detected unhealthy status","round-tripper-name":"ROUND_TRIPPER_RAFT_MESSAGE",` +
		`"remote-peer-id":"0000000000000001","rtt":"0s","error":"dial tcp 10.150.0.11:2380: connect: no route to host"}`
)

func TestPeerURLsStale(t *testing.T) {
	members := []history.Member{member(1, "cp1", "10.150.0.11", false), member(2, "cp2", "10.150.0.12", false), member(3, "cp3", "10.150.0.13", false)}

	// The member list of a look before the move; without a quorum the
	// last looks have none (etcd's MemberList is linearizable).
	final := func(healthy bool) []history.Entry {
		out := []history.Entry{observed(1000, "cp1", history.ModeConfigured, running(true, ""), members, false)}
		for _, n := range []string{"cp1", "cp2", "cp3"} {
			out = append(out, observed(9000, n, history.ModeConfigured, running(healthy, "context deadline exceeded"), nil, true))
		}

		return out
	}

	for _, tc := range []struct {
		name    string
		entries []history.Entry
		want    []string
	}{
		{
			name: "the controller failed, etcd has no quorum",
			entries: append(final(false), machinedLine(3000, "cp1", advertisedPeerFailedLine),
				etcdLog(3100, "cp3", "warn", proberNoRoute)),
			want: []string{"cp1: error updating advertised peers: error getting member list: context deadline exceeded",
				"cp3 etcd: prober detected unhealthy status", "no route to host"},
		},
		{
			name:    "the controller moved the member after failing once",
			entries: append(final(false), machinedLine(3000, "cp1", advertisedPeerFailedLine), machinedLine(4000, "cp1", advertisedPeerUpdatedLine)),
		},
		{
			name:    "etcd healthy at the end",
			entries: append(final(true), machinedLine(3000, "cp1", advertisedPeerFailedLine)),
		},
		{
			name:    "no failure of the controller",
			entries: final(false),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := threeNodes(60, tc.entries...)
			wantOneDiagnosis(t, "peer-urls-stale", h, "cp1", tc.want)

			if tc.want == nil {
				return
			}

			code, _ := LookupCode("peer-urls-stale")
			if d := code.Diagnose(FromHistory(h, Options{})); !strings.Contains(d[0].Message, "cp1's etcd member is at https://10.150.0.11:2380, ") {
				t.Errorf("message %q does not name the member's peer URL", d[0].Message)
			}
		})
	}
}
