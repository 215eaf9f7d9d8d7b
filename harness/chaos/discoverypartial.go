package chaos

import (
	"context"
	"fmt"

	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// DiscoveryPartial has the discovery registry leave some affiliates out of
// what it answers one node (a registry that shows only part of the cluster:
// talos #10104, #10145 with the Kubernetes registry on v1.9). The node's
// Members lack them, and so do the control-plane endpoints its etcd joins
// and promotes through (etcd.GetEndpoints): a joining control plane that
// sees no running voter fails its join until healed. The node always sees
// itself (LocalAffiliateController).
type DiscoveryPartial struct {
	Node Node   `yaml:"node" doc:"the node that gets a partial list; random: a control plane other than the bootstrap node"`
	Hide []Node `yaml:"hide" doc:"the nodes left out of its list, e.g. [cp1]"`
}

func (DiscoveryPartial) Kind() string      { return "discovery-partial" }
func (DiscoveryPartial) Destructive() bool { return false }
func (DiscoveryPartial) Doc() string {
	return "have the discovery registry leave some nodes out of what it answers a node: its members and the endpoints its etcd joins through lack them"
}

func (DiscoveryPartial) Example() string {
	return "{kind: discovery-partial, node: cp3, hide: [cp1], at: 0s}"
}

func (DiscoveryPartial) Needs(*scenario.Scenario) []target.Capability {
	return []target.Capability{target.DiscoveryRegistry}
}

func (k DiscoveryPartial) Validate(c *scenario.FaultCheck) {
	c.Node("node", string(k.Node), true)

	if len(k.Hide) == 0 {
		c.Errorf("hide", "required: the nodes the registry leaves out, e.g. [cp1]")
	}

	for i, h := range k.Hide {
		field := fmt.Sprintf("hide[%d]", i)
		c.Node(field, string(h), false)

		if h == k.Node {
			c.Errorf(field, "%s is the node itself, which always sees itself (its local affiliate)", h)
		}
	}

	refuseKubernetes(c, k.Kind())
}

func (k DiscoveryPartial) Inject(ctx context.Context, env *Env) (target.Heal, error) {
	d, err := discovery(env)
	if err != nil {
		return nil, err
	}

	hidden := make([]string, len(k.Hide))
	for i, h := range k.Hide {
		hidden[i] = string(h)
	}

	return d.HideAffiliates(ctx, string(k.Node), hidden)
}
