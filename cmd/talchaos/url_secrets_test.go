package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/talchaos/talchaos/harness/result"
)

// urlSecret is in every hostile URL below; it must show nowhere.
const urlSecret = "Pw0Secret"

// hostileInventory is an inventory whose only problem is a Proxmox URL with
// credentials.
func hostileInventory(t *testing.T, dir, url string) string {
	t.Helper()

	inv := filepath.Join(dir, "inventory.yaml")
	text := "apiVersion: talchaos/v1\nkind: Inventory\ntalosconfig: talosconfig\nnodes:\n" +
		"  - {name: cp1, role: controlplane, address: 10.5.0.11, config: cp1.yaml, proxmox: {node: pve, vmid: 101}}\n" +
		"proxmox: {url: '" + url + "', tokenID: root@pam!talchaos, tokenSecretFile: pve-token}\n"

	if err := os.WriteFile(inv, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}

	return inv
}

// assertNoURLSecret fails if the output or any file under dir holds the secret.
func assertNoURLSecret(t *testing.T, out, dir string) {
	t.Helper()

	if i := strings.Index(out, urlSecret[:5]); i >= 0 {
		t.Errorf("output holds the secret: ...%s...", out[max(0, i-100):min(len(out), i+40)])
	}

	if _, err := os.Stat(dir); err != nil {
		return // nothing written
	}

	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}

		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}

		if i := strings.Index(string(data), urlSecret[:5]); i >= 0 {
			t.Errorf("%s holds the secret: ...%s...", p, data[max(0, i-100):min(len(data), i+40)])
		}

		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Credentials in URLs reach neither the terminal (stdout, stderr) nor a report
// (report.json, summary.md, report.html, junit.xml, hunt files): the
// inventory refuses a Proxmox URL that holds them without quoting it, and an
// error or command output that carries such a URL anyway (an inventory path,
// a scenario argument, an exec orchestrator's output) is scrubbed.
func TestURLCredentialsReachNoOutput(t *testing.T) {
	dir := t.TempDir()

	for _, tc := range []struct {
		name   string
		args   func(reportDir string) []string
		code   int
		want   string // in the output
		report bool   // a report is written
	}{
		{name: "inventory proxmox URL with a password", code: exitInput, report: true,
			want: "proxmox.url: holds credentials (not shown",
			args: func(rd string) []string {
				return []string{"run", "happy-path", "--target", "real", "--report-dir", rd,
					"--inventory", hostileInventory(t, t.TempDir(), "https://root@pam:"+urlSecret+"@pve:8006/api2/json")}
			}},
		{name: "inventory proxmox URL with a secret query", code: exitInput, report: true,
			want: "proxmox.url: holds credentials (not shown",
			args: func(rd string) []string {
				return []string{"run", "happy-path", "--target", "real", "--report-dir", rd,
					"--inventory", hostileInventory(t, t.TempDir(), "https://pve:8006/api2/json?password="+urlSecret)}
			}},
		{name: "plan with an inventory proxmox URL with a password", code: exitInput,
			want: "proxmox.url: holds credentials (not shown",
			args: func(rd string) []string {
				return []string{"run", "happy-path", "--target", "real", "--plan", "--report-dir", rd,
					"--inventory", hostileInventory(t, t.TempDir(), "https://root:"+urlSecret+"%40x@[fd00::1]:8006")}
			}},
		{name: "plain http inventory URL", code: exitInput, report: true,
			want: "proxmox.url: plain http",
			args: func(rd string) []string {
				return []string{"run", "happy-path", "--target", "real", "--report-dir", rd,
					"--inventory", hostileInventory(t, t.TempDir(), "http://pve:8006/api2/json")}
			}},
		{name: "inventory path that is a URL with credentials", code: exitInput, report: true,
			want: "cannot read the inventory",
			args: func(rd string) []string {
				return []string{"run", "happy-path", "--target", "real", "--report-dir", rd,
					"--inventory", "https://root:" + urlSecret + "@pve/inventory.yaml?token=" + urlSecret + "2"}
			}},
		{name: "scenario argument that is a URL with credentials", code: exitInput, report: true,
			want: "no such scenario file",
			args: func(rd string) []string {
				return []string{"run", "https://ci:" + urlSecret + "@git.example/s.yaml?access_token=" + urlSecret, "--report-dir", rd}
			}},
		{name: "hunt with the inventory path a URL", code: exitInput,
			want: "cannot read the inventory",
			args: func(rd string) []string {
				return []string{"hunt", "happy-path", "--seeds", "1-2", "--target", "real", "--report-dir", rd,
					"--inventory", "https://root:" + urlSecret + "@pve/inventory.yaml"}
			}},
		{name: "exec orchestrator printing URLs with credentials", code: exitPass, report: true,
			want: "https://git:" + result.Redacted + "@git.example/x.git",
			args: func(rd string) []string {
				return []string{"run", "--verbose", "--report-dir", rd, execScenario(t,
					`echo "cloning https://git:`+urlSecret+`@git.example/x.git"; `+
						`echo "GET https://pve:8006/api2/json?password=`+urlSecret+`&x=1 failed" >&2; `+
						`echo "Authorization: PVEAPIToken=root@pam!t=`+urlSecret+`-0000"; exit 3`)}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reportDir := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))

			code, out := run(t, tc.args(reportDir)...)
			if code != tc.code || !strings.Contains(out, tc.want) {
				t.Fatalf("exit %d, want %d with %q:\n%.3000s", code, tc.code, tc.want, out)
			}

			assertNoURLSecret(t, out, reportDir)

			if !tc.report {
				return
			}

			for _, f := range []string{"report.json", "summary.md", "report.html", "junit.xml"} {
				if _, err := os.Stat(filepath.Join(reportDir, f)); err != nil {
					t.Errorf("no %s: %v", f, err)
				}
			}

			// `talchaos report` renders the report again: no secret either.
			code, out = run(t, "report", reportDir)
			if code != exitPass {
				t.Fatalf("report: exit %d:\n%s", code, out)
			}

			assertNoURLSecret(t, out, reportDir)
		})
	}
}
