package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v4"

	"github.com/talchaos/talchaos/harness/chaos"
	"github.com/talchaos/talchaos/harness/inputfile"
	"github.com/talchaos/talchaos/sim"
	"github.com/talchaos/talchaos/sim/container"
)

// newNodeCmd is `talchaos node`: one simulated node as a process, the unit
// the container target runs in each container.
func newNodeCmd() *cobra.Command {
	var (
		spec      sim.NodeSpec
		scFile    string
		bundle    string
		nodeAddrs []string
	)

	cmd := &cobra.Command{
		Use:   "node --name NAME --scenario FILE --secrets FILE --node NAME=IP... --discovery URL",
		Short: "Run one simulated node (fake Talos API, embedded etcd, the scenario's Talos profile) as a process",
		Long: "node runs one simulated Talos node on the real ports of its own address until SIGTERM, logging machined's lines to stdout. " +
			"Its config and etcd data stay in --dir, so a restarted node boots configured and replays its WAL. The container target runs one per container.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			data, err := inputfile.Read(scFile, inputfile.MaxConfigBytes)
			if err != nil {
				return &exitError{code: exitInput, err: err}
			}

			if spec.Scenario, err = chaos.Parse(scFile, data); err != nil {
				return &exitError{code: exitInput, err: err}
			}

			if spec.Bundle, err = loadBundle(bundle); err != nil {
				return &exitError{code: exitInput, err: fmt.Errorf("--secrets %s: %w", bundle, err)}
			}

			spec.Nodes = map[string]string{}

			for _, kv := range nodeAddrs {
				name, ip, ok := strings.Cut(kv, "=")
				if !ok || name == "" || ip == "" {
					return &exitError{code: exitInput, err: fmt.Errorf("--node %q: want NAME=IP", kv)}
				}

				spec.Nodes[name] = ip
			}

			spec.Log = cmd.OutOrStdout()

			c, err := sim.NewNodeProcess(cmd.Context(), spec)
			if err != nil {
				return &exitError{code: exitHarness, err: err}
			}

			fmt.Fprintf(cmd.OutOrStdout(), "[talchaos] node %s serving the Talos API on %s:50000\n", spec.Name, spec.Nodes[spec.Name])

			<-cmd.Context().Done()

			return c.Close()
		},
	}

	f := cmd.Flags()
	f.StringVar(&spec.Name, "name", "", "the node's name in the scenario (cp1, w1, ...)")
	f.StringVar(&scFile, "scenario", "", "the scenario file")
	f.StringVar(&bundle, "secrets", "", "the cluster's secrets bundle (talosctl gen secrets format)")
	f.StringArrayVar(&nodeAddrs, "node", nil, "NAME=IP of every node of the cluster, this one too (repeat)")
	f.StringVar(&spec.Discovery, "discovery", "", "base URL of the cluster's discovery registry")
	f.StringVar(&spec.Dir, "dir", "/var/lib/talchaos", "directory for the node's config, etcd data and PKI; kept across restarts")
	f.Int64Var(&spec.Seed, "seed", 1, "the run's seed")
	f.Float64Var(&spec.Scale, "time-scale", 0, "time scale of the node's Talos timers (default: the sim's for the scenario)")
	f.StringVar(&spec.KubeDir, "kube-dir", "", "directory of the Kubernetes binaries (hyperkube, kwok) when the scenario runs Kubernetes (default: beside this binary, then make kube's cache)")
	f.StringVar(&spec.Endpoint, "kube-endpoint", "", "the cluster's Kubernetes endpoint URL (https://HOST:6443), served outside the node, when the scenario runs Kubernetes")

	for _, req := range []string{"name", "scenario", "secrets", "node", "discovery"} {
		cobra.CheckErr(cmd.MarkFlagRequired(req))
	}

	return cmd
}

// newNodeNetCmd is `talchaos node-net`, run by the container target inside a
// node's container: it sets the addresses the kernel drops packets to and from.
func newNodeNetCmd() *cobra.Command {
	var drop string

	cmd := &cobra.Command{
		Use:    "node-net --drop IP[,IP...]",
		Short:  "Inside a node's container: drop every packet to and from these addresses (empty: none)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			var addrs []string
			if drop != "" {
				addrs = strings.Split(drop, ",")
			}

			if err := container.SetDropped(addrs); err != nil {
				return &exitError{code: exitHarness, err: err}
			}

			return nil
		},
	}

	cmd.Flags().StringVar(&drop, "drop", "", "comma-separated IPv4 addresses")

	return cmd
}

// loadBundle is secrets.LoadBundle reading through inputfile (a regular file,
// bounded, never blocking on a FIFO). Its decoding errors are not quoted: the
// file holds the cluster's keys.
func loadBundle(path string) (*secrets.Bundle, error) {
	data, err := inputfile.Read(path, inputfile.MaxConfigBytes)
	if err != nil {
		return nil, errors.New(inputfile.Problem(err))
	}

	b := &secrets.Bundle{Clock: secrets.NewClock()}
	if err := yaml.Unmarshal(data, b); err != nil {
		return nil, errors.New("not a secrets bundle (a YAML error)")
	}

	return b, nil
}
