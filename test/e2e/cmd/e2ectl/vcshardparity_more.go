package main

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The parts of volcano_shard_parity beyond twelve plain nodes: loads that
// the scheduler's effective request and Volcano's count differently, warmup
// labels, and more than 50 nodes (Volcano's batches).

// parityConfig is one sharding config and how to compare its result:
// exact (every nodesDesired equal) or, where Volcano's answer depends on
// its informer's map order, check(Volcano's, agentsched's).
type parityConfig struct {
	what, yaml string
	check      func(vc, as map[string][]string)
}

// parityLoadVariants puts on the twelve nodes (by name order) what
// Volcano's controller counts differently from the scheduler's effective
// request, without making two utilisations equal (they stay 0.03..0.89):
//   - node 5: a pod of 100m whose init container asks for 8 CPU (Volcano
//     counts the containers only: 0.43, not 0.92);
//   - node 4: allocatable cut to 8 of its 16 CPU (Volcano divides by the
//     capacity: 0.34, not 0.69);
//   - node 3: a mirror pod of 8 CPU (not counted: 0.27, not 0.77);
//   - node 2: a Succeeded pod of 8 CPU (not counted);
//   - warmup labels: nodes 0 and 1 node.volcano.sh/warmup=true (what the
//     warmup policy and preferWarmupNodes read by default), nodes 2 and 7
//     example.com/warm=yes (a warmup policy's own warmupLabel/Value).
func (c *cluster) parityLoadVariants(names []string) {
	ctx, cancel := ctxTimeout(60 * time.Second)
	defer cancel()
	pods := c.cs.CoreV1().Pods(c.ns)

	p := smallPod("big-init", "100m", "64Mi")
	p.Spec.NodeName = names[5]
	p.Spec.InitContainers = []corev1.Container{{
		Name: "init", Image: "registry.invalid/init:e2e",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("64Mi"),
		}},
	}}
	_, err := pods.Create(ctx, p, metav1.CreateOptions{})
	check(err, "create the pod with a large init container")

	c.patchNodeStatus(names[4], `{"status":{"allocatable":{"cpu":"8"}}}`)

	m := smallPod("mirror", "8", "64Mi")
	m.Spec.NodeName = names[3]
	m.Annotations = map[string]string{"kubernetes.io/config.mirror": "e2e"}
	_, err = pods.Create(ctx, m, metav1.CreateOptions{})
	check(err, "create the mirror pod")

	d := smallPod("succeeded", "8", "64Mi")
	d.Spec.NodeName = names[2]
	d, err = pods.Create(ctx, d, metav1.CreateOptions{})
	check(err, "create the pod that succeeds")
	d.Status.Phase = corev1.PodSucceeded
	_, err = pods.UpdateStatus(ctx, d, metav1.UpdateOptions{})
	check(err, "mark the pod Succeeded")

	for i, l := range map[int]string{0: `"node.volcano.sh/warmup":"true"`, 1: `"node.volcano.sh/warmup":"true"`,
		2: `"example.com/warm":"yes"`, 7: `"example.com/warm":"yes"`} {
		_, err := c.cs.CoreV1().Nodes().Patch(ctx, names[i], types.MergePatchType,
			[]byte(`{"metadata":{"labels":{`+l+`}}}`), metav1.PatchOptions{})
		check(err, "label node "+names[i])
	}
}

// parityWarmupConfig: preferWarmupNodes (flat: a warmup policy of weight
// 1 on node.volcano.sh/warmup=true) and a warmup policy with its own
// label, each under a maxNodes cap that makes the warm nodes win over
// busier ones.
var parityWarmupConfig = parityConfig{what: "warmup labels under maxNodes caps", yaml: `
schedulerConfigs:
  - name: r4-warm
    type: agent
    cpuUtilizationMin: 0.0
    cpuUtilizationMax: 1.0
    preferWarmupNodes: true
    minNodes: 1
    maxNodes: 3
  - name: r4-custom
    type: agent
    policies:
      - {name: allocation-rate, arguments: {minCPUUtil: 0.0, maxCPUUtil: 1.0}}
      - {name: warmup, weight: 2, arguments: {warmupLabel: example.com/warm, warmupLabelValue: "yes"}}
      - {name: node-limit, arguments: {maxNodes: 2}}
  - name: r4-rest
    type: volcano
    cpuUtilizationMin: 0.0
    cpuUtilizationMax: 1.0
shardSyncPeriod: 60s
`}

// parityExtraNodes is how many idle nodes join for the batch configs
// (12 + 108 = 120: batches of 50, 50 and 20).
const parityExtraNodes = 108

func (c *cluster) parityAddNodes() {
	ctx, cancel := ctxTimeout(120 * time.Second)
	defer cancel()
	for i := 0; i < parityExtraNodes; i++ {
		name := fmt.Sprintf("zparity-%03d", i)
		n, err := fakeNode(name, "16", "64Gi", "110", true)
		check(err, "node "+name)
		created, err := c.cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		check(err, "create node "+name)
		created.Status = n.Status
		_, err = c.cs.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
		check(err, "node status "+name)
	}
	logf("%d idle nodes joined: 120 nodes", parityExtraNodes)
}

// parityBatchConfigs run on 120 nodes (6 of them at 0.5 or more).
func parityBatchConfigs(all []string) []parityConfig {
	return []parityConfig{
		{what: "120 nodes, 114 in one band, maxNodes 100 (no batch exceeds 50: Volcano desires all 114)", yaml: `
schedulerConfigs:
  - name: r5-busy
    type: agent
    policies:
      - {name: allocation-rate, arguments: {minCPUUtil: 0.5, maxCPUUtil: 1.0}}
      - {name: node-limit, arguments: {maxNodes: 100}}
  - name: r5-idle
    type: volcano
    policies:
      - {name: allocation-rate, arguments: {minCPUUtil: 0.0, maxCPUUtil: 0.49}}
      - {name: node-limit, arguments: {minNodes: 1, maxNodes: 100}}
shardSyncPeriod: 60s
`, check: func(vc, as map[string][]string) {
			exactShards(vc, as, []string{"r5-busy", "r5-idle"})
			if len(as["r5-idle"]) != 114 || len(as["r5-busy"]) != 6 {
				fail("r5: want 6 busy and 114 idle nodes, have %d and %d", len(as["r5-busy"]), len(as["r5-idle"]))
			}
		}},
		{what: "120 nodes in one band, maxNodes 30 (per batch: which nodes depends on Volcano's map order, not how many)", yaml: `
schedulerConfigs:
  - name: r6-capped
    type: agent
    policies:
      - {name: allocation-rate, arguments: {minCPUUtil: 0.0, maxCPUUtil: 1.0}}
      - {name: node-limit, arguments: {maxNodes: 30}}
  - name: r6-rest
    type: volcano
    policies:
      - {name: allocation-rate, arguments: {minCPUUtil: 0.0, maxCPUUtil: 1.0}}
shardSyncPeriod: 60s
`, check: func(vc, as map[string][]string) {
			// Batches of 50, 50 and 20 whatever their order: 30 + 30 + 20
			// capped, the other 40 to the next scheduler.
			for who, got := range map[string]map[string][]string{"Volcano": vc, "agentsched": as} {
				if len(got["r6-capped"]) != 80 || len(got["r6-rest"]) != 40 {
					fail("r6: %s desires %d and %d nodes, want 80 and 40", who, len(got["r6-capped"]), len(got["r6-rest"]))
				}
				union := append(append([]string{}, got["r6-capped"]...), got["r6-rest"]...)
				sort.Strings(union)
				if !equalStrings(union, all) {
					fail("r6: %s's two shards are not a partition of the 120 nodes", who)
				}
			}
		}},
	}
}

// exactShards fails unless every named shard's nodesDesired is equal.
func exactShards(vc, as map[string][]string, shards []string) {
	for _, s := range shards {
		if !equalStrings(vc[s], as[s]) {
			fail("shard %s: Volcano desires %v, agentsched %v", s, vc[s], as[s])
		}
	}
}

// runParityConfig lets Volcano's controller write the config's NodeShards
// (vc-controller-manager restarted with it: see scenarioVolcanoShardParity)
// and compares agentsched's offline answer on dump.
func (c *cluster) runParityConfig(i int, cfg parityConfig, dump string) {
	c.devClusterArgs("vc-controller-manager-kill")
	c.putVolcanoShardingConfig(cfg.yaml)
	c.devClusterArgs("vc-controller-manager-start", "--volcano-controllers",
		"pg-controller,queue-controller,sharding-controller")
	var want []string
	for _, l := range strings.Split(cfg.yaml, "\n") {
		if strings.HasPrefix(l, "  - name: ") {
			want = append(want, strings.TrimPrefix(l, "  - name: "))
		}
	}
	vc := waitStableShards(c, want, 60*time.Second)
	as := agentschedOnce(c, cfg.yaml, dump)
	if cfg.check != nil {
		cfg.check(vc, as)
		counts := []string{}
		for _, s := range want {
			counts = append(counts, fmt.Sprintf("%s=%d/%d", s, len(vc[s]), len(as[s])))
		}
		logf("config %d (%s): as Volcano's rule gives (Volcano/agentsched counts %s)", i, cfg.what, strings.Join(counts, " "))
		return
	}
	for _, s := range want {
		if !equalStrings(vc[s], as[s]) {
			fail("config %d (%s): shard %s: Volcano desires %v, agentsched %v", i, cfg.what, s, vc[s], as[s])
		}
	}
	total, counts, mine := 0, []string{}, map[string][]string{}
	for _, s := range want {
		total += len(vc[s])
		counts = append(counts, fmt.Sprintf("%s=%d", s, len(vc[s])))
		mine[s] = vc[s]
	}
	if total > 12 {
		logf("config %d (%s): equal: %s", i, cfg.what, strings.Join(counts, " "))
		return
	}
	logf("config %d (%s): equal: %v", i, cfg.what, mine)
}
