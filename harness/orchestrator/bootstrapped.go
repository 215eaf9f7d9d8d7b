package orchestrator

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"

	"github.com/talchaos/talchaos/harness/target"
)

// What the resilient orchestrator makes of a node that is bootstrapped
// already (Bootstrap answers AlreadyExists "etcd data directory is not
// empty": v1alpha1_server.go): after its own Bootstrap that got no answer,
// that one took effect (the lost reply of dis-bzh/OpenAether-infra#67);
// otherwise the node had etcd data before, and the run goes on only when
// every control plane that runs etcd is in one cluster with it (a second
// cluster, talos #5500's bootstrap-twice, is no cluster to finish).

// alreadyBootstrapped decides on a Bootstrap answered AlreadyExists.
func (r *Resilient) alreadyBootstrapped(ctx context.Context, env *Env, n target.Node, unanswered bool) error {
	if unanswered {
		env.Log.Add(n.Name, "orchestrator.bootstrap",
			n.Name+" answers AlreadyExists after a Bootstrap of ours that got no answer: that one bootstrapped it (its reply was lost)")

		return nil
	}

	members, err := r.memberLists(ctx, env)
	if err != nil {
		return err
	}

	if groups := separateClusters(members); len(groups) > 1 {
		return stop(fmt.Errorf("bootstrap %s: its etcd data directory is not empty, and the control planes run %d separate etcd clusters (%s): "+
			"a second bootstrap made one; not going on", n.Name, len(groups), describeGroups(groups)))
	}

	env.Log.Add(n.Name, "orchestrator.bootstrap", n.Name+" was bootstrapped before this run (AlreadyExists): going on with its cluster")

	return nil
}

// etcdRunning reports whether the node's etcd service is Running; a node
// that does not answer runs none the orchestrator could see.
func (r *Resilient) etcdRunning(ctx context.Context, env *Env, n target.Node) (bool, error) {
	sec, err := env.secure(ctx, n)
	if err != nil {
		return false, err
	}
	defer sec.Close() //nolint:errcheck

	s, err := r.etcdService(ctx, env, sec)

	return err == nil && s.GetState() == "Running", nil
}

// memberLists is, per control plane whose etcd runs, the member IDs its own
// member lists (EtcdMemberList with QueryLocal).
func (r *Resilient) memberLists(ctx context.Context, env *Env) (map[string][]uint64, error) {
	out := map[string][]uint64{}

	for _, n := range env.controlPlanes() {
		if running, err := r.etcdRunning(ctx, env, n); err != nil || !running {
			continue
		}

		sec, err := env.secure(ctx, n)
		if err != nil {
			return nil, err
		}

		callCtx, cancel := context.WithTimeout(ctx, env.callTimeout())
		resp, err := sec.EtcdMemberList(callCtx, &machine.EtcdMemberListRequest{QueryLocal: true})

		cancel()
		sec.Close() //nolint:errcheck

		if err != nil || len(resp.GetMessages()) == 0 {
			continue
		}

		for _, m := range resp.GetMessages()[0].GetMembers() {
			out[n.Name] = append(out[n.Name], m.GetId())
		}
	}

	return out, nil
}

// separateClusters groups nodes by the cluster their member lists show:
// two nodes are in one cluster when their lists share a member. Groups are
// sorted, and sorted by their first node.
func separateClusters(members map[string][]uint64) [][]string {
	var groups [][]string

	for _, node := range slices.Sorted(maps.Keys(members)) {
		joined := -1

		for i := 0; i < len(groups); i++ {
			if !slices.ContainsFunc(groups[i], func(o string) bool { return shareMember(members[o], members[node]) }) {
				continue
			}

			if joined < 0 {
				groups[i] = append(groups[i], node)
				joined = i

				continue
			}

			// node links two groups: merge them.
			groups[joined] = append(groups[joined], groups[i]...)
			groups = slices.Delete(groups, i, i+1)
			i--
		}

		if joined < 0 {
			groups = append(groups, []string{node})
		}
	}

	for _, g := range groups {
		slices.Sort(g)
	}

	slices.SortFunc(groups, func(a, b []string) int { return strings.Compare(a[0], b[0]) })

	return groups
}

func shareMember(a, b []uint64) bool {
	return slices.ContainsFunc(a, func(id uint64) bool { return slices.Contains(b, id) })
}

func describeGroups(groups [][]string) string {
	out := make([]string, len(groups))
	for i, g := range groups {
		out[i] = "[" + strings.Join(g, " ") + "]"
	}

	return strings.Join(out, ", ")
}
