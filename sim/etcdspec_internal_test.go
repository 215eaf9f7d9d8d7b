package sim

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/siderolabs/talos/pkg/machinery/config/configpatcher"

	"github.com/talchaos/talchaos/harness/scenario"
)

// The addresses etcd advertises and listens on for a table of
// cluster.etcd settings, as Talos's EtcdSpecController computes them from
// the same node addresses (controllers/etcd/spec.go and config.go, and
// siderolabs/net FilterIPs, read for each row): without advertisedSubnets
// the first routed address after sorting; with them every current address
// they match, subnet by subnet in their order, addresses in sorted order
// within one, listening on the same subnets unless listenSubnets are set;
// exclusions alone match nothing; no match, or no listen address, writes
// no spec.
func TestEtcdSpecFromTheConfig(t *testing.T) {
	addrs := []scenario.Address{
		{Addr: netip.MustParseAddr("fd00:101::11"), Bits: 64},
		{Addr: netip.MustParseAddr("10.101.0.11"), Bits: 24},
		{Addr: netip.MustParseAddr("fd00:101:fe::11"), Bits: 128},
		{Addr: netip.MustParseAddr("fd00:101::5"), Bits: 128},
	}

	for _, tc := range []struct {
		name, patch      string
		advertised, peer []string // peer nil: everywhere
		noSpec           bool
	}{
		{name: "default: the first address, v1 order (IPv4 first)", advertised: []string{"10.101.0.11"}},
		{name: "v2 order: a host address before the subnet holding it", patch: "machine:\n  features:\n    nodeAddressSortAlgorithm: v2\n",
			advertised: []string{"10.101.0.11"}},
		{name: "advertised subnets: every match, subnet by subnet", patch: "cluster:\n  etcd:\n    advertisedSubnets: [fd00:101:fe::/64, fd00:101::/64]\n",
			advertised: []string{"fd00:101:fe::11", "fd00:101::5", "fd00:101::11"}, peer: []string{"fd00:101:fe::11", "fd00:101::5", "fd00:101::11"}},
		{name: "v2 order within a subnet: the host address before the subnet holding it", patch: "machine:\n  features:\n    nodeAddressSortAlgorithm: v2\ncluster:\n  etcd:\n    advertisedSubnets: [fd00:101::/48]\n",
			advertised: []string{"fd00:101::5", "fd00:101::11"}, peer: []string{"fd00:101::5", "fd00:101::11"}},
		{name: "an exclusion after them", patch: "cluster:\n  etcd:\n    advertisedSubnets: [\"fd00:101::/32\", \"!fd00:101::5/128\"]\n",
			advertised: []string{"fd00:101::11", "fd00:101:fe::11"}, peer: []string{"fd00:101::11", "fd00:101:fe::11"}},
		{name: "exclusions alone match nothing: no spec", patch: "cluster:\n  etcd:\n    advertisedSubnets: [\"!10.101.0.0/24\"]\n", noSpec: true},
		{name: "a typo: no match, no spec", patch: "cluster:\n  etcd:\n    advertisedSubnets: [10.110.0.0/24]\n", noSpec: true},
		{name: "listen subnets", patch: "cluster:\n  etcd:\n    listenSubnets: [fd00:101::/64]\n",
			advertised: []string{"10.101.0.11"}, peer: []string{"fd00:101::5", "fd00:101::11"}},
		{name: "no listen address, no spec", patch: "cluster:\n  etcd:\n    listenSubnets: [192.168.0.0/16]\n", noSpec: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &Node{name: "cp1", addrs: addrs, cfg: patchedConfig(t, tc.patch)}

			spec, ok := n.etcdSpec()
			if ok == tc.noSpec {
				t.Fatalf("spec written: %t, want %t (%+v)", ok, !tc.noSpec, spec)
			}

			if tc.noSpec {
				return
			}

			if got := fmt.Sprint(spec.advertised); got != fmt.Sprint(tc.advertised) {
				t.Errorf("advertised %s, want %v", got, tc.advertised)
			}

			if got := fmt.Sprint(spec.listenPeer); (tc.peer == nil) != (spec.listenPeer == nil) || tc.peer != nil && got != fmt.Sprint(tc.peer) {
				t.Errorf("listen %s, want %v", got, tc.peer)
			}
		})
	}

	// The URLs: IPv6 in brackets, every advertised address.
	n := &Node{name: "cp1", addrs: addrs, cfg: patchedConfig(t, "cluster:\n  etcd:\n    advertisedSubnets: [fd00:101:fe::/64, 10.0.0.0/8]\n")}
	if got, want := n.peerURLs(), []string{"https://[fd00:101:fe::11]:2380", "https://10.101.0.11:2380"}; !slices.Equal(got, want) {
		t.Errorf("peer URLs %q, want %q", got, want)
	}
}

// patchedConfig is a control plane's generated config with patch applied.
func patchedConfig(t *testing.T, patch string) config.Provider {
	t.Helper()

	sc := &scenario.Scenario{Name: "spec", Talos: scenario.DefaultProfile, Cluster: scenario.Cluster{ControlPlanes: 1}}
	profile, _ := ProfileFor(sc.Talos) //nolint:errcheck // the default exists

	cfgs, err := GenerateConfigs(sc, profile, map[string]string{"cp1": "10.101.0.11"}, "https://10.101.0.10:6443")
	if err != nil {
		t.Fatal(err)
	}

	data := cfgs.Machine["cp1"]

	if patch != "" {
		p, err := configpatcher.LoadPatch([]byte(patch))
		if err != nil {
			t.Fatal(err)
		}

		out, err := configpatcher.Apply(configpatcher.WithBytes(data), []configpatcher.Patch{p})
		if err != nil {
			t.Fatal(err)
		}

		if data, err = out.Bytes(); err != nil {
			t.Fatal(err)
		}
	}

	cfg, err := configloader.NewFromBytes(data)
	if err != nil {
		t.Fatal(err)
	}

	return cfg
}
