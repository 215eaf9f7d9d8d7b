package judge

import (
	"fmt"
	"strings"
	"time"

	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/result"
)

// splitBrain: voting members report member lists that share no member: separate
// etcd clusters (talos #5500, Bootstrap on two nodes).
func splitBrain(ev *Evidence) []result.Diagnosis {
	clusters := ev.Final.Clusters()
	if len(clusters) < 2 {
		return nil
	}

	var parts []string

	for _, c := range clusters {
		var names []string
		for _, m := range c.Members {
			names = append(names, history.DisplayName(m))
		}

		parts = append(parts, fmt.Sprintf("{%s} seen by %s", strings.Join(names, ", "), strings.Join(c.Seen, ",")))
	}

	var out []result.Diagnosis

	for _, c := range clusters[1:] {
		for _, node := range c.Seen {
			out = append(out, diag("split-brain", node,
				fmt.Sprintf("%s runs a separate etcd cluster: %d clusters exist", node, len(clusters)),
				strings.Join(parts, "; "), ev.Now))
		}
	}

	return out
}

// peerURLExists: a join was refused because a member with the node's peer URL
// already exists (its own earlier add, whose reply was lost).
func peerURLExists(ev *Evidence) []result.Diagnosis {
	var out []result.Diagnosis

	for _, n := range ev.controlPlanes() {
		if line, ok := ev.lastLine(n.Name, errPeerURLExists); ok {
			out = append(out, diag("peer-url-exists", n.Name,
				n.Name+" cannot join: a member with its peer URL is already in the cluster", line.Text, line.At))
		}
	}

	return out
}

// noQuorum: control planes with etcd running, none of them able to complete a
// linearizable read.
func noQuorum(ev *Evidence) []result.Diagnosis {
	var (
		running, failing int
		evidence         string
	)

	for _, n := range ev.controlPlanes() {
		if n.Etcd == nil || n.Etcd.State != "Running" || (n.Status != nil && n.Status.IsLearner) {
			continue
		}

		running++

		if !n.Etcd.HealthUnknown && !n.Etcd.Healthy {
			failing++
			evidence = n.Name + ": Health check failed: " + n.Etcd.HealthMessage
		}
	}

	if running == 0 || failing < running {
		return nil
	}

	return []result.Diagnosis{diag("no-quorum", "", fmt.Sprintf("none of the %d running etcd voting members can reach quorum", running), evidence, ev.Now)}
}

func msDuration(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }
