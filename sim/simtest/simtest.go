// Package simtest starts a simulated Talos cluster from a Go test, for
// checking your own bootstrap code (Ginkgo/Gomega or plain testing) against
// the failures the field has seen.
//
// Every node is what `talchaos up` starts: a real embedded etcd member and a
// fake Talos API speaking the real Talos gRPC protocol on the node's own
// loopback address (127.0.N.2 and up, port 50000), in maintenance mode until
// a machine configuration is applied. Point the Talos machinery client (or
// talosctl) at the nodes exactly as at real ones:
//
//	c := simtest.New(t, simtest.Options{ControlPlanes: 3, TimeScale: 30})
//
//	for _, n := range c.Nodes() {
//		// maintenance mode: no client certificate, the node's own address
//		cl, _ := client.New(ctx, client.WithTLSConfig(&tls.Config{InsecureSkipVerify: true}), client.WithEndpoints(n.IP))
//		cl.ApplyConfiguration(ctx, &machine.ApplyConfigurationRequest{Data: n.Config, Mode: machine.ApplyConfigurationRequest_AUTO})
//	}
//
//	cl, _ := client.New(ctx, client.WithConfig(c.Talosconfig())) // mutual TLS from here on
//	cl.Bootstrap(client.WithNode(ctx, c.ControlPlanes()[0].IP), &machine.BootstrapRequest{})
//
// Faults are the catalogue of `talchaos faults`, as typed values of package
// harness/chaos, injected at any moment and healed by the returned function:
//
//	heal, err := c.Inject(ctx, chaos.Latency{
//		Node: "cp2", Port: target.PortEtcdPeer, Latency: scenario.Duration{Duration: 300 * time.Millisecond},
//	})
//
// A cluster holds private keys in a temporary directory; Close (or the test's
// cleanup, with New) stops every node and removes it. One that a killed test
// binary left is removed by the next process's first cluster.
package simtest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"

	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	"go.yaml.in/yaml/v3"

	"github.com/talchaos/talchaos/harness/chaos"
	"github.com/talchaos/talchaos/harness/clock"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/scratch"
	"github.com/talchaos/talchaos/harness/target"
	"github.com/talchaos/talchaos/sim"
)

// Options describe the cluster. The zero value is one control plane of the
// default Talos profile on real Talos timing.
type Options struct {
	// ControlPlanes is the number of control-plane nodes, cp1…cpN (1 to
	// scenario.MaxControlPlanes; 0 means 1).
	ControlPlanes int
	// Workers is the number of workers, w1…wN (0 to scenario.MaxWorkers).
	Workers int
	// Talos is the behaviour profile, as in a scenario's `talos:` ("v1.12");
	// empty means the default profile.
	Talos string
	// TimeScale divides the Talos timers (join retries, promote window, boot
	// timeout) and keeps their ratios: 30 makes a 10-minute promote window
	// pass in 20 s. 0 means 1, real timing.
	TimeScale float64
	// Seed drives the simulated nodes' random choices and the faults'
	// (a latency's jitter): the same seed makes the same choices.
	Seed int64
	// Kubernetes runs the real kube-apiserver, controller manager and
	// scheduler on every control plane once etcd runs there, and a KWOK
	// kubelet per node, as `talchaos up --kubernetes` does: the Talos API
	// serves the admin kubeconfig once the cluster is bootstrapped. It needs
	// the Kubernetes binaries (make kube) and the right to add the nodes'
	// addresses; sim.KubernetesAvailable says whether they are here.
	Kubernetes bool
}

// Node is one node of the cluster.
type Node struct {
	// Name is cp1…cpN or w1…wN, also the node's hostname once configured.
	Name         string
	ControlPlane bool
	// IP is the node's address, as in its certificates and etcd's member
	// list; its Talos API listens on IP:50000.
	IP string
	// Endpoint is IP:50000.
	Endpoint string
	// Config is the machine configuration generated for the node (with the
	// cluster's secrets, matching Talosconfig).
	Config []byte
}

// Cluster is a running simulated cluster.
type Cluster struct {
	sc    *scenario.Scenario
	sim   *sim.Cluster
	seed  int64
	nodes []Node
	cfg   *clientconfig.Config

	closeOnce sync.Once
	closeErr  error
}

// Start starts the nodes, in maintenance mode, and returns once every node's
// Talos API answers. ctx bounds the start only; the cluster runs until Close.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	reapLeftovers()

	sc, err := scenarioOf(opts)
	if err != nil {
		return nil, err
	}

	sc2, err := sim.NewCluster(ctx, sc, opts.Seed)
	if err != nil {
		return nil, fmt.Errorf("simtest: start the cluster: %w", err)
	}

	c := &Cluster{sc: sc, sim: sc2, seed: opts.Seed}

	var endpoints []string

	for _, n := range sc2.Nodes() {
		c.nodes = append(c.nodes, Node{
			Name: n.Name, ControlPlane: n.Role == target.ControlPlane, IP: n.Address, Endpoint: n.Endpoint,
			Config: slices.Clone(n.Config),
		})

		if n.Role == target.ControlPlane {
			endpoints = append(endpoints, n.Address)
		}
	}

	// The talosconfig as `talosctl gen config` writes it once endpoints and
	// nodes are set: every control plane an endpoint, the first the node.
	cfg, err := copyConfig(sc2.Talosconfig())
	if err != nil {
		c.Close() //nolint:errcheck

		return nil, fmt.Errorf("simtest: talosconfig: %w", err)
	}

	if ctxCfg := cfg.Contexts[cfg.Context]; ctxCfg != nil {
		ctxCfg.Endpoints, ctxCfg.Nodes = endpoints, endpoints[:1]
	}

	c.cfg = cfg

	return c, nil
}

// reapOnce: a process reaps once, before its first cluster.
var reapOnce sync.Once

// reapLeftovers removes what test binaries and talchaos runs that were killed
// outright (a `go test -timeout` panic, SIGKILL) left in os.TempDir(): their
// clusters' temp dirs, which hold private keys, and the processes they
// started (scratch.Reap: only owners provably dead). The talchaos command
// does this at its start; a test binary using this package does it here.
// What cannot be removed is left for the next reap: a test is not failed for
// an earlier one's leftovers.
func reapLeftovers() {
	reapOnce.Do(func() { scratch.Reap() }) //nolint:errcheck
}

// copyConfig is a deep copy of a talosconfig.
func copyConfig(cfg *clientconfig.Config) (*clientconfig.Config, error) {
	data, err := cfg.Bytes()
	if err != nil {
		return nil, err
	}

	return clientconfig.FromBytes(data)
}

// TB is what New needs of a test: *testing.T, *testing.B and Ginkgo's
// GinkgoT() all have it.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
	Context() context.Context
}

// New starts a cluster for the test t and stops it when the test ends; a
// cluster that cannot start fails the test.
func New(t TB, opts Options) *Cluster {
	t.Helper()

	c, err := Start(t.Context(), opts)
	if err != nil {
		t.Fatalf("%s", err)
	}

	closeAtEnd(t, c.Close)

	return c
}

// closeAtEnd closes a cluster when the test ends; failing to is a failure.
func closeAtEnd(t TB, close func() error) {
	t.Cleanup(func() {
		if err := close(); err != nil {
			t.Fatalf("simtest: close: %s", err)
		}
	})
}

// FromScenario starts the simulated nodes of a scenario for the test t (in
// maintenance, nothing applied, no fault injected) and stops them when the
// test ends: what the sim's own tests start, and a way to set what Options
// cannot (a node's boot delay, an etcd setting). seed drives the nodes'
// random choices.
func FromScenario(t TB, sc *scenario.Scenario, seed int64) *sim.Cluster {
	t.Helper()
	reapLeftovers()

	c, err := sim.NewCluster(t.Context(), sc, seed)
	if err != nil {
		t.Fatalf("simtest: start the cluster: %s", err)
	}

	closeAtEnd(t, c.Close)

	return c
}

// scenarioOf builds the cluster part of a scenario from the options, checked
// as a scenario file is: a bad option is an error naming the option.
func scenarioOf(opts Options) (*scenario.Scenario, error) {
	doc := map[string]any{
		"apiVersion": scenario.APIVersion,
		"kind":       scenario.Kind,
		"name":       "simtest",
		"talos":      opts.Talos,
		"timeScale":  opts.TimeScale,
		"cluster":    map[string]any{"controlPlanes": max(opts.ControlPlanes, 1), "workers": opts.Workers, "kubernetes": opts.Kubernetes},
	}

	if opts.Talos == "" {
		doc["talos"] = scenario.DefaultProfile
	}

	if opts.TimeScale == 0 {
		doc["timeScale"] = 1
	}

	if opts.ControlPlanes < 0 {
		doc["cluster"].(map[string]any)["controlPlanes"] = opts.ControlPlanes
	}

	data, err := yaml.Marshal(doc)
	if err != nil {
		return nil, err
	}

	sc, err := chaos.Parse("simtest.Options", data)
	if err != nil {
		return nil, fieldErrors("simtest.Options", err, func(field string) string {
			if f, ok := optionFields[field]; ok {
				return f
			}

			return field
		})
	}

	return sc, nil
}

// optionFields names the Options field behind each scenario field.
var optionFields = map[string]string{
	"timeScale": "TimeScale", "talos": "Talos",
	"cluster.controlPlanes": "ControlPlanes", "cluster.workers": "Workers", "cluster.kubernetes": "Kubernetes",
}

// fieldErrors says the problems of a scenario built from Go values in terms
// of those values ("simtest.Options.Workers: must be …"), not of a YAML file
// the user never wrote.
func fieldErrors(what string, err error, name func(field string) string) error {
	var es scenario.Errors
	if !errors.As(err, &es) {
		var e *scenario.Error
		if !errors.As(err, &e) {
			return fmt.Errorf("%s: %w", what, err)
		}

		es = scenario.Errors{e}
	}

	msgs := make([]string, 0, len(es))
	for _, e := range es {
		if field := name(e.Field); field != "" {
			msgs = append(msgs, what+"."+field+": "+e.Msg)
		} else {
			msgs = append(msgs, what+": "+e.Msg)
		}
	}

	return errors.New(strings.Join(msgs, "; "))
}

// Nodes lists every node: the control planes, then the workers.
func (c *Cluster) Nodes() []Node { return slices.Clone(c.nodes) }

// ControlPlanes lists the control-plane nodes, cp1 first.
func (c *Cluster) ControlPlanes() []Node {
	return slices.DeleteFunc(c.Nodes(), func(n Node) bool { return !n.ControlPlane })
}

// Workers lists the worker nodes.
func (c *Cluster) Workers() []Node {
	return slices.DeleteFunc(c.Nodes(), func(n Node) bool { return n.ControlPlane })
}

// Node is the node of that name.
func (c *Cluster) Node(name string) (Node, bool) {
	i := slices.IndexFunc(c.nodes, func(n Node) bool { return n.Name == name })
	if i < 0 {
		return Node{}, false
	}

	return c.nodes[i], true
}

// Talosconfig is a client configuration for the cluster (a copy: change it
// freely): the cluster's CA and an admin certificate, every control plane as
// an endpoint and cp1 as the default node.
func (c *Cluster) Talosconfig() *clientconfig.Config {
	cfg, err := copyConfig(c.cfg)
	if err != nil {
		// Start built c.cfg from a config that read back: it always does.
		panic(fmt.Sprintf("simtest: talosconfig does not read back: %s", err))
	}

	return cfg
}

// WriteTalosconfig writes the talosconfig into dir (a test's t.TempDir())
// for tools that read a file (talosctl --talosconfig, TALOSCONFIG) and
// returns its path. It holds the admin key.
func (c *Cluster) WriteTalosconfig(dir string) (string, error) {
	data, err := c.cfg.Bytes()
	if err != nil {
		return "", err
	}

	path := filepath.Join(dir, "talosconfig")

	return path, scratch.WriteFileAtomic(path, data, 0o600)
}

// TimeScale is the divisor of the Talos timers (1: real timing).
func (c *Cluster) TimeScale() float64 { return c.sim.TimeScale() }

// Inject starts a fault now and returns what heals it. The fault is a value
// of one of chaos.Kinds (the catalogue `talchaos faults` lists), with its
// node named; it is checked as in a scenario file (a node that does not
// exist, a port the kind has not, a rate out of range are errors).
func (c *Cluster) Inject(ctx context.Context, fault chaos.Kind) (heal func() error, err error) {
	if fault == nil {
		return nil, errors.New("simtest: Inject: no fault")
	}

	entry := map[string]any{"kind": fault.Kind(), "name": fault.Kind(), "at": "0s"}

	v := reflect.ValueOf(fault)
	for i := range v.NumField() {
		tag, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("yaml"), ",")
		if tag == "" || tag == "-" || v.Field(i).IsZero() {
			continue // unset: the kind's default, as a field left out of a scenario file
		}

		entry[tag] = v.Field(i).Interface()
	}

	if slices.Contains(chaos.NodesOf(fault), scenario.RandomNode) {
		return nil, fmt.Errorf("simtest: Inject %s: name the node (%q is for scenario files, where the run's seed picks it)", fault.Kind(), scenario.RandomNode)
	}

	sc, err := c.withFault(entry)
	if err != nil {
		return nil, err
	}

	planned, err := chaos.Plan(sc, sim.Target{}, chaos.PlanOptions{Seed: c.seed})
	if err != nil {
		return nil, fieldErrors("simtest.Inject("+fault.Kind()+")", err, faultField)
	}

	h, err := planned[0].Kind.Inject(ctx, &chaos.Env{Cluster: c.sim, Clock: clock.New(c.sim.TimeScale()), Seed: planned[0].Seed})
	if err != nil {
		return nil, fmt.Errorf("simtest: inject %s: %w", fault.Kind(), err)
	}

	var once sync.Once

	return func() error {
		var err error

		once.Do(func() { err = h() })

		return err
	}, nil
}

// withFault is the cluster's scenario with the one fault entry, parsed and
// checked as a scenario file.
func (c *Cluster) withFault(entry map[string]any) (*scenario.Scenario, error) {
	doc := map[string]any{
		"apiVersion": scenario.APIVersion,
		"kind":       scenario.Kind,
		"name":       "simtest",
		"talos":      c.sc.Talos,
		"timeScale":  c.sc.TimeScale,
		"cluster":    map[string]any{"controlPlanes": c.sc.Cluster.ControlPlanes, "workers": c.sc.Cluster.Workers},
		"faults":     []any{maps.Clone(entry)},
	}

	data, err := yaml.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("simtest: Inject %s: %w", entry["kind"], err)
	}

	sc, err := chaos.Parse("simtest.Inject", data)
	if err != nil {
		return nil, fieldErrors(fmt.Sprintf("simtest.Inject(%s)", entry["kind"]), err, faultField)
	}

	return sc, nil
}

// faultField is a fault parameter's name without the scenario's path to it.
func faultField(field string) string {
	if field == "faults[0]" {
		return ""
	}

	return strings.TrimPrefix(field, "faults[0].")
}

// Close stops every node and removes the cluster's files (its keys).
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() {
		c.closeErr = c.sim.Close()
	})

	return c.closeErr
}
