package talosapi

import (
	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// bootIDPath is the kernel's boot ID, which `talosctl reboot` and `upgrade`
// read before and after to see that the node rebooted
// (cmd/talosctl/pkg/talos/action/tracker.go getBootID).
const bootIDPath = "/proc/sys/kernel/random/boot_id"

// Read streams a file as machined's Read does (v1alpha1_server.go, v1.12.6:
// one chunk for a small file). The simulated node has one file to read, its
// boot ID; any other path is refused as not simulated rather than answered
// as missing, which a real node would not say of /etc/os-release.
func (m *machineServer) Read(in *machine.ReadRequest, srv machine.MachineService_ReadServer) error {
	if in.GetPath() != bootIDPath {
		return status.Errorf(codes.Unimplemented, "reading %s is not simulated", in.GetPath())
	}

	return srv.Send(&common.Data{Bytes: []byte(m.backend().BootID() + "\n")})
}
