package sim

import (
	"testing"

	"github.com/talchaos/talchaos/harness/judge"
)

// A run's settle waits for every member's next health check in wall time
// (judge.Cadence): it reads Talos's health check timers and the floor on
// its deadline from what the sim reports, by the floor's name.
func TestHealthCheckCadenceForTheJudge(t *testing.T) {
	p := baseProfile()
	if p.HealthPeriod != judge.HealthPeriod || p.HealthTimeout != judge.HealthTimeout {
		t.Errorf("the sim's health check every %s within %s, the judge's every %s within %s",
			p.HealthPeriod, p.HealthTimeout, judge.HealthPeriod, judge.HealthTimeout)
	}

	found := false

	for _, f := range ClockFloorsAt(60) {
		if f.What == judge.HealthTimeoutFloor {
			found = f.Talos == judge.HealthTimeout && f.Modelled == 60*etcdOpFloor
		}
	}

	if !found {
		t.Errorf("no floor %q of %s modelled as %s among %+v", judge.HealthTimeoutFloor, judge.HealthTimeout, 60*etcdOpFloor, ClockFloorsAt(60))
	}
}
