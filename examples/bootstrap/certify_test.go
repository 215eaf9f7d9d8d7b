package bootstrap_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"

	"github.com/talchaos/talchaos/examples/bootstrap"
	"github.com/talchaos/talchaos/sim/simtest"
)

// The bootstrap certified against failures of the catalogue, as `talchaos
// certify` does for a command: each scenario's cluster and faults with this
// code as the orchestrator. Under half-applied-config (two of cp2's applies
// refused) it must survive, under invalid-config (every apply refused as
// invalid) it must fail loudly; nowhere may it be silent (return nil with a
// broken cluster) or hang. Certify runs the whole catalogue when no
// scenario is named.
var _ = Describe("certified", func() {
	It("survives a refused apply and fails loudly on an invalid config", func(ctx SpecContext) {
		// The scenarios run 20 times faster than real Talos (not their 60):
		// these waits end inside their windows of 5 and 20 Talos minutes
		// (15 and 60 s) with room for a loaded machine, where a 12 s wait
		// for the voters at 60x once ran out before they formed.
		quick := bootstrap.Options{Apply: 10 * time.Second, Join: 40 * time.Second, Poll: 300 * time.Millisecond, Call: 3 * time.Second}

		results, err := simtest.Certify(ctx, func(ctx context.Context, talosconfig *clientconfig.Config, nodes []simtest.Node, _ string) error {
			var own []bootstrap.Node
			for _, n := range nodes {
				own = append(own, bootstrap.Node{IP: n.IP, ControlPlane: n.ControlPlane, Config: n.Config})
			}

			return bootstrap.Bootstrap(ctx, own, talosconfig, quick)
		}, simtest.CertifyOptions{Scenarios: []string{"half-applied-config", "invalid-config"}, TimeScale: 20})
		Expect(err).NotTo(HaveOccurred())
		Expect(results).To(HaveLen(2))

		for _, r := range results {
			Expect(r.Held()).To(BeTrue(), r.String())
		}
	}, SpecTimeout(4*time.Minute))
})

// The bootstrap and its rolling upgrade certified together against an
// upgrade interrupted by a reboot: the upgrade checks each node's version
// after its reboot, so it upgrades cp2 again and survives (a script that
// trusts `talosctl upgrade`'s wait is silent there); and against an
// installer image the registry lacks, where it stops at the refusal and
// returns it (loud).
var _ = Describe("certified with its rolling upgrade", Label("long"), func() {
	It("survives an interrupted upgrade and stops loudly at a missing image", func(ctx SpecContext) {
		quick := bootstrap.Options{Apply: 10 * time.Second, Join: 40 * time.Second, Poll: 300 * time.Millisecond, Call: 3 * time.Second}
		own := func(nodes []simtest.Node) []bootstrap.Node {
			var out []bootstrap.Node
			for _, n := range nodes {
				out = append(out, bootstrap.Node{IP: n.IP, ControlPlane: n.ControlPlane, Config: n.Config})
			}

			return out
		}

		results, err := simtest.Certify(ctx, func(ctx context.Context, talosconfig *clientconfig.Config, nodes []simtest.Node, _ string) error {
			return bootstrap.Bootstrap(ctx, own(nodes), talosconfig, quick)
		}, simtest.CertifyOptions{
			// 20 times faster than real Talos, as above: the formation and
			// three upgrades fit the scenario's 30 Talos minutes with
			// room (at its 60x, 30 s of wall time, which a loaded
			// 2-core machine once outlasted).
			Scenarios: []string{"upgrade-interrupted", "upgrade-image-missing"}, TimeScale: 20,
			Upgrade: func(ctx context.Context, talosconfig *clientconfig.Config, nodes []simtest.Node, image string) error {
				return bootstrap.RollingUpgrade(ctx, own(nodes), talosconfig, image, bootstrap.UpgradeOptions{Options: quick, Reboot: time.Minute})
			},
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(results).To(HaveLen(2))

		for _, r := range results {
			Expect(r.Held()).To(BeTrue(), r.String())
		}
	}, SpecTimeout(5*time.Minute))
})
