package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/siderolabs/talos/pkg/machinery/resources/k8s"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/talchaos/talchaos/harness/childproc"
	"github.com/talchaos/talchaos/harness/scratch"
	"github.com/talchaos/talchaos/harness/target"
	"github.com/talchaos/talchaos/sim/kubecp"
)

// Kubernetes on the simulated control plane (cluster.kubernetes): each control
// plane's kubelet runs the real kube-apiserver as Talos's static pod, talking
// to that node's own etcd member only, so an API server whose member is a
// learner, not started or failed is not ready and drops out of the
// `kubernetes` endpoints by itself (the lease reconciler, real). It listens
// behind a proxy on the node's address, port 6443, so isolating or pausing the
// node cuts it as it cuts the Talos API; a balancer on the cluster's
// endpoint (<block>.1:6443, see hostaddr.go) spreads connections over the
// control planes, as the VIP or external balancer of a real cluster does.
// Kubernetes runs on real time, as etcd does.

// portKubeAPIServer is the proxy in front of a control plane's API server.
const portKubeAPIServer target.Port = "kube-apiserver"

// Kubelet's container restart back-off (pkg/kubelet/kubelet.go:
// backOffPeriod 10 s doubling to MaxContainerBackOff 300 s, forgotten after a
// container ran for twice the maximum), and how long a stopped API server
// may take to shut down before it is killed (the pod's grace period).
const (
	kubeBackoffInitial = 10 * time.Second
	kubeBackoffMax     = 300 * time.Second
	kubeGracePeriod    = 30 * time.Second
)

// loopbackTwin is where a node's backends sit behind its proxies when they
// must be reached from a loopback source (its etcd peer listener, its API
// server): 127.1.<block>.<node>, on the loopback interface as well and not
// used by node addresses (the node's own address moved there when it is
// 198.18.<block>.<node>).
func (n *Node) loopbackTwin() string {
	return fmt.Sprintf("127.1.%d.%d", n.c.block, n.index+2)
}

// Kubernetes reports whether the cluster runs Kubernetes (cluster.kubernetes).
func (c *Cluster) Kubernetes() bool { return c.kube.Hyperkube != "" }

// kubeEnabled reports whether the node runs the control plane's static pods.
func (n *Node) kubeEnabled() bool {
	return n.c.kube.Hyperkube != "" && n.role == target.ControlPlane
}

// apiPorts are the ports isolation and a paused node blackhole for the engine.
func (n *Node) apiPorts() []target.Port {
	ports := []target.Port{target.PortTalosAPI}

	for _, p := range []target.Port{portKubeAPIServer, portKubePrism} {
		if _, ok := n.proxies[p]; ok {
			ports = append(ports, p)
		}
	}

	return ports
}

// runStaticPod is the kubelet running one static pod until ctx ends (the
// kubelet stops, the node goes down): the pod's files are rendered from the
// applied config when the kubelet starts it, as Talos's controllers have
// them ready, and its process is restarted whenever it exits, after
// kubelet's back-off. What it does is told to k, which posts the pod's
// mirror and status.
func (n *Node) runStaticPod(ctx context.Context, k *kubelet, component string, render func(kubecp.Node) (*kubecp.Pod, error)) {
	logf, err := os.OpenFile(filepath.Join(n.dir, component+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		n.machined.Printf("%s: %v", component, err)

		return
	}
	defer logf.Close() //nolint:errcheck

	pod, err := render(n.kubeNode(component))
	if err != nil {
		fmt.Fprintf(logf, "talchaos: %s static pod: %v\n", component, err) //nolint:errcheck

		return
	}

	if err := n.writeStaticPod(component, pod); err != nil {
		fmt.Fprintf(logf, "talchaos: %s static pod resource: %v\n", component, err) //nolint:errcheck
	}

	defer n.removeStaticPod(component)

	k.podDefined(component)
	defer k.podGone(component)

	restart(ctx, kubeBackoffInitial, kubeBackoffMax, func() {
		err := n.runProcess(ctx, n.c.kube.Hyperkube, append([]string{component}, pod.Args...), memoryLimit(component), logf, func(pctx context.Context) {
			k.podStarted(component)
			n.probe(pctx, k, component)
		})
		k.podExited(component, exitCode(err))

		// Its port closed with it: the proxy in front refuses from now on.
		if component == kubecp.APIServer {
			n.proxies[portKubeAPIServer].UpstreamGone()
		}

		if err != nil && ctx.Err() == nil {
			fmt.Fprintf(logf, "talchaos: %s exited: %v\n", component, err) //nolint:errcheck
		}
	})
}

// exitCode is a container's exit code as the kubelet reports it: the
// process's own, 128 plus the signal's number for one a signal ended (as
// containerd reports it), 0 for a clean end, and 1 for a process that did
// not start.
func exitCode(err error) int32 {
	if code, ok := childproc.ExitCode(err); ok {
		return int32(code)
	}

	if err != nil {
		return 1
	}

	return 0
}

// staticPodOwner is the controller that writes Talos's StaticPod resources.
const staticPodOwner = "k8s.ControlPlaneStaticPodController"

// writeStaticPod writes the StaticPod resource of a component the kubelet
// runs (id: the component), its pod as kubecp.StaticPod renders it with the
// config's image.
func (n *Node) writeStaticPod(component string, pod *kubecp.Pod) error {
	cfg := n.Config()
	if cfg == nil || cfg.Cluster() == nil {
		return errors.New("no cluster config")
	}

	image := map[string]string{
		kubecp.APIServer:         cfg.Cluster().APIServer().Image(),
		kubecp.ControllerManager: cfg.Cluster().ControllerManager().Image(),
		kubecp.Scheduler:         cfg.Cluster().Scheduler().Image(),
	}[component]

	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(kubecp.StaticPod(component, image, pod.Args))
	if err != nil {
		return err
	}

	return safe.StateModify(context.Background(), n.resources, k8s.NewStaticPod(k8s.NamespaceName, component), func(r *k8s.StaticPod) error {
		r.TypedSpec().Pod = obj

		return nil
	}, state.WithUpdateOwner(staticPodOwner))
}

// removeStaticPod removes it when the kubelet no longer runs the pod.
func (n *Node) removeStaticPod(component string) {
	_ = destroy(context.Background(), n.resources, k8s.NewStaticPod(k8s.NamespaceName, component).Metadata(), state.WithDestroyOwner(staticPodOwner)) //nolint:errcheck // the state is in memory
}

// kubeNode is what the node's Kubernetes components are rendered from; dir
// names the component's own directory.
func (n *Node) kubeNode(dir string) kubecp.Node {
	return kubecp.Node{
		Config:     n.Config(),
		Hostname:   n.Hostname(),
		Address:    n.ip,
		Bind:       n.loopbackTwin(),
		EtcdServer: fmt.Sprintf("https://%s:%d", n.ip, backendClient),
		Dir:        filepath.Join(n.dir, dir),
	}
}

// restart runs f until ctx ends, waiting after each run as kubelet's
// container back-off does: from initial doubling to max, forgotten once a
// run lasted twice the maximum.
func restart(ctx context.Context, initial, maximum time.Duration, f func()) {
	backoff := initial

	for ctx.Err() == nil {
		started := time.Now()

		f()

		if time.Since(started) > 2*maximum {
			backoff = initial
		}

		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}

		backoff = min(2*backoff, maximum)
	}
}

// runProcess runs a program of the node's once, until it exits or ctx ends:
// a clean stop sends SIGTERM and waits the grace period; a power cut kills
// it. While it runs, running (when set) is called with a context that ends
// when it does.
func (n *Node) runProcess(ctx context.Context, path string, args, env []string, out io.Writer, running func(context.Context)) error {
	cmd := exec.Command(path, args...) //nolint:gosec // our own binaries and rendered flags
	cmd.Env = append(append(os.Environ(), scratch.Env()), env...)
	cmd.Stdout, cmd.Stderr = out, out
	childproc.Prepare(cmd)

	startedCh, waited := childproc.StartLocked(cmd)
	if err := <-startedCh; err != nil {
		return err
	}

	pctx, cancel := context.WithCancel(ctx)
	defer cancel()

	if running != nil {
		go running(pctx)
	}

	select {
	case err := <-waited:
		return err
	case <-ctx.Done():
	}

	pid := cmd.Process.Pid

	// A power cut, or the whole cluster going away, gives no time to stop.
	if n.powerCut.Load() || n.c.ctx.Err() != nil {
		childproc.KillGroup(pid) //nolint:errcheck
	} else {
		childproc.SignalGroup(pid, syscall.SIGTERM) //nolint:errcheck

		select {
		case <-waited:
			return nil
		case <-time.After(kubeGracePeriod):
			childproc.KillGroup(pid) //nolint:errcheck
		}
	}

	<-waited

	return nil
}

// The API server's endpoint lease reconciler (pkg/controlplane/instance.go
// DefaultEndpointReconcilerInterval and DefaultEndpointReconcilerTTL): real
// time, listed in the clock floors.
const (
	kubeEndpointInterval = 10 * time.Second
	kubeEndpointTTL      = 15 * time.Second
)

// kubeBalancer is the cluster endpoint's balancer: connections go to the
// control planes' API server ports in turn, with no health check (a VIP or a
// plain TCP balancer), so a client may land on a server that is down and
// tries again, as it would on a real cluster.
type kubeBalancer struct {
	l       net.Listener
	targets []string
	mu      sync.Mutex
	next    int
	wg      sync.WaitGroup
	cancel  context.CancelFunc
}

// startKubeBalancer listens on the configs' control-plane endpoint.
func (c *Cluster) startKubeBalancer() error {
	u, err := url.Parse(c.endpoint)
	if err != nil {
		return err
	}

	var targets []string

	for _, n := range c.nodes {
		if n.role == target.ControlPlane {
			targets = append(targets, net.JoinHostPort(n.ip, strconv.Itoa(kubePort)))
		}
	}

	b, err := listenKubeBalancer(c.ctx, u.Host, targets)
	if err != nil {
		return err
	}

	c.kubeLB = b

	return nil
}

// listenKubeBalancer balances connections to listen over targets until ctx
// ends or it is closed.
func listenKubeBalancer(ctx context.Context, listen string, targets []string) (*kubeBalancer, error) {
	if len(targets) == 0 {
		return nil, errors.New("control-plane endpoint: no control plane to balance over")
	}

	b := &kubeBalancer{targets: targets}

	var err error
	if b.l, err = net.Listen("tcp", listen); err != nil {
		return nil, fmt.Errorf("control-plane endpoint %s: %w", listen, err)
	}

	ctx, b.cancel = context.WithCancel(ctx)
	b.wg.Go(func() { b.serve(ctx) })

	return b, nil
}

// KubeEndpoint is a cluster endpoint's balancer served outside the nodes
// (the container target's, on the host's end of the run's network): the
// sim's, over the control planes' API server addresses.
type KubeEndpoint struct{ b *kubeBalancer }

// ServeKubeEndpoint listens on listen (host:port) and spreads connections
// over targets (every control plane's host:6443) as the sim's cluster
// endpoint does, until Close.
func ServeKubeEndpoint(listen string, targets []string) (*KubeEndpoint, error) {
	b, err := listenKubeBalancer(context.Background(), listen, targets)
	if err != nil {
		return nil, err
	}

	return &KubeEndpoint{b: b}, nil
}

// Close stops it and ends the connections in flight.
func (e *KubeEndpoint) Close() {
	if e != nil {
		e.b.close()
	}
}

// KubePort is the API server's port on every control plane and on the
// cluster endpoint.
const KubePort = kubePort

// kubePort is the API server's port on every control plane.
const kubePort = 6443

func (b *kubeBalancer) serve(ctx context.Context) {
	for {
		conn, err := b.l.Accept()
		if err != nil {
			return
		}

		b.wg.Go(func() { b.forward(ctx, conn) })
	}
}

func (b *kubeBalancer) forward(ctx context.Context, conn net.Conn) {
	defer conn.Close() //nolint:errcheck

	b.mu.Lock()
	first := b.next
	b.next = (b.next + 1) % len(b.targets)
	b.mu.Unlock()

	d := net.Dialer{Timeout: time.Second}

	up, err := d.DialContext(ctx, "tcp", b.targets[first])
	if err != nil {
		return
	}
	defer up.Close() //nolint:errcheck

	stop := context.AfterFunc(ctx, func() {
		conn.Close() //nolint:errcheck
		up.Close()   //nolint:errcheck
	})
	defer stop()

	done := make(chan struct{}, 2)

	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)

		if tc, ok := dst.(*net.TCPConn); ok {
			tc.CloseWrite() //nolint:errcheck
		}

		done <- struct{}{}
	}

	go pipe(up, conn)
	go pipe(conn, up)

	<-done
	<-done
}

// close stops accepting, ends the connections in flight and waits for them.
func (b *kubeBalancer) close() {
	if b == nil {
		return
	}

	b.l.Close() //nolint:errcheck // closing it is all that is wanted
	b.cancel()
	b.wg.Wait()
}

// memoryLimits are the Go runtime's soft memory limits the simulated
// control plane's processes run with (GOMEMLIMIT): above its live heap a
// process collects sooner instead of letting its heap double, which kept
// a 3 + 1 cluster's processes (nine control-plane components, four
// kubelets) above the 1.5 GiB the sim allows for them. A limit changes
// when garbage is collected, nothing a client of the process sees; Talos
// sets none (its static pods have memory requests only).
var memoryLimits = map[string]string{
	kubecp.APIServer:         "150MiB",
	kubecp.ControllerManager: "60MiB",
	kubecp.Scheduler:         "48MiB",
	"kwok":                   "32MiB",
}

// memoryLimit is the environment that sets component's memory limit.
func memoryLimit(component string) []string {
	if l, ok := memoryLimits[component]; ok {
		return []string{"GOMEMLIMIT=" + l}
	}

	return nil
}
