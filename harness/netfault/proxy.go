package netfault

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/stream"
)

// Proxy is a toxiproxy proxy (its toxics, links and toxic types are
// toxiproxy's) with an accept loop of talchaos's own.
//
// Hand-rolled because toxiproxy v2.12's loop names a connection's two links,
// and keeps the connection for Stop to close, by the client's address alone:
// when a client port comes round again while the old connection's links are
// still ending, the old link's end deletes the new connection's entries, so
// toxics added later no longer reach the new connection and Stop leaves it
// open (the client's keep-alive connection then waits on it forever: an etcd
// member's peer transport did, in the sim's tests). Here every connection's
// links have a name of their own, and Stop closes every connection the proxy
// accepted or dialled, whatever its links did.
//
// Each connection dials its upstream on its own, where toxiproxy's loop
// dials one after another: a real node that does not answer a TCP connect
// (powered off) would otherwise hold every later connection to it, also
// once it is back, until the kernel gave the first one up.
type Proxy struct {
	*toxiproxy.Proxy

	server *toxiproxy.ApiServer
	ln     net.Listener
	ctx    context.Context // serve's: it ends with Stop
	cancel context.CancelFunc
	done   chan struct{}
	dials  sync.WaitGroup
	dial   dialFunc

	mu      sync.Mutex
	conns   map[*net.TCPConn]struct{}
	seq     uint64
	pruneAt int
	stopped bool
	// down: the address is gone (SetDown).
	down bool
	// follow: listen only while the upstream does (FollowUpstream); paused,
	// the listener is closed until the upstream accepts again, and resume
	// is closed when it listens again.
	follow bool
	paused bool
	resume chan struct{}
}

// pruneMin is how many connections a proxy keeps before it first looks for
// closed ones to forget.
const pruneMin = 64

// dialTimeout bounds a dial of the upstream: gRPC's own connect timeout
// (minConnectTimeout, 20 s), past which the client that waits on it has
// given up.
const dialTimeout = 20 * time.Second

// StartProxy listens on listen (port 0: any; Listen then holds the address
// taken) and relays every connection to upstream through toxiproxy's links.
func StartProxy(server *toxiproxy.ApiServer, name, listen, upstream string) (*Proxy, error) {
	d := &net.Dialer{Timeout: dialTimeout}

	return startProxyDialing(server, name, listen, upstream, func(ctx context.Context, addr string) (net.Conn, error) {
		return d.DialContext(ctx, "tcp", addr)
	})
}

// dialFunc connects to a proxy's upstream.
type dialFunc func(ctx context.Context, addr string) (net.Conn, error)

// startProxyDialing is StartProxy connecting to the upstream with dial.
func startProxyDialing(server *toxiproxy.ApiServer, name, listen, upstream string, dial dialFunc) (*Proxy, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}

	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{
		Proxy:   toxiproxy.NewProxy(server, name, ln.Addr().String(), upstream),
		server:  server,
		ln:      ln,
		ctx:     ctx,
		cancel:  cancel,
		done:    make(chan struct{}),
		dial:    dial,
		conns:   map[*net.TCPConn]struct{}{},
		pruneAt: pruneMin,
	}

	go p.serve(ctx)

	return p, nil
}

func (p *Proxy) serve(ctx context.Context) {
	defer close(p.done)

	for {
		ln := p.listener()

		client, err := ln.Accept()
		if err != nil {
			if p.waitListening(ctx, ln) {
				continue // the upstream refused: listening again as it does
			}

			p.dials.Wait()

			return // Stop closed the listener
		}

		p.dials.Go(func() { p.relay(ctx, client.(*net.TCPConn)) })
	}
}

// FollowUpstream makes the proxy listen only while its upstream does: once
// a dial of the upstream is refused, it closes its listener (a client then
// gets "connection refused", as from a port nothing listens on, not a
// connection taken and reset) until the upstream accepts a connection
// again. For a server that comes and goes on a node that stays (an API
// server in a crash loop); call it before the first connection.
func (p *Proxy) FollowUpstream() {
	p.mu.Lock()
	defer p.mu.Unlock()

	p.follow = true
}

func (p *Proxy) listener() net.Listener {
	p.mu.Lock()
	defer p.mu.Unlock()

	return p.ln
}

// waitListening waits, after the listener ln ended, until the proxy
// listens again; false when it was stopped (or ln ended otherwise).
func (p *Proxy) waitListening(ctx context.Context, ln net.Listener) bool {
	p.mu.Lock()
	cur, paused, resume, stopped := p.ln, p.paused, p.resume, p.stopped
	p.mu.Unlock()

	switch {
	case stopped:
		return false
	case cur != ln:
		return true // listening again already
	case !paused:
		return false
	}

	select {
	case <-resume:
	case <-ctx.Done():
		return false
	}

	p.mu.Lock()
	defer p.mu.Unlock()

	return !p.stopped
}

// UpstreamGone tells a proxy that follows its upstream that the upstream
// stopped listening (its process exited): it refuses connections at once,
// where it would otherwise take the next one in and learn it from its dial
// (the client then sees its connection reset, not refused).
func (p *Proxy) UpstreamGone() { p.upstreamRefused(p.ctx) }

// upstreamRefused closes the listener of a proxy that follows its upstream
// and listens again once the upstream accepts a connection.
func (p *Proxy) upstreamRefused(ctx context.Context) {
	p.mu.Lock()
	if !p.follow || p.paused || p.stopped {
		p.mu.Unlock()

		return
	}

	p.paused, p.resume = true, make(chan struct{})
	ln, addr, resume := p.ln, p.ln.Addr().String(), p.resume
	p.mu.Unlock()

	ln.Close()

	// One of the proxy's dials: serve, ending, waits for it as for them.
	p.dials.Go(func() {
		tick := time.NewTicker(followPoll)
		defer tick.Stop()

		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}

			c, err := p.dial(ctx, p.Upstream)
			if err != nil {
				continue
			}

			c.Close()

			nl, err := net.Listen("tcp", addr)
			if err != nil {
				continue
			}

			p.mu.Lock()
			if p.stopped {
				p.mu.Unlock()
				nl.Close()

				return
			}

			p.ln, p.paused = nl, false
			p.mu.Unlock()
			close(resume)

			return
		}
	})
}

// followPoll is how often a paused proxy tries its upstream.
const followPoll = 100 * time.Millisecond

// relay dials the upstream for a client's connection and links the two.
func (p *Proxy) relay(ctx context.Context, c *net.TCPConn) {
	// Down (or stopped), the upstream is not dialled at all: a connection
	// it never asked for would reach it (track refuses again, for a
	// SetDown that comes during the dial).
	if !p.open() {
		c.Close()

		return
	}

	// As toxiproxy does: an upstream that cannot be reached closes the
	// client's connection at once.
	up, err := p.dial(ctx, p.Upstream)
	if err != nil {
		c.Close()

		if errors.Is(err, syscall.ECONNREFUSED) {
			p.upstreamRefused(ctx)
		}

		return
	}

	u := up.(*net.TCPConn)

	name, ok := p.track(c, u)
	if !ok {
		c.Close()
		u.Close()

		return
	}

	p.Toxics.StartLink(p.server, name+"upstream", c, u, stream.Upstream)
	p.Toxics.StartLink(p.server, name+"downstream", u, c, stream.Downstream)
}

// open reports whether the proxy takes connections: not stopped, not down.
func (p *Proxy) open() bool {
	p.mu.Lock()
	defer p.mu.Unlock()

	return !p.stopped && !p.down
}

// track keeps a new connection's two ends for Stop and names its links; it
// reports false once the proxy is stopped, and while it is down.
func (p *Proxy) track(client, upstream *net.TCPConn) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()

	if p.stopped || p.down {
		return "", false
	}

	if len(p.conns) >= p.pruneAt {
		for c := range p.conns {
			if closed(c) {
				delete(p.conns, c)
			}
		}

		p.pruneAt = max(pruneMin, 2*len(p.conns))
	}

	p.conns[client], p.conns[upstream] = struct{}{}, struct{}{}
	p.seq++

	return fmt.Sprintf("%s#%d", client.RemoteAddr(), p.seq), true
}

// closed reports whether c has been closed (its links end by closing both
// ends): a closed connection refuses raw access.
func closed(c *net.TCPConn) bool {
	rc, err := c.SyscallConn()
	if err != nil {
		return true
	}

	return rc.Control(func(uintptr) {}) != nil
}

// SetDown takes the proxy's address down or brings it back: down, it closes
// every connection it holds and every one it accepts until brought back
// (one the kernel took in while the address went); a real network's
// timeouts end the connections to an address that left its host, here they
// end at once.
func (p *Proxy) SetDown(down bool) {
	p.mu.Lock()
	p.down = down

	var conns map[*net.TCPConn]struct{}
	if down && !p.stopped {
		conns, p.conns = p.conns, map[*net.TCPConn]struct{}{}
	}
	p.mu.Unlock()

	for c := range conns {
		c.Close()
	}
}

// Stop stops accepting and closes every connection the proxy still holds. It
// may be called more than once.
func (p *Proxy) Stop() {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()

		return
	}

	p.stopped = true
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()

	p.cancel()
	p.listener().Close()
	<-p.done

	for c := range conns {
		c.Close()
	}
}
