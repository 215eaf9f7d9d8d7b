package judge

import (
	"strings"
	"testing"

	"github.com/talchaos/talchaos/harness/history"
)

// Two control planes share 10.120.0.10 (talos#9276): the holder goes down,
// the other's etcd has no quorum and never takes it.
func TestSharedIPLost(t *testing.T) {
	const vip = "10.120.0.10"

	noQuorum := running(false, "context deadline exceeded")

	// look is a control plane's look with the shared IP its config gives,
	// held or not; a node down gives none.
	look := func(ms int64, node string, etcd *history.Service, holds, final bool) history.Entry {
		mode := history.ModeConfigured
		if etcd == nil {
			mode = history.ModeDown
		}

		e := observed(ms, node, mode, etcd, nil, final)
		if mode == history.ModeConfigured {
			e.Observed.SharedIP, e.Observed.HoldsSharedIP = vip, holds
		}

		return e
	}

	held := []history.Entry{look(10000, "cp1", running(true, ""), true, false), look(10000, "cp2", running(true, ""), false, false)}
	lostAt := func(ms int64) []history.Entry {
		return append(held, look(ms, "cp1", nil, false, true), look(ms, "cp2", noQuorum, false, true))
	}

	for _, tc := range []struct {
		name string
		h    history.History
		want []string // the evidence's parts; nil: no diagnosis
	}{
		{"the holder went down and the other never took it", threeNodes(60, lostAt(90000)...),
			[]string{"cp1 held 10.120.0.10 until", "answering without it: cp2 (etcd: context deadline exceeded)"}},
		{"unheld for less than the holder's session may live", threeNodes(60, lostAt(14000)...), nil},
		{"another control plane took it", threeNodes(60, append(held, look(90000, "cp1", nil, false, true), look(90000, "cp2", running(true, ""), true, true))...), nil},
		{"never held (not bootstrapped yet)", threeNodes(60, look(90000, "cp1", waitingFor("etcd is waiting to join the cluster"), false, true)), nil},
		{"no shared IP", threeNodes(60, observed(10000, "cp1", history.ModeConfigured, running(true, ""), nil, false),
			observed(90000, "cp1", history.ModeConfigured, noQuorum, nil, true)), nil},
	} {
		t.Run(tc.name, func(t *testing.T) { wantOneDiagnosis(t, "shared-ip-lost", tc.h, "cp1", tc.want) })
	}
}

// The doctor's one look: unheld, and no control plane can take it (none has
// a healthy etcd); one that can may hold it soon.
func TestSharedIPLostAtOneLook(t *testing.T) {
	look := func(etcd *history.Service) history.History {
		e := observed(1000, "cp2", history.ModeConfigured, etcd, nil, true)
		e.Observed.SharedIP = "10.120.0.10"

		return threeNodes(1, e)
	}

	if got := codeFunc("shared-ip-lost")(FromHistory(look(running(false, "context deadline exceeded")), Options{Snapshot: true})); len(got) != 1 ||
		got[0].Node != "" || !strings.Contains(got[0].Evidence, "answering without it: cp2 (etcd: context deadline exceeded)") {
		t.Errorf("no quorum: %+v", got)
	}

	if got := codeFunc("shared-ip-lost")(FromHistory(look(running(true, "")), Options{Snapshot: true})); len(got) != 0 {
		t.Errorf("a healthy etcd may take it: %+v", got)
	}
}
