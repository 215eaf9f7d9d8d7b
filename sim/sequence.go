package sim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"

	"github.com/talchaos/talchaos/harness/target"
)

// phase is one phase of a machined sequence with its one task; run is what
// the sim does for the task (nil: nothing the sim models, such as
// unmounting).
type phase struct {
	name, task string
	run        func(ctx context.Context) error
}

// errGoingDown ends a sequence at its stopAllServices task: machined stops
// apid there, so no later event reaches a client, and the node goes down.
var errGoingDown = errors.New("going down")

// sequenceStages is the stage machined's MachineStatusController sets when a
// sequence the sim runs starts (controllers/runtime/machine_status.go,
// v1.12.6): a node says it is going down from the sequence's start, while a
// graceful reset drains and leaves etcd, not only when it goes.
var sequenceStages = map[string]runtime.MachineStage{
	"reboot":   runtime.MachineStageRebooting,
	"shutdown": runtime.MachineStageShuttingDown,
	"reset":    runtime.MachineStageResetting,
	"upgrade":  runtime.MachineStageUpgrading,
}

// runSequence runs phases as machined's controller does (runtime/v1alpha1/
// v1alpha1_controller.go run, runPhase, runTask, v1.12.6): the sequence's,
// each phase's and each task's start and stop published as events for
// actorID and logged with machined's texts. It stops at the first task that
// fails and returns the controller's error for it ("error running phase N in
// SEQ sequence: task 1/1: failed, …"); a task returning errGoingDown ends it
// there without a failure (the API is about to stop).
func (n *Node) runSequence(ctx context.Context, seq string, phases []phase, actorID string) error {
	ev := n.events
	start := time.Now()

	ev.Publish(&machine.SequenceEvent{Sequence: seq, Action: machine.SequenceEvent_START}, actorID)

	if stage, ok := sequenceStages[seq]; ok {
		n.setStage(stage)
	}
	n.machined.Printf("%s sequence: %d phase(s)", seq, len(phases))

	for i, p := range phases {
		progress := fmt.Sprintf("%d/%d", i+1, len(phases))
		phaseStart := time.Now()

		n.machined.Printf("phase %s (%s): %d tasks(s)", p.name, progress, 1)
		ev.Publish(&machine.PhaseEvent{Phase: p.name, Action: machine.PhaseEvent_START}, actorID)

		// An upgrade's kexec phase: the controller's stage is rebooting.
		if seq == "upgrade" && p.name == "kexec" {
			n.setStage(runtime.MachineStageRebooting)
		}
		ev.Publish(&machine.TaskEvent{Task: p.task, Action: machine.TaskEvent_START}, actorID)
		n.machined.Printf("task %s (1/1): starting", p.task)

		var err error
		if p.run != nil {
			err = p.run(ctx)
		}

		if errors.Is(err, errGoingDown) {
			return nil
		}

		if err == nil && ctx.Err() != nil {
			err = ctx.Err()
		}

		ev.Publish(&machine.TaskEvent{Task: p.task, Action: machine.TaskEvent_STOP}, actorID)

		if err != nil {
			n.machined.Printf("task %s (1/1): failed: %s", p.task, err)
			ev.Publish(&machine.PhaseEvent{Phase: p.name, Action: machine.PhaseEvent_STOP}, actorID)
			n.machined.Printf("phase %s (%s): failed", p.name, progress)
			ev.Publish(&machine.SequenceEvent{Sequence: seq, Action: machine.SequenceEvent_STOP}, actorID)
			n.machined.Printf("%s sequence: failed", seq)

			code := common.Code_FATAL
			if errors.Is(err, context.Canceled) {
				code = common.Code_CANCELED
			}

			failed := fmt.Errorf("error running phase %d in %s sequence: task 1/1: failed, %w", i+1, seq, err)

			ev.Publish(&machine.SequenceEvent{
				Sequence: seq,
				Action:   machine.SequenceEvent_NOOP,
				Error:    &common.Error{Code: code, Message: "sequence failed: " + failed.Error()},
			}, actorID)

			// "fatal errors lead to reboot", says the controller, and sets
			// the stage rebooting; nothing reboots the node (the API's
			// Reset only logs the failure), so it says so until its next
			// boot: a failed graceful reset reads "rebooting", and stays up.
			if code == common.Code_FATAL {
				n.setStage(runtime.MachineStageRebooting)
			}

			return failed
		}

		n.machined.Printf("task %s (1/1): done, %s", p.task, time.Since(phaseStart))
		ev.Publish(&machine.PhaseEvent{Phase: p.name, Action: machine.PhaseEvent_STOP}, actorID)
		n.machined.Printf("phase %s (%s): done, %s", p.name, progress, time.Since(phaseStart))
	}

	ev.Publish(&machine.SequenceEvent{Sequence: seq, Action: machine.SequenceEvent_STOP}, actorID)
	n.machined.Printf("%s sequence: done: %s", seq, time.Since(start))

	return nil
}

// goingDown is the stopAllServices task of a sequence that ends in a reboot:
// apid stops with the rest, so the sequence ends here for its watchers.
func goingDown(context.Context) error { return errGoingDown }

// stopAllPhases is stopAllPhaselist on metal (v1alpha1_sequencer.go):
// services, unmounts, kexec when asked, then stopAllServices, where the
// sequence ends for its watchers.
func stopAllPhases(kexec bool) []phase {
	out := []phase{
		{name: "stopServices", task: "stopServicesForUpgrade"},
		{name: "umount", task: "unmountPodMounts"},
		{name: "unmountBind", task: "unmountSystemDiskBindMounts"},
		{name: "unmountSystem", task: "unmountEphemeralPartition"},
		{name: "volumeFinalize", task: "teardownLifecycle"},
	}

	if kexec {
		out = append(out, phase{name: "kexec", task: "kexecPrepare"})
	}

	return append(out, phase{name: "stopEverything", task: "stopAllServices", run: goingDown})
}

// rebootPhases is Sequencer.Reboot on metal, not forced (v1alpha1_sequencer.go
// Reboot and stopAllPhaselist with kexec, v1.12.6). The sim stops the
// services when the node goes down (powerCycle), after stopAllServices.
func rebootPhases() []phase {
	return append(append([]phase{
		{name: "cleanup", task: "stopAllPods"},
		{name: "dbus", task: "stopDBus"},
	}, stopAllPhases(true)...), phase{name: "reboot", task: "reboot"})
}

// shutdownPhases is Sequencer.Shutdown (v1alpha1_sequencer.go): a drain
// unless forced or the node does not register with Kubernetes.
func (n *Node) shutdownPhases(force bool) []phase {
	out := []phase{{name: "storeShutdown", task: "storeShutdownEmergency"}}

	if !force && n.registers() {
		out = append(out, phase{name: "drain", task: "cordonAndDrainNode", run: n.cordonAndDrain})
	}

	out = append(out, phase{name: "cleanup", task: "stopAllPods"}, phase{name: "dbus", task: "stopDBus"})

	return append(append(out, stopAllPhases(false)...), phase{name: "shutdown", task: "shutdown"})
}

// resetPhases is Sequencer.Reset on metal (v1alpha1_sequencer.go): a
// graceful reset drains (its errors only logged) and, on a control plane,
// leaves etcd (leaveEtcd: its failure fails the reset); kexec when the boot
// partition is not wiped, which the sim's wipes never do.
func (n *Node) resetPhases(graceful, reboot bool) []phase {
	var out []phase

	if graceful && n.registers() {
		out = append(out, phase{name: "drain", task: "cordonAndDrainNode", run: func(ctx context.Context) error {
			if err := n.cordonAndDrain(ctx); err != nil {
				n.machined.Printf("%s", err) // taskErrorHandler(logError, …)
			}

			return nil
		}})
	}

	cleanup := "stopAllPods"
	if graceful {
		cleanup = "removeAllPods"
	}

	out = append(out, phase{name: "cleanup", task: cleanup}, phase{name: "dbus", task: "stopDBus"})

	if graceful && n.role == target.ControlPlane {
		out = append(out, phase{name: "leave", task: "leaveEtcd", run: func(context.Context) error { return n.leaveForReset() }})
	}

	out = append(append(out, phase{name: "preReset", task: "sendResetSignal"}), stopAllPhases(true)...)

	if reboot {
		return append(out, phase{name: "reboot", task: "reboot"})
	}

	return append(out, phase{name: "shutdown", task: "shutdown"})
}

// registers reports whether the node registers with Kubernetes
// (!machine.kubelet.skipNodeRegistration).
func (n *Node) registers() bool {
	cfg := n.Config()

	return cfg == nil || !cfg.Machine().Kubelet().SkipNodeRegistration()
}
