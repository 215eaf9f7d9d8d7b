package strictjson

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/talchaos/talchaos/harness/fileerr"
)

// MaxErrors is how many problems one file reports at most: a file that is
// wrong everywhere (another tool's JSON) stops being read early.
const MaxErrors = 20

// Error is one problem in a JSON file. It prints as "FILE:LINE:COL: PATH: MSG",
// the form editors and CI logs turn into links; LINE:COL is left out when the
// position is not known (the file could not be read, or the problem concerns
// no value written in it) and PATH when the problem is the whole document's.
type Error struct {
	File string
	// Path is the JSON path of the value: "history.entries[12].observed",
	// "scenarios[0].passed"; "" for the document itself.
	Path string
	// Offset is the byte offset of the value (or of its key) in the file;
	// Line and Col (1-based, Col in characters) say the same for a person.
	// Line is 0 when the position is not known.
	Offset    int64
	Line, Col int
	Msg       string
	// Err is the error underneath, if any (the file could not be read).
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder

	b.WriteString(e.File)

	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", e.Line, e.Col)
	}

	if e.Path != "" {
		b.WriteString(": ")
		b.WriteString(e.Path)
	}

	b.WriteString(": ")
	b.WriteString(e.Msg)

	return b.String()
}

// Unwrap is the error underneath.
func (e *Error) Unwrap() error { return e.Err }

// Errors is every problem found in one file, in file order, printed one per
// line. errors.As(err, &e) with e an *Error yields the first.
type Errors = fileerr.List[*Error]

// Collect returns nil for no problem, the single error as is, or all of them
// (at most MaxErrors).
func Collect(errs []*Error) error {
	return fileerr.Collect(errs[:min(len(errs), MaxErrors)])
}

// Problems collects the problems a validation finds after decoding, each at
// a JSON path; Locate then places them in the file. It keeps MaxErrors.
type Problems struct {
	errs []*Error
}

// Addf records a problem of the value at path.
func (p *Problems) Addf(path, format string, args ...any) {
	if len(p.errs) < MaxErrors {
		p.errs = append(p.errs, &Error{Path: path, Msg: fmt.Sprintf(format, args...)})
	}
}

// Names checks that the names of a list's items are given and unique
// ("node \"cp1\" is listed twice (also nodes[0])"): what names the items,
// list is the list's name in messages, twice how a repeat is said ("listed
// twice", "scheduled twice").
type Names struct {
	What, List, Twice string

	at map[string]int
}

// Check records in p, at path, item i's name when it is empty or was given
// before, and reports whether it is the name's first use.
func (n *Names) Check(p *Problems, path string, i int, name string) bool {
	if n.at == nil {
		n.at = map[string]int{}
	}

	j, dup := n.at[name]

	switch {
	case name == "":
		p.Addf(path, "is empty")
	case dup:
		p.Addf(path, "%s %s is %s (also %s)", n.What, Quote(name), n.Twice, Index(n.List, j))
	default:
		n.at[name] = i

		return true
	}

	return false
}

// Full reports whether no more problems are kept: a validator may stop.
func (p *Problems) Full() bool { return len(p.errs) >= MaxErrors }

// Errs are the problems recorded.
func (p *Problems) Errs() []*Error { return p.errs }

// maxQuoted bounds what a message echoes of a file's text.
const maxQuoted = 64

// Quote quotes text from a file for a message: at most 64 bytes of it (cut at
// a character boundary, "..." marking the cut), in Go syntax, so that control
// characters, invalid UTF-8 and invisible formatting characters show as
// escapes instead of reaching the terminal.
func Quote(s string) string {
	if len(s) <= maxQuoted {
		return strconv.Quote(s)
	}

	cut := maxQuoted
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}

	return strconv.Quote(s[:cut]) + "..."
}

// Key is the path of a key of the object at path: "history" then "history.nodes".
// A key that is not a plain word is written as ["..."], quoted and capped.
func Key(path, key string) string {
	if !plain(key) {
		return path + "[" + Quote(key) + "]"
	}

	if path == "" {
		return key
	}

	return path + "." + key
}

// Index is the path of an element of the array at path: "entries[12]".
func Index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

func plain(key string) bool {
	if key == "" || len(key) > maxQuoted {
		return false
	}

	for i, c := range key {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
		case i > 0 && (c >= '0' && c <= '9' || c == '-'):
		default:
			return false
		}
	}

	return true
}
