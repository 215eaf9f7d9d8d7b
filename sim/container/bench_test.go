package container_test

import (
	"context"
	"sync"
	"testing"

	"github.com/talchaos/talchaos/harness"
	"github.com/talchaos/talchaos/harness/result"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
	"github.com/talchaos/talchaos/scenarios"
	"github.com/talchaos/talchaos/sim/container"
)

// BenchmarkHappyPath is the happy path on the container target: the time to
// the verdict (images built, containers started and removed included) and
// each node's memory once the cluster has formed.
func BenchmarkHappyPath(b *testing.B) {
	sc, err := scenarios.Load("happy-path")
	if err != nil {
		b.Fatal(err)
	}

	var (
		mem   uint64
		nodes int
	)

	for b.Loop() {
		tgt := &measuring{Target: container.Target{Binary: nodeBinary}}

		res, err := harness.Run(context.Background(), sc, harness.Options{Target: tgt, Seed: 1})
		if err != nil || res.Verdict != result.Pass {
			b.Fatalf("verdict %s: %v", res.Verdict, err)
		}

		for _, m := range tgt.memory {
			mem += m
			nodes++
		}
	}

	if nodes > 0 {
		b.ReportMetric(float64(mem)/float64(nodes)/(1<<20), "MiB/node")
	}
}

// measuring is the container target, reading the nodes' memory just before
// the run closes the cluster.
type measuring struct {
	container.Target

	mu     sync.Mutex
	memory map[string]uint64
}

func (m *measuring) Provision(ctx context.Context, sc *scenario.Scenario, opts target.Options) (target.Cluster, error) {
	c, err := m.Target.Provision(ctx, sc, opts)
	if err != nil {
		return c, err
	}

	return &measured{Cluster: c.(*container.Cluster), m: m}, nil
}

type measured struct {
	*container.Cluster

	m *measuring
}

func (c *measured) Close() error {
	if mem, err := c.Memory(context.Background()); err == nil {
		c.m.mu.Lock()
		c.m.memory = mem
		c.m.mu.Unlock()
	}

	return c.Cluster.Close()
}
