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
	"k8s.io/client-go/kubernetes"
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
	kubeletLike := fs.Bool("kubelet-like", false, "write the Node as a real kubelet does (addresses, ~50 images, nodeInfo, "+
		"daemonEndpoints, zone and instance-type labels, a fifth condition): realistic object sizes for benchmarks")
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
	nodes := make([]*corev1.Node, 0, *count)
	for i := 0; i < *count; i++ {
		n, err := fakeNode(fmt.Sprintf("%s%04d", *prefix, i), *cpu, *memory, *pods, *ready)
		if err != nil {
			return err
		}
		if *kubeletLike {
			kubeletLikeNode(n, i)
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
		nodes = append(nodes, n)
	}
	if err := registerNodes(cs, nodes); err != nil {
		return err
	}
	fmt.Printf("registered %d nodes (cpu=%s memory=%s pods=%s ready=%v gpus=%d on %d, models %q, kubelet-like %v) in %.1fs\n",
		*count, *cpu, *memory, *pods, *ready, *gpus, *gpuNodes, models, *kubeletLike, time.Since(start).Seconds())
	return nil
}

// registerNodes creates nodes, 16 at a time, and writes each one's status
// through the status subresource as a kubelet would.
func registerNodes(cs kubernetes.Interface, nodes []*corev1.Node) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(nodes))
	sem := make(chan struct{}, 16)
	for _, n := range nodes {
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
			// A conflict: someone wrote the status since (the gpu-share
			// advertiser, when nodes are added to a running cluster): the
			// status written on create was kept if the conditions are there;
			// otherwise write it again over the newer version, keeping the
			// resources others added.
			for try := 0; ; try++ {
				st := n.Status.DeepCopy()
				for k, v := range created.Status.Capacity {
					if _, ok := st.Capacity[k]; !ok {
						st.Capacity[k] = v
					}
				}
				for k, v := range created.Status.Allocatable {
					if _, ok := st.Allocatable[k]; !ok {
						st.Allocatable[k] = v
					}
				}
				created.Status = *st
				_, err := cs.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
				if err == nil {
					break
				}
				if !apierrors.IsConflict(err) || try == 5 {
					errs <- fmt.Errorf("node %s status: %v", n.Name, err)
					break
				}
				if created, err = cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{}); err != nil {
					errs <- fmt.Errorf("node %s: %v", n.Name, err)
					break
				}
				if len(created.Status.Conditions) == len(n.Status.Conditions) {
					break
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return err
	}
	return nil
}

// kubeletLikeNode fills in what a real kubelet (and its cloud's route
// controller) writes on a Node beyond the fake one's capacity and
// conditions, so that the objects schedulers copy, snapshot and send have a
// real cluster's size: the zone, region and instance-type labels, the
// kubelet's annotations, the pod CIDR and provider ID, addresses, a fifth
// condition (NetworkUnavailable), 50 cached images with their sizes, the
// full nodeInfo and the kubelet's endpoint. Node i's values are fixed
// functions of i, so runs are comparable.
func kubeletLikeNode(n *corev1.Node, i int) {
	zones := []string{"a", "b", "c"}
	n.Labels["beta.kubernetes.io/os"] = "linux"
	n.Labels["beta.kubernetes.io/arch"] = "amd64"
	n.Labels["topology.kubernetes.io/region"] = "eu-west-1"
	n.Labels["topology.kubernetes.io/zone"] = "eu-west-1" + zones[i%len(zones)]
	n.Labels["node.kubernetes.io/instance-type"] = "m6i.4xlarge"
	n.Labels["beta.kubernetes.io/instance-type"] = "m6i.4xlarge"
	n.Annotations = map[string]string{
		"node.alpha.kubernetes.io/ttl":                           "0",
		"volumes.kubernetes.io/controller-managed-attach-detach": "true",
	}
	n.Spec.PodCIDR = fmt.Sprintf("10.%d.%d.0/24", 64+(i>>8), i&255)
	n.Spec.PodCIDRs = []string{n.Spec.PodCIDR}
	n.Spec.ProviderID = fmt.Sprintf("aws:///eu-west-1%s/i-0%016x", zones[i%len(zones)], 0x5eed0000+i)
	for _, r := range []corev1.ResourceName{"hugepages-1Gi", "hugepages-2Mi"} {
		n.Status.Capacity[r] = resource.MustParse("0")
		n.Status.Allocatable[r] = resource.MustParse("0")
	}
	ip := fmt.Sprintf("10.0.%d.%d", i>>8, i&255)
	n.Status.Addresses = []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: ip},
		{Type: corev1.NodeHostName, Address: n.Name},
		{Type: corev1.NodeInternalDNS, Address: "ip-" + strings.ReplaceAll(ip, ".", "-") + ".eu-west-1.compute.internal"},
	}
	now := metav1.Now()
	n.Status.Conditions = append([]corev1.NodeCondition{{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse,
		Reason: "RouteCreated", Message: "RouteController created a route", LastHeartbeatTime: now, LastTransitionTime: now}},
		n.Status.Conditions...)
	for k := range n.Status.Conditions {
		c := &n.Status.Conditions[k]
		if c.Message == "" {
			c.Message = "kubelet has " + strings.TrimPrefix(c.Reason, "Kubelet")
		}
	}
	n.Status.Images = make([]corev1.ContainerImage, 0, 50)
	for k := 0; k < 50; k++ {
		repo := fmt.Sprintf("registry.example.com/team-%02d/service-%02d", k%7, k)
		h := uint64(k+1) * 0x9e3779b97f4a7c15
		digest := fmt.Sprintf("%016x%016x%016x%016x", h, h^0xff51afd7ed558ccd, h*3, h^0xc4ceb9fe1a85ec53)
		n.Status.Images = append(n.Status.Images, corev1.ContainerImage{
			Names:     []string{repo + "@sha256:" + digest, fmt.Sprintf("%s:v1.%d.%d", repo, k%13, k%5)},
			SizeBytes: int64(20+(k*37)%900) * 1000 * 1000,
		})
	}
	n.Status.NodeInfo = corev1.NodeSystemInfo{
		MachineID:               fmt.Sprintf("ec2%029x", i),
		SystemUUID:              fmt.Sprintf("ec2%05x-0000-4000-8000-%012x", i&0xfffff, i),
		BootID:                  fmt.Sprintf("%08x-1111-4222-8333-%012x", i, i),
		KernelVersion:           "6.1.112-124.190.amzn2023.x86_64",
		OSImage:                 "Amazon Linux 2023.6.20241121",
		ContainerRuntimeVersion: "containerd://1.7.23",
		KubeletVersion:          "v1.36.3-fake",
		KubeProxyVersion:        "v1.36.3-fake",
		OperatingSystem:         "linux",
		Architecture:            "amd64",
	}
	n.Status.DaemonEndpoints = corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}}
}
