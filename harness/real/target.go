package real

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	"google.golang.org/grpc"

	"github.com/talchaos/talchaos/harness/netfault"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/strictyaml"
	"github.com/talchaos/talchaos/harness/target"
)

// Target runs scenarios against the nodes of an inventory.
type Target struct {
	Inventory *Inventory
}

// Name implements target.Target.
func (*Target) Name() string { return "real" }

// Capabilities implements target.Target: network faults only on the Talos API
// path (talchaos's own proxy), API faults only in talchaos's own clients,
// reboots and resets through the Talos API, power and the NIC through the
// node's provider.
func (*Target) Capabilities() []target.Capability {
	return []target.Capability{
		target.ToxicOn(target.PortTalosAPI),
		target.ProcessCap(target.RebootNode),
		target.ProcessCap(target.PowerOff),
		target.ProcessCap(target.WipeEtcd),
		target.ProcessCap(target.ResetGraceful),
		target.ProcessCap(target.ResetForced),
		target.IsolateNode,
		target.EtcdMembership,
		target.InterceptEngine("ApplyConfiguration"),
		target.InterceptEngine("Bootstrap"),
	}
}

// Disposable implements target.Target: real nodes outlive the run.
func (*Target) Disposable() bool { return false }

// TimeScale implements target.Target: real nodes run on real time, whatever the
// scenario's timeScale; the inventory of simulated nodes (talchaos up) says
// how fast theirs run.
func (t *Target) TimeScale(*scenario.Scenario) float64 {
	if t.Inventory == nil || t.Inventory.TimeScale == 0 {
		return 1
	}

	return t.Inventory.TimeScale
}

// Supports implements target.Target, saying why a primitive is out of reach.
func (t *Target) Supports(c target.Capability, node string) error {
	if target.Has(t, c) != nil {
		return errors.New(outOfReach(c))
	}

	if c != target.ProcessCap(target.PowerOff) && c != target.IsolateNode {
		return nil
	}

	if n, ok := t.Inventory.Node(node); !ok || (n.Proxmox == nil && n.QEMU == nil) {
		return fmt.Errorf("it needs a power/NIC provider (proxmox or qemu) for node %s in the inventory", node)
	}

	return nil
}

// outOfReach says why the real target lacks a capability.
func outOfReach(c target.Capability) string {
	s := string(c)

	switch {
	case strings.HasPrefix(s, "toxic:"):
		return "on real nodes network faults act only on the Talos API path (port talos-api), through talchaos's own proxy"
	case strings.HasPrefix(s, "api:"), strings.HasPrefix(s, "engine-api:"):
		return "a real node cannot be made to refuse or lose its own replies: only talchaos's own ApplyConfiguration and Bootstrap calls " +
			"can be intercepted, not a user's exec command's calls nor the etcd calls a node makes itself"
	case c == target.PartitionNodes:
		return "cutting two real nodes apart needs a hand on their network; isolate (NIC link down) is possible"
	}

	return "a real node's processes are out of talchaos's reach: only reboots and resets (Talos API) and power (provider) are"
}

// Check implements target.Target: the scenario's nodes (cp1..cpN, w1..wM) must
// be the inventory's, with the same roles.
func (t *Target) Check(sc *scenario.Scenario) error { return t.Inventory.CheckScenario(sc) }

// Provision implements target.Target: it reaches the inventory's nodes, which
// must be the scenario's (cp1..cpN, w1..wM), and puts a proxy in front of each
// Talos API for API-path faults. Nothing on the nodes is changed.
func (t *Target) Provision(ctx context.Context, sc *scenario.Scenario, _ target.Options) (target.Cluster, error) {
	inv := t.Inventory

	if err := t.Check(sc); err != nil {
		return nil, err
	}

	// As the inventory load read it; read again for an inventory built in
	// code (clientconfig.Open would create a missing file).
	cfg := inv.talosconfig
	if cfg == nil {
		data, err := readFile(inv.path(inv.Talosconfig), strictyaml.MaxFileBytes)
		if err != nil {
			return nil, fmt.Errorf("talosconfig: %w", err)
		}

		if cfg, err = clientconfig.FromBytes(data); err != nil {
			return nil, fmt.Errorf("talosconfig: %w", err)
		}
	}

	c := &Cluster{inv: inv, talosconfig: cfg, proxies: map[string]*netfault.Proxy{}, client: newClientFaults()}

	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())

	for _, name := range sc.Cluster.NodeNames() {
		in, _ := inv.Node(name)

		config, err := readFile(inv.path(in.Config), strictyaml.MaxFileBytes)
		if err != nil {
			c.Close() //nolint:errcheck

			return nil, fmt.Errorf("node %s config: %w", name, err)
		}

		direct := in.Endpoint
		if direct == "" {
			direct = net.JoinHostPort(in.Address, "50000")
		}

		p, err := netfault.StartProxy(server, name+"-talos-api", "127.0.0.1:0", direct)
		if err != nil {
			c.Close() //nolint:errcheck

			return nil, fmt.Errorf("node %s API proxy: %w", name, err)
		}

		c.proxies[name] = p

		role := target.Worker
		if in.Role == "controlplane" {
			role = target.ControlPlane
		}

		c.nodes = append(c.nodes, target.Node{
			Name: name, Role: role, Address: in.Address,
			Endpoint: p.Listen, DirectEndpoint: direct, ServerName: in.Address,
			Config: config,
		})
	}

	var err error

	if c.power, err = newPower(ctx, inv); err != nil {
		c.Close() //nolint:errcheck

		return nil, err
	}

	return c, nil
}

// Cluster is a provisioned real cluster.
type Cluster struct {
	inv         *Inventory
	talosconfig *clientconfig.Config
	nodes       []target.Node
	proxies     map[string]*netfault.Proxy
	client      *clientFaults
	power       *power

	closeOnce sync.Once
}

// Secrets implements target.SecretHolder.
func (c *Cluster) Secrets() []string {
	if c.power == nil {
		return nil
	}

	return slices.Clone(c.power.secrets)
}

// Nodes implements target.Cluster.
func (c *Cluster) Nodes() []target.Node { return slices.Clone(c.nodes) }

// Talosconfig implements target.Cluster.
func (c *Cluster) Talosconfig() *clientconfig.Config { return c.talosconfig }

// Close stops the proxies and the providers' connections; the nodes are left as they are.
func (c *Cluster) Close() error {
	var err error

	c.closeOnce.Do(func() {
		for _, p := range c.proxies {
			p.Stop()
		}

		if c.power != nil {
			err = c.power.close()
		}
	})

	return err
}

// AddToxic implements target.Toxics on the Talos API path.
func (c *Cluster) AddToxic(_ context.Context, node string, port target.Port, t target.Toxic) (func() error, error) {
	if port != target.PortTalosAPI {
		return nil, errors.New("only the Talos API path can be impaired on real nodes")
	}

	p, ok := c.proxies[node]
	if !ok {
		return nil, fmt.Errorf("unknown node %q", node)
	}

	return netfault.AddToxic(p, t)
}

// InterceptAPI implements target.APIFaults on the client side.
func (c *Cluster) InterceptAPI(_ context.Context, node string, f target.APIFault) (target.Heal, error) {
	return c.client.add(node, f)
}

// ClientDialOptions implements target.ClientFaults.
func (c *Cluster) ClientDialOptions(node string) []grpc.DialOption {
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(c.client.interceptor(node))}
}
