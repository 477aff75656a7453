package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// env is what dev-cluster up recorded in STATE_DIR/env.
type env map[string]string

func loadEnv(stateDir string) (env, error) {
	f, err := os.Open(filepath.Join(stateDir, "env"))
	if err != nil {
		return nil, fmt.Errorf("%v (is the dev-cluster up?)", err)
	}
	defer f.Close()
	e := env{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if ok {
			e[k] = strings.Trim(v, "'\"")
		}
	}
	return e, sc.Err()
}

func (e env) need(k string) string {
	v, ok := e[k]
	if !ok || v == "" {
		fail("state env has no %s", k)
	}
	return v
}

// failure aborts a scenario; cmdScenario turns it into the exit status.
type failure struct{ msg string }

func fail(format string, a ...interface{}) {
	panic(failure{fmt.Sprintf(format, a...)})
}

func check(err error, what string) {
	if err != nil {
		fail("%s: %v", what, err)
	}
}

func logf(format string, a ...interface{}) {
	fmt.Printf("[%s] %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, a...))
}

// cluster is a scenario's handle on the running dev-cluster.
type cluster struct {
	cs            *kubernetes.Clientset
	env           env
	stateDir      string
	agentschedURL string
	ns            string
}

func (c *cluster) devCluster(verb string) {
	check(<-c.devClusterAsync(verb), "dev-cluster "+verb)
}

// devClusterAsync starts a dev-cluster verb and returns at once; the
// channel delivers its result (check it on the scenario's goroutine).
func (c *cluster) devClusterAsync(verb string) <-chan error {
	done := make(chan error, 1)
	cmd := exec.Command("bash", c.env.need("DEV_CLUSTER"), verb, "--state-dir", c.stateDir)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	go func() { done <- cmd.Run() }()
	return done
}

func (c *cluster) createNamespace() {
	ctx, cancel := ctxTimeout(30 * time.Second)
	defer cancel()
	_, err := c.cs.CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		fail("create namespace %s: %v", c.ns, err)
	}
}

func (c *cluster) nodes() []corev1.Node {
	ctx, cancel := ctxTimeout(30 * time.Second)
	defer cancel()
	l, err := c.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: e2eNodeLabel + "=true"})
	check(err, "list nodes")
	if len(l.Items) == 0 {
		fail("no e2e nodes registered")
	}
	return l.Items
}

func (c *cluster) pods() []corev1.Pod {
	ctx, cancel := ctxTimeout(60 * time.Second)
	defer cancel()
	l, err := c.cs.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{ResourceVersion: ""})
	check(err, "list pods")
	return l.Items
}

// agentScheduler is the scheduler name deploy/ serves: the sidecar's
// kube-scheduler profile, the standalone fast path.
const agentScheduler = "agent-scheduler"

// agentPod is smallPod for agent-scheduler.
func agentPod(name, cpu, memory string) *corev1.Pod {
	p := smallPod(name, cpu, memory)
	p.Spec.SchedulerName = agentScheduler
	return p
}

func smallPod(name, cpu, memory string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "agentsched-e2e"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:  "agent",
				Image: "registry.invalid/agent:e2e", // never pulled: there are no kubelets
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU:    resource.MustParse(cpu),
					corev1.ResourceMemory: resource.MustParse(memory),
				}},
			}},
			TerminationGracePeriodSeconds: new(int64),
		},
	}
}

// createPods creates n copies of tmpl named prefix-NNNNN with `workers`
// concurrent clients and returns how long that took.
func (c *cluster) createPods(prefix string, n int, tmpl *corev1.Pod, workers int) time.Duration {
	return c.createPodsRetrying(prefix, n, tmpl, workers, 0)
}

// createPodsRetrying creates n pods like createPods, and retries a create
// that fails (the API server may be down) every 200 ms for up to timeout
// from the start (0: the first failure fails the scenario); an
// AlreadyExists answer counts as created (an earlier try succeeded and its
// answer was lost).
func (c *cluster) createPodsRetrying(prefix string, n int, tmpl *corev1.Pod, workers int,
	timeout time.Duration) time.Duration {
	start := time.Now()
	var next int64 = -1
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := atomic.AddInt64(&next, 1)
				if i >= int64(n) || firstErr.Load() != nil {
					return
				}
				p := tmpl.DeepCopy()
				p.Name = fmt.Sprintf("%s-%05d", prefix, i)
				for {
					ctx, cancel := ctxTimeout(60 * time.Second)
					_, err := c.cs.CoreV1().Pods(c.ns).Create(ctx, p, metav1.CreateOptions{})
					cancel()
					if err == nil || timeout > 0 && apierrors.IsAlreadyExists(err) {
						break
					}
					if time.Since(start) > timeout {
						firstErr.CompareAndSwap(nil, fmt.Errorf("create pod %s: %v", p.Name, err))
						return
					}
					time.Sleep(200 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	if e := firstErr.Load(); e != nil {
		fail("%v", e)
	}
	return time.Since(start)
}

// podRequests is what a pod counts against its node: the larger of the sum
// of its containers and its largest init container, plus overhead (the rule
// kube-scheduler's NodeResourcesFit applies).
func podRequests(p *corev1.Pod) corev1.ResourceList {
	sum := corev1.ResourceList{}
	for _, ctr := range p.Spec.Containers {
		for k, v := range ctr.Resources.Requests {
			q := sum[k]
			q.Add(v)
			sum[k] = q
		}
	}
	for _, ctr := range p.Spec.InitContainers {
		for k, v := range ctr.Resources.Requests {
			if q, ok := sum[k]; !ok || v.Cmp(q) > 0 {
				sum[k] = v.DeepCopy()
			}
		}
	}
	for k, v := range p.Spec.Overhead {
		q := sum[k]
		q.Add(v)
		sum[k] = q
	}
	return sum
}

// boundRequests sums, per node, the requests of the pods bound to it in
// every namespace that have not terminated, and counts them.
func (c *cluster) boundRequests() (map[string]corev1.ResourceList, map[string]int) {
	ctx, cancel := ctxTimeout(60 * time.Second)
	defer cancel()
	all, err := c.cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	check(err, "list all pods")
	used := map[string]corev1.ResourceList{}
	count := map[string]int{}
	for i := range all.Items {
		p := &all.Items[i]
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		count[p.Spec.NodeName]++
		u := used[p.Spec.NodeName]
		if u == nil {
			u = corev1.ResourceList{}
			used[p.Spec.NodeName] = u
		}
		for k, v := range podRequests(p) {
			q := u[k]
			q.Add(v)
			u[k] = q
		}
	}
	return used, count
}

// checkNoOvercommit fails if any node carries more requests (of any
// resource it advertises, and pods) than its allocatable. It counts every
// pod in every namespace bound to the node. Returns the bound pod count per node.
func (c *cluster) checkNoOvercommit() map[string]int {
	nodes := c.nodes()
	used, count := c.boundRequests()
	known := map[string]bool{}
	var bad []string
	for _, n := range nodes {
		known[n.Name] = true
		alloc := n.Status.Allocatable
		for k, q := range used[n.Name] {
			a, ok := alloc[k]
			if !ok {
				if !q.IsZero() {
					bad = append(bad, fmt.Sprintf("%s: requests %s %s, node has none", n.Name, q.String(), k))
				}
				continue
			}
			if q.Cmp(a) > 0 {
				bad = append(bad, fmt.Sprintf("%s: %s requested %s > allocatable %s", n.Name, k, q.String(), a.String()))
			}
		}
		maxPods := alloc[corev1.ResourcePods]
		if int64(count[n.Name]) > maxPods.Value() {
			bad = append(bad, fmt.Sprintf("%s: %d pods > allocatable pods %d", n.Name, count[n.Name], maxPods.Value()))
		}
	}
	for name := range count {
		if !known[name] {
			bad = append(bad, fmt.Sprintf("pods bound to unknown node %q", name))
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		fail("OVERCOMMIT on %d node(s):\n  %s", len(bad), strings.Join(bad, "\n  "))
	}
	logf("no overcommit: %d nodes checked against allocatable", len(nodes))
	return count
}

// fitCapacity is how many copies of a pod with requests req fit on the
// nodes (resources and pod count), assuming nothing else runs there.
func fitCapacity(nodes []corev1.Node, req corev1.ResourceList) int {
	total := 0
	for _, n := range nodes {
		fit := n.Status.Allocatable.Pods().Value()
		for k, q := range req {
			if q.IsZero() {
				continue
			}
			a := n.Status.Allocatable[k]
			if f := a.MilliValue() / q.MilliValue(); f < fit {
				fit = f
			}
		}
		total += int(fit)
	}
	return total
}

func scheduledCondition(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodScheduled {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// podState classifies a pod: "bound", "pending-with-reason" (kube-scheduler
// tried and recorded why it failed), or "pending" (not decided yet).
func podState(p *corev1.Pod) string {
	if p.Spec.NodeName != "" {
		return "bound"
	}
	if c := scheduledCondition(p); c != nil && c.Status == corev1.ConditionFalse && c.Reason != "" && c.Message != "" {
		return "pending-with-reason"
	}
	return "pending"
}

type tally struct {
	bound, withReason, pending int
	reasons                    map[string]int
}

func tallyPods(pods []corev1.Pod) tally {
	t := tally{reasons: map[string]int{}}
	for i := range pods {
		switch podState(&pods[i]) {
		case "bound":
			t.bound++
		case "pending-with-reason":
			t.withReason++
			t.reasons[scheduledCondition(&pods[i]).Message]++
		default:
			t.pending++
		}
	}
	return t
}

func (t tally) String() string {
	return fmt.Sprintf("bound=%d pending-with-reason=%d undecided=%d", t.bound, t.withReason, t.pending)
}

// --- agentsched's own endpoints ---

var httpc = &http.Client{Timeout: 5 * time.Second}

// httpNoCert is httpc without a client certificate: what a caller that
// has none gets from agentsched.
var httpNoCert = httpc

// trustAgentschedCA makes httpc check agentsched's HTTPS certificate
// against the PEM CA bundle in caFile (agentsched serving HTTPS: the
// standalone manifest, or dev-cluster --agentsched-tls) and, if certFile
// is given, present that client certificate (keyFile its key) to an
// agentsched with --tls-client-ca. httpNoCert checks the CA only.
func trustAgentschedCA(caFile, certFile, keyFile string) error {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return fmt.Errorf("%s: no PEM certificate", caFile)
	}
	httpNoCert = &http.Client{Timeout: 5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	httpc = httpNoCert
	if certFile == "" && keyFile == "" {
		return nil
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return fmt.Errorf("client certificate %s, key %s: %v", certFile, keyFile, err)
	}
	httpc = &http.Client{Timeout: 5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}}}
	return nil
}

func (c *cluster) agentschedGet(path string) (int, string, error) {
	return getAt(c.agentschedURL, path)
}

// getAt GETs path from the agentsched at url: status, body (16 MiB at most).
func getAt(url, path string) (int, string, error) {
	resp, err := httpc.Get(url + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return resp.StatusCode, string(b), err
}

// repo is the agentsched checkout the harness runs from.
func (c *cluster) repo() string {
	return filepath.Join(filepath.Dir(c.env.need("DEV_CLUSTER")), "..", "..")
}

// metrics maps each sample line's series ("name{labels}") to its value.
func (c *cluster) metrics() map[string]float64 {
	return metricsAt(c.agentschedURL)
}

// metricsAt is metrics for the agentsched at url.
func metricsAt(url string) map[string]float64 {
	code, body, err := getAt(url, "/metrics")
	check(err, "GET agentsched /metrics")
	if code != http.StatusOK {
		fail("GET agentsched /metrics: HTTP %d", code)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(body, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(line[i+1:]), 64)
		if err == nil {
			out[strings.TrimSpace(line[:i])] = v
		}
	}
	return out
}

func seriesName(series string) string {
	if i := strings.IndexByte(series, '{'); i >= 0 {
		return series[:i]
	}
	return series
}

// bindsDone sums agentsched's successful binds: every series of
// agentsched_binds_total except those whose result label says the bind did
// not happen (conflict/error/fail) or was a retry of an earlier one
// (idempotent).
func bindsDone(m map[string]float64) (float64, bool) {
	var sum float64
	found := false
	for s, v := range m {
		if seriesName(s) != "agentsched_binds_total" {
			continue
		}
		found = true
		l := strings.ToLower(s)
		if strings.Contains(l, "conflict") || strings.Contains(l, "error") || strings.Contains(l, "fail") ||
			strings.Contains(l, "idempotent") {
			continue
		}
		sum += v
	}
	return sum, found
}

// verbCount sums the _count series of request histograms that mention verb
// (in the metric name or a label), e.g. agentsched_filter_seconds_count or
// agentsched_extender_seconds_count{verb="filter"}.
func verbCount(m map[string]float64, verb string) (float64, bool) {
	var sum float64
	found := false
	for s, v := range m {
		if strings.HasSuffix(seriesName(s), "_count") && strings.Contains(s, verb) {
			sum += v
			found = true
		}
	}
	return sum, found
}

func metricNames(m map[string]float64) string {
	seen := map[string]bool{}
	var names []string
	for s := range m {
		if n := seriesName(s); !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// extenderFilter calls agentsched's filter verb exactly as kube-scheduler
// does with nodeCacheCapable (NodeNames), and returns failed node -> reason.
func (c *cluster) extenderFilter(pod *corev1.Pod, nodeNames []string, prefix string) (passed []string, failed map[string]string) {
	body, _ := json.Marshal(map[string]interface{}{"Pod": pod, "Nodes": nil, "NodeNames": nodeNames})
	resp, err := httpc.Post(c.agentschedURL+prefix+"/filter", "application/json", strings.NewReader(string(body)))
	check(err, "POST agentsched filter")
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if resp.StatusCode != http.StatusOK {
		fail("POST %s/filter: HTTP %d: %.500s", prefix, resp.StatusCode, b)
	}
	var r struct {
		NodeNames                  *[]string
		FailedNodes                map[string]string
		FailedAndUnresolvableNodes map[string]string
		Error                      string
	}
	if err := json.Unmarshal(b, &r); err != nil {
		fail("filter answer %.500s: %v", b, err)
	}
	if r.Error != "" {
		fail("filter answered Error %q", r.Error)
	}
	failed = map[string]string{}
	for k, v := range r.FailedNodes {
		failed[k] = v
	}
	for k, v := range r.FailedAndUnresolvableNodes {
		failed[k] = v
	}
	if r.NodeNames != nil {
		passed = *r.NodeNames
	}
	return passed, failed
}

// waitSettled polls the scenario's pods until every one is bound or pending
// with a reason and either bound reaches wantBound or nothing changed for
// `quiet`; gives up at timeout. Returns the last tally and pods.
func (c *cluster) waitSettled(total, wantBound int, quiet, timeout time.Duration) (tally, []corev1.Pod) {
	start := time.Now()
	lastChange := start
	var last tally
	var pods []corev1.Pod
	for {
		pods = c.pods()
		t := tallyPods(pods)
		if t.bound != last.bound || t.withReason != last.withReason {
			lastChange = time.Now()
		}
		if t.bound != last.bound || time.Since(start) > 0 && int(time.Since(start).Seconds())%10 == 0 {
			logf("pods: %s (of %d, %.0fs)", t, total, time.Since(start).Seconds())
		}
		last = t
		decided := len(pods) == total && t.pending == 0
		if decided && t.bound >= wantBound {
			return t, pods
		}
		if decided && time.Since(lastChange) > quiet {
			return t, pods
		}
		if time.Since(start) > timeout {
			return t, pods
		}
		time.Sleep(time.Second)
	}
}
