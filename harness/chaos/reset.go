package chaos

import (
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// reset: connections are reset as soon as data flows (TCP RST).
func init() {
	register("reset", func(sc *scenario.Scenario, f scenario.Fault) (Fault, error) {
		return networkFault(sc, f, "reset", target.Toxic{Type: "reset_peer"})
	})
}
