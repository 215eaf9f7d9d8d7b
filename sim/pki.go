package sim

import (
	stdx509 "crypto/x509"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/siderolabs/crypto/x509"
)

// etcdPKI is the per-node etcd certificate set Talos's etcd PKI controller
// writes (server, peer, admin client), issued by the cluster's etcd CA. Files,
// because embedded etcd reads its TLS material from paths (and again at
// every handshake, as Talos's etcd and its clients do).
type etcdPKI struct {
	CACert     string
	ServerCert string
	ServerKey  string
	PeerCert   string
	PeerKey    string
	AdminCert  string
	AdminKey   string
}

// etcdCertValidity is how long the etcd certificates are valid from their
// issue (internal/pkg/etcd/certs.go buildOptions: 87600 h).
const etcdCertValidity = 87600 * time.Hour

// writeEtcdPKI issues the certificates at now, by the node's clock (the
// crypto library's NotBefore is its now); a file is replaced whole.
func writeEtcdPKI(dir string, ca *x509.PEMEncodedCertificateAndKey, hostname string, addrs []netip.Addr, now time.Time) (*etcdPKI, error) {
	authority, err := x509.NewCertificateAuthorityFromCertificateAndKey(ca)
	if err != nil {
		return nil, fmt.Errorf("etcd CA: %w", err)
	}

	if err = os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}

	// The CA too is replaced whole: an etcd starting meanwhile reads it once
	// for its listeners, and etcd's tlsutil.NewCertPool takes an empty or cut
	// off file for an empty pool without an error; a peer port that trusts
	// no CA then refuses every joiner for as long as that etcd runs (seen in
	// CI: address-late-v1.12's cp1 formed while the heal rewrote its CA).
	p := &etcdPKI{CACert: filepath.Join(dir, "ca.crt")}
	if err = replaceFile(p.CACert, ca.Crt); err != nil {
		return nil, err
	}

	both := []stdx509.ExtKeyUsage{stdx509.ExtKeyUsageServerAuth, stdx509.ExtKeyUsageClientAuth}
	// Talos's etcd certificates (internal/pkg/etcd/certs.go buildOptions,
	// written by secrets.EtcdController from the node's accumulated
	// addresses, in their order): the peer certificate names the addresses
	// alone, the server certificate 127.0.0.1 and ::1 besides, for the
	// node's local clients (includeLocalhost).
	peerIPs := make([]net.IP, 0, len(addrs))
	for _, a := range addrs {
		peerIPs = append(peerIPs, a.AsSlice())
	}

	serverIPs := append(slices.Clone(peerIPs), net.ParseIP("127.0.0.1"), net.ParseIP("::1"))

	issue := func(name string, opts ...x509.Option) (string, string, error) {
		opts = append(opts, x509.NotBefore(now), x509.NotAfter(now.Add(etcdCertValidity)))

		kp, err := x509.NewKeyPair(authority, opts...)
		if err != nil {
			return "", "", fmt.Errorf("etcd %s certificate: %w", name, err)
		}

		crt, key := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
		if err = replaceFile(key, kp.KeyPEM); err != nil {
			return "", "", err
		}

		return crt, key, replaceFile(crt, kp.CrtPEM)
	}

	if p.ServerCert, p.ServerKey, err = issue("server",
		x509.CommonName(hostname), x509.DNSNames([]string{hostname, "localhost"}), x509.IPAddresses(serverIPs), x509.ExtKeyUsage(both)); err != nil {
		return nil, err
	}

	if p.PeerCert, p.PeerKey, err = issue("peer",
		x509.CommonName(hostname), x509.DNSNames([]string{hostname}), x509.IPAddresses(peerIPs), x509.ExtKeyUsage(both)); err != nil {
		return nil, err
	}

	if p.AdminCert, p.AdminKey, err = issue("admin",
		x509.CommonName("talos"), x509.ExtKeyUsage([]stdx509.ExtKeyUsage{stdx509.ExtKeyUsageClientAuth})); err != nil {
		return nil, err
	}

	return p, nil
}

// replaceFile writes a file whole: a reader sees the old content or the new.
func replaceFile(path string, data []byte) error {
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}

	return os.Rename(tmp, path)
}
