package main

// Scenario volcano_sidebyside: Volcano's vc-agent-scheduler (dev-cluster
// --volcano-agent, schedulerName vc-agent-scheduler) and agentsched's fast
// path (the standalone layout, schedulerName agent-scheduler, shard mode
// none) schedule different pods onto the same nodes at once. Neither sees
// the other's binds before its own watch delivers them, and the API server
// does not check capacity on a Binding, so the two can give the same
// capacity away twice; the nodes are sized so that the burst fills them
// exactly (every pod fits, no slack), so the last slots of each node are
// contended.
//
// Without kubelets nothing refuses the pod that arrives second on a full
// node (a kubelet's admission would fail it with OutOfcpu), so a node can
// end up holding one pod more than it fits: neither scheduler can prevent
// it from its side, agentsched when its bind lands just after the other's
// (the other's not yet on its watch), vc-agent-scheduler the other way
// round. What is asserted is that agentsched sees every such pod: its
// agentsched_cache_foreign_overcommits_total grows by at least the pods
// the API server's nodes hold beyond their allocatable; and that nothing
// is lost.

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// sideBySideConflicts are agentsched's series that count a bind it lost to
// another scheduler: the binder refusing a node a foreign pod filled after
// the evaluation (the fast path requeues the pod), and the cache learning
// of a foreign bind that pushed a node past its allocatable.
var sideBySideConflicts = []string{
	`agentsched_bind_conflicts_total`,
	`agentsched_fastpath_binder_total{result="conflict"}`,
	`agentsched_fastpath_binder_total{result="requeue"}`,
	`agentsched_cache_foreign_overcommits_total{ours_in_flight="true"}`,
	`agentsched_cache_foreign_overcommits_total{ours_in_flight="false"}`,
}

// scenarioVolcanoSideBySide creates 2000 pods, alternately of agentsched's
// fast path and of vc-agent-scheduler, onto nodes that fit exactly 2000:
// every pod is bound (or Pending with a reason), every pod a node holds
// beyond its allocatable (cpu, memory, pods) was counted by agentsched
// (agentsched_cache_foreign_overcommits_total; with E2E_STRICT_OVERCOMMIT=1
// any overcommit fails), and agentsched's conflict counters (those and the
// binder's refusals of nodes the other filled) are printed.
func scenarioVolcanoSideBySide(c *cluster) {
	const total = 2000
	vcName := c.env["VC_AGENT_NAME"]
	if c.env["VOLCANO_AGENT"] != "1" || vcName == "" {
		fail("the dev-cluster runs no vc-agent-scheduler (up --volcano-agent)")
	}
	agent := agentPod("", "100m", "64Mi")
	vc := smallPod("", "100m", "64Mi")
	vc.Spec.SchedulerName = vcName
	nodes := c.nodes()
	fit := fitCapacity(nodes, podRequests(agent))
	logf("%d nodes fit %d of %d pods (half %s, half %s, interleaved)", len(nodes), fit, total,
		agentScheduler, vcName)
	before := c.metrics()
	for _, s := range sideBySideConflicts {
		if _, ok := before[s]; !ok {
			fail("agentsched /metrics has no %s series; have: %s", s, metricNames(before))
		}
	}

	start := time.Now()
	d := c.createInterleaved("side", total, []*corev1.Pod{agent, vc}, 32)
	logf("created %d pods in %.1fs (%.0f/s)", total, d.Seconds(), total/d.Seconds())
	want := fit
	if total < want {
		want = total
	}
	t, pods := c.waitSettled(total, want, 30*time.Second, 150*time.Second)
	el := time.Since(start)
	logf("settled after %.1fs: %.0f bound pods/s", el.Seconds(), float64(t.bound)/el.Seconds())
	after := c.metrics()

	// Who bound what, and what is left.
	type side struct{ bound, reason, undecided int }
	by := map[string]*side{agentScheduler: {}, vcName: {}}
	for i := range pods {
		s := by[pods[i].Spec.SchedulerName]
		if s == nil {
			fail("pod %s has schedulerName %q", pods[i].Name, pods[i].Spec.SchedulerName)
		}
		switch podState(&pods[i]) {
		case "bound":
			s.bound++
		case "pending-with-reason":
			s.reason++
		default:
			s.undecided++
		}
	}
	for _, n := range []string{agentScheduler, vcName} {
		logf("%-20s bound %4d, pending with a reason %3d, undecided %3d", n, by[n].bound, by[n].reason, by[n].undecided)
	}
	delta := map[string]float64{}
	var lost []string
	for _, s := range sideBySideConflicts {
		delta[s] = after[s] - before[s]
		lost = append(lost, fmt.Sprintf("%s +%.0f", s, delta[s]))
	}
	logf("agentsched's conflict counters over the burst:\n  %s", strings.Join(lost, "\n  "))
	foreign := delta[sideBySideConflicts[3]] + delta[sideBySideConflicts[4]]
	refused := delta[sideBySideConflicts[0]]

	// Overcommit: every pod beyond a node's allocatable must have been
	// seen by agentsched as a foreign bind past allocatable.
	over, excess := overcommittedNodes(c, nodes, podRequests(agent))
	if len(over) > 0 {
		logf("OVERCOMMIT on %d of %d nodes, %d pods beyond allocatable (agentsched counted %.0f foreign binds past allocatable):\n  %s",
			len(over), len(nodes), excess, foreign, strings.Join(over, "\n  "))
		if os.Getenv("E2E_STRICT_OVERCOMMIT") == "1" {
			fail("OVERCOMMIT on %d of %d nodes (E2E_STRICT_OVERCOMMIT=1)", len(over), len(nodes))
		}
		if foreign < float64(excess) {
			fail("%d pods beyond allocatable, but agentsched counted only %.0f foreign binds past allocatable", excess, foreign)
		}
	} else {
		logf("no overcommit: %d nodes checked against allocatable (cpu, memory, pods)", len(nodes))
	}
	if len(pods) != total {
		fail("LOST PODS: %d of %d pods exist", len(pods), total)
	}
	if t.pending > 0 {
		dumpUnbound(c, pods, 10)
		fail("%d pods neither bound nor Pending with a reason (%s)", t.pending, t)
	}
	logf("final: %s; capacity fits %d; unschedulable reasons: %v", t, fit, topReasons(t.reasons, 3))
	if t.bound+excess < want {
		dumpUnbound(c, pods, 5)
		fail("%d pods bound (%d beyond allocatable), but the nodes fit %d of them (capacity left unused)", t.bound, excess, want)
	}
	if by[agentScheduler].bound == 0 || by[vcName].bound == 0 {
		fail("one scheduler bound nothing (%s %d, %s %d): no side by side", agentScheduler,
			by[agentScheduler].bound, vcName, by[vcName].bound)
	}
	if refused+foreign == 0 {
		// Not a failure: the two may happen not to collide on any last
		// slot (21 and 27 of run-scenario's 200 nodes did in two runs;
		// with 20 nodes of 100 slots, 0 to 5); what is checked above is
		// that every collision is counted.
		logf("WARNING: no contention seen in this run (no binder refusal, no node past allocatable)")
	}
	if foreign > float64(excess) {
		logf("agentsched counted %.0f foreign binds past allocatable, more than the %d pods beyond allocatable at the end",
			foreign, excess)
	}
	logf("agentsched lost %.0f decisions to %s (binder refusals) and saw %.0f foreign binds past allocatable",
		refused, vcName, foreign)
}

// createInterleaved creates n pods named prefix-NNNNN with `workers`
// concurrent clients, pod i from tmpls[i % len(tmpls)], in index order (so
// the kinds arrive interleaved), and returns how long that took.
func (c *cluster) createInterleaved(prefix string, n int, tmpls []*corev1.Pod, workers int) time.Duration {
	start := time.Now()
	var next int64 = -1
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := atomic.AddInt64(&next, 1)
				if i >= int64(n) || firstErr.Load() != nil {
					return
				}
				p := tmpls[int(i)%len(tmpls)].DeepCopy()
				p.Name = fmt.Sprintf("%s-%05d", prefix, i)
				ctx, cancel := ctxTimeout(60 * time.Second)
				_, err := c.cs.CoreV1().Pods(c.ns).Create(ctx, p, metav1.CreateOptions{})
				cancel()
				if err != nil {
					firstErr.CompareAndSwap(nil, fmt.Errorf("create pod %s: %v", p.Name, err))
					return
				}
			}
		}()
	}
	wg.Wait()
	if e := firstErr.Load(); e != nil {
		fail("%v", e)
	}
	return time.Since(start)
}

// overcommittedNodes lists, per node, what its bound pods (every
// namespace, not terminated) request beyond its allocatable: cpu, memory,
// pods, and any other resource it advertises; and how many pods of
// requests req are held beyond allocatable on all nodes together.
func overcommittedNodes(c *cluster, nodes []corev1.Node, req corev1.ResourceList) ([]string, int) {
	used, count := c.boundRequests()
	var bad []string
	excess := 0
	known := map[string]bool{}
	for _, n := range nodes {
		known[n.Name] = true
		alloc := n.Status.Allocatable
		var over []string
		extra := 0
		for k, q := range used[n.Name] {
			if a, ok := alloc[k]; (ok && q.Cmp(a) > 0) || (!ok && !q.IsZero()) {
				over = append(over, fmt.Sprintf("%s %s > %s", k, q.String(), a.String()))
				if r, ok := req[k]; ok && !r.IsZero() {
					d := q.MilliValue() - a.MilliValue()
					if e := int((d + r.MilliValue() - 1) / r.MilliValue()); e > extra {
						extra = e
					}
				}
			}
		}
		if mp := alloc.Pods().Value(); int64(count[n.Name]) > mp {
			over = append(over, fmt.Sprintf("pods %d > %d", count[n.Name], mp))
			if e := count[n.Name] - int(mp); e > extra {
				extra = e
			}
		}
		excess += extra
		if len(over) > 0 {
			sort.Strings(over)
			bad = append(bad, n.Name+": "+strings.Join(over, ", "))
		}
	}
	for name := range count {
		if !known[name] {
			bad = append(bad, fmt.Sprintf("pods bound to unknown node %q", name))
		}
	}
	sort.Strings(bad)
	return bad, excess
}
