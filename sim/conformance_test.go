package sim_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/talchaos/talchaos/harness/chaos"
	"github.com/talchaos/talchaos/harness/clock"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/talosclient"
	"github.com/talchaos/talchaos/harness/target"
	"github.com/talchaos/talchaos/sim/simtest"
)

// Conformance of RPCs a user's script calls around a bootstrap, each row the
// exact gRPC code and text Talos v1.12.6 answers, with the source it models
// (paths in github.com/siderolabs/talos@v1.12.6).
func TestConformanceOfEtcdAndMaintenanceRPCs(t *testing.T) {
	ctx, cancel := runningContext(3 * time.Minute)
	defer cancel()

	sc := &scenario.Scenario{
		Name: "conformance", Talos: scenario.DefaultProfile, TimeScale: 60,
		Cluster: scenario.Cluster{ControlPlanes: 2, Workers: 2},
	}

	c := simtest.FromScenario(t, sc, 1)
	nodes := c.Nodes()
	cp1, cp2, w2 := nodes[0], nodes[1], nodes[3]

	for _, n := range []int{0, 1, 2} {
		apply(t, ctx, nodes[n])
	}

	secure := func(i int) *client.Client { return secureAt(t, ctx, c, nodes[i].Endpoint) }

	c1, c2, cw := secure(0), secure(1), secure(2)

	eventually(t, 30*time.Second, func() error { return c1.Bootstrap(ctx, &machine.BootstrapRequest{}) })

	// Both control planes voters.
	eventually(t, 90*time.Second, func() error {
		resp, err := c1.EtcdMemberList(ctx, &machine.EtcdMemberListRequest{})
		if err != nil {
			return err
		}

		voters := 0

		for _, m := range resp.Messages[0].Members {
			if !m.IsLearner && m.Hostname != "" {
				voters++
			}
		}

		if voters != 2 {
			return fmt.Errorf("%d voters", voters)
		}

		return nil
	})

	maint, err := talosclient.Insecure(ctx, w2.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer maint.Close() //nolint:errcheck

	const (
		maintenanceSrc = "internal/app/maintenance/server.go assertAdminRole"
		machineSrc     = "internal/app/machined/internal/server/v1alpha1/v1alpha1_server.go"
	)

	rows := []struct {
		name, source string
		call         func() error
		code         codes.Code
		text         string
	}{
		{"Reset in maintenance", maintenanceSrc, func() error {
			_, err := maint.MachineClient.Reset(ctx, &machine.ResetRequest{})
			return err
		}, codes.Unimplemented, "API is not implemented in maintenance mode"},
		{"Upgrade in maintenance", maintenanceSrc, func() error {
			_, err := maint.MachineClient.Upgrade(ctx, &machine.UpgradeRequest{})
			return err
		}, codes.Unimplemented, "API is not implemented in maintenance mode"},
		{"MetaWrite in maintenance", maintenanceSrc, func() error {
			_, err := maint.MachineClient.MetaWrite(ctx, &machine.MetaWriteRequest{Key: 10})
			return err
		}, codes.Unimplemented, "API is not implemented in maintenance mode"},
		{"EtcdAlarmList on a worker", machineSrc + " EtcdAlarmList, checkControlplane", func() error {
			_, err := cw.MachineClient.EtcdAlarmList(ctx, &emptypb.Empty{})
			return err
		}, codes.Unimplemented, "etcd alarm list is only available on control plane nodes"},
		{"EtcdAlarmDisarm on a worker", machineSrc + " EtcdAlarmDisarm (checks as \"etcd alarm list\")", func() error {
			_, err := cw.MachineClient.EtcdAlarmDisarm(ctx, &emptypb.Empty{})
			return err
		}, codes.Unimplemented, "etcd alarm list is only available on control plane nodes"},
		{"EtcdDefragment on a worker", machineSrc + " EtcdDefragment", func() error {
			_, err := cw.MachineClient.EtcdDefragment(ctx, &emptypb.Empty{})
			return err
		}, codes.Unimplemented, "etcd defragment is only available on control plane nodes"},
		{"EtcdForfeitLeadership on a worker", machineSrc + " EtcdForfeitLeadership", func() error {
			_, err := cw.MachineClient.EtcdForfeitLeadership(ctx, &machine.EtcdForfeitLeadershipRequest{})
			return err
		}, codes.Unimplemented, "etcd forfeit leadership is only available on control plane nodes"},
		{"EtcdAlarmList on a control plane", machineSrc + " EtcdAlarmList", func() error {
			resp, err := c1.MachineClient.EtcdAlarmList(ctx, &emptypb.Empty{})
			if err == nil && len(resp.Messages[0].MemberAlarms) != 0 {
				return fmt.Errorf("alarms on a healthy cluster: %v", resp.Messages[0].MemberAlarms)
			}

			return err
		}, codes.OK, ""},
		{"EtcdAlarmDisarm on a control plane", machineSrc + " EtcdAlarmDisarm", func() error {
			_, err := c1.MachineClient.EtcdAlarmDisarm(ctx, &emptypb.Empty{})
			return err
		}, codes.OK, ""},
		{"EtcdDefragment on a control plane", machineSrc + " EtcdDefragment", func() error {
			_, err := c2.MachineClient.EtcdDefragment(ctx, &emptypb.Empty{})
			return err
		}, codes.OK, ""},
		// The image-missing fault's effect; healed, the next row's
		// refusal comes after the pull.
		{"Upgrade to an image the registry lacks", machineSrc + " Upgrade; internal/pkg/install/pull.go, internal/pkg/containers/image/image.go Pull", func() error {
			heal, err := chaos.ImageMissing{Image: "ghcr.io/siderolabs/installer:v1.12.6"}.Inject(ctx, &chaos.Env{Cluster: c, Clock: clock.New(60), Seed: 1})
			if err != nil {
				return err
			}

			defer heal() //nolint:errcheck

			injected.Store(chaos.ImageMissing{}.Kind(), true)

			_, err = c1.MachineClient.Upgrade(ctx, &machine.UpgradeRequest{Image: "ghcr.io/siderolabs/installer:v1.12.6"})

			return err
		}, codes.Unknown, `error validating installer image "ghcr.io/siderolabs/installer:v1.12.6": 1 error(s) occurred:` + "\n\t" +
			`failed to pull image "ghcr.io/siderolabs/installer:v1.12.6": failed to resolve reference "ghcr.io/siderolabs/installer:v1.12.6": ghcr.io/siderolabs/installer:v1.12.6: not found`},
		{"Upgrade of one of two members", machineSrc + " Upgrade; internal/pkg/etcd/etcd.go ValidateForUpgrade", func() error {
			_, err := c1.MachineClient.Upgrade(ctx, &machine.UpgradeRequest{Image: "ghcr.io/siderolabs/installer:v1.12.6"})
			return err
		}, codes.Unknown, "error validating etcd for upgrade: etcd member count(2) is insufficient to maintain quorum if upgrade commences"},
		{"ServiceRestart etcd", machineSrc + " ServiceRestart, pkg/system/system.go APIRestart", func() error {
			_, err := c1.MachineClient.ServiceRestart(ctx, &machine.ServiceRestartRequest{Id: "etcd"})
			return err
		}, codes.Unknown, `service "etcd" doesn't support restart operation via API`},
		{"ServiceStop etcd", machineSrc + " ServiceStop, APIStop", func() error {
			_, err := c1.MachineClient.ServiceStop(ctx, &machine.ServiceStopRequest{Id: "etcd"})
			return err
		}, codes.Unknown, `service "etcd" doesn't support stop operation via API`},
		{"ServiceStart of a running etcd", machineSrc + " ServiceStart, APIStart (already started, skip)", func() error {
			resp, err := c1.MachineClient.ServiceStart(ctx, &machine.ServiceStartRequest{Id: "etcd"})
			if err == nil && resp.Messages[0].Resp != `Service "etcd" started` {
				return fmt.Errorf("reply %q", resp.Messages[0].Resp)
			}

			return err
		}, codes.OK, ""},
		{"ServiceRestart of no such service", machineSrc + " ServiceRestart, IsRunning", func() error {
			_, err := c1.MachineClient.ServiceRestart(ctx, &machine.ServiceRestartRequest{Id: "nope"})
			return err
		}, codes.Unknown, `service "nope" not defined`},
		{"ServiceRestart kubelet", machineSrc + " ServiceRestart, services/kubelet.go APIRestartAllowed", func() error {
			resp, err := cw.MachineClient.ServiceRestart(ctx, &machine.ServiceRestartRequest{Id: "kubelet"})
			if err == nil && resp.Messages[0].Resp != `Service "kubelet" restarted` {
				return fmt.Errorf("reply %q", resp.Messages[0].Resp)
			}

			return err
		}, codes.OK, ""},
	}

	for _, r := range rows {
		err := r.call()

		if st, _ := status.FromError(err); st.Code() != r.code || (r.text != "" && st.Message() != r.text) || (r.code == codes.OK && err != nil) {
			t.Errorf("%s (%s): got %v, want %s %q", r.name, r.source, err, r.code, r.text)
		}
	}

	// The restarted kubelet went through Stopping and runs again.
	eventually(t, 30*time.Second, func() error {
		svcs, err := cw.ServiceList(ctx)
		if err != nil {
			return err
		}

		for _, svc := range svcs.Messages[0].Services {
			if svc.Id != "kubelet" {
				continue
			}

			var states []string
			for _, e := range svc.Events.Events {
				states = append(states, e.State)
			}

			if svc.State != "Running" || !slices.Contains(states, "Stopping") {
				return fmt.Errorf("kubelet %s, events %v", svc.State, states)
			}
		}

		return nil
	})

	// EtcdForfeitLeadership (internal/pkg/etcd ForfeitLeadership): on the
	// leader it moves leadership to the first other member and names it; on a
	// follower it does nothing and names no one.
	leaderID := func() (uint64, map[uint64]*client.Client) {
		st1, err := c1.EtcdStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}

		st2, err := c2.EtcdStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}

		return st1.Messages[0].MemberStatus.Leader, map[uint64]*client.Client{
			st1.Messages[0].MemberStatus.MemberId: c1, st2.Messages[0].MemberStatus.MemberId: c2,
		}
	}

	leader, byID := leaderID()

	var follower *client.Client

	for id, cl := range byID {
		if id != leader {
			follower = cl
		}
	}

	resp, err := follower.EtcdForfeitLeadership(ctx, &machine.EtcdForfeitLeadershipRequest{})
	if err != nil || resp.Messages[0].Member != "" {
		t.Errorf("forfeit on a follower: %v %v, want no member named", resp, err)
	}

	resp, err = byID[leader].EtcdForfeitLeadership(ctx, &machine.EtcdForfeitLeadershipRequest{})

	names := map[*client.Client]string{c1: cp1.Name, c2: cp2.Name}
	if err != nil || resp.Messages[0].Member != names[follower] {
		t.Fatalf("forfeit on the leader: %v %v, want leadership moved to %s", resp, err, names[follower])
	}

	eventually(t, 30*time.Second, func() error {
		if now, _ := leaderID(); now == leader {
			return fmt.Errorf("%x still leads", leader)
		}

		return nil
	})

	// EtcdLeaveCluster (internal/pkg/etcd LeaveCluster): workers refuse it;
	// a control plane leaves the member list, stops etcd for good and drops
	// its data.
	if _, err := cw.MachineClient.EtcdLeaveCluster(ctx, &machine.EtcdLeaveClusterRequest{}); status.Code(err) != codes.Unimplemented ||
		status.Convert(err).Message() != "etcd leave is only available on control plane nodes" {
		t.Errorf("leave on a worker: %v", err)
	}

	if _, err := c2.MachineClient.EtcdLeaveCluster(ctx, &machine.EtcdLeaveClusterRequest{}); err != nil {
		t.Fatalf("leave on %s: %v", cp2.Name, err)
	}

	list, err := c1.EtcdMemberList(ctx, &machine.EtcdMemberListRequest{})
	if err != nil || len(list.Messages[0].Members) != 1 || list.Messages[0].Members[0].Hostname != cp1.Name {
		t.Errorf("members after %s left: %v %v", cp2.Name, list, err)
	}

	svcs, err := c2.ServiceList(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// A running etcd is stopped with SIGTERM, then finishes
	// (runner/containerd/containerd.go Run, system.go Start).
	for _, svc := range svcs.Messages[0].Services {
		if svc.Id != "etcd" {
			continue
		}

		evs := svc.Events.Events
		if svc.State != "Finished" || len(evs) < 2 ||
			!strings.HasPrefix(evs[len(evs)-2].Msg, "Sending SIGTERM to task etcd (PID ") || !strings.HasSuffix(evs[len(evs)-2].Msg, ", container etcd)") ||
			evs[len(evs)-2].State != "Stopping" || evs[len(evs)-1].Msg != "Service finished successfully" {
			t.Errorf("etcd on %s after leaving: %s %v, want Stopping \"Sending SIGTERM to task etcd (PID n, container etcd)\" then Finished", cp2.Name, svc.State, evs)
		}
	}

	// apid's director (internal/app/apid/pkg/director/director.go) refuses a
	// `node` given twice and one-to-many COSI calls; one-to-many unary calls
	// answer per node.
	twice := metadata.AppendToOutgoingContext(ctx, "node", cp1.Address, "node", cp2.Address)
	if _, err := c1.Version(twice); status.Code(err) != codes.InvalidArgument || status.Convert(err).Message() != "node metadata must be single-valued" {
		t.Errorf("node given twice: %v", err)
	}

	many := client.WithNodes(ctx, cp1.Address, cp2.Address)
	if _, err := safe.StateGetByID[*runtime.MachineStatus](many, c1.COSI, runtime.MachineStatusID); status.Code(err) != codes.InvalidArgument ||
		status.Convert(err).Message() != "one-2-many proxying is not supported for COSI methods" {
		t.Errorf("COSI to two nodes: %v", err)
	}

	versions, err := c1.Version(many)
	if err != nil || len(versions.Messages) != 2 {
		t.Errorf("Version of two nodes: %v %v", versions, err)
	}

	// Shutdown (v1alpha1_server.go Shutdown): the reply names an actor, then
	// the node goes down and stays down.
	resp2, err := cw.MachineClient.Shutdown(ctx, &machine.ShutdownRequest{})
	if err != nil || resp2.Messages[0].ActorId == "" {
		t.Fatalf("shutdown: %v %v", resp2, err)
	}

	eventually(t, 30*time.Second, func() error {
		if talosclient.Answers(ctx, nodes[2].Endpoint) {
			return fmt.Errorf("%s still answers", nodes[2].Name)
		}

		return nil
	})
}

// ApplyConfiguration on a configured node (v1alpha1_server.go
// ApplyConfiguration, runtime/v1alpha1/v1alpha1_runtime.go
// CanApplyImmediate): the mode follows what the change touches.
func TestConformanceOfApplyModes(t *testing.T) {
	ctx, cancel := runningContext(2 * time.Minute)
	defer cancel()

	n, cl := configuredNode(t, ctx)

	patch := func(lines string) []byte {
		out := strings.Replace(string(n.Config), "\nmachine:\n", "\nmachine:\n"+lines, 1)
		if out == string(n.Config) {
			t.Fatal("no machine section in the config")
		}

		return []byte(out)
	}

	needsReboot := patch("    env:\n        TALCHAOS: \"1\"\n")
	live := patch("    sysctls:\n        net.core.somaxconn: \"65535\"\n")

	type want struct {
		code    codes.Code
		mode    machine.ApplyConfigurationRequest_Mode
		details string // prefix of ModeDetails, or of the error message
	}

	for _, r := range []struct {
		name string
		req  *machine.ApplyConfigurationRequest
		want want
	}{
		{"AUTO, nothing changed", &machine.ApplyConfigurationRequest{Data: n.Config, Mode: machine.ApplyConfigurationRequest_AUTO},
			want{codes.OK, machine.ApplyConfigurationRequest_NO_REBOOT, "Applied configuration without a reboot"}},
		{"NO_REBOOT of a change that needs a reboot", &machine.ApplyConfigurationRequest{Data: needsReboot, Mode: machine.ApplyConfigurationRequest_NO_REBOOT},
			want{codes.InvalidArgument, 0, "this config change can't be applied in immediate mode\ndiff:\n"}},
		{"TRY of a change that needs a reboot", &machine.ApplyConfigurationRequest{Data: needsReboot, Mode: machine.ApplyConfigurationRequest_TRY},
			want{codes.InvalidArgument, 0, "this config change can't be applied in immediate mode"}},
		{"AUTO dry run of a change that needs a reboot", &machine.ApplyConfigurationRequest{Data: needsReboot, Mode: machine.ApplyConfigurationRequest_AUTO, DryRun: true},
			want{codes.OK, machine.ApplyConfigurationRequest_REBOOT, "Dry run summary:\nApplied configuration with a reboot (skipped in dry-run).\nConfig diff:\n\n"}},
		{"STAGED", &machine.ApplyConfigurationRequest{Data: needsReboot, Mode: machine.ApplyConfigurationRequest_STAGED},
			want{codes.OK, machine.ApplyConfigurationRequest_STAGED, "Staged configuration to be applied after the next reboot"}},
		{"TRY of a live change", &machine.ApplyConfigurationRequest{Data: live, Mode: machine.ApplyConfigurationRequest_TRY},
			want{codes.OK, machine.ApplyConfigurationRequest_TRY, "Applied configuration without a reboot\nThe config is applied in 'try' mode and will be automatically reverted back in 1m0s"}},
	} {
		resp, err := cl.ApplyConfiguration(ctx, r.req)

		switch {
		case status.Code(err) != r.want.code:
			t.Errorf("%s: %v, want %s", r.name, err, r.want.code)
		case err != nil:
			if !strings.HasPrefix(status.Convert(err).Message(), r.want.details) {
				t.Errorf("%s: %q, want it to start %q", r.name, status.Convert(err).Message(), r.want.details)
			}
		case resp.Messages[0].Mode != r.want.mode || !strings.HasPrefix(resp.Messages[0].ModeDetails, r.want.details):
			t.Errorf("%s: mode %s %q, want %s %q", r.name, resp.Messages[0].Mode, resp.Messages[0].ModeDetails, r.want.mode, r.want.details)
		}
	}
}

// A configured node refuses an insecure client with the TLS alert
// "certificate required", every time, through the node's proxy too (the
// error users match on: field report FR-004, talos #10185).
func TestInsecureClientGetsCertificateRequiredEveryTime(t *testing.T) {
	ctx, cancel := runningContext(2 * time.Minute)
	defer cancel()

	n, _ := configuredNode(t, ctx)

	for i := range 20 {
		ins, err := talosclient.Insecure(ctx, n.Endpoint)
		if err != nil {
			t.Fatal(err)
		}

		_, err = ins.ApplyConfiguration(ctx, &machine.ApplyConfigurationRequest{Data: n.Config, Mode: machine.ApplyConfigurationRequest_AUTO})
		ins.Close() //nolint:errcheck

		if !strings.Contains(status.Convert(err).Message(), "tls: certificate required") {
			t.Errorf("try %d: %v, want tls: certificate required", i+1, err)
		}
	}
}

// A node whose services never all come up fails its boot after Talos's 70
// minutes, counts down and reboots (v1alpha1_sequencer_tasks.go
// startAllServices, machined main.go handle): here a lone control plane that
// is never bootstrapped, its etcd join loop failing after 30 minutes.
func TestBootTimeoutReboots(t *testing.T) {
	ctx, cancel := runningContext(2 * time.Minute)
	defer cancel()

	sc := newScenario(1)
	sc.TimeScale = 1000

	c := simtest.FromScenario(t, sc, 1)
	n := c.Nodes()[0]
	apply(t, ctx, n)

	want := []string{
		"task startAllServices (1/1): failed: context deadline exceeded",
		"error running phase 9 in boot sequence: task 1/1: failed, context deadline exceeded",
		"rebooting in 10 seconds",
		"rebooting in 0 seconds",
	}

	eventually(t, time.Minute, func() error {
		lines := strings.Join(c.Node(n.Name).Log("machined").Lines(), "\n")

		for _, w := range want {
			if !strings.Contains(lines, w) {
				return fmt.Errorf("no %q in the machined log yet", w)
			}
		}

		return nil
	})

	// It comes back and waits to join again (its data directory is empty).
	cl := secureAt(t, ctx, c, n.Endpoint)

	eventually(t, time.Minute, func() error {
		lines := strings.Join(c.Node(n.Name).Log("machined").Lines(), "\n")
		if strings.Contains(lines, "rebooting in 0 seconds") || !strings.Contains(lines, "etcd is waiting to join the cluster") {
			return errors.New("not rebooted into a new join loop yet")
		}

		_, err := cl.Version(ctx)

		return err
	})
}

// A graceful reset leaves etcd first (v1alpha1_sequencer.go Reset, phase 4
// "leave"; v1alpha1_sequencer_tasks.go LeaveEtcd; internal/pkg/etcd
// LeaveCluster): on the cluster's last member etcd refuses the removal, the
// reset sequence fails and the node stays as it is, running; a second
// control plane leaves, is reset and comes back to maintenance.
func TestGracefulResetLeavesEtcdOrAborts(t *testing.T) {
	ctx, cancel := runningContext(3 * time.Minute)
	defer cancel()

	c := simtest.FromScenario(t, newScenario(2), 1)
	nodes := c.Nodes()
	cp1, cp2 := nodes[0], nodes[1]

	apply(t, ctx, cp1)

	c1 := secureAt(t, ctx, c, cp1.Endpoint)

	eventually(t, 30*time.Second, func() error { return c1.Bootstrap(ctx, &machine.BootstrapRequest{}) })
	eventually(t, 30*time.Second, func() error { return etcdHealthy(ctx, c1, true) })

	if err := c1.Reset(ctx, true, false); err != nil {
		t.Fatalf("graceful reset of the last member: %v (the RPC is accepted; the sequence fails)", err)
	}

	const failed = "error running phase 4 in reset sequence: task 1/1: failed, failed to leave cluster: "

	eventually(t, time.Minute, func() error {
		lines := strings.Join(c.Node(cp1.Name).Log("machined").Lines(), "\n")
		if !strings.Contains(lines, failed) {
			return fmt.Errorf("no %q in the machined log", failed)
		}

		return nil
	})

	// Still there, still a member, and saying "rebooting": machined's
	// status controller takes the failed sequence's FATAL error as a
	// reboot (machine_status.go: "fatal errors lead to reboot"), which the
	// Reset API does not do.
	if err := etcdHealthy(ctx, c1, true); err != nil {
		t.Errorf("after the failed reset: %v", err)
	}

	eventually(t, 30*time.Second, func() error {
		ms, err := safe.StateGetByID[*runtime.MachineStatus](ctx, c1.COSI, runtime.MachineStatusID)
		if err != nil {
			return err
		}

		if st := ms.TypedSpec().Stage; st != runtime.MachineStageRebooting {
			return fmt.Errorf("stage %s after the failed reset, want rebooting", st)
		}

		// No readiness checks outside booting and running.
		if s := ms.TypedSpec().Status; !s.Ready || len(s.UnmetConditions) > 0 {
			return fmt.Errorf("status ready=%v %+v while rebooting, want ready with nothing unmet", s.Ready, s.UnmetConditions)
		}

		return nil
	})

	// A second member leaves when reset gracefully.
	apply(t, ctx, cp2)
	waitVoters(t, ctx, c1, 2)

	c2 := secureAt(t, ctx, c, cp2.Endpoint)

	// Its stages, as a watch on it sees them until its API goes away.
	stages := watchStages(t, ctx, c2)

	// etcd refuses to remove a member it has not seen connected for 5 s
	// ("unhealthy cluster"): LeaveCluster retries that.
	if err := c2.Reset(ctx, true, false); err != nil {
		t.Fatalf("graceful reset of %s: %v", cp2.Name, err)
	}

	eventually(t, time.Minute, func() error {
		list, err := c1.EtcdMemberList(ctx, &machine.EtcdMemberListRequest{})
		if err != nil {
			return err
		}

		if n := len(list.Messages[0].Members); n != 1 {
			return fmt.Errorf("%d members after %s's graceful reset", n, cp2.Name)
		}

		return nil
	})

	// It said "resetting" from the sequence's start, while it left etcd
	// (machine_status.go: the reset sequence's START), not only as it went.
	// The watch ends when its API does, a moment after the leave.
	if seen := stages(); !slices.Contains(seen, runtime.MachineStageResetting) {
		t.Errorf("%s's stages while it reset: %v, want resetting among them", cp2.Name, seen)
	}
}

// configuredNode is a one-node cluster's node, configured, and a talosconfig
// client that it answers.
func configuredNode(t *testing.T, ctx context.Context) (target.Node, *client.Client) {
	t.Helper()

	c := simtest.FromScenario(t, newScenario(1), 1)
	n := c.Nodes()[0]
	apply(t, ctx, n)

	cl := secureAt(t, ctx, c, n.Endpoint)

	eventually(t, 30*time.Second, func() error { _, err := cl.Version(ctx); return err })

	return n, cl
}

// watchStages watches the node's MachineStatus; the function it returns
// waits for the watch to end (the node's API gone, or 30 s) and returns the
// stages it saw, each change once.
func watchStages(t *testing.T, ctx context.Context, cl *client.Client) func() []runtime.MachineStage {
	t.Helper()

	wctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)

	ch := make(chan safe.WrappedStateEvent[*runtime.MachineStatus], 64)
	if err := safe.StateWatch(wctx, cl.COSI, runtime.NewMachineStatus().Metadata(), ch); err != nil {
		t.Fatalf("watch: %v", err)
	}

	done := make(chan []runtime.MachineStage, 1)

	go func() {
		var seen []runtime.MachineStage

		defer func() { done <- seen }()

		for {
			select {
			case <-wctx.Done():
				return
			case ev := <-ch:
				r, err := ev.Resource()
				if err != nil {
					return
				}

				if st := r.TypedSpec().Stage; len(seen) == 0 || seen[len(seen)-1] != st {
					seen = append(seen, st)
				}
			}
		}
	}()

	return func() []runtime.MachineStage {
		select {
		case seen := <-done:
			return seen
		case <-time.After(30 * time.Second):
			cancel()

			return <-done
		}
	}
}
