package strictyaml

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

type doc struct {
	Name  string            `yaml:"name"`
	Count int               `yaml:"count"`
	Rate  float64           `yaml:"rate"`
	On    bool              `yaml:"on"`
	Tags  []string          `yaml:"tags"`
	Sub   *sub              `yaml:"sub"`
	Map   map[string]sub    `yaml:"map"`
	Skip  string            `yaml:"-"`
	Extra map[string]string `yaml:"extra"`
}

type sub struct {
	N uint8 `yaml:"n"`
}

func decode(t *testing.T, src string) (*doc, error) {
	t.Helper()

	root, err := ReadRoot("f.yaml", []byte(src), "a doc", "empty doc")
	if err != nil {
		return nil, err
	}

	d := NewDecoder("f.yaml")

	var out doc

	d.Decode(root, reflect.ValueOf(&out).Elem(), "")

	return &out, d.Err()
}

func TestDecodeStrictly(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"name: a\ncount: 2.9\n", `f.yaml:2: count: expected an integer, got "2.9"`},
		{"count: 1e3\n", `f.yaml:1: count: expected an integer, got "1e3"`},
		{"count: 99999999999999999999\n", `f.yaml:1: count: expected an integer, got "99999999999999999999"`},
		{"count: 9223372036854775808\n", `f.yaml:1: count: expected an integer, 9223372036854775808 does not fit`},
		{"on: yes please\n", `f.yaml:1: on: expected true or false, got "yes please"`},
		{"on: 1\n", `f.yaml:1: on: expected true or false, got "1"`},
		{"rate: fast\n", `f.yaml:1: rate: expected a number, got "fast"`},
		{"sub: {n: 300}\n", `f.yaml:1: sub.n: expected a non-negative integer, 300 does not fit`},
		{"sub: {n: 1, m: 2}\n", `f.yaml:1: sub.m: unknown field "m"`},
		{"Name: a\n", `f.yaml:1: Name: unknown field "Name" (did you mean "name"?)`},
		{"skip: a\n", `f.yaml:1: skip: unknown field "skip"`},
		{"tags: a\n", `f.yaml:1: tags: expected a list, got "a"`},
		{"name: a\nname: b\n", `f.yaml:2: name: duplicate field "name" (first on line 1)`},
		{"name: " + strings.Repeat("x", MaxStringBytes+1) + "\n", "f.yaml:1: name: a string of 262145 bytes: at most 262144"},
		{"map: {\"a\\nb\": {q: 1}}\n", `f.yaml:1: "map.a\nb.q": unknown field "q"`},
		{"a: &a [*a]\n", "f.yaml:1: a: unknown field"},
		{"extra: &e {<<: *e}\n", "f.yaml:1: extra: alias *e refers to itself"},
		{"- 1\n", "f.yaml:1: a doc must be a mapping, got a list"},
		{"", "f.yaml:1: empty doc"},
		{"a: 1\n---\nb: 2\n", "f.yaml:2: more than one YAML document: one doc per file"},
	} {
		_, err := decode(t, tc.src)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%.40q: got %v, want %s", tc.src, err, tc.want)
		}
	}
}

func TestDecodeValues(t *testing.T) {
	d, err := decode(t, "base: &b {n: 3}\n")
	if err == nil {
		t.Fatalf("unknown top-level key accepted: %+v", d)
	}

	d, err = decode(t, "name: x\ncount: 0x10\nrate: 2\non: true\ntags: [a, 1]\nsub: {n: 7}\nmap:\n  one: &s {n: 1}\n  two: {<<: *s}\nextra: {k: v}\n")
	if err != nil {
		t.Fatal(err)
	}

	want := &doc{Name: "x", Count: 16, Rate: 2, On: true, Tags: []string{"a", "1"}, Sub: &sub{N: 7},
		Map: map[string]sub{"one": {N: 1}, "two": {N: 1}}, Extra: map[string]string{"k": "v"}}
	if !reflect.DeepEqual(d, want) {
		t.Errorf("got %+v, want %+v", d, want)
	}
}

// Aliases and merge keys that expand far beyond the file's size stop at the
// work cap with an error, never after decoding only part of the file.
func TestWorkCap(t *testing.T) {
	var b strings.Builder

	b.WriteString("map:\n  x: {<<: [&a0 {n: 1}")

	for i := 1; i <= 6; i++ {
		b.WriteString(", &a" + string(rune('0'+i)) + " {<<: [" + strings.Repeat("*a"+string(rune('0'+i-1))+", ", 9) + "*a" + string(rune('0'+i-1)) + "]}")
	}

	b.WriteString("]}\nname: after\n")

	_, err := decode(t, b.String())
	if err == nil || !strings.Contains(err.Error(), "document too large once aliases are expanded") {
		t.Fatalf("got %v", err)
	}

	// A mapping of many keys merged through many aliases counts every key.
	keys := make([]string, 2000)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d: v", i)
	}

	aliases := strings.TrimSuffix(strings.Repeat("*e, ", 200), ", ")

	_, err = decode(t, "extra: &e {"+strings.Join(keys, ", ")+"}\nsub: {<<: ["+aliases+"]}\n")
	if err == nil || !strings.Contains(err.Error(), "document too large") {
		t.Fatalf("got %v", err)
	}
}
