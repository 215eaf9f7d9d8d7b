package sim_test

import (
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/sim/simtest"
)

// TestProfiles checks the answers that differ between Talos lines
// (TALOS-FIDELITY.md §1, §3).
func TestProfiles(t *testing.T) {
	for _, tc := range []struct {
		profile string
		// a maintenance node asked for Bootstrap
		maintCode codes.Code
		maintMsg  string
		// a configured worker asked for Bootstrap
		workerCode codes.Code
		workerMsg  string
		// a configured node asked to apply with mode REBOOT
		rebootCode codes.Code
	}{
		{"v1.12", codes.Unimplemented, "method Bootstrap not implemented", codes.FailedPrecondition, "bootstrap can only be performed on a control plane node", codes.OK},
		{"v1.13", codes.PermissionDenied, "not authorized", codes.FailedPrecondition, "bootstrap can only be performed on a control plane node", codes.OK},
		{"v1.14", codes.PermissionDenied, "not authorized", codes.Unimplemented, "bootstrap is only available on control plane nodes", codes.Unimplemented},
	} {
		t.Run(tc.profile, func(t *testing.T) {
			ctx, cancel := runningContext(time.Minute)
			defer cancel()

			sc := &scenario.Scenario{Name: "profiles", Talos: tc.profile, TimeScale: 60, Cluster: scenario.Cluster{ControlPlanes: 1, Workers: 1}}
			c := simtest.FromScenario(t, sc, 1)
			cp, w := c.Nodes()[0], c.Nodes()[1]

			err := insecureClient(t, ctx, cp).Bootstrap(ctx, &machine.BootstrapRequest{})
			if status.Code(err) != tc.maintCode || !strings.Contains(err.Error(), tc.maintMsg) {
				t.Errorf("maintenance bootstrap: %v, want %s %q", err, tc.maintCode, tc.maintMsg)
			}

			apply(t, ctx, w)
			wc := secure(t, ctx, c, w)

			eventually(t, 30*time.Second, func() error {
				err := wc.Bootstrap(ctx, &machine.BootstrapRequest{})
				if status.Code(err) == tc.workerCode && strings.Contains(err.Error(), tc.workerMsg) {
					return nil
				}

				return err
			})

			_, err = wc.ApplyConfiguration(ctx, &machine.ApplyConfigurationRequest{Data: w.Config, Mode: machine.ApplyConfigurationRequest_REBOOT}) //nolint:staticcheck
			if status.Code(err) != tc.rebootCode {
				t.Errorf("apply with mode REBOOT: %v, want %s", err, tc.rebootCode)
			}
		})
	}
}
