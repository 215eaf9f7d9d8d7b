package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// advertisedPeerTimeout is updateAdvertisedPeers' deadline.
const advertisedPeerTimeout = 30 * time.Second

// advertisedPeers is the state of the node's etcd.AdvertisedPeerController.
type advertisedPeers struct {
	// checked is the peer URLs last found on the node's member, for the
	// etcd run they were found in: nothing to ask while the spec's stay so.
	checked []string
	run     *etcdRun
}

// runAdvertisedPeers runs the controller for the boot, on its own as
// machined's controllers run: its etcd calls wait for a quorum (up to 30 s),
// which must not hold up the resources the other controllers write.
func (n *Node) runAdvertisedPeers(ctx context.Context) {
	for {
		n.syncAdvertisedPeers(ctx)

		select {
		case <-ctx.Done():
			return
		case <-time.After(controllerTick):
		}
	}
}

// syncAdvertisedPeers is etcd.AdvertisedPeerController (Talos v1.12.6
// internal/app/machined/pkg/controllers/etcd/advertised_peer.go): while the
// node's etcd service is Running and healthy, its member's peer URLs follow
// its etcd spec's advertised addresses. When they differ (an address under
// advertisedSubnets came up or went after etcd started), it updates the
// member through the local etcd (MemberUpdate: it needs a quorum) and logs
// "updated etcd peer URLs"; a failure is the controller's, logged as
// controller-runtime does, and the controller runs again (here at the
// controllers' next tick). The real controller runs on events (the
// service's health, the spec); the sim's on the controllers' tick.
func (n *Node) syncAdvertisedPeers(ctx context.Context) {
	n.mu.Lock()
	run, checked, checkedRun := n.etcdRun, n.peers.checked, n.peers.run
	n.mu.Unlock()

	if run == nil {
		return
	}

	if _, healthy := run.svc.status(); !healthy {
		return
	}

	spec, ok := n.etcdSpec()
	if !ok {
		return
	}

	want := etcdURLs(spec.advertised, etcdPeerPort)
	if checkedRun == run && slices.Equal(checked, want) {
		return
	}

	err := n.updateAdvertisedPeers(ctx, want)
	if err == nil {
		n.mu.Lock()
		n.peers = advertisedPeers{checked: want, run: run}
		n.mu.Unlock()

		return
	}

	if ctx.Err() != nil {
		return // the boot ended
	}

	n.machined.Printf("controller failed {\"component\": \"controller-runtime\", \"controller\": \"etcd.AdvertisedPeerController\", \"error\": %q}",
		"error updating advertised peers: "+err.Error())

}

// updateAdvertisedPeers is the controller's updateAdvertisedPeers.
func (n *Node) updateAdvertisedPeers(ctx context.Context, want []string) error {
	ctx, cancel := context.WithTimeout(ctx, n.c.etcdTimeout(advertisedPeerTimeout))
	defer cancel()

	client, done, err := n.localEtcdClient(ctx)
	if err != nil {
		return fmt.Errorf("error creating etcd client: %w", err)
	}
	defer done()

	resp, err := client.MemberList(ctx)
	if err != nil {
		return fmt.Errorf("error getting member list: %w", err)
	}

	local := resp.Header.MemberId

	var current []string

	found := false

	for _, m := range resp.Members {
		if m.ID == local {
			current, found = m.PeerURLs, true

			break
		}
	}

	if !found {
		return errors.New("local member not found in member list")
	}

	if slices.Equal(want, current) {
		return nil
	}

	if _, err := client.MemberUpdate(ctx, local, want); err != nil {
		return fmt.Errorf("error updating member: %w", err)
	}

	n.machined.Printf("updated etcd peer URLs {\"component\": \"controller-runtime\", \"controller\": \"etcd.AdvertisedPeerController\", \"new_peer_urls\": [%s], \"member_id\": %d}",
		quotedList(want), local)

	return nil
}

// quotedList is zap's JSON of a string list's items.
func quotedList(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = fmt.Sprintf("%q", s)
	}

	return strings.Join(q, ", ")
}
