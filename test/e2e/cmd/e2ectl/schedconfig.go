package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// defaultSchedulerConfig is used only when deploy/ has no
// KubeSchedulerConfiguration yet; it registers agentsched the way the
// [extender] issue describes.
const defaultSchedulerConfig = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
extenders:
- urlPrefix: http://127.0.0.1:8888/scheduler
  filterVerb: filter
  prioritizeVerb: prioritize
  bindVerb: bind
  preemptVerb: preempt
  weight: 1
  nodeCacheCapable: true
  httpTimeout: 5s
  ignorable: false
`

// findSchedulerConfig returns the KubeSchedulerConfiguration in a manifest:
// the document itself, or a string value of a ConfigMap's data holding one.
func findSchedulerConfig(raw []byte) (map[string]interface{}, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		var doc map[string]interface{}
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("no KubeSchedulerConfiguration found")
			}
			return nil, err
		}
		switch doc["kind"] {
		case "KubeSchedulerConfiguration":
			return doc, nil
		case "ConfigMap":
			data, _ := doc["data"].(map[string]interface{})
			for _, v := range data {
				s, ok := v.(string)
				if !ok || !strings.Contains(s, "KubeSchedulerConfiguration") {
					continue
				}
				return findSchedulerConfig([]byte(s))
			}
		}
	}
}

// cmdSchedulerConfig derives the scheduler configuration the harness runs
// from the one deploy/ ships: same extender verbs and options, but pointing at
// this cluster's kubeconfig and agentsched's port, leader election off (one
// replica), and client QPS raised so that kube-scheduler is not throttled at
// its default of 50 during bursts. By default it also serves the pods of
// "default-scheduler" (the only kube-scheduler here; pods of
// "agent-scheduler" are left to agentsched's own fast path) and drops
// managedResources, so that every pod, not only GPU pods, meets agentsched.
func cmdSchedulerConfig(args []string) error {
	fs := flag.NewFlagSet("scheduler-config", flag.ExitOnError)
	in := fs.String("in", "", "KubeSchedulerConfiguration from deploy/ (empty or missing: built-in default)")
	out := fs.String("out", "", "output file (required)")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig for kube-scheduler (required)")
	extenderURL := fs.String("extender-url", "", "agentsched base URL, e.g. http://127.0.0.1:PORT (required)")
	qps := fs.Float64("qps", 5000, "kube-scheduler client QPS")
	burst := fs.Int("burst", 10000, "kube-scheduler client burst")
	profiles := fs.String("profiles", "default-scheduler",
		"comma-separated scheduler names to serve (each a copy of the source's first profile); empty: keep the source's")
	allPods := fs.Bool("all-pods", true,
		"drop the extenders' managedResources so that every pod goes through agentsched")
	extenderCA := fs.String("extender-ca", "",
		"CA file kube-scheduler checks agentsched's HTTPS certificate against (tlsConfig.caFile; with an https --extender-url)")
	extenderCert := fs.String("extender-cert", "", "client certificate kube-scheduler presents to agentsched (tlsConfig.certFile; key in --extender-key)")
	extenderKey := fs.String("extender-key", "", "the key of --extender-cert (tlsConfig.keyFile)")
	_ = fs.Parse(args)
	if *out == "" || *kubeconfig == "" || *extenderURL == "" {
		return fmt.Errorf("--out, --kubeconfig and --extender-url are required")
	}
	base, err := url.Parse(*extenderURL)
	if err != nil || base.Host == "" {
		return fmt.Errorf("--extender-url %q: want http://HOST:PORT", *extenderURL)
	}
	if *extenderCA != "" && base.Scheme != "https" {
		return fmt.Errorf("--extender-ca needs an https:// --extender-url, not %q", *extenderURL)
	}
	raw := []byte(defaultSchedulerConfig)
	source := "built-in default"
	if *in != "" {
		if b, err := os.ReadFile(*in); err == nil {
			raw, source = b, *in
		} else if !os.IsNotExist(err) {
			return err
		}
	}
	cfg, err := findSchedulerConfig(raw)
	if err != nil {
		return fmt.Errorf("%s: %v", source, err)
	}

	cc, _ := cfg["clientConnection"].(map[string]interface{})
	if cc == nil {
		cc = map[string]interface{}{}
	}
	cc["kubeconfig"] = *kubeconfig
	cc["qps"] = *qps
	cc["burst"] = *burst
	cfg["clientConnection"] = cc
	cfg["leaderElection"] = map[string]interface{}{"leaderElect": false}

	if *profiles != "" {
		var first map[string]interface{}
		if ps, _ := cfg["profiles"].([]interface{}); len(ps) > 0 {
			first, _ = ps[0].(map[string]interface{})
		}
		var ps []interface{}
		for _, name := range strings.Split(*profiles, ",") {
			p := map[string]interface{}{}
			for k, v := range first {
				p[k] = v
			}
			p["schedulerName"] = strings.TrimSpace(name)
			ps = append(ps, p)
		}
		cfg["profiles"] = ps
	}

	exts, _ := cfg["extenders"].([]interface{})
	if len(exts) == 0 {
		return fmt.Errorf("%s: no extenders: agentsched would not be called", source)
	}
	for i, e := range exts {
		m, _ := e.(map[string]interface{})
		prefix, _ := m["urlPrefix"].(string)
		u, err := url.Parse(prefix)
		if err != nil || prefix == "" {
			return fmt.Errorf("%s: extenders[%d].urlPrefix %q", source, i, prefix)
		}
		u.Scheme, u.Host = base.Scheme, base.Host
		m["urlPrefix"] = u.String()
		m["enableHTTPS"] = base.Scheme == "https"
		delete(m, "tlsConfig")
		if *extenderCA != "" {
			m["tlsConfig"] = map[string]interface{}{"caFile": *extenderCA, "certFile": *extenderCert, "keyFile": *extenderKey}
		}
		if *allPods {
			delete(m, "managedResources")
		}
	}
	y, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	hdr := fmt.Sprintf("# Generated by e2ectl scheduler-config from %s.\n", source)
	if err := os.WriteFile(*out, append([]byte(hdr), y...), 0o644); err != nil {
		return err
	}
	fmt.Printf("kube-scheduler config from %s -> %s\n", source, *out)
	return nil
}
