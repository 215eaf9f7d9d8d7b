package sim

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/constants"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
)

// Timers of Talos's drain (pkg/kubernetes/kubernetes.go, v1.12.6): the whole
// drain, an evicted pod's grace period, the wait for it to go, and the pause
// after an eviction a disruption budget refused.
const (
	drainTimeout     = 5 * time.Minute
	evictGrace       = 60
	podDeletedWait   = time.Minute
	evictRetryPause  = 5 * time.Second
	podDeletedPeriod = 3 * time.Second
)

// cordonAndDrain is the upgrade's CordonAndDrainNode task
// (v1alpha1_sequencer_tasks.go): a node that never registered with
// Kubernetes is left alone; otherwise it is cordoned (NodeApplyController's
// ApplyCordoned while the stage is upgrading: unschedulable, with Talos's
// annotation so that it uncordons the node after the reboot) and drained
// (pkg/kubernetes Drain): every pod bound to it that is not a mirror pod, has
// a controller and is not a DaemonSet's is evicted with a 60 s grace period
// and waited for; a pod that cannot be evicted is a warning, not a failure.
// The Kubernetes client carries the kubelet's credentials, as Talos's does.
func (n *Node) cordonAndDrain(ctx context.Context) error {
	n.mu.Lock()
	path := n.kubeletKubeconfig
	n.mu.Unlock()

	if path == "" {
		return nil
	}

	client, closeClient, err := kubeletClient(path)
	if err != nil {
		return err
	}

	defer closeClient()

	name := n.Hostname()

	node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil // not joined yet
	}

	if err != nil {
		return err
	}

	n.machined.Printf("waiting for node to be cordoned")

	if !node.Spec.Unschedulable {
		node.Spec.Unschedulable = true

		if node.Annotations == nil {
			node.Annotations = map[string]string{}
		}

		node.Annotations[constants.AnnotationCordonedKey] = constants.AnnotationCordonedValue

		if _, err = client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("failed to cordon node %s: %w", name, err)
		}
	}

	return n.drain(ctx, client, name)
}

// drain is pkg/kubernetes Client.Drain.
func (n *Node) drain(ctx context.Context, client kubernetes.Interface, name string) error {
	ctx, cancel := context.WithTimeout(ctx, n.c.clock.Wall(drainTimeout))
	defer cancel()

	pods, err := client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.SelectorFromSet(fields.Set{"spec.nodeName": name}).String(),
	})
	if err != nil {
		return fmt.Errorf("cannot get pods for node %s: %w", name, err)
	}

	var wg sync.WaitGroup

	for _, pod := range pods.Items {
		if _, ok := pod.Annotations[corev1.MirrorPodAnnotationKey]; ok {
			n.machined.Printf("skipping mirror pod %s/%s", pod.Namespace, pod.Name)

			continue
		}

		ref := metav1.GetControllerOf(&pod)

		switch {
		case ref == nil:
			n.machined.Printf("skipping unmanaged pod %s/%s", pod.Namespace, pod.Name)

			continue
		case ref.Kind == "DaemonSet":
			n.machined.Printf("skipping DaemonSet pod %s/%s", pod.Namespace, pod.Name)

			continue
		}

		wg.Go(func() {
			if err := n.evict(ctx, client, pod); err != nil {
				n.machined.Printf("WARNING: failed to evict pod: %v", err)
			}
		})
	}

	wg.Wait()

	return nil
}

// evict is kubernetes.go's evict and waitForPodDeleted.
func (n *Node) evict(ctx context.Context, client kubernetes.Interface, p corev1.Pod) error {
	grace := int64(evictGrace)

	for {
		err := client.CoreV1().Pods(p.Namespace).EvictV1(ctx, &policyv1.Eviction{
			ObjectMeta:    metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name},
			DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: &grace},
		})

		switch {
		case apierrors.IsTooManyRequests(err):
			if !n.sleep(ctx, n.c.clock.Wall(evictRetryPause)) {
				return ctx.Err()
			}

			continue
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return fmt.Errorf("failed to evict pod %s/%s: %w", p.Namespace, p.Name, err)
		}

		break
	}

	deadline := time.Now().Add(n.c.clock.Wall(podDeletedWait))

	for {
		pod, err := client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})

		switch {
		case apierrors.IsNotFound(err), apierrors.IsForbidden(err):
			return nil
		case err == nil && pod.UID != p.UID:
			return nil
		}

		if time.Now().After(deadline) {
			return fmt.Errorf("failed waiting on pod %s/%s to be deleted: pod is still running on the node", p.Namespace, p.Name)
		}

		if !n.sleep(ctx, n.c.clock.Wall(podDeletedPeriod)) {
			return ctx.Err()
		}
	}
}

// uncordon is NodeApplyController's ApplyCordoned once the node boots again:
// a node Talos cordoned (its annotation) is made schedulable; one an
// operator cordoned stays so. It returns the node as it now is.
func (k *kubelet) uncordon(ctx context.Context, client kubernetes.Interface, node *corev1.Node) *corev1.Node {
	if !node.Spec.Unschedulable {
		return node
	}

	if _, ok := node.Annotations[constants.AnnotationCordonedKey]; !ok {
		return node
	}

	node = node.DeepCopy()
	node.Spec.Unschedulable = false
	delete(node.Annotations, constants.AnnotationCordonedKey)

	updated, err := client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
	if err != nil {
		k.n.machined.Printf("kubelet: uncordon: %v", err)

		return nil // registered again (and uncordoned) at the next sync
	}

	return updated
}
