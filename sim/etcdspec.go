package sim

import (
	"cmp"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"

	sidenet "github.com/siderolabs/net"
	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/nethelpers"

	"github.com/talchaos/talchaos/harness/sharedip"
)

// nodePrefixes are the node's addresses as Talos's NodeAddressController
// orders its current and routed addresses (controllers/network/
// node_address.go): sorted by the config's address sort algorithm
// (machine.features.nodeAddressSortAlgorithm, v1 without a config). The
// sim's addresses are all on links that are up and none is loopback,
// multicast or link-local (the scenario refuses those), so current and
// routed are the same list.
func (n *Node) nodePrefixes(cfg config.Provider) []netip.Prefix {
	algorithm := nethelpers.AddressSortAlgorithmV1
	if cfg != nil && cfg.Machine() != nil {
		algorithm = cfg.Machine().Features().NodeAddressSortAlgorithm()
	}

	out := make([]netip.Prefix, 0, len(n.addrs)+1)
	for _, a := range n.addrs {
		if !n.isDown(a.Addr) { // a late address is not on the node yet (lateaddr.go)
			out = append(out, a.Prefix())
		}
	}

	if ip, held := n.vipHeld(); held {
		out = append(out, netip.PrefixFrom(ip, ip.BitLen()))
	}

	compare := comparePrefixesLegacy
	if algorithm == nethelpers.AddressSortAlgorithmV2 {
		compare = comparePrefixNew
	}

	slices.SortFunc(out, compare)

	return out
}

// comparePrefixesLegacy is addressutil.ComparePrefixesLegacy
// (controllers/network/internal/addressutil/compare.go, internal to Talos):
// by address, then prefix length.
func comparePrefixesLegacy(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}

	return cmp.Compare(a.Bits(), b.Bits())
}

// comparePrefixNew is addressutil.ComparePrefixNew: by family, the more
// specific prefix of one address first, a contained prefix before its
// container, then by address.
func comparePrefixNew(a, b netip.Prefix) int {
	family := func(p netip.Prefix) int {
		if p.Addr().Is4() {
			return 4
		}

		return 6
	}

	if c := cmp.Compare(family(a), family(b)); c != 0 {
		return c
	}

	if a.Addr() == b.Addr() {
		return -cmp.Compare(a.Bits(), b.Bits())
	}

	aContainsB, bContainsA := a.Contains(b.Addr()), b.Contains(a.Addr())

	switch {
	case aContainsB && !bContainsA:
		return 1
	case !aContainsB && bContainsA:
		return -1
	}

	return a.Addr().Compare(b.Addr())
}

// etcdSpec is the etcd spec Talos's EtcdSpecController writes for the
// applied config and the node's addresses (controllers/etcd/spec.go, fed by
// controllers/etcd/config.go): cluster.etcd.advertisedSubnets go in as they
// are written ("!cidr" entries among them, applied in order by
// siderolabs/net FilterIPs, so exclusions alone match nothing); with them
// every current address they match is advertised, in their order, without
// them the first routed address. listenSubnets (by default the advertised
// subnets when those are set) pick the addresses etcd listens on, none set
// meaning everywhere. ok is false when nothing is advertised or nothing
// listened on: then the controller writes no spec and logs nothing, and
// the etcd service waits for it forever. The config's shared IP is never
// advertised.
type etcdSpec struct {
	advertised []netip.Addr
	// listenPeer is nil for "everywhere" (0.0.0.0).
	listenPeer []netip.Addr
}

func (n *Node) etcdSpec() (etcdSpec, bool) {
	cfg := n.Config()

	prefixes := n.nodePrefixes(cfg)
	addrs := make([]netip.Addr, 0, len(prefixes))

	for _, p := range prefixes {
		addrs = append(addrs, p.Addr())
	}

	var (
		spec               etcdSpec
		err                error
		advertised, listen []string
	)

	if cfg != nil && cfg.Cluster() != nil && cfg.Cluster().Etcd() != nil {
		advertised, listen = cfg.Cluster().Etcd().AdvertisedSubnets(), cfg.Cluster().Etcd().ListenSubnets()
	}

	// The config's shared IP is never advertised (AdvertiseExcludeSubnets).
	var exclude []string
	if ip, _, ok := sharedip.Of(cfg); ok {
		exclude = []string{"!" + ip.String()}
	}

	if len(advertised) == 0 {
		spec.advertised, err = sidenet.FilterIPs(addrs, append([]string{"0.0.0.0/0", "::/0"}, exclude...))
		if len(spec.advertised) > 0 {
			spec.advertised = spec.advertised[:1]
		}
	} else {
		spec.advertised, err = sidenet.FilterIPs(addrs, append(slices.Clone(advertised), exclude...))
	}

	if err != nil || len(spec.advertised) == 0 {
		return etcdSpec{}, false
	}

	if len(listen) > 0 {
		if spec.listenPeer, err = sidenet.FilterIPs(addrs, listen); err != nil || len(spec.listenPeer) == 0 {
			return etcdSpec{}, false
		}
	}

	return spec, true
}

// etcdURLs are the advertised addresses as Talos formats them for etcd's
// flags (services/etcd.go formatEtcdURL): https://[v6]:port.
func etcdURLs(addrs []netip.Addr, port int) []string {
	out := make([]string, 0, len(addrs))
	for _, a := range addrs {
		out = append(out, "https://"+net.JoinHostPort(a.String(), strconv.Itoa(port)))
	}

	return out
}

// peerURLs and clientURLs are what the node's etcd advertises: its spec's
// addresses, or without a spec its main address (a node that never has
// one never starts etcd).
func (n *Node) peerURLs() []string   { return etcdURLs(n.advertised(), etcdPeerPort) }
func (n *Node) clientURLs() []string { return etcdURLs(n.advertised(), etcdClientPort) }

func (n *Node) advertised() []netip.Addr {
	if spec, ok := n.etcdSpec(); ok {
		return spec.advertised
	}

	return n.addrList()[:1]
}

// currentAddrsLog is the node's current addresses as machined logs them
// while etcd waits to join (buildInitialCluster: log.Printf("%s", ips)).
func (n *Node) currentAddrsLog() string {
	var addrs []netip.Addr
	for _, p := range n.nodePrefixes(n.Config()) {
		addrs = append(addrs, p.Addr())
	}

	return fmt.Sprintf("%s", addrs)
}
