package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// postAgentsched POSTs body (marshalled) to agentsched's path: status and
// answer.
func (c *cluster) postAgentsched(path string, body interface{}) (int, string) {
	return c.postAgentschedWith(httpc, path, body)
}

// postVolcano is postAgentsched as Volcano's extender plugin calls: a
// client without a certificate (agentsched's /volcano/ routes are served
// without one).
func (c *cluster) postVolcano(path string, body interface{}) (int, string) {
	return c.postAgentschedWith(httpNoCert, path, body)
}

func (c *cluster) postAgentschedWith(hc *http.Client, path string, body interface{}) (int, string) {
	b, err := json.Marshal(body)
	check(err, "marshal "+path)
	resp, err := hc.Post(c.agentschedURL+path, "application/json", strings.NewReader(string(b)))
	check(err, "POST "+path)
	defer resp.Body.Close()
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(out)
}

// volcanoTask is the EventHandlerRequest Volcano sends for pod on node.
func volcanoTask(p *corev1.Pod, node string) map[string]interface{} {
	return map[string]interface{}{"task": map[string]interface{}{
		"UID": string(p.UID), "Name": p.Name, "Namespace": p.Namespace, "NodeName": node,
		"Status": 2, "Resreq": map[string]interface{}{"MilliCPU": 600, "Memory": 0},
		"Pod": p,
	}}
}

// Scenario security_deputy: nobody acts through agentsched. (a) A pod no
// scheduler owns (schedulerName nobody) is not bound by an unauthenticated
// POST /scheduler/bind, even after agentsched answered a filter for it; (b)
// deallocateFunc cannot release what the fast path assumed or bound, and
// no node is overcommitted afterwards; (c) allocateFunc cannot reserve
// capacity for a pod that does not exist.
func scenarioSecurityDeputy(c *cluster) {
	nodes := c.nodes()
	if len(nodes) == 0 {
		fail("no nodes")
	}
	node := nodes[0].Name

	// (a) the confused-deputy bind
	p := smallPod("deputy-nobody", "100m", "64Mi")
	p.Spec.SchedulerName = "nobody"
	ctx, cancel := ctxTimeout(30 * time.Second)
	created, err := c.cs.CoreV1().Pods(c.ns).Create(ctx, p, metav1.CreateOptions{})
	cancel()
	check(err, "create pod deputy-nobody")
	passed, _ := c.extenderFilter(created, []string{node}, extenderPrefix(c))
	logf("filter for the nobody pod answered (%d node(s) pass); it is not noted", len(passed))
	bind := map[string]string{"PodName": created.Name, "PodNamespace": c.ns,
		"PodUID": string(created.UID), "Node": node}
	if c.env["AGENTSCHED_CLIENT_CERT"] != "" {
		// Mutual TLS (the standalone manifest's): without a client
		// certificate the bind is not even considered.
		if st, body := c.postAgentschedWith(httpNoCert, extenderPrefix(c)+"/bind", bind); st != http.StatusUnauthorized {
			fail("bind without a client certificate: HTTP %d %s (want 401)", st, body)
		}
		logf("bind without a client certificate: 401; the binds below present the scenario's")
	}
	st, body := c.postAgentsched(extenderPrefix(c)+"/bind", bind)
	if st != http.StatusForbidden || !strings.Contains(body, "agentsched refused to bind pod") {
		fail("bind of the nobody pod: HTTP %d %s (want 403 and a refusal)", st, body)
	}
	logf("bind of the nobody pod refused: %.200s", body)
	// without a UID, and with another pod's UID: refused too
	delete(bind, "PodUID")
	if st, body = c.postAgentsched(extenderPrefix(c)+"/bind", bind); st != http.StatusForbidden {
		fail("bind without PodUID: HTTP %d %s (want 403)", st, body)
	}
	time.Sleep(2 * time.Second)
	ctx, cancel = ctxTimeout(30 * time.Second)
	got, err := c.cs.CoreV1().Pods(c.ns).Get(ctx, created.Name, metav1.GetOptions{})
	cancel()
	check(err, "get pod deputy-nobody")
	if got.Spec.NodeName != "" {
		fail("pod deputy-nobody was bound to %s", got.Spec.NodeName)
	}

	// (b) the fast path fills every node (one 600m pod per 1-cpu node); a
	// deallocateFunc for each must not free its capacity
	tmpl := smallPod("", "600m", "64Mi")
	tmpl.Spec.SchedulerName = "agent-scheduler"
	c.createPods("fast", len(nodes), tmpl, 4)
	deadline := time.Now().Add(60 * time.Second)
	var fast []corev1.Pod
	for {
		fast = fast[:0]
		for _, q := range c.pods() {
			if strings.HasPrefix(q.Name, "fast-") && q.Spec.NodeName != "" {
				fast = append(fast, q)
			}
		}
		if len(fast) == len(nodes) {
			break
		}
		if time.Now().After(deadline) {
			fail("only %d of %d fast-path pods bound", len(fast), len(nodes))
		}
		time.Sleep(100 * time.Millisecond)
	}
	for i := range fast {
		q := &fast[i]
		st, body := c.postVolcano("/volcano/deallocateFunc", volcanoTask(q, q.Spec.NodeName))
		if st != http.StatusForbidden {
			fail("deallocateFunc of fast-path pod %s: HTTP %d %s (want 403)", q.Name, st, body)
		}
	}
	logf("deallocateFunc refused for all %d fast-path pods", len(fast))
	// more pods of the same size: if a deallocate had freed anything they
	// would be bound on top
	c.createPods("more", len(nodes), tmpl, 4)
	time.Sleep(5 * time.Second)
	for _, q := range c.pods() {
		if strings.HasPrefix(q.Name, "more-") && q.Spec.NodeName != "" {
			fail("pod %s was bound to %s: a node was overcommitted", q.Name, q.Spec.NodeName)
		}
	}
	c.checkNoOvercommit()

	// (c) reserving capacity for a pod that does not exist
	ghost := smallPod("ghost", "600m", "64Mi")
	ghost.Namespace = c.ns
	ghost.UID = "00000000-0000-0000-0000-00000000dead"
	ghost.Spec.SchedulerName = "volcano"
	st, body = c.postVolcano("/volcano/allocateFunc", volcanoTask(ghost, node))
	if st != http.StatusForbidden {
		fail("allocateFunc for a pod that does not exist: HTTP %d %s (want 403)", st, body)
	}
	m := c.metrics()
	for _, s := range []string{
		`agentsched_extender_bind_refused_total{rule="not_filtered"}`,
		`agentsched_extender_bind_refused_total{rule="scheduler_name"}`,
		`agentsched_volcano_refused_total{verb="deallocateFunc",rule="scheduler_name"}`,
		`agentsched_volcano_refused_total{verb="allocateFunc",rule="unknown_pod"}`,
	} {
		logf("%s %v", s, m[s])
	}
	if m[`agentsched_volcano_refused_total{verb="allocateFunc",rule="unknown_pod"}`] < 1 {
		fail("the refused allocateFunc was not counted")
	}
	c.checkNoOvercommit()
}
