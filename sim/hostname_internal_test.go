package sim

import (
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/siderolabs/talos/pkg/machinery/config/configpatcher"
	"github.com/siderolabs/talos/pkg/machinery/config/encoder"
)

// A node's hostname comes from each form a config can give it in: v1alpha1's
// machine.network.hostname (a config without a HostnameConfig document, as
// configs generated before v1.12 are) and v1.12's HostnameConfig document;
// with neither, the sim keeps the node's name (Talos would make one up).
func TestHostnameFromEachConfigForm(t *testing.T) {
	base := patchedConfig(t, "")

	// Without its HostnameConfig document: a v1alpha1 config alone.
	raw, err := encoder.NewEncoder(base.RawV1Alpha1(), encoder.WithComments(encoder.CommentsDisabled)).Encode()
	if err != nil {
		t.Fatal(err)
	}

	v1alpha1Only := string(raw)

	for _, tc := range []struct {
		name, config, patch, want string
	}{
		{"v1alpha1 machine.network.hostname", v1alpha1Only, "machine:\n  network:\n    hostname: solcp01\n", "solcp01"},
		{"HostnameConfig document", "", "apiVersion: v1alpha1\nkind: HostnameConfig\nauto: off\nhostname: solcp02\n", "solcp02"},
		{"neither", v1alpha1Only, "machine:\n  network: {}\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := []byte(tc.config)
			if tc.config == "" {
				if data, err = base.Bytes(); err != nil {
					t.Fatal(err)
				}
			}

			p, err := configpatcher.LoadPatch([]byte(tc.patch))
			if err != nil {
				t.Fatal(err)
			}

			out, err := configpatcher.Apply(configpatcher.WithBytes(data), []configpatcher.Patch{p})
			if err != nil {
				t.Fatal(err)
			}

			patched, err := out.Bytes()
			if err != nil {
				t.Fatal(err)
			}

			cfg, err := configloader.NewFromBytes(patched)
			if err != nil {
				t.Fatal(err)
			}

			if got := hostnameIn(cfg); got != tc.want {
				t.Errorf("hostname %q, want %q", got, tc.want)
			}

			if got, want := (&Node{name: "cp1", cfg: cfg}).Hostname(), map[bool]string{true: "cp1", false: tc.want}[tc.want == ""]; got != want {
				t.Errorf("the node's hostname %q, want %q", got, want)
			}
		})
	}
}
