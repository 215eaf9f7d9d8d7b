package check

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"

	"github.com/talchaos/talchaos/harness/eventlog"
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
}

// roleTimeout bounds the question that tells a control plane from a worker.
const roleTimeout = 5 * time.Second

// Examine looks at a live cluster once through its Talos API, as `talchaos
// doctor` does: it finds out which nodes run etcd, reads their state and logs,
// and returns what it sees and what is wrong.
func Examine(ctx context.Context, cfg *clientconfig.Config, addresses []string, opts ExamineOptions) (*Observation, []Finding, error) {
	nodes := make([]target.Node, 0, len(addresses))

	for _, a := range addresses {
		nodes = append(nodes, target.Node{Name: a, Address: hostOf(endpointOf(a)), Endpoint: endpointOf(a), Role: roleOf(ctx, cfg, a)})
	}

	o, err := NewObserver(ctx, nodes, cfg, eventlog.New(), 0)
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
		if n.Mode != ModeConfigured {
			continue
		}

		o.readLog(ctx, n.Name, "machined", o.addLine)
		o.flushLine(n.Name)

		if n.Role == target.ControlPlane {
			o.readLog(ctx, n.Name, "etcd", o.addEtcdLine)
		}
	}

	scale := opts.TimeScale
	if scale <= 0 {
		scale = 1
	}

	diags := Diagnose(&Evidence{Nodes: nodes, Final: final, Logs: o.Logs, EtcdLogs: o.EtcdLogs, Now: final.At, Scale: scale})

	findings := make([]Finding, 0, len(diags))
	for _, d := range diags {
		findings = append(findings, Finding{Diagnosis: d, Remedy: remedy(d, final)})
	}

	return final, findings, nil
}

func endpointOf(address string) string {
	if strings.Contains(address, ":") && !strings.Contains(address, "]") && strings.Count(address, ":") == 1 {
		return address
	}

	return address + ":50000"
}

// roleOf asks the node: control planes run an etcd service.
func roleOf(ctx context.Context, cfg *clientconfig.Config, address string) target.Role {
	ctx, cancel := context.WithTimeout(ctx, roleTimeout)
	defer cancel()

	c, err := talosclient.WithConfig(ctx, cfg, endpointOf(address))
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

// remedy is the commands that fix a diagnosis (talosctl, as an operator types them).
func remedy(d result.Diagnosis, obs *Observation) []string {
	main := obs.Main()
	voter := ""

	for _, n := range obs.Ordered() {
		if m, ok := main.Member(n.Name, n.Address); ok && !m.IsLearner && n.Mode == ModeConfigured {
			voter = n.Address

			break
		}
	}

	if voter == "" {
		voter = "<a voting member>"
	}

	learner := func(pred func(Member) bool) []string {
		var out []string

		for _, m := range main.Members {
			if m.IsLearner && pred(m) {
				out = append(out, fmt.Sprintf("talosctl -n %s etcd remove-member %s", voter, m.IDString()))
			}
		}

		return out
	}

	addr := d.Node
	if n := obs.Nodes[d.Node]; n != nil {
		addr = n.Address
	}

	ownLearner := func(m Member) bool {
		return m.Hostname == d.Node || slices.Contains(m.PeerURLs, "https://"+addr+":2380")
	}

	switch d.Code {
	case "api-unreachable":
		return []string{"# is the machine powered on, booted and on the network? check its console, BMC or hypervisor",
			fmt.Sprintf("talosctl -n %s version   # 'connection refused': the machine is up but apid is not listening; a timeout: the address is unreachable", addr)}
	case "learner-promotion-pending":
		return append([]string{"# wait: Talos retries the promotion until its promote window ends, then never again",
			fmt.Sprintf("talosctl -n %s etcd status   # a learner far behind the leader's raft index is refused promotion", addr),
			fmt.Sprintf("talosctl -n %s logs machined   # the promote loop's 'retrying error:' lines", addr),
			"# if it is still a learner when the window has passed, it never will be:"},
			remedyComment(append(learner(ownLearner), resetCommand(addr)))...)
	case "too-many-learners":
		return append(learner(func(Member) bool { return true }),
			"# then wait: "+addr+"'s join loop adds it as the next learner")
	case "stale-learner", "peer-url-exists":
		return learner(func(m Member) bool { return m.Hostname == "" })
	case "learner-not-promoted":
		return append(learner(ownLearner), resetCommand(addr))
	case "learner-not-synced":
		return []string{"# wait while it catches up, and check the network between " + addr + " and the etcd leader",
			fmt.Sprintf("talosctl -n %s etcd status", addr)}
	case "node-in-maintenance":
		return []string{fmt.Sprintf("talosctl apply-config --insecure -n %s -f <the node's machine config>", addr)}
	case "tls-certificate-required":
		return []string{fmt.Sprintf("talosctl --talosconfig <talosconfig> -n %s version   # the node has a config: use the talosconfig, not --insecure", addr)}
	case "pki-mismatch":
		return []string{"# use the talosconfig generated from the same secrets as the nodes' configs:",
			"talosctl gen config --with-secrets secrets.yaml <cluster> <endpoint>   # never --force a new one",
			fmt.Sprintf("# or reset the node and apply a matching config: talosctl -n %s reset", addr)}
	case "split-brain":
		return []string{fmt.Sprintf("talosctl -n %s reset --system-labels-to-wipe EPHEMERAL --reboot --graceful=false   # its etcd data is lost; it joins the main cluster", addr)}
	case "config-invalid":
		return []string{"talosctl validate --config <the node's machine config> --mode metal"}
	case "apply-reply-lost":
		return []string{fmt.Sprintf("talosctl -n %s version   # the config is applied: do not re-apply with --insecure", addr)}
	case "no-quorum":
		return []string{"# bring the missing members back; if they are lost for good, restore from a snapshot:",
			fmt.Sprintf("talosctl -n %s etcd snapshot db.snapshot", addr),
			fmt.Sprintf("talosctl -n %s bootstrap --recover-from=./db.snapshot", addr)}
	}

	return nil
}

// resetCommand wipes a node's etcd data and reboots it, so that it joins again.
func resetCommand(addr string) string {
	return fmt.Sprintf("talosctl -n %s reset --system-labels-to-wipe EPHEMERAL --reboot --graceful=false", addr)
}

// remedyComment turns commands into commented-out lines: what to run later, if needed.
func remedyComment(cmds []string) []string {
	out := make([]string, len(cmds))
	for i, c := range cmds {
		out[i] = "#   " + c
	}

	return out
}
