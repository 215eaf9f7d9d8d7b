package sim

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/talchaos/talchaos/harness/netfault"
	"github.com/talchaos/talchaos/harness/target"
)

// netState is the simulated network between nodes. Partitions act on two paths,
// because that is where a node's traffic leaves it:
//   - etcd peer traffic is dialled by etcd itself into the other member's peer
//     proxy; a gate toxic there recognises the sender by its TLS client
//     certificate and cuts the connection (blocking only one node's ingress would
//     not do: raft dials in both directions);
//   - the node's Talos-side clients (join loop, promote loop, member list) dial
//     through the node's own dialer, which refuses to reach a node on the other side.
type netState struct {
	mu     sync.Mutex
	cuts   map[[2]string]int // unordered node pair → active cuts of Talos-side dials
	gates  map[[2]string]int // (receiver, sender) → active blocks of peer traffic
	paused map[string]int    // node → active pauses of its etcd
	conns  map[*trackedConn]struct{}
	dials  map[string]int // address → connections dialled to it, for the tests' count of handshakes
}

func pair(a, b string) [2]string {
	if a > b {
		a, b = b, a
	}

	return [2]string{a, b}
}

// blocked reports whether from may not reach to.
func (s *netState) blocked(from, to string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()

	if from == to {
		return s.paused[from] > 0
	}

	return s.cuts[pair(from, to)] > 0
}

// trackedConn is a connection a node's Talos code opened to a node, so a
// partition can cut it.
type trackedConn struct {
	net.Conn

	s        *netState
	from, to string
	once     sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.s.mu.Lock()
		delete(c.s.conns, c)
		c.s.mu.Unlock()
	})

	return c.Conn.Close()
}

// closeBetween closes the tracked connections matching the predicate.
func (s *netState) closeMatching(match func(from, to string) bool) {
	s.mu.Lock()

	var victims []*trackedConn

	for c := range s.conns {
		if match(c.from, c.to) {
			victims = append(victims, c)
		}
	}
	s.mu.Unlock()

	for _, c := range victims {
		c.Close() //nolint:errcheck
	}
}

// dial is the node's network stack for its Talos-side clients. A dial across a
// partition behaves like a dropped SYN: it hangs until the caller gives up.
func (n *Node) dial(ctx context.Context, addr string) (net.Conn, error) {
	host, _, _ := net.SplitHostPort(addr) //nolint:errcheck // an unparseable address fails in DialContext below

	to := n.name
	if t := n.c.nodeByIP(host); t != nil {
		to = t.name
	}

	s := &n.c.net

	if s.blocked(n.name, to) {
		<-ctx.Done()

		err := ctx.Err()
		if err == context.DeadlineExceeded {
			err = os.ErrDeadlineExceeded // "i/o timeout", as net.Dialer reports it
		}

		return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: tcpAddr(addr), Err: err}
	}

	var d net.Dialer

	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}

	tc := &trackedConn{Conn: conn, s: s, from: n.name, to: to}

	s.mu.Lock()
	if s.conns == nil {
		s.conns, s.dials = map[*trackedConn]struct{}{}, map[string]int{}
	}

	s.conns[tc] = struct{}{}
	s.dials[addr]++
	s.mu.Unlock()

	return tc, nil
}

func tcpAddr(addr string) net.Addr {
	a, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return nil
	}

	return a
}

func (c *Cluster) nodeByIP(ip string) *Node {
	for _, n := range c.nodes {
		if n.hasAddress(ip) {
			return n
		}
	}

	return nil
}

// cut adds (delta 1) or removes (delta -1) one cut between every node of a and
// every node of b: their peer traffic through the gates and their Talos-side dials.
func (c *Cluster) cut(a, b []*Node, delta int) {
	s := &c.net

	for _, x := range a {
		for _, y := range b {
			if x == y {
				continue
			}

			s.mu.Lock()
			if s.cuts == nil {
				s.cuts = map[[2]string]int{}
			}

			p := pair(x.name, y.name)
			s.cuts[p] += delta
			newlyCut := delta > 0 && s.cuts[p] == 1

			if s.cuts[p] <= 0 {
				delete(s.cuts, p)
			}
			s.mu.Unlock()

			c.gateBlock(x, y, delta)
			c.gateBlock(y, x, delta)

			if newlyCut {
				s.closeMatching(func(from, to string) bool { return pair(from, to) == p })
			}
		}
	}
}

// gateBlock counts blocks of sender's peer traffic into receiver; the gate is
// closed while any block is active (partitions and pauses can overlap).
func (c *Cluster) gateBlock(receiver, sender *Node, delta int) {
	s := &c.net

	s.mu.Lock()
	if s.gates == nil {
		s.gates = map[[2]string]int{}
	}

	k := [2]string{receiver.name, sender.name}
	before := s.gates[k]
	s.gates[k] += delta
	after := s.gates[k]

	if after <= 0 {
		delete(s.gates, k)
	}
	s.mu.Unlock()

	switch {
	case before == 0 && after > 0:
		receiver.gate.Block(sender.name)
	case before > 0 && after <= 0:
		receiver.gate.Unblock(sender.name)
	}
}

func (c *Cluster) nodesNamed(names []string) ([]*Node, error) {
	var out []*Node

	for _, name := range names {
		n := c.Node(name)
		if n == nil {
			return nil, fmt.Errorf("unknown node %q", name)
		}

		out = append(out, n)
	}

	return out, nil
}

// Partition implements target.Partitioner.
func (c *Cluster) Partition(_ context.Context, a, b []string) (target.Heal, error) {
	na, err := c.nodesNamed(a)
	if err != nil {
		return nil, err
	}

	nb, err := c.nodesNamed(b)
	if err != nil {
		return nil, err
	}

	c.cut(na, nb, 1)

	return func() error {
		c.cut(na, nb, -1)

		return nil
	}, nil
}

// Isolate implements target.Partitioner: cut from every other node, and its
// Talos API blackholed for the engine as well.
func (c *Cluster) Isolate(ctx context.Context, node string) (target.Heal, error) {
	n := c.Node(node)
	if n == nil {
		return nil, fmt.Errorf("unknown node %q", node)
	}

	others := slices.DeleteFunc(slices.Clone(c.nodes), func(o *Node) bool { return o == n })
	c.cut([]*Node{n}, others, 1)

	var removes []func() error

	for _, port := range n.apiPorts() {
		for _, d := range []target.Direction{target.Upstream, target.Downstream} {
			remove, err := c.AddToxic(ctx, node, port, target.Toxic{Type: "timeout", Direction: d})
			if err != nil {
				c.cut([]*Node{n}, others, -1)

				for _, r := range removes {
					r() //nolint:errcheck
				}

				return nil, err
			}

			removes = append(removes, remove)
		}
	}

	return func() error {
		c.cut([]*Node{n}, others, -1)

		var errs []string

		for _, r := range removes {
			if err := r(); err != nil {
				errs = append(errs, err.Error())
			}
		}

		if len(errs) > 0 {
			return fmt.Errorf("heal isolation of %s: %s", node, strings.Join(errs, "; "))
		}

		return nil
	}, nil
}

// pauseEtcd makes the node's etcd answer nobody (SIGSTOP): its peers cannot reach
// it nor hear from it, its client port swallows requests, and the node's own
// health check hangs.
func (c *Cluster) pauseEtcd(ctx context.Context, n *Node) (target.Heal, error) {
	others := slices.DeleteFunc(slices.Clone(c.nodes), func(o *Node) bool { return o == n })

	var removes []func() error

	undo := func() error {
		var first error

		for _, r := range removes {
			if err := r(); err != nil && first == nil {
				first = err
			}
		}

		return first
	}

	for _, d := range []target.Direction{target.Upstream, target.Downstream} {
		remove, err := c.AddToxic(ctx, n.name, target.PortEtcdClient, target.Toxic{Type: "timeout", Direction: d})
		if err != nil {
			undo() //nolint:errcheck

			return nil, err
		}

		removes = append(removes, remove)
	}

	// Its peers neither reach it nor hear from it; its machined still can talk.
	for _, o := range others {
		c.gateBlock(o, n, 1)
		c.gateBlock(n, o, 1)
	}

	c.net.mu.Lock()
	if c.net.paused == nil {
		c.net.paused = map[string]int{}
	}

	c.net.paused[n.name]++
	c.net.mu.Unlock()

	c.net.closeMatching(func(from, to string) bool { return from == n.name && to == n.name })

	return func() error {
		c.net.mu.Lock()
		c.net.paused[n.name]--
		c.net.mu.Unlock()

		for _, o := range others {
			c.gateBlock(o, n, -1)
			c.gateBlock(n, o, -1)
		}

		return undo()
	}, nil
}

// newGate makes the node's peer gate and puts it on the peer proxy.
func (n *Node) newGate() error {
	n.gate = netfault.NewGate(fmt.Sprintf("%s/%s", n.c.dir, n.name))

	_, err := n.proxies[target.PortEtcdPeer].Toxics.AddToxicJson(strings.NewReader(string(netfault.GateToxicJSON("talchaos-gate", n.gate))))

	return err
}
