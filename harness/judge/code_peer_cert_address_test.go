package judge

import (
	"strings"
	"testing"

	"github.com/talchaos/talchaos/harness/history"
)

// etcd's warnings of a peer certificate, as rafthttp logs them.
const (
	peerURLNotNamed = `{"level":"warn","ts":1795671007.3249352,"msg":"failed to reach the peer URL","address":"https://172.16.0.12:2380/version",` +
		`"remote-member-id":"e0cb9def8aa5d342","error":"Get \"https://172.16.0.12:2380/version\": tls: failed to verify certificate: ` +
		`x509: certificate is valid for 10.197.230.12, not 172.16.0.12"}`
	peerUnknownAuthority = `{"level":"warn","ts":1795671007.3249352,"msg":"prober detected unhealthy status","remote-peer-id":"e0cb9def8aa5d342",` +
		`"error":"tls: failed to verify certificate: x509: certificate signed by unknown authority"}`
)

func TestPeerCertAddressMissing(t *testing.T) {
	etcdLog := func(ms int64, node, text string) history.Entry {
		return history.Entry{WallMs: ms, Node: node, Log: &history.Log{Source: history.LogEtcd, Level: "warn", Text: text}}
	}

	final := func(addrs []string) []history.Entry {
		var out []history.Entry

		for _, n := range []string{"cp1", "cp2", "cp3"} {
			e := observed(5000, n, history.ModeConfigured, running(true, ""), nil, true)
			if n == "cp2" {
				e.Observed.Addresses = addrs
			}

			out = append(out, e)
		}

		return out
	}

	for _, tc := range []struct {
		name    string
		entries []history.Entry
		want    map[string]string
	}{
		{
			name:    "cp1 dials cp2 at its private address, which cp2's certificate lacks",
			entries: append(final([]string{"172.16.0.12"}), etcdLog(3000, "cp1", peerURLNotNamed), etcdLog(3100, "cp3", peerURLNotNamed)),
			want:    map[string]string{"cp2": "cp1 etcd: failed to reach the peer URL"},
		},
		{
			name:    "an address no node is known to have",
			entries: append(final(nil), etcdLog(3000, "cp1", peerURLNotNamed)),
		},
		{
			name:    "another certificate failure",
			entries: append(final([]string{"172.16.0.12"}), etcdLog(3000, "cp1", peerUnknownAuthority)),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]string{}
			for _, d := range codeFunc("peer-cert-address-missing")(FromHistory(threeNodes(60, tc.entries...), Options{})) {
				got[d.Node] = d.Evidence
			}

			if len(got) != len(tc.want) {
				t.Fatalf("diagnosed %v, want %v", got, tc.want)
			}

			for node, text := range tc.want {
				if !strings.Contains(got[node], text) || !strings.Contains(got[node], "x509: certificate is valid for 10.197.230.12, not 172.16.0.12") {
					t.Errorf("%s: evidence %q, want %q and the x509 text", node, got[node], text)
				}
			}
		})
	}
}
