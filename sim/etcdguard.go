package sim

import (
	"context"
	"sync/atomic"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/server/v3/embed"
	"google.golang.org/grpc"
)

// stopGuard keeps a request racing an embedded etcd's stop from taking the
// whole simulator down. etcd 3.6 serves client RPCs until its gRPC servers
// are closed, after the server itself has stopped and closed its backend: a
// Status then reads a closed bbolt transaction and panics (seen with
// maintenance Status → StorageVersion). A real etcd process dies with it and
// its clients see the connection go, which is what the client gets here:
// etcd's own "server stopped" error (Unavailable). A panic while the server
// is not stopping is a bug and is left to crash.
type stopGuard struct{ e atomic.Pointer[embed.Etcd] }

func (g *stopGuard) stopping() bool {
	e := g.e.Load()
	if e == nil {
		return false
	}

	select {
	case <-e.Server.StoppingNotify():
		return true
	case <-e.Server.StopNotify():
		return true
	default:
		return false
	}
}

// recovered turns a panic during a stop into rpctypes.ErrGRPCStopped.
func (g *stopGuard) recovered(err *error) {
	if r := recover(); r != nil {
		if !g.stopping() {
			panic(r)
		}

		*err = rpctypes.ErrGRPCStopped
	}
}

func (g *stopGuard) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
	defer g.recovered(&err)

	return h(ctx, req)
}

// options are the gRPC server options that install the guard: innermost
// interceptors, next to etcd's handlers.
func (g *stopGuard) options() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(g.unary),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
			defer g.recovered(&err)

			return h(srv, ss)
		}),
	}
}
