package main

// e2ectl bench: the end-to-end throughput benchmark (test/bench/bench_e2e.sh
// drives it; it is a benchmark, not a test). One run measures one mode on
// the dev-cluster's control plane and appends a JSON line to --out;
// `e2ectl bench table` prints the table and the ratios from those lines.
//
// Modes (the pods' schedulerName selects who schedules them):
//
//	plain     kube-scheduler without extender (bench_e2e.sh starts a second
//	          kube-scheduler with profile "bench-plain" and no extenders)
//	extender  kube-scheduler + agentsched (filter, prioritize, bind):
//	          "default-scheduler", the dev-cluster's kube-scheduler
//	fastpath  agentsched standalone: "agent-scheduler"
//	vc-agent  Volcano's vc-agent-scheduler (dev-cluster --volcano-agent):
//	          the env file's VC_AGENT_NAME ("vc-agent-scheduler")
//	ceiling   nobody schedules ("bench-none"): each client worker posts the
//	          pod and, as soon as the create returns, a precomputed Binding
//	          (round-robin over the nodes); the API server's create+bind limit
//	bindonly  like ceiling, but all pods are created first (untimed) and only
//	          the Bindings are timed; latency is bind call start -> watch
//
// Latency is measured from the return of the client's create call (the
// Binding call's start in bindonly) to the first informer event that shows
// spec.nodeName, not from creationTimestamp (1 s resolution). Throughput is
// bound pods / (first create call start .. last bound event).
//
// --cpu-groups names the scheduler's processes (NAME:PGID,...: every process
// in each process group, from /proc); the CPU seconds (user+system) they
// used from the first create to the last bound event are recorded, per
// 1000 bound pods, so that schedulers are compared by their cost per pod.

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

var benchSchedulerNames = map[string]string{
	"plain":    "bench-plain",
	"extender": "default-scheduler",
	// the extender again, after bench_e2e.sh set the policy's
	// extender.shortlist and reloaded it (SIGHUP)
	"shortlist": "default-scheduler",
	"fastpath":  "agent-scheduler",
	"vc-agent":  "vc-agent-scheduler", // VC_AGENT_NAME of the env file when set
	"ceiling":   "bench-none",
	"bindonly":  "bench-none",
}

type benchResult struct {
	Mode      string  `json:"mode"`
	Pods      int     `json:"pods"`
	Nodes     int     `json:"nodes"`
	Bound     int     `json:"bound"`
	Workers   int     `json:"workers"`
	Rate      float64 `json:"rate"`
	CreateS   float64 `json:"create_s"`
	ElapsedS  float64 `json:"elapsed_s"`
	PodsPerS  float64 `json:"pods_per_s"`
	P50Ms     float64 `json:"p50_ms"`
	P99Ms     float64 `json:"p99_ms"`
	MaxMs     float64 `json:"max_ms"`
	TimedOut  bool    `json:"timed_out"`
	ClientQPS float32 `json:"client_qps"`
	// CPU seconds of the --cpu-groups processes over the timed window, and
	// per 1000 bound pods; SchedGroups names them.
	SchedCPUS     float64 `json:"sched_cpu_s,omitempty"`
	SchedCPUPer1k float64 `json:"sched_cpu_s_per_1k,omitempty"`
	SchedGroups   string  `json:"sched_groups,omitempty"`
}

func cmdBench(args []string) error {
	if len(args) > 0 && args[0] == "table" {
		return benchTable(args[1:])
	}
	fs := flag.NewFlagSet("bench", flag.ExitOnError)
	stateDir := fs.String("state-dir", "", "dev-cluster state directory (required)")
	mode := fs.String("mode", "", "plain|extender|shortlist|fastpath|vc-agent|ceiling|bindonly (required)")
	pods := fs.Int("pods", 1000, "pods to create")
	workers := fs.Int("workers", 64, "concurrent client goroutines")
	qps := fs.Float64("qps", 20000, "client QPS (burst = 2x)")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up waiting for binds after this long")
	out := fs.String("out", "", "append the JSON result line to this file")
	rate := fs.Float64("rate", 0, "arrival rate in pods/s (creates, or binds in bindonly); 0: as fast as the workers go")
	cleanup := fs.Bool("cleanup", true, "delete the benchmark's pods afterwards (grace 0)")
	cpuGroups := fs.String("cpu-groups", "", "NAME:PGID,... the scheduler's process groups, whose CPU seconds over the timed window are recorded")
	_ = fs.Parse(args)
	sched, ok := benchSchedulerNames[*mode]
	if *stateDir == "" || !ok || *pods < 1 || *workers < 1 {
		return fmt.Errorf("usage: bench --state-dir DIR --mode plain|extender|shortlist|fastpath|vc-agent|ceiling|bindonly [--pods N] [--workers W]")
	}
	groups, err := parseCPUGroups(*cpuGroups)
	if err != nil {
		return err
	}
	e, err := loadEnv(*stateDir)
	if err != nil {
		return err
	}
	if *mode == "vc-agent" {
		if e["VOLCANO_AGENT"] != "1" {
			return fmt.Errorf("mode vc-agent: the dev-cluster runs no vc-agent-scheduler (up --volcano-agent)")
		}
		if n := e["VC_AGENT_NAME"]; n != "" {
			sched = n
		}
	}
	cfg, err := restConfig(e["KUBECONFIG"])
	if err != nil {
		return err
	}
	cfg.QPS = float32(*qps)
	cfg.Burst = int(2 * *qps)
	cfg.UserAgent = "agentsched-bench"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ns := "bench-" + *mode
	ctx, cancel := ctxTimeout(30 * time.Second)
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	cancel()
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %v", ns, err)
	}
	ctx, cancel = ctxTimeout(60 * time.Second)
	nl, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	cancel()
	if err != nil {
		return fmt.Errorf("list nodes: %v", err)
	}
	nodes := make([]string, 0, len(nl.Items))
	for _, n := range nl.Items {
		nodes = append(nodes, n.Name)
	}
	if len(nodes) == 0 {
		return fmt.Errorf("no nodes")
	}
	if *cleanup {
		benchDeletePods(cs, ns) // leftovers of an interrupted run
	}

	n := *pods
	start := make([]time.Time, n) // create returned (bind started in bindonly)
	bound := make([]time.Time, n)
	var mu sync.Mutex
	var nbound int
	var lastBound time.Time
	allBound := make(chan struct{})
	idx := func(name string) int {
		var i int
		if _, err := fmt.Sscanf(name, "bench-%d", &i); err != nil || i < 0 || i >= n {
			return -1
		}
		return i
	}
	onPod := func(obj interface{}) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Spec.NodeName == "" {
			return
		}
		now := time.Now()
		i := idx(p.Name)
		if i < 0 {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if !bound[i].IsZero() {
			return
		}
		bound[i] = now
		lastBound = now
		nbound++
		if nbound == n {
			close(allBound)
		}
	}
	fac := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	inf := fac.Core().V1().Pods().Informer()
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onPod,
		UpdateFunc: func(_, o interface{}) { onPod(o) },
	})
	stop := make(chan struct{})
	defer close(stop)
	fac.Start(stop)
	if !cache.WaitForCacheSync(stop, inf.HasSynced) {
		return fmt.Errorf("pod informer did not sync")
	}

	tmpl := smallPod("", "100m", "64Mi")
	tmpl.Spec.SchedulerName = sched
	bindTo := func(i int) error {
		b := &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-%06d", i), Namespace: ns},
			Target:     corev1.ObjectReference{Kind: "Node", Name: nodes[i%len(nodes)]},
		}
		ctx, cancel := ctxTimeout(60 * time.Second)
		defer cancel()
		return cs.CoreV1().Pods(ns).Bind(ctx, b, metav1.CreateOptions{})
	}
	// parallel runs f(0..n-1) on the workers; paced (rate > 0) it hands out
	// one index every 1/rate seconds (open-loop arrivals, so latency is not
	// just queueing behind a saturated API server).
	parallel := func(f func(i int) error, rate float64) error {
		idxs := make(chan int, *workers)
		done := make(chan struct{})
		go func() {
			defer close(idxs)
			var tick *time.Ticker
			if rate > 0 {
				tick = time.NewTicker(time.Duration(float64(time.Second) / rate))
				defer tick.Stop()
			}
			for i := 0; i < n; i++ {
				if tick != nil {
					<-tick.C
				}
				select {
				case idxs <- i:
				case <-done:
					return
				}
			}
		}()
		var wg sync.WaitGroup
		var firstErr atomic.Value
		var once sync.Once
		for w := 0; w < *workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range idxs {
					if err := f(i); err != nil {
						firstErr.CompareAndSwap(nil, err)
						once.Do(func() { close(done) })
						return
					}
				}
			}()
		}
		wg.Wait()
		once.Do(func() { close(done) })
		if e := firstErr.Load(); e != nil {
			return e.(error)
		}
		return nil
	}
	create := func(i int) error {
		p := tmpl.DeepCopy()
		p.Name = fmt.Sprintf("bench-%06d", i)
		ctx, cancel := ctxTimeout(60 * time.Second)
		_, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		cancel()
		if err != nil {
			return fmt.Errorf("create pod %s: %v", p.Name, err)
		}
		return nil
	}

	logf("bench %s: %d pods (schedulerName %s), %d nodes, %d workers, arrival rate %v/s (0: max), client qps %.0f",
		*mode, n, sched, len(nodes), *workers, *rate, *qps)
	if *mode == "bindonly" {
		if err := parallel(create, 0); err != nil {
			return err
		}
		logf("created %d pods (untimed), binding", n)
	}
	cpu0 := groupsCPU(groups)
	t0 := time.Now()
	err = parallel(func(i int) error {
		if *mode == "bindonly" {
			start[i] = time.Now()
			return bindTo(i)
		}
		if err := create(i); err != nil {
			return err
		}
		start[i] = time.Now()
		if *mode == "ceiling" {
			return bindTo(i)
		}
		return nil
	}, *rate)
	createD := time.Since(t0)
	if err != nil {
		return err
	}
	logf("%s calls done in %.2fs (%.0f/s)", map[bool]string{true: "bind", false: "create"}[*mode == "bindonly"],
		createD.Seconds(), float64(n)/createD.Seconds())
	timedOut := false
	select {
	case <-allBound:
	case <-time.After(*timeout):
		timedOut = true
	}
	cpu1 := groupsCPU(groups)
	mu.Lock()
	res := benchResult{Mode: *mode, Pods: n, Nodes: len(nodes), Bound: nbound, Workers: *workers, Rate: *rate,
		CreateS: createD.Seconds(), TimedOut: timedOut, ClientQPS: cfg.QPS}
	if len(groups) > 0 {
		res.SchedCPUS = cpu1 - cpu0
		res.SchedGroups = *cpuGroups
		if nbound > 0 {
			res.SchedCPUPer1k = res.SchedCPUS / float64(nbound) * 1000
		}
	}
	var lat []float64
	for i := 0; i < n; i++ {
		if bound[i].IsZero() {
			continue
		}
		d := bound[i].Sub(start[i]) // the watch may beat the create's response
		if d < 0 {
			d = 0
		}
		lat = append(lat, float64(d)/float64(time.Millisecond))
	}
	if nbound > 0 {
		res.ElapsedS = lastBound.Sub(t0).Seconds()
		res.PodsPerS = float64(nbound) / res.ElapsedS
	}
	mu.Unlock()
	sort.Float64s(lat)
	res.P50Ms, res.P99Ms = pct(lat, 0.50), pct(lat, 0.99)
	if len(lat) > 0 {
		res.MaxMs = lat[len(lat)-1]
	}
	logf("bench %s: %d/%d bound in %.2fs: %.0f pods/s, create->bound p50 %.1f ms p99 %.1f ms max %.1f ms%s",
		*mode, nbound, n, res.ElapsedS, res.PodsPerS, res.P50Ms, res.P99Ms, res.MaxMs,
		map[bool]string{true: " (TIMED OUT)", false: ""}[timedOut])
	if len(groups) > 0 {
		logf("bench %s: scheduler CPU (%s) %.2f s, %.3f s per 1000 pods", *mode, *cpuGroups, res.SchedCPUS, res.SchedCPUPer1k)
	}
	if *out != "" {
		b, _ := json.Marshal(res)
		f, err := os.OpenFile(*out, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		_, err = f.Write(append(b, '\n'))
		f.Close()
		if err != nil {
			return err
		}
	}
	if *cleanup {
		benchDeletePods(cs, ns)
	}
	if timedOut {
		return fmt.Errorf("only %d of %d pods bound within %v", nbound, n, *timeout)
	}
	return nil
}

// pct returns the q-quantile (nearest rank) of sorted values.
func pct(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(sorted) {
		i = len(sorted) - 1
	}
	return sorted[i]
}

// benchDeletePods removes every pod of ns at once (grace 0: there are no
// kubelets to confirm a graceful delete) and waits, bounded, until they are
// gone, so that the next mode starts on empty nodes. No namespace deletion:
// without kube-controller-manager a namespace never finishes terminating.
func benchDeletePods(cs *kubernetes.Clientset, ns string) {
	zero := int64(0)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	err := cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
	if err != nil {
		// Typically the API server's 60 s request timeout on thousands of
		// pods: the deletion goes on server-side, so keep waiting for it.
		logf("cleanup: delete pods in %s: %v (waiting for the pods to go)", ns, err)
	}
	for ctx.Err() == nil {
		l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 1})
		if err == nil && len(l.Items) == 0 {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	logf("cleanup: pods of %s still present after 5 min", ns)
}

// benchTable prints the results appended by bench runs and the ratios.
func benchTable(args []string) error {
	fs := flag.NewFlagSet("bench table", flag.ExitOnError)
	in := fs.String("in", "", "JSON lines written by bench --out (required)")
	_ = fs.Parse(args)
	f, err := os.Open(*in)
	if err != nil {
		return err
	}
	defer f.Close()
	res := map[string]benchResult{}
	var order []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r benchResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return fmt.Errorf("%s: %v", *in, err)
		}
		if _, seen := res[r.Mode]; !seen {
			order = append(order, r.Mode)
		}
		res[r.Mode] = r
	}
	// create/s is the client's create calls/s (binds/s for bindonly): when
	// pods/s is close to it, the API server, not the scheduler, was the limit.
	label := map[string]string{
		"plain":     "(a) kube-scheduler alone",
		"extender":  "(b) kube-scheduler + agentsched extender",
		"shortlist": "(b') the same, extender.shortlist set",
		"fastpath":  "(c) agentsched standalone fast path",
		"vc-agent":  "(v) Volcano vc-agent-scheduler",
		"ceiling":   "(d) binding ceiling (create + bind)",
		"bindonly":  "(d') bindings only (pods pre-created)",
	}
	fmt.Printf("| %-42s | %5s | %5s | %7s | %8s | %7s | %7s | %8s | %8s | %8s | %11s |\n",
		"mode", "nodes", "pods", "arrival", "create/s", "bound", "pods/s", "p50 ms", "p99 ms", "max ms", "CPU s/1k")
	fmt.Printf("|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|\n", dash(44), dash(7), dash(7), dash(9), dash(10), dash(9), dash(9), dash(10), dash(10), dash(10), dash(13))
	for _, m := range order {
		r := res[m]
		l := label[m]
		if r.TimedOut {
			l += " TIMEOUT"
		}
		arr := "max"
		if r.Rate > 0 {
			arr = fmt.Sprintf("%.0f/s", r.Rate)
		}
		cps := 0.0
		if r.CreateS > 0 {
			cps = float64(r.Pods) / r.CreateS
		}
		cpu := "-"
		if r.SchedGroups != "" {
			cpu = fmt.Sprintf("%.3f", r.SchedCPUPer1k)
		}
		fmt.Printf("| %-42s | %5d | %5d | %7s | %8.0f | %7d | %7.0f | %8.1f | %8.1f | %8.1f | %11s |\n",
			l, r.Nodes, r.Pods, arr, cps, r.Bound, r.PodsPerS, r.P50Ms, r.P99Ms, r.MaxMs, cpu)
	}
	ratio := func(name, x, y string) {
		rx, okx := res[x]
		ry, oky := res[y]
		if !okx || !oky || ry.PodsPerS == 0 {
			fmt.Printf("%s: n/a (mode missing)\n", name)
			return
		}
		fmt.Printf("%s = %.2f (pods/s %.0f / %.0f)\n", name, rx.PodsPerS/ry.PodsPerS, rx.PodsPerS, ry.PodsPerS)
	}
	fmt.Println()
	ratio("b/a", "extender", "plain")
	if _, ok := res["shortlist"]; ok {
		ratio("b'/a", "shortlist", "plain")
	}
	ratio("c/a", "fastpath", "plain")
	ratio("c/d", "fastpath", "ceiling")
	if _, ok := res["bindonly"]; ok {
		ratio("c/d'", "fastpath", "bindonly")
	}
	fmt.Println("CPU s/1k: CPU seconds (user+system) of the scheduler's processes from the first create to the last bind, per 1000 bound pods")
	for _, m := range order {
		if g := res[m].SchedGroups; g != "" {
			fmt.Printf("  %s: %s\n", m, g)
		}
	}
	if c, v := res["fastpath"], res["vc-agent"]; c.Mode != "" && v.Mode != "" {
		fmt.Println()
		fmt.Println("fast path against vc-agent-scheduler (same pods, same control plane):")
		if v.PodsPerS > 0 {
			fmt.Printf("  pods/s       fastpath/vc-agent = %.2f (%.0f / %.0f)\n", c.PodsPerS/v.PodsPerS, c.PodsPerS, v.PodsPerS)
		}
		if c.SchedCPUPer1k > 0 && v.SchedCPUPer1k > 0 {
			fmt.Printf("  CPU per pod  fastpath/vc-agent = %.3f (%.3f / %.3f s per 1000 pods; vc-agent uses %.1fx the CPU)\n",
				c.SchedCPUPer1k/v.SchedCPUPer1k, c.SchedCPUPer1k, v.SchedCPUPer1k, v.SchedCPUPer1k/c.SchedCPUPer1k)
		}
		if v.P99Ms > 0 {
			fmt.Printf("  p99          fastpath/vc-agent = %.3f (%.1f / %.1f ms)\n", c.P99Ms/v.P99Ms, c.P99Ms, v.P99Ms)
		}
	}
	return nil
}

type cpuGroup struct {
	name string
	pgid int
}

// parseCPUGroups reads NAME:PGID,NAME:PGID ("" is none).
func parseCPUGroups(s string) ([]cpuGroup, error) {
	var out []cpuGroup
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		i := strings.LastIndexByte(f, ':')
		pgid, err := strconv.Atoi(f[i+1:])
		if i <= 0 || err != nil || pgid <= 1 {
			return nil, fmt.Errorf("--cpu-groups: %q is not NAME:PGID", f)
		}
		out = append(out, cpuGroup{f[:i], pgid})
	}
	return out, nil
}

// groupsCPU sums the CPU seconds (utime+stime, and those of reaped
// children) of every process whose process group is one of groups.
func groupsCPU(groups []cpuGroup) float64 {
	if len(groups) == 0 {
		return 0
	}
	want := map[int]bool{}
	for _, g := range groups {
		want[g.pgid] = true
	}
	ents, _ := os.ReadDir("/proc")
	var ticks int64
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// after "(comm)": state ppid pgrp ... utime(14) stime cutime cstime
		st := string(b)
		j := strings.LastIndexByte(st, ')')
		if j < 0 {
			continue
		}
		f := strings.Fields(st[j+1:])
		if len(f) < 15 {
			continue
		}
		if pg, _ := strconv.Atoi(f[2]); !want[pg] {
			continue
		}
		for _, k := range []int{11, 12, 13, 14} {
			v, _ := strconv.ParseInt(f[k], 10, 64)
			ticks += v
		}
	}
	return float64(ticks) / 100 // USER_HZ: 100 on Linux
}

func dash(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = '-'
	}
	return string(b)
}
