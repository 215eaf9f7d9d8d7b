package sim

import (
	"strings"
	"testing"
)

// lastLog keeps what Talos's lastlog.Writer keeps: the limit's edges, and,
// as runner/internal/lastlog/lastlog_test.go at v1.12.6 checks, the same
// tail whatever the size of the writes.
func TestLastLog(t *testing.T) {
	long := strings.Repeat("x", 600)

	for _, tc := range []struct {
		name   string
		writes []string
		want   string
	}{
		{"empty", nil, ""},
		{"one line", []string{"hello\n"}, "hello"},
		{"lines in pieces", []string{"hel", "lo\nwor", "ld\n"}, "hello\nworld"},
		{"old lines dropped whole", []string{strings.Repeat("a", 300) + "\n", strings.Repeat("b", 300) + "\n"}, strings.Repeat("b", 300)},
		{"one write over the limit, no newline", []string{long}, strings.Repeat("x", 512)},
		{"one write over the limit, lines", []string{long + "\nlast\n"}, "last"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w lastLog

			for _, p := range tc.writes {
				if _, err := w.Write([]byte(p)); err != nil {
					t.Fatal(err)
				}
			}

			if got := w.String(); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestLastLogChunked(t *testing.T) {
	var log strings.Builder
	for i := range 40 {
		log.WriteString(strings.Repeat(string(rune('a'+i%26)), 10+i*3) + "\n")
	}

	data := []byte(log.String())

	var want string

	for _, step := range []int{1, 7, 13, 29, 64, 128, 256, 512, 1024} {
		var w lastLog

		for i := 0; i < len(data); i += step {
			if _, err := w.Write(data[i:min(i+step, len(data))]); err != nil {
				t.Fatal(err)
			}
		}

		got := w.String()
		if len(got) > lastLogLimit || !strings.HasSuffix(log.String(), got+"\n") {
			t.Fatalf("step %d: %q is not a tail of at most %d bytes", step, got, lastLogLimit)
		}

		if want == "" {
			want = got
		} else if got != want {
			t.Errorf("step %d: %q, want %q", step, got, want)
		}
	}
}
