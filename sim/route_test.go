package sim_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
)

// One endpoint serves every node, by the node/nodes metadata, as apid does: what
// talosctl -n and Talos's own health checks rely on.
func TestOneEndpointReachesEveryNode(t *testing.T) {
	ctx, cancel := runningContext(2 * time.Minute)
	defer cancel()

	_, nodes, cl := configuredCluster(t, ctx, 3)

	// One-to-many: one message per node, stamped with the node it came from.
	eventually(t, 30*time.Second, func() error {
		resp, err := cl.Version(client.WithNodes(ctx, nodes[0].Address, nodes[1].Address, nodes[2].Address))
		if err != nil {
			return err
		}

		if len(resp.Messages) != 3 {
			t.Fatalf("%d messages, want 3", len(resp.Messages))
		}

		for i, m := range resp.Messages {
			if m.Metadata.GetHostname() != nodes[i].Address {
				t.Errorf("message %d from %q, want %s", i, m.Metadata.GetHostname(), nodes[i].Address)
			}
		}

		return nil
	})

	// One-to-one unary and streams (COSI Get and Watch, Logs) reach the addressed node.
	for _, n := range nodes[1:] {
		nctx := client.WithNode(ctx, n.Address)

		ms, err := safe.StateGetByID[*runtime.MachineStatus](nctx, cl.COSI, runtime.MachineStatusID)
		if err != nil {
			t.Fatalf("COSI get on %s: %v", n.Name, err)
		}

		if ms.TypedSpec().Stage == runtime.MachineStageMaintenance {
			t.Errorf("%s: stage %s", n.Name, ms.TypedSpec().Stage)
		}

		wctx, wcancel := context.WithTimeout(nctx, 5*time.Second)
		ch := make(chan safe.WrappedStateEvent[*runtime.MachineStatus], 4)

		if err := safe.StateWatch(wctx, cl.COSI, runtime.NewMachineStatus().Metadata(), ch); err != nil {
			wcancel()
			t.Fatalf("COSI watch on %s: %v", n.Name, err)
		}

		select {
		case ev := <-ch:
			if ev.Type() == state.Errored {
				t.Errorf("watch on %s: %v", n.Name, ev.Error())
			}
		case <-wctx.Done():
			t.Errorf("watch on %s sent nothing", n.Name)
		}

		wcancel()

		// Only that node's join loop names its own address; on a loaded
		// machine the loop may not have logged yet.
		eventually(t, 30*time.Second, func() error {
			stream, err := cl.Logs(nctx, "system", common.ContainerDriver_CONTAINERD, "machined", false, -1)
			if err != nil {
				return err
			}

			var logs strings.Builder

			for {
				data, err := stream.Recv()
				if err != nil {
					if err != io.EOF {
						return fmt.Errorf("logs of %s: %w", n.Name, err)
					}

					break
				}

				logs.Write(data.Bytes)
			}

			if !strings.Contains(logs.String(), "["+n.Address+"]") {
				return fmt.Errorf("logs via %s are not %s's:\n%s", nodes[0].Name, n.Name, logs.String())
			}

			return nil
		})

		if _, err := cl.ServiceList(nctx); err != nil {
			t.Errorf("service list on %s: %v", n.Name, err)
		}
	}

}

// talosctl asks with `nodes` even for one node; each message then names its node.
func TestStreamsAreStampedWithTheirNode(t *testing.T) {
	ctx, cancel := runningContext(time.Minute)
	defer cancel()

	_, nodes, cl := configuredCluster(t, ctx, 2)

	for _, n := range nodes {
		eventually(t, 30*time.Second, func() error {
			stream, err := cl.Logs(client.WithNodes(ctx, n.Address), "system", common.ContainerDriver_CONTAINERD, "machined", false, -1)
			if err != nil {
				return err
			}

			data, err := stream.Recv()
			if err != nil {
				return err
			}

			if got := data.GetMetadata().GetHostname(); got != n.Address {
				t.Fatalf("log message of %s stamped %q", n.Name, got)
			}

			return nil
		})
	}
	// Several nodes in one stream (talosctl -n a,b logs machined): apid sends
	// the request to each at once and merges their messages as they come,
	// each stamped with its node; an unknown node adds one message carrying
	// the error (apid one2many streaming, backend/apid.go BuildError).
	stream, err := cl.Logs(client.WithNodes(ctx, nodes[0].Address, nodes[1].Address, "10.255.255.1"), "system", common.ContainerDriver_CONTAINERD, "machined", false, -1)
	if err != nil {
		t.Fatal(err)
	}

	lines, errs := map[string]int{}, map[string]string{}

	for {
		data, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}

		if err != nil {
			t.Fatalf("fanned-out stream: %v", err)
		}

		host := data.GetMetadata().GetHostname()
		if e := data.GetMetadata().GetError(); e != "" {
			errs[host] = e

			continue
		}

		lines[host] += strings.Count(string(data.GetBytes()), "\n") + 1
	}

	if lines[nodes[0].Address] == 0 || lines[nodes[1].Address] == 0 || len(lines) != 2 {
		t.Errorf("messages by node: %v, want lines of %s and %s only", lines, nodes[0].Address, nodes[1].Address)
	}

	if !strings.Contains(errs["10.255.255.1"], `unknown node "10.255.255.1"`) || len(errs) != 1 {
		t.Errorf("errors by node: %v, want one for the unknown node", errs)
	}
}
