package check

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/resources/k8s"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/kubeclient"
	"github.com/talchaos/talchaos/harness/target"
)

// Kubernetes, in a run that has it, is seen as a user sees it: with the
// admin kubeconfig a control plane's Talos API serves (talosctl kubeconfig),
// against each control plane's API server at its own address, asking what
// `talosctl health` and FR-000's second loop ask: is it ready (/readyz), and
// which addresses do the kubernetes endpoints list.

// kubeClients holds the cluster's kubeconfig once a control plane served it,
// and a client per control plane made from it.
type kubeClients struct {
	mu         sync.Mutex
	kubeconfig []byte
	clients    map[string]*kubeclient.Client
}

// close closes the clients' idle connections: none outlives the observer.
func (k *kubeClients) close() {
	if k == nil {
		return
	}

	k.mu.Lock()
	defer k.mu.Unlock()

	for _, c := range k.clients {
		c.Close()
	}
}

// WatchKubernetes makes the observer look at every control plane's API server.
// Call it before Run.
func (o *Observer) WatchKubernetes() {
	o.kube = &kubeClients{clients: map[string]*kubeclient.Client{}}
}

// kubeFor is the client for a control plane's API server, at its own
// address, fetching the kubeconfig through its Talos API the first time one
// is needed.
func (o *Observer) kubeFor(ctx context.Context, n target.Node) (*kubeclient.Client, error) {
	k := o.kube

	k.mu.Lock()
	defer k.mu.Unlock()

	if c := k.clients[n.Name]; c != nil {
		return c, nil
	}

	if k.kubeconfig == nil {
		data, err := o.clients[n.Name].secure.Kubeconfig(ctx)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig: %w", err)
		}

		k.kubeconfig = data
	}

	// One look per poll: client-go's own retries would outlast it.
	c, err := kubeclient.New(k.kubeconfig, kubeclient.Options{Host: n.Address, Timeout: pollTimeout, OneTry: true})
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}

	k.clients[n.Name] = c

	return c, nil
}

// kubeAnswer is a control plane's API server, from a poll that started at `at`.
type kubeAnswer struct {
	at  time.Duration
	api *history.APIServer
}

// pollKubeLoop polls a control plane's API server while its last look showed
// it configured; otherwise it forgets what it saw.
func (o *Observer) pollKubeLoop(ctx context.Context, n target.Node) {
	o.pollPart(ctx, n,
		func(*history.NodeObservation) bool { return true },
		func(started time.Duration, _ *history.NodeObservation) {
			api := o.pollKube(ctx, n)

			o.answersMu.Lock()
			if cur, ok := o.kubeAnswers[n.Name]; !ok || cur.at <= started {
				o.kubeAnswers[n.Name] = kubeAnswer{at: started, api: api}
			}
			o.answersMu.Unlock()
		},
		func() { delete(o.kubeAnswers, n.Name) })
}

// pollKube asks a control plane's API server whether it is ready and what
// the kubernetes endpoints list.
func (o *Observer) pollKube(ctx context.Context, n target.Node) *history.APIServer {
	defer o.timed()()

	ctx, cancel := context.WithTimeout(ctx, pollTimeout)
	defer cancel()

	c, err := o.kubeFor(ctx, n)
	if err != nil {
		return &history.APIServer{Error: err.Error()}
	}

	api := &history.APIServer{}

	body, err := c.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err == nil {
		api.Ready = true
	} else {
		api.Error = readyzFailure(body, err)
	}

	if eps, err := c.EndpointAddresses(ctx); err == nil {
		api.Endpoints = eps
	}

	if nodes, err := c.Nodes(ctx); err == nil {
		api.Nodes = nodes
	}

	return api
}

// readyzFailure is why /readyz failed: the checks it lists as failed
// ("[-]etcd failed: reason withheld"), or the request's error.
func readyzFailure(body []byte, err error) string {
	var failed []string

	for line := range strings.SplitSeq(string(body), "\n") {
		if rest, ok := strings.CutPrefix(line, "[-]"); ok {
			failed = append(failed, rest)
		}
	}

	// The first few say why; the rest (post-start hooks waiting on storage)
	// follow from them.
	const shown = 3

	if len(failed) > shown {
		failed = append(failed[:shown], fmt.Sprintf("and %d more", len(failed)-shown))
	}

	if len(failed) > 0 {
		return "readyz: " + strings.Join(failed, "; ")
	}

	var se interface{ Status() metav1.Status }
	if errors.As(err, &se) && se.Status().Message != "" {
		return "readyz: " + se.Status().Message
	}

	return err.Error()
}

// withKube is a node's look with its API server part.
func withKube(no *history.NodeObservation, k kubeAnswer, ok bool) *history.NodeObservation {
	if !ok || no == nil || no.Mode != history.ModeConfigured || no.APIServer != nil {
		return no
	}

	c := *no
	c.APIServer = k.api

	return &c
}

// apiServerPodPrefix begins the ID of a control plane's kube-apiserver
// StaticPodStatus: the mirror pod's "kube-system/kube-apiserver-<node name>"
// (Talos's StaticPodStatusController).
const apiServerPodPrefix = "kube-system/kube-apiserver-"

// apiServerPod is the node's kube-apiserver static pod as its kubelet
// reports it through Talos (`talosctl get staticpodstatus`); nil when the
// node has none or does not answer.
func apiServerPod(ctx context.Context, c *client.Client) *history.StaticPod {
	list, err := safe.StateListAll[*k8s.StaticPodStatus](ctx, c.COSI)
	if err != nil {
		return nil
	}

	for r := range list.All() {
		if !strings.HasPrefix(r.Metadata().ID(), apiServerPodPrefix) {
			continue
		}

		var st corev1.PodStatus
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(r.TypedSpec().PodStatus, &st); err != nil {
			return nil
		}

		return staticPodOf(&st)
	}

	return nil
}

// staticPodOf reads a static pod's status: its one container's.
func staticPodOf(st *corev1.PodStatus) *history.StaticPod {
	pod := &history.StaticPod{}

	for _, cs := range st.ContainerStatuses {
		pod.Running = cs.State.Running != nil
		pod.Ready = cs.Ready && pod.Running
		pod.Restarts = int(cs.RestartCount)

		if w := cs.State.Waiting; w != nil {
			pod.Waiting = w.Reason
		}

		if t := cs.LastTerminationState.Terminated; t != nil {
			code := int(t.ExitCode)
			pod.LastExit = &code
		}
	}

	return pod
}
