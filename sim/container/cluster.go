package container

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	"github.com/testcontainers/testcontainers-go"
	tcnetwork "github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"
	"go.yaml.in/yaml/v3"
	"golang.org/x/sync/errgroup"

	"github.com/talchaos/talchaos/harness/clock"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
	"github.com/talchaos/talchaos/sim"
	"github.com/talchaos/talchaos/sim/kubecp"
)

//go:embed Dockerfile
var dockerfile []byte

// Labels every container, network and image of a run carries.
const (
	LabelRun  = "org.talchaos.run"  // the run's id
	LabelPID  = "org.talchaos.pid"  // the talchaos process that owns it
	LabelHost = "org.talchaos.host" // that process's host name
)

// node is one node's container.
type node struct {
	name string
	ip   string
	// addrs are every address of the node, ip first (cluster.network's;
	// a partition cuts them all).
	addrs []string
	role  target.Role
	ctr   *testcontainers.DockerContainer
	// cuts serialises setting the node's drop rules: two faults healing
	// at once (two partitions of the same node) each set the rules they
	// read, and the one read first must not land last.
	cuts sync.Mutex
}

// Cluster is a provisioned set of node containers. It implements
// target.Cluster, target.Processes and target.Partitioner.
type Cluster struct {
	sc      *scenario.Scenario
	clock   clock.Clock
	profile sim.Profile
	runID   string
	labels  map[string]string

	docker *testcontainers.DockerClient
	image  string
	env    map[string]string // the node containers' environment (binary.go)
	net    *testcontainers.DockerNetwork
	// gateway is the host's address on the network.
	gateway string
	// hostEnds are the host's addresses on cluster.network's Docker network.
	hostEnds []netip.Addr
	disco    *http.Server
	cfgs     *sim.Configs
	nodes    []*node
	// kube are the Kubernetes binaries the image carries (cluster.kubernetes);
	// kubeLB serves the cluster endpoint on the host's end of the network.
	kube     kubecp.Binaries
	endpoint string
	kubeLB   *sim.KubeEndpoint

	ctx    context.Context //nolint:containedctx // lifetime of the cluster's background starts
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	dropped map[string]map[string]int // node → address → active cuts

	closeOnce sync.Once
	closeErr  error
}

func newCluster(ctx context.Context, sc *scenario.Scenario, opts target.Options, bin string) (_ *Cluster, err error) {
	profile, err := sim.ProfileFor(sc.Talos)
	if err != nil {
		return nil, err
	}

	host, _ := os.Hostname() //nolint:errcheck // an empty name still labels

	c := &Cluster{
		sc: sc, clock: clock.New(Target{}.TimeScale(sc)), profile: profile,
		runID:   fmt.Sprintf("%d-%d", os.Getpid(), rand.Uint32()), //nolint:gosec // a name, not a secret
		dropped: map[string]map[string]int{},
	}
	c.labels = map[string]string{LabelRun: c.runID, LabelPID: strconv.Itoa(os.Getpid()), LabelHost: host}
	c.ctx, c.cancel = context.WithCancel(context.Background())

	if c.docker, err = testcontainers.NewDockerClientWithOpts(ctx); err != nil {
		return nil, fmt.Errorf("docker: %w", err)
	}

	defer func() {
		if err != nil {
			c.Close() //nolint:errcheck
		}
	}()

	if removed, err := Reap(ctx, c.docker); err != nil {
		return nil, fmt.Errorf("removing what killed runs left: %w", err)
	} else if removed > 0 && opts.Logf != nil {
		opts.Logf("removed %d container(s), network(s) and image(s) left by killed talchaos runs", removed)
	}

	if sc.Cluster.Kubernetes {
		if c.kube, err = kubecp.Locate(""); err != nil {
			return nil, fmt.Errorf("cluster.kubernetes: %w", err)
		}
	}

	if err = c.buildImage(ctx, bin); err != nil {
		return nil, err
	}

	names := sc.Cluster.NodeNames()
	ips := map[string]string{}

	var (
		gateway  netip.Addr
		endpoint string
	)

	if sc.Cluster.Network != nil {
		if gateway, err = c.createOperatorNetwork(ctx); err != nil {
			return nil, err
		}

		for name, addrs := range sc.Cluster.NodeAddresses() {
			ips[name] = addrs[0].Addr.String()
		}

		endpoint = "https://" + net.JoinHostPort(sc.Cluster.Network.EndpointAddr().String(), "6443")
	} else {
		prefix, err := c.createNetwork(ctx)
		if err != nil {
			return nil, err
		}

		gateway = prefix.Addr().Next()
		addr := gateway

		for _, name := range names {
			addr = addr.Next()
			ips[name] = addr.String()
		}

		endpoint = fmt.Sprintf("https://%s:6443", gateway)
	}

	c.gateway = gateway.String()
	c.endpoint = endpoint

	if c.cfgs, err = sim.GenerateConfigs(sc, profile, ips, endpoint); err != nil {
		return nil, err
	}

	if c.kube.Hyperkube != "" {
		if err = c.serveKubeEndpoint(ips); err != nil {
			return nil, err
		}
	}

	discovery, err := c.serveDiscovery(gateway, names)
	if err != nil {
		return nil, err
	}

	if err = c.startNodes(ctx, opts.Seed, names, ips, discovery); err != nil {
		return nil, err
	}

	if sc.Cluster.Network != nil {
		if err = c.waitHostEnds(ctx); err != nil {
			return nil, err
		}
	}

	return c, nil
}

// buildImage builds the node image from the repository's Dockerfile and the
// talchaos binary (with its loader and libraries when it is dynamically
// linked: binary.go), labelled as the run's.
func (c *Cluster) buildImage(ctx context.Context, bin string) error {
	bc, err := nodeContext(bin, c.kube)
	if err != nil {
		return err
	}

	c.env = bc.env

	provider, err := testcontainers.NewDockerProvider(testcontainers.WithLogger(quiet))
	if err != nil {
		return fmt.Errorf("docker: %w", err)
	}
	defer provider.Close() //nolint:errcheck

	req := &testcontainers.ContainerRequest{FromDockerfile: testcontainers.FromDockerfile{
		ContextArchive: bytes.NewReader(bc.archive),
		Repo:           "talchaos-node",
		Tag:            c.runID,
		KeepImage:      true,
		BuildOptionsModifier: func(o *client.ImageBuildOptions) {
			o.Labels = maps.Clone(c.labels)
			o.Remove, o.ForceRemove = true, true
		},
	}}

	if c.image, err = provider.BuildImage(ctx, req); err != nil {
		return fmt.Errorf("building the node image: %w", err)
	}

	// The image holds the node binary and, with Kubernetes, the Kubernetes
	// binaries: hundreds of megabytes the daemon has just written (about
	// 870 MB dirty after a build, measured), which the kernel would write
	// back about 30 s later (dirty_expire_centisecs), in the middle of the
	// run, beside the nodes' own syncs (a joining etcd's first WAL). Written
	// back now, before the nodes start, it costs the provisioning a second
	// or three instead (docs/measurements.md "Stop 46"). A remote daemon's
	// disk is not this machine's; the flush is then merely useless.
	syscall.Sync()

	return nil
}

// createNetwork makes the run's bridge network on a free 10.213.N.0/24.
func (c *Cluster) createNetwork(ctx context.Context) (netip.Prefix, error) {
	start := rand.IntN(256) //nolint:gosec // spreading, not secrecy

	var last error

	for i := range 256 {
		prefix := netip.MustParsePrefix(fmt.Sprintf("10.213.%d.0/24", (start+i)%256))

		nw, err := tcnetwork.New(ctx,
			tcnetwork.WithLabels(maps.Clone(c.labels)),
			tcnetwork.WithIPAM(&network.IPAM{Driver: "default", Config: []network.IPAMConfig{{Subnet: prefix, Gateway: prefix.Addr().Next()}}}),
		)
		if err == nil {
			c.net = nw

			return prefix, nil
		}

		if !strings.Contains(err.Error(), "overlap") {
			return netip.Prefix{}, fmt.Errorf("creating the network: %w", err)
		}

		last = err
	}

	return netip.Prefix{}, fmt.Errorf("no free 10.213.N.0/24 for the network: %w", last)
}

// createOperatorNetwork makes the run's bridge network on cluster.network's
// subnets (IPv6 enabled), each with a gateway (the host's address on it) at
// its lowest address no node or endpoint has, and returns the gateway the
// discovery registry listens on (IPv4's when there is one). Another run holding the same subnets is waited for.
func (c *Cluster) createOperatorNetwork(ctx context.Context) (netip.Addr, error) {
	taken := map[netip.Addr]bool{c.sc.Cluster.Network.EndpointAddr(): true}

	for _, addrs := range c.sc.Cluster.NodeAddresses() {
		for _, a := range addrs {
			taken[a.Addr] = true
		}
	}

	var (
		ipam  []network.IPAMConfig
		first netip.Addr
	)

	for _, s := range c.sc.Cluster.Network.Addresses {
		p := netip.MustParsePrefix(s).Masked()

		gw, ok := freeGateway(p, taken)
		if !ok {
			return netip.Addr{}, fmt.Errorf("cluster.network: no address left in %s for the host's end of the Docker network", p)
		}

		// The registry listens on the host's IPv4 end when there is one:
		// an IPv6 address on a new bridge is tentative for a while.
		if !first.IsValid() || gw.Is4() && !first.Is4() {
			first = gw
		}

		ipam = append(ipam, network.IPAMConfig{Subnet: p, Gateway: gw})
		c.hostEnds = append(c.hostEnds, gw)
	}

	opts := []tcnetwork.NetworkCustomizer{
		tcnetwork.WithLabels(maps.Clone(c.labels)),
		tcnetwork.WithIPAM(&network.IPAM{Driver: "default", Config: ipam}),
	}

	// IPv6 only with an IPv6 subnet of the scenario's: enabled without one,
	// Docker takes an IPv6 subnet from its default pools, which an engine
	// may not have ("could not find an available, non-overlapping IPv6
	// address pool among the defaults").
	if slices.ContainsFunc(ipam, func(cfg network.IPAMConfig) bool { return cfg.Subnet.Addr().Is6() }) {
		opts = append(opts, tcnetwork.WithEnableIPv6())
	}

	for {
		nw, err := tcnetwork.New(ctx, opts...)
		if err == nil {
			c.net = nw

			return first, nil
		}

		if !anotherNetworkHolds(err) {
			return netip.Addr{}, fmt.Errorf("creating the network: %w", err)
		}

		// Another run of a scenario with these subnets: its turn first.
		select {
		case <-ctx.Done():
			return netip.Addr{}, fmt.Errorf("waiting for another run's Docker network on %v: %w", c.sc.Cluster.Network.Addresses, context.Cause(ctx))
		case <-time.After(time.Second):
		}
	}
}

// anotherNetworkHolds reports whether Docker refused a network because
// another network has one of its subnets ("Pool overlaps with other one on
// this address space", moby's libnetwork ipam), which another run of a
// scenario with these subnets can hold for a while. Docker's other refusals,
// "could not find an available, non-overlapping IPv6 address pool among the
// defaults" among them, are final.
func anotherNetworkHolds(err error) bool {
	return strings.Contains(err.Error(), "Pool overlaps with other one")
}

// waitHostEnds waits until the host can use its end of the run's network in
// each of cluster.network's subnets. A bridge's IPv6 address stays tentative
// until the bridge has a port (the first container) and duplicate address
// detection is done; until then the host cannot reach a node over IPv6 and
// gRPC's connection backoff would outlast the orchestrator's first call. A
// bind to a tentative address fails with EADDRNOTAVAIL.
func (c *Cluster) waitHostEnds(ctx context.Context) error {
	started := false

	for _, n := range c.nodes {
		if c.sc.Cluster.Nodes[n.name].BootDelay.Duration == 0 {
			started = true
		}
	}

	if !started {
		return nil // no port on the bridge yet: the late nodes' own start waits
	}

	for _, gw := range c.hostEnds {
		deadline := time.Now().Add(30 * time.Second)

		for {
			l, err := net.Listen("tcp", net.JoinHostPort(gw.String(), "0"))
			if err == nil {
				l.Close() //nolint:errcheck

				break
			}

			if !errors.Is(err, syscall.EADDRNOTAVAIL) || time.Now().After(deadline) {
				return fmt.Errorf("the host's end %s of the run's Docker network is not usable: %w", gw, err)
			}

			select {
			case <-ctx.Done():
				return context.Cause(ctx)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}

	return nil
}

// freeGateway is the lowest host address of p no node or endpoint has
// (Docker's address pool for a large IPv6 subnet does not reach its top).
func freeGateway(p netip.Prefix, taken map[netip.Addr]bool) (netip.Addr, bool) {
	for a := p.Addr().Next(); p.Contains(a); a = a.Next() {
		if !taken[a] {
			return a, true
		}
	}

	return netip.Addr{}, false
}

// serveDiscovery runs the cluster's discovery registry on the network's
// gateway, where every container reaches the host.
func (c *Cluster) serveDiscovery(gateway netip.Addr, names []string) (string, error) {
	// An IPv6 address on a bridge just made is tentative until duplicate
	// address detection is done (a second or two).
	var (
		l   net.Listener
		err error
	)

	for deadline := time.Now().Add(10 * time.Second); ; {
		if l, err = net.Listen("tcp", net.JoinHostPort(gateway.String(), "0")); err == nil || time.Now().After(deadline) || !errors.Is(err, syscall.EADDRNOTAVAIL) {
			break
		}

		time.Sleep(100 * time.Millisecond)
	}

	if err != nil {
		return "", fmt.Errorf("discovery registry: %w", err)
	}

	c.disco = &http.Server{Handler: sim.NewDiscoveryServer(names), ReadHeaderTimeout: 5 * time.Second}

	go c.disco.Serve(l) //nolint:errcheck // ends with Close

	return "http://" + l.Addr().String(), nil
}

// startNodes creates every node's container and starts those without a boot
// delay, a few at a time; late ones start in the background.
func (c *Cluster) startNodes(ctx context.Context, seed int64, names []string, ips map[string]string, discovery string) error {
	scData := c.sc.Source
	if len(scData) == 0 {
		var err error
		if scData, err = yaml.Marshal(c.sc); err != nil {
			return err
		}
	}

	bundle, err := yaml.Marshal(c.cfgs.Bundle)
	if err != nil {
		return err
	}

	args := []string{"--scenario", "/scenario.yaml", "--secrets", "/secrets.yaml", "--discovery", discovery, "--seed", strconv.FormatInt(seed, 10),
		"--time-scale", strconv.FormatFloat(c.clock.Scale(), 'g', -1, 64)}
	for _, name := range names {
		args = append(args, "--node", name+"="+ips[name])
	}

	if c.kube.Hyperkube != "" {
		args = append(args, "--kube-dir", kubeDir, "--kube-endpoint", c.endpoint)
	}

	c.nodes = make([]*node, len(names))

	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)

	netAddrs := c.sc.Cluster.NodeAddresses()

	for i, name := range names {
		n := &node{name: name, ip: ips[name], addrs: []string{ips[name]}, role: target.Worker}

		if addrs := netAddrs[name]; addrs != nil {
			n.addrs = nil
			for _, a := range addrs {
				n.addrs = append(n.addrs, a.Addr.String())
			}
		}

		if scenario.IsControlPlane(name) {
			n.role = target.ControlPlane
		}

		c.nodes[i] = n
		delay := c.clock.Wall(c.sc.Cluster.Nodes[name].BootDelay.Duration)

		g.Go(func() error {
			req := testcontainers.ContainerRequest{
				Image:  c.image,
				Name:   fmt.Sprintf("talchaos-%s-%s", c.runID, name),
				Cmd:    append([]string{"--name", name}, args...),
				Labels: maps.Clone(c.labels), // testcontainers adds its own to the map
				Env:    maps.Clone(c.env),
				Files: []testcontainers.ContainerFile{
					{Reader: bytes.NewReader(scData), ContainerFilePath: "/scenario.yaml", FileMode: 0o600},
					{Reader: bytes.NewReader(bundle), ContainerFilePath: "/secrets.yaml", FileMode: 0o600},
				},
				Networks: []string{c.net.Name},
				HostConfigModifier: func(hc *container.HostConfig) {
					hc.CapAdd = append(hc.CapAdd, "NET_ADMIN") // node-net's nftables rules
				},
				EndpointSettingsModifier: func(m map[string]*network.EndpointSettings) {
					if m[c.net.Name] == nil {
						m[c.net.Name] = &network.EndpointSettings{}
					}

					m[c.net.Name].IPAMConfig = endpointIPAM(n.ip, netAddrs[name])
				},
				WaitingFor: wait.ForLog("serving the Talos API").WithStartupTimeout(2 * time.Minute),
			}

			ctr, err := testcontainers.GenericContainer(gctx, testcontainers.GenericContainerRequest{
				ContainerRequest: req, Started: delay == 0, Logger: quiet,
			})
			if ctr != nil {
				n.ctr, _ = ctr.(*testcontainers.DockerContainer)
			}

			if err != nil {
				return fmt.Errorf("node %s: container: %w", name, err)
			}

			if delay > 0 {
				c.wg.Go(func() {
					select {
					case <-c.ctx.Done():
					case <-time.After(delay):
						c.start(c.ctx, n) //nolint:errcheck // the observer sees a node that never came
					}
				})
			}

			return nil
		})
	}

	return g.Wait()
}

// serveKubeEndpoint serves the cluster's Kubernetes endpoint (the
// gateway, port 6443: the configs' cluster.controlPlane.endpoint) on the
// host's end of the run's network with the sim's balancer, over the control
// planes' API servers, which run inside their containers. The engine, a
// user's kubectl and every node's KubePrism reach the API servers through
// it, as through a real cluster's load balancer; a node cut off from the
// host (isolate drops the gateway) loses it as it would lose a VIP.
func (c *Cluster) serveKubeEndpoint(ips map[string]string) error {
	var targets []string

	for _, name := range c.sc.Cluster.NodeNames() {
		if scenario.IsControlPlane(name) {
			targets = append(targets, net.JoinHostPort(ips[name], strconv.Itoa(sim.KubePort)))
		}
	}

	lb, err := sim.ServeKubeEndpoint(net.JoinHostPort(c.gateway, strconv.Itoa(sim.KubePort)), targets)
	if err != nil {
		return err
	}

	c.kubeLB = lb

	return nil
}

// Kubernetes reports whether the cluster runs Kubernetes (cluster.kubernetes).
func (c *Cluster) Kubernetes() bool { return c.kube.Hyperkube != "" }

// endpointIPAM is a node's addresses on the run's network: its one IPv4
// address, or its address in each of cluster.network's subnets (one per
// family: Check).
func endpointIPAM(ip string, addrs []scenario.Address) *network.EndpointIPAMConfig {
	if addrs == nil {
		return &network.EndpointIPAMConfig{IPv4Address: netip.MustParseAddr(ip)}
	}

	cfg := &network.EndpointIPAMConfig{}

	for _, a := range addrs {
		if a.Bits == a.Addr.BitLen() {
			continue // a further host address: the node puts it on lo
		}

		if a.Addr.Is4() {
			cfg.IPv4Address = a.Addr
		} else {
			cfg.IPv6Address = a.Addr
		}
	}

	return cfg
}

// Nodes implements target.Cluster.
func (c *Cluster) Nodes() []target.Node {
	out := make([]target.Node, 0, len(c.nodes))

	for _, n := range c.nodes {
		out = append(out, target.Node{
			Name: n.name, Role: n.role, Address: n.ip, Addresses: n.addrs[1:], Hostname: sim.ConfigHostname(n.name, c.cfgs.Machine[n.name]),
			Endpoint: net.JoinHostPort(n.ip, "50000"),
			Config:   bytes.Clone(c.cfgs.Machine[n.name]),
		})
	}

	return out
}

// Talosconfig implements target.Cluster.
func (c *Cluster) Talosconfig() *clientconfig.Config { return c.cfgs.Talosconfig }

// TimeScale is how much faster than real time the nodes' Talos timers run.
func (c *Cluster) TimeScale() float64 { return c.clock.Scale() }

// Close implements target.Cluster: every container, the network and the image
// go, whatever the run's context says.
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() {
		c.cancel()
		c.wg.Wait()

		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()

		if c.disco != nil {
			c.disco.Close() //nolint:errcheck
		}

		c.kubeLB.Close()

		if c.docker != nil {
			c.closeErr = removeRun(ctx, c.docker, c.runID)
			c.docker.Close() //nolint:errcheck
		}
	})

	return c.closeErr
}

func (c *Cluster) node(name string) (*node, error) {
	for _, n := range c.nodes {
		if n.name == name {
			if n.ctr == nil {
				return nil, fmt.Errorf("node %s has no container", name)
			}

			return n, nil
		}
	}

	return nil, fmt.Errorf("unknown node %q", name)
}

// Memory is each running node container's memory use in bytes, as Docker's
// stats report it (the cgroup's usage less its page cache, as `docker stats`
// shows it).
func (c *Cluster) Memory(ctx context.Context) (map[string]uint64, error) {
	out := map[string]uint64{}

	for _, n := range c.nodes {
		if n.ctr == nil {
			continue
		}

		r, err := c.docker.ContainerStats(ctx, n.ctr.GetContainerID(), client.ContainerStatsOptions{})
		if err != nil {
			return nil, err
		}

		var s container.StatsResponse

		err = json.NewDecoder(r.Body).Decode(&s)
		r.Body.Close() //nolint:errcheck

		if err != nil {
			return nil, err
		}

		use := s.MemoryStats.Usage
		for _, k := range []string{"inactive_file", "total_inactive_file"} {
			if v, ok := s.MemoryStats.Stats[k]; ok && v < use {
				use -= v

				break
			}
		}

		out[n.name] = use
	}

	return out, nil
}
