package talosapi

import (
	"context"
	"io"
	"net"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/credentials"
)

// lingerFor bounds how long a refused connection is kept open for the client
// to read the TLS alert.
const lingerFor = time.Second

// lingeringCreds deliver a refused TLS handshake's alert to the client every
// time, as a real node's API does. crypto/tls writes the alert ("tls:
// certificate required" for a client without a certificate) and gRPC closes
// the connection at once; the client meanwhile has finished its side of the
// TLS 1.3 handshake and sent its HTTP/2 preface, which reaches a closed socket,
// and the reset that answers it destroys the alert before the client reads
// it (about a third of the tries: "write: broken pipe" instead). Keeping the
// connection open after the alert and reading what the client still sends
// until it hangs up lets the alert arrive first, directly and through the
// node's proxy.
type lingeringCreds struct {
	credentials.TransportCredentials
}

func (c lingeringCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	lc := &lingerConn{Conn: raw}
	lc.handshaking.Store(true)

	conn, info, err := c.TransportCredentials.ServerHandshake(lc)

	lc.handshaking.Store(false)

	return conn, info, err
}

func (c lingeringCreds) Clone() credentials.TransportCredentials {
	return lingeringCreds{c.TransportCredentials.Clone()}
}

// ClientHandshake is the wrapped credentials' (not used on a server).
func (c lingeringCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return c.TransportCredentials.ClientHandshake(ctx, authority, raw)
}

// lingerConn lingers when closed during a handshake (a refused one: gRPC
// closes the connection before the handshake returns its error).
type lingerConn struct {
	net.Conn

	handshaking atomic.Bool
}

func (c *lingerConn) Close() error {
	if c.handshaking.Load() {
		// No half-close: a proxy in between (toxiproxy) would pass the FIN
		// on by closing its client side at once, resetting it if the
		// client's preface was still unread there. The client hangs up
		// once it has read the alert.
		c.Conn.SetReadDeadline(time.Now().Add(lingerFor)) //nolint:errcheck

		io.Copy(io.Discard, c.Conn) //nolint:errcheck // until EOF, a reset or the deadline
	}

	return c.Conn.Close()
}
