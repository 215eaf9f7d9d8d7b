package chaos

import (
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// blackhole: connections open but no byte passes (toxiproxy "timeout" with 0).
func init() {
	register("blackhole", func(sc *scenario.Scenario, f scenario.Fault) (Fault, error) {
		return networkFault(sc, f, "blackhole", target.Toxic{Type: "timeout"})
	})
}
