package sim

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/talchaos/talchaos/harness/netfault"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
	"github.com/talchaos/talchaos/sim/netns"
)

// An address that comes up late (a second NIC whose link or DHCP lease
// comes after boot, talos #6110, #5942), and what the node's etcd
// certificates name.
//
// Talos v1.12.6: secrets.EtcdController issues the etcd certificates
// (server, peer, admin) from NodeAddress "accumulative" filtered by
// NodeAddressFilterNoK8s, once the network is ready and the time is in sync,
// and again whenever that list changes (controllers/secrets/etcd.go, its
// NodeAddress input); etcd.PKIController writes them to /system/secrets/etcd
// (controllers/etcd/pki.go), and etcd reads its files again at every
// handshake (etcd's client/pkg/transport/listener.go baseConfig:
// GetCertificate, GetClientCertificate), so a late address is in the
// certificates peers see as soon as it is up. The etcd spec follows the same
// addresses (controllers/etcd/spec.go). Talos before v1.2.0 issued them once
// per boot from the addresses up then (v1.1's EtcdController had no address
// input, internal/pkg/etcd/certs.go read net.IPAddrs()); 053af1d (v1.2.0,
// "update etcd certificates when node addresses changes", fixes #6110) made
// them follow the addresses. The fault's atBoot parameter asks for that
// older behaviour.
//
// etcd checks a connecting peer's client certificate against the
// connection's source address (client/pkg/transport/listener_tls.go
// checkSAN) and drops the connection when it is not named ("rejected
// connection"). The sim's proxies hide the source, so the check is made by a
// gate on each further address's peer relay: a peer connects to an address
// in one of its own subnets from its address there, otherwise from its main
// address (the kernel's source address selection for an on-link
// destination and for the default route).

// lateAddrs is the node's state of late addresses and of its etcd
// certificates.
type lateAddrs struct {
	// issue serialises syncEtcdCerts (the controller's loop and a heal).
	issue sync.Mutex
	mu    sync.Mutex
	// down are the node's addresses not up yet.
	down map[netip.Addr]bool
	// certAddrs are the addresses the etcd certificates name.
	certAddrs []netip.Addr
	// atBoot: the certificates are issued once per boot (Talos before v1.2.0).
	atBoot bool
	// bootIssued: issued in this boot.
	bootIssued bool
	// sanGates are the gates on the peer relays of the node's further
	// routed addresses.
	sanGates map[netip.Addr]*netfault.Gate
}

// isDown reports whether ip is one of the node's addresses that is not up.
func (n *Node) isDown(ip netip.Addr) bool {
	n.late.mu.Lock()
	defer n.late.mu.Unlock()

	return n.late.down[ip]
}

// certAddresses are the addresses Talos would issue the etcd certificates
// for now: the node's addresses that are up, in NodeAddress order (the
// config's sort algorithm). The shared IP is left out: Talos names it too
// (it is on eth0 while held), the sim does not model that.
func (n *Node) certAddresses() []netip.Addr {
	vip, held := n.vipHeld()

	var out []netip.Addr

	for _, p := range n.nodePrefixes(n.Config()) {
		if held && p.Addr() == vip {
			continue
		}

		out = append(out, p.Addr())
	}

	return out
}

// syncEtcdCerts is secrets.EtcdController for the addresses: with a config
// (its EtcdRoot) and the time in sync, the certificates name the node's
// current addresses, issued again when those changed; with atBoot, only
// the first issue of a boot. Its clock is the node's (clock-offset).
func (n *Node) syncEtcdCerts(ctx context.Context) error {
	if n.role != target.ControlPlane || n.Config() == nil || !n.timeSynced(ctx) {
		return nil
	}

	n.late.issue.Lock()
	defer n.late.issue.Unlock()

	want := n.certAddresses()

	n.late.mu.Lock()
	keep := slices.Equal(want, n.late.certAddrs) || (n.late.atBoot && n.late.bootIssued)
	n.late.bootIssued = true
	n.late.mu.Unlock()

	if keep {
		return nil
	}

	n.clk.mu.Lock()
	offset := n.clk.offset
	n.clk.mu.Unlock()

	if err := n.writeEtcdCerts(want, offset); err != nil {
		return err
	}

	n.late.mu.Lock()
	n.late.certAddrs = want
	n.late.mu.Unlock()

	n.c.updateSANGates()

	return nil
}

// sourceFor is the node's source address for a connection to dst: its
// address up in a subnet that holds dst, else its main address.
func (n *Node) sourceFor(dst netip.Addr) netip.Addr {
	for _, a := range n.addrs {
		if a.Bits < a.Addr.BitLen() && a.Prefix().Contains(dst) && !n.isDown(a.Addr) {
			return a.Addr
		}
	}

	return n.addrs[0].Addr
}

// EtcdCertAddresses are the addresses the node's etcd certificates name,
// none before they are first issued (with its config, once its time is in
// sync): what its peers' TLS verification checks.
func (n *Node) EtcdCertAddresses() []netip.Addr {
	n.late.mu.Lock()
	defer n.late.mu.Unlock()

	return slices.Clone(n.late.certAddrs)
}

// certNames reports whether the node's etcd certificates name ip.
func (n *Node) certNames(ip netip.Addr) bool {
	n.late.mu.Lock()
	defer n.late.mu.Unlock()

	return slices.Contains(n.late.certAddrs, ip)
}

// sanGateToxic is the name of the gate toxic on a peer relay.
const sanGateToxic = "talchaos-san"

// addSANGate puts a gate on the peer relay p of the node's address a.
func (n *Node) addSANGate(a netip.Addr, p *netfault.Proxy) error {
	g := netfault.NewGate(fmt.Sprintf("%s/%s/san/%s", n.c.dir, n.name, a))

	if _, err := p.Toxics.AddToxicJson(strings.NewReader(string(netfault.GateToxicJSON(sanGateToxic, g)))); err != nil {
		g.Close()

		return err
	}

	n.late.mu.Lock()
	defer n.late.mu.Unlock()

	if n.late.sanGates == nil {
		n.late.sanGates = map[netip.Addr]*netfault.Gate{}
	}

	n.late.sanGates[a] = g

	return nil
}

// closeSANGates unregisters the node's relay gates.
func (n *Node) closeSANGates() {
	n.late.mu.Lock()
	defer n.late.mu.Unlock()

	for _, g := range n.late.sanGates {
		g.Close()
	}
}

// updateSANGates has every relay gate drop the peers whose source address
// toward it their certificates do not name, as etcd's checkSAN does.
//
// Updates are serialised: each reads every node's certificates, and two at
// once (two nodes issuing theirs) could otherwise apply in the wrong order,
// the later one's view lost — a peer left blocked for good after its
// certificates came to name its address. (Stop 36 blamed this for cp1's
// dials to cp2's private address ending in EOF for good, seen once; a CA
// file rewritten in place while an etcd started, pki.go, fits that too.)
func (c *Cluster) updateSANGates() {
	c.sanMu.Lock()
	defer c.sanMu.Unlock()

	for _, x := range c.nodes {
		x.late.mu.Lock()
		gates := make(map[netip.Addr]*netfault.Gate, len(x.late.sanGates))
		for a, g := range x.late.sanGates {
			gates[a] = g
		}
		x.late.mu.Unlock()

		for a, g := range gates {
			for _, s := range c.nodes {
				switch {
				case s == x:
				case s.certNames(s.sourceFor(a)):
					g.Unblock(s.name)
				default:
					g.Block(s.name)
				}
			}
		}
	}
}

// setRelaysDown takes the relays listening on ip down or brings them back
// (netfault.Proxy.SetDown).
func (n *Node) setRelaysDown(ip netip.Addr, down bool) {
	for _, p := range n.relays {
		if ap, err := netip.ParseAddrPort(p.Listen); err == nil && ap.Addr() == ip {
			p.SetDown(down)
		}
	}
}

// HoldAddressDown implements target.Addresses: the node's further address
// ip is not up (its NIC's link down, no lease yet, or the node moved to
// another network) until healed. At a run's start (address-late) it stands
// for an address down since the node booted: the certificates of this boot
// are issued without it; later (address-gone), for one the node loses: its
// certificates are issued again without it. With atBoot, the node issues
// its etcd certificates once per boot (Talos before v1.2.0) from then on.
func (c *Cluster) HoldAddressDown(ctx context.Context, node string, ip netip.Addr, atBoot bool) (target.Heal, error) {
	n := c.Node(node)
	if n == nil {
		return nil, fmt.Errorf("unknown node %q", node)
	}

	i := slices.IndexFunc(n.addrs, func(a scenario.Address) bool { return a.Addr == ip })

	switch {
	case c.netAddrs == nil:
		return nil, fmt.Errorf("address-late needs cluster.network: the node has only its main address")
	case i < 0:
		return nil, fmt.Errorf("%s is not an address of node %s", ip, node)
	case i == 0:
		return nil, fmt.Errorf("%s is node %s's main address, which the sim reaches it at", ip, node)
	case n.addrs[i].Unrouted:
		return nil, fmt.Errorf("%s is unrouted: the other nodes never reach it", ip)
	}

	n.late.mu.Lock()
	if n.late.down == nil {
		n.late.down = map[netip.Addr]bool{}
	}

	n.late.down[ip] = true
	n.late.atBoot = n.late.atBoot || atBoot
	n.late.bootIssued = false
	n.late.mu.Unlock()

	// The connections to the address end: on a real network the peers'
	// timeouts end them (etcd's stream readers in 5 s), here at once, and
	// before the address goes, so that the peers learn it: once it is gone
	// a close never reaches them (on loopback both ends of a connection to
	// it are on it), and their connections would hang, neither carrying nor
	// failing, past the cluster's end. A connection the node made from the
	// address is not modelled (the sim hides sources): it lives on, where a
	// real one would end and be dialled again from another address.
	n.setRelaysDown(ip, true)

	if err := netns.RemoveAddress(ip); err != nil {
		return nil, err
	}

	if err := netns.AddUnreachable(ip); err != nil {
		return nil, err
	}

	c.updateSANGates()

	if err := n.syncEtcdCerts(ctx); err != nil {
		return nil, err
	}

	n.wake()

	return func() error {
		n.late.mu.Lock()
		delete(n.late.down, ip)
		n.late.mu.Unlock()

		// Talos's controllers see the address (AddressStatus, NodeAddress)
		// and issue the certificates for it before a peer can reach it.
		if err := n.syncEtcdCerts(n.c.ctx); err != nil {
			n.machined.Printf("controller: %s", err)
		}

		c.updateSANGates()

		if err := netns.RemoveUnreachable(ip); err != nil {
			return err
		}

		if err := netns.AddAddress(ip); err != nil {
			return err
		}

		n.setRelaysDown(ip, false)
		n.wake()

		return nil
	}, nil
}
