package talosapi

import (
	"context"
	"fmt"

	timeapi "github.com/siderolabs/talos/pkg/machinery/api/time"
	"github.com/siderolabs/talos/pkg/machinery/constants"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// timeServer is machined's TimeService (v1alpha1_time.go, v1.12.6), which
// `talosctl time` asks: the node queries an NTP server (the config's first
// time server, else time.cloudflare.com) and answers its own clock beside
// the server's time. The query is the backend's (QueryTimeServer): a
// simulated node's servers answer with the host's clock, unless they are
// held (docs/fidelity.md).
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

// TimeCheck checks the given server; a failed query is a plain error
// (gRPC Unknown), as Talos returns it.
func (t *timeServer) TimeCheck(ctx context.Context, in *timeapi.TimeRequest) (*timeapi.TimeResponse, error) {
	remote, err := t.s.opts.Backend.QueryTimeServer(ctx, in.Server)
	if err != nil {
		return nil, fmt.Errorf("error querying NTP server %q: %w", in.Server, err)
	}

	return &timeapi.TimeResponse{Messages: []*timeapi.Time{{
		Server:     in.Server,
		Localtime:  timestamppb.New(t.s.opts.Backend.Now()),
		Remotetime: timestamppb.New(remote),
	}}}, nil
}
