package sim

import (
	"bytes"
	"sync"
)

// lastLog keeps the last lines a task wrote, as Talos's runners do to append
// ` (last log "…")` to a task's failure: a copy of
// internal/app/machined/pkg/system/runner/internal/lastlog/lastlog.go at
// v1.12.6 (an internal package, so it cannot be imported), byte for byte in
// what it keeps: at most 512 bytes, whole lines dropped from the front.
type lastLog struct {
	mu  sync.Mutex
	buf []byte
}

const lastLogLimit = 512

func (w *lastLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()

	if w.buf == nil {
		w.buf = make([]byte, 0, lastLogLimit)
	}

	if len(p) >= lastLogLimit {
		cut := p

		for len(cut) > lastLogLimit {
			nl := bytes.IndexByte(cut, '\n')
			if nl == -1 {
				cut = cut[len(cut)-lastLogLimit:]

				break
			}

			cut = cut[nl+1:]
		}

		w.buf = append(w.buf[:0], cut...)

		return len(p), nil
	}

	pos := 0

	for len(w.buf)-pos+len(p) > lastLogLimit {
		nl := bytes.IndexByte(w.buf[pos:], '\n')
		if nl == -1 {
			pos = len(w.buf)

			break
		}

		pos += nl + 1
	}

	if pos > 0 {
		copy(w.buf, w.buf[pos:])
		w.buf = w.buf[:len(w.buf)-pos]
	}

	w.buf = append(w.buf, p...)

	return len(p), nil
}

// String is GetLastLog: the kept lines without the trailing newlines.
func (w *lastLog) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()

	return string(bytes.TrimRight(w.buf, "\n"))
}
