package talosclient

import (
	"context"
	"io"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/client"
)

// BootID reads the node's kernel boot ID, new at every boot, as talosctl's
// reboot and upgrade do before and after (cmd/talosctl/pkg/talos/action/
// tracker.go getBootID).
func BootID(ctx context.Context, cl *client.Client) (string, error) {
	r, err := cl.Read(ctx, "/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", err
	}

	defer r.Close() //nolint:errcheck

	b, err := io.ReadAll(r)
	if err != nil {
		return "", err
	}

	return strings.TrimSpace(string(b)), r.Close()
}
