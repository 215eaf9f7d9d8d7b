package sim_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/talchaos/talchaos/sim/simtest"
)

// Events, texts and status a user's script reads while a node boots, each as
// Talos v1.12.6 produces it (paths in github.com/siderolabs/talos@v1.12.6).
// Real time (scale 1): the windows asserted on are seconds long.
func TestConformanceOfServiceEventsAndStatus(t *testing.T) {
	ctx, cancel := runningContext(2 * time.Minute)
	defer cancel()

	sc := newScenario(1)
	sc.TimeScale = 1

	c := simtest.FromScenario(t, sc, 1)
	n := c.Nodes()[0]
	apply(t, ctx, n)

	sec := secureAt(t, ctx, c, n.Endpoint)

	// Bootstrap before CRI is up (v1alpha1_server.go Bootstrap,
	// v1alpha1_runtime.go IsBootstrapAllowed): the services wait for "cri"
	// for 4 s here, the API answers from the first of them.
	eventually(t, 30*time.Second, func() error {
		_, err := sec.Version(ctx)

		return err
	})

	if err := sec.Bootstrap(ctx, &machine.BootstrapRequest{}); status.Code(err) != codes.FailedPrecondition ||
		status.Convert(err).Message() != "bootstrap is not available yet" {
		t.Errorf("bootstrap before CRI is up: %v, want FailedPrecondition \"bootstrap is not available yet\"", err)
	}

	// MachineStatus while the services wait (controllers/runtime/machine_status.go):
	// the "services" check names them "not running".
	ms, err := safe.StateGetByID[*runtime.MachineStatus](ctx, sec.COSI, runtime.MachineStatusID)
	if err != nil {
		t.Fatal(err)
	}

	if got := ms.TypedSpec().Status.UnmetConditions; len(got) == 0 || got[0].Name != "services" ||
		got[0].Reason != "etcd not running, kubelet not running" {
		t.Errorf("unmet conditions while waiting: %+v, want services: etcd not running, kubelet not running", got)
	}

	// The Waiting message names the volumes first and shrinks as conditions
	// are met (service_runner.go Run and waitFor, services/etcd.go Volumes).
	eventually(t, 30*time.Second, func() error {
		s, err := etcdService(ctx, sec)
		if err != nil {
			return err
		}

		var msgs []string
		for _, e := range s.Events.Events {
			msgs = append(msgs, e.State+": "+e.Msg)
		}

		want := []string{
			"Starting: Starting service",
			`Waiting: Waiting for volumes /var/lib, ETCD to be mounted, service "cri" to be "up", time sync, network, etcd spec`,
			`Waiting: Waiting for volumes ETCD to be mounted, service "cri" to be "up", time sync, network, etcd spec`,
			`Waiting: Waiting for service "cri" to be "up", etcd spec`,
			`Waiting: Waiting for service "cri" to be "up"`,
			"Preparing: Running pre state",
		}
		if len(msgs) < len(want) || !slices.Equal(msgs[:len(want)], want) {
			return fmt.Errorf("etcd events %q, want them to start with %q", msgs, want)
		}

		return nil
	})

	eventually(t, 30*time.Second, func() error { return sec.Bootstrap(ctx, &machine.BootstrapRequest{}) })

	// Bootstrap stopped the joining etcd in its pre stage (pulling its image
	// or in the join loop): that run failed with the cancellation, then was marked "Bootstrap requested"
	// (services/etcd.go BootstrapEtcd, system.go Start); machined logs each
	// state change with its "[talos] " prefix (service_runner.go UpdateState,
	// go-kmsg SetupLogger).
	eventually(t, 30*time.Second, func() error {
		lines := c.Node(n.Name).Log("machined").Lines()
		all := strings.Join(lines, "\n")

		for _, w := range []string{
			"[talos] service[etcd](Failed): Failed to run pre stage: ",
			"[talos] service[etcd](Finished): Bootstrap requested",
		} {
			if !strings.Contains(all, w) {
				return fmt.Errorf("no %q in the machined log:\n%s", w, all)
			}
		}

		for _, l := range lines {
			if !strings.HasPrefix(l, "[talos] ") && !strings.HasPrefix(l, "\t") {
				t.Errorf("machined line without the [talos] prefix: %q", l)
			}

			if strings.HasPrefix(l, "[talos] service[etcd](Failed)") && !strings.HasSuffix(l, "context canceled") {
				t.Errorf("etcd stopped in its pre stage: %q, want it to end with the cancellation", l)
			}
		}

		return nil
	})

	// Running, health not checked yet: last_message "Unknown"
	// (health/status.go Init); MachineStatus then waits on the node only.
	sawUnknown := false

	eventually(t, 30*time.Second, func() error {
		s, err := etcdService(ctx, sec)
		if err != nil {
			return err
		}

		if s.State == "Running" && s.Health.Unknown {
			sawUnknown = true

			if s.Health.LastMessage != "Unknown" {
				t.Errorf("health of a running etcd before its first check: %q, want Unknown", s.Health.LastMessage)
			}

			ms, err := safe.StateGetByID[*runtime.MachineStatus](ctx, sec.COSI, runtime.MachineStatusID)
			if err != nil {
				return err
			}

			for _, u := range ms.TypedSpec().Status.UnmetConditions {
				if u.Name == "services" && strings.Contains(u.Reason, "etcd") {
					t.Errorf("services check names etcd whose health is not known yet: %q", u.Reason)
				}
			}
		}

		if !s.Health.Healthy {
			return fmt.Errorf("etcd %s, health %q", s.State, s.Health.LastMessage)
		}

		return nil
	})

	if !sawUnknown {
		t.Error("never saw etcd running with its health unknown (5 s before the first check)")
	}

	eventually(t, 30*time.Second, func() error {
		ms, err := safe.StateGetByID[*runtime.MachineStatus](ctx, sec.COSI, runtime.MachineStatusID)
		if err != nil {
			return err
		}

		if s := ms.TypedSpec(); s.Stage != runtime.MachineStageRunning || !s.Status.Ready || len(s.Status.UnmetConditions) > 0 {
			return fmt.Errorf("machine status %s ready=%v %+v", s.Stage, s.Status.Ready, s.Status.UnmetConditions)
		}

		return nil
	})

	v, err := sec.Version(ctx)
	if err != nil || v.Messages[0].Version.Tag != "v1.12.6" {
		t.Errorf("version: %v %v, want the tag v1.12.6", v, err)
	}
}
