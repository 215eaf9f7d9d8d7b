package sim

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/talchaos/talchaos/harness/target"
)

// registry is the image registry the nodes pull from, as the sim has it:
// every image is there but those a fault hides. The sim pulls no image; an
// installer image it has is one Talos would run.
type registry struct {
	mu     sync.Mutex
	hidden []string // one entry per fault in force; "" hides every image
}

// HideImage implements target.Registry: the registry answers "not found" for
// the image (every image when it is empty) until healed.
func (c *Cluster) HideImage(_ context.Context, image string) (target.Heal, error) {
	r := &c.registry

	r.mu.Lock()
	r.hidden = append(r.hidden, image)
	r.mu.Unlock()

	var once sync.Once

	return func() error {
		once.Do(func() {
			r.mu.Lock()
			defer r.mu.Unlock()

			if i := slices.Index(r.hidden, image); i >= 0 {
				r.hidden = slices.Delete(r.hidden, i, i+1)
			}
		})

		return nil
	}, nil
}

// has reports whether the registry serves ref (normalized).
func (r *registry) has(ref string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()

	return !slices.ContainsFunc(r.hidden, func(h string) bool { return h == "" || h == ref })
}

// PullInstaller implements talosapi.Backend: an image the registry lacks
// fails its pull with containerd's text (client/pull.go,
// core/remotes/docker/resolver.go, v2.1.5), wrapped as Talos's image.Pull
// wraps it; the pull is tried once more at once (WithMaxNotFoundRetries(1):
// the exponential ticker's first wait is zero, go-retry v0.3.3), and the
// two identical errors come back as go-retry's set of one, as the field's
// logs show it ("1 error(s) occurred:").
func (n *Node) PullInstaller(_ context.Context, ref string) error {
	if n.c.registry.has(ref) {
		return nil
	}

	pullErr := fmt.Sprintf("failed to pull image %q: failed to resolve reference %q: %s: not found", ref, ref, ref)

	n.machined.Printf("retrying error: %s", pullErr)

	return fmt.Errorf("1 error(s) occurred:\n\t%s", pullErr)
}
