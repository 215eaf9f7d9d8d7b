package result

import (
	"strings"
	"testing"
)

func TestScrub(t *testing.T) {
	key := strings.Repeat("QUJDRA", 30) // a long base64 run, like a key in a config
	pem := "-----BEGIN ED25519 PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIG0o\n-----END ED25519 PRIVATE KEY-----"

	s := &Scrubber{}
	s.Add("3f2a9c1e-token-secret")

	for _, tc := range []struct{ in, want string }{
		{"apply failed: rpc error: code = Unavailable", "apply failed: rpc error: code = Unavailable"},
		{"key: " + key + " end", "key: [redacted] end"},
		{"got " + pem + " here", "got [redacted] here"},
		{"auth PVEAPIToken=root@pam!t=3f2a9c1e-token-secret failed", "auth PVEAPIToken=root@pam!t=[redacted] failed"},
		{"member 1a2b3c4d5e6f7a8b added", "member 1a2b3c4d5e6f7a8b added"},
	} {
		if got := s.Scrub(tc.in); got != tc.want {
			t.Errorf("Scrub(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
