package kubecp

import (
	"fmt"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/resources/k8s"
	"github.com/talchaos/talchaos/sim/kubecp/k8stemplates"
	"k8s.io/apimachinery/pkg/runtime"
)

// Manifests are the bootstrap manifests Talos's control plane applies to
// the cluster (ManifestApplyController) that the simulated cluster runs:
// kube-proxy and CoreDNS, from Talos's own templates and the spec its
// BootstrapManifestsConfig controller (control_plane.go) makes of the
// config. Their pods are scheduled by the real scheduler onto the nodes and
// run by the nodes' KWOK kubelets. Flannel (the default CNI) is not among
// them: the simulated nodes have no pod network for it to build.
func Manifests(cfg config.Provider) ([]runtime.Object, error) {
	cluster := cfg.Cluster()

	proxyArgs, err := proxyArgs(cfg)
	if err != nil {
		return nil, err
	}

	dnsIPs, err := cluster.Network().DNSServiceIPs()
	if err != nil {
		return nil, err
	}

	spec := &k8s.BootstrapManifestsConfigSpec{
		ClusterDomain:  cluster.Network().DNSDomain(),
		PodCIDRs:       cluster.Network().PodCIDRs(),
		ProxyEnabled:   cluster.Proxy().Enabled(),
		ProxyImage:     cluster.Proxy().Image(),
		ProxyArgs:      proxyArgs,
		CoreDNSEnabled: cluster.CoreDNS().Enabled(),
		CoreDNSImage:   cluster.CoreDNS().Image(),
	}

	for _, ip := range dnsIPs {
		if spec.DNSServiceIP == "" && ip.Is4() {
			spec.DNSServiceIP = ip.String()
		}

		if spec.DNSServiceIPv6 == "" && ip.Is6() {
			spec.DNSServiceIPv6 = ip.String()
		}
	}

	var objs []runtime.Object

	if spec.ProxyEnabled {
		objs = append(objs,
			k8stemplates.KubeProxyServiceAccount(), k8stemplates.KubeProxyClusterRoleBinding(),
			k8stemplates.KubeProxyDaemonSetTemplate(spec))
	}

	if spec.CoreDNSEnabled {
		objs = append(objs,
			k8stemplates.CoreDNSServiceAccount(), k8stemplates.CoreDNSClusterRole(), k8stemplates.CoreDNSClusterRoleBinding(),
			k8stemplates.CoreDNSConfigMap(spec), k8stemplates.CoreDNSDeployment(spec), k8stemplates.CoreDNSService(spec))
	}

	return objs, nil
}

// proxyArgs is control_plane.go's getProxyArgs: kube-proxy's flags with the
// config's extra args (kubeconfig may not be set). Talos picks nftables for
// Kubernetes 1.31 and later unless the config names a mode.
func proxyArgs(cfg config.Provider) ([]string, error) {
	proxy := cfg.Cluster().Proxy()

	mode := proxy.Mode()
	if mode == "" {
		mode = "nftables"
	}

	args := map[string]string{
		"cluster-cidr":           strings.Join(cfg.Cluster().Network().PodCIDRs(), ","),
		"hostname-override":      "$(NODE_NAME)",
		"kubeconfig":             "/etc/kubernetes/kubeconfig",
		"proxy-mode":             mode,
		"conntrack-max-per-core": "0",
	}

	if err := mergeExtraArgs(args, proxy.ExtraArgs(), mergePolicies{denied: []string{"kubeconfig"}}); err != nil {
		return nil, fmt.Errorf("kube-proxy: %w", err)
	}

	return flags(args), nil
}
