package result

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/talchaos/talchaos/harness/eventlog"
	"github.com/talchaos/talchaos/harness/history"
)

// Credentials in URLs and headers are removed from any text, wherever the URL
// sits and however the secret is written; the rest of the text stays.
func TestScrubURLCredentials(t *testing.T) {
	const r = Redacted

	for _, tc := range []struct {
		name    string
		in      string
		want    string   // the scrubbed text; "" to check only secrets
		secrets []string // none may be left (defaults to "s3cr3t-pw")
	}{
		// Userinfo.
		{name: "password", in: "https://root:s3cr3t-pw@pve:8006/api2/json", want: "https://root:" + r + "@pve:8006/api2/json"},
		{name: "password, no path", in: "https://root:s3cr3t-pw@pve", want: "https://root:" + r + "@pve"},
		{name: "upper-case scheme", in: "HTTPS://root:s3cr3t-pw@pve/", want: "HTTPS://root:" + r + "@pve/"},
		{name: "other scheme", in: "postgres://app:s3cr3t-pw@db:5432/x", want: "postgres://app:" + r + "@db:5432/x"},
		{name: "realm user", in: "https://root@pam:s3cr3t-pw@pve:8006", want: "https://root@pam:" + r + "@pve:8006"},
		{name: "password with @", in: "https://root:s3cr3t@pw@pve:8006/x", want: "https://root:" + r + "@pve:8006/x", secrets: []string{"s3cr3t", "@pw@"}},
		{name: "password with :", in: "https://root:s3cr3t:pw@pve/x", want: "https://root:" + r + "@pve/x", secrets: []string{"s3cr3t", ":pw@"}},
		{name: "percent-encoded password", in: "https://root:s3cr3t%40pw%3A%2F@pve/x", want: "https://root:" + r + "@pve/x", secrets: []string{"s3cr3t", "%40pw"}},
		{name: "password with /", in: `parse "https://root:s3cr/et-pw@pve:8006/x": invalid port ":s3cr" after host`,
			want: `parse "https://root:` + r + `@pve:8006/x": invalid port "` + r + `" after host`, secrets: []string{"s3cr", "et-pw"}},
		{name: "password with #", in: "https://root:s3cr#et-pw@pve/x", want: "https://root:" + r + "@pve/x", secrets: []string{"s3cr", "et-pw"}},
		{name: "password with ?", in: "https://root:s3cr?et-pw@pve/x", want: "https://root:" + r + "@pve/x", secrets: []string{"s3cr", "et-pw"}},
		{name: "password with quote", in: `Get "https://root:s3cr"et-pw@pve/x": EOF`, want: `Get "https://root:` + r + `@pve/x": EOF`, secrets: []string{"s3cr", "et-pw"}},
		{name: "escaped quote in %q", in: `parse "https://root:s3cr\"et-pw@pve": net/url: invalid userinfo`,
			want: `parse "https://root:` + r + `@pve": net/url: invalid userinfo`, secrets: []string{"s3cr", "et-pw"}},
		{name: "token as user name", in: "https://ghp_s3cr3tTOKENs3cr3tTOKENs3cr3tTOKEN1234@github.com/o/r", want: "https://" + r + "@github.com/o/r", secrets: []string{"s3cr3tTOKEN"}},
		{name: "token as user, x-oauth-basic", in: "https://ghp_s3cr3tTOKENs3cr3tTOKENs3cr3tTOKEN1234:x-oauth-basic@github.com", want: "https://" + r + "@github.com", secrets: []string{"s3cr3tTOKEN"}},
		{name: "user name only", in: "ssh://s3cr3t-pw@host/x", want: "ssh://" + r + "@host/x"},
		{name: "empty password", in: "https://root:@pve/x", want: "https://root:@pve/x", secrets: []string{}},
		{name: "IPv6 host", in: "https://root:s3cr3t-pw@[fe80::1%25eth0]:8006/x", want: "https://root:" + r + "@[fe80::1%25eth0]:8006/x"},
		// Ports followed by the punctuation text puts around URLs are no
		// passwords (etcd's member lists, JSON, parentheses).
		{name: "etcd member list", in: "member 8e9e05c52164694d [https://127.0.4.3:2380] was added as a learner", want: "member 8e9e05c52164694d [https://127.0.4.3:2380] was added as a learner", secrets: []string{}},
		{name: "two peer URLs", in: "[https://127.0.4.3:2380 https://127.0.4.4:2380]", want: "[https://127.0.4.3:2380 https://127.0.4.4:2380]", secrets: []string{}},
		{name: "JSON list", in: `{"peerURLs":["https://127.0.4.3:2380"]}`, want: `{"peerURLs":["https://127.0.4.3:2380"]}`, secrets: []string{}},
		{name: "in parentheses", in: "(https://10.0.0.3:2379), then", want: "(https://10.0.0.3:2379), then", secrets: []string{}},
		{name: "a password of letters after a port-like start", in: "https://root:2380pw", want: "https://root:" + r, secrets: []string{"2380pw"}},
		{name: "IPv6 host, no userinfo", in: "https://[::1]:8006/api2/json", want: "https://[::1]:8006/api2/json", secrets: []string{}},
		{name: "inside Go's url.Error", in: `Get "https://root:s3cr3t-pw@pve:8006/api2/json/nodes": dial tcp: lookup pve: no such host`,
			want: `Get "https://root:` + r + `@pve:8006/api2/json/nodes": dial tcp: lookup pve: no such host`},
		{name: "single quotes", in: "curl 'https://root:s3cr3t-pw@pve/x' failed", want: "curl 'https://root:" + r + "@pve/x' failed"},
		{name: "angle brackets", in: "see <https://root:s3cr3t-pw@pve/x>.", want: "see <https://root:" + r + "@pve/x>."},
		{name: "several URLs", in: "a https://u:s3cr3t-pw@h1/ b http://v:s3cr3t-pw@h2 c", want: "a https://u:" + r + "@h1/ b http://v:" + r + "@h2 c"},
		{name: "URL in a URL", in: "https://h/?next=https://u:s3cr3t-pw@h2/", want: "https://h/?next=https://u:" + r + "@h2/"},
		{name: "percent-encoded URL in a query", in: "https://h/login?next=https%3A%2F%2Fu%3As3cr3t-pw%40h2%2F&x=1", want: "https://h/login?next=" + r + "&x=1"},
		{name: "double-encoded URL", in: "https://h/?next=https%253A%252F%252Fu%253As3cr3t-pw%2540h2", want: "https://h/?next=" + r},
		{name: "encoded URL in a path", in: "GET /redirect/https%3a%2f%2fu%3as3cr3t-pw%40h2 404", want: "GET /redirect/" + r + " 404"},
		{name: "malformed escape after the password", in: "x=https%3A%2F%2Fu%3As3cr3t-pw%40h%zz", want: "x=" + r},
		{name: "in a JSON string", in: `{"url":"https://root:s3cr3t-pw@pve:8006"}`, want: `{"url":"https://root:` + r + `@pve:8006"}`},

		// Query and fragment parameters.
		{name: "password query", in: "https://pve:8006/api2/json?password=s3cr3t-pw", want: "https://pve:8006/api2/json?password=" + r},
		{name: "token query among others", in: `Get "https://h/x?a=1&token=s3cr3t-pw&b=2": EOF`, want: `Get "https://h/x?a=1&token=` + r + `&b=2": EOF`},
		{name: "upper-case name", in: "https://h/?PASSWORD=s3cr3t-pw", want: "https://h/?PASSWORD=" + r},
		{name: "encoded name", in: "https://h/?pass%77ord=s3cr3t-pw", want: "https://h/?pass%77ord=" + r},
		{name: "api-key", in: "https://h/?X-Api-Key=s3cr3t-pw", want: "https://h/?X-Api-Key=" + r},
		{name: "api_key", in: "https://h/?api_key=s3cr3t-pw&x", want: "https://h/?api_key=" + r + "&x"},
		{name: "key", in: "https://maps/?key=s3cr3t-pw", want: "https://maps/?key=" + r},
		{name: "access_token in a fragment", in: "https://app/cb#access_token=s3cr3t-pw&type=bearer", want: "https://app/cb#access_token=" + r + "&type=bearer"},
		{name: "S3 presigned", in: "https://b.s3/o?X-Amz-Credential=AKIAs3cr3t-pw&X-Amz-Signature=abcdefs3cr3t-pw&X-Amz-Security-Token=tok_s3cr3t-pw",
			want: "https://b.s3/o?X-Amz-Credential=" + r + "&X-Amz-Signature=" + r + "&X-Amz-Security-Token=" + r},
		{name: "Azure SAS", in: "https://a.blob/c?sv=2020&sig=s3cr3t-pw%3D", want: "https://a.blob/c?sv=2020&sig=" + r},
		{name: "PVEAPIToken query", in: "https://pve/?PVEAPIToken=root@pam!t=s3cr3t-pw", want: "https://pve/?PVEAPIToken=" + r},
		{name: "semicolon separator", in: "https://h/?a=1;passwd=s3cr3t-pw", want: "https://h/?a=1;passwd=" + r},
		{name: "secret behind ; in another value", in: "https://h/?a=1;token=s3cr3t-pw", want: "https://h/?a=1;token=" + r},
		{name: "secret behind ? in another value", in: "https://h/?next=/x?token=s3cr3t-pw", want: "https://h/?next=/x?token=" + r},
		{name: "password holding ; and ?", in: "https://h/?password=s3cr;et?pw&x=1", want: "https://h/?password=" + r + "&x=1", secrets: []string{"s3cr", "et?pw"}},
		{name: "request line without a scheme", in: "POST /api2/json/access/ticket?username=root@pam&password=s3cr3t-pw HTTP/1.1",
			want: "POST /api2/json/access/ticket?username=root@pam&password=" + r + " HTTP/1.1"},
		{name: "HTML-escaped ampersand", in: "/x?a=1&amp;password=s3cr3t-pw", want: "/x?a=1&amp;password=" + r},
		{name: "escaped quote after the value", in: `"Get \"https://h/?token=s3cr3t-pw\": EOF"`, want: `"Get \"https://h/?token=` + r + `\": EOF"`},
		{name: "userinfo and query", in: "https://u:s3cr3t-pw@h/?secret=s3cr3t-pw#x", want: "https://u:" + r + "@h/?secret=" + r + "#x"},

		// Headers.
		{name: "PVEAPIToken header", in: "Authorization: PVEAPIToken=root@pam!talchaos=0f6e-s3cr3t-pw", want: "Authorization: PVEAPIToken=root@pam!talchaos=" + r},
		{name: "bearer header", in: "authorization: Bearer s3cr3t-pw.abc", want: "authorization: Bearer " + r},
		{name: "basic header", in: "Authorization: Basic czNjcjN0LXB3", want: "Authorization: Basic " + r, secrets: []string{"czNjcjN0LXB3"}},
		{name: "bare bearer token", in: "sent Bearer s3cr3t-pw-0123456789", want: "sent Bearer " + r},
		{name: "PVE cookie", in: "Cookie: PVEAuthCookie=PVE:root@pam:s3cr3t-pw", want: "Cookie: PVEAuthCookie=" + r},
		{name: "header in %q-quoted text", in: `sh -c "echo \"Authorization: PVEAPIToken=root@pam!t=s3cr3t-pw\"; exit 3"`,
			want: `sh -c "echo \"Authorization: PVEAPIToken=root@pam!t=` + r + `\"; exit 3"`},
		{name: "CSRF token", in: "CSRFPreventionToken: 65F1:s3cr3t-pw", want: "CSRFPreventionToken: " + r},

		// Ordinary text stays.
		{name: "plain URL", in: "proxmox https://pve:8006/api2/json: 401", want: "proxmox https://pve:8006/api2/json: 401", secrets: []string{}},
		{name: "peer URLs", in: "member cp1 https://10.5.0.11:2380,https://[fd00::11]:2380", want: "member cp1 https://10.5.0.11:2380,https://[fd00::11]:2380", secrets: []string{}},
		{name: "@ in a path", in: "https://medium.com/@author/post and https://h:8006/a@b", want: "https://medium.com/@author/post and https://h:8006/a@b", secrets: []string{}},
		{name: "e-mail", in: "mail ops@example.com about http://h/", want: "mail ops@example.com about http://h/", secrets: []string{}},
		{name: "harmless query", in: "https://h/search?q=etcd&page=2#top", want: "https://h/search?q=etcd&page=2#top", secrets: []string{}},
		{name: "gRPC error", in: "rpc error: code = Unavailable desc = connection refused", want: "rpc error: code = Unavailable desc = connection refused", secrets: []string{}},
		{name: "basic words", in: "a basic token of thanks; bearer of news", want: "a basic token of thanks; bearer of news", secrets: []string{}},
		{name: "numeric bad port", in: `invalid port ":99999" after host`, want: `invalid port ":99999" after host`, secrets: []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			secrets := tc.secrets
			if secrets == nil {
				secrets = []string{"s3cr3t-pw"}
			}

			for _, s := range []*Scrubber{nil, {}} {
				got := s.Scrub(tc.in)
				if tc.want != "" && got != tc.want {
					t.Errorf("Scrub(%q)\n = %q\nwant %q", tc.in, got, tc.want)
				}

				for _, sec := range secrets {
					if strings.Contains(got, sec) {
						t.Errorf("Scrub(%q) = %q: still holds %q", tc.in, got, sec)
					}
				}

				// Scrubbing twice changes nothing (reports scrub what a run
				// already scrubbed).
				if again := s.Scrub(got); again != got {
					t.Errorf("Scrub is not idempotent: %q, then %q", got, again)
				}

				if ScrubKeyMaterial(tc.in) != got {
					t.Errorf("ScrubKeyMaterial(%q) = %q, Scrub %q", tc.in, ScrubKeyMaterial(tc.in), got)
				}
			}
		})
	}
}

// Errors as net/url and net/http make them for hostile URLs never hold the
// password once scrubbed, whatever the URL's shape.
func TestScrubURLErrors(t *testing.T) {
	const pw = "Pw0rd-s3cr3t"

	for _, raw := range []string{
		"https://root:" + pw + "@pve:8006/api2/json",
		"https://root:" + url.QueryEscape(pw+"@:/?#") + "@pve:8006",
		"https://root:" + pw + "@@pve",
		"https://root:" + pw + "/x@pve",
		"https://root:" + pw + "\"x@pve",
		"https://root:" + pw + "\\x@pve",
		"https://root:" + pw + "%zz@pve",
		"https://root:" + pw + "@[::1]:8006",
		"https://root:" + pw + "@[fe80::1%eth0]:8006",
		"https://pve/?password=" + pw,
		"https://pve/?a=%zz&password=" + pw,
		"https://pve/#token=" + pw,
		"https://pve:" + pw + "/",
	} {
		var msgs []string

		if _, err := url.Parse(raw); err != nil {
			msgs = append(msgs, err.Error())
		}

		msgs = append(msgs, (&url.Error{Op: "Get", URL: raw, Err: errors.New("dial tcp: refused")}).Error(),
			fmt.Sprintf("proxmox: %q: failed", raw), raw)

		for _, m := range msgs {
			if got := ScrubKeyMaterial(m); strings.Contains(got, pw) || strings.Contains(got, pw[:6]) {
				t.Errorf("%q scrubbed is %q", m, got)
			}
		}
	}
}

// A result's strings are scrubbed wherever they sit, map values held as
// interfaces and history entries included, and the original is left as it was.
func TestScrubbedResult(t *testing.T) {
	const u = "https://root:s3cr3t-pw@pve:8006/api2/json?token=s3cr3t-tok"

	orig := &Result{
		Error:    "provision real: " + u,
		Replay:   "talchaos run x --inventory " + u,
		Events:   []eventlog.Event{{Node: "cp1", Kind: "orchestrator.exec", Msg: "stdout: " + u}},
		Schedule: []Planned{{Name: "f", Params: map[string]any{"url": u, "n": 3, "list": []any{u}, u: "key"}}},
		History: &history.History{Entries: []history.Entry{
			{Call: &history.Call{RPC: "Bootstrap", Message: u}},
			{Log: &history.Log{Text: u}},
			{Observed: &history.NodeObservation{APIError: u, Etcd: &history.Service{Message: u}}},
		}},
	}

	before, err := json.Marshal(orig)
	if err != nil {
		t.Fatal(err)
	}

	got := Scrubbed((*Scrubber)(nil), orig)

	after, err := json.Marshal(orig)
	if err != nil {
		t.Fatal(err)
	}

	if string(before) != string(after) {
		t.Errorf("Scrubbed modified its argument")
	}

	data, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}

	for _, sec := range []string{"s3cr3t-pw", "s3cr3t-tok"} {
		if strings.Contains(string(data), sec) {
			t.Errorf("scrubbed result holds %q: %s", sec, data)
		}
	}

	if got.Schedule[0].Params["n"] != 3 || got.Events[0].Node != "cp1" || !strings.Contains(got.Error, "https://root:"+Redacted+"@pve:8006") {
		t.Errorf("scrubbed result lost what is not a secret: %s", data)
	}

	// In place, as a run does.
	(&Scrubber{}).ScrubResult(orig)

	if data, _ := json.Marshal(orig); strings.Contains(string(data), "s3cr3t") { //nolint:errchkjson
		t.Errorf("ScrubResult left a secret: %s", data)
	}

	if Scrubbed[*Result](nil, nil) != nil {
		t.Error("Scrubbed(nil) is not nil")
	}
}

// A scenario copy changed by scrubbing gets the sum of what the report holds;
// a sum that was not the copy's stays as it was.
func TestScrubbedResultSourceSum(t *testing.T) {
	content := "orchestrator: {name: exec, command: [git, clone, 'https://u:s3cr3t-pw@git.example/x']}\n"
	clean := "orchestrator: {name: exec, command: [git, clone]}\n"

	for _, tc := range []struct {
		name, content, sum, want string
	}{
		{"scrubbed", content, sha256Hex(content), sha256Hex(strings.Replace(content, "s3cr3t-pw", Redacted, 1))},
		{"clean", clean, sha256Hex(clean), sha256Hex(clean)},
		{"wrong sum kept", content, "0123", "0123"},
	} {
		r := &Result{Source: &Source{Path: "s.yaml", SHA256: tc.sum, Content: tc.content}}

		got := (&Scrubber{}).ScrubbedResult(r)
		if got.Source.SHA256 != tc.want || strings.Contains(got.Source.Content, "s3cr3t") {
			t.Errorf("%s: sum %s, content %q", tc.name, got.Source.SHA256, got.Source.Content)
		}

		if r.Source.SHA256 != tc.sum || r.Source.Content != tc.content {
			t.Errorf("%s: the original changed", tc.name)
		}
	}
}
