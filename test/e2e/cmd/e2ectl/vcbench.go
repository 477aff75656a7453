package main

// The helpers of test/bench/bench_volcano.sh: Volcano pods created at a
// fixed rate (vc-pods), a load of one URL with Volcano's connection pattern
// (http-load), and a reverse proxy that measures the request bodies
// vc-scheduler sends per verb (body-proxy).

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func init() {
	commands["vc-pods"] = command{cmdVCPods, "create Volcano pods (GPU shares or CPU-only), at once or at a rate (bench_volcano.sh)"}
	commands["http-load"] = command{cmdHTTPLoad, "GET or POST one URL N times, P in parallel, optionally a new connection per call"}
	commands["body-proxy"] = command{cmdBodyProxy, "reverse proxy counting request/response bytes per path (bench_volcano.sh)"}
}

// vcBenchLabel marks the pods vc-pods created; its value is their prefix.
const vcBenchLabel = "agentsched.io/vcbench"

// cmdVCPods creates --count pods of schedulerName volcano named
// PREFIX-NNNNN in --namespace (created if missing), each requesting --cpu
// and --memory and, with --gpu-milli, that GPU share (a task Volcano's
// extender plugin sends to agentsched under the shipped managedResources).
// --rate R creates one every 1/R s (0: all at once, 16 in parallel);
// --count 0 with a rate creates until SIGTERM/SIGINT (a stream).
// --wait-bound D then waits up to D until all of them are bound.
func cmdVCPods(args []string) error {
	fs := flag.NewFlagSet("vc-pods", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig (required)")
	ns := fs.String("namespace", "vcbench", "namespace (created if missing)")
	prefix := fs.String("prefix", "vcpod", "name prefix, also the "+vcBenchLabel+" label's value")
	count := fs.Int("count", 1, "pods to create (0 with --rate: until SIGTERM)")
	milli := fs.Int64("gpu-milli", 0, "GPU share per pod in thousandths of a device (0: a CPU-only pod)")
	cpu := fs.String("cpu", "100m", "cpu request")
	memory := fs.String("memory", "128Mi", "memory request")
	rate := fs.Float64("rate", 0, "pods per second (0: all at once)")
	waitBound := fs.Duration("wait-bound", 0, "wait this long for every pod to be bound (0: do not wait)")
	_ = fs.Parse(args)
	if *count == 0 && *rate <= 0 {
		return fmt.Errorf("--count 0 needs a --rate")
	}
	cs, _, err := clientset(*kubeconfig)
	if err != nil {
		return err
	}
	ctx, cancel := ctxTimeout(30 * time.Second)
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: *ns}}, metav1.CreateOptions{})
	cancel()
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace %s: %v", *ns, err)
	}
	tmpl := smallPod("", *cpu, *memory)
	if *milli > 0 {
		tmpl = gpuPod("", *milli)
		tmpl.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse(*cpu)
		tmpl.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse(*memory)
	}
	tmpl.Spec.SchedulerName = volcanoScheduler
	tmpl.Labels = map[string]string{vcBenchLabel: *prefix}
	create := func(i int) error {
		p := tmpl.DeepCopy()
		p.Name = fmt.Sprintf("%s-%05d", *prefix, i)
		ctx, cancel := ctxTimeout(30 * time.Second)
		defer cancel()
		_, err := cs.CoreV1().Pods(*ns).Create(ctx, p, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			err = nil
		}
		return err
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	start := time.Now()
	created := 0
	if *rate > 0 {
		tick := time.NewTicker(time.Duration(float64(time.Second) / *rate))
		defer tick.Stop()
	loop:
		for *count == 0 || created < *count {
			select {
			case <-stop:
				break loop
			case <-tick.C:
			}
			if err := create(created); err != nil {
				return err
			}
			created++
		}
	} else {
		var next int64 = -1
		var wg sync.WaitGroup
		var first atomic.Value
		for w := 0; w < 16; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(atomic.AddInt64(&next, 1))
					if i >= *count || first.Load() != nil {
						return
					}
					if err := create(i); err != nil {
						first.CompareAndSwap(nil, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		if e := first.Load(); e != nil {
			return e.(error)
		}
		created = *count
	}
	fmt.Printf("vc-pods: created %d pods %s-* (gpu-milli %d, cpu %s) in %.1fs\n",
		created, *prefix, *milli, *cpu, time.Since(start).Seconds())
	if *waitBound <= 0 {
		return nil
	}
	deadline := time.Now().Add(*waitBound)
	for {
		ctx, cancel := ctxTimeout(30 * time.Second)
		list, err := cs.CoreV1().Pods(*ns).List(ctx, metav1.ListOptions{LabelSelector: vcBenchLabel + "=" + *prefix})
		cancel()
		if err != nil {
			return err
		}
		bound := 0
		for _, p := range list.Items {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		if bound >= created {
			fmt.Printf("vc-pods: all %d bound after %.1fs\n", created, time.Since(start).Seconds())
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d pods %s-* bound after %v", bound, created, *prefix, *waitBound)
		}
		time.Sleep(time.Second)
	}
}

// tlsConfigFrom builds a client TLS configuration from optional CA,
// certificate and key files (nil when all are empty).
func tlsConfigFrom(caFile, certFile, keyFile string) (*tls.Config, error) {
	if caFile == "" && certFile == "" {
		return nil, nil
	}
	cfg := &tls.Config{}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no certificates", caFile)
		}
		cfg.RootCAs = pool
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// cmdHTTPLoad calls --url --count times from --parallel workers (a GET, or a
// POST of --body or of the --body-files in turn) and prints
// the calls, errors (transport errors and non-200 answers) and the rate.
// --conns-per-call opens a new TCP (and TLS) connection for every call and
// closes it after the answer, the pattern Volcano's extender plugin ends up
// with under 16 parallel predicates (Go's default transport keeps only two
// idle connections per host): a server's cost per call then includes
// accepting and closing a connection.
func cmdHTTPLoad(args []string) error {
	fs := flag.NewFlagSet("http-load", flag.ExitOnError)
	u := fs.String("url", "", "URL (required)")
	count := fs.Int("count", 1000, "calls")
	parallel := fs.Int("parallel", 16, "concurrent callers")
	perCall := fs.Bool("conns-per-call", false, "a new connection per call (no keep-alive)")
	body := fs.String("body", "", "POST this body (JSON) instead of a GET")
	bodyFiles := fs.String("body-files", "", "comma-separated files: POST their contents in turn instead of a GET")
	caFile := fs.String("ca", "", "CA to trust (https)")
	certFile := fs.String("cert", "", "client certificate (https)")
	keyFile := fs.String("key", "", "client key (https)")
	_ = fs.Parse(args)
	if *u == "" {
		return fmt.Errorf("--url is required")
	}
	tcfg, err := tlsConfigFrom(*caFile, *certFile, *keyFile)
	if err != nil {
		return err
	}
	var bodies [][]byte
	if *body != "" {
		bodies = append(bodies, []byte(*body))
	}
	if *bodyFiles != "" {
		for _, f := range strings.Split(*bodyFiles, ",") {
			b, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			bodies = append(bodies, b)
		}
	}
	var bodyBytes int64
	tr := &http.Transport{TLSClientConfig: tcfg, DisableKeepAlives: *perCall, MaxIdleConnsPerHost: *parallel}
	client := &http.Client{Timeout: 10 * time.Second, Transport: tr}
	var next, errs int64 = -1, 0
	var firstErr atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < *parallel; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := atomic.AddInt64(&next, 1)
				if i >= int64(*count) {
					return
				}
				var resp *http.Response
				var err error
				if len(bodies) > 0 {
					b := bodies[i%int64(len(bodies))]
					atomic.AddInt64(&bodyBytes, int64(len(b)))
					resp, err = client.Post(*u, "application/json", bytes.NewReader(b))
				} else {
					resp, err = client.Get(*u)
				}
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				if err != nil {
					atomic.AddInt64(&errs, 1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(start).Seconds()
	fmt.Printf("http-load: %d calls, %d errors, %.2f s, %.0f calls/s, %d parallel, new connection per call %v",
		*count, errs, el, float64(*count)/el, *parallel, *perCall)
	if len(bodies) > 0 {
		fmt.Printf(", %d bodies in turn, mean %.0f bytes", len(bodies), float64(bodyBytes)/float64(*count))
	}
	fmt.Println()
	if e := firstErr.Load(); e != nil {
		fmt.Printf("http-load: first error: %s\n", e)
	}
	if errs > int64(*count)/100 {
		return fmt.Errorf("%d of %d calls failed", errs, *count)
	}
	return nil
}

type countingReader struct {
	r io.ReadCloser
	n *int64
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	atomic.AddInt64(c.n, int64(n))
	return n, err
}

func (c countingReader) Close() error { return c.r.Close() }

type countingWriter struct {
	http.ResponseWriter
	n *int64
}

func (c countingWriter) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	atomic.AddInt64(c.n, int64(n))
	return n, err
}

// cmdBodyProxy listens on --listen and forwards every request to --target
// (its path appended to the target's), counting per last path element (the
// verb) the calls and the request and response body bytes; --save-dir keeps
// the first bodies of each verb (to replay them with http-load --body-files). On SIGTERM or
// SIGINT, or after --duration, it prints one line per verb and exits. Used
// only for a separate measurement phase (it adds a hop).
func cmdBodyProxy(args []string) error {
	fs := flag.NewFlagSet("body-proxy", flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on (plain HTTP)")
	target := fs.String("target", "", "URL to forward to, e.g. https://127.0.0.1:8888 (required)")
	caFile := fs.String("ca", "", "CA to trust for an https target")
	certFile := fs.String("cert", "", "client certificate for an https target")
	keyFile := fs.String("key", "", "client key for an https target")
	duration := fs.Duration("duration", 0, "stop after this long (0: on a signal)")
	saveDir := fs.String("save-dir", "", "save the first --save-max request bodies of each verb as DIR/VERB-NNNN.json")
	saveMax := fs.Int("save-max", 64, "bodies saved per verb")
	_ = fs.Parse(args)
	tu, err := url.Parse(*target)
	if err != nil || *target == "" {
		return fmt.Errorf("--target: %q: %v", *target, err)
	}
	tcfg, err := tlsConfigFrom(*caFile, *certFile, *keyFile)
	if err != nil {
		return err
	}
	type stat struct{ calls, req, resp, saved int64 }
	var mu sync.Mutex
	stats := map[string]*stat{}
	rp := httputil.NewSingleHostReverseProxy(tu)
	rp.Transport = &http.Transport{TLSClientConfig: tcfg, MaxIdleConnsPerHost: 64}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		verb := path.Base(r.URL.Path)
		mu.Lock()
		s := stats[verb]
		if s == nil {
			s = &stat{}
			stats[verb] = s
		}
		mu.Unlock()
		atomic.AddInt64(&s.calls, 1)
		if *saveDir != "" && r.Body != nil {
			if k := atomic.AddInt64(&s.saved, 1); k <= int64(*saveMax) {
				b, err := io.ReadAll(r.Body)
				r.Body.Close()
				if err != nil {
					http.Error(w, err.Error(), http.StatusBadGateway)
					return
				}
				_ = os.WriteFile(filepath.Join(*saveDir, fmt.Sprintf("%s-%04d.json", verb, k)), b, 0o644)
				r.Body = io.NopCloser(bytes.NewReader(b))
			}
		}
		if r.Body != nil {
			r.Body = countingReader{r.Body, &s.req}
		}
		rp.ServeHTTP(countingWriter{w, &s.resp}, r)
	})
	if *saveDir != "" {
		if err := os.MkdirAll(*saveDir, 0o755); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(ln) }()
	fmt.Fprintf(os.Stderr, "body-proxy: listening on %s, forwarding to %s\n", ln.Addr(), *target)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	var timeout <-chan time.Time
	if *duration > 0 {
		timeout = time.After(*duration)
	}
	start := time.Now()
	select {
	case <-stop:
	case <-timeout:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_ = srv.Shutdown(ctx)
	cancel()
	mu.Lock()
	defer mu.Unlock()
	verbs := make([]string, 0, len(stats))
	for v := range stats {
		verbs = append(verbs, v)
	}
	sort.Strings(verbs)
	for _, v := range verbs {
		s := stats[v]
		if s.calls == 0 {
			continue
		}
		fmt.Printf("%s calls %d req_bytes %d resp_bytes %d req_mean %.0f resp_mean %.0f\n", v, s.calls, s.req, s.resp,
			float64(s.req)/float64(s.calls), float64(s.resp)/float64(s.calls))
	}
	fmt.Fprintf(os.Stderr, "body-proxy: %.1fs, %d verbs\n", time.Since(start).Seconds(), len(verbs))
	return nil
}
