package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/talchaos/talchaos/harness/result"
)

// Flags are input: out-of-bounds numbers are refused with exit 2, naming the
// flag, before any directory is created.
func TestHostileFlagsExitTwo(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"hunt", "happy-path", "--seeds", "9223372036854775807-9223372036854775807", "--parallel", "0"}, "--parallel: must be between 1 and 256, got 0"},
		{[]string{"hunt", "happy-path", "--seeds", "0-9223372036854775807"}, "more than 10000 seeds"},
		{[]string{"hunt", "happy-path", "--seeds", "1,1"}, "seed 1 is given twice"},
		{[]string{"hunt", "happy-path", "--seeds", ""}, "--seeds"},
		{[]string{"hunt", "happy-path", "--parallel", "100000"}, "--parallel: must be between 1 and 256"},
		{[]string{"hunt", "happy-path", "--shrink", "--rate", "NaN"}, "--rate NaN"},
		{[]string{"hunt", "happy-path", "--shrink", "--rate", "+Inf"}, "--rate +Inf"},
		{[]string{"hunt", "no-such-scenario"}, "no such scenario file or built-in"},
		{[]string{"hunt", "happy-path", "--target", "bogus"}, `unknown target "bogus"`},
		{[]string{"doctor", "--time-scale", "NaN", "--nodes", "127.0.0.1"}, "--time-scale: must be between 1 and 10000, got NaN"},
		{[]string{"doctor", "--time-scale", "Inf", "--nodes", "127.0.0.1"}, "--time-scale: must be between 1 and 10000, got +Inf"},
		{[]string{"doctor", "--time-scale", "-1", "--nodes", "127.0.0.1"}, "--time-scale: must be between 1 and 10000, got -1"},
		{[]string{"doctor", "--nodes", "127.0.0.1:99999"}, "the port must be a number from 1 to 65535"},
		{[]string{"doctor", "--nodes", "127.0.0.1,127.0.0.1"}, `--nodes "127.0.0.1": given twice`},
		{[]string{"doctor", "--nodes", "a b"}, "neither an IP address nor a host name"},
		{[]string{"doctor", "--nodes", "\x1b[2J"}, `--nodes "\x1b[2J"`},
		{[]string{"doctor", "--nodes", "127.0.0.1", "--endpoints", "https://127.0.0.1"}, "--endpoints"},
		{[]string{"up", "--target", "bogus"}, `unknown target "bogus"`},
		{[]string{"up", "--target", "container", "--cidr", "127.0.9.0/24"}, "--cidr is for --target=sim"},
		{[]string{"up", "--from", "happy-path", "--control-planes", "5"}, "--control-planes"},
		{[]string{"up", "--from", "happy-path", "--time-scale", "0.5"}, "--time-scale: must be between 1 and 10000, got 0.5"},
		{[]string{"up", "--from", "happy-path", "--time-scale", "NaN"}, "--time-scale: must be between 1 and 10000, got NaN"},
		{[]string{"nightly", "--scenario", ""}, "--scenario: no scenario named"},
		{[]string{"nightly", "--scenario", "happy-path,happy-path"}, `--scenario "happy-path": named twice`},
		{[]string{"nightly", "--scenario", "\x1b[31mred"}, `--scenario "\x1b[31mred": no such built-in scenario or scenario file`},
		{[]string{"nightly", "--seeds", "1,1"}, "seed 1 is given twice"},
		{[]string{"nightly", "--parallel", "-3"}, "--parallel: must be between 1 and 256, got -3"},
		{[]string{"nightly", "--compare", "x.json", "--seeds", "1-3"}, "--seeds is for a night's run"},
		{[]string{"nightly", "--compare", "x.json", "--time-scale", "30"}, "--time-scale is for a night's run"},
		{[]string{"nightly", "--time-scale", "0.5"}, "--time-scale: must be between 1 and 10000, got 0.5"},
		{[]string{"hunt", "happy-path", "--time-scale", "NaN"}, "--time-scale: must be between 1 and 10000, got NaN"},
		{[]string{"hunt", "happy-path", "--time-scale", "10001"}, "--time-scale: must be between 1 and 10000, got 10001"},
		{[]string{"up", "--time-scale", "NaN"}, "--time-scale"},
		{[]string{"up", "--time-scale", "Inf"}, "--time-scale"},
		{[]string{"merge", "\x1b[31mred"}, `red: stat: no such file or directory`},
		{[]string{"merge", "/dev/null"}, "/dev/null: not a directory"},
		{[]string{"hunt", "happy-path", "--shard", "\x1b[2J/2"}, `--shard "\x1b[2J/2": K "\x1b[2J" is not a whole number`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			args := append([]string{}, tc.args...)

			switch args[0] {
			case "hunt":
				args = append(args, "--report-dir", dir)
			case "nightly":
				if !strings.Contains(strings.Join(args, " "), "--compare") {
					args = append(args, "--out", dir)
				}
			case "up":
				args = append(args, "--dir", dir)
			case "merge":
				args = append(args, "--out", dir)
			}

			code, out := run(t, args...)
			if code != exitInput || !strings.Contains(out, tc.want) {
				t.Fatalf("exit %d, want 2 with %q:\n%.2000s", code, tc.want, out)
			}

			if strings.ContainsRune(out, '\x1b') {
				t.Fatalf("a control character reached the terminal:\n%q", out)
			}

			if _, err := os.Stat(dir); err == nil {
				t.Fatalf("%s was created although the input was refused", dir)
			}
		})
	}
}

// Files given to a command are refused when they are not regular files: a
// FIFO with no writer must not block open(2) (where SIGTERM could not end
// the process), a device must not be read until memory runs out.
func TestSpecialFilesAreRefused(t *testing.T) {
	dir := t.TempDir()

	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}

	// A shard's directory whose ledger is a FIFO.
	shardDir := filepath.Join(dir, "shard")
	if err := os.Mkdir(shardDir, 0o755); err != nil {
		t.Fatal(err)
	}

	if err := syscall.Mkfifo(filepath.Join(shardDir, "ledger.json"), 0o600); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"report", fifo}, "is not a regular file (a named pipe)"},
		{[]string{"report", fifo, "--rejudge"}, "is not a regular file (a named pipe)"},
		{[]string{"replay", fifo, "--report-dir", filepath.Join(dir, "r1")}, "is not a regular file (a named pipe)"},
		{[]string{"nightly", "--baseline", fifo, "--compare", fifo}, "is not a regular file (a named pipe)"},
		{[]string{"doctor", "--talosconfig", fifo, "--nodes", "127.0.0.1"}, "is not a regular file (a named pipe)"},
		{[]string{"doctor", "--talosconfig", "/dev/zero", "--nodes", "127.0.0.1"}, "is not a regular file (a character device)"},
		{[]string{"doctor", "--inventory", fifo}, "is not a regular file (a named pipe)"},
		{[]string{"run", fifo, "--report-dir", filepath.Join(dir, "r2")}, "is not a regular file (a named pipe)"},
		{[]string{"run", "--plan", fifo, "--report-dir", filepath.Join(dir, "r4")}, "is not a regular file (a named pipe)"},
		{[]string{"hunt", fifo, "--report-dir", filepath.Join(dir, "r3")}, "is not a regular file (a named pipe)"},
		{[]string{"report", "/dev/zero"}, "is not a regular file (a character device)"},
		{[]string{"merge", shardDir, "--out", filepath.Join(dir, "m1")}, "shard/ledger.json: cannot read the ledger: is not a regular file (a named pipe)"},
		{[]string{"merge", "--baseline", fifo, shardDir, "--out", filepath.Join(dir, "m2")}, "is not a regular file (a named pipe)"},
	} {
		t.Run(strings.Join(tc.args[:2], " "), func(t *testing.T) {
			type res struct {
				code int
				out  string
			}

			done := make(chan res, 1)

			go func() {
				code, out := run(t, tc.args...)
				done <- res{code, out}
			}()

			select {
			case r := <-done:
				if r.code != exitInput || !strings.Contains(r.out, tc.want) {
					t.Fatalf("exit %d, want 2 with %q:\n%.2000s", r.code, tc.want, r.out)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("blocked on a special file")
			}
		})
	}
}

// A report is data. Replay reads nothing but the report: a v1 report (or one
// whose source is null) does not make it read the file it names; it runs an
// embedded exec command only with --allow-exec; it never writes over the
// report it replays; and it leaves a report of its own when the one given
// cannot be read.
func TestReplayTreatsTheReportAsData(t *testing.T) {
	dir := t.TempDir()

	secret := filepath.Join(dir, "secret.txt")
	if err := os.WriteFile(secret, []byte("TOP-SECRET-CONTENT\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	marker := filepath.Join(dir, "ran")

	execScenario := "apiVersion: talchaos/v1\nkind: Scenario\nname: ex\ntimeScale: 60\ncluster: {controlPlanes: 1}\n" +
		"orchestrator: {name: exec, command: [/bin/sh, -c, \"touch " + marker + "\"]}\n"

	writeReport := func(name string, r map[string]any) string {
		d := filepath.Join(dir, name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}

		data, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}

		if err := os.WriteFile(filepath.Join(d, "report.json"), data, 0o600); err != nil {
			t.Fatal(err)
		}

		return d
	}

	v1 := writeReport("v1", map[string]any{"schema": result.SchemaV1, "scenario": "x", "target": "sim", "seed": 1, "verdict": "pass", "file": secret})
	nullSource := writeReport("null", map[string]any{"schema": result.Schema, "scenario": "x", "target": "sim", "seed": 1, "verdict": "pass", "file": secret, "source": nil})

	t.Run("v1 names a file", func(t *testing.T) {
		for _, rep := range []string{v1, nullSource} {
			out := filepath.Join(dir, "out-"+filepath.Base(rep))

			code, text := run(t, "replay", rep, "--report-dir", out)
			if code != exitInput || !strings.Contains(text, "holds no scenario copy") {
				t.Fatalf("exit %d, want 2 saying it holds no scenario copy:\n%s", code, text)
			}

			r := readReport(t, filepath.Join(out, "report.json"))
			raw, _ := os.ReadFile(filepath.Join(out, "report.json")) //nolint:errcheck

			if strings.Contains(text, "TOP-SECRET") || strings.Contains(string(raw), "TOP-SECRET") {
				t.Fatalf("the content of the file the report names was read:\n%s", text)
			}

			if r.Verdict != result.Error {
				t.Fatalf("the new report's verdict %q, want error", r.Verdict)
			}
		}
	})

	t.Run("unreadable report still leaves a report", func(t *testing.T) {
		bad := writeReport("bad", map[string]any{"schema": 7})
		out := filepath.Join(dir, "out-bad")

		code, text := run(t, "replay", bad, "--report-dir", out)
		if code != exitInput {
			t.Fatalf("exit %d, want 2:\n%s", code, text)
		}

		if r := readReport(t, filepath.Join(out, "report.json")); r.Verdict != result.Error || r.Error == "" {
			t.Fatalf("the new report: verdict %q error %q", r.Verdict, r.Error)
		}
	})

	t.Run("the replayed report is not overwritten", func(t *testing.T) {
		before, err := os.ReadFile(filepath.Join(v1, "report.json"))
		if err != nil {
			t.Fatal(err)
		}

		code, text := run(t, "replay", v1, "--report-dir", v1)
		if code != exitInput || !strings.Contains(text, "would overwrite it") {
			t.Fatalf("exit %d, want 2 refusing to overwrite:\n%s", code, text)
		}

		after, err := os.ReadFile(filepath.Join(v1, "report.json"))
		if err != nil || string(after) != string(before) {
			t.Fatalf("the replayed report changed (%v)", err)
		}
	})

	t.Run("exec needs consent", func(t *testing.T) {
		if testing.Short() {
			t.Skip("runs a scenario")
		}

		file := filepath.Join(dir, "ex.yaml")
		if err := os.WriteFile(file, []byte(execScenario), 0o600); err != nil {
			t.Fatal(err)
		}

		first := filepath.Join(dir, "ex-first")
		if code, out := run(t, "run", file, "--report-dir", first); code == exitInput || code == exitHarness {
			t.Fatalf("run: exit %d:\n%s", code, out)
		}

		if err := os.Remove(marker); err != nil {
			t.Fatalf("the exec scenario did not run its command: %v", err)
		}

		code, out := run(t, "replay", first, "--report-dir", filepath.Join(dir, "ex-refused"))
		if code != exitInput || !strings.Contains(out, "--allow-exec") || !strings.Contains(out, `"touch `+marker+`"`) {
			t.Fatalf("replay without consent: exit %d, want 2 showing the command and the flag:\n%s", code, out)
		}

		if _, err := os.Stat(marker); err == nil {
			t.Fatal("replay ran the report's command without consent")
		}

		code, out = run(t, "replay", first, "--allow-exec", "--report-dir", filepath.Join(dir, "ex-allowed"))
		if code == exitInput || code == exitHarness || !strings.Contains(out, "will run [\"/bin/sh\"") {
			t.Fatalf("replay with consent: exit %d, want the command shown and run:\n%s", code, out)
		}

		if _, err := os.Stat(marker); err != nil {
			t.Fatal("replay --allow-exec did not run the command")
		}
	})
}
