// Package netns runs talchaos again inside a network namespace of its own,
// where a simulated cluster can take the addresses its scenario gives
// (cluster.network: an operator's IPv6 or dual-stack subnets) on the loopback
// interface without touching the host's network. Adding fd00:101::11 to the
// host's loopback would take that address from a real node on a network the
// operator may well be on; inside a namespace nothing outside sees it.
//
// The namespace is made with a user namespace when talchaos does not run as
// root, so no privilege is needed where the kernel allows unprivileged user
// namespaces; the process inside is root there and may configure its own
// interfaces. The whole run goes in (the engine, every node, the exec
// orchestrator's command), because etcd dials its peers from goroutines of
// its own: a process can only reach the namespace's addresses when it is in
// it. A run's clusters then take turns for addresses they share (see the
// sim's address claims), and the host's network (the module proxy, Docker's
// bridges) is out of reach from inside: the container target never goes in.
//
// Hand-rolled on the syscall package's clone flags: the namespace lives
// exactly as long as the re-executed process, with nothing to mount or clean
// up, which no library wraps more simply.
package netns

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/talchaos/talchaos/harness/childproc"
)

// EnvInside marks the re-executed process (and everything it starts) as
// inside its own network namespace: "net", or "user" when it is in a user
// namespace too.
const EnvInside = "TALCHAOS_NETNS"

// Inside reports whether this process runs in the network namespace a
// talchaos process above it made.
func Inside() bool { return os.Getenv(EnvInside) != "" }

// UserNS reports whether that namespace came with a user namespace (talchaos
// was not run as root): entering it takes entering both.
func UserNS() bool { return os.Getenv(EnvInside) == "user" }

// ErrUnavailable wraps why a namespace could not be made.
var ErrUnavailable = errors.New("a private network namespace is not available")

// Reexec runs this program again with args in a new network namespace (and
// a user namespace when not root), its stdio the given files, and returns
// its exit code. Interrupting ctx passes the signal on (the child stops its
// nodes and writes its report, as a run does); the child is killed if this
// process dies. An error wrapping ErrUnavailable means the namespace could
// not be made and nothing ran.
func Reexec(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, signalOf func(context.Context) os.Signal) (int, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, fmt.Errorf("%w: finding talchaos's own binary: %w", ErrUnavailable, err)
	}

	cmd := exec.Command(exe, args...) //nolint:gosec // ourselves, with our own arguments
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	cmd.SysProcAttr = Attr()

	mark := "net"
	if cmd.SysProcAttr.Cloneflags&syscall.CLONE_NEWUSER != 0 {
		mark = "user"
	}

	cmd.Env = append(os.Environ(), EnvInside+"="+mark)

	start, waited := make(chan error, 1), make(chan error, 1)

	// Pdeathsig fires when the forking thread ends: it lives until the wait.
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()

		if err := cmd.Start(); err != nil {
			start <- err

			return
		}

		start <- nil
		waited <- cmd.Wait()
	}()

	if err := <-start; err != nil {
		return 0, fmt.Errorf("%w: %s", ErrUnavailable, explain(err))
	}

	select {
	case err = <-waited:
	case <-ctx.Done():
		sig := os.Signal(syscall.SIGTERM)
		if signalOf != nil {
			if s := signalOf(ctx); s != nil {
				sig = s
			}
		}

		cmd.Process.Signal(sig) //nolint:errcheck // it may have ended already

		err = <-waited
	}

	if code, ok := childproc.ExitCode(err); ok {
		return code, nil
	}

	if err != nil {
		return 0, err
	}

	return 0, nil
}

// Attr is how a child is started in a new network namespace: with a user
// namespace mapping the caller to root in it unless the caller is root
// already, and killed when its parent dies.
func Attr() *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}

	if os.Geteuid() != 0 {
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
		attr.GidMappingsEnableSetgroups = false
	}

	return attr
}

// explain says what a failed clone most likely lacks.
func explain(err error) string {
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EINVAL) {
		if os.Geteuid() == 0 {
			return fmt.Sprintf("creating a network namespace: %v (is talchaos confined by a seccomp or AppArmor profile?)", err)
		}

		return fmt.Sprintf("creating a user and network namespace as an unprivileged user: %v "+
			"(unprivileged user namespaces may be off: sysctl kernel.unprivileged_userns_clone, user.max_user_namespaces, "+
			"or AppArmor's kernel.apparmor_restrict_unprivileged_userns; run talchaos as root instead)", err)
	}

	return err.Error()
}

// Setup brings up the namespace's loopback interface (a new namespace's is
// down, without even 127.0.0.1). Only inside.
func Setup() error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("loopback interface: %w", err)
	}

	if err := netlink.LinkSetUp(lo); err != nil {
		return fmt.Errorf("bringing up the loopback interface: %w", err)
	}

	return nil
}

// AddAddress puts addr (as a host address: /32 or /128) on the loopback
// interface, where every node of the run reaches it; IPv6 without duplicate
// address detection, so it is usable at once. Only inside.
func AddAddress(addr netip.Addr) error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("loopback interface: %w", err)
	}

	a := &netlink.Addr{IPNet: netlinkNet(netip.PrefixFrom(addr, addr.BitLen()))}
	if addr.Is6() {
		a.Flags = unix.IFA_F_NODAD
	}

	if err := netlink.AddrReplace(lo, a); err != nil {
		return fmt.Errorf("adding %s to the loopback interface: %w", addr, err)
	}

	// The kernel installs the address's local route a moment later (at
	// once for IPv4, from a work queue for IPv6 on a freshly raised
	// interface): until then a dial gets "network is unreachable".
	deadline := time.Now().Add(5 * time.Second)

	for {
		routes, err := netlink.RouteGet(addr.AsSlice())
		if err == nil && len(routes) > 0 && routes[0].Type == unix.RTN_LOCAL {
			return nil
		}

		if time.Now().After(deadline) {
			return fmt.Errorf("adding %s to the loopback interface: no local route to it after 5 s (%v)", addr, err)
		}

		time.Sleep(10 * time.Millisecond)
	}
}

// RemoveAddress takes addr off the loopback interface; one not there is not
// an error.
func RemoveAddress(addr netip.Addr) error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("loopback interface: %w", err)
	}

	err = netlink.AddrDel(lo, &netlink.Addr{IPNet: netlinkNet(netip.PrefixFrom(addr, addr.BitLen()))})
	if err != nil && !errors.Is(err, syscall.EADDRNOTAVAIL) {
		return fmt.Errorf("removing %s from the loopback interface: %w", addr, err)
	}

	return nil
}

// AddUnreachable routes addr nowhere: a connection to it fails as one to an
// address no router knows does ("connect: no route to host"). For a node's
// address the others cannot reach (one not routed between nodes).
func AddUnreachable(addr netip.Addr) error {
	r := &netlink.Route{Dst: netlinkNet(netip.PrefixFrom(addr, addr.BitLen())), Type: unix.RTN_UNREACHABLE}
	if err := netlink.RouteReplace(r); err != nil {
		return fmt.Errorf("routing %s nowhere: %w", addr, err)
	}

	return nil
}

// RemoveUnreachable removes AddUnreachable's route; none is not an error.
func RemoveUnreachable(addr netip.Addr) error {
	r := &netlink.Route{Dst: netlinkNet(netip.PrefixFrom(addr, addr.BitLen())), Type: unix.RTN_UNREACHABLE}
	if err := netlink.RouteDel(r); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("removing the route of %s: %w", addr, err)
	}

	return nil
}

func netlinkNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// Main runs run (a test binary's m.Run) inside a network namespace of its
// own, for tests whose clusters take their scenario's addresses: outside
// one, it runs this binary again inside with the same arguments and returns
// that exit code; inside, it brings the namespace's loopback up and runs.
// Where no namespace can be made, it says so and runs here: such clusters
// then refuse to start, saying why.
func Main(run func() int) int {
	if Inside() {
		if err := Setup(); err != nil {
			fmt.Fprintln(os.Stderr, "netns:", err)

			return 1
		}

		return run()
	}

	code, err := Reexec(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr, nil)
	if errors.Is(err, ErrUnavailable) {
		fmt.Fprintf(os.Stderr, "netns: %v; running the tests outside one\n", err)

		return run()
	}

	if err != nil {
		fmt.Fprintln(os.Stderr, "netns:", err)

		return 1
	}

	return code
}

// AddRoute routes addr (a host address) through via, a neighbour on a
// directly connected network.
func AddRoute(addr, via netip.Addr) error {
	r := &netlink.Route{Dst: netlinkNet(netip.PrefixFrom(addr, addr.BitLen())), Gw: via.AsSlice()}
	if err := netlink.RouteReplace(r); err != nil {
		return fmt.Errorf("routing %s through %s: %w", addr, via, err)
	}

	return nil
}
