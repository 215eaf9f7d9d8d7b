package sim

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
)

// Talos makes an etcd client for every call of its API (etcd.NewLocalClient
// in EtcdStatus, EtcdMemberList with QueryLocal, ...) and closes it after.
// The observer asks every control plane for its etcd status and members ten
// times a second, and those clients — a TLS handshake, an HTTP/2 connection,
// the member's own handshake and certificate load each — were half of a
// run's CPU (docs/measurements.md, Step 14). The API's local client is kept
// instead while what a new one would meet is unchanged: the same member
// process, the node's clock and its etcd certificates as they were when the
// client connected (the handshake is what they change). Whenever one of them
// differs, and while the member does not run, a call makes its own client
// as Talos does, so that a dial that fails or times out fails as it would.
// A call on a kept client reaches the same member with the same request; the
// member stopping drops the client before it closes.

// localEtcd is a client of the node's own member kept across API calls.
type localEtcd struct {
	member *embed.Etcd
	era    tlsEra
	client *clientv3.Client
	cancel context.CancelFunc
}

func (l *localEtcd) close() {
	l.client.Close() //nolint:errcheck,gosec
	l.cancel()
}

// localEtcdClient is the client of an API call to the local member, and what
// ends the call's use of it.
func (n *Node) localEtcdClient(ctx context.Context) (*clientv3.Client, func(), error) {
	era := n.tlsEra()

	n.mu.Lock()
	member, kept := n.etcd, n.localEtcd
	n.mu.Unlock()

	if kept != nil && kept.member == member && kept.era == era {
		return kept.client, func() {}, nil
	}

	// The client outlives the call when it is kept; the call ending while
	// it connects ends the dial, as it does Talos's.
	life, cancel := context.WithCancel(context.Background())
	stop := context.AfterFunc(ctx, cancel)

	c, err := n.newEtcdClient(life, []string{n.EtcdClientEndpoint()})
	if err != nil {
		stop()
		cancel()

		return nil, nil, err
	}

	l := &localEtcd{member: member, era: era, client: c, cancel: cancel}
	if !stop() || member == nil {
		return c, l.close, nil
	}

	now := n.tlsEra()

	n.mu.Lock()
	keep := n.etcd == member && n.localEtcd == nil && now == era
	if keep {
		n.localEtcd = l
	}
	n.mu.Unlock()

	if !keep {
		return c, l.close, nil
	}

	return c, func() {}, nil
}

// dropLocalEtcd closes the kept client of member, if there is one: before
// the member stops, so that a call from now on dials it as Talos would.
func (n *Node) dropLocalEtcd(member *embed.Etcd) {
	n.mu.Lock()
	l := n.localEtcd
	if l != nil && l.member == member {
		n.localEtcd = nil
	} else {
		l = nil
	}
	n.mu.Unlock()

	if l != nil {
		l.close()
	}
}
