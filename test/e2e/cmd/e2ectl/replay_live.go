package main

// live_equals_replay: the placement code `agentsched replay` runs is the
// code `agentsched serve` runs. The trace sample the unit tests replay
// (test/unit/data/replay: 41 nodes, 227 pods) becomes Nodes and fast-path
// Pods on the real control plane, the pods created one at a time in the
// replay's order, each waited for (bound, or refused as unschedulable)
// before the next; every pod must land where `agentsched replay --once`
// with the built-in policy (policy/default.yaml) puts it.

import (
	"encoding/csv"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// readCSV returns the rows of a CSV file as maps from its header's names.
func readCSV(path string) []map[string]string {
	f, err := os.Open(path)
	if err != nil {
		fail("%v", err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil || len(recs) < 1 {
		fail("%s: %v", path, err)
	}
	var rows []map[string]string
	for _, r := range recs[1:] {
		m := map[string]string{}
		for i, h := range recs[0] {
			if i < len(r) {
				m[h] = r[i]
			}
		}
		rows = append(rows, m)
	}
	return rows
}

func atoi(s string) int64 {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		fail("not an integer: %q", s)
	}
	return v
}

// traceNode is the replay's node: allocatable cpu, memory, a pod count
// that never binds, the GPUs and the model label.
func traceNode(row map[string]string) *corev1.Node {
	n, err := fakeNode(row["sn"], row["cpu_milli"]+"m", row["memory_mib"]+"Mi", "1000000", true)
	if err != nil {
		fail("node %s: %v", row["sn"], err)
	}
	delete(n.Status.Capacity, corev1.ResourceEphemeralStorage)
	delete(n.Status.Allocatable, corev1.ResourceEphemeralStorage)
	if g := atoi(row["gpu"]); g > 0 {
		q := *resource.NewQuantity(g, resource.DecimalSI)
		n.Status.Capacity[gpuResource] = q
		n.Status.Allocatable[gpuResource] = q.DeepCopy()
	}
	if m := row["model"]; m != "" {
		n.Labels[gpuModelLabel] = m
	}
	return n
}

// tracePod is the replay's pod: cpu and memory requests, whole GPUs or a
// share of one, the allowed models as required node affinity.
func tracePod(row map[string]string) *corev1.Pod {
	p := agentPod(row["name"], row["cpu_milli"]+"m", row["memory_mib"]+"Mi")
	ngpu, milli := atoi(row["num_gpu"]), atoi(row["gpu_milli"])
	res := p.Spec.Containers[0].Resources
	switch {
	case ngpu > 0 && (milli == 0 || milli >= 1000):
		q := *resource.NewQuantity(ngpu, resource.DecimalSI)
		res.Requests[gpuResource] = q
		res.Limits = corev1.ResourceList{gpuResource: q}
	case ngpu > 0:
		q := *resource.NewQuantity(milli, resource.DecimalSI)
		res.Requests[gpuShareResource] = q
		res.Limits = corev1.ResourceList{gpuShareResource: q}
	}
	p.Spec.Containers[0].Resources = res
	if spec := row["gpu_spec"]; spec != "" {
		var models []string
		for _, m := range strings.Split(spec, "|") {
			if m != "" {
				models = append(models, m)
			}
		}
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key: gpuModelLabel, Operator: corev1.NodeSelectorOpIn, Values: models}}}}}}}
	}
	return p
}

// podOutcome waits until the pod is bound (its node) or marked
// unschedulable ("").
func (c *cluster) podOutcome(name string, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		ctx, cancel := ctxTimeout(10 * time.Second)
		p, err := c.cs.CoreV1().Pods(c.ns).Get(ctx, name, metav1.GetOptions{})
		cancel()
		if err == nil {
			if p.Spec.NodeName != "" {
				return p.Spec.NodeName, nil
			}
			for _, cd := range p.Status.Conditions {
				if cd.Type == corev1.PodScheduled && cd.Status == corev1.ConditionFalse &&
					cd.Reason == corev1.PodReasonUnschedulable {
					return "", nil
				}
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return "", fmt.Errorf("pod %s neither bound nor unschedulable after %s", name, timeout)
}

func scenarioLiveEqualsReplay(c *cluster) {
	repo := c.repo()
	data := filepath.Join(repo, "test", "unit", "data", "replay")
	nodesCSV, podsCSV := filepath.Join(data, "nodes.csv"), filepath.Join(data, "pods.csv")
	policy := filepath.Join(repo, "policy", "default.yaml")

	// The replay's placements, and with them its submission order.
	out := filepath.Join(c.stateDir, "replay-placements.csv")
	cmd := exec.Command(c.env["AGENTSCHED_BIN"], "replay", "--nodes", nodesCSV, "--pods", podsCSV,
		"--policy", policy, "--once", "--placements", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		fail("agentsched replay: %v\n%s", err, b)
	} else {
		logf("agentsched replay --once:\n%s", strings.TrimSpace(string(b)))
	}
	want := readCSV(out)
	pods := map[string]map[string]string{}
	for _, r := range readCSV(podsCSV) {
		pods[r["name"]] = r
	}

	c.createNamespace()
	nodeRows := readCSV(nodesCSV)
	for _, r := range nodeRows {
		n := traceNode(r)
		ctx, cancel := ctxTimeout(30 * time.Second)
		created, err := c.cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		// The gpu-share-advertiser may write the status first: on a
		// conflict, read the node again and set the status once more.
		for try := 0; err == nil && try < 10; try++ {
			created.Status = n.Status
			_, err = c.cs.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
			if !apierrors.IsConflict(err) {
				break
			}
			created, err = c.cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		}
		cancel()
		if err != nil {
			fail("node %s: %v", n.Name, err)
		}
	}
	// The shipped gpu-share-advertiser writes the share resource on the
	// GPU nodes: wait for it, so no node changes while pods are placed.
	deadline := time.Now().Add(30 * time.Second)
	for {
		advertised, gpuNodes := 0, 0
		for _, n := range c.nodes() {
			if q, ok := n.Status.Allocatable[gpuResource]; ok && q.Value() > 0 {
				gpuNodes++
				if _, ok := n.Status.Allocatable[gpuShareResource]; ok {
					advertised++
				}
			}
		}
		if gpuNodes > 0 && advertised == gpuNodes {
			break
		}
		if time.Now().After(deadline) {
			fail("%s advertised on %d of %d GPU nodes after 30s", gpuShareResource, advertised, gpuNodes)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second)
	for c.metrics()["agentsched_cache_nodes"] < float64(len(nodeRows)) {
		if time.Now().After(deadline) {
			fail("agentsched's cache holds %v of the %d nodes after 30s",
				c.metrics()["agentsched_cache_nodes"], len(nodeRows))
		}
		time.Sleep(100 * time.Millisecond)
	}

	start := time.Now()
	var diffs []string
	diffNodes := map[string]bool{}
	placed := 0
	for _, w := range want {
		row, ok := pods[w["pod"]]
		if !ok {
			fail("replay placed %q, which is not in %s", w["pod"], podsCSV)
		}
		ctx, cancel := ctxTimeout(30 * time.Second)
		_, err := c.cs.CoreV1().Pods(c.ns).Create(ctx, tracePod(row), metav1.CreateOptions{})
		cancel()
		if err != nil {
			fail("create pod %s: %v", w["pod"], err)
		}
		got, err := c.podOutcome(w["pod"], 20*time.Second)
		if err != nil {
			fail("%v", err)
		}
		if got != "" {
			placed++
		}
		if got != w["node"] {
			diffs = append(diffs, fmt.Sprintf("%s (submission %s): live %q, replay %q",
				w["pod"], w["submission"], got, w["node"]))
			diffNodes[got], diffNodes[w["node"]] = true, true
		}
	}
	logf("%d pods in %.1fs: %d bound live, %d placements differ from the replay",
		len(want), time.Since(start).Seconds(), placed, len(diffs))
	if len(diffs) > 0 {
		c.logDevices(diffNodes)
		fail("live placements differ from agentsched replay's:\n  %s", strings.Join(diffs, "\n  "))
	}
	c.checkNoOvercommit()
}

// logDevices logs, per node named, the pods bound there (by name)
// with the devices agentsched annotated.
func (c *cluster) logDevices(nodes map[string]bool) {
	ctx, cancel := ctxTimeout(30 * time.Second)
	defer cancel()
	list, err := c.cs.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		logf("list pods: %v", err)
		return
	}
	for _, p := range list.Items {
		if nodes[p.Spec.NodeName] {
			a := p.Annotations
			logf("  %s on %s: devices %q milli %q", p.Name, p.Spec.NodeName,
				a["agentsched.io/gpu-devices"], a["agentsched.io/gpu-milli"])
		}
	}
}
