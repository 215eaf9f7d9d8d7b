package chaos

import (
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// latency: every chunk is delayed by latency ± jitter (real time: it acts on
// real etcd traffic). The jitter is drawn from the run's seed.
func init() {
	register("latency", func(sc *scenario.Scenario, f scenario.Fault) (Fault, error) {
		if f.Latency.Duration <= 0 {
			return nil, f.Errorf(sc, "latency", "latency needs a positive latency, e.g. 200ms")
		}

		if f.Jitter.Duration > f.Latency.Duration {
			return nil, f.Errorf(sc, "jitter", "jitter %s is larger than the latency %s", f.Jitter, f.Latency)
		}

		return networkFault(sc, f, "latency", target.Toxic{Type: "latency", Latency: f.Latency.Duration, Jitter: f.Jitter.Duration})
	})
}
