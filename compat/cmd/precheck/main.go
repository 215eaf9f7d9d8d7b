// Command precheck runs Talos's own pre-boot health checks
// (github.com/siderolabs/talos/pkg/cluster/check.PreBootSequenceChecks, the
// first part of `talosctl health`) against a cluster, the way `talosctl health
// --server=false` does it: one client endpoint (the first control plane) and
// every node addressed by IP through gRPC node metadata.
//
// It prints each check's progress and exits 1 when a check fails or the
// timeout passes, 2 on bad usage.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/siderolabs/talos/pkg/cluster"
	"github.com/siderolabs/talos/pkg/cluster/check"
	"github.com/siderolabs/talos/pkg/conditions"
	"github.com/siderolabs/talos/pkg/machinery/client"
	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	"github.com/siderolabs/talos/pkg/machinery/config/machine"
)

// nodes is the cluster.Info of a cluster given by control-plane and worker IPs,
// as talosctl health builds it from --control-plane-nodes/--worker-nodes.
type nodes struct {
	all    []cluster.NodeInfo
	byType map[machine.Type][]cluster.NodeInfo
}

func newNodes(controlPlanes, workers []string) (*nodes, error) {
	cps, err := cluster.IPsToNodeInfos(controlPlanes)
	if err != nil {
		return nil, fmt.Errorf("control planes: %w", err)
	}

	ws, err := cluster.IPsToNodeInfos(workers)
	if err != nil {
		return nil, fmt.Errorf("workers: %w", err)
	}

	return &nodes{
		all: slices.Concat(cps, ws),
		byType: map[machine.Type][]cluster.NodeInfo{
			machine.TypeInit:         nil,
			machine.TypeControlPlane: cps,
			machine.TypeWorker:       ws,
		},
	}, nil
}

func (n *nodes) Nodes() []cluster.NodeInfo                     { return n.all }
func (n *nodes) NodesByType(t machine.Type) []cluster.NodeInfo { return n.byType[t] }

// reporter prints a check's state whenever it changes, with the time since start.
type reporter struct {
	mu    sync.Mutex
	start time.Time
	last  string
}

func (r *reporter) Update(c conditions.Condition) {
	line := strings.TrimSpace("waiting for " + c.String())

	r.mu.Lock()
	defer r.mu.Unlock()

	if line == r.last {
		return
	}

	r.last = line
	fmt.Printf("[%6.1fs] %s\n", time.Since(r.start).Seconds(), line)
}

func splitList(s string) []string {
	var out []string

	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}

	return out
}

func main() {
	os.Exit(run())
}

func run() int {
	talosconfig := flag.String("talosconfig", "", "path of the talosconfig (default: $TALOSCONFIG or ~/.talos/config)")
	controlPlanes := flag.String("control-planes", "", "comma-separated control-plane IPs; the first is the client endpoint")
	workers := flag.String("workers", "", "comma-separated worker IPs")
	timeout := flag.Duration("timeout", 5*time.Minute, "overall time limit for all checks")
	flag.Parse()

	cps := splitList(*controlPlanes)
	if len(cps) == 0 || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: precheck --talosconfig FILE --control-planes ip,ip,ip [--workers ip,...] [--timeout 5m]")

		return 2
	}

	info, err := newNodes(cps, splitList(*workers))
	if err != nil {
		fmt.Fprintln(os.Stderr, "precheck:", err)

		return 2
	}

	if *talosconfig != "" {
		// clientconfig.Open creates a missing file; a typo must not do that.
		if _, err := os.Stat(*talosconfig); err != nil {
			fmt.Fprintln(os.Stderr, "precheck: talosconfig:", err)

			return 2
		}
	}

	cfg, err := clientconfig.Open(*talosconfig) // "" = $TALOSCONFIG or the default paths
	if err != nil {
		fmt.Fprintln(os.Stderr, "precheck: talosconfig:", err)

		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	// One endpoint, as `talosctl health` uses the talosconfig's endpoint; nodes
	// are picked per request by the checks with client.WithNode(s).
	c, err := client.New(ctx, client.WithConfig(cfg), client.WithEndpoints(cps[0]))
	if err != nil {
		fmt.Fprintln(os.Stderr, "precheck: client:", err)

		return 1
	}

	defer c.Close() //nolint:errcheck

	provider := &cluster.ConfigClientProvider{DefaultClient: c, TalosConfig: cfg}
	defer provider.Close() //nolint:errcheck

	state := struct {
		cluster.ClientProvider
		cluster.K8sProvider
		cluster.Info
	}{
		ClientProvider: provider,
		K8sProvider:    &cluster.KubernetesClient{ClientProvider: provider},
		Info:           info,
	}

	fmt.Printf("pre-boot checks through endpoint %s for control planes %v workers %v\n", cps[0], cps, splitList(*workers))

	start := time.Now()

	err = check.Wait(ctx, &state, check.PreBootSequenceChecks(), &reporter{start: start})
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			fmt.Printf("FAIL after %.1fs: timeout %s: %v\n", time.Since(start).Seconds(), *timeout, err)
		} else {
			fmt.Printf("FAIL after %.1fs: %v\n", time.Since(start).Seconds(), err)
		}

		return 1
	}

	fmt.Printf("PASS: all %d pre-boot checks in %.1fs\n", len(check.PreBootSequenceChecks()), time.Since(start).Seconds())

	return 0
}
