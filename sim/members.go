package sim

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/machine"
	"github.com/siderolabs/talos/pkg/machinery/resources/cluster"

	"github.com/talchaos/talchaos/harness/target"
)

// affiliate is the node as it registers with discovery. With a config it
// carries what LocalAffiliateController publishes: the node identity,
// hostname (FQDN), nodename, the control plane's API server port and its
// addresses (routed node addresses without Kubernetes ones: the node's IP).
func (n *Node) affiliate() Affiliate {
	a := Affiliate{Address: n.ip, ControlPlane: n.role == target.ControlPlane}

	cfg := n.Config()

	// Its routed addresses as NodeAddressController sorts them.
	for _, p := range n.nodePrefixes(cfg) {
		a.Addresses = append(a.Addresses, p.Addr().String())
	}

	if cfg == nil {
		return a
	}

	a.Configured = true
	a.NodeID = n.nodeID()
	a.Hostname = n.Hostname()
	a.Nodename = nodename(a.Hostname)

	if c := cfg.Cluster(); c != nil {
		a.ClusterID = c.ID()

		if d := c.Discovery(); d != nil && d.Enabled() {
			a.Discovery = true
			a.Published = d.Registries().Service().Enabled()
		}

		if a.ControlPlane {
			a.APIServerPort = c.LocalAPIServerPort()
		}
	}

	return a
}

// affiliates is every configured node as the cluster's discovery service
// has it. Nodes stay listed while down or cut off, as discovery entries do
// until their TTL (discoveryfault.go).
func (c *Cluster) affiliates() []Affiliate {
	if c.discovery != nil {
		return c.discovery.affiliates()
	}

	var out []Affiliate

	for _, n := range c.nodes {
		if a, ok := n.registryEntry(); ok {
			out = append(out, a)
		}
	}

	return out
}

// syncDiscovery writes the node's Affiliates and Members (namespace
// cluster), as Talos's cluster controllers derive them: the local affiliate
// when discovery is on in the config (LocalAffiliateController), the other
// nodes from the discovery service when its registry is on here and there
// and they share the cluster ID (DiscoveryServiceController; the
// Kubernetes registry is not modelled), merged by node ID
// (AffiliateMergeController); a Member per affiliate with a nodename, by
// nodename (MemberController). In maintenance there are none: discovery
// needs the config.
func (n *Node) syncDiscovery(ctx context.Context, cfg config.Provider) error {
	var (
		affiliates []*cluster.Affiliate
		members    []*cluster.Member
	)

	self := n.affiliate()

	if cfg != nil && self.Discovery {
		for _, a := range n.discovered() {
			switch {
			case a.Address == n.ip:
			case !self.Published || !a.Published || a.ClusterID != self.ClusterID:
				continue
			}

			aff, mem, err := n.affiliateResources(a)
			if err != nil {
				return err
			}

			affiliates, members = append(affiliates, aff), append(members, mem)
		}
	}

	return errors.Join(
		syncAll(ctx, n.resources, cluster.NamespaceName, "cluster.AffiliateMergeController", affiliates),
		syncAll(ctx, n.resources, cluster.NamespaceName, "cluster.MemberController", members),
	)
}

// affiliateResources are the Affiliate and the Member Talos makes of a.
func (n *Node) affiliateResources(a Affiliate) (*cluster.Affiliate, *cluster.Member, error) {
	var addrs []netip.Addr

	for _, s := range a.published() {
		addr, err := netip.ParseAddr(s)
		if err != nil {
			return nil, nil, fmt.Errorf("affiliate %s: %w", a.Hostname, err)
		}

		addrs = append(addrs, addr)
	}

	typ := machine.TypeWorker
	if a.ControlPlane {
		typ = machine.TypeControlPlane
	}

	var cp *cluster.ControlPlane
	if a.ControlPlane && a.APIServerPort != 0 {
		cp = &cluster.ControlPlane{APIServerPort: a.APIServerPort}
	}

	// LocalAffiliateController: "Talos (" + version.Tag + ")".
	os := fmt.Sprintf("Talos (%s)", n.c.profile.Version)

	aff := cluster.NewAffiliate(cluster.NamespaceName, a.NodeID)
	*aff.TypedSpec() = cluster.AffiliateSpec{
		NodeID: a.NodeID, Addresses: addrs, Hostname: a.Hostname, Nodename: a.Nodename,
		OperatingSystem: os, MachineType: typ, ControlPlane: cp,
	}

	mem := cluster.NewMember(cluster.NamespaceName, a.Nodename)
	*mem.TypedSpec() = cluster.MemberSpec{
		NodeID: a.NodeID, Addresses: addrs, Hostname: a.Hostname,
		MachineType: typ, OperatingSystem: os, ControlPlane: cp,
	}

	return aff, mem, nil
}

// published are the addresses an affiliate publishes (one registered by an
// older node process carries only its main one).
func (a Affiliate) published() []string {
	if len(a.Addresses) > 0 {
		return a.Addresses
	}

	return []string{a.Address}
}
