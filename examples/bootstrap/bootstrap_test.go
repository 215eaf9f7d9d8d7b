package bootstrap_test

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"

	"github.com/talchaos/talchaos/examples/bootstrap"
	"github.com/talchaos/talchaos/harness/chaos"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
	"github.com/talchaos/talchaos/sim/simtest"
)

func TestBootstrap(t *testing.T) {
	RegisterFailHandler(Fail)

	// The rolling upgrade's certification (label "long") runs in make
	// test-long (-ginkgo.label-filter=long): beside make test's other lanes
	// on 2 cores it ran out of upgrade-interrupted's window.
	suiteConfig, reporterConfig := GinkgoConfiguration()
	if suiteConfig.LabelFilter == "" {
		suiteConfig.LabelFilter = "!long"
	}

	RunSpecs(t, "Bootstrap example suite", suiteConfig, reporterConfig)
}

// Talos timers run 30 times faster on these clusters: the 10-minute promote
// window passes in 20 s. The bootstrap's own waits are real time, generous.
var opts = bootstrap.Options{Apply: 2 * time.Minute, Join: 3 * time.Minute, Poll: 500 * time.Millisecond, Call: 5 * time.Second}

func nodesOf(c *simtest.Cluster) []bootstrap.Node {
	var out []bootstrap.Node

	for _, n := range c.Nodes() {
		out = append(out, bootstrap.Node{IP: n.IP, ControlPlane: n.ControlPlane, Config: n.Config})
	}

	return out
}

var _ = Describe("Bootstrap", func() {
	var c *simtest.Cluster

	BeforeEach(func() {
		c = simtest.New(GinkgoT(), simtest.Options{ControlPlanes: 3, Workers: 1, TimeScale: 30, Seed: GinkgoRandomSeed()})
	})

	It("forms the control plane", func(ctx SpecContext) {
		Expect(bootstrap.Bootstrap(ctx, nodesOf(c), c.Talosconfig(), opts)).To(Succeed())
	}, SpecTimeout(4*time.Minute))

	It("forms it over a slow etcd peer link to cp2", func(ctx SpecContext) {
		heal, err := c.Inject(ctx, chaos.Latency{Node: "cp2", Port: target.PortEtcdPeer, Latency: scenario.Duration{Duration: 100 * time.Millisecond}})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(heal)

		Expect(bootstrap.Bootstrap(ctx, nodesOf(c), c.Talosconfig(), opts)).To(Succeed())
	}, SpecTimeout(4*time.Minute))

	// talos #8566: the configuration takes, the reply is lost. Sending it
	// again would hit a node that already left maintenance; asking the node
	// first is what keeps the bootstrap going.
	It("forms it when cp3's ApplyConfiguration reply is lost", func(ctx SpecContext) {
		heal, err := c.Inject(ctx, chaos.APIDropReply{Node: "cp3", RPC: "ApplyConfiguration", Count: 1})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(heal)

		Expect(bootstrap.Bootstrap(ctx, nodesOf(c), c.Talosconfig(), opts)).To(Succeed())
	}, SpecTimeout(4*time.Minute))

	// Field report 004: after its configuration is applied a node serves
	// only clients with a certificate of the cluster's CA. The maintenance
	// client's next call fails in the TLS handshake, as on a real node.
	It("answers a client without a certificate with tls: certificate required once configured", func(ctx SpecContext) {
		cp1, _ := c.Node("cp1")

		insecure, err := client.New(ctx, client.WithTLSConfig(&tls.Config{InsecureSkipVerify: true}), client.WithEndpoints(cp1.IP)) //nolint:gosec
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(insecure.Close)

		_, err = insecure.ApplyConfiguration(ctx, &machine.ApplyConfigurationRequest{Data: cp1.Config, Mode: machine.ApplyConfigurationRequest_AUTO})
		Expect(err).NotTo(HaveOccurred())

		Eventually(func(ctx context.Context) error {
			_, err := insecure.Version(ctx)

			return err
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(MatchError(ContainSubstring("tls: certificate required")))
	}, SpecTimeout(2*time.Minute))

	It("refuses a fault on a node the cluster does not have, naming the field", func(ctx SpecContext) {
		_, err := c.Inject(ctx, chaos.Latency{Node: "cp9", Port: target.PortEtcdPeer, Latency: scenario.Duration{Duration: time.Millisecond}})
		Expect(err).To(MatchError(ContainSubstring("simtest.Inject(latency).node")))
	})
})
