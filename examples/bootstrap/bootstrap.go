// Package bootstrap is an example of a user's own bootstrap code, the shape of
// the Go bootstrap in field report 004: apply each node's machine
// configuration over the maintenance API (no client certificate), wait for
// the node to come back under mutual TLS, bootstrap etcd on the first control
// plane exactly once, and wait until every control plane is a voting, healthy
// etcd member. Its suite (bootstrap_test.go) checks it against simulated
// clusters with package simtest, under faults.
//
// It talks to nodes only through the Talos API, with the Talos machinery
// client, as it would to real ones; nothing in it knows the nodes are
// simulated.
package bootstrap

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/siderolabs/go-retry/retry"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Node is a machine to configure: its address and its machine configuration.
type Node struct {
	IP           string
	ControlPlane bool
	Config       []byte
}

// Options bound the waits. Zero values take the defaults below, which fit
// real nodes; a test on a time-scaled cluster may shorten them.
type Options struct {
	// Apply bounds the retries of one node's ApplyConfiguration.
	Apply time.Duration
	// Join bounds the wait for every control plane to be a healthy voter.
	Join time.Duration
	// Poll is the interval of every retry.
	Poll time.Duration
	// Call bounds one ApplyConfiguration call: a reply that does not come
	// is retried after it (the node is asked first whether it took).
	Call time.Duration
}

func (o Options) withDefaults() Options {
	if o.Apply == 0 {
		o.Apply = 5 * time.Minute
	}

	if o.Join == 0 {
		o.Join = 20 * time.Minute
	}

	if o.Poll == 0 {
		o.Poll = 2 * time.Second
	}

	if o.Call == 0 {
		o.Call = 30 * time.Second
	}

	return o
}

// Bootstrap configures the nodes and forms the control plane.
func Bootstrap(ctx context.Context, nodes []Node, talosconfig *clientconfig.Config, opts Options) error {
	opts = opts.withDefaults()

	secure, err := client.New(ctx, client.WithConfig(talosconfig))
	if err != nil {
		return fmt.Errorf("talosconfig client: %w", err)
	}
	defer secure.Close() //nolint:errcheck

	var first string

	for _, n := range nodes {
		if err := apply(ctx, secure, n, opts); err != nil {
			return err
		}

		if n.ControlPlane && first == "" {
			first = n.IP
		}
	}

	if first == "" {
		return errors.New("no control plane")
	}

	// Bootstrap once. A reply lost on the way back is not a reason to send
	// it again: AlreadyExists then says the first one took.
	err = retry.Constant(opts.Apply, retry.WithUnits(opts.Poll)).RetryWithContext(ctx, func(ctx context.Context) error {
		err := secure.Bootstrap(client.WithNode(ctx, first), &machine.BootstrapRequest{})

		switch status.Code(err) {
		case codes.OK, codes.AlreadyExists:
			return nil
		case codes.FailedPrecondition, codes.Unavailable, codes.DeadlineExceeded:
			return retry.ExpectedError(err) // etcd not ready to bootstrap yet, or the node is busy
		default:
			return err
		}
	})
	if err != nil {
		return fmt.Errorf("bootstrap %s: %w", first, err)
	}

	return waitForControlPlane(ctx, secure, nodes, first, opts)
}

// apply sends a node its configuration over the maintenance API and waits
// until the node answers under mutual TLS. A node that already left
// maintenance (an earlier reply was lost) answers the insecure client with
// "tls: certificate required": the configuration took.
func apply(ctx context.Context, secure *client.Client, n Node, opts Options) error {
	insecure, err := client.New(ctx, client.WithTLSConfig(&tls.Config{InsecureSkipVerify: true}), client.WithEndpoints(n.IP)) //nolint:gosec // maintenance mode has no certificate to verify
	if err != nil {
		return err
	}
	defer insecure.Close() //nolint:errcheck

	err = retry.Constant(opts.Apply, retry.WithUnits(opts.Poll)).RetryWithContext(ctx, func(ctx context.Context) error {
		if configured(ctx, secure, n.IP) {
			return nil
		}

		callCtx, cancel := context.WithTimeout(ctx, opts.Call)
		defer cancel()

		_, err := insecure.ApplyConfiguration(callCtx, &machine.ApplyConfigurationRequest{
			Data: n.Config,
			Mode: machine.ApplyConfigurationRequest_AUTO,
		})

		switch status.Code(err) {
		case codes.InvalidArgument:
			return err // the configuration is wrong: retrying will not help
		case codes.OK:
			return retry.ExpectedErrorf("%s: configuration applied, waiting for the node to leave maintenance", n.IP)
		default:
			return retry.ExpectedError(err)
		}
	})
	if err != nil {
		return fmt.Errorf("apply configuration to %s: %w", n.IP, err)
	}

	return nil
}

// configured reports whether the node answers the talosconfig client.
func configured(ctx context.Context, secure *client.Client, ip string) bool {
	callCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()

	_, err := secure.Version(client.WithNode(callCtx, ip))

	return err == nil
}

// waitForControlPlane waits until etcd lists every control plane as a voter
// and every control plane's etcd service is healthy.
func waitForControlPlane(ctx context.Context, secure *client.Client, nodes []Node, first string, opts Options) error {
	var cps []string

	for _, n := range nodes {
		if n.ControlPlane {
			cps = append(cps, n.IP)
		}
	}

	return retry.Constant(opts.Join, retry.WithUnits(opts.Poll)).RetryWithContext(ctx, func(ctx context.Context) error {
		callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()

		resp, err := secure.EtcdMemberList(client.WithNode(callCtx, first), &machine.EtcdMemberListRequest{})
		if err != nil {
			return retry.ExpectedError(err)
		}

		voters := 0

		for _, m := range resp.GetMessages() {
			for _, member := range m.GetMembers() {
				if !member.GetIsLearner() {
					voters++
				}
			}
		}

		if voters != len(cps) {
			return retry.ExpectedErrorf("%d of %d control planes are voters", voters, len(cps))
		}

		for _, ip := range cps {
			info, err := secure.ServiceInfo(client.WithNode(callCtx, ip), "etcd")
			if err != nil {
				return retry.ExpectedError(err)
			}

			if len(info) == 0 || !info[0].Service.GetHealth().GetHealthy() {
				return retry.ExpectedErrorf("etcd on %s is not healthy yet", ip)
			}
		}

		return nil
	})
}
