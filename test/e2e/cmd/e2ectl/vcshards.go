package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// Scenario volcano_shards: agentsched's fast path and Volcano's
// vc-agent-scheduler share the nodes through NodeShards, both in hard
// mode, first with Volcano's sharding controller writing the shards, then
// with `agentsched shard-controller` writing them instead.
//
// Configuration (and why it is sane): Volcano's example sharding ConfigMap
// (example/sharding/sharding-config-configmap.yaml) with two changes only:
// the second scheduler is named vc-agent-scheduler (its shard: the shard
// name vc-agent-scheduler is given with --scheduler-sharding-name, since
// both schedulers default to the shard agent-scheduler) instead of
// volcano, and shardSyncPeriod is 20s instead of 60s so that a periodic
// full resync runs within the scenario (it is waited for). The bands stay the example's: agent-scheduler
// takes nodes at 0.7..1.0 CPU utilisation, vc-agent-scheduler those at
// 0.0..0.69. Two of the four 16-CPU nodes carry a resident load of 12 CPU
// (0.75, pods bound by nodeName), so the assignment is decided by the
// bands alone; ties (where Volcano's order is its informer's map order)
// never matter, and the bursts are sized so that no node leaves its band
// by them (agentsched's 250m pods only fill the busy nodes further up to
// 1.0; vc-agent-scheduler's 48 pods of 125m, 6 CPU in all, keep an idle
// node below 0.4 even if all land on it). Only step 3 moves a node, on
// purpose.
//
//  1. The ConfigMap applied, vc-controller-manager restarts with
//     sharding-controller; its NodeShards: agent-scheduler = the busy
//     nodes, vc-agent-scheduler = the idle ones; both schedulers publish
//     nodesInUse = their nodesDesired. A burst for each, at once.
//  2. vc-controller-manager restarts without sharding-controller;
//     `agentsched shard-controller` (rbac.yaml's ServiceAccount) reads the
//     same sharding.yaml (from a ConfigMap in kube-system, where its Role
//     reads) and takes the shards over without moving a node. Two nodes
//     join: one idle (goes to vc-agent-scheduler, whose nodesInUse must
//     follow), one with the resident load (to agent-scheduler). A second
//     burst for each.
//  3. A resident load (11.5 CPU: 0.72 with no other pod, at most 0.85 with
//     all of vc-agent-scheduler's second burst) lifts the idle node that
//     joined above 0.7 as a third
//     burst for each starts: the controller moves it to agent-scheduler,
//     vc-agent-scheduler releases it from its nodesInUse, and only then
//     does agentsched place pods there (when the burst left it alone, one
//     more agent pod sized to fit only there must bind there).
//
// Checked: every pod bound; no overcommit; the two shards' nodesInUse
// never intersect at any revision the NodeShard watch saw; every bind (at
// its etcd revision) was onto a node in the binding scheduler's
// nodesDesired (or still in its nodesInUse: a decision made just before the
// node left) and outside the other shard's nodesInUse at that revision;
// no node but the moved one carries pods of both schedulers, and there
// every vc-agent-scheduler bind precedes (in revisions) the release and
// every agentsched bind follows it; each scheduler's pods lie inside its
// own shard.
func scenarioVolcanoShards(c *cluster) {
	const (
		agentShard = "agent-scheduler"
		vcShard    = "vc-agent-scheduler"
		burst      = 16
		agentCPU   = "250m"
		vcCPU      = "125m"
	)
	if c.env["VOLCANO"] != "1" || c.env["VOLCANO_AGENT"] != "1" {
		fail("needs dev-cluster --volcano --volcano-agent")
	}
	if got := c.env["VC_AGENT_NAME"]; got != vcShard {
		fail("vc-agent-scheduler serves %q, want %q", got, vcShard)
	}
	dyn := c.dynamicClient()
	nodes := c.nodes()
	names := make([]string, 0, len(nodes))
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	sort.Strings(names)
	if len(names) != 4 {
		fail("want 4 nodes, have %d", len(names))
	}
	busy, idle := names[:2], names[2:]

	rec := startShardRecorder(c, dyn)
	defer rec.stop()

	// Resident load: 12 of 16 CPU (0.75) on the first two nodes.
	for i, n := range busy {
		c.residentPod(fmt.Sprintf("resident-%d", i), n, "12")
	}

	// 1. Volcano's sharding controller, from its example ConfigMap.
	shardingYAML := c.applyVolcanoShardingConfigMap()
	vcLog := filepath.Join(c.stateDir, "logs", "vc-controller-manager.log")
	syncs0 := countInFile(vcLog, "Global shard sync completed")
	c.devClusterArgs("vc-controller-manager-kill")
	c.devClusterArgs("vc-controller-manager-start", "--volcano-controllers",
		"pg-controller,queue-controller,sharding-controller")
	rec.waitShards(map[string][]string{agentShard: busy, vcShard: idle}, 60*time.Second,
		"Volcano's sharding controller")

	c.parallelBursts(burst, agentCPU, vcCPU, "as1", "vc1")
	// A periodic full resync (shardSyncPeriod 20s) after the bursts moves
	// nothing either.
	deadline := time.Now().Add(40 * time.Second)
	for countInFile(vcLog, "Global shard sync completed") < syncs0+2 {
		if time.Now().After(deadline) {
			fail("Volcano's sharding controller ran no periodic resync in 40 s (%s)", vcLog)
		}
		time.Sleep(500 * time.Millisecond)
	}
	rec.waitShards(map[string][]string{agentShard: busy, vcShard: idle}, 5*time.Second,
		"Volcano's sharding controller, after a periodic resync")
	p1 := rec.snapshot()
	logf("phase 1: %d NodeShard versions seen", len(p1.hist))

	// 2. agentsched's shard-controller instead of Volcano's.
	c.devClusterArgs("vc-controller-manager-kill")
	c.devClusterArgs("vc-controller-manager-start", "--volcano-controllers", "pg-controller,queue-controller")
	ctl := c.startShardController(shardingYAML)
	defer ctl.stop()
	ctl.waitLeader()
	// Its first full recompute agrees with Volcano's: nothing moves.
	m0 := ctl.waitFullRecompute()
	rec.waitShards(map[string][]string{agentShard: busy, vcShard: idle}, 10*time.Second,
		"agentsched shard-controller, after taking over")
	logf("shard-controller took over: %.0f NodeShard writes (0: the same sets as Volcano's controller)",
		m0[`agentsched_shardctl_nodeshard_writes_total{result="ok"}`])
	newIdle, newBusy := "node-0004", "node-0005"
	c.residentPod("resident-2", newBusy, "12") // bound before its node exists: 0.75 from the start
	c.addNode(newIdle, "16", "64Gi")
	c.addNode(newBusy, "16", "64Gi")
	wantBusy := append(append([]string{}, busy...), newBusy)
	wantIdle := append(append([]string{}, idle...), newIdle)
	sort.Strings(wantBusy)
	sort.Strings(wantIdle)
	rec.waitShards(map[string][]string{agentShard: wantBusy, vcShard: wantIdle}, 60*time.Second,
		"agentsched shard-controller, after two nodes joined")

	c.parallelBursts(burst, agentCPU, vcCPU, "as2", "vc2")

	// 3. A node moves while both schedulers place pods: a resident load of
	// 11.5 CPU lifts node-0004 above 0.7 (whatever vc-agent-scheduler put
	// there, at most 2 CPU); the controller moves it to agent-scheduler,
	// vc-agent-scheduler must release it (nodesInUse) before agentsched
	// places anything there.
	c.residentPod("resident-3", newIdle, "11500m")
	c.parallelBursts(burst, agentCPU, vcCPU, "as3", "vc3")
	wantBusy = append(wantBusy, newIdle)
	sort.Strings(wantBusy)
	rec.waitShards(map[string][]string{agentShard: wantBusy, vcShard: idle}, 60*time.Second,
		"agentsched shard-controller, after "+newIdle+" crossed into agent-scheduler's band")
	c.agentPodOnlyOn(newIdle, wantBusy)
	m := metricsAt(ctl.url)
	logf("shard-controller: leader=%.0f writes ok=%.0f failed=%.0f unassigned(no_fit)=%.0f",
		m["agentsched_shardctl_leader"], m[`agentsched_shardctl_nodeshard_writes_total{result="ok"}`],
		m[`agentsched_shardctl_nodeshard_writes_total{result="failed"}`],
		m[`agentsched_shardctl_nodes_unassigned{reason="no_fit"}`])
	if m[`agentsched_shardctl_nodes_unassigned{reason="no_fit"}`] != 0 {
		fail("agentsched shard-controller left nodes in no shard")
	}

	// Checks.
	c.checkNoOvercommit()
	snap := rec.snapshot()
	if err := snap.checkHistory(agentShard, vcShard); err != nil {
		fail("%v", err)
	}
	final := snap.latest()
	perNode := map[string]map[string]int{}
	for _, p := range c.pods() {
		if strings.HasPrefix(p.Name, "resident-") {
			continue
		}
		if p.Spec.NodeName == "" {
			fail("pod %s not bound", p.Name)
		}
		if perNode[p.Spec.NodeName] == nil {
			perNode[p.Spec.NodeName] = map[string]int{}
		}
		perNode[p.Spec.NodeName][p.Spec.SchedulerName]++
		own := agentShard
		if p.Spec.SchedulerName == vcShard {
			own = vcShard
		}
		// (vc-agent-scheduler's pods on the moved node: checked below)
		if !contains(final[own].desired, p.Spec.NodeName) && !(own == vcShard && p.Spec.NodeName == newIdle) {
			fail("pod %s (%s) on %s, outside its shard %v", p.Name, p.Spec.SchedulerName,
				p.Spec.NodeName, final[own].desired)
		}
	}
	for n, by := range perNode {
		if len(by) > 1 && n != newIdle {
			fail("node %s carries pods of both schedulers: %v", n, by)
		}
	}
	binds, err := snap.checkBinds(agentShard, vcShard)
	if err != nil {
		fail("%v", err)
	}
	// The moved node: every vc-agent-scheduler bind there came before the
	// revision where its nodesInUse dropped the node, every agentsched
	// bind after it.
	released := snap.releasedAt(vcShard, newIdle)
	if released == 0 {
		fail("no NodeShard version shows %s released by %s", newIdle, vcShard)
	}
	var before, after int
	for _, b := range snap.binds {
		if b.node != newIdle {
			continue
		}
		switch {
		case b.sched == vcShard && b.rv > released:
			fail("%s bound %s to %s at revision %d, after releasing it at %d", vcShard, b.pod, b.node, b.rv, released)
		case b.sched != vcShard && b.rv < released:
			fail("%s bound to %s at revision %d, before %s released it at %d", b.pod, b.node, b.rv, vcShard, released)
		case b.sched == vcShard:
			before++
		default:
			after++
		}
	}
	logf("%s: %d vc-agent-scheduler pods bound before its release at revision %d, %d agentsched pods after",
		newIdle, before, released, after)
	logf("per node: %v", perNode)
	logf("%d NodeShard versions, %d binds checked at their revisions; shards %s",
		len(snap.hist), binds, snap.describe())
}

// agentPodOnlyOn makes sure agentsched placed something on node (one of
// shard): when the third burst left it alone, one agent pod asking for
// all of node's free CPU, more than any other node of shard has free, must
// bind there.
func (c *cluster) agentPodOnlyOn(node string, shard []string) {
	used := map[string]int64{}
	placed := 0
	for _, p := range c.pods() {
		if p.Spec.NodeName == "" {
			continue
		}
		q := podRequests(&p)[corev1.ResourceCPU]
		used[p.Spec.NodeName] += q.MilliValue()
		if p.Spec.NodeName == node && p.Spec.SchedulerName == agentScheduler {
			placed++
		}
	}
	if placed > 0 {
		logf("agentsched placed %d pods on %s after it moved", placed, node)
		return
	}
	free := map[string]int64{}
	for _, n := range c.nodes() {
		q := n.Status.Allocatable[corev1.ResourceCPU]
		free[n.Name] = q.MilliValue() - used[n.Name]
	}
	for _, n := range shard {
		if n != node && free[n] >= free[node] {
			logf("%s has %dm free, %s %dm: no pod fits %s alone", n, free[n], node, free[node], node)
			return
		}
	}
	cpu := fmt.Sprintf("%dm", free[node])
	c.createPods("as4", 1, agentPod("", cpu, "64Mi"), 1)
	c.waitAllBoundN("as4", 1)
	for _, p := range c.pods() {
		if strings.HasPrefix(p.Name, "as4-") && p.Spec.NodeName != node {
			fail("pod %s of %s CPU, which fits only %s, bound to %s", p.Name, cpu, node, p.Spec.NodeName)
		}
	}
	logf("agentsched bound a %s CPU pod, which fits only %s, there", cpu, node)
}

// countInFile counts the lines of path holding s (0 when unreadable).
func countInFile(path, s string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return strings.Count(string(b), s)
}

// devClusterArgs runs a dev-cluster verb with extra arguments.
func (c *cluster) devClusterArgs(verb string, args ...string) {
	a := append([]string{c.env.need("DEV_CLUSTER"), verb, "--state-dir", c.stateDir}, args...)
	cmd := exec.Command("bash", a...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	check(cmd.Run(), "dev-cluster "+verb)
}

func (c *cluster) dynamicClient() dynamic.Interface {
	cfg, err := restConfig(c.env.need("KUBECONFIG"))
	check(err, "kubeconfig")
	d, err := dynamic.NewForConfig(cfg)
	check(err, "dynamic client")
	return d
}

// residentPod binds a pod of cpu CPU to node by spec.nodeName: load no
// scheduler placed.
func (c *cluster) residentPod(name, node, cpu string) {
	p := smallPod(name, cpu, "64Mi")
	p.Spec.NodeName = node
	ctx, cancel := ctxTimeout(30 * time.Second)
	defer cancel()
	_, err := c.cs.CoreV1().Pods(c.ns).Create(ctx, p, metav1.CreateOptions{})
	check(err, "create resident pod "+name)
}

func (c *cluster) addNode(name, cpu, memory string) {
	n, err := fakeNode(name, cpu, memory, "110", true)
	check(err, "node "+name)
	check(registerNodes(c.cs, []*corev1.Node{n}), "node "+name)
	logf("node %s joined (%s CPU)", name, cpu)
}

// applyVolcanoShardingConfigMap creates Volcano's example ConfigMap with
// only the names and numbers this cluster needs changed (each change, and
// each of more, asserted), and returns its sharding.yaml.
func (c *cluster) applyVolcanoShardingConfigMap(more ...[2]string) string {
	path := filepath.Join(c.env.need("VOLCANO_SRC"), "example/sharding/sharding-config-configmap.yaml")
	raw, err := os.ReadFile(path)
	check(err, "Volcano's example sharding ConfigMap")
	s := string(raw)
	for _, r := range append([][2]string{
		{"      - name: volcano\n", "      - name: vc-agent-scheduler\n"},
		{`shardSyncPeriod: "60s"`, `shardSyncPeriod: "20s"`},
	}, more...) {
		if strings.Count(s, r[0]) != 1 {
			fail("%s: expected one %q to adapt", path, r[0])
		}
		s = strings.Replace(s, r[0], r[1], 1)
	}
	var cm corev1.ConfigMap
	check(yaml.Unmarshal([]byte(s), &cm), path)
	if cm.Namespace != "volcano-system" || cm.Name != "volcano-sharding-configmap" {
		fail("%s: ConfigMap %s/%s, want volcano-system/volcano-sharding-configmap (the controller's default)",
			path, cm.Namespace, cm.Name)
	}
	ctx, cancel := ctxTimeout(30 * time.Second)
	defer cancel()
	_, err = c.cs.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, &cm, metav1.CreateOptions{})
	check(err, "create the sharding ConfigMap")
	logf("applied %s/%s:\n%s", cm.Namespace, cm.Name, cm.Data["sharding.yaml"])
	return cm.Data["sharding.yaml"]
}

// parallelBursts creates n agent-scheduler pods of asCPU (prefix asPrefix)
// and n vc-agent-scheduler pods of vcCPU (vcPrefix) at once and waits for
// all to bind.
func (c *cluster) parallelBursts(n int, asCPU, vcCPU, asPrefix, vcPrefix string) {
	vc := smallPod("", vcCPU, "64Mi")
	vc.Spec.SchedulerName = c.env.need("VC_AGENT_NAME")
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan interface{}, 2)
	for _, b := range []struct {
		prefix string
		tmpl   *corev1.Pod
	}{{asPrefix, agentPod("", asCPU, "64Mi")}, {vcPrefix, vc}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil {
					errs <- r
				}
			}()
			c.createPods(b.prefix, n, b.tmpl, 4)
			c.waitAllBoundN(b.prefix, n)
		}()
	}
	wg.Wait()
	close(errs)
	for r := range errs {
		panic(r)
	}
	logf("bursts %s (%d x %s CPU) and %s (%d x %s CPU) bound in %.1fs", asPrefix, n, asCPU, vcPrefix, n,
		vcCPU, time.Since(start).Seconds())
}

// ---- agentsched shard-controller --------------------------------------

type shardCtl struct {
	cmd *exec.Cmd
	url string
	log string
}

// startShardController applies deploy/shard-controller/rbac.yaml and runs
// `agentsched shard-controller` as its ServiceAccount, its config in a
// ConfigMap of kube-system (where its Role may read).
func (c *cluster) startShardController(shardingYAML string) *shardCtl {
	repo := c.repo()
	c.applyFile(filepath.Join(repo, "deploy/shard-controller/rbac.yaml"), false)
	ctx, cancel := ctxTimeout(30 * time.Second)
	defer cancel()
	_, err := c.cs.CoreV1().ConfigMaps("kube-system").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "agentsched-sharding", Namespace: "kube-system"},
		Data:       map[string]string{"sharding.yaml": shardingYAML},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		fail("create kube-system/agentsched-sharding: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	check(err, "free port")
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	x := &shardCtl{url: "http://127.0.0.1:" + strconv.Itoa(port),
		log: filepath.Join(c.stateDir, "logs", "shard-controller.log")}
	out, err := os.Create(x.log)
	check(err, "shard-controller log")
	x.cmd = exec.Command(c.env.need("AGENTSCHED_BIN"), "shard-controller",
		"--configmap", "kube-system/agentsched-sharding",
		"--kubeconfig", filepath.Join(c.stateDir, "kubeconfig-shard-controller"),
		"--identity", "e2e-shard-controller", "--listen", "127.0.0.1:"+strconv.Itoa(port))
	x.cmd.Stdout, x.cmd.Stderr = out, out
	x.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	check(x.cmd.Start(), "start agentsched shard-controller")
	out.Close()
	logf("agentsched shard-controller (pid %d) started, log %s", x.cmd.Process.Pid, x.log)
	return x
}

func (x *shardCtl) waitLeader() {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if code, _, err := getAt(x.url, "/metrics"); err != nil || code != 200 {
			time.Sleep(250 * time.Millisecond)
			continue
		}
		if metricsAt(x.url)["agentsched_shardctl_leader"] == 1 {
			logf("agentsched shard-controller holds the Lease")
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
	tail, _ := os.ReadFile(x.log)
	fail("agentsched shard-controller did not take the Lease in 30 s; log:\n%s", lastLines(string(tail), 20))
}

// waitFullRecompute waits for the controller's first full recompute (and
// the writes it leads to) and returns its metrics.
func (x *shardCtl) waitFullRecompute() map[string]float64 {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		m := metricsAt(x.url)
		if m[`agentsched_shardctl_recomputes_total{kind="full"}`] >= 1 {
			time.Sleep(time.Second)
			return metricsAt(x.url)
		}
		time.Sleep(250 * time.Millisecond)
	}
	fail("agentsched shard-controller made no full recompute in 30 s")
	return nil
}

func (x *shardCtl) stop() {
	if x.cmd == nil || x.cmd.Process == nil {
		return
	}
	_ = x.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = x.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = x.cmd.Process.Kill()
		<-done
	}
	x.cmd = nil
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// ---- NodeShard and bind history ---------------------------------------

var nodeShardGVR = schema.GroupVersionResource{Group: "shard.volcano.sh", Version: "v1alpha1", Resource: "nodeshards"}

type shardState struct {
	desired, inUse []string
	present        bool
}

type shardVersion struct {
	rv    int64
	name  string
	state shardState
}

type bindEvent struct {
	rv               int64
	pod, node, sched string
}

// shardRecorder watches NodeShards and the scenario's pods, keeping every
// NodeShard version and every pod's first bound version with their
// resourceVersions (one etcd: one revision order for both).
type shardRecorder struct {
	mu     sync.Mutex
	hist   []shardVersion
	binds  []bindEvent
	seen   map[string]bool
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func startShardRecorder(c *cluster, dyn dynamic.Interface) *shardRecorder {
	ctx, cancel := context.WithCancel(context.Background())
	r := &shardRecorder{cancel: cancel, seen: map[string]bool{}}
	shardsW, err := dyn.Resource(nodeShardGVR).Watch(ctx, metav1.ListOptions{})
	check(err, "watch NodeShards")
	podsW, err := c.cs.CoreV1().Pods(c.ns).Watch(ctx, metav1.ListOptions{})
	check(err, "watch pods")
	r.wg.Add(2)
	go func() {
		defer r.wg.Done()
		for ev := range shardsW.ResultChan() {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			rv, _ := strconv.ParseInt(u.GetResourceVersion(), 10, 64)
			st := shardState{present: ev.Type != watch.Deleted}
			st.desired, _, _ = unstructured.NestedStringSlice(u.Object, "spec", "nodesDesired")
			st.inUse, _, _ = unstructured.NestedStringSlice(u.Object, "status", "nodesInUse")
			sort.Strings(st.desired)
			sort.Strings(st.inUse)
			r.mu.Lock()
			r.hist = append(r.hist, shardVersion{rv, u.GetName(), st})
			r.mu.Unlock()
		}
	}()
	go func() {
		defer r.wg.Done()
		for ev := range podsW.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || p.Spec.NodeName == "" || strings.HasPrefix(p.Name, "resident-") {
				continue
			}
			rv, _ := strconv.ParseInt(p.ResourceVersion, 10, 64)
			r.mu.Lock()
			if !r.seen[p.Name] {
				r.seen[p.Name] = true
				r.binds = append(r.binds, bindEvent{rv, p.Name, p.Spec.NodeName, p.Spec.SchedulerName})
			}
			r.mu.Unlock()
		}
	}()
	return r
}

func (r *shardRecorder) stop() {
	r.cancel()
	r.wg.Wait()
}

type shardSnapshot struct {
	hist  []shardVersion
	binds []bindEvent
}

func (r *shardRecorder) snapshot() shardSnapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := shardSnapshot{hist: append([]shardVersion{}, r.hist...), binds: append([]bindEvent{}, r.binds...)}
	sort.SliceStable(s.hist, func(i, j int) bool { return s.hist[i].rv < s.hist[j].rv })
	sort.SliceStable(s.binds, func(i, j int) bool { return s.binds[i].rv < s.binds[j].rv })
	return s
}

// at is every shard's state as of revision rv (versions at or before it).
func (s shardSnapshot) at(rv int64) map[string]shardState {
	m := map[string]shardState{}
	for _, v := range s.hist {
		if v.rv > rv {
			break
		}
		m[v.name] = v.state
	}
	return m
}

func (s shardSnapshot) latest() map[string]shardState { return s.at(1<<62 - 1) }

func (s shardSnapshot) describe() string {
	var b strings.Builder
	m := s.latest()
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s{desired %v, inUse %v} ", k, m[k].desired, m[k].inUse)
	}
	return strings.TrimSpace(b.String())
}

// releasedAt is the first revision at which shard's nodesInUse lacks node
// after having held it (0: never).
func (s shardSnapshot) releasedAt(shard, node string) int64 {
	held := false
	for _, v := range s.hist {
		if v.name != shard {
			continue
		}
		if contains(v.state.inUse, node) {
			held = true
		} else if held {
			return v.rv
		}
	}
	return 0
}

// checkHistory: at no revision do the two shards' nodesInUse intersect.
func (s shardSnapshot) checkHistory(a, b string) error {
	m := map[string]shardState{}
	for _, v := range s.hist {
		m[v.name] = v.state
		for _, n := range m[a].inUse {
			if contains(m[b].inUse, n) {
				return fmt.Errorf("at revision %d node %s is in the nodesInUse of both %s %v and %s %v",
					v.rv, n, a, m[a].inUse, b, m[b].inUse)
			}
		}
	}
	return nil
}

// checkBinds: every bind went to a node its scheduler's shard desired and
// the other shard did not have in use, at the bind's revision.
func (s shardSnapshot) checkBinds(agent, vc string) (int, error) {
	for _, b := range s.binds {
		own, other := agent, vc
		if b.sched == vc {
			own, other = vc, agent
		}
		m := s.at(b.rv)
		// A decision made before the node left the shard may bind after
		// nodesDesired dropped it, while the node is still in use.
		if !contains(m[own].desired, b.node) && !contains(m[own].inUse, b.node) {
			return 0, fmt.Errorf("pod %s (%s) bound to %s at revision %d, outside %s's nodesDesired %v and nodesInUse %v",
				b.pod, b.sched, b.node, b.rv, own, m[own].desired, m[own].inUse)
		}
		if contains(m[other].inUse, b.node) {
			return 0, fmt.Errorf("pod %s (%s) bound to %s at revision %d while %s had it in use %v",
				b.pod, b.sched, b.node, b.rv, other, m[other].inUse)
		}
	}
	return len(s.binds), nil
}

// waitShards waits until every named shard's nodesDesired and nodesInUse
// (its scheduler's status) both equal want.
func (r *shardRecorder) waitShards(want map[string][]string, limit time.Duration, who string) {
	deadline := time.Now().Add(limit)
	for {
		s := r.snapshot()
		m := s.latest()
		ok := true
		for name, nodes := range want {
			if !equalStrings(m[name].desired, nodes) || !equalStrings(m[name].inUse, nodes) {
				ok = false
			}
		}
		if ok {
			logf("%s: shards %s", who, s.describe())
			return
		}
		if time.Now().After(deadline) {
			fail("%s: after %s the shards are %s; want desired = in use = %v", who, limit, s.describe(), want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
