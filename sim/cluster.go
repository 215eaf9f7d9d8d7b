// Package sim is the in-process target: per node a real embedded etcd member, a
// fake Talos API and toxiproxy proxies in front of its ports, each node on its own
// loopback address and the real ports. Talos timers follow the scenario's
// behaviour profile divided by its time scale.
package sim

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	zlog "github.com/rs/zerolog/log"
	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/configpatcher"
	"github.com/siderolabs/talos/pkg/machinery/config/generate"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	"github.com/siderolabs/talos/pkg/machinery/config/machine"
	"github.com/siderolabs/talos/pkg/machinery/resources/k8s"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/talchaos/talchaos/fakes/talosapi"
	"github.com/talchaos/talchaos/harness/clock"
	"github.com/talchaos/talchaos/harness/netfault"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/scratch"
	"github.com/talchaos/talchaos/harness/target"
	"github.com/talchaos/talchaos/sim/kubecp"
)

// minTimeout keeps scaled client deadlines above what a loaded CI machine needs
// for a TLS round trip on loopback.
const minTimeout = 150 * time.Millisecond

// KubernetesVersion is what the generated configs name: the release the
// simulated control plane runs.
var KubernetesVersion = strings.TrimPrefix(kubecp.Version, "v")

var quietToxics sync.Once

// Cluster is a running set of simulated nodes. It implements target.Cluster.
type Cluster struct {
	ctx    context.Context //nolint:containedctx // lifetime of the cluster
	cancel context.CancelFunc
	wg     sync.WaitGroup

	sc      *scenario.Scenario
	profile Profile
	clock   clock.Clock
	seed    int64
	block   int
	claim   net.Listener // holds the loopback block for this cluster
	dir     string
	toxi    *toxiproxy.ApiServer
	// sanMu serialises updateSANGates (lateaddr.go).
	sanMu sync.Mutex
	// registry is what the image registry the nodes pull from lacks
	// (registry.go).
	registry registry

	bundle      *secrets.Bundle
	endpoint    string // the configs' control-plane endpoint
	talosconfig *clientconfig.Config
	configs     map[string][]byte
	nodes       []*Node

	net netState

	// netAddrs are the nodes' addresses under cluster.network (netaddr.go);
	// netRelease gives them back to the process's other clusters.
	netAddrs   map[string][]scenario.Address
	netRelease func()
	// vip is the shared IP the control planes' configs give (vip.go).
	vip sharedIP

	// kube are the Kubernetes binaries when the scenario runs Kubernetes
	// (kube.go); kubeLB balances the control-plane endpoint.
	kube   kubecp.Binaries
	kubeLB *kubeBalancer

	// A node run as a process (NewNodeProcess): its one node is nodes[0], the
	// others are peers known by address; discovery is a registry outside it;
	// dir outlives the process.
	single    bool
	peers     map[string]string
	discovery *discoveryClient
	keepDir   bool

	// diskMu guards diskReleases, the slow disks (slowdisk.go) the cluster
	// lets go of when it closes.
	diskMu       sync.Mutex
	diskReleases []func()

	closeOnce sync.Once
	closeErr  error
}

// NewCluster provisions the scenario's nodes, in maintenance, and boots them.
func NewCluster(ctx context.Context, sc *scenario.Scenario, seed int64) (*Cluster, error) {
	return NewClusterWith(ctx, sc, seed, Options{})
}

// Options place a cluster.
type Options struct {
	// Block, when set, is the loopback block the nodes take (127.0.Block.0/24,
	// nodes from .2): the same addresses every time, for scripts that outlive
	// one `talchaos up`. Zero picks a free block.
	Block int
	// KubeDir is where the Kubernetes binaries are (cluster.kubernetes);
	// empty: kubecp.Locate's places.
	KubeDir string
}

// NewClusterWith is NewCluster with options.
func NewClusterWith(ctx context.Context, sc *scenario.Scenario, seed int64, opts Options) (_ *Cluster, err error) {
	profile, err := ProfileFor(sc.Talos)
	if err != nil {
		return nil, err
	}

	scale := Scale(sc)

	c := &Cluster{sc: sc, profile: profile, clock: clock.New(scale), seed: seed, configs: map[string][]byte{}}
	c.ctx, c.cancel = context.WithCancel(context.Background())

	defer func() {
		if err != nil {
			c.Close() //nolint:errcheck
		}
	}()

	if sc.Cluster.Kubernetes {
		if c.kube, err = kubecp.Locate(opts.KubeDir); err != nil {
			return nil, err
		}
	}

	if c.block, c.claim, err = claimBlock(opts.Block); err != nil {
		return nil, err
	}

	if sc.Cluster.Network != nil {
		if err = c.setUpNetwork(ctx); err != nil {
			return nil, err
		}
	}

	if c.kube.Hyperkube != "" {
		if err = addHostAddrs(c.block, len(sc.Cluster.NodeNames())); err != nil {
			return nil, err
		}
	}

	// Marked as this run's (0700: it holds the cluster's keys), so that a run
	// started after this one was killed removes it.
	if c.dir, err = scratch.MkdirTemp("talchaos-sim-"); err != nil {
		return nil, err
	}

	// toxiproxy's toxics log through zerolog's global logger at trace level,
	// straight to stderr; the sim has no use for those lines.
	quietToxics.Do(func() { zlog.Logger = zerolog.Nop() })

	c.toxi = toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())

	if err = c.generateConfigs(); err != nil {
		return nil, err
	}

	names := sc.Cluster.NodeNames()
	for i, name := range names {
		n, err := c.newNode(c.nodeIP(i), name, i)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", name, err)
		}

		c.nodes = append(c.nodes, n)
	}

	for _, n := range c.nodes {
		if err = n.startProxies(); err != nil {
			return nil, fmt.Errorf("node %s: %w", n.name, err)
		}

		if err = n.newGate(); err != nil {
			return nil, fmt.Errorf("node %s: peer gate: %w", n.name, err)
		}

		if err = n.startRelays(); err != nil {
			return nil, fmt.Errorf("node %s: %w", n.name, err)
		}
	}

	if c.kube.Hyperkube != "" {
		if err = c.startKubeBalancer(); err != nil {
			return nil, err
		}
	}

	c.wg.Go(c.runWorkload)

	// Nodes without a boot delay are up (API listening) when provisioning
	// returns, as lab VMs are when a bootstrap procedure starts; late ones boot
	// in the background.
	for _, n := range c.nodes {
		delay := c.clock.Wall(n.override.BootDelay.Duration)
		if delay == 0 {
			if err = n.boot(); err != nil {
				return nil, fmt.Errorf("node %s: boot: %w", n.name, err)
			}

			continue
		}

		c.wg.Go(func() {
			if !n.sleep(c.ctx, delay) {
				return
			}

			n.powerOn()
		})
	}

	if ctx.Err() != nil {
		return nil, ctx.Err()
	}

	return c, nil
}

// listenClaim takes a block's claim: a listener on its .1 address, Talos
// API port. It fails while another cluster holds the block.
func listenClaim(block int) (net.Listener, error) {
	return net.Listen("tcp", fmt.Sprintf("127.0.%d.1:%d", block, apiPort))
}

// claimBlock picks a free 127.0.<block>.0/24 for this cluster and holds it by
// listening on its .1 address on the Talos API port, so parallel runs (other
// test processes too) never share addresses.
func claimBlock(want int) (int, net.Listener, error) {
	if want != 0 {
		l, err := listenClaim(want)
		if err != nil {
			return 0, nil, fmt.Errorf("127.0.%d.0/24 is in use (another talchaos cluster holds it?): %w", want, err)
		}

		return want, l, nil
	}

	start := 10 + rand.IntN(230) //nolint:gosec // spreading, not secrecy

	for i := range 230 {
		block := 10 + (start-10+i)%230

		l, err := listenClaim(block)
		if err == nil {
			return block, l, nil
		}
	}

	return 0, nil, errors.New("no free loopback block 127.0.10-239.0/24")
}

func (c *Cluster) nodeIP(i int) string {
	if c.netAddrs != nil {
		return c.netAddrs[c.sc.Cluster.NodeNames()[i]][0].Addr.String()
	}

	return fmt.Sprintf("%s.%d.%d", c.hostPrefix(), c.block, i+2)
}

// hostPrefix is the first two octets of the cluster's addresses: loopback,
// or with Kubernetes, addresses it accepts (hostaddr.go).
func (c *Cluster) hostPrefix() string {
	if c.kube.Hyperkube != "" {
		return hostAddrPrefix
	}

	return "127.0"
}

// generateConfigs makes the cluster's secrets bundle, machine configs and
// talosconfig for its loopback addresses.
func (c *Cluster) generateConfigs() error {
	ips := map[string]string{}
	for i, name := range c.sc.Cluster.NodeNames() {
		ips[name] = c.nodeIP(i)
	}

	c.endpoint = fmt.Sprintf("https://%s.%d.1:%d", c.hostPrefix(), c.block, kubePort)
	if n := c.sc.Cluster.Network; n != nil {
		c.endpoint = "https://" + net.JoinHostPort(n.EndpointAddr().String(), strconv.Itoa(kubePort))
	}

	cfgs, err := GenerateConfigs(c.sc, c.profile, ips, c.endpoint)
	if err != nil {
		return err
	}

	c.bundle, c.configs, c.talosconfig = cfgs.Bundle, cfgs.Machine, cfgs.Talosconfig

	return nil
}

// Configs is what a cluster's nodes and clients are configured with.
type Configs struct {
	Bundle      *secrets.Bundle
	Machine     map[string][]byte // machine config by node name
	Talosconfig *clientconfig.Config
}

// GenerateConfigs makes the secrets bundle, one machine config per node (with
// its hostname and the scenario's patches) and the talosconfig, all with the
// machinery, for the profile's version contract. ips holds every node's
// address by name; endpoint is the cluster's Kubernetes endpoint URL.
func GenerateConfigs(sc *scenario.Scenario, profile Profile, ips map[string]string, endpoint string) (*Configs, error) {
	contract, err := config.ParseContractFromVersion(string(profile.Name))
	if err != nil {
		contract = config.TalosVersionCurrent
	}

	out := &Configs{Machine: map[string][]byte{}}

	if out.Bundle, err = NewSecretsBundle(contract); err != nil {
		return nil, err
	}

	var cpIPs []string

	names := sc.Cluster.NodeNames()
	for _, name := range names {
		if scenario.IsControlPlane(name) {
			cpIPs = append(cpIPs, ips[name])
		}
	}

	input, err := generate.NewInput("talchaos-"+sc.Name, endpoint, KubernetesVersion,
		generate.WithVersionContract(contract),
		generate.WithSecretsBundle(out.Bundle),
		generate.WithEndpointList(cpIPs),
		generate.WithInstallDisk("/dev/sda"),
	)
	if err != nil {
		return nil, err
	}

	for _, name := range names {
		typ := machine.TypeWorker
		if scenario.IsControlPlane(name) {
			typ = machine.TypeControlPlane
		}

		cfg, err := input.Config(typ)
		if err != nil {
			return nil, err
		}

		hostname, err := configpatcher.LoadPatch(fmt.Appendf(nil, "apiVersion: v1alpha1\nkind: HostnameConfig\nauto: off\nhostname: %s\n", name))
		if err != nil {
			return nil, err
		}

		cfgOut, err := configpatcher.Apply(configpatcher.WithConfig(cfg), []configpatcher.Patch{hostname})
		if err != nil {
			return nil, err
		}

		// One patch at a time, so that a patch that does not load or apply
		// is named by its field (and `run --plan` finds it: CheckPatches).
		for i, p := range sc.Cluster.ConfigPatches {
			if len(p.Nodes) > 0 && !slices.Contains(p.Nodes, name) {
				continue
			}

			field := fmt.Sprintf("cluster.configPatches[%d].patch", i)

			patch, err := configpatcher.LoadPatch([]byte(p.Patch))
			if err != nil {
				return nil, sc.Errorf(field, "%s", err)
			}

			if cfgOut, err = configpatcher.Apply(cfgOut, []configpatcher.Patch{patch}); err != nil {
				return nil, sc.Errorf(field, "does not apply to %s's config: %s", name, err)
			}
		}

		if out.Machine[name], err = cfgOut.Bytes(); err != nil {
			return nil, err
		}
	}

	if out.Talosconfig, err = input.Talosconfig(); err != nil {
		return nil, err
	}

	return out, nil
}

func (c *Cluster) newNode(ip, name string, index int) (*Node, error) {
	n := &Node{
		c:        c,
		name:     name,
		index:    index,
		ip:       ip,
		addrs:    c.nodeAddresses(name, ip),
		role:     target.Worker,
		override: c.sc.Cluster.Nodes[name],
		dir:      filepath.Join(c.dir, name),
		machined: talosapi.NewLogBuffer(4096).Prefixed("[talos] "),
		etcdLog:  talosapi.NewLogBuffer(4096),
		seed:     uint64(c.seed),
		bootCtx:  c.ctx,

		registered: make(chan struct{}, 1),
		resync:     make(chan struct{}, 1),
		disco:      nodeDiscovery{wake: make(chan struct{}, 1)},
	}
	n.events = talosapi.NewEventLog(n.Now)

	if n.override.EtcdImagePull.Duration == 0 {
		n.override.EtcdImagePull.Duration = scenario.DefaultEtcdImagePull
	}

	if scenario.IsControlPlane(name) {
		n.role = target.ControlPlane
	}

	n.dataDir = filepath.Join(n.dir, "etcd")

	var err error

	n.late.certAddrs = n.certAddresses()
	if n.pki, err = writeEtcdPKI(filepath.Join(n.dir, "pki"), c.bundle.Certs.Etcd, name, n.late.certAddrs, time.Now()); err != nil {
		return nil, err
	}

	if n.tlsConf, err = (transport.TLSInfo{CertFile: n.pki.AdminCert, KeyFile: n.pki.AdminKey, TrustedCAFile: n.pki.CACert}).ClientConfig(); err != nil {
		return nil, err
	}

	n.tlsConf.MinVersion = tls.VersionTLS12
	// The members speak TLS 1.2 only (embedConfig): a client offering 1.3
	// would compute its key shares for nothing on every handshake.
	n.tlsConf.MaxVersion = tls.VersionTLS12
	// Talos makes an etcd client for every call (the API's, the health
	// check's, the join's): shared by them all, a session cache lets most
	// handshakes resume instead of verifying certificates and exchanging
	// keys again, which was the sim's largest CPU cost. Nothing a client
	// sees changes.
	n.tlsConf.ClientSessionCache = tls.NewLRUClientSessionCache(64)

	if n.resources, err = talosapi.NewResources(c.ctx); err != nil {
		return nil, err
	}

	n.api, err = talosapi.New(talosapi.Options{
		Backend: n,
		Profile: c.profile.Name,
		Listen:  net.JoinHostPort(n.ip, strconv.Itoa(backendAPIPort)),
		Version: c.profile.Version,
		Router:  c,
		// trustd on the control planes signs workers' API certificates with the OS CA.
		TrustdCA: c.bundle.Certs.OS,
		Wall:     c.clock.Wall,
	})
	if err != nil {
		return nil, err
	}

	n.api.SetHook(n.apiHook)

	return n, nil
}

// startProxies puts toxiproxy in front of the node's three ports, and of its
// API server when it runs one.
func (n *Node) startProxies() error {
	n.proxies = map[target.Port]*netfault.Proxy{}

	type route struct{ listen, upstream string }

	at := func(host string, port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }

	routes := map[target.Port]route{
		target.PortTalosAPI:   {at(n.ip, apiPort), at(n.ip, backendAPIPort)},
		target.PortEtcdClient: {at(n.ip, etcdClientPort), at(n.ip, backendClient)},
		target.PortEtcdPeer:   {at(n.ip, etcdPeerPort), at(n.peerBackendHost(), backendPeerPort)},
	}
	if n.kubeEnabled() {
		routes[portKubeAPIServer] = route{at(n.ip, kubePort), at(n.loopbackTwin(), kubePort)}
	}

	if n.kubeletEnabled() {
		u, err := url.Parse(n.c.endpoint)
		if err != nil {
			return err
		}

		routes[portKubePrism] = route{at(n.loopbackTwin(), kubePrismPort), u.Host}
	}

	for port, r := range routes {
		p, err := netfault.StartProxy(n.c.toxi, n.name+"-"+string(port), r.listen, r.upstream)
		if err != nil {
			return fmt.Errorf("proxy %s: %w", port, err)
		}

		// A real node's port 6443 refuses connections while its API server
		// does not listen (the field's "dial tcp …:6443: connect: connection
		// refused"): the proxy in front of it listens only while it does.
		if port == portKubeAPIServer {
			p.FollowUpstream()
		}

		n.proxies[port] = p
	}

	return nil
}

// Resolve implements talosapi.Router: nodes are addressed by IP or hostname.
func (c *Cluster) Resolve(t string) (string, bool, bool) {
	for _, n := range c.nodes {
		if n.hasAddress(t) || n.name == t {
			return net.JoinHostPort(n.ip, strconv.Itoa(apiPort)), false, true
		}
	}

	for name, ip := range c.peers {
		if ip == t || name == t || slices.ContainsFunc(c.netAddrs[name], func(a scenario.Address) bool { return a.Addr.String() == t }) {
			return net.JoinHostPort(ip, strconv.Itoa(apiPort)), false, true
		}
	}

	return "", false, false
}

// discoveredEndpoints is etcd.GetEndpoints as the node's discovery makes
// it (internal/pkg/etcd/endpoints.go): every address of every control plane
// it knows of (discovered), itself included, on the etcd client port. Nodes
// stay listed while down, as discovery entries do. With none:
// "no controlplane endpoints discovered yet".
//
// The order is Talos's: GetEndpoints merges the k8s.Endpoint resources
// into one k8s.EndpointList, sorted by address (machinery's Merge, used
// here), whatever order the members were discovered in. The promote loop
// walks the list in that order, so it decides which endpoint a joiner asks
// first: itself, or the leader while its learner is still starting.
func (n *Node) discoveredEndpoints() ([]string, error) { return etcdEndpoints(n.discovered()) }

// etcdEndpoints is GetEndpoints over the affiliates the node knows of.
func etcdEndpoints(affiliates []Affiliate) ([]string, error) {
	var list k8s.EndpointList

	for _, a := range affiliates {
		// k8s.EndpointController: every address of every control-plane
		// member.
		if !a.ControlPlane {
			continue
		}

		ep := k8s.NewEndpoint(k8s.ControlPlaneNamespaceName, a.Address)

		for _, addr := range a.published() {
			if ip, err := netip.ParseAddr(addr); err == nil {
				ep.TypedSpec().Addresses = append(ep.TypedSpec().Addresses, ip)
			} else {
				ep.TypedSpec().Hosts = append(ep.TypedSpec().Hosts, addr)
			}
		}

		list = list.Merge(ep)
	}

	if list.IsEmpty() {
		return nil, errors.New("no controlplane endpoints discovered yet")
	}

	out := list.Strings()
	for i := range out {
		out[i] = net.JoinHostPort(out[i], strconv.Itoa(etcdClientPort))
	}

	return out, nil
}

// timeout is a Talos-time deadline in wall time with a floor, for client
// deadlines.
func (c *Cluster) timeout(talos time.Duration) time.Duration {
	return c.clock.WallAtLeast(talos, minTimeout)
}

// etcdOpFloor bounds from below the scaled deadlines of calls that wait for
// etcd to commit (a join attempt's MemberAddAsLearner, the health check's
// linearizable read). etcd runs at real speed: a Talos deadline of 30 s scaled
// to half a second would expire on a loaded machine after the change was
// applied, leaving stale learners and failed health checks real nodes never
// see. A join attempt has its own, higher (norace.go, race.go).
const etcdOpFloor = 2 * time.Second

// etcdTimeout is a Talos-time deadline in wall time with the etcdOpFloor.
func (c *Cluster) etcdTimeout(talos time.Duration) time.Duration {
	return c.clock.WallAtLeast(talos, etcdOpFloor)
}

// Nodes implements target.Cluster.
func (c *Cluster) Nodes() []target.Node {
	out := make([]target.Node, 0, len(c.nodes))

	for _, n := range c.nodes {
		out = append(out, target.Node{
			Name:      n.name,
			Role:      n.role,
			Address:   n.ip,
			Addresses: n.Addresses()[1:],
			Hostname:  ConfigHostname(n.name, c.configs[n.name]),
			Endpoint:  net.JoinHostPort(n.ip, strconv.Itoa(apiPort)),
			Config:    slices.Clone(c.configs[n.name]),
		})
	}

	return out
}

// Talosconfig implements target.Cluster.
func (c *Cluster) Talosconfig() *clientconfig.Config { return c.talosconfig }

// TimeScale is how much faster than real time the nodes' Talos timers run.
func (c *Cluster) TimeScale() float64 { return c.clock.Scale() }

// Dir is the cluster's scratch directory (data dirs, PKI), removed by Close.
func (c *Cluster) Dir() string { return c.dir }

// Bundle is the cluster's secrets bundle.
func (c *Cluster) Bundle() *secrets.Bundle { return c.bundle }

// Node returns the simulated node by name (for the sim's own injector and tests).
func (c *Cluster) Node(name string) *Node {
	for _, n := range c.nodes {
		if n.name == name {
			return n
		}
	}

	return nil
}

// Close stops every node, proxy and goroutine and removes the temp dir.
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() {
		// A sync still waiting on a slow disk runs now: etcd stops at once.
		c.diskMu.Lock()
		for _, release := range c.diskReleases {
			release()
		}
		c.diskMu.Unlock()

		c.cancel()
		c.wg.Wait() // boots and reboots in flight see the cancelled context and end
		c.kubeLB.close()

		for _, n := range c.nodes {
			n.shutdown()
		}

		c.vip.mu.Lock()
		c.dropVIPLocked()
		c.vip.mu.Unlock()

		for _, n := range c.nodes {
			for _, p := range n.relays {
				p.Stop()
			}

			for _, p := range n.proxies {
				p.Stop()
			}

			if n.gate != nil {
				n.gate.Close()
			}

			n.closeSANGates()
		}

		if c.kube.Hyperkube != "" && c.claim != nil {
			removeHostAddrs(c.block)
		}

		c.tearDownNetwork()

		if c.claim != nil {
			c.claim.Close() //nolint:errcheck
		}

		if c.dir != "" && !c.keepDir {
			c.closeErr = os.RemoveAll(c.dir)
		}
	})

	return c.closeErr
}

// EtcdClient is an etcd client to a node's public etcd client port (through its
// proxy, so network faults apply), with the cluster's etcd admin certificate.
func (c *Cluster) EtcdClient(ctx context.Context, node string) (*clientv3.Client, error) {
	n := c.Node(node)
	if n == nil {
		return nil, fmt.Errorf("unknown node %q", node)
	}

	return clientv3.New(clientv3.Config{
		Endpoints:   []string{net.JoinHostPort(n.ip, strconv.Itoa(etcdClientPort))},
		DialTimeout: 2 * time.Second,
		Context:     ctx,
		TLS:         n.tlsConf.Clone(),
		Logger:      zap.NewNop(),
	})
}
