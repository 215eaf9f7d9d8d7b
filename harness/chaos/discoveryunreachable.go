package chaos

import (
	"context"
	"fmt"

	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// DiscoveryUnreachable keeps a node's cluster discovery client from reaching
// the discovery service (egress blocked, a proxy in the way: talos #10136,
// #10222). The node logs "hello failed" (DiscoveryServiceController) and
// keeps the affiliates it last received (none, if it never reached the
// registry in this boot); the registry keeps the node's entry as it last
// pushed it (none, if it never did) until its 30-minute TTL runs out. A
// joining control plane's etcd joins through the control planes it knows
// (etcd.GetEndpoints): cut off from the start, only itself, so its join loop
// fails until the service is reachable again. Healed (`for:`, `until:`), the
// client's next hello (its backoff, up to a minute) gets through and both
// views catch up.
//
// Not modelled: the Kubernetes registry and the `kubernetes` endpoints a
// control plane also joins through (so scenarios with Kubernetes are
// refused).
type DiscoveryUnreachable struct {
	Node Node `yaml:"node" doc:"the node whose discovery client cannot reach the service; random: a control plane other than the bootstrap node"`
}

func (DiscoveryUnreachable) Kind() string      { return "discovery-unreachable" }
func (DiscoveryUnreachable) Destructive() bool { return false }
func (DiscoveryUnreachable) Doc() string {
	return "keep a node's cluster discovery client from reaching the discovery service: it sees only what it had (itself, from the start) " +
		"and others see only what it last pushed, so a joining control plane's etcd has nobody to join through (until healed)"
}

func (DiscoveryUnreachable) Example() string {
	return "{kind: discovery-unreachable, node: cp2, at: 0s, for: 5m}"
}

func (DiscoveryUnreachable) Needs(*scenario.Scenario) []target.Capability {
	return []target.Capability{target.DiscoveryRegistry}
}

func (k DiscoveryUnreachable) Validate(c *scenario.FaultCheck) {
	c.Node("node", string(k.Node), true)
	refuseKubernetes(c, k.Kind())
}

func (k DiscoveryUnreachable) Inject(ctx context.Context, env *Env) (target.Heal, error) {
	d, err := discovery(env)
	if err != nil {
		return nil, err
	}

	return d.CutDiscovery(ctx, string(k.Node))
}

// discovery is the cluster's discovery primitives, for the discovery kinds.
func discovery(env *Env) (target.Discovery, error) {
	d, ok := env.Cluster.(target.Discovery)
	if !ok {
		return nil, fmt.Errorf("the cluster cannot act on node discovery")
	}

	return d, nil
}

// refuseKubernetes refuses a discovery kind in a scenario with Kubernetes:
// there a control plane also finds the others through the `kubernetes`
// endpoints (k8s.EndpointController), which the sim does not model.
func refuseKubernetes(c *scenario.FaultCheck, kind string) {
	if sc := c.Scenario(); sc != nil && sc.Cluster.Kubernetes {
		c.Errorf("kind", "%s is not modelled with cluster.kubernetes: a control plane also finds the others through the kubernetes endpoints", kind)
	}
}
