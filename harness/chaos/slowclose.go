package chaos

import (
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// slow-close: closing a connection takes `latency` longer (toxiproxy slow_close).
func init() {
	register("slow-close", func(sc *scenario.Scenario, f scenario.Fault) (Fault, error) {
		if f.Latency.Duration <= 0 {
			return nil, f.Errorf(sc, "latency", "slow-close needs a positive latency: how long a close is delayed")
		}

		return networkFault(sc, f, "slow-close", target.Toxic{Type: "slow_close", Timeout: f.Latency.Duration})
	})
}
