package check

import (
	"context"
	"net"
	"strings"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"

	"github.com/talchaos/talchaos/harness/clock"
	"github.com/talchaos/talchaos/harness/eventlog"
	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/judge"
	"github.com/talchaos/talchaos/harness/result"
	"github.com/talchaos/talchaos/harness/talosclient"
	"github.com/talchaos/talchaos/harness/target"
)

// Finding is a diagnosis with the commands that remedy it.
type Finding struct {
	result.Diagnosis

	Remedy []string `json:"remedy"`
}

// ExamineOptions tune how Examine reads a cluster.
type ExamineOptions struct {
	// TimeScale is how much faster than real time the nodes' Talos timers run:
	// 1 (or 0) for real nodes, the --time-scale of a `talchaos up` cluster.
	TimeScale float64
	// Via, when set, is the Talos API endpoint (host or host:port) the
	// talosconfig client reaches every other node through (talosctl -e).
	Via string
}

// roleTimeout bounds the question that tells a control plane from a worker.
const roleTimeout = 5 * time.Second

// Examine looks at a live cluster once through its Talos API, as `talchaos
// doctor` does: it finds out which nodes run etcd, reads their state and logs,
// and returns what it sees and what is wrong.
func Examine(ctx context.Context, cfg *clientconfig.Config, addresses []string, opts ExamineOptions) (*history.Observation, []Finding, error) {
	nodes := make([]target.Node, 0, len(addresses))

	for _, a := range addresses {
		n := target.Node{Name: a, Address: history.HostOf(endpointOf(a)), Endpoint: endpointOf(a)}
		if opts.Via != "" && endpointOf(opts.Via) != n.Endpoint {
			n.Via = endpointOf(opts.Via)
		}

		n.Role = roleOf(ctx, cfg, n)
		nodes = append(nodes, n)
	}

	start := time.Now()

	hn := make([]history.Node, len(nodes))
	for i, n := range nodes {
		hn[i] = history.NodeOf(n)
	}

	rec := history.NewRecorder(start, clock.New(opts.TimeScale), hn)

	o, err := NewObserver(ctx, nodes, cfg, eventlog.New(), rec, judge.Follow(rec, judge.Options{Snapshot: true}), 0)
	if err != nil {
		return nil, nil, err
	}
	defer o.Close()

	final := o.Poll(ctx)

	// A node that does not answer cannot say it runs etcd; the member list can.
	for _, n := range final.Ordered() {
		if _, member := final.Main().Member("", n.Address); member && n.Role != target.ControlPlane {
			n.Role = target.ControlPlane
		}
	}

	for _, n := range final.Ordered() {
		if n.Mode != history.ModeConfigured {
			continue
		}

		o.readLog(ctx, n.Name, "machined", o.addLine)
		o.flushLine(n.Name)

		if n.Role == target.ControlPlane {
			o.readLog(ctx, n.Name, "etcd", o.addEtcdLine)
		}
	}

	// The look is recorded after the roles are settled, as the last one.
	for _, n := range final.Ordered() {
		rec.Observe(final.At, n, true)
	}

	diags := judge.Diagnose(judge.FromHistory(rec.History(), judge.Options{Snapshot: true}))

	findings := make([]Finding, 0, len(diags))
	for _, d := range diags {
		findings = append(findings, Finding{Diagnosis: d, Remedy: judge.Remedy(d, final)})
	}

	return final, findings, nil
}

// endpointOf is the Talos API endpoint of an address as talosctl's -n takes
// it: host, host:port, an IPv6 address bare or in brackets, with or without
// a port.
func endpointOf(address string) string {
	if _, _, err := net.SplitHostPort(address); err == nil {
		return address
	}

	return net.JoinHostPort(strings.Trim(address, "[]"), "50000")
}

// roleOf asks the node: control planes run an etcd service.
func roleOf(ctx context.Context, cfg *clientconfig.Config, n target.Node) target.Role {
	ctx, cancel := context.WithTimeout(ctx, roleTimeout)
	defer cancel()

	endpoint, opts := talosclient.SecureEndpoint(n)

	c, err := talosclient.WithConfig(ctx, cfg, endpoint, opts...)
	if err != nil {
		return target.Worker
	}
	defer c.Close() //nolint:errcheck

	resp, err := c.ServiceList(ctx)
	if err != nil {
		return target.Worker
	}

	for _, m := range resp.GetMessages() {
		for _, s := range m.GetServices() {
			if s.GetId() == "etcd" {
				return target.ControlPlane
			}
		}
	}

	return target.Worker
}

// readLog reads a whole service log once (no follow).
func (o *Observer) readLog(ctx context.Context, node, id string, line func(node, text string)) {
	c := o.clients[node]

	stream, err := c.secure.Logs(ctx, "system", common.ContainerDriver_CONTAINERD, id, false, -1)
	if err != nil {
		return
	}

	var partial string

	for {
		data, err := stream.Recv()
		if err != nil {
			return
		}

		partial += string(data.GetBytes())

		for {
			i := strings.IndexByte(partial, '\n')
			if i < 0 {
				break
			}

			line(node, partial[:i])
			partial = partial[i+1:]
		}
	}
}
