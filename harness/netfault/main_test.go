package netfault

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: toxics run on
// toxiproxy's goroutines, and a toxic that stops reading its input leaks them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
