package reports

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/talchaos/talchaos/harness/eventlog"
	"github.com/talchaos/talchaos/harness/result"
)

// ProgressLine renders one event as `talchaos run` prints it while a run goes
// on: offset, node, kind, message (scrubbed: result.ScrubKeyMaterial), and a
// newline.
func ProgressLine(e eventlog.Event) string {
	return fmt.Sprintf("%8s  %-5s %-24s %s\n", (time.Duration(e.TMs) * time.Millisecond).Truncate(time.Millisecond), e.Node, e.Kind, result.ScrubKeyMaterial(e.Msg))
}

// Progress returns an event sink that prints every event to w as it happens;
// the nodes' log lines ("log.*" events) only when verbose.
func Progress(w io.Writer, verbose bool) func(eventlog.Event) {
	return func(e eventlog.Event) {
		if strings.HasPrefix(e.Kind, "log.") && !verbose {
			return
		}

		io.WriteString(w, ProgressLine(e)) //nolint:errcheck
	}
}
