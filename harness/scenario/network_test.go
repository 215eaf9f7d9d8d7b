package scenario_test

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/talchaos/talchaos/harness/scenario"
)

// FR-000's addressing: IPv6 first, dual-stack, announced loopbacks.
const fr000Network = `apiVersion: talchaos/v1
kind: Scenario
name: fr000
cluster:
  controlPlanes: 3
  workers: 1
  network:
    addresses: [fd00:101::11/64, 10.101.0.11/24]
    endpoint: fd00:101::10
  nodes:
    cp1:
      addresses: [{address: "fd00:101:fe::11"}]
    cp2:
      addresses:
        - address: fd00:101:fe::12
          unrouted: true
`

func TestNodeAddresses(t *testing.T) {
	sc, err := parse("t.yaml", []byte(fr000Network))
	if err != nil {
		t.Fatal(err)
	}

	a := func(s string, bits int, unrouted bool) scenario.Address {
		return scenario.Address{Addr: netip.MustParseAddr(s), Bits: bits, Unrouted: unrouted}
	}

	want := map[string][]scenario.Address{
		"cp1": {a("fd00:101::11", 64, false), a("10.101.0.11", 24, false), a("fd00:101:fe::11", 128, false)},
		"cp2": {a("fd00:101::12", 64, false), a("10.101.0.12", 24, false), a("fd00:101:fe::12", 128, true)},
		"cp3": {a("fd00:101::13", 64, false), a("10.101.0.13", 24, false)},
		"w1":  {a("fd00:101::14", 64, false), a("10.101.0.14", 24, false)},
	}

	if got := sc.Cluster.NodeAddresses(); !reflect.DeepEqual(got, want) {
		t.Errorf("addresses:\n got %v\nwant %v", got, want)
	}

	if got := sc.Cluster.Network.EndpointAddr(); got != netip.MustParseAddr("fd00:101::10") {
		t.Errorf("endpoint %s", got)
	}

	// The endpoint is the subnet's host 1 by default; addresses count up
	// over octets.
	sc, err = parse("t.yaml", []byte(head+"  workers: 100\n  network:\n    addresses: [10.9.0.200/16]\n"))
	if err != nil {
		t.Fatal(err)
	}

	got := sc.Cluster.NodeAddresses()
	if got["cp1"][0].Addr.String() != "10.9.0.200" || got["w100"][0].Addr.String() != "10.9.1.46" || sc.Cluster.Network.EndpointAddr().String() != "10.9.0.1" {
		t.Errorf("cp1 %v, w100 %v, endpoint %s", got["cp1"], got["w100"], sc.Cluster.Network.EndpointAddr())
	}

	if sc, err = parse("t.yaml", []byte(head)); err != nil || sc.Cluster.NodeAddresses() != nil {
		t.Errorf("without a network: %v, %v", sc.Cluster.NodeAddresses(), err)
	}
}

func TestNetworkErrors(t *testing.T) {
	net := func(s string) string { return head + "  network:\n" + s }

	for _, tc := range []struct{ name, yaml, want string }{
		{"no addresses", net("    endpoint: 10.0.0.1\n"), "t.yaml:6: cluster.network.addresses: required"},
		{"not a cidr", net("    addresses: [fd00:101::11]\n"), `t.yaml:7: cluster.network.addresses[0]: not an address with its subnet's prefix length (fd00:101::11/64, 10.101.0.11/24): "fd00:101::11"`},
		{"loopback", net("    addresses: [127.9.0.2/24]\n"), "t.yaml:7: cluster.network.addresses[0]: 127.9.0.2/24 is a loopback address"},
		{"link-local", net("    addresses: [fe80::2/64]\n"), "cluster.network.addresses[0]: fe80::2/64 is a link-local address"},
		{"subnet's own", net("    addresses: [10.1.0.0/24]\n"), "cluster.network.addresses[0]: 10.1.0.0/24 is its subnet's own address, not a host's"},
		{"overlap", net("    addresses: [10.0.0.2/16, 10.0.1.2/24]\n"), "t.yaml:7: cluster.network.addresses[1]: 10.0.1.2/24's subnet overlaps cluster.network.addresses[0] (10.0.0.0/16)"},
		{"too small", net("    addresses: [10.0.0.1/30]\n"), "cluster.network.addresses[0]: no room in 10.0.0.0/30 for 3 nodes from 10.0.0.1"},
		{"broadcast", net("    addresses: [10.0.0.253/24]\n"), "cluster.network.addresses[0]: no room in 10.0.0.0/24 for 3 nodes from 10.0.0.253"},
		{"v6 room", net("    addresses: [fd00::fe/120]\n"), "no room in fd00::/120 for 3 nodes from fd00::fe"},
		{"too many", net("    addresses: [10.1.0.2/24, 10.2.0.2/24, 10.3.0.2/24, 10.4.0.2/24, 10.5.0.2/24]\n"), "cluster.network.addresses: 5 subnets: at most 4"},
		{"default endpoint taken", net("    addresses: [10.1.0.1/24]\n"), "cluster.network.endpoint: the default endpoint 10.1.0.1 (the first subnet's host 1) is cp1's address"},
		{"endpoint a node's", net("    addresses: [10.1.0.2/24]\n    endpoint: 10.1.0.3\n"), "t.yaml:8: cluster.network.endpoint: 10.1.0.3 is cp2's address"},
		{"endpoint not an ip", net("    addresses: [10.1.0.2/24]\n    endpoint: cp.example\n"), `cluster.network.endpoint: not an IP address: "cp.example"`},
		{"address without network", head + "  nodes:\n    cp1:\n      addresses: [{address: 10.1.0.9}]\n", "t.yaml:8: cluster.nodes.cp1.addresses: further addresses need cluster.network"},
		{"address with prefix", net("    addresses: [10.1.0.2/24]\n  nodes:\n    cp1:\n      addresses: [{address: 10.2.0.9/32}]\n"),
			`cluster.nodes.cp1.addresses[0].address: not an IP address (a further address takes no prefix length): "10.2.0.9/32"`},
		{"address twice", net("    addresses: [10.1.0.2/24]\n  nodes:\n    cp1:\n      addresses: [{address: 10.1.0.4}]\n"),
			"cluster.nodes.cp1.addresses[0].address: 10.1.0.4 is cp3's address already"},
		{"address unknown field", net("    addresses: [10.1.0.2/24]\n  nodes:\n    cp1:\n      addresses: [{address: 10.2.0.1, routed: false}]\n"),
			`cluster.nodes.cp1.addresses[0].routed: unknown field "routed"`},
		{"kubernetes", head + "  kubernetes: true\n  network:\n    addresses: [10.1.0.2/24]\n", "cluster.network: not with cluster.kubernetes yet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse("t.yaml", []byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one with %q", err, tc.want)
			}
		})
	}
}
