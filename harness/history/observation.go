package history

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"

	"github.com/talchaos/talchaos/harness/target"
)

// API modes a node can be observed in.
const (
	ModeUnknown     = "unknown"
	ModeDown        = "down"        // nothing answers
	ModeMaintenance = "maintenance" // the insecure client works
	ModeConfigured  = "configured"  // the talosconfig client works
	ModePKIMismatch = "pki-mismatch"
	// ModeCertificateTime: configured (the insecure client is refused), but
	// the talosconfig client and the node do not take each other's
	// certificate as valid now: one side's clock is off.
	ModeCertificateTime = "certificate-time"
)

// Service is a Talos service as ServiceList shows it.
type Service struct {
	State         string `json:"state"`
	Message       string `json:"message,omitempty"` // last event's message
	Healthy       bool   `json:"healthy,omitempty"`
	HealthUnknown bool   `json:"healthUnknown,omitempty"`
	HealthMessage string `json:"healthMessage,omitempty"`
	// Restarts is how many times restart.Forever restarted the service after
	// its task exited, among the events the service still keeps (its
	// ServiceList history): a count that grows between looks shows restarts
	// the looks themselves were too far apart to see.
	Restarts int `json:"restarts,omitempty"`
	// Started is when the service reached Running after it last started, by
	// the node's clock (the timestamp of that ServiceList event); zero when it
	// is not Running or no such event is left in its history. etcd's promote
	// loop starts then.
	Started time.Time `json:"started,omitzero"`
}

// Running reports whether the service is Running and healthy.
func (s *Service) Running() bool { return s != nil && s.State == "Running" && s.Healthy }

// Member is one etcd member as EtcdMemberList reports it.
type Member struct {
	ID        uint64   `json:"id"`
	Hostname  string   `json:"hostname,omitempty"`
	PeerURLs  []string `json:"peerURLs"`
	IsLearner bool     `json:"isLearner,omitempty"`
}

// IDString is the member ID as talosctl prints it.
func (m Member) IDString() string { return fmt.Sprintf("%016x", m.ID) }

// EtcdStatus is the local member's status.
type EtcdStatus struct {
	MemberID     uint64 `json:"memberID"`
	Leader       uint64 `json:"leader"`
	IsLearner    bool   `json:"isLearner,omitempty"`
	RaftIndex    uint64 `json:"raftIndex"`
	AppliedIndex uint64 `json:"appliedIndex"`
}

// EtcdSpecInputs are what Talos computes a node's etcd spec from: its
// current addresses and its config's etcd subnets.
type EtcdSpecInputs struct {
	Addresses         []string `json:"addresses"`
	AdvertisedSubnets []string `json:"advertisedSubnets,omitempty"`
	ListenSubnets     []string `json:"listenSubnets,omitempty"`
}

// NodeObservation is one node at one poll.
type NodeObservation struct {
	Name    string `json:"name"`
	Address string `json:"address"`
	// Hostname is the hostname the node's config gives it, when that is not
	// its name: its etcd member's name. Addresses are its further
	// addresses, which its member's peer URLs may name.
	Hostname  string      `json:"hostname,omitempty"`
	Addresses []string    `json:"addresses,omitempty"`
	Role      target.Role `json:"role"`
	Mode      string      `json:"mode"`
	APIError  string      `json:"apiError,omitempty"` // the error that decided Mode when not configured
	Stage     string      `json:"stage,omitempty"`
	// Version is the Talos version the node reports, looked at in runs
	// with a rolling upgrade (orchestrator.upgradeTo).
	Version string `json:"version,omitempty"`
	// BootID is the node's boot ID (/proc/sys/kernel/random/boot_id, as
	// `talosctl upgrade` reads it), looked at in every look at a configured
	// node: a reboot shorter than a poll shows in it although the node was
	// never seen down. Empty where the node refuses the read (a talosconfig
	// without os:admin).
	BootID  string   `json:"bootId,omitempty"`
	Etcd    *Service `json:"etcd,omitempty"`
	Kubelet *Service `json:"kubelet,omitempty"`
	// Members is the member list the node's local etcd member reports (QueryLocal).
	Members    []Member    `json:"members,omitempty"`
	MembersErr string      `json:"membersError,omitempty"`
	Status     *EtcdStatus `json:"status,omitempty"`
	StatusErr  string      `json:"statusError,omitempty"`
	// EtcdSpec is what the node's etcd spec is computed from, read while its
	// etcd service waits for the spec (an operator's `talosctl get
	// addresses` and `get machineconfig`).
	EtcdSpec *EtcdSpecInputs `json:"etcdSpec,omitempty"`
	// APIServer is the control plane's Kubernetes API server, in a run with
	// Kubernetes.
	APIServer *APIServer `json:"apiServer,omitempty"`
	// APIServerPod is the control plane's kube-apiserver static pod as its
	// kubelet reports it through Talos, in a run with Kubernetes.
	APIServerPod *StaticPod `json:"apiServerPod,omitempty"`
	// SharedIP is the shared IP (VIP) the control plane's config gives it;
	// HoldsSharedIP, that the node has it among its addresses (`talosctl
	// get addresses`): Talos's VIP operator elected it through etcd.
	SharedIP      string `json:"sharedIP,omitempty"`
	HoldsSharedIP bool   `json:"holdsSharedIP,omitempty"`
	// SharedIPError is, on the holder's look, what the talosconfig client
	// got asking the Talos API through the shared IP; empty when it
	// answered.
	SharedIPError string `json:"sharedIPError,omitempty"`
}

// SharedIPHolder is the control plane the look found holding the shared IP
// its config gives, and that IP; ip is set, holder empty, when a control
// plane's config gives one that no node was seen holding; both empty when no
// answering node's config gives one.
func (o *Observation) SharedIPHolder() (ip, holder string) {
	for _, n := range o.Ordered() {
		if n.SharedIP == "" {
			continue
		}

		if ip == "" {
			ip = n.SharedIP
		}

		if n.HoldsSharedIP {
			return n.SharedIP, n.Name
		}
	}

	return ip, ""
}

// WaitingForEtcdSpec is the etcd service's message while it waits for its
// etcd spec alone (ServiceRunner.waitFor with the spec's condition left):
// Talos writes none when no address of the node's is in
// cluster.etcd.advertisedSubnets (controllers/etcd/spec.go).
const WaitingForEtcdSpec = "Waiting for etcd spec"

// WaitsForTimeSync reports whether a service's Waiting message names the
// time sync among what it waits for ("Waiting for time sync", or with other
// conditions: conditions.WaitForAll's String joins them with ", ").
func WaitsForTimeSync(msg string) bool {
	conds, ok := strings.CutPrefix(msg, "Waiting for ")

	return ok && slices.Contains(strings.Split(conds, ", "), "time sync")
}

// APIServer is a control plane's Kubernetes API server as a client sees it
// through the node's address, with the cluster's admin kubeconfig.
type APIServer struct {
	// Ready: GET /readyz answered ok.
	Ready bool `json:"ready"`
	// Error is why it is not ready: the failed checks /readyz lists, or
	// the error of the connection.
	Error string `json:"error,omitempty"`
	// Endpoints are the addresses of the default/kubernetes endpoints as
	// this server lists them; nil when it could not list them.
	Endpoints []string `json:"endpoints,omitempty"`
	// Nodes are the cluster's Kubernetes Nodes as this server lists them
	// (`kubectl get nodes`); nil when it could not list them.
	Nodes []KubeNode `json:"nodes,omitempty"`
}

// StaticPod is a static pod as the node's kubelet reports it through
// Talos's StaticPodStatus resource (`talosctl get staticpodstatus`, what
// `talosctl health` checks the control plane's pods by): whether its
// container runs and is ready, how often it was restarted, why it waits to
// start again, and how its last run ended. An API server that exits as it
// starts shows here, where no client of it can see anything.
type StaticPod struct {
	Running  bool `json:"running"`
	Ready    bool `json:"ready"`
	Restarts int  `json:"restarts"`
	// Waiting is why the container is not running: CrashLoopBackOff while
	// the kubelet backs off before the next start.
	Waiting string `json:"waiting,omitempty"`
	// LastExit is the exit code of its last run; nil when none ended.
	LastExit *int `json:"lastExit,omitempty"`
}

// String is the pod as `kubectl get pods` would sum it up: "running,
// ready", "CrashLoopBackOff, 3 restarts, last exit code 1".
func (p *StaticPod) String() string {
	var parts []string

	switch {
	case p.Running && p.Ready:
		parts = append(parts, "running, ready")
	case p.Running:
		parts = append(parts, "running, not ready")
	case p.Waiting != "":
		parts = append(parts, p.Waiting)
	default:
		parts = append(parts, "not running")
	}

	switch {
	case p.Restarts == 1:
		parts = append(parts, "1 restart")
	case p.Restarts > 1:
		parts = append(parts, fmt.Sprintf("%d restarts", p.Restarts))
	}

	if p.LastExit != nil {
		parts = append(parts, fmt.Sprintf("last exit code %d", *p.LastExit))
	}

	return strings.Join(parts, ", ")
}

// KubeNode is one Kubernetes Node as `kubectl get nodes` shows it: its
// name, its internal address, and its Ready condition.
type KubeNode struct {
	Name    string `json:"name"`
	Address string `json:"address,omitempty"`
	Ready   bool   `json:"ready"`
	// Reason and Message are the Ready condition's, e.g. NodeStatusUnknown
	// "Kubelet stopped posting node status." once the node lifecycle
	// controller gave up on a kubelet.
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// KubernetesNodes are the Nodes as the first control plane whose API server
// is ready lists them; ok is false when none is.
func (o *Observation) KubernetesNodes() (nodes []KubeNode, ok bool) {
	for _, n := range o.Ordered() {
		if n.APIServer != nil && n.APIServer.Ready && n.APIServer.Nodes != nil {
			return n.APIServer.Nodes, true
		}
	}

	return nil, false
}

// KubeNodeOf is node n's Kubernetes Node among nodes: the one with one of its
// addresses (the kubelet's node IP may be a further one), else the one named
// as its hostname (the kubelet registers the hostname), else its name.
func KubeNodeOf(nodes []KubeNode, n *NodeObservation) (KubeNode, bool) {
	addrs := n.AllAddresses()

	for _, k := range nodes {
		if k.Address != "" && slices.Contains(addrs, k.Address) {
			return k, true
		}
	}

	for _, name := range []string{n.EtcdName(), n.Name} {
		for _, k := range nodes {
			if k.Name == name {
				return k, true
			}
		}
	}

	return KubeNode{}, false
}

// KubernetesEndpoints is the kubernetes endpoints as the first control plane
// whose API server is ready lists them; ok is false when none is.
func (o *Observation) KubernetesEndpoints() (addrs []string, ok bool) {
	for _, n := range o.Ordered() {
		if n.APIServer != nil && n.APIServer.Ready && n.APIServer.Endpoints != nil {
			return n.APIServer.Endpoints, true
		}
	}

	return nil, false
}

// Kubernetes reports whether the observation saw any API server (a run with
// Kubernetes).
func (o *Observation) Kubernetes() bool {
	for _, n := range o.Nodes {
		if n.APIServer != nil {
			return true
		}
	}

	return false
}

// Observation is the cluster at one poll.
type Observation struct {
	At time.Duration
	// Wall is when the observation was made, by the local clock.
	Wall  time.Time
	Nodes map[string]*NodeObservation
	order []string
}

// NewObservation makes an observation over the given node names, in order.
func NewObservation(at time.Duration, names []string) *Observation {
	return &Observation{At: at, Wall: time.Now(), Nodes: map[string]*NodeObservation{}, order: append([]string(nil), names...)}
}

// Ordered returns the node observations in node order.
func (o *Observation) Ordered() []*NodeObservation {
	out := make([]*NodeObservation, 0, len(o.order))

	for _, n := range o.order {
		if no := o.Nodes[n]; no != nil {
			out = append(out, no)
		}
	}

	return out
}

// Cluster is one etcd cluster as seen from its voting members: members that
// list each other.
type Cluster struct {
	Members []Member
	// Seen are the nodes whose local member list this is.
	Seen []string
}

// Voters counts non-learner members.
func (c Cluster) Voters() int {
	n := 0

	for _, m := range c.Members {
		if !m.IsLearner {
			n++
		}
	}

	return n
}

// Learners counts learner members.
func (c Cluster) Learners() int { return len(c.Members) - c.Voters() }

// MemberOf finds the node's member: the one its own etcd reports being (its
// status's member ID), else one with a peer URL on one of the node's
// addresses, else the one named as the node's hostname.
func (c Cluster) MemberOf(n *NodeObservation) (Member, bool) {
	if n == nil {
		return Member{}, false
	}

	if n.Status != nil && n.Status.MemberID != 0 {
		for _, m := range c.Members {
			if m.ID == n.Status.MemberID {
				return m, true
			}
		}
	}

	return c.Member(n.EtcdName(), n.AllAddresses()...)
}

// EtcdName is the name of the node's etcd member: its hostname.
func (n *NodeObservation) EtcdName() string {
	if n.Hostname != "" {
		return n.Hostname
	}

	return n.Name
}

// AllAddresses are the node's address and its further ones.
func (n *NodeObservation) AllAddresses() []string {
	return append([]string{n.Address}, n.Addresses...)
}

// Member finds the member with a peer URL on one of the addresses, else the
// one named hostname. Addresses come first: two nodes can be given one
// hostname (Talos then removes one's member: duplicate-hostnames), while a
// node's address is its own. A member whose node moved to another address
// (its peer URL still names the old one) is found by its name.
func (c Cluster) Member(hostname string, addresses ...string) (Member, bool) {
	for _, m := range c.Members {
		if m.onAny(addresses) {
			return m, true
		}
	}

	for _, m := range c.Members {
		if m.Hostname == hostname && hostname != "" {
			return m, true
		}
	}

	return Member{}, false
}

// MemberOfTarget finds node n's member by its config: its addresses, else
// its hostname (MemberOf, with no status to go by).
func (c Cluster) MemberOfTarget(n target.Node) (Member, bool) {
	return c.MemberOf(NodeOf(n).unobserved())
}

// APIMembers are the members of a Talos EtcdMemberList answer.
func APIMembers(list []*machine.EtcdMember) []Member {
	out := make([]Member, 0, len(list))

	for _, m := range list {
		out = append(out, Member{ID: m.GetId(), Hostname: m.GetHostname(), PeerURLs: m.GetPeerUrls(), IsLearner: m.GetIsLearner()})
	}

	return out
}

// onAny reports whether one of m's peer URLs is on one of the addresses.
func (m Member) onAny(addresses []string) bool {
	return slices.ContainsFunc(m.PeerURLs, func(u string) bool {
		a := HostOf(u)
		return a != "" && slices.Contains(addresses, a)
	})
}

// NodeOf names the node whose etcd member m is, the converse of MemberOf: the
// node whose own etcd reports being m, else the one with m's peer URL on one
// of its addresses, else the one whose hostname m is named as. "" when none is.
func (o *Observation) NodeOf(m Member) string {
	nodes := o.Ordered()

	for _, n := range nodes {
		if n.Status != nil && m.ID != 0 && n.Status.MemberID == m.ID {
			return n.Name
		}
	}

	for _, n := range nodes {
		if m.onAny(n.AllAddresses()) {
			return n.Name
		}
	}

	for _, n := range nodes {
		if m.Hostname != "" && m.Hostname == n.EtcdName() {
			return n.Name
		}
	}

	return ""
}

// Clusters groups the local member lists the nodes report into distinct etcd
// clusters (more than one is a split brain), largest first.
func (o *Observation) Clusters() []Cluster {
	byKey := map[string]*Cluster{}

	var keys []string

	for _, n := range o.Ordered() {
		if len(n.Members) == 0 {
			continue
		}

		ids := make([]string, 0, len(n.Members))
		for _, m := range n.Members {
			ids = append(ids, m.IDString())
		}

		sort.Strings(ids)
		key := strings.Join(ids, ",")

		c, ok := byKey[key]
		if !ok {
			c = &Cluster{Members: n.Members}
			byKey[key] = c
			keys = append(keys, key)
		}

		c.Seen = append(c.Seen, n.Name)
	}

	// Lists that share a member are views of one cluster taken at different
	// moments; keep the one seen by most nodes.
	var out []Cluster

	for _, k := range keys {
		c := byKey[k]
		merged := false

		for i := range out {
			if shareMember(out[i], *c) {
				if len(c.Seen) > len(out[i].Seen) {
					c.Seen = append(c.Seen, out[i].Seen...)
					out[i] = *c
				} else {
					out[i].Seen = append(out[i].Seen, c.Seen...)
				}

				merged = true

				break
			}
		}

		if !merged {
			out = append(out, *c)
		}
	}

	sort.SliceStable(out, func(i, j int) bool { return len(out[i].Members) > len(out[j].Members) })

	return out
}

func shareMember(a, b Cluster) bool {
	for _, x := range a.Members {
		for _, y := range b.Members {
			if x.ID == y.ID {
				return true
			}
		}
	}

	return false
}

// HostOf is the host of a URL or host:port ("https://10.0.0.2:2380" gives 10.0.0.2).
func HostOf(u string) string {
	if _, rest, ok := strings.Cut(u, "://"); ok {
		u = rest
	}

	if i := strings.LastIndex(u, ":"); i >= 0 {
		u = u[:i]
	}

	return strings.Trim(u, "[]")
}

// DisplayName is a member's name, or "(unstarted, <peer URLs>)" for a learner
// that never started.
func DisplayName(m Member) string {
	if m.Hostname == "" {
		return "(unstarted, " + strings.Join(m.PeerURLs, ",") + ")"
	}

	return m.Hostname
}

// PromotedLine is what machined logs when its promote loop succeeded
// (internal/app/machined/pkg/system/services/etcd.go).
const PromotedLine = "successfully promoted etcd member"

// RefusedPromotion is what etcd's leader logs each time it refuses to promote
// a learner that is not in sync (etcd 3.6 server/etcdserver/server.go,
// mayPromoteMember). The line names no member.
const RefusedPromotion = "rejecting promote learner: learner is not ready"

// SlowFdatasync is what etcd's WAL logs, as a warning, when one fdatasync took
// longer than a second (server/storage/wal/wal.go sync, warnSyncDuration).
const SlowFdatasync = "slow fdatasync"

// EtcdWarnings are the warnings of etcd's log a history keeps (its errors it
// keeps all): etcd warns of every slow request and unreachable peer, so only
// those a diagnosis reads.
var EtcdWarnings = []string{SlowFdatasync}

// RestartForever is in the message restart.Forever leaves on a service whose
// task exited (internal/app/machined/pkg/system/runner/restart/restart.go).
const RestartForever = "going to restart forever"

// FailedByStop reports whether a Failed service's message is that of a
// service Talos stopped, not of one that gave up: stopping cancels the
// runner's context, and a service stopped while it waited for its
// conditions or ran its pre stage fails with that cancellation
// ("Condition failed: context canceled", "Failed to run pre stage: …
// context canceled"; internal/app/machined/pkg/system/service_runner.go Run).
func FailedByStop(message string) bool {
	return strings.HasSuffix(message, context.Canceled.Error())
}
