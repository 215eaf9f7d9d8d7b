package sim

import (
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/siderolabs/talos/pkg/machinery/config/configpatcher"
	"github.com/siderolabs/talos/pkg/machinery/config/encoder"
)

// A node's hostname comes from each form a config can give it in: v1alpha1's
// machine.network.hostname (a config without a HostnameConfig document, as
// configs generated before v1.12 are) and v1.12's HostnameConfig document;
// with neither, the automatic one ("addr" for a v1alpha1 config).
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

			if got, want := (&Node{name: "cp1", ip: "10.101.0.11", cfg: cfg}).Hostname(), map[bool]string{true: "talos-10-101-0-11", false: tc.want}[tc.want == ""]; got != want {
				t.Errorf("the node's hostname %q, want %q", got, want)
			}
		})
	}
}

// Talos's automatic hostnames, with the vectors of its own tests
// (controllers/network/hostname_config_test.go): "stable" from the node's
// identity, "addr" from its default address.
func TestAutomaticHostnames(t *testing.T) {
	if got := stableHostname("fGdOI05hVrx3YMagLo0Bwxa2Nm9BAswWm8XLeEj0aS4"); got != "talos-hwz-sw5" {
		t.Errorf("stable hostname %q, want talos-hwz-sw5", got)
	}

	// The generated config's v1alpha1 document with a HostnameConfig of
	// its own.
	raw, err := encoder.NewEncoder(patchedConfig(t, "").RawV1Alpha1(), encoder.WithComments(encoder.CommentsDisabled)).Encode()
	if err != nil {
		t.Fatal(err)
	}

	with := func(auto string) config.Provider {
		cfg, err := configloader.NewFromBytes(append(raw, []byte("---\napiVersion: v1alpha1\nkind: HostnameConfig\nauto: "+auto+"\n")...))
		if err != nil {
			t.Fatal(err)
		}

		return cfg
	}

	n := &Node{name: "cp1", ip: "10.101.0.11", cfg: with("stable"), c: &Cluster{seed: 1}}
	if got := n.Hostname(); got != stableHostname(n.nodeID()) || len(got) != len("talos-hwz-sw5") {
		t.Errorf("a node with auto: stable is %q, want %q", got, stableHostname(n.nodeID()))
	}

	legacy, err := configloader.NewFromBytes(raw)
	if err != nil {
		t.Fatal(err)
	}

	if got := (&Node{name: "cp1", ip: "fd00:101::11", cfg: legacy}).Hostname(); got != "talos-fd0010111" {
		t.Errorf("a node with a v1alpha1 config alone is %q, want talos-fd0010111 (addr)", got)
	}

	if got := (&Node{name: "cp1", ip: "10.101.0.11", cfg: with("off")}).Hostname(); got != "cp1" {
		t.Errorf("a node with auto: off and no hostname is %q, want its name", got)
	}
}
