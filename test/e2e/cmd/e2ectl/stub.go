package main

// A stand-in extender used ONLY to validate the harness itself (certs,
// control plane, kube-scheduler wiring, the scenarios' checks) while
// agentsched's live mode is not available. It is not agentsched and proves
// nothing about it: it filters on the Ready condition, scores nothing and
// binds through the API server, leaving capacity to kube-scheduler.
// Invoked as `stub-agentsched serve --kubeconfig FILE --listen HOST:PORT`
// through a symlink named stub-agentsched.

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
)

func runStub(args []string) error {
	if len(args) < 1 || args[0] != "serve" {
		return fmt.Errorf("usage: stub-agentsched serve --kubeconfig FILE --listen HOST:PORT")
	}
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig (live mode)")
	listen := fs.String("listen", "127.0.0.1:8888", "listen address")
	_ = fs.Parse(args[1:])
	cs, _, err := clientset(*kubeconfig)
	if err != nil {
		return err
	}
	inf := informers.NewSharedInformerFactory(cs, 0)
	nodes := inf.Core().V1().Nodes().Lister()
	inf.Core().V1().Nodes().Informer()
	stop := make(chan struct{})
	inf.Start(stop)
	var ready atomic.Bool
	go func() {
		inf.WaitForCacheSync(stop)
		ready.Store(true)
	}()
	var nFilter, nPrio, nBind atomic.Int64

	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if !ready.Load() {
			http.Error(w, "not synced", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "agentsched_binds_total{result=\"fast\"} %d\n", nBind.Load())
		fmt.Fprintf(w, "agentsched_request_duration_seconds_count{verb=\"filter\"} %d\n", nFilter.Load())
		fmt.Fprintf(w, "agentsched_request_duration_seconds_count{verb=\"prioritize\"} %d\n", nPrio.Load())
	})
	type extArgs struct {
		Pod       *corev1.Pod
		NodeNames *[]string
	}
	mux.HandleFunc("/scheduler/filter", func(w http.ResponseWriter, r *http.Request) {
		nFilter.Add(1)
		var a extArgs
		if err := json.NewDecoder(r.Body).Decode(&a); err != nil || a.NodeNames == nil {
			json.NewEncoder(w).Encode(map[string]string{"Error": "bad request"})
			return
		}
		pass := []string{}
		failed := map[string]string{}
		for _, n := range *a.NodeNames {
			node, err := nodes.Get(n)
			switch {
			case err != nil:
				failed[n] = "node(s) were not found in the stub's node cache"
			case !nodeReady(node):
				failed[n] = "node(s) were not ready"
			default:
				pass = append(pass, n)
			}
		}
		json.NewEncoder(w).Encode(map[string]interface{}{"NodeNames": pass, "FailedNodes": failed, "Error": ""})
	})
	mux.HandleFunc("/scheduler/prioritize", func(w http.ResponseWriter, r *http.Request) {
		nPrio.Add(1)
		var a extArgs
		_ = json.NewDecoder(r.Body).Decode(&a)
		out := []map[string]interface{}{}
		if a.NodeNames != nil {
			for _, n := range *a.NodeNames {
				out = append(out, map[string]interface{}{"Host": n, "Score": 0})
			}
		}
		json.NewEncoder(w).Encode(out)
	})
	mux.HandleFunc("/scheduler/bind", func(w http.ResponseWriter, r *http.Request) {
		var b struct{ PodName, PodNamespace, PodUID, Node string }
		if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
			json.NewEncoder(w).Encode(map[string]string{"Error": err.Error()})
			return
		}
		ctx, cancel := ctxTimeout(10 * time.Second)
		defer cancel()
		err := cs.CoreV1().Pods(b.PodNamespace).Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: b.PodName, Namespace: b.PodNamespace},
			Target:     corev1.ObjectReference{Kind: "Node", Name: b.Node},
		}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsConflict(err) {
			json.NewEncoder(w).Encode(map[string]string{"Error": err.Error()})
			return
		}
		nBind.Add(1)
		json.NewEncoder(w).Encode(map[string]string{"Error": ""})
	})
	fmt.Fprintf(os.Stderr, "stub-agentsched (NOT agentsched: harness validation only) on %s\n", *listen)
	return http.ListenAndServe(*listen, mux)
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
