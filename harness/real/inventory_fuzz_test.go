package real

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/strictyaml"
)

// Decoding arbitrary bytes as an inventory never panics, and every problem is
// a strictyaml error (bad input, exit code 2) placed in the file, that quotes
// none of the secrets of the files the inventory names. The seed corpus runs
// under plain go test; fuzz with
//
//	go test -run '^$' -fuzz FuzzLoadInventory -fuzztime 60s ./harness/real
func FuzzLoadInventory(f *testing.F) {
	dir := f.TempDir()
	writeFixture(f, dir)

	withProxmox := strings.Replace(validInventory, "config: cp1.yaml\n", "config: cp1.yaml\n      proxmox: {node: pve1, vmid: 111}\n", 1) + proxmoxSection

	for _, seed := range []string{
		validInventory,
		withProxmox,
		strings.Replace(validInventory, "config: w1.yaml\n", "config: w1.yaml\n      qemu: {qmp: /run/qemu/w1.qmp}\n", 1),
		// As the README shows it, flow style.
		"apiVersion: talchaos/v1\nkind: Inventory\ntalosconfig: ./talosconfig\n" + proxmoxSection +
			"nodes:\n  - {name: cp1, role: controlplane, address: 10.5.0.11, config: cp1.yaml, proxmox: {node: pve1, vmid: 111}}\n" +
			"  - {name: cp2, role: controlplane, address: 10.5.0.12, config: cp2.yaml, qemu: {qmp: /run/qemu/cp2.qmp}}\n",
		// Broken ones.
		strings.Replace(validInventory, "talchaos/v1", "bogus/v9", 1),
		validInventory + "---\nkind: Inventory\n",
		strings.Replace(validInventory, "talosconfig: talosconfig", "talosconfig: missing", 1),
		strings.Replace(validInventory, "config: cp2.yaml", "config: cp1.yaml\n      colour: blue", 1),
		strings.Replace(withProxmox, "vmid: 111", "vmid: 1.5", 1),
		strings.Replace(validInventory, "name: cp2", "name: cp1", 1),
		strings.Replace(validInventory, "address: 127.0.9.3", "address: ::1%lo", 1),
		"base: &b {role: worker, config: w1.yaml}\nnodes: [{<<: *b, name: w1, address: 10.0.0.1}, *b]\n",
		"a: &a [*a]\n",
		"",
		"- 1\n",
		"nodes: {name: cp1}\n",
		"nodes:\n  - \"na\\nme\": cp1\n",
	} {
		f.Add([]byte(seed))
	}

	file := filepath.Join(dir, "inv.yaml")
	g := machineFiles(f)
	sc := fuzzScenario(f)

	f.Fuzz(func(t *testing.T, data []byte) {
		inv, err := loadInventory(file, data)
		if err == nil {
			if inv == nil || len(inv.Nodes) == 0 || inv.validate() != nil {
				t.Fatalf("accepted an invalid inventory: %+v", inv)
			}

			// Whatever the inventory, checking a scenario against it is an input error or nothing.
			if err := inv.CheckScenario(sc); err != nil {
				var se *scenario.Error
				if !errors.As(err, &se) {
					t.Fatalf("CheckScenario error %T: %v", err, err)
				}
			}

			return
		}

		var ye *strictyaml.Error
		if !errors.As(err, &ye) {
			t.Fatalf("error %T is not a strictyaml error: %v", err, err)
		}

		all := []*strictyaml.Error{ye}

		var es strictyaml.Errors
		if errors.As(err, &es) {
			all = es
		}

		// Every problem is placed on a line of the file.
		// (YAML breaks lines at \n, \r\n and a lone \r.)
		lastLine := bytes.Count(bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n")), []byte("\n")) +
			bytes.Count(bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n")), []byte("\r")) + 1
		for _, e := range all {
			if e.File != file || e.Line < 1 || e.Line > lastLine {
				t.Fatalf("error placed at %s:%d, outside the file's %d lines: %v", e.File, e.Line, lastLine, e)
			}
		}

		msg := err.Error()

		for _, line := range strings.Split(msg, "\n") {
			if !strings.HasPrefix(line, file+":") {
				t.Fatalf("error line %q does not start with the file name", line)
			}
		}

		if strings.Contains(msg, "internal error") {
			t.Fatalf("internal error: %v", err)
		}

		for _, secret := range []string{tokenSecret, g.key, "PRIVATE KEY"} {
			if strings.Contains(msg, secret) {
				t.Fatalf("error quotes a secret: %v", err)
			}
		}
	})
}

// fuzzScenario is a scenario of three control planes and a worker.
func fuzzScenario(tb testing.TB) *scenario.Scenario {
	tb.Helper()

	return parseScenario(tb, 3, 1)
}
