// Package target is what the engine knows of a place nodes run: their names,
// roles, addresses and configs, a talosconfig, and the fault primitives the place
// can inject. Everything else the engine learns through the Talos API.
package target

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"google.golang.org/grpc"

	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"

	"github.com/talchaos/talchaos/harness/scenario"
)

// Role of a node.
type Role string

// Roles.
const (
	ControlPlane Role = "controlplane"
	Worker       Role = "worker"
)

// Node is one node as the engine addresses it.
type Node struct {
	Name    string
	Role    Role
	Address string // IP address, as in certificates and member lists
	// Addresses are the node's further addresses (an operator's second
	// subnet, an announced loopback), which its etcd member may advertise.
	Addresses []string
	// Hostname is the hostname its config gives it, when that is not its
	// name: its etcd member's name.
	Hostname string
	// Endpoint is where orchestrators reach the node's Talos API (host:port). On
	// the real target it is talchaos's own proxy, so API-path faults apply.
	Endpoint string
	// DirectEndpoint, when set, reaches the node without that proxy: the
	// observer uses it so that faults on the path do not blind it.
	DirectEndpoint string
	// ServerName, when set, is the name the node's certificate is verified
	// against (the endpoint is then a proxy address).
	ServerName string
	// Via, when set, is a Talos API endpoint (host:port) that proxies the
	// talosconfig client's calls to the node (talosctl -e Via -n Address);
	// the maintenance client still dials the node itself.
	Via    string
	Config []byte // the machine configuration to apply
}

// ObserverEndpoint is the endpoint the observer uses.
func (n Node) ObserverEndpoint() string {
	if n.DirectEndpoint != "" {
		return n.DirectEndpoint
	}

	return n.Endpoint
}

// ClientFaults is implemented by clusters that inject API faults on the client
// side: their interceptors go into the engine's own clients of a node.
type ClientFaults interface {
	ClientDialOptions(node string) []grpc.DialOption
}

// Capability is one fault primitive a target can carry out: a toxic on one
// port, a process operation, a partition, an interception of one RPC. Fault
// kinds (harness/chaos) say which they need, given their parameters; targets
// say which they have, so that a fault a target cannot inject is refused before
// anything starts.
type Capability string

// ToxicOn is the capability of impairing traffic through a node's port.
func ToxicOn(p Port) Capability { return Capability("toxic:" + string(p)) }

// ProcessCap is the capability of one process operation.
func ProcessCap(op ProcessOp) Capability { return Capability("process:" + string(op)) }

// InterceptAt is the capability of intercepting rpc where the node serves it
// (or, for the etcd calls, where the node's own Talos code makes it): every
// client is affected, a user's own bootstrap script too.
func InterceptAt(rpc string) Capability { return Capability("api:" + rpc) }

// InterceptEngine is the capability of intercepting the engine's own calls of
// rpc, on the client side: only the built-in orchestrators are affected.
func InterceptEngine(rpc string) Capability { return Capability("engine-api:" + rpc) }

// Capabilities without parameters.
const (
	// PartitionNodes cuts all traffic between two nodes, both ways.
	PartitionNodes Capability = "partition"
	// IsolateNode cuts a node off from every other node and from the engine.
	IsolateNode Capability = "isolate"
	// EtcdMembership changes the etcd member list through a control plane's
	// Talos API, as an operator does; any target whose control planes
	// answer the Talos API can.
	EtcdMembership Capability = "etcd-membership"
	// HoldTimeUnsynced keeps a node's time servers from answering: its time
	// does not sync.
	HoldTimeUnsynced Capability = "time-unsynced"
	// OffsetClock sets a node's clock off from the true time.
	OffsetClock Capability = "clock-offset"
	// RegistryImages keeps an image from the registry the nodes pull from.
	RegistryImages Capability = "registry"
	// DiscoveryRegistry acts on what a node's cluster discovery client gets
	// from the discovery service: nothing (unreachable), or only some
	// affiliates.
	DiscoveryRegistry Capability = "discovery"
	// SlowDisk makes a node's syncs to its etcd data dir slow.
	SlowDisk Capability = "slow-disk"
	// HoldAddressDown keeps one of a node's further addresses off it until
	// healed: one that comes up late (address-late), or goes (address-gone).
	HoldAddressDown Capability = "address-late"
)

// Target provisions clusters.
type Target interface {
	Name() string
	// Capabilities lists every primitive the target can carry out on some node.
	Capabilities() []Capability
	// Supports reports whether the target can carry out c on node, with the
	// reason as a sentence when it cannot (the real target needs a power
	// provider for some nodes, for instance).
	Supports(c Capability, node string) error
	// Disposable reports whether the nodes exist only for the run (sim,
	// container). On a target that is not disposable (real nodes)
	// destructive faults and remedies need the user's explicit permission.
	Disposable() bool
	// TimeScale is how much faster than real time the nodes' Talos timers
	// run in a run of the scenario: the scenario's own scale for simulated
	// nodes (at most what the sim keeps faithful for the cluster's size); the
	// inventory's for real nodes (1 unless `up` set it), whatever the
	// scenario says.
	TimeScale(sc *scenario.Scenario) float64
	// Check refuses, before anything starts, a scenario the target cannot run
	// (a node the inventory lacks, say).
	Check(sc *scenario.Scenario) error
	// Provision brings up the scenario's nodes, unconfigured (in maintenance).
	Provision(ctx context.Context, sc *scenario.Scenario, opts Options) (Cluster, error)
}

// ClockFloor is a Talos-time interval a target cannot scale all the way: at
// the run's time scale it lasts Modelled instead of Talos, in Talos time.
type ClockFloor struct {
	What     string
	Talos    time.Duration
	Modelled time.Duration
}

// ClockFloorer is a target that names its clock floors at a scenario's
// time scale (simulated nodes: what real etcd and gRPC cannot do faster).
type ClockFloorer interface {
	ClockFloors(sc *scenario.Scenario) []ClockFloor
}

// ScaleReasoner is a target that says why it runs a scenario at another time
// scale than the scenario's.
type ScaleReasoner interface {
	ScaleReason(sc *scenario.Scenario) string
}

// Has is the Supports of a target whose capabilities hold on every node.
func Has(t Target, c Capability) error {
	if slices.Contains(t.Capabilities(), c) {
		return nil
	}

	return fmt.Errorf("target %s cannot carry out %s", t.Name(), c)
}

// Options are run-wide settings a target needs.
type Options struct {
	Seed int64
	// Logf receives target-level progress lines (may be nil).
	Logf func(format string, args ...any)
}

// Cluster is a provisioned set of nodes.
type Cluster interface {
	Nodes() []Node
	// Talosconfig is the client configuration matching the nodes' configs.
	Talosconfig() *clientconfig.Config
	// Close tears everything down and waits for it.
	Close() error
}

// Port names a node port faults can act on.
type Port string

// Ports.
const (
	PortTalosAPI   Port = "talos-api"
	PortEtcdClient Port = "etcd-client"
	PortEtcdPeer   Port = "etcd-peer"
)

// Ports are every port faults can act on.
var Ports = []Port{PortTalosAPI, PortEtcdClient, PortEtcdPeer}

// Direction of traffic through a node's port.
type Direction string

// Directions: upstream is towards the node, downstream from it.
const (
	Upstream   Direction = "upstream"
	Downstream Direction = "downstream"
)

// Toxic is one network impairment on a node port, in toxiproxy's vocabulary.
type Toxic struct {
	Type       string // latency, bandwidth, timeout, reset_peer, slow_close
	Direction  Direction
	Latency    time.Duration
	Jitter     time.Duration
	RateKBps   int64
	Timeout    time.Duration
	JitterSeed uint64 // seeds the latency jitter (talchaos does not use toxiproxy's randomness)
}

// Toxics is implemented by clusters that carry out toxics.
type Toxics interface {
	AddToxic(ctx context.Context, node string, port Port, t Toxic) (remove func() error, err error)
}

// SecretHolder is implemented by clusters that hold secrets of their own (API
// tokens) which must never appear in output or reports.
type SecretHolder interface {
	Secrets() []string
}

// Heal undoes a fault.
type Heal func() error

// Partitioner is implemented by clusters that partition or isolate nodes.
type Partitioner interface {
	// Partition cuts all traffic between every node of a and every node of b, in
	// both directions (etcd peer and client traffic, node-to-node API calls).
	Partition(ctx context.Context, a, b []string) (Heal, error)
	// Isolate cuts the node off from every other node and from the engine.
	Isolate(ctx context.Context, node string) (Heal, error)
}

// ProcessOp is a process-level fault.
type ProcessOp string

// Process operations.
const (
	CrashEtcd     ProcessOp = "crash-etcd"     // etcd dies (SIGKILL); Talos restarts it from its data dir
	PauseEtcd     ProcessOp = "pause-etcd"     // etcd stops answering anyone until healed (SIGSTOP)
	PauseNode     ProcessOp = "pause-node"     // every process of the node is frozen until healed
	RebootNode    ProcessOp = "reboot"         // the node goes down and comes back with its config and data
	PowerOff      ProcessOp = "power-off"      // the node goes down until healed
	WipeEtcd      ProcessOp = "wipe-etcd"      // EPHEMERAL is wiped and the node reboots: config kept, etcd data gone
	ResetGraceful ProcessOp = "reset-graceful" // talosctl reset: leave etcd, wipe, back to maintenance
	ResetForced   ProcessOp = "reset"          // talosctl reset --graceful=false: the etcd member stays behind
)

// ProcessOps are every process operation.
var ProcessOps = []ProcessOp{CrashEtcd, PauseEtcd, PauseNode, RebootNode, PowerOff, WipeEtcd, ResetGraceful, ResetForced}

// Processes is implemented by clusters that carry out process operations.
type Processes interface {
	Process(ctx context.Context, node string, op ProcessOp) (Heal, error)
}

// APIFaultMode is what an intercepted call does.
type APIFaultMode string

// API fault modes.
const (
	APIFail      APIFaultMode = "fail"       // refuse before the node acts, with Code
	APIDropReply APIFaultMode = "drop-reply" // the node acts, the reply never arrives (the caller hits its deadline)
	APIDelay     APIFaultMode = "delay"      // the node acts, the reply comes Delay later
)

// APIFault intercepts calls of one RPC on one node: Talos API calls the node
// serves (ApplyConfiguration, Bootstrap) or etcd cluster calls the node's own
// Talos code makes while joining (MemberAddAsLearner, MemberPromote).
type APIFault struct {
	RPC   string
	Mode  APIFaultMode
	Code  string // gRPC code name for APIFail, e.g. "Unavailable"
	Delay time.Duration
	Count int // calls affected; 0 means every call while active
}

// RPCs are the calls API faults can intercept: two the Talos API serves, two
// etcd cluster calls a joining node's own Talos code makes.
var RPCs = []string{"ApplyConfiguration", "Bootstrap", "MemberAddAsLearner", "MemberPromote"}

// EtcdRPC reports whether rpc is one of the etcd calls a node makes itself.
func EtcdRPC(rpc string) bool { return rpc == "MemberAddAsLearner" || rpc == "MemberPromote" }

// APIFaults is implemented by clusters that intercept API calls.
type APIFaults interface {
	InterceptAPI(ctx context.Context, node string, f APIFault) (Heal, error)
}

// Addresses is implemented by clusters that act on a node's addresses.
type Addresses interface {
	// HoldAddressDown keeps the node's further address ip off it (its
	// interface not up yet, or the address gone) until healed. atBoot: from then on the node
	// issues its etcd certificates once per boot, as Talos before v1.2.0 did.
	HoldAddressDown(ctx context.Context, node string, ip netip.Addr, atBoot bool) (Heal, error)
}

// Clocks is implemented by clusters that act on a node's clock and its time
// sync.
type Clocks interface {
	// HoldTimeUnsynced keeps the node's time servers from answering until
	// healed: the node's time does not sync.
	HoldTimeUnsynced(ctx context.Context, node string) (Heal, error)
	// OffsetClock sets the node's clock offset from the true time (negative:
	// behind) until healed.
	OffsetClock(ctx context.Context, node string, offset time.Duration) (Heal, error)
}

// Registry is implemented by clusters that act on the image registry their
// nodes pull from.
type Registry interface {
	// HideImage makes the registry answer "not found" for the image (every
	// image when it is empty) until healed.
	HideImage(ctx context.Context, image string) (Heal, error)
}

// Discovery is implemented by clusters that act on a node's view of the
// cluster discovery service.
type Discovery interface {
	// CutDiscovery keeps the node's discovery client from reaching the
	// registry until healed.
	CutDiscovery(ctx context.Context, node string) (Heal, error)
	// HideAffiliates has the registry leave the nodes hidden out of what it
	// answers node until healed.
	HideAffiliates(ctx context.Context, node string, hidden []string) (Heal, error)
}

// Disks is implemented by clusters that act on a node's disk.
type Disks interface {
	// SlowDisk makes every fsync and fdatasync of a file in the node's etcd
	// data dir (its WAL, its database) take at least latency, until healed.
	SlowDisk(ctx context.Context, node string, latency time.Duration) (Heal, error)
}

// DiskFault is a scenario's fault parameters that slow a node's disk: a
// target that skips syncs for speed (the sim's etcd) keeps them on that node
// for the run. DiskNode is the node, or scenario.RandomNode.
type DiskFault interface {
	DiskNode() string
}
