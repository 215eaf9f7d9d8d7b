package sim

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/siderolabs/go-retry/retry"
	"github.com/siderolabs/talos/pkg/machinery/constants"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/etcdserver"
)

// localMemberWait is how long Talos waits for the local member ID
// (internal/pkg/etcd/local.go GetLocalMemberID: the etcd.Member resource).
const localMemberWait = 3 * time.Minute

// LocalMemberID implements talosapi.Backend: the ID of the member this node
// runs, once its etcd has started (up to three Talos minutes).
func (n *Node) LocalMemberID(ctx context.Context) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, n.c.clock.Wall(localMemberWait))
	defer cancel()

	for {
		n.mu.Lock()
		e := n.etcd
		n.mu.Unlock()

		if e != nil {
			return uint64(e.Server.MemberID()), nil
		}

		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("failed to get local etcd member ID: %w", ctx.Err())
		case <-time.After(n.c.clock.Wall(time.Second)):
		}
	}
}

// leaveWindow is how long Talos retries removing the local member
// (internal/pkg/etcd LeaveCluster: retry.Constant(5*time.Minute,
// retry.WithUnits(10*time.Second))).
const (
	leaveWindow = 5 * time.Minute
	leaveRetry  = 10 * time.Second
)

// leaveWindowFloor bounds the leave's scaled window from below: etcd refuses
// to remove a voter ("etcdserver: unhealthy cluster") until the leader has
// been connected to enough of the others for etcdserver.HealthInterval, 5 s
// of wall time that no scale shortens (server.go mayRemoveMember). A real
// node's 5 minutes hold 60 of them; at 60x the window was those 5 s, and a
// leave soon after a member's start or a reconnect failed (make test saw it,
// docs/measurements.md "Stop 45"). Three of them.
const leaveWindowFloor = 3 * etcdserver.HealthInterval

// LeaveEtcd implements talosapi.Backend: internal/pkg/etcd (*Client)
// LeaveCluster of Talos v1.12.6. The local member is removed through client,
// retried every 10 s for 5 min (floored: leaveWindowFloor) while the cluster
// is unhealthy or the member stopping (already gone is done); then the etcd
// service is stopped for good (until the next boot) and its data directory
// removed.
func (n *Node) LeaveEtcd(ctx context.Context, client *clientv3.Client) error {
	id, err := n.LocalMemberID(ctx)
	if err != nil {
		return err
	}

	err = retry.Constant(n.c.clock.WallAtLeast(leaveWindow, leaveWindowFloor), retry.WithUnits(n.c.clock.Wall(leaveRetry))).RetryWithContext(ctx, func(ctx context.Context) error {
		_, err := client.MemberRemove(ctx, id)
		if err == nil {
			return nil
		}

		err = fmt.Errorf("failed to remove member %d: %w", id, err)

		switch {
		case errors.Is(err, rpctypes.ErrUnhealthy), errors.Is(err, rpctypes.ErrStopped):
			return retry.ExpectedError(err)
		case errors.Is(err, rpctypes.ErrMemberNotFound):
			return nil
		}

		return err
	})
	if err != nil {
		return err
	}

	n.mu.Lock()
	run := n.etcdRun
	n.mu.Unlock()

	if run != nil {
		run.stop()
	}

	if err := os.RemoveAll(n.dataDir); err != nil {
		return fmt.Errorf("failed to remove %s: %w", constants.EtcdDataPath, err)
	}

	return nil
}
