package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"reflect"
	"sort"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

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

// deriveOpts is what the harness changes in the shipped configuration.
// Substitutions (always allowed): the kubeconfig path, and the extender's
// host and port. Deviations (a scenario or bench asks for each one
// explicitly; they change what the configuration means):
//   - extenderCA: HTTPS to agentsched (enableHTTPS, tlsConfig.caFile, an
//     https urlPrefix), the variant the shipped file describes for an
//     agentsched outside the pod;
//   - profiles: other scheduler names than the shipped one (e.g.
//     default-scheduler, so that kube-scheduler serves ordinary pods too);
//   - qps/burst: kube-scheduler's client rate limits.
type deriveOpts struct {
	kubeconfig  string
	extenderURL string // scheme://host:port
	extenderCA  string
	// kube-scheduler's client certificate to agentsched (mutual TLS)
	extenderCert, extenderKey string
	profiles                  string
	qps                       float64
	burst                     int
}

// deviations lists the configuration paths opts may change beyond the
// substitutions ("extenders[]" stands for every extender).
func (o deriveOpts) deviations() []string {
	var d []string
	if o.extenderCA != "" {
		d = append(d, "extenders[].enableHTTPS", "extenders[].tlsConfig", "extenders[].urlPrefix(scheme)")
	}
	if o.profiles != "" {
		d = append(d, "profiles[].schedulerName", "profiles(count)")
	}
	if o.qps > 0 {
		d = append(d, "clientConnection.qps")
	}
	if o.burst > 0 {
		d = append(d, "clientConnection.burst")
	}
	return d
}

// deepCopy copies a decoded YAML tree.
func deepCopy(v interface{}) interface{} {
	switch t := v.(type) {
	case map[string]interface{}:
		m := make(map[string]interface{}, len(t))
		for k, e := range t {
			m[k] = deepCopy(e)
		}
		return m
	case []interface{}:
		l := make([]interface{}, len(t))
		for i, e := range t {
			l[i] = deepCopy(e)
		}
		return l
	}
	return v
}

// deriveSchedulerConfig returns the configuration the harness runs: the
// shipped one with opts applied, nothing else changed.
func deriveSchedulerConfig(shipped map[string]interface{}, o deriveOpts) (map[string]interface{}, error) {
	base, err := url.Parse(o.extenderURL)
	if err != nil || base.Host == "" {
		return nil, fmt.Errorf("extender URL %q: want http://HOST:PORT", o.extenderURL)
	}
	if (o.extenderCA != "") != (base.Scheme == "https") {
		return nil, fmt.Errorf("an https extender URL goes with an extender CA file and only with it (%q)", o.extenderURL)
	}
	cfg := deepCopy(shipped).(map[string]interface{})
	cc, _ := cfg["clientConnection"].(map[string]interface{})
	if cc == nil {
		cc = map[string]interface{}{}
	}
	cc["kubeconfig"] = o.kubeconfig
	if o.qps > 0 {
		cc["qps"] = o.qps
	}
	if o.burst > 0 {
		cc["burst"] = o.burst
	}
	cfg["clientConnection"] = cc

	if o.profiles != "" {
		var first map[string]interface{}
		if ps, _ := cfg["profiles"].([]interface{}); len(ps) > 0 {
			first, _ = ps[0].(map[string]interface{})
		}
		var ps []interface{}
		for _, name := range strings.Split(o.profiles, ",") {
			p := deepCopy(first).(map[string]interface{})
			if p == nil {
				p = map[string]interface{}{}
			}
			p["schedulerName"] = strings.TrimSpace(name)
			ps = append(ps, p)
		}
		cfg["profiles"] = ps
	}

	exts, _ := cfg["extenders"].([]interface{})
	if len(exts) == 0 {
		return nil, fmt.Errorf("no extenders: agentsched would not be called")
	}
	for i, e := range exts {
		m, _ := e.(map[string]interface{})
		prefix, _ := m["urlPrefix"].(string)
		u, err := url.Parse(prefix)
		if err != nil || prefix == "" {
			return nil, fmt.Errorf("extenders[%d].urlPrefix %q", i, prefix)
		}
		u.Host = base.Host
		if o.extenderCA != "" {
			u.Scheme = "https"
			m["enableHTTPS"] = true
			tc := map[string]interface{}{"caFile": o.extenderCA}
			if o.extenderCert != "" {
				tc["certFile"], tc["keyFile"] = o.extenderCert, o.extenderKey
			}
			m["tlsConfig"] = tc
		}
		m["urlPrefix"] = u.String()
	}
	return cfg, nil
}

// configDiff lists the paths where a and b differ ("extenders[0].weight").
func configDiff(path string, a, b interface{}, out *[]string) {
	am, aok := a.(map[string]interface{})
	bm, bok := b.(map[string]interface{})
	if aok && bok {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		names := make([]string, 0, len(keys))
		for k := range keys {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			p := k
			if path != "" {
				p = path + "." + k
			}
			configDiff(p, am[k], bm[k], out)
		}
		return
	}
	al, aok := a.([]interface{})
	bl, bok := b.([]interface{})
	if aok && bok && len(al) == len(bl) {
		for i := range al {
			configDiff(fmt.Sprintf("%s[%d]", path, i), al[i], bl[i], out)
		}
		return
	}
	if !reflect.DeepEqual(normNumber(a), normNumber(b)) {
		*out = append(*out, path)
	}
}

// normNumber makes 5 and 5.0 equal (YAML decodes both as float64, code
// may set ints).
func normNumber(v interface{}) interface{} {
	switch n := v.(type) {
	case int:
		return float64(n)
	case int64:
		return float64(n)
	}
	return v
}

// generic turns "extenders[0].tlsConfig.caFile" into the forms a
// deviation may name: "extenders[].tlsConfig.caFile" and its prefixes.
func generic(path string) string {
	var b strings.Builder
	skip := false
	for _, r := range path {
		switch {
		case r == '[':
			skip = true
			b.WriteRune(r)
		case r == ']':
			skip = false
			b.WriteRune(r)
		case !skip:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func under(path, prefix string) bool {
	return path == prefix || strings.HasPrefix(path, prefix+".") || strings.HasPrefix(path, prefix+"[")
}

// lookup returns the value at a path as configDiff writes them.
func lookup(v interface{}, path string) interface{} {
	for _, part := range strings.Split(path, ".") {
		name, idx := part, -1
		if i := strings.IndexByte(part, '['); i >= 0 {
			name = part[:i]
			fmt.Sscanf(part[i:], "[%d]", &idx)
		}
		m, _ := v.(map[string]interface{})
		v = m[name]
		if idx >= 0 {
			l, _ := v.([]interface{})
			if idx >= len(l) {
				return nil
			}
			v = l[idx]
		}
	}
	return v
}

// checkDerived fails when derived differs from shipped anywhere but the
// substitutions (kubeconfig path, extender host:port) and the deviations
// opts asked for.
func checkDerived(shipped, derived map[string]interface{}, o deriveOpts) error {
	var diffs []string
	configDiff("", shipped, derived, &diffs)
	allowed := o.deviations()
	var bad []string
	for _, p := range diffs {
		g := generic(p)
		ok := false
		switch {
		case g == "clientConnection.kubeconfig":
			ok = true
		case g == "extenders[].urlPrefix":
			a, _ := url.Parse(fmt.Sprint(lookup(shipped, p)))
			b, _ := url.Parse(fmt.Sprint(lookup(derived, p)))
			schemeOK := a != nil && b != nil && (a.Scheme == b.Scheme || contains(allowed, "extenders[].urlPrefix(scheme)"))
			ok = schemeOK && a.Path == b.Path && a.RawQuery == b.RawQuery
		case g == "profiles" && contains(allowed, "profiles(count)"):
			ok = sameProfiles(shipped, derived)
		}
		for _, d := range allowed {
			ok = ok || under(g, d)
		}
		if !ok {
			bad = append(bad, fmt.Sprintf("%s: shipped %v, derived %v", p, lookup(shipped, p), lookup(derived, p)))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("the derived kube-scheduler configuration differs from the shipped one: %s",
			strings.Join(bad, "; "))
	}
	return nil
}

// sameProfiles: every derived profile is the shipped first one under
// another schedulerName.
func sameProfiles(shipped, derived map[string]interface{}) bool {
	sp, _ := shipped["profiles"].([]interface{})
	dp, _ := derived["profiles"].([]interface{})
	if len(sp) == 0 || len(dp) == 0 {
		return false
	}
	strip := func(v interface{}) interface{} {
		m, _ := deepCopy(v).(map[string]interface{})
		delete(m, "schedulerName")
		return m
	}
	for _, p := range dp {
		if !reflect.DeepEqual(strip(sp[0]), strip(p)) {
			return false
		}
	}
	return true
}

func contains(l []string, s string) bool {
	for _, e := range l {
		if e == s {
			return true
		}
	}
	return false
}

// cmdSchedulerConfig writes the configuration the dev-cluster's
// kube-scheduler runs: the one deploy/ ships (a KubeSchedulerConfiguration
// file, or the ConfigMap holding one) with the substitutions a cluster
// needs and only the deviations asked for (see deriveOpts), checked by
// checkDerived before it is written. Leader election stays as shipped.
func cmdSchedulerConfig(args []string) error {
	fs := flag.NewFlagSet("scheduler-config", flag.ExitOnError)
	in := fs.String("in", "", "the shipped KubeSchedulerConfiguration, or a manifest with its ConfigMap (required)")
	out := fs.String("out", "", "output file (required)")
	var o deriveOpts
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig for kube-scheduler (required)")
	fs.StringVar(&o.extenderURL, "extender-url", "", "agentsched base URL, e.g. http://127.0.0.1:PORT (required)")
	fs.StringVar(&o.extenderCA, "extender-ca", "",
		"deviation: call agentsched over HTTPS, checking its certificate against this CA (needs an https --extender-url)")
	fs.StringVar(&o.extenderCert, "extender-cert", "",
		"client certificate kube-scheduler presents to agentsched (tlsConfig.certFile; key in --extender-key)")
	fs.StringVar(&o.extenderKey, "extender-key", "", "the key of --extender-cert (tlsConfig.keyFile)")
	fs.StringVar(&o.profiles, "profiles", "",
		"deviation: comma-separated scheduler names to serve, each a copy of the shipped first profile")
	fs.Float64Var(&o.qps, "qps", 0, "deviation: kube-scheduler client QPS")
	fs.IntVar(&o.burst, "burst", 0, "deviation: kube-scheduler client burst")
	_ = fs.Parse(args)
	if *in == "" || *out == "" || o.kubeconfig == "" || o.extenderURL == "" {
		return fmt.Errorf("--in, --out, --kubeconfig and --extender-url are required")
	}
	raw, err := os.ReadFile(*in)
	if err != nil {
		return err
	}
	shipped, err := findSchedulerConfig(raw)
	if err != nil {
		return fmt.Errorf("%s: %v", *in, err)
	}
	cfg, err := deriveSchedulerConfig(shipped, o)
	if err != nil {
		return fmt.Errorf("%s: %v", *in, err)
	}
	if err := checkDerived(shipped, cfg, o); err != nil {
		return fmt.Errorf("%s: %v", *in, err)
	}
	y, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	dev := "none"
	if d := o.deviations(); len(d) > 0 {
		dev = strings.Join(d, ", ")
	}
	hdr := fmt.Sprintf("# Generated by e2ectl scheduler-config from %s.\n# Deviations from it: %s.\n", *in, dev)
	if err := os.WriteFile(*out, append([]byte(hdr), y...), 0o644); err != nil {
		return err
	}
	fmt.Printf("kube-scheduler config from %s -> %s (deviations: %s)\n", *in, *out, dev)
	return nil
}
