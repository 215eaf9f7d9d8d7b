// Package strictjson reads the JSON files talchaos wrote and is given back
// (report.json, ledgers: downloaded from CI, attached to bug reports) as
// strictly as strictyaml reads scenarios. An unknown field (a misspelt key), a
// key written twice, a value of the wrong type (a string where a number
// belongs, 2.5 where an integer does, a number out of its type's range), null
// where a value is needed, a required field left out and data after the JSON
// value are errors naming the file, the line and column, and the JSON path:
//
//	report.json:812:9: history.entries[12].observd: unknown field (did you mean "observed"?)
//
// Validation after decoding (ranges, references between values) reports
// problems at JSON paths through Problems; Locate places them in the file.
//
// encoding/json's Decoder does the lexing (its Token stream, with the
// nesting of what it is asked to skip bounded by its scanner); the walk
// alongside the Go type is here, because DisallowUnknownFields names neither
// the path nor the position, matches keys case-insensitively, keeps the last
// of two equal keys and accepts null for every type.
package strictjson

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// maxDepth bounds the nesting of a document. talchaos's own files nest a
// dozen levels; the bound keeps a file of a million '[' from being walked
// (encoding/json's Token stream has no bound of its own).
const maxDepth = 100

// Options say what a document must hold beyond its type.
type Options struct {
	// Required lists, per struct type, the JSON keys every object of that
	// type must have (a key may be present and empty: "scenarios": []).
	Required map[reflect.Type][]string
}

// Decode decodes data, the content of file, into v (a non-nil pointer)
// strictly: see the package documentation. Every problem is an *Error (or
// Errors for several), naming file, position and path.
func Decode(file string, data []byte, v any, opts Options) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("strictjson: Decode of %s into a %T, want a non-nil pointer", file, v)
	}

	w := newWalker(file, data)
	w.required = opts.Required

	w.walk(rv.Elem().Type(), "", 0)

	if !w.stop {
		if off := skipSpace(data, w.dec.InputOffset()); off < int64(len(data)) {
			w.errorAt(off, "", "data after the end of the JSON value")
		}
	}

	if len(w.errs) > 0 {
		return Collect(w.errs)
	}

	// The walk has checked every key, type and range: what is left is
	// setting the values, which encoding/json does.
	if err := json.Unmarshal(data, v); err != nil {
		e := &Error{File: file, Msg: "cannot be read: " + Quote(err.Error())}

		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			e.Path, e.Msg = te.Field, fmt.Sprintf("%s where %s belongs", Quote(te.Value), describe(te.Type))
			place(e, data, te.Offset)
		}

		return e
	}

	return nil
}

// Locate places problems found after decoding data, the content of file: each
// gets the file's name and the position of the value at its path (or of the
// nearest enclosing value written in the file, for a field that is missing).
// It returns them, in file order, as one error (nil for none).
func Locate(file string, data []byte, errs []*Error) error {
	for _, e := range errs {
		e.File = file

		if e.Line == 0 {
			place(e, data, locate(data, e.Path))
		}
	}

	errs = slices.Clone(errs)
	slices.SortStableFunc(errs, func(a, b *Error) int { return cmp.Compare(a.Offset, b.Offset) })

	return Collect(errs)
}

var (
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	timeType        = reflect.TypeFor[time.Time]()
	anyType         = reflect.TypeFor[any]()
)

type walker struct {
	file     string
	data     []byte
	dec      *json.Decoder
	required map[reflect.Type][]string
	fields   map[reflect.Type]map[string]reflect.Type
	errs     []*Error
	// stop ends the walk: invalid JSON, too deep, or too many problems.
	stop bool
}

func newWalker(file string, data []byte) *walker {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()

	return &walker{file: file, data: data, dec: dec, fields: map[reflect.Type]map[string]reflect.Type{}}
}

func (w *walker) errorAt(off int64, path, format string, args ...any) {
	if len(w.errs) >= MaxErrors {
		w.stop = true

		return
	}

	e := &Error{File: w.file, Path: path, Msg: fmt.Sprintf(format, args...)}
	place(e, w.data, off)
	w.errs = append(w.errs, e)

	if len(w.errs) >= MaxErrors {
		w.stop = true
	}
}

// syntax records what the lexer said and ends the walk.
func (w *walker) syntax(err error, path string) {
	w.stop = true

	start := skipSpace(w.data, w.dec.InputOffset())

	var se *json.SyntaxError

	switch {
	case errors.As(err, &se):
		w.errorAt(w.syntaxOffset(se, start), path, "not valid JSON: %s", se.Error())
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		w.errorAt(int64(len(w.data)), path, "the file ends before the JSON value does")
	default:
		w.errorAt(w.next(), path, "not valid JSON: %s", Quote(err.Error()))
	}
}

// syntaxOffset is where the character a syntax error is about is. The
// decoder stays at the start of the value it failed to read; the error's own
// offset is that position for a token out of place, and otherwise counts
// only the bytes its scanner saw (not those Token stepped over), so the
// value is scanned again on its own to find the character.
func (w *walker) syntaxOffset(se *json.SyntaxError, start int64) int64 {
	if se.Offset == start || start >= int64(len(w.data)) {
		return start
	}

	var again *json.SyntaxError
	if err := json.NewDecoder(bytes.NewReader(w.data[start:])).Decode(&discard{}); errors.As(err, &again) && again.Offset >= 1 {
		return start + again.Offset - 1
	}

	return start
}

// next is the offset where the next token starts.
func (w *walker) next() int64 {
	off := skipSpace(w.data, w.dec.InputOffset())

	// The decoder may stand before the comma or colon it steps over next.
	if off < int64(len(w.data)) && (w.data[off] == ',' || w.data[off] == ':') {
		off = skipSpace(w.data, off+1)
	}

	return off
}

func skipSpace(data []byte, off int64) int64 {
	for off < int64(len(data)) {
		switch data[off] {
		case ' ', '\t', '\r', '\n':
			off++
		default:
			return off
		}
	}

	return off
}

// discard takes a value and keeps nothing: skipping a value with Decode has
// the scanner check it, with its own bound on nesting.
type discard struct{}

func (*discard) UnmarshalJSON([]byte) error { return nil }

func (w *walker) skip(path string) {
	if err := w.dec.Decode(&discard{}); err != nil {
		w.syntax(err, path)
	}
}

// JSON value kinds, by the first byte of the value.
const (
	jsonObject = "an object"
	jsonArray  = "an array"
	jsonString = "a string"
	jsonBool   = "true or false"
	jsonNumber = "a number"
)

func kindOf(c byte) string {
	switch {
	case c == '{':
		return jsonObject
	case c == '[':
		return jsonArray
	case c == '"':
		return jsonString
	case c == 't' || c == 'f':
		return jsonBool
	case c == '-' || c >= '0' && c <= '9':
		return jsonNumber
	}

	return ""
}

// wants is the JSON kind a Go type is written as ("" for none).
func wants(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return jsonObject
	case reflect.Slice, reflect.Array:
		return jsonArray
	case reflect.String:
		return jsonString
	case reflect.Bool:
		return jsonBool
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return jsonNumber
	}

	return ""
}

// describe says what a Go type is written as, for a message.
func describe(t reflect.Type) string {
	if t == nil {
		return "a value"
	}

	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}

	switch {
	case t == timeType:
		return "a time (RFC 3339)"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		return "an integer"
	case t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uintptr:
		return "a non-negative integer"
	case t.Kind() == reflect.Interface:
		return "a value"
	}

	if k := wants(t); k != "" {
		return k
	}

	return "a value of Go type " + t.String()
}

// walk checks the value that comes next against t.
func (w *walker) walk(t reflect.Type, path string, depth int) {
	if w.stop {
		return
	}

	off := w.next()
	if off >= int64(len(w.data)) {
		if off == 0 || len(bytes.TrimSpace(w.data)) == 0 {
			w.stop = true
			w.errorAt(off, path, "the file is empty: want %s", describe(t))

			return
		}

		w.syntax(io.ErrUnexpectedEOF, path)

		return
	}

	if depth > maxDepth {
		w.stop = true
		w.errorAt(off, path, "nested more than %d deep", maxDepth)

		return
	}

	c := w.data[off]

	if c == 'n' {
		if _, err := w.dec.Token(); err != nil {
			w.syntax(err, path)

			return
		}

		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface:
		default:
			w.errorAt(off, path, "null where %s belongs", describe(t))
		}

		return
	}

	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}

	if t.Kind() == reflect.Interface {
		if t.NumMethod() != 0 {
			w.errorAt(off, path, "cannot be read into Go type %s", t)
			w.skip(path)

			return
		}

		t = anyType
	}

	if reflect.PointerTo(t).Implements(unmarshalerType) {
		w.custom(t, path, off)

		return
	}

	got := kindOf(c)
	if got == "" {
		_, err := w.dec.Token()
		if err == nil {
			err = &json.SyntaxError{Offset: off}
		}

		w.syntax(err, path)

		return
	}

	if want := wants(t); t != anyType && want != got {
		w.errorAt(off, path, "%s where %s belongs", got, describe(t))
		w.skip(path)

		return
	}

	switch got {
	case jsonObject:
		w.object(t, path, off, depth)
	case jsonArray:
		w.array(t, path, off, depth)
	default:
		w.scalar(t, path, off)
	}
}

// custom checks a value of a type that decodes itself (time.Time).
func (w *walker) custom(t reflect.Type, path string, off int64) {
	var raw json.RawMessage
	if err := w.dec.Decode(&raw); err != nil {
		w.syntax(err, path)

		return
	}

	if err := reflect.New(t).Interface().(json.Unmarshaler).UnmarshalJSON(raw); err != nil {
		w.errorAt(off, path, "%s is not %s", Quote(string(raw)), describe(t))
	}
}

func (w *walker) object(t reflect.Type, path string, off int64, depth int) {
	if _, err := w.dec.Token(); err != nil {
		w.syntax(err, path)

		return
	}

	var fields map[string]reflect.Type

	switch t.Kind() {
	case reflect.Struct:
		fields = w.fieldsOf(t)
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			w.errorAt(off, path, "cannot be read into Go type %s", t)
			w.stop = true

			return
		}
	}

	seen := map[string]bool{}

	for !w.stop && w.dec.More() {
		koff := w.next()

		tok, err := w.dec.Token()
		if err != nil {
			w.syntax(err, path)

			return
		}

		key, _ := tok.(string) // the lexer allows nothing else here
		kpath := Key(path, key)

		if seen[key] {
			w.errorAt(koff, kpath, "written twice (a duplicate key)")
			w.skip(kpath)

			continue
		}

		seen[key] = true

		switch {
		case t.Kind() == reflect.Struct:
			ft, ok := fields[key]
			if !ok {
				w.errorAt(koff, kpath, "unknown field%s", suggest(key, fields))
				w.skip(kpath)

				continue
			}

			w.walk(ft, kpath, depth+1)
		case t.Kind() == reflect.Map:
			w.walk(t.Elem(), kpath, depth+1)
		default: // any
			w.walk(anyType, kpath, depth+1)
		}
	}

	if w.stop {
		return
	}

	if _, err := w.dec.Token(); err != nil {
		w.syntax(err, path)

		return
	}

	for _, k := range w.required[t] {
		if !seen[k] {
			w.errorAt(off, Key(path, k), "missing: the field is required")
		}
	}
}

func (w *walker) array(t reflect.Type, path string, off int64, depth int) {
	if _, err := w.dec.Token(); err != nil {
		w.syntax(err, path)

		return
	}

	elem := anyType
	if t != anyType {
		elem = t.Elem()
	}

	n := 0

	for ; !w.stop && w.dec.More(); n++ {
		w.walk(elem, Index(path, n), depth+1)
	}

	if w.stop {
		return
	}

	if _, err := w.dec.Token(); err != nil {
		w.syntax(err, path)

		return
	}

	if t.Kind() == reflect.Array && n != t.Len() {
		w.errorAt(off, path, "%d elements where %d belong", n, t.Len())
	}
}

func (w *walker) scalar(t reflect.Type, path string, off int64) {
	tok, err := w.dec.Token()
	if err != nil {
		w.syntax(err, path)

		return
	}

	n, ok := tok.(json.Number)
	if !ok {
		return // a string or a bool, as wanted
	}

	s := string(n)

	switch k := t.Kind(); {
	case k >= reflect.Int && k <= reflect.Int64:
		if _, err := strconv.ParseInt(s, 10, t.Bits()); err != nil {
			w.numberError(off, path, s, err, t)
		}
	case k >= reflect.Uint && k <= reflect.Uint64:
		if _, err := strconv.ParseUint(s, 10, t.Bits()); err != nil {
			w.numberError(off, path, s, err, t)
		}
	default: // a float, or a number in an any
		bits := 64
		if k == reflect.Float32 {
			bits = 32
		}

		if f, err := strconv.ParseFloat(s, bits); err != nil && math.IsInf(f, 0) {
			w.errorAt(off, path, "%s is out of range for a number", Quote(s))
		}
	}
}

func (w *walker) numberError(off int64, path, s string, err error, t reflect.Type) {
	switch {
	case strings.HasPrefix(s, "-") && t.Kind() >= reflect.Uint:
		w.errorAt(off, path, "%s is negative where a non-negative integer belongs", Quote(s))
	case errors.Is(err, strconv.ErrRange):
		kind := "integer"
		if t.Kind() >= reflect.Uint {
			kind = "non-negative integer"
		}

		w.errorAt(off, path, "%s is out of range (a %d-bit %s)", Quote(s), t.Bits(), kind)
	default:
		w.errorAt(off, path, "%s is not an integer", Quote(s))
	}
}

// fieldsOf maps a struct's JSON keys to their types, as encoding/json names
// them: the tag's name, else the field's; an untagged embedded struct's
// fields as the outer struct's unless it has its own of the name.
func (w *walker) fieldsOf(t reflect.Type) map[string]reflect.Type {
	if m, ok := w.fields[t]; ok {
		return m
	}

	m := map[string]reflect.Type{}

	var embedded []reflect.Type

	for i := range t.NumField() {
		f := t.Field(i)

		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}

		name, _, _ := strings.Cut(tag, ",")

		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}

			if ft.Kind() == reflect.Struct {
				embedded = append(embedded, ft)

				continue
			}
		}

		if !f.IsExported() {
			continue
		}

		if name == "" {
			name = f.Name
		}

		m[name] = f.Type
	}

	for _, et := range embedded {
		for k, ft := range w.fieldsOf(et) {
			if _, ok := m[k]; !ok {
				m[k] = ft
			}
		}
	}

	w.fields[t] = m

	return m
}

// suggest names the known field an unknown key is likely a misspelling of.
func suggest(key string, fields map[string]reflect.Type) string {
	if len(key) > maxQuoted {
		return ""
	}

	best, dist := "", 3

	for name := range fields {
		d := distance(strings.ToLower(key), strings.ToLower(name))
		if d < dist || d == dist && name < best {
			best, dist = name, d
		}
	}

	if best == "" || dist > 2 {
		return ""
	}

	return fmt.Sprintf(" (did you mean %q?)", best)
}

// distance is the Levenshtein distance of two short strings, in bytes.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)

	for j := range prev {
		prev[j] = j
	}

	for i := 1; i <= len(a); i++ {
		cur[0] = i

		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}

			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}

		prev, cur = cur, prev
	}

	return prev[len(b)]
}

// place sets an error's offset, line and column.
func place(e *Error, data []byte, off int64) {
	off = max(0, min(off, int64(len(data))))
	before := data[:off]
	start := bytes.LastIndexByte(before, '\n') + 1

	e.Offset = off
	e.Line = 1 + bytes.Count(before, []byte{'\n'})
	e.Col = 1 + utf8.RuneCount(before[start:])
}

// segment is one step of a JSON path: a key or an index.
type segment struct {
	key   string
	index int // -1 for a key
}

// parsePath splits a path written by Key and Index; it stops at what it cannot
// read (a capped key), so a path always yields its readable beginning.
func parsePath(p string) []segment {
	var out []segment

	for p != "" {
		switch {
		case p[0] == '.':
			p = p[1:]
		case strings.HasPrefix(p, `["`):
			q, err := strconv.QuotedPrefix(p[1:])
			if err != nil || !strings.HasPrefix(p[1+len(q):], "]") {
				return out
			}

			key, _ := strconv.Unquote(q)
			out = append(out, segment{key: key, index: -1})
			p = p[1+len(q)+1:]
		case p[0] == '[':
			end := strings.IndexByte(p, ']')
			if end < 0 {
				return out
			}

			i, err := strconv.Atoi(p[1:end])
			if err != nil || i < 0 {
				return out
			}

			out = append(out, segment{index: i})
			p = p[end+1:]
		default:
			end := strings.IndexAny(p, ".[")
			if end < 0 {
				end = len(p)
			}

			out = append(out, segment{key: p[:end], index: -1})
			p = p[end:]
		}
	}

	return out
}

// locate is the offset of the value at path in data, or of the nearest
// enclosing value written there.
func locate(data []byte, path string) int64 {
	w := newWalker("", data)
	best := w.next()

	for _, s := range parsePath(path) {
		off := w.next()
		if off >= int64(len(data)) {
			return best
		}

		best = off

		if !w.enter(s) {
			return best
		}
	}

	return w.next()
}

// enter moves to the child s of the value that comes next: the decoder is
// left before the child's value. It reports false when there is none.
func (w *walker) enter(s segment) bool {
	off := w.next()

	switch {
	case s.index < 0 && w.data[off] == '{':
		if _, err := w.dec.Token(); err != nil {
			return false
		}

		for w.dec.More() {
			tok, err := w.dec.Token()
			if err != nil {
				return false
			}

			if tok == s.key {
				return true
			}

			if w.dec.Decode(&discard{}) != nil {
				return false
			}
		}
	case s.index >= 0 && w.data[off] == '[':
		if _, err := w.dec.Token(); err != nil {
			return false
		}

		for i := 0; w.dec.More(); i++ {
			if i == s.index {
				return true
			}

			if w.dec.Decode(&discard{}) != nil {
				return false
			}
		}
	}

	return false
}
