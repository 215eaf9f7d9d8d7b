// Package secretbundle makes Talos secrets bundles fast enough to make one per
// run: the sim target needs one per cluster, the engine one for a talosconfig
// from "other secrets".
package secretbundle

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"time"

	"github.com/siderolabs/crypto/x509"
	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	"github.com/siderolabs/talos/pkg/machinery/constants"
)

// New builds a Talos secrets bundle from the machinery's own CA
// constructors, as secrets.NewBundle does, but with an ECDSA service-account key:
// the RSA key NewBundle makes costs 0.2–1.6 s per cluster, ECDSA ~10 ms
// (GO-DEPS.md), and Kubernetes accepts either.
func New(contract *config.VersionContract) (*secrets.Bundle, error) {
	now := time.Now()
	clock := secrets.NewFixedClock(now)

	pair := func(ca *x509.CertificateAuthority, err error) (*x509.PEMEncodedCertificateAndKey, error) {
		if err != nil {
			return nil, err
		}

		return &x509.PEMEncodedCertificateAndKey{Crt: ca.CrtPEM, Key: ca.KeyPEM}, nil
	}

	b := &secrets.Bundle{Clock: clock, Certs: &secrets.Certs{}}

	var err error

	if b.Certs.Etcd, err = pair(secrets.NewEtcdCA(now, contract)); err != nil {
		return nil, fmt.Errorf("etcd CA: %w", err)
	}

	if b.Certs.K8s, err = pair(secrets.NewKubernetesCA(now, contract)); err != nil {
		return nil, fmt.Errorf("kubernetes CA: %w", err)
	}

	if b.Certs.K8sAggregator, err = pair(secrets.NewAggregatorCA(now, contract)); err != nil {
		return nil, fmt.Errorf("aggregator CA: %w", err)
	}

	if b.Certs.OS, err = pair(secrets.NewTalosCA(now)); err != nil {
		return nil, fmt.Errorf("talos CA: %w", err)
	}

	sa, err := x509.NewECDSAKey()
	if err != nil {
		return nil, err
	}

	b.Certs.K8sServiceAccount = &x509.PEMEncodedKey{Key: sa.KeyPEM}

	bootstrapToken, err := token(6, 16)
	if err != nil {
		return nil, err
	}

	trustdToken, err := token(6, 16)
	if err != nil {
		return nil, err
	}

	b.Secrets = &secrets.Secrets{
		BootstrapToken:            bootstrapToken,
		SecretboxEncryptionSecret: randBase64(32, base64.StdEncoding),
	}
	b.TrustdInfo = &secrets.TrustdInfo{Token: trustdToken}
	b.Cluster = &secrets.Cluster{
		ID:     randBase64(constants.DefaultClusterIDSize, base64.URLEncoding),
		Secret: randBase64(constants.DefaultClusterSecretSize, base64.StdEncoding),
	}

	if err := b.Validate(); err != nil {
		return nil, fmt.Errorf("secrets bundle: %w", err)
	}

	return b, nil
}

// token is a bootstrap-token-shaped string: [a-z0-9]{a}.[a-z0-9]{b}.
func token(a, b int) (string, error) {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

	buf := make([]byte, a+b)
	if _, err := rand.Read(buf); err != nil {
		return "", err
	}

	for i := range buf {
		buf[i] = alphabet[int(buf[i])%len(alphabet)]
	}

	return string(buf[:a]) + "." + string(buf[a:]), nil
}

func randBase64(n int, enc *base64.Encoding) string {
	buf := make([]byte, n)
	rand.Read(buf) //nolint:errcheck // crypto/rand.Read never fails on Linux

	return enc.EncodeToString(buf)
}
