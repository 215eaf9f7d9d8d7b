package sim_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/talchaos/talchaos/harness/chaos"
	"github.com/talchaos/talchaos/harness/clock"
	"github.com/talchaos/talchaos/harness/talosclient"
	"github.com/talchaos/talchaos/sim/simtest"
)

// bootID is the node's kernel boot ID.
var bootID = talosclient.BootID

// actorEvents collects the events of one actor from a node until the task
// stopAllServices starts (apid stops there) or the stream ends.
func actorEvents(t *testing.T, ctx context.Context, cl *client.Client, actorID string) []client.Event {
	t.Helper()

	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()

	ch := make(chan client.EventResult)
	if err := cl.EventsWatchV2(ctx, ch, client.WithTailEvents(-1), client.WithActorID(actorID)); err != nil {
		t.Fatal(err)
	}

	var out []client.Event

	for {
		select {
		case <-ctx.Done():
			return out
		case r := <-ch:
			if r.Error != nil {
				return out
			}

			out = append(out, r.Event)

			if te, ok := r.Event.Payload.(*machine.TaskEvent); ok && te.GetTask() == "stopAllServices" {
				return out
			}
		}
	}
}

// An upgrade as v1.12.6 runs it on metal: the reply acknowledges it, the
// sequence's phases and tasks come as events for the call's actor, the node
// reboots (a new boot ID), reports the installer's version, and its etcd
// member comes back from its data directory: the same member, a voter.
func TestUpgradeRebootsIntoTheInstalledVersion(t *testing.T) {
	ctx, cancel := runningContext(3 * time.Minute)
	defer cancel()

	c := formed(t, ctx, 3)
	nodes := c.Nodes()
	cl1 := secure(t, ctx, c, nodes[0])
	cl2 := secure(t, ctx, c, nodes[1])

	before, err := bootID(ctx, cl2)
	if err != nil {
		t.Fatal(err)
	}

	id := memberID(ctx, t, cl2)

	// Talos refuses an upgrade while a member's health check does not answer
	// in time (ValidateForUpgrade: "etcd member … is not healthy"), which a
	// loaded machine can make happen just after forming: ask again, as an
	// operator would, while that is the answer (or while a refused try's
	// mutex session, whose unlock ran out of time, keeps its 60 s lease).
	var resp *machine.UpgradeResponse

	eventually(t, 90*time.Second, func() error {
		resp, err = cl2.UpgradeWithOptions(ctx, client.WithUpgradeImage("ghcr.io/siderolabs/installer:v1.12.7"))
		if err != nil && !strings.Contains(err.Error(), "all members must be healthy to perform an upgrade") &&
			!strings.Contains(err.Error(), "mutex: Locked by another session") {
			t.Fatal(err)
		}

		return err
	})

	if got := resp.Messages[0].GetAck(); got != "Upgrade request received" {
		t.Errorf("ack %q", got)
	}

	actor := resp.Messages[0].GetActorId()

	var phases []string

	for _, e := range actorEvents(t, ctx, cl2, actor) {
		if e.ActorID != actor {
			t.Errorf("event of actor %q in a watch of %q", e.ActorID, actor)
		}

		if p, ok := e.Payload.(*machine.PhaseEvent); ok && p.GetAction() == machine.PhaseEvent_START {
			phases = append(phases, p.GetPhase())
		}
	}

	want := []string{"drain", "cleanup", "dbus", "stopServices", "unmount", "unmountBind", "unmountSystem", "volumeFinalize", "upgrade", "meta", "kexec", "stopEverything"}
	if !slices.Equal(phases, want) {
		t.Errorf("phases %v, want %v", phases, want)
	}

	eventually(t, 2*time.Minute, func() error {
		after, err := bootID(ctx, cl2)
		if err != nil {
			return err
		}

		if after == before {
			return errors.New("boot ID unchanged")
		}

		v, err := cl2.Version(ctx)
		if err != nil {
			return err
		}

		if tag := v.Messages[0].GetVersion().GetTag(); tag != "v1.12.7" {
			return fmt.Errorf("version %s after the upgrade", tag)
		}

		return nil
	})

	waitVoters(t, ctx, cl1, 3)

	if got := memberID(ctx, t, cl2); got != id {
		t.Errorf("member %x after the upgrade, was %x: etcd did not start from its data directory", got, id)
	}

	// The rebooted node's events start afresh and say it is ready.
	eventually(t, time.Minute, func() error {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()

		ch := make(chan client.EventResult)
		if err := cl2.EventsWatchV2(ctx, ch, client.WithTailEvents(-1)); err != nil {
			return err
		}

		for {
			select {
			case <-ctx.Done():
				return errors.New("no MachineStatusEvent running and ready")
			case r := <-ch:
				if r.Error != nil {
					return r.Error
				}

				if ms, ok := r.Event.Payload.(*machine.MachineStatusEvent); ok &&
					ms.GetStage() == machine.MachineStatusEvent_RUNNING && ms.GetStatus().GetReady() {
					return nil
				}

				if _, ok := r.Event.Payload.(*machine.PhaseEvent); ok {
					return errors.New("the previous boot's events are still there")
				}
			}
		}
	})

}

// The upgrade's refusals, each with machined's text: an image reference
// that does not parse, a staged upgrade (not simulated), and a cluster with
// a member down (ValidateForUpgrade's health check of every member). Two
// members are refused in TestConformanceOfEtcdAndMaintenanceRPCs.
func TestUpgradeRefusals(t *testing.T) {
	needLong(t)

	ctx, cancel := runningContext(3 * time.Minute)
	defer cancel()

	c := formed(t, ctx, 3)
	nodes := c.Nodes()
	cl1 := secure(t, ctx, c, nodes[0])

	_, err := cl1.UpgradeWithOptions(ctx, client.WithUpgradeImage("ghcr.io/Siderolabs/installer:v1.12.7"))
	wantStatus(t, "bad image", err, codes.Unknown,
		`error validating installer image "ghcr.io/Siderolabs/installer:v1.12.7": failed to parse image reference "ghcr.io/Siderolabs/installer:v1.12.7": invalid reference format: repository name (Siderolabs/installer) must be lowercase`)

	_, err = cl1.UpgradeWithOptions(ctx, client.WithUpgradeImage("ghcr.io/siderolabs/installer:v1.12.7"), client.WithUpgradeStage(true))
	wantStatus(t, "staged", err, codes.Unimplemented, "staged upgrades are not simulated")

	// An image the registry lacks, named short: pulled by its normalized
	// name, and refused with go-retry's set of the two pulls' one error.
	heal, err := chaos.ImageMissing{Image: "installer:v1.12.7"}.Inject(ctx, &chaos.Env{Cluster: c, Clock: clock.New(60), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}

	_, err = cl1.UpgradeWithOptions(ctx, client.WithUpgradeImage("installer:v1.12.7"))
	wantStatus(t, "image missing", err, codes.Unknown,
		`error validating installer image "installer:v1.12.7": 1 error(s) occurred:`+"\n\t"+`failed to pull image "docker.io/library/installer:v1.12.7": `+
			`failed to resolve reference "docker.io/library/installer:v1.12.7": docker.io/library/installer:v1.12.7: not found`)

	if err := heal(); err != nil {
		t.Fatal(err)
	}

	cl3 := secure(t, ctx, c, nodes[2])
	id3 := memberID(ctx, t, cl3)

	if err := cl3.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	eventually(t, time.Minute, func() error {
		_, err := cl1.UpgradeWithOptions(ctx, client.WithUpgradeImage("ghcr.io/siderolabs/installer:v1.12.7"))
		prefix := fmt.Sprintf("error validating etcd for upgrade: etcd member %016x is not healthy; all members must be healthy to perform an upgrade: ", id3)

		// The quorum check's deadline: grpc-go gives the wrapped etcd
		// error's code, as it does on a real node.
		if status.Code(err) != codes.DeadlineExceeded || status.Convert(err).Message() != prefix+"context deadline exceeded" {
			return fmt.Errorf("upgrade with cp3 down: %v, want DeadlineExceeded %q", err, prefix+"context deadline exceeded")
		}

		return nil
	})

	// --force skips the etcd checks.
	if _, err := cl1.UpgradeWithOptions(ctx, client.WithUpgradeImage("ghcr.io/siderolabs/installer:v1.12.7"), client.WithUpgradeForce(true)); err != nil {
		t.Errorf("forced upgrade: %v", err)
	}
}

// `talosctl shutdown` and `reset` wait for the stopAllServices task's event
// (StopAllServicesEventFn): the sequence's events reach a client watching
// through another node's apid up to that task, then the stream ends, as
// apid stopping last lets it.
func TestShutdownEventsReachTheWatcher(t *testing.T) {
	ctx, cancel := runningContext(2 * time.Minute)
	defer cancel()

	sc := newScenario(1)
	sc.Cluster.Workers = 1

	c := simtest.FromScenario(t, sc, 1)
	nodes := c.Nodes()
	cl := applyAndBootstrap(t, ctx, c, nodes[0].Endpoint)
	waitVoters(t, ctx, cl, 1)

	w1 := client.WithNode(ctx, nodes[1].Address)

	eventually(t, 30*time.Second, func() error { _, err := cl.Version(w1); return err })

	ch := make(chan client.EventResult)
	if err := cl.EventsWatchV2(w1, ch); err != nil {
		t.Fatal(err)
	}

	if err := cl.Shutdown(w1); err != nil {
		t.Fatal(err)
	}

	var tasks []string

	for {
		select {
		case <-ctx.Done():
			t.Fatalf("the stream did not end; tasks %v", tasks)
		case r := <-ch:
			if r.Error != nil {
				if len(tasks) == 0 || tasks[len(tasks)-1] != "stopAllServices" || !errors.Is(r.Error, io.EOF) && status.Code(r.Error) != codes.Unavailable {
					t.Errorf("stream ended with %v after tasks %v, want it to end after stopAllServices", r.Error, tasks)
				}

				if !slices.Contains(tasks, "storeShutdownEmergency") {
					t.Errorf("tasks %v, want the shutdown sequence's", tasks)
				}

				return
			}

			if te, ok := r.Event.Payload.(*machine.TaskEvent); ok && te.GetAction() == machine.TaskEvent_START {
				tasks = append(tasks, te.GetTask())
			}
		}
	}
}

// long runs the tests make test leaves to make test-long (-args -long): each
// repeats, at more cost, what a quicker test or the compatibility suite
// already shows.
var long = flag.Bool("long", false, "run the tests make test leaves to make test-long")

func needLong(t *testing.T) {
	t.Helper()

	if !*long {
		t.Skip("make test-long runs it (-args -long)")
	}
}
