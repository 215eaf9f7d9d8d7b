package talosapi

import (
	"context"
	"path/filepath"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/siderolabs/talos/pkg/machinery/api/storage"
	"github.com/siderolabs/talos/pkg/machinery/resources/block"
	"google.golang.org/protobuf/types/known/emptypb"
)

// storageServer answers Disks, which the Terraform provider uses as its insecure
// probe of a node in maintenance.
type storageServer struct {
	storage.UnimplementedStorageServiceServer

	s *Server
}

// Disks lists the node's Disk resources as storaged does
// (internal/app/storaged/server.go, v1.12.6): kept for compatibility, the
// disk the SystemDisk resource names marked as the system disk.
func (d *storageServer) Disks(ctx context.Context, _ *emptypb.Empty) (*storage.DisksResponse, error) {
	st := d.s.opts.Backend.Resources()

	systemDisk, err := safe.StateGetByID[*block.SystemDisk](ctx, st, block.SystemDiskID)
	if err != nil && !state.IsNotFoundError(err) {
		return nil, err
	}

	disks, err := safe.StateListAll[*block.Disk](ctx, st)
	if err != nil {
		return nil, err
	}

	return &storage.DisksResponse{Messages: []*storage.Disks{{Disks: safe.ToSlice(disks, func(disk *block.Disk) *storage.Disk {
		spec := disk.TypedSpec()

		var diskType storage.Disk_DiskType

		switch {
		case spec.CDROM:
			diskType = storage.Disk_CD
		case spec.Transport == "nvme":
			diskType = storage.Disk_NVME
		case spec.Transport == "mmc":
			diskType = storage.Disk_SD
		case spec.Rotational:
			diskType = storage.Disk_HDD
		case spec.Transport != "":
			diskType = storage.Disk_SSD
		}

		return &storage.Disk{
			DeviceName: filepath.Join("/dev", disk.Metadata().ID()),
			Model:      spec.Model,
			Size:       spec.Size,
			Serial:     spec.Serial,
			Modalias:   spec.Modalias,
			Wwid:       spec.WWID,
			Uuid:       spec.UUID,
			Type:       diskType,
			BusPath:    spec.BusPath,
			SystemDisk: systemDisk != nil && disk.Metadata().ID() == systemDisk.TypedSpec().DiskID,
			Subsystem:  spec.SubSystem,
			Readonly:   spec.Readonly,
		}
	})}}}, nil
}
