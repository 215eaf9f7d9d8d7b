// Package chaos holds the fault catalogue, one small type per kind behind one
// interface (the shape of etcd's robustness failpoints), and the seeded schedule
// that starts and heals faults at a time or on an observed state.
package chaos

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// Fault is one kind of failure, bound to its parameters.
type Fault interface {
	// Kind is the catalogue name ("blackhole", "latency", ...).
	Kind() string
	// Node is the node the fault acts on, or "" for faults between nodes.
	Node() string
	// Needs is the target capability the fault uses.
	Needs() target.Capability
	// Inject starts the fault; the returned Heal undoes it.
	Inject(ctx context.Context, c target.Cluster) (target.Heal, error)
}

// builder makes a fault from its scenario entry, validating the fields its kind uses.
type builder func(sc *scenario.Scenario, f scenario.Fault) (Fault, error)

var catalogue = map[string]builder{}

// register adds a kind to the catalogue; each kind's file calls it from init.
func register(kind string, b builder) { catalogue[kind] = b }

// Kinds lists the fault kinds, sorted.
func Kinds() []string {
	out := make([]string, 0, len(catalogue))
	for k := range catalogue {
		out = append(out, k)
	}

	sort.Strings(out)

	return out
}

// Build makes the fault for a scenario's fault entry.
func Build(sc *scenario.Scenario, f scenario.Fault) (Fault, error) {
	b, ok := catalogue[f.Kind]
	if !ok {
		return nil, f.Errorf(sc, "kind", "unknown fault kind %q: one of %s", f.Kind, strings.Join(Kinds(), ", "))
	}

	return b(sc, f)
}

// Supported checks the target can inject the fault, with the reason when not.
func Supported(fault Fault, tgt target.Target) error {
	if slices.Contains(tgt.Capabilities(), fault.Needs()) {
		return nil
	}

	return fmt.Errorf("target %q cannot inject %q faults: it lacks the %q capability", tgt.Name(), fault.Kind(), fault.Needs())
}
