package netfault

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/Shopify/toxiproxy/v2/stream"
	"github.com/Shopify/toxiproxy/v2/toxics"
)

func TestGateRegistry(t *testing.T) {
	name := filepath.Join(t.TempDir(), "cp1")
	g := NewGate(name)

	if g.Name() != name {
		t.Fatalf("name %q", g.Name())
	}

	g.Block("cp2")
	g.Block("") // the unknown sender cannot be blocked

	for _, tc := range []struct {
		sender  string
		blocked bool
	}{{"cp2", true}, {"cp3", false}, {"", false}} {
		if got, _ := gateVerdict(name, tc.sender); got != tc.blocked || g.Blocked(tc.sender) != tc.blocked {
			t.Errorf("%q: verdict %v, Blocked %v, want %v", tc.sender, got, g.Blocked(tc.sender), tc.blocked)
		}
	}

	// A replacement under the same name wins; closing the old one leaves it.
	g2 := NewGate(name)
	g.Close()

	if blocked, _ := gateVerdict(name, "cp2"); blocked {
		t.Fatal("the replacement gate inherited the old one's blocks")
	}

	g2.Block("cp2")
	g2.Close()

	if blocked, _ := gateVerdict(name, "cp2"); blocked {
		t.Fatal("a closed gate still blocks")
	}

	var def struct {
		Name, Type, Stream string
		Toxicity           float32
		Attributes         map[string]string
	}
	if err := json.Unmarshal(GateToxicJSON("gate", g), &def); err != nil {
		t.Fatal(err)
	}

	if def.Type != GateType || def.Stream != "upstream" || def.Toxicity != 1 || def.Attributes["gate"] != name {
		t.Fatalf("toxic JSON %+v", def)
	}
}

// gateStub runs the gate toxic on a bare toxiproxy stub, as a link would.
type gateStub struct {
	in   chan *stream.StreamChunk
	out  chan *stream.StreamChunk
	stub *toxics.ToxicStub
	tw   *toxics.ToxicWrapper
	done chan struct{}
}

func newGateStub(gate string) *gateStub {
	toxic := &GateToxic{Gate: gate}
	s := &gateStub{
		in:  make(chan *stream.StreamChunk),
		out: make(chan *stream.StreamChunk, 64),
		tw:  &toxics.ToxicWrapper{Toxic: toxic, Type: GateType, Toxicity: 1},
	}
	s.stub = toxics.NewToxicStub(s.in, s.out)
	s.stub.State = toxic.NewState()

	return s
}

func (s *gateStub) run() {
	s.done = make(chan struct{})
	done := s.done

	go func() {
		defer close(done)
		s.stub.Run(s.tw)
	}()
}

func (s *gateStub) send(t *testing.T, data []byte) {
	t.Helper()

	select {
	case s.in <- &stream.StreamChunk{Data: data, Timestamp: time.Now()}:
	case <-time.After(time.Second):
		t.Fatal("the toxic stopped reading its input")
	}
}

// waitClosed waits for the output to be closed, returning what came before.
func (s *gateStub) waitClosed(t *testing.T) []byte {
	t.Helper()

	var got []byte

	for {
		select {
		case c, ok := <-s.out:
			if !ok {
				return got
			}

			got = append(got, c.Data...)
		case <-time.After(time.Second):
			t.Fatal("output not closed within a second")
		}
	}
}

func (s *gateStub) end(t *testing.T) {
	t.Helper()
	close(s.in)

	select {
	case <-s.done:
	case <-time.After(time.Second):
		t.Fatal("Pipe did not return after its input closed")
	}
}

// TestGateCutsOnTheWire feeds real handshakes chunk by chunk: an allowed
// sender's bytes come out unchanged, a blocked sender's stop before the chunk
// that carries its certificate and the connection is closed.
func TestGateCutsOnTheWire(t *testing.T) {
	p := newTestPKI(t)
	g := NewGate(filepath.Join(t.TempDir(), "cp3"))
	t.Cleanup(g.Close)
	g.Block("cp2")

	for _, tc := range []struct {
		cn, sender string
		version    uint16
		cut        bool
	}{
		{"cp1", "cp1", tls.VersionTLS12, false},
		{"cp2", "cp2", tls.VersionTLS12, true},
		{"cp2", "", tls.VersionTLS13, false}, // unknown: passes
	} {
		stream := captureClientBytes(t, p, tc.cn, tls.RequireAndVerifyClientCert, tc.version)
		s := newGateStub(g.Name())
		s.run()

		for i := 0; i < len(stream); i += 100 {
			s.send(t, stream[i:min(i+100, len(stream))])
		}

		if !tc.cut {
			s.end(t)
		}

		got := s.waitClosed(t)

		if tc.cut {
			if len(got) >= len(stream) || !bytes.Equal(got, stream[:len(got)]) {
				t.Errorf("%s: %d of %d bytes passed before the cut", tc.cn, len(got), len(stream))
			}

			s.end(t)
		} else if !bytes.Equal(got, stream) {
			t.Errorf("%s: bytes changed in transit", tc.cn)
		}

		if st := s.stub.State.(*gateState); st.sender != tc.sender {
			t.Errorf("%s: sender %q, want %q", tc.cn, st.sender, tc.sender)
		}
	}
}

// TestGateCutRefusesInterrupts covers how the toxic lives with toxiproxy's
// interrupts: its state survives a restart, a block reaches a Pipe that waits
// for input, and once cut it neither takes interrupts (RemoveToxic would write
// to the closed output) nor stops draining its input (that would leak the
// goroutines feeding it).
func TestGateCutRefusesInterrupts(t *testing.T) {
	name := filepath.Join(t.TempDir(), "cp1")
	s := newGateStub(name)
	st := s.stub.State.(*gateState)
	st.known, st.sender = true, "cp2"

	// No gate under that name yet: everything passes.
	s.run()
	s.send(t, []byte("x"))

	if !s.stub.InterruptToxic() {
		t.Fatal("interrupt refused by a running toxic")
	}

	<-s.done
	s.run() // toxiproxy restarts the toxic with the same stub and state

	g := NewGate(name)
	t.Cleanup(g.Close)
	g.Block("cp2")

	if got := s.waitClosed(t); string(got) != "x" {
		t.Fatalf("passed %q", got)
	}

	for range 100 {
		if s.stub.InterruptToxic() {
			t.Fatal("a cut toxic took an interrupt")
		}
	}

	for range 10 {
		s.send(t, []byte("after the cut"))
	}

	s.end(t)
}

// TestGateEndToEnd runs TLS 1.2 peers through a real proxy carrying the gate.
func TestGateEndToEnd(t *testing.T) {
	p := newTestPKI(t)
	g := NewGate(filepath.Join(t.TempDir(), "cp3"))
	t.Cleanup(g.Close)

	upstream := startEcho(t, p.serverConfig(t, tls.RequireAndVerifyClientCert, tls.VersionTLS12))
	proxy := startProxy(t, upstream, GateToxicJSON("gate", g))

	dial := func(cn string) *peer {
		t.Helper()

		c, err := dialPeer(t, p, proxy.Listen, cn)
		if err != nil {
			t.Fatalf("%s: dial: %v", cn, err)
		}

		if err := c.echo("hello from " + cn); err != nil {
			t.Fatalf("%s: echo: %v", cn, err)
		}

		return c
	}

	refused := func(cn string) {
		t.Helper()

		c, err := dialPeer(t, p, proxy.Listen, cn)
		if err == nil {
			err = c.echo("sneaking in")
		}

		if err == nil {
			t.Fatalf("a new %s connection got through the block", cn)
		}
	}

	cp1, cp2 := dial("cp1"), dial("cp2")

	g.Block("cp2")

	if err := cp2.closedWithin(time.Second); err != nil {
		t.Fatalf("cp2's established connection: %v", err)
	}

	if err := cp1.echo("still here"); err != nil {
		t.Fatalf("cp1 was cut too: %v", err)
	}

	refused("cp2")
	dial("cp1")

	g.Unblock("cp2")
	dial("cp2")

	if err := cp1.echo("still here"); err != nil {
		t.Fatalf("cp1: %v", err)
	}
}

// TestGateAcrossToxicChanges changes the proxy's toxics under live
// connections: appending a toxic interrupts and restarts the gate, removing
// the gate must work on a connection it has cut.
func TestGateAcrossToxicChanges(t *testing.T) {
	p := newTestPKI(t)
	g := NewGate(filepath.Join(t.TempDir(), "cp3"))
	t.Cleanup(g.Close)

	upstream := startEcho(t, p.serverConfig(t, tls.RequireAndVerifyClientCert, tls.VersionTLS12))
	proxy := startProxy(t, upstream, GateToxicJSON("gate", g))

	cp1, err := dialPeer(t, p, proxy.Listen, "cp1")
	if err != nil {
		t.Fatal(err)
	}

	cp2, err := dialPeer(t, p, proxy.Listen, "cp2")
	if err != nil {
		t.Fatal(err)
	}

	for _, c := range []*peer{cp1, cp2} {
		if err := c.echo("hello"); err != nil {
			t.Fatal(err)
		}
	}

	addToxic(t, proxy, LatencyToxicJSON("after-gate", "upstream", time.Millisecond, 0, 1))

	g.Block("cp2")

	if err := cp2.closedWithin(time.Second); err != nil {
		t.Fatalf("after a restart of the gate, cp2: %v", err)
	}

	ctx := context.Background()
	for _, name := range []string{"gate", "after-gate"} {
		if err := proxy.Toxics.RemoveToxic(ctx, name); err != nil {
			t.Fatalf("remove %s: %v", name, err)
		}
	}

	if err := cp1.echo("still here"); err != nil {
		t.Fatalf("cp1 after the toxics went: %v", err)
	}

	again, err := dialPeer(t, p, proxy.Listen, "cp2")
	if err != nil {
		t.Fatalf("cp2 without a gate: %v", err)
	}

	if err := again.echo("back"); err != nil {
		t.Fatalf("cp2 without a gate: %v", err)
	}
}
