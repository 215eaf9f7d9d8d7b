package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/talchaos/talchaos/harness/eventlog"
)

// A process stopped for two seconds (SIGSTOP from another process, then
// SIGCONT: as a paused VM looks from inside) is told as a stall; running
// on, it is not.
func TestWatchStallsTellsAStoppedProcess(t *testing.T) {
	log := eventlog.New()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})

	go func() {
		defer close(done)

		watchStalls(ctx, log, 50*time.Millisecond, time.Second)
	}()

	// Running, not stopped: nothing to tell.
	time.Sleep(300 * time.Millisecond)

	stop := exec.Command("sh", "-c", fmt.Sprintf("kill -STOP %d; sleep 2; kill -CONT %d", os.Getpid(), os.Getpid()))
	if err := stop.Run(); err != nil {
		t.Fatal(err)
	}

	deadline := time.Now().Add(30 * time.Second)

	for !strings.Contains(kinds(log), "run.stalled") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}

	cancel()
	<-done

	events := log.Events()
	if len(events) != 1 || events[0].Kind != "run.stalled" {
		t.Fatalf("events %v, want one run.stalled", events)
	}

	said, _, _ := strings.Cut(strings.TrimPrefix(events[0].Msg, "this process was not scheduled for "), " ")
	if d, err := time.ParseDuration(said); err != nil || d < 1900*time.Millisecond || d > 10*time.Second {
		t.Errorf("%q does not say the two seconds", events[0].Msg)
	}
}

func kinds(log *eventlog.Log) string {
	var out []string
	for _, e := range log.Events() {
		out = append(out, e.Kind)
	}

	return strings.Join(out, " ")
}
