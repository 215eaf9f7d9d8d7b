package sim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"

	"github.com/talchaos/talchaos/harness/netfault"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
	"github.com/talchaos/talchaos/sim/netns"
)

// A node's addresses. Without cluster.network a node has one, on the sim's
// loopback block (or 198.18 with Kubernetes, hostaddr.go). With it, the
// node has the operator's addresses (scenario.Cluster.NodeAddresses): every
// one of them is on the loopback interface of the run's own network
// namespace (package netns), where every node reaches it, but for those
// marked unrouted, which are routed nowhere, so that a connection to one
// fails as it does to an address no router knows. The first address is the
// node's main one: toxiproxy's proxies listen there, the fault kinds act
// on them, and each further routed address relays into the main address's
// proxy, so that every fault cuts the node on all its addresses alike.

// netClaims are the addresses the process's clusters hold inside its
// network namespace: clusters whose scenarios give the same addresses (the
// seeds of one hunt) take turns.
var netClaims = struct {
	sync.Mutex
	held    map[netip.Addr]bool
	changed chan struct{}
}{held: map[netip.Addr]bool{}, changed: make(chan struct{})}

// claimAddrs waits until none of addrs is held by another cluster of this
// process and holds them; release gives them back.
func claimAddrs(ctx context.Context, addrs []netip.Addr) (release func(), err error) {
	for {
		netClaims.Lock()

		if !slices.ContainsFunc(addrs, func(a netip.Addr) bool { return netClaims.held[a] }) {
			for _, a := range addrs {
				netClaims.held[a] = true
			}

			netClaims.Unlock()

			return func() {
				netClaims.Lock()
				defer netClaims.Unlock()

				for _, a := range addrs {
					delete(netClaims.held, a)
				}

				close(netClaims.changed)
				netClaims.changed = make(chan struct{})
			}, nil
		}

		changed := netClaims.changed
		netClaims.Unlock()

		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for another cluster of this run to give up the scenario's addresses: %w", context.Cause(ctx))
		case <-changed:
		}
	}
}

// setUpNetwork gives the nodes cluster.network's addresses: it checks the
// process is in its own namespace, waits for the addresses, and puts them on
// the loopback interface (or routes the unrouted ones nowhere). Close takes
// them off again.
func (c *Cluster) setUpNetwork(ctx context.Context) error {
	if !netns.Inside() {
		return errors.New("cluster.network: the nodes take the scenario's addresses in a network namespace of the run's own, " +
			"which the talchaos command makes (run, hunt, nightly, certify, replay, up); in Go, call the sim from a process " +
			"started with sim/netns (a test binary: TestMain calling sim/netns.Main)")
	}

	c.netAddrs = c.sc.Cluster.NodeAddresses()

	all := []netip.Addr{c.sc.Cluster.Network.EndpointAddr()}

	for _, name := range c.sc.Cluster.NodeNames() {
		for _, a := range c.netAddrs[name] {
			all = append(all, a.Addr)
		}
	}

	release, err := claimAddrs(ctx, all)
	if err != nil {
		return err
	}

	c.netRelease = release

	if err := netns.Setup(); err != nil {
		return err
	}

	// The endpoint (a shared IP, a load balancer's) answers only while a
	// node holds it (vip.go): until then no host answers for it.
	if err := netns.AddUnreachable(c.sc.Cluster.Network.EndpointAddr()); err != nil {
		return err
	}

	for _, name := range c.sc.Cluster.NodeNames() {
		for _, a := range c.netAddrs[name] {
			add := netns.AddAddress
			if a.Unrouted {
				add = netns.AddUnreachable
			}

			if err := add(a.Addr); err != nil {
				return fmt.Errorf("node %s: %w", name, err)
			}
		}
	}

	return nil
}

// tearDownNetwork takes the addresses off and gives them back.
func (c *Cluster) tearDownNetwork() {
	if c.netRelease == nil {
		return
	}

	for _, addrs := range c.netAddrs {
		for _, a := range addrs {
			if a.Unrouted {
				netns.RemoveUnreachable(a.Addr) //nolint:errcheck // the namespace ends with the process anyway
			} else {
				netns.RemoveAddress(a.Addr) //nolint:errcheck
			}
		}
	}

	for _, ip := range []netip.Addr{c.sc.Cluster.Network.EndpointAddr(), c.vip.addr} {
		if ip.IsValid() {
			netns.RemoveAddress(ip)     //nolint:errcheck
			netns.RemoveUnreachable(ip) //nolint:errcheck
		}
	}

	c.netRelease()
	c.netRelease = nil
}

// nodeAddresses are a node's addresses, its main one first.
func (c *Cluster) nodeAddresses(name, ip string) []scenario.Address {
	if addrs := c.netAddrs[name]; len(addrs) > 0 {
		return addrs
	}

	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return nil
	}

	// The sim's block is a /24 (127.0.B.0/24, 198.18.B.0/24; the container
	// target's network 10.213.N.0/24).
	return []scenario.Address{{Addr: addr, Bits: 24}}
}

// Addresses implements talosapi.Backend: every address of the node, its
// main one first.
func (n *Node) Addresses() []string {
	out := make([]string, 0, len(n.addrs))
	for _, a := range n.addrList() {
		out = append(out, a.String())
	}

	// NodeAddress "accumulative": a shared IP held in this boot stays.
	n.mu.Lock()
	defer n.mu.Unlock()

	for _, a := range n.accumulated {
		out = append(out, a.String())
	}

	return out
}

// accumulate adds an address the node came to have in this boot (a shared
// IP it took) to its accumulated ones.
func (n *Node) accumulate(ip netip.Addr) {
	n.mu.Lock()
	defer n.mu.Unlock()

	if !slices.Contains(n.accumulated, ip) && !slices.ContainsFunc(n.addrs, func(a scenario.Address) bool { return a.Addr == ip }) {
		n.accumulated = append(n.accumulated, ip)
	}
}

// addrList is every address of the node that is up, its main one first:
// what Talos sees on its interfaces (an unrouted address is on the node,
// only the others cannot reach it; a late one is not, lateaddr.go).
func (n *Node) addrList() []netip.Addr {
	out := make([]netip.Addr, 0, len(n.addrs))
	for _, a := range n.addrs {
		if !n.isDown(a.Addr) {
			out = append(out, a.Addr)
		}
	}

	return out
}

// hasAddress reports whether ip is one of the node's addresses.
func (n *Node) hasAddress(ip string) bool {
	return slices.ContainsFunc(n.addrs, func(a scenario.Address) bool { return a.Addr.String() == ip && !n.isDown(a.Addr) })
}

// relayPorts are the ports a node's further routed addresses serve.
var relayPorts = []struct {
	port target.Port
	num  int
}{{target.PortTalosAPI, apiPort}, {target.PortEtcdClient, etcdClientPort}, {target.PortEtcdPeer, etcdPeerPort}}

// startRelays makes each further routed address of the node serve its
// ports by relaying into the main address's proxies (plain toxiproxy
// proxies without toxics), so that faults on the proxies act on them too.
func (n *Node) startRelays() error {
	for _, a := range n.addrs[1:] {
		if a.Unrouted {
			continue
		}

		for _, r := range relayPorts {
			listen := net.JoinHostPort(a.Addr.String(), strconv.Itoa(r.num))

			p, err := netfault.StartProxy(n.c.toxi, n.name+"-"+string(r.port)+"-"+a.Addr.String(), listen, n.proxies[r.port].Listen)
			if err != nil {
				return fmt.Errorf("relay %s: %w", listen, err)
			}

			// etcd's check of a peer's source address (lateaddr.go).
			if r.port == target.PortEtcdPeer {
				if err := n.addSANGate(a.Addr, p); err != nil {
					p.Stop()

					return fmt.Errorf("relay %s: %w", listen, err)
				}
			}

			n.relays = append(n.relays, p)
		}
	}

	return nil
}
