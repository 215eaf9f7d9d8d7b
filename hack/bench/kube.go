package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// kubernetes is figure 4: three control planes and a worker with
// Kubernetes (happy-path-kubernetes): time from the bootstrap to the
// kubernetes endpoints listing all three and to every Node Ready, and the
// peak RSS of the whole run — talchaos and its children (the control
// planes' components, the nodes' KWOK kubelets) together, sampled from
// /proc, since a child's memory is not in talchaos's own rusage.
func (b *bench) kubernetes() [][]string {
	fmt.Fprintln(os.Stderr, "bench: 3 control planes with Kubernetes")

	const figure, goal = "4. 3 control planes and a worker with Kubernetes", "all endpoints ≤ 30 s after the bootstrap; ≤ 1.5 GiB"

	dir := filepath.Join(b.work, "kubernetes")

	stop := make(chan struct{})

	var (
		peak int64
		wg   sync.WaitGroup
	)

	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}

			peak = max(peak, treeRSS(b.bin))
		}
	})

	wall, _, _, err := b.talchaos(b.work, "run", "happy-path-kubernetes", "--report-dir", dir)

	close(stop)
	wg.Wait()

	if err != nil {
		return [][]string{{figure, "error: " + firstLine(err), goal}}
	}

	rep, err := readReport(filepath.Join(dir, "report.json"))
	if err != nil {
		fail(err)
	}

	endpoints := "never all listed"
	if at := rep.allEndpoints(3); at > 0 {
		endpoints = fmt.Sprintf("all 3 endpoints %.1f s after the bootstrap", (at - rep.bootstrapMs()).Seconds())
	}

	if at := rep.allNodesReady(4); at > 0 {
		endpoints += fmt.Sprintf(", all 4 Nodes Ready %.1f s after it", (at - rep.bootstrapMs()).Seconds())
	}

	return [][]string{{figure,
		fmt.Sprintf("%s; peak RSS %.0f MiB (talchaos and its children); verdict %s in %.0f s", endpoints, float64(peak)/(1<<20), rep.Verdict, wall.Seconds()),
		goal,
	}}
}

// allEndpoints is when a ready API server first listed n endpoints.
func (r *report) allEndpoints(n int) time.Duration {
	for _, e := range r.History.Entries {
		if o := e.Observed; o != nil && o.APIServer != nil && o.APIServer.Ready && len(o.APIServer.Endpoints) >= n {
			return time.Duration(e.WallMs) * time.Millisecond
		}
	}

	return 0
}

// allNodesReady is when a ready API server first listed n Ready Nodes.
func (r *report) allNodesReady(n int) time.Duration {
	for _, e := range r.History.Entries {
		if o := e.Observed; o != nil && o.APIServer != nil && o.APIServer.Ready {
			ready := 0

			for _, k := range o.APIServer.Nodes {
				if k.Ready {
					ready++
				}
			}

			if ready >= n {
				return time.Duration(e.WallMs) * time.Millisecond
			}
		}
	}

	return 0
}

// treeRSS sums the resident memory of every process running bin and of
// their children (the kube-apiservers), from /proc.
func treeRSS(bin string) int64 {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}

	parent := map[int]int{}
	rss := map[int]int64{}

	var roots []int

	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}

		ppid, kb := procStatus(pid)
		parent[pid], rss[pid] = ppid, kb*1024

		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && exe == bin {
			roots = append(roots, pid)
		}
	}

	in := map[int]bool{}
	for _, r := range roots {
		in[r] = true
	}

	// Descendants: repeat until no process is added.
	for changed := true; changed; {
		changed = false

		for pid, ppid := range parent {
			if !in[pid] && in[ppid] {
				in[pid], changed = true, true
			}
		}
	}

	var sum int64
	for pid := range in {
		sum += rss[pid]
	}

	return sum
}

// procStatus reads a process's parent and its VmRSS in kB.
func procStatus(pid int) (ppid int, rssKB int64) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	defer f.Close() //nolint:errcheck

	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), ":")
		if !ok {
			continue
		}

		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}

		switch k {
		case "PPid":
			ppid, _ = strconv.Atoi(f[0])
		case "VmRSS":
			rssKB, _ = strconv.ParseInt(f[0], 10, 64)
		}
	}

	return ppid, rssKB
}
