package simtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/talchaos/talchaos/harness/scratch"
)

// leaveCluster is set in the environment of the child this test starts: it
// starts a cluster and exits without closing it, as a test binary killed by
// its -timeout does.
const leaveCluster = "TALCHAOS_SIMTEST_LEAVE_CLUSTER"

func TestMain(m *testing.M) {
	if os.Getenv(leaveCluster) != "" {
		if _, err := Start(context.Background(), Options{}); err != nil {
			os.Exit(2)
		}

		os.Exit(0)
	}

	os.Exit(m.Run())
}

// A killed test binary leaves its clusters' temp dirs, with their keys; the
// next process's first cluster removes them.
func TestFirstClusterReapsKilledBinariesLeftovers(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)

	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), leaveCluster+"=1")

	if out, err := child.CombinedOutput(); err != nil {
		t.Fatalf("the child that leaves its cluster: %v\n%s", err, out)
	}

	left := marked(t, tmp)
	if len(left) == 0 {
		t.Fatal("the child left no marked temp dir: nothing to reap")
	}

	reapOnce = sync.Once{}

	New(t, Options{})

	for _, dir := range left {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s, left by a killed test binary, is still there after the next cluster started (%v)", dir, err)
		}
	}
}

// marked lists the marked temp dirs in dir.
func marked(t *testing.T, dir string) []string {
	t.Helper()

	markers, err := filepath.Glob(filepath.Join(dir, scratch.Prefix+"*", scratch.MarkerFile))
	if err != nil {
		t.Fatal(err)
	}

	for i, m := range markers {
		markers[i] = filepath.Dir(m)
	}

	return markers
}
