package kubecp_test

import (
	stdx509 "crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/configpatcher"
	"github.com/siderolabs/talos/pkg/machinery/config/generate"
	"github.com/siderolabs/talos/pkg/machinery/config/machine"

	"github.com/talchaos/talchaos/harness/secretbundle"
	"github.com/talchaos/talchaos/sim/kubecp"
)

func controlPlaneConfig(t *testing.T, patch string) config.Provider {
	t.Helper()

	bundle, err := secretbundle.New(config.TalosVersionCurrent)
	if err != nil {
		t.Fatal(err)
	}

	in, err := generate.NewInput("render", "https://198.18.9.1:6443", "1.35.1", generate.WithSecretsBundle(bundle))
	if err != nil {
		t.Fatal(err)
	}

	cfg, err := in.Config(machine.TypeControlPlane)
	if err != nil {
		t.Fatal(err)
	}

	if patch == "" {
		return cfg
	}

	p, err := configpatcher.LoadPatch([]byte(patch))
	if err != nil {
		t.Fatal(err)
	}

	out, err := configpatcher.Apply(configpatcher.WithConfig(cfg), []configpatcher.Patch{p})
	if err != nil {
		t.Fatal(err)
	}

	patched, err := out.Config()
	if err != nil {
		t.Fatal(err)
	}

	return patched
}

// The pod as manageAPIServer renders it: the node's own etcd member, the
// node's address advertised, the config's endpoint as audience and issuer,
// and a serving certificate from the config's CA naming the endpoint's host,
// the node and the kubernetes service.
func TestRenderAPIServer(t *testing.T) {
	cfg := controlPlaneConfig(t, "")
	dir := t.TempDir()

	pod, err := kubecp.RenderAPIServer(kubecp.Node{
		Config: cfg, Hostname: "cp2", Address: "198.18.9.3", Bind: "127.1.9.3",
		EtcdServer: "https://198.18.9.3:22379", Dir: dir,
	})
	if err != nil {
		t.Fatal(err)
	}

	for _, want := range []string{
		"--etcd-servers=https://198.18.9.3:22379",
		"--advertise-address=198.18.9.3",
		"--bind-address=127.1.9.3",
		"--secure-port=6443",
		"--api-audiences=https://198.18.9.1:6443",
		"--service-account-issuer=https://198.18.9.1:6443",
		"--anonymous-auth=false",
		"--enable-admission-plugins=NodeRestriction",
		"--service-cluster-ip-range=10.96.0.0/12",
	} {
		if !slices.Contains(pod.Args, want) {
			t.Errorf("no %s in %v", want, pod.Args)
		}
	}

	if !slices.Contains(pod.Args, "--authorization-config="+filepath.Join(dir, "config", "authorization-config.yaml")) {
		t.Errorf("no structured authorization config in %v", pod.Args)
	}

	if !slices.IsSorted(pod.Args) {
		t.Error("arguments are not in argsbuilder's sorted order")
	}

	crtPEM, err := os.ReadFile(filepath.Join(dir, "secrets", "apiserver.crt"))
	if err != nil {
		t.Fatal(err)
	}

	block, _ := pem.Decode(crtPEM)
	crt, err := stdx509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}

	roots := stdx509.NewCertPool()
	roots.AppendCertsFromPEM(cfg.Cluster().IssuingCA().Crt)

	for _, name := range []string{"198.18.9.1", "198.18.9.3", "10.96.0.1", "127.0.0.1", "kubernetes.default.svc.cluster.local", "cp2"} {
		if _, err := crt.Verify(stdx509.VerifyOptions{Roots: roots, DNSName: name}); err != nil {
			t.Errorf("serving certificate for %s: %v", name, err)
		}
	}

	if !slices.ContainsFunc(crt.IPAddresses, func(ip net.IP) bool { return ip.Equal(net.ParseIP("198.18.9.3")) }) {
		t.Errorf("IP SANs %v lack the node", crt.IPAddresses)
	}

	for _, f := range []string{"etcd-client.crt", "front-proxy-client.crt", "service-account.pub", "encryptionconfig.yaml"} {
		if _, err := os.Stat(filepath.Join(dir, "secrets", f)); err != nil {
			t.Error(err)
		}
	}
}

// Extra args merge as Talos's policies say: additive ones add, the
// certificate and etcd flags are refused with argsbuilder's text.
func TestRenderAPIServerExtraArgs(t *testing.T) {
	node := func(patch string) kubecp.Node {
		return kubecp.Node{
			Config: controlPlaneConfig(t, patch), Hostname: "cp1", Address: "198.18.9.2", Bind: "127.1.9.2",
			EtcdServer: "https://198.18.9.2:22379", Dir: t.TempDir(),
		}
	}

	pod, err := kubecp.RenderAPIServer(node("cluster:\n  apiServer:\n    extraArgs:\n      enable-admission-plugins: PodSecurity,NodeRestriction\n      v: \"2\"\n"))
	if err != nil {
		t.Fatal(err)
	}

	for _, want := range []string{"--enable-admission-plugins=NodeRestriction,PodSecurity", "--v=2"} {
		if !slices.Contains(pod.Args, want) {
			t.Errorf("no %s in %v", want, pod.Args)
		}
	}

	// An authorization mode of the user's: Talos keeps the flag (its
	// Node,RBAC first) instead of the structured authorization config.
	pod, err = kubecp.RenderAPIServer(node("cluster:\n  apiServer:\n    extraArgs:\n      authorization-mode: Webhook\n"))
	if err != nil {
		t.Fatal(err)
	}

	if !slices.Contains(pod.Args, "--authorization-mode=Node,RBAC,Webhook") ||
		slices.ContainsFunc(pod.Args, func(a string) bool { return strings.HasPrefix(a, "--authorization-config=") }) {
		t.Errorf("with authorization-mode among the extra args: %v", pod.Args)
	}

	_, err = kubecp.RenderAPIServer(node("cluster:\n  apiServer:\n    extraArgs:\n      etcd-servers: https://elsewhere:2379\n"))
	if err == nil || !strings.Contains(err.Error(), `extra arg "etcd-servers" is not allowed`) {
		t.Errorf("etcd-servers as an extra arg: %v", err)
	}
}
