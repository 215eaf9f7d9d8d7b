package chaos

import (
	"context"

	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// AddressGone takes one of a node's further cluster.network addresses away
// from the running node until healed: the node moved to another network, its
// lease lapsed, a NIC was unplugged (talos #12720, #9075: control planes
// re-addressed). Talos v1.12.6 follows its addresses: the address leaves
// AddressStatus and NodeAddress, the etcd spec advertises what is left
// (controllers/etcd/spec.go: without advertisedSubnets the first routed
// address), the etcd certificates are issued again without it
// (controllers/secrets/etcd.go), and the AdvertisedPeerController moves the
// member's peer URLs to the spec's (controllers/etcd/advertised_peer.go),
// only while the node's etcd is healthy and through etcd's MemberUpdate,
// which needs a quorum. Peers dialling the address get "no route to host".
// When every member's peer URLs name an address gone, no quorum is left to
// change them (re-ip-all-at-once).
//
// On the sim the connections to the address end when it goes (a real
// network's timeouts end them, etcd's stream readers in 5 s); the node's own
// connections from it are not modelled (the sim hides sources) and live on,
// where real ones would end and be dialled again from another address. Not
// settled: with both networks advertised (each member's peer URLs naming a
// further address) and the old addresses gone from three members at once,
// two of three tries on the sim left one member cut off for good, its
// stream readers never dialling its peers' other URLs; whether real etcd
// does the same is not known, so no built-in says either.
//
// It is address-late's other half, on the same target primitive: that one
// holds an address down from boot until healed, this one takes it away
// from a node that had it.
type AddressGone struct {
	Node    Node   `yaml:"node" doc:"the node whose address goes"`
	Address string `yaml:"address" doc:"one of the node's further routed addresses under cluster.network (its address in a later subnet, or one of its own addresses)"`
}

func (AddressGone) Kind() string      { return "address-gone" }
func (AddressGone) Destructive() bool { return false }
func (AddressGone) Doc() string {
	return "take one of a node's further addresses away until healed (moved to another network, a lapsed lease); Talos " +
		"advertises what is left and moves its etcd member's peer URLs there, which needs a quorum"
}

func (AddressGone) Example() string {
	return "{kind: address-gone, node: cp2, address: 10.150.0.12, when: {node: cp1, state: formed, after: 30s}}"
}

// ExampleCluster: each node has an address on the old network (10.150) and
// the new one (10.160) beside its main address.
func (AddressGone) ExampleCluster() string {
	return "{controlPlanes: 3, workers: 1, network: {addresses: [10.200.0.11/24, 10.150.0.11/24, 10.160.0.11/24]}}"
}

func (AddressGone) Needs(*scenario.Scenario) []target.Capability {
	return []target.Capability{target.HoldAddressDown}
}

func (k AddressGone) Validate(c *scenario.FaultCheck) {
	c.Node("node", string(k.Node), false) // not random: the address is that node's
	checkFurtherAddress(c, "address-gone", string(k.Node), k.Address)
}

func (k AddressGone) Inject(ctx context.Context, env *Env) (target.Heal, error) {
	return holdAddressDown(ctx, env, k.Node, k.Address, false)
}
