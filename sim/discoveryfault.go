package sim

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/config"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/talchaos/talchaos/harness/target"
)

// This file is a node's cluster discovery client as the discovery faults act
// on it: Talos v1.12.6's DiscoveryServiceController
// (internal/app/machined/pkg/controllers/cluster/discovery_service.go)
// running siderolabs/discovery-client v0.1.13 (pkg/client/client.go), and
// the node's view of the cluster made of it: its own affiliate always
// (local_affiliate.go), merged with the discovered ones (affiliate_merge.go)
// into Members (member.go), whose control planes' addresses are the
// endpoints (endpoint.go) etcd.GetEndpoints (internal/pkg/etcd/endpoints.go)
// gives the etcd join and promote loops and the node's etcd API calls.
//
// The client keeps what it last received while it cannot reach the service
// (parseReply clears its list only on a new watch snapshot), and loses it
// when the node boots again (it is in memory); the service keeps the node's
// entry as last pushed until its TTL runs out.

// discoveryTTL is the TTL a node's entry is pushed with
// (discovery_service.go defaultDiscoveryTTL): the service drops an entry
// not refreshed for that long.
const discoveryTTL = 30 * time.Minute

// consoleErrorSuppress is how many error logs of a controller machined's
// console leaves out before it shows them (constants.
// ConsoleLogErrorSuppressThreshold, logging.NewControllerErrorSuppressor):
// the first four "hello failed" never reach the machined log.
const consoleErrorSuppress = 4

// defaultDiscoveryAddr is the address discovery.talos.dev (Talos's default
// service, constants.DefaultDiscoveryServiceEndpoint) resolved to in the
// field's logs (talos #10136): the sim's nodes resolve no names.
const defaultDiscoveryAddr = "172.174.35.21"

// The discovery client's reconnect backoff: cenkalti/backoff v4's
// ExponentialBackOff defaults (NewClient leaves them, MaxElapsedTime 0).
const (
	helloInitialInterval = 500 * time.Millisecond
	helloMultiplier      = 1.5
	helloRandomization   = 0.5
	helloMaxInterval     = time.Minute
)

// nodeDiscovery is the node's discovery client as the faults act on it.
type nodeDiscovery struct {
	mu sync.Mutex
	// blocked counts the discovery-unreachable faults in force.
	blocked int
	// offline: the client has not reached the service since it was cut
	// off; its view (seen) and its entry there (entry) stay as they were.
	offline bool
	// seen are the others' affiliates the client last received, in this
	// boot.
	seen []Affiliate
	// entry is the node's entry as the service keeps it while the node is
	// offline (nil: none), pushed at entryAt.
	entry   *Affiliate
	entryAt time.Time
	// hidden counts, by node address, the discovery-partial faults that
	// have the service leave the node out of its answers to this one.
	hidden map[string]int
	// errs counts DiscoveryServiceController's errors in this boot (the
	// console's suppressor).
	errs int
	// wake ends the hello loop's idle wait (a cut).
	wake chan struct{}
}

// registryEntry is what the service holds of the node: its affiliate as it
// is, or, while it is offline, as it last pushed it until the TTL runs out.
func (n *Node) registryEntry() (Affiliate, bool) {
	d := &n.disco

	d.mu.Lock()
	offline, entry, at := d.offline, d.entry, d.entryAt
	d.mu.Unlock()

	if offline {
		if entry == nil || time.Since(at) >= n.c.clock.Wall(discoveryTTL) {
			return Affiliate{}, false
		}

		return *entry, true
	}

	a := n.affiliate()

	return a, a.Configured
}

// discovered is the node's view of the cluster: its own affiliate (once it
// has a config) and the others' as its client last received them, without
// the ones the service leaves out for it, in the cluster's order.
func (n *Node) discovered() []Affiliate {
	self := n.affiliate()
	others := n.c.affiliates()

	d := &n.disco
	d.mu.Lock()

	if d.offline {
		others = slices.Clone(d.seen)
	} else {
		others = slices.DeleteFunc(others, func(a Affiliate) bool { return a.Address == n.ip })
		d.seen = slices.Clone(others)
	}

	others = slices.DeleteFunc(others, func(a Affiliate) bool { return d.hidden[a.Address] > 0 })
	d.mu.Unlock()

	if !self.Configured {
		return others
	}

	// Its own in its place: after the nodes before it in the cluster.
	at := 0
	for at < len(others) && n.c.before(others[at].Address, n.index) {
		at++
	}

	return slices.Insert(others, at, self)
}

// before reports whether the node with address addr comes before the index
// in the cluster (false for one this process does not run).
func (c *Cluster) before(addr string, index int) bool {
	for _, m := range c.nodes {
		if m.ip == addr {
			return m.index < index
		}
	}

	return false
}

// bootDiscovery starts this boot's client: what it received is gone.
func (n *Node) bootDiscovery() {
	d := &n.disco

	d.mu.Lock()
	defer d.mu.Unlock()

	d.seen = nil
	d.errs = 0
}

// CutDiscovery implements target.Discovery: the node's client stops
// reaching the service until healed, then gets through at its next hello.
func (c *Cluster) CutDiscovery(_ context.Context, node string) (target.Heal, error) {
	n := c.Node(node)
	if n == nil {
		return nil, fmt.Errorf("unknown node %q", node)
	}

	entry, registered := n.registryEntry()
	view := n.discovered()

	d := &n.disco
	d.mu.Lock()
	d.blocked++

	if !d.offline {
		d.offline = true
		d.entry, d.entryAt = nil, time.Now()

		if registered {
			d.entry = &entry
		}

		d.seen = slices.DeleteFunc(view, func(a Affiliate) bool { return a.Address == n.ip })
	}
	d.mu.Unlock()

	select {
	case d.wake <- struct{}{}:
	default:
	}

	return func() error {
		d.mu.Lock()
		d.blocked--
		d.mu.Unlock()

		return nil
	}, nil
}

// HideAffiliates implements target.Discovery: the service leaves the hidden
// nodes out of what it answers node until healed. The node itself is never
// hidden from itself (its local affiliate).
func (c *Cluster) HideAffiliates(_ context.Context, node string, hidden []string) (target.Heal, error) {
	n := c.Node(node)
	if n == nil {
		return nil, fmt.Errorf("unknown node %q", node)
	}

	var addrs []string

	for _, h := range hidden {
		m := c.Node(h)
		if m == nil {
			return nil, fmt.Errorf("unknown node %q", h)
		}

		if m != n {
			addrs = append(addrs, m.ip)
		}
	}

	d := &n.disco
	d.mu.Lock()

	if d.hidden == nil {
		d.hidden = map[string]int{}
	}

	for _, a := range addrs {
		d.hidden[a]++
	}
	d.mu.Unlock()

	n.wake()

	return func() error {
		d.mu.Lock()
		for _, a := range addrs {
			d.hidden[a]--
		}
		d.mu.Unlock()

		n.wake()

		return nil
	}, nil
}

// runDiscovery is the client's reconnect loop (client.Run) for the boot,
// while the node is offline: a hello at each backoff interval (Talos time)
// fails while the node is cut off, logged as DiscoveryServiceController
// logs it; the first one after the heal gets through, and the client pushes
// the node's entry and receives the others again.
func (n *Node) runDiscovery(ctx context.Context) {
	d := &n.disco
	r := n.rng("discovery")
	interval := helloInitialInterval

	for {
		d.mu.Lock()
		offline := d.offline
		d.mu.Unlock()

		if !offline {
			interval = helloInitialInterval

			select {
			case <-ctx.Done():
				return
			case <-d.wake:
			}

			continue
		}

		// backoff.ExponentialBackOff.NextBackOff: the interval randomised by
		// ±50 %, then grown by half up to a minute.
		n.mu.Lock()
		wait := time.Duration(float64(interval) * (1 - helloRandomization + 2*helloRandomization*r.Float64()))
		n.mu.Unlock()

		interval = min(time.Duration(float64(interval)*helloMultiplier), helloMaxInterval)

		if !n.sleep(ctx, n.c.clock.Wall(wait)) {
			return
		}

		endpoint, on := discoveryEndpoint(n.Config())
		if !on {
			// No client runs without the service registry in the config: it
			// starts with one, from its first interval.
			interval = helloInitialInterval

			continue
		}

		d.mu.Lock()

		if d.blocked == 0 {
			d.offline, d.entry = false, nil
			d.mu.Unlock()
			n.c.wakeAll()

			continue
		}

		d.errs++
		show := d.errs > consoleErrorSuppress
		d.mu.Unlock()

		if show {
			n.machined.Printf("hello failed {\"component\": \"controller-runtime\", \"controller\": \"cluster.DiscoveryServiceController\", \"error\": %q, \"endpoint\": %q}",
				helloError(endpoint).Error(), endpoint)
		}
	}
}

// discoveryEndpoint is the service's host:port as the node's config names it
// (cluster.ConfigController: the URL's host, port 443 unless given, 80 for
// http), and whether the node runs a client (discovery and its service
// registry on).
func discoveryEndpoint(cfg config.Provider) (string, bool) {
	if cfg == nil || cfg.Cluster() == nil {
		return "", false
	}

	disco := cfg.Cluster().Discovery()
	if disco == nil || !disco.Enabled() || !disco.Registries().Service().Enabled() {
		return "", false
	}

	u, err := url.ParseRequestURI(disco.Registries().Service().Endpoint())
	if err != nil {
		return "", false
	}

	port := u.Port()
	if port == "" {
		port = "443"
		if u.Scheme == "http" {
			port = "80"
		}
	}

	return net.JoinHostPort(u.Hostname(), port), true
}

// helloError is how a hello fails when the node has no route to the
// service: the dial fails at once (EHOSTUNREACH) and gRPC fails the call
// with the dial's error, as talos #10136's node logged it.
func helloError(endpoint string) error {
	host, port, _ := net.SplitHostPort(endpoint)

	addr := host
	if net.ParseIP(host) == nil {
		addr = defaultDiscoveryAddr
	}

	p, _ := strconv.Atoi(port)
	dial := &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.ParseIP(addr), Port: p}, Err: os.NewSyscallError("connect", syscall.EHOSTUNREACH)}

	return status.Errorf(codes.Unavailable, "connection error: desc = %q", "transport: Error while dialing: "+dial.Error())
}
