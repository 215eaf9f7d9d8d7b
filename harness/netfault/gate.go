package netfault

import (
	"sync"

	"github.com/Shopify/toxiproxy/v2/toxics"
)

// Gate is a set of blocked senders that "talchaos_gate" toxics consult by
// name. Gates live in a package-level registry because toxiproxy builds toxics
// from JSON: the toxic can only carry the gate's name.
type Gate struct {
	name    string
	blocked map[string]struct{} // guarded by registry.mu
}

// registry holds the gates. One lock and one change channel for all gates keep
// the toxic's check-and-wait free of lost wakeups; a change wakes every gated
// connection, which is cheap at the sim's scale.
var registry = struct {
	mu      sync.Mutex
	gates   map[string]*Gate
	changed chan struct{} // closed and replaced on every change
}{gates: map[string]*Gate{}, changed: make(chan struct{})}

// changedLocked wakes the toxics so they re-check their senders.
func changedLocked() {
	close(registry.changed)
	registry.changed = make(chan struct{})
}

// NewGate makes a gate with nothing blocked and registers it under name,
// replacing any gate registered under that name.
func NewGate(name string) *Gate {
	g := &Gate{name: name, blocked: map[string]struct{}{}}

	registry.mu.Lock()
	defer registry.mu.Unlock()

	registry.gates[name] = g
	changedLocked()

	return g
}

// Name is the name the gate is registered under.
func (g *Gate) Name() string { return g.name }

// Block closes the connections from sender, established ones included, and
// every new one as soon as its client certificate has been seen. The unknown
// sender "" cannot be blocked: Block("") does nothing.
func (g *Gate) Block(sender string) {
	if sender == "" {
		return
	}

	registry.mu.Lock()
	defer registry.mu.Unlock()

	if _, ok := g.blocked[sender]; !ok {
		g.blocked[sender] = struct{}{}
		changedLocked()
	}
}

// Unblock lets sender through again (new connections; cut ones stay cut).
func (g *Gate) Unblock(sender string) {
	registry.mu.Lock()
	defer registry.mu.Unlock()

	if _, ok := g.blocked[sender]; ok {
		delete(g.blocked, sender)
		changedLocked()
	}
}

// Blocked reports whether sender is blocked.
func (g *Gate) Blocked(sender string) bool {
	registry.mu.Lock()
	defer registry.mu.Unlock()

	_, ok := g.blocked[sender]

	return ok
}

// Close unregisters the gate; toxics naming it then pass everything.
func (g *Gate) Close() {
	registry.mu.Lock()
	defer registry.mu.Unlock()

	if registry.gates[g.name] == g {
		delete(registry.gates, g.name)
		changedLocked()
	}
}

// gateVerdict reports whether sender's connections through the gate registered
// as name must be cut, and a channel closed on the next change of any gate
// (nil when no change can matter: the unknown sender is never blocked).
func gateVerdict(name, sender string) (blocked bool, changed <-chan struct{}) {
	if sender == "" {
		return false, nil
	}

	registry.mu.Lock()
	defer registry.mu.Unlock()

	if g := registry.gates[name]; g != nil {
		_, blocked = g.blocked[sender]
	}

	return blocked, registry.changed
}

// GateToxicJSON is the toxic definition to pass to a proxy's
// Toxics.AddToxicJson: the gate on the upstream (client → server) stream, where
// the client's certificate travels.
func GateToxicJSON(toxicName string, g *Gate) []byte {
	return toxicDef{
		Name: toxicName, Type: GateType, Stream: "upstream", Toxicity: 1,
		Attributes: GateToxic{Gate: g.name},
	}.marshal()
}

// GateToxic is the "talchaos_gate" toxic. On a downstream stream it sees the
// server's handshake, never a ClientHello, and so passes everything.
type GateToxic struct {
	Gate string `json:"gate"` // registry name of the Gate
}

// gateState is per connection; it lives on the stub and so survives the
// interrupts that stop and restart Pipe whenever the proxy's toxics change.
type gateState struct {
	// gate is the toxic's attribute, copied in NewState: toxiproxy shares one
	// toxic value between all connections and UpdateToxicJson rewrites it in
	// place, under the collection lock that NewState also runs under but Pipe
	// does not.
	gate string

	buf    []byte // client → server bytes until the sender is known
	known  bool
	sender string
}

// NewState implements toxics.StatefulToxic.
func (t *GateToxic) NewState() any { return &gateState{gate: t.Gate} }

// feed passes the next client bytes to the parser until it has a verdict.
func (s *gateState) feed(p []byte) {
	if s.known {
		return
	}

	s.buf = append(s.buf, p...)

	cn, done := parseClientCertCN(s.buf)
	if !done && len(s.buf) > maxHandshakeBytes {
		cn, done = "", true
	}

	if done {
		s.known, s.sender, s.buf = true, cn, nil
	}
}

// Pipe implements toxics.Toxic. Chunks go through unchanged and at once, parsed
// on the way; once the sender is known the connection is cut whenever the gate
// blocks it.
func (t *GateToxic) Pipe(stub *toxics.ToxicStub) {
	st, ok := stub.State.(*gateState)
	if !ok { // toxiproxy calls NewState before every Run; be a no-op otherwise
		new(toxics.NoopToxic).Pipe(stub)

		return
	}

	for {
		var changed <-chan struct{}

		if st.known {
			var blocked bool
			if blocked, changed = gateVerdict(st.gate, st.sender); blocked {
				cut(stub)

				return
			}
		}

		select {
		case <-stub.Interrupt:
			return
		case <-changed:
		case c := <-stub.Input:
			if c == nil {
				stub.Close()

				return
			}

			if !st.known {
				st.feed(c.Data)

				// Dropping the chunk that carries a blocked sender's certificate
				// means the server never completes the handshake.
				if st.known {
					if blocked, _ := gateVerdict(st.gate, st.sender); blocked {
						cut(stub)

						return
					}
				}
			}

			select {
			case stub.Output <- c:
			case <-stub.Interrupt:
				release(stub, c)

				return
			}
		}
	}
}

// cut closes the connection. Closing the stub closes its output; the link then
// closes the server side, and the other direction's link the client side.
//
// Until the client side is closed the toxic before this one keeps sending, so
// the input is drained to the end: a send nobody reads would leak that toxic's
// goroutine and the link's reader. Interrupt must not be received after Close:
// InterruptToxic picks at random between a closed stub and a taken interrupt,
// and on the latter RemoveToxic would write to the closed output and panic.
func cut(stub *toxics.ToxicStub) {
	stub.Close()

	for c := range stub.Input {
		_ = c // dropped: the connection is gone
	}
}
