package sim

import (
	"context"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// runWorkload models the kube-apiservers writing to etcd: once a control plane's
// etcd is healthy, writes go to its local member at the scenario's rate. This is
// what makes a slow learner fall behind, as a busy real cluster does.
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

	for i := 0; ; i++ {
		select {
		case <-c.ctx.Done():
			return
		case <-tick.C:
		}

		n := c.writer()
		if n == nil {
			continue
		}

		cl, ok := clients[n]
		if !ok {
			var err error

			if cl, err = n.newEtcdClient(c.ctx, []string{n.EtcdClientEndpoint()}); err != nil {
				continue
			}

			clients[n] = cl
		}

		ctx, cancel := context.WithTimeout(c.ctx, time.Second)
		cl.Put(ctx, fmt.Sprintf("/registry/talchaos/workload/%04d", i%1000), value) //nolint:errcheck // an apiserver retries; so does the next tick
		cancel()
	}
}

// writer is the first control plane whose etcd service is up and healthy.
func (c *Cluster) writer() *Node {
	for _, n := range c.nodes {
		n.mu.Lock()
		run := n.etcdRun
		n.mu.Unlock()

		if run == nil {
			continue
		}

		if _, healthy := run.svc.status(); healthy {
			return n
		}
	}

	return nil
}
