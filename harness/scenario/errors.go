package scenario

import (
	"fmt"
	"strings"
)

// Error is one problem in a scenario file. It prints as "FILE:LINE: FIELD: MSG", the
// form editors and CI logs turn into links; FIELD is omitted only for problems that
// belong to no field (YAML syntax errors, an empty file).
type Error struct {
	File  string
	Line  int
	Field string // YAML key path: "cluster.controlPlanes", "faults[2].when.state"
	Msg   string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}

	return fmt.Sprintf("%s:%d: %s: %s", e.File, e.Line, e.Field, e.Msg)
}

// Errors is every problem found in one file, in line order, printed one per line.
// Parse returns it only when there is more than one problem; errors.As(err, &e) with
// e an *Error yields the first.
type Errors []*Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}

	return strings.Join(lines, "\n")
}

// Unwrap lets errors.As and errors.Is see each problem, the first one first.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}

	return out
}

// Errorf builds an *Error for a field of the scenario (a YAML key path such as
// "cluster.workers"), pointing at the line of that field, or of its nearest enclosing
// field present in the file when it is absent. It is for packages that check parts of a
// parsed scenario the parser leaves to them.
func (s *Scenario) Errorf(field, format string, args ...any) *Error {
	e := &Error{Line: 1, Field: field, Msg: fmt.Sprintf(format, args...)}
	if s != nil {
		e.File = s.File
		e.Line = s.line(field)
	}

	return e
}

// Errorf builds an *Error for a field of this fault ("latency" becomes
// "faults[3].latency"; "" names the fault itself), for the chaos package to report
// kind-specific problems in the same form as the parser.
func (f Fault) Errorf(s *Scenario, field, format string, args ...any) *Error {
	path := fmt.Sprintf("faults[%d]", f.Index)
	if field != "" {
		path += "." + field
	}

	e := s.Errorf(path, format, args...)
	// A scenario built in code has no line table; the fault's own line is the best guess.
	if (s == nil || s.lines == nil) && f.Line > 0 {
		e.Line = f.Line
	}

	return e
}

// line is the line of field, or of its nearest ancestor recorded in the file, or 1.
func (s *Scenario) line(field string) int {
	for {
		if l, ok := s.lines[field]; ok && l > 0 {
			return l
		}

		if field == "" {
			return 1
		}

		field = parentPath(field)
	}
}

// parentPath strips the last ".key" or "[i]" from a field path.
func parentPath(p string) string {
	i := strings.LastIndexAny(p, ".[")
	if i < 0 {
		return ""
	}

	return p[:i]
}
