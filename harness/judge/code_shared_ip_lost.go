package judge

import (
	"fmt"
	"strings"
	"time"

	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/result"
)

var _ = register(Code{
	Name: "shared-ip-lost",
	Doc: "the cluster's shared IP (VIP) was held and no control plane has held it since, though one answers: " +
		"Talos elects the VIP's holder through etcd, and without a healthy etcd (quorum) no one can take it",
	Diagnose: sharedIPLost,
	Remedy: func(r RemedyFor) []string {
		back := "# bring back the control planes etcd's quorum misses: the VIP returns with a healthy etcd"
		if r.Diagnosis.Node != "" {
			back = fmt.Sprintf("# bring %s (its last holder) back, or whichever control plane etcd's quorum misses: the VIP returns with a healthy etcd", r.Diagnosis.Node)
		}

		return []string{
			back,
			fmt.Sprintf("talosctl -n %s etcd members   # a control plane's own address, not the VIP", r.Voter),
			"# run three control planes, not two: with two, either one down takes etcd's quorum and the VIP with it (siderolabs/talos#9276)",
		}
	},
})

// vipSessionTTL is how long the holder's election session outlives it: Talos
// campaigns with concurrency.NewSession's default lease TTL
// (controllers/network/operator/vip.go, v1.12.6), 60 s, after which a
// control plane whose etcd is healthy takes the shared IP. Unheld for
// longer (twice as long, and 5 s of wall time at the least: a loaded
// machine, and the sim's lease of 3 s at the least), it is not on its way to
// another node.
const (
	vipSessionTTL = 60 * time.Second
	vipMoveFloor  = 5 * time.Second
)

// sharedIPLost: at the end a control plane answers whose config gives a
// shared IP, none holds it, one did, and it has been unheld for longer than
// the last holder's election session lives. The field's case (talos#9276):
// two control planes, one down; the other's etcd has no quorum, so it is
// never healthy and never campaigns, and the VIP is "missing forever".
//
// One look at a live cluster (the doctor) cannot say since when: there the
// shared IP is lost when no one holds it and no answering control plane
// whose config gives it has a healthy etcd, so none can take it.
func sharedIPLost(ev *Evidence) []result.Diagnosis {
	ip, holder := ev.Final.SharedIPHolder()
	last, held := ev.SharedIPHeld[ip]

	switch {
	case ip == "" || holder != "":
		return nil
	case ev.Snapshot:
		if canTake(ev, ip) {
			return nil
		}
	case !held || ev.Now-last.At <= ev.Clock.WallAtLeast(2*vipSessionTTL, vipMoveFloor):
		return nil
	}

	var answering []string

	for _, n := range ev.controlPlanes() {
		if n.Mode != history.ModeConfigured || n.SharedIP != ip {
			continue
		}

		s := n.Name
		if e := n.Etcd; e != nil && !e.Healthy && !e.HealthUnknown && e.HealthMessage != "" {
			s += " (etcd: " + e.HealthMessage + ")"
		} else if e != nil && e.State != "Running" {
			s += " (etcd " + e.State + ")"
		}

		answering = append(answering, s)
	}

	if ev.Snapshot {
		return []result.Diagnosis{diag("shared-ip-lost", "",
			fmt.Sprintf("the shared IP %s is held by no control plane, and none of them can take it: Talos's VIP operator campaigns only with a healthy etcd", ip),
			"answering without it: "+strings.Join(answering, ", "), ev.Now)}
	}

	return []result.Diagnosis{diag("shared-ip-lost", last.Node,
		fmt.Sprintf("the shared IP %s has been held by no control plane for %s, since %s last held it: Talos's VIP operator takes it only with a healthy etcd",
			ip, ev.span(ev.Now-last.At), last.Node),
		fmt.Sprintf("%s held %s until %s; answering without it: %s", last.Node, ip, ev.span(last.At), strings.Join(answering, ", ")),
		ev.Now)}
}

// canTake reports whether an answering control plane whose config gives ip
// has a running, healthy etcd: it campaigns, and may hold ip soon.
func canTake(ev *Evidence, ip string) bool {
	for _, n := range ev.controlPlanes() {
		if n.Mode == history.ModeConfigured && n.SharedIP == ip && n.Etcd != nil && n.Etcd.State == "Running" && n.Etcd.Healthy {
			return true
		}
	}

	return false
}
