package talosapi

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/siderolabs/talos/pkg/machinery/resources/block"
	"github.com/siderolabs/talos/pkg/machinery/resources/cluster"
	"github.com/siderolabs/talos/pkg/machinery/resources/config"
	"github.com/siderolabs/talos/pkg/machinery/resources/secrets"
	"github.com/siderolabs/talos/pkg/machinery/role"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The access policy machined and the maintenance service serve resources
// through (internal/app/resources/access.go, v1.12.6), each row its exact
// code and text.
func TestAccessPolicy(t *testing.T) {
	ctx := context.Background()

	st, err := NewResources(ctx)
	if err != nil {
		t.Fatal(err)
	}

	reader, admin := role.MakeSet(role.Reader), role.MakeSet(role.Admin)

	for _, tc := range []struct {
		name  string
		roles role.Set
		ns    resource.Namespace
		typ   resource.Type
		verb  state.Verb
		code  codes.Code // OK: allowed
		text  string
	}{
		{"member, reader", reader, cluster.NamespaceName, cluster.MemberType, state.List, codes.OK, ""},
		{"disk, reader", reader, block.NamespaceName, block.DiskType, state.Get, codes.OK, ""},
		{"machine config, reader", reader, config.NamespaceName, config.MachineConfigType, state.Get, codes.PermissionDenied, "not authorized"},
		{"machine config, admin", admin, config.NamespaceName, config.MachineConfigType, state.List, codes.OK, ""},
		{"OS CA, reader", reader, secrets.NamespaceName, secrets.OSRootType, state.Get, codes.PermissionDenied, "not authorized"},
		{"type without definition", admin, "runtime", "Foos.example.com", state.Get, codes.PermissionDenied, `resource type "Foos.example.com" is not supported`},
		{"namespace not registered", admin, "nope", cluster.MemberType, state.List, codes.PermissionDenied, `namespace "nope" is not supported`},
		{"write", admin, cluster.NamespaceName, cluster.MemberType, state.Create, codes.PermissionDenied, "write access is not allowed"},
		{"destroy", admin, cluster.NamespaceName, cluster.MemberType, state.Destroy, codes.PermissionDenied, "write access is not allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rule := accessPolicy(st, func(context.Context) role.Set { return tc.roles })

			err := rule(ctx, state.Access{ResourceNamespace: tc.ns, ResourceType: tc.typ, ResourceID: "x", Verb: tc.verb})
			if status.Code(err) != tc.code || (tc.code != codes.OK && status.Convert(err).Message() != tc.text) {
				t.Fatalf("got %v, want %s %q", err, tc.code, tc.text)
			}
		})
	}
}

// The kernel log records of a machined line as Dmesg sends them: go-kmsg's
// writer (a record per line, tabs to spaces, records cut at 976 bytes with
// "...") and the "%s: %7s: [%s]: %s" of v1alpha1_server.go, user.warning.
func TestKmsgRecords(t *testing.T) {
	at := time.Date(2026, 3, 1, 10, 9, 37, 662764956, time.FixedZone("CET", 3600))
	long := "[talos] " + strings.Repeat("x", 2000)

	const ts = "user: warning: [2026-03-01T09:09:37.662764956Z]: "

	for _, tc := range []struct {
		name, line string
		want       []string
	}{
		{"plain", "[talos] service[etcd](Running): Started task etcd (PID 12) for container etcd",
			[]string{ts + "[talos] service[etcd](Running): Started task etcd (PID 12) for container etcd\n"}},
		{"lines and tabs", "[talos] 2 errors occurred:\n\t* one\n\t* two",
			[]string{ts + "[talos] 2 errors occurred:\n", ts + " * one\n", ts + " * two\n"}},
		{"long", long, []string{ts + long[:972] + "...\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, r := range kmsgRecords(at, tc.line) {
				got = append(got, string(r))
			}

			if !slices.Equal(got, tc.want) {
				t.Fatalf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// Every type v1alpha2_state.go registers resolves, by its aliases too.
func TestResourcesRegistered(t *testing.T) {
	ctx := context.Background()

	st, err := NewResources(ctx)
	if err != nil {
		t.Fatal(err)
	}

	for _, r := range registeredResources {
		typ := r.ResourceDefinition().Type

		if _, err := st.Get(ctx, resource.NewMetadata("meta", "ResourceDefinitions.meta.cosi.dev", strings.ToLower(typ), resource.VersionUndefined)); err != nil {
			t.Errorf("%s: %v", typ, err)
		}
	}

	if n := len(registeredResources); n != 157 {
		t.Errorf("%d types registered; v1.12.6 registers 158, less MaintenanceServiceCerts", n)
	}
}
