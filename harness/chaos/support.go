package chaos

import (
	"go.yaml.in/yaml/v3"

	"reflect"
	"slices"
	"strings"

	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// Support says whether a target with these capabilities can inject the kind:
// "yes", "no", or the parameter values it can inject ("port talos-api"), found
// by trying every value of the kind's enumerated parameters (ports, RPCs) with
// the built-in orchestrators. It is what `talchaos faults` shows; a run checks
// the actual fault with Plan.
func Support(k Kind, caps []target.Capability) string {
	sc := &scenario.Scenario{Orchestrator: scenario.Orchestrator{Name: "resilient"}}

	type variant struct {
		label string
		kind  Kind
	}

	variants := []variant{{kind: k}}

	v := reflect.ValueOf(k)
	for i := range v.NumField() {
		var values []string

		switch v.Field(i).Type() {
		case reflect.TypeFor[target.Port]():
			values = portNames()
		case reflect.TypeFor[RPC]():
			values = target.RPCs
		default:
			continue
		}

		name := yamlName(v.Type().Field(i))

		var next []variant

		for _, base := range variants {
			for _, val := range values {
				nv := reflect.New(v.Type()).Elem()
				nv.Set(reflect.ValueOf(base.kind))
				nv.Field(i).SetString(val)
				next = append(next, variant{label: strings.TrimSpace(base.label + " " + name + " " + val), kind: nv.Interface().(Kind)})
			}
		}

		variants = next
	}

	var ok []string

	for _, va := range variants {
		if !slices.ContainsFunc(va.kind.Needs(sc), func(c target.Capability) bool { return !slices.Contains(caps, c) }) {
			ok = append(ok, va.label)
		}
	}

	switch {
	case len(ok) == len(variants):
		return "yes"
	case len(ok) == 0:
		return "no"
	}

	// "port talos-api" and the like: one enumerated parameter per kind reads
	// best as "rpc ApplyConfiguration, Bootstrap only".
	name, _, _ := strings.Cut(ok[0], " ")
	values := make([]string, 0, len(ok))

	for _, label := range ok {
		n, v, _ := strings.Cut(label, " ")
		if n != name || strings.Contains(v, " ") {
			return strings.Join(ok, "; ") + " only"
		}

		values = append(values, v)
	}

	return name + " " + strings.Join(values, ", ") + " only"
}

func yamlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")

	return name
}

// Param is one parameter of a kind, for the docs.
type Param struct {
	Name, Doc string
}

// Params lists a kind's own parameters with their docs, in field order.
func Params(k Kind) []Param {
	t := reflect.TypeOf(k)

	out := make([]Param, 0, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		out = append(out, Param{Name: yamlName(f), Doc: f.Tag.Get("doc")})
	}

	return out
}

// ParamsOf is a kind's parameters by their scenario names, as a scenario
// file would write them (durations as "90s"), for reports.
func ParamsOf(k Kind) map[string]any {
	out := map[string]any{}

	data, err := yaml.Marshal(k)
	if err == nil {
		err = yaml.Unmarshal(data, &out)
	}

	if err != nil {
		return map[string]any{"error": err.Error()}
	}

	return out
}

// ExampleCluster is implemented by kinds whose example needs more of the
// cluster than three control planes and a worker (cluster.network).
type ExampleCluster interface {
	ExampleCluster() string
}

// ParseExample parses a kind's example as the one fault of a scenario with
// three control planes and a worker (or the kind's ExampleCluster), the way
// a scenario file would be.
func ParseExample(k Kind) (*scenario.Scenario, error) {
	cluster := "{controlPlanes: 3, workers: 1}"
	if c, ok := k.(ExampleCluster); ok {
		cluster = c.ExampleCluster()
	}

	doc := "apiVersion: talchaos/v1\nkind: Scenario\nname: example\ncluster: " + cluster + "\nfaults:\n  - " + k.Example() + "\n"

	return Parse(k.Kind()+" example", []byte(doc))
}
