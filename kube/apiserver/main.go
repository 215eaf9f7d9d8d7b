// Command kube-apiserver is the real Kubernetes API server, built from
// k8s.io/kubernetes at the version Talos v1.12.6 ships by default, for the
// simulated control plane (one per control-plane node, as Talos runs it in a
// static pod). It lives in its own module because k8s.io/kubernetes needs a
// replace line per staging module, which must stay out of talchaos's main
// module (users import sim/simtest as a library).
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
