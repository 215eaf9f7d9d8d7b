package sim

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/cosi-project/runtime/pkg/state"
	"github.com/martinlindhe/base36"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/siderolabs/talos/pkg/machinery/nethelpers"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"

	"github.com/talchaos/talchaos/fakes/talosapi"
	"github.com/talchaos/talchaos/harness/apifault"
	"github.com/talchaos/talchaos/harness/netfault"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// Backend ports: the real listeners sit on the node's own address, behind the
// proxies on the real ports, and below the ephemeral range so nothing else
// grabs them between runs of etcd.
const (
	apiPort         = 50000
	etcdClientPort  = 2379
	etcdPeerPort    = 2380
	backendAPIPort  = 25000
	backendClient   = 22379
	backendPeerPort = 22380
)

// Node is one simulated Talos machine. It implements talosapi.Backend.
type Node struct {
	c        *Cluster
	name     string
	ip       string
	role     target.Role
	override scenario.NodeOverride
	dir      string
	dataDir  string
	// diskSlowed: a slow-disk fault was injected on the node (slowdisk.go).
	diskSlowed atomic.Bool
	pki        *etcdPKI
	tlsConf    *tls.Config // etcd admin client TLS, as Talos's own etcd clients use

	api  *talosapi.Server
	gate *netfault.Gate // on the peer proxy: cuts peer traffic by sender
	// index is the node's place in the cluster (cp1 0, ...).
	index int
	// addrs are the node's addresses, ip's first (netaddr.go); relays serve
	// the further routed ones.
	addrs  []scenario.Address
	relays []*netfault.Proxy
	// accumulated are addresses the node took in this boot (a shared IP),
	// under mu; stopVIP ends its campaign for one (vip.go).
	accumulated []netip.Addr
	stopVIP     func()
	proxies     map[target.Port]*netfault.Proxy
	machined    *talosapi.LogBuffer
	etcdLog     *talosapi.LogBuffer
	resources   state.State
	seed        uint64

	apiFaults apifault.Set

	// powerMu serialises power transitions (boot, reboot, reset, power off/on).
	powerMu sync.Mutex
	// powerCut is set while the node goes down without a clean shutdown.
	powerCut atomic.Bool
	// statusMu orders the MachineStatus writes: a stage set by a sequence
	// is not overwritten by a health refresh computed before it.
	statusMu sync.Mutex

	mu       sync.Mutex
	exitCode int // the running etcd's exit code once it dies abnormally: 137 killed, 2 Go panic
	cfg      config.Provider
	// persisted is the config the next boot starts with (STATE), when it is
	// not the active one (a staged or tried config); nil: the active one.
	persisted config.Provider
	// persistedNow is the config last persisted in this boot (Talos's
	// MachineConfig "persistent"): by the maintenance service or an apply.
	persistedNow config.Provider
	// rollback reverts a config applied in try mode.
	rollback    *time.Timer
	accepting   bool
	booted      bool
	stage       runtime.MachineStage
	bootAllowed bool
	etcdRun     *etcdRun
	peers       advertisedPeers
	kubelet     *service
	// kubeletStop ends the kubelet runner and waits for it (a restart).
	kubeletStop func()
	kubeletPID  int
	etcd        *embed.Etcd
	localEtcd   *localEtcd // the API's client of etcd (etcdlocal.go)
	pid         int
	bootCtx     context.Context //nolint:containedctx // lifetime of the current boot
	bootCancel  context.CancelFunc
	bootWG      sync.WaitGroup
	rngs        map[string]*rand.Rand

	// registered wakes the registration with discovery (node processes).
	registered chan struct{}
	// resync wakes the node's controllers (resources.go).
	resync chan struct{}
	// clk is the node's clock and its time sync (timesync.go).
	clk nodeClock
	// disco is its cluster discovery client (discoveryfault.go).
	disco nodeDiscovery
	// late is the node's addresses not up yet and what its etcd
	// certificates name (lateaddr.go).
	late lateAddrs

	// events is machined's event stream, started afresh by each boot;
	// bootID (under mu) is the kernel's boot ID of this boot.
	events *talosapi.EventLog
	bootID string
	// upgrading is held while an upgrade sequence runs (upgrade.go);
	// upgradedTo (under mu) is the version an upgrade installed.
	upgrading  sync.Mutex
	upgradedTo string
	// kubeletKubeconfig is the kubelet's kubeconfig of this boot, which
	// the upgrade's drain uses as Talos's does (drain.go).
	kubeletKubeconfig string
}

// Hostname implements talosapi.Backend: the applied config's hostname
// (machine.network.hostname, or the HostnameConfig document from v1.12:
// config.Container.NetworkHostnameConfig), else the automatic one its
// config asks for; in maintenance (no config) the node's name. It names the
// etcd member and the Kubernetes Node, as on Talos.
func (n *Node) Hostname() string {
	cfg := n.Config()
	if h := hostnameIn(cfg); h != "" {
		return h
	}

	// HostnameConfigController's automatic hostnames
	// (controllers/network/hostname_config.go): "stable" from the node's
	// identity, "addr" from its default address; v1alpha1 configs without
	// the document ask for "addr" unless machine.features.stableHostname.
	if cfg != nil && cfg.NetworkHostnameConfig() != nil {
		switch cfg.NetworkHostnameConfig().AutoHostname() {
		case nethelpers.AutoHostnameKindStable:
			return stableHostname(n.nodeID())
		case nethelpers.AutoHostnameKindAddr:
			return "talos-" + strings.NewReplacer(":", "", ".", "-").Replace(n.ip)
		}
	}

	return n.name
}

// stableHostname is getStableDefault: "talos-" and two groups of three
// characters of the base36 of the identity's hash.
func stableHostname(nodeID string) string {
	sum := sha256.Sum256([]byte(nodeID))
	b36 := strings.ToLower(base36.EncodeBytes(sum[:8]))

	return fmt.Sprintf("talos-%s-%s", b36[1:4], b36[4:7])
}

// hostnameIn is the static hostname a config sets, or "".
func hostnameIn(cfg config.Provider) string {
	if cfg != nil {
		if hc := cfg.NetworkHostnameConfig(); hc != nil {
			return hc.Hostname()
		}
	}

	return ""
}

// ConfigHostname is the hostname the node named name takes from its
// machine config, when that is not name: the name of its etcd member.
func ConfigHostname(name string, data []byte) string {
	cfg, err := configloader.NewFromBytes(data)
	if err != nil {
		return ""
	}

	if h := hostnameIn(cfg); h != name {
		return h
	}

	return ""
}

// Address implements talosapi.Backend.
func (n *Node) Address() string { return n.ip }

// Config implements talosapi.Backend.
func (n *Node) Config() config.Provider {
	n.mu.Lock()
	defer n.mu.Unlock()

	return n.cfg
}

// Resources implements talosapi.Backend.
func (n *Node) Resources() state.State { return n.resources }

// Log implements talosapi.Backend.
func (n *Node) Log(id string) *talosapi.LogBuffer {
	switch id {
	case "machined":
		return n.machined
	case "etcd":
		return n.etcdLog
	}

	return nil
}

// AcceptConfig implements talosapi.Backend: the maintenance service hands the
// config over and the node leaves maintenance within seconds, switching its API
// to mutual TLS (a pre-installed node needs no reboot).
func (n *Node) AcceptConfig(cfg config.Provider) {
	n.mu.Lock()
	if n.accepting || n.cfg != nil {
		n.mu.Unlock()

		return
	}

	n.accepting = true
	ctx := n.bootCtx
	n.mu.Unlock()

	n.goBoot(func() {
		defer func() {
			n.mu.Lock()
			n.accepting = false
			n.mu.Unlock()
		}()

		if !n.sleep(ctx, n.c.clock.Wall(n.c.profile.LeaveMaintenance)) {
			return
		}

		n.mu.Lock()
		n.cfg, n.persistedNow = cfg, cfg
		n.mu.Unlock()
		n.saveState()

		n.machined.Printf("applied configuration, leaving maintenance mode")

		if err := n.api.Start(); err != nil {
			n.machined.Printf("failed to start the API: %s", err)

			return
		}

		n.startServices()
	})
}

// ApplyConfig implements talosapi.Backend for a configured node.
// Every apply but a try cancels a pending try rollback (Talos's
// CancelConfigRollbackTimeout); STAGED persists the config for the next boot
// only, NO_REBOOT makes it active and persisted, REBOOT persists it and
// reboots into it.
func (n *Node) ApplyConfig(_ context.Context, cfg config.Provider, mode machine.ApplyConfigurationRequest_Mode) error {
	n.mu.Lock()
	n.cancelRollback()

	switch mode { //nolint:exhaustive
	case machine.ApplyConfigurationRequest_STAGED:
		n.persisted = cfg
	case machine.ApplyConfigurationRequest_REBOOT: //nolint:staticcheck // the mode being applied
		n.persisted = cfg
	default:
		n.cfg, n.persisted = cfg, nil
	}
	n.persistedNow = cfg
	n.mu.Unlock()
	n.saveState()

	if mode == machine.ApplyConfigurationRequest_REBOOT { //nolint:staticcheck // the mode being applied
		return n.Reboot("")
	}

	return nil
}

// TryConfig implements talosapi.Backend: the config becomes active, not
// persisted, and is rolled back after timeout (Talos time) as
// RollbackToConfigAfter does.
func (n *Node) TryConfig(cfg config.Provider, timeout time.Duration) error {
	n.mu.Lock()
	defer n.mu.Unlock()

	n.cancelRollback()

	previous := n.cfg
	if n.persisted == nil {
		n.persisted = previous
	}

	n.cfg = cfg
	n.rollback = time.AfterFunc(n.c.clock.Wall(timeout), func() {
		if n.c.ctx.Err() != nil {
			return
		}

		n.machined.Printf("rolling back the configuration")

		n.mu.Lock()
		n.cfg = previous
		n.mu.Unlock()
		n.c.wakeAll()
	})

	defer n.c.wakeAll()

	return nil
}

// cancelRollback stops a pending try rollback; n.mu is held.
func (n *Node) cancelRollback() {
	if n.rollback != nil {
		n.rollback.Stop()
		n.rollback = nil
	}
}

// BootstrapAllowed implements talosapi.Backend.
func (n *Node) BootstrapAllowed() bool {
	n.mu.Lock()
	defer n.mu.Unlock()

	return n.bootAllowed
}

// EtcdDataDirEmpty implements talosapi.Backend.
func (n *Node) EtcdDataDirEmpty() bool {
	entries, _ := os.ReadDir(n.dataDir) //nolint:errcheck // a missing dir is empty

	return len(entries) == 0
}

// BootstrapEtcd implements talosapi.Backend (services.BootstrapEtcd): stop the
// joining etcd, mark it "Bootstrap requested", start a new one-member cluster.
// It does not wait for etcd.
func (n *Node) BootstrapEtcd(context.Context) error {
	n.mu.Lock()
	old := n.etcdRun
	n.mu.Unlock()

	if old != nil {
		old.stop()
		old.svc.update(stateFinished, "Bootstrap requested")
	}

	if !n.EtcdDataDirEmpty() {
		return errors.New("etcd data directory is not empty")
	}

	n.startEtcdService(true)

	return nil
}

// Services implements talosapi.Backend.
func (n *Node) Services() []*machine.ServiceInfo {
	n.mu.Lock()
	run, kubelet := n.etcdRun, n.kubelet
	n.mu.Unlock()

	var out []*machine.ServiceInfo

	if run != nil {
		out = append(out, run.svc.proto())
	}

	if kubelet != nil {
		out = append(out, kubelet.proto())
	}

	return out
}

// EtcdClient implements talosapi.Backend: the local member directly (Talos's
// localhost:2379, never through the network), or the discovered control-plane
// endpoints in random order (NewClientFromControlPlaneIPs).
func (n *Node) EtcdClient(ctx context.Context, local bool) (*clientv3.Client, func(), error) {
	if local {
		return n.localEtcdClient(ctx)
	}

	c, err := n.clusterClient(ctx)
	if err != nil {
		return nil, nil, err
	}

	return c, func() { c.Close() }, nil //nolint:errcheck
}

// EtcdClientEndpoint implements talosapi.Backend.
func (n *Node) EtcdClientEndpoint() string {
	return net.JoinHostPort(n.ip, strconv.Itoa(backendClient))
}

func (n *Node) clusterClient(ctx context.Context) (*clientv3.Client, error) {
	endpoints, err := n.discoveredEndpoints()
	if err != nil {
		return nil, err
	}

	r := n.rng("shuffle")
	n.mu.Lock()
	r.Shuffle(len(endpoints), func(i, j int) { endpoints[i], endpoints[j] = endpoints[j], endpoints[i] })
	n.mu.Unlock()

	return n.newEtcdClient(ctx, endpoints)
}

// newEtcdClient is Talos's etcd.NewClient: admin certificate, 5 s dial timeout.
func (n *Node) newEtcdClient(ctx context.Context, endpoints []string) (*clientv3.Client, error) {
	tlsConf := n.tlsConf.Clone()
	tlsConf.Time = n.Now // members' certificates judged by the node's clock

	c, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: n.c.timeout(n.c.profile.EtcdDialTimeout),
		Context:     ctx,
		TLS:         tlsConf,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{
			grpc.WithContextDialer(n.dial),
			grpc.WithChainUnaryInterceptor(n.etcdInterceptor),
			grpc.WithConnectParams(etcdConnectParams(n.c.clock)),
		},
	})
	if err != nil {
		return nil, fmt.Errorf("error building etcd client: %w", err)
	}

	return c, nil
}

// Reboot implements talosapi.Backend: the reply goes out first, then the node
// goes down and comes back with its config and etcd data.
// The reboot sequence's events are published up to stopAllServices, when
// the API stops.
func (n *Node) Reboot(actorID string) error {
	n.c.wg.Go(func() {
		n.replyGrace()

		n.mu.Lock()
		ctx := n.bootCtx
		n.mu.Unlock()

		if err := n.runSequence(ctx, "reboot", rebootPhases(), actorID); err != nil {
			return
		}

		n.powerCycle(cycle{sequenced: true})
	})

	return nil
}

// Shutdown implements talosapi.Backend: the node goes down and stays down
// (until the target powers it on).
func (n *Node) Shutdown(force bool, actorID string) error {
	n.c.wg.Go(func() {
		n.replyGrace()

		n.mu.Lock()
		ctx := n.bootCtx
		n.mu.Unlock()

		if err := n.runSequence(ctx, "shutdown", n.shutdownPhases(force), actorID); err != nil {
			n.machined.Printf("shutdown failed: %s", err)

			return
		}

		n.powerCycle(cycle{halt: true, sequenced: true})
	})

	return nil
}

// eventsFlush bounds the wait for the event streams to send what was
// published when a node shuts down cleanly (wall time); with no stream open
// there is no wait.
const eventsFlush = 500 * time.Millisecond

// replyGrace lets the API reply go out before an API-triggered reboot or reset
// takes the node down: Talos's sequences stop services first, apid last.
func (n *Node) replyGrace() {
	n.sleep(n.c.ctx, n.c.clock.WallAtLeast(2*time.Second, 50*time.Millisecond))
}

// Reset implements talosapi.Backend. A graceful reset leaves etcd first; a
// forced one leaves the member behind. Without a list of partitions both STATE
// (the config) and EPHEMERAL (etcd data) are wiped; with one, only those named.
func (n *Node) Reset(req *machine.ResetRequest, actorID string) error {
	wipe := wipeAll

	if parts := req.GetSystemPartitionsToWipe(); len(parts) > 0 {
		wipe = wipeNothing

		for _, p := range parts {
			switch {
			case p.GetLabel() == "STATE" && p.GetWipe():
				wipe |= wipeConfig
			case p.GetLabel() == "EPHEMERAL" && p.GetWipe():
				wipe |= wipeEtcd
			}
		}
	}

	return n.reset(req.GetGraceful(), req.GetReboot(), wipe, actorID)
}

// errDown is a reset asked of a node that is down: on a real node the call
// cannot reach it.
var errDown = errors.New("the node is down")

// reset runs the reset sequence after the reply's grace, as the API's Reset
// does (v1alpha1_server.go: the sequence in a goroutine, its failure only
// logged), and then takes the node down, wiping what wipe says. The reset
// fault comes here too, as the real target's does through the API.
func (n *Node) reset(graceful, reboot bool, wipe wipeMode, actorID string) error {
	n.mu.Lock()
	booted := n.booted
	n.mu.Unlock()

	if !booted {
		return errDown
	}

	n.c.wg.Go(func() {
		n.replyGrace()

		n.mu.Lock()
		ctx := n.bootCtx
		n.mu.Unlock()

		// The sequence leaves etcd itself (its leave phase); its failure
		// leaves the node as it is.
		if err := n.runSequence(ctx, "reset", n.resetPhases(graceful, reboot), actorID); err != nil {
			n.machined.Printf("reset failed: %s", err)

			return
		}

		n.powerCycle(cycle{wipe: wipe, halt: !reboot, sequenced: true})
	})

	return nil
}

// wipeMode says what a reset erases.
type wipeMode int

const (
	wipeNothing wipeMode = 0
	wipeConfig  wipeMode = 1 << iota // STATE: the machine config
	wipeEtcd                         // EPHEMERAL: /var, with the etcd data dir
	wipeAll     = wipeConfig | wipeEtcd
)

// leaveForReset is a graceful reset's leaveEtcd task
// (runtime/v1alpha1/v1alpha1_sequencer_tasks.go LeaveEtcd): when the etcd
// data directory holds a member and the etcd service is Running, Stopping or
// Failed, the node leaves the cluster as EtcdLeaveCluster does (LeaveEtcd:
// its member removed, retried for 5 minutes; etcd stopped; its data
// removed). An error fails the reset sequence: the node stays as it is.
func (n *Node) leaveForReset() error {
	if _, err := os.Stat(filepath.Join(n.dataDir, "member")); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}

		return err
	}

	n.mu.Lock()
	run := n.etcdRun
	n.mu.Unlock()

	if run == nil {
		return nil
	}

	if state, _ := run.svc.status(); state != stateRunning && state != stateStopping && state != stateFailed {
		return nil
	}

	ctx := n.c.ctx

	client, err := n.clusterClient(ctx)
	if err != nil {
		return fmt.Errorf("failed to create etcd client: %w", err)
	}

	defer client.Close() //nolint:errcheck

	if err := n.LeaveEtcd(clientv3.WithRequireLeader(ctx), client); err != nil {
		return fmt.Errorf("failed to leave cluster: %w", err)
	}

	return nil
}

// cycle is how a node goes down and what comes back.
type cycle struct {
	// wipe is what is erased while it is down.
	wipe wipeMode
	// halt: it stays down (powered off, or a reset without reboot).
	halt bool
	// cut: the power is cut; etcd gets no SIGTERM, no leadership transfer.
	cut bool
	// sequenced: a sequence took the node down, and its events set the
	// stage (runSequence), which the cycle keeps.
	sequenced bool
}

// powerCycle takes the node down (services stopped, API closed), erases what
// c.wipe says, and boots it again unless c.halt.
func (n *Node) powerCycle(c cycle) {
	n.powerMu.Lock()
	defer n.powerMu.Unlock()

	wipe := c.wipe

	// A power cut gives etcd no SIGTERM: no leadership transfer on the way down.
	n.powerCut.Store(c.cut)
	defer n.powerCut.Store(false)

	// A power cut publishes nothing: the machine is gone before machined
	// can say so. A reboot machined itself decides (a boot that timed out)
	// says it first.
	if !c.sequenced && !c.cut {
		stage := runtime.MachineStageRebooting
		if wipe != wipeNothing {
			stage = runtime.MachineStageResetting
		}

		n.setStage(stage)
	}

	n.shutdown()

	// A boot starts from the persisted config: a staged one takes effect, a
	// tried one is gone.
	n.mu.Lock()
	n.cancelRollback()

	if n.persisted != nil {
		n.cfg, n.persisted = n.persisted, nil
	}

	if wipe&wipeConfig != 0 {
		n.cfg = nil
	}
	n.mu.Unlock()
	n.saveState()

	if wipe&wipeEtcd != 0 {
		os.RemoveAll(n.dataDir) //nolint:errcheck
	}

	if c.halt {
		return
	}

	select {
	case <-n.c.ctx.Done():
		return
	case <-time.After(n.c.clock.Wall(n.c.profile.RebootDuration)):
	}

	if err := n.boot(); err != nil {
		n.machined.Printf("boot failed: %s", err)
	}
}

// powerOn boots a node that is powered off.
func (n *Node) powerOn() {
	n.powerMu.Lock()
	defer n.powerMu.Unlock()

	n.mu.Lock()
	booted := n.booted
	n.mu.Unlock()

	if booted {
		return
	}

	if err := n.boot(); err != nil {
		n.machined.Printf("boot failed: %s", err)
	}
}

// boot starts the machine: the API in the mode its config allows, and the
// services when it has a config.
func (n *Node) boot() error {
	if n.c.ctx.Err() != nil {
		return nil
	}

	// machined keeps its logs and events in memory: a boot starts them
	// afresh, and the kernel draws a new boot ID.
	n.machined.Reset()
	n.etcdLog.Reset()
	n.events.Reset()

	ctx, cancel := context.WithCancel(n.c.ctx)

	// secrets.Etcd lives in memory: the boot issues the certificates again.
	n.late.mu.Lock()
	n.late.bootIssued = false
	n.late.mu.Unlock()

	n.mu.Lock()
	n.accumulated = nil
	n.bootID = uuid.New().String()
	n.bootCtx, n.bootCancel = ctx, cancel
	n.booted = true
	n.persistedNow = nil // machined's resources are in memory
	hasConfig := n.cfg != nil
	n.mu.Unlock()

	if err := os.MkdirAll(n.dataDir, 0o700); err != nil {
		return err
	}

	if hasConfig {
		n.setStage(runtime.MachineStageBooting)
	} else {
		n.setStage(runtime.MachineStageMaintenance)
	}

	n.bootClock()
	n.bootDiscovery()

	// The resources are there before the API answers, as machined's
	// controllers run before apid starts.
	if err := n.syncResources(ctx); err != nil {
		return err
	}

	n.goBoot(func() { n.runControllers(ctx) })
	n.goBoot(func() { n.runAdvertisedPeers(ctx) })
	n.goBoot(func() { n.runDiscovery(ctx) })

	if err := n.api.Start(); err != nil {
		return err
	}

	if hasConfig {
		n.startServices()
	}

	return nil
}

// shutdown stops every service and the API and waits for the boot's goroutines.
func (n *Node) shutdown() {
	n.mu.Lock()
	cancel, booted := n.bootCancel, n.booted
	n.booted = false
	n.bootAllowed = false
	n.mu.Unlock()

	if !booted {
		return
	}

	// A clean shutdown: the event streams send what the sequence published
	// and end, as apid stopping last lets them (a power cut cuts them).
	if !n.powerCut.Load() && n.events.Close(eventsFlush) {
		n.api.StopGracefully(eventsFlush)
	} else {
		n.api.Stop()
	}

	// A clean shutdown gives the shared IP up while etcd still runs (the
	// VIP operator's finalizer on the kubelet lifecycle); a power cut
	// leaves its lease to expire.
	n.mu.Lock()
	stopVIP := n.stopVIP
	n.stopVIP = nil
	n.mu.Unlock()

	if stopVIP != nil && !n.powerCut.Load() {
		stopVIP()
	}

	cancel()
	n.bootWG.Wait()

	n.mu.Lock()
	n.etcdRun, n.kubelet = nil, nil
	n.mu.Unlock()
}

// startServices is the boot sequence of a configured node: kubelet everywhere,
// etcd on control planes; bootstrap is allowed from here on.
func (n *Node) startServices() {
	n.setStage(runtime.MachineStageBooting)

	kubelet := newService("kubelet", n.machined.Printf, n.refreshStatus)

	n.mu.Lock()
	n.kubelet = kubelet
	ctx := n.bootCtx
	n.mu.Unlock()

	// Bootstrap is allowed once CRI is up (Runtime.IsBootstrapAllowed,
	// v1alpha1_runtime.go), which is what the services wait for last.
	n.goBoot(func() {
		if n.sleep(ctx, n.c.clock.Wall(n.c.profile.ServiceWait)) {
			n.mu.Lock()
			n.bootAllowed = true
			n.mu.Unlock()
		}
	})

	n.startKubelet(ctx, kubelet)

	if n.role == target.ControlPlane {
		n.startEtcdService(false)
		n.startVIP(ctx)
	}

	n.goBoot(func() { n.watchBoot(ctx) })
}

// startKubelet runs the kubelet service runner under ctx until it ends or is
// stopped for a restart.
func (n *Node) startKubelet(ctx context.Context, svc *service) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})

	n.mu.Lock()
	n.kubeletStop = func() { cancel(); <-done }
	n.mu.Unlock()

	n.goBoot(func() {
		defer close(done)

		n.runKubelet(ctx, svc)
	})
}

// runKubelet models the kubelet service just far enough for health checks:
// it runs and reports healthy.
func (n *Node) runKubelet(ctx context.Context, svc *service) {
	svc.update(stateStarting, "Starting service")

	unmet := func() []string {
		if !n.timeSynced(ctx) {
			return []string{condTimeSync}
		}

		return nil
	}

	if !n.waitConditions(ctx, svc, kubeletWaits, unmet) {
		svc.update(stateFailed, "Condition failed: context canceled")

		return
	}

	svc.update(statePreparing, "Running pre state")
	svc.update(statePreparing, "Creating service runner")
	n.mu.Lock()
	n.pid++
	pid := n.pid
	n.kubeletPID = pid
	n.mu.Unlock()
	svc.update(stateRunning, "Started task kubelet (PID %d) for container kubelet", pid)
	svc.initHealth()

	if n.kubeletEnabled() {
		n.goBoot(func() { n.runKubernetes(ctx) })
	}

	if n.sleep(ctx, n.c.clock.Wall(n.c.profile.HealthInitialDelay)) {
		svc.setHealth(true, "")
	}

	<-ctx.Done()
	svc.update(stateFinished, "Service finished successfully")
}

// refreshStatus recomputes MachineStatus after a service changed: a node reaches
// stage "running" once etcd (control planes) and kubelet are up and healthy.
//
// The unmet conditions are MachineStatusController's
// (internal/app/machined/pkg/controllers/runtime/machine_status.go): the
// "services" check names each required service that is "not running" or
// runs "not healthy" (a health not yet known is no problem there); the
// sim has no Kubernetes, so until etcd and kubelet are healthy its node is
// not Ready either, and "nodeReady" says the Node's status is not
// available yet, as it reads before kubelet registers. The "time" check
// fails while the node's TimeStatus is not synced ("time is not synced").
// apid, machined, trustd and the network check are always met here, and
// there is no "staticPods" check.
func (n *Node) refreshStatus() {
	n.mu.Lock()
	run, kubelet, stage := n.etcdRun, n.kubelet, n.stage
	n.mu.Unlock()

	if stage != runtime.MachineStageBooting && stage != runtime.MachineStageRunning {
		return
	}

	var (
		problems []string
		waiting  bool
	)

	check := func(id string, s *service) {
		if s == nil {
			problems = append(problems, id+" not running")

			return
		}

		state, healthy := s.status()

		switch {
		case state != stateRunning:
			problems = append(problems, id+" not running")
		case !healthy && !s.healthUnknown():
			problems = append(problems, id+" not healthy")
		case !healthy:
			waiting = true
		}
	}

	if n.role == target.ControlPlane {
		var svc *service
		if run != nil {
			svc = run.svc
		}

		check("etcd", svc)
	}

	check("kubelet", kubelet)

	var unmet []runtime.UnmetCondition

	if !n.timeSynced(context.Background()) {
		unmet = append(unmet, runtime.UnmetCondition{Name: "time", Reason: "time is not synced"})
	}

	if len(problems) > 0 {
		unmet = append(unmet, runtime.UnmetCondition{Name: "services", Reason: strings.Join(problems, ", ")})
	}

	if len(problems) > 0 || waiting {
		unmet = append(unmet, runtime.UnmetCondition{Name: "nodeReady", Reason: fmt.Sprintf("node %q status is not available yet", n.name)})
	}

	ready := len(unmet) == 0
	if ready && stage == runtime.MachineStageBooting {
		stage = runtime.MachineStageRunning
	}

	n.statusMu.Lock()
	defer n.statusMu.Unlock()

	// A sequence may have moved the stage on while the checks ran (it
	// starts with the services still up): its stage stands.
	n.mu.Lock()
	moved := n.stage != runtime.MachineStageBooting && n.stage != runtime.MachineStageRunning
	if !moved {
		n.stage = stage
	}
	n.mu.Unlock()

	if !moved {
		n.writeMachineStatus(stage, ready, unmet)
	}
}

// setStage sets the machine's stage. Outside booting and running machined
// checks nothing (machine_status.go getReadinessChecks): the status is ready,
// with no unmet conditions, while a node resets, reboots or upgrades.
func (n *Node) setStage(stage runtime.MachineStage) {
	n.statusMu.Lock()
	defer n.statusMu.Unlock()

	n.mu.Lock()
	n.stage = stage
	n.mu.Unlock()

	n.writeMachineStatus(stage, stage != runtime.MachineStageBooting && stage != runtime.MachineStageRunning, nil)
}

// writeMachineStatus updates the COSI MachineStatus resource.
func (n *Node) writeMachineStatus(stage runtime.MachineStage, ready bool, unmet []runtime.UnmetCondition) {
	ctx := context.Background()
	ms := runtime.NewMachineStatus()
	ms.TypedSpec().Stage = stage
	ms.TypedSpec().Status = runtime.MachineStatusStatus{Ready: ready, UnmetConditions: unmet}

	existing, err := n.resources.Get(ctx, ms.Metadata())
	if err != nil {
		if state.IsNotFoundError(err) && n.resources.Create(ctx, ms) == nil {
			n.publishMachineStatus(ms)
		}

		return
	}

	if cur, ok := existing.(*runtime.MachineStatus); ok &&
		cur.TypedSpec().Stage == stage && cur.TypedSpec().Status.Ready == ready && len(cur.TypedSpec().Status.UnmetConditions) == len(unmet) {
		return
	}

	ms.Metadata().SetVersion(existing.Metadata().Version())

	if n.resources.Update(ctx, ms) == nil {
		n.publishMachineStatus(ms)
	}
}

// publishMachineStatus is MachineStatusPublisherController
// (controllers/runtime/machine_status_publisher.go): every change of the
// MachineStatus resource is an event.
func (n *Node) publishMachineStatus(ms *runtime.MachineStatus) {
	unmet := make([]*machine.MachineStatusEvent_MachineStatus_UnmetCondition, 0, len(ms.TypedSpec().Status.UnmetConditions))
	for _, c := range ms.TypedSpec().Status.UnmetConditions {
		unmet = append(unmet, &machine.MachineStatusEvent_MachineStatus_UnmetCondition{Name: c.Name, Reason: c.Reason})
	}

	n.events.Publish(&machine.MachineStatusEvent{
		Stage:  machine.MachineStatusEvent_MachineStage(ms.TypedSpec().Stage),
		Status: &machine.MachineStatusEvent_MachineStatus{Ready: ms.TypedSpec().Status.Ready, UnmetConditions: unmet},
	}, "")
}

// embedConfig is the etcd command line Talos builds, as an embed.Config.
func (n *Node) embedConfig(args etcdStartArgs, out io.Writer) (*embed.Config, error) {
	cfg := embed.NewConfig()
	cfg.Name = n.Hostname()
	cfg.Dir = n.dataDir
	cfg.InitialCluster = args.initialCluster
	cfg.ClusterState = args.clusterState

	parse := func(s string) url.URL {
		u, _ := url.Parse(s) //nolint:errcheck // built from an IP and a port

		return *u
	}

	parseAll := func(ss []string) []url.URL {
		out := make([]url.URL, 0, len(ss))
		for _, s := range ss {
			out = append(out, parse(s))
		}

		return out
	}

	cfg.ListenPeerUrls = []url.URL{parse("https://" + net.JoinHostPort(n.peerBackendHost(), strconv.Itoa(backendPeerPort)))}
	cfg.AdvertisePeerUrls = parseAll(n.peerURLs())
	cfg.ListenClientUrls = []url.URL{parse("https://" + net.JoinHostPort(n.ip, strconv.Itoa(backendClient)))}
	cfg.AdvertiseClientUrls = parseAll(n.clientURLs())
	cfg.ListenMetricsUrls = nil

	cfg.ClientTLSInfo = transport.TLSInfo{
		CertFile: n.pki.ServerCert, KeyFile: n.pki.ServerKey, TrustedCAFile: n.pki.CACert, ClientCertAuth: true,
	}
	// etcd checks a peer's client certificate against the connection's
	// source address (client/pkg/transport/listener_tls.go checkSAN); here
	// every connection comes from the proxy in front of the listener, so the
	// check is made where the peer's own source address is known: the relay
	// gates of the node's further addresses (lateaddr.go; on its main
	// address a peer's source is its main address, which its certificate
	// always names).
	cfg.PeerTLSInfo = transport.TLSInfo{
		CertFile: n.pki.PeerCert, KeyFile: n.pki.PeerKey, TrustedCAFile: n.pki.CACert, ClientCertAuth: true,
		SkipClientSANVerify: true,
	}
	// TLS 1.2 keeps the peer's client certificate readable on the wire, which is
	// how the peer gate tells senders apart (see partition.go). embed applies
	// this to both peer and client TLS, overriding TLSInfo.MaxVersion.
	cfg.TlsMaxVersion = "TLS1.2"

	e := n.c.sc.Cluster.Etcd
	if e.MaxLearners > 0 {
		cfg.MaxLearners = e.MaxLearners
	}

	if e.SnapshotCount > 0 {
		cfg.SnapshotCount = e.SnapshotCount
	}

	if e.SnapshotCatchUpEntries > 0 {
		cfg.SnapshotCatchUpEntries = e.SnapshotCatchUpEntries
	}

	// etcd's raft timers scaled with the run, down to a floor (clock.go); no
	// fsync: the data dir is scratch.
	tick := etcdTick(n.c.clock)
	cfg.TickMs = uint(tick.Milliseconds())
	cfg.ElectionMs = uint((electionFactor * tick).Milliseconds())
	// etcd skips its fsyncs for speed, except on a node whose disk a fault
	// slows (slowdisk.go): they are what the fault delays.
	cfg.UnsafeNoFsync = !n.syncsDisk()
	cfg.EnableGRPCGateway = false

	// Durations as etcd's own logger writes them (logutil's
	// DefaultZapLoggerConfig): "took":"1.5s", not seconds as a number.
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeDuration = zapcore.StringDurationEncoder

	logger := zap.New(zapcore.NewCore(
		zapcore.NewJSONEncoder(enc),
		zapcore.AddSync(out),
		zap.InfoLevel,
	))
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(logger.WithOptions(
		zap.WithPanicHook(etcdDies{n}), zap.WithFatalHook(etcdDies{n})))

	return cfg, nil
}

// goBoot runs f as part of the current boot: shutdown waits for it.
func (n *Node) goBoot(f func()) {
	n.bootWG.Add(1)

	go func() {
		defer n.bootWG.Done()

		f()
	}()
}

// sleep waits d or until ctx ends; it reports whether the full time passed.
func (n *Node) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}

	t := time.NewTimer(d)
	defer t.Stop()

	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// rng returns the node's seeded random source for one purpose (jitter of a loop,
// endpoint shuffling), so one seed gives one schedule.
func (n *Node) rng(purpose string) *rand.Rand {
	n.mu.Lock()
	defer n.mu.Unlock()

	if r, ok := n.rngs[purpose]; ok {
		return r
	}

	h := fnv.New64a()
	h.Write([]byte(n.name + "/" + purpose)) //nolint:errcheck

	r := rand.New(rand.NewPCG(n.seed, h.Sum64()))
	if n.rngs == nil {
		n.rngs = map[string]*rand.Rand{}
	}

	n.rngs[purpose] = r

	return r
}

// peerBackendHost is where etcd's peer listener sits behind the peer proxy:
// 127.0.0.1 when the node runs as a process in its own network namespace,
// the node's loopback address in the sim, or the node's loopback twin when
// its own address is not a loopback one (Kubernetes, hostaddr.go). The
// proxy's connections come from there, not from the peer, so etcd's own
// check of a peer's source address is left to the relay gates
// (embedConfig, lateaddr.go).
func (n *Node) peerBackendHost() string {
	switch {
	case n.c.single:
		return "127.0.0.1"
	case n.c.kube.Hyperkube != "" || n.c.netAddrs != nil:
		return n.loopbackTwin()
	}

	return n.ip
}
