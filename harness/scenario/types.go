// Package scenario defines the versioned scenario file format (apiVersion talchaos/v1):
// the cluster to form, the Talos behaviour profile, the time scale, the orchestrator,
// the faults with their triggers and the expectations. Parsing is strict: unknown
// fields and bad values are errors naming file, line and field.
package scenario

import (
	"errors"
	"regexp"
	"time"

	"github.com/distribution/reference"

	"github.com/talchaos/talchaos/harness/strictyaml"
)

// APIVersion is the only scenario format version understood.
const APIVersion = "talchaos/v1"

// Kind is the only document kind.
const Kind = "Scenario"

// Profiles are the Talos behaviour profiles (TALOS-FIDELITY.md).
var Profiles = []string{"v1.12", "v1.13", "v1.14", "main"}

// DefaultProfile is the profile used when a scenario names none.
const DefaultProfile = "v1.12"

// RandomNode as a fault's node lets the run's seed pick a control plane other
// than the bootstrap node.
const RandomNode = "random"

// Scenario is one parsed, validated scenario file.
type Scenario struct {
	APIVersion   string       `yaml:"apiVersion"`
	Kind         string       `yaml:"kind"`
	Name         string       `yaml:"name"`
	Description  string       `yaml:"description"`
	Reproduces   []string     `yaml:"reproduces"` // seed files and issues this scenario reproduces
	Talos        string       `yaml:"talos"`      // behaviour profile; default DefaultProfile
	TimeScale    float64      `yaml:"timeScale"`  // Talos timers are divided by it on the sim; default 1, must be >= 1
	Cluster      Cluster      `yaml:"cluster"`
	Orchestrator Orchestrator `yaml:"orchestrator"`
	Faults       []Fault      `yaml:"faults"`
	Expect       Expect       `yaml:"expect"`
	// Certify is what `talchaos certify` expects of a good bootstrap under
	// this scenario's cluster and faults.
	Certify Certify `yaml:"certify"`

	// File is the path the scenario was read from (not part of the YAML).
	File string `yaml:"-"`
	// Source is the file's content as it was parsed (not part of the YAML):
	// reports keep it so that a run can be replayed when the file changed.
	Source []byte `yaml:"-"`

	// lines maps field paths ("faults[2].when.state") to their line in File, so errors
	// raised after parsing (by the chaos package, say) can still point at the right line.
	lines strictyaml.Lines
}

// What a good bootstrap does under a scenario (`talchaos certify`).
const (
	// CertifySurvived: the faults are survivable; a good bootstrap
	// converges the cluster and exits 0.
	CertifySurvived = "survived"
	// CertifyLoud: no bootstrap can converge the cluster (an invalid config,
	// a PKI mismatch); a good one says so with a non-zero exit.
	CertifyLoud = "loud"
)

// Certify is what `talchaos certify` expects of a good bootstrap under a
// scenario: Expected (survived or loud), or Skip, why certify does not run
// it (its failure is its own orchestrator's doing, or it repeats another
// scenario's faults with another orchestrator).
type Certify struct {
	Expected string `yaml:"expected"`
	Skip     string `yaml:"skip"`
	// Within is how long a good bootstrap may take here (Talos time;
	// default expect.within, which is often the naive orchestrator's
	// shorter window): certify's expect.within and the command's time.
	Within Duration `yaml:"within"`
}

// ForCertify is a copy of the scenario as `talchaos certify` runs it: its
// cluster and faults, with orch (a user's command or function) in place of
// its orchestrator, given what the scenario's was (the bootstrap node, a
// talosconfig from other secrets) and certify.within (else expect.within)
// as its time; at timeScale when that is set.
func (s *Scenario) ForCertify(orch Orchestrator, timeScale float64) *Scenario {
	c := *s

	if c.Certify.Within.Duration > 0 {
		c.Expect.Within = c.Certify.Within
	}

	orch.BootstrapNode, orch.Talosconfig, orch.Timeout = s.Orchestrator.BootstrapNode, s.Orchestrator.Talosconfig, c.Expect.Within
	orch.UpgradeTo = s.Orchestrator.UpgradeTo
	c.Orchestrator = orch

	if timeScale > 0 {
		c.TimeScale = timeScale
	}

	return &c
}

// Cluster describes the nodes to create. Node names are cp1..cpN for control planes
// and w1..wM for workers.
type Cluster struct {
	ControlPlanes int                     `yaml:"controlPlanes"` // >= 1
	Workers       int                     `yaml:"workers"`       // >= 0
	Nodes         map[string]NodeOverride `yaml:"nodes"`         // keys must name existing nodes
	Etcd          Etcd                    `yaml:"etcd"`
	Workload      Workload                `yaml:"workload"`
	// Kubernetes runs the real control plane (kube-apiserver,
	// kube-controller-manager, kube-scheduler) on every control plane, as
	// Talos's static pods, and a KWOK kubelet on every node (the sim and
	// container targets; needs `make kube`).
	Kubernetes bool `yaml:"kubernetes"`
	// ConfigPatches are applied to the generated machine configs with the
	// machinery's config patcher, as `talosctl gen config --config-patch` does.
	ConfigPatches []ConfigPatch `yaml:"configPatches"`
	// Network gives the nodes the operator's addresses (IPv6, dual-stack)
	// instead of the sim's loopback block; nil: the target's own.
	Network *Network `yaml:"network"`
}

// Network is a cluster's addressing as an operator wrote it: Addresses are
// cp1's address in each of the nodes' subnets, with the subnet's prefix
// length (fd00:101::11/64, 10.101.0.11/24); every other node has the next
// ones, counting up over the control planes, then the workers; the first is
// the one a node is reached at. Endpoint is the control-plane endpoint's
// address (cluster.controlPlane.endpoint). A node's further addresses are
// its override's.
type Network struct {
	Addresses []string `yaml:"addresses"`
	Endpoint  string   `yaml:"endpoint"` // default the first subnet's host 1
}

// NodeAddress is a further address of a node (a loopback address it
// announces, a second interface's).
type NodeAddress struct {
	Address string `yaml:"address"`
	// Unrouted: the other nodes cannot reach it (a loopback address no
	// router announces); a connection to it gets "no route to host".
	Unrouted bool `yaml:"unrouted"`
}

// ConfigPatch is a strategic-merge patch (YAML) for some nodes' configs.
type ConfigPatch struct {
	Nodes []string `yaml:"nodes"` // empty: every node
	Patch string   `yaml:"patch"`
}

// NodeOverride tunes one simulated node.
type NodeOverride struct {
	// EtcdImagePull is how long the etcd service spends pulling its image in "Running pre state"
	// before it tries to join (Talos time). Default 2s.
	EtcdImagePull Duration `yaml:"etcdImagePull"`
	// BootDelay is how long after the cluster starts the node's Talos API comes up (Talos time).
	BootDelay Duration `yaml:"bootDelay"`
	// EtcdStartDelay is how long the etcd container takes to start after Talos
	// created its runner (Talos time; slow disks, a cold container runtime). A
	// joining node's learner is in the member list, unstarted, all that time.
	EtcdStartDelay Duration `yaml:"etcdStartDelay"`
	// Addresses are the node's further addresses, after its address in each
	// of cluster.network's subnets (which they need).
	Addresses []NodeAddress `yaml:"addresses"`
}

// Etcd tunes the embedded etcd members. Zero values mean the real etcd defaults.
type Etcd struct {
	MaxLearners            int    `yaml:"maxLearners"`            // default 1
	SnapshotCount          uint64 `yaml:"snapshotCount"`          // default 10000
	SnapshotCatchUpEntries uint64 `yaml:"snapshotCatchUpEntries"` // default 5000
}

// Workload models the kube-apiserver writing to etcd once a control plane's etcd is healthy.
type Workload struct {
	WritesPerSecond int `yaml:"writesPerSecond"` // default 0: no writes
	ValueBytes      int `yaml:"valueBytes"`      // default 256
}

// Orchestrator picks the bootstrap strategy.
type Orchestrator struct {
	Name          string   `yaml:"name"`          // resilient (default) | naive | exec
	BootstrapNode string   `yaml:"bootstrapNode"` // default cp1
	Timeout       Duration `yaml:"timeout"`       // Talos time; default Expect.Within
	Command       []string `yaml:"command"`       // exec only
	// RetryApply (naive only) retries a failed apply through the same insecure
	// maintenance client every 5 s until it succeeds, without checking whether
	// the node already left maintenance (field report FR-004); bootstrap then waits for
	// every apply to succeed.
	RetryApply bool `yaml:"retryApply"`
	// BootstrapNodes (naive only) bootstraps each of these control planes in
	// turn, as a script looping over nodes does (talos #5500), instead of only
	// BootstrapNode.
	BootstrapNodes []string `yaml:"bootstrapNodes"`
	// Endpoint (naive only) is where the talosconfig client's calls go:
	// "" each node's own address; "cluster" the cluster's endpoint
	// (cluster.network.endpoint, a shared IP or a load balancer's), every
	// call routed on to its node, as `talosctl -e ENDPOINT -n NODE` does (a
	// script bootstrapping through the VIP, cozystack/talos-bootstrap#30).
	// The insecure apply still goes to each node's address.
	Endpoint string `yaml:"endpoint"`
	// Talosconfig is what the orchestrator authenticates with: "" the cluster's
	// own; "other-secrets" one generated from another secrets bundle, as after
	// `talosctl gen config --force` regenerated the talosconfig (field report FR-001).
	Talosconfig string `yaml:"talosconfig"`
	// UpgradeTo, when set, is an installer image the orchestrator upgrades
	// every node to once the bootstrap is done, one node after another,
	// control planes first (`talosctl upgrade -n NODE --image IMAGE`); the
	// exec orchestrator's command gets it as TALCHAOS_UPGRADE_IMAGE. Its
	// tag is the Talos version the nodes report afterwards.
	UpgradeTo string `yaml:"upgradeTo"`
}

// UpgradeVersion is the Talos version an installer image installs: its tag
// (vX.Y.Z, with an optional pre-release), or "" with the reason it has none.
func UpgradeVersion(image string) (string, error) {
	ref, err := reference.ParseDockerRef(image)
	if err != nil {
		return "", err
	}

	tagged, ok := ref.(reference.Tagged)
	if !ok || !talosVersionTag.MatchString(tagged.Tag()) {
		return "", errors.New("its tag must be the Talos version it installs, as vX.Y.Z (ghcr.io/siderolabs/installer:v1.12.7)")
	}

	return tagged.Tag(), nil
}

// talosVersionTag is a Talos release's tag.
var talosVersionTag = regexp.MustCompile(`^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`)

// Fault is one scheduled fault: its name, its kind, when it starts and heals,
// and the kind's own parameters (Spec).
type Fault struct {
	Name string `yaml:"name"` // unique within the scenario; default "<kind>-<index>"
	Kind string `yaml:"kind"`

	// Trigger: exactly one of At (Talos time after the run starts) or When.
	At   *Duration `yaml:"at"`
	When *When     `yaml:"when"`
	// For is how long the fault lasts (Talos time); zero means until the run ends.
	For Duration `yaml:"for"`
	// Until heals the fault once a node is observed in a state (plus its after):
	// a duration measured from an event of the run rather than from the fault's start.
	Until *When `yaml:"until"`

	// Spec is the kind's own parameters, decoded strictly into the kind's type
	// (harness/chaos, one file per kind): a field the kind does not have is an
	// error.
	Spec FaultSpec `yaml:"-"`

	// Line is the line of the fault in the file (not part of the YAML).
	Line int `yaml:"-"`
	// Index is the position of the fault in the faults list (not part of the YAML);
	// errors name the fault as faults[Index].
	Index int `yaml:"-"`
}

// FaultSpec is one fault kind's parameters. The kinds live in harness/chaos;
// the scenario format only knows that each decodes and validates itself.
type FaultSpec interface {
	// Kind is the catalogue name ("bandwidth").
	Kind() string
	// Validate reports every problem of the parameters through c.
	Validate(c *FaultCheck)
}

// Catalogue is what a scenario can name that is defined outside this
// package, one type per name where it is defined: the fault kinds and the
// trigger states (harness/chaos), the diagnosis codes (harness/judge).
// chaos.Catalogue is the one the engine uses.
type Catalogue interface {
	// New returns the zero parameters of a kind (a value of the kind's type).
	New(kind string) (FaultSpec, bool)
	// Names lists the kinds.
	Names() []string
	// TriggerStates lists the states a trigger can wait for.
	TriggerStates() []string
	// Counted reports whether a trigger state takes a count.
	Counted(state string) bool
	// DiagnosisCodes lists the diagnosis codes expectations can name.
	DiagnosisCodes() []string
}

// When is a state trigger: the fault starts the first time Node is observed in State.
type When struct {
	Node  string `yaml:"node"`
	State string `yaml:"state"`
	// After delays the start once the state is seen (Talos time).
	After Duration `yaml:"after"`
	// Count is the k of "promote-refused": the k-th refusal (default 1).
	Count int `yaml:"count"`
}

// Times is how many observations of the state the trigger waits for.
func (w When) Times() int { return max(w.Count, 1) }

// Expect is what must hold at the end of the run.
type Expect struct {
	// Within bounds the run (Talos time); default 30m.
	Within    Duration `yaml:"within"`
	Converged *bool    `yaml:"converged"`
	Voters    *int     `yaml:"voters"`
	Learners  *int     `yaml:"learners"`
	// KubernetesEndpoints is how many control planes the kubernetes
	// endpoints list at the end (cluster.kubernetes).
	KubernetesEndpoints *int `yaml:"kubernetesEndpoints"`
	// NodesReady is how many Kubernetes Nodes are Ready at the end
	// (cluster.kubernetes): every node, control planes and workers, once
	// its kubelet has registered and reports.
	NodesReady *int `yaml:"nodesReady"`
	// Upgraded is how many nodes report the version of
	// orchestrator.upgradeTo at the end.
	Upgraded *int `yaml:"upgraded"`
	// SharedIP is whether a control plane holds the cluster's shared IP
	// (VIP) at the end: "held" or "unheld" (result.SharedIPHeld, ...).
	SharedIP           string              `yaml:"sharedIP"`
	NodesInMaintenance []string            `yaml:"nodesInMaintenance"`
	Diagnoses          []ExpectedDiagnosis `yaml:"diagnoses"`
	// NoDiagnoses asserts that none of these codes is produced.
	NoDiagnoses []string `yaml:"noDiagnoses"`
	// Settle keeps observing at least this long after the orchestrator
	// returned (Talos time; default 30s), for faults that strike a formed
	// cluster.
	Settle Duration `yaml:"settle"`
	// Stable is how long the judged state must hold before the run ends, and
	// how long the cluster must have been converged to count as converged
	// (Talos time; default 30s, more than one etcd health check period).
	Stable Duration `yaml:"stable"`
	// Promotions bound the time a node spent as a learner before its promotion.
	Promotions []ExpectedPromotion `yaml:"promotions"`
}

// ExpectedPromotion bounds one node's wait from becoming a learner to being
// promoted (Talos time); zero bounds are not checked. The node must be
// promoted; a node that joined again as another member is judged by its
// last promoted member.
type ExpectedPromotion struct {
	Node    string   `yaml:"node"`
	AtLeast Duration `yaml:"atLeast"`
	AtMost  Duration `yaml:"atMost"`
}

// ExpectedDiagnosis must be among the run's diagnoses; Node empty matches any node.
type ExpectedDiagnosis struct {
	Code string `yaml:"code"`
	Node string `yaml:"node"`
}

// Duration is a Go duration string in YAML ("90s", "10m").
type Duration struct{ time.Duration }
