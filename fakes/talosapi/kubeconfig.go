package talosapi

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/talchaos/talchaos/harness/kubeconfig"
)

// Kubeconfig streams the cluster's admin kubeconfig, as Talos v1.12.6 serves
// it (v1alpha1_server.go Kubeconfig): control planes only ("kubeconfig is
// only available on control plane nodes" elsewhere), generated from the
// applied config's cluster section (kubeconfig.GenerateAdmin: a client
// certificate signed by the Kubernetes CA, the cluster's accepted CAs, its
// controlPlane.endpoint), wrapped "to match the Copy protocol" in a gzipped
// tar of one file, kubeconfig, mode 0600, sent as one Data message. Like
// Talos, the tar writer is not closed, only the gzip one.
func (m *machineServer) Kubeconfig(_ *emptypb.Empty, srv machine.MachineService_KubeconfigServer) error {
	if err := m.checkControlplane("kubeconfig"); err != nil {
		return err
	}

	var b bytes.Buffer

	if err := kubeconfig.GenerateAdmin(m.backend().Config().Cluster(), &b); err != nil {
		return err
	}

	var buf bytes.Buffer

	zw := gzip.NewWriter(&buf)
	tarW := tar.NewWriter(zw)

	if err := tarW.WriteHeader(&tar.Header{
		Typeflag: tar.TypeReg,
		Name:     "kubeconfig",
		Size:     int64(b.Len()),
		ModTime:  time.Now(),
		Mode:     0o600,
	}); err != nil {
		return err
	}

	if _, err := io.Copy(tarW, &b); err != nil {
		return err
	}

	if err := zw.Close(); err != nil {
		return err
	}

	return srv.Send(&common.Data{Bytes: buf.Bytes()})
}
