package sim_test

import (
	"context"
	"testing"

	"github.com/talchaos/talchaos/sim"
)

// BenchmarkClusterStartStop measures provisioning three simulated nodes (secrets,
// configs, PKI, proxies, API servers) and tearing them down.
func BenchmarkClusterStartStop(b *testing.B) {
	sc := newScenario(3)

	for b.Loop() {
		c, err := sim.NewCluster(context.Background(), sc, 1)
		if err != nil {
			b.Fatal(err)
		}

		if err := c.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
