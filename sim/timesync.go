package sim

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/constants"
	timeres "github.com/siderolabs/talos/pkg/machinery/resources/time"

	"github.com/talchaos/talchaos/harness/target"
)

// This file is the node's clock and its time sync: Talos's
// time.SyncController (internal/app/machined/pkg/controllers/time/sync.go,
// v1.12.6) and what the time-unsynced and clock-offset faults do to them.
// The sim's time servers are the host's clock: they answer at once unless a
// fault holds them, and then never (the node's TimeStatus stays unsynced).

// ntpRetryPoll is the NTP syncer's retry after a query that got no answer
// (internal/pkg/ntp/consts.go RetryPoll): once a time server answers again,
// the time syncs within it.
const ntpRetryPoll = time.Second

// ntpQueryTimeout is how long a query waits for a time server's answer
// (github.com/beevik/ntp v1.5.0 defaultTimeout, as Talos queries it).
const ntpQueryTimeout = 5 * time.Second

// ntpPort is the NTP port a query goes to.
const ntpPort = 123

// nodeClock is the node's clock and its time sync in this boot.
type nodeClock struct {
	mu sync.Mutex
	// offset is the node's clock minus the true time (clock-offset).
	offset time.Duration
	// blocked: the node's time servers do not answer (time-unsynced).
	blocked bool
	// bootAt is when this boot's SyncController started (its bootTime,
	// from which machine.time.bootTimeout counts).
	bootAt time.Time
	// synced: a time server answered in this boot, or bootTimeout passed;
	// SyncController keeps it until the next boot.
	synced bool
	// wakeAt is when the timer wakes the controllers to sync (bootTimeout
	// due, or a time server answering again).
	wakeAt time.Time
	timer  *time.Timer
	// pkiOffset is the offset the node's etcd certificates were issued at.
	pkiOffset time.Duration
	// pkiIssues counts the issues of the node's etcd certificates (a client
	// kept across calls is good only for the certificates it verified).
	pkiIssues int
}

// tlsEra is what a TLS handshake with the node's etcd depends on besides the
// member: the node's clock and the certificates' issue.
type tlsEra struct {
	offset time.Duration
	issues int
}

func (n *Node) tlsEra() tlsEra {
	n.clk.mu.Lock()
	defer n.clk.mu.Unlock()

	return tlsEra{offset: n.clk.offset, issues: n.clk.pkiIssues}
}

// Now implements talosapi.Backend: the node's clock.
func (n *Node) Now() time.Time {
	n.clk.mu.Lock()
	defer n.clk.mu.Unlock()

	return time.Now().Add(n.clk.offset)
}

// bootClock starts this boot's time sync: the time servers answer at once
// unless they are held.
func (n *Node) bootClock() {
	n.clk.mu.Lock()
	defer n.clk.mu.Unlock()

	n.clk.bootAt = time.Now()
	n.clk.synced = !n.clk.blocked
	n.clk.stopTimer()
}

// stopTimer stops a pending wake; clk.mu is held.
func (c *nodeClock) stopTimer() {
	if c.timer != nil {
		c.timer.Stop()
		c.timer, c.wakeAt = nil, time.Time{}
	}
}

// wakeAfter has the node's controllers run again at at (or now, if it has
// passed); clk.mu is held. A wake already due earlier is kept.
func (n *Node) wakeAfter(at time.Time) {
	if n.clk.timer != nil && !n.clk.wakeAt.After(at) {
		return
	}

	n.clk.stopTimer()
	n.clk.wakeAt = at
	n.clk.timer = time.AfterFunc(time.Until(at), n.wake)
}

// timeStatus is SyncController's TimeStatus for the config: synced once a
// time server answered in this boot or, with machine.time.bootTimeout set,
// once that long (Talos time) has passed since boot; always with sync
// disabled (machine.time.disabled). With bootTimeout unset (0) the wait is
// forever.
func (n *Node) timeStatus(cfg config.Provider) (synced, disabled bool) {
	var bootTimeout time.Duration

	if cfg != nil && cfg.NetworkTimeSyncConfig() != nil {
		disabled = cfg.NetworkTimeSyncConfig().Disabled()
		bootTimeout = cfg.NetworkTimeSyncConfig().BootTimeout()
	}

	n.clk.mu.Lock()
	defer n.clk.mu.Unlock()

	if !n.clk.synced && bootTimeout > 0 {
		due := n.clk.bootAt.Add(n.c.clock.Wall(bootTimeout))
		if time.Now().Before(due) {
			n.wakeAfter(due)
		} else {
			n.clk.synced = true
		}
	}

	return n.clk.synced || disabled, disabled
}

// syncTime is time.SyncController's TimeStatus (controllers/time/sync.go).
// The epoch (clock jumps of 15 minutes or more that a sync made) is not
// modelled: the sim's clock is never stepped.
func (n *Node) syncTime(ctx context.Context, cfg config.Provider) error {
	st := timeres.NewStatus()
	st.TypedSpec().Synced, st.TypedSpec().SyncDisabled = n.timeStatus(cfg)

	was := n.timeSynced(ctx)

	if err := syncAll(ctx, n.resources, st.Metadata().Namespace(), "time.SyncController", []*timeres.Status{st}); err != nil {
		return err
	}

	// MachineStatusController watches the TimeStatus.
	if was != st.TypedSpec().Synced {
		n.refreshStatus()
	}

	return nil
}

// timeSynced reads the node's TimeStatus, as Talos's conditions do
// (resources/time SyncCondition).
func (n *Node) timeSynced(ctx context.Context) bool {
	st, err := safe.StateGetByID[*timeres.Status](ctx, n.resources, timeres.StatusID)

	return err == nil && st.TypedSpec().Synced
}

// QueryTimeServer implements talosapi.Backend: what an NTP query of server
// from the node gets. The host's clock stands for every server; while the
// node's time servers are held, the query waits its timeout for an answer
// that never comes and fails as beevik/ntp's does: the read of its UDP
// socket times out ("read udp <node>:<port>-><server>:123: i/o timeout").
func (n *Node) QueryTimeServer(ctx context.Context, server string) (time.Time, error) {
	n.clk.mu.Lock()
	blocked := n.clk.blocked
	n.clk.mu.Unlock()

	if !blocked {
		return time.Now(), nil
	}

	raddr, err := ntpServerAddr(ctx, server)
	if err != nil {
		return time.Time{}, err
	}

	// A real socket on the node's address gives the query's local port.
	laddr := &net.UDPAddr{IP: net.ParseIP(n.ip)}

	if conn, err := net.ListenUDP("udp", laddr); err == nil {
		laddr = conn.LocalAddr().(*net.UDPAddr) //nolint:forcetypeassert // a UDP socket's
		conn.Close()                            //nolint:errcheck
	}

	if !n.sleep(ctx, n.c.clock.Wall(ntpQueryTimeout)) {
		return time.Time{}, ctx.Err()
	}

	return time.Time{}, &net.OpError{Op: "read", Net: "udp", Source: laddr, Addr: raddr, Err: os.ErrDeadlineExceeded}
}

// defaultNTPAddr is the first address time.cloudflare.com (Talos's
// default time server) resolves to: the sim's nodes resolve no names.
var defaultNTPAddr = netip.MustParseAddr("162.159.200.1")

// ntpServerAddr is where a query of server goes: its address, the default
// server's known one, or what the host resolves the name to.
func ntpServerAddr(ctx context.Context, server string) (*net.UDPAddr, error) {
	if a, err := netip.ParseAddr(server); err == nil {
		return net.UDPAddrFromAddrPort(netip.AddrPortFrom(a, ntpPort)), nil
	}

	if server == constants.DefaultNTPServer {
		return net.UDPAddrFromAddrPort(netip.AddrPortFrom(defaultNTPAddr, ntpPort)), nil
	}

	return net.ResolveUDPAddr("udp", net.JoinHostPort(server, fmt.Sprint(ntpPort)))
}

// HoldTimeUnsynced implements target.Clocks: the node's time servers stop
// answering and its time counts as never synced in this boot (a fault from
// the start of a run: unreachable since power-on). Healed, the syncer's next
// retry gets an answer and the time syncs.
func (c *Cluster) HoldTimeUnsynced(_ context.Context, node string) (target.Heal, error) {
	n := c.Node(node)
	if n == nil {
		return nil, fmt.Errorf("unknown node %q", node)
	}

	n.clk.mu.Lock()
	n.clk.blocked, n.clk.synced = true, false
	n.clk.stopTimer()
	n.clk.mu.Unlock()
	n.wake()

	return func() error {
		n.clk.mu.Lock()
		defer n.clk.mu.Unlock()

		n.clk.blocked = false
		n.clk.stopTimer()
		n.clk.timer = time.AfterFunc(c.clock.Wall(ntpRetryPoll), func() {
			n.clk.mu.Lock()
			n.clk.synced = n.clk.synced || !n.clk.blocked
			n.clk.mu.Unlock()
			n.wake()
		})

		return nil
	}, nil
}

// issueEtcdCerts issues the node's etcd certificates again, from its clock,
// when the clock moved since they were issued: Talos's EtcdController writes
// them from the node's time once it is in sync, before etcd can start
// (controllers/secrets/etcd.go, internal/pkg/etcd/certs.go).
func (n *Node) issueEtcdCerts() error {
	n.clk.mu.Lock()
	offset, issued := n.clk.offset, n.clk.pkiOffset
	n.clk.mu.Unlock()

	if offset == issued {
		return nil
	}

	n.late.issue.Lock()
	defer n.late.issue.Unlock()

	n.late.mu.Lock()
	addrs := n.late.certAddrs // the addresses they name (lateaddr.go)
	n.late.mu.Unlock()

	return n.writeEtcdCerts(addrs, offset)
}

// writeEtcdCerts issues the node's etcd certificates for addrs from its
// clock (now plus offset) over the files its etcd reads, and keeps the
// offset they were issued at. The caller holds n.late.issue.
func (n *Node) writeEtcdCerts(addrs []netip.Addr, offset time.Duration) error {
	if _, err := writeEtcdPKI(filepath.Dir(n.pki.CACert), n.c.bundle.Certs.Etcd, n.name, addrs, time.Now().Add(offset)); err != nil {
		return fmt.Errorf("error generating etcd certs: %w", err)
	}

	n.clk.mu.Lock()
	n.clk.pkiOffset = offset
	n.clk.pkiIssues++
	n.clk.mu.Unlock()

	return nil
}

// OffsetClock implements target.Clocks: the node's clock is off by offset
// until healed; its TLS reads it (Now).
func (c *Cluster) OffsetClock(_ context.Context, node string, offset time.Duration) (target.Heal, error) {
	n := c.Node(node)
	if n == nil {
		return nil, fmt.Errorf("unknown node %q", node)
	}

	n.clk.mu.Lock()
	n.clk.offset = offset
	n.clk.mu.Unlock()

	return func() error {
		n.clk.mu.Lock()
		n.clk.offset = 0
		n.clk.mu.Unlock()

		return nil
	}, nil
}
