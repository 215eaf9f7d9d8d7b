package talosapi

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/configdiff"
	"github.com/siderolabs/talos/pkg/machinery/config/container"
)

// canApplyImmediate is Talos v1.12.6's (*Runtime).CanApplyImmediate
// (internal/app/machined/pkg/runtime/v1alpha1/v1alpha1_runtime.go): a change
// applies without a reboot when it touches only .debug, .cluster and the
// machine fields machined reconciles live; anything else needs a reboot, and
// the error carries the diff of what does.
func canApplyImmediate(current, next config.Provider) error {
	if current == nil {
		return errors.New("no current config")
	}

	currentConfig := current.RawV1Alpha1()
	if currentConfig == nil {
		return errors.New("current config is not v1alpha1")
	}

	newConfig := next.RawV1Alpha1()
	if newConfig == nil {
		return errors.New("new config is not v1alpha1")
	}

	newConfig = newConfig.DeepCopy()

	newConfig.ConfigDebug = currentConfig.ConfigDebug
	newConfig.ClusterConfig = currentConfig.ClusterConfig

	if newConfig.MachineConfig != nil && currentConfig.MachineConfig != nil {
		n, c := newConfig.MachineConfig, currentConfig.MachineConfig

		n.MachineCA = c.MachineCA
		n.MachineAcceptedCAs = c.MachineAcceptedCAs
		n.MachineTime = c.MachineTime //nolint:staticcheck // as Talos does
		n.MachineCertSANs = c.MachineCertSANs
		n.MachineInstall = c.MachineInstall
		n.MachineNetwork = c.MachineNetwork
		n.MachineSysfs = c.MachineSysfs
		n.MachineSysctls = c.MachineSysctls
		n.MachineLogging = c.MachineLogging
		n.MachineControlPlane = c.MachineControlPlane
		n.MachineKubelet = c.MachineKubelet
		n.MachineKernel = c.MachineKernel
		n.MachineRegistries = c.MachineRegistries //nolint:staticcheck // as Talos does
		n.MachinePods = c.MachinePods
		n.MachineSeccompProfiles = c.MachineSeccompProfiles
		n.MachineNodeAnnotations = c.MachineNodeAnnotations
		n.MachineNodeLabels = c.MachineNodeLabels
		n.MachineNodeTaints = c.MachineNodeTaints

		if n.MachineFeatures != nil && c.MachineFeatures != nil {
			n.MachineFeatures.KubernetesTalosAPIAccessConfig = c.MachineFeatures.KubernetesTalosAPIAccessConfig
			n.MachineFeatures.KubePrismSupport = c.MachineFeatures.KubePrismSupport
			n.MachineFeatures.HostDNSSupport = c.MachineFeatures.HostDNSSupport
			n.MachineFeatures.ImageCacheSupport = c.MachineFeatures.ImageCacheSupport
			n.MachineFeatures.FeatureNodeAddressSortAlgorithm = c.MachineFeatures.FeatureNodeAddressSortAlgorithm
		}
	}

	if !reflect.DeepEqual(currentConfig, newConfig) {
		diff, err := configdiff.DiffConfigs(container.NewV1Alpha1(currentConfig), container.NewV1Alpha1(newConfig))
		if err != nil {
			return fmt.Errorf("error calculating diff: %w", err)
		}

		return fmt.Errorf("this config change can't be applied in immediate mode\ndiff:\n%s", diff)
	}

	return nil
}

// configDiff is v1alpha1_server.go's generateDiff: the dry run's "Config diff:".
func configDiff(current, next config.Provider) (string, error) {
	diff, err := configdiff.DiffConfigs(current, next)
	if err != nil {
		return "", err
	}

	if diff == "" {
		diff = "No changes."
	}

	return "Config diff:\n\n" + diff, nil
}
