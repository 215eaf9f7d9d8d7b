// Package container is the container target: the sim's node, one per
// container (`talchaos node` in an image built FROM scratch from the
// talchaos binary, with its loader and libraries when it is dynamically
// linked), each with its own address on a user-defined Docker
// network, run with testcontainers-go. Its faults are real: a reboot is a
// SIGKILL of the container and a start (etcd replays its WAL from disk), a
// power-off a SIGKILL until healed, pause-node the cgroup freezer (docker
// pause); a partition and an isolation are nftables rules inside the nodes'
// network namespaces that drop every packet both ways.
//
// With Kubernetes (cluster.kubernetes) the image carries the Kubernetes
// binaries and each node process runs what the sim runs beside a node (its
// control plane's static pods, its KWOK kubelet), so the faults that stop or
// cut off a container stop or cut off those too; the host serves the cluster
// endpoint on its end of the run's network with the sim's balancer.
//
// testcontainers' reaper (Ryuk) is an image that cannot be pulled here, so it
// is disabled; every container, network and image carries the run's labels,
// Close removes them, and the killed run's watchdog, or else the next run,
// removes what a killed run left behind (ReapDead, Reap).
package container

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"

	tclog "github.com/testcontainers/testcontainers-go/log"

	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
	"github.com/talchaos/talchaos/sim"
	"github.com/talchaos/talchaos/sim/kubecp"
)

// Target runs each node in its own container.
type Target struct {
	// Binary is the talchaos binary the node image carries (static, or
	// dynamically linked with its libraries: binary.go); empty: the running
	// executable ($TALCHAOS_NODE_BINARY overrides it).
	Binary string
}

// Name implements target.Target.
func (Target) Name() string { return "container" }

// Capabilities implements target.Target: what Docker and the kernel do to a
// whole node. Toxics on one port, the etcd-only process faults and API
// interception stay with the sim.
func (Target) Capabilities() []target.Capability {
	return []target.Capability{
		target.PartitionNodes, target.IsolateNode, target.EtcdMembership,
		target.ProcessCap(target.RebootNode), target.ProcessCap(target.PowerOff), target.ProcessCap(target.PauseNode),
	}
}

// Supports implements target.Target.
func (t Target) Supports(c target.Capability, _ string) error { return target.Has(t, c) }

// Disposable implements target.Target: the containers live for one run.
func (Target) Disposable() bool { return true }

// maxScale caps the container target's time scale. Every start, kill and
// exec goes through the Docker engine and every node is a process of its
// own, all real time: at the sim's 60x a loaded 2-core machine stretched them
// into Talos minutes and runs stopped settling in time.
const maxScale = 20

// TimeScale implements target.Target: the sim's scale for the scenario, at
// most maxScale.
func (Target) TimeScale(sc *scenario.Scenario) float64 { return min(sim.Scale(sc), maxScale) }

// ScaleReason implements target.ScaleReasoner.
func (Target) ScaleReason(*scenario.Scenario) string {
	return fmt.Sprintf("the container target runs at most %dx faster than real time: starting, killing and cutting off "+
		"containers through the Docker engine takes real time, which must stay small against Talos's timers", maxScale)
}

// ClockFloors implements target.ClockFloorer: the node processes are the
// sim's nodes, with its floors at the container target's scale, and its
// Kubernetes intervals when the nodes run Kubernetes.
func (t Target) ClockFloors(sc *scenario.Scenario) []target.ClockFloor {
	out := append(sim.ClockFloorsAt(t.TimeScale(sc)), sim.UpgradeClockFloors(t.TimeScale(sc), sc)...)
	if sc.Cluster.Kubernetes {
		out = append(out, sim.KubernetesClockFloors(t.TimeScale(sc))...)
	}

	return out
}

// Check implements target.Target: config patches load and apply (the
// nodes' configs are the sim's); with Kubernetes, its binaries are built.
func (Target) Check(sc *scenario.Scenario) error {
	if sc.Cluster.Kubernetes {
		if _, err := kubecp.Locate(""); err != nil {
			return fmt.Errorf("cluster.kubernetes: %w", err)
		}
	}

	if n := sc.Cluster.Network; n != nil {
		families := map[bool]bool{}

		for _, a := range n.Addresses {
			p, err := netip.ParsePrefix(a)
			if err != nil {
				continue // the scenario's own check names it
			}

			if families[p.Addr().Is4()] {
				return errors.New("cluster.network: the container target gives a node one IPv4 and one IPv6 address on its Docker network, so at most one subnet of each family")
			}

			families[p.Addr().Is4()] = true
		}
	}

	return sim.CheckPatches(sc)
}

// Provision implements target.Target.
func (t Target) Provision(ctx context.Context, sc *scenario.Scenario, opts target.Options) (target.Cluster, error) {
	bin := t.Binary
	if bin == "" {
		bin = os.Getenv("TALCHAOS_NODE_BINARY")
	}

	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}

		bin = exe
	}

	return newCluster(ctx, sc, opts, bin)
}

func init() {
	// Ryuk's image cannot be pulled; cleanup is by label (Reap, Close).
	// testcontainers reads this once, at its first use.
	if os.Getenv("TESTCONTAINERS_RYUK_DISABLED") == "" {
		os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true") //nolint:errcheck
	}

	// Its banner and progress lines are not talchaos's output.
	tclog.SetDefault(quiet)
}

// quiet is testcontainers' logger: its progress lines are not talchaos's.
var quiet tclog.Logger = discardLogger{}

type discardLogger struct{}

func (discardLogger) Printf(string, ...any) {}
