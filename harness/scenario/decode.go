package scenario

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The decoder walks the yaml.Node tree alongside the Go value instead of using
// yaml.Decoder.KnownFields: that way every error carries the field path and the line of
// the offending key or value, and the line of every field is kept for later errors.

// maxVisits bounds the work of expanding aliases, which the node tree keeps shared: a
// small file of nested aliases could otherwise expand to billions of values. A real
// scenario has a few hundred values.
const maxVisits = 100_000

// maxErrors stops decoding a hopeless file (say, a config of another tool) early.
const maxErrors = 50

type decoder struct {
	file      string
	lines     map[string]int // field path -> line, kept in the Scenario
	errs      []*Error
	visits    int
	expanding map[*yaml.Node]bool // anchors whose alias is being expanded
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

func (d *decoder) errorf(line int, field, format string, args ...any) {
	if len(d.errs) < maxErrors {
		d.errs = append(d.errs, &Error{File: d.file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
	}
}

// full reports whether decoding should stop: too many errors or too much work.
func (d *decoder) full() bool {
	return len(d.errs) >= maxErrors || d.visits > maxVisits
}

// decode stores n into v (addressable), reporting problems under the field path.
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	if d.full() {
		return
	}

	d.visits++
	if d.visits > maxVisits {
		d.errorf(n.Line, path, "document too large once aliases are expanded")

		return
	}

	if n.Kind == yaml.AliasNode {
		if d.enter(n, path) {
			d.decode(n.Alias, v, path)
			d.leave(n)
		}

		return
	}

	if v.CanAddr() && reflect.PointerTo(v.Type()).Implements(unmarshalerType) {
		if isNull(n) {
			v.SetZero()

			return
		}

		if err := v.Addr().Interface().(yaml.Unmarshaler).UnmarshalYAML(n); err != nil {
			d.errorf(n.Line, path, "%s", err.Error())
		}

		return
	}

	switch v.Kind() {
	case reflect.Pointer:
		if isNull(n) {
			v.SetZero()

			return
		}

		p := reflect.New(v.Type().Elem())
		d.decode(n, p.Elem(), path)
		v.Set(p)
	case reflect.Struct:
		d.decodeStruct(n, v, path)
	case reflect.Slice:
		d.decodeSlice(n, v, path)
	case reflect.Map:
		d.decodeMap(n, v, path)
	case reflect.String, reflect.Bool, reflect.Float32, reflect.Float64,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		d.decodeScalar(n, v, path)
	default:
		// Only reachable if types.go grows a field of a kind this walker does not know.
		d.errorf(n.Line, path, "internal error: cannot decode into %s", v.Type())
	}
}

// enter starts expanding alias n, refusing one that is already being expanded (an
// anchor whose value contains an alias to itself): the parser allows it, and following
// it would never end. The caller must call d.leave(n) when done.
func (d *decoder) enter(n *yaml.Node, path string) bool {
	if n.Alias == nil || d.expanding[n.Alias] {
		d.errorf(n.Line, path, "alias *%s refers to itself", n.Value)

		return false
	}

	d.expanding[n.Alias] = true

	return true
}

func (d *decoder) leave(n *yaml.Node) {
	delete(d.expanding, n.Alias)
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// describe names what a node is, for "expected X, got Y" messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if isNull(n) {
			return "null"
		}

		if r := []rune(n.Value); len(r) > 40 {
			return strconv.Quote(string(r[:40]) + "...")
		}

		return strconv.Quote(n.Value)
	case yaml.AliasNode:
		return "an alias"
	default:
		return "a document"
	}
}

func (d *decoder) decodeScalar(n *yaml.Node, v reflect.Value, path string) {
	want := map[reflect.Kind]string{
		reflect.String: "a string", reflect.Bool: "true or false",
		reflect.Float32: "a number", reflect.Float64: "a number",
	}[v.Kind()]
	if want == "" {
		want = "an integer"
		if v.Kind() >= reflect.Uint && v.Kind() <= reflect.Uint64 {
			want = "a non-negative integer"
		}
	}

	if n.Kind != yaml.ScalarNode {
		d.errorf(n.Line, path, "expected %s, got %s", want, describe(n))

		return
	}

	if isNull(n) {
		v.SetZero()

		return
	}

	// yaml.v3 does the number syntax (0x10, 1_000, overflow checks); its own message
	// carries a line we already print, so it is replaced rather than wrapped.
	p := reflect.New(v.Type())
	if err := n.Decode(p.Interface()); err != nil {
		d.errorf(n.Line, path, "expected %s, got %s", want, describe(n))

		return
	}

	v.Set(p.Elem())
}

func (d *decoder) decodeSlice(n *yaml.Node, v reflect.Value, path string) {
	if isNull(n) {
		v.SetZero()

		return
	}

	if n.Kind != yaml.SequenceNode {
		d.errorf(n.Line, path, "expected a list, got %s", describe(n))

		return
	}

	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, item := range n.Content {
		p := fmt.Sprintf("%s[%d]", path, i)
		d.lines[p] = item.Line
		d.decode(item, s.Index(i), p)
	}

	v.Set(s)
}

func (d *decoder) decodeMap(n *yaml.Node, v reflect.Value, path string) {
	if isNull(n) {
		v.SetZero()

		return
	}

	pairs, ok := d.pairs(n, path)
	if !ok {
		return
	}

	m := reflect.MakeMapWithSize(v.Type(), len(pairs))
	for _, kv := range pairs {
		p := join(path, kv.name)
		d.lines[p] = kv.key.Line
		e := reflect.New(v.Type().Elem()).Elem()
		d.decode(kv.val, e, p)
		m.SetMapIndex(reflect.ValueOf(kv.name).Convert(v.Type().Key()), e)
	}

	v.Set(m)
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) {
	if isNull(n) {
		return
	}

	pairs, ok := d.pairs(n, path)
	if !ok {
		return
	}

	fields := yamlFields(v.Type())
	for _, kv := range pairs {
		p := join(path, kv.name)

		i, known := fields[kv.name]
		if !known {
			d.errorf(kv.key.Line, p, "unknown field %q%s", kv.name, suggest(kv.name, fields))

			continue
		}

		d.lines[p] = kv.key.Line
		d.decode(kv.val, v.Field(i), p)
	}
}

// pair is one key of a mapping, after merge keys are expanded.
type pair struct {
	name     string
	key, val *yaml.Node
}

// pairs lists the keys of mapping n in file order. Duplicate keys are errors (yaml.v3
// checks them only when it decodes itself); keys brought in by a "<<" merge are
// overridden by explicit ones, and earlier merged mappings win over later ones, as
// the YAML merge key spec says.
func (d *decoder) pairs(n *yaml.Node, path string) ([]pair, bool) {
	if n.Kind != yaml.MappingNode {
		d.errorf(n.Line, path, "expected a mapping, got %s", describe(n))

		return nil, false
	}

	var explicit, merged []pair

	firstLine := map[string]int{}

	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		if key.Kind == yaml.ScalarNode && key.ShortTag() == "!!merge" {
			merged = append(merged, d.mergePairs(val, path)...)

			continue
		}

		if key.Kind != yaml.ScalarNode {
			d.errorf(key.Line, path, "expected a field name, got %s", describe(key))

			continue
		}

		if l, dup := firstLine[key.Value]; dup {
			d.errorf(key.Line, join(path, key.Value), "duplicate field %q (first on line %d)", key.Value, l)

			continue
		}

		firstLine[key.Value] = key.Line
		explicit = append(explicit, pair{name: key.Value, key: key, val: val})
	}

	out := explicit

	for _, kv := range merged {
		if _, seen := firstLine[kv.name]; !seen {
			firstLine[kv.name] = kv.key.Line
			out = append(out, kv)
		}
	}

	return out, true
}

// mergePairs lists the keys a "<<" value brings in: one mapping or a list of them.
func (d *decoder) mergePairs(val *yaml.Node, path string) []pair {
	d.visits++
	if d.full() {
		return nil
	}

	if val.Kind == yaml.AliasNode {
		if !d.enter(val, path) {
			return nil
		}

		defer d.leave(val)

		return d.mergePairs(val.Alias, path)
	}

	if val.Kind == yaml.SequenceNode {
		var out []pair
		for _, item := range val.Content {
			out = append(out, d.mergePairs(item, path)...)
		}

		return out
	}

	if val.Kind != yaml.MappingNode {
		d.errorf(val.Line, path, "merge key \"<<\" needs a mapping, got %s", describe(val))

		return nil
	}

	ps, _ := d.pairs(val, path)

	return ps
}

// yamlFields maps the YAML keys of struct type t to field indexes; fields tagged "-"
// or unexported are not part of the format.
func yamlFields(t reflect.Type) map[string]int {
	out := map[string]int{}

	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}

		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}

		if name == "" {
			name = strings.ToLower(f.Name)
		}

		out[name] = i
	}

	return out
}

// suggest proposes the known field a misspelt key most likely meant; case slips
// ("controlplanes") are the common mistake.
func suggest(name string, fields map[string]int) string {
	var names []string
	for f := range fields {
		names = append(names, f)
	}

	sort.Strings(names)

	for _, f := range names {
		if strings.EqualFold(f, name) || strings.EqualFold(strings.ReplaceAll(name, "_", ""), f) {
			return fmt.Sprintf(" (did you mean %q?)", f)
		}
	}

	return ""
}

func join(path, key string) string {
	if path == "" {
		return key
	}

	return path + "." + key
}
