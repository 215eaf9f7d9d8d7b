// Package chaos holds the fault catalogue and the seeded schedule that starts
// and heals faults at a time or on an observed state.
//
// Each fault kind is one type in one file, as etcd's robustness failpoints are:
// the type is the kind's parameters (decoded strictly from the scenario: a field
// the kind does not have is an error), and its methods are its validation, the
// target capabilities it needs, whether it is destructive, its documentation and
// Inject. Kinds is the one explicit list; validation, --plan, the targets'
// refusals and `talchaos faults` all read it.
//
// Each trigger state (a `when:` or `until:` waits for one) is likewise one
// type in one file, trigger_<state>.go, that registers it: adding a state
// touches that file and its test and nothing else; the scenario validator,
// history validation, the schedule and `talchaos faults` read TriggerStates.
package chaos

import (
	"context"
	"reflect"
	"slices"

	"github.com/talchaos/talchaos/harness/clock"
	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/judge"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// Kind is one fault kind, bound to its parameters.
type Kind interface {
	// Kind is the catalogue name ("bandwidth"); Validate reports every problem
	// of the parameters (scenario.FaultSpec).
	scenario.FaultSpec
	// Doc says in one line what the fault does.
	Doc() string
	// Destructive reports whether the fault can harm a real node beyond the
	// run (reboot, wipe, power, a NIC down): on a real target it needs
	// --allow-destructive.
	Destructive() bool
	// Needs lists the target capabilities the fault uses with these
	// parameters in this scenario.
	Needs(sc *scenario.Scenario) []target.Capability
	// Inject starts the fault; the returned Heal undoes it.
	Inject(ctx context.Context, env *Env) (target.Heal, error)
	// Example is a complete fault entry of this kind (a YAML flow mapping),
	// for the docs; a test checks that every example is valid.
	Example() string
}

// Kinds is the catalogue, in the order `talchaos faults` lists it.
var Kinds = []Kind{
	// network, on one node's port
	Latency{},
	Bandwidth{},
	Blackhole{},
	Reset{},
	SlowClose{},
	// network, between nodes
	Partition{},
	Isolate{},
	// processes and power
	CrashEtcd{},
	PauseEtcd{},
	PauseNode{},
	Reboot{},
	PowerOff{},
	WipeEtcd{},
	ResetNode{},
	// the cluster, as an operator changes it
	RemoveMember{},
	// the Talos API and the etcd calls a joining node makes
	APIFail{},
	APIDropReply{},
	APIDelay{},
	// the node's clock and its time sync
	TimeUnsynced{},
	ClockOffset{},
	// the node's view of the cluster discovery service
	DiscoveryUnreachable{},
	DiscoveryPartial{},
	// the node's disk
	SlowDisk{},
	// the node's addresses
	AddressLate{},
	AddressGone{},
	// the registry the nodes pull from
	ImageMissing{},
}

// Env is what a fault gets when it is injected.
type Env struct {
	Cluster target.Cluster
	// Clock turns Talos-time parameters (an api-delay's delay) into wall
	// time; network parameters are real time and never scaled.
	Clock clock.Clock
	// Seed is the fault's own random stream (a latency's jitter), drawn from
	// the run's seed.
	Seed uint64
}

// Node is a parameter naming the node a fault acts on: a node of the cluster,
// or scenario.RandomNode where the kind allows it (the run's seed then picks a
// control plane other than the bootstrap node).
type Node string

// Catalogue is what scenarios can name, as the scenario decoder reads it:
// the fault kinds, the trigger states and the diagnosis codes (harness/judge).
var Catalogue scenario.Catalogue = catalogue{}

// Known is the fault kinds and trigger states, for reading a recorded
// history back.
func Known() history.Known {
	return history.Known{Kind: func(k string) bool { _, ok := Lookup(k); return ok }, States: StateNames()}
}

type catalogue struct{}

// New returns the zero parameters of a kind.
func (catalogue) New(name string) (scenario.FaultSpec, bool) {
	k, ok := Lookup(name)

	return k, ok
}

// Names lists the kinds.
func (catalogue) Names() []string {
	out := make([]string, 0, len(Kinds))
	for _, k := range Kinds {
		out = append(out, k.Kind())
	}

	return out
}

// TriggerStates lists the trigger states.
func (catalogue) TriggerStates() []string { return StateNames() }

// Counted reports whether a trigger state takes a count.
func (catalogue) Counted(state string) bool {
	s, ok := LookupState(state)

	return ok && s.Counted()
}

// DiagnosisCodes lists the diagnosis codes.
func (catalogue) DiagnosisCodes() []string { return judge.CodeNames() }

// Lookup finds a kind by name.
func Lookup(name string) (Kind, bool) {
	i := slices.IndexFunc(Kinds, func(k Kind) bool { return k.Kind() == name })
	if i < 0 {
		return nil, false
	}

	return Kinds[i], true
}

// Parse parses a scenario with the fault kinds of the catalogue.
func Parse(file string, data []byte) (*scenario.Scenario, error) {
	return scenario.Parse(file, data, Catalogue)
}

// Load reads and parses a scenario file with the fault kinds of the catalogue.
func Load(path string) (*scenario.Scenario, error) {
	return scenario.Load(path, Catalogue)
}

var (
	nodeType  = reflect.TypeFor[Node]()
	nodesType = reflect.TypeFor[[]Node]()
)

// NodesOf lists the nodes a fault's parameters name, in field order.
func NodesOf(k Kind) []string {
	var out []string

	v := reflect.ValueOf(k)
	for i := range v.NumField() {
		switch f := v.Field(i); f.Type() {
		case nodeType:
			out = append(out, f.String())
		case nodesType:
			for j := range f.Len() {
				out = append(out, f.Index(j).String())
			}
		}
	}

	return out
}

// withNode returns k with every node parameter that says "random" set to node.
func withNode(k Kind, node string) Kind {
	v := reflect.New(reflect.TypeOf(k)).Elem()
	v.Set(reflect.ValueOf(k))

	for i := range v.NumField() {
		if f := v.Field(i); f.Type() == nodeType && f.String() == scenario.RandomNode {
			f.SetString(node)
		}
	}

	return v.Interface().(Kind)
}

// usesRandom reports whether a node parameter says "random".
func usesRandom(k Kind) bool {
	return slices.Contains(NodesOf(k), scenario.RandomNode)
}
