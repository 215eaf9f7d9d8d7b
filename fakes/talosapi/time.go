package talosapi

import (
	"context"
	"time"

	timeapi "github.com/siderolabs/talos/pkg/machinery/api/time"
	"github.com/siderolabs/talos/pkg/machinery/constants"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// timeServer is machined's TimeService (v1alpha1_time.go, v1.12.6), which
// `talosctl time` asks: the node queries an NTP server (the config's first
// time server, else time.cloudflare.com) and answers its own time beside
// the server's. A simulated node has no NTP server to ask: the host's clock
// stands for every server (docs/fidelity.md).
type timeServer struct {
	timeapi.UnimplementedTimeServiceServer

	s *Server
}

// Time checks the node's configured time server.
func (t *timeServer) Time(ctx context.Context, _ *emptypb.Empty) (*timeapi.TimeResponse, error) {
	servers := []string(nil)

	if cfg := t.s.opts.Backend.Config(); cfg != nil && cfg.NetworkTimeSyncConfig() != nil {
		servers = cfg.NetworkTimeSyncConfig().Servers()
	}

	if len(servers) == 0 {
		servers = []string{constants.DefaultNTPServer}
	}

	return t.TimeCheck(ctx, &timeapi.TimeRequest{Server: servers[0]})
}

// TimeCheck checks the given server.
func (t *timeServer) TimeCheck(_ context.Context, in *timeapi.TimeRequest) (*timeapi.TimeResponse, error) {
	now := time.Now()

	return &timeapi.TimeResponse{Messages: []*timeapi.Time{{
		Server:     in.Server,
		Localtime:  timestamppb.New(now),
		Remotetime: timestamppb.New(now),
	}}}, nil
}
