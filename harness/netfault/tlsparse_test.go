package netfault

import (
	"bytes"
	"crypto/tls"
	"testing"
)

// feedInChunks gives the parser the stream as it would grow chunk by chunk and
// returns the first verdict, with how many bytes it took.
func feedInChunks(stream []byte, chunk int) (cn string, done bool, used int) {
	for end := min(chunk, len(stream)); ; end = min(end+chunk, len(stream)) {
		if cn, done = parseClientCertCN(stream[:end]); done || end == len(stream) {
			return cn, done, end
		}
	}
}

func TestParseClientCertCNRealHandshakes(t *testing.T) {
	p := newTestPKI(t)

	for _, tc := range []struct {
		name     string
		clientCN string
		auth     tls.ClientAuthType
		version  uint16
		want     string
	}{
		{"TLS 1.2 client certificate cp1", "cp1", tls.RequireAndVerifyClientCert, tls.VersionTLS12, "cp1"},
		{"TLS 1.2 client certificate cp2", "cp2", tls.RequireAndVerifyClientCert, tls.VersionTLS12, "cp2"},
		{"TLS 1.2 requested but none: empty Certificate", "", tls.VerifyClientCertIfGiven, tls.VersionTLS12, ""},
		{"TLS 1.2 not requested: no Certificate message", "cp2", tls.NoClientCert, tls.VersionTLS12, ""},
		{"TLS 1.3 encrypts the certificate", "cp2", tls.RequireAndVerifyClientCert, tls.VersionTLS13, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stream := captureClientBytes(t, p, tc.clientCN, tc.auth, tc.version)

			for _, chunk := range []int{1, 7, len(stream)} {
				cn, done, used := feedInChunks(stream, chunk)
				if !done || cn != tc.want {
					t.Fatalf("chunks of %d: cn %q done %v, want %q", chunk, cn, done, tc.want)
				}

				// The verdict comes from the handshake, never from the
				// application data after it.
				if used == len(stream) && chunk == 1 {
					t.Fatalf("chunks of 1: verdict only after all %d bytes", used)
				}

				// The gate's per-connection state reaches the same verdict.
				var st gateState
				for i := 0; i < len(stream); i += chunk {
					st.feed(stream[i:min(i+chunk, len(stream))])
				}

				if !st.known || st.sender != tc.want || st.buf != nil {
					t.Fatalf("gate state: known %v sender %q buffered %d", st.known, st.sender, len(st.buf))
				}
			}
		})
	}
}

func TestParseClientCertCNGarbage(t *testing.T) {
	p := newTestPKI(t)
	real := captureClientBytes(t, p, "cp1", tls.RequireAndVerifyClientCert, tls.VersionTLS12)

	// certMsg builds ClientHello + Certificate records around a raw
	// Certificate body.
	certMsg := func(body []byte) []byte {
		hs := []byte{1, 0, 0, 0} // empty ClientHello
		hs = append(hs, 11, 0, byte(len(body)>>8), byte(len(body)))
		hs = append(hs, body...)

		return append([]byte{22, 3, 3, byte(len(hs) >> 8), byte(len(hs))}, hs...)
	}

	for _, tc := range []struct {
		name string
		in   []byte
		done bool
	}{
		{"empty", nil, false},
		{"HTTP", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), true},
		{"etcd raft over plain TCP", []byte{0, 0, 0, 0, 0, 0, 0, 1}, true},
		{"SSLv2 hello", []byte{0x80, 0x2e, 0x01, 0x03, 0x01}, true},
		{"wrong major version", []byte{22, 2, 1}, true},
		{"record too long", []byte{22, 3, 3, 0xff, 0xff}, true},
		{"partial header", []byte{22, 3}, false},
		{"partial record", real[:20], false},
		{"first message not ClientHello", []byte{22, 3, 3, 0, 4, 2, 0, 0, 0}, true},
		{"handshake message too long", []byte{22, 3, 3, 0, 4, 1, 0xff, 0xff, 0xff}, true},
		{"alert first", []byte{21, 3, 3, 0, 2, 2, 40}, true},
		{"certificate list length lies", certMsg([]byte{0, 0, 9, 0, 0, 1, 0xaa}), true},
		{"certificate length lies", certMsg([]byte{0, 0, 4, 0, 0, 9, 0xaa}), true},
		{"certificate not DER", certMsg([]byte{0, 0, 4, 0, 0, 1, 0xaa}), true},
		{"truncated body", certMsg([]byte{0, 0}), true},
		{"real handshake, flipped length byte", flip(real, 3), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cn, done := parseClientCertCN(tc.in)
			if cn != "" || done != tc.done {
				t.Fatalf("got cn %q done %v, want \"\" done %v", cn, done, tc.done)
			}
		})
	}
}

func flip(b []byte, i int) []byte {
	b = bytes.Clone(b)
	b[i] ^= 0xff

	return b
}

// FuzzParseClientCertCN checks that the parser never panics and that a verdict,
// once reached, holds for every longer stream (the gate stops feeding then).
func FuzzParseClientCertCN(f *testing.F) {
	p := newTestPKI(f)
	f.Add(captureClientBytes(f, p, "cp2", tls.RequireAndVerifyClientCert, tls.VersionTLS12), uint16(100))
	f.Add(captureClientBytes(f, p, "cp2", tls.RequireAndVerifyClientCert, tls.VersionTLS13), uint16(7))
	f.Add([]byte{22, 3, 3, 0, 4, 1, 0, 0, 0, 22, 3, 3, 0, 10, 11, 0, 0, 6, 0, 0, 3, 0, 0, 0}, uint16(9))
	f.Add([]byte("GET / HTTP/1.1\r\n"), uint16(1))

	f.Fuzz(func(t *testing.T, data []byte, cut uint16) {
		full, fullDone := parseClientCertCN(data)

		k := int(cut) % (len(data) + 1)
		if prefix, done := parseClientCertCN(data[:k]); done && (!fullDone || prefix != full) {
			t.Fatalf("prefix of %d: %q, whole: %q done %v", k, prefix, full, fullDone)
		}
	})
}
