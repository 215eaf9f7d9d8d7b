package strictyaml

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/talchaos/talchaos/harness/fileerr"
)

// Error is one problem in a file. It prints as "FILE:LINE: FIELD: MSG", the form
// editors and CI logs turn into links; FIELD is omitted only for problems that
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

	return fmt.Sprintf("%s:%d: %s: %s", e.File, e.Line, printable(e.Field), e.Msg)
}

// printable quotes a field path holding a key that does not print on one line
// (keys go into paths as they are written), so that every error stays one
// FILE:LINE: FIELD: MSG line.
func printable(field string) string {
	if strings.ContainsFunc(field, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return strconv.Quote(field)
	}

	return field
}

// Errors is every problem found in one file, in line order, printed one per line.
// errors.As(err, &e) with e an *Error yields the first.
type Errors = fileerr.List[*Error]

// Collect returns nil for no problem, the single error as is, or all of them in
// line order.
func Collect(errs []*Error) error {
	errs = append([]*Error(nil), errs...)
	sort.SliceStable(errs, func(i, j int) bool { return errs[i].Line < errs[j].Line })

	return fileerr.Collect(errs)
}

// Lines maps field paths ("faults[2].when.state") to their line in a file, so
// problems found after decoding still point at the right line.
type Lines map[string]int

// Line is the line of field, or of its nearest ancestor recorded in the file, or 1.
func (l Lines) Line(field string) int {
	for {
		if n, ok := l[field]; ok && n > 0 {
			return n
		}

		if field == "" {
			return 1
		}

		field = ParentPath(field)
	}
}

// Has reports whether field was written in the file.
func (l Lines) Has(field string) bool {
	_, ok := l[field]

	return ok
}

// ParentPath strips the last ".key" or "[i]" from a field path.
func ParentPath(p string) string {
	i := strings.LastIndexAny(p, ".[")
	if i < 0 {
		return ""
	}

	return p[:i]
}

// Join appends a key to a field path.
func Join(path, key string) string {
	if path == "" {
		return key
	}

	return path + "." + key
}
