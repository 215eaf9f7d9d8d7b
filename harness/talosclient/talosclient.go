// Package talosclient opens machinery clients to nodes the two ways real tools
// do: the maintenance ("--insecure") client and the talosconfig client.
package talosclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"sync/atomic"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/client"
	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/metadata"

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

// SecureEndpoint is where the talosconfig client reaches n: its endpoint,
// or, with n.Via, that endpoint with every call routed on to n's address
// (Routed), as talosctl -e VIA -n ADDRESS does.
func SecureEndpoint(n target.Node) (string, []grpc.DialOption) {
	if n.Via != "" {
		return n.Via, Routed(n.Address)
	}

	return n.Endpoint, nil
}

// Routed are the dial options that send every call through a Talos API
// endpoint on to node, as talosctl -e ENDPOINT -n NODE does: apid proxies a
// call carrying the node's address in the "node" metadata (client.WithNode).
func Routed(node string) []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
			invoker grpc.UnaryInvoker, opts ...grpc.CallOption,
		) error {
			return invoker(metadata.AppendToOutgoingContext(ctx, "node", node), method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string,
			streamer grpc.Streamer, opts ...grpc.CallOption,
		) (grpc.ClientStream, error) {
			return streamer(metadata.AppendToOutgoingContext(ctx, "node", node), desc, cc, method, opts...)
		}),
	}
}

// Answers reports whether a Talos API answers at endpoint at all: whether a
// TLS server there presents a certificate, whichever certificate and whatever
// it then demands of the client. A node that is powered off, cut off or whose
// API is down does not; one in maintenance or configured (with any PKI) does.
// It reads no error text: a proxy in front of a dead node accepts the TCP
// connection and then closes it, which is not an answer either.
func Answers(ctx context.Context, endpoint string) bool {
	var presented atomic.Bool

	d := tls.Dialer{Config: &tls.Config{
		InsecureSkipVerify: true, //nolint:gosec // only whether a certificate comes, never trusted
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			presented.Store(len(raw) > 0)

			return nil
		},
	}}

	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()

	conn, err := d.DialContext(ctx, "tcp", endpoint)
	if err == nil {
		conn.Close() //nolint:errcheck
	}

	return presented.Load()
}
