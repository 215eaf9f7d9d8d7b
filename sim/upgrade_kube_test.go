package sim_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/client"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// An upgrade of a node registered with Kubernetes cordons it with Talos's
// annotation, evicts its managed pods (CoreDNS's, on the worker: the
// control plane is tainted) and, once it is back, the kubelet uncordons it.
// Every version of the Node and of its pods is watched, which polling could
// miss at this time scale.
func TestUpgradeCordonsDrainsAndUncordons(t *testing.T) {
	needKube(t)
	needLong(t) // make compat's TestKubernetesAgainstUp upgrades a worker through kubectl too

	ctx, cancel := runningContext(5 * time.Minute)
	defer cancel()

	sc := newScenario(1)
	sc.Cluster.Workers = 1
	sc.Cluster.Kubernetes = true

	c, _, kube := bootstrapKubernetes(t, ctx, sc)
	w1 := c.Nodes()[1]

	var onW1 []string

	eventually(t, 3*time.Minute, func() error {
		pods, err := kube.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=w1", LabelSelector: "k8s-app=kube-dns"})
		if err != nil {
			return err
		}

		onW1 = onW1[:0]

		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				onW1 = append(onW1, p.Name)
			}
		}

		if len(onW1) == 0 {
			return fmt.Errorf("no CoreDNS pod running on w1 (%d listed)", len(pods.Items))
		}

		return nil
	})

	node, err := kube.CoreV1().Nodes().Get(ctx, "w1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	nodes, err := kube.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=w1", ResourceVersion: node.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer nodes.Stop()

	pods, err := kube.CoreV1().Pods("kube-system").Watch(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=w1"})
	if err != nil {
		t.Fatal(err)
	}
	defer pods.Stop()

	cl := secure(t, ctx, c, w1)
	if _, err := cl.UpgradeWithOptions(ctx, client.WithUpgradeImage("ghcr.io/siderolabs/installer:v1.12.7")); err != nil {
		t.Fatal(err)
	}

	evicted := map[string]bool{}
	cordoned, uncordoned := false, false
	deadline := time.After(3 * time.Minute)

	for !uncordoned || len(evicted) < len(onW1) {
		select {
		case <-deadline:
			t.Fatalf("cordoned %v, uncordoned %v, evicted %v of %v", cordoned, uncordoned, evicted, onW1)
		case ev := <-pods.ResultChan():
			if p, ok := ev.Object.(*corev1.Pod); ok && (ev.Type == watch.Deleted || p.DeletionTimestamp != nil) {
				evicted[p.Name] = true
			}
		case ev, ok := <-nodes.ResultChan():
			if !ok {
				t.Fatal("the watch of w1 ended")
			}

			n, isNode := ev.Object.(*corev1.Node)
			if !isNode {
				continue
			}

			_, annotated := n.Annotations["talos.dev/cordoned"]

			switch {
			case n.Spec.Unschedulable && annotated:
				cordoned = true
			case cordoned && !n.Spec.Unschedulable && !annotated:
				uncordoned = true
			}
		}
	}

	for _, name := range onW1 {
		if !evicted[name] {
			t.Errorf("CoreDNS pod %s on w1 was not evicted", name)
		}
	}
}
