package sim_test

import (
	"flag"
	"fmt"
	"os"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/talchaos/talchaos/harness/chaos"
	"github.com/talchaos/talchaos/sim/netns"
)

// injected records the fault kinds whose effect a test checked.
var injected sync.Map

// Every cluster a test starts must be gone when it returns: no goroutine may
// outlive the tests, except toxiproxy v2.12's known link leak (a chain whose
// output is no longer read after a failed write to a closed destination).
//
// And every fault kind of the catalogue has an effect test here: when the
// whole package runs, a kind no test injected fails the run.
//
// The tests run in a network namespace of their own (package netns), where
// clusters with cluster.network take their addresses.
func TestMain(m *testing.M) { os.Exit(netns.Main(func() int { return run(m) })) }

func run(m *testing.M) int {
	code := m.Run()

	if f := flag.Lookup("test.run"); code == 0 && (f == nil || f.Value.String() == "") && !testing.Short() {
		for _, k := range chaos.Kinds {
			if _, ok := injected.Load(k.Kind()); !ok {
				fmt.Fprintf(os.Stderr, "fault kind %s has no effect test in package sim\n", k.Kind())

				code = 1
			}
		}
	}

	if code == 0 {
		if err := goleak.Find(
			goleak.IgnoreTopFunction("github.com/Shopify/toxiproxy/v2/toxics.(*BandwidthToxic).Pipe"),
			goleak.IgnoreTopFunction("github.com/Shopify/toxiproxy/v2/toxics.(*NoopToxic).Pipe"),
			goleak.IgnoreTopFunction("github.com/Shopify/toxiproxy/v2/stream.(*ChanWriter).Write"),
			goleak.IgnoreTopFunction("github.com/talchaos/talchaos/harness/netfault.(*LatencyToxic).Pipe"),
			goleak.IgnoreTopFunction("github.com/talchaos/talchaos/harness/netfault.(*GateToxic).Pipe"),
			// A slow-disk fault's seccomp filter stays for the life of the
			// process, and so does the goroutine that answers it.
			goleak.IgnoreAnyFunction("github.com/talchaos/talchaos/sim/diskgate.serve")); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)

			code = 1
		}
	}

	return code
}
