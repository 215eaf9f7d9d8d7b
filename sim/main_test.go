package sim_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every cluster a test starts must be gone when it returns: no goroutine may
// outlive the tests, except toxiproxy v2.12's known link leak (a chain whose
// output is no longer read after a failed write to a closed destination).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/Shopify/toxiproxy/v2/toxics.(*BandwidthToxic).Pipe"),
		goleak.IgnoreTopFunction("github.com/Shopify/toxiproxy/v2/toxics.(*NoopToxic).Pipe"),
		goleak.IgnoreTopFunction("github.com/Shopify/toxiproxy/v2/stream.(*ChanWriter).Write"),
		goleak.IgnoreTopFunction("github.com/talchaos/talchaos/harness/netfault.(*LatencyToxic).Pipe"))
}
