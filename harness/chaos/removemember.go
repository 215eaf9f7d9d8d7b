package chaos

import (
	"context"
	"errors"
	"fmt"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"

	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/talosclient"
	"github.com/talchaos/talchaos/harness/target"
)

// RemoveMember removes a control plane's etcd member through another control
// plane's Talos API (`talosctl -n OTHER etcd remove-member ID`) and leaves the
// node as it is: its etcd learns it was removed and exits, and Talos restarts
// it from its data forever (a crash loop only a wipe of its data ends). An
// operator who removes a member without resetting its node does this.
type RemoveMember struct {
	Node Node `yaml:"node" doc:"the control plane whose member is removed; random: a control plane other than the bootstrap node"`
}

func (RemoveMember) Kind() string      { return "remove-member" }
func (RemoveMember) Destructive() bool { return true }
func (RemoveMember) Doc() string {
	return "remove a control plane's etcd member through another control plane, its data kept: etcd on it exits and restarts forever"
}

func (RemoveMember) Example() string {
	return "{kind: remove-member, node: cp3, when: {node: cp3, state: voter, after: 10s}}"
}

// Needs a Talos API call any target's control planes answer.
func (RemoveMember) Needs(*scenario.Scenario) []target.Capability {
	return []target.Capability{target.EtcdMembership}
}

func (k RemoveMember) Validate(c *scenario.FaultCheck) {
	c.ControlPlane("node", string(k.Node), "remove-member removes an etcd member")

	if sc := c.Scenario(); sc != nil && sc.Cluster.ControlPlanes < 2 {
		c.Errorf("node", "remove-member needs another control plane to remove the member through (the cluster has %d)", sc.Cluster.ControlPlanes)
	}
}

// Inject asks each other control plane in turn, until one answers.
func (k RemoveMember) Inject(ctx context.Context, env *Env) (target.Heal, error) {
	var errs []error

	var node target.Node

	for _, n := range env.Cluster.Nodes() {
		if n.Name == string(k.Node) {
			node = n
		}
	}

	for _, n := range env.Cluster.Nodes() {
		if n.Role != target.ControlPlane || n.Name == string(k.Node) {
			continue
		}

		err := removeThrough(ctx, env, n, node)
		if err == nil {
			return func() error { return nil }, nil // a one-shot operator action: nothing to undo
		}

		errs = append(errs, fmt.Errorf("through %s: %w", n.Name, err))
	}

	if len(errs) == 0 {
		return nil, errors.New("no other control plane to remove the member through")
	}

	return nil, errors.Join(errs...)
}

func removeThrough(ctx context.Context, env *Env, via, node target.Node) error {
	cl, err := talosclient.WithConfig(ctx, env.Cluster.Talosconfig(), via.Endpoint, talosclient.ForNode(via, nil)...)
	if err != nil {
		return err
	}
	defer cl.Close() //nolint:errcheck

	list, err := cl.EtcdMemberList(ctx, &machine.EtcdMemberListRequest{})
	if err != nil {
		return err
	}

	for _, msg := range list.GetMessages() {
		if m, ok := (history.Cluster{Members: history.APIMembers(msg.GetMembers())}).MemberOfTarget(node); ok {
			return cl.EtcdRemoveMemberByID(ctx, &machine.EtcdRemoveMemberByIDRequest{MemberId: m.ID})
		}
	}

	return fmt.Errorf("%s is not in the member list", node.Name)
}
