package result

import (
	"regexp"
	"strings"
	"sync"
)

// Redacted replaces secrets in reports and output.
const Redacted = "[redacted]"

var (
	pemBlock = regexp.MustCompile(`-----BEGIN [A-Z0-9 ]+-----[\s\S]*?-----END [A-Z0-9 ]+-----`)
	// Keys and certificates inside Talos configs and talosconfigs are long
	// base64 runs; no log line or error talchaos reports needs one.
	longBase64 = regexp.MustCompile(`[A-Za-z0-9+/]{80,}={0,2}`)
)

// Scrubber removes key material and known secrets from text.
type Scrubber struct {
	mu    sync.Mutex
	known []string
}

// Add registers secrets (tokens, keys) to remove wherever they appear.
func (s *Scrubber) Add(secrets ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()

	for _, v := range secrets {
		if len(v) >= 8 {
			s.known = append(s.known, v)
		}
	}
}

// Scrub returns text without PEM blocks, long base64 runs or known secrets.
func (s *Scrubber) Scrub(text string) string {
	if s != nil {
		s.mu.Lock()
		for _, k := range s.known {
			text = strings.ReplaceAll(text, k, Redacted)
		}
		s.mu.Unlock()
	}

	text = pemBlock.ReplaceAllString(text, Redacted)

	return longBase64.ReplaceAllString(text, Redacted)
}

// ScrubResult scrubs every free-text field of a result in place.
func (s *Scrubber) ScrubResult(r *Result) {
	r.Error = s.Scrub(r.Error)
	r.Replay = s.Scrub(r.Replay)

	for i := range r.Events {
		r.Events[i].Msg = s.Scrub(r.Events[i].Msg)
	}

	for i := range r.Diagnoses {
		r.Diagnoses[i].Message = s.Scrub(r.Diagnoses[i].Message)
		r.Diagnoses[i].Evidence = s.Scrub(r.Diagnoses[i].Evidence)
	}

	for i := range r.Faults {
		r.Faults[i].Error = s.Scrub(r.Faults[i].Error)
	}

	for i := range r.Checks {
		r.Checks[i].Actual = s.Scrub(r.Checks[i].Actual)
	}

	for i := range r.Outcome.Nodes {
		r.Outcome.Nodes[i].APIError = s.Scrub(r.Outcome.Nodes[i].APIError)
		r.Outcome.Nodes[i].EtcdMessage = s.Scrub(r.Outcome.Nodes[i].EtcdMessage)
	}
}
