package container

// The node image is built FROM scratch: it holds nothing but what the build
// context puts in it. A static talchaos (CGO_ENABLED=0, as make build makes
// it) runs there alone. A binary from `go install` or `go build` on a
// machine with a C compiler is dynamically linked (cgo is on by default
// there, and the net and os/user packages use it): the kernel starts its ELF
// interpreter (PT_INTERP), which loads the shared libraries the binary and
// those libraries name (DT_NEEDED). Such a binary is carried with that
// interpreter and those libraries, copied from the host to the same absolute
// paths in the image, with the symlinks on the way to them: the image's loader
// finds the very files the host's loader would.
//
// Why this and not another way: rebuilding talchaos static at run time needs
// the Go toolchain and the sources, which an installed binary does not have;
// a base image with a libc cannot be pulled (no registry is reachable); and
// the host's loader and libc are the ones the binary was linked against and
// runs with there. The libraries are found by reading the ELF files
// (debug/elf) and searching the directories the loader searches, as it
// searches them: nothing is run, since the node binary may be one that
// TALCHAOS_NODE_BINARY names. A library that cannot be found refuses the
// run, naming it; a static binary is carried alone, as before.

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/talchaos/talchaos/sim/kubecp"
)

// buildContext is the node image's build context: the Dockerfile, the talchaos
// binary and, for a dynamically linked one, the files its loader needs.
type buildContext struct {
	archive []byte
	// env is the containers' environment: LD_LIBRARY_PATH naming the
	// directories the libraries were found in, for a dynamically linked
	// binary (the image has no ld.so.cache, and $ORIGIN is / there); empty
	// for a static one.
	env map[string]string
}

// nodeContext reads the node binary and what it needs into the image's build
// context, with the Kubernetes binaries in /kube when kube names them
// (cluster.kubernetes: the node runs its control plane and kubelet inside).
func nodeContext(bin string, kube kubecp.Binaries) (*buildContext, error) {
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, fmt.Errorf("node binary: %w", err)
	}

	// The Kubernetes binaries are large (some 180 MB): copied from their
	// files into an archive sized once, never held twice.
	var kubeFiles []kubeFile

	for _, p := range []struct{ path, name string }{{kube.Hyperkube, kubecp.HyperkubeBinary}, {kube.Kwok, kubecp.KwokBinary}} {
		if p.path == "" {
			continue
		}

		fi, err := os.Stat(p.path)
		if err != nil {
			return nil, fmt.Errorf("kubernetes binary: %w", err)
		}

		kubeFiles = append(kubeFiles, kubeFile{p.path, p.name, fi.Size()})
	}

	deps, err := runtimeDeps(bin)
	if err != nil {
		return nil, err
	}

	var (
		archive bytes.Buffer
		tw      = tar.NewWriter(&archive)
		df      = dockerfile
		bc      = &buildContext{}
		tree    imageTree
	)

	size := int64(len(data)) + 64<<10
	for _, f := range kubeFiles {
		size += f.size + 1<<10
	}

	archive.Grow(int(size))

	if len(kubeFiles) > 0 {
		df = append(slices.Clip(df), []byte(kubeDockerfile)...)
	}

	if deps != nil {
		df = append(slices.Clip(df), []byte(dynamicDockerfile)...)

		if tree, err = deps.tree(); err != nil {
			return nil, fmt.Errorf("node binary %s: %w", bin, err)
		}

		dirs := deps.dirs()
		if i := slices.IndexFunc(dirs, func(d string) bool { return strings.ContainsAny(d, ":;") }); i >= 0 {
			return nil, fmt.Errorf("node binary %s: its libraries are in %q, which LD_LIBRARY_PATH cannot name (: or ;); "+
				"build talchaos with CGO_ENABLED=0 (make build does) or set TALCHAOS_NODE_BINARY to a static one", bin, dirs[i])
		}

		bc.env = map[string]string{"LD_LIBRARY_PATH": strings.Join(dirs, ":")}
	}

	for _, f := range []struct {
		name string
		mode int64
		data []byte
	}{{"Dockerfile", 0o644, df}, {"talchaos", 0o755, data}} {
		if err := writeFile(tw, f.name, f.mode, f.data); err != nil {
			return nil, err
		}
	}

	if len(kubeFiles) > 0 {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "kube/", Mode: 0o755}); err != nil {
			return nil, err
		}

		for _, f := range kubeFiles {
			if err := f.write(tw); err != nil {
				return nil, fmt.Errorf("kubernetes binary: %w", err)
			}
		}
	}

	if deps != nil {
		if err := tree.write(tw, "rootfs"); err != nil {
			return nil, fmt.Errorf("node binary %s: %w", bin, err)
		}
	}

	if err := tw.Close(); err != nil {
		return nil, err
	}

	bc.archive = archive.Bytes()

	return bc, nil
}

// kubeFile is a Kubernetes binary for the image's /kube.
type kubeFile struct {
	path, name string
	size       int64
}

// write copies it into the archive, the file as opened (make kube replaces
// a binary by renaming a new one over it; size was only the archive's hint).
func (f kubeFile) write(tw *tar.Writer) error {
	r, err := os.Open(f.path)
	if err != nil {
		return err
	}
	defer r.Close() //nolint:errcheck // read only

	fi, err := r.Stat()
	if err != nil {
		return err
	}

	if err := tw.WriteHeader(&tar.Header{Name: "kube/" + f.name, Mode: 0o755, Size: fi.Size()}); err != nil {
		return err
	}

	_, err = io.CopyN(tw, r, fi.Size())

	return err
}

// kubeDir is where the node image has the Kubernetes binaries.
const kubeDir = "/kube"

// kubeDockerfile follows the Dockerfile when the cluster runs Kubernetes.
const kubeDockerfile = `
# cluster.kubernetes: the control plane (hyperkube) and the simulated kubelet
# (kwok), static binaries the node runs as the sim does (talchaos node --kube-dir).
COPY kube/ ` + kubeDir + `/
`

// dynamicDockerfile follows the Dockerfile for a dynamically linked binary.
const dynamicDockerfile = `
# talchaos is dynamically linked (cgo): its ELF interpreter and shared
# libraries, at their paths on the host, with the symlinks leading to them.
COPY rootfs/ /
`

func writeFile(tw *tar.Writer, name string, mode int64, data []byte) error {
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(data))}); err != nil {
		return err
	}

	_, err := tw.Write(data)

	return err
}

// dynDeps is what a dynamically linked binary needs from the host to start.
type dynDeps struct {
	interp string // PT_INTERP, an absolute path
	// libs are the DT_NEEDED libraries, the binary's and theirs, breadth
	// first as the loader loads them, each at the path the loader opens.
	libs []string
}

// dirs are the directories the libraries were found in, each once.
func (d *dynDeps) dirs() []string {
	var out []string

	for _, l := range d.libs {
		if dir := filepath.Dir(l); !slices.Contains(out, dir) {
			out = append(out, dir)
		}
	}

	return out
}

// elfObject is what the loader reads of one ELF file.
type elfObject struct {
	path           string
	class          elf.Class
	machine        elf.Machine
	interp         string
	needed         []string
	soname         string
	rpath, runpath []string // $ORIGIN expanded
	hasRunpath     bool
	parent         *elfObject // the object whose DT_NEEDED named it; nil for the binary
}

// readELF reads the object at path: the binary itself when executable,
// else a library.
func readELF(path string, executable bool) (*elfObject, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close() //nolint:errcheck

	o := &elfObject{path: path, class: f.Class, machine: f.Machine}

	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}

		b := make([]byte, p.Filesz)
		if _, err := p.ReadAt(b, 0); err != nil {
			return nil, fmt.Errorf("reading its interpreter: %w", err)
		}

		o.interp = string(bytes.TrimRight(b, "\x00"))
	}

	if o.needed, err = f.DynString(elf.DT_NEEDED); err != nil {
		return nil, err
	}

	if sonames, err := f.DynString(elf.DT_SONAME); err == nil && len(sonames) > 0 {
		o.soname = sonames[0]
	}

	origin := filepath.Dir(path)
	if real, err := filepath.EvalSymlinks(path); err == nil && executable {
		origin = filepath.Dir(real) // the executable's $ORIGIN is where it really is
	}

	rpath, err := f.DynString(elf.DT_RPATH)
	if err != nil {
		return nil, err
	}

	runpath, err := f.DynString(elf.DT_RUNPATH)
	if err != nil {
		return nil, err
	}

	o.rpath, o.runpath, o.hasRunpath = searchPath(rpath, origin), searchPath(runpath, origin), len(runpath) > 0

	return o, nil
}

// searchPath splits DT_RPATH or DT_RUNPATH into directories, $ORIGIN
// replaced by the object's directory. Entries with other tokens ($LIB,
// $PLATFORM) or relative ones are left out: no loader of ours resolves them.
func searchPath(values []string, origin string) []string {
	var out []string

	for _, v := range values {
		for _, dir := range strings.Split(v, ":") {
			if strings.Contains(strings.NewReplacer("${ORIGIN}", "", "$ORIGIN", "").Replace(dir), "$") {
				continue
			}

			if dir = strings.NewReplacer("${ORIGIN}", origin, "$ORIGIN", origin).Replace(dir); filepath.IsAbs(dir) {
				out = append(out, filepath.Clean(dir))
			}
		}
	}

	return out
}

// runtimeDeps reads what the binary at path needs to start: nil for a static
// binary (no PT_INTERP), else its interpreter and every shared library,
// found as the loader finds them: in the requesting object's DT_RPATH and its
// loaders' (when it has no DT_RUNPATH), the host's LD_LIBRARY_PATH, its
// DT_RUNPATH, the directories of /etc/ld.so.conf (what ld.so.cache lists), and
// the loader's own default directories; each must be an ELF file of the
// binary's class and machine. (glibc's hwcaps subdirectories are not searched:
// the plain library they stand beside runs on the same machine.)
func runtimeDeps(path string) (*dynDeps, error) {
	exe, err := readELF(path, true)
	if err != nil {
		return nil, fmt.Errorf("node binary %s: %w", path, err)
	}

	if exe.interp == "" {
		return nil, nil //nolint:nilnil // static: nothing to carry
	}

	if !filepath.IsAbs(exe.interp) {
		return nil, fmt.Errorf("node binary %s: its ELF interpreter %q is not an absolute path", path, exe.interp)
	}

	if _, err := os.Stat(exe.interp); err != nil {
		return nil, fmt.Errorf("node binary %s is dynamically linked and its ELF interpreter is missing here: %w; "+
			"build talchaos with CGO_ENABLED=0 (make build does) or set TALCHAOS_NODE_BINARY to a static one", path, err)
	}

	s := &libSearch{
		exe:      exe,
		ldPath:   filepath.SplitList(os.Getenv("LD_LIBRARY_PATH")),
		system:   systemDirs(exe),
		loaded:   map[string]bool{filepath.Base(exe.interp): true},
		objects:  map[string]*elfObject{},
		visiting: []*elfObject{exe},
	}

	if interp, err := readELF(exe.interp, false); err == nil && interp.soname != "" {
		s.loaded[interp.soname] = true // libc names the loader; it is loaded already
	}

	deps := &dynDeps{interp: exe.interp}

	for len(s.visiting) > 0 {
		o := s.visiting[0]
		s.visiting = s.visiting[1:]

		for _, name := range o.needed {
			if s.loaded[name] {
				continue
			}

			s.loaded[name] = true

			lib, err := s.find(name, o)
			if err != nil {
				return nil, fmt.Errorf("node binary %s is dynamically linked (cgo) and needs %s (named by %s), %w; "+
					"install it, or build talchaos with CGO_ENABLED=0 (make build does), or set TALCHAOS_NODE_BINARY to a static one",
					path, name, o.path, err)
			}

			if lib.soname != "" {
				s.loaded[lib.soname] = true
			}

			deps.libs = append(deps.libs, lib.path)
			s.visiting = append(s.visiting, lib)
		}
	}

	return deps, nil
}

// libSearch is one binary's library resolution.
type libSearch struct {
	exe      *elfObject
	ldPath   []string // the host's LD_LIBRARY_PATH
	system   []string // ld.so.conf's directories, then the loader's defaults
	loaded   map[string]bool
	objects  map[string]*elfObject
	visiting []*elfObject
}

// find is where the loader would find the library name that o needs.
func (s *libSearch) find(name string, o *elfObject) (*elfObject, error) {
	if strings.Contains(name, "/") {
		if !filepath.IsAbs(name) {
			return nil, errors.New("a relative path")
		}

		return s.open(name)
	}

	var dirs []string

	if !o.hasRunpath {
		for l := o; l != nil; l = l.parent {
			if !l.hasRunpath {
				dirs = append(dirs, l.rpath...)
			}
		}
	}

	dirs = append(dirs, s.ldPath...)
	dirs = append(dirs, o.runpath...)
	dirs = append(dirs, s.system...)

	var tried []string

	for _, dir := range dirs {
		if !filepath.IsAbs(dir) || slices.Contains(tried, dir) {
			continue
		}

		tried = append(tried, dir)

		lib, err := s.open(filepath.Join(dir, name))
		if err == nil {
			lib.parent = o

			return lib, nil
		}
	}

	return nil, fmt.Errorf("which is not in %s", strings.Join(tried, ", "))
}

// open reads the library at path if it is an ELF file of the binary's class
// and machine.
func (s *libSearch) open(path string) (*elfObject, error) {
	if o, ok := s.objects[path]; ok {
		return o, nil
	}

	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}

	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}

	o, err := readELF(path, false)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}

	if o.class != s.exe.class || o.machine != s.exe.machine {
		return nil, fmt.Errorf("%s is %s %s, not %s %s", path, o.class, o.machine, s.exe.class, s.exe.machine)
	}

	s.objects[path] = o

	return o, nil
}

// multiarch is Debian's directory name for each machine's libraries.
var multiarch = map[elf.Machine]string{
	elf.EM_X86_64: "x86_64-linux-gnu", elf.EM_AARCH64: "aarch64-linux-gnu", elf.EM_386: "i386-linux-gnu",
	elf.EM_ARM: "arm-linux-gnueabihf", elf.EM_RISCV: "riscv64-linux-gnu", elf.EM_PPC64: "powerpc64le-linux-gnu",
	elf.EM_S390: "s390x-linux-gnu", elf.EM_LOONGARCH: "loongarch64-linux-gnu",
}

// systemDirs are the directories the loader searches after LD_LIBRARY_PATH
// and DT_RUNPATH: those /etc/ld.so.conf lists (glibc's ld.so.cache is built
// from them), musl's /etc/ld-musl-ARCH.path, and the defaults built into
// glibc (Debian's multiarch ones, then lib64 and lib) and musl.
func systemDirs(exe *elfObject) []string {
	dirs := ldSoConf("/etc/ld.so.conf", 0)

	if base := filepath.Base(exe.interp); strings.HasPrefix(base, "ld-musl-") {
		arch := strings.TrimSuffix(strings.TrimPrefix(base, "ld-musl-"), ".so.1")
		if data, err := os.ReadFile("/etc/ld-musl-" + arch + ".path"); err == nil {
			dirs = append(dirs, strings.FieldsFunc(string(data), func(r rune) bool { return r == ':' || r == '\n' })...)
		}
	}

	if ma, ok := multiarch[exe.machine]; ok {
		dirs = append(dirs, "/lib/"+ma, "/usr/lib/"+ma)
	}

	if exe.class == elf.ELFCLASS64 {
		dirs = append(dirs, "/lib64", "/usr/lib64")
	}

	return append(dirs, "/lib", "/usr/local/lib", "/usr/lib")
}

// ldSoConf reads the directories an ld.so.conf lists, following its
// includes.
func ldSoConf(path string, depth int) []string {
	data, err := os.ReadFile(path)
	if err != nil || depth > 8 {
		return nil
	}

	var dirs []string

	for line := range strings.Lines(string(data)) {
		line, _, _ = strings.Cut(line, "#")

		fields := strings.Fields(line)
		if len(fields) == 0 || fields[0] == "hwcap" {
			continue
		}

		if fields[0] == "include" {
			for _, pattern := range fields[1:] {
				if !filepath.IsAbs(pattern) {
					pattern = filepath.Join(filepath.Dir(path), pattern)
				}

				matches, _ := filepath.Glob(pattern) //nolint:errcheck // a bad pattern includes nothing
				for _, m := range matches {
					dirs = append(dirs, ldSoConf(m, depth+1)...)
				}
			}

			continue
		}

		for _, dir := range fields {
			if dir, _, _ = strings.Cut(dir, "="); filepath.IsAbs(dir) {
				dirs = append(dirs, filepath.Clean(dir))
			}
		}
	}

	return dirs
}

// imageTree is the part of the host's file system the image carries: each
// path as it is on the host (a directory, a symlink with its target, a
// regular file), every parent a real directory.
type imageTree map[string]treeEntry

type treeEntry struct {
	mode fs.FileMode // fs.ModeDir, fs.ModeSymlink or a regular file's permissions
	link string      // a symlink's target, as written on the host
}

// tree is the interpreter and the libraries, with every symlink on the way to
// them, so that each resolves in the image as it does on the host.
func (d *dynDeps) tree() (imageTree, error) {
	t := imageTree{}

	for _, p := range append([]string{d.interp}, d.libs...) {
		if err := t.add(p); err != nil {
			return nil, err
		}
	}

	return t, nil
}

// add puts into the tree what resolving the absolute path p goes through on
// the host, one component at a time as the kernel does: the symlinks met,
// the real directories and the regular file at the end.
func (t imageTree) add(p string) error {
	rest := splitPath(p)
	dir := "/"

	for hops := 0; len(rest) > 0; {
		name := rest[0]
		rest = rest[1:]

		if name == ".." {
			dir = filepath.Dir(dir)

			continue
		}

		cur := filepath.Join(dir, name)

		fi, err := os.Lstat(cur)
		if err != nil {
			return err
		}

		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			if hops++; hops > 40 {
				return fmt.Errorf("%s: too many levels of symbolic links", p)
			}

			target, err := os.Readlink(cur)
			if err != nil {
				return err
			}

			t[cur] = treeEntry{mode: fs.ModeSymlink, link: target}

			if filepath.IsAbs(target) {
				dir = "/"
			}

			rest = append(splitPath(target), rest...)
		case fi.IsDir():
			t[cur] = treeEntry{mode: fs.ModeDir | 0o755}
			dir = cur
		case fi.Mode().IsRegular() && len(rest) == 0:
			t[cur] = treeEntry{mode: fi.Mode().Perm()}
		default:
			return fmt.Errorf("%s: %s is not a directory, symlink or regular file", p, cur)
		}
	}

	return nil
}

func splitPath(p string) []string {
	return slices.DeleteFunc(strings.Split(p, "/"), func(s string) bool { return s == "" || s == "." })
}

// write adds the tree to the archive under prefix, parents first, reading
// the regular files from the host.
func (t imageTree) write(tw *tar.Writer, prefix string) error {
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: prefix + "/", Mode: 0o755}); err != nil {
		return err
	}

	for _, p := range slices.Sorted(maps.Keys(t)) {
		e := t[p]
		name := prefix + p

		var err error

		switch {
		case e.mode.IsDir():
			err = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: int64(e.mode.Perm())})
		case e.mode&fs.ModeSymlink != 0:
			err = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: e.link, Mode: 0o777})
		default:
			var data []byte
			if data, err = os.ReadFile(p); err == nil {
				err = writeFile(tw, name, int64(e.mode.Perm()), data)
			}
		}

		if err != nil {
			return err
		}
	}

	return nil
}
