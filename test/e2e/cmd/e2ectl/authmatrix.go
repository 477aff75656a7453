package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The identities deploy/ ships, as dev-cluster runs them (a token of each
// ServiceAccount, from the API server).
var shippedIdentities = []struct{ sa, what string }{
	{"agentsched", "standalone agentsched (fast path)"},
	{"agentsched-sidecar", "agentsched in the sidecar (extender)"},
	{"agent-scheduler", "the sidecar's kube-scheduler"},
	{"agentsched-gpu-share-advertiser", "the GPU share advertiser (deploy/gpu-share)"},
}

// accessCheck is one question asked of every identity, and the answer
// each must get (in shippedIdentities' order).
type accessCheck struct {
	verb, group, resource, sub, ns, name string
	want                                 [4]bool
	note                                 string
}

func (a accessCheck) String() string {
	r := a.resource
	if a.group != "" {
		r += "." + a.group
	}
	if a.sub != "" {
		r += "/" + a.sub
	}
	clusterScoped := a.resource == "nodes" || a.resource == "namespaces" || a.resource == "clusterroles" ||
		a.resource == "nodeshards"
	switch {
	case a.name != "" && clusterScoped:
		return fmt.Sprintf("%s %s %s", a.verb, r, a.name)
	case a.name != "":
		return fmt.Sprintf("%s %s %s/%s", a.verb, r, a.ns, a.name)
	case clusterScoped:
		return fmt.Sprintf("%s %s (cluster)", a.verb, r)
	case a.ns == "":
		return fmt.Sprintf("%s %s (all namespaces)", a.verb, r)
	}
	return fmt.Sprintf("%s %s (%s)", a.verb, r, a.ns)
}

const coord, shardGroup, rbacGroup = "coordination.k8s.io", "shard.volcano.sh", "rbac.authorization.k8s.io"

var (
	yes, no = true, false
	// standalone, sidecar agentsched, sidecar kube-scheduler, GPU share
	// advertiser. all: the three schedulers' identities; nodesAll: the
	// schedulers' and the advertiser's.
	all      = [4]bool{yes, yes, yes, no}
	none     = [4]bool{no, no, no, no}
	nodesAll = [4]bool{yes, yes, yes, yes}
)

var accessMatrix = []accessCheck{
	// What each one uses.
	{verb: "list", resource: "nodes", want: nodesAll},
	{verb: "watch", resource: "nodes", want: nodesAll},
	{verb: "patch", resource: "nodes", sub: "status", name: "node-0000", want: [4]bool{no, no, no, yes},
		note: "agentsched.io/gpu-milli in capacity and allocatable (docs/gpu.md)"},
	{verb: "list", resource: "pods", want: all},
	{verb: "watch", resource: "pods", want: all},
	{verb: "get", resource: "pods", ns: "default", want: [4]bool{no, yes, yes, no},
		note: "the extender's bind of a pod it never filtered"},
	{verb: "create", resource: "pods", sub: "binding", ns: "default", want: all},
	{verb: "patch", resource: "pods", ns: "default", want: [4]bool{yes, yes, no, no},
		note: "a GPU pod's device annotations before its Binding (docs/gpu.md)"},
	{verb: "patch", resource: "pods", sub: "status", ns: "default", want: [4]bool{yes, no, yes, no},
		note: "the fast path's Unschedulable condition; kube-scheduler's own"},
	{verb: "create", resource: "events", ns: "default", want: [4]bool{yes, no, yes, no},
		note: "the fast path's Scheduled/FailedScheduling; kube-scheduler's own"},
	{verb: "list", resource: "nodeshards", group: shardGroup, want: [4]bool{yes, yes, no, no}},
	{verb: "patch", resource: "nodeshards", group: shardGroup, sub: "status", name: "agent-scheduler",
		want: [4]bool{yes, yes, no, no}},
	{verb: "get", resource: "leases", group: coord, ns: "kube-system", name: "agentsched-agent-scheduler",
		want: [4]bool{yes, no, no, no}, note: "the fast path's Lease"},
	{verb: "update", resource: "leases", group: coord, ns: "kube-system", name: "agentsched-agent-scheduler",
		want: [4]bool{yes, no, no, no}},
	{verb: "get", resource: "leases", group: coord, ns: "kube-system", name: "agent-scheduler",
		want: [4]bool{no, no, yes, no}, note: "the sidecar kube-scheduler's Lease"},
	{verb: "update", resource: "leases", group: coord, ns: "kube-system", name: "agent-scheduler",
		want: [4]bool{no, no, yes, no}},
	{verb: "create", resource: "leases", group: coord, ns: "kube-system", want: [4]bool{yes, no, yes, no},
		note: "cannot be scoped by name"},
	{verb: "get", resource: "configmaps", ns: "kube-system", name: "extension-apiserver-authentication",
		want: [4]bool{no, no, yes, no}, note: "kube-scheduler's delegated authentication"},
	{verb: "delete", resource: "pods", ns: "default", want: [4]bool{no, no, yes, no},
		note: "kube-scheduler's preemption (system:kube-scheduler)"},
	// Other Leases.
	{verb: "update", resource: "leases", group: coord, ns: "kube-system", name: "kube-controller-manager", want: none},
	{verb: "get", resource: "leases", group: coord, ns: "kube-system", name: "agentsched-shard-controller", want: none},
	{verb: "update", resource: "leases", group: coord, ns: "kube-system", name: "kube-scheduler",
		want: [4]bool{no, no, yes, no}, note: "inherited from system:kube-scheduler (the default scheduler's Lease)"},
	{verb: "update", resource: "leases", group: coord, ns: "default", name: "agentsched-agent-scheduler", want: none},
	{verb: "update", resource: "leases", group: coord, ns: "default", name: "agent-scheduler", want: none},
	{verb: "list", resource: "leases", group: coord, ns: "kube-system", want: none},
	{verb: "delete", resource: "leases", group: coord, ns: "kube-system", name: "agent-scheduler", want: none},
	// Not needed by anyone.
	{verb: "get", resource: "secrets", ns: "kube-system", name: "agentsched-sidecar-token", want: none},
	{verb: "list", resource: "secrets", want: none},
	{verb: "get", resource: "configmaps", ns: "kube-system", name: "agent-scheduler-config", want: none},
	{verb: "create", resource: "serviceaccounts", sub: "token", ns: "kube-system", name: "agentsched", want: none},
	{verb: "create", resource: "pods", ns: "default", want: none},
	{verb: "update", resource: "pods", ns: "default", want: none},
	{verb: "create", resource: "pods", sub: "eviction", ns: "default", want: none},
	{verb: "patch", resource: "nodes", want: none},
	{verb: "update", resource: "nodes", sub: "status", want: none},
	{verb: "delete", resource: "nodes", want: none},
	{verb: "create", resource: "nodeshards", group: shardGroup, want: none},
	{verb: "update", resource: "nodeshards", group: shardGroup, name: "agent-scheduler", want: none},
	{verb: "get", resource: "nodes", name: "node-0000", want: [4]bool{no, no, yes, yes},
		note: "agentsched only lists and watches; the advertiser's role grants get"},
	{verb: "list", resource: "namespaces", want: [4]bool{no, no, yes, no}, note: "system:kube-scheduler"},
	{verb: "create", resource: "events", group: "events.k8s.io", ns: "default", want: [4]bool{no, no, yes, no},
		note: "system:kube-scheduler"},
	{verb: "update", resource: "clusterroles", group: rbacGroup, name: "agentsched", want: none},
	{verb: "create", resource: "rolebindings", group: rbacGroup, ns: "kube-system", want: none},
	{verb: "create", resource: "deployments", group: "apps", ns: "kube-system", want: none},
}

// Scenario: every shipped identity asks the API server (a
// SelfSubjectAccessReview with its own token, what `kubectl auth can-i`
// sends) what it may do: everything its mode needs, nothing else listed.
// Prints the matrix.
func scenarioAuthMatrix(c *cluster) {
	clients := make([]*kubernetes.Clientset, len(shippedIdentities))
	for i, id := range shippedIdentities {
		cs, _, err := clientset(filepath.Join(c.stateDir, "kubeconfig-sa-"+id.sa))
		check(err, "kubeconfig of "+id.sa)
		clients[i] = cs
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-74s", "")
	for _, id := range shippedIdentities {
		fmt.Fprintf(&b, " %-18s", id.sa)
	}
	b.WriteString("\n")
	var wrong []string
	for _, a := range accessMatrix {
		fmt.Fprintf(&b, "%-74s", a)
		for i, cs := range clients {
			got := canI(cs, a)
			mark := "no"
			if got {
				mark = "yes"
			}
			if got != a.want[i] {
				mark += " (WRONG)"
				wrong = append(wrong, fmt.Sprintf("%s: %s = %v, want %v", shippedIdentities[i].sa, a, got, a.want[i]))
			}
			fmt.Fprintf(&b, " %-18s", mark)
		}
		if a.note != "" {
			b.WriteString(" " + a.note)
		}
		b.WriteString("\n")
	}
	fmt.Print(b.String())
	for i, id := range shippedIdentities {
		fmt.Printf("  %s: %s\n", id.sa, shippedIdentities[i].what)
	}
	if len(wrong) > 0 {
		fail("%d answers differ from the intended rights:\n  %s", len(wrong), strings.Join(wrong, "\n  "))
	}
	logf("%d questions x %d identities: every answer as intended", len(accessMatrix), len(clients))
	checkRestrictedPods(c)
}

// restrictedManifests are the manifests whose Deployments' pods must pass
// the restricted Pod Security Standard.
var restrictedManifests = []string{
	"deploy/kube-scheduler/agentsched-sidecar.yaml",
	"deploy/standalone/agentsched.yaml",
	"deploy/shard-controller/deployment.yaml",
	"deploy/gpu-share/deployment.yaml",
}

// checkRestrictedPods creates each shipped Deployment's pod (a server-side
// dry run) in a namespace enforcing the restricted Pod Security Standard:
// the API server's PodSecurity admission refuses any container that may
// run as root, escalate privileges, keep capabilities or run without a
// seccomp profile. The priority class is left out (system-cluster-critical
// is admitted in kube-system only).
func checkRestrictedPods(c *cluster) {
	const ns = "e2e-restricted"
	ctx, cancel := ctxTimeout(30 * time.Second)
	_, err := c.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: ns, Labels: map[string]string{
			"pod-security.kubernetes.io/enforce":         "restricted",
			"pod-security.kubernetes.io/enforce-version": "latest",
		}}}, metav1.CreateOptions{})
	cancel()
	if err != nil && !apierrors.IsAlreadyExists(err) {
		check(err, "create namespace "+ns)
	}
	repo := c.repo()
	n := 0
	for _, m := range restrictedManifests {
		raw, err := os.ReadFile(filepath.Join(repo, m))
		check(err, "read "+m)
		deps, err := deployments(raw)
		check(err, m)
		for _, d := range deps {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: d.Name, Namespace: ns},
				Spec: *d.Spec.Template.Spec.DeepCopy()}
			pod.Spec.PriorityClassName = ""
			ctx, cancel := ctxTimeout(30 * time.Second)
			_, err := c.cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			cancel()
			if err != nil {
				fail("%s: the pod of Deployment %s is refused where the restricted Pod Security Standard is "+
					"enforced: %v", m, d.Name, err)
			}
			logf("%s: Deployment %s's pod passes the restricted Pod Security Standard", m, d.Name)
			n++
		}
	}
	if n < 4 {
		fail("found %d Deployments in %v, want 4", n, restrictedManifests)
	}
}

func canI(cs *kubernetes.Clientset, a accessCheck) bool {
	ctx, cancel := ctxTimeout(30 * time.Second)
	defer cancel()
	r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authzv1.SelfSubjectAccessReview{
		Spec: authzv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authzv1.ResourceAttributes{
			Namespace: a.ns, Verb: a.verb, Group: a.group, Resource: a.resource, Subresource: a.sub, Name: a.name,
		}},
	}, metav1.CreateOptions{})
	check(err, "SelfSubjectAccessReview "+a.String())
	return r.Status.Allowed
}
