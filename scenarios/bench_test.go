package scenarios_test

import (
	"context"
	"testing"

	"github.com/talchaos/talchaos/harness"
	"github.com/talchaos/talchaos/harness/result"
	"github.com/talchaos/talchaos/scenarios"
	"github.com/talchaos/talchaos/sim"
)

// BenchmarkHappyPath is the time (and memory) to form a three-member control
// plane from maintenance through the resilient orchestrator on the sim target:
// the "seconds, not 5–40 minutes" promise.
func BenchmarkHappyPath(b *testing.B) {
	sc, err := scenarios.Load("happy-path")
	if err != nil {
		b.Fatal(err)
	}

	for b.Loop() {
		res, err := harness.Run(context.Background(), sc, harness.Options{Target: sim.Target{}, Seed: 1})
		if err != nil || res.Verdict != result.Pass {
			b.Fatalf("verdict %s: %v", res.Verdict, err)
		}
	}
}
