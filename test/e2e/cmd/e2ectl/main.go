// Command e2ectl is the harness's helper: everything dev-cluster needs that
// is easier to get right in Go than in bash (certificates, kubeconfigs, fake
// nodes, manifests, the scheduler configuration, readiness probes), and the
// scenarios themselves, which check the cluster through client-go.
//
//	e2ectl freeports N
//	e2ectl pki --dir DIR
//	e2ectl kubeconfig --dir DIR --server URL --out FILE [--cert]
//	e2ectl wait-url --url URL [--ca FILE] [--insecure] [--timeout 60s] [--pid PID]
//	e2ectl nodes --kubeconfig FILE --count N [--cpu 8] [--memory 32Gi] [--pods 110]
//	e2ectl apply --kubeconfig FILE -f MANIFEST [--kinds K1,K2]
//	e2ectl sa-kubeconfig --kubeconfig ADMIN --sa NS/NAME --out FILE
//	e2ectl agentsched-args -f MANIFEST --deployment NAME --kubeconfig FILE --listen HOST:PORT
//	e2ectl scheduler-config --in FILE --out FILE --kubeconfig FILE --extender-url URL [deviations]
//	e2ectl scenario NAME --state-dir DIR
//	e2ectl bench --state-dir DIR --mode MODE [--pods N] [--out FILE] | bench table --in FILE
//	e2ectl vc-pods | http-load | body-proxy   (test/bench/bench_volcano.sh)
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

type command struct {
	run  func(args []string) error
	help string
}

var commands = map[string]command{
	"freeports":        {cmdFreePorts, "print N free loopback TCP ports"},
	"pki":              {cmdPKI, "generate CA, serving/client certs, SA key, admin token"},
	"kubeconfig":       {cmdKubeconfig, "write an admin kubeconfig"},
	"wait-url":         {cmdWaitURL, "poll an URL until it answers 200"},
	"nodes":            {cmdNodes, "register fake Ready nodes"},
	"apply":            {cmdApply, "create or update every object of a manifest"},
	"scheduler-config": {cmdSchedulerConfig, "derive kube-scheduler's configuration"},
	"sa-kubeconfig":    {cmdSAKubeconfig, "write a kubeconfig with a ServiceAccount's token (TokenRequest)"},
	"agentsched-args":  {cmdAgentschedArgs, "print the agentsched command line of a Deployment in deploy/"},
	"scenario":         {cmdScenario, "run one end-to-end scenario"},
	"bench":            {cmdBench, "end-to-end throughput benchmark (test/bench/bench_e2e.sh)"},
}

func usage() {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintln(os.Stderr, "usage: e2ectl COMMAND [flags]")
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-17s %s\n", n, commands[n].help)
	}
	os.Exit(2)
}

func main() {
	if filepath.Base(os.Args[0]) == "stub-agentsched" {
		if err := runStub(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, "stub-agentsched:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) < 2 {
		usage()
	}
	c, ok := commands[os.Args[1]]
	if !ok {
		usage()
	}
	if err := c.run(os.Args[2:]); err != nil {
		msg := err.Error()
		if !strings.HasPrefix(msg, "FAIL") {
			msg = "e2ectl " + os.Args[1] + ": " + msg
		}
		fmt.Fprintln(os.Stderr, msg)
		os.Exit(1)
	}
}
