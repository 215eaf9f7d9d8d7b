// Package talosclient opens machinery clients to nodes the two ways real tools
// do: the maintenance ("--insecure") client and the talosconfig client.
package talosclient

import (
	"context"
	"crypto/tls"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/client"
	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/talchaos/talchaos/harness/target"
)

// fastReconnect keeps long-lived clients noticing a node that comes up or changes
// its TLS mode within a second; gRPC's default backoff grows to two minutes.
var fastReconnect = grpc.WithConnectParams(grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
	MinConnectTimeout: 2 * time.Second,
})

// Insecure is talosctl --insecure: TLS without verifying the server and without
// a client certificate, for nodes in maintenance.
func Insecure(ctx context.Context, endpoint string, opts ...grpc.DialOption) (*client.Client, error) {
	return client.New(ctx,
		client.WithTLSConfig(&tls.Config{InsecureSkipVerify: true}), //nolint:gosec // maintenance mode has no CA to verify against
		client.WithEndpoints(endpoint),
		client.WithGRPCDialOptions(append([]grpc.DialOption{fastReconnect}, opts...)...),
	)
}

// WithConfig is a talosconfig client pointed at one endpoint.
func WithConfig(ctx context.Context, cfg *clientconfig.Config, endpoint string, opts ...grpc.DialOption) (*client.Client, error) {
	return client.New(ctx, client.WithConfig(cfg), client.WithEndpoints(endpoint),
		client.WithGRPCDialOptions(append([]grpc.DialOption{fastReconnect}, opts...)...))
}

// ForNode are the dial options that reach node through whatever endpoint it has:
// its certificate's name when the endpoint is a proxy, and the target's
// client-side fault interceptors if faults is set.
func ForNode(n target.Node, faults target.ClientFaults) []grpc.DialOption {
	var opts []grpc.DialOption

	if n.ServerName != "" {
		opts = append(opts, grpc.WithAuthority(n.ServerName))
	}

	if faults != nil {
		opts = append(opts, faults.ClientDialOptions(n.Name)...)
	}

	return opts
}
