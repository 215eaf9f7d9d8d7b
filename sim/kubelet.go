package sim

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"sync"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/siderolabs/talos/pkg/machinery/resources/k8s"
	"github.com/talchaos/talchaos/harness/kubeclient"
	"github.com/talchaos/talchaos/harness/target"
	"github.com/talchaos/talchaos/sim/kubecp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// A node's kubelet in a Kubernetes cluster (cluster.kubernetes) is KWOK's
// controller for that node (see kubecp/kubelet.go), the control plane's
// static pods (kube.go), and this: registering the Node, posting the static
// pods' mirror pods with their status, and Talos's StaticPodStatus resources
// (which `talosctl health` reads). All of it runs on real time, from the
// kubelet service's start until it stops or the node goes down. The kubelet
// reaches the API servers through its node's KubePrism (a proxy on the
// node's loopback, port 7445, to the cluster endpoint), which isolating or
// pausing the node cuts.

// portKubePrism is the proxy a node's kubelet reaches the API servers by.
const portKubePrism target.Port = "kubeprism"

// kubePrismPort is KubePrism's port (constants.DefaultKubePrismPort).
const kubePrismPort = 7445

// Kubelet's timings: its status sync (the status manager posts a change at
// once; this is how often it looks again after a failed post), the
// kubelet service's restart delay, and the static pods' probe period
// (Talos's kube-controller-manager startup probe, PeriodSeconds 5).
const (
	kubeletSyncPeriod  = 5 * time.Second
	kubeletRestart     = 5 * time.Second
	staticProbePeriod  = 5 * time.Second
	kubeRequestTimeout = 5 * time.Second
)

// kubeNodeMonitorGrace is kube-controller-manager's default
// node-monitor-grace-period in 1.35 (50 s): how long a Node stays Ready after
// its kubelet's last lease renewal.
const kubeNodeMonitorGrace = 50 * time.Second

// kubeletEnabled reports whether the node runs a kubelet with Kubernetes.
func (n *Node) kubeletEnabled() bool {
	return n.c.kube.Hyperkube != ""
}

// kubelet is a node's kubelet state: its static pods as it runs them.
type kubelet struct {
	n    *Node
	mu   sync.Mutex
	pods map[string]*staticPod
	wake chan struct{}
}

// staticPod is one static pod as kubelet knows it.
type staticPod struct {
	running, ready bool
	restarts       int32
	started        time.Time
	lastExit       *corev1.ContainerStateTerminated
	// posted is the status last written to the mirror pod; mirrored says
	// the mirror pod exists.
	posted   *corev1.PodStatus
	mirrored bool
	// written is the status last written to Talos's StaticPodStatus.
	written *corev1.PodStatus
}

func newKubelet(n *Node) *kubelet {
	return &kubelet{n: n, pods: map[string]*staticPod{}, wake: make(chan struct{}, 1)}
}

func (k *kubelet) change(component string, f func(p *staticPod)) {
	k.mu.Lock()

	p := k.pods[component]
	if p == nil {
		p = &staticPod{}
		k.pods[component] = p
	}

	f(p)
	k.mu.Unlock()

	select {
	case k.wake <- struct{}{}:
	default:
	}
}

func (k *kubelet) podDefined(component string) { k.change(component, func(*staticPod) {}) }

func (k *kubelet) podStarted(component string) {
	k.change(component, func(p *staticPod) {
		p.running, p.ready, p.started = true, false, time.Now()
	})
}

func (k *kubelet) podReady(component string, ready bool) {
	k.change(component, func(p *staticPod) { p.ready = ready && p.running })
}

// podExited is the pod's container ending with code (exitCode), as the
// kubelet records it: "Completed" for 0, "Error" otherwise.
func (k *kubelet) podExited(component string, code int32) {
	k.change(component, func(p *staticPod) {
		if p.running {
			reason := "Error"
			if code == 0 {
				reason = "Completed"
			}

			p.restarts++
			p.lastExit = &corev1.ContainerStateTerminated{
				ExitCode: code, Reason: reason, StartedAt: metav1.NewTime(p.started), FinishedAt: metav1.Now(),
			}
		}

		p.running, p.ready = false, false
	})
}

// podGone is the kubelet no longer running the pod (it stopped): Talos's
// StaticPodStatus goes with it.
func (k *kubelet) podGone(component string) {
	k.mu.Lock()
	delete(k.pods, component)
	k.mu.Unlock()

	id := "kube-system/" + component + "-" + k.n.Hostname()
	_ = k.n.resources.Destroy(context.Background(), k8s.NewStaticPodStatus(k8s.NamespaceName, id).Metadata()) //nolint:errcheck // absent is fine
}

// status is the pod's status as kubelet posts it.
func (p *staticPod) status(component, ip string) *corev1.PodStatus {
	cond := func(t corev1.PodConditionType, ok bool) corev1.PodCondition {
		s := corev1.ConditionFalse
		if ok {
			s = corev1.ConditionTrue
		}

		return corev1.PodCondition{Type: t, Status: s}
	}

	started := p.running // a copy: the status outlives the lock

	cs := corev1.ContainerStatus{
		Name: component, Ready: p.ready, RestartCount: p.restarts, Started: &started,
		Image: "registry.k8s.io/" + component + ":" + kubecp.Version,
	}

	if p.lastExit != nil {
		cs.LastTerminationState.Terminated = p.lastExit.DeepCopy()
	}

	if p.running {
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(p.started)}
	} else {
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}
	}

	return &corev1.PodStatus{
		Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{
			cond(corev1.PodInitialized, true), cond(corev1.PodReady, p.ready),
			cond(corev1.ContainersReady, p.ready), cond(corev1.PodScheduled, true),
		},
		HostIP:            ip,
		PodIP:             ip,
		ContainerStatuses: []corev1.ContainerStatus{cs},
	}
}

// probe is the static pod's probes while its process runs: the API server
// has none in Talos's pod (ready as it runs); the controller manager's
// startup probe (/healthz on 10257) makes it ready once it answers; the
// scheduler's readiness probe (/readyz on 10259) decides its readiness on
// every look.
func (n *Node) probe(ctx context.Context, k *kubelet, component string) {
	var (
		path   string
		port   int
		repeat bool
	)

	switch component {
	case kubecp.ControllerManager:
		path, port = "/healthz", 10257
	case kubecp.Scheduler:
		path, port, repeat = "/readyz", 10259, true
	default:
		k.podReady(component, true)

		return
	}

	client := &http.Client{
		Timeout: kubeRequestTimeout,
		// kubelet's HTTPS probes do not verify the server's certificate,
		// and open a connection per probe (pkg/probe/http: DisableKeepAlives),
		// so none is left behind when the probing ends.
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true}, //nolint:gosec // as kubelet probes
	}

	url := "https://" + net.JoinHostPort(n.loopbackTwin(), strconv.Itoa(port)) + path
	ready := false

	for {
		if !ready || repeat {
			ok := get(ctx, client, url)
			if ok != ready {
				ready = ok
				k.podReady(component, ok)
			}
		}

		select {
		case <-ctx.Done():
			return
		case <-time.After(staticProbePeriod):
		}
	}
}

// get reports whether a GET of url answers 2xx.
func get(ctx context.Context, client *http.Client, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}

	resp, err := client.Do(req)
	if err != nil {
		return false
	}

	resp.Body.Close() //nolint:errcheck

	return resp.StatusCode/100 == 2
}

// runKubernetes is the node's kubelet's Kubernetes side, from the kubelet
// service's start until ctx ends: on a control plane the three static pods,
// everywhere KWOK for the node and the sync of what kubelet posts.
func (n *Node) runKubernetes(ctx context.Context) {
	k := newKubelet(n)

	// The CA that signs the kubelet's certificate: the node's own on a
	// control plane, the cluster's (the control plane's CSR signer) on a
	// worker, whose config has the certificate only.
	ca := n.c.bundle.Certs.K8s
	if cfg := n.Config(); cfg != nil && cfg.Cluster() != nil && cfg.Cluster().IssuingCA() != nil && len(cfg.Cluster().IssuingCA().Key) > 0 {
		ca = cfg.Cluster().IssuingCA()
	}

	kl, err := kubecp.RenderKubelet(n.kubeNode("kubelet"), "https://"+net.JoinHostPort(n.loopbackTwin(), strconv.Itoa(kubePrismPort)), ca)
	if err != nil {
		n.machined.Printf("kubelet: %v", err)

		return
	}

	if n.kubeEnabled() {
		for component, render := range map[string]func(kubecp.Node) (*kubecp.Pod, error){
			kubecp.APIServer:         kubecp.RenderAPIServer,
			kubecp.ControllerManager: kubecp.RenderControllerManager,
			kubecp.Scheduler:         kubecp.RenderScheduler,
		} {
			n.goBoot(func() { n.runStaticPod(ctx, k, component, render) })
		}
	}

	n.goBoot(func() { n.runKWOK(ctx, kl) })

	n.mu.Lock()
	n.kubeletKubeconfig = kl.Kubeconfig
	n.mu.Unlock()

	k.sync(ctx, kl.Kubeconfig)
}

// runKWOK runs the node's KWOK controller, restarted as the kubelet service
// is when it exits.
func (n *Node) runKWOK(ctx context.Context, kl *kubecp.Kubelet) {
	logf, err := os.OpenFile(filepath.Join(n.dir, "kubelet.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		n.machined.Printf("kubelet: %v", err)

		return
	}
	defer logf.Close() //nolint:errcheck

	restart(ctx, kubeletRestart, kubeletRestart, func() {
		if err := n.runProcess(ctx, n.c.kube.Kwok, kl.Args, append([]string{"HOME=" + kl.Home}, memoryLimit("kwok")...), logf, nil); err != nil && ctx.Err() == nil {
			fmt.Fprintf(logf, "talchaos: kwok exited: %v\n", err) //nolint:errcheck
		}
	})
}

// sync registers the node and keeps the mirror pods and Talos's
// StaticPodStatus resources as the static pods are, until ctx ends.
func (k *kubelet) sync(ctx context.Context, kubeconfigPath string) {
	client, closeClient, err := kubeletClient(kubeconfigPath)
	if err != nil {
		k.n.machined.Printf("kubelet: %v", err)

		return
	}

	defer closeClient()

	var node *corev1.Node

	// Talos's control planes apply the bootstrap manifests once their API
	// server answers (ManifestApplyController); workers have none to apply.
	applied := !k.n.kubeEnabled()

	for {
		k.writeStatuses(ctx)

		if node == nil {
			if node = k.register(ctx, client); node != nil {
				node = k.uncordon(ctx, client, node)
			}
		}

		if node != nil {
			k.postPods(ctx, client, node)
		}

		if node != nil && !applied {
			applied = k.applyManifests(ctx, client)
		}

		select {
		case <-ctx.Done():
			return
		case <-k.wake:
		case <-time.After(kubeletSyncPeriod):
		}
	}
}

// register creates the node's Node (kubelet's registerWithAPIServer) or
// finds the one it registered before a reboot.
func (k *kubelet) register(ctx context.Context, client kubernetes.Interface) *corev1.Node {
	want := kubecp.NodeObject(k.n.kubeNode("kubelet"), k.n.role == target.ControlPlane)

	node, err := client.CoreV1().Nodes().Create(ctx, want, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		node, err = client.CoreV1().Nodes().Get(ctx, want.Name, metav1.GetOptions{})
	}

	if err != nil {
		return nil
	}

	return node
}

// postPods creates the missing mirror pods and posts the statuses that
// changed.
func (k *kubelet) postPods(ctx context.Context, client kubernetes.Interface, node *corev1.Node) {
	k.mu.Lock()

	type post struct {
		component string
		mirrored  bool
		status    *corev1.PodStatus
	}

	var posts []post

	for component, p := range k.pods {
		st := p.status(component, k.n.ip)
		if !p.mirrored || !reflect.DeepEqual(p.posted, st) {
			posts = append(posts, post{component, p.mirrored, st})
		}
	}

	k.mu.Unlock()

	for _, ps := range posts {
		pods := client.CoreV1().Pods("kube-system")
		mirror := kubecp.MirrorPod(ps.component, k.n.Hostname(), node)

		if !ps.mirrored {
			if _, err := pods.Create(ctx, mirror, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				continue
			}
		}

		patch, err := json.Marshal(map[string]any{"status": ps.status})
		if err != nil {
			continue
		}

		if _, err := pods.Patch(ctx, mirror.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
			continue
		}

		k.mu.Lock()
		if p := k.pods[ps.component]; p != nil {
			p.mirrored, p.posted = true, ps.status
		}
		k.mu.Unlock()
	}
}

// writeStatuses writes Talos's StaticPodStatus for every static pod the
// kubelet runs (StaticPodStatusController: from kubelet's own pod list, so
// present while the kubelet runs the pod, whatever the API servers say).
func (k *kubelet) writeStatuses(ctx context.Context) {
	k.mu.Lock()

	statuses := map[string]*corev1.PodStatus{}

	for component, p := range k.pods {
		if st := p.status(component, k.n.ip); !reflect.DeepEqual(st, p.written) {
			statuses[component] = st
		}
	}

	k.mu.Unlock()

	for component, st := range statuses {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(st)
		if err != nil {
			continue
		}

		id := "kube-system/" + component + "-" + k.n.Hostname()

		if err := safe.StateModify(ctx, k.n.resources, k8s.NewStaticPodStatus(k8s.NamespaceName, id), func(r *k8s.StaticPodStatus) error {
			r.TypedSpec().PodStatus = m

			return nil
		}); err != nil {
			continue
		}

		k.mu.Lock()
		if p := k.pods[component]; p != nil {
			p.written = st
		}
		k.mu.Unlock()
	}
}

// applyManifests creates the bootstrap manifests that are not there yet;
// it reports whether all of them are.
func (k *kubelet) applyManifests(ctx context.Context, client kubernetes.Interface) bool {
	objs, err := kubecp.Manifests(k.n.Config())
	if err != nil {
		k.n.machined.Printf("kubernetes manifests: %v", err)

		return true
	}

	for _, obj := range objs {
		var err error

		opts := metav1.CreateOptions{}

		switch o := obj.(type) {
		case *corev1.ServiceAccount:
			_, err = client.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, opts)
		case *corev1.ConfigMap:
			_, err = client.CoreV1().ConfigMaps(o.Namespace).Create(ctx, o, opts)
		case *corev1.Service:
			_, err = client.CoreV1().Services(o.Namespace).Create(ctx, o, opts)
		case *rbacv1.ClusterRole:
			_, err = client.RbacV1().ClusterRoles().Create(ctx, o, opts)
		case *rbacv1.ClusterRoleBinding:
			_, err = client.RbacV1().ClusterRoleBindings().Create(ctx, o, opts)
		case *appsv1.DaemonSet:
			_, err = client.AppsV1().DaemonSets(o.Namespace).Create(ctx, o, opts)
		case *appsv1.Deployment:
			_, err = client.AppsV1().Deployments(o.Namespace).Create(ctx, o, opts)
		default:
			err = fmt.Errorf("manifest of type %T", obj)
		}

		if err != nil && !apierrors.IsAlreadyExists(err) {
			return false
		}
	}

	return true
}

// kubeletClient is a client with the kubelet's credentials, closed by the
// function it returns.
func kubeletClient(kubeconfigPath string) (kubernetes.Interface, func(), error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfigPath)
	if err != nil {
		return nil, nil, err
	}

	cfg.Timeout = kubeRequestTimeout

	conns := &kubeclient.Conns{}
	cfg.Dial = conns.DialContext

	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, nil, err
	}

	client, err := kubernetes.NewForConfigAndClient(cfg, hc)
	if err != nil {
		hc.CloseIdleConnections()
		conns.Close()

		return nil, nil, err
	}

	return client, func() { hc.CloseIdleConnections(); conns.Close() }, nil
}
