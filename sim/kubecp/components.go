package kubecp

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"net"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/talchaos/talchaos/harness/kubeconfig"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

// Talos's organizations (and common names) for the control plane's own
// clients (constants.KubernetesControllerManagerOrganization, ...).
const (
	controllerManagerUser = "system:kube-controller-manager"
	schedulerUser         = "system:kube-scheduler"
)

// certLifetime is KubernetesCertificateValidityDuration, the components'
// kubeconfig certificates' lifetime.
const certLifetime = certValidity

// controllerManagerPolicies are manageControllerManager's.
var controllerManagerPolicies = mergePolicies{
	additive: []string{"service-cluster-ip-range", "controllers"},
	denied: []string{
		"cluster-signing-cert-file", "cluster-signing-key-file", "authentication-kubeconfig",
		"authorization-kubeconfig", "root-ca-file", "service-account-private-key-file",
	},
}

// schedulerPolicies are manageScheduler's.
var schedulerPolicies = mergePolicies{
	denied: []string{"kubeconfig", "authentication-kubeconfig", "authorization-kubeconfig", "config"},
}

// RenderControllerManager writes the kube-controller-manager static pod's
// secrets (its CA and key, the service-account key, its kubeconfig) into
// n.Dir and returns its arguments as manageControllerManager builds them.
// 127.0.0.1 (its bind address, its API server) is the node's Bind address.
func RenderControllerManager(n Node) (*Pod, error) {
	cfg := n.Config
	if cfg == nil || cfg.Cluster() == nil || cfg.Cluster().IssuingCA() == nil {
		return nil, errors.New("kube-controller-manager: the machine config has no Kubernetes CA")
	}

	cluster := cfg.Cluster()
	secrets := filepath.Join(n.Dir, "secrets")

	kc, err := localKubeconfig(n, controllerManagerUser)
	if err != nil {
		return nil, fmt.Errorf("failed to generate controller manager kubeconfig: %w", err)
	}

	if err = writeFiles(secrets, map[string][]byte{
		"ca.crt":              cluster.IssuingCA().Crt,
		"ca.key":              cluster.IssuingCA().Key,
		"service-account.key": cluster.ServiceAccount().Key,
		"kubeconfig":          kc,
	}); err != nil {
		return nil, err
	}

	s := func(name string) string { return filepath.Join(secrets, name) }

	args := map[string]string{
		"allocate-node-cidrs":              "true",
		"bind-address":                     n.Bind,
		"cluster-cidr":                     strings.Join(cluster.Network().PodCIDRs(), ","),
		"service-cluster-ip-range":         strings.Join(cluster.Network().ServiceCIDRs(), ","),
		"cluster-signing-cert-file":        s("ca.crt"),
		"cluster-signing-key-file":         s("ca.key"),
		"controllers":                      "*,tokencleaner",
		"configure-cloud-routes":           "false",
		"kubeconfig":                       s("kubeconfig"),
		"authentication-kubeconfig":        s("kubeconfig"),
		"authorization-kubeconfig":         s("kubeconfig"),
		"leader-elect":                     "true",
		"root-ca-file":                     s("ca.crt"),
		"service-account-private-key-file": s("service-account.key"),
		"profiling":                        "false",
		"tls-min-version":                  "VersionTLS13",
	}

	if err = mergeExtraArgs(args, cluster.ControllerManager().ExtraArgs(), controllerManagerPolicies); err != nil {
		return nil, err
	}

	return &Pod{Component: ControllerManager, Args: append([]string{"--use-service-account-credentials"}, flags(args)...)}, nil
}

// RenderScheduler writes the kube-scheduler static pod's kubeconfig and its
// KubeSchedulerConfiguration (the config's cluster.scheduler.config with the
// kubeconfig set, as render_config_static_pods.go does) into n.Dir and
// returns its arguments as manageScheduler builds them.
func RenderScheduler(n Node) (*Pod, error) {
	cfg := n.Config
	if cfg == nil || cfg.Cluster() == nil || cfg.Cluster().IssuingCA() == nil {
		return nil, errors.New("kube-scheduler: the machine config has no Kubernetes CA")
	}

	secrets := filepath.Join(n.Dir, "secrets")
	configs := filepath.Join(n.Dir, "config")

	kc, err := localKubeconfig(n, schedulerUser)
	if err != nil {
		return nil, fmt.Errorf("failed to generate scheduler kubeconfig: %w", err)
	}

	if err = writeFiles(secrets, map[string][]byte{"kubeconfig": kc}); err != nil {
		return nil, err
	}

	sc := map[string]any{}
	maps.Copy(sc, cfg.Cluster().Scheduler().Config())
	sc["apiVersion"] = "kubescheduler.config.k8s.io/v1"
	sc["kind"] = "KubeSchedulerConfiguration"

	conn, _ := sc["clientConnection"].(map[string]any) //nolint:errcheck // absent or not a map: replaced
	conn = maps.Clone(conn)

	if conn == nil {
		conn = map[string]any{}
	}

	conn["kubeconfig"] = filepath.Join(secrets, "kubeconfig")
	sc["clientConnection"] = conn

	data, err := yaml.Marshal(sc)
	if err != nil {
		return nil, fmt.Errorf("error generating configuration %q for %q: %w", "scheduler-config.yaml", Scheduler, err)
	}

	if err = writeFiles(configs, map[string][]byte{"scheduler-config.yaml": data}); err != nil {
		return nil, err
	}

	args := map[string]string{
		"config":                                 filepath.Join(configs, "scheduler-config.yaml"),
		"authentication-tolerate-lookup-failure": "false",
		"authentication-kubeconfig":              filepath.Join(secrets, "kubeconfig"),
		"authorization-kubeconfig":               filepath.Join(secrets, "kubeconfig"),
		"bind-address":                           n.Bind,
		"leader-elect":                           "true",
		"profiling":                              "false",
		"tls-min-version":                        "VersionTLS13",
	}

	if err = mergeExtraArgs(args, cfg.Cluster().Scheduler().ExtraArgs(), schedulerPolicies); err != nil {
		return nil, err
	}

	return &Pod{Component: Scheduler, Args: flags(args)}, nil
}

// LocalEndpoint is the node's own API server as its components reach it
// (Talos's KubernetesRootSpec.LocalEndpoint, https://localhost:6443): the
// node's Bind address, which stands for its loopback.
func LocalEndpoint(n Node) string {
	port := n.Port
	if port == 0 {
		port = n.Config.Cluster().LocalAPIServerPort()
	}

	return "https://" + net.JoinHostPort(n.Bind, strconv.Itoa(port))
}

// localKubeconfig is a component's kubeconfig for the node's own API server,
// as KubernetesController.updateSecrets generates it. The server is the
// node's Bind address standing for localhost, so the kubeconfig names
// localhost as the server's TLS name: the serving certificate has it.
func localKubeconfig(n Node, user string) ([]byte, error) {
	return generate(n, &kubeconfig.GenerateInput{
		IssuingCA: n.Config.Cluster().IssuingCA(), CommonName: user, Organization: user,
		Endpoint: LocalEndpoint(n), Username: user, ContextName: "default",
	}, "localhost")
}

// generate fills in the cluster's name, its accepted CAs and the
// certificate lifetime, and sets the server's TLS name when one is given.
func generate(n Node, in *kubeconfig.GenerateInput, serverName string) ([]byte, error) {
	cluster := n.Config.Cluster()
	in.ClusterName = cluster.Name()
	in.AcceptedCAs = kubeconfig.AcceptedCAs(cluster)
	in.CertificateLifetime = certLifetime

	var buf bytes.Buffer
	if err := kubeconfig.Generate(in, &buf); err != nil {
		return nil, err
	}

	if serverName == "" {
		return buf.Bytes(), nil
	}

	kc, err := clientcmd.Load(buf.Bytes())
	if err != nil {
		return nil, err
	}

	for _, c := range kc.Clusters {
		c.TLSServerName = serverName
	}

	return clientcmd.Write(*kc)
}
