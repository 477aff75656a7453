package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Scenario volcano_shard_scale: NodeShards the size a large cluster's are.
// 2000 nodes named as a cloud names them
// (ip-10-0-7-134.eu-west-1.compute.internal), 20 of them busy (12 of 16
// CPU held by a resident pod). Volcano's example sharding ConfigMap, with
// its volcano shard's maxNodes raised to hold the cluster (names adapted
// as in volcano_shards). `agentsched shard-controller` (rbac.yaml's
// ServiceAccount) writes both NodeShards: vc-agent-scheduler's holds the
// 1980 idle nodes, about 85 KB of nodesDesired (more than the 64 KiB the
// answer to a write was once held to), agent-scheduler's the 20 busy ones.
// Then agentsched's fast path (hard mode, shard agent-scheduler) and
// vc-agent-scheduler (hard mode, its shard) each bind a burst.
//
// Checked: both NodeShards hold exactly those nodes; the controller wrote
// them with no failed write and no node left out; agentsched's cache holds
// all 2000 nodes and its shard the 20; every pod bound, inside its own
// scheduler's shard; no overcommit.
func scenarioVolcanoShardScale(c *cluster) {
	const (
		agentShard = "agent-scheduler"
		vcShard    = "vc-agent-scheduler"
		nodes      = 2000
		busyNodes  = 20
		burst      = 100
	)
	if c.env["VOLCANO"] != "1" || c.env["VOLCANO_AGENT"] != "1" {
		fail("needs dev-cluster --volcano --volcano-agent")
	}
	if got := c.env["VC_AGENT_NAME"]; got != vcShard {
		fail("vc-agent-scheduler serves %q, want %q", got, vcShard)
	}
	names := make([]string, nodes)
	for i := range names {
		names[i] = fmt.Sprintf("ip-10-0-%d-%d.eu-west-1.compute.internal", i/250, i%250+1)
	}
	c.addNodes(names, "16", "64Gi")
	busy := append([]string{}, names[:busyNodes]...)
	idle := append([]string{}, names[busyNodes:]...)
	sort.Strings(busy)
	sort.Strings(idle)
	for i, n := range busy {
		c.residentPod(fmt.Sprintf("resident-%d", i), n, "12")
	}

	// The volcano shard of Volcano's example is capped at 100 nodes: a
	// cluster this size raises it.
	shardingYAML := c.applyVolcanoShardingConfigMap([2]string{
		"        minNodes: 1\n        maxNodes: 100\n    shardSyncPeriod",
		"        minNodes: 1\n        maxNodes: 5000\n    shardSyncPeriod"})
	start := time.Now()
	ctl := c.startShardController(shardingYAML)
	defer ctl.stop()
	ctl.waitLeader()
	dyn := c.dynamicClient()
	waitDesired(dyn, map[string][]string{agentShard: busy, vcShard: idle}, 120*time.Second,
		"agentsched shard-controller")
	logf("both NodeShards written %.1fs after the controller started", time.Since(start).Seconds())
	ctx, cancel := ctxTimeout(30 * time.Second)
	vs, err := dyn.Resource(nodeShardGVR).Get(ctx, vcShard, metav1.GetOptions{})
	cancel()
	check(err, "get NodeShard "+vcShard)
	raw, err := json.Marshal(vs.Object)
	check(err, "NodeShard "+vcShard)
	desiredNames, _, _ := unstructured.NestedStringSlice(vs.Object, "spec", "nodesDesired")
	desired, err := json.Marshal(desiredNames)
	check(err, "NodeShard "+vcShard+" nodesDesired")
	logf("NodeShard %s: %d bytes, nodesDesired %d bytes", vcShard, len(raw), len(desired))
	if len(desired) <= 64<<10 {
		fail("NodeShard %s's nodesDesired is %d bytes: the scenario means it over 64 KiB", vcShard, len(desired))
	}
	m := metricsAt(ctl.url)
	logf("shard-controller: writes ok=%.0f failed=%.0f unassigned(no_fit)=%.0f unassigned(capped)=%.0f",
		m[`agentsched_shardctl_nodeshard_writes_total{result="ok"}`],
		m[`agentsched_shardctl_nodeshard_writes_total{result="failed"}`],
		m[`agentsched_shardctl_nodes_unassigned{reason="no_fit"}`],
		m[`agentsched_shardctl_nodes_unassigned{reason="capped"}`])
	if m[`agentsched_shardctl_nodeshard_writes_total{result="failed"}`] != 0 {
		fail("agentsched shard-controller failed NodeShard writes; log %s", ctl.log)
	}
	if m[`agentsched_shardctl_nodes_unassigned{reason="no_fit"}`] != 0 ||
		m[`agentsched_shardctl_nodes_unassigned{reason="capped"}`] != 0 {
		fail("agentsched shard-controller left nodes in no shard")
	}

	// agentsched's cache: every node, its own shard's 20.
	deadline := time.Now().Add(60 * time.Second)
	for {
		am := c.metrics()
		if am["agentsched_cache_nodes"] == nodes && am["agentsched_cache_nodes_in_shard"] == busyNodes {
			logf("agentsched caches %d nodes, %d in its shard", nodes, busyNodes)
			break
		}
		if time.Now().After(deadline) {
			fail("agentsched caches %.0f nodes, %.0f in its shard; want %d and %d",
				am["agentsched_cache_nodes"], am["agentsched_cache_nodes_in_shard"], nodes, busyNodes)
		}
		time.Sleep(250 * time.Millisecond)
	}

	c.parallelBursts(burst, "250m", "125m", "as1", "vc1")
	c.checkNoOvercommit()
	in := map[string]map[string]bool{agentShard: {}, vcShard: {}}
	for _, n := range busy {
		in[agentShard][n] = true
	}
	for _, n := range idle {
		in[vcShard][n] = true
	}
	per := map[string]int{}
	for _, p := range c.pods() {
		if strings.HasPrefix(p.Name, "resident-") {
			continue
		}
		own := agentShard
		if p.Spec.SchedulerName == vcShard {
			own = vcShard
		}
		if p.Spec.NodeName == "" {
			fail("pod %s (%s) not bound", p.Name, p.Spec.SchedulerName)
		}
		if !in[own][p.Spec.NodeName] {
			fail("pod %s (%s) on %s, outside its shard", p.Name, p.Spec.SchedulerName, p.Spec.NodeName)
		}
		per[own]++
	}
	logf("bound inside their own shards: %v", per)
}

// addNodes registers fake nodes of cpu and memory under names.
func (c *cluster) addNodes(names []string, cpu, memory string) {
	start := time.Now()
	nodes := make([]*corev1.Node, 0, len(names))
	for _, name := range names {
		n, err := fakeNode(name, cpu, memory, "110", true)
		check(err, "node "+name)
		nodes = append(nodes, n)
	}
	check(registerNodes(c.cs, nodes), "register nodes")
	logf("%d nodes of %s CPU registered in %.1fs", len(names), cpu, time.Since(start).Seconds())
}
