package sim

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/server/v3/embed"
	"google.golang.org/grpc"
)

// stopGuard keeps a request racing an embedded etcd's stop from taking the
// whole simulator down. etcd 3.6 serves client RPCs until its gRPC servers
// are closed, after the server itself has stopped and closed its backend: a
// Status then reads a closed bbolt transaction and panics (seen with
// maintenance Status → StorageVersion), and so does a Watch's send loop, a
// goroutine etcd starts itself, fetching a previous value for a kube-apiserver
// watch (v3rpc/watch.go sendLoop → backend read_tx, etcd-io/etcd#14256: it
// took a whole night down). A real etcd process dies with it and its clients
// see the connection go, which is what the client gets here: etcd's own
// "server stopped" error (Unavailable).
//
// So the guard recovers a panic in a handler during a stop, and before a kill
// (drain) it ends the streams being served and waits for their handlers: a
// Watch handler returns only after its send loop has, so no send loop is left
// to read the backend the kill closes. The clean stop (embed.Etcd.Close)
// closes the gRPC servers before the server, and the server hands over its
// leadership before it closes its backend, time for the handlers to end; the
// guard drains as the server stops too. (grpc.WaitForHandlers, which would
// make the servers' Stop wait for the handlers, was tried and dropped when
// TestAddressLate failed with it; that test failed 1 run in 5 without it
// too, waiting for a log line that came by chance (docs/measurements.md
// "Stop 44"), so the option is not known to be at fault. Not tried again.)
// A panic while the server is not stopping is a bug and is left to crash.
type stopGuard struct {
	e atomic.Pointer[embed.Etcd]

	mu       sync.Mutex
	draining bool
	next     uint64
	cancels  map[uint64]context.CancelFunc
	running  sync.WaitGroup // the stream handlers being served
}

// guard starts guarding e. A member that stops on its own (removed from the
// cluster) closes its backend at the end of its stop, not first: the guard
// drains as soon as the stop begins, so the streams mostly end before.
func (g *stopGuard) guard(e *embed.Etcd) {
	g.e.Store(e)

	go func() {
		<-e.Server.StoppingNotify() // closed by every stop
		g.drain(drainWait)
	}()
}

func (g *stopGuard) stopping() bool {
	g.mu.Lock()
	draining := g.draining
	g.mu.Unlock()

	if draining {
		return true
	}

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

	g.mu.Lock()
	draining := g.draining
	g.mu.Unlock()

	if draining {
		return nil, rpctypes.ErrGRPCStopped
	}

	return h(ctx, req)
}

// stream serves a stream with a context the guard can end (drain).
func (g *stopGuard) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
	ctx, cancel := context.WithCancel(ss.Context())

	g.mu.Lock()
	if g.draining {
		g.mu.Unlock()
		cancel()

		return rpctypes.ErrGRPCStopped
	}

	if g.cancels == nil {
		g.cancels = map[uint64]context.CancelFunc{}
	}

	id := g.next
	g.next++
	g.cancels[id] = cancel
	g.running.Add(1)
	g.mu.Unlock()

	defer func() {
		g.mu.Lock()
		delete(g.cancels, id)
		g.mu.Unlock()
		cancel()
		g.running.Done()
	}()

	defer g.recovered(&err)

	err = h(srv, guardedStream{ServerStream: ss, ctx: ctx})
	if ctx.Err() != nil && ss.Context().Err() == nil {
		// Ended by drain: the member is being killed.
		err = rpctypes.ErrGRPCStopped
	}

	return err
}

// drain refuses new requests, ends the streams being served and waits, at
// most wait, for their handlers to return. Called before a kill
// (HardStop), which closes the backend without closing the gRPC servers
// first.
func (g *stopGuard) drain(wait time.Duration) {
	g.mu.Lock()
	g.draining = true

	for _, cancel := range g.cancels {
		cancel()
	}
	g.mu.Unlock()

	// No handler is added once draining is set, so Wait cannot race an Add.
	done := make(chan struct{})
	go func() {
		g.running.Wait()
		close(done)
	}()

	timer := time.NewTimer(wait)
	defer timer.Stop()

	select {
	case <-done:
	case <-timer.C:
	}
}

// guardedStream is a server stream whose context the guard can cancel.
type guardedStream struct {
	grpc.ServerStream
	ctx context.Context //nolint:containedctx // the stream's own context, as grpc.ServerStream.Context returns it
}

func (s guardedStream) Context() context.Context { return s.ctx }

// options are the gRPC server options that install the guard: innermost
// interceptors, next to etcd's handlers.
func (g *stopGuard) options() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(g.unary),
		grpc.ChainStreamInterceptor(g.stream),
	}
}
