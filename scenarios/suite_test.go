package scenarios_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's matchers
	"go.uber.org/goleak"

	"github.com/talchaos/talchaos/harness"
	"github.com/talchaos/talchaos/harness/chaos"
	"github.com/talchaos/talchaos/harness/result"
	"github.com/talchaos/talchaos/scenarios"
	"github.com/talchaos/talchaos/sim"
)

func TestScenarios(t *testing.T) {
	// No run may leave a goroutine behind (etcd members, proxies, API servers, observers).
	defer goleak.VerifyNone(t,
		// Ginkgo's own signal watcher lives as long as the process.
		goleak.IgnoreTopFunction("github.com/onsi/ginkgo/v2/internal/interrupt_handler.(*InterruptHandler).registerForInterrupts.func2"),
		// toxiproxy v2.12 leaks a link's toxic chain when writing to a closed
		// destination fails while a toxic still holds data (link.go stops
		// reading its output); nothing outside toxiproxy can unblock them.
		goleak.IgnoreTopFunction("github.com/Shopify/toxiproxy/v2/toxics.(*BandwidthToxic).Pipe"),
		goleak.IgnoreTopFunction("github.com/Shopify/toxiproxy/v2/toxics.(*NoopToxic).Pipe"),
		// Our latency toxic sits in the same chain and blocks the same way.
		goleak.IgnoreTopFunction("github.com/talchaos/talchaos/harness/netfault.(*LatencyToxic).Pipe"),
		goleak.IgnoreTopFunction("github.com/Shopify/toxiproxy/v2/stream.(*ChanWriter).Write"))

	RegisterFailHandler(Fail)
	RunSpecs(t, "built-in scenarios")
}

// Every built-in scenario runs on the sim target and must meet its own
// expectations: its verdict is pass because real etcd members and the real
// client did what the expect block says.
var _ = Describe("built-in scenario", func() {
	for _, name := range scenarios.Names() {
		It(name, func(ctx SpecContext) {
			data, file, err := scenarios.Read(name)
			Expect(err).NotTo(HaveOccurred())

			sc, err := chaos.Parse(file, data)
			Expect(err).NotTo(HaveOccurred())

			res, err := harness.Run(ctx, sc, harness.Options{Target: sim.Target{}, Seed: 1})
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Verdict).To(Equal(result.Pass), explain(res))
			Expect(res.Checks).NotTo(BeEmpty(), "a scenario without expectations proves nothing")
		}, SpecTimeout(3*time.Minute))
	}
})

// explain lists the failed checks, the diagnoses and the last events.
func explain(res *result.Result) string {
	var b strings.Builder

	for _, c := range res.Checks {
		if !c.Passed {
			fmt.Fprintf(&b, "check %s: expected %s, actual %s\n", c.Name, c.Expected, c.Actual)
		}
	}

	for _, d := range res.Diagnoses {
		fmt.Fprintf(&b, "diagnosis %s on %s: %s (%s)\n", d.Code, d.Node, d.Message, d.Evidence)
	}

	events := res.Events
	if len(events) > 60 {
		events = events[len(events)-60:]
	}

	for _, e := range events {
		fmt.Fprintf(&b, "%6dms %-4s %s %s\n", e.TMs, e.Node, e.Kind, e.Msg)
	}

	return b.String()
}
