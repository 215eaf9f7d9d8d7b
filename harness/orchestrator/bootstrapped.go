package orchestrator

import (
	"context"
	"fmt"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"

	"github.com/talchaos/talchaos/harness/history"
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

	seen, err := r.memberLists(ctx, env)
	if err != nil {
		return err
	}

	if clusters := seen.Clusters(); len(clusters) > 1 {
		groups := make([]string, len(clusters))
		for i, c := range clusters {
			groups[i] = "[" + strings.Join(c.Seen, " ") + "]"
		}

		return stop(fmt.Errorf("bootstrap %s: its etcd data directory is not empty, and the control planes run %d separate etcd clusters (%s): "+
			"a second bootstrap made one; not going on", n.Name, len(clusters), strings.Join(groups, ", ")))
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

// memberLists is what the control planes whose etcd runs report as their
// own member lists (EtcdMemberList with QueryLocal), as the observer records
// them: history.Observation.Clusters tells the clusters apart.
func (r *Resilient) memberLists(ctx context.Context, env *Env) (*history.Observation, error) {
	cps := env.controlPlanes()

	names := make([]string, len(cps))
	for i, n := range cps {
		names[i] = n.Name
	}

	seen := history.NewObservation(0, names)

	for _, n := range cps {
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

		seen.Nodes[n.Name] = &history.NodeObservation{Name: n.Name, Address: n.Address, Hostname: n.Hostname, Addresses: n.Addresses,
			Role: n.Role, Members: history.APIMembers(resp.GetMessages()[0].GetMembers())}
	}

	return seen, nil
}
