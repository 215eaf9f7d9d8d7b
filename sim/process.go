package sim

import (
	"context"
	"fmt"
	"runtime"

	"go.uber.org/zap/zapcore"

	"github.com/talchaos/talchaos/harness/target"
)

// Process implements target.Processes.
func (c *Cluster) Process(ctx context.Context, node string, op target.ProcessOp) (target.Heal, error) {
	n := c.Node(node)
	if n == nil {
		return nil, fmt.Errorf("unknown node %q", node)
	}

	noop := func() error { return nil }

	switch op {
	case target.CrashEtcd:
		return noop, n.crashEtcd()
	case target.PauseEtcd:
		return c.pauseEtcd(ctx, n)
	case target.PauseNode:
		return c.pauseNode(ctx, n)
	case target.RebootNode:
		c.wg.Go(func() { n.powerCycle(cycle{cut: true}) })

		return noop, nil
	case target.PowerOff:
		c.wg.Go(func() { n.powerCycle(cycle{halt: true, cut: true}) })

		return func() error {
			c.wg.Go(n.powerOn)

			return nil
		}, nil
	case target.WipeEtcd:
		c.wg.Go(func() { n.powerCycle(cycle{wipe: wipeEtcd, cut: true}) })

		return noop, nil
	case target.ResetGraceful, target.ResetForced:
		// As on the real target (a Reset call, rebooting, both partitions
		// wiped): the reset sequence with its events and stages, and a
		// graceful one's drain and leave.
		if err := n.reset(op == target.ResetGraceful, true, wipeAll, ""); err != nil {
			return nil, fmt.Errorf("reset %s: %w", node, err)
		}

		return noop, nil
	}

	return nil, fmt.Errorf("unsupported process fault %q", op)
}

// crashEtcd kills the running etcd without a clean shutdown; Talos's restart
// runner brings it back from its data dir after its restart interval.
func (n *Node) crashEtcd() error { return n.killEtcd(137) }

// killEtcd stops the running etcd at once, recording the exit code Talos will report.
func (n *Node) killEtcd(code int) error {
	n.mu.Lock()
	e := n.etcd
	if e != nil {
		n.exitCode = code
	}
	n.mu.Unlock()

	if e == nil {
		return fmt.Errorf("etcd is not running on %s", n.name)
	}

	n.dropLocalEtcd(e)
	e.Server.HardStop()

	return nil
}

// etcdDies is the zap hook for etcd's panics and fatal errors. In a real node
// they end the etcd process and Talos restarts it; here they must not take the
// whole simulator down: the node's etcd is killed (exit code 2, as a Go panic
// exits) and the goroutine that hit the error ends instead of panicking.
// etcd 3.6 does this, for instance, when a removed member is asked for its
// Status ("failed to find local ID in cluster members").
type etcdDies struct{ n *Node }

func (h etcdDies) OnWrite(*zapcore.CheckedEntry, []zapcore.Field) {
	h.n.c.wg.Go(func() { h.n.killEtcd(2) }) //nolint:errcheck // it may be gone already

	runtime.Goexit()
}

// pauseNode freezes the node as far as its peers and clients can tell: etcd
// as pause-etcd does, and its Talos API holds every byte both ways with its
// connections open. (Its own loops go on: the sim's node is not a process to
// stop; the container target freezes the real one.)
func (c *Cluster) pauseNode(ctx context.Context, n *Node) (target.Heal, error) {
	heal, err := c.pauseEtcd(ctx, n)
	if err != nil {
		return nil, err
	}

	heals := []target.Heal{heal}

	undo := func() error {
		var first error

		for i := len(heals) - 1; i >= 0; i-- {
			if err := heals[i](); err != nil && first == nil {
				first = err
			}
		}

		return first
	}

	for _, port := range n.apiPorts() {
		for _, d := range []target.Direction{target.Upstream, target.Downstream} {
			remove, err := c.AddToxic(ctx, n.name, port, target.Toxic{Type: "timeout", Direction: d})
			if err != nil {
				undo() //nolint:errcheck

				return nil, err
			}

			heals = append(heals, remove)
		}
	}

	return undo, nil
}
