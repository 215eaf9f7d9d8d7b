package sim

import (
	"context"
	"time"
)

// bootTimeout is constants.BootTimeout: the boot sequence's last task,
// startAllServices, waits this long for every service to be up.
const bootTimeout = 70 * time.Minute

// watchBoot is the end of Talos v1.12.6's boot sequence (v1alpha1_sequencer.go
// Boot: startEverything is phase 9 of 9 on metal; startAllServices in
// v1alpha1_sequencer_tasks.go) and what machined does when it fails
// (internal/app/machined/main.go handle): a node whose services are not all up
// (Running and healthy) after 70 minutes logs the failure, counts down ten
// seconds and reboots. After the reboot etcd joins again if its data
// directory is empty.
func (n *Node) watchBoot(ctx context.Context) {
	deadline := time.Now().Add(n.c.clock.Wall(bootTimeout))

	for !n.servicesUp() {
		left := time.Until(deadline)
		if left <= 0 {
			break
		}

		if !n.sleep(ctx, min(n.c.clock.Wall(15*time.Second), left)) {
			return
		}
	}

	if n.servicesUp() {
		return
	}

	for _, line := range []string{
		"task startAllServices (1/1): failed: context deadline exceeded",
		"phase startEverything (9/9): failed",
		"boot sequence: failed",
		"error running phase 9 in boot sequence: task 1/1: failed, context deadline exceeded",
	} {
		n.machined.Printf("%s", line)
	}

	for i := 10; i >= 0; i-- {
		n.machined.Printf("rebooting in %d seconds", i)

		if !n.sleep(ctx, n.c.clock.Wall(time.Second)) {
			return
		}
	}

	// Outside the boot's goroutines: the reboot waits for them.
	n.c.wg.Go(func() { n.powerCycle(cycle{}) })
}

// servicesUp reports whether every service of the node is Running and healthy
// (system.StateEventUp for health-checked services).
func (n *Node) servicesUp() bool {
	svcs := n.Services()
	if len(svcs) == 0 {
		return false
	}

	for _, s := range svcs {
		if s.GetState() != stateRunning || !s.GetHealth().GetHealthy() {
			return false
		}
	}

	return true
}
