package sim_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/talchaos/talchaos/harness/chaos"
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

	rest, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}

	rest.Timeout = 5 * time.Second
	rest.WarningHandler = restclient.NoWarnings{}

	kube, err := kubernetes.NewForConfig(rest)
	if err != nil {
		t.Fatal(err)
	}

	all := []string{nodes[0].Address, nodes[1].Address, nodes[2].Address}
	slices.Sort(all)

	endpoints := func(want []string) func() error {
		return func() error {
			ep, err := kube.CoreV1().Endpoints("default").Get(ctx, "kubernetes", metav1.GetOptions{})
			if err != nil {
				return err
			}

			var got []string

			for _, s := range ep.Subsets {
				for _, a := range s.Addresses {
					got = append(got, a.IP)
				}
			}

			slices.Sort(got)

			if !slices.Equal(got, want) {
				return fmt.Errorf("endpoints %v, want %v", got, want)
			}

			return nil
		}
	}

	eventually(t, 2*time.Minute, endpoints(all))

	inject(t, ctx, c, chaos.Reboot{Node: "cp3"})

	eventually(t, time.Minute, endpoints(all[:2]))
	eventually(t, 2*time.Minute, endpoints(all))

	if _, err := kube.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{}); err != nil {
		t.Error(errors.Join(errors.New("kube-system"), err))
	}
}
