package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// waitShareAdvertised waits until every node of devices carries
// gpuShareResource at devices x 1000 in capacity and allocatable (absent
// for 0): what the harness's gpu-share-advertiser writes.
func (c *cluster) waitShareAdvertised(devices map[string]int64, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	start := time.Now()
	for {
		var wrong []string
		for _, n := range c.nodes() {
			want, ok := devices[n.Name]
			if !ok {
				continue
			}
			capQ, hasCap := n.Status.Capacity[gpuShareResource]
			allocQ, hasAlloc := n.Status.Allocatable[gpuShareResource]
			right := !hasCap && !hasAlloc
			if want > 0 {
				right = hasCap && hasAlloc && capQ.Value() == want*1000 && allocQ.Value() == want*1000
			}
			if !right {
				wrong = append(wrong, fmt.Sprintf("%s (capacity %s, allocatable %s, want %d)", n.Name,
					capQ.String(), allocQ.String(), want*1000))
			}
		}
		if len(wrong) == 0 {
			logf("%s advertised on every node as devices x 1000 after %.1fs", gpuShareResource,
				time.Since(start).Seconds())
			return
		}
		if time.Now().After(deadline) {
			fail("gpu-share-advertiser: after %v: %s", timeout, strings.Join(wrong, "; "))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// gpuNodeInfo is a GPU node as the scenario reads it: its devices and
// model label.
type gpuNodeInfo struct {
	devices int64
	model   string
}

// gpuNodesOf reads every e2e node's nvidia.com/gpu allocatable and
// agentsched.io/gpu-model label (devices 0: CPU-only).
func gpuNodesOf(nodes []corev1.Node) map[string]gpuNodeInfo {
	out := map[string]gpuNodeInfo{}
	for _, n := range nodes {
		q := n.Status.Allocatable[gpuResource]
		out[n.Name] = gpuNodeInfo{devices: q.Value(), model: n.Labels[gpuModelLabel]}
	}
	return out
}

// wholeGPUPod asks for k whole devices (requests equal to limits).
func wholeGPUPod(name string, k int64) *corev1.Pod {
	p := agentPod(name, "100m", "128Mi")
	q := *resource.NewQuantity(k, resource.DecimalSI)
	p.Spec.Containers[0].Resources.Requests[gpuResource] = q
	p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{gpuResource: q}
	return p
}

// gpuDemand is what a pod asks: n devices at milli each.
func gpuDemand(p *corev1.Pod) (n, milli int64) {
	r := podRequests(p)
	if q, ok := r[gpuResource]; ok && q.Value() > 0 {
		return q.Value(), 1000
	}
	if q, ok := r[gpuShareResource]; ok && q.Value() > 0 {
		return 1, q.Value()
	}
	return 0, 0
}

// gpuAnnotations are a pod's three agentsched.io/ device annotations.
type gpuAnnotations struct{ devices, milli, node string }

func gpuAnnotationsOf(p *corev1.Pod) gpuAnnotations {
	a := p.Annotations
	return gpuAnnotations{a["agentsched.io/gpu-devices"], a["agentsched.io/gpu-milli"], a["agentsched.io/gpu-node"]}
}

// gpuPathsPod is one pod of gpu_all_paths: its path, kind and model.
type gpuPathsPod struct {
	path, kind, model string
}

// padPod makes p about 300 KiB: a 200 KiB annotation, as a large
// last-applied-configuration would be (annotations may hold 256 KiB in
// all), and a 100 KiB environment variable. The API server answers the
// device annotation patch with the whole pod, and agentsched must bind it
// all the same (it once failed such patches as an answer too large, at
// every attempt).
func padPod(p *corev1.Pod) {
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations["e2e.agentsched.io/padding"] = strings.Repeat("x", 200<<10)
	c := &p.Spec.Containers[0]
	c.Env = append(c.Env, corev1.EnvVar{Name: "PADDING", Value: strings.Repeat("y", 100<<10)})
}

// Scenario: GPU pods of every kind (a share of one device, one whole
// device, two whole devices) through the three paths at once on the same
// nodes: kube-scheduler with the shipped profile calling agentsched as
// extender (the mixed layout: schedulerName default-scheduler), vc-scheduler
// with the shipped volcano-scheduler.conf (schedulerName volcano) and the
// fast path (agent-scheduler). Four GPU nodes of 4 devices, two models
// (a100, h100: `dev-cluster --gpus 4 --gpu-nodes 4 --gpu-models`), two
// CPU-only nodes; agentsched.io/gpu-milli is written by the harness's
// gpu-share-advertiser, never by the scenario. A third of the pods ask for
// a model (nodeSelector or required node affinity on
// agentsched.io/gpu-model); every share pod is about 300 KiB (padPod) and
// at least one of them must be bound. agentsched is killed (SIGKILL) once a first
// burst is partly bound, a second burst arrives while it is away, and it
// is started again. Read back from the API server: every pod bound or
// Pending with a reason; every bound GPU pod carries its devices, its
// milli and its node in its annotations, as many devices as it asks, of
// its node; no device above 1000 thousandths by the annotations, no node
// above its devices x 1000, every model asked for honoured, nothing on the
// CPU-only nodes; every pod bound before the kill keeps its node and
// annotations unchanged after the restart; agentsched's /metrics counts
// each model's devices and the free ones as the annotations leave them.
func scenarioGPUAllPaths(c *cluster) {
	if c.env["LAYOUT"] != "mixed" || c.env["VOLCANO"] != "1" {
		fail("gpu_all_paths wants the mixed layout with --volcano (have layout %q, VOLCANO=%q)",
			c.env["LAYOUT"], c.env["VOLCANO"])
	}
	nodes := c.nodes()
	info := gpuNodesOf(nodes)
	devices := map[string]int64{}
	var models []string
	seen := map[string]bool{}
	gpuNodes := 0
	for name, in := range info {
		devices[name] = in.devices
		if in.devices > 0 {
			gpuNodes++
			if in.model != "" && !seen[in.model] {
				seen[in.model] = true
				models = append(models, in.model)
			}
		}
	}
	sort.Strings(models)
	if gpuNodes < 2 || len(models) < 2 || gpuNodes == len(nodes) {
		fail("want GPU nodes of two models and CPU-only nodes (dev-cluster --gpus --gpu-nodes --gpu-models): "+
			"%d GPU nodes of %d, models %v", gpuNodes, len(nodes), models)
	}
	c.waitShareAdvertised(devices, 30*time.Second)

	paths := []struct{ name, scheduler string }{
		{"ks", "default-scheduler"}, {"vc", volcanoScheduler}, {"fp", agentScheduler},
	}
	meta := map[string]gpuPathsPod{}
	mk := func(path, scheduler string, i int) *corev1.Pod {
		name := fmt.Sprintf("%s-%02d", path, i)
		var p *corev1.Pod
		kind := ""
		switch i % 4 {
		case 0, 2:
			p, kind = gpuPod(name, int64(300+100*((i/2)%4))), "share"
		case 1:
			p, kind = wholeGPUPod(name, 1), "whole"
		case 3:
			p, kind = wholeGPUPod(name, 2), "multi"
		}
		p.Spec.SchedulerName = scheduler
		if i%2 == 0 {
			padPod(p)
		}
		model := ""
		switch i % 6 {
		case 1:
			model = models[(i/6)%len(models)]
			p.Spec.NodeSelector = map[string]string{gpuModelLabel: model}
		case 4:
			model = models[(i/6+1)%len(models)]
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
						Key: gpuModelLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{model},
					}}}},
				}}}
		}
		meta[name] = gpuPathsPod{path: path, kind: kind, model: model}
		return p
	}
	// Burst 1: 6 pods a path, interleaved; burst 2: 3 more each.
	const first, total = 6, 9
	start := time.Now()
	for i := 0; i < first; i++ {
		for _, pa := range paths {
			c.createPod(mk(pa.name, pa.scheduler, i))
		}
	}
	logf("burst 1: %d GPU pods created in %.1fs", first*len(paths), time.Since(start).Seconds())

	// Kill agentsched once part of the burst is bound.
	deadline := time.Now().Add(60 * time.Second)
	for {
		t := tallyPods(c.pods())
		if t.bound >= 6 {
			logf("before the kill: %s", t)
			break
		}
		if time.Now().After(deadline) {
			fail("only %d of %d GPU pods bound after 60s", t.bound, first*len(paths))
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.devCluster("agentsched-kill")
	before := map[string]struct {
		node string
		ann  gpuAnnotations
	}{}
	for _, p := range c.pods() {
		if p.Spec.NodeName != "" {
			before[p.Name] = struct {
				node string
				ann  gpuAnnotations
			}{p.Spec.NodeName, gpuAnnotationsOf(&p)}
		}
	}
	logf("agentsched killed with %d GPU pods bound; burst 2 arrives while it is away", len(before))
	for i := first; i < total; i++ {
		for _, pa := range paths {
			c.createPod(mk(pa.name, pa.scheduler, i))
		}
	}
	time.Sleep(3 * time.Second)
	c.devCluster("agentsched-start")
	logf("agentsched started again")

	t, pods := c.waitSettled(total*len(paths), total*len(paths), 15*time.Second, 2*time.Minute)
	logf("settled: %s; reasons: %v", t, topReasons(t.reasons, 4))
	if t.pending > 0 {
		dumpUnbound(c, pods, 5)
		fail("%d GPU pods neither bound nor Pending with a reason", t.pending)
	}

	perDevice := map[string]int64{}
	perNode := map[string]int64{}
	boundBy := map[string]int{}
	kindBound := map[string]int{}
	modelPods, paddedBound := 0, 0
	for i := range pods {
		p := &pods[i]
		m := meta[p.Name]
		if p.Spec.NodeName == "" {
			continue
		}
		node := p.Spec.NodeName
		boundBy[m.path]++
		kindBound[m.kind]++
		if p.Annotations["e2e.agentsched.io/padding"] != "" {
			paddedBound++
		}
		in := info[node]
		if in.devices == 0 {
			fail("GPU pod %s (%s) bound to %s, which has no GPUs", p.Name, m.path, node)
		}
		if m.model != "" {
			modelPods++
			if in.model != m.model {
				fail("pod %s asks for model %s, bound to %s (model %q)", p.Name, m.model, node, in.model)
			}
		}
		n, milli := gpuDemand(p)
		a := gpuAnnotationsOf(p)
		if a.devices == "" || a.node != node || a.milli != strconv.FormatInt(milli, 10) {
			fail("pod %s (%s, %s) bound to %s: annotations devices %q milli %q node %q, want its %d milli on %s",
				p.Name, m.path, m.kind, node, a.devices, a.milli, a.node, milli, node)
		}
		devs := strings.Split(a.devices, ",")
		if int64(len(devs)) != n {
			fail("pod %s asks %d device(s), annotated %q", p.Name, n, a.devices)
		}
		for _, d := range devs {
			k, err := strconv.Atoi(d)
			if err != nil || k < 0 || int64(k) >= in.devices {
				fail("pod %s on %s (%d devices): device %q", p.Name, node, in.devices, d)
			}
			perDevice[fmt.Sprintf("%s/%d", node, k)] += milli
		}
		perNode[node] += n * milli
	}
	keys := make([]string, 0, len(perDevice))
	for k := range perDevice {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var line []string
	for _, k := range keys {
		line = append(line, fmt.Sprintf("%s=%d", k, perDevice[k]))
		if perDevice[k] > 1000 {
			fail("device %s holds %d thousandths by the pods' annotations", k, perDevice[k])
		}
	}
	logf("per device (annotations): %s", strings.Join(line, " "))
	for node, used := range perNode {
		if used > devices[node]*1000 {
			fail("node %s carries %d thousandths, has %d devices", node, used, devices[node])
		}
	}
	for _, pa := range paths {
		if boundBy[pa.name] < 2 {
			fail("only %d pods of path %s (%s) bound", boundBy[pa.name], pa.name, pa.scheduler)
		}
	}
	for _, k := range []string{"share", "whole", "multi"} {
		if kindBound[k] == 0 {
			fail("no %s GPU pod bound", k)
		}
	}
	if paddedBound == 0 {
		fail("no GPU pod of 300 KiB bound")
	}
	changed := 0
	for i := range pods {
		p := &pods[i]
		b, ok := before[p.Name]
		if !ok {
			continue
		}
		if p.Spec.NodeName != b.node || gpuAnnotationsOf(p) != b.ann {
			changed++
			logf("pod %s: before the kill on %s with %+v, now on %s with %+v", p.Name, b.node, b.ann,
				p.Spec.NodeName, gpuAnnotationsOf(p))
		}
	}
	if changed > 0 {
		fail("%d of %d pods bound before agentsched's restart changed node or annotations", changed, len(before))
	}
	c.checkModelDevices(info, perDevice)
	fmt.Printf("gpu all paths: %d of %d GPU pods bound (kube-scheduler %d, vc-scheduler %d, fast path %d; "+
		"share %d, whole %d, multi %d; %d with a model, %d of 300 KiB), %d bound before the kill "+
		"unchanged, %d devices in use, none over 1000, no node over capacity\n",
		t.bound, len(pods), boundBy["ks"], boundBy["vc"], boundBy["fp"], kindBound["share"], kindBound["whole"],
		kindBound["multi"], modelPods, paddedBound, len(before), len(perDevice))
}

// checkModelDevices waits up to 15 s for agentsched's per-model device
// gauges to agree with the API server: for each model, its nodes' devices
// (state all) and those no bound pod's annotations name (state free),
// whichever scheduler bound the pods.
func (c *cluster) checkModelDevices(info map[string]gpuNodeInfo, perDevice map[string]int64) {
	want := map[string]int64{}
	for node, in := range info {
		if in.devices == 0 || in.model == "" {
			continue
		}
		want[fmt.Sprintf(`agentsched_cache_gpu_model_devices{model="%s",state="all"}`, in.model)] += in.devices
		free := fmt.Sprintf(`agentsched_cache_gpu_model_devices{model="%s",state="free"}`, in.model)
		want[free] += 0
		for k := int64(0); k < in.devices; k++ {
			if perDevice[fmt.Sprintf("%s/%d", node, k)] == 0 {
				want[free]++
			}
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		m := c.metrics()
		var wrong []string
		for series, v := range want {
			if got, ok := m[series]; !ok || int64(got) != v {
				wrong = append(wrong, fmt.Sprintf("%s %v (present %v), want %d", series, got, ok, v))
			}
		}
		if len(wrong) == 0 {
			logf("per-model device gauges agree with the annotations: %v", want)
			return
		}
		if time.Now().After(deadline) {
			sort.Strings(wrong)
			fail("agentsched's per-model device gauges after 15s: %s", strings.Join(wrong, "; "))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// patchNodeStatus sends a merge patch of nodes/NAME/status as the admin
// (what a kubelet or a device plugin writing node status would send).
func (c *cluster) patchNodeStatus(name, body string) {
	ctx, cancel := ctxTimeout(30 * time.Second)
	defer cancel()
	_, err := c.cs.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(body), metav1.PatchOptions{}, "status")
	check(err, "patch node "+name+" status")
}

// setDevices gives node n devices nvidia.com/gpu (0: removes it).
func (c *cluster) setDevices(name string, n int64) {
	v := "null"
	if n > 0 {
		v = fmt.Sprintf("%q", strconv.FormatInt(n, 10))
	}
	c.patchNodeStatus(name, fmt.Sprintf(`{"status":{"capacity":{%q:%s},"allocatable":{%q:%s}}}`,
		gpuResource, v, gpuResource, v))
}

// shareOn reads a node's agentsched.io/gpu-milli capacity ("" if absent).
func (c *cluster) shareOn(name string) string {
	ctx, cancel := ctxTimeout(30 * time.Second)
	defer cancel()
	n, err := c.cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	check(err, "get node "+name)
	q, ok := n.Status.Capacity[gpuShareResource]
	if !ok {
		return ""
	}
	return strconv.FormatInt(q.Value(), 10)
}

// advertiserMetrics scrapes the harness's gpu-share-advertiser.
func (c *cluster) advertiserMetrics() map[string]float64 {
	return metricsAt(strings.TrimSuffix(c.env.need("GPU_SHARE_ADVERTISER_METRICS_URL"), "/metrics"))
}

// Scenario: the harness's gpu-share-advertiser (deploy/gpu-share as its
// ServiceAccount) follows the nodes: the share written at start-up;
// devices lowered, removed, added to a CPU-only node; a node annotated
// agentsched.io/gpu-share-advertiser=off left alone; a writer replacing
// the value (as the kubelet does for a device plugin registering the same
// name) three times makes it stand down on that node until the device
// count changes; killed and started again it writes nothing where the
// values are right.
func scenarioGPUShareAdvertiser(c *cluster) {
	nodes := c.nodes()
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	if len(nodes) < 4 {
		fail("want 4 nodes, have %d", len(nodes))
	}
	info := gpuNodesOf(nodes)
	devices := map[string]int64{}
	for n, in := range info {
		devices[n] = in.devices
	}
	a, b, d, cpu := nodes[0].Name, nodes[1].Name, nodes[2].Name, nodes[3].Name
	if devices[a] == 0 || devices[b] == 0 || devices[d] == 0 || devices[cpu] != 0 {
		fail("want three GPU nodes and a CPU-only one (dev-cluster --gpus N --gpu-nodes 3): %v", devices)
	}
	c.waitShareAdvertised(devices, 30*time.Second)

	// Devices move: 4 -> 2 on a, removed on b, 3 on the CPU-only node.
	c.setDevices(a, 2)
	c.setDevices(b, 0)
	c.setDevices(cpu, 3)
	devices[a], devices[b], devices[cpu] = 2, 0, 3
	c.waitShareAdvertised(devices, 30*time.Second)
	logf("followed: %s 2 devices, %s none, %s 3", a, b, cpu)

	// Opted out: a hand-written value stays.
	ctx, cancel := ctxTimeout(30 * time.Second)
	_, err := c.cs.CoreV1().Nodes().Patch(ctx, cpu, types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"agentsched.io/gpu-share-advertiser":"off"}}}`), metav1.PatchOptions{})
	cancel()
	check(err, "annotate "+cpu)
	c.patchNodeStatus(cpu, fmt.Sprintf(`{"status":{"capacity":{%q:"7"},"allocatable":{%q:"7"}}}`,
		gpuShareResource, gpuShareResource))
	time.Sleep(2 * time.Second)
	if v := c.shareOn(cpu); v != "7" {
		fail("node %s is annotated off, yet its share was rewritten to %q", cpu, v)
	}
	logf("%s annotated off: its hand-written share 7 stays", cpu)

	// A fight: another writer replaces d's value; the advertiser restores
	// it twice, then stands down.
	want := strconv.FormatInt(devices[d]*1000, 10)
	for i := 1; i <= 3; i++ {
		c.patchNodeStatus(d, fmt.Sprintf(`{"status":{"capacity":{%q:"8"},"allocatable":{%q:"8"}}}`,
			gpuShareResource, gpuShareResource))
		deadline := time.Now().Add(10 * time.Second)
		for {
			v := c.shareOn(d)
			if i < 3 && v == want {
				break
			}
			if i == 3 && time.Now().After(deadline.Add(-8*time.Second)) {
				if v != "8" {
					fail("after the 3rd replacement the advertiser wrote %s's share again (%q)", d, v)
				}
				break
			}
			if time.Now().After(deadline) {
				fail("replacement %d: %s's share is %q, want %s restored", i, d, v, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if m := c.advertiserMetrics(); m["agentsched_gpushare_nodes_stood_down"] != 1 {
		fail("agentsched_gpushare_nodes_stood_down = %v, want 1", m["agentsched_gpushare_nodes_stood_down"])
	}
	logf("%s: replaced 3 times, the advertiser stood down (the other writer's 8 stays)", d)
	c.setDevices(d, 1)
	devices[d] = 1
	delete(devices, cpu)
	c.waitShareAdvertised(devices, 30*time.Second)
	logf("%s: its device count changed to 1, the advertiser writes again", d)

	// A restart writes nothing where the values are right.
	c.devCluster("gpu-share-advertiser-kill")
	c.devCluster("gpu-share-advertiser-start")
	deadline := time.Now().Add(30 * time.Second)
	for {
		var m map[string]float64
		if code, _, err := getAt(strings.TrimSuffix(c.env.need("GPU_SHARE_ADVERTISER_METRICS_URL"), "/metrics"),
			"/metrics"); err == nil && code == 200 {
			m = c.advertiserMetrics()
		}
		if m != nil && m["agentsched_gpushare_synced"] == 1 {
			if m[`agentsched_gpushare_patches_total{result="ok"}`] != 0 {
				fail("restarted, the advertiser patched %v nodes whose share was right",
					m[`agentsched_gpushare_patches_total{result="ok"}`])
			}
			break
		}
		if time.Now().After(deadline) {
			fail("the restarted advertiser did not list the nodes within 30s")
		}
		time.Sleep(200 * time.Millisecond)
	}
	c.waitShareAdvertised(devices, 5*time.Second)
	if v := c.shareOn(cpu); v != "7" {
		fail("restarted, the advertiser rewrote %s (annotated off) to %q", cpu, v)
	}
	fmt.Printf("gpu share advertiser: followed device changes on 4 nodes, left an opted-out node alone, " +
		"stood down after 3 replacements, wrote nothing after a restart\n")
}
