package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	zlog "github.com/rs/zerolog/log"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"

	"github.com/talchaos/talchaos/harness/clock"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/scratch"
	"github.com/talchaos/talchaos/sim/kubecp"
	"github.com/talchaos/talchaos/sim/netns"
)

// NodeSpec is one simulated node run on its own, as a process (`talchaos
// node`, one per container): the node's own address and real ports, its peers
// known by address, discovery through a registry outside the node (as Talos's
// discovery service is), and a directory that outlives the process, so a
// restarted process boots with its config and replays its etcd WAL.
type NodeSpec struct {
	Scenario *scenario.Scenario
	Seed     int64
	Name     string
	// Nodes is every node of the cluster, this one too: name → address.
	Nodes map[string]string
	// Bundle is the cluster's secrets bundle: etcd PKI and trustd's CA.
	Bundle *secrets.Bundle
	// Dir holds the node's config (STATE), etcd data (EPHEMERAL) and PKI.
	Dir string
	// Discovery is the registry's base URL (see DiscoveryServer).
	Discovery string
	// Log, when set, receives machined's log lines as they are written.
	Log io.Writer
	// Scale, when set, is the time scale instead of the sim's for the
	// scenario (the container target runs slower).
	Scale float64
	// KubeDir is where the Kubernetes binaries are when the scenario runs
	// Kubernetes (cluster.kubernetes); empty: kubecp.Locate's places.
	KubeDir string
	// Endpoint is the cluster's Kubernetes endpoint URL (the configs'
	// cluster.controlPlane.endpoint), which the node's KubePrism forwards
	// to; it is served outside the node (the container target's host).
	Endpoint string
}

// stateFile is where a node process keeps the config its next boot starts
// with (Talos's STATE partition).
const stateFile = "state/config.yaml"

// NewNodeProcess starts the node of spec: in maintenance, or booting with the
// config a previous process of this node persisted.
func NewNodeProcess(ctx context.Context, spec NodeSpec) (_ *Cluster, err error) {
	sc := spec.Scenario

	ip, ok := spec.Nodes[spec.Name]
	if !ok {
		return nil, fmt.Errorf("node %q is not among the cluster's nodes", spec.Name)
	}

	if !slices.Contains(sc.Cluster.NodeNames(), spec.Name) {
		return nil, fmt.Errorf("scenario %s has no node %q", sc.Name, spec.Name)
	}

	profile, err := ProfileFor(sc.Talos)
	if err != nil {
		return nil, err
	}

	scale := Scale(sc)
	if spec.Scale > 0 {
		scale = spec.Scale
	}

	c := &Cluster{
		sc: sc, profile: profile, clock: clock.New(scale), seed: spec.Seed, configs: map[string][]byte{},
		dir: spec.Dir, keepDir: true, bundle: spec.Bundle, peers: spec.Nodes, single: true,
		discovery: &discoveryClient{base: spec.Discovery},
		// cluster.network's addresses: Docker gave this container one per
		// subnet; the further ones it puts on its loopback (addFurther).
		netAddrs: sc.Cluster.NodeAddresses(),
		endpoint: spec.Endpoint,
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())

	defer func() {
		if err != nil {
			c.Close() //nolint:errcheck
		}
	}()

	// Kubernetes runs inside the node as in the sim (kube.go, kubelet.go):
	// the control plane's static pods and the node's KWOK kubelet are
	// processes of this node.
	if sc.Cluster.Kubernetes {
		if spec.Endpoint == "" {
			return nil, errors.New("cluster.kubernetes: the node needs the cluster's Kubernetes endpoint")
		}

		if c.kube, err = kubecp.Locate(spec.KubeDir); err != nil {
			return nil, err
		}
	}

	if err = os.MkdirAll(filepath.Join(spec.Dir, "state"), 0o700); err != nil {
		return nil, err
	}

	quietToxics.Do(func() { zlog.Logger = zerolog.Nop() })

	c.toxi = toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())

	n, err := c.newNode(ip, spec.Name, slices.Index(spec.Scenario.Cluster.NodeNames(), spec.Name))
	if err != nil {
		return nil, err
	}

	c.nodes = []*Node{n}

	if spec.Log != nil {
		n.machined.Tee(spec.Log)
		n.etcdLog.Tee(spec.Log)
	}

	if data, rerr := os.ReadFile(filepath.Join(spec.Dir, stateFile)); rerr == nil {
		if n.cfg, err = configloader.NewFromBytes(data); err != nil {
			return nil, fmt.Errorf("persisted config: %w", err)
		}
	} else if !errors.Is(rerr, os.ErrNotExist) {
		return nil, rerr
	}

	if err = n.startProxies(); err != nil {
		return nil, err
	}

	if err = n.newGate(); err != nil {
		return nil, fmt.Errorf("peer gate: %w", err)
	}

	if err = c.addFurther(n); err != nil {
		return nil, err
	}

	if err = n.startRelays(); err != nil {
		return nil, err
	}

	c.wg.Go(c.runWorkload)
	c.wg.Go(n.register)

	if err = n.boot(); err != nil {
		return nil, fmt.Errorf("boot: %w", err)
	}

	if ctx.Err() != nil {
		return nil, ctx.Err()
	}

	return c, nil
}

// saveState persists the config the next boot starts with, when the node runs
// as a process, and tells discovery; Talos writes STATE before it answers.
func (n *Node) saveState() {
	// Every node's discovery and resources follow a config change.
	n.c.wakeAll()

	if !n.c.single {
		return
	}

	n.mu.Lock()
	next := n.persisted
	if next == nil {
		next = n.cfg
	}
	n.mu.Unlock()

	path := filepath.Join(n.c.dir, stateFile)

	if next == nil {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			n.machined.Printf("failed to wipe STATE: %s", err)
		}
	} else {
		data, err := next.Bytes()
		if err == nil {
			err = scratch.WriteFileAtomic(path, data, 0o600)
		}

		if err != nil {
			n.machined.Printf("failed to save the config to STATE: %s", err)
		}
	}

	select {
	case n.registered <- struct{}{}:
	default:
	}
}

// addFurther puts the node's further addresses (cluster.nodes.*.addresses:
// host addresses, an announced loopback) on its container's loopback and
// routes the other nodes' routed ones through their address of the same
// family, as the operator's routers announce them; an unrouted one has no
// route here.
func (c *Cluster) addFurther(n *Node) error {
	for name, addrs := range c.netAddrs {
		for _, a := range addrs {
			if a.Bits != a.Addr.BitLen() {
				continue // an address in a subnet: Docker's
			}

			if name == n.name {
				if err := netns.AddAddress(a.Addr); err != nil {
					return err
				}

				continue
			}

			if a.Unrouted {
				continue
			}

			for _, via := range addrs {
				if via.Bits != via.Addr.BitLen() && via.Addr.Is4() == a.Addr.Is4() {
					if err := netns.AddRoute(a.Addr, via.Addr); err != nil {
						return fmt.Errorf("routing %s's %s: %w", name, a.Addr, err)
					}

					break
				}
			}
		}
	}

	return nil
}
