package sim

import (
	"context"
	"fmt"
	"strings"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"

	"github.com/talchaos/talchaos/harness/target"
)

// InterceptAPI implements target.APIFaults.
func (c *Cluster) InterceptAPI(_ context.Context, node string, f target.APIFault) (target.Heal, error) {
	n := c.Node(node)
	if n == nil {
		return nil, fmt.Errorf("unknown node %q", node)
	}

	return n.apiFaults.Add(f)
}

// apiHook is the node's Talos API fault hook (talosapi.Hook).
func (n *Node) apiHook(ctx context.Context, method string, next func(context.Context) (any, error)) (any, error) {
	a := n.apiFaults.Take(method[strings.LastIndex(method, "/")+1:])
	if a == nil {
		return next(ctx)
	}

	return a.Intercept(ctx, next)
}

// etcdInterceptor sits in the node's own etcd clients (the Talos side), where a
// reply lost on the way back looks exactly like this: the server applied the
// change, the client saw its deadline pass.
func (n *Node) etcdInterceptor(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	rpc := ""

	switch method {
	case "/etcdserverpb.Cluster/MemberAdd":
		if r, ok := req.(*etcdserverpb.MemberAddRequest); ok && r.IsLearner {
			rpc = "MemberAddAsLearner"
		}
	case "/etcdserverpb.Cluster/MemberPromote":
		rpc = "MemberPromote"
	}

	if rpc == "" {
		return invoker(ctx, method, req, reply, cc, opts...)
	}

	a := n.apiFaults.Take(rpc)
	if a == nil {
		return invoker(ctx, method, req, reply, cc, opts...)
	}

	_, err := a.Intercept(ctx, func(ctx context.Context) (any, error) {
		return nil, invoker(ctx, method, req, reply, cc, opts...)
	})

	return err
}
