package talosapi

import (
	"fmt"
	"strings"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
)

// kmsgMaxLineLength is go-kmsg's MaxLineLength (writer.go, v0.1.5): what
// fits in one /dev/kmsg record.
const kmsgMaxLineLength = 1024 - 48

// Dmesg streams the node's kernel log as machined's Dmesg does
// (v1alpha1_server.go, v1.12.6): one message per record, formatted
// "%s: %7s: [%s]: %s" from facility, priority, timestamp (RFC 3339, ns) and
// text. The simulated kernel log holds what machined logs, which on a metal
// node goes to /dev/kmsg through go-kmsg's writer with no priority prefix, so
// the kernel files it as user.warning (devkmsg_write's defaults): a record
// per line, tabs made spaces, long lines cut (writer.go). Follow keeps streaming new
// records; Tail starts at the end (kmsg.FromTail), so without Follow it
// sends nothing.
func (m *machineServer) Dmesg(req *machine.DmesgRequest, srv machine.MachineService_DmesgServer) error {
	buf := m.backend().Log("machined")
	if buf == nil {
		return nil
	}

	tail := -1
	if req.Tail {
		tail = 0
	}

	return buf.StreamTimed(srv.Context(), tail, req.Follow, func(t time.Time, line string) error {
		for _, record := range kmsgRecords(t, line) {
			if err := srv.Send(&common.Data{Bytes: record}); err != nil {
				return err
			}
		}

		return nil
	})
}

// kmsgRecords is how Dmesg renders what machined logged at t: go-kmsg's
// writer makes each line of it a record.
func kmsgRecords(t time.Time, text string) [][]byte {
	var out [][]byte

	for line := range strings.SplitSeq(text, "\n") {
		line = strings.ReplaceAll(line, "\t", " ") + "\n"
		if len(line) > kmsgMaxLineLength {
			line = line[:kmsgMaxLineLength-4] + "...\n"
		}

		out = append(out, fmt.Appendf(nil, "%s: %7s: [%s]: %s", "user", "warning", t.UTC().Format(time.RFC3339Nano), line))
	}

	return out
}
