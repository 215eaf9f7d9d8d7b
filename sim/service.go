package sim

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Service states as ServiceList reports them (machined's events.ServiceState).
const (
	stateInitialized = "Initialized"
	stateStarting    = "Starting"
	stateWaiting     = "Waiting"
	statePreparing   = "Preparing"
	stateRunning     = "Running"
	stateStopping    = "Stopping"
	stateFinished    = "Finished"
	stateFailed      = "Failed"
)

// maxServiceEvents is the length of machined's per-service event history.
const maxServiceEvents = 64

// service is one machined service runner as the API shows it: a state, the last
// events and a health status. Behaviour lives in the code that drives it.
type service struct {
	id   string
	logf func(format string, args ...any)
	// onChange is called (without the lock) after every state or health change.
	onChange func()

	mu      sync.Mutex
	state   string
	events  []*machine.ServiceEvent
	healthy *bool
	lastMsg string
	lastChg time.Time
}

func newService(id string, logf func(string, ...any), onChange func()) *service {
	return &service{id: id, logf: logf, onChange: onChange, state: stateInitialized}
}

// update records a state transition (ServiceRunner.UpdateState).
func (s *service) update(state, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)

	s.mu.Lock()
	s.state = state
	s.push(msg, state)

	// A service that is not running is not healthy; machined suppresses the
	// health event in that case.
	if state != stateRunning && s.healthy != nil && *s.healthy {
		f := false
		s.healthy, s.lastMsg, s.lastChg = &f, "service not running", time.Now()
	}
	s.mu.Unlock()

	s.logf("service[%s](%s): %s", s.id, state, msg)
	s.onChange()
}

func (s *service) push(msg, state string) {
	s.events = append(s.events, &machine.ServiceEvent{Msg: msg, State: state, Ts: timestamppb.Now()})
	if len(s.events) > maxServiceEvents {
		s.events = s.events[len(s.events)-maxServiceEvents:]
	}
}

// initHealth is health.State.Init, run as the health checks start
// (internal/app/machined/pkg/system/health/status.go): not known yet, with
// the message "Unknown".
func (s *service) initHealth() {
	s.mu.Lock()
	s.healthy, s.lastMsg, s.lastChg = nil, "Unknown", time.Now()
	s.mu.Unlock()
}

// setHealth records a health check result; an event is emitted only when the
// health flips and the service is running (health.State.Update, healthUpdate).
func (s *service) setHealth(healthy bool, message string) {
	s.mu.Lock()

	flipped := s.healthy == nil || *s.healthy != healthy
	if flipped {
		s.healthy, s.lastChg = &healthy, time.Now()
	}

	s.lastMsg = message

	if !flipped || s.state != stateRunning {
		s.mu.Unlock()

		if flipped {
			s.onChange()
		}

		return
	}

	msg := "Health check successful"
	if !healthy {
		msg = "Health check failed: " + message
	}

	s.push(msg, s.state)
	state := s.state
	s.mu.Unlock()

	s.logf("service[%s](%s): %s", s.id, state, msg)
	s.onChange()
}

// status returns the state and whether the service is running and healthy.
func (s *service) status() (state string, healthy bool) {
	s.mu.Lock()
	defer s.mu.Unlock()

	return s.state, s.state == stateRunning && s.healthy != nil && *s.healthy
}

// healthUnknown reports whether no health check has answered yet.
func (s *service) healthUnknown() bool {
	s.mu.Lock()
	defer s.mu.Unlock()

	return s.healthy == nil
}

func (s *service) proto() *machine.ServiceInfo {
	s.mu.Lock()
	defer s.mu.Unlock()

	events := make([]*machine.ServiceEvent, len(s.events))
	copy(events, s.events)

	h := &machine.ServiceHealth{Unknown: s.healthy == nil, LastMessage: s.lastMsg}
	if s.healthy != nil {
		h.Healthy = *s.healthy
		h.LastChange = timestamppb.New(s.lastChg)
	}

	return &machine.ServiceInfo{
		Id:     s.id,
		State:  s.state,
		Events: &machine.ServiceEvents{Events: events},
		Health: h,
	}
}

// failedMessage is how machined turns a service's error into its Failed event:
// the error text with its first letter upper-cased.
func failedMessage(err error) string {
	msg := err.Error()
	if msg == "" {
		return msg
	}

	return strings.ToUpper(msg[:1]) + msg[1:]
}
