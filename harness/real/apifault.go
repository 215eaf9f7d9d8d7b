package real

import (
	"context"
	"strings"
	"sync"

	"google.golang.org/grpc"

	"github.com/talchaos/talchaos/harness/apifault"
	"github.com/talchaos/talchaos/harness/target"
)

// clientFaults intercepts talchaos's own Talos API calls to real nodes: a real
// node cannot be made to drop a reply, but the engine's client can see exactly
// what a lost or late reply looks like.
type clientFaults struct {
	mu   sync.Mutex
	sets map[string]*apifault.Set
}

func newClientFaults() *clientFaults { return &clientFaults{sets: map[string]*apifault.Set{}} }

func (c *clientFaults) set(node string) *apifault.Set {
	c.mu.Lock()
	defer c.mu.Unlock()

	s, ok := c.sets[node]
	if !ok {
		s = &apifault.Set{}
		c.sets[node] = s
	}

	return s
}

func (c *clientFaults) add(node string, f target.APIFault) (target.Heal, error) {
	return c.set(node).Add(f)
}

func (c *clientFaults) interceptor(node string) grpc.UnaryClientInterceptor {
	s := c.set(node)

	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		a := s.Take(method[strings.LastIndex(method, "/")+1:])
		if a == nil {
			return invoker(ctx, method, req, reply, cc, opts...)
		}

		_, err := a.Intercept(ctx, func(ctx context.Context) (any, error) {
			return nil, invoker(ctx, method, req, reply, cc, opts...)
		})

		return err
	}
}
