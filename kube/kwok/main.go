// Command kwok is sigs.k8s.io/kwok's kwok controller, unchanged (its
// cmd/kwok main, which cannot be imported), pinned to one release in a
// module of its own: the simulated kubelets. Each simulated node runs one,
// managing only its own Node (--manage-single-node): it keeps the node's
// conditions and lease and the status of the pods bound to it, as kubelet
// would, and stops doing so when the node goes down, so the real
// kube-controller-manager marks the node NotReady after its grace period.
package main

import (
	"os"

	"github.com/spf13/pflag"
	"sigs.k8s.io/kwok/pkg/config"
	"sigs.k8s.io/kwok/pkg/kwok/cmd"
	"sigs.k8s.io/kwok/pkg/log"
	"sigs.k8s.io/kwok/pkg/utils/signals"
)

func main() {
	flagset := pflag.NewFlagSet("global", pflag.ContinueOnError)
	flagset.ParseErrorsWhitelist.UnknownFlags = true
	flagset.Usage = func() {}

	ctx := signals.SetupSignalContext()
	ctx, logger := log.InitFlags(ctx, flagset)

	ctx, err := config.InitFlags(ctx, flagset)
	if err != nil {
		_, _ = os.Stderr.Write([]byte(flagset.FlagUsages()))
		logger.Error("Init config flags", err)
		os.Exit(1)
	}

	command := cmd.NewCommand(ctx)
	command.PersistentFlags().AddFlagSet(flagset)

	if err := command.ExecuteContext(ctx); err != nil {
		logger.Error("Execute exit", err)
		os.Exit(1)
	}
}
