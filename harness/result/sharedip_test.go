package result

import "testing"

// expect.sharedIP: held wants a holder that answers there; unheld, none.
func TestSharedIPIs(t *testing.T) {
	for _, tc := range []struct {
		ip           SharedIP
		held, unheld bool
	}{
		{SharedIP{Address: "10.0.0.10"}, false, true},
		{SharedIP{Address: "10.0.0.10", Holder: "cp1"}, true, false},
		{SharedIP{Address: "10.0.0.10", Holder: "cp1", Error: "connection refused"}, false, false},
	} {
		if got := tc.ip.Is(SharedIPHeld); got != tc.held {
			t.Errorf("%+v Is(held) = %t", tc.ip, got)
		}

		if got := tc.ip.Is(SharedIPUnheld); got != tc.unheld {
			t.Errorf("%+v Is(unheld) = %t", tc.ip, got)
		}
	}
}
