package talosapi

import (
	"context"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/role"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// errNotAuthorized is Talos's authz.ErrNotAuthorized.
var errNotAuthorized = status.Error(codes.PermissionDenied, "not authorized")

var (
	readers   = role.MakeSet(role.Admin, role.Operator, role.Reader)
	operators = role.MakeSet(role.Admin, role.Operator)
	admins    = role.MakeSet(role.Admin)
)

// rules are machined's (internal/app/machined/pkg/system/services/machined.go) for
// the methods served here; anything else falls back to admin.
var rules = map[string]role.Set{
	"/machine.MachineService/ApplyConfiguration":    admins,
	"/machine.MachineService/Bootstrap":             admins,
	"/machine.MachineService/Dmesg":                 readers,
	"/machine.MachineService/EtcdForfeitLeadership": admins,
	"/machine.MachineService/EtcdLeaveCluster":      admins,
	"/machine.MachineService/EtcdMemberList":        readers,
	"/machine.MachineService/EtcdRemoveMemberByID":  admins,
	"/machine.MachineService/EtcdStatus":            readers,
	"/machine.MachineService/Events":                readers,
	"/machine.MachineService/Kubeconfig":            admins,
	"/machine.MachineService/Logs":                  readers,
	"/machine.MachineService/LogsContainers":        readers,
	"/machine.MachineService/Read":                  admins,
	"/machine.MachineService/Reboot":                operators,
	"/machine.MachineService/Reset":                 admins,
	"/machine.MachineService/ServiceList":           readers,
	"/machine.MachineService/Upgrade":               admins,
	"/machine.MachineService/Version":               readers,
	"/cosi.resource.State/Get":                      readers,
	"/cosi.resource.State/List":                     readers,
	"/cosi.resource.State/Watch":                    readers,
	"/storage.StorageService/Disks":                 readers,
	"/time.TimeService/Time":                        readers,
	"/time.TimeService/TimeCheck":                   readers,
}

// maintenanceAllowed are the calls a v1.13+ maintenance node answers to anyone;
// everything else is denied (v1.12 answers Unimplemented instead).
var maintenanceAllowed = map[string]bool{
	"/machine.MachineService/ApplyConfiguration": true,
	"/storage.StorageService/Disks":              true,
	"/cosi.resource.State/Get":                   true,
	"/cosi.resource.State/List":                  true,
	"/cosi.resource.State/Watch":                 true,
}

type rolesKey struct{}

// rolesFrom reads the roles from the verified client certificate's Organization.
func rolesFrom(ctx context.Context) role.Set {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return role.MakeSet()
	}

	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return role.MakeSet()
	}

	roles, _ := role.Parse(info.State.VerifiedChains[0][0].Subject.Organization)

	return roles
}

// Roles returns the caller's roles as the server saw them.
func Roles(ctx context.Context) role.Set {
	if r, ok := ctx.Value(rolesKey{}).(role.Set); ok {
		return r
	}

	return role.MakeSet()
}

func (s *Server) authorize(ctx context.Context, mode, method string) (context.Context, error) {
	if mode == "maintenance" {
		if s.opts.Profile.AtLeast(V113) && !maintenanceAllowed[method] {
			return ctx, errNotAuthorized
		}

		return ctx, nil
	}

	roles, _ := impersonated(ctx, rolesFrom(ctx))

	need, ok := rules[method]
	if !ok {
		need = admins
	}

	if !roles.IncludesAny(need) {
		return ctx, errNotAuthorized
	}

	return context.WithValue(ctx, rolesKey{}, roles), nil
}

func (s *Server) authorizeUnary(mode string) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx, err := s.authorize(ctx, mode, info.FullMethod)
		if err != nil {
			return nil, err
		}

		return handler(ctx, req)
	}
}

type wrappedStream struct {
	grpc.ServerStream

	ctx context.Context //nolint:containedctx
}

func (w wrappedStream) Context() context.Context { return w.ctx }

func (s *Server) authorizeStream(mode string) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx, err := s.authorize(ss.Context(), mode, info.FullMethod)
		if err != nil {
			return err
		}

		return handler(srv, wrappedStream{ServerStream: ss, ctx: ctx})
	}
}

// methodName is the last path element ("Bootstrap" of "/machine.MachineService/Bootstrap").
func methodName(full string) string {
	return full[strings.LastIndex(full, "/")+1:]
}
