package netfault

import (
	"crypto/x509"
	"encoding/binary"
)

// TLS wire constants (RFC 5246).
const (
	recordHeaderLen = 5
	recordHandshake = 22
	// A TLSCiphertext fragment is at most 2^14+2048 bytes; anything longer is
	// not TLS.
	maxRecordLen = 1<<14 + 2048

	handshakeHeaderLen   = 4
	handshakeClientHello = 1
	handshakeCertificate = 11

	// maxHandshakeBytes bounds what the gate buffers per connection while it
	// looks for the certificate; a peer certificate is a few hundred bytes.
	maxHandshakeBytes = 64 << 10
)

// parseClientCertCN reads the client-to-server bytes of a connection, from its
// first byte up to whatever has arrived so far, and looks for the TLS 1.2
// client Certificate message, which travels in plaintext.
//
// done is false while more bytes are needed. Once done, cn is the Subject CN of
// the first certificate, or "" when the sender cannot be known: not TLS, TLS 1.3
// (the certificate is encrypted), no client certificate, or garbage. The verdict
// for a prefix never changes when more bytes are appended, so callers may stop
// feeding once done.
func parseClientCertCN(buf []byte) (cn string, done bool) {
	var handshake []byte // payloads of the handshake records so far: messages may span records

	for first := true; len(buf) > 0; first = false {
		// Judge the header bytes as they come, so that non-TLS streams are
		// recognised from their first byte.
		if first && buf[0] != recordHandshake {
			return "", true
		}

		if len(buf) >= 2 && buf[1] != 3 { // major version of SSL 3.0 … TLS 1.3
			return "", true
		}

		if len(buf) < recordHeaderLen {
			return "", false
		}

		length := int(binary.BigEndian.Uint16(buf[3:5]))
		if length > maxRecordLen {
			return "", true
		}

		if buf[0] != recordHandshake {
			// ChangeCipherSpec, an alert or application data before any
			// Certificate message: from here on the client's records are
			// encrypted (TLS 1.3 sends its dummy ChangeCipherSpec right after
			// the ClientHello) or the handshake failed.
			return "", true
		}

		if len(buf) < recordHeaderLen+length {
			return "", false
		}

		handshake = append(handshake, buf[recordHeaderLen:recordHeaderLen+length]...)
		buf = buf[recordHeaderLen+length:]

		if cn, done := scanHandshake(handshake); done {
			return cn, true
		}
	}

	return "", false
}

// scanHandshake reads the client's first two handshake messages: ClientHello,
// then in TLS 1.2 either Certificate (the server asked for one) or
// ClientKeyExchange. Looking no further keeps a parse linear in its input.
func scanHandshake(msgs []byte) (cn string, done bool) {
	for _, want := range []byte{handshakeClientHello, handshakeCertificate} {
		if len(msgs) == 0 {
			return "", false
		}

		if msgs[0] != want {
			return "", true // not a client's first flight, or no certificate in it
		}

		if len(msgs) < handshakeHeaderLen {
			return "", false
		}

		length := int(msgs[1])<<16 | int(msgs[2])<<8 | int(msgs[3])
		if length > maxHandshakeBytes {
			return "", true
		}

		if len(msgs) < handshakeHeaderLen+length {
			return "", false
		}

		if want == handshakeCertificate {
			return firstCertCN(msgs[handshakeHeaderLen : handshakeHeaderLen+length]), true
		}

		msgs = msgs[handshakeHeaderLen+length:]
	}

	panic("unreachable")
}

// firstCertCN reads a TLS 1.2 Certificate body, certificate_list<0..2^24-1> of
// ASN.1Cert<1..2^24-1>, and returns the CN of the first (the client's own)
// certificate. An empty list is what a client without a certificate sends.
func firstCertCN(body []byte) string {
	if len(body) < 6 {
		return ""
	}

	list := int(body[0])<<16 | int(body[1])<<8 | int(body[2])
	if list != len(body)-3 {
		return ""
	}

	n := int(body[3])<<16 | int(body[4])<<8 | int(body[5])
	if n == 0 || 6+n > len(body) {
		return ""
	}

	cert, err := x509.ParseCertificate(body[6 : 6+n])
	if err != nil {
		return ""
	}

	return cert.Subject.CommonName
}
