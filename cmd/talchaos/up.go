package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/talchaos/talchaos/harness"
	"github.com/talchaos/talchaos/harness/chaos"
	"github.com/talchaos/talchaos/harness/clock"
	"github.com/talchaos/talchaos/harness/eventlog"
	"github.com/talchaos/talchaos/harness/kubeconfig"
	"github.com/talchaos/talchaos/harness/orchestrator"
	"github.com/talchaos/talchaos/harness/real"
	"github.com/talchaos/talchaos/harness/result"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/scratch"
	"github.com/talchaos/talchaos/harness/target"
	"github.com/talchaos/talchaos/reports"
	"github.com/talchaos/talchaos/sim"
	"github.com/talchaos/talchaos/sim/container"
	"github.com/talchaos/talchaos/sim/netns"
)

type upOptions struct {
	from          string
	dir           string
	controlPlanes int
	workers       int
	talos         string
	timeScale     float64
	// fromScale is --time-scale given with --from: the scenario's cluster
	// at that scale (0: at its own).
	fromScale  float64
	bootstrap  bool
	seed       int64
	cidr       string
	target     string
	kubernetes bool
	faults     []string
}

func newUpCmd() *cobra.Command {
	opts := upOptions{}

	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start a simulated cluster and keep it running until Ctrl-C",
		Long: `Start simulated Talos nodes (like 'talosctl cluster create', in seconds) and
keep them running so that talosctl, Terraform or your own scripts can be pointed
at them. The nodes start in maintenance mode unless --bootstrap is given.

Written to the directory: talosconfig (endpoints set, first control plane as the
default node), one machine config per node (<node>.yaml) and inventory.yaml for
'talchaos run --target=real --inventory'; with --kubernetes also kubeconfig (the
admin kubeconfig Talos's 'talosctl kubeconfig' gives). These hold the cluster's keys.

With --kubernetes every control plane runs the real kube-apiserver,
kube-controller-manager and kube-scheduler, as Talos's static pods, and every
node a kubelet (KWOK) that registers its Node: kubectl get nodes and talosctl
health work (built by 'make kube'; on the sim target the nodes take 198.18.N.x
addresses on the loopback interface, which needs root or CAP_NET_ADMIN; on the
container target each node's container runs them, and the cluster endpoint is
served on the host's end of the run's Docker network).

Ctrl-C (or SIGTERM, SIGHUP) stops every node and cleans up: a directory talchaos
created (the default temp dir, or a --dir that did not exist) is removed with
everything in it; an existing --dir keeps its other files and loses only the
files talchaos wrote, which it never overwrites (if one is already there, up
refuses to start).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runUp(cmd, opts) },
	}

	cmd.Flags().StringVar(&opts.from, "from", "", "take the cluster (nodes, Talos profile, time scale unless --time-scale) from this scenario, file or built-in name")
	cmd.Flags().StringVar(&opts.dir, "dir", "", "directory for talosconfig, machine configs and inventory; removed on exit if up creates it, else only those files are (default: a new temp dir)")
	cmd.Flags().IntVar(&opts.controlPlanes, "control-planes", 3, "number of control-plane nodes")
	cmd.Flags().IntVar(&opts.workers, "workers", 0, "number of worker nodes")
	cmd.Flags().StringVar(&opts.talos, "talos", scenario.DefaultProfile, "Talos behaviour profile: "+strings.Join(scenario.Profiles, ", "))
	cmd.Flags().Float64Var(&opts.timeScale, "time-scale", 1, "divide Talos timers by this (1: real Talos timing); with --from, instead of the scenario's timeScale")
	cmd.Flags().BoolVar(&opts.bootstrap, "bootstrap", false, "apply the configs and bootstrap etcd (like talosctl cluster create)")
	cmd.Flags().Int64Var(&opts.seed, "seed", 1, "seed for the simulated nodes' random choices")
	cmd.Flags().StringVar(&opts.target, "target", "sim", "where the nodes run: sim (in this process), or container (one Docker container per node)")
	cmd.Flags().BoolVar(&opts.kubernetes, "kubernetes", false, "run Kubernetes (the real control plane, a KWOK kubelet per node) and write a kubeconfig")
	cmd.Flags().StringArrayVar(&opts.faults, "fault", nil, "a fault held on the nodes from the start, as a scenario's faults entry without a trigger "+
		"(`talchaos faults` lists the kinds), e.g. '{kind: time-unsynced, node: cp1}'; with for: it heals after that long; repeatable")
	cmd.Flags().StringVar(&opts.cidr, "cidr", "", "loopback block for the nodes, 127.0.N.0/24 (nodes from .2): the same addresses every time (default: a free block); "+
		"or the nodes' own subnets, comma-separated (fd00:101::/64,10.101.0.0/24: nodes from host 2, the endpoint host 1; fd00:101::11/64: cp1 there), "+
		"which they take in a network namespace of their own (the output says how to enter it)")

	return cmd
}

// upScenario is the scenario an `up` cluster is built from, validated like a file:
// the --from scenario (its cluster, profile and time scale, or --time-scale; its faults and
// orchestrator are not used), or one made of the flags.
func upScenario(opts upOptions) (*scenario.Scenario, error) {
	if opts.from != "" {
		sc, err := loadScenarioAt(opts.from, opts.fromScale)
		if err != nil {
			return nil, err
		}

		sc.Faults, sc.Orchestrator = nil, scenario.Orchestrator{Name: "resilient", BootstrapNode: sc.Orchestrator.BootstrapNode}
		sc.Cluster.Kubernetes = sc.Cluster.Kubernetes || opts.kubernetes

		return sc, nil
	}

	cluster := map[string]any{"controlPlanes": opts.controlPlanes, "workers": opts.workers, "kubernetes": opts.kubernetes}
	if subnets := upSubnets(opts.cidr); subnets != nil {
		cluster["network"] = map[string]any{"addresses": subnets}
	}

	doc := map[string]any{
		"apiVersion": scenario.APIVersion,
		"kind":       scenario.Kind,
		"name":       "up",
		"talos":      opts.talos,
		"timeScale":  opts.timeScale,
		"cluster":    cluster,
	}

	data, err := yaml.Marshal(doc)
	if err != nil {
		return nil, err
	}

	sc, err := chaos.Parse("talchaos up flags", data)
	if err != nil {
		return nil, flagErrors(err)
	}

	return sc, nil
}

// upFlags are the flags behind the fields of the scenario `up` builds.
var upFlags = map[string]string{
	"timeScale": "--time-scale", "talos": "--talos",
	"cluster.controlPlanes": "--control-planes", "cluster.workers": "--workers",
	"cluster.network": "--cidr",
}

// upSubnets are --cidr's subnets for cluster.network.addresses (cp1's
// address in each: host 2 of a subnet given without one), or nil for a
// loopback block or none. Whatever does not parse goes as it is, for the
// scenario's check to name.
func upSubnets(cidr string) []string {
	if cidr == "" || strings.HasPrefix(cidr, "127.") {
		return nil
	}

	var out []string

	for _, s := range strings.Split(cidr, ",") {
		s = strings.TrimSpace(s)

		if p, err := netip.ParsePrefix(s); err == nil && p.Addr() == p.Masked().Addr() {
			first := p.Addr().Next().Next()
			s = netip.PrefixFrom(first, p.Bits()).String()
		}

		out = append(out, s)
	}

	return out
}

// flagErrors says the problems of the scenario built from the flags in terms
// of the flags: "--time-scale: must be between 1 and 10000, got 0".
func flagErrors(err error) error {
	es, ok := scenarioErrors(err)
	if !ok {
		return err
	}

	msgs := make([]string, 0, len(es))
	for _, e := range es {
		field := e.Field

		for k, f := range upFlags {
			if field == k || strings.HasPrefix(field, k+"[") || strings.HasPrefix(field, k+".") {
				field = f

				break
			}
		}

		msgs = append(msgs, field+": "+e.Msg)
	}

	return errors.New(strings.Join(msgs, "\n"))
}

// scenarioErrors are the problems a scenario error lists, one or many.
func scenarioErrors(err error) (scenario.Errors, bool) {
	var es scenario.Errors
	if errors.As(err, &es) {
		return es, true
	}

	var e *scenario.Error
	if errors.As(err, &e) {
		return scenario.Errors{e}, true
	}

	return nil, false
}

// loopbackBlock is the N of --cidr 127.0.N.0/24 (0 when not given, or
// when it gives the nodes' own subnets).
func loopbackBlock(cidr string, nodes int) (int, error) {
	if cidr == "" || upSubnets(cidr) != nil {
		return 0, nil
	}

	ip, network, err := net.ParseCIDR(cidr)
	if err != nil {
		return 0, fmt.Errorf("--cidr %q: %w", cidr, err)
	}

	ones, _ := network.Mask.Size()
	v4 := ip.To4()

	if v4 == nil || v4[0] != 127 || v4[1] != 0 || v4[2] == 0 || v4[2] == 255 || v4[3] != 0 || ones != 24 {
		return 0, fmt.Errorf("--cidr %q: give a loopback /24 of the form 127.0.N.0/24 with N from 1 to 254", cidr)
	}

	if nodes > 253 {
		return 0, fmt.Errorf("--cidr %q: %d nodes do not fit in a /24 (nodes take .2 to .254)", cidr, nodes)
	}

	return int(v4[2]), nil
}

func runUp(cmd *cobra.Command, opts upOptions) error {
	out := cmd.OutOrStdout()

	if err := checkUpFlags(cmd, opts); err != nil {
		return &exitError{code: exitInput, err: err}
	}

	if opts.from != "" && cmd.Flags().Changed("time-scale") {
		opts.fromScale = opts.timeScale
	}

	sc, err := upScenario(opts)
	if err != nil {
		return &exitError{code: exitInput, err: err}
	}

	faults, err := upFaults(sc, opts)
	if err != nil {
		return &exitError{code: exitInput, err: err}
	}

	block, err := loopbackBlock(opts.cidr, sc.Cluster.ControlPlanes+sc.Cluster.Workers)
	if err != nil {
		return &exitError{code: exitInput, err: err}
	}

	if needsNetns(opts.target, sc) {
		if ok, err := runInNetns(cmd); ok {
			return err
		}
	}

	defer guardRun(cmd.ErrOrStderr())()

	dir, err := openUpDir(opts.dir, sc.Cluster.NodeNames(), sc.Cluster.Kubernetes)
	if err != nil {
		return err
	}

	defer dir.cleanup()

	var cluster upCluster

	if opts.target == "sim" {
		if err := (sim.Target{}).Check(sc); err != nil {
			return &exitError{code: exitInput, err: err}
		}
	}

	switch opts.target {
	case "sim":
		cluster, err = sim.NewClusterWith(cmd.Context(), sc, opts.seed, sim.Options{Block: block})
	case "container":
		var c target.Cluster

		c, err = container.Target{}.Provision(cmd.Context(), sc, target.Options{Seed: opts.seed})
		if err == nil {
			cluster = c.(*container.Cluster)
		}
	default:
		return &exitError{code: exitInput, err: fmt.Errorf("unknown target %q: sim or container", opts.target)}
	}

	if err != nil {
		return &exitError{code: exitHarness, err: fmt.Errorf("start the cluster: %w", err)}
	}

	defer cluster.Close() //nolint:errcheck

	scrubber := &result.Scrubber{}
	scrubber.Add(harness.SecretsOf(cluster)...)

	if err := writeUpFilesWith(dir.write, cluster); err != nil {
		return &exitError{code: exitHarness, err: scrubber.ScrubError(err)}
	}

	printUp(out, dir.path, cluster)

	if err := holdFaults(cmd.Context(), out, faults, cluster); err != nil {
		return &exitError{code: exitHarness, err: scrubber.ScrubError(err)}
	}

	if opts.bootstrap {
		fmt.Fprintln(out, "\nbootstrapping (resilient orchestrator)...")

		log := eventlog.New()
		log.SetScrubber(scrubber.Scrub)
		log.OnEvent(reports.Progress(out, false))

		env := &orchestrator.Env{
			Nodes: cluster.Nodes(), Talosconfig: cluster.Talosconfig(), BootstrapNode: sc.Orchestrator.BootstrapNode, Log: log, Clock: clock.New(sc.TimeScale),
			Destructive: true, // simulated nodes
		}

		env.Kubernetes = sc.Cluster.Kubernetes

		if err := (&orchestrator.Resilient{}).Run(cmd.Context(), env); err != nil && cmd.Context().Err() == nil {
			fmt.Fprintf(out, "bootstrap failed: %s\n", scrubber.Scrub(err.Error()))
		}
	}

	fmt.Fprintln(out, "\nrunning; press Ctrl-C to stop and clean up")
	<-cmd.Context().Done()
	fmt.Fprintln(out, "stopping...")

	return nil
}

// checkUpFlags refuses flags that cannot work together, before anything is
// created.
func checkUpFlags(cmd *cobra.Command, opts upOptions) error {
	switch opts.target {
	case "sim":
	case "container":
		if opts.cidr != "" {
			return errors.New("--cidr is for --target=sim: containers take addresses on their own Docker network")
		}
	default:
		return fmt.Errorf("unknown target %s: sim or container", quoteShort(opts.target))
	}

	if opts.from != "" && upSubnets(opts.cidr) != nil {
		return errors.New("--cidr with the nodes' own subnets builds the cluster from the flags: --from takes the scenario's (cluster.network)")
	}

	if opts.from != "" {
		for _, f := range []string{"control-planes", "workers", "talos"} {
			if cmd.Flags().Changed(f) {
				return fmt.Errorf("--%s is not used with --from: the cluster and profile are the scenario's", f)
			}
		}

		// As run's --time-scale: the scenario at another pace.
		if err := checkTimeScale(cmd, opts.timeScale); err != nil {
			return err
		}
	}

	return nil
}

// upDir is where up writes its files, and what it removes on exit.
type upDir struct {
	path string
	// remove is the temp dir up created (the default), removed with
	// everything in it; empty for --dir.
	remove string
	// claim is --dir's: the files up writes there are listed in a marker
	// before they are written, so that a SIGKILLed up's keys are removed by
	// its watchdog, or else the next talchaos (scratch.Claim); the directory
	// too, if up made it.
	claim *scratch.Claim
}

// openUpDir makes or checks the directory: a marked temp dir by default;
// --dir is claimed (created if missing, and then removed on exit; the files
// a killed up left there reaped), and none of the other files up would write
// may be there already.
func openUpDir(dir string, nodes []string, kube bool) (*upDir, error) {
	if dir == "" {
		tmp, err := scratch.MkdirTemp("talchaos-up-")
		if err != nil {
			return nil, &exitError{code: exitHarness, err: err}
		}

		return &upDir{path: tmp, remove: tmp}, nil
	}

	names := []string{"talosconfig", "inventory.yaml"}
	if kube {
		names = append(names, "kubeconfig")
	}

	for _, n := range nodes {
		names = append(names, n+".yaml")
	}

	// What a killed up left is reaped first, so that its files do not stand
	// in the way; a live up's are not touched.
	if _, err := scratch.ReapClaim(dir); err != nil {
		return nil, &exitError{code: exitInput, err: fmt.Errorf("--dir: %w", err)}
	}

	for _, name := range names {
		path := filepath.Join(dir, name)

		_, err := os.Lstat(path)
		if err == nil {
			return nil, &exitError{code: exitInput, err: fmt.Errorf("%s already exists: up writes talosconfig, <node>.yaml and inventory.yaml into --dir and removes them on exit; remove it or choose another --dir", path)}
		}

		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			return nil, &exitError{code: exitInput, err: fmt.Errorf("--dir: %w", err)}
		}
	}

	claim, err := scratch.ClaimDir(dir)
	if err != nil {
		return nil, &exitError{code: exitInput, err: fmt.Errorf("--dir: %w", err)}
	}

	return &upDir{path: dir, claim: claim}, nil
}

// cleanup removes the directory up created, or else the files it wrote.
func (d *upDir) cleanup() {
	if d.remove != "" {
		os.RemoveAll(d.remove) //nolint:errcheck

		return
	}

	d.claim.Release()
}

// write creates a new file in the directory.
func (d *upDir) write(name string, data []byte) error {
	if d.claim != nil {
		return d.claim.Write(name, data)
	}

	return scratch.WriteSecret(filepath.Join(d.path, name), data)
}

// writeUpFiles writes the talosconfig, the machine configs and an inventory
// into dir, never overwriting a file.
func writeUpFiles(dir string, cluster upCluster) error {
	return writeUpFilesWith(func(name string, data []byte) error { return scratch.WriteSecret(filepath.Join(dir, name), data) }, cluster)
}

// writeUpFilesWith writes up's files with write(name, data).
func writeUpFilesWith(write func(name string, data []byte) error, cluster upCluster) error {
	cfg := cluster.Talosconfig()
	ctxName := cfg.Context

	var cps []string

	// The inventory says how fast these nodes' timers run, so that a run of
	// the real target against them keeps Talos's ratios.
	inv := real.Inventory{APIVersion: scenario.APIVersion, Kind: real.InventoryKind, Talosconfig: "talosconfig", TimeScale: cluster.TimeScale()}

	for _, n := range cluster.Nodes() {
		if n.Role == target.ControlPlane {
			cps = append(cps, n.Address)
		}

		name := n.Name + ".yaml"
		if err := write(name, n.Config); err != nil {
			return err
		}

		inv.Nodes = append(inv.Nodes, real.InventoryNode{Name: n.Name, Role: string(n.Role), Address: n.Address, Endpoint: n.Endpoint, Config: name})
	}

	if c := cfg.Contexts[ctxName]; c != nil {
		c.Endpoints = cps
		c.Nodes = cps[:1]
	}

	data, err := cfg.Bytes()
	if err != nil {
		return err
	}

	if err := write("talosconfig", data); err != nil {
		return err
	}

	if kc, err := upKubeconfig(cluster); err != nil {
		return err
	} else if kc != nil {
		if err := write("kubeconfig", kc); err != nil {
			return err
		}
	}

	invData, err := yaml.Marshal(inv)
	if err != nil {
		return err
	}

	return write("inventory.yaml", invData)
}

// upKubeconfig is the admin kubeconfig of a cluster that runs Kubernetes
// (nil otherwise), made from a control plane's config as Talos makes it.
func upKubeconfig(cluster upCluster) ([]byte, error) {
	if !upKubernetes(cluster) {
		return nil, nil
	}

	return kubeconfig.AdminFor(cluster.Nodes())
}

// upKubernetes reports whether the cluster runs Kubernetes.
func upKubernetes(cluster upCluster) bool {
	k, ok := cluster.(interface{ Kubernetes() bool })

	return ok && k.Kubernetes()
}

// upCluster is what up shows of a sim or container cluster.
type upCluster interface {
	target.Cluster
	TimeScale() float64
}

func printUp(out io.Writer, dir string, cluster upCluster) {
	fmt.Fprintf(out, "talchaos: %d simulated nodes up\n\n", len(cluster.Nodes()))

	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NODE\tROLE\tADDRESS\tTALOS API\tETCD CLIENT\tCONFIG")

	for _, n := range cluster.Nodes() {
		etcd := "-"
		if n.Role == target.ControlPlane {
			etcd = net.JoinHostPort(n.Address, "2379")
		}

		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", n.Name, n.Role, n.Address, n.Endpoint, etcd, filepath.Join(dir, n.Name+".yaml"))
	}

	w.Flush() //nolint:errcheck

	tc := filepath.Join(dir, "talosconfig")

	fmt.Fprintf(out, "\ntalosconfig: %s\ninventory:   %s\n", tc, filepath.Join(dir, "inventory.yaml"))
	fmt.Fprintf(out, "\ntry:\n  talosctl --talosconfig %s apply-config --insecure -n %s -f %s\n",
		tc, cluster.Nodes()[0].Address, filepath.Join(dir, cluster.Nodes()[0].Name+".yaml"))
	fmt.Fprintf(out, "  talosctl --talosconfig %s bootstrap\n  talosctl --talosconfig %s etcd members\n", tc, tc)

	if upKubernetes(cluster) {
		path := filepath.Join(dir, "kubeconfig")
		fmt.Fprintf(out, "\nkubeconfig:  %s\n  kubectl --kubeconfig %s get endpoints kubernetes -n default\n", path, path)
	}

	if netns.Inside() {
		fmt.Fprintf(out, "\nnetwork: the nodes' addresses are in a network namespace of their own (talchaos up's, pid %d); run your tools in it:\n  %s talosctl --talosconfig %s etcd members\n",
			os.Getpid(), nsenterCommand(os.Getpid()), tc)
	}
}

// nsenterCommand enters process pid's network namespace, as the user
// running talchaos (with the user namespace talchaos made when not root).
func nsenterCommand(pid int) string {
	if !netns.UserNS() {
		return fmt.Sprintf("nsenter --target %d --net --", pid)
	}

	return fmt.Sprintf("nsenter --target %d --user --net --preserve-credentials --", pid)
}
