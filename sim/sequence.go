package sim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
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

// runSequence runs phases as machined's controller does (runtime/v1alpha1/
// v1alpha1_controller.go run, runPhase, runTask, v1.12.6): the sequence's,
// each phase's and each task's start and stop published as events for
// actorID and logged with machined's texts. It stops at the first task that
// fails; a task returning errGoingDown ends it there without a failure (the
// API is about to stop). It reports whether every phase ran.
func (n *Node) runSequence(ctx context.Context, seq string, phases []phase, actorID string) bool {
	ev := n.events
	start := time.Now()

	ev.Publish(&machine.SequenceEvent{Sequence: seq, Action: machine.SequenceEvent_START}, actorID)
	n.machined.Printf("%s sequence: %d phase(s)", seq, len(phases))

	for i, p := range phases {
		progress := fmt.Sprintf("%d/%d", i+1, len(phases))
		phaseStart := time.Now()

		n.machined.Printf("phase %s (%s): %d tasks(s)", p.name, progress, 1)
		ev.Publish(&machine.PhaseEvent{Phase: p.name, Action: machine.PhaseEvent_START}, actorID)
		ev.Publish(&machine.TaskEvent{Task: p.task, Action: machine.TaskEvent_START}, actorID)
		n.machined.Printf("task %s (1/1): starting", p.task)

		var err error
		if p.run != nil {
			err = p.run(ctx)
		}

		if errors.Is(err, errGoingDown) {
			return true
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

			ev.Publish(&machine.SequenceEvent{
				Sequence: seq,
				Action:   machine.SequenceEvent_NOOP,
				Error: &common.Error{
					Code:    code,
					Message: fmt.Sprintf("sequence failed: error running phase %d in %s sequence: task 1/1: failed, %s", i+1, seq, err),
				},
			}, actorID)

			return false
		}

		n.machined.Printf("task %s (1/1): done, %s", p.task, time.Since(phaseStart))
		ev.Publish(&machine.PhaseEvent{Phase: p.name, Action: machine.PhaseEvent_STOP}, actorID)
		n.machined.Printf("phase %s (%s): done, %s", p.name, progress, time.Since(phaseStart))
	}

	ev.Publish(&machine.SequenceEvent{Sequence: seq, Action: machine.SequenceEvent_STOP}, actorID)
	n.machined.Printf("%s sequence: done: %s", seq, time.Since(start))

	return true
}

// goingDown is the stopAllServices task of a sequence that ends in a reboot:
// apid stops with the rest, so the sequence ends here for its watchers.
func goingDown(context.Context) error { return errGoingDown }

// rebootPhases is Sequencer.Reboot on metal, not forced (v1alpha1_sequencer.go
// Reboot and stopAllPhaselist with kexec, v1.12.6). The sim stops the
// services when the node goes down (powerCycle), after stopAllServices.
func rebootPhases() []phase {
	return []phase{
		{name: "cleanup", task: "stopAllPods"},
		{name: "dbus", task: "stopDBus"},
		{name: "stopServices", task: "stopServicesForUpgrade"},
		{name: "umount", task: "unmountPodMounts"},
		{name: "unmountBind", task: "unmountSystemDiskBindMounts"},
		{name: "unmountSystem", task: "unmountEphemeralPartition"},
		{name: "volumeFinalize", task: "teardownLifecycle"},
		{name: "kexec", task: "kexecPrepare"},
		{name: "stopEverything", task: "stopAllServices", run: goingDown},
		{name: "reboot", task: "reboot"},
	}
}
