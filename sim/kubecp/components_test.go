package kubecp_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/talchaos/talchaos/sim/kubecp"
)

// The controller manager and scheduler get Talos's flags, their extra args
// merged by Talos's policies, and kubeconfigs for the node's own API server.
func TestRenderControllerManagerAndScheduler(t *testing.T) {
	for _, tc := range []struct {
		name      string
		patch     string
		render    func(kubecp.Node) (*kubecp.Pod, error)
		component string
		want      []string
		err       string
	}{
		{
			name: "controller manager", render: kubecp.RenderControllerManager, component: kubecp.ControllerManager,
			want: []string{
				"--use-service-account-credentials", "--allocate-node-cidrs=true", "--bind-address=127.1.9.2",
				"--cluster-cidr=10.244.0.0/16", "--controllers=*,tokencleaner", "--leader-elect=true",
				"--service-cluster-ip-range=10.96.0.0/12", "--tls-min-version=VersionTLS13",
			},
		},
		{
			name:   "controller manager extra args",
			patch:  "cluster:\n  controllerManager:\n    extraArgs:\n      node-monitor-grace-period: 20s\n      controllers: bootstrapsigner\n",
			render: kubecp.RenderControllerManager, component: kubecp.ControllerManager,
			want: []string{"--node-monitor-grace-period=20s", "--controllers=*,tokencleaner,bootstrapsigner"},
		},
		{
			name:   "controller manager denied arg",
			patch:  "cluster:\n  controllerManager:\n    extraArgs:\n      root-ca-file: /x\n",
			render: kubecp.RenderControllerManager, err: `extra arg "root-ca-file" is not allowed`,
		},
		{
			name: "scheduler", render: kubecp.RenderScheduler, component: kubecp.Scheduler,
			want: []string{"--authentication-tolerate-lookup-failure=false", "--bind-address=127.1.9.2", "--leader-elect=true"},
		},
		{
			name:   "scheduler denied arg",
			patch:  "cluster:\n  scheduler:\n    extraArgs:\n      config: /x\n",
			render: kubecp.RenderScheduler, err: `extra arg "config" is not allowed`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			n := kubecp.Node{Config: controlPlaneConfig(t, tc.patch), Hostname: "cp1", Address: "198.18.9.2", Bind: "127.1.9.2", Dir: dir}

			pod, err := tc.render(n)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}

				return
			}

			if err != nil {
				t.Fatal(err)
			}

			if pod.Component != tc.component {
				t.Errorf("component %q, want %q", pod.Component, tc.component)
			}

			for _, w := range tc.want {
				if !slices.Contains(pod.Args, w) {
					t.Errorf("args lack %s: %v", w, pod.Args)
				}
			}

			kc, err := clientcmd.LoadFromFile(filepath.Join(dir, "secrets", "kubeconfig"))
			if err != nil {
				t.Fatal(err)
			}

			for _, c := range kc.Clusters {
				if c.Server != "https://127.1.9.2:6443" || c.TLSServerName != "localhost" {
					t.Errorf("kubeconfig server %s (TLS name %q), want the node's own API server as localhost", c.Server, c.TLSServerName)
				}
			}
		})
	}
}

// The scheduler's configuration is the config's, with the kubeconfig set.
func TestSchedulerConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := controlPlaneConfig(t, "cluster:\n  scheduler:\n    config:\n      percentageOfNodesToScore: 50\n")

	if _, err := kubecp.RenderScheduler(kubecp.Node{Config: cfg, Hostname: "cp1", Address: "198.18.9.2", Bind: "127.1.9.2", Dir: dir}); err != nil {
		t.Fatal(err)
	}

	data, err := os.ReadFile(filepath.Join(dir, "config", "scheduler-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}

	var got map[string]any
	if err := yaml.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}

	conn, _ := got["clientConnection"].(map[string]any)
	if got["kind"] != "KubeSchedulerConfiguration" || got["percentageOfNodesToScore"] != float64(50) ||
		conn["kubeconfig"] != filepath.Join(dir, "secrets", "kubeconfig") {
		t.Errorf("scheduler config:\n%s", data)
	}
}

// A control plane's Node carries Talos's role labels and, unless the
// cluster schedules on control planes, their taint; a worker's neither.
func TestNodeObject(t *testing.T) {
	for _, tc := range []struct {
		name         string
		patch        string
		controlPlane bool
		tainted      bool
	}{
		{"control plane", "", true, true},
		{"control plane, scheduling allowed", "cluster:\n  allowSchedulingOnControlPlanes: true\n", true, false},
		{"worker", "", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := kubecp.NodeObject(kubecp.Node{Config: controlPlaneConfig(t, tc.patch), Hostname: "n1", Address: "198.18.9.5"}, tc.controlPlane)

			_, role := n.Labels["node-role.kubernetes.io/control-plane"]
			if role != tc.controlPlane {
				t.Errorf("control-plane label: %v, want %v", role, tc.controlPlane)
			}

			if (len(n.Spec.Taints) > 0) != tc.tainted {
				t.Errorf("taints %v, want tainted %v", n.Spec.Taints, tc.tainted)
			}

			if len(n.Status.Addresses) == 0 || n.Status.Addresses[0] != (corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "198.18.9.5"}) {
				t.Errorf("addresses %v", n.Status.Addresses)
			}
		})
	}
}

// The bootstrap manifests are Talos's kube-proxy and CoreDNS, each only when
// the config enables it; kube-proxy's args are getProxyArgs's.
func TestManifests(t *testing.T) {
	kinds := func(t *testing.T, patch string) (map[string]bool, []string) {
		objs, err := kubecp.Manifests(controlPlaneConfig(t, patch))
		if err != nil {
			t.Fatal(err)
		}

		got := map[string]bool{}

		var proxyCmd []string

		for _, o := range objs {
			switch o := o.(type) {
			case *appsv1.DaemonSet:
				got["daemonset/"+o.Name] = true
				proxyCmd = o.Spec.Template.Spec.Containers[0].Command
			case *appsv1.Deployment:
				got["deployment/"+o.Name] = true
			case *corev1.Service:
				got["service/"+o.Name] = true
			}
		}

		return got, proxyCmd
	}

	got, cmd := kinds(t, "cluster:\n  proxy:\n    extraArgs:\n      metrics-bind-address: 0.0.0.0:10249\n")
	for _, want := range []string{"daemonset/kube-proxy", "deployment/coredns", "service/kube-dns"} {
		if !got[want] {
			t.Errorf("manifests lack %s: %v", want, got)
		}
	}

	joined := strings.Join(cmd, " ")
	for _, want := range []string{"--proxy-mode=nftables", "--cluster-cidr=10.244.0.0/16", "--metrics-bind-address=0.0.0.0:10249"} {
		if !strings.Contains(joined, want) {
			t.Errorf("kube-proxy command %q lacks %s", joined, want)
		}
	}

	got, _ = kinds(t, "cluster:\n  proxy:\n    disabled: true\n  coreDNS:\n    disabled: true\n")
	if len(got) != 0 {
		t.Errorf("with kube-proxy and CoreDNS disabled: %v", got)
	}
}
