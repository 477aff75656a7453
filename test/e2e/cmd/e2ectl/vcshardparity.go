package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Scenario volcano_shard_parity: the same shards from the same config.
// Twelve nodes, each with a distinct resident CPU load (0.5 + 1.25*i of 16
// CPU: utilisations 0.03..0.89, no two equal, so that no selection depends
// on how ties are broken), plus what Volcano counts differently from the
// scheduler's effective request (a large init container, allocatable
// below capacity, a mirror pod, a Succeeded pod) and warmup labels
// (parityLoadVariants). For each config below, Volcano's sharding
// controller (in vc-controller-manager) writes the NodeShards; then
// `agentsched shard-controller --cluster DUMP --once` computes them
// offline from a dump of the same Nodes and Pods, and every nodesDesired
// must be equal. Then 108 idle nodes join (120: Volcano selects per batch
// of 50) and two more configs run: maxNodes 100 over 114 nodes of one band
// (deterministic: equal), and maxNodes 30 over 120 nodes, where which
// nodes share a batch follows Volcano's informer's map order, so only the
// counts its rule gives are compared. Each config names its own shards,
// so Volcano creates them anew (its rewrite threshold plays no part), and
// vc-controller-manager is restarted for each: on a live reload of its
// ConfigMap, Volcano's controller computes each shard alone (its
// assignment cache is emptied, every scheduler falls back to a calculation
// that excludes no other scheduler's nodes), so a later scheduler in
// config order may desire an earlier one's nodes until its next full
// sync. At start it computes them together.
func scenarioVolcanoShardParity(c *cluster) {
	if c.env["VOLCANO"] != "1" {
		fail("needs dev-cluster --volcano")
	}
	nodes := c.nodes()
	names := make([]string, 0, len(nodes))
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	sort.Strings(names)
	if len(names) != 12 {
		fail("want 12 nodes, have %d", len(names))
	}
	for i, n := range names {
		c.residentPod(fmt.Sprintf("resident-%02d", i), n, fmt.Sprintf("%dm", 500+1250*i))
	}
	c.parityLoadVariants(names)
	configs := []parityConfig{
		{what: "policies, two bands (Volcano's example shape)", yaml: `
schedulerConfigs:
  - name: r1-busy
    type: agent
    policies:
      - {name: allocation-rate, arguments: {minCPUUtil: 0.5, maxCPUUtil: 1.0}}
      - {name: node-limit, arguments: {minNodes: 1, maxNodes: 100}}
  - name: r1-idle
    type: volcano
    policies:
      - {name: allocation-rate, arguments: {minCPUUtil: 0.0, maxCPUUtil: 0.49}}
shardSyncPeriod: 60s
`},
		{what: "flat fields with a maxNodes cap", yaml: `
schedulerConfigs:
  - name: r2-busy
    type: agent
    cpuUtilizationMin: 0.3
    cpuUtilizationMax: 1.0
    minNodes: 1
    maxNodes: 3
  - name: r2-rest
    type: volcano
    cpuUtilizationMin: 0.0
    cpuUtilizationMax: 1.0
shardSyncPeriod: 60s
`},
		{what: "scheduler-level arguments, policies mixed with flat fields, weight 0", yaml: `
schedulerConfigs:
  - name: r3-mid
    type: agent
    arguments: {minCPUUtil: 0.2, maxCPUUtil: 0.7}
  - name: r3-rest
    type: volcano
    maxNodes: 4
    policies:
      - {name: allocation-rate, weight: 0, arguments: {minCPUUtil: 0.0, maxCPUUtil: 1.0}}
shardSyncPeriod: 60s
`},
		parityWarmupConfig,
	}
	dump := c.dumpNodesAndPods()
	for i, cfg := range configs {
		c.runParityConfig(i+1, cfg, dump)
	}
	c.parityAddNodes()
	all := make([]string, 0, 120)
	for _, n := range c.nodes() {
		all = append(all, n.Name)
	}
	sort.Strings(all)
	if len(all) != 120 {
		fail("want 120 nodes, have %d", len(all))
	}
	dump = c.dumpNodesAndPods()
	for i, cfg := range parityBatchConfigs(all) {
		c.runParityConfig(len(configs)+i+1, cfg, dump)
	}
}

// dumpNodesAndPods writes the cluster's Nodes and Pods as one v1 List.
func (c *cluster) dumpNodesAndPods() string {
	ctx, cancel := ctxTimeout(30 * time.Second)
	defer cancel()
	nl, err := c.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	check(err, "list nodes")
	pl, err := c.cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	check(err, "list pods")
	items := []interface{}{}
	for i := range nl.Items {
		n := nl.Items[i]
		n.Kind, n.APIVersion = "Node", "v1"
		items = append(items, n)
	}
	for i := range pl.Items {
		p := pl.Items[i]
		p.Kind, p.APIVersion = "Pod", "v1"
		items = append(items, p)
	}
	b, err := json.Marshal(map[string]interface{}{"apiVersion": "v1", "kind": "List", "items": items})
	check(err, "marshal the dump")
	path := filepath.Join(c.stateDir, "parity-cluster.json")
	check(os.WriteFile(path, b, 0o644), "write the dump")
	return path
}

func (c *cluster) putVolcanoShardingConfig(yamlText string) {
	ctx, cancel := ctxTimeout(30 * time.Second)
	defer cancel()
	cms := c.cs.CoreV1().ConfigMaps("volcano-system")
	cm, err := cms.Get(ctx, "volcano-sharding-configmap", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = cms.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "volcano-sharding-configmap", Namespace: "volcano-system"},
			Data:       map[string]string{"sharding.yaml": yamlText},
		}, metav1.CreateOptions{})
		check(err, "create the sharding ConfigMap")
		return
	}
	check(err, "get the sharding ConfigMap")
	cm.Data = map[string]string{"sharding.yaml": yamlText}
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	check(err, "update the sharding ConfigMap")
}

// waitStableShards waits for the named NodeShards to exist and their
// nodesDesired to stay unchanged for 3 s, and returns them sorted.
func waitStableShards(c *cluster, names []string, limit time.Duration) map[string][]string {
	dyn := c.dynamicClient()
	deadline := time.Now().Add(limit)
	var last map[string][]string
	since := time.Now()
	for time.Now().Before(deadline) {
		ctx, cancel := ctxTimeout(10 * time.Second)
		l, err := dyn.Resource(nodeShardGVR).List(ctx, metav1.ListOptions{})
		cancel()
		if err == nil {
			got := map[string][]string{}
			for _, it := range l.Items {
				d, _, _ := unstructured.NestedStringSlice(it.Object, "spec", "nodesDesired")
				sort.Strings(d)
				got[it.GetName()] = d
			}
			all := true
			for _, n := range names {
				if _, ok := got[n]; !ok {
					all = false
				}
			}
			same := last != nil
			for _, n := range names {
				if same && !equalStrings(got[n], last[n]) {
					same = false
				}
			}
			if !all || !same {
				since = time.Now()
			} else if time.Since(since) >= 3*time.Second {
				return got
			}
			last = got
		}
		time.Sleep(250 * time.Millisecond)
	}
	fail("NodeShards %v not present and stable in %s (last %v)", names, limit, last)
	return nil
}

// agentschedOnce computes the shards offline with agentsched's controller.
func agentschedOnce(c *cluster, yamlText, dump string) map[string][]string {
	cfg := filepath.Join(c.stateDir, "parity-sharding.yaml")
	check(os.WriteFile(cfg, []byte(yamlText), 0o644), "write the config")
	out, err := exec.Command(c.env.need("AGENTSCHED_BIN"), "shard-controller", "--config", cfg,
		"--cluster", dump, "--once").Output()
	check(err, "agentsched shard-controller --once")
	var doc struct {
		Shards []struct {
			Name         string   `json:"name"`
			NodesDesired []string `json:"nodesDesired"`
		} `json:"shards"`
	}
	check(json.Unmarshal(out, &doc), "its JSON")
	res := map[string][]string{}
	for _, s := range doc.Shards {
		d := append([]string{}, s.NodesDesired...)
		sort.Strings(d)
		res[s.Name] = d
	}
	return res
}
