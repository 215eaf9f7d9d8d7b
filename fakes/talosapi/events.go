package talosapi

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/xid"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// eventCapacity is machined's history: NewEvents(1000, 10)
// (internal/app/machined/pkg/runtime/v1alpha1/v1alpha1_controller.go, v1.12.6).
const eventCapacity = 1000

// event is runtime.Event (internal/app/machined/pkg/runtime/events.go): an
// xid, whose time is the node's clock when it was published, the payload
// and the actor (the API call that started the sequence, or none).
type event struct {
	id      xid.ID
	payload proto.Message
	actorID string
}

// toMachineEvent is runtime.Event.ToMachineEvent: the payload as an Any whose
// type URL is "talos/runtime/<full name>" (NewEvent), empty for the hello event.
func (e event) toMachineEvent() (*machine.Event, error) {
	typeURL := ""
	if e.payload != nil {
		typeURL = "talos/runtime/" + string(e.payload.ProtoReflect().Descriptor().FullName())
	}

	value, err := proto.Marshal(e.payload)
	if err != nil {
		return nil, err
	}

	return &machine.Event{Data: &anypb.Any{TypeUrl: typeURL, Value: value}, Id: e.id.String(), ActorId: e.actorID}, nil
}

// EventLog is machined's event stream (runtime/v1alpha1/v1alpha1_events.go):
// in memory, the last 1000 events, started afresh by each boot. Sequences,
// phases and tasks, service states and the machine's status are published to
// it; MachineService/Events serves it, as `talosctl events`, `talosctl
// reboot`/`upgrade` (their progress and "machine ready") and operators'
// scripts read it.
//
// Hand-rolled: machined's own type lives in an internal package.
type EventLog struct {
	now func() time.Time

	mu      sync.Mutex
	events  []event
	dropped int // events evicted from the front; keeps watcher positions stable
	notify  chan struct{}
	// closed: the node is going down; watchers send what they have not
	// sent yet and end (Close). watching counts the watches running.
	closed   bool
	watching sync.WaitGroup
	open     int
}

// NewEventLog stamps events with now (the node's clock); nil is real time.
func NewEventLog(now func() time.Time) *EventLog {
	if now == nil {
		now = time.Now
	}

	return &EventLog{now: now, notify: make(chan struct{})}
}

// Publish appends one event on behalf of actorID ("" for none).
func (l *EventLog) Publish(payload proto.Message, actorID string) {
	l.mu.Lock()
	defer l.mu.Unlock()

	l.events = append(l.events, event{id: xid.NewWithTime(l.now()), payload: payload, actorID: actorID})

	if n := len(l.events) - eventCapacity; n > 0 {
		l.events = append([]event(nil), l.events[n:]...)
		l.dropped += n
	}

	close(l.notify)
	l.notify = make(chan struct{})
}

// Reset forgets the history, as a boot does, and opens the log again.
func (l *EventLog) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()

	l.dropped += len(l.events)
	l.events = nil
	l.closed = false
}

// Close ends every watch once it has sent what was published before, and
// waits for them at most flush (wall time): the node is going down cleanly,
// apid stopping last, so a client watching sees the sequence up to its
// stopAllServices task, then the stream ends. It reports whether a watch was
// open: the API must then stop gracefully, or the last messages are lost
// with the connection.
func (l *EventLog) Close(flush time.Duration) bool {
	l.mu.Lock()
	l.closed = true
	close(l.notify)
	l.notify = make(chan struct{})
	open := l.open
	l.mu.Unlock()

	if open == 0 {
		return false
	}

	done := make(chan struct{})

	go func() {
		defer close(done)

		l.watching.Wait()
	}()

	t := time.NewTimer(flush)
	defer t.Stop()

	select {
	case <-done:
	case <-t.C:
	}

	return true
}

// Payloads returns the payloads published since the last boot, oldest first.
func (l *EventLog) Payloads() []proto.Message {
	l.mu.Lock()
	defer l.mu.Unlock()

	out := make([]proto.Message, 0, len(l.events))
	for _, e := range l.events {
		out = append(out, e.payload)
	}

	return out
}

// watchOptions are runtime.WatchOptions; at most one of the tails is set.
type watchOptions struct {
	tailEvents   int
	tailID       xid.ID
	tailDuration time.Duration
	actorID      string
}

// start is the absolute position of the first past event a watcher gets
// (v1alpha1_events.go Watch): none by default, the last n (all when n is
// negative), those after an ID, or those not older than a duration.
func (l *EventLog) start(opts watchOptions) int {
	end := l.dropped + len(l.events)

	switch {
	case opts.tailEvents < 0:
		return l.dropped
	case opts.tailEvents > 0:
		return max(end-opts.tailEvents, l.dropped)
	case !opts.tailID.IsNil():
		for i, e := range l.events {
			if e.id.Compare(opts.tailID) > 0 {
				return l.dropped + i
			}
		}

		return end
	case opts.tailDuration > 0:
		since := l.now().Add(-opts.tailDuration)

		for i, e := range l.events {
			if !e.id.Time().Before(since) {
				return l.dropped + i
			}
		}

		return end
	}

	return end
}

// watch sends past events as opts ask, then every new one, until ctx ends
// or send fails; the actor filter applies to both.
func (l *EventLog) watch(ctx context.Context, opts watchOptions, send func(event) error) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()

		return nil
	}

	l.watching.Add(1)
	l.open++

	defer func() {
		l.mu.Lock()
		l.open--
		l.mu.Unlock()
		l.watching.Done()
	}()

	pos := l.start(opts)
	l.mu.Unlock()

	for {
		l.mu.Lock()
		idx := max(pos-l.dropped, 0)
		pending := append([]event(nil), l.events[min(idx, len(l.events)):]...)
		pos = l.dropped + len(l.events)
		wait, closed := l.notify, l.closed
		l.mu.Unlock()

		for _, e := range pending {
			if opts.actorID != "" && e.actorID != opts.actorID {
				continue
			}

			if err := send(e); err != nil {
				return err
			}
		}

		if closed {
			return nil
		}

		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wait:
		}
	}
}

// Events streams the node's events as machined's Events does
// (v1alpha1_server.go, v1.12.6): first an empty "hello" event carrying the
// requested actor ID, then the tail asked for, then new events until the
// client goes away or the node's API stops.
func (m *machineServer) Events(req *machine.EventsRequest, srv machine.MachineService_EventsServer) error {
	hello, err := event{actorID: req.WithActorId}.toMachineEvent()
	if err != nil {
		return err
	}

	if err = srv.Send(hello); err != nil {
		return err
	}

	opts := watchOptions{tailEvents: int(req.TailEvents), tailDuration: time.Duration(req.TailSeconds) * time.Second, actorID: req.WithActorId}

	if req.TailId != "" {
		if opts.tailID, err = xid.FromString(req.TailId); err != nil {
			return fmt.Errorf("error parsing tail_id: %w", err)
		}
	}

	// runtime.WithTail*, applied in this order: each refuses the ones before it.
	switch {
	case opts.tailEvents != 0 && !opts.tailID.IsNil():
		return errors.New("WithTailID can't be specified at the same time with WithTailEvents or WithTailDuration")
	case (opts.tailEvents != 0 || !opts.tailID.IsNil()) && opts.tailDuration != 0:
		return errors.New("WithTailDuration can't be specified at the same time with WithTailEvents or WithTailID")
	}

	log := m.backend().Events()
	if log == nil {
		<-srv.Context().Done()

		return srv.Context().Err()
	}

	return log.watch(srv.Context(), opts, func(e event) error {
		msg, err := e.toMachineEvent()
		if err != nil {
			return err
		}

		return srv.Send(msg)
	})
}
