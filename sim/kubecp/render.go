package kubecp

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	stdx509 "crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/siderolabs/crypto/x509"
	"github.com/siderolabs/talos/pkg/machinery/config"
	"sigs.k8s.io/yaml"
)

// Node is what a control plane's kube-apiserver static pod is rendered from.
type Node struct {
	// Config is the node's applied machine config: CAs, keys, endpoint,
	// service CIDRs, the API server's extra args and policies.
	Config config.Provider
	// Hostname and Address are the node's: in the serving certificate's
	// names, and the address advertised in the kubernetes endpoints.
	Hostname string
	Address  string
	// Bind is the address the server listens on. Talos binds 0.0.0.0; nodes
	// that share a host listen on an address of their own.
	Bind string
	// Port is the listen port; 0 means the config's local API server port
	// (6443). The port in the kubernetes endpoints is the one listened on.
	Port int
	// EtcdServer is the node's own etcd member's client URL (Talos:
	// https://127.0.0.1:2379): each API server talks to its own member only.
	EtcdServer string
	// Dir receives the static pod's secrets, configs and audit log.
	Dir string
}

// Pod is a rendered static pod: hyperkube runs Component with Args.
type Pod struct {
	// Component is kube-apiserver, kube-controller-manager or kube-scheduler
	// (the static pod's name and its k8s-app label).
	Component string
	// Args are the command's arguments, without the program name.
	Args []string
}

// certValidity is KubernetesDefaultCertificateValidityDuration (one year).
const certValidity = 365 * 24 * time.Hour

// RenderAPIServer writes the static pod's files into n.Dir as Talos's
// RenderSecretsStaticPodController and RenderConfigsStaticPodController do,
// and returns its arguments as ControlPlaneStaticPodController.manageAPIServer
// builds them.
func RenderAPIServer(n Node) (*Pod, error) {
	cfg := n.Config
	if cfg == nil || cfg.Cluster() == nil || cfg.Cluster().IssuingCA() == nil {
		return nil, errors.New("kube-apiserver: the machine config has no Kubernetes CA")
	}

	secrets := filepath.Join(n.Dir, "secrets")
	configs := filepath.Join(n.Dir, "config")

	for _, d := range []string{secrets, configs, filepath.Join(n.Dir, "audit")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}

	if err := writeSecrets(n, secrets); err != nil {
		return nil, err
	}

	if err := writeConfigs(cfg, configs); err != nil {
		return nil, err
	}

	port := n.Port
	if port == 0 {
		port = cfg.Cluster().LocalAPIServerPort()
	}

	endpoint := cfg.Cluster().Endpoint().String()
	s := func(name string) string { return filepath.Join(secrets, name) }

	args := map[string]string{
		"admission-control-config-file":      filepath.Join(configs, "admission-control-config.yaml"),
		"allow-privileged":                   "true",
		"anonymous-auth":                     "false",
		"api-audiences":                      endpoint,
		"bind-address":                       n.Bind,
		"client-ca-file":                     s("ca.crt"),
		"enable-admission-plugins":           "NodeRestriction",
		"requestheader-client-ca-file":       s("aggregator-ca.crt"),
		"requestheader-allowed-names":        "front-proxy-client",
		"requestheader-extra-headers-prefix": "X-Remote-Extra-",
		"requestheader-group-headers":        "X-Remote-Group",
		"requestheader-username-headers":     "X-Remote-User",
		"proxy-client-cert-file":             s("front-proxy-client.crt"),
		"proxy-client-key-file":              s("front-proxy-client.key"),
		"enable-bootstrap-token-auth":        "true",
		"tls-min-version":                    "VersionTLS12",
		"tls-cipher-suites":                  tlsCipherSuites,
		"encryption-provider-config":         s("encryptionconfig.yaml"),
		"audit-policy-file":                  filepath.Join(configs, "auditpolicy.yaml"),
		"audit-log-path":                     filepath.Join(n.Dir, "audit", "kube-apiserver.log"),
		"audit-log-maxage":                   "30",
		"audit-log-maxbackup":                "10",
		"audit-log-maxsize":                  "100",
		"profiling":                          "false",
		"etcd-cafile":                        s("etcd-client-ca.crt"),
		"etcd-certfile":                      s("etcd-client.crt"),
		"etcd-keyfile":                       s("etcd-client.key"),
		"etcd-servers":                       n.EtcdServer,
		"kubelet-client-certificate":         s("apiserver-kubelet-client.crt"),
		"kubelet-client-key":                 s("apiserver-kubelet-client.key"),
		"secure-port":                        strconv.Itoa(port),
		"service-account-issuer":             endpoint,
		"service-account-key-file":           s("service-account.pub"),
		"service-account-signing-key-file":   s("service-account.key"),
		"service-cluster-ip-range":           strings.Join(cfg.Cluster().Network().ServiceCIDRs(), ","),
		"tls-cert-file":                      s("apiserver.crt"),
		"tls-private-key-file":               s("apiserver.key"),
		"kubelet-preferred-address-types":    "InternalIP,ExternalIP,Hostname",
		"advertise-address":                  n.Address,
	}

	extra := cfg.Cluster().APIServer().ExtraArgs()

	// handleKubeAPIServerAuthorizationFlags: an authorization mode or webhook
	// among the extra args keeps the flags (Node,RBAC, merged with the
	// user's mode); otherwise 1.35 reads the structured authorization config
	// (enabled by default since 1.32).
	_, mode := extra["authorization-mode"]
	webhook := slices.ContainsFunc(slices.Collect(maps.Keys(extra)), func(k string) bool { return strings.HasPrefix(k, "authorization-webhook-") })

	if mode || webhook {
		args["authorization-mode"] = "Node,RBAC"
	} else {
		args["authorization-config"] = filepath.Join(configs, "authorization-config.yaml")
	}

	if err := mergeExtraArgs(args, extra, apiServerPolicies); err != nil {
		return nil, err
	}

	return &Pod{Component: APIServer, Args: flags(args)}, nil
}

// The static pods' names.
const (
	APIServer         = "kube-apiserver"
	ControllerManager = "kube-controller-manager"
	Scheduler         = "kube-scheduler"
)

// flags are args as argsbuilder prints them: sorted by name.
func flags(args map[string]string) []string {
	keys := slices.Sorted(maps.Keys(args))
	out := make([]string, 0, len(keys))

	for _, k := range keys {
		out = append(out, fmt.Sprintf("--%s=%s", k, args[k]))
	}

	return out
}

const tlsCipherSuites = "TLS_AES_128_GCM_SHA256,TLS_AES_256_GCM_SHA384,TLS_CHACHA20_POLY1305_SHA256," +
	"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305," +
	"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384," +
	"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305,TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256"

// mergePolicies are a static pod's argsbuilder.MergePolicies: extra args
// that add to Talos's values, and extra args that may not be set at all.
type mergePolicies struct {
	additive, denied []string
}

// apiServerPolicies are manageAPIServer's.
var apiServerPolicies = mergePolicies{
	additive: []string{"enable-admission-plugins", "feature-gates", "authorization-mode", "tls-cipher-suites"},
	denied: []string{
		"etcd-servers", "client-ca-file", "requestheader-client-ca-file", "proxy-client-cert-file",
		"proxy-client-key-file", "encryption-provider-config", "etcd-cafile", "etcd-certfile", "etcd-keyfile",
		"kubelet-client-certificate", "kubelet-client-key", "service-account-key-file",
		"service-account-signing-key-file", "tls-cert-file", "tls-private-key-file", "authorization-config",
	},
}

// mergeExtraArgs is pkg/argsbuilder's Merge with a static pod's policies
// (hand-rolled: argsbuilder lives in the Talos module, not the machinery).
// Its error text is argsbuilder's DenyListError.
func mergeExtraArgs(args map[string]string, extra map[string][]string, policies mergePolicies) error {
	for _, key := range slices.Sorted(maps.Keys(extra)) {
		val := strings.Join(extra[key], ",")

		switch {
		case slices.Contains(policies.denied, key):
			return fmt.Errorf("extra arg %q is not allowed", key)
		case slices.Contains(policies.additive, key):
			have := []string{}

			for v := range strings.SplitSeq(args[key], ",") {
				if v = strings.TrimSpace(v); v != "" {
					have = append(have, v)
				}
			}

			for v := range strings.SplitSeq(val, ",") {
				if v = strings.TrimSpace(v); !slices.Contains(have, v) {
					have = append(have, v)
				}
			}

			args[key] = strings.Join(have, ",")
		default:
			args[key] = val
		}
	}

	return nil
}

// writeSecrets writes the kube-apiserver pod's secrets
// (render_secrets_static_pod.go), issuing the dynamic certificates as
// KubernetesDynamicCertsController and the etcd PKI controller do.
func writeSecrets(n Node, dir string) error {
	cluster := n.Config.Cluster()

	k8sCA, err := x509.NewCertificateAuthorityFromCertificateAndKey(cluster.IssuingCA())
	if err != nil {
		return fmt.Errorf("failed to parse CA certificate: %w", err)
	}

	aggregatorCA, err := x509.NewCertificateAuthorityFromCertificateAndKey(cluster.AggregatorCA())
	if err != nil {
		return fmt.Errorf("failed to parse aggregator CA: %w", err)
	}

	etcdCA, err := x509.NewCertificateAuthorityFromCertificateAndKey(cluster.Etcd().CA())
	if err != nil {
		return fmt.Errorf("failed loading CA from config: %w", err)
	}

	notAfter := x509.NotAfter(time.Now().Add(certValidity))
	keyUsage := x509.KeyUsage(stdx509.KeyUsageDigitalSignature | stdx509.KeyUsageKeyEncipherment)
	client := x509.ExtKeyUsage([]stdx509.ExtKeyUsage{stdx509.ExtKeyUsageClientAuth})

	ips, dnsNames, err := certSANs(n)
	if err != nil {
		return err
	}

	issue := []struct {
		name string
		ca   *x509.CertificateAuthority
		opts []x509.Option
	}{
		{"apiserver", k8sCA, []x509.Option{
			x509.IPAddresses(ips), x509.DNSNames(dnsNames), x509.CommonName("kube-apiserver"),
			x509.Organization("kube-master"), notAfter, keyUsage,
			x509.ExtKeyUsage([]stdx509.ExtKeyUsage{stdx509.ExtKeyUsageServerAuth}),
		}},
		{"apiserver-kubelet-client", k8sCA, []x509.Option{
			x509.CommonName("apiserver-kubelet-client"), x509.Organization("system:masters"), notAfter, keyUsage, client,
		}},
		{"front-proxy-client", aggregatorCA, []x509.Option{x509.CommonName("front-proxy-client"), notAfter, keyUsage, client}},
		// etcd.CertificateGenerator.GenerateClientCert("kube-apiserver"): ten years.
		{"etcd-client", etcdCA, []x509.Option{
			x509.NotAfter(time.Now().Add(87600 * time.Hour)), keyUsage, x509.CommonName("kube-apiserver"), client,
		}},
	}

	for _, i := range issue {
		kp, err := x509.NewKeyPair(i.ca, i.opts...)
		if err != nil {
			return fmt.Errorf("failed to generate %s cert: %w", i.name, err)
		}

		if err = writeFiles(dir, map[string][]byte{i.name + ".crt": kp.CrtPEM, i.name + ".key": kp.KeyPEM}); err != nil {
			return err
		}
	}

	pub, err := publicKeyPEM(cluster.ServiceAccount().Key)
	if err != nil {
		return fmt.Errorf("service account key: %w", err)
	}

	encryption, err := encryptionConfig(cluster.SecretboxEncryptionSecret(), cluster.AESCBCEncryptionSecret())
	if err != nil {
		return err
	}

	return writeFiles(dir, map[string][]byte{
		"ca.crt":                cluster.IssuingCA().Crt,
		"aggregator-ca.crt":     cluster.AggregatorCA().Crt,
		"etcd-client-ca.crt":    cluster.Etcd().CA().Crt,
		"service-account.pub":   pub,
		"service-account.key":   cluster.ServiceAccount().Key,
		"encryptionconfig.yaml": encryption,
	})
}

// certSANs is KubernetesCertSANsController's list: the endpoint's host, the
// config's extra SANs, the kubernetes service names, the hostname, the API
// server service IPs, the node's addresses and 127.0.0.1.
func certSANs(n Node) ([]net.IP, []string, error) {
	cluster := n.Config.Cluster()

	var (
		ips   []net.IP
		names []string
	)

	add := func(s string) {
		if ip := net.ParseIP(s); ip != nil {
			ips = append(ips, ip)
		} else if s != "" && !slices.Contains(names, s) {
			names = append(names, s)
		}
	}

	add(cluster.Endpoint().Hostname())

	for _, s := range cluster.CertSANs() {
		add(s)
	}

	domain := cluster.Network().DNSDomain()
	for _, s := range []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc." + domain, "localhost", n.Hostname} {
		add(s)
	}

	serviceIPs, err := cluster.Network().APIServerIPs()
	if err != nil {
		return nil, nil, fmt.Errorf("API server service IPs: %w", err)
	}

	for _, ip := range serviceIPs {
		ips = append(ips, ip.AsSlice())
	}

	add(n.Address)
	add("127.0.0.1")

	return ips, names, nil
}

func publicKeyPEM(keyPEM []byte) ([]byte, error) {
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return nil, errors.New("no PEM block")
	}

	var (
		key any
		err error
	)

	switch block.Type {
	case "EC PRIVATE KEY":
		key, err = stdx509.ParseECPrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = stdx509.ParsePKCS1PrivateKey(block.Bytes)
	default:
		key, err = stdx509.ParsePKCS8PrivateKey(block.Bytes)
	}

	if err != nil {
		return nil, err
	}

	var pub crypto.PublicKey

	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		pub = k.Public()
	case *rsa.PrivateKey:
		pub = k.Public()
	case ed25519.PrivateKey:
		pub = k.Public()
	default:
		return nil, fmt.Errorf("unsupported key type %T", key)
	}

	der, err := stdx509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}

	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// encryptionConfig is k8stemplates.APIServerEncryptionConfig.
func encryptionConfig(secretbox, aescbc string) ([]byte, error) {
	var providers []any

	if secretbox != "" {
		providers = append(providers, map[string]any{"secretbox": map[string]any{"keys": []any{map[string]any{"name": "key2", "secret": secretbox}}}})
	}

	if aescbc != "" {
		providers = append(providers, map[string]any{"aescbc": map[string]any{"keys": []any{map[string]any{"name": "key1", "secret": aescbc}}}})
	}

	providers = append(providers, map[string]any{"identity": map[string]any{}})

	return yaml.Marshal(map[string]any{
		"kind":       "EncryptionConfig",
		"apiVersion": "v1",
		"resources":  []any{map[string]any{"resources": []string{"secrets"}, "providers": providers}},
	})
}

// writeConfigs writes the admission, audit and authorization configs
// (render_config_static_pods.go) from the machine config.
func writeConfigs(cfg config.Provider, dir string) error {
	api := cfg.Cluster().APIServer()

	plugins := []any{}
	for _, p := range api.AdmissionControl() {
		plugins = append(plugins, map[string]any{"name": p.Name(), "configuration": p.Configuration()})
	}

	// ControlPlaneAuthorizationController: the config's authorizers, with
	// Node first and RBAC second when the config leaves them out.
	authorizers := []map[string]any{}
	for _, a := range api.AuthorizationConfig() {
		m := map[string]any{"type": a.Type(), "name": a.Name()}
		if a.Webhook() != nil {
			m["webhook"] = a.Webhook()
		}

		authorizers = append(authorizers, m)
	}

	has := func(t string) bool {
		return slices.ContainsFunc(authorizers, func(a map[string]any) bool { return a["type"] == t })
	}

	if !has("Node") {
		authorizers = slices.Insert(authorizers, 0, map[string]any{"type": "Node", "name": "node"})
	}

	if !has("RBAC") {
		authorizers = slices.Insert(authorizers, 1, map[string]any{"type": "RBAC", "name": "rbac"})
	}

	files := map[string]any{
		"admission-control-config.yaml": map[string]any{
			"apiVersion": "apiserver.config.k8s.io/v1", "kind": "AdmissionConfiguration", "plugins": plugins,
		},
		"auditpolicy.yaml": api.AuditPolicy(),
		"authorization-config.yaml": map[string]any{
			"apiVersion": "apiserver.config.k8s.io/v1", "kind": "AuthorizationConfiguration", "authorizers": authorizers,
		},
	}

	out := map[string][]byte{}

	for name, v := range files {
		b, err := yaml.Marshal(v)
		if err != nil {
			return fmt.Errorf("error marshaling configuration %q for %q: %w", name, "kube-apiserver", err)
		}

		out[name] = b
	}

	return writeFiles(dir, out)
}

func writeFiles(dir string, files map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}

	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return fmt.Errorf("error writing %q: %w", filepath.Join(filepath.Base(dir), name), err)
		}
	}

	return nil
}
