package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"

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

// Inject asks each other control plane in turn, until one answers. A call
// whose answer is lost (a timeout under load) may still have removed the
// member: a later list that no longer holds it is the removal done, not a
// failure.
func (k RemoveMember) Inject(ctx context.Context, env *Env) (target.Heal, error) {
	var (
		errs []error
		node target.Node
		vias []target.Node
		// asked is the member whose removal was asked for and not
		// confirmed; 0 before any call.
		asked uint64
	)

	for _, n := range env.Cluster.Nodes() {
		switch {
		case n.Name == string(k.Node):
			node = n
		case n.Role == target.ControlPlane:
			vias = append(vias, n)
		}
	}

	done := func() (target.Heal, error) {
		return func() error { return nil }, nil // a one-shot operator action: nothing to undo
	}

	for _, via := range vias {
		id, err := removeThrough(ctx, env, via, node, asked)
		if err == nil {
			return done()
		}

		if id != 0 {
			asked = id
		}

		errs = append(errs, fmt.Errorf("through %s: %w", via.Name, err))
	}

	if len(vias) == 0 {
		return nil, errors.New("no other control plane to remove the member through")
	}

	// The last call's answer was lost: one more look through any of them.
	if asked != 0 {
		for _, via := range vias {
			if gone, err := memberGone(ctx, env, via, asked); err == nil && gone {
				return done()
			}
		}
	}

	return nil, errors.Join(errs...)
}

// removeThrough removes node's member through via's Talos API and returns the
// member's ID once it asked for its removal. A node with no member is removed
// already when asked is not 0: an earlier call whose answer was lost did it.
func removeThrough(ctx context.Context, env *Env, via, node target.Node, asked uint64) (uint64, error) {
	var id uint64

	err := withMembers(ctx, env, via, func(cl *client.Client, members history.Cluster) error {
		m, ok := members.MemberOfTarget(node)

		switch {
		case ok:
			id = m.ID

			return cl.EtcdRemoveMemberByID(ctx, &machine.EtcdRemoveMemberByIDRequest{MemberId: m.ID})
		case asked != 0:
			return nil
		default:
			return fmt.Errorf("%s is not in the member list", node.Name)
		}
	})

	return id, err
}

// memberGone says whether via's member list no longer holds the member id.
func memberGone(ctx context.Context, env *Env, via target.Node, id uint64) (bool, error) {
	gone := false

	err := withMembers(ctx, env, via, func(_ *client.Client, members history.Cluster) error {
		gone = !slices.ContainsFunc(members.Members, func(m history.Member) bool { return m.ID == id })

		return nil
	})

	return gone, err
}

// withMembers calls f with a client of via's Talos API and the members it
// lists.
func withMembers(ctx context.Context, env *Env, via target.Node, f func(*client.Client, history.Cluster) error) error {
	cl, err := talosclient.WithConfig(ctx, env.Cluster.Talosconfig(), via.Endpoint, talosclient.ForNode(via, nil)...)
	if err != nil {
		return err
	}
	defer cl.Close() //nolint:errcheck

	list, err := cl.EtcdMemberList(ctx, &machine.EtcdMemberListRequest{})
	if err != nil {
		return err
	}

	var members history.Cluster
	for _, msg := range list.GetMessages() {
		members.Members = append(members.Members, history.APIMembers(msg.GetMembers())...)
	}

	return f(cl, members)
}
