package main

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// replica is one agentsched of a dev-cluster started with
// --agentsched-replicas 2: its dev-cluster verb prefix and URL.
type replica struct {
	verb string // "agentsched" or "agentsched2" (dev-cluster VERB-kill/-start)
	url  string
}

// deletePods force-deletes (grace period 0: no kubelet would confirm) n
// bound pods whose names start with prefix.
func (c *cluster) deletePods(prefix string, n int) {
	zero := int64(0)
	for _, p := range c.pods() {
		if n == 0 {
			return
		}
		if p.Spec.NodeName == "" || !strings.HasPrefix(p.Name, prefix) {
			continue
		}
		ctx, cancel := ctxTimeout(30 * time.Second)
		err := c.cs.CoreV1().Pods(c.ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		cancel()
		check(err, "delete pod "+p.Name)
		n--
	}
	if n > 0 {
		fail("%d fewer bound %s* pods than asked to delete", n, prefix)
	}
}

// leaders reports which replicas say they lead (agentsched_leader 1).
func (c *cluster) leaders(rs []replica) []replica {
	var out []replica
	for _, r := range rs {
		if metricsAt(r.url)["agentsched_leader"] == 1 {
			out = append(out, r)
		}
	}
	return out
}

// waitOneLeader waits until exactly one replica leads and returns it.
func (c *cluster) waitOneLeader(rs []replica, limit time.Duration) replica {
	start := time.Now()
	for {
		l := c.leaders(rs)
		if len(l) == 1 {
			return l[0]
		}
		if len(l) > 1 {
			fail("%d replicas lead at once: %v", len(l), l)
		}
		if time.Since(start) > limit {
			fail("no replica leads %v after the start", limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Scenario: two agentsched replicas with --leader-elect (same flags, one
// Lease). Exactly one leads and the standby binds nothing; the leader is
// SIGKILLed mid-burst of fast-path pods (no release: the standby must wait
// the Lease out), the standby takes over within the lease duration plus a
// few rounds, and once the burst settles every pod that fits is bound once,
// the rest Pending with a reason, and no node is overcommitted. Started
// again, the killed replica stays on standby. Then the new leader is
// stopped with SIGTERM: it releases the Lease, the other leads well inside
// the duration and binds exactly the pods that fit into freed room.
func scenarioLeaderElection(c *cluster) {
	const total = 1000
	const leaseSeconds = 4 // run-scenario passes --leader-elect-lease-duration 4
	rs := []replica{{"agentsched", c.agentschedURL}, {"agentsched2", c.env.need("AGENTSCHED2_URL")}}
	leader := c.waitOneLeader(rs, 30*time.Second)
	standby := rs[0]
	if standby == leader {
		standby = rs[1]
	}
	logf("%s leads, %s is on standby", leader.verb, standby.verb)

	tmpl, fit := agentPodsFit(c, total)
	created := make(chan time.Duration, 1)
	go func() { created <- c.createPodsRetrying("agent", total, tmpl, 8, 5*time.Minute) }()
	killAt := fit / 4
	deadline := time.Now().Add(5 * time.Minute)
	for tallyPods(c.pods()).bound < killAt {
		if time.Now().After(deadline) {
			fail("fewer than %d pods bound after 5 min, never killed the leader mid-burst", killAt)
		}
		time.Sleep(50 * time.Millisecond)
	}
	sm := metricsAt(standby.url)
	standbyBinds := sm[`agentsched_k8s_binds_total{result="ok"}`]
	if standbyBinds != 0 || sm["agentsched_leader"] != 0 {
		fail("the standby bound %.0f pods (agentsched_leader %v) while %s led", standbyBinds,
			sm["agentsched_leader"], leader.verb)
	}
	boundAtKill := tallyPods(c.pods()).bound
	// Timed from before dev-cluster's kill (which returns only after
	// polling for the process's end) while the standby is polled meanwhile.
	killed := time.Now()
	killDone := c.devClusterAsync(leader.verb + "-kill")
	logf("%d pods bound: killing %s (SIGKILL)", boundAtKill, leader.verb)

	// The standby may lead only once the Lease went unrenewed for its whole
	// duration on its own clock; it must not wait much longer.
	for metricsAt(standby.url)["agentsched_leader"] != 1 {
		if time.Since(killed) > 3*leaseSeconds*time.Second {
			fail("%s does not lead %v after the leader was killed (lease %ds)", standby.verb,
				time.Since(killed).Round(time.Millisecond), leaseSeconds)
		}
		time.Sleep(20 * time.Millisecond)
	}
	takeover := time.Since(killed)
	check(<-killDone, "dev-cluster "+leader.verb+"-kill")
	// The last renewal was at most a round (a third of the duration, plus
	// the round's own time) before the kill, so a takeover before 2/3 of
	// the duration is too early; half is checked, for slack.
	if takeover < leaseSeconds*time.Second/2 {
		fail("%s took over %v after the kill, before the Lease (%ds) could have expired",
			standby.verb, takeover.Round(time.Millisecond), leaseSeconds)
	}
	logf("%s leads %v after the kill (lease duration %ds)", standby.verb, takeover.Round(time.Millisecond),
		leaseSeconds)

	d := <-created
	logf("all %d pods created after %.1fs", total, d.Seconds())
	t, pods := c.waitSettled(total, fit, 30*time.Second, 10*time.Minute)
	burstCheck(c, total, fit, t, pods)
	sm = metricsAt(standby.url)
	newBinds := sm[`agentsched_k8s_binds_total{result="ok"}`]
	// The old leader's binds posted before the kill may land after it (the
	// API server finishes them), so its share is at least boundAtKill.
	logf("bound pods: %d, of which the new leader bound %.0f and the old one %d (%d at the kill)",
		t.bound, newBinds, t.bound-int(newBinds), boundAtKill)
	if newBinds == 0 || t.bound-int(newBinds) < boundAtKill {
		fail("the new leader bound %.0f of %d pods, %d were bound at the kill", newBinds, t.bound, boundAtKill)
	}

	// The killed replica comes back as the standby.
	c.devCluster(leader.verb + "-start")
	if ok, last := waitOKAt(leader.url, "/readyz", time.Now(), 30*time.Second); !ok {
		fail("%s not ready 30s after it was started again (%s)", leader.verb, last)
	}
	time.Sleep(time.Second) // a few election rounds
	if l := c.leaders(rs); len(l) != 1 || l[0] != standby {
		fail("after the restart, want only %s leading, got %v", standby.verb, l)
	}

	// A clean stop (SIGTERM, a rolling update) gives the Lease up: the
	// other replica leads at its next round, well inside the lease
	// duration, and schedules what arrives next.
	stopped := time.Now()
	stopDone := c.devClusterAsync(standby.verb + "-stop")
	for metricsAt(leader.url)["agentsched_leader"] != 1 {
		if time.Since(stopped) > 3*leaseSeconds*time.Second {
			fail("%s does not lead %v after the leader stopped cleanly", leader.verb,
				time.Since(stopped).Round(time.Millisecond))
		}
		time.Sleep(20 * time.Millisecond)
	}
	handover := time.Since(stopped)
	check(<-stopDone, "dev-cluster "+standby.verb+"-stop")
	logf("%s leads %v after %s stopped with SIGTERM (it released the Lease)", leader.verb,
		handover.Round(time.Millisecond), standby.verb)
	if handover >= leaseSeconds*time.Second {
		fail("handover took %v: the stopped leader did not release the Lease (duration %ds)",
			handover.Round(time.Millisecond), leaseSeconds)
	}
	const late = 20
	okBinds := `agentsched_k8s_binds_total{result="ok"}`
	b0 := metricsAt(leader.url)[okBinds]
	c.deletePods("agent-", late)
	c.createPods("late", late, tmpl, 4)
	// As many pods as before (late created, as many deleted), as much room.
	t, pods = c.waitSettled(total, fit, 10*time.Second, 3*time.Minute)
	burstCheck(c, total, fit, t, pods)
	if got := metricsAt(leader.url)[okBinds] - b0; got != late {
		fail("the new leader bound %.0f pods into the %d freed places, want %d", got, late, late)
	}
	fmt.Printf("leader election: takeover after a crash %v, after a clean stop %v; %d pods bound, none twice\n",
		takeover.Round(time.Millisecond), handover.Round(time.Millisecond), t.bound)
}
