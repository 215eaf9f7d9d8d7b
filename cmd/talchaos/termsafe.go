package main

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// termSafe returns a writer that shows control characters as escapes (\x1b,
// \u009b) instead of passing them to the terminal: what a report, a ledger or
// a node's answer holds is data, and an escape sequence in it must not move
// the cursor, retitle the window or hide a line. Newlines and tabs pass.
func termSafe(w io.Writer) io.Writer { return &termSafeWriter{w: w} }

type termSafeWriter struct{ w io.Writer }

func (t *termSafeWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(t.w, termSafeString(string(p))); err != nil {
		return 0, err
	}

	return len(p), nil
}

// termSafeString escapes the control characters of s but newlines and tabs,
// and every byte that is not UTF-8. DEL and the others are written \u007f,
// which keeps `doctor --json`'s output JSON (encoding/json escapes the
// C0 controls and replaces bytes that are not UTF-8 itself).
func termSafeString(s string) string {
	clean := true

	for _, r := range s {
		if r == utf8.RuneError || isControl(r) {
			clean = false

			break
		}
	}

	if clean {
		return s
	}

	var b strings.Builder

	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])

		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case isControl(r) && r < 0x20:
			fmt.Fprintf(&b, `\x%02x`, r)
		case isControl(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}

		i += n
	}

	return b.String()
}

func isControl(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	case r == 0x2028 || r == 0x2029 || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069):
		// Line separators and bidirectional overrides: they reorder or
		// split what a person reads.
		return true
	}

	return false
}
