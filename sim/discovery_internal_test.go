package sim

import (
	"context"
	"net/http/httptest"
	"reflect"
	"testing"
)

// A node process's view of the cluster's members comes from the registry:
// every configured node as it registered, in the cluster's order; while the
// registry cannot be reached, the last list stays (as Talos keeps its
// discovered affiliates).
func TestDiscoveryAffiliates(t *testing.T) {
	reg := NewDiscoveryServer([]string{"cp1", "cp2", "w1"})
	srv := httptest.NewServer(reg)

	d := &discoveryClient{base: srv.URL}
	ctx := context.Background()

	cp2 := Affiliate{Address: "10.213.1.3", ControlPlane: true, Configured: true, NodeID: "id2", Hostname: "cp2", Nodename: "cp2",
		ClusterID: "c", APIServerPort: 6443, Discovery: true, Published: true}
	w1 := Affiliate{Address: "10.213.1.4", Configured: true, NodeID: "id4", Hostname: "w1", Nodename: "w1", ClusterID: "c", Discovery: true, Published: true}

	for name, a := range map[string]Affiliate{
		"w1":  w1,
		"cp2": cp2,
		"cp1": {Address: "10.213.1.2", ControlPlane: true}, // in maintenance
	} {
		if err := d.put(ctx, name, a); err != nil {
			t.Fatal(err)
		}
	}

	for _, tc := range []struct {
		name string
		want []Affiliate
	}{
		{"registry up", []Affiliate{cp2, w1}},
		{"registry gone: the last list", []Affiliate{cp2, w1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := d.affiliates(); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}

			srv.Close()
		})
	}
}
