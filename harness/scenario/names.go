package scenario

import (
	"strconv"
	"strings"
	"time"
)

// DefaultEtcdImagePull is the etcd image pull time of a node not listed in
// cluster.nodes (Parse fills it in for listed nodes).
const DefaultEtcdImagePull = 2 * time.Second

// DefaultWithin bounds a run when expect.within is not set.
const DefaultWithin = 30 * time.Minute

// DefaultValueBytes is the workload value size when writes are enabled without one.
const DefaultValueBytes = 256

// MaxNodes bounds cluster.controlPlanes and cluster.workers: each node is a real etcd
// and Talos API on the test machine.
const MaxNodes = 9

// MaxTimeScale bounds timeScale: beyond it Talos timers shrink below the scheduling
// noise of the test machine.
const MaxTimeScale = 10000

// Orchestrators are the bootstrap strategies orchestrator.name can pick.
var Orchestrators = []string{"resilient", "naive", "exec"}

// Ports are the node ports a fault's port field can name.
var Ports = []string{"talos-api", "etcd-client", "etcd-peer"}

// Directions are the values of a network fault's direction field.
var Directions = []string{"upstream", "downstream", "both"}

// DiagnosisCodes are the stable diagnosis codes expectations can name. They are a
// public contract: scenario files and reports depend on them not changing.
var DiagnosisCodes = []string{
	"too-many-learners",
	"learner-not-synced",
	"learner-not-promoted",
	"stale-learner",
	"node-in-maintenance",
	"tls-certificate-required",
	"pki-mismatch",
	"split-brain",
	"peer-url-exists",
	"config-invalid",
	"apply-reply-lost",
	"no-quorum",
	"api-unreachable",
	"learner-promotion-pending",
}

// NodeNames lists the cluster's nodes: control planes cp1..cpN, then workers w1..wM.
func (c Cluster) NodeNames() []string {
	names := make([]string, 0, max(c.ControlPlanes, 0)+max(c.Workers, 0))
	for i := 1; i <= c.ControlPlanes; i++ {
		names = append(names, "cp"+strconv.Itoa(i))
	}

	for i := 1; i <= c.Workers; i++ {
		names = append(names, "w"+strconv.Itoa(i))
	}

	return names
}

// IsControlPlane reports whether name is a control-plane node name (cp1, cp2, ...).
func IsControlPlane(name string) bool {
	n, ok := strings.CutPrefix(name, "cp")

	return ok && isIndex(n)
}

// isIndex reports whether s is a positive decimal without leading zeros, the form of
// the number in a node name.
func isIndex(s string) bool {
	if s == "" || s[0] == '0' {
		return false
	}

	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}

	return true
}
