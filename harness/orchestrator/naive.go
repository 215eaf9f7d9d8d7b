package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/talchaos/talchaos/harness/target"
)

// Naive is what the field scripts do (field reports FR-000, FR-001, FR-003, FR-004; TALOS-FIDELITY
// §4):
//
//   - apply: `talosctl apply-config --insecure ... ;` for every node in turn, one
//     ApplyConfiguration (mode AUTO) through the maintenance client; a failure is
//     recorded and ignored. With RetryApply a failed apply is sent again through
//     the same insecure client every 5 s until it succeeds, never checking whether
//     the node already left maintenance (the Go code of field report FR-004).
//   - bootstrap: Terraform's talos_machine_bootstrap: Bootstrap on the bootstrap
//     node every 5 s until it is accepted; only InvalidArgument stops it, so an
//     AlreadyExists after a lost reply is retried until the deadline.
//   - wait: `talosctl etcd members | grep -c "false$"` every 5 s until there are
//     as many non-learner members as control planes.
//
// With ThroughCluster the bootstrap and the wait go through the cluster's
// endpoint (`talosctl -e VIP -n NODE`), as a script that takes the VIP for
// its Talos endpoint does (cozystack/talos-bootstrap#30): a shared IP that
// Talos elects through etcd answers no one before the bootstrap.
//
// It never removes members, never checks maintenance state and never falls back
// to another client.
type Naive struct {
	// RetryApply retries a failed apply through the same insecure client until
	// it succeeds; the bootstrap step is then only reached once every apply did.
	RetryApply bool
	// BootstrapNodes, when set, bootstraps each of them in turn (a script
	// looping over nodes, talos #5500) instead of only the bootstrap node.
	BootstrapNodes []string
	// ThroughCluster sends the talosconfig client's calls through
	// Env.ClusterEndpoint, routed on to their node.
	ThroughCluster bool
}

// secure opens the talosconfig client to node: at its own address, or
// through the cluster's endpoint.
func (n *Naive) secure(ctx context.Context, env *Env, node target.Node) (*client.Client, error) {
	if !n.ThroughCluster {
		return env.secure(ctx, node)
	}

	if env.ClusterEndpoint == "" {
		return nil, errors.New("the cluster has no endpoint to call through (cluster.network.endpoint)")
	}

	node.Via = env.ClusterEndpoint

	return env.secure(ctx, node)
}

// Name implements Orchestrator.
func (*Naive) Name() string { return "naive" }

// naivePoll is the scripts' `sleep 5` (Talos time).
const naivePoll = 5 * time.Second

// Run implements Orchestrator: the bootstrap, then the rolling upgrade the
// scenario asks for.
func (n *Naive) Run(ctx context.Context, env *Env) error {
	return env.rollingUpgrade(ctx, n.bootstrapAll(ctx, env), func(ctx context.Context, image, _ string) error {
		return naiveUpgrade(ctx, env, image)
	})
}

func (n *Naive) bootstrapAll(ctx context.Context, env *Env) error {
	if n.RetryApply {
		env.step("apply-config --insecure to every node, retrying each failure")
	} else {
		env.step("apply-config --insecure to every node (errors ignored, as `talosctl apply-config ...;`)")
	}

	for _, node := range env.Nodes {
		if err := n.apply(ctx, env, node); err != nil {
			return err
		}
	}

	boot, ok := env.node(env.BootstrapNode)
	if !ok {
		return fmt.Errorf("bootstrap node %q is not in the cluster", env.BootstrapNode)
	}

	targets := n.BootstrapNodes
	if len(targets) == 0 {
		targets = []string{boot.Name}
	}

	for _, name := range targets {
		node, ok := env.node(name)
		if !ok {
			return fmt.Errorf("bootstrap node %q is not in the cluster", name)
		}

		env.step("bootstrap etcd on " + node.Name + " (retried until accepted; only InvalidArgument stops it)")

		if err := n.bootstrap(ctx, env, node); err != nil {
			return err
		}
	}

	want := len(env.controlPlanes())
	env.step(fmt.Sprintf("wait for %d non-learner etcd members on %s", want, boot.Name))

	if err := n.wait(ctx, env, boot, want); err != nil || !env.Kubernetes {
		return err
	}

	return waitKubernetesEndpoints(ctx, env, []target.Node{boot}, naivePoll, false)
}

// apply sends the node its config through one insecure client. Without
// RetryApply it returns nil whatever happened (the error is in the event log);
// with it, it returns an error only when the context ends first.
func (n *Naive) apply(ctx context.Context, env *Env, node target.Node) error {
	ins, err := env.insecure(ctx, node)
	if err != nil {
		env.call(node.Name, "ApplyConfiguration", err)

		if n.RetryApply {
			return fmt.Errorf("apply %s: %w", node.Name, err)
		}

		return nil
	}
	defer ins.Close() //nolint:errcheck

	return env.wait(ctx, condition{what: node.Name + " to take its configuration", every: naivePoll, check: func(ctx context.Context, _ int) error {
		callCtx, cancel := context.WithTimeout(ctx, env.callTimeout())
		_, err := ins.ApplyConfiguration(callCtx, &machine.ApplyConfigurationRequest{Data: node.Config, Mode: machine.ApplyConfigurationRequest_AUTO})

		cancel()
		env.call(node.Name, "ApplyConfiguration", err)

		if !retryApply(n.RetryApply, err) {
			return nil // the script goes on, whatever happened
		}

		return err
	}})
}

// retryApply is the apply loop's decision: a failure is sent again only when
// the script retries at all, whatever the error (even InvalidArgument, or the
// "certificate required" of a node that already left maintenance).
func retryApply(retry bool, err error) bool {
	return retry && err != nil
}

// bootstrapOutcome is what talos_machine_bootstrap makes of a Bootstrap result.
type bootstrapOutcome int

const (
	bootstrapRetry bootstrapOutcome = iota
	bootstrapAccepted
	bootstrapRejected
)

// bootstrapDecision: OK is done, InvalidArgument stops, everything else (AlreadyExists
// included) is retried.
func bootstrapDecision(err error) bootstrapOutcome {
	switch status.Code(err) {
	case codes.OK:
		return bootstrapAccepted
	case codes.InvalidArgument:
		return bootstrapRejected
	default:
		return bootstrapRetry
	}
}

func (n *Naive) bootstrap(ctx context.Context, env *Env, boot target.Node) error {
	sec, err := n.secure(ctx, env, boot)
	if err != nil {
		env.call(boot.Name, "Bootstrap", err)

		return fmt.Errorf("bootstrap %s: %w", boot.Name, err)
	}
	defer sec.Close() //nolint:errcheck

	return env.wait(ctx, condition{what: boot.Name + " to accept Bootstrap", every: naivePoll, check: func(ctx context.Context, _ int) error {
		callCtx, cancel := context.WithTimeout(ctx, env.callTimeout())
		err := sec.Bootstrap(callCtx, &machine.BootstrapRequest{})

		cancel()
		env.call(boot.Name, "Bootstrap", err)

		switch bootstrapDecision(err) {
		case bootstrapAccepted:
			return nil
		case bootstrapRejected:
			return stop(fmt.Errorf("bootstrap %s: %w", boot.Name, err))
		}

		return err
	}})
}

// voters splits the member list the way `talosctl etcd members | grep -c
// "false$"` counts it (the LEARNER column is last), naming each member by its
// hostname, unstarted ones as "(unstarted)".
func voters(members []*machine.EtcdMember) (names, learners []string) {
	for _, m := range members {
		name := m.GetHostname()
		if name == "" {
			name = "(unstarted)"
		}

		if m.GetIsLearner() {
			learners = append(learners, name)
		} else {
			names = append(names, name)
		}
	}

	return names, learners
}

// missingVoters are the control planes that are not among the voters.
func missingVoters(cps []target.Node, voters []string) []string {
	var out []string

	for _, n := range cps {
		found := false

		for _, v := range voters {
			if v == n.Name || v == n.Hostname && v != "" || v == n.Address {
				found = true

				break
			}
		}

		if !found {
			out = append(out, n.Name)
		}
	}

	return out
}

func (n *Naive) wait(ctx context.Context, env *Env, boot target.Node, want int) error {
	sec, err := n.secure(ctx, env, boot)
	if err != nil {
		return fmt.Errorf("etcd members on %s: %w", boot.Name, err)
	}
	defer sec.Close() //nolint:errcheck

	return env.wait(ctx, condition{what: fmt.Sprintf("%d non-learner etcd members", want), node: boot.Name, log: true, every: naivePoll,
		check: func(ctx context.Context, _ int) error {
			callCtx, cancel := context.WithTimeout(ctx, env.callTimeout())
			resp, err := sec.EtcdMemberList(callCtx, &machine.EtcdMemberListRequest{})

			cancel()

			if err != nil {
				return fmt.Errorf("etcd members: %w", err)
			}

			var members []*machine.EtcdMember
			if msgs := resp.GetMessages(); len(msgs) > 0 {
				members = msgs[0].GetMembers()
			}

			vs, ls := voters(members)
			if len(vs) >= want {
				env.Log.Add(boot.Name, "orchestrator.wait", fmt.Sprintf("%d of %d non-learner members: %s", len(vs), want, strings.Join(vs, " ")))

				return nil
			}

			return fmt.Errorf("%d of %d non-learner members: voters [%s] learners [%s] missing [%s]",
				len(vs), want, strings.Join(vs, " "), strings.Join(ls, " "), strings.Join(missingVoters(env.controlPlanes(), vs), " "))
		}})
}
