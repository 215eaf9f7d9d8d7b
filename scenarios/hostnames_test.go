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
	"github.com/talchaos/talchaos/scenarios"
)

// withHostnames is a built-in whose three control planes are given
// hostnames of their own (site-ctl-11…13), as the field's clusters are: their
// etcd members carry those names, not the nodes'.
func withHostnames(name string) string {
	data, _, err := scenarios.Read(name)
	Expect(err).NotTo(HaveOccurred())

	patches := "controlPlanes: 3\n  configPatches:\n"
	for i := 1; i <= 3; i++ {
		patches += fmt.Sprintf("    - nodes: [cp%d]\n      patch: |\n        apiVersion: v1alpha1\n        kind: HostnameConfig\n"+
			"        auto: off\n        hostname: site-ctl-%d\n", i, 10+i)
	}

	s := string(data)
	Expect(s).NotTo(ContainSubstring("configPatches"))
	Expect(s).To(ContainSubstring("controlPlanes: 3\n"))

	return strings.Replace(strings.Replace(s, "name: "+name, "name: "+name+"-hostnames", 1), "controlPlanes: 3\n", patches, 1)
}

// A node's member is found by its peer URLs and hostname, not its name: the
// remove-member fault finds cp2's member (before, "cp2 is not in the member
// list"), and a learner refused for being behind is diagnosed once its
// member started under its hostname.
var _ = Describe("control planes with hostnames of their own", func() {
	for _, name := range []string{"crash-loop-resilient", "learner-not-synced"} {
		It(name, func(ctx SpecContext) {
			sc, err := chaos.Parse(name+"-hostnames.yaml", []byte(withHostnames(name)))
			Expect(err).NotTo(HaveOccurred())

			res, err := runSim(ctx, sc, 1)
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Verdict).To(Equal(result.Pass), "%s", reports.Summary(res))

			for _, f := range res.Faults {
				Expect(f.Error).To(BeEmpty(), "fault %s", f.Name)
			}

			names := map[string]bool{}
			for _, m := range res.Outcome.Members {
				names[m.Hostname] = true
			}

			Expect(names).To(HaveKey("site-ctl-11"), "members: %+v", res.Outcome.Members)
		}, SpecTimeout(4*time.Minute))
	}
})
