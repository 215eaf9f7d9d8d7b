package reports_test

import (
	"bytes"
	"testing"

	"github.com/talchaos/talchaos/harness/eventlog"
	"github.com/talchaos/talchaos/reports"
)

// The progress lines are what `talchaos run` prints; log lines only when verbose.
func TestProgress(t *testing.T) {
	events := []eventlog.Event{
		{TMs: 1234, Node: "cp2", Kind: "etcd.learner-added", Msg: "member 8e9e05c52164694d added as learner"},
		{TMs: 1500, Node: "cp2", Kind: "log.machined", Msg: "etcd is waiting to join the cluster"},
		{TMs: 61000, Kind: "run.verdict", Msg: "pass"},
	}

	for _, tc := range []struct {
		verbose bool
		want    string
	}{
		{false, "  1.234s  cp2   etcd.learner-added       member 8e9e05c52164694d added as learner\n" +
			"    1m1s        run.verdict              pass\n"},
		{true, "  1.234s  cp2   etcd.learner-added       member 8e9e05c52164694d added as learner\n" +
			"    1.5s  cp2   log.machined             etcd is waiting to join the cluster\n" +
			"    1m1s        run.verdict              pass\n"},
	} {
		var b bytes.Buffer

		sink := reports.Progress(&b, tc.verbose)
		for _, e := range events {
			sink(e)
		}

		if b.String() != tc.want {
			t.Errorf("verbose=%v:\n%s\nwant:\n%s", tc.verbose, b.String(), tc.want)
		}
	}
}
