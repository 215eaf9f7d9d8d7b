package sim

import (
	"net/netip"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/siderolabs/crypto/x509"
)

// Every file of a node's etcd PKI is replaced whole when it is issued again,
// the CA included: an etcd starting meanwhile must read the old content or
// the new, never an empty or cut off file (an empty CA file is an empty
// pool to etcd, without an error). A file written in place keeps its inode.
func TestEtcdPKIReplacedWhole(t *testing.T) {
	ca, err := x509.NewSelfSignedCertificateAuthority()
	if err != nil {
		t.Fatal(err)
	}

	pem := &x509.PEMEncodedCertificateAndKey{Crt: ca.CrtPEM, Key: ca.KeyPEM}
	dir := t.TempDir()
	addrs := []netip.Addr{netip.MustParseAddr("10.5.0.2")}

	if _, err := writeEtcdPKI(dir, pem, "cp1", addrs, time.Now()); err != nil {
		t.Fatal(err)
	}

	before := inodes(t, dir)

	if _, err := writeEtcdPKI(dir, pem, "cp1", append(addrs, netip.MustParseAddr("172.16.0.11")), time.Now()); err != nil {
		t.Fatal(err)
	}

	after := inodes(t, dir)

	if len(after) != len(before) {
		t.Fatalf("files before %v, after %v", before, after)
	}

	for name, ino := range before {
		if after[name] == ino {
			t.Errorf("%s was rewritten in place (inode %d): a reader can see it empty or half-written", name, ino)
		}
	}
}

// inodes maps each file of dir to its inode; a temporary file left behind
// fails the test.
func inodes(t *testing.T, dir string) map[string]uint64 {
	t.Helper()

	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}

	out := map[string]uint64{}

	for _, e := range entries {
		if filepath.Ext(e.Name()) == ".new" {
			t.Errorf("temporary file %s left behind", e.Name())
		}

		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}

		out[e.Name()] = info.Sys().(*syscall.Stat_t).Ino //nolint:forcetypeassert // Linux
	}

	return out
}
