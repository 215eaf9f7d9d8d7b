// Package qemu drives power and NIC faults on a QEMU VM through its QMP socket
// (QEMU Machine Protocol, started with e.g.
// -qmp unix:/run/vm1.qmp,server=on,wait=off).
//
// # Power off and on
//
// QMP can stop a VM but cannot start a QEMU process that has gone: after
// "quit" the process exits and nothing is left to talk to, and a QMP-only
// provider has no way to launch it again. "system_powerdown" only asks the
// guest (ACPI button), which may ignore it, and a guest that does power off
// makes QEMU exit unless it runs with -no-shutdown. So PowerOff keeps the
// process: it halts the vCPUs ("stop") and takes the NIC link down, which to
// the rest of the cluster looks like a node whose power was cut. PowerOn
// resets the machine ("system_reset", a cold boot as after power returns),
// brings the link up and resumes the vCPUs ("cont"). Quit is there to tear a
// VM down for good. Lab VMs should run with -no-shutdown so that a guest
// which powers itself off stays in the "shutdown" state, from which PowerOn
// (reset first, then cont) boots it again; QMP refuses "cont" in that state
// until a reset.
//
// # Protocol
//
// The package speaks QMP itself rather than through
// github.com/digitalocean/go-qemu/qmp, whose SocketMonitor turns an error
// reply into errors.New(desc) (the class is lost), takes no context and reads
// the greeting without any timeout (QEMU serves one client at a time, so a
// second client waits forever), and can only be interrupted by Disconnect,
// which races with a Connect still in progress. Here every command carries an
// "id" and its reply is matched on it: events ({"event": ...}, sent by QEMU at
// any time, e.g. STOP or RESUME just before the reply to stop or cont) are
// skipped, and the late reply of a command whose caller gave up is dropped
// instead of being taken for the next command's. Operations on one Machine
// are also serialised, so the steps of PowerOff and PowerOn never interleave
// with another operation.
package qemu

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// DefaultTimeout bounds an operation whose context has no deadline (heal
// functions run with context.WithoutCancel), connection included.
const DefaultTimeout = 10 * time.Second

// DefaultNIC is the netdev id used by SetLink when Open is given none.
const DefaultNIC = "net0"

// ErrClosed is returned by operations on a Machine after Close or Quit.
var ErrClosed = errors.New("qemu: machine closed")

// Machine is one QEMU VM reached through its QMP socket. Its methods are safe
// for concurrent use and run one at a time. If the QMP connection ends (for
// example QEMU was restarted), the next operation connects again.
type Machine struct {
	socket string
	nic    string

	ops chan struct{} // one operation at a time; acquired with a context

	mu     sync.Mutex
	c      *client
	closed bool
}

// Open connects to the QMP unix socket of a VM and negotiates capabilities.
// nic is the id that set_link acts on: the -netdev id (or the NIC device id);
// empty means DefaultNIC. ctx bounds the connection (DefaultTimeout if it has
// no deadline).
func Open(ctx context.Context, socket, nic string) (*Machine, error) {
	if nic == "" {
		nic = DefaultNIC
	}

	m := &Machine{socket: socket, nic: nic, ops: make(chan struct{}, 1)}

	err := m.do(ctx, func(context.Context, *client) error { return nil })
	if err != nil {
		return nil, err
	}

	return m, nil
}

// PowerOff halts the VM's vCPUs ("stop") and takes its NIC link down. The
// QEMU process stays, so PowerOn can bring the VM back (see the package doc).
func (m *Machine) PowerOff(ctx context.Context) error {
	return m.do(ctx, func(ctx context.Context, c *client) error {
		if err := c.run(ctx, "stop", nil, nil); err != nil {
			return err
		}

		return c.run(ctx, "set_link", m.linkArgs(false), nil)
	})
}

// PowerOn boots the VM from scratch: "system_reset", NIC link up, then "cont"
// so that the guest starts with its link already up. It also recovers a VM
// paused by Pause, or in the "shutdown" state after a guest power-off under
// -no-shutdown.
func (m *Machine) PowerOn(ctx context.Context) error {
	return m.do(ctx, func(ctx context.Context, c *client) error {
		if err := c.run(ctx, "system_reset", nil, nil); err != nil {
			return err
		}

		if err := c.run(ctx, "set_link", m.linkArgs(true), nil); err != nil {
			return err
		}

		return c.run(ctx, "cont", nil, nil)
	})
}

// Reset is a hard reset ("system_reset"). A paused VM stays halted (QEMU then
// reports "prelaunch") until Resume.
func (m *Machine) Reset(ctx context.Context) error {
	return m.command(ctx, "system_reset", nil)
}

// Pause halts the vCPUs ("stop"); the VM keeps its memory and devices.
func (m *Machine) Pause(ctx context.Context) error {
	return m.command(ctx, "stop", nil)
}

// Resume runs the vCPUs again ("cont").
func (m *Machine) Resume(ctx context.Context) error {
	return m.command(ctx, "cont", nil)
}

// SetLink sets the link of the Machine's NIC up or down ("set_link"). An
// unknown NIC fails with *Error of class DeviceNotFound.
func (m *Machine) SetLink(ctx context.Context, up bool) error {
	return m.command(ctx, "set_link", m.linkArgs(up))
}

// Status reports the VM's run state ("query-status"): running is true only
// in state "running"; status is QEMU's RunState, e.g. "running", "paused",
// "prelaunch" (started with -S, or reset while paused), "shutdown",
// "guest-panicked", "internal-error".
func (m *Machine) Status(ctx context.Context) (running bool, status string, err error) {
	var out struct {
		Running bool   `json:"running"`
		Status  string `json:"status"`
	}

	err = m.do(ctx, func(ctx context.Context, c *client) error {
		return c.run(ctx, "query-status", nil, &out)
	})

	return out.Running, out.Status, err
}

// Quit makes QEMU exit ("quit") and waits until it has closed the QMP
// connection (bounded by ctx). The Machine is closed afterwards; the VM cannot
// be powered on again through QMP.
func (m *Machine) Quit(ctx context.Context) error {
	return m.do(ctx, func(ctx context.Context, c *client) error {
		err := c.run(ctx, "quit", nil, nil)
		if err != nil && !errors.Is(err, errConnLost) {
			return err // QEMU may exit before its reply is read: that is success
		}

		select {
		case <-c.done:
		case <-ctx.Done():
			return fmt.Errorf("quit: QEMU did not close the QMP connection: %w", ctx.Err())
		}

		m.mu.Lock()
		m.closed = true
		m.c = nil
		m.mu.Unlock()

		return nil
	})
}

// Close closes the QMP connection; the VM is left as it is. An operation in
// progress fails. Close is idempotent.
func (m *Machine) Close() error {
	m.mu.Lock()
	c := m.c
	m.c = nil
	m.closed = true
	m.mu.Unlock()

	if c != nil {
		c.close()
	}

	return nil
}

func (m *Machine) linkArgs(up bool) any {
	return struct {
		Name string `json:"name"`
		Up   bool   `json:"up"`
	}{m.nic, up}
}

func (m *Machine) command(ctx context.Context, cmd string, args any) error {
	return m.do(ctx, func(ctx context.Context, c *client) error { return c.run(ctx, cmd, args, nil) })
}

// do runs one operation alone on the Machine, on a live connection (made
// again if the last one ended), bounded by ctx or DefaultTimeout.
func (m *Machine) do(ctx context.Context, op func(context.Context, *client) error) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc

		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}

	select {
	case m.ops <- struct{}{}:
		defer func() { <-m.ops }()
	case <-ctx.Done():
		return fmt.Errorf("qemu %s: waiting for another operation: %w", m.socket, ctx.Err())
	}

	c, err := m.client(ctx)
	if err != nil {
		return fmt.Errorf("qemu %s: %w", m.socket, err)
	}

	if err := op(ctx, c); err != nil {
		return fmt.Errorf("qemu %s: %w", m.socket, err)
	}

	return nil
}

// client returns the live connection, connecting if there is none. Only
// called with m.ops held, so at most one connection attempt runs at a time.
func (m *Machine) client(ctx context.Context) (*client, error) {
	m.mu.Lock()
	c, closed := m.c, m.closed
	m.mu.Unlock()

	if closed {
		return nil, ErrClosed
	}

	if c != nil && c.alive() {
		return c, nil
	}

	if c != nil {
		c.close() // ended: reap its reader
	}

	nc, err := dial(ctx, m.socket)
	if err != nil {
		return nil, err
	}

	m.mu.Lock()
	defer m.mu.Unlock()

	if m.closed {
		nc.close()

		return nil, ErrClosed
	}

	m.c = nc

	return nc, nil
}
