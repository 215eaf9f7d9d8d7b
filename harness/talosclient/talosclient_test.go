package talosclient

import (
	"context"
	"crypto/tls"
	"net"
	"testing"

	"github.com/siderolabs/crypto/x509"
)

// Answers tells a TLS server (whatever certificate it has, whatever it asks
// of the client) from a dead port and from a proxy that accepts and closes.
func TestAnswers(t *testing.T) {
	ca, err := x509.NewSelfSignedCertificateAuthority(x509.ECDSA(true))
	if err != nil {
		t.Fatal(err)
	}

	cert, err := tls.X509KeyPair(ca.CrtPEM, ca.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}

	serve := func(l net.Listener, handle func(net.Conn)) {
		t.Cleanup(func() { l.Close() }) //nolint:errcheck

		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}

				go handle(c)
			}
		}()
	}

	listen := func() net.Listener {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}

		return l
	}

	// Mutual TLS, as a configured node: the client without a certificate is
	// refused, but the server did present its certificate.
	mtls := listen()
	serve(tls.NewListener(mtls, &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAnyClientCert}), func(c net.Conn) {
		c.(*tls.Conn).Handshake() //nolint:errcheck
		c.Close()                 //nolint:errcheck
	})

	// A proxy whose backend is gone.
	closer := listen()
	serve(closer, func(c net.Conn) { c.Close() }) //nolint:errcheck

	dead := listen()
	deadAddr := dead.Addr().String()
	dead.Close() //nolint:errcheck

	ctx := context.Background()

	for addr, want := range map[string]bool{mtls.Addr().String(): true, closer.Addr().String(): false, deadAddr: false} {
		if got := Answers(ctx, addr); got != want {
			t.Errorf("Answers(%s) = %v, want %v", addr, got, want)
		}
	}
}
