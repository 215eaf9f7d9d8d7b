package sim_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/siderolabs/talos/pkg/machinery/resources/k8s"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/talchaos/talchaos/harness/chaos"
	"github.com/talchaos/talchaos/harness/kubeclient"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/sim"
	"github.com/talchaos/talchaos/sim/kubecp"
	"github.com/talchaos/talchaos/sim/simtest"
)

// needKube skips, saying why, when the Kubernetes binaries are not built.
func needKube(t *testing.T) {
	t.Helper()

	if err := sim.KubernetesAvailable(); err != nil {
		t.Skipf("no Kubernetes here: %v", err)
	}
}

// bootstrapKubernetes starts the scenario's nodes, applies their configs,
// bootstraps cp1 and returns the cluster, its admin kubeconfig (as cp1's
// Talos API serves it) and a client made from it, closed with the test.
func bootstrapKubernetes(t *testing.T, ctx context.Context, sc *scenario.Scenario) (*sim.Cluster, []byte, *kubeclient.Client) {
	t.Helper()

	c := simtest.FromScenario(t, sc, 1)
	nodes := c.Nodes()

	cl := applyAndBootstrap(t, ctx, c, nodes[0].Endpoint)

	var kubeconfig []byte

	eventually(t, 30*time.Second, func() (err error) { kubeconfig, err = cl.Kubeconfig(ctx); return err })

	kube, err := kubeclient.New(kubeconfig, kubeclient.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(kube.Close)

	return c, kubeconfig, kube
}

// The real kube-apiserver on every control plane, each on its own etcd
// member: the kubernetes endpoints list every control plane once all are
// voters; a rebooted control plane leaves them (its server stops) and comes
// back once its member is back.
func TestKubernetesEndpointsFollowTheControlPlanes(t *testing.T) {
	needKube(t)
	// The Kubernetes built-ins check the endpoints of a formed cluster in
	// make test; the reboot's part, a minute of three API servers, is here.
	needLong(t)

	ctx, cancel := runningContext(4 * time.Minute)
	defer cancel()

	sc := newScenario(3)
	sc.Cluster.Kubernetes = true

	c, kubeconfig, kube := bootstrapKubernetes(t, ctx, sc)
	nodes := c.Nodes()

	all := []string{nodes[0].Address, nodes[1].Address, nodes[2].Address}
	slices.Sort(all)

	eventually(t, 2*time.Minute, func() error {
		got, err := kube.EndpointAddresses(ctx)
		if err != nil {
			return err
		}

		if !slices.Equal(got, all) {
			return fmt.Errorf("endpoints %v, want %v", got, all)
		}

		return nil
	})

	// Every version of the endpoints from here on, watched through cp1's
	// API server (the endpoint's balancer may pick cp3's, which goes away):
	// cp3's restarted API server removes its stale address at its start and
	// adds it back once ready (kubernetesservice.Controller.Start), about a
	// second apart, which polling could miss.
	cp1, err := kubeclient.New(kubeconfig, kubeclient.Options{Host: nodes[0].Address})
	if err != nil {
		t.Fatal(err)
	}
	defer cp1.Close()

	start, err := cp1.Endpoints(ctx)
	if err != nil {
		t.Fatal(err)
	}

	w, err := cp1.CoreV1().Endpoints("default").Watch(ctx, metav1.ListOptions{
		FieldSelector: "metadata.name=kubernetes", ResourceVersion: start.ResourceVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	rebooted := time.Now()

	inject(t, ctx, c, chaos.Reboot{Node: "cp3"})

	left := false
	deadline := time.After(3 * time.Minute)

	for {
		var ev watch.Event

		select {
		case <-deadline:
			t.Fatalf("cp3 did not leave and rejoin the endpoints within 3 minutes of its reboot (left: %v)", left)
		case e, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("the watch of the endpoints ended (left: %v)", left)
			}

			ev = e
		}

		ep, isEP := ev.Object.(*corev1.Endpoints)
		if !isEP {
			continue
		}

		got := kubeclient.Addresses(ep)

		switch {
		case slices.Equal(got, all[:2]) && !left:
			left = true
			t.Logf("cp3 left the endpoints %s after its reboot", time.Since(rebooted).Round(time.Millisecond))
		case slices.Equal(got, all) && left:
			t.Logf("cp3 back in the endpoints %s after its reboot", time.Since(rebooted).Round(time.Millisecond))

			if _, err := kube.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{}); err != nil {
				t.Error(errors.Join(errors.New("kube-system"), err))
			}

			return
		}
	}
}

// Every node's kubelet registers its Node and keeps it Ready; a node cut off
// (its KubePrism, the kubelet's way to the API servers, with it) stops
// renewing its lease, and the real kube-controller-manager marks it NotReady
// once the grace period has passed (node-monitor-grace-period, shortened by
// the config's extra args as an operator would); healed, KWOK posts Ready
// again.
func TestKubernetesNodesFollowTheirKubelets(t *testing.T) {
	needKube(t)

	ctx, cancel := runningContext(5 * time.Minute)
	defer cancel()

	sc := newScenario(1)
	sc.Cluster.Workers = 1
	sc.Cluster.Kubernetes = true
	sc.Cluster.ConfigPatches = []scenario.ConfigPatch{{Patch: "cluster:\n  controllerManager:\n    extraArgs:\n      node-monitor-grace-period: 15s\n"}}

	c, _, kube := bootstrapKubernetes(t, ctx, sc)

	ready := func(want map[string]corev1.ConditionStatus) func() error {
		return func() error {
			list, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}

			got := map[string]corev1.ConditionStatus{}

			for _, n := range list.Items {
				for _, cond := range n.Status.Conditions {
					if cond.Type == corev1.NodeReady {
						got[n.Name] = cond.Status
					}
				}
			}

			if !maps.Equal(got, want) {
				return fmt.Errorf("Ready conditions %v, want %v", got, want)
			}

			return nil
		}
	}

	eventually(t, 2*time.Minute, ready(map[string]corev1.ConditionStatus{"cp1": corev1.ConditionTrue, "w1": corev1.ConditionTrue}))

	cut := time.Now()
	heal := inject(t, ctx, c, chaos.Isolate{Node: "w1"})

	eventually(t, 90*time.Second, ready(map[string]corev1.ConditionStatus{"cp1": corev1.ConditionTrue, "w1": corev1.ConditionUnknown}))
	t.Logf("w1 NotReady %s after it was cut off", time.Since(cut).Round(time.Second))

	if err := heal(); err != nil {
		t.Fatal(err)
	}

	eventually(t, 90*time.Second, ready(map[string]corev1.ConditionStatus{"cp1": corev1.ConditionTrue, "w1": corev1.ConditionTrue}))
}

// A control plane running Kubernetes holds Talos's StaticPod resources
// (`talosctl get staticpods`), one per component its kubelet runs, as
// ControlPlaneStaticPodController renders them: name, labels, priority
// class, host network, the config's image, /usr/local/bin/<component>.
func TestStaticPodResources(t *testing.T) {
	needKube(t)

	ctx, cancel := runningContext(2 * time.Minute)
	defer cancel()

	sc := newScenario(1)
	sc.Cluster.Kubernetes = true

	c, _, _ := bootstrapKubernetes(t, ctx, sc)
	cl := secure(t, ctx, c, c.Nodes()[0])

	eventually(t, time.Minute, func() error {
		list, err := safe.StateListAll[*k8s.StaticPod](ctx, cl.COSI)
		if err != nil {
			return err
		}

		var got []string

		for r := range list.All() {
			var pod corev1.Pod
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(r.TypedSpec().Pod, &pod); err != nil {
				return err
			}

			id := r.Metadata().ID()
			ctr := pod.Spec.Containers

			if pod.Name != id || pod.Namespace != "kube-system" || pod.Labels["k8s-app"] != id || pod.Labels["app.kubernetes.io/managed-by"] != "Talos" ||
				pod.Spec.PriorityClassName != "system-cluster-critical" || !pod.Spec.HostNetwork || len(ctr) != 1 ||
				ctr[0].Image != "registry.k8s.io/"+id+":"+kubecp.Version || ctr[0].Command[0] != "/usr/local/bin/"+id || r.Metadata().Owner() != "k8s.ControlPlaneStaticPodController" {
				return fmt.Errorf("static pod %s: %+v", id, pod)
			}

			got = append(got, id)
		}

		if want := []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"}; !slices.Equal(got, want) {
			return fmt.Errorf("static pods %v, want %v", got, want)
		}

		return nil
	})
}
