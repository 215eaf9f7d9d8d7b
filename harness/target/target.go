// Package target is what the engine knows of a place nodes run: their names,
// roles, addresses and configs, a talosconfig, and the fault primitives the place
// can inject. Everything else the engine learns through the Talos API.
package target

import (
	"context"
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
	// Endpoint is where orchestrators reach the node's Talos API (host:port). On
	// the real target it is talchaos's own proxy, so API-path faults apply.
	Endpoint string
	// DirectEndpoint, when set, reaches the node without that proxy: the
	// observer uses it so that faults on the path do not blind it.
	DirectEndpoint string
	// ServerName, when set, is the name the node's certificate is verified
	// against (the endpoint is then a proxy address).
	ServerName string
	Config     []byte // the machine configuration to apply
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

// Capability is a family of fault primitives a target can inject.
type Capability string

// Capabilities.
const (
	// Network: toxics (latency, bandwidth, blackhole, reset, slow-close) on a node's ports.
	Network Capability = "network"
	// Partition: cut traffic between groups of nodes in both directions.
	Partition Capability = "partition"
	// Process: crash or pause etcd, reboot, wipe, reset a node.
	Process Capability = "process"
	// API: intercept Talos API calls on a node (fail, drop the reply, delay).
	API Capability = "api"
)

// Target provisions clusters.
type Target interface {
	Name() string
	Capabilities() []Capability
	// Provision brings up the scenario's nodes, unconfigured (in maintenance).
	Provision(ctx context.Context, sc *scenario.Scenario, opts Options) (Cluster, error)
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

// Toxics is implemented by clusters with the Network capability.
type Toxics interface {
	AddToxic(ctx context.Context, node string, port Port, t Toxic) (remove func() error, err error)
}

// FaultChecker is implemented by targets that can inject only some faults of a
// capability (or need permission for them): it is asked about every fault of a
// scenario before the run starts.
type FaultChecker interface {
	CheckFault(kind, node, port, rpc string) error
}

// SecretHolder is implemented by clusters that hold secrets of their own (API
// tokens) which must never appear in output or reports.
type SecretHolder interface {
	Secrets() []string
}

// Heal undoes a fault.
type Heal func() error

// Partitioner is implemented by clusters with the Partition capability.
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
	RebootNode    ProcessOp = "reboot"         // the node goes down and comes back with its config and data
	PowerOff      ProcessOp = "power-off"      // the node goes down until healed
	WipeEtcd      ProcessOp = "wipe-etcd"      // EPHEMERAL is wiped and the node reboots: config kept, etcd data gone
	ResetGraceful ProcessOp = "reset-graceful" // talosctl reset: leave etcd, wipe, back to maintenance
	ResetForced   ProcessOp = "reset"          // talosctl reset --graceful=false: the etcd member stays behind
)

// Processes is implemented by clusters with the Process capability.
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

// APIFaults is implemented by clusters with the API capability.
type APIFaults interface {
	InterceptAPI(ctx context.Context, node string, f APIFault) (Heal, error)
}
