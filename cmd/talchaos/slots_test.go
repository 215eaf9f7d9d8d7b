package main

import (
	"testing"

	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// onMachine is a target whose nodes are (or are not) on this machine; slots
// asks nothing else of it.
type onMachine struct {
	target.Target
	local bool
}

func (t onMachine) Disposable() bool { return t.local }

func TestSlots(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		controlPlanes, workers int
		kubernetes, real       bool
		want                   int
	}{
		{name: "the catalogue's three control planes", controlPlanes: 3, want: 1},
		{name: "seven control planes", controlPlanes: 7, want: 1},
		{name: "7 + 50", controlPlanes: 7, workers: 50, want: 2},
		{name: "three control planes with Kubernetes", controlPlanes: 3, kubernetes: true, want: 2},
		{name: "one control plane with Kubernetes", controlPlanes: 1, kubernetes: true, want: 1},
		{name: "7 + 50 with Kubernetes", controlPlanes: 7, workers: 50, kubernetes: true, want: 4},
		{name: "7 + 50 with Kubernetes on real nodes", controlPlanes: 7, workers: 50, kubernetes: true, real: true, want: 1},
	} {
		sc := &scenario.Scenario{Cluster: scenario.Cluster{ControlPlanes: tc.controlPlanes, Workers: tc.workers, Kubernetes: tc.kubernetes}}

		if got := slots(sc, onMachine{local: !tc.real}); got != tc.want {
			t.Errorf("%s: %d slots, want %d", tc.name, got, tc.want)
		}
	}
}
