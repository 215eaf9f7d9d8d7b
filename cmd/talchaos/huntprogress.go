package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/mattn/go-isatty"

	"github.com/talchaos/talchaos/reports"
	"github.com/talchaos/talchaos/reports/stats"
)

// defaultParallel is how many seeds a hunt runs at once unless told: two per
// core. A simulated run waits mostly on Talos timers and on etcd's real-time
// work (about 0.4 of a core without the race detector); measured on 2 cores
// (docs/measurements.md), 20 seeds of too-many-learners at 4 at a time took
// 106 s with the same verdicts and outcomes as one at a time.
func defaultParallel() int { return max(2*runtime.NumCPU(), 1) }

// isTerminal reports whether w is talchaos's stdout on a terminal (not CI).
func isTerminal(w io.Writer) bool {
	if sw, ok := w.(*stdoutWriter); ok {
		w = sw.w
	}

	f, ok := w.(*os.File)

	return ok && isatty.IsTerminal(f.Fd()) && os.Getenv("CI") == ""
}

// huntProgress prints one line per finished seed; on a terminal a status
// line under them shows a bar, the pass and fail counts and the ETA.
type huntProgress struct {
	mu       sync.Mutex
	out      io.Writer
	tty      bool
	total    int
	passed   int
	failed   int
	void     int // runs voided by a stall of the host
	started  time.Time
	statusOn bool
}

func newHuntProgress(out io.Writer, total int, tty bool) *huntProgress {
	return &huntProgress{out: out, tty: tty, total: total, started: time.Now()}
}

func (p *huntProgress) finished(r reports.HuntRun, interrupted bool) {
	p.finishedAs("", r, interrupted)
}

// finishedAs is finished for a run of the named scenario (a night's runs mix
// scenarios).
func (p *huntProgress) finishedAs(name string, r reports.HuntRun, interrupted bool) {
	line := fmt.Sprintf("seed %-4d %-5s %6.1fs", r.Seed, strings.ToUpper(r.Verdict), float64(r.DurationMs)/1000)
	if name != "" {
		line = name + " " + line
	}

	if r.Verdict != stats.Pass || interrupted {
		line += "  " + r.Failure
	}

	p.line(line, r.Verdict, !interrupted)
}

// line prints one finished run's line; counted runs count as passed, void or
// failed in the status line.
func (p *huntProgress) line(line, verdict string, counted bool) {
	p.mu.Lock()
	defer p.mu.Unlock()

	switch {
	case !counted:
	case verdict == stats.Pass:
		p.passed++
	case verdict == stats.Void:
		p.void++
	default:
		p.failed++
	}

	p.clearStatus()
	fmt.Fprintln(p.out, line)
	p.status()
}

func (p *huntProgress) clearStatus() {
	if p.tty && p.statusOn {
		fmt.Fprint(p.out, "\r\033[K")
		p.statusOn = false
	}
}

func (p *huntProgress) status() {
	if !p.tty {
		return
	}

	done := p.passed + p.failed + p.void
	width := 30
	filled := width * done / max(p.total, 1)

	eta := "?"
	if done > 0 {
		eta = (time.Since(p.started) / time.Duration(done) * time.Duration(p.total-done)).Round(time.Second).String()
	}

	void := ""
	if p.void > 0 {
		void = fmt.Sprintf("  void %d", p.void)
	}

	fmt.Fprintf(p.out, "[%s%s] %d/%d  pass %d  fail %d%s  ETA %s", strings.Repeat("#", filled), strings.Repeat(".", width-filled),
		done, p.total, p.passed, p.failed, void, eta)
	p.statusOn = true
}

// clear prints what print prints with the status line out of its way.
func (p *huntProgress) clear(print func()) {
	p.mu.Lock()
	defer p.mu.Unlock()

	p.clearStatus()
	print()
	p.status()
}

func (p *huntProgress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()

	p.clearStatus()
}
