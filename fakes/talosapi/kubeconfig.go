package talosapi

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	stdlibx509 "crypto/x509"
	"fmt"
	"io"
	"time"

	"github.com/siderolabs/crypto/x509"
	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/config/config"
	"google.golang.org/protobuf/types/known/emptypb"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Kubeconfig streams the cluster's admin kubeconfig, as Talos v1.12.6 serves
// it (v1alpha1_server.go Kubeconfig): control planes only ("kubeconfig is
// only available on control plane nodes" elsewhere), generated from the
// applied config's cluster section (pkg/kubeconfig GenerateAdmin: a client
// certificate signed by the Kubernetes CA, the cluster's accepted CAs, its
// controlPlane.endpoint), wrapped "to match the Copy protocol" in a gzipped
// tar of one file, kubeconfig, mode 0600, sent as one Data message. Like
// Talos, the tar writer is not closed, only the gzip one.
func (m *machineServer) Kubeconfig(_ *emptypb.Empty, srv machine.MachineService_KubeconfigServer) error {
	if err := m.checkControlplane("kubeconfig"); err != nil {
		return err
	}

	var b bytes.Buffer

	if err := generateAdmin(m.backend().Config().Cluster(), &b); err != nil {
		return err
	}

	var buf bytes.Buffer

	zw := gzip.NewWriter(&buf)
	tarW := tar.NewWriter(zw)

	if err := tarW.WriteHeader(&tar.Header{
		Typeflag: tar.TypeReg,
		Name:     "kubeconfig",
		Size:     int64(b.Len()),
		ModTime:  time.Now(),
		Mode:     0o600,
	}); err != nil {
		return err
	}

	if _, err := io.Copy(tarW, &b); err != nil {
		return err
	}

	if err := zw.Close(); err != nil {
		return err
	}

	return srv.Send(&common.Data{Bytes: buf.Bytes()})
}

// allowedTimeSkew backdates the admin certificate (pkg/kubeconfig).
const allowedTimeSkew = 10 * time.Second

// generateAdmin is Talos's pkg/kubeconfig GenerateAdmin and Generate (in the
// talos module proper, which talchaos does not import: its go.mod replaces
// modules, and a replace acts only in the main module), on the same
// libraries: siderolabs/crypto for the certificate, client-go's clientcmd for
// the file.
func generateAdmin(cluster config.ClusterConfig, out io.Writer) error {
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
