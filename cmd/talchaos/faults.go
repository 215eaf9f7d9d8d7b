package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/talchaos/talchaos/harness/chaos"
	"github.com/talchaos/talchaos/harness/real"
	"github.com/talchaos/talchaos/harness/target"
	"github.com/talchaos/talchaos/sim"
	"github.com/talchaos/talchaos/sim/container"
)

// targets are every target, for the listing (the real one without an
// inventory: which nodes have a power provider is known only with one).
func targets() []target.Target {
	return []target.Target{sim.Target{}, container.Target{}, &real.Target{}}
}

func newFaultsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "faults [KIND...]",
		Short: "List the fault kinds, their parameters and the targets that support them",
		Long: `List every fault kind a scenario can name: what it does, whether it is destructive
(on real nodes it then needs --allow-destructive), which targets can inject it,
its parameters and an example; then the fields every fault has and the states a
trigger can wait for. Name kinds to see only those.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			kinds := chaos.Kinds

			if len(args) > 0 {
				kinds = nil

				for _, a := range args {
					k, ok := chaos.Lookup(a)
					if !ok {
						return &exitError{code: exitInput, err: fmt.Errorf("unknown fault kind %q: one of %s", a, strings.Join(chaos.Catalogue.Names(), ", "))}
					}

					kinds = append(kinds, k)
				}
			}

			printFaults(cmd.OutOrStdout(), kinds, len(args) == 0)

			return nil
		},
	}
}

func printFaults(out io.Writer, kinds []chaos.Kind, all bool) {
	tgts := targets()

	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)

	header := "KIND\tDESTRUCTIVE"
	for _, t := range tgts {
		header += "\t" + strings.ToUpper(t.Name())
	}

	fmt.Fprintln(w, header)

	for _, k := range kinds {
		line := k.Kind() + "\t" + map[bool]string{true: "yes", false: "no"}[k.Destructive()]
		for _, t := range tgts {
			line += "\t" + chaos.Support(k, t.Capabilities())
		}

		fmt.Fprintln(w, line)
	}

	w.Flush() //nolint:errcheck

	fmt.Fprintln(out, "(real: which nodes can be powered off or isolated depends on the inventory's proxmox or qemu provider per node;")
	fmt.Fprintln(out, " destructive kinds need --allow-destructive there, as real nodes outlive the run)")

	for _, k := range kinds {
		fmt.Fprintf(out, "\n%s: %s\n", k.Kind(), k.Doc())

		pw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		for _, p := range chaos.Params(k) {
			fmt.Fprintf(pw, "  %s\t%s\n", p.Name, p.Doc)
		}

		pw.Flush() //nolint:errcheck
		fmt.Fprintf(out, "  example: %s\n", k.Example())

		if c, ok := k.(chaos.ExampleCluster); ok {
			fmt.Fprintf(out, "  (in a cluster: %s)\n", c.ExampleCluster())
		}
	}

	if !all {
		return
	}

	fmt.Fprint(out, `
Every fault also has:
  name   unique in the scenario (default <kind>-<index>)
  kind   one of the kinds above
  at     starts this long after the run starts (Talos time), or
  when   {node, state, after, count}: starts once node is seen in state (plus after)
  for    heals this long after it started (Talos time); or
  until  {node, state, after}: heals once node is seen in state (plus after)
         with neither for nor until, it lasts until the run ends
`)

	fmt.Fprintf(out, "\ntrigger states: %s\n", strings.Join(chaos.StateNames(), ", "))

	for _, s := range chaos.TriggerStates() {
		count := ""
		if s.Counted() {
			count = " (takes a count)"
		}

		fmt.Fprintf(out, "  %-17s %s%s\n", s.Name(), s.Doc(), count)
	}

	fmt.Fprintln(out, "\nTalos-time durations are divided by the scenario's timeScale on simulated nodes; real nodes run on real time.")
	fmt.Fprintln(out, "Network parameters (latency, jitter, slow-close delay) are real time on every target.")
}
