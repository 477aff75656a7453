package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// sidecarLease is the Lease the shipped kube-scheduler configuration elects on.
const sidecarLeaseNS, sidecarLeaseName = "kube-system", "agent-scheduler"

// sidecarPair is one replica of the sidecar Deployment in the dev-cluster:
// a kube-scheduler (dev-cluster verb prefix, log) and its agentsched.
type sidecarPair struct {
	verb, log, agentsched string
}

func (c *cluster) lease() *coordv1.Lease {
	ctx, cancel := ctxTimeout(10 * time.Second)
	defer cancel()
	l, err := c.cs.CoordinationV1().Leases(sidecarLeaseNS).Get(ctx, sidecarLeaseName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	check(err, "get Lease "+sidecarLeaseNS+"/"+sidecarLeaseName)
	return l
}

func holder(l *coordv1.Lease) string {
	if l == nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// acquiredIn says whether kube-scheduler's log reports it acquired the Lease.
func (c *cluster) acquiredIn(log string) bool {
	b, err := os.ReadFile(filepath.Join(c.stateDir, "logs", log))
	check(err, "read "+log)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(strings.ToLower(line), "successfully acquired lease") &&
			strings.Contains(line, sidecarLeaseNS+"/"+sidecarLeaseName) {
			return true
		}
	}
	return false
}

// extenderCalls sums an agentsched's filter and prioritize requests and
// its binds.
func extenderCalls(url string) float64 {
	m := metricsAt(url)
	f, _ := verbCount(m, "filter")
	p, _ := verbCount(m, "prioritize")
	b, _ := verbCount(m, "bind")
	return f + p + b
}

// settledCalls is extenderCalls once it stopped changing for half a
// second: a pod shows as bound in the API server before agentsched has
// answered the bind and counted the request.
func settledCalls(url string) float64 {
	last := extenderCalls(url)
	for i := 0; i < 20; i++ {
		time.Sleep(500 * time.Millisecond)
		cur := extenderCalls(url)
		if cur == last {
			return cur
		}
		last = cur
	}
	return last
}

// Scenario: two replicas of the sidecar Deployment (kube-scheduler with
// leader election on as shipped, each calling its own agentsched). One
// leads and schedules; only its agentsched gets extender calls. Its
// kube-scheduler is killed (SIGKILL: no release, the Lease must run out);
// the other takes the Lease once it ran out (15 s as shipped, plus the
// elector's retry periods: at most 23.8 s after the kill), pods keep being
// scheduled, now through the other agentsched alone.
func scenarioLeaderFailoverSidecar(c *cluster) {
	const leaseDuration = 15 * time.Second // the shipped default
	const retryPeriod = 2 * time.Second
	pairs := []sidecarPair{
		{"scheduler", "kube-scheduler.log", c.agentschedURL},
		{"scheduler2", "kube-scheduler-2.log", c.env.need("AGENTSCHED2_URL")},
	}
	c.env.need("SCHEDULER2_URL")
	// Exactly one leads.
	var leader, standby sidecarPair
	deadline := time.Now().Add(60 * time.Second)
	for {
		a, b := c.acquiredIn(pairs[0].log), c.acquiredIn(pairs[1].log)
		if a && b {
			fail("both kube-schedulers acquired the Lease")
		}
		if a || b {
			leader, standby = pairs[0], pairs[1]
			if b {
				leader, standby = pairs[1], pairs[0]
			}
			break
		}
		if time.Now().After(deadline) {
			fail("no kube-scheduler acquired Lease %s/%s within 60s", sidecarLeaseNS, sidecarLeaseName)
		}
		time.Sleep(200 * time.Millisecond)
	}
	first := c.lease()
	logf("%s leads (Lease holder %q), %s is on standby", leader.verb, holder(first), standby.verb)

	l0, s0 := extenderCalls(leader.agentsched), extenderCalls(standby.agentsched)
	const n = 30
	tmpl := agentPod("", "250m", "256Mi")
	c.createPods("before", n, tmpl, 4)
	c.waitAllBoundN("before", n)
	l1, s1 := settledCalls(leader.agentsched), extenderCalls(standby.agentsched)
	logf("%d pods bound; extender calls: leader's agentsched +%.0f, standby's +%.0f", n, l1-l0, s1-s0)
	if l1-l0 < n {
		fail("the leader's agentsched got %.0f extender calls for %d pods", l1-l0, n)
	}
	if s1 != s0 {
		fail("the standby's agentsched got %.0f extender calls while %s led", s1-s0, leader.verb)
	}

	last := c.lease()
	killed := time.Now()
	c.devCluster(leader.verb + "-kill")
	// Pods created while nobody leads wait in the API server.
	c.createPods("during", n, tmpl, 4)
	var taken *coordv1.Lease
	for {
		l := c.lease()
		if h := holder(l); h != "" && h != holder(last) {
			taken = l
			break
		}
		if time.Since(killed) > leaseDuration+6*retryPeriod {
			fail("%s's kube-scheduler does not hold the Lease %v after the leader was killed (holder %q)",
				standby.verb, time.Since(killed).Round(time.Millisecond), holder(l))
		}
		time.Sleep(100 * time.Millisecond)
	}
	takeover := time.Since(killed)
	// From the last renewal the killed leader made: the standby may take
	// the Lease only once it went unrenewed for leaseDuration, and tries
	// every retryPeriod.
	var sinceRenew time.Duration
	if last.Spec.RenewTime != nil && taken.Spec.AcquireTime != nil {
		sinceRenew = taken.Spec.AcquireTime.Sub(last.Spec.RenewTime.Time)
	}
	logf("%s took the Lease %v after the kill (holder %q; %v after the last renewal; lease %v)",
		standby.verb, takeover.Round(time.Millisecond), holder(taken), sinceRenew.Round(time.Millisecond), leaseDuration)
	// The elector writes the Lease, then logs: give the line a moment to
	// reach the file.
	for logged := time.Now(); !c.acquiredIn(standby.log); time.Sleep(100 * time.Millisecond) {
		if time.Since(logged) > 5*time.Second {
			fail("the Lease changed hands but %s's log does not say it acquired it", standby.verb)
		}
	}
	// client-go's elector tries every retryPeriod plus up to 1.2 of it
	// (jitter): the standby sees the last renewal up to 4.4 s late, waits
	// the lease duration from then, and tries again up to 4.4 s later. So
	// the takeover lands between the lease duration less a renewal period
	// (the renewal before the kill) and 15 + 2 x 4.4 s after the kill.
	maxTry := retryPeriod + retryPeriod*12/10
	if takeover > leaseDuration+2*maxTry {
		fail("takeover took %v, more than the lease duration %v and two retry periods with jitter (%v)",
			takeover.Round(time.Millisecond), leaseDuration, leaseDuration+2*maxTry)
	}
	if takeover < leaseDuration-retryPeriod {
		fail("takeover after %v: before the Lease (%v) could have expired", takeover.Round(time.Millisecond),
			leaseDuration)
	}

	c.waitAllBoundN("during", n)
	boundAfter := time.Since(killed)
	c.createPods("after", n, tmpl, 4)
	c.waitAllBoundN("after", n)
	l2, s2 := extenderCalls(leader.agentsched), settledCalls(standby.agentsched)
	logf("%d pods created during the failover bound %v after the kill, %d more after it; extender calls since: "+
		"old leader's agentsched +%.0f, new leader's +%.0f", n, boundAfter.Round(time.Millisecond), n, l2-l1, s2-s1)
	if l2 != l1 {
		fail("the old leader's agentsched got %.0f extender calls after its kube-scheduler was killed", l2-l1)
	}
	if s2-s1 < 2*n {
		fail("the new leader's agentsched got %.0f extender calls for %d pods", s2-s1, 2*n)
	}
	c.checkNoOvercommit()
	fmt.Printf("sidecar failover: Lease taken %v after the leader's kube-scheduler was killed (lease %v); "+
		"%d pods bound, through the leader's agentsched only\n", takeover.Round(time.Millisecond), leaseDuration, 3*n)
}

// waitAllBoundN waits (up to 2 min) for the n pods named prefix-* to be bound.
func (c *cluster) waitAllBoundN(prefix string, n int) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		bound := 0
		var unbound []corev1.Pod
		for _, p := range c.pods() {
			if !strings.HasPrefix(p.Name, prefix+"-") {
				continue
			}
			if p.Spec.NodeName != "" {
				bound++
			} else {
				unbound = append(unbound, p)
			}
		}
		if bound == n {
			return
		}
		if time.Now().After(deadline) {
			dumpUnbound(c, unbound, 5)
			fail("%d of %d %s-* pods bound after 2 min", bound, n, prefix)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

const gpuResource, gpuShareResource = "nvidia.com/gpu", "agentsched.io/gpu-milli"

// Scenario: GPU-share pods (agentsched.io/gpu-milli, 300..600 thousandths
// of one device; about 300 KiB each, padPod) with schedulerName agent-scheduler pass the shipped
// sidecar configuration (the harness's gpu-share-advertiser writes
// devices x 1000 of the resource on the GPU nodes, NodeResourcesFit counts
// it, agentsched filters each share against one of the nodes'
// nvidia.com/gpu devices) and are bound; no node ever carries more
// share than its devices x 1000, read back from the API server; every
// bound pod carries the device agentsched chose in its annotations
// (docs/gpu.md), on its node, and no device holds more than 1000
// thousandths by them; a node without GPUs gets none. Then, the shares
// deleted, a 2-GPU and a 1-GPU pod go through the same sidecar and carry
// their devices.
func scenarioGPUShareSidecar(c *cluster) {
	nodes := c.nodes()
	if len(nodes) < 3 {
		fail("want 3 nodes, have %d", len(nodes))
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	devices := map[string]int64{nodes[0].Name: 1, nodes[1].Name: 2, nodes[2].Name: 0}
	for i := range nodes {
		nd := &nodes[i]
		if d := devices[nd.Name]; d > 0 {
			q := *resource.NewQuantity(d, resource.DecimalSI)
			nd.Status.Capacity[gpuResource] = q
			nd.Status.Allocatable[gpuResource] = q
			ctx, cancel := ctxTimeout(30 * time.Second)
			_, err := c.cs.CoreV1().Nodes().UpdateStatus(ctx, nd, metav1.UpdateOptions{})
			cancel()
			check(err, "give node "+nd.Name+" GPUs")
		}
	}
	logf("nvidia.com/gpu: %s 1, %s 2, %s none", nodes[0].Name, nodes[1].Name, nodes[2].Name)
	c.waitShareAdvertised(devices, 30*time.Second)
	// Wait until agentsched's cache has the devices: a dry run of one share
	// must fit somewhere.
	probe := gpuPod("probe", 300)
	probe.Namespace = c.ns
	names := []string{nodes[0].Name, nodes[1].Name, nodes[2].Name}
	deadline := time.Now().Add(30 * time.Second)
	for {
		passed, failed := c.extenderFilter(probe, names, extenderPrefix(c))
		if len(passed) == 2 {
			logf("agentsched's filter: a 300-share fits %v; %v", passed, failed)
			break
		}
		if time.Now().After(deadline) {
			fail("agentsched's filter still passes %v for a 300-share after 30s (failed %v)", passed, failed)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// 300, 400, 500, 600, ... : 3000 thousandths of devices, 12 pods
	// asking 5400; at least one per device fits.
	shares := []int64{300, 400, 500, 600, 300, 400, 500, 600, 300, 400, 500, 600}
	for i, s := range shares {
		p := gpuPod(fmt.Sprintf("share-%02d", i), s)
		padPod(p)
		ctx, cancel := ctxTimeout(30 * time.Second)
		_, err := c.cs.CoreV1().Pods(c.ns).Create(ctx, p, metav1.CreateOptions{})
		cancel()
		check(err, "create pod "+p.Name)
	}
	t, pods := c.waitSettled(len(shares), len(shares), 15*time.Second, 3*time.Minute)
	logf("settled: %s; reasons: %v", t, topReasons(t.reasons, 3))
	if t.pending > 0 {
		dumpUnbound(c, pods, 5)
		fail("%d GPU-share pods neither bound nor Pending with a reason", t.pending)
	}
	used := map[string]int64{}
	count := map[string]int{}
	for _, p := range pods {
		if p.Spec.NodeName == "" {
			continue
		}
		q := podRequests(&p)[gpuShareResource]
		used[p.Spec.NodeName] += q.Value()
		count[p.Spec.NodeName]++
	}
	for _, n := range names {
		logf("  %s: %d GPU(s), %d pods, %d of %d thousandths", n, devices[n], count[n], used[n], devices[n]*1000)
		if used[n] > devices[n]*1000 {
			fail("node %s carries %d thousandths of GPU share, has %d device(s)", n, used[n], devices[n])
		}
	}
	if t.bound < 3 {
		fail("only %d GPU-share pods bound on 3 devices (each fits at least one)", t.bound)
	}
	checkDeviceAnnotations(pods, devices)
	for r := range t.reasons {
		if !strings.Contains(r, "Insufficient "+gpuShareResource) && !strings.Contains(r, "Insufficient "+gpuResource) {
			fail("a GPU-share pod is Pending for another reason than its share: %q", r)
		}
	}
	// Whole and two-GPU pods through the same sidecar, on emptied devices:
	// the pair first (only the 2-device node holds it), then one device
	// (only the 1-device node is left).
	for _, p := range pods {
		c.deletePodGone(p.Name)
	}
	c.waitDevicesFree(names, nodes[0].Name, nodes[1].Name)
	whole := []struct {
		name  string
		k     int64
		node  string
		annot string
	}{{"two-gpu", 2, nodes[1].Name, "0,1"}, {"one-gpu", 1, nodes[0].Name, "0"}}
	for _, w := range whole {
		c.createPod(wholeGPUPod(w.name, w.k))
		if at := c.waitBoundNamed([]string{w.name}, 60*time.Second); at[w.name] != w.node {
			fail("%d-GPU pod %s bound to %q, want %s", w.k, w.name, at[w.name], w.node)
		}
	}
	for _, p := range c.pods() {
		for _, w := range whole {
			a := p.Annotations
			if p.Name == w.name && (a["agentsched.io/gpu-devices"] != w.annot ||
				a["agentsched.io/gpu-milli"] != "1000" || a["agentsched.io/gpu-node"] != w.node) {
				fail("%d-GPU pod %s on %s carries devices %q, milli %q, node %q; want %q, 1000, %s", w.k, p.Name,
					p.Spec.NodeName, a["agentsched.io/gpu-devices"], a["agentsched.io/gpu-milli"],
					a["agentsched.io/gpu-node"], w.annot, w.node)
			}
		}
	}
	for _, w := range whole {
		c.deletePodGone(w.name)
	}
	c.waitDevicesFree(names, nodes[0].Name, nodes[1].Name)
	evicted, high := c.preemptShare(nodes[0].Name, nodes[1].Name)
	b, _ := bindsDone(c.metrics())
	fmt.Printf("gpu share: %d of %d pods bound through kube-scheduler and agentsched (agentsched binds %.0f); "+
		"no node over its devices; a 2-GPU and a 1-GPU pod bound with their devices on the pod; "+
		"a higher-priority share preempted %v and took their device on %s\n",
		t.bound, len(shares), b, evicted, high)
}

// waitDevicesFree waits up to 30 s until agentsched's filter passes a pod
// of one whole GPU on one (a 1-device node) and of two on two (a 2-device
// node): its cache follows deletions through its watch, a moment after the
// API server, and a pod the extender turns away meanwhile stays pending in
// kube-scheduler with no event to wake it until its periodic retry of
// unschedulable pods (5 minutes).
func (c *cluster) waitDevicesFree(names []string, one, two string) {
	deadline := time.Now().Add(30 * time.Second)
	for _, w := range []struct {
		k    int64
		node string
	}{{1, one}, {2, two}} {
		probe := wholeGPUPod(fmt.Sprintf("probe-%d", w.k), w.k)
		probe.Namespace = c.ns
		for {
			passed, failed := c.extenderFilter(probe, names, extenderPrefix(c))
			if contains(passed, w.node) {
				break
			}
			if time.Now().After(deadline) {
				fail("agentsched's filter still turns a %d-GPU pod away from %s 30s after the deletions: %v",
					w.k, w.node, failed)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// preemptShare runs kube-scheduler's preemption through agentsched's
// preempt verb, as shipped (MetaVictims: UIDs only). One (a device) holds
// three 300-milli shares of priority 10; two (two devices) 600 + 300 on
// device 0 and 600 on device 1, the 600s of priority 100. A 700-milli
// share of priority 1000 fits no device. By kube-scheduler's own count of
// the share resource, evicting the 300 on two makes room (1200 + 700 of
// 2000), and on one two of the 300s: two has the cheaper victims, and
// kube-scheduler would pick it. But on two no device would then hold 700
// (400 free on each), so agentsched drops two from the candidates, and
// kube-scheduler evicts two 300s on one, where the 700 is bound with
// device 0. Returns the evicted pods and the node.
func (c *cluster) preemptShare(one, two string) ([]string, string) {
	classes := map[string]int32{"agentsched-e2e-gpu-10": 10, "agentsched-e2e-gpu-100": 100,
		"agentsched-e2e-gpu-1000": 1000}
	for name, v := range classes {
		ctx, cancel := ctxTimeout(30 * time.Second)
		_, err := c.cs.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Value: v,
			Description: "agentsched e2e: shares that preempt and are preempted",
		}, metav1.CreateOptions{})
		cancel()
		if err != nil && !apierrors.IsAlreadyExists(err) {
			check(err, "create PriorityClass "+name)
		}
	}
	share := func(name string, milli int64, prio int32, node string) *corev1.Pod {
		p := gpuPod(name, milli)
		p.Spec.PriorityClassName = fmt.Sprintf("agentsched-e2e-gpu-%d", prio)
		p.Spec.Priority = &prio
		if node != "" {
			pinnedTo(p, node)
		}
		return p
	}
	// In this order, so that the 300 on two shares device 0 with a 600.
	low := []struct {
		name  string
		milli int64
		prio  int32
		node  string
	}{{"one-a", 300, 10, one}, {"one-b", 300, 10, one}, {"one-c", 300, 10, one},
		{"two-a", 600, 100, two}, {"two-b", 600, 100, two}, {"two-c", 300, 10, two}}
	for _, l := range low {
		c.createPod(share(l.name, l.milli, l.prio, l.node))
		if at := c.waitBoundNamed([]string{l.name}, 60*time.Second)[l.name]; at != l.node {
			fail("share %s bound to %s, want %s", l.name, at, l.node)
		}
	}
	uids := map[string]string{}
	for _, p := range c.pods() {
		uids[p.Name] = string(p.UID)
		if p.Name == "two-c" && p.Annotations["agentsched.io/gpu-devices"] != "0" {
			fail("two-c holds device %q on %s, want 0 (beside two-a's 600)",
				p.Annotations["agentsched.io/gpu-devices"], two)
		}
	}
	const calls = `agentsched_request_duration_seconds_count{verb="preempt"}`
	before := c.metrics()[calls]
	c.createPod(share("high", 700, 1000, ""))
	if got := c.waitBoundNamed([]string{"high"}, 90*time.Second)["high"]; got != one {
		fail("the 700-milli share of priority 1000 bound to %s, want %s (no device on %s holds it "+
			"after kube-scheduler's victims there)", got, one, two)
	}
	after := c.metrics()[calls]
	if after <= before {
		fail("kube-scheduler preempted without asking agentsched's preempt verb (%.0f calls before, %.0f after)",
			before, after)
	}
	alive := map[string]bool{}
	for _, p := range c.pods() {
		if p.DeletionTimestamp == nil && uids[p.Name] == string(p.UID) {
			alive[p.Name] = true
		}
		if p.Name == "high" {
			a := p.Annotations
			if a["agentsched.io/gpu-devices"] != "0" || a["agentsched.io/gpu-milli"] != "700" ||
				a["agentsched.io/gpu-node"] != one {
				fail("the preemptor on %s carries devices %q, milli %q, node %q; want 0, 700, %s", one,
					a["agentsched.io/gpu-devices"], a["agentsched.io/gpu-milli"], a["agentsched.io/gpu-node"], one)
			}
		}
	}
	var evicted []string
	for _, l := range low {
		if !alive[l.name] {
			evicted = append(evicted, l.name)
		}
		if l.node == two && !alive[l.name] {
			fail("%s on %s was evicted: no device there would hold the 700 after it", l.name, two)
		}
	}
	if len(evicted) != 2 {
		fail("evicted %v on %s, want two of its three 300s", evicted, one)
	}
	logf("preemption: %v evicted on %s for the 700-milli share, %s's pods kept; %d preempt call(s) to agentsched",
		evicted, one, two, int(after-before))
	return evicted, one
}

// checkDeviceAnnotations reads every bound share pod's device annotations
// as the API server holds them: one device of its node, its share, its
// node; and sums the shares per device, none above 1000.
func checkDeviceAnnotations(pods []corev1.Pod, devices map[string]int64) {
	perDevice := map[string]int64{}
	annotated := 0
	for _, p := range pods {
		if p.Spec.NodeName == "" {
			continue
		}
		a := p.Annotations
		devs, milli, node := a["agentsched.io/gpu-devices"], a["agentsched.io/gpu-milli"], a["agentsched.io/gpu-node"]
		if devs == "" {
			fail("pod %s bound to %s without agentsched.io/gpu-devices (annotations %v)", p.Name, p.Spec.NodeName, a)
		}
		q := podRequests(&p)[gpuShareResource]
		if milli != strconv.FormatInt(q.Value(), 10) || node != p.Spec.NodeName {
			fail("pod %s (share %d on %s): gpu-milli %q, gpu-node %q", p.Name, q.Value(), p.Spec.NodeName, milli, node)
		}
		d, err := strconv.Atoi(devs)
		if err != nil || d < 0 || int64(d) >= devices[p.Spec.NodeName] {
			fail("pod %s on %s (%d device(s)): gpu-devices %q is not one of its devices", p.Name, p.Spec.NodeName,
				devices[p.Spec.NodeName], devs)
		}
		perDevice[fmt.Sprintf("%s/%d", p.Spec.NodeName, d)] += q.Value()
		annotated++
	}
	keys := make([]string, 0, len(perDevice))
	for k := range perDevice {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		logf("  device %s: %d thousandths by the pods' annotations", k, perDevice[k])
		if perDevice[k] > 1000 {
			fail("device %s holds %d thousandths by the pods' annotations", k, perDevice[k])
		}
	}
	logf("every bound share pod (%d) carries its device; none over 1000", annotated)
}

func gpuPod(name string, share int64) *corev1.Pod {
	p := agentPod(name, "100m", "128Mi")
	q := *resource.NewQuantity(share, resource.DecimalSI)
	p.Spec.Containers[0].Resources.Requests[gpuShareResource] = q
	p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{gpuShareResource: q}
	return p
}
