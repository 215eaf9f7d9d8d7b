// Package diskgate makes a directory's disk slow to sync, in this process:
// every fsync(2) and fdatasync(2) on a file under the directory (an etcd
// member's WAL, its snapshot database) waits a latency in the kernel before it
// runs, as on a disk whose flushes take that long. The caller's own code path
// is untouched: etcd calls fdatasync as always, the call blocks, and etcd
// measures and logs the time it took itself ("slow fdatasync").
//
// The gate is a seccomp filter with user notification (Linux 5.7+, for
// SECCOMP_FILTER_FLAG_TSYNC_ESRCH): every thread of the process (and every
// child it starts afterwards) asks this package before each fsync and
// fdatasync; a sync of a file under a slowed directory is answered after the
// latency, every other at once, and then runs (SECCOMP_USER_NOTIF_FLAG_CONTINUE).
// The filter is installed on first use and stays for the life of the process
// (a seccomp filter cannot be removed): the goroutine that answers it too. Where
// the process lacks CAP_SYS_ADMIN, installing it sets no_new_privs on the
// process, so programs it starts afterwards gain no privileges from setuid bits
// or file capabilities.
package diskgate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// seccompData, notif and notifResp are the kernel's struct seccomp_data,
// seccomp_notif and seccomp_notif_resp (linux/seccomp.h).
type seccompData struct {
	Nr                 int32
	Arch               uint32
	InstructionPointer uint64
	Args               [6]uint64
}

type notif struct {
	ID    uint64
	Pid   uint32
	Flags uint32
	Data  seccompData
}

type notifResp struct {
	ID    uint64
	Val   int64
	Error int32
	Flags uint32
}

// rule is one slowed directory.
type rule struct {
	dir      string
	latency  time.Duration
	released chan struct{}
}

var (
	mu      sync.Mutex
	rules   []*rule
	install sync.Once
	// listener is the filter's notification fd, once installed.
	listener   int
	installErr error
)

// auditArch is the AUDIT_ARCH of this build, or 0 where the gate is not built.
func auditArch() uint32 {
	switch runtime.GOARCH {
	case "amd64":
		return unix.AUDIT_ARCH_X86_64
	case "arm64":
		return unix.AUDIT_ARCH_AARCH64
	}

	return 0
}

// Available says why the gate cannot work in this process, or nil.
func Available() error {
	if auditArch() == 0 {
		return fmt.Errorf("slowing a disk's syncs needs Linux on amd64 or arm64, not %s/%s", runtime.GOOS, runtime.GOARCH)
	}

	mu.Lock()
	installed := listener > 0
	mu.Unlock()

	if installed {
		return nil
	}

	// SECCOMP_FILTER_FLAG_TSYNC_ESRCH, which lets a filter with a listener
	// go to every thread, came with Linux 5.7.
	var uts unix.Utsname
	if err := unix.Uname(&uts); err == nil {
		release := unix.ByteSliceToString(uts.Release[:])

		var major, minor int
		if _, err := fmt.Sscanf(release, "%d.%d", &major, &minor); err == nil && (major < 5 || major == 5 && minor < 7) {
			return fmt.Errorf("slowing a disk's syncs needs Linux 5.7 or later (seccomp user notification on every thread), not %s", release)
		}
	}

	action := uint32(unix.SECCOMP_RET_USER_NOTIF)

	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_ACTION_AVAIL, 0, uintptr(unsafe.Pointer(&action)))
	if errno != 0 {
		return fmt.Errorf("slowing a disk's syncs needs seccomp user notification (Linux 5.7+), which this kernel "+
			"or the sandbox around this process refuses: seccomp(SECCOMP_GET_ACTION_AVAIL, SECCOMP_RET_USER_NOTIF): %w", errno)
	}

	return nil
}

// Slow makes every fsync and fdatasync of a file under dir wait latency before
// it runs, until the returned release is called (which also lets every sync
// still waiting run at once).
func Slow(dir string, latency time.Duration) (release func(), err error) {
	if err := Available(); err != nil {
		return nil, err
	}

	if latency <= 0 {
		return nil, errors.New("diskgate: latency must be positive")
	}

	// The kernel names an open file by its resolved path.
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}

	// The directory may not exist yet (an etcd that has not started):
	// resolve its parent then.
	if resolved, err := filepath.EvalSymlinks(abs); err == nil {
		abs = resolved
	} else if parent, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		abs = filepath.Join(parent, filepath.Base(abs))
	}

	install.Do(func() { installErr = installFilter() })

	if installErr != nil {
		return nil, installErr
	}

	r := &rule{dir: filepath.Clean(abs), latency: latency, released: make(chan struct{})}

	mu.Lock()
	rules = append(rules, r)
	mu.Unlock()

	var once sync.Once

	return func() {
		once.Do(func() {
			mu.Lock()
			for i, x := range rules {
				if x == r {
					rules = append(rules[:i], rules[i+1:]...)

					break
				}
			}
			mu.Unlock()

			close(r.released)
		})
	}, nil
}

// installFilter installs the notifying filter on every thread of the process
// and starts the goroutine that answers it.
func installFilter() error {
	arch := auditArch()

	const (
		ldAbs  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeqK   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		retK   = unix.BPF_RET | unix.BPF_K
		offNr  = 0 // seccomp_data.nr
		offArc = 4 // seccomp_data.arch
	)

	prog := []unix.SockFilter{
		{Code: ldAbs, K: offArc},
		{Code: jeqK, Jt: 0, Jf: 4, K: arch},
		{Code: ldAbs, K: offNr},
		{Code: jeqK, Jt: 2, Jf: 0, K: unix.SYS_FDATASYNC},
		{Code: jeqK, Jt: 1, Jf: 0, K: unix.SYS_FSYNC},
		{Code: retK, K: unix.SECCOMP_RET_ALLOW},
		{Code: retK, K: unix.SECCOMP_RET_USER_NOTIF},
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}

	// no_new_privs and the filter are per thread until TSYNC copies them to
	// every thread: stay on this one.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	flags := uintptr(unix.SECCOMP_FILTER_FLAG_NEW_LISTENER | unix.SECCOMP_FILTER_FLAG_TSYNC | unix.SECCOMP_FILTER_FLAG_TSYNC_ESRCH)

	set := func() (uintptr, unix.Errno) {
		fd, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, uintptr(unsafe.Pointer(&fprog)))

		return fd, errno
	}

	// Once the answer is being worked on, only a fatal signal interrupts the
	// wait (Linux 5.19+): a signal would otherwise restart the sync and its
	// latency.
	flags |= unix.SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV

	fd, errno := set()
	if errno == unix.EINVAL {
		flags &^= unix.SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
		fd, errno = set()
	}

	if errno == unix.EACCES {
		// Without CAP_SYS_ADMIN a filter needs no_new_privs.
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("diskgate: prctl(PR_SET_NO_NEW_PRIVS): %w", err)
		}

		fd, errno = set()
	}

	runtime.KeepAlive(prog)

	if errno != 0 {
		return fmt.Errorf("slowing a disk's syncs needs a seccomp filter with user notification on every thread "+
			"(Linux 5.7+): seccomp(SECCOMP_SET_MODE_FILTER): %w", errno)
	}

	mu.Lock()
	listener = int(fd)
	mu.Unlock()

	go serve(int(fd))

	return nil
}

// serve answers the filter's notifications for the life of the process.
func serve(fd int) {
	for {
		var n notif

		_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_RECV, uintptr(unsafe.Pointer(&n)))

		switch errno {
		case 0:
		case unix.EINTR, unix.ENOENT:
			// interrupted, or the caller died before we read it
			continue
		default:
			// Nothing can answer the filter any more: a sync would wait
			// forever, so say so loudly.
			fmt.Fprintf(os.Stderr, "diskgate: reading seccomp notifications: %v\n", errno)

			return
		}

		r := match(n)
		if r == nil {
			answer(fd, n.ID)

			continue
		}

		go func(id uint64) {
			t := time.NewTimer(r.latency)
			defer t.Stop()

			select {
			case <-t.C:
			case <-r.released:
			}

			answer(fd, id)
		}(n.ID)
	}
}

// match is the rule whose directory holds the file being synced, or nil.
func match(n notif) *rule {
	if n.Pid == 0 {
		return nil // a task outside our pid namespace
	}

	mu.Lock()
	empty := len(rules) == 0
	mu.Unlock()

	if empty {
		return nil
	}

	path, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", n.Pid, int32(n.Data.Args[0]))) //nolint:gosec // fd is an int
	if err != nil {
		return nil
	}

	mu.Lock()
	defer mu.Unlock()

	for _, r := range rules {
		if path == r.dir || strings.HasPrefix(path, r.dir+"/") {
			return r
		}
	}

	return nil
}

// answer lets the waiting syscall run.
func answer(fd int, id uint64) {
	resp := notifResp{ID: id, Flags: unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE}

	// ENOENT: the caller died or was interrupted meanwhile (its syscall restarts and asks again).
	unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_SEND, uintptr(unsafe.Pointer(&resp))) //nolint:errcheck
}
