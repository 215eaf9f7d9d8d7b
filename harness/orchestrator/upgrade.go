package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/talchaos/talchaos/harness/talosclient"
	"github.com/talchaos/talchaos/harness/target"
)

// upgradeOrder is the order a rolling upgrade takes: the control planes
// one after another, then the workers.
func (e *Env) upgradeOrder() []target.Node {
	out := e.controlPlanes()

	for _, n := range e.Nodes {
		if n.Role != target.ControlPlane {
			out = append(out, n)
		}
	}

	return out
}

// bootID is the node's kernel boot ID.
var bootID = talosclient.BootID

// talosVersion is the Talos version the node reports.
func talosVersion(ctx context.Context, cl *client.Client) (string, error) {
	v, err := cl.Version(ctx)
	if err != nil {
		return "", err
	}

	if len(v.GetMessages()) == 0 {
		return "", errors.New("no version in the reply")
	}

	return v.GetMessages()[0].GetVersion().GetTag(), nil
}

// rebootedAndReady is talosctl upgrade's wait: the node answers with a boot
// ID other than before and its MachineStatus is running and ready
// (MachineReadyEventFn, BootIDChangedPostCheckFn).
func rebootedAndReady(ctx context.Context, cl *client.Client, before string) error {
	id, err := bootID(ctx, cl)
	if err != nil {
		return err
	}

	if id == before {
		return errors.New("didn't reboot yet")
	}

	ms, err := safe.StateGetByID[*runtime.MachineStatus](ctx, cl.COSI, runtime.MachineStatusID)
	if err != nil {
		return err
	}

	if ms.TypedSpec().Stage != runtime.MachineStageRunning || !ms.TypedSpec().Status.Ready {
		return fmt.Errorf("rebooted, stage %s, ready %v", ms.TypedSpec().Stage, ms.TypedSpec().Status.Ready)
	}

	return nil
}

// upgradeOnce is one `talosctl upgrade -n NODE --image IMAGE`: the boot ID
// before, the call, and the wait until the node rebooted and is ready
// (talosctl's default --timeout: 30 minutes). It returns the call's error
// as it came, or the wait's.
func (e *Env) upgradeOnce(ctx context.Context, n target.Node, cl *client.Client, image string) error {
	callCtx, cancel := context.WithTimeout(ctx, e.callTimeout())
	before, err := bootID(callCtx, cl)

	cancel()

	if err != nil {
		return fmt.Errorf("boot ID of %s: %w", n.Name, err)
	}

	callCtx, cancel = context.WithTimeout(ctx, e.callTimeout())
	_, err = cl.UpgradeWithOptions(callCtx, client.WithUpgradeImage(image))

	cancel()
	e.call(n.Name, "Upgrade", err)

	if err != nil {
		return err
	}

	return e.wait(ctx, condition{what: n.Name + " to reboot into the upgrade", node: n.Name, log: true, every: 5 * time.Second, within: 30 * time.Minute,
		check: func(ctx context.Context, _ int) error {
			callCtx, cancel := context.WithTimeout(ctx, e.callTimeout())
			defer cancel()

			return rebootedAndReady(callCtx, cl, before)
		}})
}

// naiveUpgrade is the field's rolling upgrade: `talosctl upgrade -n NODE
// --image IMAGE` for each node in turn, each waiting (talosctl's default)
// until the node has rebooted and is ready. Like a script under `set -e`,
// the first refusal ends it; a node that rebooted into its old version (its
// upgrade interrupted) counts as done, as talosctl's wait does.
func naiveUpgrade(ctx context.Context, env *Env, image string) error {
	env.step("upgrade every node in turn, control planes first, as `talosctl upgrade -n NODE --image " + image + "` (each waits for its node to reboot and be ready; the first error stops)")

	for _, n := range env.upgradeOrder() {
		cl, err := env.secure(ctx, n)
		if err != nil {
			return err
		}

		err = env.upgradeOnce(ctx, n, cl, image)
		cl.Close() //nolint:errcheck

		if err != nil {
			return fmt.Errorf("upgrade %s: %w", n.Name, err)
		}
	}

	return nil
}

// upgradeRefusedForNow reports whether an upgrade's refusal may pass: etcd
// not healthy or not started everywhere, another node's upgrade holding the
// mutex, the node unreachable for a moment (v1alpha1_server.go Upgrade's
// checks). A bad image or a missing right does not.
func upgradeRefusedForNow(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return true
	case codes.InvalidArgument, codes.PermissionDenied, codes.Unimplemented, codes.FailedPrecondition:
		return false
	}

	msg := status.Convert(err).Message()

	return strings.Contains(msg, "error validating etcd for upgrade") ||
		strings.Contains(msg, "failed to acquire upgrade mutex") ||
		strings.Contains(msg, "failed to create etcd client")
}

// resilientUpgradeAttempts bounds how often one node's upgrade is issued
// again after it rebooted into its old version.
const resilientUpgradeAttempts = 5

// upgrade is the careful rolling upgrade: before each control plane, every
// member a healthy voter; a refusal that may pass (a member not healthy,
// the mutex held) retried; after each node, its version checked, and its
// upgrade issued again when it came back on the old one (interrupted
// before the installer finished).
func (r *Resilient) upgrade(ctx context.Context, env *Env, image, version string) error {
	env.step("upgrade every node in turn, control planes first, to " + image + ": each control plane only with every member a healthy voter; refusals that may pass retried; each node's version checked after its reboot")

	boot, _ := env.node(env.BootstrapNode)

	for _, n := range env.upgradeOrder() {
		if err := r.upgradeNode(ctx, env, n, boot, image, version); err != nil {
			return err
		}
	}

	env.Log.Add("", "orchestrator.done", "every node runs "+version)

	return nil
}

func (r *Resilient) upgradeNode(ctx context.Context, env *Env, n, boot target.Node, image, version string) error {
	cl, err := env.secure(ctx, n)
	if err != nil {
		return err
	}
	defer cl.Close() //nolint:errcheck

	for attempt := 1; ; attempt++ {
		callCtx, cancel := context.WithTimeout(ctx, env.callTimeout())
		got, err := talosVersion(callCtx, cl)

		cancel()

		if err == nil && got == version {
			env.Log.Add(n.Name, "orchestrator.skip", fmt.Sprintf("%s runs %s", n.Name, version))

			return nil
		}

		if attempt > resilientUpgradeAttempts {
			return fmt.Errorf("upgrade %s: still on %s after %d upgrades", n.Name, got, resilientUpgradeAttempts)
		}

		if n.Role == target.ControlPlane {
			reapplied := map[string]time.Time{}

			if err := r.waitVoters(ctx, env, boot, reapplied); err != nil {
				return err
			}

			if err := r.waitHealthy(ctx, env, reapplied); err != nil {
				return err
			}
		}

		err = env.wait(ctx, condition{what: n.Name + "'s upgrade to be accepted", node: n.Name, log: true, every: 5 * time.Second, backoff: 30 * time.Second,
			check: func(ctx context.Context, _ int) error {
				err := env.upgradeOnce(ctx, n, cl, image)
				if err != nil && !upgradeRefusedForNow(err) {
					return stop(fmt.Errorf("upgrade %s: %w", n.Name, err))
				}

				return err
			}})
		if err != nil {
			return err
		}
	}
}
