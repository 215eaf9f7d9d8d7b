package main

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"

	"github.com/talchaos/talchaos/harness/talosclient"
	"github.com/talchaos/talchaos/reports"
)

// The test binary doubles as a small talosctl for the certify tests'
// scripts (the tests cannot count on talosctl being installed): with
// TALCHAOS_TEST_TALOSCTL set it runs one of these and exits.
//
//	apply-each          apply every node's config over the maintenance API,
//	                    exit 1 if one failed (after trying all)
//	bootstrap SECONDS   bootstrap the bootstrap node, retrying while it is
//	                    not ready, for at most SECONDS
//	wait-voters SECONDS wait until every control plane is a voting etcd
//	                    member, exit 1 when SECONDS pass first
//
// With TALCHAOS_TEST_CLI set it is talchaos itself (main), for the tests
// that run the workflow's scripts, which call bin/talchaos.
//
// The tests themselves run with TALCHAOS_TEST_CLI set: a command that runs
// itself again in a network namespace (netns.go) starts this binary, which
// then is talchaos.
func TestMain(m *testing.M) {
	if os.Getenv("TALCHAOS_TEST_TALOSCTL") != "" {
		if err := miniTalosctl(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			os.Exit(1)
		}

		os.Exit(0)
	}

	if os.Getenv("TALCHAOS_TEST_CLI") != "" {
		main()
	}

	os.Setenv("TALCHAOS_TEST_CLI", "1") //nolint:errcheck,gosec // a valid name

	os.Exit(m.Run())
}

func miniTalosctl(args []string) error {
	if len(args) == 0 {
		return errors.New("no command")
	}

	names := strings.Fields(os.Getenv("TALCHAOS_NODES"))
	endpoints := strings.Fields(os.Getenv("TALCHAOS_ENDPOINTS"))

	seconds := func() time.Duration {
		if len(args) < 2 {
			return 10 * time.Second
		}

		var s int
		fmt.Sscan(args[1], &s) //nolint:errcheck // a bad number waits 0 s

		return time.Duration(s) * time.Second
	}

	secure := func(ctx context.Context, endpoint string) (*client.Client, error) {
		cfg, err := clientconfig.Open(os.Getenv("TALOSCONFIG"))
		if err != nil {
			return nil, err
		}

		return talosclient.WithConfig(ctx, cfg, endpoint)
	}

	bootEndpoint := ""

	for i, nv := range names {
		if _, addr, _ := strings.Cut(nv, "="); addr == os.Getenv("TALCHAOS_BOOTSTRAP_NODE") && i < len(endpoints) {
			bootEndpoint = endpoints[i]
		}
	}

	switch args[0] {
	case "apply-each":
		var failed []string

		for i, nv := range names {
			name, _, _ := strings.Cut(nv, "=")

			if err := applyOne(endpoints[i], os.Getenv("TALCHAOS_CONFIG_"+strings.ToUpper(name))); err != nil {
				fmt.Fprintf(os.Stderr, "apply %s: %v\n", name, err)

				failed = append(failed, name)
			}
		}

		if len(failed) > 0 {
			return fmt.Errorf("apply failed on %v", failed)
		}

		return nil
	case "bootstrap":
		deadline := time.Now().Add(seconds())

		for {
			err := func() error {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				defer cancel()

				c, err := secure(ctx, bootEndpoint)
				if err != nil {
					return err
				}
				defer c.Close() //nolint:errcheck

				return c.Bootstrap(ctx, &machine.BootstrapRequest{})
			}()
			if err == nil || time.Now().After(deadline) {
				return err
			}

			time.Sleep(300 * time.Millisecond)
		}
	case "wait-voters":
		want := len(strings.Fields(os.Getenv("TALCHAOS_CONTROLPLANES")))
		deadline := time.Now().Add(seconds())

		for {
			voters, err := func() (int, error) {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				defer cancel()

				c, err := secure(ctx, bootEndpoint)
				if err != nil {
					return 0, err
				}
				defer c.Close() //nolint:errcheck

				resp, err := c.EtcdMemberList(ctx, &machine.EtcdMemberListRequest{})
				if err != nil {
					return 0, err
				}

				n := 0

				for _, m := range resp.GetMessages() {
					for _, mem := range m.GetMembers() {
						if !mem.GetIsLearner() && mem.GetHostname() != "" {
							n++
						}
					}
				}

				return n, nil
			}()
			if err == nil && voters == want {
				return nil
			}

			if time.Now().After(deadline) {
				return fmt.Errorf("%d of %d control planes are voters (%v)", voters, want, err)
			}

			time.Sleep(300 * time.Millisecond)
		}
	}

	return fmt.Errorf("unknown command %q", args[0])
}

func applyOne(endpoint, configFile string) error {
	data, err := os.ReadFile(configFile)
	if err != nil {
		return err
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	c, err := talosclient.Insecure(ctx, endpoint)
	if err != nil {
		return err
	}
	defer c.Close() //nolint:errcheck

	_, err = c.ApplyConfiguration(ctx, &machine.ApplyConfigurationRequest{Data: data, Mode: machine.ApplyConfigurationRequest_AUTO})

	return err
}

// certifyScript is a /bin/sh command line whose "T" runs the test binary's
// small talosctl.
func certifyScript(t *testing.T, body string) []string {
	t.Helper()

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}

	return []string{"/bin/sh", "-c", fmt.Sprintf("T() { TALCHAOS_TEST_TALOSCTL=1 %q \"$@\"; }\n%s", exe, body)}
}

// Scripts modelled on the field's: FR-003's chain (apply with ";",
// bootstrap, exit 0 without waiting) is silent where an apply fails, FR-000's
// wait loop makes the same script loud there and survived on the happy
// path; a script that bootstraps and then exits 1 raises a false alarm; one
// that sleeps forever is hung, and certify still ends soon after the
// scenario's time.
func TestCertifyClassifiesScripts(t *testing.T) {
	// The scripts' waits are real seconds; where the outcome depends on
	// them ending inside the scenario's window (20 Talos minutes), the
	// cluster runs at a scale that leaves a loaded machine room: 40 s (30)
	// or 60 s (20) of wall time.
	for _, tc := range []struct {
		name     string
		scenario string
		scale    string
		script   string
		want     string
		code     int
	}{
		{"FR-003 chain on half-applied-config", "half-applied-config", "", "T apply-each; T bootstrap 5; exit 0", reports.Silent, exitFail},
		{"FR-000 wait on half-applied-config", "half-applied-config", "30", "T apply-each; T bootstrap 10 && T wait-voters 10", reports.Loud, exitPass},
		{"FR-000 wait on the happy path", "happy-path", "20", "T apply-each && T bootstrap 20 && T wait-voters 30", reports.Survived, exitPass},
		{"done, then exit 1", "happy-path", "20", "T apply-each && T bootstrap 20 && T wait-voters 30; exit 1", reports.FalseAlarm, exitPass},
		{"sleeps forever", "invalid-config", "", "exec sleep 100000", reports.Hung, exitFail},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			dir := filepath.Join(t.TempDir(), "certify")
			args := []string{"certify", "--scenario", tc.scenario, "--seeds", "1", "--out", dir}
			if tc.scale != "" {
				args = append(args, "--time-scale", tc.scale)
			}

			args = append(append(args, "--"), certifyScript(t, tc.script)...)

			started := time.Now()
			code, out := run(t, args...)

			if code != tc.code {
				t.Errorf("exit %d, want %d:\n%s", code, tc.code, out)
			}

			c := readCertify(t, dir)
			if len(c.Results) != 1 || len(c.Results[0].Runs) != 1 {
				t.Fatalf("certify.json: %+v", c)
			}

			r := c.Results[0].Runs[0]
			if r.Outcome != tc.want {
				t.Errorf("outcome %s, want %s (exit code %s, diagnoses %v); report %s\n%s", r.Outcome, tc.want, exitCodeString(r.ExitCode), r.Diagnoses, r.Report, out)
			}

			if c.Results[0].Counts[tc.want] != 1 {
				t.Errorf("counts %v", c.Results[0].Counts)
			}

			if _, err := os.Stat(filepath.Join(dir, r.Report, "report.json")); err != nil {
				t.Errorf("the run's report: %v", err)
			}

			if tc.want == reports.Hung && time.Since(started) > 2*time.Minute {
				t.Errorf("a hung command held certify for %s", time.Since(started).Round(time.Second))
			}
		})
	}
}

func exitCodeString(c *int) string {
	if c == nil {
		return "none"
	}

	return fmt.Sprint(*c)
}

func readCertify(t *testing.T, dir string) *reports.Certify {
	t.Helper()

	data, err := os.ReadFile(filepath.Join(dir, reports.CertifyJSONFile))
	if err != nil {
		t.Fatal(err)
	}

	var c reports.Certify
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}

	if c.Schema != reports.CertifySchema {
		t.Errorf("schema %q", c.Schema)
	}

	junit, err := os.ReadFile(filepath.Join(dir, reports.JUnitFile))
	if err != nil {
		t.Fatal(err)
	}

	var suites struct {
		Suites []struct {
			Tests int `xml:"tests,attr"`
		} `xml:"testsuite"`
	}

	if err := xml.Unmarshal(junit, &suites); err != nil || len(suites.Suites) != len(c.Results) {
		t.Errorf("junit.xml: %v\n%s", err, junit)
	}

	summary, err := os.ReadFile(filepath.Join(dir, reports.HuntSummaryFile))
	if err != nil || !strings.Contains(string(summary), "| scenario | what it does | expected |") {
		t.Errorf("summary.md: %v\n%s", err, summary)
	}

	return &c
}

// Bad input is exit 2 before anything runs.
func TestCertifyBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"certify"}, "needs the bootstrap command after --"},
		{[]string{"certify", "--fail-on", "grumpy", "--", "true"}, `--fail-on "grumpy": not an outcome`},
		{[]string{"certify", "--scenario", "half-applied-config-resilient", "--", "true"}, "certify skips it"},
		{[]string{"certify", "--scenario", "no-such", "--", "true"}, "no such scenario"},
		{[]string{"certify", "--scenario", "upgrade-interrupted", "--", "true"}, "it upgrades every node after the bootstrap: pass --upgrades"},
		{[]string{"certify", "--seeds", "x", "--", "true"}, "seeds"},
		{[]string{"certify", "--time-scale", "0.5", "--", "true"}, "--time-scale 0.5: must be between 1 and 1000"},
	} {
		code, out := run(t, append(tc.args, "--out", filepath.Join(t.TempDir(), "o"))...)
		if code != exitInput || !strings.Contains(out, tc.want) {
			t.Errorf("%v: exit %d, want 2 and %q:\n%s", tc.args, code, tc.want, out)
		}
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"examples/certify/fr000-wait.sh": "examples/certify/fr000-wait.sh",
		"a b":                            "'a b'",
		"it's":                           `'it'\''s'`,
		"":                               "''",
		"x\x1b[2Jy":                      `'x\x1b[2Jy'`,
		`a\b`:                            `'a\b'`,
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

// A void run makes certify exit 3 unless a run's outcome is in --fail-on.
func TestCertifyVerdictOfVoidRuns(t *testing.T) {
	for _, tc := range []struct {
		name     string
		outcomes []string
		failOn   []string
		code     int
	}{
		{"all survived", []string{reports.Survived, reports.Survived}, []string{reports.Silent}, exitPass},
		{"a silent run", []string{reports.Survived, reports.Silent}, []string{reports.Silent}, exitFail},
		{"a silent run and a void run", []string{reports.Void, reports.Silent}, []string{reports.Silent}, exitFail},
		{"survived and a void run", []string{reports.Survived, reports.Void}, []string{reports.Silent}, exitHarness},
		{"void in --fail-on", []string{reports.Survived, reports.Void}, []string{reports.Void}, exitFail},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := reports.CertifyScenario{Name: "s", Expected: reports.Survived}
			for i, o := range tc.outcomes {
				s.Runs = append(s.Runs, reports.CertifyRun{Scenario: "s", Seed: int64(i + 1), Outcome: o, Expected: reports.Survived})
			}

			err := certifyVerdictOf(&reports.Certify{FailOn: tc.failOn, Results: []reports.CertifyScenario{s}})

			code := exitPass
			if ee := (*exitError)(nil); errors.As(err, &ee) {
				code = ee.code
			}

			if code != tc.code {
				t.Errorf("exit %d (%v), want %d", code, err, tc.code)
			}
		})
	}
}
