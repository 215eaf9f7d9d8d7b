package scenario

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Load reads the scenario file at path and parses it.
func Load(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read scenario: %w", err)
	}

	return Parse(path, data)
}

// Parse decodes a scenario strictly, applies defaults and validates it. file is only
// used in errors and stored in Scenario.File. The error is an *Error when there is one
// problem and Errors (in line order) when there are several.
func Parse(file string, data []byte) (_ *Scenario, err error) {
	// Parsing must never take the harness down, whatever the file: a panic in the YAML
	// library becomes an error at the top of the file.
	defer func() {
		if r := recover(); r != nil {
			err = &Error{File: file, Line: 1, Msg: fmt.Sprintf("internal error parsing scenario: %v", r)}
		}
	}()

	root, perr := readRoot(file, data)
	if perr != nil {
		return nil, perr
	}

	d := &decoder{file: file, lines: map[string]int{"": root.Line}, expanding: map[*yaml.Node]bool{}}

	var s Scenario

	d.decode(root, reflect.ValueOf(&s).Elem(), "")

	// Validating a half-decoded scenario would add noise (a bad controlPlanes would
	// also fail every node-name check), so decoding errors are reported alone.
	if len(d.errs) > 0 {
		return nil, collect(d.errs)
	}

	s.File = file
	s.lines = d.lines

	for i := range s.Faults {
		s.Faults[i].Index = i
		s.Faults[i].Line = d.lines[fmt.Sprintf("faults[%d]", i)]
	}

	s.applyDefaults()

	if errs := s.validate(); len(errs) > 0 {
		return nil, collect(errs)
	}

	return &s, nil
}

// readRoot parses the YAML and returns the top-level mapping of its only document.
func readRoot(file string, data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))

	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &Error{File: file, Line: 1, Msg: emptyMsg}
		}

		return nil, syntaxError(file, err)
	}

	// A second document would be silently ignored by a plain decode; one file is one
	// scenario.
	var next yaml.Node
	if err := dec.Decode(&next); err == nil {
		return nil, &Error{File: file, Line: max(next.Line, 1), Msg: "more than one YAML document: one scenario per file"}
	} else if !errors.Is(err, io.EOF) {
		return nil, syntaxError(file, err)
	}

	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}

	// "---" alone is a document holding an empty null: as empty as no document at all.
	if isNull(root) && root.Value == "" {
		return nil, &Error{File: file, Line: 1, Msg: emptyMsg}
	}

	if root.Kind != yaml.MappingNode {
		return nil, &Error{File: file, Line: max(root.Line, 1), Msg: "a scenario must be a mapping, got " + describe(root)}
	}

	return root, nil
}

const emptyMsg = "empty scenario: expected a mapping with apiVersion, kind, name and cluster"

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// syntaxError turns a yaml.v3 parse error ("yaml: line 3: did not find expected key")
// into an *Error with its line.
func syntaxError(file string, err error) *Error {
	msg := err.Error()
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		if l, convErr := strconv.Atoi(m[1]); convErr == nil {
			return &Error{File: file, Line: l, Msg: "invalid YAML: " + m[2]}
		}
	}

	return &Error{File: file, Line: 1, Msg: "invalid YAML: " + strings.TrimPrefix(msg, "yaml: ")}
}

// collect returns the single error as is, or all of them in line order.
func collect(errs []*Error) error {
	if len(errs) == 1 {
		return errs[0]
	}

	sort.SliceStable(errs, func(i, j int) bool { return errs[i].Line < errs[j].Line })

	return Errors(errs)
}
