// Package kubeclient is the Kubernetes API as the engine uses it: a client
// made from the admin kubeconfig a control plane's Talos API serves, as
// kubectl makes one, and the question FR-000's second loop asks of it (which
// addresses the kubernetes endpoints list).
package kubeclient

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/talchaos/talchaos/harness/history"
)

// Options adjust the client a kubeconfig makes.
type Options struct {
	// Host replaces the host of the kubeconfig's server (its port is kept,
	// 6443 when it names none): one API server rather than the endpoint.
	Host string
	// Timeout bounds each request; 0: none.
	Timeout time.Duration
	// OneTry turns off client-go's rate limiter, so that a caller that polls
	// makes one request per look.
	OneTry bool
}

// Client is a Kubernetes client; Close closes its connections.
type Client struct {
	*kubernetes.Clientset

	http  *http.Client
	conns *Conns
}

// Conns dials and keeps every connection it made until it is closed:
// closing an HTTP client's idle connections misses one that a request
// ending (a watch stopped, a context cancelled) is about to give back,
// whose reader then outlives the client.
type Conns struct {
	mu  sync.Mutex
	set map[net.Conn]struct{}
}

// DialContext dials as net.Dialer does (30 s timeout and keep-alive, as
// client-go's default transport) and keeps the connection.
func (c *Conns) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	conn, err := (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}

	c.mu.Lock()
	defer c.mu.Unlock()

	if c.set == nil {
		c.set = map[net.Conn]struct{}{}
	}

	c.set[conn] = struct{}{}

	return conn, nil
}

// Close closes every connection it made.
func (c *Conns) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()

	for conn := range c.set {
		conn.Close() //nolint:errcheck,gosec // may be closed already
	}

	c.set = nil
}

// New makes a client from a kubeconfig. Deprecation warnings (v1 Endpoints)
// are not printed.
func New(kubeconfig []byte, opts Options) (*Client, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, err
	}

	cfg.WarningHandler = rest.NoWarnings{}
	cfg.Timeout = opts.Timeout

	if opts.OneTry {
		cfg.QPS, cfg.Burst = -1, 0
	}

	if opts.Host != "" {
		port := "6443"
		if u, err := url.Parse(cfg.Host); err == nil && u.Port() != "" {
			port = u.Port()
		}

		cfg.Host = "https://" + net.JoinHostPort(opts.Host, port)
	}

	conns := &Conns{}
	cfg.Dial = conns.DialContext

	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}

	cs, err := kubernetes.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}

	return &Client{Clientset: cs, http: hc, conns: conns}, nil
}

// Close closes the client's connections.
func (c *Client) Close() {
	if c != nil {
		c.http.CloseIdleConnections()
		c.conns.Close()
	}
}

// Endpoints is `kubectl get endpoints kubernetes -n default`.
func (c *Client) Endpoints(ctx context.Context) (*corev1.Endpoints, error) {
	return c.CoreV1().Endpoints(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
}

// EndpointAddresses are the addresses the kubernetes endpoints list, sorted.
func (c *Client) EndpointAddresses(ctx context.Context) ([]string, error) {
	ep, err := c.Endpoints(ctx)
	if err != nil {
		return nil, err
	}

	return Addresses(ep), nil
}

// Addresses are an Endpoints object's addresses, sorted; never nil.
func Addresses(ep *corev1.Endpoints) []string {
	out := []string{}

	for _, s := range ep.Subsets {
		for _, a := range s.Addresses {
			out = append(out, a.IP)
		}
	}

	slices.Sort(out)

	return out
}

// Nodes is `kubectl get nodes` as the history keeps it: each Node's name,
// InternalIP and Ready condition, sorted by name; never nil.
func (c *Client) Nodes(ctx context.Context) ([]history.KubeNode, error) {
	list, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}

	out := []history.KubeNode{}

	for _, n := range list.Items {
		k := history.KubeNode{Name: n.Name}

		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP && k.Address == "" {
				k.Address = a.Address
			}
		}

		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				k.Ready, k.Reason, k.Message = cond.Status == corev1.ConditionTrue, cond.Reason, cond.Message
			}
		}

		out = append(out, k)
	}

	slices.SortFunc(out, func(a, b history.KubeNode) int { return strings.Compare(a.Name, b.Name) })

	return out, nil
}
