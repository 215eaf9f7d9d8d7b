package main

import "testing"

func TestTermSafeString(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain text\n\twith tabs", "plain text\n\twith tabs"},
		{"ünïcode ✓", "ünïcode ✓"},
		{"\x1b]0;pwned\x07title", `\x1b]0;pwned\x07title`},
		{"\x1b[2J\x1b[Hclear", `\x1b[2J\x1b[Hclear`},
		{"carriage\rreturn", `carriage\x0dreturn`},
		{"c1 \u009b31m csi", `c1 \u009b31m csi`},
		{"raw \x9b byte", `raw \x9b byte`},
		{"del\x7f", `del\u007f`},
		{"bidi \u202eevil", `bidi \u202eevil`},
		{"nul\x00", `nul\x00`},
	} {
		if got := termSafeString(tc.in); got != tc.want {
			t.Errorf("termSafeString(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
