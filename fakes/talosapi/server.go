package talosapi

import (
	"context"
	"crypto/tls"
	stdx509 "crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	cosiv1alpha1 "github.com/cosi-project/runtime/api/v1alpha1"
	"github.com/cosi-project/runtime/pkg/state"
	cosiserver "github.com/cosi-project/runtime/pkg/state/protobuf/server"
	"github.com/siderolabs/crypto/x509"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/api/storage"
	timeapi "github.com/siderolabs/talos/pkg/machinery/api/time"
	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/constants"
	"github.com/siderolabs/talos/pkg/machinery/role"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// Hook intercepts unary calls before the node handles them; the chaos layer uses
// it for API faults (fail before applying, apply then drop the reply, delay).
// next runs the real handler.
type Hook func(ctx context.Context, method string, next func(context.Context) (any, error)) (any, error)

// Options configure a Server.
type Options struct {
	Backend Backend
	Profile Profile
	// Listen is the address the server listens on (behind the node's API proxy).
	Listen string
	// Version is reported by the Version RPC, e.g. "v1.12.6".
	Version string
	// Router forwards requests addressed to other nodes (apid's `node`/`nodes`
	// metadata); nil serves only the local node.
	Router Router
	// TrustdCA signs the API certificate of nodes whose config holds no OS CA
	// key (workers), as trustd on the control planes does.
	TrustdCA *x509.PEMEncodedCertificateAndKey
	// Wall is how long a Talos-time span of the API's own timers (apid's
	// reconnect backoff to its peers) lasts on the wall clock: the run's
	// clock; nil is real time.
	Wall func(talos time.Duration) time.Duration
}

// Server is one node's Talos API.
type Server struct {
	opts Options

	maintCert tls.Certificate

	mu      sync.Mutex
	grpc    *grpc.Server
	lis     net.Listener
	done    chan struct{}
	mode    string // "", "maintenance", "configured"
	tlsConf *tls.Config

	applyMu sync.Mutex
	hook    atomic.Pointer[Hook]
	peers   peers
}

// New prepares a server; it does not listen until Start.
func New(opts Options) (*Server, error) {
	if opts.Profile == "" {
		opts.Profile = V112
	}

	// In maintenance the node presents a self-signed certificate and asks for no
	// client certificate (talosctl --insecure).
	ca, err := x509.NewSelfSignedCertificateAuthority(x509.ECDSA(true), x509.Organization("talos"))
	if err != nil {
		return nil, fmt.Errorf("maintenance certificate: %w", err)
	}

	kp, err := x509.NewKeyPair(ca,
		x509.ECDSA(true),
		x509.IPAddresses(ipList(opts.Backend.Addresses())),
		x509.DNSNames([]string{opts.Backend.Hostname()}),
		x509.CommonName(opts.Backend.Hostname()),
		x509.ExtKeyUsage([]stdx509.ExtKeyUsage{stdx509.ExtKeyUsageServerAuth}),
	)
	if err != nil {
		return nil, fmt.Errorf("maintenance certificate: %w", err)
	}

	return &Server{opts: opts, maintCert: *kp.Certificate, peers: peers{wall: opts.Wall}}, nil
}

// wall is how long a Talos-time span of the API's own timers lasts.
func (s *Server) wall(talos time.Duration) time.Duration {
	if s.opts.Wall == nil {
		return talos
	}

	return s.opts.Wall(talos)
}

// SetHook installs (or with nil removes) the fault hook.
func (s *Server) SetHook(h Hook) {
	if h == nil {
		s.hook.Store(nil)

		return
	}

	s.hook.Store(&h)
}

// Mode reports "maintenance", "configured" or "" when stopped.
func (s *Server) Mode() string {
	s.mu.Lock()
	defer s.mu.Unlock()

	return s.mode
}

// Start serves in the mode the backend is in: maintenance without a config,
// mutual TLS against the config's OS CA with one. Starting a running server
// restarts it, dropping every open connection, as the switch from the
// maintenance service to apid does on a real node.
func (s *Server) Start() error {
	if s.Mode() == "maintenance" {
		// Leaving maintenance: Talos stops the maintenance service with
		// ServerGracefulStop and a 5 s deadline (internal/app/machined/pkg/
		// controllers/runtime/maintenance_service.go, v1.12.6), so the reply
		// to the ApplyConfiguration that ended it still goes out.
		s.stop(maintenanceGrace)
	} else {
		s.Stop()
	}

	cfg := s.opts.Backend.Config()

	var (
		tlsConf *tls.Config
		mode    string
		err     error
	)

	if cfg == nil {
		mode = "maintenance"
		tlsConf = &tls.Config{
			Certificates: []tls.Certificate{s.maintCert},
			ClientAuth:   tls.NoClientCert,
			MinVersion:   tls.VersionTLS12,
		}
	} else {
		mode = "configured"

		tlsConf, err = s.configuredTLS(cfg)
		if err != nil {
			return err
		}
	}

	lis, err := net.Listen("tcp", s.opts.Listen)
	if err != nil {
		return fmt.Errorf("talos api listen %s: %w", s.opts.Listen, err)
	}

	srv := grpc.NewServer(
		grpc.Creds(lingeringCreds{credentials.NewTLS(tlsConf)}),
		grpc.MaxRecvMsgSize(constants.GRPCMaxMessageSize),
		grpc.ChainUnaryInterceptor(s.routeUnary, s.authorizeUnary(mode), s.hookUnary),
		grpc.ChainStreamInterceptor(s.routeStream, s.authorizeStream(mode)),
		grpc.ForceServerCodec(passthroughCodec{}),
	)

	// Both machined and the maintenance service serve their resources
	// through Talos's access policy; a maintenance client is a reader
	// (authz.ReadOnlyWithAdminOnSiderolink, maintenance_service.go).
	roles := Roles
	if mode == "maintenance" {
		roles = func(context.Context) role.Set { return role.MakeSet(role.Reader) }
	}

	st := s.opts.Backend.Resources()
	cosiv1alpha1.RegisterStateServer(srv, cosiserver.NewState(state.WrapCore(state.Filter(st, accessPolicy(st, roles)))))
	storage.RegisterStorageServiceServer(srv, &storageServer{s: s})

	// The maintenance service serves no TimeService (maintenance_service.go).
	if mode == "maintenance" {
		machine.RegisterMachineServiceServer(srv, &maintenanceServer{s: s})
	} else {
		machine.RegisterMachineServiceServer(srv, &machineServer{s: s})
		timeapi.RegisterTimeServiceServer(srv, &timeServer{s: s})
	}

	done := make(chan struct{})

	go func() {
		defer close(done)

		_ = srv.Serve(lis) //nolint:errcheck // Serve returns when Stop closes the listener
	}()

	s.mu.Lock()
	s.grpc, s.lis, s.done, s.mode, s.tlsConf = srv, lis, done, mode, tlsConf
	s.mu.Unlock()

	return nil
}

// maintenanceGrace bounds the graceful stop of the maintenance service in
// wall time: Talos's 5 s, which no call the engine or a client makes in
// maintenance mode comes near (a stream left open would hold it that long).
const maintenanceGrace = 5 * time.Second

// Stop closes the listener and every connection (the node is down or switching).
func (s *Server) Stop() { s.stop(0) }

// StopGracefully lets the calls in flight end and their last messages go
// out, waiting at most grace (wall time; streams that never end, a followed
// log, hold it that long), then stops.
func (s *Server) StopGracefully(grace time.Duration) { s.stop(grace) }

// stop closes the listener; with a grace period in-flight calls finish first
// (at most grace), then every connection is closed.
func (s *Server) stop(grace time.Duration) {
	s.mu.Lock()
	srv, done := s.grpc, s.done
	s.grpc, s.lis, s.done, s.mode = nil, nil, nil, ""
	s.mu.Unlock()

	if srv == nil {
		return
	}

	if grace > 0 {
		stopped := make(chan struct{})

		go func() {
			defer close(stopped)

			srv.GracefulStop()
		}()

		select {
		case <-stopped:
		case <-time.After(grace):
		}
	}

	srv.Stop()
	<-done
	s.peers.close()
}

// configuredTLS is apid's server side: a certificate for the node's addresses
// from the config's OS CA, and client certificates required from that CA (or an
// accepted one).
func (s *Server) configuredTLS(cfg config.Provider) (*tls.Config, error) {
	issuing := cfg.Machine().Security().IssuingCA()
	if issuing == nil {
		return nil, errors.New("config has no OS CA")
	}

	signer := issuing

	// A worker's config carries the OS CA certificate but not its key: its API
	// certificate is signed by trustd on a control plane.
	if len(issuing.Key) == 0 {
		if signer = s.opts.TrustdCA; signer == nil {
			return nil, errors.New("config has no OS CA key and no trustd to sign the API certificate")
		}
	}

	ca, err := x509.NewCertificateAuthorityFromCertificateAndKey(signer)
	if err != nil {
		return nil, fmt.Errorf("OS CA: %w", err)
	}

	cert := &apiCert{backend: s.opts.Backend, ca: ca}
	if _, err := cert.current(); err != nil {
		return nil, err
	}

	pool := stdx509.NewCertPool()
	if !pool.AppendCertsFromPEM(issuing.Crt) {
		return nil, errors.New("OS CA certificate does not parse")
	}

	for _, accepted := range cfg.Machine().Security().AcceptedCAs() {
		pool.AppendCertsFromPEM(accepted.Crt)
	}

	// Clients' certificates are judged by the node's clock.
	return &tls.Config{
		GetCertificate:       func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return cert.current() },
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert.current() },
		ClientCAs:            pool,
		RootCAs:              pool,
		ClientAuth:           tls.RequireAndVerifyClientCert,
		MinVersion:           tls.VersionTLS12,
		Time:                 s.opts.Backend.Now,
	}, nil
}

// apiCert is the node's API certificate, issued again when its addresses
// change, as Talos's APICertSANsController and API certificate controller
// do: the SANs are the node's accumulated addresses (a shared IP it has
// held among them) and its hostname.
type apiCert struct {
	backend Backend
	ca      *x509.CertificateAuthority

	mu   sync.Mutex
	sans string
	cert *tls.Certificate
}

func (c *apiCert) current() (*tls.Certificate, error) {
	addrs, hostname := c.backend.Addresses(), c.backend.Hostname()
	sans := strings.Join(addrs, ",") + "/" + hostname

	c.mu.Lock()
	defer c.mu.Unlock()

	if c.cert != nil && c.sans == sans {
		return c.cert, nil
	}

	// Valid from the node's clock for a day (controllers/secrets/api.go
	// generateControlPlane: NotAfter now + DefaultCertificateValidityDuration,
	// NotBefore now by default).
	now := c.backend.Now()

	kp, err := x509.NewKeyPair(c.ca,
		x509.IPAddresses(ipList(addrs)),
		x509.DNSNames([]string{hostname}),
		x509.CommonName(hostname),
		// apid forwards requests to other nodes with this certificate, impersonating the caller.
		x509.Organization(string(role.Impersonator)),
		x509.NotBefore(now),
		x509.NotAfter(now.Add(x509.DefaultCertificateValidityDuration)),
		x509.ExtKeyUsage([]stdx509.ExtKeyUsage{stdx509.ExtKeyUsageServerAuth, stdx509.ExtKeyUsageClientAuth}),
	)
	if err != nil {
		return nil, fmt.Errorf("api certificate: %w", err)
	}

	c.sans, c.cert = sans, kp.Certificate

	return c.cert, nil
}

// ClientTLS is the credential apid uses towards other nodes: the same certificate
// it serves with, trusted by every node of the cluster.
func (s *Server) ClientTLS() *tls.Config {
	s.mu.Lock()
	defer s.mu.Unlock()

	if s.tlsConf == nil || s.mode != "configured" {
		return nil
	}

	return &tls.Config{
		GetClientCertificate: s.tlsConf.GetClientCertificate,
		RootCAs:              s.tlsConf.RootCAs,
		MinVersion:           tls.VersionTLS12,
		Time:                 s.opts.Backend.Now,
	}
}

func (s *Server) hookUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	h := s.hook.Load()
	if h == nil {
		return handler(ctx, req)
	}

	return (*h)(ctx, info.FullMethod, func(ctx context.Context) (any, error) { return handler(ctx, req) })
}

// ipList parses a backend's addresses for a certificate.
func ipList(addrs []string) []net.IP {
	out := make([]net.IP, 0, len(addrs))
	for _, a := range addrs {
		out = append(out, net.ParseIP(a))
	}

	return out
}
