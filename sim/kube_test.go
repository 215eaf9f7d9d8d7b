package sim_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/talchaos/talchaos/harness/chaos"
	"github.com/talchaos/talchaos/harness/kubeclient"
	"github.com/talchaos/talchaos/sim"
	"github.com/talchaos/talchaos/sim/simtest"
)

// needKube skips, saying why, when the Kubernetes binaries are not built.
func needKube(t *testing.T) {
	t.Helper()

	if err := sim.KubernetesAvailable(); err != nil {
		t.Skipf("no Kubernetes here: %v", err)
	}
}

// The real kube-apiserver on every control plane, each on its own etcd
// member: the kubernetes endpoints list every control plane once all are
// voters; a rebooted control plane leaves them (its server stops) and comes
// back once its member is back.
func TestKubernetesEndpointsFollowTheControlPlanes(t *testing.T) {
	needKube(t)

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	sc := newScenario(3)
	sc.Cluster.Kubernetes = true

	c := simtest.FromScenario(t, sc, 1)
	nodes := c.Nodes()

	for _, n := range nodes {
		apply(t, ctx, n)
	}

	cl := secure(t, ctx, c, nodes[0])
	eventually(t, 30*time.Second, func() error { return cl.Bootstrap(ctx, &machine.BootstrapRequest{}) })

	var kubeconfig []byte

	eventually(t, 30*time.Second, func() (err error) { kubeconfig, err = cl.Kubeconfig(ctx); return err })

	kube, err := kubeclient.New(kubeconfig, kubeclient.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer kube.Close()

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
