package netfault

import (
	"math"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/Shopify/toxiproxy/v2/stream"
	"github.com/Shopify/toxiproxy/v2/toxics"
)

// LatencyToxic is the "talchaos_latency" toxic: toxiproxy's latency toxic with
// the jitter drawn from a PCG seeded with (Seed, connection number), so one seed
// and one order of connections give one sequence of delays per connection.
type LatencyToxic struct {
	Latency float64 `json:"latency"` // milliseconds; fractions allowed
	Jitter  float64 `json:"jitter"`  // milliseconds; delay = latency ± jitter, uniform, never negative
	Seed    uint64  `json:"seed"`

	// conns numbers the connections. toxiproxy shares one toxic value between
	// all connections of a proxy (not one per connection, as its
	// CREATING_TOXICS.md says), so the counter counts this toxic's connections.
	conns atomic.Uint64
}

// LatencyToxicJSON is the toxic definition to pass to a proxy's
// Toxics.AddToxicJson; stream is "upstream" or "downstream".
func LatencyToxicJSON(toxicName, stream string, latency, jitter time.Duration, seed uint64) []byte {
	return toxicDef{
		Name: toxicName, Type: LatencyType, Stream: stream, Toxicity: 1,
		Attributes: map[string]any{"latency": millis(latency), "jitter": millis(jitter), "seed": seed},
	}.marshal()
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// fromMillis converts an attribute, clamped so that out-of-range JSON cannot
// overflow the conversion or the jitter arithmetic.
func fromMillis(ms float64) time.Duration {
	const limit = float64(math.MaxInt64/4) / float64(time.Millisecond)

	return time.Duration(math.Round(max(-limit, min(ms, limit)) * float64(time.Millisecond)))
}

// GetBufferSize implements toxics.BufferedToxic as toxiproxy's latency toxic
// does: chunks queue in front of the toxic, each delayed from its own arrival,
// so the latency does not throttle throughput.
func (t *LatencyToxic) GetBufferSize() int { return 1024 }

// NewState implements toxics.StatefulToxic. toxiproxy calls it once per
// connection, in accept order (under the collection lock), which makes the
// connection number reproducible, except for connections that already exist
// when the toxic is added: those are visited in map order.
//
// The attributes are read here, not in Pipe, because UpdateToxicJson rewrites
// them in place under the same lock while Pipes run. An update therefore only
// affects new connections.
func (t *LatencyToxic) NewState() any {
	return newDelays(fromMillis(t.Latency), fromMillis(t.Jitter), t.Seed, t.conns.Add(1)-1)
}

// delays draws the delays of one connection's chunks.
type delays struct {
	latency, jitter time.Duration
	rng             *rand.Rand
}

func newDelays(latency, jitter time.Duration, seed, conn uint64) *delays {
	return &delays{latency: latency, jitter: max(jitter, 0), rng: rand.New(rand.NewPCG(seed, conn))} //nolint:gosec // reproducible by design
}

// next is latency + uniform[-jitter, +jitter], at least 0.
func (d *delays) next() time.Duration {
	v := d.latency
	if d.jitter > 0 {
		v += time.Duration(d.rng.Int64N(2*int64(d.jitter)+1)) - d.jitter
	}

	return max(v, 0)
}

// Pipe implements toxics.Toxic, following toxiproxy's LatencyToxic.Pipe.
//
// A chunk leaves at its arrival time plus its delay, or when the chunk before
// it has left if that is later: one chunk is held at a time, so order is kept.
// An interrupt (the proxy's toxics are changing) releases the held chunk at
// once, as toxiproxy does: the toxic may be being removed, and RemoveToxic
// forwards only what is still queued in the input, so a chunk kept back in the
// state would be lost.
func (t *LatencyToxic) Pipe(stub *toxics.ToxicStub) {
	d, ok := stub.State.(*delays)
	if !ok { // toxiproxy calls NewState before every Run; be a no-op otherwise
		new(toxics.NoopToxic).Pipe(stub)

		return
	}

	for {
		select {
		case <-stub.Interrupt:
			return
		case c := <-stub.Input:
			if c == nil {
				stub.Close()

				return
			}

			due := c.Timestamp.Add(d.next())

			if wait := time.Until(due); wait > 0 {
				timer := time.NewTimer(wait)

				select {
				case <-timer.C:
				case <-stub.Interrupt:
					timer.Stop()
					release(stub, c)

					return
				}
			}

			// A later latency toxic in the chain then adds its delay on top.
			c.Timestamp = due

			select {
			case stub.Output <- c:
			case <-stub.Interrupt:
				release(stub, c)

				return
			}
		}
	}
}

// release hands the held chunk on after an interrupt. Like toxiproxy's
// bandwidth toxic it gives up after 5 s: when the connection is closing, the
// stub after this one may be gone, and a plain send would block this goroutine
// (and toxiproxy's RemoveToxic waiting for it) forever.
func release(stub *toxics.ToxicStub, c *stream.StreamChunk) {
	_ = stub.WriteOutput(c, 5*time.Second) //nolint:errcheck // nothing reads: the connection is gone
}
