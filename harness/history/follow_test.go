package history

import (
	"slices"
	"testing"
	"time"

	"github.com/talchaos/talchaos/harness/clock"
)

// seen is a fold that keeps what it was given.
type seen struct {
	header  History
	entries []Entry
}

func (s *seen) Apply(e Entry) { s.entries = append(s.entries, e) }

// A follower's fold has been given exactly the history's entries, in the
// history's order, whenever it is read: also after an entry recorded late
// (a poll's answer stamped when the poll started) landed before others.
func TestFollowerFoldsTheHistoryInOrder(t *testing.T) {
	nodes := []Node{{Name: "cp1", Role: "controlplane", Address: "127.0.9.2"}}
	rec := NewRecorder(time.Now(), clock.New(60), nodes)

	rec.Log(10*time.Millisecond, "cp1", Log{Source: LogMachined, Text: "a"})

	var folds []*seen

	f := rec.Follow(func(h History) Fold {
		s := &seen{header: h}
		folds = append(folds, s)

		return s
	})

	check := func(step string, rebuilt bool) {
		t.Helper()

		before := len(folds)
		want := rec.History().Entries // not inside Read: recording waits for it

		f.Read(func(fold Fold) {
			s := fold.(*seen)
			if s.header.Scale != 60 || len(s.header.Nodes) != 1 || s.header.Entries != nil {
				t.Errorf("%s: the fold started from %+v, not the history's header", step, s.header)
			}

			if got := s.entries; !slices.EqualFunc(got, want, sameEntry) {
				t.Errorf("%s: folded %v, the history is %v", step, texts(got), texts(want))
			}
		})

		if (len(folds) > before) != rebuilt {
			t.Errorf("%s: fold made again: %v, want %v", step, len(folds) > before, rebuilt)
		}
	}

	check("first read", true)

	rec.Log(20*time.Millisecond, "cp1", Log{Source: LogMachined, Text: "b"})
	rec.Log(30*time.Millisecond, "cp1", Log{Source: LogMachined, Text: "c"})
	check("in order", false)

	rec.Log(15*time.Millisecond, "cp1", Log{Source: LogMachined, Text: "late"})
	check("late entry", true)

	rec.Observe(30*time.Millisecond, &NodeObservation{Name: "cp1", Address: "127.0.9.2", Mode: ModeMaintenance}, false)
	check("same time, after", false)

	if got := texts(rec.History().Entries); !slices.Equal(got, []string{"a", "late", "b", "c", "maintenance"}) {
		t.Errorf("history order %v", got)
	}
}

func sameEntry(a, b Entry) bool { return a.WallMs == b.WallMs && text(a) == text(b) }

func text(e Entry) string {
	switch {
	case e.Log != nil:
		return e.Log.Text
	case e.Observed != nil:
		return e.Observed.Mode
	}

	return "?"
}

func texts(es []Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = text(e)
	}

	return out
}

// A closed recorder keeps its history as it was: what arrives after the
// verdict is drawn (a log line still streaming in) is neither in the history
// the report holds nor in a fold, so a rejudge reads what the verdict read.
func TestCloseEndsTheHistory(t *testing.T) {
	rec := NewRecorder(time.Now(), clock.New(60), []Node{{Name: "cp1", Role: "controlplane", Address: "127.0.9.2"}})
	f := rec.Follow(func(History) Fold { return &seen{} })

	rec.Log(10*time.Millisecond, "cp1", Log{Source: LogEtcd, Text: "slow fdatasync"})
	rec.Close()
	rec.Log(20*time.Millisecond, "cp1", Log{Source: LogEtcd, Text: "slow fdatasync"})
	rec.Observe(30*time.Millisecond, &NodeObservation{Name: "cp1", Address: "127.0.9.2", Mode: ModeMaintenance}, true)
	rec.Step("cp1", "apply")

	if got := texts(rec.History().Entries); !slices.Equal(got, []string{"slow fdatasync"}) {
		t.Errorf("history after Close: %v, want only the line recorded before", got)
	}

	f.Read(func(fold Fold) {
		if got := len(fold.(*seen).entries); got != 1 {
			t.Errorf("the fold was given %d entries, want 1", got)
		}
	})

	var nilRec *Recorder
	nilRec.Close() // a run outside a scenario has none
}
