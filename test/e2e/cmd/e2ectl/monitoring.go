package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// promOperatorModule is the Prometheus Operator's Go module, which carries
// its CRDs (example/prometheus-operator-crd); the scenario fetches it
// through the Go module proxy like the rest of the harness.
const promOperatorModule = "github.com/prometheus-operator/prometheus-operator@v0.85.0"

var podMonitorGVR = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "podmonitors"}

// shippedMonitored maps each PodMonitor of deploy/dashboards to the
// manifest holding the Deployment it scrapes.
var shippedMonitored = map[string]string{
	"agent-scheduler":                 "deploy/kube-scheduler/agentsched-sidecar.yaml",
	"agentsched":                      "deploy/standalone/agentsched.yaml",
	"agentsched-shard-controller":     "deploy/shard-controller/deployment.yaml",
	"agentsched-gpu-share-advertiser": "deploy/gpu-share/deployment.yaml",
}

// Scenario monitoring_manifests: what a Prometheus Operator user applies.
//  1. The Operator's own PodMonitor and PrometheusRule CRDs (its module
//     from the Go module proxy) are installed on the API server, and
//     deploy/dashboards/agentsched-podmonitors.yaml is applied with strict
//     field validation (an unknown or misplaced field is refused).
//  2. Each PodMonitor (one for every shipped workload that serves
//     /metrics, none missing) selects the pods of its Deployment in the
//     same namespace, and scrapes a named port of their containers that
//     the process listens on (--listen or --metrics-listen names the
//     container port), over HTTPS exactly where the process serves it.
//  3. As Prometheus would with that PodMonitor, /metrics of the running
//     standalone agentsched (the shipped flags; the harness's certificate
//     carries the Service's name, as make-certs.sh's does) is fetched with
//     only the CA and the PodMonitor's serverName, no client certificate.
//  4. Both alert rule files, as a PrometheusRule's spec.groups, are
//     accepted with strict field validation.
func scenarioMonitoringManifests(c *cluster) {
	if c.env["LAYOUT"] != "standalone" {
		fail("needs dev-cluster --layout standalone")
	}
	repo := c.repo()
	crds := filepath.Join(promOperatorDir(), "example", "prometheus-operator-crd")
	for _, f := range []string{"monitoring.coreos.com_podmonitors.yaml", "monitoring.coreos.com_prometheusrules.yaml"} {
		c.applyFile(filepath.Join(crds, f), false)
	}

	// 1. The PodMonitors.
	c.applyFile(filepath.Join(repo, "deploy/dashboards/agentsched-podmonitors.yaml"), true)
	dyn := c.dynamicClient()
	ctx, cancel := ctxTimeout(30 * time.Second)
	l, err := dyn.Resource(podMonitorGVR).Namespace(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	cancel()
	check(err, "list PodMonitors")
	seen := map[string]bool{}
	var standalone map[string]interface{}
	for _, pm := range l.Items {
		name := pm.GetName()
		file, ok := shippedMonitored[name]
		if !ok {
			fail("PodMonitor %s: no shipped workload known for it", name)
		}
		seen[name] = true
		ep := checkPodMonitor(&pm, filepath.Join(repo, file))
		if name == "agentsched" {
			standalone = ep
		}
	}
	for name, file := range shippedMonitored {
		if !seen[name] {
			fail("no PodMonitor %s for %s", name, file)
		}
	}

	// 3. Scraped as Prometheus would.
	if standalone == nil {
		fail("no endpoint for the standalone agentsched")
	}
	server, _, _ := unstructured.NestedString(standalone, "tlsConfig", "serverName")
	path, _, _ := unstructured.NestedString(standalone, "path")
	body := scrapeWithCA(c.agentschedURL+path, c.env.need("AGENTSCHED_CA"), server)
	if !strings.Contains(body, "\nagentsched_ready 1") {
		fail("%s%s served no agentsched_ready 1:\n%s", c.agentschedURL, path, lastLines(body, 10))
	}
	logf("standalone agentsched scraped over HTTPS as %s with the CA alone: %d bytes", server, len(body))

	// 4. The alert rules as PrometheusRules.
	for _, f := range []string{"agentsched-alerts.yaml", "agentsched-controllers-alerts.yaml"} {
		raw, err := os.ReadFile(filepath.Join(repo, "deploy/dashboards", f))
		check(err, f)
		var rules map[string]interface{}
		check(yaml.UnmarshalStrict(raw, &rules), f)
		if len(rules) != 1 || rules["groups"] == nil {
			fail("%s: a rules file holds groups and nothing else", f)
		}
		pr := map[string]interface{}{
			"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
			"metadata": map[string]interface{}{"name": strings.TrimSuffix(f, ".yaml"), "namespace": "kube-system"},
			"spec":     rules,
		}
		j, err := json.Marshal(pr)
		check(err, f)
		tmp := filepath.Join(c.stateDir, "prometheusrule-"+f+".json")
		check(os.WriteFile(tmp, j, 0o644), tmp)
		c.applyFile(tmp, true)
		groups, _ := rules["groups"].([]interface{})
		n := 0
		for _, g := range groups {
			rs, _ := g.(map[string]interface{})["rules"].([]interface{})
			n += len(rs)
		}
		logf("%s: accepted as a PrometheusRule (%d groups, %d rules)", f, len(groups), n)
	}
}

// checkPodMonitor checks one PodMonitor against the Deployment in file it
// is for and returns its endpoint.
func checkPodMonitor(pm *unstructured.Unstructured, file string) map[string]interface{} {
	name := pm.GetName()
	raw, err := os.ReadFile(file)
	check(err, file)
	deps, err := deployments(raw)
	check(err, file)
	sel, _, _ := unstructured.NestedMap(pm.Object, "spec", "selector")
	j, _ := json.Marshal(sel)
	var ls metav1.LabelSelector
	check(json.Unmarshal(j, &ls), "PodMonitor "+name+" selector")
	selector, err := metav1.LabelSelectorAsSelector(&ls)
	check(err, "PodMonitor "+name+" selector")
	if selector.Empty() {
		fail("PodMonitor %s selects every pod of its namespace", name)
	}
	if ns, _, _ := unstructured.NestedFieldNoCopy(pm.Object, "spec", "namespaceSelector"); ns != nil {
		fail("PodMonitor %s: a namespaceSelector; it is meant for its own namespace", name)
	}
	var match []int
	for i, d := range deps {
		if d.Namespace == pm.GetNamespace() && selector.Matches(labels.Set(d.Spec.Template.Labels)) {
			match = append(match, i)
		}
	}
	if len(match) != 1 {
		fail("PodMonitor %s/%s matches %d Deployments of %s, want 1", pm.GetNamespace(), name, len(match), file)
	}
	d := deps[match[0]]
	eps, _, _ := unstructured.NestedSlice(pm.Object, "spec", "podMetricsEndpoints")
	if len(eps) != 1 {
		fail("PodMonitor %s: %d endpoints, want 1", name, len(eps))
	}
	ep := eps[0].(map[string]interface{})
	port, _ := ep["port"].(string)
	scheme, _ := ep["scheme"].(string)
	var ctr *corev1.Container
	var cport int32
	for i := range d.Spec.Template.Spec.Containers {
		for _, p := range d.Spec.Template.Spec.Containers[i].Ports {
			if p.Name == port {
				ctr, cport = &d.Spec.Template.Spec.Containers[i], p.ContainerPort
			}
		}
	}
	if ctr == nil {
		fail("PodMonitor %s: port %q is not a named port of Deployment %s", name, port, d.Name)
	}
	// The process listens there: --listen or --metrics-listen names it.
	args := append(append([]string{}, ctr.Command...), ctr.Args...)
	listens, tlsServed := "", false // listens: the flag naming the port
	for _, a := range args {
		for _, f := range []string{"--listen", "--metrics-listen"} {
			if strings.HasPrefix(a, f+"=") && strings.HasSuffix(a, ":"+strconv.Itoa(int(cport))) {
				listens = f
			}
		}
		if strings.HasPrefix(a, "--tls-cert=") {
			tlsServed = true
		}
	}
	if listens == "" {
		fail("PodMonitor %s: container %s of %s does not listen on port %s (%d): %v", name, ctr.Name, d.Name,
			port, cport, args)
	}
	// HTTPS where the listener is agentsched's main one with a certificate;
	// the metrics listener and the controllers serve plain HTTP.
	wantHTTPS := tlsServed && listens == "--listen"
	if (scheme == "https") != wantHTTPS {
		fail("PodMonitor %s: scheme %q, but %s serves port %s over %s", name, scheme, d.Name, port,
			map[bool]string{true: "HTTPS", false: "HTTP"}[wantHTTPS])
	}
	logf("PodMonitor %s/%s: Deployment %s, container %s, port %s (%d, %s), %s", pm.GetNamespace(), name, d.Name,
		ctr.Name, port, cport, listens, map[bool]string{true: "https", false: "http"}[wantHTTPS])
	return ep
}

// scrapeWithCA GETs url trusting only the CA in caFile, checking the
// server's certificate for serverName, with no client certificate.
func scrapeWithCA(url, caFile, serverName string) string {
	cfg, err := tlsConfigFrom(caFile, "", "")
	check(err, caFile)
	cfg.ServerName = serverName
	cl := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	resp, err := cl.Get(url)
	check(err, "scrape "+url)
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	check(err, "scrape "+url)
	if resp.StatusCode != 200 {
		fail("scrape %s: HTTP %d: %s", url, resp.StatusCode, lastLines(string(b), 5))
	}
	return string(b)
}

// promOperatorDir fetches promOperatorModule into the module cache (a
// no-op once there) and returns its folder.
func promOperatorDir() string {
	out, err := exec.Command("go", "mod", "download", "-json", promOperatorModule).Output()
	var m struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &m); jerr != nil || m.Dir == "" {
		fail("go mod download -json %s: %v %s %s", promOperatorModule, err, m.Error, out)
	}
	return m.Dir
}
