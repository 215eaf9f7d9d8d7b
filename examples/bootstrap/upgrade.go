package bootstrap

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/siderolabs/go-retry/retry"
	"github.com/siderolabs/talos/pkg/machinery/client"
	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// UpgradeOptions bound a rolling upgrade's waits; zero values take defaults
// that fit real nodes.
type UpgradeOptions struct {
	Options
	// Reboot bounds one node's wait to come back upgraded.
	Reboot time.Duration
	// Attempts bounds how often one node's upgrade is issued again when it
	// came back on its old version.
	Attempts int
}

// RollingUpgrade upgrades every node to the installer image, control planes
// first, one at a time: before each control plane, every member must be a
// healthy voter (Talos refuses otherwise, and waiting is the cure); a
// refusal that may pass is retried; after each node's reboot its version is
// checked against the image's tag, and a node that came back on its old
// version (its upgrade interrupted) is upgraded again.
func RollingUpgrade(ctx context.Context, nodes []Node, talosconfig *clientconfig.Config, image string, opts UpgradeOptions) error {
	opts.Options = opts.withDefaults()

	if opts.Reboot == 0 {
		opts.Reboot = 15 * time.Minute
	}

	if opts.Attempts == 0 {
		opts.Attempts = 3
	}

	i := strings.LastIndex(image, ":")
	if i < 0 {
		return fmt.Errorf("image %q has no tag: the tag is the version it installs", image)
	}

	version := image[i+1:]

	secure, err := client.New(ctx, client.WithConfig(talosconfig))
	if err != nil {
		return fmt.Errorf("talosconfig client: %w", err)
	}
	defer secure.Close() //nolint:errcheck

	var first string

	ordered := make([]Node, 0, len(nodes))

	for _, n := range nodes {
		if n.ControlPlane {
			ordered = append(ordered, n)

			if first == "" {
				first = n.IP
			}
		}
	}

	for _, n := range nodes {
		if !n.ControlPlane {
			ordered = append(ordered, n)
		}
	}

	for _, n := range ordered {
		if err := upgradeNode(ctx, secure, nodes, first, n, image, version, opts); err != nil {
			return err
		}
	}

	return nil
}

func upgradeNode(ctx context.Context, secure *client.Client, nodes []Node, first string, n Node, image, version string, opts UpgradeOptions) error {
	for attempt := 0; ; attempt++ {
		var got string

		// The node answers, perhaps only once it is back from a reboot.
		err := retry.Constant(opts.Reboot, retry.WithUnits(opts.Poll)).RetryWithContext(ctx, func(ctx context.Context) error {
			v, err := versionOf(ctx, secure, n.IP, opts)
			if err != nil {
				return retry.ExpectedError(err)
			}

			got = v

			return nil
		})

		switch {
		case err != nil:
			return fmt.Errorf("version of %s: %w", n.IP, err)
		case got == version:
			return nil
		case attempt == opts.Attempts:
			return fmt.Errorf("%s: still on %s after %d upgrades to %s", n.IP, got, attempt, version)
		}

		if n.ControlPlane {
			if err := waitForControlPlane(ctx, secure, nodes, first, opts.Options); err != nil {
				return err
			}
		}

		before, err := bootID(ctx, secure, n.IP, opts)
		if err != nil {
			return err
		}

		err = retry.Constant(opts.Join, retry.WithUnits(opts.Poll)).RetryWithContext(ctx, func(ctx context.Context) error {
			callCtx, cancel := context.WithTimeout(ctx, opts.Call)
			defer cancel()

			_, err := secure.UpgradeWithOptions(client.WithNode(callCtx, n.IP), client.WithUpgradeImage(image))

			switch {
			case err == nil:
				return nil
			case status.Code(err) == codes.Unavailable, status.Code(err) == codes.DeadlineExceeded,
				strings.Contains(err.Error(), "error validating etcd for upgrade"),
				strings.Contains(err.Error(), "failed to acquire upgrade mutex"):
				return retry.ExpectedError(err) // a member not healthy yet, another upgrade's checks
			default:
				return err
			}
		})
		if err != nil {
			return fmt.Errorf("upgrade %s: %w", n.IP, err)
		}

		// Back: another boot ID.
		err = retry.Constant(opts.Reboot, retry.WithUnits(opts.Poll)).RetryWithContext(ctx, func(ctx context.Context) error {
			id, err := bootID(ctx, secure, n.IP, opts)
			if err != nil {
				return retry.ExpectedError(err)
			}

			if id == before {
				return retry.ExpectedErrorf("%s has not rebooted yet", n.IP)
			}

			return nil
		})
		if err != nil {
			return fmt.Errorf("upgrade %s: %w", n.IP, err)
		}
	}
}

func bootID(ctx context.Context, secure *client.Client, ip string, opts UpgradeOptions) (string, error) {
	callCtx, cancel := context.WithTimeout(ctx, opts.Call)
	defer cancel()

	r, err := secure.Read(client.WithNode(callCtx, ip), "/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", err
	}

	defer r.Close() //nolint:errcheck

	b, err := io.ReadAll(r)

	return strings.TrimSpace(string(b)), err
}

func versionOf(ctx context.Context, secure *client.Client, ip string, opts UpgradeOptions) (string, error) {
	callCtx, cancel := context.WithTimeout(ctx, opts.Call)
	defer cancel()

	v, err := secure.Version(client.WithNode(callCtx, ip))
	if err != nil {
		return "", err
	}

	for _, m := range v.GetMessages() {
		return m.GetVersion().GetTag(), nil
	}

	return "", fmt.Errorf("%s: no version in the reply", ip)
}
