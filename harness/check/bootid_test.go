package check

import (
	"context"
	"crypto/tls"
	"net"
	"sync/atomic"
	"testing"

	"github.com/siderolabs/crypto/x509"
	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/talchaos/talchaos/harness/talosclient"
)

// readServer answers Read with its err, or else with the boot ID id.
type readServer struct {
	machine.UnimplementedMachineServiceServer

	id    string
	err   error
	calls atomic.Int32
}

func (s *readServer) Read(_ *machine.ReadRequest, srv machine.MachineService_ReadServer) error {
	s.calls.Add(1)

	if s.err != nil {
		return s.err
	}

	return srv.Send(&common.Data{Bytes: []byte(s.id + "\n")})
}

// A node is asked its boot ID at every look, unless it refused the read for
// good (a talosconfig without os:admin, a Talos without Read): then once.
func TestBootIDAskedUntilRefusedForGood(t *testing.T) {
	ca, err := x509.NewSelfSignedCertificateAuthority(x509.ECDSA(true))
	if err != nil {
		t.Fatal(err)
	}

	cert, err := tls.X509KeyPair(ca.CrtPEM, ca.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name      string
		err       error
		want      string
		wantCalls int32
	}{
		{name: "answered", want: "0b5e", wantCalls: 3},
		{name: "not an admin", err: status.Error(codes.PermissionDenied, "not authorized"), wantCalls: 1},
		{name: "not served", err: status.Error(codes.Unimplemented, "reading is not simulated"), wantCalls: 1},
		{name: "unavailable for now", err: status.Error(codes.Unavailable, "connection refused"), wantCalls: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}

			srv := &readServer{id: "0b5e", err: tc.err}
			g := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}})))
			machine.RegisterMachineServiceServer(g, srv)

			go g.Serve(l) //nolint:errcheck

			t.Cleanup(g.Stop)

			ctx := context.Background()

			cl, err := talosclient.Insecure(ctx, l.Addr().String())
			if err != nil {
				t.Fatal(err)
			}

			t.Cleanup(func() { cl.Close() }) //nolint:errcheck

			c := &nodeClients{secure: cl}

			for range 3 {
				if got := c.bootID(ctx); got != tc.want {
					t.Errorf("bootID = %q, want %q", got, tc.want)
				}
			}

			if got := srv.calls.Load(); got != tc.wantCalls {
				t.Errorf("the node was asked %d times in three looks, want %d", got, tc.wantCalls)
			}
		})
	}
}
