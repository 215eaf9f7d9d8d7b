package sim_test

import (
	stdx509 "crypto/x509"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/talchaos/talchaos/harness/talosclient"
	"github.com/talchaos/talchaos/harness/target"
	"github.com/talchaos/talchaos/sim/simtest"
)

// Kubeconfig as Talos v1.12.6 serves it (v1alpha1_server.go Kubeconfig): on a
// configured control plane, an admin kubeconfig for the config's cluster
// endpoint, trusting its Kubernetes CA, with a client certificate that CA
// signed; on a worker "kubeconfig is only available on control plane nodes";
// in maintenance the maintenance API's Unimplemented.
func TestKubeconfig(t *testing.T) {
	ctx, cancel := runningContext(2 * time.Minute)
	defer cancel()

	sc := newScenario(1)
	sc.Cluster.Workers = 1

	c := simtest.FromScenario(t, sc, 1)
	cp, w := c.Nodes()[0], c.Nodes()[1]

	// In maintenance: the maintenance API does not serve it.
	ins, err := talosclient.Insecure(ctx, cp.Endpoint)
	if err != nil {
		t.Fatal(err)
	}

	eventually(t, 30*time.Second, func() error { _, err := ins.Disks(ctx); return err })

	if _, err := ins.Kubeconfig(ctx); status.Code(err) != codes.Unimplemented || !strings.Contains(err.Error(), "method Kubeconfig not implemented") {
		t.Errorf("in maintenance: %v, want Unimplemented: method Kubeconfig not implemented", err)
	}

	ins.Close() //nolint:errcheck

	for _, n := range []target.Node{cp, w} {
		apply(t, ctx, n)
	}

	cfg, err := configloader.NewFromBytes(cp.Config)
	if err != nil {
		t.Fatal(err)
	}

	client := func(n target.Node) func() ([]byte, error) {
		cl := secureAt(t, ctx, c, n.Endpoint)

		eventually(t, 30*time.Second, func() error { _, err := cl.Version(ctx); return err })

		return func() ([]byte, error) { return cl.Kubeconfig(ctx) }
	}

	if _, err := client(w)(); status.Code(err) != codes.Unimplemented || !strings.Contains(err.Error(), "kubeconfig is only available on control plane nodes") {
		t.Errorf("on a worker: %v, want Unimplemented: kubeconfig is only available on control plane nodes", err)
	}

	data, err := client(cp)()
	if err != nil {
		t.Fatalf("on a control plane: %v", err)
	}

	kc, err := clientcmd.Load(data)
	if err != nil {
		t.Fatalf("the kubeconfig does not load: %v\n%s", err, data)
	}

	name := cfg.Cluster().Name()
	ctxName := "admin@" + name

	if kc.CurrentContext != ctxName || kc.Contexts[ctxName] == nil || kc.Contexts[ctxName].Namespace != "default" {
		t.Fatalf("context %q %+v, want %s in namespace default", kc.CurrentContext, kc.Contexts, ctxName)
	}

	cluster, user := kc.Clusters[name], kc.AuthInfos["admin@"+name]
	if cluster == nil || user == nil {
		t.Fatalf("no cluster %s or user admin@%s: %+v %+v", name, name, kc.Clusters, kc.AuthInfos)
	}

	if want := cfg.Cluster().Endpoint().String(); cluster.Server != want {
		t.Errorf("server %s, want the config's endpoint %s", cluster.Server, want)
	}

	if !strings.Contains(string(cluster.CertificateAuthorityData), string(cfg.Cluster().IssuingCA().Crt)) {
		t.Error("the kubeconfig does not trust the config's Kubernetes CA")
	}

	roots := stdx509.NewCertPool()
	roots.AppendCertsFromPEM(cfg.Cluster().IssuingCA().Crt)

	block, _ := pem.Decode(user.ClientCertificateData)
	if block == nil {
		t.Fatal("no client certificate")
	}

	crt, err := stdx509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}

	if _, err := crt.Verify(stdx509.VerifyOptions{Roots: roots, KeyUsages: []stdx509.ExtKeyUsage{stdx509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("the client certificate is not the Kubernetes CA's: %v", err)
	}

	if crt.Subject.CommonName != "admin" || len(crt.Subject.Organization) != 1 || crt.Subject.Organization[0] != "system:masters" {
		t.Errorf("client certificate subject %v, want CN admin, O system:masters", crt.Subject)
	}
}
