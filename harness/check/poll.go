package check

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	configres "github.com/siderolabs/talos/pkg/machinery/resources/config"
	"github.com/siderolabs/talos/pkg/machinery/resources/network"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"google.golang.org/grpc"

	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/target"
)

// etcdAnswer is a control plane's etcd status and member list, from a poll
// that started at `at`.
type etcdAnswer struct {
	at         time.Duration
	status     *history.EtcdStatus
	statusErr  string
	members    []history.Member
	membersErr string
}

// pollPart polls one part of a node's state apart from its services, at the
// node's interval: while the node's last answer shows the part can be asked
// (when), look asks it and keeps the answer (a poll that started at the
// given time); otherwise forget drops what it saw, so that a new run of the
// part is not shown with the answers of the last one.
func (o *Observer) pollPart(ctx context.Context, n target.Node, when func(*history.NodeObservation) bool,
	look func(started time.Duration, base *history.NodeObservation), forget func(),
) {
	for ctx.Err() == nil {
		o.answersMu.Lock()
		base := o.answers[n.Name].obs
		o.answersMu.Unlock()

		if base != nil && base.Mode == history.ModeConfigured && when(base) {
			look(o.log.Since(), base)
		} else {
			o.answersMu.Lock()
			forget()
			o.answersMu.Unlock()
		}

		select {
		case <-ctx.Done():
		case <-time.After(o.pollEvery(n)):
		}
	}
}

// pollEtcdLoop polls a control plane's etcd while its last look showed etcd
// Running.
func (o *Observer) pollEtcdLoop(ctx context.Context, n target.Node) {
	o.pollPart(ctx, n,
		func(base *history.NodeObservation) bool { return base.Etcd != nil && base.Etcd.State == "Running" },
		func(started time.Duration, base *history.NodeObservation) {
			a := o.pollEtcd(ctx, n, base.Etcd)
			a.at = started

			o.answersMu.Lock()
			if cur, ok := o.etcdAnswers[n.Name]; !ok || cur.at <= started {
				o.etcdAnswers[n.Name] = a
			}
			o.answersMu.Unlock()
		},
		func() { delete(o.etcdAnswers, n.Name) })
}

func (o *Observer) pollEtcd(ctx context.Context, n target.Node, svc *history.Service) etcdAnswer {
	defer o.timed()()

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

// leaving reports whether the node's last look showed it on its way down:
// the stages of machined's reboot, shutdown, reset and upgrade sequences
// (runtime.MachineStage), each of which ends with the API going away.
func leaving(prev *history.NodeObservation) bool {
	switch prev.Stage {
	case "rebooting", "shutting down", "resetting", "upgrading":
		return true
	}

	return false
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
	return o.slowestInterval() + pollTimeout
}

// PollCadenceSince is the same bound from the polls as they went since the
// state that began at since (polltimes.go): a poll starts an interval after
// the last one answered, and its answer is assembled into an observation at
// the next tick, so two intervals and two of the slowest polls since then
// (in flight ones by how long they have run) cover every node's next answer.
// Never more than PollCadence; PollCadence itself while no poll has
// answered since then.
func (o *Observer) PollCadenceSince(since time.Duration) time.Duration {
	return o.pollCadenceAt(since, o.log.Since())
}

func (o *Observer) pollCadenceAt(since, now time.Duration) time.Duration {
	worst := o.PollCadence()

	took, ok := o.times.slowestSince(since, now)
	if !ok {
		return worst
	}

	return min(worst, 2*(o.slowestInterval()+took))
}

func (o *Observer) slowestInterval() time.Duration {
	slowest := o.interval

	for _, n := range o.nodes {
		slowest = max(slowest, o.pollEvery(n))
	}

	return slowest
}

// timed notes a poll that starts now; call what it returns when it ends.
func (o *Observer) timed() func() {
	end := o.times.begin(o.log.Since())

	return func() { end(o.log.Since()) }
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

	kube := map[string]kubeAnswer{}

	for _, n := range o.nodes {
		wg.Go(func() {
			no := o.pollNode(ctx, n, true)

			mu.Lock()
			obs.Nodes[n.Name] = no
			mu.Unlock()
		})

		if o.kube != nil && n.Role == target.ControlPlane {
			wg.Go(func() {
				api := o.pollKube(ctx, n)

				mu.Lock()
				kube[n.Name] = kubeAnswer{api: api}
				mu.Unlock()
			})
		}
	}

	wg.Wait()

	for name, k := range kube {
		obs.Nodes[name] = withKube(obs.Nodes[name], k, true)
	}

	return obs
}

const pollTimeout = 2 * time.Second

// pollNode looks at one node: its API, services and stage, and, with etcd,
// its etcd status and member list.
func (o *Observer) pollNode(ctx context.Context, n target.Node, etcd bool) *history.NodeObservation {
	defer o.timed()()

	ctx, cancel := context.WithTimeout(ctx, pollTimeout)
	defer cancel()

	no := &history.NodeObservation{Name: n.Name, Address: n.Address, Hostname: n.Hostname, Addresses: n.Addresses, Role: n.Role, Mode: history.ModeUnknown}
	c := o.clients[n.Name]

	configured := func(svcs *machine.ServiceListResponse) *history.NodeObservation {
		no.Mode = history.ModeConfigured
		fillServices(no, svcs)
		no.Stage = stage(ctx, c.secure)

		if o.versions {
			if v, err := c.secure.Version(ctx); err == nil && len(v.GetMessages()) > 0 {
				no.Version = v.GetMessages()[0].GetVersion().GetTag()
			}
		}

		no.BootID = c.bootID(ctx)

		if no.Etcd != nil && no.Etcd.State == "Waiting" && strings.Contains(no.Etcd.Message, etcdSpecWait) {
			no.EtcdSpec = etcdSpecInputs(ctx, c.secure)
		}

		if n.Role == target.ControlPlane {
			c.sharedIP(ctx, no)
			o.askThroughSharedIP(ctx, no)
		}

		if o.kube != nil && n.Role == target.ControlPlane && no.Kubelet != nil {
			no.APIServerPod = apiServerPod(ctx, c.secure)
		}

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
	case history.Classify(secErr) == history.FailureCertificateTime:
		no.Mode = history.ModeCertificateTime
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

// etcdSpecWait is in the etcd service's Waiting message while it waits for
// its spec (services/etcd.go: the etcd spec condition).
const etcdSpecWait = "etcd spec"

// etcdSpecInputs reads what the node's etcd spec is computed from: its
// current addresses (NodeAddress "current") and its active config's etcd
// subnets; nil when neither answers.
func etcdSpecInputs(ctx context.Context, c *client.Client) *history.EtcdSpecInputs {
	in := &history.EtcdSpecInputs{}

	addrs, aerr := safe.StateGetByID[*network.NodeAddress](ctx, c.COSI, network.NodeAddressCurrentID)
	if aerr == nil {
		for _, ip := range addrs.TypedSpec().IPs() {
			in.Addresses = append(in.Addresses, ip.String())
		}
	}

	mc, cerr := safe.StateGetByID[*configres.MachineConfig](ctx, c.COSI, configres.ActiveID)
	if cerr == nil && mc.Config() != nil && mc.Config().Cluster() != nil && mc.Config().Cluster().Etcd() != nil {
		in.AdvertisedSubnets = mc.Config().Cluster().Etcd().AdvertisedSubnets()
		in.ListenSubnets = mc.Config().Cluster().Etcd().ListenSubnets()
	}

	if aerr != nil && cerr != nil {
		return nil
	}

	return in
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
		no.Members = append(no.Members, history.APIMembers(msg.GetMembers())...)
	}
}
