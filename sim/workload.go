package sim

import (
	"context"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// runWorkload models the kube-apiservers writing to etcd: as soon as a
// control plane's etcd runs (a kube-apiserver does not wait for Talos's
// health check), writes go to a running member at the scenario's rate; a
// member that refuses (a learner, one without quorum) hands the writes to
// the next. This is what makes a slow learner fall behind, as a busy real
// cluster does, however early it joins.
func (c *Cluster) runWorkload() {
	w := c.sc.Cluster.Workload
	if w.WritesPerSecond <= 0 {
		return
	}

	value := strings.Repeat("x", max(w.ValueBytes, 1))
	tick := time.NewTicker(time.Second / time.Duration(w.WritesPerSecond))

	defer tick.Stop()

	clients := map[*Node]*clientv3.Client{}

	defer func() {
		for _, cl := range clients {
			cl.Close() //nolint:errcheck
		}
	}()

	next := 0

	for i := 0; ; i++ {
		select {
		case <-c.ctx.Done():
			return
		case <-tick.C:
		}

		n := c.writer(next)
		if n == nil {
			continue
		}

		cl, ok := clients[n]
		if !ok {
			var err error

			if cl, err = n.newEtcdClient(c.ctx, []string{n.EtcdClientEndpoint()}); err != nil {
				next++

				continue
			}

			clients[n] = cl
		}

		ctx, cancel := context.WithTimeout(c.ctx, time.Second)
		// An apiserver retries; so does the next tick, through the next member.
		if _, err := cl.Put(ctx, fmt.Sprintf("/registry/talchaos/workload/%04d", i%1000), value); err != nil {
			next++
		}

		cancel()
	}
}

// writer is the k-th (modulo) control plane whose etcd runs, or nil.
func (c *Cluster) writer(k int) *Node {
	var running []*Node

	for _, n := range c.nodes {
		n.mu.Lock()
		up := n.etcd != nil
		// A node process writes only while its member leads: one writer in
		// the cluster at the scenario's rate, as the sim's one loop is.
		if up && c.single {
			up = n.etcd.Server.Leader() == n.etcd.Server.MemberID()
		}
		n.mu.Unlock()

		if up {
			running = append(running, n)
		}
	}

	if len(running) == 0 {
		return nil
	}

	return running[k%len(running)]
}
