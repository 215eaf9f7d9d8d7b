package real

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/generate"
	"github.com/siderolabs/talos/pkg/machinery/config/machine"

	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/secretbundle"
	"github.com/talchaos/talchaos/harness/strictyaml"
)

// validInventory is an inventory as `talchaos up` writes it (three control
// planes and a worker), one field per line so that cases can name lines.
const validInventory = `apiVersion: talchaos/v1
kind: Inventory
talosconfig: talosconfig
nodes:
    - name: cp1
      role: controlplane
      address: 127.0.9.2
      endpoint: 127.0.9.2:50000
      config: cp1.yaml
    - name: cp2
      role: controlplane
      address: 127.0.9.3
      endpoint: 127.0.9.3:50000
      config: cp2.yaml
    - name: cp3
      role: controlplane
      address: 127.0.9.4
      endpoint: 127.0.9.4:50000
      config: cp3.yaml
    - name: w1
      role: worker
      address: 127.0.9.5
      endpoint: 127.0.9.5:50000
      config: w1.yaml
`

// proxmoxSection is appended (line 25) to inventories whose nodes use Proxmox.
const proxmoxSection = "proxmox: {url: https://pve:8006/api2/json, tokenID: root@pam!talchaos, tokenSecretFile: pve-token}\n"

// A token secret and a key fragment that must never show in an error.
const (
	tokenSecret = "0b7b9c1e-secret-token-value"
	keyMaterial = "c2VjcmV0LWtleS1tYXRlcmlhbA"
)

type generated struct {
	controlPlane, worker, talosconfig []byte
	key                               string // the talosconfig's client key
	err                               error
}

var (
	genOnce sync.Once
	gen     generated
)

// machineFiles generates, once per test binary, a control-plane and a worker
// machine config and a talosconfig with real keys, as `talchaos up` writes them.
func machineFiles(tb testing.TB) generated {
	tb.Helper()

	genOnce.Do(func() {
		gen.err = func() error {
			bundle, err := secretbundle.New(config.TalosVersionCurrent)
			if err != nil {
				return err
			}

			in, err := generate.NewInput("talchaos-test", "https://127.0.9.1:6443", "1.34.1",
				generate.WithVersionContract(config.TalosVersionCurrent), generate.WithSecretsBundle(bundle),
				generate.WithEndpointList([]string{"127.0.9.2"}))
			if err != nil {
				return err
			}

			for typ, out := range map[machine.Type]*[]byte{machine.TypeControlPlane: &gen.controlPlane, machine.TypeWorker: &gen.worker} {
				cfg, err := in.Config(typ)
				if err != nil {
					return err
				}

				if *out, err = cfg.Bytes(); err != nil {
					return err
				}
			}

			tc, err := in.Talosconfig()
			if err != nil {
				return err
			}

			gen.key = tc.Contexts[tc.Context].Key

			gen.talosconfig, err = tc.Bytes()

			return err
		}()
	})

	if gen.err != nil {
		tb.Fatal(gen.err)
	}

	return gen
}

// writeFixture writes the files validInventory names into dir.
func writeFixture(tb testing.TB, dir string) {
	tb.Helper()

	g := machineFiles(tb)

	files := map[string][]byte{
		"talosconfig": g.talosconfig,
		"cp1.yaml":    g.controlPlane, "cp2.yaml": g.controlPlane, "cp3.yaml": g.controlPlane,
		"w1.yaml":   g.worker,
		"pve-token": []byte(tokenSecret + "\n"),
	}

	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			tb.Fatal(err)
		}
	}
}

func TestLoadInventoryValid(t *testing.T) {
	dir := t.TempDir()
	writeFixture(t, dir)

	for name, text := range map[string]string{
		"as up writes it": validInventory,
		"with providers": strings.Replace(validInventory, "config: cp1.yaml\n", "config: cp1.yaml\n      proxmox: {node: pve1, vmid: 111, nic: net1}\n", 1) +
			strings.Replace(proxmoxSection, "}", ", insecureSkipVerify: true}", 1),
		"qemu": strings.Replace(validInventory, "config: w1.yaml\n", "config: w1.yaml\n      qemu: {qmp: /run/qemu/w1.qmp, nic: net0}\n", 1),
	} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(dir, "inv.yaml")
			if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}

			inv, err := LoadInventory(file)
			if err != nil {
				t.Fatalf("LoadInventory: %v", err)
			}

			if len(inv.Nodes) != 4 || inv.Nodes[3].Name != "w1" || inv.Nodes[3].Role != roleWorker {
				t.Fatalf("nodes %+v", inv.Nodes)
			}

			if got := inv.path(inv.Talosconfig); got != filepath.Join(dir, "talosconfig") {
				t.Fatalf("talosconfig resolves to %s", got)
			}

			sc := parseScenario(t, 3, 1)
			if err := inv.CheckScenario(sc); err != nil {
				t.Fatalf("CheckScenario: %v", err)
			}
		})
	}
}

// Every bad inventory is refused at load time (or by CheckScenario) with an
// error that starts FILE:LINE: FIELD: and quotes nothing of the files it names.
func TestLoadInventoryRefuses(t *testing.T) {
	replace := func(old, new string) func(string) string {
		return func(s string) string {
			if !strings.Contains(s, old) {
				t.Fatalf("fixture lacks %q", old)
			}

			return strings.Replace(s, old, new, 1)
		}
	}

	write := func(name, data string) func(dir string) {
		return func(dir string) {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}

	remove := func(name string) func(dir string) {
		return func(dir string) {
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
	}

	for _, tc := range []struct {
		name  string
		edit  func(string) string // of validInventory
		files func(dir string)    // of the fixture
		// scenario, when set, is checked against the inventory: {control planes, workers}.
		scenario []int
		want     string // after the file name: ":LINE: FIELD: MSG" (a prefix of it)
	}{
		{name: "unknown field", edit: replace("      address: 127.0.9.3\n", "      address: 127.0.9.3\n      colour: blue\n"),
			want: `:13: nodes[1].colour: unknown field "colour"`},
		{name: "misspelt field", edit: replace("talosconfig: talosconfig", "talosConfig: talosconfig"),
			want: `:3: talosConfig: unknown field "talosConfig" (did you mean "talosconfig"?)`},
		{name: "bogus apiVersion", edit: replace("talchaos/v1", "bogus/v9"),
			want: `:1: apiVersion: must be "talchaos/v1", got "bogus/v9"`},
		{name: "bad kind", edit: replace("kind: Inventory", "kind: Scenario"),
			want: `:2: kind: must be "Inventory", got "Scenario"`},
		{name: "second document", edit: func(s string) string { return s + "---\napiVersion: talchaos/v1\n" },
			want: ":25: more than one YAML document: one inventory per file"},
		{name: "empty", edit: func(string) string { return "" }, want: ":1: empty inventory"},
		{name: "not a mapping", edit: func(string) string { return "- cp1\n" }, want: ":1: an inventory must be a mapping"},
		{name: "syntax", edit: replace("    - name: cp2\n", "    - name: cp2: x\n"), want: ":10: invalid YAML: mapping values are not allowed"},
		{name: "no nodes", edit: func(s string) string { return s[:strings.Index(s, "nodes:")] + "nodes: []\n" },
			want: ":4: nodes: at least one node is required"},
		{name: "missing talosconfig field", edit: replace("talosconfig: talosconfig\n", ""),
			want: ":1: talosconfig: required"},
		{name: "missing talosconfig file", files: remove("talosconfig"),
			want: ":3: talosconfig: open talosconfig: no such file or directory"},
		{name: "talosconfig is a directory", files: func(dir string) {
			remove("talosconfig")(dir)
			if err := os.Mkdir(filepath.Join(dir, "talosconfig"), 0o700); err != nil {
				t.Fatal(err)
			}
		}, want: ":3: talosconfig: talosconfig is a directory"},
		{name: "talosconfig does not parse", files: write("talosconfig", "contexts: "+keyMaterial+"\n"),
			want: ":3: talosconfig: talosconfig is not a talosconfig: "},
		{name: "talosconfig without a context", files: write("talosconfig", "context: \"\"\ncontexts: {}\n"),
			want: ":3: talosconfig: talosconfig has no current context"},
		{name: "talosconfig context missing", files: write("talosconfig", "context: lab\ncontexts: {other: {endpoints: [10.5.0.11]}}\n"),
			want: `:3: talosconfig: talosconfig: its current context "lab" is not among its contexts`},
		{name: "missing node config file", files: remove("cp2.yaml"),
			want: ":14: nodes[1].config: open cp2.yaml: no such file or directory"},
		{name: "node config does not load", files: write("w1.yaml", "version: v1alpha1\nmachine:\n  type: worker\n  token: "+keyMaterial+"\n  certSANs: "+keyMaterial+"\n"),
			want: ":24: nodes[3].config: w1.yaml is not a Talos machine config: "},
		{name: "node config with an unknown key", files: write("w1.yaml", "version: v1alpha1\nmachine:\n  tokn: "+keyMaterial+"\n"),
			want: ":24: nodes[3].config: w1.yaml is not a Talos machine config: "},
		{name: "duplicate node", edit: replace("name: cp2", "name: cp1"),
			want: `:10: nodes[1].name: duplicate node "cp1" (first on line 5)`},
		{name: "bad node name", edit: replace("name: cp3", "name: CP_3"),
			want: `:15: nodes[2].name: invalid node name "CP_3"`},
		{name: "bad role", edit: replace("role: worker", "role: master"),
			want: `:21: nodes[3].role: "master" is not controlplane or worker`},
		{name: "missing role", edit: replace("      role: worker\n", ""),
			want: `:20: nodes[3].role: required`},
		{name: "worker listed as controlplane", edit: replace("role: worker", "role: controlplane"),
			want: ":21: nodes[3].role: w1 is named as a worker but has role controlplane"},
		{name: "bad address", edit: replace("address: 127.0.9.3", "address: 127.0.9.300"),
			want: `:12: nodes[1].address: "127.0.9.300" is not an IP address`},
		{name: "host name as address", edit: replace("address: 127.0.9.3", "address: cp2.lab"),
			want: `:12: nodes[1].address: "cp2.lab" is not an IP address`},
		{name: "duplicate address", edit: replace("address: 127.0.9.3", "address: 127.0.9.2"),
			want: ":12: nodes[1].address: 127.0.9.2 is also the address of nodes[0] (line 7)"},
		{name: "address a list", edit: replace("address: 127.0.9.3", "address: [127.0.9.3]"),
			want: ":12: nodes[1].address: expected a string, got a list"},
		{name: "endpoint without port", edit: replace("endpoint: 127.0.9.4:50000", "endpoint: 127.0.9.4"),
			want: `:18: nodes[2].endpoint: "127.0.9.4" is not host:port`},
		{name: "endpoint bad port", edit: replace("endpoint: 127.0.9.4:50000", "endpoint: 127.0.9.4:500000"),
			want: `:18: nodes[2].endpoint: "127.0.9.4:500000": port "500000" is not a number from 1 to 65535`},
		{name: "missing config", edit: replace("      config: w1.yaml\n", ""),
			want: ":20: nodes[3].config: required"},
		{name: "float vmid", edit: func(s string) string {
			return replace("config: cp1.yaml\n", "config: cp1.yaml\n      proxmox: {node: pve1, vmid: 1.5}\n")(s) + proxmoxSection
		}, want: `:10: nodes[0].proxmox.vmid: expected an integer, got "1.5"`},
		{name: "vmid out of range", edit: func(s string) string {
			return replace("config: cp1.yaml\n", "config: cp1.yaml\n      proxmox: {node: pve1, vmid: 7}\n")(s) + proxmoxSection
		}, want: `:10: nodes[0].proxmox.vmid: must be a Proxmox VMID from 100 to 999999999, got 7`},
		{name: "two nodes one VM", edit: func(s string) string {
			s = replace("config: cp1.yaml\n", "config: cp1.yaml\n      proxmox: {node: pve1, vmid: 111}\n")(s)
			s = replace("config: cp2.yaml\n", "config: cp2.yaml\n      proxmox: {node: pve1, vmid: 111}\n")(s)

			return s + proxmoxSection
		}, want: ":16: nodes[1].proxmox: nodes[0] (line 5) already drives this VM (proxmox VM 111 on pve1)"},
		{name: "proxmox VM without API section", edit: replace("config: cp1.yaml\n", "config: cp1.yaml\n      proxmox: {node: pve1, vmid: 111}\n"),
			want: ":10: nodes[0].proxmox: needs the inventory's proxmox section"},
		{name: "proxmox and qemu", edit: replace("config: cp1.yaml\n", "config: cp1.yaml\n      proxmox: {node: pve1, vmid: 111}\n      qemu: {qmp: /run/cp1.qmp}\n"),
			want: ":11: nodes[0].qemu: a node has one provider: proxmox or qemu, not both"},
		{name: "qemu without socket", edit: replace("config: cp1.yaml\n", "config: cp1.yaml\n      qemu: {nic: net0}\n"),
			want: ":10: nodes[0].qemu.qmp: required"},
		{name: "bad token ID", edit: func(s string) string { return s + strings.Replace(proxmoxSection, "root@pam!talchaos", "talchaos", 1) },
			want: `:25: proxmox.tokenID: "talchaos" is not of the form user@realm!tokenname`},
		{name: "token secret twice", edit: func(s string) string {
			return s + strings.Replace(proxmoxSection, "}", ", tokenSecretEnv: PVE_TOKEN}", 1)
		}, want: ":25: proxmox.tokenSecretEnv: one of tokenSecretFile or tokenSecretEnv, not both"},
		{name: "missing token secret file", edit: func(s string) string { return s + proxmoxSection }, files: remove("pve-token"),
			want: ":25: proxmox.tokenSecretFile: open pve-token: no such file or directory"},
		{name: "empty token secret file", edit: func(s string) string { return s + proxmoxSection }, files: write("pve-token", "\n"),
			want: ":25: proxmox.tokenSecretFile: pve-token is empty"},
		{name: "token secret env unset", edit: func(s string) string {
			return s + strings.Replace(proxmoxSection, "tokenSecretFile: pve-token", "tokenSecretEnv: TALCHAOS_TEST_UNSET_TOKEN", 1)
		}, want: ":25: proxmox.tokenSecretEnv: environment variable TALCHAOS_TEST_UNSET_TOKEN is not set"},
		{name: "bad URL", edit: func(s string) string {
			return s + strings.Replace(proxmoxSection, "https://pve:8006/api2/json", "pve:8006", 1)
		},
			want: `:25: proxmox.url: "pve:8006" is not an http(s) URL`},
		{name: "scenario needs cp4", scenario: []int{4, 1},
			want: "S:5: cluster.controlPlanes: the inventory lists 3 control planes (cp1, cp2, cp3); the scenario needs cp4"},
		{name: "scenario needs w2", scenario: []int{3, 2},
			want: "S:6: cluster.workers: the inventory lists 1 worker (w1); the scenario needs w2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFixture(t, dir)

			text := validInventory
			if tc.edit != nil {
				text = tc.edit(text)
			}

			if tc.files != nil {
				tc.files(dir)
			}

			file := filepath.Join(dir, "inv.yaml")
			if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}

			inv, err := LoadInventory(file)

			prefix := file
			if tc.scenario != nil {
				if err != nil {
					t.Fatalf("LoadInventory: %v", err)
				}

				sc := parseScenario(t, tc.scenario[0], tc.scenario[1])
				err = inv.CheckScenario(sc)
				prefix = sc.File

				var se *scenario.Error
				if !errors.As(err, &se) {
					t.Fatalf("CheckScenario error %T %v is not a scenario error", err, err)
				}
			} else {
				var ye *strictyaml.Error
				if !errors.As(err, &ye) {
					t.Fatalf("error %T %v is not a strictyaml error", err, err)
				}
			}

			want := prefix + strings.TrimPrefix(tc.want, "S")
			if err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("error:\n  %v\nwant a prefix:\n  %s", err, want)
			}

			for _, secret := range []string{keyMaterial, tokenSecret, "PRIVATE KEY", machineFiles(t).key} {
				if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), secret[:7]) {
					t.Fatalf("error quotes file contents (%.7s...): %v", secret, err)
				}
			}
		})
	}
}

// Several problems are all reported, in line order.
func TestLoadInventoryReportsEveryProblem(t *testing.T) {
	dir := t.TempDir()
	writeFixture(t, dir)

	text := strings.NewReplacer("role: worker", "role: boss", "address: 127.0.9.3", "address: nowhere").Replace(validInventory)
	file := filepath.Join(dir, "inv.yaml")

	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}

	_, err := LoadInventory(file)

	var es strictyaml.Errors
	if !errors.As(err, &es) || len(es) != 2 || es[0].Line != 12 || es[1].Line != 21 {
		t.Fatalf("want two errors on lines 12 and 21, got %v", err)
	}
}

// A missing or unreadable inventory is an input error naming the file.
func TestLoadInventoryMissingFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "nope.yaml")

	_, err := LoadInventory(file)

	var ye *strictyaml.Error
	if !errors.As(err, &ye) || !strings.HasPrefix(err.Error(), file+":1: cannot read the inventory: open "+file+": no such file or directory") {
		t.Fatalf("error %v", err)
	}
}

// CheckScenario names each misplaced node and where the inventory lists it,
// also for an inventory built in code.
func TestCheckScenarioRoles(t *testing.T) {
	inv := &Inventory{Nodes: []InventoryNode{
		{Name: "cp1", Role: roleControlPlane}, {Name: "cp2", Role: roleWorker}, {Name: "w1", Role: roleControlPlane},
	}}

	err := inv.CheckScenario(parseScenario(t, 2, 1))

	var es scenario.Errors
	if !errors.As(err, &es) || len(es) != 2 {
		t.Fatalf("want two errors, got %v", err)
	}

	for i, want := range []string{
		"S:5: cluster.controlPlanes: the inventory lists 2 control planes (cp1, w1); the scenario needs cp2; cp2 is listed as a worker (the inventory)",
		"S:6: cluster.workers: the inventory lists 1 worker (cp2); the scenario needs w1; w1 is listed as a controlplane (the inventory)",
	} {
		if got := es[i].Error(); got != want {
			t.Errorf("error %d:\n  %s\nwant\n  %s", i, got, want)
		}
	}
}

// A scenario with cluster.network runs on an inventory whose nodes are at
// one of its addresses each, and names the node that is not.
func TestCheckScenarioAddresses(t *testing.T) {
	sc, err := scenario.Parse("S", []byte("apiVersion: talchaos/v1\nkind: Scenario\nname: t\ncluster:\n  controlPlanes: 2\n"+
		"  network:\n    addresses: [fd00:101::11/64, 10.101.0.11/24]\n"), nil)
	if err != nil {
		t.Fatal(err)
	}

	inv := &Inventory{Nodes: []InventoryNode{
		{Name: "cp1", Role: roleControlPlane, Address: "10.101.0.11"}, {Name: "cp2", Role: roleControlPlane, Address: "fd00:101::12"},
	}}
	if err := inv.CheckScenario(sc); err != nil {
		t.Fatal(err)
	}

	inv.Nodes[1].Address = "10.101.0.13"

	want := "S:6: cluster.network: cp2 is at 10.101.0.13 (the inventory), not at one of the scenario's addresses for it (fd00:101::12, 10.101.0.12)"
	if err := inv.CheckScenario(sc); err == nil || err.Error() != want {
		t.Fatalf("error %v, want\n%s", err, want)
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"yaml: construct errors:\n  line 1: cannot construct !!str `secretv...` into map[string]*config.Context":      "yaml: construct errors: line 1: cannot construct !!str (...) into map[string]*config.Context",
		"error decoding document /v1alpha1/ (line 1): unknown keys found during decoding:\nmachine:\n    tokn: abc\n": "error decoding document /v1alpha1/ (line 1): unknown keys found during decoding",
		`"Foo" "v1alpha1": not registered`: "(...) (...): not registered",
		"open quote `abc":                  "open quote (...)",
		"":                                 "unreadable",
	} {
		if got := redact(errors.New(in)); got != want {
			t.Errorf("redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// parseScenario parses a scenario of cps control planes and ws workers from a
// file named "S": cluster.controlPlanes on line 5, cluster.workers on line 6.
func parseScenario(tb testing.TB, cps, ws int) *scenario.Scenario {
	tb.Helper()

	sc, err := scenario.Parse("S", []byte("apiVersion: talchaos/v1\nkind: Scenario\nname: t\ncluster:\n  controlPlanes: "+
		strconv.Itoa(cps)+"\n  workers: "+strconv.Itoa(ws)+"\n"), nil)
	if err != nil {
		tb.Fatal(err)
	}

	return sc
}
