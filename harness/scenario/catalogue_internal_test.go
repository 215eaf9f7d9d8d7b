package scenario

import "testing"

// Without a catalogue (no fault kind known), trigger states and diagnosis
// codes are not checked, and parsing does not fail on them.
func TestParseWithoutCatalogue(t *testing.T) {
	data := []byte("apiVersion: talchaos/v1\nkind: Scenario\nname: t\ncluster: {controlPlanes: 2}\n" +
		"expect:\n  diagnoses:\n    - code: any-code\n  noDiagnoses: [other-code]\n")

	sc, err := Parse("t.yaml", data, nil)
	if err != nil {
		t.Fatalf("Parse without a catalogue: %v", err)
	}

	if got := sc.Expect.Diagnoses[0].Code; got != "any-code" {
		t.Errorf("code %q", got)
	}

	if _, err := Parse("t.yaml", []byte("apiVersion: talchaos/v1\nkind: Scenario\nname: t\ncluster: {controlPlanes: 2}\nexpect:\n  diagnoses:\n    - node: cp1\n"), nil); err == nil ||
		err.Error() != "t.yaml:7: expect.diagnoses[0].code: required" {
		t.Errorf("a missing code without a catalogue: %v", err)
	}
}
