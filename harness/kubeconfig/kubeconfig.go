// Package kubeconfig makes a cluster's admin kubeconfig from its machine
// config, as Talos does: for its Kubeconfig API, for `talchaos up
// --kubernetes` to write beside the talosconfig, and for the exec
// orchestrator's KUBECONFIG.
package kubeconfig

import (
	"bytes"
	stdlibx509 "crypto/x509"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/siderolabs/crypto/x509"
	"github.com/siderolabs/talos/pkg/machinery/config/config"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/talchaos/talchaos/harness/target"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// allowedTimeSkew backdates the admin certificate (pkg/kubeconfig).
const allowedTimeSkew = 10 * time.Second

// GenerateAdmin is Talos's pkg/kubeconfig GenerateAdmin and Generate (in the
// talos module proper, which talchaos does not import: its go.mod replaces
// modules, and a replace acts only in the main module), on the same
// libraries: siderolabs/crypto for the certificate, client-go's clientcmd for
// the file.
func GenerateAdmin(cluster config.ClusterConfig, out io.Writer) error {
	acceptedCAs := cluster.AcceptedCAs()
	if cluster.IssuingCA() != nil {
		acceptedCAs = append(acceptedCAs, &x509.PEMEncodedCertificate{Crt: cluster.IssuingCA().Crt})
	}

	k8sCA, err := x509.NewCertificateAuthorityFromCertificateAndKey(cluster.IssuingCA())
	if err != nil {
		return fmt.Errorf("error getting Kubernetes CA: %w", err)
	}

	admin := cluster.AdminKubeconfig()

	clientCert, err := x509.NewKeyPair(k8sCA,
		x509.CommonName(admin.CommonName()),
		x509.Organization(admin.CertOrganization()),
		x509.NotBefore(time.Now().Add(-allowedTimeSkew)),
		x509.NotAfter(time.Now().Add(admin.CertLifetime())),
		x509.KeyUsage(stdlibx509.KeyUsageDigitalSignature|stdlibx509.KeyUsageKeyEncipherment),
		x509.ExtKeyUsage([]stdlibx509.ExtKeyUsage{stdlibx509.ExtKeyUsageClientAuth}),
	)
	if err != nil {
		return fmt.Errorf("error generating Kubernetes client certificate: %w", err)
	}

	clientCertPEM := x509.NewCertificateAndKeyFromKeyPair(clientCert)

	var serverCAs []byte
	for _, ca := range acceptedCAs {
		serverCAs = append(serverCAs, ca.Crt...)
	}

	const user, contextName = "admin", "admin"

	name := cluster.Name()

	marshaled, err := clientcmd.Write(clientcmdapi.Config{
		APIVersion: "v1",
		Kind:       "Config",
		Clusters: map[string]*clientcmdapi.Cluster{
			name: {Server: cluster.Endpoint().String(), CertificateAuthorityData: serverCAs},
		},
		AuthInfos: map[string]*clientcmdapi.AuthInfo{
			user + "@" + name: {ClientCertificateData: clientCertPEM.Crt, ClientKeyData: clientCertPEM.Key},
		},
		Contexts: map[string]*clientcmdapi.Context{
			contextName + "@" + name: {Cluster: name, Namespace: "default", AuthInfo: user + "@" + name},
		},
		CurrentContext: contextName + "@" + name,
	})
	if err != nil {
		return err
	}

	_, err = out.Write(marshaled)

	return err
}

// Admin is GenerateAdmin into a byte slice.
func Admin(cluster config.ClusterConfig) ([]byte, error) {
	var b bytes.Buffer

	if err := GenerateAdmin(cluster, &b); err != nil {
		return nil, err
	}

	return b.Bytes(), nil
}

// AdminFor is the admin kubeconfig of the cluster the nodes form, made from
// its first control plane's machine config.
func AdminFor(nodes []target.Node) ([]byte, error) {
	for _, n := range nodes {
		if n.Role != target.ControlPlane {
			continue
		}

		cfg, err := configloader.NewFromBytes(n.Config)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig: %s's config: %w", n.Name, err)
		}

		data, err := Admin(cfg.Cluster())
		if err != nil {
			return nil, fmt.Errorf("kubeconfig: %w", err)
		}

		return data, nil
	}

	return nil, errors.New("kubeconfig: no control plane")
}
