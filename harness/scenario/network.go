package scenario

import (
	"fmt"
	"net/netip"
)

// MaxSubnets bounds cluster.network.addresses.
const MaxSubnets = 4

// Address is one of a node's addresses.
type Address struct {
	Addr netip.Addr
	// Bits is the prefix length it has on the node: its subnet's, or a host
	// address's for a further one.
	Bits int
	// Unrouted: the other nodes cannot reach it.
	Unrouted bool
}

// Prefix is the address with its prefix length, as the node's interface
// carries it.
func (a Address) Prefix() netip.Prefix { return netip.PrefixFrom(a.Addr, a.Bits) }

// NodeAddresses lists every node's addresses under cluster.network, by node
// name: its address in each subnet (cp1's as given, the others counting up
// from it over the control planes, then the workers), then its further
// addresses; nil without cluster.network. An address that does not parse
// is left out: validation says so, and the fault kinds' checks (which run
// beside it on the same scenario) must not stop at it.
func (c Cluster) NodeAddresses() map[string][]Address {
	if c.Network == nil {
		return nil
	}

	out := map[string][]Address{}

	for i, name := range c.NodeNames() {
		for _, s := range c.Network.Addresses {
			if p, err := netip.ParsePrefix(s); err == nil {
				out[name] = append(out[name], Address{Addr: hostAddr(p.Addr(), i), Bits: p.Bits()})
			}
		}

		for _, a := range c.Nodes[name].Addresses {
			if addr, err := netip.ParseAddr(a.Address); err == nil {
				out[name] = append(out[name], Address{Addr: addr, Bits: addr.BitLen(), Unrouted: a.Unrouted})
			}
		}
	}

	return out
}

// EndpointAddr is the control-plane endpoint's address: endpoint, or the
// first subnet's host 1; the zero address when neither parses (validation
// says why).
func (n *Network) EndpointAddr() netip.Addr {
	if n.Endpoint != "" {
		addr, _ := netip.ParseAddr(n.Endpoint)

		return addr
	}

	if len(n.Addresses) == 0 {
		return netip.Addr{}
	}

	p, err := netip.ParsePrefix(n.Addresses[0])
	if err != nil {
		return netip.Addr{}
	}

	return hostAddr(p.Masked().Addr(), 1)
}

// hostAddr is base plus k.
func hostAddr(base netip.Addr, k int) netip.Addr {
	b := base.As16()

	carry := uint(k)
	for i := 15; i >= 0 && carry > 0; i-- {
		sum := uint(b[i]) + carry&0xff
		b[i] = byte(sum)
		carry = carry>>8 + sum>>8
	}

	a := netip.AddrFrom16(b)
	if base.Is4() {
		return a.Unmap()
	}

	return a
}

// usable says why addr cannot be a node's or an endpoint's address, or "".
func usable(addr netip.Addr) string {
	switch {
	case addr.IsLoopback():
		return "a loopback address (the nodes' own 127.0.0.1 and ::1 are theirs already)"
	case addr.IsUnspecified():
		return "the unspecified address"
	case addr.IsMulticast():
		return "a multicast address"
	case addr.IsLinkLocalUnicast():
		return "a link-local address (Talos never advertises one)"
	case addr.Is4In6():
		return "an IPv4-mapped IPv6 address: write the IPv4 address"
	}

	return ""
}

// network checks cluster.network and the nodes' further addresses.
func (v *validator) network() {
	c := v.s.Cluster

	if c.Network == nil {
		for _, name := range sortedKeys(c.Nodes) {
			if len(c.Nodes[name].Addresses) > 0 {
				v.errorf("cluster.nodes."+name+".addresses", "further addresses need cluster.network (the nodes' subnets)")
			}
		}

		return
	}

	n := c.Network
	p := "cluster.network"

	if v.s.Cluster.Kubernetes {
		v.errorf(p, "not with cluster.kubernetes yet: the simulated control plane's Kubernetes runs on the sim's own addresses")
	}

	switch {
	case len(n.Addresses) == 0:
		v.errorf(p+".addresses", "required: cp1's address in each of the nodes' subnets, with its prefix length (fd00:101::11/64), the first the one a node is reached at")

		return
	case len(n.Addresses) > MaxSubnets:
		v.errorf(p+".addresses", "%d subnets: at most %d", len(n.Addresses), MaxSubnets)

		return
	}

	ok := true

	var prefixes []netip.Prefix

	for i, s := range n.Addresses {
		f := fmt.Sprintf("%s.addresses[%d]", p, i)

		pr, err := netip.ParsePrefix(s)
		if err != nil {
			v.errorf(f, "not an address with its subnet's prefix length (fd00:101::11/64, 10.101.0.11/24): %q", s)

			ok = false

			continue
		}

		if why := usable(pr.Addr()); why != "" {
			v.errorf(f, "%s is %s", s, why)

			ok = false

			continue
		}

		if pr.Addr().Is4() && pr.Bits() < 31 && pr.Addr() == pr.Masked().Addr() {
			v.errorf(f, "%s is its subnet's own address, not a host's: give cp1's", s)

			ok = false

			continue
		}

		for j, q := range prefixes {
			if q.Overlaps(pr) {
				v.errorf(f, "%s's subnet overlaps %s.addresses[%d] (%s)", s, p, j, q.Masked())

				ok = false
			}
		}

		prefixes = append(prefixes, pr)

		if v.nodes == nil {
			continue
		}

		// Every node's address in the subnet, and for IPv4 not its
		// broadcast address.
		last := hostAddr(pr.Addr(), len(v.nodes)-1)
		if !pr.Contains(last) || pr.Addr().Is4() && last == broadcast(pr) {
			v.errorf(f, "no room in %s for %d nodes from %s", pr.Masked(), len(v.nodes), pr.Addr())

			ok = false
		}
	}

	if !ok || v.nodes == nil {
		return
	}

	// No address twice: the nodes', their further ones and the endpoint.
	owner := map[netip.Addr]string{}

	for i, name := range v.nodes {
		for _, pr := range prefixes {
			owner[hostAddr(pr.Addr(), i)] = name
		}
	}

	if n.Endpoint != "" {
		ep, err := netip.ParseAddr(n.Endpoint)

		switch {
		case err != nil:
			v.errorf(p+".endpoint", "not an IP address: %q", n.Endpoint)
		case usable(ep) != "":
			v.errorf(p+".endpoint", "%s is %s", n.Endpoint, usable(ep))
		case owner[ep] != "":
			v.errorf(p+".endpoint", "%s is %s's address", n.Endpoint, owner[ep])
		}
	} else if o := owner[n.EndpointAddr()]; o != "" {
		v.errorf(p+".endpoint", "the default endpoint %s (the first subnet's host 1) is %s's address: give an endpoint", n.EndpointAddr(), o)
	}

	for _, name := range sortedKeys(c.Nodes) {
		for i, a := range c.Nodes[name].Addresses {
			f := fmt.Sprintf("cluster.nodes.%s.addresses[%d].address", name, i)

			addr, err := netip.ParseAddr(a.Address)

			switch {
			case err != nil:
				v.errorf(f, "not an IP address (a further address takes no prefix length): %q", a.Address)
			case usable(addr) != "":
				v.errorf(f, "%s is %s", a.Address, usable(addr))
			case owner[addr] != "":
				v.errorf(f, "%s is %s's address already", a.Address, owner[addr])
			case n.Endpoint != "" && addr == n.EndpointAddr():
				v.errorf(f, "%s is the endpoint", a.Address)
			default:
				owner[addr] = name
			}
		}
	}
}

// broadcast is an IPv4 subnet's broadcast address.
func broadcast(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1

	for i := range 4 {
		b[i] |= byte(host >> (8 * (3 - i)))
	}

	return netip.AddrFrom4(b)
}
