package check

import (
	"testing"
	"time"

	"github.com/talchaos/talchaos/harness/clock"
	"github.com/talchaos/talchaos/harness/eventlog"
	"github.com/talchaos/talchaos/harness/history"
)

// etcd's warnings are kept only where a diagnosis reads them: the listed
// ones, and the first of each peer address failing where it is dialled
// (a certificate without it, a dial that fails) per node.
func TestEtcdLinesKept(t *testing.T) {
	const (
		dial    = `{"level":"warn","msg":"prober detected unhealthy status","remote-peer-id":"a1","error":"dial tcp 10.150.0.12:2380: connect: no route to host"}`
		dial2   = `{"level":"warn","msg":"prober detected unhealthy status","remote-peer-id":"a1","error":"dial tcp 10.150.0.13:2380: connect: no route to host"}`
		reach   = `{"level":"warn","msg":"failed to reach the peer URL","address":"https://10.150.0.12:2380/version","error":"Get \"https://10.150.0.12:2380/version\": dial tcp 10.150.0.12:2380: connect: connection refused"}`
		cert    = `{"level":"warn","msg":"prober detected unhealthy status","error":"tls: failed to verify certificate: x509: certificate is valid for 10.5.0.2, not 172.16.0.12"}`
		slow    = `{"level":"warn","msg":"slow fdatasync","took":"1.2s"}`
		request = `{"level":"warn","msg":"apply request took too long","took":"300ms"}`
		failed  = `{"level":"error","msg":"failed to publish local member to cluster through raft","error":"etcdserver: request timed out"}`
		info    = `{"level":"info","msg":"added member","error":"dial tcp 10.150.0.12:2380: connect: refused"}`
	)

	for _, tc := range []struct {
		name  string
		lines [][2]string // node, line
		want  []string    // node + " " + line kept, in order
	}{
		{"a dial failure once per node and error", [][2]string{{"cp1", dial}, {"cp1", dial}, {"cp2", dial}, {"cp1", dial2}, {"cp1", reach}},
			[]string{"cp1 " + dial, "cp2 " + dial, "cp1 " + dial2, "cp1 " + reach}},
		{"a certificate without the address once", [][2]string{{"cp1", cert}, {"cp1", cert}}, []string{"cp1 " + cert}},
		{"listed warnings each time, errors each time", [][2]string{{"cp1", slow}, {"cp1", slow}, {"cp1", failed}, {"cp1", failed}},
			[]string{"cp1 " + slow, "cp1 " + slow, "cp1 " + failed, "cp1 " + failed}},
		{"other warnings and info never", [][2]string{{"cp1", request}, {"cp1", info}, {"cp1", "not json"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := history.NewRecorder(time.Now(), clock.New(1), []history.Node{{Name: "cp1", Role: "controlplane"}, {Name: "cp2", Role: "controlplane"}})
			o := &Observer{log: eventlog.New(), rec: rec, peerWarns: map[string]bool{}}

			for _, l := range tc.lines {
				o.addEtcdLine(l[0], l[1])
			}

			var got []string

			for _, e := range rec.History().Entries {
				if e.Log != nil {
					got = append(got, e.Node+" "+e.Log.Text)
				}
			}

			if len(got) != len(tc.want) {
				t.Fatalf("kept %d lines, want %d:\n%q", len(got), len(tc.want), got)
			}

			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("line %d: %s, want %s", i, got[i], tc.want[i])
				}
			}
		})
	}
}
