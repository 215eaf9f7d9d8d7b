package chaos

import (
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// bandwidth: traffic is limited to rateKBps.
func init() {
	register("bandwidth", func(sc *scenario.Scenario, f scenario.Fault) (Fault, error) {
		if f.RateKBps <= 0 {
			return nil, f.Errorf(sc, "rateKBps", "bandwidth needs a positive rateKBps")
		}

		return networkFault(sc, f, "bandwidth", target.Toxic{Type: "bandwidth", RateKBps: f.RateKBps})
	})
}
