package syncbuf

import (
	"strings"
	"sync"
	"testing"
)

// Writers and a reader side by side (the race detector checks the rest):
// every write is kept whole.
func TestBufferKeepsEveryWrite(t *testing.T) {
	var (
		b  Buffer
		wg sync.WaitGroup
	)

	for range 8 {
		wg.Go(func() {
			for range 100 {
				_, _ = b.Write([]byte("ab"))
				_ = b.String()
			}
		})
	}

	wg.Wait()

	if got := b.String(); len(got) != 1600 || strings.Count(got, "ab") != 800 {
		t.Errorf("8 writers of 100 \"ab\" each left %d bytes, %d \"ab\"", len(got), strings.Count(got, "ab"))
	}
}
