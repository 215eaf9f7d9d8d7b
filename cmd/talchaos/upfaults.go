package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/talchaos/talchaos/harness/chaos"
	"github.com/talchaos/talchaos/harness/clock"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
	"github.com/talchaos/talchaos/sim"
	"github.com/talchaos/talchaos/sim/container"
)

// upFaults reads `up --fault` flags as the faults of a scenario with up's
// cluster: each a faults entry without a trigger (up has no observer to
// wait for a state), starting at once; validated as a scenario file's,
// each problem naming its flag, and planned for up's target (which must be
// able to inject it) before anything starts.
func upFaults(sc *scenario.Scenario, opts upOptions) ([]chaos.Planned, error) {
	specs := opts.faults
	if len(specs) == 0 {
		return nil, nil
	}

	var (
		entries []map[string]any
		errs    []error
	)

	for _, spec := range specs {
		var entry map[string]any
		if err := yaml.Unmarshal([]byte(spec), &entry); err != nil || entry == nil {
			errs = append(errs, fmt.Errorf("--fault %q: give a fault as a YAML mapping, e.g. '{kind: time-unsynced, node: cp1}'", spec))

			continue
		}

		for _, key := range []string{"at", "when", "until"} {
			if _, ok := entry[key]; ok {
				errs = append(errs, fmt.Errorf("--fault %q: %s: up holds its faults from the start (for: heals one after that long)", spec, key))
			}
		}

		entry["at"] = "0s"
		entries = append(entries, entry)
	}

	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	doc := map[string]any{
		"apiVersion": scenario.APIVersion, "kind": scenario.Kind, "name": sc.Name, "talos": sc.Talos, "timeScale": sc.TimeScale,
		"cluster":      map[string]any{"controlPlanes": sc.Cluster.ControlPlanes, "workers": sc.Cluster.Workers},
		"orchestrator": map[string]any{"bootstrapNode": sc.Orchestrator.BootstrapNode},
		"faults":       entries,
	}

	data, err := yaml.Marshal(doc)
	if err != nil {
		return nil, err
	}

	parsed, err := chaos.Parse("--fault", data)
	if err != nil {
		return nil, faultFlagErrors(err, specs)
	}

	var tgt target.Target = sim.Target{}
	if opts.target == "container" {
		tgt = container.Target{}
	}

	planned, err := chaos.Plan(parsed, tgt, chaos.PlanOptions{Seed: opts.seed})
	if err != nil {
		return nil, faultFlagErrors(err, specs)
	}

	return planned, nil
}

// faultFlagErrors says a fault's problems in terms of its flag: "--fault
// '{kind: time-unsynced, node: cp7}': node: unknown node ...".
func faultFlagErrors(err error, specs []string) error {
	es, ok := scenarioErrors(err)
	if !ok {
		return err
	}

	msgs := make([]string, 0, len(es))

	for _, e := range es {
		var (
			i     int
			field string
		)

		if n, _ := fmt.Sscanf(e.Field, "faults[%d].", &i); n == 1 && i < len(specs) {
			_, field, _ = strings.Cut(e.Field, ".")
			msgs = append(msgs, fmt.Sprintf("--fault %q: %s: %s", specs[i], field, e.Msg))

			continue
		}

		msgs = append(msgs, e.Field+": "+e.Msg)
	}

	return errors.New(strings.Join(msgs, "\n"))
}

// holdFaults injects up's faults into the cluster it started, each healed
// after its for: (else it holds until up exits).
func holdFaults(ctx context.Context, out io.Writer, planned []chaos.Planned, cluster upCluster) error {
	clk := clock.New(cluster.TimeScale())

	for _, p := range planned {
		heal, err := p.Kind.Inject(ctx, &chaos.Env{Cluster: cluster, Clock: clk, Seed: p.Seed})
		if err != nil {
			return fmt.Errorf("fault %s (%s): %w", p.Spec.Name, p.Kind.Kind(), err)
		}

		lasts := "until up exits"
		if d := p.Spec.For.Duration; d > 0 {
			lasts = "for " + d.String()

			time.AfterFunc(clk.Wall(d), func() { heal() }) //nolint:errcheck // the fault's own heal; nothing to report it to
		}

		fmt.Fprintf(out, "fault %s (%s) on %s: %s\n", p.Spec.Name, p.Kind.Kind(), strings.Join(p.Nodes, ", "), lasts)
	}

	return nil
}
