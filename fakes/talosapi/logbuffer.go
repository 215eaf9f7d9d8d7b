package talosapi

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// LogBuffer is a bounded, followable log of one service, like the circular
// buffers machined keeps per service (served by MachineService/Logs).
type LogBuffer struct {
	mu      sync.Mutex
	lines   []string
	times   []time.Time // when each line was appended (the kernel log's timestamps)
	dropped int         // lines evicted from the front; keeps follower offsets stable
	max     int
	notify  chan struct{}
	tee     io.Writer
	prefix  string
}

// NewLogBuffer keeps at most max lines.
func NewLogBuffer(max int) *LogBuffer {
	return &LogBuffer{max: max, notify: make(chan struct{})}
}

// Prefixed makes Printf start every line with prefix and returns b. machined
// on a metal node logs through go-kmsg's SetupLogger(nil, "[talos]", ...),
// which sets the prefix "[talos] " and no date flags
// (internal/app/machined/pkg/runtime/v1alpha1/v1alpha1_controller.go
// setupLogging, siderolabs/go-kmsg kmsg.go).
func (b *LogBuffer) Prefixed(prefix string) *LogBuffer {
	b.mu.Lock()
	defer b.mu.Unlock()

	b.prefix = prefix

	return b
}

// Printf appends one line: the buffer's prefix, then the message.
func (b *LogBuffer) Printf(format string, args ...any) {
	b.mu.Lock()
	prefix := b.prefix
	b.mu.Unlock()

	b.Append(prefix + fmt.Sprintf(format, args...))
}

// Write appends each line of p; it lets the buffer back a logger.
func (b *LogBuffer) Write(p []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		b.Append(l)
	}

	return len(p), nil
}

// Tee copies every line appended from now on to w (a node process's stdout).
func (b *LogBuffer) Tee(w io.Writer) {
	b.mu.Lock()
	defer b.mu.Unlock()

	b.tee = w
}

// Append adds one line.
func (b *LogBuffer) Append(line string) {
	b.mu.Lock()
	defer b.mu.Unlock()

	if b.tee != nil {
		fmt.Fprintln(b.tee, line) //nolint:errcheck // a lost log line must not stop the node
	}

	b.lines = append(b.lines, line)
	b.times = append(b.times, time.Now())

	if len(b.lines) > b.max {
		n := len(b.lines) - b.max
		b.lines = append([]string(nil), b.lines[n:]...)
		b.times = append([]time.Time(nil), b.times[n:]...)
		b.dropped += n
	}

	close(b.notify)
	b.notify = make(chan struct{})
}

// Reset empties the buffer, as a reboot does to machined's in-memory logs.
// Followers see only what is written afterwards.
func (b *LogBuffer) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()

	b.dropped += len(b.lines)
	b.lines, b.times = nil, nil
}

// Lines returns a copy of the buffered lines.
func (b *LogBuffer) Lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()

	return append([]string(nil), b.lines...)
}

// Stream sends the last tail lines (all when tail < 0), then, when follow is set,
// every new line until ctx ends.
func (b *LogBuffer) Stream(ctx context.Context, tail int, follow bool, send func(string) error) error {
	return b.StreamTimed(ctx, tail, follow, func(_ time.Time, line string) error { return send(line) })
}

// StreamTimed is Stream with the time each line was appended.
func (b *LogBuffer) StreamTimed(ctx context.Context, tail int, follow bool, send func(time.Time, string) error) error {
	b.mu.Lock()
	start := 0
	if tail >= 0 && tail < len(b.lines) {
		start = len(b.lines) - tail
	}

	pos := b.dropped + start // absolute index of the next line to send
	b.mu.Unlock()

	for {
		b.mu.Lock()
		idx := max(pos-b.dropped, 0)

		pending := append([]string(nil), b.lines[idx:]...)
		times := append([]time.Time(nil), b.times[idx:]...)
		pos = b.dropped + len(b.lines)
		wait := b.notify
		b.mu.Unlock()

		for i, l := range pending {
			if err := send(times[i], l); err != nil {
				return err
			}
		}

		if !follow {
			return nil
		}

		select {
		case <-ctx.Done():
			return nil
		case <-wait:
		}
	}
}
