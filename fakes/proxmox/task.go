package proxmox

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

type task struct {
	upid      string
	node      string
	typ       string
	id        string
	user      string // full token ID, as in the UPID
	pid       int
	pstart    int64
	starttime int64
	created   time.Time

	needPolls int
	minRun    time.Duration
	polls     int

	done   bool
	exit   string
	work   func() string // runs under s.mu when the task is done
	forced string        // FailNextTask's exit status
}

// startTask is RPCEnvironment::fork_worker: it registers a task and returns
// its UPID. Called with s.mu held.
func (s *Server) startTask(node, typ, id string, work func() string) string {
	now := time.Now()
	t := &task{
		node:      node,
		typ:       typ,
		id:        id,
		user:      s.tokenID,
		pid:       s.allocPID(),
		pstart:    int64(now.Sub(s.boot)/time.Second) * 100, // jiffies since boot (USER_HZ 100)
		starttime: now.Unix(),
		created:   now,
		needPolls: s.taskPolls,
		minRun:    s.taskDuration,
		work:      work,
	}

	if len(s.failNext) > 0 {
		t.forced, s.failNext = s.failNext[0], s.failNext[1:]
	}

	// PVE::Tools::upid_encode.
	t.upid = fmt.Sprintf("UPID:%s:%08X:%08X:%08X:%s:%s:%s:", t.node, t.pid, t.pstart, t.starttime, t.typ, t.id, t.user)

	s.tasks[t.upid] = t
	s.taskOrder = append(s.taskOrder, t.upid)

	return t.upid
}

// finish ends the task, doing its work unless it was made to fail. Called
// with s.mu held.
func (t *task) finish() {
	if t.done {
		return
	}

	t.done = true

	if t.forced != "" {
		t.exit = t.forced

		return
	}

	t.exit = t.work()
}

// taskStatus is GET /nodes/{node}/tasks/{upid}/status (PVE::API2::Tasks
// read_task_status).
func (s *Server) taskStatus(node, upid string) reply {
	s.mu.Lock()
	defer s.mu.Unlock()

	if !strings.HasPrefix(upid, "UPID:") || strings.Count(upid, ":") < 8 {
		return paramErr(map[string]string{"upid": "unable to parse worker upid"})
	}

	t := s.tasks[upid]
	if t == nil || t.node != node {
		return paramErr(map[string]string{"upid": "no such task"})
	}

	t.polls++
	if !t.done && t.needPolls >= 0 && t.polls > t.needPolls && time.Since(t.created) >= t.minRun {
		t.finish()
	}

	d := map[string]any{
		"upid":      t.upid,
		"node":      t.node,
		"pid":       t.pid,
		"pstart":    t.pstart,
		"starttime": t.starttime,
		"type":      t.typ,
		"id":        t.id,
		"status":    "running",
	}

	// $convert_token_task: a token's task shows user and tokenid apart.
	if user, token, found := strings.Cut(t.user, "!"); found {
		d["user"], d["tokenid"] = user, token
	} else {
		d["user"] = t.user
	}

	if t.done {
		d["status"] = "stopped"
		d["exitstatus"] = t.exit
	}

	return reply{code: http.StatusOK, data: d}
}
