package main

import (
	"math"

	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// slots is how many of a pool's --parallel slots one run of sc on tgt
// takes. The default of two runs per core budgets half a core a slot; what a
// run uses on this machine was measured on the sim (docs/measurements.md):
// three control planes about a quarter of a core, 7 + 50 nodes 0.57 (22.7 s
// of CPU in 40 s), three control planes with Kubernetes 0.7 (the API
// server, controller manager and scheduler of each control plane are
// processes of their own). Four Kubernetes runs in one pool of 4 on 2 cores
// lost every run to its window (docs/measurements.md, "Stop 42"). A target
// whose nodes are not on this machine (real ones) costs a slot a run.
func slots(sc *scenario.Scenario, tgt target.Target) int {
	if !tgt.Disposable() {
		return 1
	}

	const (
		perNode       = 0.0055           // (0.57 - 0.25) / 54 more nodes
		perRun        = 0.25 - 3*perNode // a run of three nodes: 0.25
		perKubeMaster = 0.15             // (0.7 - 0.25) / 3 control planes
		perSlot       = 0.5
	)

	nodes := sc.Cluster.ControlPlanes + sc.Cluster.Workers
	cores := perRun + perNode*float64(nodes)

	if sc.Cluster.Kubernetes {
		cores += perKubeMaster * float64(sc.Cluster.ControlPlanes)
	}

	return max(int(math.Ceil(cores/perSlot-1e-9)), 1)
}
