package sim_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"

	"github.com/talchaos/talchaos/harness/chaos"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/sim/simtest"
)

// etcd advertising both of talos #6110's subnets, cp2's private address up
// only after cp2 joined on its public one: Talos v1.12.6's
// AdvertisedPeerController updates cp2's member to both peer URLs
// (MemberUpdate through cp2's etcd, once it is healthy) and logs it.
func TestAdvertisedPeerURLsFollowTheSpec(t *testing.T) {
	ctx, cancel := runningContext(3 * time.Minute)
	defer cancel()

	sc := talos6110()
	sc.Cluster.ConfigPatches = []scenario.ConfigPatch{
		{Patch: "cluster:\n  etcd:\n    advertisedSubnets: [10.197.230.0/24, 172.16.0.0/24]\n"},
	}

	c := simtest.FromScenario(t, sc, 1)
	heal := inject(t, ctx, c, chaos.AddressLate{Node: "cp2", Address: "172.16.0.12"})
	cl := applyAndBootstrap(t, ctx, c, c.Nodes()[0].Endpoint)

	public := "https://10.197.230.12:2380"
	both := []string{public, "https://172.16.0.12:2380"}

	eventually(t, 90*time.Second, func() error { return voters(ctx, cl, 2) })
	eventually(t, 30*time.Second, func() error { return peerURLsOf(ctx, cl, "cp2", []string{public}) })

	if err := heal(); err != nil {
		t.Fatal(err)
	}

	eventually(t, 60*time.Second, func() error { return peerURLsOf(ctx, cl, "cp2", both) })

	const updated = `updated etcd peer URLs {"component": "controller-runtime", "controller": "etcd.AdvertisedPeerController", ` +
		`"new_peer_urls": ["https://10.197.230.12:2380", "https://172.16.0.12:2380"], "member_id": `
	if !slices.ContainsFunc(c.Node("cp2").Log("machined").Lines(), func(l string) bool { return strings.Contains(l, updated) }) {
		t.Errorf("cp2's machined log lacks %q", updated)
	}

	if err := voters(ctx, cl, 2); err != nil {
		t.Error(err)
	}
}

// peerURLsOf checks the member named name has exactly the peer URLs want.
func peerURLsOf(ctx context.Context, cl *client.Client, name string, want []string) error {
	resp, err := cl.EtcdMemberList(ctx, &machine.EtcdMemberListRequest{})
	if err != nil {
		return err
	}

	for _, m := range resp.GetMessages()[0].GetMembers() {
		if m.GetHostname() == name {
			if !slices.Equal(m.GetPeerUrls(), want) {
				return fmt.Errorf("%s's peer URLs %v, want %v", name, m.GetPeerUrls(), want)
			}

			return nil
		}
	}

	return fmt.Errorf("no member %s", name)
}
