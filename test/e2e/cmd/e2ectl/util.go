package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// cmdFreePorts prints N distinct ports that were free on 127.0.0.1 a moment
// ago. All listeners are held open until every port is chosen, so the N are
// distinct; a race with another process grabbing one afterwards is possible
// but unlikely, and shows up as a clear "address in use" at start-up.
func cmdFreePorts(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: freeports N")
	}
	n, err := strconv.Atoi(args[0])
	if err != nil || n < 1 || n > 64 {
		return fmt.Errorf("N must be 1..64")
	}
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		ls = append(ls, l)
		fmt.Println(l.Addr().(*net.TCPAddr).Port)
	}
	return nil
}

func processAlive(pid int) bool {
	if pid <= 0 {
		return true
	}
	err := syscall.Kill(pid, 0)
	return err == nil || err == syscall.EPERM
}

// cmdWaitURL polls url until it answers 200, the timeout passes, or the
// process --pid (the server being waited for) exits.
func cmdWaitURL(args []string) error {
	fs := flag.NewFlagSet("wait-url", flag.ExitOnError)
	url := fs.String("url", "", "URL to poll (required)")
	caFile := fs.String("ca", "", "CA bundle for https")
	insecure := fs.Bool("insecure", false, "skip TLS verification (self-signed component certs)")
	tokenFile := fs.String("token-file", "", "bearer token file")
	timeout := fs.Duration("timeout", 60*time.Second, "give up after this long")
	pid := fs.Int("pid", 0, "fail at once if this process exits")
	_ = fs.Parse(args)
	if *url == "" {
		return fmt.Errorf("--url is required")
	}
	tlsCfg := &tls.Config{InsecureSkipVerify: *insecure} //nolint:gosec // loopback test components
	if *caFile != "" {
		pem, err := os.ReadFile(*caFile)
		if err != nil {
			return err
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		tlsCfg.RootCAs = pool
	}
	var token string
	if *tokenFile != "" {
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			return err
		}
		token = string(b)
	}
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	start := time.Now()
	deadline := start.Add(*timeout)
	last := "no answer yet"
	for time.Now().Before(deadline) {
		if !processAlive(*pid) {
			return fmt.Errorf("%s: process %d exited while waiting (last: %s)", *url, *pid, last)
		}
		req, _ := http.NewRequest(http.MethodGet, *url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				fmt.Printf("%s ready after %.1fs\n", *url, time.Since(start).Seconds())
				return nil
			}
			last = fmt.Sprintf("HTTP %d: %.300s", resp.StatusCode, body)
		} else {
			last = err.Error()
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready after %v (last: %s)", *url, *timeout, last)
}

// restConfig loads a kubeconfig with client-side throttling raised: the
// scenarios create thousands of pods and must not measure client-go's
// default 5 QPS.
func restConfig(kubeconfig string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS = 2000
	cfg.Burst = 4000
	cfg.UserAgent = "agentsched-e2e"
	return cfg, nil
}

func clientset(kubeconfig string) (*kubernetes.Clientset, *rest.Config, error) {
	cfg, err := restConfig(kubeconfig)
	if err != nil {
		return nil, nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	return cs, cfg, err
}

func ctxTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
