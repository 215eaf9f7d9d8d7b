package sim

import (
	"slices"
	"testing"
)

// The etcd endpoints a node walks are Talos's k8s.EndpointList: every
// address of every control plane, sorted by address, whatever order
// discovery gave them in (a node process lists itself first).
func TestEtcdEndpointsSortedByAddress(t *testing.T) {
	cp := func(addrs ...string) Affiliate {
		return Affiliate{Address: addrs[0], Addresses: addrs, ControlPlane: true}
	}

	for _, tc := range []struct {
		name       string
		affiliates []Affiliate
		want       []string
	}{
		{
			name:       "self first",
			affiliates: []Affiliate{cp("10.5.0.3"), cp("10.5.0.2"), cp("10.5.0.4")},
			want:       []string{"10.5.0.2:2379", "10.5.0.3:2379", "10.5.0.4:2379"},
		},
		{
			name:       "two addresses each, merged",
			affiliates: []Affiliate{cp("10.197.230.12", "172.16.0.12"), cp("10.197.230.11", "172.16.0.11")},
			want:       []string{"10.197.230.11:2379", "10.197.230.12:2379", "172.16.0.11:2379", "172.16.0.12:2379"},
		},
		{
			name:       "IPv6 after IPv4, one address listed once",
			affiliates: []Affiliate{cp("fd00::2"), cp("10.5.0.2"), cp("fd00::2")},
			want:       []string{"10.5.0.2:2379", "[fd00::2]:2379"},
		},
		{
			name:       "workers left out",
			affiliates: []Affiliate{{Address: "10.5.0.1"}, cp("10.5.0.9")},
			want:       []string{"10.5.0.9:2379"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := etcdEndpoints(tc.affiliates)
			if err != nil {
				t.Fatal(err)
			}

			if !slices.Equal(got, tc.want) {
				t.Errorf("endpoints %v, want %v", got, tc.want)
			}
		})
	}

	if _, err := etcdEndpoints([]Affiliate{{Address: "10.5.0.1"}}); err == nil || err.Error() != "no controlplane endpoints discovered yet" {
		t.Errorf("without control planes: %v", err)
	}
}
