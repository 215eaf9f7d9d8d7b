package scenario

import (
	"fmt"

	"github.com/talchaos/talchaos/harness/strictyaml"
)

// Error is one problem in a scenario file; it prints as "FILE:LINE: FIELD: MSG".
type Error = strictyaml.Error

// Errors is every problem found in one file, in line order, printed one per line.
// Parse returns it only when there is more than one problem; errors.As(err, &e) with
// e an *Error yields the first.
type Errors = strictyaml.Errors

// Errorf builds an *Error for a field of the scenario (a YAML key path such as
// "cluster.workers"), pointing at the line of that field, or of its nearest enclosing
// field present in the file when it is absent. It is for packages that check parts of a
// parsed scenario the parser leaves to them.
func (s *Scenario) Errorf(field, format string, args ...any) *Error {
	e := &Error{Line: 1, Field: field, Msg: fmt.Sprintf(format, args...)}
	if s != nil {
		e.File = s.File
		e.Line = s.lines.Line(field)
	}

	return e
}

// Has reports whether a field was written in the scenario file.
func (s *Scenario) Has(field string) bool { return s.lines.Has(field) }

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

// Collect returns nil for no problem, the single error as is, or all of them
// in line order.
func Collect(errs []*Error) error { return strictyaml.Collect(errs) }
