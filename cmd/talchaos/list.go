package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/talchaos/talchaos/harness/judge"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/scenarios"
)

// listWidth is what `talchaos list` fits in: a terminal of 100 columns.
const listWidth = 100

func newListCmd() *cobra.Command {
	var diagnoses bool

	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the built-in scenarios ('talchaos show NAME' prints one), or the diagnosis codes",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if diagnoses {
				listDiagnoses(cmd.OutOrStdout())

				return nil
			}

			var all []*scenario.Scenario

			nameWidth := len("NAME")

			for _, name := range scenarios.Names() {
				sc, err := scenarios.Load(name)
				if err != nil {
					return &exitError{code: exitHarness, err: err}
				}

				all = append(all, sc)
				nameWidth = max(nameWidth, len(sc.Name))
			}

			const talosWidth = len("v1.12")

			descWidth := listWidth - nameWidth - 2 - talosWidth - 2
			out := cmd.OutOrStdout()

			fmt.Fprintf(out, "%-*s  %-*s  %s\n", nameWidth, "NAME", talosWidth, "TALOS", "DESCRIPTION")

			for _, sc := range all {
				fmt.Fprintf(out, "%-*s  %-*s  %s\n", nameWidth, sc.Name, talosWidth, sc.Talos, firstSentence(sc.Description, descWidth))
			}

			return nil
		},
	}

	cmd.Flags().BoolVar(&diagnoses, "diagnoses", false, "list the diagnosis codes a run can report, and what each means")

	return cmd
}

// listDiagnoses prints every diagnosis code with its meaning, wrapped to listWidth.
func listDiagnoses(out io.Writer) {
	width := len("CODE")
	for _, c := range judge.Codes() {
		width = max(width, len(c.Name))
	}

	fmt.Fprintf(out, "%-*s  %s\n", width, "CODE", "MEANING")

	for _, c := range judge.Codes() {
		lines := wrap(c.Doc, listWidth-width-2)
		for i, l := range lines {
			name := c.Name
			if i > 0 {
				name = ""
			}

			fmt.Fprintf(out, "%-*s  %s\n", width, name, l)
		}
	}
}

// wrap breaks s into lines of at most width columns, at spaces.
func wrap(s string, width int) []string {
	var (
		out  []string
		line string
	)

	for _, w := range strings.Fields(s) {
		if line != "" && len(line)+1+len(w) > width {
			out = append(out, line)
			line = ""
		}

		if line != "" {
			line += " "
		}

		line += w
	}

	return append(out, line)
}

func newShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show NAME",
		Short: "Print a built-in scenario's YAML (a starting point for your own)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, _, err := scenarios.Read(args[0])
			if err != nil || !isBuiltin(strings.TrimSuffix(args[0], ".yaml")) {
				return &exitError{code: exitInput, err: fmt.Errorf("%s: no such built-in scenario (see 'talchaos list')", args[0])}
			}

			_, err = cmd.OutOrStdout().Write(data)

			return err
		},
	}
}

// firstSentence is the first sentence of s on one line, cut to width.
func firstSentence(s string, width int) string {
	s = strings.Join(strings.Fields(s), " ")
	if i := strings.Index(s, ". "); i >= 0 {
		s = s[:i+1]
	}

	if r := []rune(s); len(r) > width {
		s = string(r[:width-3]) + "..."
	}

	return s
}
