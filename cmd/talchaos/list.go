package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/talchaos/talchaos/harness/chaos"
	"github.com/talchaos/talchaos/scenarios"
)

func newListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the built-in scenarios",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tTALOS\tREPRODUCES\tDESCRIPTION")

			for _, name := range scenarios.Names() {
				data, file, err := scenarios.Read(name)
				if err != nil {
					return &exitError{code: exitHarness, err: err}
				}

				sc, err := chaos.Parse(file, data)
				if err != nil {
					return &exitError{code: exitHarness, err: err}
				}

				fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", sc.Name, sc.Talos, strings.Join(sc.Reproduces, " "), firstSentence(sc.Description))
			}

			return w.Flush()
		},
	}
}

func firstSentence(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if i := strings.Index(s, ". "); i >= 0 {
		s = s[:i+1]
	}

	if len(s) > 90 {
		s = s[:87] + "..."
	}

	return s
}
