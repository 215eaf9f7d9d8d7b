package chaos

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// AddressLate keeps one of a node's further cluster.network addresses from
// coming up (a second NIC whose link or DHCP lease comes after boot: talos
// #6110, #5942) until healed: Talos does not see it (no AddressStatus, not in
// NodeAddress, not in the etcd spec), the others get "no route to host" to
// it. Healed (`for:`, `until:`), it comes up.
//
// Talos v1.12.6 issues the node's etcd certificates again as its addresses
// grow (controllers/secrets/etcd.go, an input since v1.2.0), and etcd reads
// them at its next handshake: the late address is named before a peer
// reaches it. certificates: at-boot asks for what Talos before v1.2.0 did:
// the certificates issued once per boot from the addresses up then, so peers
// dialling the late address get Go's "x509: certificate is valid for A, not
// B", and a peer connecting from it is refused by etcd's check of its source
// address.
//
// Like time-unsynced, the fault stands for an address down since the node
// booted: the node's certificates of this boot are issued without it.
type AddressLate struct {
	Node         Node   `yaml:"node" doc:"the node whose address comes up late"`
	Address      string `yaml:"address" doc:"one of the node's further routed addresses under cluster.network (its address in a later subnet, or one of its own addresses)"`
	Certificates string `yaml:"certificates" doc:"reissued (Talos v1.2.0 on, the default): the etcd certificates follow the node's addresses; at-boot: issued once per boot, as Talos before v1.2.0"`
}

// The certificates parameter's values.
const (
	CertsReissued = "reissued"
	CertsAtBoot   = "at-boot"
)

func (AddressLate) Kind() string      { return "address-late" }
func (AddressLate) Destructive() bool { return false }
func (AddressLate) Doc() string {
	return "keep one of a node's further addresses from coming up until healed (a second NIC up late); its etcd certificates " +
		"follow its addresses as on Talos v1.2.0+, or with certificates: at-boot are issued once per boot as before, " +
		"so peers get x509: certificate is valid for A, not B"
}

func (AddressLate) Example() string {
	return "{kind: address-late, node: cp2, address: 172.16.0.12, certificates: at-boot, at: 0s, for: 1m}"
}

// ExampleCluster: the example's addresses are talos #6110's subnets.
func (AddressLate) ExampleCluster() string {
	return "{controlPlanes: 3, workers: 1, network: {addresses: [10.197.230.11/24, 172.16.0.11/24]}}"
}

func (AddressLate) Needs(*scenario.Scenario) []target.Capability {
	return []target.Capability{target.HoldAddressDown}
}

func (k AddressLate) Validate(c *scenario.FaultCheck) {
	c.ControlPlane("node", string(k.Node), "address-late acts on its etcd certificates")

	if k.Node == scenario.RandomNode {
		c.Errorf("node", "address-late names its node: the address is that node's")

		return
	}

	if k.Certificates != "" {
		c.OneOf("certificates", k.Certificates, "certificates", []string{CertsReissued, CertsAtBoot})
	}

	checkFurtherAddress(c, "address-late", string(k.Node), k.Address)
}

// checkFurtherAddress checks a kind's address parameter: one of its node's
// further routed addresses under cluster.network (not its main address,
// which the run reaches it at).
func checkFurtherAddress(c *scenario.FaultCheck, kind, node, address string) {
	ip, err := netip.ParseAddr(address)
	if err != nil {
		c.Errorf("address", "required: one of the node's further addresses under cluster.network, an IP address")

		return
	}

	sc := c.Scenario()
	if sc.Cluster.Network == nil {
		c.Errorf("address", "%s needs cluster.network: without it a node has only its main address", kind)

		return
	}

	addrs := sc.Cluster.NodeAddresses()[node]

	i := slices.IndexFunc(addrs, func(a scenario.Address) bool { return a.Addr == ip })

	switch {
	case len(addrs) == 0:
		// an unknown node: Node reported it
	case i < 0:
		c.Errorf("address", "%s is not an address of %s under cluster.network: one of %s", ip, node, furtherAddrs(addrs))
	case i == 0:
		c.Errorf("address", "%s is %s's main address, which the run reaches it at: one of %s", ip, node, furtherAddrs(addrs))
	case addrs[i].Unrouted:
		c.Errorf("address", "%s is unrouted: the other nodes never reach it", ip)
	}
}

// furtherAddrs lists a node's further routed addresses for an error.
func furtherAddrs(addrs []scenario.Address) string {
	var out []string

	for _, a := range addrs[1:] {
		if !a.Unrouted {
			out = append(out, a.Addr.String())
		}
	}

	if len(out) == 0 {
		return "(none: give it one in cluster.network.addresses or cluster.nodes)"
	}

	return fmt.Sprint(out)
}

func (k AddressLate) Inject(ctx context.Context, env *Env) (target.Heal, error) {
	return holdAddressDown(ctx, env, k.Node, k.Address, k.Certificates == CertsAtBoot)
}

// holdAddressDown holds the node's address down until healed, through the
// target's Addresses (address-late, address-gone).
func holdAddressDown(ctx context.Context, env *Env, node Node, address string, atBoot bool) (target.Heal, error) {
	a, ok := env.Cluster.(target.Addresses)
	if !ok {
		return nil, fmt.Errorf("the cluster cannot act on node addresses")
	}

	ip, err := netip.ParseAddr(address)
	if err != nil {
		return nil, err
	}

	return a.HoldAddressDown(ctx, string(node), ip, atBoot)
}
