package check

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/talchaos/talchaos/harness/history"
)

// LogLine is one line of a node's machined log, as the Logs API streamed it.
type LogLine struct {
	At   time.Duration
	Text string
}

// follow streams a configured node's machined log (every line, as events) and
// its etcd log (warnings and errors, kept as evidence) through the Logs API.
func (o *Observer) follow(ctx context.Context, node string, isControlPlane bool) {
	o.followLog(ctx, node, "machined", o.addLine, func() { o.flushLine(node) })

	if isControlPlane {
		o.followLog(ctx, node, "etcd", o.addEtcdLine, func() {})
	}
}

// followLog streams one service log until it breaks; the next poll restarts it.
// Every stream asks for the whole log: a node that rebooted starts a new one
// (machined's logs live in memory), and lines already seen in this boot's log
// are recognised by the boot's first line and skipped.
func (o *Observer) followLog(ctx context.Context, node, id string, line func(node, text string), endOfMessage func()) {
	c := o.clients[node]
	key := node + "/" + id

	o.mu.Lock()
	if o.following[key] != nil {
		o.mu.Unlock()

		return
	}

	ctx, cancel := context.WithCancel(ctx)
	o.following[key] = cancel
	seen, boot := o.seen[key], o.boots[key]
	o.mu.Unlock()

	o.wg.Go(func() {
		defer func() { o.streamEnded(key, boot, seen) }()
		defer cancel()

		stream, err := c.secure.Logs(ctx, "system", 0, id, true, -1)
		if err != nil {
			return
		}

		var (
			partial string
			index   int
		)

		handle := func(text string) {
			if index == 0 && text != seen.first {
				seen = logPosition{first: text} // a new boot's log
			}

			if index == 0 {
				seen.first = text
			}

			index++

			if index <= seen.count {
				return
			}

			seen.count = index

			line(node, text)
		}

		for {
			data, err := stream.Recv()
			if err != nil {
				return // node down or run over; the next poll reconnects
			}

			partial += string(data.GetBytes())

			for {
				i := strings.IndexByte(partial, '\n')
				if i < 0 {
					break
				}

				handle(partial[:i])
				partial = partial[i+1:]
			}

			// machined sends each log call as one message, continuation lines included.
			endOfMessage()
		}
	})
}

// streamEnded keeps how far a stream read, unless the node booted again
// since the stream began (newBoot): its position is of a log that is gone,
// and kept it would skip as many lines of the new boot's log (the stream of a
// node killed outright may break only after the node is seen back).
func (o *Observer) streamEnded(key string, boot int, seen logPosition) {
	o.mu.Lock()
	defer o.mu.Unlock()

	delete(o.following, key)

	if o.boots[key] == boot {
		o.seen[key] = seen
	}
}

// newBoot forgets how far a node's logs were read: it booted again
// (bootTransition). gone: the boot the streams were following is over (the
// node is back with another boot ID), so they are ended: a stream to a node
// killed outright may otherwise stay open, silent, until TCP gives up on it
// (no reset comes from a network namespace that is gone), and no stream of
// the new boot starts while it does.
func (o *Observer) newBoot(node string, gone bool) {
	o.mu.Lock()
	defer o.mu.Unlock()

	for _, id := range []string{"machined", "etcd"} {
		key := node + "/" + id
		delete(o.seen, key)
		o.boots[key]++

		if cancel := o.following[key]; cancel != nil && gone {
			cancel()
		}
	}
}

// logPosition is how far a node's log of the current boot has been read.
type logPosition struct {
	first string
	count int
}

// addEtcdLine keeps etcd's warnings and errors (JSON lines from its zap logger)
// as evidence; errors also go to the event log.
func (o *Observer) addEtcdLine(node, line string) {
	var entry struct {
		Level string `json:"level"`
		Msg   string `json:"msg"`
		Error string `json:"error"`
	}

	if err := json.Unmarshal([]byte(line), &entry); err != nil || (entry.Level != "warn" && entry.Level != "error" && entry.Level != "fatal") {
		return
	}

	at := o.log.Since()

	// etcd warns of every slow request and unreachable peer; what a
	// diagnosis can use is mostly logged as an error, the rest is a few
	// warnings (history.EtcdWarnings) and a peer that cannot be reached
	// where it is dialled (the first of each error per node).
	if entry.Level == "warn" && !slices.Contains(history.EtcdWarnings, entry.Msg) && !o.firstPeerWarning(node, entry.Error) {
		return
	}

	o.rec.Log(at, node, history.Log{Source: history.LogEtcd, Level: entry.Level, Text: line})
	o.log.Add(node, "log.etcd", entry.Level+": "+entry.Msg)
}

// firstPeerWarning reports whether errText is a peer's address failing
// where it is dialled, which node's etcd has not logged before: a
// certificate that does not name it (crypto/x509 HostnameError, "x509:
// certificate is valid for A, not B"), or a dial that failed ("dial tcp
// 10.150.0.12:2380: connect: no route to host": rafthttp's prober, the
// version check's "failed to reach the peer URL"). Kept once per error, as
// etcd repeats them every few seconds; their number is bounded by the
// peers' addresses and the ways a dial fails.
func (o *Observer) firstPeerWarning(node, errText string) bool {
	if !strings.Contains(errText, history.CertificateNameText) && !strings.Contains(errText, history.DialText) {
		return false
	}

	o.mu.Lock()
	defer o.mu.Unlock()

	key := node + " " + errText
	if o.peerWarns[key] {
		return false
	}

	o.peerWarns[key] = true

	return true
}

func (o *Observer) addLine(node, line string) {
	// A multi-line message (go-retry's "N error(s) occurred:" list) continues on
	// tab-indented lines: keep it one entry, as it was one log call.
	if strings.HasPrefix(line, "\t") {
		o.mu.Lock()
		lines := o.lines[node]

		if len(lines) > 0 {
			lines[len(lines)-1].Text += "\n" + line
			o.mu.Unlock()

			return
		}
		o.mu.Unlock()
	}

	o.flushLine(node)

	o.mu.Lock()
	o.lines[node] = append(o.lines[node], LogLine{At: o.log.Since(), Text: stripTimestamp(line)})
	o.pending[node] = true
	o.mu.Unlock()
}

// flushLine records the node's last complete log entry as an event; an entry is
// complete once the next one starts (or the stream ends).
func (o *Observer) flushLine(node string) {
	o.mu.Lock()
	lines := o.lines[node]
	pending := o.pending[node] && len(lines) > 0
	o.pending[node] = false

	var last LogLine
	if pending {
		last = lines[len(lines)-1]
	}
	o.mu.Unlock()

	if pending {
		o.rec.Log(last.At, node, history.Log{Source: history.LogMachined, Text: last.Text})
		o.log.Add(node, "log.machined", last.Text)
	}
}

// stripTimestamp drops what machined puts before a message: the "[talos] "
// prefix (go-kmsg's on a metal node), then, in container mode, Go's standard
// "2006/01/02 15:04:05 " date (log.SetPrefix with the default flags,
// v1alpha1_controller.go setupLogging).
func stripTimestamp(line string) string {
	const layout = "2006/01/02 15:04:05 "

	line = strings.TrimPrefix(line, "[talos] ")

	if len(line) > len(layout) {
		if _, err := time.Parse(layout[:len(layout)-1], line[:len(layout)-1]); err == nil {
			return line[len(layout):]
		}
	}

	return line
}
