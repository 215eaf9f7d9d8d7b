package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// DiscoveryServer is the cluster's discovery registry when nodes run as
// separate processes: each node registers itself once it holds a config and
// unregisters when a reset wipes it; a node's etcd join takes the control
// planes' etcd endpoints from it, and its Members the nodes. Like Talos's discovery service it lives outside the
// nodes, so entries stay while a node is down or cut off, and a partition
// between two nodes does not hide one from the other.
//
// Hand-rolled: Talos's discovery service (siderolabs/discovery-service) speaks
// encrypted affiliate data over gRPC, which a node's etcd join only needs the
// outcome of.
type DiscoveryServer struct {
	mu    sync.Mutex
	order []string
	nodes map[string]Affiliate
}

// Affiliate is one node as it registers: enough for the etcd join's
// endpoints, and, once it has a config, what Talos's LocalAffiliateController
// publishes about it (internal/app/machined/pkg/controllers/cluster/
// local_affiliate.go).
type Affiliate struct {
	// Address is the node's main address, Addresses all it publishes (its
	// routed addresses: LocalAffiliateController), the main one first.
	Address      string   `json:"address"`
	Addresses    []string `json:"addresses,omitempty"`
	ControlPlane bool     `json:"controlPlane"`
	Configured   bool     `json:"configured"`

	NodeID        string `json:"nodeId,omitempty"`
	Hostname      string `json:"hostname,omitempty"`
	Nodename      string `json:"nodename,omitempty"`
	ClusterID     string `json:"clusterId,omitempty"`
	APIServerPort int    `json:"apiServerPort,omitempty"`
	// Discovery: cluster discovery is on in the node's config; Published:
	// and so is its service registry, so other nodes see it.
	Discovery bool `json:"discovery,omitempty"`
	Published bool `json:"published,omitempty"`
}

// NewDiscoveryServer lists endpoints in the order of names (the cluster's).
func NewDiscoveryServer(names []string) *DiscoveryServer {
	return &DiscoveryServer{order: slices.Clone(names), nodes: map[string]Affiliate{}}
}

// ServeHTTP implements http.Handler: PUT /affiliates/NAME registers, GET
// /affiliates lists every configured node as it registered.
func (s *DiscoveryServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/affiliates/"):
		name := strings.TrimPrefix(r.URL.Path, "/affiliates/")

		var a Affiliate
		if err := json.NewDecoder(r.Body).Decode(&a); err != nil || !slices.Contains(s.order, name) {
			http.Error(w, "bad affiliate", http.StatusBadRequest)

			return
		}

		s.mu.Lock()
		s.nodes[name] = a
		s.mu.Unlock()

		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodGet && r.URL.Path == "/affiliates":
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(s.Affiliates()) //nolint:errcheck
	default:
		http.NotFound(w, r)
	}
}

// Affiliates lists the configured nodes in the cluster's order.
func (s *DiscoveryServer) Affiliates() []Affiliate {
	s.mu.Lock()
	defer s.mu.Unlock()

	out := []Affiliate{}

	for _, name := range s.order {
		if a, ok := s.nodes[name]; ok && a.Configured {
			out = append(out, a)
		}
	}

	return out
}

// discoveryClient is a node process's view of the registry. Talos keeps its
// discovered affiliates as resources: a registry that cannot be reached for a
// moment leaves the last list in place.
type discoveryClient struct {
	base string
	http http.Client

	mu   sync.Mutex
	last []Affiliate
}

// affiliates is the registry's list of configured nodes; the last one
// received while it cannot be reached.
func (d *discoveryClient) affiliates() []Affiliate {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()

	var list []Affiliate

	err := d.do(ctx, http.MethodGet, "/affiliates", nil, &list)

	d.mu.Lock()
	defer d.mu.Unlock()

	if err == nil {
		d.last = list
	}

	return slices.Clone(d.last)
}

func (d *discoveryClient) put(ctx context.Context, name string, a Affiliate) error {
	return d.do(ctx, http.MethodPut, "/affiliates/"+name, a, nil)
}

func (d *discoveryClient) do(ctx context.Context, method, path string, in, out any) error {
	var body strings.Builder
	if in != nil {
		if err := json.NewEncoder(&body).Encode(in); err != nil {
			return err
		}
	}

	req, err := http.NewRequestWithContext(ctx, method, d.base+path, strings.NewReader(body.String()))
	if err != nil {
		return err
	}

	resp, err := d.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close() //nolint:errcheck

	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("discovery: %s %s: %s", method, path, resp.Status)
	}

	if out != nil {
		return json.NewDecoder(resp.Body).Decode(out)
	}

	return nil
}

// register keeps the node's registration in step with its config: at start
// and after every change (saveState), retried until the registry has it.
func (n *Node) register() {
	d := n.c.discovery
	if d == nil {
		return
	}

	for {
		a := n.affiliate()

		for {
			ctx, cancel := context.WithTimeout(n.c.ctx, 2*time.Second)
			err := d.put(ctx, n.name, a)
			cancel()

			if err == nil || !n.sleep(n.c.ctx, 200*time.Millisecond) {
				break
			}
		}

		select {
		case <-n.c.ctx.Done():
			return
		case <-n.registered:
		}
	}
}
