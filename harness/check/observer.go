package check

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"google.golang.org/grpc"

	"github.com/talchaos/talchaos/harness/eventlog"
	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/judge"
	"github.com/talchaos/talchaos/harness/talosclient"
	"github.com/talchaos/talchaos/harness/target"
)

// LogLine is one line of a node's machined log, as the Logs API streamed it.
type LogLine struct {
	At   time.Duration
	Text string
}

// Observer polls every node through its Talos API and records what it sees:
// every change of every node's state and the nodes' log lines go into the
// run's history, transitions into the event log (for people watching). It
// never looks behind the API, and derives nothing: what the run reacts to
// while it goes on (state triggers, the narration of mode changes) is read
// from the live fold of the history (judge.Live), the same the verdict is
// drawn from.
type Observer struct {
	nodes    []target.Node
	cfg      *clientconfig.Config
	log      *eventlog.Log
	rec      *history.Recorder
	live     *judge.Live
	interval time.Duration

	clients map[string]*nodeClients

	mu        sync.Mutex
	latest    *history.Observation
	subs      []chan struct{}
	lines     map[string][]LogLine
	pending   map[string]bool        // the node's last log line is not in the event log yet
	following map[string]bool        // "node/log" streams running now
	seen      map[string]logPosition // "node/log" lines read so far

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
}

type nodeClients struct {
	secure   *client.Client
	insecure *client.Client
}

// NewObserver prepares clients to every node; Run polls until ctx ends. live
// is the fold of what rec records (judge.Follow).
func NewObserver(ctx context.Context, nodes []target.Node, cfg *clientconfig.Config, log *eventlog.Log, rec *history.Recorder, live *judge.Live, interval time.Duration) (*Observer, error) {
	o := &Observer{
		nodes: nodes, cfg: cfg, log: log, rec: rec, live: live, interval: interval,
		clients:     map[string]*nodeClients{},
		answers:     map[string]answer{},
		etcdAnswers: map[string]etcdAnswer{},
		lines:       map[string][]LogLine{},
		pending:     map[string]bool{},
		following:   map[string]bool{},
		seen:        map[string]logPosition{},
	}

	for _, n := range nodes {
		// The observer goes around talchaos's own API proxies and fault
		// interceptors: faults on the orchestrator's path must not blind it.
		direct := n
		direct.Endpoint = n.ObserverEndpoint()

		secEndpoint, secOpts := direct.Endpoint, talosclient.ForNode(direct, nil)
		if n.Via != "" {
			secEndpoint, secOpts = n.Via, append(secOpts, talosclient.Routed(n.Address)...)
		}

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
				// is recorded one poll late.
				if lost(last, no) && !missed {
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
			obs.Nodes[name] = withEtcd(a.obs, e, ok)
		}
		o.answersMu.Unlock()

		if len(obs.Nodes) == len(o.nodes) {
			o.record(ctx, obs)
		}
	}
}

// etcdAnswer is a control plane's etcd status and member list, from a poll
// that started at `at`.
type etcdAnswer struct {
	at         time.Duration
	status     *history.EtcdStatus
	statusErr  string
	members    []history.Member
	membersErr string
}

// pollEtcdLoop polls a control plane's etcd while its last look showed etcd
// Running; otherwise it forgets what it saw, so that a new run of etcd is not
// shown with the members of the last one.
func (o *Observer) pollEtcdLoop(ctx context.Context, n target.Node) {
	for ctx.Err() == nil {
		o.answersMu.Lock()
		base := o.answers[n.Name].obs
		o.answersMu.Unlock()

		if base != nil && base.Mode == history.ModeConfigured && base.Etcd != nil && base.Etcd.State == "Running" {
			started := o.log.Since()
			a := o.pollEtcd(ctx, n, base.Etcd)
			a.at = started

			o.answersMu.Lock()
			if cur, ok := o.etcdAnswers[n.Name]; !ok || cur.at <= started {
				o.etcdAnswers[n.Name] = a
			}
			o.answersMu.Unlock()
		} else {
			o.answersMu.Lock()
			delete(o.etcdAnswers, n.Name)
			o.answersMu.Unlock()
		}

		select {
		case <-ctx.Done():
		case <-time.After(o.pollEvery(n)):
		}
	}
}

func (o *Observer) pollEtcd(ctx context.Context, n target.Node, svc *history.Service) etcdAnswer {
	ctx, cancel := context.WithTimeout(ctx, pollTimeout)
	defer cancel()

	no := &history.NodeObservation{Etcd: svc}
	fillEtcd(ctx, no, o.clients[n.Name].secure)

	return etcdAnswer{status: no.Status, statusErr: no.StatusErr, members: no.Members, membersErr: no.MembersErr}
}

// withEtcd is a node's look with its etcd part (when its etcd runs and the
// look has none of its own: a final look polls etcd itself).
func withEtcd(no *history.NodeObservation, e etcdAnswer, ok bool) *history.NodeObservation {
	if !ok || no == nil || no.Mode != history.ModeConfigured || no.Etcd == nil || no.Etcd.State != "Running" ||
		no.Status != nil || no.Members != nil || no.StatusErr != "" || no.MembersErr != "" {
		return no
	}

	c := *no
	c.Status, c.StatusErr, c.Members, c.MembersErr = e.status, e.statusErr, e.members, e.membersErr

	return &c
}

// answer is one node's answer to a poll that started at `at`.
type answer struct {
	at  time.Duration
	obs *history.NodeObservation
}

// answer keeps no as the node's answer unless a poll that started later
// already answered.
func (o *Observer) answer(name string, at time.Duration, no *history.NodeObservation) {
	o.answersMu.Lock()
	defer o.answersMu.Unlock()

	if a, ok := o.answers[name]; !ok || a.at <= at {
		o.answers[name] = answer{at: at, obs: no}
	}
}

// lost reports whether a node that was answering (prev) stopped answering.
func lost(prev, cur *history.NodeObservation) bool {
	answering := func(m string) bool { return m == history.ModeConfigured || m == history.ModeMaintenance }

	return prev != nil && answering(prev.Mode) && !answering(cur.Mode)
}

// workerPollFactor slows the polling of workers: nothing the verdict is
// drawn from moves fast on them (no etcd), and fifty workers polled as often
// as the control planes load a small machine enough to slow the real-time
// etcd the control planes run.
const workerPollFactor = 5

// pollEvery is how often node is polled.
func (o *Observer) pollEvery(n target.Node) time.Duration {
	if n.Role == target.Worker {
		return o.interval * workerPollFactor
	}

	return o.interval
}

// PollCadence is the longest between two answers of one node: the slowest
// node's poll interval plus a poll's deadline (a poll in flight). A state
// that held for less may yet be changed by an answer on its way.
func (o *Observer) PollCadence() time.Duration {
	slowest := o.interval

	for _, n := range o.nodes {
		slowest = max(slowest, o.pollEvery(n))
	}

	return slowest + pollTimeout
}

// Final observes every node once more, in parallel, and records it as the
// run's last look at them. From then on the periodic observations are no
// longer recorded (they go on feeding triggers), so the final look is the
// history's last state, until Thaw: a verdict drawn from it is the one the
// run's settle judged steady.
func (o *Observer) Final(ctx context.Context) *history.Observation {
	o.recMu.Lock()
	o.frozen = true
	o.recMu.Unlock()

	obs := o.Poll(ctx)

	for _, n := range obs.Ordered() {
		o.answer(n.Name, obs.At, n)
		o.rec.Observe(obs.At, n, true)
	}

	o.narrate()

	return obs
}

// Thaw records the periodic observations again after a final look that did
// not end the run.
func (o *Observer) Thaw() {
	o.recMu.Lock()
	o.frozen = false
	o.recMu.Unlock()
}

// Poll observes every node once, in parallel.
func (o *Observer) Poll(ctx context.Context) *history.Observation {
	names := make([]string, len(o.nodes))
	for i, n := range o.nodes {
		names[i] = n.Name
	}

	obs := history.NewObservation(o.log.Since(), names)

	var (
		wg sync.WaitGroup
		mu sync.Mutex
	)

	for _, n := range o.nodes {
		wg.Go(func() {
			no := o.pollNode(ctx, n, true)

			mu.Lock()
			obs.Nodes[n.Name] = no
			mu.Unlock()
		})
	}

	wg.Wait()

	return obs
}

const pollTimeout = 2 * time.Second

// pollNode looks at one node: its API, services and stage, and, with etcd,
// its etcd status and member list.
func (o *Observer) pollNode(ctx context.Context, n target.Node, etcd bool) *history.NodeObservation {
	ctx, cancel := context.WithTimeout(ctx, pollTimeout)
	defer cancel()

	no := &history.NodeObservation{Name: n.Name, Address: n.Address, Role: n.Role, Mode: history.ModeUnknown}
	c := o.clients[n.Name]

	configured := func(svcs *machine.ServiceListResponse) *history.NodeObservation {
		no.Mode = history.ModeConfigured
		fillServices(no, svcs)
		no.Stage = stage(ctx, c.secure)

		if etcd && n.Role == target.ControlPlane {
			fillEtcd(ctx, no, c.secure)
		}

		return no
	}

	svcs, secErr := c.secure.ServiceList(ctx)
	if secErr == nil {
		return configured(svcs)
	}

	_, insErr := c.insecure.Disks(ctx)

	// A node switching to mutual TLS refuses the insecure client before the
	// talosconfig client has reconnected: ask again, waiting for a fresh connection.
	if history.Classify(insErr) == history.FailureCertificateRequired {
		retryCtx, cancel := context.WithTimeout(ctx, time.Second)
		svcs, secErr = c.secure.ServiceList(retryCtx, grpc.WaitForReady(true))

		cancel()

		if secErr == nil {
			return configured(svcs)
		}
	}

	switch {
	case insErr == nil:
		no.Mode = history.ModeMaintenance
		no.Stage = stage(ctx, c.insecure)
		no.APIError = secErr.Error()
	case history.Classify(secErr) == history.FailureUnknownAuthority &&
		history.Classify(insErr) == history.FailureCertificateRequired:
		no.Mode = history.ModePKIMismatch
		no.APIError = secErr.Error()
	case history.Classify(secErr) == history.FailureUnknownAuthority:
		// A node still presenting its maintenance certificate whose
		// insecure API just went away is switching to mutual TLS: what
		// the insecure client got says more than "unknown authority".
		no.Mode = history.ModeDown
		no.APIError = insErr.Error()
	default:
		no.Mode = history.ModeDown
		no.APIError = secErr.Error()
	}

	return no
}

func stage(ctx context.Context, c *client.Client) string {
	ms, err := safe.StateGetByID[*runtime.MachineStatus](ctx, c.COSI, runtime.MachineStatusID)
	if err != nil {
		return ""
	}

	return ms.TypedSpec().Stage.String()
}

func fillServices(no *history.NodeObservation, resp *machine.ServiceListResponse) {
	for _, msg := range resp.GetMessages() {
		for _, s := range msg.GetServices() {
			svc := &history.Service{
				State:         s.GetState(),
				Healthy:       s.GetHealth().GetHealthy(),
				HealthUnknown: s.GetHealth().GetUnknown(),
				HealthMessage: s.GetHealth().GetLastMessage(),
			}

			if ev := s.GetEvents().GetEvents(); len(ev) > 0 {
				svc.Message = ev[len(ev)-1].GetMsg()
			}

			for _, e := range s.GetEvents().GetEvents() {
				if strings.Contains(e.GetMsg(), history.RestartForever) {
					svc.Restarts++
				}
			}

			if svc.State == "Running" {
				svc.Started = runningSince(s.GetEvents().GetEvents())
			}

			switch s.GetId() {
			case "etcd":
				no.Etcd = svc
			case "kubelet":
				no.Kubelet = svc
			}
		}
	}
}

// runningSince is when a service reached Running after its last start: the
// first Running event after the last Starting one (the oldest Running event
// when the history no longer reaches back to the start).
func runningSince(events []*machine.ServiceEvent) time.Time {
	from := 0

	for i, e := range events {
		if e.GetState() == "Starting" {
			from = i
		}
	}

	for _, e := range events[from:] {
		if e.GetState() == "Running" && e.GetTs() != nil {
			return e.GetTs().AsTime()
		}
	}

	return time.Time{}
}

func fillEtcd(ctx context.Context, no *history.NodeObservation, c *client.Client) {
	if no.Etcd == nil || no.Etcd.State != "Running" {
		return
	}

	if st, err := c.EtcdStatus(ctx); err != nil {
		no.StatusErr = err.Error()
	} else if len(st.GetMessages()) > 0 {
		ms := st.GetMessages()[0].GetMemberStatus()
		no.Status = &history.EtcdStatus{
			MemberID: ms.GetMemberId(), Leader: ms.GetLeader(), IsLearner: ms.GetIsLearner(),
			RaftIndex: ms.GetRaftIndex(), AppliedIndex: ms.GetRaftAppliedIndex(),
		}
	}

	if no.Status != nil && no.Status.IsLearner {
		return // a learner does not serve MemberList
	}

	resp, err := c.EtcdMemberList(ctx, &machine.EtcdMemberListRequest{QueryLocal: true})
	if err != nil {
		no.MembersErr = err.Error()

		return
	}

	for _, msg := range resp.GetMessages() {
		for _, m := range msg.GetMembers() {
			no.Members = append(no.Members, history.Member{ID: m.GetId(), Hostname: m.GetHostname(), PeerURLs: m.GetPeerUrls(), IsLearner: m.GetIsLearner()})
		}
	}
}

// record stores the observation, emits transition events, starts log followers
// for newly configured nodes and notifies subscribers.
func (o *Observer) record(ctx context.Context, obs *history.Observation) {
	o.mu.Lock()
	prev := o.latest
	o.mu.Unlock()

	o.recMu.Lock()
	if !o.frozen {
		for _, n := range obs.Ordered() {
			o.rec.Observe(obs.At, n, false)
		}
	}
	o.recMu.Unlock()

	o.narrate()
	o.transitions(prev, obs)

	o.mu.Lock()
	o.latest = obs
	subs := append([]chan struct{}(nil), o.subs...)
	o.mu.Unlock()

	for _, n := range obs.Ordered() {
		if n.Mode == history.ModeConfigured {
			o.follow(ctx, n.Name, n.Role == target.ControlPlane)
		}
	}

	for _, ch := range subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// narrate tells the event log of the nodes' API mode changes that the live
// evidence holds and were not told yet (kind node.left-maintenance for a
// node leaving maintenance, node.mode otherwise).
func (o *Observer) narrate() {
	var changes []judge.ModeChange

	o.live.Read(func(ev *judge.Evidence) {
		o.narrMu.Lock()
		defer o.narrMu.Unlock()

		if o.narrated < len(ev.Changes) {
			changes = slices.Clone(ev.Changes[o.narrated:])
			o.narrated = len(ev.Changes)
		}
	})

	for _, c := range changes {
		kind := "node.mode"
		if c.LeftMaintenance {
			kind = "node.left-maintenance"
		}

		// In maintenance the talosconfig client is refused by design (the
		// node's certificate is not the cluster CA's): the error, kept in
		// the history, would only alarm.
		msg := fmt.Sprintf("%s → %s", c.From, c.To)

		switch {
		case c.To == history.ModeMaintenance:
			msg += ": the maintenance API answers (insecure), the talosconfig client is not trusted yet"
		case c.APIError != "":
			msg += ": " + c.APIError
		}

		o.log.Add(c.Node, kind, msg)
	}
}

func (o *Observer) transitions(prev, cur *history.Observation) {
	for _, n := range cur.Ordered() {
		var p *history.NodeObservation
		if prev != nil {
			p = prev.Nodes[n.Name]
		}

		// A node seen going down or rebooting starts new in-memory logs.
		if n.Mode == history.ModeDown || n.Stage == "rebooting" || n.Stage == "resetting" {
			o.mu.Lock()
			delete(o.seen, n.Name+"/machined")
			delete(o.seen, n.Name+"/etcd")
			o.mu.Unlock()
		}

		if n.Stage != "" && (p == nil || p.Stage != n.Stage) {
			o.log.Add(n.Name, "node.stage", n.Stage)
		}

		if n.Etcd != nil && (p == nil || p.Etcd == nil || p.Etcd.State != n.Etcd.State || p.Etcd.Message != n.Etcd.Message) {
			o.log.Add(n.Name, "service.etcd", n.Etcd.State+": "+n.Etcd.Message)
		}
	}

	o.membershipTransitions(prev, cur)
}

func (o *Observer) membershipTransitions(prev, cur *history.Observation) {
	before := map[uint64]history.Member{}

	if prev != nil {
		for _, c := range prev.Clusters() {
			for _, m := range c.Members {
				before[m.ID] = m
			}
		}
	}

	for _, c := range cur.Clusters() {
		for _, m := range c.Members {
			node := o.nodeOf(m)
			old, existed := before[m.ID]

			switch {
			case !existed && m.IsLearner:
				o.log.Add(node, "etcd.learner-added", fmt.Sprintf("member %s %s added as learner%s", m.IDString(), history.DisplayName(m), unstarted(m)))
			case !existed:
				o.log.Add(node, "etcd.member-added", fmt.Sprintf("member %s %s is a voting member", m.IDString(), history.DisplayName(m)))
			case old.IsLearner && !m.IsLearner:
				o.log.Add(node, "etcd.promoted", fmt.Sprintf("member %s %s promoted to voter", m.IDString(), history.DisplayName(m)))
			case old.Hostname == "" && m.Hostname != "":
				o.log.Add(node, "etcd.member-started", fmt.Sprintf("member %s started as %s", m.IDString(), m.Hostname))
			}

			delete(before, m.ID)
		}
	}

	for _, m := range before {
		if hasEtcdView(cur) {
			o.log.Add(o.nodeOf(m), "etcd.member-removed", fmt.Sprintf("member %s %s removed", m.IDString(), history.DisplayName(m)))
		}
	}
}

// hasEtcdView reports whether any node answered a member list in this poll;
// without one, members did not leave, they were just not seen.
func hasEtcdView(o *history.Observation) bool {
	for _, n := range o.Nodes {
		if len(n.Members) > 0 {
			return true
		}
	}

	return false
}

func unstarted(m history.Member) string {
	if m.Hostname == "" {
		return " (not started yet)"
	}

	return ""
}

// nodeOf maps a member to the node it belongs to, by hostname or peer URL.
func (o *Observer) nodeOf(m history.Member) string {
	for _, n := range o.nodes {
		if m.Hostname != "" && m.Hostname == n.Name {
			return n.Name
		}

		for _, u := range m.PeerURLs {
			if history.HostOf(u) == n.Address {
				return n.Name
			}
		}
	}

	return m.Hostname
}

// follow streams a configured node's machined log (every line, as events) and
// its etcd log (warnings and errors, kept as evidence) through the Logs API.
func (o *Observer) follow(ctx context.Context, node string, isControlPlane bool) {
	o.followLog(ctx, node, "machined", o.addLine, func() { o.flushLine(node) })

	if isControlPlane {
		o.followLog(ctx, node, "etcd", o.addEtcdLine, func() {})
	}
}

// followLog streams one service log until it breaks; the next poll restarts it.
// Every stream asks for the whole log: a node that rebooted starts a new one
// (machined's logs live in memory), and lines already seen in this boot's log
// are recognised by the boot's first line and skipped.
func (o *Observer) followLog(ctx context.Context, node, id string, line func(node, text string), endOfMessage func()) {
	c := o.clients[node]
	key := node + "/" + id

	o.mu.Lock()
	if o.following[key] {
		o.mu.Unlock()

		return
	}

	o.following[key] = true
	seen := o.seen[key]
	o.mu.Unlock()

	o.wg.Go(func() {
		defer func() {
			o.mu.Lock()
			o.following[key] = false
			o.seen[key] = seen
			o.mu.Unlock()
		}()

		stream, err := c.secure.Logs(ctx, "system", 0, id, true, -1)
		if err != nil {
			return
		}

		var (
			partial string
			index   int
		)

		handle := func(text string) {
			if index == 0 && text != seen.first {
				seen = logPosition{first: text} // a new boot's log
			}

			if index == 0 {
				seen.first = text
			}

			index++

			if index <= seen.count {
				return
			}

			seen.count = index

			line(node, text)
		}

		for {
			data, err := stream.Recv()
			if err != nil {
				return // node down or run over; the next poll reconnects
			}

			partial += string(data.GetBytes())

			for {
				i := strings.IndexByte(partial, '\n')
				if i < 0 {
					break
				}

				handle(partial[:i])
				partial = partial[i+1:]
			}

			// machined sends each log call as one message, continuation lines included.
			endOfMessage()
		}
	})
}

// logPosition is how far a node's log of the current boot has been read.
type logPosition struct {
	first string
	count int
}

// addEtcdLine keeps etcd's warnings and errors (JSON lines from its zap logger)
// as evidence; errors also go to the event log.
func (o *Observer) addEtcdLine(node, line string) {
	var entry struct {
		Level string `json:"level"`
		Msg   string `json:"msg"`
	}

	if err := json.Unmarshal([]byte(line), &entry); err != nil || (entry.Level != "warn" && entry.Level != "error" && entry.Level != "fatal") {
		return
	}

	at := o.log.Since()

	// etcd warns of every slow request and unreachable peer; what a
	// diagnosis can use is logged as an error.
	if entry.Level != "warn" {
		o.rec.Log(at, node, history.Log{Source: history.LogEtcd, Level: entry.Level, Text: line})
	}

	if entry.Level != "warn" {
		o.log.Add(node, "log.etcd", entry.Level+": "+entry.Msg)
	}
}

func (o *Observer) addLine(node, line string) {
	// A multi-line message (go-retry's "N error(s) occurred:" list) continues on
	// tab-indented lines: keep it one entry, as it was one log call.
	if strings.HasPrefix(line, "\t") {
		o.mu.Lock()
		lines := o.lines[node]

		if len(lines) > 0 {
			lines[len(lines)-1].Text += "\n" + line
			o.mu.Unlock()

			return
		}
		o.mu.Unlock()
	}

	o.flushLine(node)

	o.mu.Lock()
	o.lines[node] = append(o.lines[node], LogLine{At: o.log.Since(), Text: stripTimestamp(line)})
	o.pending[node] = true
	o.mu.Unlock()
}

// flushLine records the node's last complete log entry as an event; an entry is
// complete once the next one starts (or the stream ends).
func (o *Observer) flushLine(node string) {
	o.mu.Lock()
	lines := o.lines[node]
	pending := o.pending[node] && len(lines) > 0
	o.pending[node] = false

	var last LogLine
	if pending {
		last = lines[len(lines)-1]
	}
	o.mu.Unlock()

	if pending {
		o.rec.Log(last.At, node, history.Log{Source: history.LogMachined, Text: last.Text})
		o.log.Add(node, "log.machined", last.Text)
	}
}

// stripTimestamp drops what machined puts before a message: the "[talos] "
// prefix (go-kmsg's on a metal node), then, in container mode, Go's standard
// "2006/01/02 15:04:05 " date (log.SetPrefix with the default flags,
// v1alpha1_controller.go setupLogging).
func stripTimestamp(line string) string {
	const layout = "2006/01/02 15:04:05 "

	line = strings.TrimPrefix(line, "[talos] ")

	if len(line) > len(layout) {
		if _, err := time.Parse(layout[:len(layout)-1], line[:len(layout)-1]); err == nil {
			return line[len(layout):]
		}
	}

	return line
}
