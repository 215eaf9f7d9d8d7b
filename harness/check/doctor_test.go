package check

import "testing"

func TestEndpointOf(t *testing.T) {
	for in, want := range map[string]string{
		"10.5.0.2":        "10.5.0.2:50000",
		"10.5.0.2:50001":  "10.5.0.2:50001",
		"cp1.lab":         "cp1.lab:50000",
		"fd00::2":         "[fd00::2]:50000",
		"[fd00::2]":       "[fd00::2]:50000",
		"[fd00::2]:50001": "[fd00::2]:50001",
		"cp1.lab:50001":   "cp1.lab:50001",
	} {
		if got := endpointOf(in); got != want {
			t.Errorf("endpointOf(%q) = %q, want %q", in, got, want)
		}
	}
}
