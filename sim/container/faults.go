package container

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/moby/moby/client"
	tcexec "github.com/testcontainers/testcontainers-go/exec"

	"github.com/talchaos/talchaos/harness/target"
)

// Process implements target.Processes with Docker: a reboot is a SIGKILL and
// a start after the profile's reboot time (the sim's reboot is a power cut
// too), a power-off a SIGKILL until healed, pause-node the cgroup freezer.
func (c *Cluster) Process(ctx context.Context, name string, op target.ProcessOp) (target.Heal, error) {
	n, err := c.node(name)
	if err != nil {
		return nil, err
	}

	noop := func() error { return nil }

	switch op {
	case target.RebootNode:
		if err := c.kill(ctx, n); err != nil {
			return nil, err
		}

		c.wg.Go(func() {
			select {
			case <-c.ctx.Done():
			case <-time.After(c.clock.Wall(c.profile.RebootDuration)):
				c.start(c.ctx, n) //nolint:errcheck // the observer sees a node that did not come back
			}
		})

		return noop, nil
	case target.PowerOff:
		if err := c.kill(ctx, n); err != nil {
			return nil, err
		}

		return func() error { return c.start(c.ctx, n) }, nil
	case target.PauseNode:
		if _, err := c.docker.ContainerPause(ctx, n.ctr.GetContainerID(), client.ContainerPauseOptions{}); err != nil {
			return nil, fmt.Errorf("pausing %s: %w", name, err)
		}

		return func() error {
			_, err := c.docker.ContainerUnpause(c.ctx, n.ctr.GetContainerID(), client.ContainerUnpauseOptions{})

			return err
		}, nil
	}

	return nil, fmt.Errorf("the container target cannot carry out %q", op)
}

// kill sends SIGKILL to the node's container and waits until it is down.
func (c *Cluster) kill(ctx context.Context, n *node) error {
	id := n.ctr.GetContainerID()

	if _, err := c.docker.ContainerKill(ctx, id, client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		return fmt.Errorf("killing %s: %w", n.name, err)
	}

	for {
		st, err := c.docker.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		if err != nil {
			return fmt.Errorf("killing %s: %w", n.name, err)
		}

		if st.Container.State == nil || !st.Container.State.Running {
			return nil
		}

		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// start starts the node's container again; a new network namespace has none
// of the cuts, so they are set again.
func (c *Cluster) start(ctx context.Context, n *node) error {
	if _, err := c.docker.ContainerStart(ctx, n.ctr.GetContainerID(), client.ContainerStartOptions{}); err != nil {
		return fmt.Errorf("starting %s: %w", n.name, err)
	}

	c.mu.Lock()
	cuts := len(c.dropped[n.name]) > 0
	c.mu.Unlock()

	if cuts {
		return c.applyCuts(ctx, n)
	}

	return nil
}

// Partition implements target.Partitioner: inside each node of a, the kernel
// drops every packet from and to each node of b, and the other way round.
func (c *Cluster) Partition(ctx context.Context, a, b []string) (target.Heal, error) {
	var na, nb []*node

	for _, group := range []struct {
		names []string
		into  *[]*node
	}{{a, &na}, {b, &nb}} {
		for _, name := range group.names {
			n, err := c.node(name)
			if err != nil {
				return nil, err
			}

			*group.into = append(*group.into, n)
		}
	}

	if err := c.cut(ctx, na, nb, 1); err != nil {
		c.cut(ctx, na, nb, -1) //nolint:errcheck

		return nil, err
	}

	return func() error { return c.cut(c.ctx, na, nb, -1) }, nil
}

// Isolate implements target.Partitioner: the kernel drops every packet
// between the node and every other node and the host (the engine, the
// discovery registry), both ways; healed, the rules go. (docker network
// disconnect would remove the interface, and the node's listeners bound to
// its address do not survive that, while a real node cut off keeps its
// address and its sockets.)
func (c *Cluster) Isolate(ctx context.Context, name string) (target.Heal, error) {
	n, err := c.node(name)
	if err != nil {
		return nil, err
	}

	var others []*node

	for _, o := range c.nodes {
		if o != n {
			others = append(others, o)
		}
	}

	isolate := func(ctx context.Context, delta int) error {
		c.addDrop(n, c.gateway, delta)

		return c.cut(ctx, []*node{n}, others, delta)
	}

	if err := isolate(ctx, 1); err != nil {
		isolate(ctx, -1) //nolint:errcheck

		return nil, err
	}

	return func() error { return isolate(c.ctx, -1) }, nil
}

// addDrop counts one more (delta 1) or one less (-1) cut of addr in n.
func (c *Cluster) addDrop(n *node, addr string, delta int) {
	c.mu.Lock()
	defer c.mu.Unlock()

	m := c.dropped[n.name]
	if m == nil {
		m = map[string]int{}
		c.dropped[n.name] = m
	}

	if m[addr] += delta; m[addr] <= 0 {
		delete(m, addr)
	}
}

// cut adds (delta 1) or removes (delta -1) one cut between every node of a and
// every node of b, and sets the resulting rules in each node touched.
func (c *Cluster) cut(ctx context.Context, a, b []*node, delta int) error {
	touched := map[*node]bool{}

	for _, x := range a {
		for _, y := range b {
			for _, p := range [][2]*node{{x, y}, {y, x}} {
				for _, addr := range p[1].addrs {
					c.addDrop(p[0], addr, delta)
				}

				touched[p[0]] = true
			}
		}
	}

	var first error

	for n := range touched {
		if err := c.applyCuts(ctx, n); err != nil && first == nil {
			first = err
		}
	}

	return first
}

// applyCuts sets the node's drop rules to its current cuts (talchaos node-net
// inside its container), read once no other setting of them is under way, so
// the last to land has the latest.
func (c *Cluster) applyCuts(ctx context.Context, n *node) error {
	n.cuts.Lock()
	defer n.cuts.Unlock()

	c.mu.Lock()
	addrs := make([]string, 0, len(c.dropped[n.name]))
	for ip := range c.dropped[n.name] {
		addrs = append(addrs, ip)
	}
	c.mu.Unlock()

	slices.Sort(addrs)

	code, out, err := n.ctr.Exec(ctx, []string{"/talchaos", "node-net", "--drop", strings.Join(addrs, ",")}, tcexec.Multiplexed())
	if err != nil {
		return fmt.Errorf("cutting %s off: %w", n.name, err)
	}

	if code != 0 {
		msg, _ := io.ReadAll(out) //nolint:errcheck // best effort for the message

		return fmt.Errorf("cutting %s off: node-net exited %d: %s", n.name, code, strings.TrimSpace(string(msg)))
	}

	return nil
}
