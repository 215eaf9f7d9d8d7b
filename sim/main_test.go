package sim_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every cluster a test starts must be gone when it returns: no goroutine may
// outlive the tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
