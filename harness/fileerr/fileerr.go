// Package fileerr is what the strict readers of files (harness/strictyaml
// for scenarios and inventories, harness/strictjson for reports and ledgers)
// share about their errors: every problem of one file, one per line.
package fileerr

import "strings"

// List is every problem found in one file, in file order, printed one per
// line. errors.As(err, &e) with e of the element type yields the first.
type List[E error] []E

func (es List[E]) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}

	return strings.Join(lines, "\n")
}

// Unwrap lets errors.As and errors.Is see each problem, the first one first.
func (es List[E]) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}

	return out
}

// Collect returns nil for no problem, the single problem as is, or the List
// of them all, in the order given.
func Collect[E error](errs []E) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}

	return List[E](errs)
}
