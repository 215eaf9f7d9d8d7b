package scenario

import (
	"fmt"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/talchaos/talchaos/harness/inputfile"
	"github.com/talchaos/talchaos/harness/strictyaml"
)

// Load reads the scenario file at path and parses it.
func Load(path string, kinds Catalogue) (*Scenario, error) {
	data, err := inputfile.Read(path, inputfile.MaxConfigBytes)
	if err != nil {
		return nil, fmt.Errorf("read scenario: %w", err)
	}

	return Parse(path, data, kinds)
}

const emptyMsg = "empty scenario: expected a mapping with apiVersion, kind, name and cluster"

// Parse decodes a scenario strictly, applies defaults and validates it, the
// faults' kind-specific parameters with the kinds of the catalogue, trigger
// states and diagnosis codes against its lists (chaos.Catalogue; without one no
// fault kind is known and states and codes are not checked). file is only used
// in errors and stored in Scenario.File. The error is an *Error when there is
// one problem and Errors (in line order) when there are several.
func Parse(file string, data []byte, kinds Catalogue) (_ *Scenario, err error) {
	// Parsing must never take the harness down, whatever the file: a panic in the YAML
	// library becomes an error at the top of the file.
	defer func() {
		if r := recover(); r != nil {
			err = &Error{File: file, Line: 1, Msg: fmt.Sprintf("internal error parsing scenario: %v", r)}
		}
	}()

	root, err := strictyaml.ReadRoot(file, data, "a scenario", emptyMsg)
	if err != nil {
		return nil, err
	}

	d := strictyaml.NewDecoder(file)
	d.Lines[""] = root.Line
	d.Hook(reflect.TypeFor[Fault](), faultDecoder(kinds))

	var s Scenario

	d.Decode(root, reflect.ValueOf(&s).Elem(), "")

	// Validating a half-decoded scenario would add noise (a bad controlPlanes would
	// also fail every node-name check), so decoding errors are reported alone.
	if err := d.Err(); err != nil {
		return nil, err
	}

	s.File = file
	s.Source = append([]byte(nil), data...)
	s.lines = d.Lines

	for i := range s.Faults {
		s.Faults[i].Index = i
		s.Faults[i].Line = d.Lines[fmt.Sprintf("faults[%d]", i)]
	}

	s.applyDefaults()

	if err := strictyaml.Collect(s.validate(kinds)); err != nil {
		return nil, err
	}

	return &s, nil
}

// commonFaultFields are the fields every fault has, whatever its kind.
var commonFaultFields = strictyaml.FieldNames(reflect.TypeFor[Fault]())

// faultDecoder decodes a fault in two steps: the fields every fault has, then
// the rest of the mapping into the parameters of its kind, strictly.
func faultDecoder(kinds Catalogue) strictyaml.Hook {
	return func(d *strictyaml.Decoder, n *yaml.Node, v reflect.Value, path string) {
		if strictyaml.IsNull(n) {
			d.Errorf(n.Line, path, "expected a fault (a mapping with kind and a trigger), got null")

			return
		}

		pairs, ok := d.Pairs(n, path)
		if !ok {
			return
		}

		f := v.Addr().Interface().(*Fault)
		rest := d.DecodeFields(pairs, v, path)

		if f.Kind == "" {
			d.Errorf(d.Lines.Line(path+".kind"), path+".kind", "required: one of %s", strings.Join(kindNames(kinds), ", "))

			return
		}

		var spec FaultSpec

		ok = false
		if kinds != nil {
			spec, ok = kinds.New(f.Kind)
		}

		if !ok {
			d.Errorf(d.Lines[path+".kind"], path+".kind", "unknown fault kind %q: one of %s", f.Kind, strings.Join(kindNames(kinds), ", "))

			return
		}

		sv := reflect.New(reflect.TypeOf(spec)).Elem()
		own := strictyaml.FieldNames(sv.Type())

		for _, kv := range d.DecodeFields(rest, sv, path) {
			if other := kindWithField(kinds, kv.Name); other != "" {
				d.Errorf(kv.Key.Line, strictyaml.Join(path, kv.Name), "%q does not apply to kind %s (it is a field of %s); %s takes %s",
					kv.Name, f.Kind, other, f.Kind, fieldList(own))

				continue
			}

			d.Unknown(kv, path, append(own, commonFaultFields...))
		}

		f.Spec = sv.Interface().(FaultSpec)
	}
}

func kindNames(kinds Catalogue) []string {
	if kinds == nil {
		return nil
	}

	return kinds.Names()
}

// kindWithField names a kind that has the field, "" if none.
func kindWithField(kinds Catalogue, field string) string {
	for _, k := range kindNames(kinds) {
		spec, _ := kinds.New(k)
		for _, f := range strictyaml.FieldNames(reflect.TypeOf(spec)) {
			if f == field {
				return k
			}
		}
	}

	return ""
}

func fieldList(fields []string) string {
	if len(fields) == 0 {
		return "no fields of its own"
	}

	return strings.Join(fields, ", ")
}
