package sim

import (
	"context"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/talchaos/talchaos/fakes/talosapi"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// installerRun is how long the upgrade task takes (Talos time): pulling the
// installer image and writing the new boot assets. The sim's choice, about
// what a lab VM on a home uplink takes; the pull itself is not modelled.
const installerRun = 2 * time.Minute

// Upgrade implements talosapi.Backend: the upgrade sequence of a metal node
// (Sequencer.Upgrade, runtime/v1alpha1/v1alpha1_sequencer.go, v1.12.6), run
// after the reply under the sequencer's lock. A second upgrade while one runs
// is not started (the sequencer's lock, v1alpha1_controller.go Run).
//
// What it does: the node is cordoned and drained when it has registered
// with Kubernetes, its services stop with their data kept (etcd gets its
// SIGTERM and hands leadership over), the installer "runs", and the node
// reboots: etcd comes back from its data directory, the kubelet uncordons
// the node. The installer image is never pulled: an image tagged as a Talos
// release makes Version report that tag afterwards, and the node keeps the
// behaviour of the scenario's profile. Unmounts, D-Bus and kexec are
// nothing here; the node's static pods stop when it goes down.
func (n *Node) Upgrade(req *machine.UpgradeRequest, actorID string) error {
	if !n.upgrading.TryLock() {
		n.events.Publish(talosapi.UpgradeSequenceLocked(), actorID)

		return nil
	}

	n.c.wg.Go(func() {
		defer n.upgrading.Unlock()

		n.replyGrace()
		n.runUpgrade(req, actorID)
	})

	return nil
}

// runUpgrade runs the sequence in the current boot; a node that goes down
// meanwhile (a fault) ends it, and boots the version installed by then.
func (n *Node) runUpgrade(req *machine.UpgradeRequest, actorID string) {
	n.mu.Lock()
	ctx := n.bootCtx
	n.mu.Unlock()

	if ctx == nil || ctx.Err() != nil {
		return
	}

	var phases []phase

	if n.registers() {
		phases = append(phases, phase{name: "drain", task: "cordonAndDrainNode", run: n.cordonAndDrain})
	}

	phases = append(phases,
		phase{name: "cleanup", task: "stopAllPods"},
		phase{name: "dbus", task: "stopDBus"},
		phase{name: "stopServices", task: "stopServicesForUpgrade", run: n.stopServicesForUpgrade},
		phase{name: "unmount", task: "unmountPodMounts"},
		phase{name: "unmountBind", task: "unmountSystemDiskBindMounts"},
		phase{name: "unmountSystem", task: "unmountEphemeralPartition"},
		phase{name: "volumeFinalize", task: "teardownLifecycle"},
		phase{name: "upgrade", task: "upgrade", run: func(ctx context.Context) error { return n.install(ctx, req.GetImage()) }},
		phase{name: "meta", task: "reloadMeta"},
	)

	if req.GetRebootMode() == machine.UpgradeRequest_DEFAULT {
		phases = append(phases, phase{name: "kexec", task: "kexecPrepare"})
	}

	phases = append(phases,
		phase{name: "stopEverything", task: "stopAllServices", run: goingDown},
		phase{name: "reboot", task: "reboot"},
	)

	if err := n.runSequence(ctx, "upgrade", phases, actorID); err != nil || ctx.Err() != nil {
		if err != nil && ctx.Err() == nil {
			n.machined.Printf("upgrade failed: %s", err)
		}

		return
	}

	n.powerCycle(cycle{sequenced: true})
}

// stopServicesForUpgrade is StopServicesEphemeral: stopping CRI stops what
// depends on it, the kubelet and etcd (a clean stop: etcd transfers its
// leadership), with their data kept.
func (n *Node) stopServicesForUpgrade(context.Context) error {
	n.mu.Lock()
	stopKubelet, run := n.kubeletStop, n.etcdRun
	n.mu.Unlock()

	if stopKubelet != nil {
		stopKubelet()
	}

	if run != nil && n.role == target.ControlPlane {
		run.stop()
	}

	return nil
}

// install is the upgrade task (v1alpha1_sequencer_tasks.go Upgrade): the
// installer writes the new version to the system disk.
func (n *Node) install(ctx context.Context, image string) error {
	n.machined.Printf("performing upgrade via %q", image)

	if !n.sleep(ctx, n.c.clock.Wall(installerRun)) {
		return ctx.Err()
	}

	if version, err := scenario.UpgradeVersion(image); err == nil {
		n.mu.Lock()
		n.upgradedTo = version
		n.mu.Unlock()
	}

	n.machined.Printf("upgrade successful")

	return nil
}

// UpgradedTo implements talosapi.Backend.
func (n *Node) UpgradedTo() string {
	n.mu.Lock()
	defer n.mu.Unlock()

	return n.upgradedTo
}

// Events implements talosapi.Backend.
func (n *Node) Events() *talosapi.EventLog { return n.events }

// BootID implements talosapi.Backend.
func (n *Node) BootID() string {
	n.mu.Lock()
	defer n.mu.Unlock()

	return n.bootID
}

// EtcdClientTo implements talosapi.Backend.
func (n *Node) EtcdClientTo(ctx context.Context, endpoints []string) (*clientv3.Client, error) {
	return n.newEtcdClient(ctx, endpoints)
}
