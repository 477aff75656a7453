package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// volcanoScheduler is vc-scheduler's default schedulerName.
const volcanoScheduler = "volcano"

// groupNameAnnotation ties a pod to its PodGroup (Volcano's
// scheduling.k8s.io/group-name).
const groupNameAnnotation = "scheduling.k8s.io/group-name"

var podGroupGVR = schema.GroupVersionResource{Group: "scheduling.volcano.sh", Version: "v1beta1", Resource: "podgroups"}

// devicesPerNode is what the scenario gives each GPU node: 4 devices of
// 1000 thousandths.
const devicesPerNode = 4

// volcanoGPUPod is gpuPod for vc-scheduler.
func volcanoGPUPod(name string, share int64) *corev1.Pod {
	p := gpuPod(name, share)
	p.Spec.SchedulerName = volcanoScheduler
	return p
}

// pinnedTo keeps p to node through its hostname label.
func pinnedTo(p *corev1.Pod, node string) *corev1.Pod {
	p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
	return p
}

func (c *cluster) createPod(p *corev1.Pod) {
	ctx, cancel := ctxTimeout(30 * time.Second)
	defer cancel()
	_, err := c.cs.CoreV1().Pods(c.ns).Create(ctx, p, metav1.CreateOptions{})
	check(err, "create pod "+p.Name)
}

// deletePodGone deletes a pod at once (no kubelet runs) and waits until the
// API server no longer has it.
func (c *cluster) deletePodGone(name string) {
	zero := int64(0)
	ctx, cancel := ctxTimeout(30 * time.Second)
	err := c.cs.CoreV1().Pods(c.ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	cancel()
	if err != nil && !apierrors.IsNotFound(err) {
		fail("delete pod %s: %v", name, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := ctxTimeout(10 * time.Second)
		_, err := c.cs.CoreV1().Pods(c.ns).Get(ctx, name, metav1.GetOptions{})
		cancel()
		if apierrors.IsNotFound(err) {
			return
		}
		if time.Now().After(deadline) {
			fail("pod %s still exists 30s after its deletion (%v)", name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitBoundNamed waits (up to timeout) for the named pods to be bound and
// returns pod name -> node.
func (c *cluster) waitBoundNamed(names []string, timeout time.Duration) map[string]string {
	deadline := time.Now().Add(timeout)
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	for {
		at := map[string]string{}
		var unbound []corev1.Pod
		for _, p := range c.pods() {
			if !want[p.Name] {
				continue
			}
			if p.Spec.NodeName != "" {
				at[p.Name] = p.Spec.NodeName
			} else {
				unbound = append(unbound, p)
			}
		}
		if len(at) == len(names) {
			return at
		}
		if time.Now().After(deadline) {
			dumpUnbound(c, unbound, 5)
			fail("%d of %d pods %v bound after %v", len(at), len(names), names, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// vcDecided says whether a pod is bound or Pending with a scheduler's
// reason: agentsched's fast path and vc-scheduler both write PodScheduled
// False with a reason (Volcano's message may be empty).
func vcDecided(p *corev1.Pod) bool {
	if p.Spec.NodeName != "" {
		return true
	}
	cond := scheduledCondition(p)
	return cond != nil && cond.Status == corev1.ConditionFalse && cond.Reason != ""
}

// waitDecided waits until every pod named prefix-* (for each prefix) is
// bound or Pending with a reason, and the count of bound ones has not
// changed for quiet; fails after timeout.
func (c *cluster) waitDecided(prefixes []string, total int, quiet, timeout time.Duration) []corev1.Pod {
	start := time.Now()
	lastChange, lastBound := start, -1
	for {
		var pods []corev1.Pod
		decided, bound := 0, 0
		for _, p := range c.pods() {
			for _, pre := range prefixes {
				if strings.HasPrefix(p.Name, pre+"-") {
					pods = append(pods, p)
					if vcDecided(&p) {
						decided++
					}
					if p.Spec.NodeName != "" {
						bound++
					}
					break
				}
			}
		}
		if bound != lastBound {
			lastBound, lastChange = bound, time.Now()
			logf("  %v: %d of %d bound, %d decided (%.0fs)", prefixes, bound, total, decided,
				time.Since(start).Seconds())
		}
		if len(pods) == total && decided == total && time.Since(lastChange) >= quiet {
			return pods
		}
		if time.Since(start) > timeout {
			var undecided []corev1.Pod
			for _, p := range pods {
				if !vcDecided(&p) {
					undecided = append(undecided, p)
				}
			}
			dumpUnbound(c, undecided, 5)
			fail("%v: %d pods of %d, %d decided after %v", prefixes, len(pods), total, decided, timeout)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// shareOf is a pod's agentsched.io/gpu-milli request.
func shareOf(p *corev1.Pod) int64 {
	q := podRequests(p)[gpuShareResource]
	return q.Value()
}

// packs says whether shares fit on `devices` devices of 1000 thousandths
// each, a share never spanning devices (exact: backtracking, largest first).
func packs(shares []int64, devices int) bool {
	s := append([]int64(nil), shares...)
	sort.Slice(s, func(i, j int) bool { return s[i] > s[j] })
	free := make([]int64, devices)
	for i := range free {
		free[i] = 1000
	}
	var place func(i int) bool
	place = func(i int) bool {
		if i == len(s) {
			return true
		}
		seen := map[int64]bool{}
		for d := range free {
			if free[d] < s[i] || seen[free[d]] {
				continue
			}
			seen[free[d]] = true
			free[d] -= s[i]
			if place(i + 1) {
				return true
			}
			free[d] += s[i]
		}
		return false
	}
	return place(0)
}

// checkDevices fails unless the GPU shares bound to each GPU node (every
// namespace) can sit on its devices: per node at most devices x 1000 and a
// packing exists with every device at most 1000. Returns node -> shares.
func (c *cluster) checkDevices(gpuNodes []string) map[string][]int64 {
	ctx, cancel := ctxTimeout(60 * time.Second)
	defer cancel()
	all, err := c.cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	check(err, "list all pods")
	shares := map[string][]int64{}
	for i := range all.Items {
		p := &all.Items[i]
		if p.Spec.NodeName == "" {
			continue
		}
		if s := shareOf(p); s > 0 {
			shares[p.Spec.NodeName] = append(shares[p.Spec.NodeName], s)
		}
	}
	isGPU := map[string]bool{}
	for _, n := range gpuNodes {
		isGPU[n] = true
		var sum int64
		for _, s := range shares[n] {
			sum += s
		}
		logf("  %s: %d shares, %d of %d thousandths: %v", n, len(shares[n]), sum, devicesPerNode*1000, shares[n])
		if sum > devicesPerNode*1000 {
			fail("node %s carries %d thousandths of GPU share on %d devices", n, sum, devicesPerNode)
		}
		if !packs(shares[n], devicesPerNode) {
			fail("node %s: shares %v cannot sit on %d devices of 1000 (a device is double-booked)", n, shares[n],
				devicesPerNode)
		}
	}
	for n, s := range shares {
		if !isGPU[n] {
			fail("node %s has no GPUs but carries GPU shares %v", n, s)
		}
	}
	return shares
}

// volcanoAnswers reads agentsched_volcano_answers_total{verb,result}.
func volcanoAnswers(m map[string]float64, verb, result string) float64 {
	return m[fmt.Sprintf("agentsched_volcano_answers_total{verb=%q,result=%q}", verb, result)]
}

// vcTaskBody is the task of a PredicateRequest/PrioritizeRequest, as
// vc-scheduler sends it (its embedded Pod is what agentsched reads).
func vcTaskBody(p *corev1.Pod) map[string]interface{} {
	return map[string]interface{}{"UID": string(p.UID), "Name": p.Name, "Namespace": p.Namespace, "Pod": p}
}

// agentschedPredicate asks agentsched's /volcano/predicate for pod on node:
// code and reason.
func (c *cluster) agentschedPredicate(p *corev1.Pod, node string) (int, string) {
	var r struct {
		Status string `json:"status"`
		Code   int    `json:"code"`
	}
	code, body := c.postAgentsched("/volcano/predicate",
		map[string]interface{}{"task": vcTaskBody(p), "node": map[string]interface{}{"Name": node}})
	if code != 200 {
		fail("POST /volcano/predicate: HTTP %d: %.300s", code, body)
	}
	check(json.Unmarshal([]byte(body), &r), "predicate answer "+body)
	return r.Code, r.Status
}

// agentschedScores asks agentsched's /volcano/prioritize for pod over nodes.
func (c *cluster) agentschedScores(p *corev1.Pod, nodes []string) map[string]float64 {
	var list []map[string]interface{}
	for _, n := range nodes {
		list = append(list, map[string]interface{}{"Name": n})
	}
	var r struct {
		NodeScore    map[string]float64 `json:"nodeScore"`
		ErrorMessage string             `json:"errorMessage"`
	}
	code, body := c.postAgentsched("/volcano/prioritize", map[string]interface{}{"task": vcTaskBody(p), "nodes": list})
	if code != 200 {
		fail("POST /volcano/prioritize: HTTP %d: %.300s", code, body)
	}
	check(json.Unmarshal([]byte(body), &r), "prioritize answer "+body)
	return r.NodeScore
}

func topScored(scores map[string]float64) string {
	best, bestScore := "", -1.0
	for n, s := range scores {
		if s > bestScore || s == bestScore && n < best {
			best, bestScore = n, s
		}
	}
	return best
}

// countLog counts the lines of STATE/logs/NAME that contain s.
func (c *cluster) countLog(name, s string) int {
	b, err := os.ReadFile(filepath.Join(c.stateDir, "logs", name))
	check(err, "read "+name)
	return strings.Count(string(b), s)
}

// createPodGroup creates a PodGroup (scheduling.volcano.sh/v1beta1) with
// minMember in the scenario's namespace, in Volcano's default Queue.
func (c *cluster) createPodGroup(name string, minMember int64) {
	pg := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "scheduling.volcano.sh/v1beta1",
		"kind":       "PodGroup",
		"metadata":   map[string]interface{}{"name": name, "namespace": c.ns},
		"spec":       map[string]interface{}{"minMember": minMember, "queue": "default"},
	}}
	ctx, cancel := ctxTimeout(30 * time.Second)
	defer cancel()
	_, err := c.dynamicClient().Resource(podGroupGVR).Namespace(c.ns).Create(ctx, pg, metav1.CreateOptions{})
	check(err, "create PodGroup "+name)
}

// deletePending deletes the unbound pods named prefix-* and the PodGroups
// vc-controller-manager made for them (no garbage collector runs here, and
// Volcano's overcommit plugin counts an Inqueue PodGroup's minResources
// against every job still to enqueue). Returns how many pods it deleted.
func (c *cluster) deletePending(prefixes ...string) int {
	dc := c.dynamicClient()
	n := 0
	for _, p := range c.pods() {
		match := false
		for _, pre := range prefixes {
			match = match || strings.HasPrefix(p.Name, pre+"-")
		}
		if !match || p.Spec.NodeName != "" {
			continue
		}
		c.deletePodGone(p.Name)
		n++
		if pg := p.Annotations[groupNameAnnotation]; pg != "" {
			ctx, cancel := ctxTimeout(30 * time.Second)
			err := dc.Resource(podGroupGVR).Namespace(c.ns).Delete(ctx, pg, metav1.DeleteOptions{})
			cancel()
			if err != nil && !apierrors.IsNotFound(err) {
				fail("delete PodGroup %s: %v", pg, err)
			}
		}
	}
	return n
}

// Scenario volcano_extender: vc-scheduler (built from Volcano's source,
// deploy/volcano/volcano-scheduler.conf as shipped) schedules GPU-share
// pods through agentsched's /volcano verbs while agentsched's fast path
// places its own on the same nodes.
//
// Nodes: "full" (4 devices, each holding a 600 share of the fast path:
// Volcano's aggregate says 1600 free, no device has 600), "packed" (one
// device holding a 400 share), "spread" (no share, the same CPU and memory
// requested as packed), and a node without GPUs.
//  1. agentsched's predicate refuses a 600 share on full; its prioritize
//     scores packed (the 600 fills the partly used device) above spread.
//  2. 600-share Volcano pods land on packed, never on full; Volcano's own
//     scorers (nodeorder, binpack: CPU and memory only) tie packed and
//     spread, so the choice is agentsched's.
//  3. single pods and a gang PodGroup of 8 are bound by vc-scheduler.
//  4. a Volcano burst and a fast-path burst at once on the same nodes: no
//     device or node over capacity, every pod bound or Pending with a
//     reason; allocateFunc assumed every Volcano allocation.
//  5. agentsched killed: the shipped conf registers only verbs Volcano
//     calls for managed tasks, with extender.ignorable false, so a
//     CPU-only Volcano pod is bound while agentsched is away and GPU-share
//     pods wait (their predicate fails); started again, those are bound
//     and nothing is double-booked.
func scenarioVolcanoExtender(c *cluster) {
	if c.env["VOLCANO"] != "1" {
		fail("the dev-cluster runs without --volcano")
	}
	nodes := c.nodes()
	if len(nodes) < 4 {
		fail("want 4 nodes, have %d", len(nodes))
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	full, packed, spread, plain := nodes[0].Name, nodes[1].Name, nodes[2].Name, nodes[3].Name
	gpuNodes := []string{full, packed, spread}
	for i := 0; i < 3; i++ {
		nd := &nodes[i]
		q := *resource.NewQuantity(devicesPerNode, resource.DecimalSI)
		nd.Status.Capacity[gpuResource] = q
		nd.Status.Allocatable[gpuResource] = q
		ctx, cancel := ctxTimeout(30 * time.Second)
		_, err := c.cs.CoreV1().Nodes().UpdateStatus(ctx, nd, metav1.UpdateOptions{})
		cancel()
		check(err, "give node "+nd.Name+" GPUs")
	}
	// The harness's gpu-share-advertiser writes the share resource that
	// Volcano's predicates count (it refuses a resource no node lists).
	c.waitShareAdvertised(map[string]int64{full: devicesPerNode, packed: devicesPerNode, spread: devicesPerNode, plain: 0},
		30*time.Second)
	logf("GPU nodes (%d x %s, %d %s): full %s, packed %s, spread %s; no GPUs: %s", devicesPerNode, gpuResource,
		devicesPerNode*1000, gpuShareResource, full, packed, spread, plain)

	// The fast path fills full's devices with a 600 share each, puts 400 on
	// one of packed's, and the same CPU and memory (no GPU) on spread.
	var setup []string
	for i := 0; i < devicesPerNode; i++ {
		p := pinnedTo(gpuPod(fmt.Sprintf("fp-full-%d", i), 600), full)
		c.createPod(p)
		setup = append(setup, p.Name)
	}
	c.createPod(pinnedTo(gpuPod("fp-pack-0", 400), packed))
	c.createPod(pinnedTo(agentPod("fp-twin-0", "100m", "128Mi"), spread))
	setup = append(setup, "fp-pack-0", "fp-twin-0")
	at := c.waitBoundNamed(setup, 60*time.Second)
	for name, node := range at {
		want := map[string]string{"fp-pack-0": packed, "fp-twin-0": spread}[name]
		if want == "" {
			want = full
		}
		if node != want {
			fail("fast-path pod %s bound to %s, pinned to %s", name, node, want)
		}
	}
	logf("fast path: 4 x 600 on %s, 400 on %s, a CPU-only twin on %s", full, packed, spread)

	// 1. agentsched's own verdicts for a 600 share.
	probe := volcanoGPUPod("probe", 600)
	probe.Namespace = c.ns
	for _, n := range []string{full, plain} {
		code, why := c.agentschedPredicate(probe, n)
		logf("agentsched predicate, 600 on %s: code %d %q", n, code, why)
		if code == 0 {
			fail("agentsched's predicate passes a 600 share on %s", n)
		}
	}
	for _, n := range []string{packed, spread} {
		if code, why := c.agentschedPredicate(probe, n); code != 0 {
			fail("agentsched's predicate refuses a 600 share on %s: code %d %q", n, code, why)
		}
	}
	scores := c.agentschedScores(probe, gpuNodes)
	logf("agentsched prioritize, 600: %v", scores)
	if !(scores[packed] > scores[spread]) {
		fail("agentsched scores a 600 share %.4g on %s (a device with 400 used) and %.4g on %s (empty devices): "+
			"expected the partly used device first", scores[packed], packed, scores[spread], spread)
	}

	m0 := c.metrics()
	// 2. One 600 pod at a time: Volcano's own scores tie packed and spread
	// (equal CPU and memory; its binpack and nodeorder read no extended
	// resource as shipped), the extender's score decides, full never
	// passes.
	const trials = 4
	picks := map[string]int{}
	for k := 0; k < trials; k++ {
		name := fmt.Sprintf("vc-pick-%d", k)
		c.createPod(volcanoGPUPod(name, 600))
		node := c.waitBoundNamed([]string{name}, 60*time.Second)[name]
		picks[node]++
		logf("trial %d: vc-scheduler bound %s to %s", k, name, node)
		if node == full {
			fail("vc-scheduler bound a 600 share to %s, whose devices have 400 free each", full)
		}
		c.deletePodGone(name)
		// Both caches must forget it before the next trial: agentsched's
		// scores come back, Volcano's cache watches the same deletion.
		deadline := time.Now().Add(20 * time.Second)
		for topScored(c.agentschedScores(probe, gpuNodes)) != packed {
			if time.Now().After(deadline) {
				fail("agentsched still holds %s 20s after its deletion", name)
			}
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(2 * time.Second)
	}
	if picks[packed] != trials {
		fail("vc-scheduler chose %v for %d 600 shares; agentsched's top node is %s", picks, trials, packed)
	}
	m1 := c.metrics()
	refusedPred := volcanoAnswers(m1, "predicate", "unschedulable") - volcanoAnswers(m0, "predicate", "unschedulable")
	logf("%d of %d 600 shares on %s, agentsched's top node (a tie broken at random would do that 1 in %d); "+
		"agentsched's predicate refused %.0f times meanwhile", picks[packed], trials, packed, 1<<trials, refusedPred)
	if refusedPred < trials {
		fail("agentsched's predicate refused %.0f times for %d Volcano pods that %s could not take", refusedPred, trials, full)
	}

	// 3. Single pods and a gang of 8.
	var first []string
	for i := 0; i < 4; i++ {
		p := volcanoGPUPod(fmt.Sprintf("vc-single-%d", i), 300)
		c.createPod(p)
		first = append(first, p.Name)
	}
	c.createPodGroup("gang", 8)
	for i := 0; i < 8; i++ {
		p := volcanoGPUPod(fmt.Sprintf("vc-gang-%d", i), 250)
		p.Annotations = map[string]string{groupNameAnnotation: "gang"}
		c.createPod(p)
		first = append(first, p.Name)
	}
	at = c.waitBoundNamed(first, 90*time.Second)
	perNode := map[string]int{}
	for _, n := range at {
		perNode[n]++
	}
	logf("vc-scheduler bound 4 single pods and the gang of 8: %v", perNode)
	c.checkDevices(gpuNodes)

	// 4. Both bursts at once on the same nodes: 12 Volcano and 12
	// fast-path 600 shares for the few devices that still have 600 free.
	m2 := c.metrics()
	const burst = 12
	// The fast path binds within milliseconds, vc-scheduler in its next
	// session (1 s): the fast-path pods come one every 250 ms, so they
	// arrive while Volcano's allocations are assumed but not yet bound.
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); c.createPods("vc-burst", burst, volcanoGPUPod("", 600), 4) }()
	go func() {
		defer wg.Done()
		for i := 0; i < burst; i++ {
			p := gpuPod(fmt.Sprintf("fp-burst-%05d", i), 600)
			ctx, cancel := ctxTimeout(30 * time.Second)
			_, err := c.cs.CoreV1().Pods(c.ns).Create(ctx, p, metav1.CreateOptions{})
			cancel()
			if err != nil {
				logf("create %s: %v", p.Name, err)
				return
			}
			time.Sleep(250 * time.Millisecond)
		}
	}()
	wg.Wait()
	pods := c.waitDecided([]string{"vc-burst", "fp-burst"}, 2*burst, 8*time.Second, 90*time.Second)
	bound := map[string]int{}
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			bound[p.Spec.SchedulerName]++
			if p.Spec.NodeName == full {
				fail("pod %s (600, %s) bound to %s, whose devices have at most 400 free", p.Name,
					p.Spec.SchedulerName, full)
			}
		}
	}
	logf("bursts: vc-scheduler bound %d of %d, the fast path %d of %d; the rest Pending with a reason",
		bound[volcanoScheduler], burst, bound[agentScheduler], burst)
	if bound[volcanoScheduler] == 0 || bound[agentScheduler] == 0 {
		fail("one path bound nothing in the shared burst: %v", bound)
	}
	c.checkDevices(gpuNodes)
	c.checkNoOvercommit()
	m3 := c.metrics()
	assumed := volcanoAnswers(m3, "allocateFunc", "assumed") - volcanoAnswers(m0, "allocateFunc", "assumed")
	allocRefused := volcanoAnswers(m3, "allocateFunc", "refused") - volcanoAnswers(m0, "allocateFunc", "refused")
	forgotten := volcanoAnswers(m3, "deallocateFunc", "forgotten") - volcanoAnswers(m0, "deallocateFunc", "forgotten")
	vcBound := trials + len(first) + bound[volcanoScheduler]
	logf("agentsched since the first Volcano pod: allocateFunc assumed %.0f, refused %.0f; deallocateFunc "+
		"forgot %.0f; %d Volcano GPU pods bound; burst predicate refusals %.0f", assumed, allocRefused, forgotten,
		vcBound, volcanoAnswers(m3, "predicate", "unschedulable")-volcanoAnswers(m2, "predicate", "unschedulable"))
	if assumed < float64(vcBound) {
		fail("allocateFunc assumed %.0f allocations for %d Volcano pods bound", assumed, vcBound)
	}
	if p := volcanoAnswers(m3, "prioritize", "scored") - volcanoAnswers(m0, "prioritize", "scored"); p == 0 {
		fail("vc-scheduler never called agentsched's prioritize")
	}

	// 5. agentsched down. The bursts' Pending pods go first: their
	// Inqueue PodGroups would hold the GPU share in Volcano's overcommit
	// plugin and keep the next jobs from being enqueued at all.
	logf("deleted the %d Pending pods of the bursts and their PodGroups", c.deletePending("vc-burst", "fp-burst"))
	jr0, pf0 := c.countLog("vc-scheduler.log", "JobReady failed"), c.countLog("vc-scheduler.log", "Predicate failed")
	small := volcanoGPUPod("probe-small", 300)
	small.Namespace = c.ns
	// agentsched may admit a 300 share on a node only if some placement of
	// the shares bound there leaves a device with 300 free: after a
	// restart it re-derives the devices from the pods as listed, and a
	// placement in that order once put two 600 shares on one device of
	// full (no placement of 4 x 600 + 4 x 250 holds another 300 there).
	verdicts := func(when string) {
		shares := c.checkDevices(gpuNodes)
		for _, n := range gpuNodes {
			code, why := c.agentschedPredicate(small, n)
			room := packs(append(append([]int64(nil), shares[n]...), 300), devicesPerNode)
			logf("  %s: agentsched predicate, 300 on %s: code %d %q (some placement has room: %v)", when, n, code,
				why, room)
			if code == 0 && !room {
				fail("%s: agentsched admits a 300 share on %s, where no placement of the shares bound there "+
					"%v leaves a device 300 free: its devices are double-booked", when, n, shares[n])
			}
		}
	}
	verdicts("before the kill")
	c.devCluster("agentsched-kill")
	var down []string
	for i := 0; i < 2; i++ {
		p := volcanoGPUPod(fmt.Sprintf("vc-down-%d", i), 300)
		c.createPod(p)
		down = append(down, p.Name)
	}
	cpuOnly := smallPod("vc-down-cpu", "100m", "128Mi")
	cpuOnly.Spec.SchedulerName = volcanoScheduler
	c.createPod(cpuOnly)
	down = append(down, cpuOnly.Name)
	time.Sleep(12 * time.Second)
	boundDown := 0
	for _, p := range c.pods() {
		if !strings.HasPrefix(p.Name, "vc-down-") {
			continue
		}
		if p.Spec.NodeName != "" {
			boundDown++
		} else if cond := scheduledCondition(&p); cond != nil {
			logf("  %s while agentsched is down: %s %q", p.Name, cond.Reason, cond.Message)
		}
	}
	jr, pf := c.countLog("vc-scheduler.log", "JobReady failed")-jr0, c.countLog("vc-scheduler.log", "Predicate failed")-pf0
	logf("agentsched down 12s: %d of %d new Volcano pods bound (2 GPU shares, 1 CPU-only); vc-scheduler logged "+
		"%d 'JobReady failed', %d 'Predicate failed'", boundDown, len(down), jr, pf)
	var cpuNode string
	for _, p := range c.pods() {
		if p.Name == cpuOnly.Name {
			cpuNode = p.Spec.NodeName
		} else if strings.HasPrefix(p.Name, "vc-down-") && p.Spec.NodeName != "" {
			fail("vc-scheduler bound GPU-share pod %s to %s while agentsched was down (its predicate must fail "+
				"every node with extender.ignorable false)", p.Name, p.Spec.NodeName)
		}
	}
	if cpuNode == "" {
		fail("the CPU-only Volcano pod was not bound while agentsched was down: a Volcano job without a managed " +
			"resource must not wait on agentsched")
	}
	if jr != 0 {
		fail("vc-scheduler logged %d 'JobReady failed' while agentsched was down: the shipped conf registers "+
			"no jobReady verb", jr)
	}
	if pf == 0 {
		fail("vc-scheduler logged no 'Predicate failed' while agentsched was down: were the GPU pods sent?")
	}
	c.devCluster("agentsched-start")
	if ok, why := c.waitAgentschedOK("/readyz", time.Now(), 30*time.Second); !ok {
		fail("agentsched not ready 30s after its start: %s", why)
	}
	verdicts("after the restart")
	at = c.waitBoundNamed(down, 60*time.Second)
	logf("agentsched back: vc-scheduler bound %v", at)
	c.waitDecided([]string{"vc-burst", "fp-burst", "vc-down"}, bound[volcanoScheduler]+bound[agentScheduler]+len(down),
		3*time.Second, 60*time.Second)
	c.checkDevices(gpuNodes)
	c.checkNoOvercommit()
	fmt.Printf("volcano extender: %d/%d 600 shares on agentsched's top node, none on the node only agentsched "+
		"knew full; singles and a gang of 8 bound; bursts bound %d Volcano + %d fast-path pods with no device "+
		"over 1000; agentsched down: the CPU-only pod bound, GPU shares waited (%d predicate failures), all bound "+
		"after its restart\n",
		picks[packed], trials, bound[volcanoScheduler], bound[agentScheduler], pf)
}
