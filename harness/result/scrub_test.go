package result

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/generate"
	"github.com/siderolabs/talos/pkg/machinery/config/machine"

	"github.com/talchaos/talchaos/harness/eventlog"
	"github.com/talchaos/talchaos/harness/result/secretscan"
	"github.com/talchaos/talchaos/harness/secretbundle"
)

func TestScrub(t *testing.T) {
	key := strings.Repeat("QUJDRA", 30) // a long base64 run, like a key in a config
	pem := "-----BEGIN ED25519 PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIG0o\n-----END ED25519 PRIVATE KEY-----"

	s := &Scrubber{}
	s.Add("3f2a9c1e-token-secret")

	for _, tc := range []struct{ in, want string }{
		{"apply failed: rpc error: code = Unavailable", "apply failed: rpc error: code = Unavailable"},
		{"key: " + key + " end", "key: [redacted] end"},
		{"got " + pem + " here", "got [redacted] here"},
		{"auth PVEAPIToken=root@pam!t=3f2a9c1e-token-secret failed", "auth PVEAPIToken=root@pam!t=[redacted] failed"},
		{"member 1a2b3c4d5e6f7a8b added", "member 1a2b3c4d5e6f7a8b added"},
	} {
		if got := s.Scrub(tc.in); got != tc.want {
			t.Errorf("Scrub(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// A Talos cluster's configs and talosconfig, as a run has them: every secret
// the machinery knows of is registered from the configs' bytes, and none is
// left in the configs themselves printed whole or line by line, in the keys
// printed decoded, or in error texts; ordinary text stays as it was.
func TestScrubMachineConfigs(t *testing.T) {
	bundle, err := secretbundle.New(config.TalosVersionCurrent)
	if err != nil {
		t.Fatal(err)
	}

	in, err := generate.NewInput("scrub", "https://10.5.0.1:6443", "1.34.1",
		generate.WithSecretsBundle(bundle), generate.WithEndpointList([]string{"10.5.0.2"}))
	if err != nil {
		t.Fatal(err)
	}

	// Secrets that are not in the bundle, in documents of other kinds.
	extra := []secretscan.Secret{
		{Name: "wireguard private key", Value: "eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHg="},
		{Name: "registry password", Value: "hunter2-registry-pass"},
	}
	docs := "\n---\napiVersion: v1alpha1\nkind: WireguardConfig\nname: wg0\nprivateKey: " + extra[0].Value +
		"\n---\napiVersion: v1alpha1\nkind: RegistryAuthConfig\nname: registry.example.com\nusername: talchaos\npassword: " + extra[1].Value + "\n"

	var configs [][]byte

	for _, typ := range []machine.Type{machine.TypeControlPlane, machine.TypeWorker} {
		cfg, err := in.Config(typ)
		if err != nil {
			t.Fatal(err)
		}

		data, err := cfg.Bytes()
		if err != nil {
			t.Fatal(err)
		}

		configs = append(configs, append(data, docs...))
	}

	tc, err := in.Talosconfig()
	if err != nil {
		t.Fatal(err)
	}

	tcBytes, err := tc.Bytes()
	if err != nil {
		t.Fatal(err)
	}

	s := &Scrubber{}

	for _, data := range configs {
		values, err := MachineConfigSecrets(data)
		if err != nil {
			t.Fatal(err)
		}

		s.Add(values...)
	}

	s.Add(TalosconfigSecrets(tc)...)

	want, err := secretscan.Values(bundle, tc)
	if err != nil {
		t.Fatal(err)
	}

	want = append(want, extra...)

	// What a run can print: whole files, files line by line (an exec command's
	// output), keys decoded whole and line by line, secrets inside error texts.
	texts := map[string]string{"talosconfig": string(tcBytes)}

	for i, data := range configs {
		texts[fmt.Sprintf("config %d", i)] = string(data)

		for j, line := range strings.Split(string(data), "\n") {
			texts[fmt.Sprintf("config %d line %d", i, j+1)] = line
		}
	}

	for _, w := range want {
		texts["error with "+w.Name] = fmt.Sprintf("rpc error: code = Unauthenticated desc = bad token %q for cp1", w.Value)

		for j, line := range strings.Split(w.Value, "\n") {
			texts[fmt.Sprintf("%s line %d", w.Name, j+1)] = "stdout: " + line
		}
	}

	for where, text := range texts {
		for _, hit := range secretscan.Find(where, s.Scrub(text), want) {
			t.Error(hit)
		}
	}

	// The secrets are really in the configs (the scan can fail), and everything
	// else in them survives.
	cp := string(configs[0])
	for _, v := range []string{bundle.Secrets.BootstrapToken, bundle.TrustdInfo.Token, bundle.Cluster.Secret, extra[0].Value, extra[1].Value} {
		if !strings.Contains(cp, v) {
			t.Fatalf("the control-plane config lacks %.6s...", v)
		}
	}

	scrubbed := s.Scrub(cp)
	if tc := s.Scrub(string(tcBytes)); !strings.Contains(tc, "- 10.5.0.2") || !strings.Contains(tc, "key: "+Redacted) {
		t.Errorf("scrubbed talosconfig:\n%s", tc)
	}

	for _, v := range []string{"https://10.5.0.1:6443", "type: controlplane", "name: registry.example.com", "username: talchaos", "token: " + Redacted, "secret: " + Redacted} {
		if !strings.Contains(scrubbed, v) {
			t.Errorf("scrubbed config lost %q", v)
		}
	}
}

// Short secrets go, wherever they are; text that merely resembles them stays.
func TestScrubShortSecrets(t *testing.T) {
	s := &Scrubber{}
	s.Add("abcdef.0123456789abcdef", "short") // a bootstrap token; a value too short to redact safely

	for _, tc := range []struct{ in, want string }{
		{"token abcdef.0123456789abcdef!", "token [redacted]!"},
		{"secret part 0123456789abcdef only", "secret part [redacted] only"},
		{"id abcdef alone", "id abcdef alone"},
		{"a short story", "a short story"},
		{"cp2 127.0.9.3:50000 member 8e9e05c52164694d is a learner", "cp2 127.0.9.3:50000 member 8e9e05c52164694d is a learner"},
		{"etcdserver: too many learner members in cluster", "etcdserver: too many learner members in cluster"},
	} {
		if got := s.Scrub(tc.in); got != tc.want {
			t.Errorf("Scrub(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// A scrubbed error keeps its chain.
func TestScrubError(t *testing.T) {
	s := &Scrubber{}
	s.Add("abcdef.0123456789abcdef")

	base := &os.PathError{Op: "open", Path: "abcdef.0123456789abcdef", Err: os.ErrNotExist}
	err := s.ScrubError(fmt.Errorf("talosconfig: %w", base))

	if got := err.Error(); got != "talosconfig: open [redacted]: file does not exist" {
		t.Errorf("scrubbed error = %q", got)
	}

	var pe *os.PathError
	if !errors.As(err, &pe) || !errors.Is(err, os.ErrNotExist) {
		t.Error("scrubbed error lost its chain")
	}

	if clean := errors.New("no secret here"); s.ScrubError(clean) != clean {
		t.Error("a clean error was wrapped")
	}

	if s.ScrubError(nil) != nil {
		t.Error("nil error became non-nil")
	}
}

// Every string of a result is scrubbed, including ones no field list names.
func TestScrubResult(t *testing.T) {
	s := &Scrubber{}
	s.Add("abcdef.0123456789abcdef")

	const tok = "abcdef.0123456789abcdef"

	r := &Result{
		Error:     "boom " + tok,
		Events:    []eventlog.Event{{Node: "cp1", Kind: "orchestrator.exec", Msg: "stdout: " + tok}},
		Diagnoses: []Diagnosis{{Code: "x", Message: tok, Evidence: tok}},
		Checks:    []Check{{Name: "c", Expected: tok, Actual: tok}},
		Outcome:   Outcome{Nodes: []NodeOutcome{{Name: "cp1", EtcdHealth: tok}}, Members: []Member{{PeerURLs: []string{tok}}}},
	}

	s.ScrubResult(r)

	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}

	if strings.Contains(string(data), "0123456789abcdef") {
		t.Errorf("result still holds the token: %s", data)
	}

	if r.Events[0].Node != "cp1" || r.Events[0].Msg != "stdout: "+Redacted {
		t.Errorf("event = %+v", r.Events[0])
	}
}

// Configs of any shape give their secrets (or an error), never a panic: a
// real target's inventory can hold anything.
func TestMachineConfigSecretsOddConfigs(t *testing.T) {
	for _, tc := range []struct {
		name, config string
		want         []string
		err          bool
	}{
		{"empty", "", nil, true},
		{"not yaml", "{{{", nil, true},
		{"no cluster", "version: v1alpha1\nmachine:\n  type: worker\n  token: abcdef.0123456789abcdef\n", []string{"abcdef.0123456789abcdef"}, false},
		{"no v1alpha1", "apiVersion: v1alpha1\nkind: RegistryAuthConfig\nname: r.example.com\npassword: hunter2-registry-pass\n", []string{"hunter2-registry-pass"}, false},
		{"unknown kind", "apiVersion: v1alpha1\nkind: NoSuchConfig\ntoken: abcdef.0123456789abcdef\n", []string{"abcdef.0123456789abcdef"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := MachineConfigSecrets([]byte(tc.config))
			if (err != nil) != tc.err {
				t.Errorf("err = %v, want error: %v", err, tc.err)
			}

			for _, w := range tc.want {
				if !slices.Contains(got, w) {
					t.Errorf("secrets lack %q: %q", w, got)
				}
			}
		})
	}
}
