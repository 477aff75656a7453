package main

import (
	"bufio"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Idle keep-alive connections between kube-scheduler and agentsched.
// kube-scheduler's extender client (utilnet.SetTransportDefaults) keeps an
// idle connection for Go's IdleConnTimeout, 90 s, and then closes it
// itself; a server that closes it sooner races the next POST, which Go
// does not retry (a POST is not replayable) and kube-scheduler reports as
// the extender's error. So agentsched's idle timeout is longer: 60 s after
// a burst (past the 30 s agentsched used to keep them) kube-scheduler's
// connections are still open; after 100 s of quiet (past the client's 90
// s) a second burst binds every pod with no transport error in
// kube-scheduler's log.
func scenarioExtenderIdle(c *cluster) {
	const n = 30
	const probe, idle = 60 * time.Second, 100 * time.Second
	port := agentschedPort(c)
	tmpl := agentPod("", "100m", "64Mi")
	c.createPods("first", n, tmpl, 8)
	c.waitAllBound(n)
	// The harness's own idle connections are not the ones under test.
	httpc.CloseIdleConnections()
	quiet := time.Now()
	before := establishedPeers(port)
	if len(before) == 0 {
		fail("no connection open to agentsched's port %d after the first burst", port)
	}
	logf("first %d pods bound; %d connections open to :%d; idling %s", n, len(before), port, idle)
	time.Sleep(probe)
	after := establishedPeers(port)
	kept := 0
	for p := range before {
		if after[p] {
			kept++
		}
	}
	logf("after %s idle: %d of %d connections still open", probe, kept, len(before))
	if kept == 0 {
		fail("every idle connection was closed within %s (kube-scheduler keeps them 90 s)", probe)
	}
	time.Sleep(idle - time.Since(quiet))
	logf("after %s idle: %d connections open", time.Since(quiet).Round(time.Second),
		len(establishedPeers(port)))
	c.createPods("second", n, tmpl, 8)
	c.waitAllBound(2 * n)
	logf("second %d pods bound", n)
	if bad := transportErrors(c, "kube-scheduler.log"); len(bad) > 0 {
		fail("kube-scheduler's log has %d extender transport errors, first: %s", len(bad), bad[0])
	}
	c.checkNoOvercommit()
}

// agentschedPort is the TCP port of the scenario's agentsched.
func agentschedPort(c *cluster) int {
	u, err := url.Parse(c.agentschedURL)
	check(err, "parse AGENTSCHED_URL")
	p, err := strconv.Atoi(u.Port())
	if err != nil {
		fail("AGENTSCHED_URL %q has no port", c.agentschedURL)
	}
	return p
}

// establishedPeers is the set of remote "address:port" of the established
// TCP connections whose local port is port (agentsched's side), from
// /proc/net/tcp and tcp6: the dev-cluster runs every process in this
// network namespace.
func establishedPeers(port int) map[string]bool {
	out := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			// sl local_address rem_address st ...; addresses HEX:PORT
			fs := strings.Fields(sc.Text())
			if len(fs) < 4 || fs[3] != "01" {
				continue
			}
			i := strings.LastIndexByte(fs[1], ':')
			if i < 0 {
				continue
			}
			lp, err := strconv.ParseUint(fs[1][i+1:], 16, 32)
			if err != nil || int(lp) != port {
				continue
			}
			out[fs[2]] = true
		}
		fh.Close()
	}
	return out
}

// transportErrors are the lines of a kube-scheduler log that report an
// extender call failing in transport (the connection closed under it).
func transportErrors(c *cluster, log string) []string {
	b, err := os.ReadFile(filepath.Join(c.stateDir, "logs", log))
	check(err, "read "+log)
	var bad []string
	for _, line := range strings.Split(string(b), "\n") {
		l := strings.ToLower(line)
		if !strings.Contains(l, "extender") && !strings.Contains(l, c.agentschedURL) {
			continue
		}
		for _, sign := range []string{"connection reset", "eof", "broken pipe", "server closed idle connection"} {
			if strings.Contains(l, sign) {
				bad = append(bad, fmt.Sprintf("%.300s", line))
				break
			}
		}
	}
	return bad
}
