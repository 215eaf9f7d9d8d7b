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

// GenerateInput is pkg/kubeconfig's: one client certificate's kubeconfig.
type GenerateInput struct {
	ClusterName string

	IssuingCA           *x509.PEMEncodedCertificateAndKey
	AcceptedCAs         []*x509.PEMEncodedCertificate
	CertificateLifetime time.Duration

	CommonName   string
	Organization string

	Endpoint    string
	Username    string
	ContextName string
}

// Generate is Talos's pkg/kubeconfig Generate (in the talos module proper,
// which talchaos does not import: its go.mod replaces modules, and a replace
// acts only in the main module), on the same libraries: siderolabs/crypto for
// the certificate, client-go's clientcmd for the file. The simulated control
// plane's components get theirs from it as Talos's secrets controller makes
// them (KubernetesController.updateSecrets).
func Generate(in *GenerateInput, out io.Writer) error {
	k8sCA, err := x509.NewCertificateAuthorityFromCertificateAndKey(in.IssuingCA)
	if err != nil {
		return fmt.Errorf("error getting Kubernetes CA: %w", err)
	}

	clientCert, err := x509.NewKeyPair(k8sCA,
		x509.CommonName(in.CommonName),
		x509.Organization(in.Organization),
		x509.NotBefore(time.Now().Add(-allowedTimeSkew)),
		x509.NotAfter(time.Now().Add(in.CertificateLifetime)),
		x509.KeyUsage(stdlibx509.KeyUsageDigitalSignature|stdlibx509.KeyUsageKeyEncipherment),
		x509.ExtKeyUsage([]stdlibx509.ExtKeyUsage{stdlibx509.ExtKeyUsageClientAuth}),
	)
	if err != nil {
		return fmt.Errorf("error generating Kubernetes client certificate: %w", err)
	}

	clientCertPEM := x509.NewCertificateAndKeyFromKeyPair(clientCert)

	var serverCAs []byte
	for _, ca := range in.AcceptedCAs {
		serverCAs = append(serverCAs, ca.Crt...)
	}

	marshaled, err := clientcmd.Write(clientcmdapi.Config{
		APIVersion: "v1",
		Kind:       "Config",
		Clusters: map[string]*clientcmdapi.Cluster{
			in.ClusterName: {Server: in.Endpoint, CertificateAuthorityData: serverCAs},
		},
		AuthInfos: map[string]*clientcmdapi.AuthInfo{
			in.Username + "@" + in.ClusterName: {ClientCertificateData: clientCertPEM.Crt, ClientKeyData: clientCertPEM.Key},
		},
		Contexts: map[string]*clientcmdapi.Context{
			in.ContextName + "@" + in.ClusterName: {Cluster: in.ClusterName, Namespace: "default", AuthInfo: in.Username + "@" + in.ClusterName},
		},
		CurrentContext: in.ContextName + "@" + in.ClusterName,
	})
	if err != nil {
		return err
	}

	_, err = out.Write(marshaled)

	return err
}

// AcceptedCAs are the CAs a cluster's kubeconfigs trust: the config's
// accepted CAs and its issuing CA (KubernetesRootSpec.AcceptedCAs).
func AcceptedCAs(cluster config.ClusterConfig) []*x509.PEMEncodedCertificate {
	acceptedCAs := cluster.AcceptedCAs()
	if cluster.IssuingCA() != nil {
		acceptedCAs = append(acceptedCAs, &x509.PEMEncodedCertificate{Crt: cluster.IssuingCA().Crt})
	}

	return acceptedCAs
}

// GenerateAdmin is Talos's pkg/kubeconfig GenerateAdmin: the admin
// kubeconfig for the cluster's endpoint.
func GenerateAdmin(cluster config.ClusterConfig, out io.Writer) error {
	admin := cluster.AdminKubeconfig()

	return Generate(&GenerateInput{
		ClusterName:         cluster.Name(),
		IssuingCA:           cluster.IssuingCA(),
		AcceptedCAs:         AcceptedCAs(cluster),
		CertificateLifetime: admin.CertLifetime(),
		CommonName:          admin.CommonName(),
		Organization:        admin.CertOrganization(),
		Endpoint:            cluster.Endpoint().String(),
		Username:            "admin",
		ContextName:         "admin",
	}, out)
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
