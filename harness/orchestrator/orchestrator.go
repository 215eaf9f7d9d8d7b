// Package orchestrator holds the bootstrap strategies a scenario can run: the
// careful one (resilient), the field scripts' (naive) and the user's own (exec).
// They reach nodes only through the Talos API, like any real client.
package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	"google.golang.org/grpc"

	"github.com/talchaos/talchaos/harness/clock"
	"github.com/talchaos/talchaos/harness/eventlog"
	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/talosclient"
	"github.com/talchaos/talchaos/harness/target"
)

// Orchestrator bootstraps a cluster.
type Orchestrator interface {
	Name() string
	Run(ctx context.Context, env *Env) error
}

// Env is what an orchestrator gets: the nodes and their configs, the talosconfig,
// the node to bootstrap, the event log, and the time scale for its own waits.
type Env struct {
	Nodes         []target.Node
	Talosconfig   *clientconfig.Config
	BootstrapNode string
	Log           *eventlog.Log
	// Clock turns Talos-time intervals into wall time (a 5 s poll at scale
	// 60 is 83 ms).
	Clock clock.Clock
	// Faults, when set, puts the target's client-side API faults into every
	// client the orchestrator opens.
	Faults target.ClientFaults
	// Record, when set, receives every call the orchestrator's clients make,
	// typed (RPC, client, gRPC code and message, duration): the run's history.
	Record *history.Recorder
	// Destructive permits remedies that remove members, reset, wipe or reboot
	// nodes. Without it an orchestrator reports the remedy it would take, with
	// the talosctl command, and stops.
	Destructive bool
	// Kubernetes: the control planes run the Kubernetes API server, and a
	// bootstrap is done once the kubernetes endpoints list them all.
	Kubernetes bool
	// UpgradeTo, when set, is the installer image every node is upgraded to
	// once the bootstrap is done (scenario orchestrator.upgradeTo).
	UpgradeTo string
	// ClusterEndpoint is the cluster's Talos API endpoint (host:port of
	// cluster.network.endpoint), for an orchestrator that calls through it
	// (scenario orchestrator.endpoint: cluster); "" when the cluster has none.
	ClusterEndpoint string
}

// rollingUpgrade runs after a bootstrap that succeeded, when the scenario
// asks for an upgrade.
func (e *Env) rollingUpgrade(ctx context.Context, bootErr error, upgrade func(ctx context.Context, image, version string) error) error {
	if bootErr != nil || e.UpgradeTo == "" {
		return bootErr
	}

	version, err := scenario.UpgradeVersion(e.UpgradeTo)
	if err != nil {
		return fmt.Errorf("upgrade to %s: %w", e.UpgradeTo, err)
	}

	return upgrade(ctx, e.UpgradeTo, version)
}

// Remedy is a destructive step an orchestrator may take to unblock a cluster.
type Remedy struct {
	// When is the situation that calls for it, as a sentence.
	When string
	// Action is what the orchestrator does.
	Action string
	// Command is the same by hand.
	Command string
}

// Remedial is implemented by orchestrators that may take destructive remedies
// (listed by --plan).
type Remedial interface {
	Remedies() []Remedy
}

// ErrRemedyWithheld stops an orchestrator that needed a destructive remedy it
// was not permitted to take.
var ErrRemedyWithheld = errors.New("a destructive remedy is needed and was not permitted (--allow-destructive)")

// withhold reports a remedy the orchestrator would take, and the error that
// stops it.
func (e *Env) withhold(node, action, command string) error {
	e.Log.Add(node, "orchestrator.remedy-withheld",
		fmt.Sprintf("would %s: %s (destructive on nodes that outlive the run: pass --allow-destructive to let talchaos do it)", action, command))

	return fmt.Errorf("%w: %s", ErrRemedyWithheld, action)
}

// New returns the orchestrator the scenario's orchestrator block names.
func New(o scenario.Orchestrator) (Orchestrator, error) {
	switch o.Name {
	case "resilient", "":
		return &Resilient{}, nil
	case "naive":
		return &Naive{RetryApply: o.RetryApply, BootstrapNodes: slices.Clone(o.BootstrapNodes), ThroughCluster: o.Endpoint == scenario.EndpointCluster}, nil
	case "exec":
		if len(o.Command) == 0 || o.Command[0] == "" {
			return nil, errors.New("the exec orchestrator needs a command")
		}

		return &Exec{Command: slices.Clone(o.Command)}, nil
	}

	return nil, fmt.Errorf("orchestrator %q is not available", o.Name)
}

// callTimeout bounds one call an orchestrator makes: 30 s of Talos time,
// never below 2 s wall.
func (e *Env) callTimeout() time.Duration {
	return max(e.d(30*time.Second), 2*time.Second)
}

// d scales a Talos-time interval, never below 20 ms.
func (e *Env) d(talos time.Duration) time.Duration {
	return e.Clock.WallAtLeast(talos, 20*time.Millisecond)
}

func (e *Env) node(name string) (target.Node, bool) {
	for _, n := range e.Nodes {
		if n.Name == name {
			return n, true
		}
	}

	return target.Node{}, false
}

// nodeByPeerURL finds the control plane whose address a member advertises.
func (e *Env) nodeByPeerURL(peerURLs []string) (target.Node, bool) {
	for _, u := range peerURLs {
		parsed, err := url.Parse(u)
		if err != nil {
			continue
		}

		for _, n := range e.controlPlanes() {
			if n.Address == parsed.Hostname() || slices.Contains(n.Addresses, parsed.Hostname()) {
				return n, true
			}
		}
	}

	return target.Node{}, false
}

// nodeOf is the control plane whose member m is (memberOf).
func (e *Env) nodeOf(m *machine.EtcdMember) (target.Node, bool) {
	for _, n := range e.controlPlanes() {
		if memberOf([]*machine.EtcdMember{m}, n) != nil {
			return n, true
		}
	}

	return target.Node{}, false
}

func (e *Env) controlPlanes() []target.Node { return e.withRole(true) }

func (e *Env) workers() []target.Node { return e.withRole(false) }

func (e *Env) withRole(controlPlane bool) []target.Node {
	var out []target.Node

	for _, n := range e.Nodes {
		if (n.Role == target.ControlPlane) == controlPlane {
			out = append(out, n)
		}
	}

	return out
}

// call records one API call and its outcome in the event log.
func (e *Env) call(node, what string, err error) {
	if err != nil {
		e.Log.Add(node, "orchestrator.error", fmt.Sprintf("%s %s: %s", what, node, err))

		return
	}

	e.Log.Add(node, "orchestrator.call", fmt.Sprintf("%s %s: ok", what, node))
}

func (e *Env) step(msg string) {
	e.Log.Add("", "orchestrator.step", msg)
	e.Record.Step("", msg)
}

// secure opens a talosconfig client to the node (through n.Via when set);
// the caller closes it.
func (e *Env) secure(ctx context.Context, n target.Node) (*client.Client, error) {
	endpoint, routed := talosclient.SecureEndpoint(n)

	return talosclient.WithConfig(ctx, e.Talosconfig, endpoint, append(e.dialOptions(n, history.ClientTalosconfig), routed...)...)
}

// insecure opens a maintenance client to the node; the caller closes it.
func (e *Env) insecure(ctx context.Context, n target.Node) (*client.Client, error) {
	return talosclient.Insecure(ctx, n.Endpoint, e.dialOptions(n, history.ClientInsecure)...)
}

// dialOptions reach the node (talosclient.ForNode) with every call recorded
// in the history. The recorder sits outside the target's fault
// interceptors: it records what the caller saw.
func (e *Env) dialOptions(n target.Node, kind string) []grpc.DialOption {
	rec := grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
		invoker grpc.UnaryInvoker, opts ...grpc.CallOption,
	) error {
		start := time.Now()
		err := invoker(ctx, method, req, reply, cc, opts...)

		e.Record.Call(n.Name, method[strings.LastIndex(method, "/")+1:], kind, time.Since(start), err)

		return err
	})

	return append([]grpc.DialOption{rec}, talosclient.ForNode(n, e.Faults)...)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()

	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}

	return strings.TrimSpace(err.Error())
}
