// Command hyperkube is the real Kubernetes control plane, built from
// k8s.io/kubernetes at the version Talos v1.12.6 ships by default (see
// go.mod), for the simulated control plane: `hyperkube kube-apiserver ARGS`,
// `hyperkube kube-controller-manager ARGS` and `hyperkube kube-scheduler
// ARGS` run the three static pods Talos runs on every control plane. One
// binary, as Kubernetes's own hyperkube was, because the three share almost
// all their code: one build, one file in the cache. It lives in its own
// module because k8s.io/kubernetes needs a replace line per staging module,
// which must stay out of talchaos's main module (users import sim/simtest as
// a library).
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	commands := map[string]func() *cobra.Command{
		"kube-apiserver":          apiserver.NewAPIServerCommand,
		"kube-controller-manager": controllermanager.NewControllerManagerCommand,
		"kube-scheduler":          func() *cobra.Command { return scheduler.NewSchedulerCommand() },
	}

	if len(os.Args) < 2 || commands[os.Args[1]] == nil {
		fmt.Fprintln(os.Stderr, "usage: hyperkube kube-apiserver|kube-controller-manager|kube-scheduler [flags]")
		os.Exit(2)
	}

	cmd := commands[os.Args[1]]()
	os.Args = append([]string{os.Args[1]}, os.Args[2:]...)

	os.Exit(cli.Run(cmd))
}
