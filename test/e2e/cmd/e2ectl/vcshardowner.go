package main

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
)

// Scenario volcano_shard_owner: one owner of the NodeShards.
// vc-controller-manager runs with its leader election (the Lease
// volcano-system/vc-controller-manager, as Volcano's installer runs it) and
// its sharding-controller, from Volcano's example ConfigMap (names adapted
// as in volcano_shards). `agentsched shard-controller` (rbac.yaml's
// ServiceAccount, the same sharding.yaml) starts beside it:
//  1. it stands down: agentsched_shardctl_foreign_owner = 1, the log line,
//     no NodeShard written (writes_total 0, no nodesDesired owned by the
//     field manager agentsched) while a node joins and Volcano's controller
//     assigns it;
//  2. vc-controller-manager is killed (its Lease is not released): once the
//     Lease expired (15 s), agentsched's controller takes over (gauge 0,
//     log line), every NodeShard is still there with the same nodes, and a
//     node that joins then is assigned by agentsched (its field manager now
//     owns that nodesDesired);
//  3. vc-controller-manager returns, leader-elected, without
//     sharding-controller: its old nodesDesired entry predates its new
//     Lease holder, so agentsched keeps writing (a node joins and is
//     assigned).
func scenarioVolcanoShardOwner(c *cluster) {
	const (
		agentShard = "agent-scheduler"
		vcShard    = "vc-agent-scheduler"
	)
	if c.env["VOLCANO"] != "1" {
		fail("needs dev-cluster --volcano --volcano-leader-elect")
	}
	dyn := c.dynamicClient()
	names := []string{}
	for _, n := range c.nodes() {
		names = append(names, n.Name)
	}
	sort.Strings(names)
	if len(names) != 4 {
		fail("want 4 nodes, have %d", len(names))
	}
	busy, idle := names[:2], names[2:]
	for i, n := range busy {
		c.residentPod("resident-"+string(rune('a'+i)), n, "12")
	}

	// Volcano's controller, leader-elected, with sharding-controller.
	shardingYAML := c.applyVolcanoShardingConfigMap()
	c.devClusterArgs("vc-controller-manager-kill")
	c.devClusterArgs("vc-controller-manager-start", "--volcano-controllers",
		"pg-controller,queue-controller,sharding-controller")
	holder := c.waitVolcanoLease(60 * time.Second)
	logf("vc-controller-manager holds volcano-system/vc-controller-manager (%s)", holder)
	waitDesired(dyn, map[string][]string{agentShard: busy, vcShard: idle}, 60*time.Second,
		"Volcano's sharding controller")
	owners := desiredManagers(dyn)
	logf("nodesDesired owned by: %v", owners)
	for s, m := range owners {
		if m != "vc-controller-manager" {
			fail("NodeShard %s: nodesDesired owned by %q, want vc-controller-manager (Volcano's field manager)", s, m)
		}
	}

	// 1. agentsched's controller beside it stands down.
	ctl := c.startShardController(shardingYAML)
	defer ctl.stop()
	ctl.waitLeader()
	m := ctl.waitMetric("agentsched_shardctl_foreign_owner", 1, 20*time.Second, "stand down")
	if countInFile(ctl.log, "standing down") < 1 {
		fail("no stand-down line in %s", ctl.log)
	}
	if m["agentsched_shardctl_stand_downs_total"] != 1 {
		fail("stand_downs_total = %v, want 1", m["agentsched_shardctl_stand_downs_total"])
	}
	// A node joins while both run: Volcano's controller assigns it,
	// agentsched's computes the same and writes nothing.
	c.addNode("node-0004", "16", "64Gi")
	wantIdle := append(append([]string{}, idle...), "node-0004")
	waitDesired(dyn, map[string][]string{agentShard: busy, vcShard: wantIdle}, 60*time.Second,
		"Volcano's sharding controller, after node-0004 joined")
	ctl.waitMetricAtLeast(`agentsched_shardctl_recomputes_total{kind="incremental"}`, 1, 20*time.Second)
	time.Sleep(3 * time.Second) // a few of its rounds
	m = metricsAt(ctl.url)
	if w := m[`agentsched_shardctl_nodeshard_writes_total{result="ok"}`] +
		m[`agentsched_shardctl_nodeshard_writes_total{result="failed"}`]; w != 0 {
		fail("agentsched shard-controller wrote %v NodeShards while Volcano's controller owned them", w)
	}
	for s, o := range desiredManagers(dyn) {
		if o != "vc-controller-manager" {
			fail("NodeShard %s: nodesDesired owned by %q while Volcano's controller runs", s, o)
		}
	}
	logf("standing down: foreign_owner=%v, 0 writes, nodesDesired all vc-controller-manager's",
		m["agentsched_shardctl_foreign_owner"])

	// 2. vc-controller-manager stops without releasing its Lease.
	killed := time.Now()
	c.devClusterArgs("vc-controller-manager-kill")
	m = ctl.waitMetric("agentsched_shardctl_foreign_owner", 0, 45*time.Second, "take over")
	logf("took over %.1fs after vc-controller-manager was killed (Lease duration 15 s)",
		time.Since(killed).Seconds())
	if countInFile(ctl.log, "taking over the NodeShards") < 1 {
		fail("no take-over line in %s", ctl.log)
	}
	// No shard lost, no node moved.
	waitDesired(dyn, map[string][]string{agentShard: busy, vcShard: wantIdle}, 5*time.Second,
		"agentsched shard-controller, after taking over")
	c.addNode("node-0005", "16", "64Gi")
	wantIdle = append(wantIdle, "node-0005")
	waitDesired(dyn, map[string][]string{agentShard: busy, vcShard: wantIdle}, 30*time.Second,
		"agentsched shard-controller, after node-0005 joined")
	owners = desiredManagers(dyn)
	if owners[vcShard] != "agentsched" {
		fail("NodeShard %s: nodesDesired owned by %q after agentsched wrote it", vcShard, owners[vcShard])
	}
	m = metricsAt(ctl.url)
	logf("after take-over: writes ok=%v, nodesDesired owners %v",
		m[`agentsched_shardctl_nodeshard_writes_total{result="ok"}`], owners)

	// 3. vc-controller-manager returns, leader-elected, without its
	// sharding-controller: its Lease is live again and it still owns
	// agent-scheduler's nodesDesired from before, but that entry predates
	// its new holder's acquireTime: agentsched keeps writing.
	c.devClusterArgs("vc-controller-manager-start", "--volcano-controllers", "pg-controller,queue-controller")
	holder2 := c.waitVolcanoLease(60 * time.Second)
	if holder2 == holder {
		fail("the restarted vc-controller-manager holds its Lease as %q, the old identity", holder2)
	}
	if owners[agentShard] != "vc-controller-manager" {
		fail("NodeShard %s: nodesDesired owned by %q, want vc-controller-manager's old entry", agentShard, owners[agentShard])
	}
	time.Sleep(3 * time.Second) // a few of the controller's rounds
	c.addNode("node-0006", "16", "64Gi")
	wantIdle = append(wantIdle, "node-0006")
	waitDesired(dyn, map[string][]string{agentShard: busy, vcShard: wantIdle}, 30*time.Second,
		"agentsched shard-controller, beside vc-controller-manager without sharding-controller")
	m = metricsAt(ctl.url)
	if m["agentsched_shardctl_foreign_owner"] != 0 || m["agentsched_shardctl_stand_downs_total"] != 1 {
		fail("stood down for a vc-controller-manager without sharding-controller: foreign_owner=%v stand_downs=%v",
			m["agentsched_shardctl_foreign_owner"], m["agentsched_shardctl_stand_downs_total"])
	}
	logf("vc-controller-manager back without sharding-controller (holder %s): agentsched kept writing", holder2)
}

// waitVolcanoLease waits for vc-controller-manager's Lease to be held and
// returns the holder.
func (c *cluster) waitVolcanoLease(limit time.Duration) string {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		ctx, cancel := ctxTimeout(10 * time.Second)
		l, err := c.cs.CoordinationV1().Leases("volcano-system").Get(ctx, "vc-controller-manager", metav1.GetOptions{})
		cancel()
		if err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
			return *l.Spec.HolderIdentity
		}
		time.Sleep(250 * time.Millisecond)
	}
	fail("no Lease volcano-system/vc-controller-manager held in %s (--volcano-leader-elect?)", limit)
	return ""
}

// waitDesired waits for every named NodeShard's nodesDesired (sorted) to
// be want.
func waitDesired(dyn dynamic.Interface, want map[string][]string, limit time.Duration, who string) {
	deadline := time.Now().Add(limit)
	for {
		got := map[string][]string{}
		ctx, cancel := ctxTimeout(10 * time.Second)
		l, err := dyn.Resource(nodeShardGVR).List(ctx, metav1.ListOptions{})
		cancel()
		if err == nil {
			for _, it := range l.Items {
				d, _, _ := unstructured.NestedStringSlice(it.Object, "spec", "nodesDesired")
				sort.Strings(d)
				got[it.GetName()] = d
			}
			ok := true
			for name, nodes := range want {
				if _, present := got[name]; !present || !equalStrings(got[name], nodes) {
					ok = false
				}
			}
			if ok {
				logf("%s: nodesDesired %s", who, shortSets(got))
				return
			}
		}
		if time.Now().After(deadline) {
			fail("%s: after %s nodesDesired are %s (err %v); want %s", who, limit, shortSets(got), err,
				shortSets(want))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// shortSets prints sets of nodes whole, or as a count with the first and
// last when long (a NodeShard of thousands of nodes).
func shortSets(m map[string][]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		v := m[k]
		if len(v) <= 12 {
			parts = append(parts, fmt.Sprintf("%s:%v", k, v))
		} else {
			parts = append(parts, fmt.Sprintf("%s:[%d nodes, %s .. %s]", k, len(v), v[0], v[len(v)-1]))
		}
	}
	return "map[" + strings.Join(parts, " ") + "]"
}

// desiredManagers maps each NodeShard to the field manager owning its
// spec.nodesDesired (managedFields).
func desiredManagers(dyn dynamic.Interface) map[string]string {
	ctx, cancel := ctxTimeout(10 * time.Second)
	defer cancel()
	l, err := dyn.Resource(nodeShardGVR).List(ctx, metav1.ListOptions{})
	check(err, "list NodeShards")
	out := map[string]string{}
	for _, it := range l.Items {
		for _, mf := range it.GetManagedFields() {
			if mf.Subresource == "" && mf.FieldsV1 != nil &&
				strings.Contains(string(mf.FieldsV1.Raw), `"f:nodesDesired"`) {
				out[it.GetName()] = mf.Manager
			}
		}
	}
	return out
}

// waitMetric waits for a gauge of the controller to equal v.
func (x *shardCtl) waitMetric(name string, v float64, limit time.Duration, what string) map[string]float64 {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		m := metricsAt(x.url)
		if val, ok := m[name]; ok && val == v {
			return m
		}
		time.Sleep(250 * time.Millisecond)
	}
	tail, _ := os.ReadFile(x.log)
	fail("%s: %s did not reach %v in %s; log:\n%s", what, name, v, limit, lastLines(string(tail), 20))
	return nil
}

func (x *shardCtl) waitMetricAtLeast(name string, v float64, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if metricsAt(x.url)[name] >= v {
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
	fail("%s did not reach %v in %s", name, v, limit)
}
