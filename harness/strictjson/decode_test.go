package strictjson

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

type inner struct {
	Name  string  `json:"name"`
	Count int     `json:"count,omitempty"`
	Small int8    `json:"small,omitempty"`
	ID    uint64  `json:"id,omitempty"`
	Ratio float64 `json:"ratio,omitempty"`
	OK    bool    `json:"ok,omitempty"`
	Skip  int     `json:"-"`
}

type Embedded struct {
	Seed int64  `json:"seed"`
	Name string `json:"name"` // shadowed by doc.Name
}

type doc struct {
	Embedded

	Schema  string         `json:"schema"`
	Name    string         `json:"name"`
	When    time.Time      `json:"when,omitzero"`
	Items   []inner        `json:"items"`
	Ptr     *inner         `json:"ptr,omitempty"`
	Params  map[string]any `json:"params,omitempty"`
	Pair    [2]int         `json:"pair,omitzero"`
	Untaged string
}

var docOptions = Options{Required: map[reflect.Type][]string{
	reflect.TypeFor[doc]():   {"schema", "items"},
	reflect.TypeFor[inner](): {"name"},
}}

func TestDecode(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string // substrings of the error, in order; none: success
	}{
		{"minimal", `{"schema":"s","items":[]}`, nil},
		{"full", `{"schema":"s","seed":-3,"name":"n","when":"2026-01-02T03:04:05Z","items":[{"name":"a","count":2,"id":18446744073709551615,"ratio":1e300,"ok":true}],` +
			`"ptr":null,"params":{"a":[1,{"b":null}],"c":"d"},"pair":[1,2],"Untaged":"x"}`, nil},
		{"whitespace around", " \n\t{\"schema\":\"s\",\"items\":null}\n\n", nil},

		{"empty file", "", []string{"x.json:1:1: the file is empty: want an object"}},
		{"blank file", "  \n ", []string{"the file is empty"}},
		{"not json", "report", []string{"x.json:1:1: not valid JSON: invalid character 'r'"}},
		{"truncated", `{"schema":"s","items":[`, []string{"x.json:1:24: items: the file ends before the JSON value does"}},
		{"array at top", `[]`, []string{"x.json:1:1: an array where an object belongs"}},
		{"trailing data", `{"schema":"s","items":[]} {}`, []string{"x.json:1:27: data after the end of the JSON value"}},
		{"trailing garbage", "{\"schema\":\"s\",\"items\":[]}\nxyz", []string{"x.json:2:1: data after the end"}},

		{"unknown field", "{\"schema\":\"s\",\n \"items\":[{\"name\":\"a\",\n   \"cuont\":1}]}", []string{`x.json:3:4: items[0].cuont: unknown field (did you mean "count"?)`}},
		{"case differs", `{"Schema":"s","schema":"s","items":[]}`, []string{`x.json:1:2: Schema: unknown field (did you mean "schema"?)`}},
		{"json dash field", `{"schema":"s","items":[{"name":"a","Skip":1}]}`, []string{"items[0].Skip: unknown field"}},
		{"odd key quoted", "{\"schema\":\"s\",\"items\":[],\"\\u001b[2J\":1}", []string{`["\x1b[2J"]: unknown field`}},
		{"long key capped", `{"schema":"s","items":[],"` + strings.Repeat("k", 500) + `":1}`, []string{`kkkk"...]: unknown field`}},
		{"duplicate key", `{"schema":"s","items":[],"schema":"t"}`, []string{"x.json:1:26: schema: written twice (a duplicate key)"}},
		{"duplicate in any", `{"schema":"s","items":[],"params":{"a":1,"a":2}}`, []string{"params.a: written twice"}},
		{"missing required", `{"schema":"s"}`, []string{"x.json:1:1: items: missing: the field is required"}},
		{"missing nested required", `{"schema":"s","items":[{}]}`, []string{"x.json:1:24: items[0].name: missing"}},

		{"string for int", `{"schema":"s","items":[],"seed":"1"}`, []string{"seed: a string where an integer belongs"}},
		{"float for int", `{"schema":"s","items":[],"seed":1.5}`, []string{`seed: "1.5" is not an integer`}},
		{"exponent for int", `{"schema":"s","items":[],"seed":1e3}`, []string{`seed: "1e3" is not an integer`}},
		{"int overflow", `{"schema":"s","items":[],"seed":9223372036854775808}`, []string{`seed: "9223372036854775808" is out of range (a 64-bit integer)`}},
		{"int8 overflow", `{"schema":"s","items":[{"name":"a","small":300}]}`, []string{"items[0].small"}},
		{"negative uint", `{"schema":"s","items":[{"name":"a","id":-1}]}`, []string{`items[0].id: "-1" is negative`}},
		{"float overflow", `{"schema":"s","items":[{"name":"a","ratio":1e400}]}`, []string{`items[0].ratio: "1e400" is out of range`}},
		{"float overflow in any", `{"schema":"s","items":[],"params":{"x":[-1e999]}}`, []string{`params.x[0]: "-1e999" is out of range`}},
		{"huge number capped", `{"schema":"s","items":[],"seed":` + strings.Repeat("9", 1000) + `}`, []string{`"99999`, `9999"... is out of range (a 64-bit integer)`}},
		{"null for string", `{"schema":null,"items":[]}`, []string{"schema: null where a string belongs"}},
		{"null for struct", `{"schema":"s","items":[null]}`, []string{"items[0]: null where an object belongs"}},
		{"bool for string", `{"schema":true,"items":[]}`, []string{"schema: true or false where a string belongs"}},
		{"object for array", `{"schema":"s","items":{}}`, []string{"items: an object where an array belongs"}},
		{"bad time", `{"schema":"s","items":[],"when":"yesterday"}`, []string{`when: "\"yesterday\"" is not a time (RFC 3339)`}},
		{"number for time", `{"schema":"s","items":[],"when":5}`, []string{"when: \"5\" is not a time"}},
		{"short fixed array", `{"schema":"s","items":[],"pair":[1]}`, []string{"pair: 1 elements where 2 belong"}},
		{"several", "{\"schema\":1,\n\"items\":[{\"name\":2}],\n\"x\":3}", []string{"x.json:1:11: schema: a number where a string belongs", "x.json:2:18: items[0].name", "x.json:3:1: x: unknown field"}},
		{"syntax inside", `{"schema":"s","items":[{"name":"a",}]}`, []string{"x.json:1:36: items[0]: not valid JSON: invalid character '}'"}},
		{"bad literal", `{"schema":"s","items":[],"seed":tru}`, []string{"x.json:1:36: seed: not valid JSON: invalid character '}' in literal true"}},
		{"bad escape", "{\"items\":[],\n\"schema\":\"a\\qb\"}", []string{"x.json:2:13: schema: not valid JSON: invalid character 'q' in string escape code"}},
		{"double comma", `{"schema":"s","items":[1,,2]}`, []string{"x.json:1:24: items[0]: a number where an object belongs", "x.json:1:26: items[1]: not valid JSON: invalid character ','"}},
		{"missing colon", `{"schema" "s","items":[]}`, []string{"x.json:1:11: schema: not valid JSON: invalid character '\"' after object key"}},
		{"syntax in skipped value", `{"schema":"s","items":[],"x":[1,}`, []string{"x: unknown field", "not valid JSON"}},
		{"deep any", `{"schema":"s","items":[],"params":{"a":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}}`, []string{"nested more than 100 deep"}},
		{"deep skipped", `{"schema":"s","items":[],"x":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`, []string{"x: unknown field", "exceeded max depth"}},
		{"deep unclosed", strings.Repeat("[", 1<<20), []string{"an array where an object belongs"}},
		{"utf8 column", "{\"schema\":\"é€\", \"itemz\":[]}", []string{"x.json:1:17: itemz: unknown field"}},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d doc

			err := Decode("x.json", []byte(tt.in), &d, docOptions)

			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}

				return
			}

			if err == nil {
				t.Fatalf("Decode succeeded, want %q", tt.want)
			}

			var e *Error
			if !errors.As(err, &e) || e.File != "x.json" {
				t.Errorf("error %v is not an *Error naming the file", err)
			}

			msg := err.Error()
			rest := msg

			for _, w := range tt.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("error:\n%s\nlacks (in order) %q", msg, w)
				}

				rest = rest[i+len(w):]
			}

			if strings.ContainsAny(msg, "\x1b\x00\r") {
				t.Errorf("error holds control characters: %q", msg)
			}
		})
	}
}

func TestDecodeValues(t *testing.T) {
	var d doc

	in := `{"schema":"s","seed":7,"name":"outer","items":[{"name":"a","id":18446744073709551615}],"params":{"n":2.5,"l":[true]}}`
	if err := Decode("x.json", []byte(in), &d, docOptions); err != nil {
		t.Fatal(err)
	}

	if d.Seed != 7 || d.Name != "outer" || d.Embedded.Name != "" || d.Items[0].ID != 1<<64-1 || d.Params["n"] != 2.5 {
		t.Errorf("decoded %+v", d)
	}

	if err := Decode("x.json", []byte(in), d, docOptions); err == nil {
		t.Error("Decode into a non-pointer succeeded")
	}
}

func TestTooManyErrors(t *testing.T) {
	var b strings.Builder

	b.WriteString(`{"schema":"s","items":[`)

	for i := range 100 {
		if i > 0 {
			b.WriteString(",")
		}

		b.WriteString(`{"name":1}`)
	}

	b.WriteString("]}")

	var d doc

	err := Decode("x.json", []byte(b.String()), &d, docOptions)

	var es Errors
	if !errors.As(err, &es) || len(es) != MaxErrors {
		t.Fatalf("want %d errors, got %v", MaxErrors, err)
	}
}

func TestLocate(t *testing.T) {
	data := []byte("{\n  \"a\": {\"b\": [10, 20, {\"c\": 1}]},\n  \"we ird\": [1]\n}\n")

	tests := []struct {
		path      string
		line, col int
	}{
		{"", 1, 1},
		{"a", 2, 8},
		{"a.b", 2, 14},
		{"a.b[1]", 2, 19},
		{"a.b[2].c", 2, 29},
		{"a.b[2].missing", 2, 23},
		{"a.b[9]", 2, 14},
		{"nope.deeper", 1, 1},
		{Key("", "we ird"), 3, 13},
		{Index(Key("", "we ird"), 0), 3, 14},
	}

	for _, tt := range tests {
		errs := []*Error{{Path: tt.path, Msg: "m"}}
		if err := Locate("f.json", data, errs); err == nil {
			t.Fatal("Locate returned nil for a problem")
		}

		if e := errs[0]; e.File != "f.json" || e.Line != tt.line || e.Col != tt.col {
			t.Errorf("%q: at %s:%d:%d, want %d:%d", tt.path, e.File, e.Line, e.Col, tt.line, tt.col)
		}
	}

	if err := Locate("f.json", data, nil); err != nil {
		t.Errorf("Locate of nothing: %v", err)
	}
}

func TestQuoteAndPaths(t *testing.T) {
	if got := Quote("a\x1b[31m\u202e"); got != `"a\x1b[31m\u202e"` {
		t.Errorf("Quote = %s", got)
	}

	if got := Quote(strings.Repeat("é", 40)); !strings.HasSuffix(got, `é"...`) || len(got) > 80 {
		t.Errorf("Quote of a long string = %s", got)
	}

	for _, tt := range []struct{ got, want string }{
		{Key("", "a"), "a"},
		{Key("a", "b-c"), "a.b-c"},
		{Key("a", "1x"), `a["1x"]`},
		{Key("a", ""), `a[""]`},
		{Index(Key("a", "b"), 3), "a.b[3]"},
	} {
		if tt.got != tt.want {
			t.Errorf("path %q, want %q", tt.got, tt.want)
		}
	}

	e := &Error{File: "f", Path: "p", Line: 2, Col: 3, Msg: "m"}
	if e.Error() != "f:2:3: p: m" {
		t.Errorf("Error() = %q", e.Error())
	}

	e = &Error{File: "f", Msg: "m"}
	if e.Error() != "f: m" {
		t.Errorf("Error() = %q", e.Error())
	}
}
