package main

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Scenario: the shipped policy keeps a GPU node's CPU beside its free GPUs
// from CPU-only pods once GPU pods were seen (fragment.reserve), on the
// real control plane through the fast path. Two GPU nodes of 4 devices and
// one CPU-only node, 16 cores each (`dev-cluster --nodes 3 --gpus 4
// --gpu-nodes 2 --node-cpu 16`). Twenty one-GPU pods of 4 cores and 8Gi
// teach the policy what GPU pods ask (8 are bound, the rest refused for
// want of devices), then all of them leave. A CPU-only pod of 12 cores is
// then bound on the CPU-only node; a second one stays Pending, its
// PodScheduled message naming the two GPU nodes as kept for their free
// GPUs; a one-GPU pod of 4 cores is still bound on a GPU node.
func scenarioGPUReserve(c *cluster) {
	info := gpuNodesOf(c.nodes())
	var gpuNodes, cpuNodes []string
	for name, n := range info {
		if n.devices > 0 {
			gpuNodes = append(gpuNodes, name)
		} else {
			cpuNodes = append(cpuNodes, name)
		}
	}
	if len(gpuNodes) != 2 || len(cpuNodes) != 1 {
		fail("want 2 GPU nodes and 1 CPU-only node, have %v and %v", gpuNodes, cpuNodes)
	}

	// a one-GPU pod of 4 cores and 8Gi: the teaching pods and gpu-a
	gpuPod4 := func(name string) *corev1.Pod {
		p := wholeGPUPod(name, 1)
		p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("4")
		p.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("8Gi")
		return p
	}
	c.createPods("teach", 20, gpuPod4("teach"), 4)
	t, _ := c.waitSettled(20, 8, 5*time.Second, 90*time.Second)
	if t.bound != 8 {
		fail("teaching pods: %s, want 8 bound (2 nodes x 4 devices)", t)
	}
	logf("teaching pods settled: %s", t)

	ctx, cancel := ctxTimeout(30 * time.Second)
	err := c.cs.CoreV1().Pods(c.ns).DeleteCollection(ctx,
		metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{})
	cancel()
	check(err, "delete the teaching pods")
	deadline := time.Now().Add(60 * time.Second)
	for {
		m := c.metrics()
		if len(c.pods()) == 0 && m[`agentsched_cache_pods{state="bound"}`] == 0 &&
			m[`agentsched_cache_pods{state="assumed"}`] == 0 {
			break
		}
		if time.Now().After(deadline) {
			fail("the teaching pods are still in the API server or agentsched's cache after 60s")
		}
		time.Sleep(200 * time.Millisecond)
	}
	logf("teaching pods gone from the API server and agentsched's cache")

	wait := func(name string, done func(p *corev1.Pod) bool) *corev1.Pod {
		deadline := time.Now().Add(60 * time.Second)
		for {
			ctx, cancel := ctxTimeout(10 * time.Second)
			p, err := c.cs.CoreV1().Pods(c.ns).Get(ctx, name, metav1.GetOptions{})
			cancel()
			check(err, "get pod "+name)
			if done(p) {
				return p
			}
			if time.Now().After(deadline) {
				fail("pod %s: not settled after 60s (%s)", name, podState(p))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	bound := func(p *corev1.Pod) bool { return p.Spec.NodeName != "" }

	c.createPod(agentPod("cpu-a", "12", "8Gi"))
	a := wait("cpu-a", bound)
	if a.Spec.NodeName != cpuNodes[0] {
		fail("cpu-a (12 cores, no GPU) bound on %s, want the CPU-only node %s", a.Spec.NodeName, cpuNodes[0])
	}
	logf("cpu-a bound on the CPU-only node %s", a.Spec.NodeName)

	const kept = "2 node(s) kept their cpu and memory for their free GPUs"
	c.createPod(agentPod("cpu-b", "12", "8Gi"))
	b := wait("cpu-b", func(p *corev1.Pod) bool {
		cond := scheduledCondition(p)
		return p.Spec.NodeName != "" || (cond != nil && cond.Status == corev1.ConditionFalse &&
			strings.Contains(cond.Message, kept))
	})
	if b.Spec.NodeName != "" {
		fail("cpu-b (12 cores, no GPU) bound on %s: the GPU nodes should keep their CPU", b.Spec.NodeName)
	}
	logf("cpu-b Pending: %s", scheduledCondition(b).Message)

	c.createPod(gpuPod4("gpu-a"))
	gb := wait("gpu-a", bound)
	if info[gb.Spec.NodeName].devices == 0 {
		fail("gpu-a bound on %s, which has no GPU", gb.Spec.NodeName)
	}
	logf("gpu-a bound on GPU node %s: the CPU kept there serves GPU pods", gb.Spec.NodeName)
}
