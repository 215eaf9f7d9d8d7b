package result

import (
	"cmp"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Redacted replaces secrets in reports and output.
const Redacted = "[redacted]"

// minSecret is the shortest value Add registers: anything shorter would
// redact ordinary words. Talos's shortest secrets (bootstrap and trustd
// tokens, 23 characters; their 16-character secret part) are well above it.
const minSecret = 8

// minBase64Run is the shortest base64 run Scrub takes for key material.
const minBase64Run = 80

var (
	pemBlock = regexp.MustCompile(`-----BEGIN [A-Z0-9 ]+-----[\s\S]*?-----END [A-Z0-9 ]+-----`)
	// Keys and certificates inside Talos configs and talosconfigs are long
	// base64 runs; no log line or error talchaos reports needs one.
	longBase64 = regexp.MustCompile(`[A-Za-z0-9+/]{` + strconv.Itoa(minBase64Run) + `,}={0,2}`)
	// tokenShape is a Talos bootstrap or trustd token: id.secret.
	tokenShape = regexp.MustCompile(`^[a-z0-9]{6}\.([a-z0-9]{16})$`)
)

// Scrubber removes key material and known secrets from text. It is the one
// place talchaos redacts: every text it prints or stores passes through one.
// The zero value is ready to use; a nil *Scrubber removes only what looks like
// key material (PEM blocks, long base64 runs).
type Scrubber struct {
	mu       sync.Mutex
	known    map[string]struct{}
	replacer *strings.Replacer // of known, longest first; nil when stale
}

// Add registers secrets (tokens, keys, passwords) to remove wherever they
// appear, in every form they are printed in: a PEM key also as its base64
// encoding (how configs and talosconfigs carry it) and line by line (a command
// printing it decoded gives one event per line); a base64-encoded PEM also
// decoded; a token also by its secret part. Values shorter than 8 characters
// are ignored.
func (s *Scrubber) Add(secrets ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()

	if s.known == nil {
		s.known = map[string]struct{}{}
	}

	for _, v := range secrets {
		for _, form := range forms(v) {
			if len(form) >= minSecret {
				if _, dup := s.known[form]; !dup {
					s.known[form] = struct{}{}
					s.replacer = nil
				}
			}
		}
	}
}

// forms lists the ways a secret can show up in text.
func forms(v string) []string {
	out := []string{v}

	if m := tokenShape.FindStringSubmatch(v); m != nil {
		out = append(out, m[1])
	}

	if strings.Contains(v, "-----BEGIN ") {
		return append(out, pemForms(v)...)
	}

	if decoded, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v)); err == nil && strings.Contains(string(decoded), "-----BEGIN ") {
		out = append(out, pemForms(string(decoded))...)
	}

	return out
}

// pemForms is a PEM text without surrounding space, its base64 encoding and its
// base64 body lines.
func pemForms(pem string) []string {
	out := []string{strings.TrimSpace(pem), base64.StdEncoding.EncodeToString([]byte(pem))}

	for line := range strings.Lines(pem) {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "-----") && !strings.Contains(line, ":") {
			out = append(out, line)
		}
	}

	return out
}

// Scrub returns text without known secrets, credentials in URLs and HTTP
// headers (a URL's password, secret query parameters: scrub_url.go), PEM
// blocks or long base64 runs.
func (s *Scrubber) Scrub(text string) string {
	if s != nil {
		if r := s.knownReplacer(); r != nil {
			text = r.Replace(text)
		}
	}

	text = scrubURLs(text)

	// Cheap tests first: nearly no text holds a PEM block or a long base64 run.
	if strings.Contains(text, "-----BEGIN ") {
		text = pemBlock.ReplaceAllString(text, Redacted)
	}

	if hasBase64Run(text) {
		text = longBase64.ReplaceAllString(text, Redacted)
	}

	return text
}

// hasBase64Run reports whether text holds minBase64Run base64 characters in a row.
func hasBase64Run(text string) bool {
	run := 0

	for i := range len(text) {
		switch c := text[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '+', c == '/':
			run++
			if run >= minBase64Run {
				return true
			}
		default:
			run = 0
		}
	}

	return false
}

// ScrubKeyMaterial removes what looks like key material (PEM blocks, long
// base64 runs) and credentials in URLs and HTTP headers from text where no
// secret is known, as a last line of defence.
func ScrubKeyMaterial(text string) string { return (*Scrubber)(nil).Scrub(text) }

// knownReplacer replaces every known secret, trying longer ones first so that
// a secret containing another one goes whole.
func (s *Scrubber) knownReplacer() *strings.Replacer {
	s.mu.Lock()
	defer s.mu.Unlock()

	if s.replacer == nil && len(s.known) > 0 {
		keys := make([]string, 0, len(s.known))
		for k := range s.known {
			keys = append(keys, k)
		}

		slices.SortFunc(keys, func(a, b string) int {
			return cmp.Or(cmp.Compare(len(b), len(a)), strings.Compare(a, b))
		})

		pairs := make([]string, 0, 2*len(keys))
		for _, k := range keys {
			pairs = append(pairs, k, Redacted)
		}

		s.replacer = strings.NewReplacer(pairs...)
	}

	return s.replacer
}

// ScrubError returns err with its message scrubbed; errors.Is and errors.As
// still see the original chain. A nil or clean err is returned as it is.
func (s *Scrubber) ScrubError(err error) error {
	if err == nil {
		return nil
	}

	msg := err.Error()
	if clean := s.Scrub(msg); clean != msg {
		return &scrubbedError{msg: clean, err: err}
	}

	return err
}

type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

// ScrubResult scrubs every string of a result in place: free text (errors,
// event messages, evidence) and, so that no field added later is forgotten,
// every other string too (map keys and strings held in interfaces included).
func (s *Scrubber) ScrubResult(r *Result) {
	if r != nil {
		*r = *s.ScrubbedResult(r)
	}
}

// ScrubbedResult is Scrubbed for a result, whose scenario copy keeps a true
// sum: when scrubbing changed the copy (a URL with a password in an exec
// command), its SHA256 becomes that of what the report holds, so that the
// report still checks out (and replays what it holds). A sum that was not the
// copy's to begin with is left as it is. r is not modified.
func (s *Scrubber) ScrubbedResult(r *Result) *Result {
	out := Scrubbed(s, r)

	if r != nil && r.Source != nil && out.Source.Content != r.Source.Content && r.Source.SHA256 == sha256Hex(r.Source.Content) {
		out.Source.SHA256 = sha256Hex(out.Source.Content)
	}

	return out
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))

	return hex.EncodeToString(sum[:])
}

// Scrubbed returns a deep copy of v with every string scrubbed: every string
// reachable through its exported fields, elements, map keys and values, and
// pointers and interfaces. v itself is not modified. Unexported fields are
// copied as they are. v must hold no pointer cycle.
func Scrubbed[T any](s *Scrubber, v T) T {
	src := reflect.ValueOf(&v).Elem()

	out, ok := s.scrubCopy(src).Interface().(T)
	if !ok {
		return v
	}

	return out
}

// scrubCopy returns a copy of v, of v's type, with every string scrubbed.
func (s *Scrubber) scrubCopy(v reflect.Value) reflect.Value {
	t := v.Type()
	out := reflect.New(t).Elem()

	switch v.Kind() {
	case reflect.String:
		out.SetString(s.Scrub(v.String()))
	case reflect.Struct:
		out.Set(v)

		for i := range v.NumField() {
			if t.Field(i).IsExported() {
				out.Field(i).Set(s.scrubCopy(v.Field(i)))
			}
		}
	case reflect.Array:
		for i := range v.Len() {
			out.Index(i).Set(s.scrubCopy(v.Index(i)))
		}
	case reflect.Slice:
		if !v.IsNil() {
			out.Set(reflect.MakeSlice(t, v.Len(), v.Len()))

			for i := range v.Len() {
				out.Index(i).Set(s.scrubCopy(v.Index(i)))
			}
		}
	case reflect.Map:
		if !v.IsNil() {
			out.Set(reflect.MakeMapWithSize(t, v.Len()))

			for it := v.MapRange(); it.Next(); {
				out.SetMapIndex(s.scrubCopy(it.Key()), s.scrubCopy(it.Value()))
			}
		}
	case reflect.Pointer:
		if !v.IsNil() {
			p := reflect.New(t.Elem())
			p.Elem().Set(s.scrubCopy(v.Elem()))
			out.Set(p)
		}
	case reflect.Interface:
		if !v.IsNil() {
			out.Set(s.scrubCopy(v.Elem()))
		}
	default:
		out.Set(v)
	}

	return out
}
