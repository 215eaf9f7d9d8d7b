// Package talosapi is a fake Talos node API: a real gRPC server speaking the Talos
// machinery protos (MachineService, StorageService, the COSI state service) on
// behalf of a simulated node. It owns the protocol: TLS modes (maintenance versus
// mutual TLS against the OS CA of the applied config), roles from the client
// certificate, exact error codes and texts (TALOS-FIDELITY.md §3). The node behind
// it (what a config does, how etcd runs) is a Backend.
package talosapi

import (
	"context"
	"time"

	"github.com/cosi-project/runtime/pkg/state"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/config"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Profile is a Talos behaviour line; answers differ between lines (TALOS-FIDELITY.md).
type Profile string

// Behaviour profiles.
const (
	V112 Profile = "v1.12"
	V113 Profile = "v1.13"
	V114 Profile = "v1.14"
	Main Profile = "main"
)

// AtLeast reports whether p is the given line or newer; main is newest.
func (p Profile) AtLeast(o Profile) bool { return profileRank(p) >= profileRank(o) }

func profileRank(p Profile) int {
	switch p {
	case V112:
		return 12
	case V113:
		return 13
	case V114:
		return 14
	case Main:
		return 100
	}

	return 12
}

// Backend is the simulated machine behind the API.
type Backend interface {
	// Hostname is the node's hostname (also the etcd member name).
	Hostname() string
	// Address is the node's main IP address, where it is reached.
	Address() string
	// Addresses are all the node's IP addresses, its main one first: its
	// API certificate names them all (Talos's APICertSANs: the node's
	// addresses).
	Addresses() []string
	// Config is the applied machine configuration; nil while in maintenance.
	Config() config.Provider

	// AcceptConfig hands a validated configuration to a node in maintenance; the node
	// leaves maintenance shortly after (asynchronously), as Talos does.
	AcceptConfig(cfg config.Provider)
	// ApplyConfig applies a configuration to a configured node in the given mode
	// (already resolved from AUTO): NO_REBOOT at once, STAGED at the next
	// boot, REBOOT with a reboot.
	ApplyConfig(ctx context.Context, cfg config.Provider, mode machine.ApplyConfigurationRequest_Mode) error
	// TryConfig applies a configuration at once and reverts to the current
	// one after timeout (Talos time) unless another apply comes first.
	TryConfig(cfg config.Provider, timeout time.Duration) error

	// BootstrapAllowed reports whether the boot sequence has reached the point where
	// Bootstrap is accepted.
	BootstrapAllowed() bool
	// EtcdDataDirEmpty reports whether the local etcd data directory has no entries.
	EtcdDataDirEmpty() bool
	// BootstrapEtcd stops the joining etcd and starts a new single-member cluster; it
	// returns without waiting for etcd to become healthy.
	BootstrapEtcd(ctx context.Context) error

	// Services lists the node's services in ServiceList form.
	Services() []*machine.ServiceInfo
	// EtcdClient returns a client to the local member (local) or to the discovered
	// control-plane endpoints, configured as Talos configures its own clients,
	// and what ends the call's use of it (Talos closes it).
	EtcdClient(ctx context.Context, local bool) (*clientv3.Client, func(), error)
	// EtcdClientEndpoint is the endpoint the local client talks to (for Status).
	EtcdClientEndpoint() string
	// LocalMemberID is the ID of the member this node runs, waiting (up to
	// Talos's three minutes) for its etcd to start.
	LocalMemberID(ctx context.Context) (uint64, error)
	// LeaveEtcd removes the local member through client, stops the etcd
	// service and removes its data (internal/pkg/etcd LeaveCluster).
	LeaveEtcd(ctx context.Context, client *clientv3.Client) error

	// RestartService stops (when it runs) and starts again a service the API
	// may restart or start (kubelet).
	RestartService(ctx context.Context, id string) error

	// EtcdClientTo is a client to the given endpoints (a member's client
	// URLs), configured as EtcdClient's.
	EtcdClientTo(ctx context.Context, endpoints []string) (*clientv3.Client, error)

	// Reboot, Shutdown and Reset run asynchronously after the reply is sent;
	// the reboot sequence's events carry actorID.
	Reboot(actorID string) error
	Shutdown(force bool, actorID string) error
	Reset(req *machine.ResetRequest, actorID string) error

	// Resources is the node's COSI state (MachineStatus and friends); its
	// TimeStatus says whether the node's time is in sync.
	Resources() state.State
	// Now is the node's clock, which its TLS reads: the certificates it
	// issues and the ones it checks are judged by it.
	Now() time.Time
	// QueryTimeServer is an NTP query of server from the node: the server's
	// time, or the error the query gets.
	QueryTimeServer(ctx context.Context, server string) (time.Time, error)
	// Log returns the log of a service ("machined", "etcd") or nil.
	Log(id string) *LogBuffer
	// Events is machined's event stream of the current boot.
	Events() *EventLog
	// BootID is the kernel's boot ID: new at every boot.
	BootID() string
	// UpgradedTo is the Talos version an upgrade installed (its installer
	// image's tag), "" while the node runs the one it started with.
	UpgradedTo() string
	// PullInstaller pulls an upgrade's installer image (its reference
	// normalized) as Upgrade's validation does, and returns the error the
	// pull ends with.
	PullInstaller(ctx context.Context, ref string) error
	// Upgrade runs the upgrade sequence after the reply (the checks are
	// done); its events carry actorID. While another upgrade runs it
	// publishes UpgradeSequenceLocked instead.
	Upgrade(req *machine.UpgradeRequest, actorID string) error
}
