package qemu

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"time"
)

// Error is an error reply from QMP: {"error": {"class": ..., "desc": ...}}.
// Class is one of QMP's error classes (GenericError, CommandNotFound,
// DeviceNotFound, DeviceNotActive, KVMMissingCap); Desc is QEMU's message.
type Error struct {
	Command string // the QMP command that failed, e.g. "set_link"
	Class   string
	Desc    string
}

func (e *Error) Error() string {
	return fmt.Sprintf("qmp %s: %s: %s", e.Command, e.Class, e.Desc)
}

// errConnLost is wrapped by every error caused by the QMP connection ending.
var errConnLost = errors.New("qmp connection lost")

// message is any line QEMU sends on a QMP socket: the greeting, an event, or
// a command reply (with the id of its command, when the command had one).
type message struct {
	QMP    *greeting                     `json:"QMP"`
	Event  string                        `json:"event"`
	ID     json.RawMessage               `json:"id"`
	Return json.RawMessage               `json:"return"`
	Error  *struct{ Class, Desc string } `json:"error"`
}

type greeting struct {
	Version struct {
		QEMU struct {
			Major, Minor, Micro int
		} `json:"qemu"`
		Package string `json:"package"`
	} `json:"version"`
	Capabilities []string `json:"capabilities"`
}

type request struct {
	Execute   string `json:"execute"`
	Arguments any    `json:"arguments,omitempty"`
	ID        string `json:"id"`
}

type reply struct {
	ret json.RawMessage
	err *Error
}

// client is one QMP connection. Every command carries an id and its reply is
// matched on that id, so events (which have no id) and late replies to
// commands whose caller gave up are never taken for another command's reply.
// A reader goroutine owns the read side until the connection ends.
type client struct {
	conn net.Conn
	wmu  sync.Mutex // one command written at a time

	mu      sync.Mutex
	pending map[string]chan reply
	nextID  uint64
	err     error // why the connection ended; set before done is closed

	done chan struct{} // closed when the reader has exited
}

// dial connects to a QMP unix socket, reads the greeting and negotiates
// capabilities (leaving capabilities-negotiation mode for command mode), all
// bounded by ctx. QEMU serves one QMP client at a time: a second client is
// accepted by the kernel but gets no greeting until the first disconnects, so
// without the bound this would hang.
func dial(ctx context.Context, socket string) (*client, error) {
	var d net.Dialer

	conn, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return nil, err
	}

	r, err := handshake(ctx, conn)
	if err != nil {
		conn.Close() //nolint:errcheck

		return nil, err
	}

	c := &client{conn: conn, pending: map[string]chan reply{}, done: make(chan struct{})}
	go c.read(r)

	return c, nil
}

func handshake(ctx context.Context, conn net.Conn) (_ *bufio.Reader, err error) {
	// Only ctx ending interrupts the handshake, so that ctx.Err() says why.
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) }) //nolint:errcheck
	stage := "qmp greeting"

	defer func() {
		if !stop() && err == nil {
			err = ctx.Err() // the deadline may now be in the past: unusable
		}

		if err != nil && ctx.Err() != nil {
			err = fmt.Errorf("%s: %w", stage, ctx.Err())
			if stage == "qmp greeting" {
				err = fmt.Errorf("%w (QEMU serves one QMP client at a time: is another one connected?)", err)
			}
		}
	}()

	r := bufio.NewReader(conn)

	line, err := r.ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("%s: %w", stage, err)
	}

	var g message
	if err := json.Unmarshal(line, &g); err != nil || g.QMP == nil {
		return nil, fmt.Errorf("%s: not a QMP greeting: %q", stage, bytes.TrimSpace(line))
	}

	stage = "qmp_capabilities"

	b, _ := json.Marshal(request{Execute: "qmp_capabilities", ID: "talchaos-0"}) //nolint:errchkjson
	if _, err := conn.Write(append(b, '\n')); err != nil {
		return nil, fmt.Errorf("%s: %w", stage, err)
	}

	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return nil, fmt.Errorf("%s: %w", stage, err)
		}

		var m message
		if json.Unmarshal(line, &m) != nil || m.Event != "" {
			continue // QEMU sends no events before negotiation, but be lenient
		}

		if m.Error != nil {
			return nil, &Error{Command: "qmp_capabilities", Class: m.Error.Class, Desc: m.Error.Desc}
		}

		break
	}

	conn.SetDeadline(time.Time{}) //nolint:errcheck

	return r, nil
}

func (c *client) read(r *bufio.Reader) {
	var err error

	for {
		var line []byte

		line, err = r.ReadBytes('\n')
		if err != nil {
			break
		}

		var m message
		if json.Unmarshal(line, &m) != nil || m.Event != "" || m.QMP != nil {
			continue // events are not needed by the callers: dropped
		}

		rep := reply{ret: m.Return}
		if m.Error != nil {
			rep.err = &Error{Class: m.Error.Class, Desc: m.Error.Desc}
		}

		c.deliver(m.ID, rep)
	}

	c.mu.Lock()
	c.err = fmt.Errorf("%w: %w", errConnLost, err)
	c.mu.Unlock()
	c.conn.Close() //nolint:errcheck
	close(c.done)
}

// deliver hands a reply to the command with its id. A reply with an unknown id
// belongs to a command whose caller gave up: dropped. QEMU omits the id only
// when it could not parse the command at all; such a reply goes to the one
// pending command if there is exactly one.
func (c *client) deliver(rawID json.RawMessage, rep reply) {
	c.mu.Lock()
	defer c.mu.Unlock()

	var ch chan reply

	var id string
	if len(rawID) > 0 {
		if json.Unmarshal(rawID, &id) != nil {
			return
		}

		ch = c.pending[id]
	} else if len(c.pending) == 1 {
		for _, p := range c.pending {
			ch = p
		}
	}

	if ch != nil {
		ch <- rep // buffered, one reply per command
	}
}

// alive reports whether the connection has not ended.
func (c *client) alive() bool {
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// run executes one QMP command and unmarshals its return value into out (if
// not nil). ctx must have a deadline: it bounds the write and the wait. If ctx
// ends first the command may still run in QEMU; its late reply is dropped.
func (c *client) run(ctx context.Context, cmd string, args, out any) error {
	ch := make(chan reply, 1)

	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()

		return fmt.Errorf("qmp %s: %w", cmd, err)
	}

	c.nextID++
	id := "talchaos-" + strconv.FormatUint(c.nextID, 10)
	c.pending[id] = ch
	c.mu.Unlock()

	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}()

	b, err := json.Marshal(request{Execute: cmd, Arguments: args, ID: id})
	if err != nil {
		return fmt.Errorf("qmp %s: %w", cmd, err)
	}

	if err := c.write(ctx, append(b, '\n')); err != nil {
		return fmt.Errorf("qmp %s: %w", cmd, err)
	}

	var rep reply

	select {
	case rep = <-ch:
	case <-ctx.Done():
		return fmt.Errorf("qmp %s: no reply: %w", cmd, ctx.Err())
	case <-c.done:
		select {
		case rep = <-ch: // the reply came just before the connection ended
		default:
			return fmt.Errorf("qmp %s: %w", cmd, c.err)
		}
	}

	if rep.err != nil {
		rep.err.Command = cmd

		return rep.err
	}

	if out != nil && len(rep.ret) > 0 {
		if err := json.Unmarshal(rep.ret, out); err != nil {
			return fmt.Errorf("qmp %s: bad return %s: %w", cmd, rep.ret, err)
		}
	}

	return nil
}

// write sends one command line. A failed or partial write leaves the stream in
// an unknown state, so it ends the connection.
func (c *client) write(ctx context.Context, b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()

	dl, _ := ctx.Deadline()
	c.conn.SetWriteDeadline(dl) //nolint:errcheck

	if _, err := c.conn.Write(b); err != nil {
		c.conn.Close() //nolint:errcheck

		if errors.Is(err, os.ErrDeadlineExceeded) {
			err = fmt.Errorf("write: %w", context.DeadlineExceeded)
		}

		return err
	}

	return nil
}

// close ends the connection and waits for the reader to exit.
func (c *client) close() {
	c.conn.Close() //nolint:errcheck
	<-c.done
}
