package scenarios_test

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's matchers

	"github.com/talchaos/talchaos/harness/chaos"
	"github.com/talchaos/talchaos/harness/result"
	"github.com/talchaos/talchaos/reports"
)

// nodeReset is a bootstrap in which, when cp3 has just joined etcd as a
// learner, cp3 or the worker is reset (`talosctl reset`, graceful or not): it
// comes back in maintenance, cp3's learner (graceful: false) still listed,
// blocking every later join. (Reset as a voter of two, not gracefully, cp3
// would take the quorum with it: nothing a bootstrap can mend.)
const nodeReset = `apiVersion: talchaos/v1
kind: Scenario
name: node-reset-%[1]t
description: a node reset back to maintenance during the bootstrap
talos: v1.12
timeScale: 60
cluster:
  controlPlanes: 3
  workers: 1
orchestrator:
  name: %[2]s
  bootstrapNode: cp1
faults:
  - {kind: reset-node, node: %[5]s, graceful: %[1]t, when: {node: cp3, state: learner}}
expect:
  within: %[6]s
  converged: %[3]t
  nodesInMaintenance: [%[4]s]
`

// A node reset back to maintenance during the bootstrap (a control plane it
// waits for, or a worker it is not waiting for) would stay there: the
// resilient orchestrator gives it its configuration again (its first step,
// nothing destroyed), and cp3's etcd joins afresh, Talos removing the member
// of its own name first. The naive script, which applied once, leaves it in
// maintenance, as the field's scripts do.
var _ = Describe("a node reset during the bootstrap", func() {
	for i, c := range []struct {
		orchestrator string
		graceful     bool
		converged    bool
		maintenance  string
		reset        string
		within       string // the naive script waits for voters all of it
	}{
		{"resilient", false, true, "", "cp3", "30m"},
		{"resilient", true, true, "", "cp3", "30m"},
		{"resilient", false, true, "", "w1", "30m"},
		{"naive", false, false, "cp3", "cp3", "12m"},
	} {
		seed := int64(41 + i)

		It(fmt.Sprintf("%s, %s reset, graceful %t, seed %d", c.orchestrator, c.reset, c.graceful, seed), func(ctx SpecContext) {
			sc, err := chaos.Parse("node-reset.yaml", []byte(fmt.Sprintf(nodeReset, c.graceful, c.orchestrator, c.converged, c.maintenance, c.reset, c.within)))
			Expect(err).NotTo(HaveOccurred())

			res, err := runSim(ctx, sc, seed)
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Verdict).To(Equal(result.Pass), "%s", reports.Summary(res))

			var reapplied []string

			for _, e := range res.Events {
				if e.Kind == "orchestrator.remedy" && strings.Contains(e.Msg, "in maintenance again") {
					reapplied = append(reapplied, e.Node)
				}
			}

			if c.orchestrator == "resilient" {
				Expect(res.Outcome.Voters).To(Equal(3))
				Expect(reapplied).To(Equal([]string{c.reset}), "%s", reports.Summary(res))
			} else {
				Expect(reapplied).To(BeEmpty())
			}
		}, SpecTimeout(3*time.Minute))
	}
})
