package container

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/talchaos/talchaos/sim/kubecp"
)

// cCompiler is the compiler cgo would use, or the test is skipped: without
// one, `go build` makes static binaries only.
func cCompiler(t *testing.T) string {
	t.Helper()

	out, err := exec.Command("go", "env", "CC").Output()
	if err != nil {
		t.Fatal(err)
	}

	cc, err := exec.LookPath(strings.TrimSpace(string(out)))
	if err != nil {
		t.Skipf("no C compiler (%v): go build makes no dynamically linked binary here", err)
	}

	return cc
}

// goBuild builds the one-file program src in dir into dir/prog.
func goBuild(t *testing.T, dir, src string, env ...string) string {
	t.Helper()

	for name, data := range map[string]string{"go.mod": "module prog\n\ngo 1.22\n", "main.go": src} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	prog := filepath.Join(dir, "prog")
	build := exec.Command("go", "build", "-o", prog, ".")
	build.Dir = dir
	build.Env = append(os.Environ(), append([]string{"GOWORK=off", "GOFLAGS=-mod=mod"}, env...)...)

	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	return prog
}

func runIn(t *testing.T, dir, name string, args ...string) {
	t.Helper()

	cmd := exec.Command(name, args...)
	cmd.Dir = dir

	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

// withLib builds, in dir, a shared library libchaosdep.so.1 (a symlink to
// libchaosdep.so.1.0) under lib/ and a cgo program under bin/ that needs it
// and finds it through its DT_RUNPATH $ORIGIN/../lib.
func withLib(t *testing.T, dir string) string {
	t.Helper()

	cc := cCompiler(t)
	lib, bin := filepath.Join(dir, "lib"), filepath.Join(dir, "bin")

	for _, d := range []string{lib, bin} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	if err := os.WriteFile(filepath.Join(lib, "dep.c"), []byte("int chaosdep(void) { return 42; }\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	runIn(t, lib, cc, "-shared", "-fPIC", "-Wl,-soname,libchaosdep.so.1", "-o", "libchaosdep.so.1.0", "dep.c")

	for link, target := range map[string]string{"libchaosdep.so.1": "libchaosdep.so.1.0", "libchaosdep.so": "libchaosdep.so.1"} {
		if err := os.Symlink(target, filepath.Join(lib, link)); err != nil {
			t.Fatal(err)
		}
	}

	return goBuild(t, bin, `package main

// #cgo LDFLAGS: -lchaosdep
// int chaosdep(void);
import "C"

func main() { println(C.chaosdep()) }
`, "CGO_ENABLED=1", "CGO_LDFLAGS=-L"+lib+" -Wl,-rpath,$ORIGIN/../lib")
}

const cgoProgram = `package main

// #include <unistd.h>
import "C"

func main() { println(C.getpid()) }
`

// interpreter is the binary's PT_INTERP, read here on its own.
func interpreter(t *testing.T, path string) string {
	t.Helper()

	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close() //nolint:errcheck

	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b, err := io.ReadAll(p.Open())
			if err != nil {
				t.Fatal(err)
			}

			return string(bytes.TrimRight(b, "\x00"))
		}
	}

	return ""
}

// resolve follows p through the tree as the kernel would through the image's
// file system, to the regular file it names.
func resolve(tree imageTree, p string) (string, error) {
	rest, dir := splitPath(p), "/"

	for hops := 0; len(rest) > 0; {
		name := rest[0]
		rest = rest[1:]

		if name == ".." {
			dir = filepath.Dir(dir)

			continue
		}

		cur := filepath.Join(dir, name)
		e, ok := tree[cur]

		switch {
		case !ok:
			return "", errors.New(cur + " is not in the image")
		case e.mode&fs.ModeSymlink != 0:
			if hops++; hops > 40 {
				return "", errors.New("symlink loop")
			}

			if filepath.IsAbs(e.link) {
				dir = "/"
			}

			rest = append(splitPath(e.link), rest...)
		case e.mode.IsDir():
			dir = cur
		case len(rest) == 0:
			return cur, nil
		default:
			return "", errors.New(cur + " is a file, not a directory")
		}
	}

	return "", errors.New(p + " names a directory")
}

// lddLibs is what the host's loader loads for the binary, by real path, as
// ldd reports it (the test's own binary), or nil without ldd.
func lddLibs(t *testing.T, bin string) []string {
	t.Helper()

	ldd, err := exec.LookPath("ldd")
	if err != nil {
		return nil
	}

	out, err := exec.Command(ldd, bin).Output()
	if err != nil {
		t.Fatalf("ldd %s: %v", bin, err)
	}

	var libs []string

	for _, m := range regexp.MustCompile(`=> (/\S+)`).FindAllStringSubmatch(string(out), -1) {
		real, err := filepath.EvalSymlinks(m[1])
		if err != nil {
			t.Fatal(err)
		}

		libs = append(libs, real)
	}

	slices.Sort(libs)

	return libs
}

// The libraries of a dynamically linked binary are found where the host's
// loader finds them, the image's tree resolves the interpreter and each of
// them to a regular file, and a library that is missing refuses the binary.
func TestRuntimeDeps(t *testing.T) {
	cases := []struct {
		name    string
		build   func(t *testing.T, dir string) string
		static  bool
		libs    []string // base names that must be among the libraries
		wantErr string
	}{{
		name: "static",
		build: func(t *testing.T, dir string) string {
			return goBuild(t, dir, "package main\n\nfunc main() {}\n", "CGO_ENABLED=0")
		},
		static: true,
	}, {
		name: "cgo libc",
		build: func(t *testing.T, dir string) string {
			cCompiler(t)

			return goBuild(t, dir, cgoProgram, "CGO_ENABLED=1")
		},
		libs: []string{"libc."},
	}, {
		name:  "own library through RUNPATH $ORIGIN",
		build: withLib,
		libs:  []string{"libc.", "libchaosdep.so.1"},
	}, {
		name: "missing library",
		build: func(t *testing.T, dir string) string {
			prog := withLib(t, dir)
			if err := os.Remove(filepath.Join(dir, "lib", "libchaosdep.so.1.0")); err != nil {
				t.Fatal(err)
			}

			return prog
		},
		wantErr: "needs libchaosdep.so.1",
	}}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bin := tc.build(t, t.TempDir())

			deps, err := runtimeDeps(bin)

			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
					t.Fatalf("got %v, want an error naming %q and how to get a static binary", err, tc.wantErr)
				}

				if _, err := nodeContext(bin, kubecp.Binaries{}); err == nil {
					t.Error("nodeContext took a binary whose library is missing")
				}

				return
			}

			if err != nil {
				t.Fatal(err)
			}

			bc, err := nodeContext(bin, kubecp.Binaries{})
			if err != nil {
				t.Fatal(err)
			}

			files := contextFiles(t, bc.archive)

			if tc.static {
				if deps != nil {
					t.Fatalf("a static binary needs %+v", deps)
				}

				if len(files) != 2 || !bytes.Equal(files["Dockerfile"], dockerfile) || bc.env != nil {
					t.Errorf("a static binary's context is %v with env %v, want the Dockerfile as it is and the binary", slices.Sorted(maps.Keys(files)), bc.env)
				}

				return
			}

			if deps == nil {
				t.Fatal("a cgo binary taken for a static one")
			}

			if want := interpreter(t, bin); deps.interp != want || want == "" {
				t.Errorf("interpreter %q, want %q", deps.interp, want)
			}

			for _, want := range tc.libs {
				if !slices.ContainsFunc(deps.libs, func(l string) bool { return strings.HasPrefix(filepath.Base(l), want) }) {
					t.Errorf("libraries %v lack %s", deps.libs, want)
				}
			}

			var real []string

			for _, l := range deps.libs {
				r, err := filepath.EvalSymlinks(l)
				if err != nil {
					t.Fatal(err)
				}

				if !strings.HasSuffix(filepath.Base(r), filepath.Base(deps.interp)) {
					real = append(real, r)
				}
			}

			slices.Sort(real)

			if ldd := lddLibs(t, bin); ldd != nil {
				ldd = slices.DeleteFunc(ldd, func(l string) bool { return strings.HasSuffix(filepath.Base(l), filepath.Base(deps.interp)) })
				if !slices.Equal(real, ldd) {
					t.Errorf("found %v, ldd loads %v", real, ldd)
				}
			}

			tree, err := deps.tree()
			if err != nil {
				t.Fatal(err)
			}

			for _, p := range append([]string{deps.interp}, deps.libs...) {
				got, err := resolve(tree, p)
				if err != nil {
					t.Errorf("%s in the image: %v", p, err)

					continue
				}

				if want, _ := filepath.EvalSymlinks(p); got != want { //nolint:errcheck // compared
					t.Errorf("%s resolves to %s in the image, to %s on the host", p, got, want)
				}

				if _, ok := files["rootfs"+got]; !ok {
					t.Errorf("the build context lacks %s", got)
				}
			}

			if !bytes.HasSuffix(files["Dockerfile"], []byte(dynamicDockerfile)) {
				t.Errorf("Dockerfile:\n%s", files["Dockerfile"])
			}

			for _, dir := range deps.dirs() {
				if !slices.Contains(strings.Split(bc.env["LD_LIBRARY_PATH"], ":"), dir) {
					t.Errorf("LD_LIBRARY_PATH %q lacks %s", bc.env["LD_LIBRARY_PATH"], dir)
				}
			}
		})
	}
}

// contextFiles are the regular files of a build context, by name.
func contextFiles(t *testing.T, archive []byte) map[string][]byte {
	t.Helper()

	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(archive))

	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}

		if err != nil {
			t.Fatal(err)
		}

		if h.Typeflag == tar.TypeReg {
			if files[h.Name], err = io.ReadAll(tr); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// With Kubernetes the context carries hyperkube and kwok under kube/, as
// they are, and the Dockerfile copies them to the image's /kube, where the
// node process is told to find them.
func TestNodeContextWithKubernetes(t *testing.T) {
	dir := t.TempDir()
	bin := goBuild(t, dir, "package main\nfunc main() {}\n", "CGO_ENABLED=0")

	kube := kubecp.Binaries{Hyperkube: filepath.Join(dir, "hk"), Kwok: filepath.Join(dir, "kw")}
	if err := os.WriteFile(kube.Hyperkube, []byte("hyperkube bytes"), 0o755); err != nil { //nolint:gosec // a fake binary
		t.Fatal(err)
	}

	if err := os.WriteFile(kube.Kwok, []byte("kwok bytes"), 0o755); err != nil { //nolint:gosec // a fake binary
		t.Fatal(err)
	}

	bc, err := nodeContext(bin, kube)
	if err != nil {
		t.Fatal(err)
	}

	files := contextFiles(t, bc.archive)

	if string(files["kube/hyperkube"]) != "hyperkube bytes" || string(files["kube/kwok"]) != "kwok bytes" {
		t.Errorf("the context holds %v, want kube/hyperkube and kube/kwok as they are", slices.Sorted(maps.Keys(files)))
	}

	if !bytes.Contains(files["Dockerfile"], []byte("COPY kube/ "+kubeDir+"/")) {
		t.Errorf("the Dockerfile does not copy the Kubernetes binaries:\n%s", files["Dockerfile"])
	}

	bc, err = nodeContext(bin, kubecp.Binaries{})
	if err != nil {
		t.Fatal(err)
	}

	if files := contextFiles(t, bc.archive); len(files) != 2 {
		t.Errorf("without Kubernetes the context holds %v, want the Dockerfile and the binary", slices.Sorted(maps.Keys(files)))
	}
}
