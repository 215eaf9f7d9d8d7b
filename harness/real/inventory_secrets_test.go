package real

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/talchaos/talchaos/harness/strictyaml"
)

// proxmoxWith is the inventory's proxmox section (line 25) with the url and
// the other fields given, the url single-quoted.
func proxmoxWith(url, rest string) string {
	if rest == "" {
		rest = "tokenID: root@pam!talchaos, tokenSecretFile: pve-token"
	}

	return "proxmox: {url: '" + strings.ReplaceAll(url, "'", "''") + "', " + rest + "}\n"
}

// A secret put in the inventory's proxmox section is refused (exit 2 style:
// FILE:LINE: FIELD: MSG) and never quoted back: credentials in the URL (in
// every position and encoding), the token's secret in the URL, token ID,
// environment variable or file field. Plain http is refused but to a
// loopback IP; https to any host is accepted.
func TestInventoryRefusesProxmoxSecrets(t *testing.T) {
	const uuid = "0b7b9c1e-5d2f-4e3a-9c8b-7a6f5e4d3c2b"

	const (
		creds    = "proxmox.url: holds credentials (not shown"
		query    = "proxmox.url: has a query or fragment (not shown"
		plain    = "proxmox.url: plain http: talchaos sends the API token in the Authorization header"
		notShown = "(not shown"
	)

	for _, tc := range []struct {
		name, section, want string
	}{
		{"password", proxmoxWith("https://root:Hx9s3cret@pve:8006/api2/json", ""), creds},
		{"realm user and password", proxmoxWith("https://root@pam:Hx9s3cret@pve:8006", ""), creds},
		{"token ID and secret as userinfo", proxmoxWith("https://root@pam!talchaos:Hx9s3cret-0000@pve:8006", ""), creds},
		{"token as user name", proxmoxWith("https://Hx9s3cretToken@pve:8006", ""), creds},
		{"percent-encoded password", proxmoxWith("https://root:Hx9s3cret%40%3A%2F@pve:8006", ""), creds},
		{"password with @ and :", proxmoxWith("https://root:Hx9s@cr:et@pve:8006", ""), creds},
		{"password with /", proxmoxWith("https://root:Hx9s/3cret@pve:8006/api2/json", ""), creds},
		{"password with # and no host", proxmoxWith("https://root:Hx9s#3cret", ""), creds},
		{"password without host", proxmoxWith("https://root:Hx9s3cret/api2/json", ""), creds},
		{"password with a quote", proxmoxWith(`https://root:Hx9s"3c'ret@pve:8006`, ""), creds},
		{"IPv6 host", proxmoxWith("https://root:Hx9s3cret@[fd00::1]:8006", ""), creds},
		{"upper-case scheme", proxmoxWith("HTTPS://root:Hx9s3cret@pve:8006", ""), creds},
		{"no scheme", proxmoxWith("root:Hx9s3cret@pve:8006", ""), creds},
		{"password query", proxmoxWith("https://pve:8006/api2/json?password=Hx9s3cret", ""), creds},
		{"PVEAPIToken query", proxmoxWith("https://pve:8006/api2/json?PVEAPIToken=root@pam!t=Hx9s3cret", ""), creds},
		{"token query", proxmoxWith("https://pve:8006/api2/json?a=1&token=Hx9s3cret", ""), creds},
		{"encoded query name", proxmoxWith("https://pve:8006/api2/json?pass%77ord=Hx9s3cret", ""), creds},
		{"query of another name", proxmoxWith("https://pve:8006/api2/json?x=Hx9s3cret", ""), query},
		{"fragment", proxmoxWith("https://pve:8006/api2/json#Hx9s3cret", ""), query},
		{"empty query", proxmoxWith("https://pve:8006/api2/json?", ""), query},
		{"token secret as url", proxmoxWith(uuid, ""), "proxmox.url: looks like an API token secret (not shown)"},
		{"plain http", proxmoxWith("http://pve:8006/api2/json", ""), plain},
		{"plain http to an IP", proxmoxWith("http://10.5.0.9:8006/api2/json", ""), plain},
		{"plain http to localhost by name", proxmoxWith("http://localhost:8006/api2/json", ""), plain},
		{"plain http to a non-loopback IPv6", proxmoxWith("http://[fd00::9]:8006", ""), plain},
		{"token ID with its secret", proxmoxWith("https://pve:8006", "tokenID: root@pam!talchaos=Hx9s3cret-0000, tokenSecretFile: pve-token"),
			"proxmox.tokenID: is not of the form user@realm!tokenname and seems to hold the token's secret (not shown)"},
		{"token ID is the secret", proxmoxWith("https://pve:8006", "tokenID: "+uuid+", tokenSecretFile: pve-token"),
			"proxmox.tokenID: is not of the form user@realm!tokenname and seems to hold the token's secret (not shown)"},
		{"secret as the variable's name", proxmoxWith("https://pve:8006", "tokenID: root@pam!talchaos, tokenSecretEnv: "+uuid),
			"proxmox.tokenSecretEnv: looks like the token's secret itself (not shown)"},
		{"secret as the file's name", proxmoxWith("https://pve:8006", "tokenID: root@pam!talchaos, tokenSecretFile: "+uuid),
			"proxmox.tokenSecretFile: cannot be read, and looks like the token's secret itself (not shown)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFixture(t, dir)

			file := filepath.Join(dir, "inv.yaml")
			if err := os.WriteFile(file, []byte(validInventory+tc.section), 0o600); err != nil {
				t.Fatal(err)
			}

			_, err := LoadInventory(file)

			var ye *strictyaml.Error
			if !errors.As(err, &ye) {
				t.Fatalf("error %T %v is not a strictyaml error", err, err)
			}

			if want := file + ":25: " + tc.want; !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("error:\n  %v\nwant a prefix:\n  %s", err, want)
			}

			for _, secret := range []string{"Hx9s", "3cret", uuid[:8], tokenSecret[:8]} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error quotes the secret (%s): %v", secret, err)
				}
			}
		})
	}
}

// https to any host and plain http to a loopback IP (an SSH tunnel, a local
// test server: the token does not leave the machine) are accepted.
func TestInventoryAcceptsProxmoxURLs(t *testing.T) {
	for _, u := range []string{
		"https://pve:8006/api2/json",
		"https://pve.lab.example:8006",
		"https://10.5.0.9:8006/api2/json",
		"https://[fd00::9]:8006/api2/json",
		"http://127.0.0.1:8006/api2/json",
		"http://127.0.0.2:18006",
		"http://[::1]:8006/api2/json",
	} {
		dir := t.TempDir()
		writeFixture(t, dir)

		file := filepath.Join(dir, "inv.yaml")
		if err := os.WriteFile(file, []byte(validInventory+proxmoxWith(u, "")), 0o600); err != nil {
			t.Fatal(err)
		}

		if _, err := LoadInventory(file); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
}
