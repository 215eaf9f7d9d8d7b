package qemu

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The greeting of QEMU 7.2 as Debian builds it.
const fakeGreeting = `{"QMP": {"version": {"qemu": {"micro": 22, "minor": 2, "major": 7}, "package": "Debian 1:7.2+dfsg-7+deb12u18+b3"}, "capabilities": ["oob"]}}`

func event(name string) string {
	return fmt.Sprintf(`{"event": %q, "data": {}, "timestamp": {"seconds": 1, "microseconds": 2}}`, name)
}

func ret(id json.RawMessage, v string) string {
	return fmt.Sprintf(`{"return": %s, "id": %s}`, v, id)
}

// fakeCmd is a command as received by the fake server.
type fakeCmd struct {
	Execute   string          `json:"execute"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	ID        json.RawMessage `json:"id,omitempty"`
}

// String is the command without its id, compact: what the tests compare.
func (c fakeCmd) String() string {
	c.ID = nil
	b, _ := json.Marshal(c)

	return string(b)
}

// fakeQMP is a QMP server on a unix socket that behaves like QEMU: greeting,
// capabilities negotiation (no events before it), then commands answered in
// order. By default every reply comes after an event, like QEMU's STOP before
// the reply to "stop", and "quit" is answered and then the connection closed.
type fakeQMP struct {
	t    *testing.T
	path string
	ln   net.Listener

	// answer gives the lines to send for one command and whether to hang up
	// after them. It runs on the server's goroutine.
	answer func(c fakeCmd) (lines []string, hangup bool)
	silent bool // accept but never greet, like QEMU towards a second client

	mu      sync.Mutex
	got     []fakeCmd
	conns   []net.Conn
	accepts int

	wg sync.WaitGroup
}

func defaultAnswer(c fakeCmd) ([]string, bool) {
	switch c.Execute {
	case "query-status":
		return []string{event("STOP"), ret(c.ID, `{"status": "running", "singlestep": false, "running": true}`)}, false
	case "quit":
		return []string{event("SHUTDOWN"), ret(c.ID, `{}`)}, true
	default:
		return []string{event("STOP"), ret(c.ID, `{}`)}, false
	}
}

// socketPath is a fresh unix socket path, short enough for sun_path.
func socketPath(t *testing.T) string {
	t.Helper()

	p := filepath.Join(t.TempDir(), "qmp.sock")
	if len(p) < 100 {
		return p
	}

	dir, err := os.MkdirTemp("/tmp", "qmp")
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { os.RemoveAll(dir) })

	return filepath.Join(dir, "qmp.sock")
}

func newFake(t *testing.T, configure ...func(*fakeQMP)) *fakeQMP {
	t.Helper()

	f := &fakeQMP{t: t, path: socketPath(t), answer: defaultAnswer}
	for _, c := range configure {
		c(f)
	}

	ln, err := net.Listen("unix", f.path)
	if err != nil {
		t.Fatal(err)
	}

	f.ln = ln

	f.wg.Go(f.serve)
	t.Cleanup(func() {
		ln.Close()
		f.mu.Lock()
		for _, c := range f.conns {
			c.Close()
		}
		f.mu.Unlock()
		f.wg.Wait()
	})

	return f
}

func (f *fakeQMP) serve() {
	for {
		conn, err := f.ln.Accept()
		if err != nil {
			return
		}

		f.mu.Lock()
		f.conns = append(f.conns, conn)
		f.accepts++
		f.mu.Unlock()

		f.wg.Go(func() { f.conn(conn) })
	}
}

func (f *fakeQMP) conn(conn net.Conn) {
	defer conn.Close()

	if f.silent {
		conn.Read(make([]byte, 1)) // until closed

		return
	}

	send := func(lines ...string) bool {
		for _, l := range lines {
			if _, err := conn.Write([]byte(l + "\r\n")); err != nil {
				return false
			}
		}

		return true
	}

	if !send(fakeGreeting) {
		return
	}

	r := bufio.NewReader(conn)
	negotiated := false

	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return
		}

		var c fakeCmd
		if err := json.Unmarshal(line, &c); err != nil {
			f.t.Errorf("fake QMP: bad command %q: %v", line, err)

			return
		}

		f.mu.Lock()
		f.got = append(f.got, c)
		f.mu.Unlock()

		if !negotiated {
			if c.Execute != "qmp_capabilities" {
				send(fmt.Sprintf(`{"id": %s, "error": {"class": "CommandNotFound", "desc": "Expecting capabilities negotiation with 'qmp_capabilities'"}}`, c.ID))

				continue
			}

			negotiated = true

			send(ret(c.ID, `{}`))

			continue
		}

		lines, hangup := f.answer(c)
		if !send(lines...) || hangup {
			return
		}
	}
}

// commands returns what the server received since the last call.
func (f *fakeQMP) commands() []fakeCmd {
	f.mu.Lock()
	defer f.mu.Unlock()

	got := f.got
	f.got = nil

	return got
}

func strs(cs []fakeCmd) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.String()
	}

	return out
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	t.Cleanup(cancel)

	return ctx
}

func openFake(t *testing.T, f *fakeQMP, nic string) *Machine {
	t.Helper()

	m, err := Open(testCtx(t), f.path, nic)
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { m.Close() })

	return m
}

func TestOpenNegotiates(t *testing.T) {
	f := newFake(t)
	openFake(t, f, "")

	got := f.commands()
	if len(got) != 1 || got[0].String() != `{"execute":"qmp_capabilities"}` {
		t.Fatalf("after Open the server got %v, want only qmp_capabilities", strs(got))
	}

	if len(got[0].ID) == 0 {
		t.Error("qmp_capabilities sent without an id")
	}
}

func TestMethodsSendCommands(t *testing.T) {
	link := func(up bool) string {
		return fmt.Sprintf(`{"execute":"set_link","arguments":{"name":"eth1","up":%t}}`, up)
	}

	tests := []struct {
		name string
		call func(*Machine, context.Context) error
		want []string
	}{
		{"PowerOff", (*Machine).PowerOff, []string{`{"execute":"stop"}`, link(false)}},
		{"PowerOn", (*Machine).PowerOn, []string{`{"execute":"system_reset"}`, link(true), `{"execute":"cont"}`}},
		{"Reset", (*Machine).Reset, []string{`{"execute":"system_reset"}`}},
		{"Pause", (*Machine).Pause, []string{`{"execute":"stop"}`}},
		{"Resume", (*Machine).Resume, []string{`{"execute":"cont"}`}},
		{"LinkDown", func(m *Machine, ctx context.Context) error { return m.SetLink(ctx, false) }, []string{link(false)}},
		{"LinkUp", func(m *Machine, ctx context.Context) error { return m.SetLink(ctx, true) }, []string{link(true)}},
		{"Status", func(m *Machine, ctx context.Context) error {
			running, status, err := m.Status(ctx)
			if err == nil && (!running || status != "running") {
				err = fmt.Errorf("Status = %t, %q; want true, running", running, status)
			}

			return err
		}, []string{`{"execute":"query-status"}`}},
		{"Quit", func(m *Machine, ctx context.Context) error {
			if err := m.Quit(ctx); err != nil {
				return err
			}

			if err := m.Pause(ctx); !errors.Is(err, ErrClosed) {
				return fmt.Errorf("Pause after Quit: %v, want ErrClosed", err)
			}

			return m.Close()
		}, []string{`{"execute":"quit"}`}},
		{"Close", func(m *Machine, _ context.Context) error {
			if err := m.Close(); err != nil {
				return err
			}

			if err := m.Resume(t.Context()); !errors.Is(err, ErrClosed) {
				return fmt.Errorf("Resume after Close: %v, want ErrClosed", err)
			}

			return m.Close()
		}, nil},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t)
			m := openFake(t, f, "eth1")
			f.commands() // negotiation, checked above

			if err := tt.call(m, testCtx(t)); err != nil {
				t.Fatal(err)
			}

			got := f.commands()
			if strings.Join(strs(got), "\n") != strings.Join(tt.want, "\n") {
				t.Fatalf("sent\n%s\nwant\n%s", strings.Join(strs(got), "\n"), strings.Join(tt.want, "\n"))
			}

			ids := map[string]bool{}
			for _, c := range got {
				if len(c.ID) == 0 || ids[string(c.ID)] {
					t.Errorf("command %s has a missing or reused id %s", c, c.ID)
				}

				ids[string(c.ID)] = true
			}
		})
	}
}

func TestDefaultNIC(t *testing.T) {
	f := newFake(t)
	m := openFake(t, f, "")
	f.commands()

	if err := m.SetLink(testCtx(t), false); err != nil {
		t.Fatal(err)
	}

	if got := strs(f.commands()); len(got) != 1 || got[0] != `{"execute":"set_link","arguments":{"name":"net0","up":false}}` {
		t.Fatalf("sent %v", got)
	}
}

func TestQMPErrorCarriesClassAndDesc(t *testing.T) {
	f := newFake(t, func(f *fakeQMP) {
		f.answer = func(c fakeCmd) ([]string, bool) {
			return []string{
				event("NIC_RX_FILTER_CHANGED"),
				fmt.Sprintf(`{"id": %s, "error": {"class": "DeviceNotFound", "desc": "Device 'nope' not found"}}`, c.ID),
			}, false
		}
	})
	m := openFake(t, f, "nope")

	err := m.SetLink(testCtx(t), true)

	var qerr *Error
	if !errors.As(err, &qerr) {
		t.Fatalf("SetLink error %v (%T), want *Error", err, err)
	}

	if qerr.Command != "set_link" || qerr.Class != "DeviceNotFound" || qerr.Desc != "Device 'nope' not found" {
		t.Fatalf("error %+v", qerr)
	}

	for _, s := range []string{f.path, "set_link", "DeviceNotFound", "Device 'nope' not found"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}

	// The connection is still good after an error reply.
	f.answer = defaultAnswer
	if _, _, err := m.Status(testCtx(t)); err != nil {
		t.Fatal(err)
	}
}

// Events arrive before and after replies, several at a time: each reply must
// still go to its own command.
func TestInterleavedEvents(t *testing.T) {
	var n int

	f := newFake(t, func(f *fakeQMP) {
		f.answer = func(c fakeCmd) ([]string, bool) {
			n++
			status := fmt.Sprintf(`{"status": "s%d", "running": %t}`, n, n%2 == 0)

			return []string{
				event("STOP"), event("RESUME"),
				`{"event": "RESET", "data": {"guest": false, "reason": "host-qmp-system-reset"}, "timestamp": {"seconds": 3, "microseconds": 4}}`,
				ret(c.ID, status),
				event("NIC_RX_FILTER_CHANGED"),
			}, false
		}
	})
	m := openFake(t, f, "")

	for i := 1; i <= 20; i++ {
		running, status, err := m.Status(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}

		if want := fmt.Sprintf("s%d", i); status != want || running != (i%2 == 0) {
			t.Fatalf("call %d: Status = %t, %q; want %t, %q", i, running, status, i%2 == 0, want)
		}
	}
}

// A command whose caller gives up gets its reply late; that reply must not be
// taken for the next command's.
func TestLateReplyIsDropped(t *testing.T) {
	var stale json.RawMessage

	f := newFake(t, func(f *fakeQMP) {
		f.answer = func(c fakeCmd) ([]string, bool) {
			if c.Execute == "stop" {
				stale = c.ID

				return nil, false // no reply for now
			}

			return []string{
				ret(stale, `{"status": "stale", "running": true}`),
				event("STOP"),
				ret(c.ID, `{"status": "paused", "running": false}`),
			}, false
		}
	})
	m := openFake(t, f, "")

	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(50*time.Millisecond, cancel)

	start := time.Now()
	if err := m.Pause(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Pause = %v, want context.Canceled", err)
	}

	if d := time.Since(start); d > time.Second {
		t.Fatalf("Pause took %v after cancel", d)
	}

	running, status, err := m.Status(testCtx(t))
	if err != nil || running || status != "paused" {
		t.Fatalf("Status = %t, %q, %v; want false, paused (not the stale reply)", running, status, err)
	}
}

// QEMU greets only one client at a time; a client that gets no greeting must
// give up when its context ends.
func TestOpenWithoutGreetingIsBounded(t *testing.T) {
	f := newFake(t, func(f *fakeQMP) { f.silent = true })

	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()

	start := time.Now()

	m, err := Open(ctx, f.path, "")
	if err == nil {
		m.Close()
		t.Fatal("Open succeeded without a greeting")
	}

	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "one QMP client at a time") {
		t.Fatalf("Open error %v", err)
	}

	if d := time.Since(start); d > time.Second {
		t.Fatalf("Open took %v", d)
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open(testCtx(t), filepath.Join(t.TempDir(), "absent.sock"), ""); err == nil {
		t.Fatal("Open of a missing socket succeeded")
	}

	// Not a QMP peer: its first line is not a greeting.
	path := socketPath(t)

	bad, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()

	done := make(chan struct{})

	go func() {
		defer close(done)

		c, err := bad.Accept()
		if err != nil {
			return
		}
		defer c.Close()

		c.Write([]byte("SSH-2.0-OpenSSH_9.2\r\n"))
		c.Read(make([]byte, 1))
	}()

	_, err = Open(testCtx(t), path, "")
	if err == nil || !strings.Contains(err.Error(), "not a QMP greeting") {
		t.Fatalf("Open of a non-QMP peer: %v", err)
	}

	<-done
}

func TestCallBoundedByDeadline(t *testing.T) {
	f := newFake(t, func(f *fakeQMP) {
		f.answer = func(fakeCmd) ([]string, bool) { return []string{event("STOP")}, false }
	})
	m := openFake(t, f, "")

	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()

	if err := m.Resume(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Resume = %v, want context.DeadlineExceeded", err)
	}
}

// When QEMU drops the connection (restarted, say), the next call connects again.
func TestReconnects(t *testing.T) {
	f := newFake(t, func(f *fakeQMP) {
		f.answer = func(c fakeCmd) ([]string, bool) {
			lines, _ := defaultAnswer(c)

			return lines, c.Execute == "stop" // hang up after the reply to stop
		}
	})
	m := openFake(t, f, "")

	if err := m.Pause(testCtx(t)); err != nil {
		t.Fatal(err)
	}

	deadline := time.Now().Add(2 * time.Second)
	for {
		m.mu.Lock()
		alive := m.c.alive()
		m.mu.Unlock()

		if !alive {
			break
		}

		if time.Now().After(deadline) {
			t.Fatal("the client did not notice the hang-up")
		}

		time.Sleep(5 * time.Millisecond)
	}

	if err := m.Resume(testCtx(t)); err != nil {
		t.Fatal(err)
	}

	f.mu.Lock()
	accepts := f.accepts
	f.mu.Unlock()

	got := strs(f.commands())
	want := []string{`{"execute":"qmp_capabilities"}`, `{"execute":"stop"}`, `{"execute":"qmp_capabilities"}`, `{"execute":"cont"}`}

	if accepts != 2 || strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("%d connections, commands %v; want 2, %v", accepts, got, want)
	}
}

func TestCloseInterruptsCall(t *testing.T) {
	f := newFake(t, func(f *fakeQMP) {
		f.answer = func(fakeCmd) ([]string, bool) { return nil, false }
	})
	m := openFake(t, f, "")

	time.AfterFunc(50*time.Millisecond, func() { m.Close() })

	err := m.Pause(testCtx(t))
	if !errors.Is(err, errConnLost) {
		t.Fatalf("Pause during Close = %v, want a lost connection", err)
	}

	if err := m.Pause(testCtx(t)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Pause after Close = %v, want ErrClosed", err)
	}
}

// QEMU may exit before its reply to quit is read: still a success.
func TestQuitWithoutReply(t *testing.T) {
	f := newFake(t, func(f *fakeQMP) {
		f.answer = func(fakeCmd) ([]string, bool) { return []string{event("SHUTDOWN")}, true }
	})
	m := openFake(t, f, "")

	if err := m.Quit(testCtx(t)); err != nil {
		t.Fatal(err)
	}
}

func TestConcurrentCalls(t *testing.T) {
	f := newFake(t)
	m := openFake(t, f, "")

	var wg sync.WaitGroup

	errs := make(chan error, 40)

	for i := range 40 {
		wg.Go(func() {
			if i%2 == 0 {
				errs <- m.SetLink(testCtx(t), i%4 == 0)

				return
			}

			running, status, err := m.Status(testCtx(t))
			if err == nil && (!running || status != "running") {
				err = fmt.Errorf("Status = %t, %q", running, status)
			}

			errs <- err
		})
	}

	wg.Wait()
	close(errs)

	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}
