package sim

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/talchaos/talchaos/harness/netfault"
	"github.com/talchaos/talchaos/harness/sharedip"
	"github.com/talchaos/talchaos/harness/target"
	"github.com/talchaos/talchaos/sim/netns"
)

// A shared (virtual) IP, as Talos's VIP operator runs it
// (controllers/network/operator/vip.go): every control plane whose config
// gives one campaigns for it in an etcd election (key
// "talos:v1:vip:election:<ip>", value its hostname) once its etcd service
// is Running and healthy; the winner takes the address on its link ("enabled
// shared IP") and keeps it while its session lives, its etcd runs and no one
// else leads; a clean stop resigns, a power cut leaves the session's lease to
// expire (concurrency.NewSession's default TTL, 60 s, scaled with the run). A
// campaign that fails is tried again after a second. So the VIP follows etcd:
// before the cluster is bootstrapped nobody holds it, and a control plane
// whose etcd is not healthy cannot take it.
//
// In the sim the holder's Talos API (and its kube-apiserver, with
// Kubernetes) answer on the VIP through relays into its proxies; while no one
// holds it, the address is routed nowhere ("no route to host", as an address
// no host answers ARP for). Only with cluster.network: the run's namespace is
// where the address can come and go. A node process in a container (the
// container target) puts the address on the config's link in its own
// namespace and announces it with a gratuitous ARP, as Talos does, so the
// other containers and the host find it on the Docker network; unheld, no
// one answers ARP for it there.

const (
	// vipSessionTTL is concurrency.NewSession's default lease TTL (Talos
	// passes none); vipTTLFloor the least the sim scales it to (etcd runs
	// at real speed: a lease of a second would lapse on a loaded machine).
	vipSessionTTL = 60 * time.Second
	vipTTLFloor   = 3 * time.Second
	// vipRetry is campaignRetryInterval.
	vipRetry = time.Second
)

// sharedIP is the cluster's one shared IP and who holds it.
type sharedIP struct {
	mu     sync.Mutex
	addr   netip.Addr
	link   string // where a node process puts it (the config's link)
	holder *Node
	relays []*netfault.Proxy
}

// vipHeld is the shared IP the node holds, if it does.
func (n *Node) vipHeld() (netip.Addr, bool) {
	if n.c == nil {
		return netip.Addr{}, false
	}

	v := &n.c.vip

	v.mu.Lock()
	defer v.mu.Unlock()

	return v.addr, v.holder == n
}

// startVIP runs the node's campaign for a shared IP for the boot; stopVIP
// ends it and waits for it.
func (n *Node) startVIP(boot context.Context) {
	ctx, cancel := context.WithCancel(boot)
	done := make(chan struct{})

	n.mu.Lock()
	n.stopVIP = func() { cancel(); <-done }
	n.mu.Unlock()

	n.goBoot(func() {
		defer close(done)

		n.runVIP(ctx)
	})
}

// runVIP campaigns for the config's shared IP for as long as the boot
// lasts, as the VIP operator does.
func (n *Node) runVIP(ctx context.Context) {
	// Served in the run's own namespace (the sim with cluster.network), or
	// a node process's container's.
	ip, link, ok := sharedip.Of(n.Config())
	if !ok || n.c.netAddrs == nil {
		return
	}

	for {
		if err := n.campaignVIP(ctx, ip, link); err != nil && ctx.Err() == nil {
			n.machined.Printf("campaign failure {\"component\": \"controller-runtime\", \"controller\": \"network.OperatorSpecController\", \"operator\": \"vip\", \"error\": %q, \"link\": %q, \"ip\": %q}",
				err.Error(), link, ip)
		}

		if !n.sleep(ctx, n.c.clock.WallAtLeast(vipRetry, 50*time.Millisecond)) {
			return
		}
	}
}

// etcdHealthy reports whether the node's etcd service is Running and
// healthy.
func (n *Node) etcdHealthy() bool {
	n.mu.Lock()
	run := n.etcdRun
	n.mu.Unlock()

	if run == nil {
		return false
	}

	state, healthy := run.svc.status()

	return state == stateRunning && healthy
}

// campaignVIP is one campaign: wait for a healthy etcd, win the election,
// hold the address until the session, the etcd service or the leadership
// ends.
func (n *Node) campaignVIP(ctx context.Context, ip netip.Addr, link string) error {
	for !n.etcdHealthy() {
		if !n.sleep(ctx, 100*time.Millisecond) {
			return ctx.Err()
		}
	}

	ec, err := n.newEtcdClient(ctx, []string{n.EtcdClientEndpoint()})
	if err != nil {
		return fmt.Errorf("failed to create local etcd client: %w", err)
	}
	defer ec.Close() //nolint:errcheck

	ttl := int(n.c.clock.WallAtLeast(vipSessionTTL, vipTTLFloor).Round(time.Second) / time.Second)

	sess, err := concurrency.NewSession(ec, concurrency.WithTTL(ttl), concurrency.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("failed to create concurrency session: %w", err)
	}

	// A clean stop revokes the session's lease; a power cut leaves it to
	// expire.
	defer func() {
		if n.powerCut.Load() {
			sess.Orphan()
		} else {
			sess.Close() //nolint:errcheck
		}
	}()

	key := "talos:v1:vip:election:" + ip.String()
	hostname := n.Hostname()
	election := concurrency.NewElection(sess, key)

	if leader, err := election.Leader(ctx); err == nil && string(leader.Kvs[0].Value) == hostname {
		n.machined.Printf("resigning from previous election")

		resumed := concurrency.ResumeElection(sess, key, string(leader.Kvs[0].Key), leader.Kvs[0].CreateRevision)
		if err := resumed.Resign(ctx); err != nil {
			return fmt.Errorf("failed resigning from previous elections: %w", err)
		}
	} else if err != nil && err != concurrency.ErrElectionNoLeader { //nolint:errorlint // the package's sentinel, returned as is
		return fmt.Errorf("failed getting current leader: %w", err)
	}

	campaignCtx, stop := context.WithCancel(ctx)
	defer stop()

	won := make(chan error, 1)
	go func() { won <- election.Campaign(campaignCtx, hostname) }()

	for waiting := true; waiting; {
		select {
		case err := <-won:
			if err != nil {
				return fmt.Errorf("failed to conduct campaign: %w", err)
			}

			waiting = false
		case <-sess.Done():
			return nil
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
			if !n.etcdHealthy() && !n.etcdRunning() {
				return nil
			}
		}
	}

	defer func() {
		if n.powerCut.Load() {
			return
		}

		resignCtx, cancel := context.WithTimeout(context.Background(), n.c.clock.WallAtLeast(10*time.Second, time.Second))
		defer cancel()

		election.Resign(resignCtx) //nolint:errcheck
	}()

	if err := n.c.holdVIP(n, ip, link); err != nil {
		return err
	}

	fields := fmt.Sprintf("{\"component\": \"controller-runtime\", \"controller\": \"network.OperatorSpecController\", \"operator\": \"vip\", \"link\": %q, \"ip\": %q}", link, ip)
	n.machined.Printf("enabled shared IP %s", fields)

	defer func() {
		n.c.releaseVIP(n)
		n.machined.Printf("removing shared IP %s", fields)
	}()

	observe := election.Observe(ctx)

	for {
		select {
		case <-sess.Done():
			n.machined.Printf("etcd session closed %s", fields)

			return nil
		case <-ctx.Done():
			return nil
		case resp, ok := <-observe:
			if !ok {
				return nil
			}

			if string(resp.Kvs[0].Value) != hostname {
				n.machined.Printf("detected new leader {\"component\": \"controller-runtime\", \"controller\": \"network.OperatorSpecController\", \"operator\": \"vip\", \"leader\": %q}", resp.Kvs[0].Value)

				return nil
			}
		case <-time.After(100 * time.Millisecond):
			if !n.etcdRunning() {
				return nil
			}
		}
	}
}

// etcdRunning reports whether the node's etcd service is Running.
func (n *Node) etcdRunning() bool {
	n.mu.Lock()
	run := n.etcdRun
	n.mu.Unlock()

	if run == nil {
		return false
	}

	state, _ := run.svc.status()

	return state == stateRunning
}

// holdVIP makes n the holder of the shared IP: the address on the run's
// loopback, its Talos API (and kube-apiserver) relayed into n's proxies.
func (c *Cluster) holdVIP(n *Node, ip netip.Addr, link string) error {
	v := &c.vip

	v.mu.Lock()
	defer v.mu.Unlock()

	c.dropVIPLocked()

	if c.single {
		if err := netns.AddToLink(link, ip); err != nil {
			return err
		}
	} else {
		if err := netns.RemoveUnreachable(ip); err != nil {
			return err
		}

		if err := netns.AddAddress(ip); err != nil {
			return err
		}
	}

	v.addr, v.link, v.holder = ip, link, n
	n.accumulate(ip)
	n.wake()

	ports := []struct {
		port target.Port
		num  int
	}{{target.PortTalosAPI, apiPort}, {portKubeAPIServer, kubePort}}

	for _, p := range ports {
		up, ok := n.proxies[p.port]
		if !ok {
			continue
		}

		listen := net.JoinHostPort(ip.String(), strconv.Itoa(p.num))

		r, err := netfault.StartProxy(c.toxi, "vip-"+string(p.port), listen, up.Listen)
		if err != nil {
			c.dropVIPLocked()

			return fmt.Errorf("shared IP %s: %w", listen, err)
		}

		v.relays = append(v.relays, r)
	}

	return nil
}

// releaseVIP takes the shared IP from n if n holds it.
func (c *Cluster) releaseVIP(n *Node) {
	c.vip.mu.Lock()
	defer c.vip.mu.Unlock()

	if c.vip.holder == n {
		c.dropVIPLocked()
	}
}

// dropVIPLocked leaves the shared IP unheld: no relay, the address routed
// nowhere.
func (c *Cluster) dropVIPLocked() {
	v := &c.vip

	for _, r := range v.relays {
		r.Stop()
	}

	if v.holder != nil {
		v.holder.wake()
	}

	v.relays, v.holder = nil, nil

	switch {
	case !v.addr.IsValid():
	case c.single:
		netns.RemoveFromLink(v.link, v.addr) //nolint:errcheck // gone with the container anyway
	default:
		netns.RemoveAddress(v.addr)  //nolint:errcheck // gone with the namespace anyway
		netns.AddUnreachable(v.addr) //nolint:errcheck
	}
}
