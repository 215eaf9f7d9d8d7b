package talosapi

import (
	"context"

	"github.com/siderolabs/talos/pkg/machinery/api/storage"
	"google.golang.org/protobuf/types/known/emptypb"
)

// storageServer answers Disks, which the Terraform provider uses as its insecure
// probe of a node in maintenance.
type storageServer struct {
	storage.UnimplementedStorageServiceServer

	s *Server
}

// Disks reports the simulated node's single system disk.
func (d *storageServer) Disks(context.Context, *emptypb.Empty) (*storage.DisksResponse, error) {
	return &storage.DisksResponse{Messages: []*storage.Disks{{Disks: []*storage.Disk{{
		Size:       32 << 30,
		Model:      "QEMU HARDDISK",
		DeviceName: "/dev/sda",
		Type:       storage.Disk_HDD,
		BusPath:    "/pci0000:00/0000:00:07.0/virtio4/host0/target0:0:0/0:0:0:0",
		SystemDisk: d.s.opts.Backend.Config() != nil,
	}}}}}, nil
}
