package check

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/client"
	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/talchaos/talchaos/harness/eventlog"
	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/judge"
	"github.com/talchaos/talchaos/harness/talosclient"
	"github.com/talchaos/talchaos/harness/target"
)

// Observer polls every node through its Talos API and records what it sees:
// every change of every node's state and the nodes' log lines go into the
// run's history, transitions into the event log (for people watching). It
// never looks behind the API, and derives nothing: what the run reacts to
// while it goes on (state triggers, the narration of mode changes) is read
// from the live fold of the history (judge.Live), the same the verdict is
// drawn from. What it keeps of its own is its log followers' bookkeeping
// (how far each log was read, each node's last boot ID: a new one means a
// new log), which it needs on the look that sees a node, whether or not the
// look is recorded.
//
// Its jobs, one file each: polling the nodes (poll.go), following their logs
// (logs.go), recording what it sees and telling people (record.go).
type Observer struct {
	nodes    []target.Node
	cfg      *clientconfig.Config
	log      *eventlog.Log
	rec      *history.Recorder
	live     *judge.Live
	interval time.Duration

	clients map[string]*nodeClients
	// versions: each look at a configured node asks its Talos version
	// (WatchVersions).
	versions bool

	mu        sync.Mutex
	latest    *history.Observation
	subs      []chan struct{}
	lines     map[string][]LogLine
	pending   map[string]bool               // the node's last log line is not in the event log yet
	following map[string]context.CancelFunc // "node/log" streams running now, each with what ends it
	seen      map[string]logPosition        // "node/log" lines read so far
	boots     map[string]int                // "node/log": how many new boots were seen (a stream's position is of the boot it began in)
	lastBoot  map[string]string             // each node's last boot ID seen
	peerWarns map[string]bool               // "node error" peer warnings of etcd's recorded

	narrMu   sync.Mutex
	narrated int // the mode changes of the live evidence told so far
	wg       sync.WaitGroup

	// frozen stops the ticks from writing to the history while a final look
	// is taken and after it: the record's last word is the final look, and
	// an answer polled before it must not land after it. recMu is held
	// while a tick writes, so none is half-way when the freeze begins.
	recMu  sync.Mutex
	frozen bool

	// answers is every node's newest answer, by when its poll started: a
	// slow poll that started before a faster, later one (or before the final
	// look) does not replace it.
	answersMu   sync.Mutex
	answers     map[string]answer
	etcdAnswers map[string]etcdAnswer // control planes' etcd parts, polled apart
	kubeAnswers map[string]kubeAnswer // control planes' API servers (kube.go)

	// kube is set by WatchKubernetes: the run has Kubernetes.
	kube *kubeClients

	// vipClients are the talosconfig clients through each shared IP
	// (sharedip.go), made when a node is first seen holding it.
	vipMu      sync.Mutex
	vipClients map[string]*client.Client

	// times is how long the polls took (polltimes.go).
	times pollTimes
}

type nodeClients struct {
	secure   *client.Client
	insecure *client.Client

	// noBootID: the node refused to say its boot ID for good (bootID).
	noBootID atomic.Bool

	// vip is the shared IP the node's config gave it, read once per boot
	// (sharedIP).
	vipMu sync.Mutex
	vip   sharedIPOfBoot
}

// bootID asks a configured node its boot ID at every look, so that a reboot
// shorter than the gap between two looks still shows, as a new ID, though the
// node was never seen down. A node that refuses the read for good is not
// asked again: real machined gives Read to os:admin only (machined.go,
// v1.12.6: "/machine.MachineService/Read": role.MakeSet(role.Admin)), and a
// talosconfig with a lesser role is refused every time.
func (c *nodeClients) bootID(ctx context.Context) string {
	if c.noBootID.Load() {
		return ""
	}

	id, err := talosclient.BootID(ctx, c.secure)
	if code := status.Code(err); code == codes.PermissionDenied || code == codes.Unimplemented {
		c.noBootID.Store(true)
	}

	if err != nil {
		return ""
	}

	return id
}

// WatchVersions makes every look at a configured node also ask its Talos
// version: a run with a rolling upgrade. Call it before Start.
func (o *Observer) WatchVersions() { o.versions = true }

// NewObserver prepares clients to every node; Run polls until ctx ends. live
// is the fold of what rec records (judge.Follow).
func NewObserver(ctx context.Context, nodes []target.Node, cfg *clientconfig.Config, log *eventlog.Log, rec *history.Recorder, live *judge.Live, interval time.Duration) (*Observer, error) {
	o := &Observer{
		nodes: nodes, cfg: cfg, log: log, rec: rec, live: live, interval: interval,
		clients:     map[string]*nodeClients{},
		answers:     map[string]answer{},
		etcdAnswers: map[string]etcdAnswer{},
		kubeAnswers: map[string]kubeAnswer{},
		lines:       map[string][]LogLine{},
		pending:     map[string]bool{},
		following:   map[string]context.CancelFunc{},
		seen:        map[string]logPosition{},
		boots:       map[string]int{},
		lastBoot:    map[string]string{},
		peerWarns:   map[string]bool{},
		vipClients:  map[string]*client.Client{},
	}

	for _, n := range nodes {
		// The observer goes around talchaos's own API proxies and fault
		// interceptors: faults on the orchestrator's path must not blind it.
		direct := n
		direct.Endpoint = n.ObserverEndpoint()

		secEndpoint, routed := talosclient.SecureEndpoint(direct)
		secOpts := append(talosclient.ForNode(direct, nil), routed...)

		sec, err := talosclient.WithConfig(ctx, cfg, secEndpoint, secOpts...)
		if err != nil {
			o.Close()

			return nil, err
		}

		ins, err := talosclient.Insecure(ctx, direct.Endpoint, talosclient.ForNode(direct, nil)...)
		if err != nil {
			sec.Close() //nolint:errcheck
			o.Close()

			return nil, err
		}

		o.clients[n.Name] = &nodeClients{secure: sec, insecure: ins}
	}

	return o, nil
}

// Close closes the clients and waits for the log followers.
func (o *Observer) Close() {
	for _, c := range o.clients {
		c.secure.Close()   //nolint:errcheck
		c.insecure.Close() //nolint:errcheck
	}

	o.kube.close()

	o.vipMu.Lock()
	for _, c := range o.vipClients {
		c.Close() //nolint:errcheck
	}
	o.vipMu.Unlock()

	o.wg.Wait()
}

// Subscribe returns a channel that ticks after every poll's observation was
// recorded; it is closed when Run ends. Slow readers miss ticks rather than
// block the observer.
func (o *Observer) Subscribe() <-chan struct{} {
	ch := make(chan struct{}, 1)

	o.mu.Lock()
	o.subs = append(o.subs, ch)
	o.mu.Unlock()

	return ch
}

// Run polls until ctx ends. The log followers it starts end with ctx too.
func (o *Observer) Run(ctx context.Context) {
	defer func() {
		o.mu.Lock()
		for _, ch := range o.subs {
			close(ch)
		}
		o.subs = nil
		o.mu.Unlock()
	}()

	// Each node is polled on its own, so one that hangs (blackholed, rebooting)
	// does not hold back what is seen of the others; observations are assembled
	// from the latest answer of every node.
	var pollers sync.WaitGroup

	for _, n := range o.nodes {
		pollers.Go(func() {
			var last *history.NodeObservation

			missed := false

			for ctx.Err() == nil {
				started := o.log.Since()
				no := o.pollNode(ctx, n, false)

				// One failed look at a node that was answering is not yet a
				// state: on a loaded machine a poll can time out. The next
				// poll, a moment later, decides; a node that is really gone
				// is recorded one poll late. A node that said it is going
				// down (its stage) is taken at its word: its reboot can be
				// over before the next poll, and then never seen.
				if lost(last, no) && !missed && !leaving(last) {
					missed = true
				} else {
					missed = false
					last = no

					o.answer(n.Name, started, no)
				}

				select {
				case <-ctx.Done():
				case <-time.After(o.pollEvery(n)):
				}
			}
		})
	}

	// etcd's own calls (status, member list) on a control plane are polled
	// apart from its services: they block while its etcd is not answering
	// (restarting, cut off), and a look at the services must not wait for
	// them, or a crash loop between two slow looks goes unseen.
	for _, n := range o.nodes {
		if n.Role == target.ControlPlane {
			pollers.Go(func() { o.pollEtcdLoop(ctx, n) })

			if o.kube != nil {
				pollers.Go(func() { o.pollKubeLoop(ctx, n) })
			}
		}
	}

	defer pollers.Wait()

	names := make([]string, len(o.nodes))
	for i, n := range o.nodes {
		names[i] = n.Name
	}

	ticker := time.NewTicker(o.interval)
	defer ticker.Stop()

	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}

		obs := history.NewObservation(o.log.Since(), names)

		o.answersMu.Lock()
		for name, a := range o.answers {
			e, ok := o.etcdAnswers[name]
			k, kok := o.kubeAnswers[name]
			obs.Nodes[name] = withKube(withEtcd(a.obs, e, ok), k, kok)
		}
		o.answersMu.Unlock()

		if len(obs.Nodes) == len(o.nodes) {
			o.record(ctx, obs)
		}
	}
}
