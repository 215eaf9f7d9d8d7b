package kubecp

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/siderolabs/crypto/x509"
	"github.com/talchaos/talchaos/harness/kubeconfig"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A simulated node's kubelet is KWOK's controller managing only that node:
// it keeps the Node's conditions and its lease in kube-node-lease (renewed
// every quarter of the 40 s lease, as kubelet does) and the status of the
// pods bound to the node. What kubelet does that KWOK does not is the sim's
// (sim/kube.go): registering the Node as kubelet and Talos's node controllers
// leave it (labels, taints, addresses), and the mirror pods of the control
// plane's static pods, whose status follows the real processes (KWOK is told
// to leave them alone).

// KubeletLeaseSeconds is kubelet's node lease duration
// (nodeLeaseDurationSeconds, 40 s); kubelet renews it every quarter of that.
const KubeletLeaseSeconds = 40

// MirrorAnnotation marks a mirror pod (kubetypes.ConfigMirrorAnnotationKey).
const MirrorAnnotation = "kubernetes.io/config.mirror"

// Kubelet is a node's rendered kubelet.
type Kubelet struct {
	// Args are KWOK's arguments, without the program name.
	Args []string
	// Kubeconfig is the kubelet's kubeconfig file, for the sim's part of it.
	Kubeconfig string
	// Home is the directory KWOK runs in (its $HOME: KWOK reads
	// ~/.kwok/kwok.yaml when it exists, and the user's must not count).
	Home string
}

// RenderKubelet writes a node's kubelet files into n.Dir: its kubeconfig for
// server (the node's way to the API servers; Talos's KubePrism on
// localhost:7445) and KWOK's configuration. The kubelet's client
// certificate is signed by ca, the cluster's Kubernetes CA: a real kubelet
// gets it through its bootstrap token and a CSR the control plane signs with
// that CA, which a worker's config does not hold.
//
// The kubelet's client certificate names the node's user
// (system:node:<hostname>) but is in system:masters rather than
// system:nodes: KWOK's stages write more than a kubelet is allowed to by the
// Node authorizer and NodeRestriction, and a refusal there would be a fault
// of the simulation, not of the cluster.
func RenderKubelet(n Node, server string, ca *x509.PEMEncodedCertificateAndKey) (*Kubelet, error) {
	if n.Config == nil || n.Config.Cluster() == nil {
		return nil, errors.New("kubelet: no machine config")
	}

	user := "system:node:" + n.Hostname

	kc, err := generate(n, &kubeconfig.GenerateInput{
		IssuingCA: ca, CommonName: user, Organization: "system:masters", Endpoint: server, Username: user, ContextName: "default",
	}, "localhost")
	if err != nil {
		return nil, fmt.Errorf("kubelet kubeconfig: %w", err)
	}

	k := &Kubelet{Kubeconfig: filepath.Join(n.Dir, "kubeconfig"), Home: n.Dir}

	if err = writeFiles(n.Dir, map[string][]byte{
		"kubeconfig": kc,
		"kwok.yaml":  []byte("apiVersion: config.kwok.x-k8s.io/v1alpha1\nkind: KwokConfiguration\noptions: {}\n"),
	}); err != nil {
		return nil, err
	}

	k.Args = []string{
		"--kubeconfig=" + k.Kubeconfig,
		"--config=" + filepath.Join(n.Dir, "kwok.yaml"),
		"--manage-all-nodes=false",
		"--manage-single-node=" + n.Hostname,
		"--node-name=" + n.Hostname,
		"--node-ip=" + n.Address,
		"--node-lease-duration-seconds=" + strconv.Itoa(KubeletLeaseSeconds),
		"--disregard-status-with-annotation-selector=" + MirrorAnnotation,
	}

	return k, nil
}

// NodeObject is the Node a node's kubelet registers, with what Talos adds
// to it: the control-plane role labels (NodeLabelSpec) and, unless the
// cluster schedules on control planes, their NoSchedule taint (kubelet's
// --register-with-taints).
func NodeObject(n Node, controlPlane bool) *corev1.Node {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: n.Hostname,
			Labels: map[string]string{
				"kubernetes.io/hostname":  n.Hostname,
				"kubernetes.io/os":        "linux",
				"kubernetes.io/arch":      "amd64",
				"beta.kubernetes.io/os":   "linux",
				"beta.kubernetes.io/arch": "amd64",
			},
			Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0"},
		},
		Status: corev1.NodeStatus{
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: n.Address},
				{Type: corev1.NodeHostName, Address: n.Hostname},
			},
			Capacity: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("2"),
				corev1.ResourceMemory: resource.MustParse("4Gi"),
				corev1.ResourcePods:   resource.MustParse("110"),
			},
			Allocatable: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("1950m"),
				corev1.ResourceMemory: resource.MustParse("3584Mi"),
				corev1.ResourcePods:   resource.MustParse("110"),
			},
			NodeInfo: corev1.NodeSystemInfo{
				KubeletVersion:  Version,
				OperatingSystem: "linux",
				Architecture:    "amd64",
				OSImage:         "Talos",
			},
		},
	}

	if controlPlane {
		node.Labels["node-role.kubernetes.io/control-plane"] = ""
		node.Labels["node.kubernetes.io/exclude-from-external-load-balancers"] = ""

		if !n.Config.Cluster().ScheduleOnControlPlanes() {
			node.Spec.Taints = []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}
		}
	}

	return node
}

// staticPodLabels are the labels ControlPlaneStaticPodController's manage*
// give a control plane's static pod.
func staticPodLabels(component string) map[string]string {
	return map[string]string{
		"tier":                         "control-plane",
		"k8s-app":                      component,
		"component":                    component,
		"app.kubernetes.io/name":       component,
		"app.kubernetes.io/version":    Version[1:],
		"app.kubernetes.io/component":  "control-plane",
		"app.kubernetes.io/managed-by": "Talos",
	}
}

// systemCriticalPriority is the priority of system-cluster-critical.
const systemCriticalPriority = int32(2000000000)

// StaticPod is the pod Talos's StaticPod resource holds for a control-plane
// component (controllers/k8s/control_plane_static_pod.go manage*): its
// name, labels, priority, host network and one container running
// /usr/local/bin/<component> with args, from image. Left out: the
// annotations of secrets and config versions, env, volumes, resources and
// security contexts (the sim runs the component as a host process).
func StaticPod(component, image string, args []string) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      component,
			Namespace: "kube-system",
			Labels:    staticPodLabels(component),
		},
		Spec: corev1.PodSpec{
			Priority:          ptr(systemCriticalPriority),
			PriorityClassName: "system-cluster-critical",
			Containers: []corev1.Container{{
				Name:    component,
				Image:   image,
				Command: append([]string{"/usr/local/bin/" + component}, args...),
			}},
			HostNetwork: true,
		},
	}
}

// MirrorPod is the mirror pod kubelet posts for a static pod on node, with
// the labels manage* give the pod and kubelet's mirror annotations.
func MirrorPod(component, hash string, node *corev1.Node) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      component + "-" + node.Name,
			Namespace: "kube-system",
			Labels:    staticPodLabels(component),
			Annotations: map[string]string{
				MirrorAnnotation:              hash,
				"kubernetes.io/config.hash":   hash,
				"kubernetes.io/config.source": "file",
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID, Controller: ptr(true),
			}},
		},
		Spec: corev1.PodSpec{
			NodeName:          node.Name,
			HostNetwork:       true,
			PriorityClassName: "system-cluster-critical",
			Priority:          ptr(systemCriticalPriority),
			Containers:        []corev1.Container{{Name: component, Image: "registry.k8s.io/" + component + ":" + Version}},
			Tolerations:       []corev1.Toleration{{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}},
		},
	}
}

func ptr[T any](v T) *T { return &v }
