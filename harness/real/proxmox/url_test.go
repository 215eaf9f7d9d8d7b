package proxmox

import (
	"context"
	"strings"
	"testing"

	fake "github.com/talchaos/talchaos/fakes/proxmox"
)

// Open refuses an API URL that holds credentials or would carry the token
// over plain http to another machine, before any request and without quoting
// the URL; https, and plain http to a loopback IP (the fake PVE here, an SSH
// tunnel), are used.
func TestOpenRefusesUnsafeURLs(t *testing.T) {
	e := newEnv(t)
	host := strings.TrimPrefix(strings.TrimSuffix(e.cfg.URL, "/api2/json"), "http://") // 127.0.0.1:PORT

	for _, tc := range []struct{ name, url, want string }{
		{"password", "http://root:Hx9s3cret@" + host, "holds credentials (not shown)"},
		{"token as user name", "http://Hx9s3cret@" + host, "holds credentials (not shown)"},
		{"encoded password", "http://root:Hx9s3cret%40%3A@" + host, "holds credentials (not shown)"},
		{"password with /", "http://root:Hx9s/3cret@" + host, "holds credentials (not shown)"},
		{"password, no host", "http://root:Hx9s3cret/", "not an http(s) URL with a host (not shown)"},
		{"query", "http://" + host + "/api2/json?password=Hx9s3cret", "has a query or fragment (not shown"},
		{"fragment", "http://" + host + "/api2/json#Hx9s3cret", "has a query or fragment (not shown"},
		{"no scheme", "Hx9s3cret", "not an http(s) URL with a host (not shown)"},
		{"plain http elsewhere", "http://pve.example:8006/Hx9s3cret", "plain http would send the API token in clear text"},
		{"plain http to localhost by name", "http://localhost:8006/Hx9s3cret", "plain http would send the API token in clear text"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.srv.ResetRequests()

			cfg := e.cfg
			cfg.URL = tc.url

			err := openErr(cfg, VM{Node: "pve", VMID: 100})
			if err == nil || !strings.Contains(err.Error(), "API URL: "+tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}

			if strings.Contains(err.Error(), "Hx9s") || strings.Contains(err.Error(), "3cret") {
				t.Errorf("error quotes the URL: %v", err)
			}

			if reqs := e.srv.Requests(); len(reqs) > 0 {
				t.Errorf("requests were made: %v", reqs)
			}
		})
	}

	// The token ID with the secret appended, as the Authorization header has it.
	cfg := e.cfg
	cfg.TokenID += "=" + secret

	if err := openErr(cfg, VM{Node: "pve", VMID: 100}); err == nil || strings.Contains(err.Error(), secret[:8]) {
		t.Errorf("token ID with its secret: %v", err)
	}
}

// Over TLS the fake answers as PVE does, whatever the host.
func TestOpenOverTLS(t *testing.T) {
	s := fake.NewServer(fake.WithToken("talchaos@pve!chaos", secret), fake.WithTLS())
	t.Cleanup(s.Close)
	s.AddVM("pve", 100, true)

	m, err := Open(context.Background(), Config{URL: s.URL(), TokenID: s.TokenID(), TokenSecret: secret, HTTPClient: s.Client()}, VM{Node: "pve", VMID: 100})
	if err != nil {
		t.Fatal(err)
	}

	m.Close()
}
