package talosapi

import (
	"context"
	"fmt"
	"strings"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
	"github.com/cosi-project/runtime/pkg/state/registry"
	"github.com/siderolabs/talos/pkg/machinery/resources/block"
	"github.com/siderolabs/talos/pkg/machinery/resources/cluster"
	"github.com/siderolabs/talos/pkg/machinery/resources/config"
	"github.com/siderolabs/talos/pkg/machinery/resources/cri"
	"github.com/siderolabs/talos/pkg/machinery/resources/etcd"
	"github.com/siderolabs/talos/pkg/machinery/resources/files"
	"github.com/siderolabs/talos/pkg/machinery/resources/hardware"
	"github.com/siderolabs/talos/pkg/machinery/resources/k8s"
	"github.com/siderolabs/talos/pkg/machinery/resources/kubeaccess"
	"github.com/siderolabs/talos/pkg/machinery/resources/kubespan"
	"github.com/siderolabs/talos/pkg/machinery/resources/network"
	"github.com/siderolabs/talos/pkg/machinery/resources/perf"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"github.com/siderolabs/talos/pkg/machinery/resources/secrets"
	"github.com/siderolabs/talos/pkg/machinery/resources/siderolink"
	"github.com/siderolabs/talos/pkg/machinery/resources/time"
	"github.com/siderolabs/talos/pkg/machinery/resources/v1alpha1"
	"github.com/siderolabs/talos/pkg/machinery/role"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// NewResources is machined's resource state (internal/app/machined/pkg/
// runtime/v1alpha2/v1alpha2_state.go NewState, v1.12.6): every namespace and
// resource definition Talos registers, so that every type talosctl knows
// resolves (`talosctl get affiliates` lists nothing rather than "not
// registered") and a type with no instance answers NotFound for an ID. The
// sim fills only the resources it models; the rest stay empty.
func NewResources(ctx context.Context) (state.State, error) {
	st := state.WrapCore(namespaced.NewState(inmem.Build))

	namespaces := registry.NewNamespaceRegistry(st)
	resources := registry.NewResourceRegistry(st)

	if err := namespaces.RegisterDefault(ctx); err != nil {
		return nil, err
	}

	if err := resources.RegisterDefault(ctx); err != nil {
		return nil, err
	}

	for _, ns := range []struct{ name, description string }{
		{v1alpha1.NamespaceName, "Talos v1alpha1 subsystems glue resources."},
		{cluster.NamespaceName, "Cluster configuration and discovery resources."},
		{cluster.RawNamespaceName, "Cluster unmerged raw resources."},
		{config.NamespaceName, "Talos node configuration."},
		{etcd.NamespaceName, "etcd resources."},
		{files.NamespaceName, "Files and file-like resources."},
		{hardware.NamespaceName, "Hardware resources."},
		{k8s.NamespaceName, "Kubernetes all node types resources."},
		{k8s.ControlPlaneNamespaceName, "Kubernetes control plane resources."},
		{kubespan.NamespaceName, "KubeSpan resources."},
		{network.NamespaceName, "Networking resources."},
		{network.ConfigNamespaceName, "Networking configuration resources."},
		{cri.NamespaceName, "CRI Seccomp resources."},
		{secrets.NamespaceName, "Resources with secret material."},
		{perf.NamespaceName, "Stats resources."},
	} {
		if err := namespaces.Register(ctx, ns.name, ns.description); err != nil {
			return nil, fmt.Errorf("namespace %s: %w", ns.name, err)
		}
	}

	for _, r := range registeredResources {
		if err := resources.Register(ctx, r); err != nil {
			return nil, fmt.Errorf("resource %T: %w", r, err)
		}
	}

	return st, nil
}

// registeredResources is v1alpha2_state.go's list, in its order, less
// secrets.MaintenanceServiceCerts (a Sensitive type the machinery this module
// builds with, v1.13, no longer has).
var registeredResources = []meta.ResourceWithRD{
	&block.Device{},
	&block.DiscoveredVolume{},
	&block.DiscoveryRefreshRequest{},
	&block.DiscoveryRefreshStatus{},
	&block.Disk{},
	&block.MountRequest{},
	&block.MountStatus{},
	&block.SwapStatus{},
	&block.Symlink{},
	&block.SystemDisk{},
	&block.UserDiskConfigStatus{},
	&block.VolumeConfig{},
	&block.VolumeLifecycle{},
	&block.VolumeMountRequest{},
	&block.VolumeMountStatus{},
	&block.VolumeStatus{},
	&block.ZswapStatus{},
	&cluster.Affiliate{},
	&cluster.Config{},
	&cluster.Identity{},
	&cluster.Info{},
	&cluster.Member{},
	&config.MachineConfig{},
	&config.MachineType{},
	&cri.ImageCacheConfig{},
	&cri.SeccompProfile{},
	&etcd.Config{},
	&etcd.PKIStatus{},
	&etcd.Spec{},
	&etcd.Member{},
	&files.EtcFileSpec{},
	&files.EtcFileStatus{},
	&hardware.MemoryModule{},
	&hardware.PCIDevice{},
	&hardware.PCIDriverRebindConfig{},
	&hardware.PCIDriverRebindStatus{},
	&hardware.PCRStatus{},
	&hardware.Processor{},
	&hardware.SystemInformation{},
	&k8s.AdmissionControlConfig{},
	&k8s.AuditPolicyConfig{},
	&k8s.AuthorizationConfig{},
	&k8s.APIServerConfig{},
	&k8s.KubePrismEndpoints{},
	&k8s.ConfigStatus{},
	&k8s.ControllerManagerConfig{},
	&k8s.Endpoint{},
	&k8s.ExtraManifestsConfig{},
	&k8s.KubeletConfig{},
	&k8s.KubeletLifecycle{},
	&k8s.KubeletSpec{},
	&k8s.KubePrismConfig{},
	&k8s.KubePrismStatuses{},
	&k8s.Manifest{},
	&k8s.ManifestStatus{},
	&k8s.BootstrapManifestsConfig{},
	&k8s.NodeAnnotationSpec{},
	&k8s.NodeCordonedSpec{},
	&k8s.NodeIP{},
	&k8s.NodeIPConfig{},
	&k8s.NodeLabelSpec{},
	&k8s.Nodename{},
	&k8s.NodeStatus{},
	&k8s.NodeTaintSpec{},
	&k8s.SchedulerConfig{},
	&k8s.StaticPod{},
	&k8s.StaticPodServerStatus{},
	&k8s.StaticPodStatus{},
	&k8s.SecretsStatus{},
	&kubeaccess.Config{},
	&kubespan.Config{},
	&kubespan.Endpoint{},
	&kubespan.Identity{},
	&kubespan.PeerSpec{},
	&kubespan.PeerStatus{},
	&network.AddressStatus{},
	&network.AddressSpec{},
	&network.DeviceConfigSpec{},
	&network.DNSResolveCache{},
	&network.DNSUpstream{},
	&network.EthernetSpec{},
	&network.EthernetStatus{},
	&network.HardwareAddr{},
	&network.HostDNSConfig{},
	&network.HostnameStatus{},
	&network.HostnameSpec{},
	&network.LinkAliasSpec{},
	&network.LinkRefresh{},
	&network.LinkStatus{},
	&network.LinkSpec{},
	&network.NfTablesChain{},
	&network.NodeAddress{},
	&network.NodeAddressFilter{},
	&network.NodeAddressSortAlgorithm{},
	&network.OperatorSpec{},
	&network.PlatformConfig{},
	&network.ProbeSpec{},
	&network.ProbeStatus{},
	&network.ResolverStatus{},
	&network.ResolverSpec{},
	&network.RouteStatus{},
	&network.RouteSpec{},
	&network.Status{},
	&network.TimeServerStatus{},
	&network.TimeServerSpec{},
	&perf.CPU{},
	&perf.Memory{},
	&cri.RegistriesConfig{},
	&runtime.BootedEntry{},
	&runtime.DevicesStatus{},
	&runtime.Diagnostic{},
	&runtime.EventSinkConfig{},
	&runtime.ExtensionServiceConfig{},
	&runtime.ExtensionServiceConfigStatus{},
	&runtime.ExtensionStatus{},
	&runtime.KernelCmdline{},
	&runtime.KernelModuleSpec{},
	&runtime.KernelParamSpec{},
	&runtime.KernelParamDefaultSpec{},
	&runtime.KernelParamStatus{},
	&runtime.KmsgLogConfig{},
	&runtime.LoadedKernelModule{},
	&runtime.MaintenanceServiceConfig{},
	&runtime.MaintenanceServiceRequest{},
	&runtime.MachineResetSignal{},
	&runtime.MachineStatus{},
	&runtime.MetaKey{},
	&runtime.MetaLoaded{},
	&runtime.MountStatus{},
	&runtime.OOMAction{},
	&runtime.PlatformMetadata{},
	&runtime.SBOMItem{},
	&runtime.SecurityState{},
	&runtime.UniqueMachineToken{},
	&runtime.Version{},
	&runtime.WatchdogTimerConfig{},
	&runtime.WatchdogTimerStatus{},
	&secrets.API{},
	&secrets.CertSAN{},
	&secrets.EncryptionSalt{},
	&secrets.Etcd{},
	&secrets.EtcdRoot{},
	&secrets.Kubelet{},
	&secrets.Kubernetes{},
	&secrets.KubernetesDynamicCerts{},
	&secrets.KubernetesRoot{},
	&secrets.MaintenanceRoot{},
	&secrets.OSRoot{},
	&secrets.Trustd{},
	&siderolink.Config{},
	&siderolink.Status{},
	&siderolink.Tunnel{},
	&time.AdjtimeStatus{},
	&time.Status{},
	&v1alpha1.AcquireConfigSpec{},
	&v1alpha1.AcquireConfigStatus{},
	&v1alpha1.Service{},
}

// accessPolicy is internal/app/resources/access.go AccessPolicy, which both
// machined and the maintenance service wrap their resource state in: read
// only; a type without a definition or a namespace not registered is
// PermissionDenied; a Sensitive type (MachineConfig, the secrets) needs the
// admin role, which a maintenance client never has.
func accessPolicy(st state.State, roles func(context.Context) role.Set) state.FilteringRule {
	return func(ctx context.Context, access state.Access) error {
		if !access.Verb.Readonly() {
			return status.Error(codes.PermissionDenied, "write access is not allowed")
		}

		rd, err := safe.StateGet[*meta.ResourceDefinition](ctx, st, resource.NewMetadata(meta.NamespaceName, meta.ResourceDefinitionType, strings.ToLower(access.ResourceType), resource.VersionUndefined))
		if err != nil {
			if state.IsNotFoundError(err) {
				return status.Error(codes.PermissionDenied, fmt.Sprintf("resource type %q is not supported", access.ResourceType))
			}

			return err
		}

		switch spec := rd.TypedSpec(); spec.Sensitivity {
		case meta.Sensitive:
			if !roles(ctx).Includes(role.Admin) {
				return errNotAuthorized
			}
		case meta.NonSensitive:
		default:
			return fmt.Errorf("unexpected sensitivity %q", spec.Sensitivity)
		}

		_, err = safe.StateGet[*meta.Namespace](ctx, st, resource.NewMetadata(meta.NamespaceName, meta.NamespaceType, access.ResourceNamespace, resource.VersionUndefined))
		if err != nil {
			if state.IsNotFoundError(err) {
				return status.Error(codes.PermissionDenied, fmt.Sprintf("namespace %q is not supported", access.ResourceNamespace))
			}

			return err
		}

		return nil
	}
}
