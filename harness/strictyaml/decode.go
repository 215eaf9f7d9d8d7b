// Package strictyaml decodes YAML files into Go values strictly: unknown fields,
// duplicate keys, a value of the wrong type (a float where an integer belongs, a
// quoted word where a boolean belongs), an over-long string and alias expansion
// past a cap are errors naming file, line and field path. The scenario and the
// inventory formats are decoded with it.
//
// It walks the yaml.Node tree alongside the Go value instead of using yaml.v3's
// KnownFields mode, which stops at the first problem, names no field path and
// silently turns 2.9 into an int 2.
package strictyaml

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Limits on the input. A real scenario or inventory is a few KiB with a few
// hundred values.
const (
	// MaxFileBytes bounds a file before it is parsed at all.
	MaxFileBytes = 8 << 20
	// MaxStringBytes bounds one string value (config patches are the largest).
	MaxStringBytes = 256 << 10
	// maxVisits bounds the work of expanding aliases, which the node tree keeps
	// shared: a small file of nested aliases could otherwise expand to billions
	// of values.
	maxVisits = 100_000
	// maxErrors stops decoding a hopeless file (say, another tool's config) early.
	maxErrors = 50
)

// Hook decodes values of one Go type itself (a value whose fields depend on
// another field, such as a fault and its kind). It reports problems through d.
type Hook func(d *Decoder, n *yaml.Node, v reflect.Value, path string)

// Decoder decodes one file. Its zero value is not usable: see NewDecoder.
type Decoder struct {
	File string
	// Lines records the line of every field decoded.
	Lines Lines

	hooks     map[reflect.Type]Hook
	errs      []*Error
	visits    int
	overflow  bool
	expanding map[*yaml.Node]bool // anchors whose alias is being expanded
}

// NewDecoder starts decoding file.
func NewDecoder(file string) *Decoder {
	return &Decoder{File: file, Lines: Lines{}, hooks: map[reflect.Type]Hook{}, expanding: map[*yaml.Node]bool{}}
}

// Hook makes the decoder call h for every value of type t.
func (d *Decoder) Hook(t reflect.Type, h Hook) { d.hooks[t] = h }

// Errs is every problem found so far.
func (d *Decoder) Errs() []*Error { return d.errs }

// Err is the problems found so far as one error (nil when none).
func (d *Decoder) Err() error { return Collect(d.errs) }

// Errorf records a problem at a line and field path.
func (d *Decoder) Errorf(line int, field, format string, args ...any) {
	if len(d.errs) < maxErrors {
		d.errs = append(d.errs, &Error{File: d.File, Line: max(line, 1), Field: field, Msg: fmt.Sprintf(format, args...)})
	}
}

// full reports whether decoding should stop: too many errors or too much work.
func (d *Decoder) full() bool {
	return len(d.errs) >= maxErrors || d.overflow
}

// tick counts one unit of work; past the cap it records the error once and
// reports false, and decoding unwinds.
func (d *Decoder) tick(n *yaml.Node, path string) bool {
	if d.full() {
		return false
	}

	d.visits++
	if d.visits > maxVisits {
		d.overflow = true
		// Recorded even when the error list is full: this one explains why
		// decoding stopped.
		d.errs = append(d.errs, &Error{File: d.File, Line: max(n.Line, 1), Field: path,
			Msg: fmt.Sprintf("document too large once aliases are expanded (more than %d values)", maxVisits)})

		return false
	}

	return true
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// Decode stores n into v (addressable), reporting problems under the field path.
func (d *Decoder) Decode(n *yaml.Node, v reflect.Value, path string) {
	if !d.tick(n, path) {
		return
	}

	if n.Kind == yaml.AliasNode {
		if d.enter(n, path) {
			d.Decode(n.Alias, v, path)
			d.leave(n)
		}

		return
	}

	if h, ok := d.hooks[v.Type()]; ok {
		h(d, n, v, path)

		return
	}

	if v.CanAddr() && reflect.PointerTo(v.Type()).Implements(unmarshalerType) {
		if IsNull(n) {
			v.SetZero()

			return
		}

		if err := v.Addr().Interface().(yaml.Unmarshaler).UnmarshalYAML(n); err != nil {
			d.Errorf(n.Line, path, "%s", err.Error())
		}

		return
	}

	switch v.Kind() {
	case reflect.Pointer:
		if IsNull(n) {
			v.SetZero()

			return
		}

		p := reflect.New(v.Type().Elem())
		d.Decode(n, p.Elem(), path)
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
		// Only reachable if a format grows a field of a kind this walker does not know.
		d.Errorf(n.Line, path, "internal error: cannot decode into %s", v.Type())
	}
}

// enter starts expanding alias n, refusing one that is already being expanded (an
// anchor whose value contains an alias to itself): the parser allows it, and
// following it would never end. The caller must call d.leave(n) when done.
func (d *Decoder) enter(n *yaml.Node, path string) bool {
	if n.Alias == nil || d.expanding[n.Alias] {
		d.Errorf(n.Line, path, "alias *%s refers to itself", n.Value)

		return false
	}

	d.expanding[n.Alias] = true

	return true
}

func (d *Decoder) leave(n *yaml.Node) {
	delete(d.expanding, n.Alias)
}

// IsNull reports whether n is a YAML null.
func IsNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// Describe names what a node is, for "expected X, got Y" messages.
func Describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if IsNull(n) {
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

// scalarTags are the tags a scalar may carry for each kind of Go value: a
// number where a boolean belongs, or 2.9 where an integer belongs, is an error
// rather than a silent conversion.
func scalarTags(k reflect.Kind) (want string, tags []string) {
	switch k {
	case reflect.String:
		return "a string", []string{"!!str", "!!int", "!!float", "!!bool", "!!timestamp"}
	case reflect.Bool:
		return "true or false", []string{"!!bool"}
	case reflect.Float32, reflect.Float64:
		return "a number", []string{"!!int", "!!float"}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer", []string{"!!int"}
	}

	return "an integer", []string{"!!int"}
}

func (d *Decoder) decodeScalar(n *yaml.Node, v reflect.Value, path string) {
	want, tags := scalarTags(v.Kind())

	if n.Kind != yaml.ScalarNode {
		d.Errorf(n.Line, path, "expected %s, got %s", want, Describe(n))

		return
	}

	if IsNull(n) {
		v.SetZero()

		return
	}

	tag := n.ShortTag()
	if !contains(tags, tag) {
		d.Errorf(n.Line, path, "expected %s, got %s", want, Describe(n))

		return
	}

	if v.Kind() == reflect.String && len(n.Value) > MaxStringBytes {
		d.Errorf(n.Line, path, "a string of %d bytes: at most %d", len(n.Value), MaxStringBytes)

		return
	}

	// yaml.v3 does the number syntax (0x10, overflow checks); its own message
	// carries a line we already print, so it is replaced rather than wrapped.
	p := reflect.New(v.Type())
	if err := n.Decode(p.Interface()); err != nil {
		what := "got " + Describe(n)
		if tag == "!!int" {
			what = n.Value + " does not fit"
		}

		d.Errorf(n.Line, path, "expected %s, %s", want, what)

		return
	}

	v.Set(p.Elem())
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}

	return false
}

func (d *Decoder) decodeSlice(n *yaml.Node, v reflect.Value, path string) {
	if IsNull(n) {
		v.SetZero()

		return
	}

	if n.Kind != yaml.SequenceNode {
		d.Errorf(n.Line, path, "expected a list, got %s", Describe(n))

		return
	}

	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, item := range n.Content {
		p := fmt.Sprintf("%s[%d]", path, i)
		d.Lines[p] = item.Line
		d.Decode(item, s.Index(i), p)
	}

	v.Set(s)
}

func (d *Decoder) decodeMap(n *yaml.Node, v reflect.Value, path string) {
	if IsNull(n) {
		v.SetZero()

		return
	}

	pairs, ok := d.Pairs(n, path)
	if !ok {
		return
	}

	m := reflect.MakeMapWithSize(v.Type(), len(pairs))
	for _, kv := range pairs {
		p := Join(path, kv.Name)
		d.Lines[p] = kv.Key.Line
		e := reflect.New(v.Type().Elem()).Elem()
		d.Decode(kv.Val, e, p)
		m.SetMapIndex(reflect.ValueOf(kv.Name).Convert(v.Type().Key()), e)
	}

	v.Set(m)
}

func (d *Decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) {
	if IsNull(n) {
		return
	}

	pairs, ok := d.Pairs(n, path)
	if !ok {
		return
	}

	for _, kv := range d.DecodeFields(pairs, v, path) {
		d.Unknown(kv, path, FieldNames(v.Type()))
	}
}

// DecodeFields decodes the pairs that name fields of struct v and returns the others.
func (d *Decoder) DecodeFields(pairs []Pair, v reflect.Value, path string) (rest []Pair) {
	fields := yamlFields(v.Type())

	for _, kv := range pairs {
		i, known := fields[kv.Name]
		if !known {
			rest = append(rest, kv)

			continue
		}

		p := Join(path, kv.Name)
		d.Lines[p] = kv.Key.Line
		d.Decode(kv.Val, v.Field(i), p)
	}

	return rest
}

// Unknown reports a field that does not belong where it is, suggesting the
// known field it most likely meant.
func (d *Decoder) Unknown(kv Pair, path string, known []string) {
	d.Errorf(kv.Key.Line, Join(path, kv.Name), "unknown field %q%s", kv.Name, suggest(kv.Name, known))
}

// Pair is one key of a mapping, after merge keys are expanded.
type Pair struct {
	Name     string
	Key, Val *yaml.Node
}

// Pairs lists the keys of mapping n in file order. Duplicate keys are errors
// (yaml.v3 checks them only when it decodes itself); keys brought in by a "<<"
// merge are overridden by explicit ones, and earlier merged mappings win over
// later ones, as the YAML merge key spec says.
func (d *Decoder) Pairs(n *yaml.Node, path string) ([]Pair, bool) {
	if n.Kind == yaml.AliasNode {
		if !d.tick(n, path) || !d.enter(n, path) {
			return nil, false
		}

		defer d.leave(n)

		return d.Pairs(n.Alias, path)
	}

	if n.Kind != yaml.MappingNode {
		d.Errorf(n.Line, path, "expected a mapping, got %s", Describe(n))

		return nil, false
	}

	var explicit, merged []Pair

	firstLine := map[string]int{}

	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]

		// Every key counts as work: a big mapping merged through many aliases
		// is walked once per alias.
		if !d.tick(key, path) {
			return nil, false
		}

		if key.Kind == yaml.ScalarNode && key.ShortTag() == "!!merge" {
			ps, ok := d.mergePairs(val, path)
			if !ok {
				return nil, false
			}

			merged = append(merged, ps...)

			continue
		}

		if key.Kind != yaml.ScalarNode {
			d.Errorf(key.Line, path, "expected a field name, got %s", Describe(key))

			continue
		}

		if l, dup := firstLine[key.Value]; dup {
			d.Errorf(key.Line, Join(path, key.Value), "duplicate field %q (first on line %d)", key.Value, l)

			continue
		}

		firstLine[key.Value] = key.Line
		explicit = append(explicit, Pair{Name: key.Value, Key: key, Val: val})
	}

	out := explicit

	for _, kv := range merged {
		if _, seen := firstLine[kv.Name]; !seen {
			firstLine[kv.Name] = kv.Key.Line
			out = append(out, kv)
		}
	}

	return out, true
}

// mergePairs lists the keys a "<<" value brings in: one mapping or a list of
// them. It reports false once decoding must stop, so that a mapping never goes
// on half-merged.
func (d *Decoder) mergePairs(val *yaml.Node, path string) ([]Pair, bool) {
	if !d.tick(val, path) {
		return nil, false
	}

	switch val.Kind {
	case yaml.AliasNode:
		if !d.enter(val, path) {
			return nil, false
		}

		defer d.leave(val)

		return d.mergePairs(val.Alias, path)
	case yaml.SequenceNode:
		var out []Pair

		for _, item := range val.Content {
			ps, ok := d.mergePairs(item, path)
			if !ok {
				return nil, false
			}

			out = append(out, ps...)
		}

		return out, true
	case yaml.MappingNode:
		return d.Pairs(val, path)
	}

	d.Errorf(val.Line, path, "merge key \"<<\" needs a mapping, got %s", Describe(val))

	return nil, false
}

// yamlFields maps the YAML keys of struct type t to field indexes; fields tagged
// "-" or unexported are not part of the format.
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

// FieldNames lists the YAML keys of struct type t, in declaration order.
func FieldNames(t reflect.Type) []string {
	fields := yamlFields(t)

	out := make([]string, 0, len(fields))
	for name := range fields {
		out = append(out, name)
	}

	sort.Slice(out, func(i, j int) bool { return fields[out[i]] < fields[out[j]] })

	return out
}

// suggest proposes the known field a misspelt key most likely meant; case slips
// ("controlplanes") are the common mistake.
func suggest(name string, fields []string) string {
	names := append([]string(nil), fields...)
	sort.Strings(names)

	for _, f := range names {
		if strings.EqualFold(f, name) || strings.EqualFold(strings.ReplaceAll(name, "_", ""), f) {
			return fmt.Sprintf(" (did you mean %q?)", f)
		}
	}

	return ""
}

// ReadRoot parses data, which must hold exactly one YAML document whose top
// level is a mapping, and returns that mapping. what names the document in
// messages ("a scenario"); emptyMsg is the message for an empty file.
func ReadRoot(file string, data []byte, what, emptyMsg string) (*yaml.Node, error) {
	if len(data) > MaxFileBytes {
		return nil, &Error{File: file, Line: 1, Msg: fmt.Sprintf("file of %d bytes: at most %d", len(data), MaxFileBytes)}
	}

	dec := yaml.NewDecoder(bytes.NewReader(data))

	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &Error{File: file, Line: 1, Msg: emptyMsg}
		}

		return nil, syntaxError(file, err)
	}

	// A second document would be silently ignored by a plain decode; one file is
	// one document.
	var next yaml.Node
	if err := dec.Decode(&next); err == nil {
		return nil, &Error{File: file, Line: max(next.Line, 1), Msg: "more than one YAML document: one " + strings.TrimPrefix(strings.TrimPrefix(what, "a "), "an ") + " per file"}
	} else if !errors.Is(err, io.EOF) {
		return nil, syntaxError(file, err)
	}

	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}

	// "---" alone is a document holding an empty null: as empty as no document at all.
	if IsNull(root) && root.Value == "" {
		return nil, &Error{File: file, Line: 1, Msg: emptyMsg}
	}

	if root.Kind != yaml.MappingNode {
		return nil, &Error{File: file, Line: max(root.Line, 1), Msg: what + " must be a mapping, got " + Describe(root)}
	}

	return root, nil
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// syntaxError turns a yaml.v3 parse error ("yaml: line 3: did not find expected
// key") into an *Error with its line.
func syntaxError(file string, err error) *Error {
	msg := err.Error()
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		if l, convErr := strconv.Atoi(m[1]); convErr == nil {
			return &Error{File: file, Line: l, Msg: "invalid YAML: " + m[2]}
		}
	}

	return &Error{File: file, Line: 1, Msg: "invalid YAML: " + strings.TrimPrefix(msg, "yaml: ")}
}
