package main

import (
	"flag"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// e2eNodeLabel marks the fake nodes the harness registered.
const e2eNodeLabel = "agentsched.io/e2e-node"

// gpuModelLabel is the label agentsched reads a node's GPU model from.
const gpuModelLabel = "agentsched.io/gpu-model"

func fakeNode(name, cpu, memory, pods string, ready bool) (*corev1.Node, error) {
	res := corev1.ResourceList{}
	for k, v := range map[corev1.ResourceName]string{
		corev1.ResourceCPU: cpu, corev1.ResourceMemory: memory, corev1.ResourcePods: pods,
		corev1.ResourceEphemeralStorage: "100Gi",
	} {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, fmt.Errorf("%s=%q: %v", k, v, err)
		}
		res[k] = q
	}
	readyStatus := corev1.ConditionTrue
	if !ready {
		readyStatus = corev1.ConditionFalse
	}
	now := metav1.Now()
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				"kubernetes.io/hostname": name,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
				e2eNodeLabel:             "true",
			},
		},
		Status: corev1.NodeStatus{
			Capacity:    res,
			Allocatable: res.DeepCopy(),
			Conditions: []corev1.NodeCondition{
				cond(corev1.NodeReady, readyStatus, "KubeletReady"),
				cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory"),
				cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure"),
				cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID"),
			},
			NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.36.3-fake", OperatingSystem: "linux", Architecture: "amd64"},
		},
	}, nil
}

// cmdNodes registers fake nodes. There are no kubelets: the Node objects
// carry their capacity and a Ready condition written through the status
// subresource, and since no node-lifecycle controller runs (no
// kube-controller-manager) they stay as written.
func cmdNodes(args []string) error {
	fs := flag.NewFlagSet("nodes", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig (required)")
	count := fs.Int("count", 3, "number of nodes")
	prefix := fs.String("prefix", "node-", "name prefix")
	cpu := fs.String("cpu", "8", "allocatable cpu")
	memory := fs.String("memory", "32Gi", "allocatable memory")
	pods := fs.String("pods", "110", "allocatable pods")
	ready := fs.Bool("ready", true, "Ready condition")
	gpus := fs.Int("gpus", 0, "nvidia.com/gpu devices on each GPU node (0: none)")
	gpuNodes := fs.Int("gpu-nodes", -1, "how many of the nodes (the first ones) have --gpus devices; the rest are CPU-only (-1: all)")
	gpuModels := fs.String("gpu-models", "", "comma-separated "+gpuModelLabel+" values given to the GPU nodes in turn (empty: no label)")
	_ = fs.Parse(args)
	var models []string
	if *gpuModels != "" {
		models = strings.Split(*gpuModels, ",")
	}
	if *gpuNodes < 0 || *gpuNodes > *count {
		*gpuNodes = *count
	}
	cs, _, err := clientset(*kubeconfig)
	if err != nil {
		return err
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, *count)
	sem := make(chan struct{}, 16)
	for i := 0; i < *count; i++ {
		n, err := fakeNode(fmt.Sprintf("%s%04d", *prefix, i), *cpu, *memory, *pods, *ready)
		if err != nil {
			return err
		}
		if *gpus > 0 && i < *gpuNodes {
			// What the kubelet writes for a device plugin's resource:
			// capacity and allocatable (devices); the share resource is
			// the advertiser's to write.
			q := *resource.NewQuantity(int64(*gpus), resource.DecimalSI)
			n.Status.Capacity[gpuResource] = q
			n.Status.Allocatable[gpuResource] = q.DeepCopy()
			if len(models) > 0 {
				n.Labels[gpuModelLabel] = models[i%len(models)]
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			ctx, cancel := ctxTimeout(30 * time.Second)
			defer cancel()
			created, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				created, err = cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			}
			if err != nil {
				errs <- fmt.Errorf("create node %s: %v", n.Name, err)
				return
			}
			// Status on create is kept for nodes today, but write it through
			// the status subresource as a kubelet would, to be sure.
			created.Status = n.Status
			if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
				errs <- fmt.Errorf("node %s status: %v", n.Name, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return err
	}
	fmt.Printf("registered %d nodes (cpu=%s memory=%s pods=%s ready=%v gpus=%d on %d, models %q) in %.1fs\n",
		*count, *cpu, *memory, *pods, *ready, *gpus, *gpuNodes, models, time.Since(start).Seconds())
	return nil
}
