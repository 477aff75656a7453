// Command controlplane is a multi-call binary holding a real Kubernetes
// control plane built from the upstream sources pinned in ../../go.mod:
//
//	controlplane etcd --data-dir DIR --client-url URL --peer-url URL
//	controlplane kube-apiserver [kube-apiserver flags]
//	controlplane kube-scheduler [kube-scheduler flags]
//	controlplane kubectl [kubectl args]   (or run it through a symlink named kubectl)
//
// One binary instead of four keeps the cold build to a single link of the
// shared dependency graph. Each component still runs in its own process, so
// the harness can start, kill and restart them independently.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserverapp "k8s.io/kubernetes/cmd/kube-apiserver/app"
	schedulerapp "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func usage() {
	fmt.Fprintf(os.Stderr, "usage: controlplane etcd|kube-apiserver|kube-scheduler|kubectl [args...]\n")
	os.Exit(2)
}

func main() {
	name := filepath.Base(os.Args[0])
	args := os.Args[1:]
	if name == "controlplane" {
		if len(args) == 0 {
			usage()
		}
		name, args = args[0], args[1:]
	}
	// Every upstream command parses os.Args[1:] itself.
	os.Args = append([]string{name}, args...)
	switch name {
	case "etcd":
		os.Exit(runEtcd(args))
	case "kube-apiserver":
		os.Exit(cli.Run(apiserverapp.NewAPIServerCommand()))
	case "kube-scheduler":
		os.Exit(cli.Run(schedulerapp.NewSchedulerCommand()))
	case "kubectl":
		logs.GlogSetter(kubectlcmd.GetLogVerbosity(os.Args)) //nolint:errcheck
		if err := cli.RunNoErrOutput(kubectlcmd.NewDefaultKubectlCommand()); err != nil {
			kubectlutil.CheckErr(err)
		}
	default:
		usage()
	}
}
