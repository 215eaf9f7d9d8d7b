package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"

	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	"github.com/spf13/cobra"

	"github.com/talchaos/talchaos/harness/check"
	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/judge"
	"github.com/talchaos/talchaos/harness/real"
	"github.com/talchaos/talchaos/harness/result"
)

type doctorOptions struct {
	talosconfig string
	context     string
	inventory   string
	nodes       []string
	endpoints   []string
	json        bool
	timeScale   float64
}

func newDoctorCmd() *cobra.Command {
	opts := doctorOptions{}

	cmd := &cobra.Command{
		Use:   "doctor [--nodes IP[,IP...]] [--endpoints IP] [--context NAME] | --inventory FILE",
		Short: "Diagnose a live cluster through its Talos API",
		Long: `Read a live cluster through the Talos API (service states, etcd members and
status, machined and etcd logs) and report the same diagnoses as a scenario run,
each with its evidence and the talosctl commands that remedy it. A node that does
not answer is a finding (api-unreachable); so is an etcd learner, told apart as
promoted never (learner-not-promoted: Talos gave up, or its 10-minute promote
window has passed) or perhaps still (learner-promotion-pending).

The nodes are, as for talosctl: --nodes, or the talosconfig context's nodes,
or its endpoints. --endpoints sends the talosconfig client's calls through that
Talos API endpoint to each node (apid's proxying); without it each node is
asked directly, so one dead endpoint does not hide the others. --context picks
the talosconfig context.

With --inventory (a real target's, or the one 'talchaos up' writes) the nodes,
the talosconfig and the nodes' time scale come from the inventory; --nodes,
--talosconfig and --time-scale override them.

Exit codes: 0 nothing wrong found, 1 findings, 2 bad input, 3 no node answered.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runDoctor(cmd, opts) },
	}

	cmd.Flags().StringVar(&opts.talosconfig, "talosconfig", "", "talosconfig to use (default $TALOSCONFIG or ~/.talos/config)")
	cmd.Flags().StringSliceVarP(&opts.nodes, "nodes", "n", nil, "node addresses (IP or IP:port), comma-separated (default: the talosconfig context's nodes, or its endpoints)")
	cmd.Flags().StringSliceVarP(&opts.endpoints, "endpoints", "e", nil, "Talos API endpoint to reach the nodes through (default: ask each node directly)")
	cmd.Flags().StringVar(&opts.context, "context", "", "talosconfig context to use (default: its current context)")
	cmd.Flags().StringVar(&opts.inventory, "inventory", "", "take the nodes, talosconfig and time scale from this inventory")
	cmd.Flags().BoolVar(&opts.json, "json", false, "print the findings as JSON")
	cmd.Flags().Float64Var(&opts.timeScale, "time-scale", 1, "how much faster the nodes' Talos timers run (a `talchaos up --time-scale N` cluster: N; real nodes: 1)")

	return cmd
}

func runDoctor(cmd *cobra.Command, opts doctorOptions) error {
	if opts.inventory != "" {
		inv, err := real.LoadInventory(opts.inventory)
		if err != nil {
			return &exitError{code: exitInput, err: err}
		}

		if len(opts.nodes) == 0 {
			for _, n := range inv.Nodes {
				opts.nodes = append(opts.nodes, cmp.Or(n.Endpoint, n.Address))
			}
		}

		if opts.talosconfig == "" {
			opts.talosconfig = inv.TalosconfigPath()
		}

		if !cmd.Flags().Changed("time-scale") && inv.TimeScale > 0 {
			opts.timeScale = inv.TimeScale
		}
	}

	if err := checkRange("--time-scale", opts.timeScale, 1, 10000); err != nil {
		return &exitError{code: exitInput, err: err}
	}

	// The flags' addresses before any file is read; the talosconfig's below.
	if err := checkAddresses("nodes", opts.nodes); err != nil {
		return &exitError{code: exitInput, err: err}
	}

	if err := checkAddresses("endpoints", opts.endpoints); err != nil {
		return &exitError{code: exitInput, err: err}
	}

	path := opts.talosconfig
	if path == "" {
		path = os.Getenv("TALOSCONFIG")
	}

	if path == "" {
		home, _ := os.UserHomeDir() //nolint:errcheck
		path = filepath.Join(home, ".talos", "config")
	}

	cfg, err := real.ReadTalosconfig(path)
	if err != nil {
		return &exitError{code: exitInput, err: err}
	}

	if err := pickNodes(&opts, cfg, path); err != nil {
		return &exitError{code: exitInput, err: err}
	}

	if err := checkAddresses("nodes", opts.nodes); err != nil {
		return &exitError{code: exitInput, err: err}
	}

	if err := checkAddresses("endpoints", opts.endpoints); err != nil {
		return &exitError{code: exitInput, err: err}
	}

	// Whatever the nodes answer (log lines, errors) is printed through this.
	scrubber := &result.Scrubber{}
	scrubber.Add(result.TalosconfigSecrets(cfg)...)

	examine := check.ExamineOptions{TimeScale: opts.timeScale}
	if len(opts.endpoints) > 0 {
		examine.Via = opts.endpoints[0]
	}

	obs, findings, err := check.Examine(cmd.Context(), cfg, opts.nodes, examine)
	if err != nil {
		return &exitError{code: exitHarness, err: scrubber.ScrubError(err)}
	}

	reachable := false

	for _, n := range obs.Ordered() {
		reachable = reachable || n.Mode != history.ModeDown
	}

	var out bytes.Buffer

	if opts.json {
		enc := json.NewEncoder(&out)
		enc.SetIndent("", "  ")

		if err := enc.Encode(map[string]any{"outcome": judge.OutcomeOf(obs), "findings": findings}); err != nil {
			return &exitError{code: exitHarness, err: err}
		}
	} else {
		printDoctor(&out, obs, findings)
	}

	if _, err := io.WriteString(cmd.OutOrStdout(), termSafeString(scrubber.Scrub(out.String()))); err != nil {
		return &exitError{code: exitHarness, err: err}
	}

	switch {
	case !reachable:
		return &exitError{code: exitHarness, err: fmt.Errorf("no node answered")}
	case len(findings) > 0:
		return &exitError{code: exitFail}
	}

	return nil
}

// pickNodes settles the context, the nodes and the endpoint as talosctl
// does: --context or the current one; --nodes, or the context's nodes
// (reached through its first endpoint unless --endpoints says otherwise), or
// its endpoints themselves.
func pickNodes(opts *doctorOptions, cfg *clientconfig.Config, path string) error {
	if opts.context != "" {
		if _, ok := cfg.Contexts[opts.context]; !ok {
			return fmt.Errorf("talosconfig %s: no context %q", path, opts.context)
		}

		cfg.Context = opts.context
	}

	if len(opts.nodes) > 0 {
		return nil
	}

	ctx := cfg.Contexts[cfg.Context]
	if ctx == nil {
		return fmt.Errorf("no nodes: give --nodes or --inventory (talosconfig %s has no context %q)", path, cfg.Context)
	}

	switch {
	case len(ctx.Nodes) > 0:
		opts.nodes = ctx.Nodes
		if len(opts.endpoints) == 0 {
			opts.endpoints = ctx.Endpoints
		}
	case len(opts.endpoints) > 0:
		opts.nodes = opts.endpoints
		opts.endpoints = nil
	case len(ctx.Endpoints) > 0:
		opts.nodes = ctx.Endpoints
	default:
		return fmt.Errorf("no nodes: give --nodes or --inventory (talosconfig %s, context %q, names neither nodes nor endpoints)", path, cfg.Context)
	}

	return nil
}

// maxDoctorNodes bounds the nodes doctor examines at once.
const maxDoctorNodes = 1000

// checkAddresses checks node or endpoint addresses, from the flags or from a
// talosconfig (a file is input): a host name or IP, with a port from 1 to
// 65535 if any, each once.
func checkAddresses(what string, addrs []string) error {
	if len(addrs) > maxDoctorNodes {
		return fmt.Errorf("--%s: %d addresses, at most %d", what, len(addrs), maxDoctorNodes)
	}

	seen := map[string]bool{}

	for _, a := range addrs {
		if err := checkAddress(a); err != nil {
			return fmt.Errorf("--%s %s: %w", what, quoteShort(a), err)
		}

		if seen[a] {
			return fmt.Errorf("--%s %s: given twice", what, quoteShort(a))
		}

		seen[a] = true
	}

	return nil
}

func checkAddress(a string) error {
	host, port := a, ""

	if h, p, err := net.SplitHostPort(a); err == nil {
		host, port = h, p
	} else if strings.Count(a, ":") == 1 {
		return errors.New("want HOST or HOST:PORT")
	}

	if port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return errors.New("the port must be a number from 1 to 65535")
		}
	}

	if net.ParseIP(host) != nil {
		return nil
	}

	if !hostnameRE.MatchString(host) || len(host) > 253 {
		return errors.New("neither an IP address nor a host name")
	}

	return nil
}

var hostnameRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$`)

func printDoctor(out io.Writer, obs *history.Observation, findings []check.Finding) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NODE\tAPI\tSTAGE\tETCD\tHEALTH")

	for _, n := range obs.Ordered() {
		etcd, health := "-", "-"
		if n.Etcd != nil {
			etcd = n.Etcd.State + " " + n.Etcd.Message

			switch {
			case n.Etcd.HealthUnknown:
				health = "?"
			case n.Etcd.Healthy:
				health = "OK"
			default:
				health = "Fail: " + n.Etcd.HealthMessage
			}
		}

		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", n.Address, n.Mode, n.Stage, etcd, health)
	}

	w.Flush() //nolint:errcheck

	if ms := obs.Main().Members; len(ms) > 0 {
		fmt.Fprintln(out, "\netcd members:")

		for _, m := range ms {
			name := m.Hostname
			if name == "" {
				name = "(not started)"
			}

			fmt.Fprintf(out, "  %s  %-14s learner=%-5v %s\n", m.IDString(), name, m.IsLearner, strings.Join(m.PeerURLs, ","))
		}
	}

	if len(findings) == 0 {
		fmt.Fprintln(out, "\nno problem found")

		return
	}

	fmt.Fprintln(out, "\nfindings:")

	for _, f := range findings {
		fmt.Fprintf(out, "\n  %s  %s\n    %s\n    evidence: %s\n", f.Code, f.Node, f.Message, strings.ReplaceAll(f.Evidence, "\n", "\n              "))

		for _, r := range f.Remedy {
			fmt.Fprintf(out, "    $ %s\n", r)
		}
	}
}
