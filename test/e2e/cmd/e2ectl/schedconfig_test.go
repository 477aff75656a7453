package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// The repository root, from this package's directory.
var repoRoot = filepath.Join("..", "..", "..", "..")

func readRepo(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func shippedConfig(t *testing.T) map[string]interface{} {
	t.Helper()
	cfg, err := findSchedulerConfig(readRepo(t, "deploy/kube-scheduler/agentsched-sidecar.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// The sidecar's ConfigMap holds kube-scheduler-config.yaml byte for byte
// (deploy/kube-scheduler/sync-config.sh copies it).
func TestSidecarConfigMapIsTheConfigFile(t *testing.T) {
	file := readRepo(t, "deploy/kube-scheduler/kube-scheduler-config.yaml")
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(readRepo(t, "deploy/kube-scheduler/agentsched-sidecar.yaml")), 4096)
	for {
		var doc map[string]interface{}
		if err := dec.Decode(&doc); err != nil {
			t.Fatalf("no ConfigMap agent-scheduler-config in agentsched-sidecar.yaml: %v", err)
		}
		md, _ := doc["metadata"].(map[string]interface{})
		if doc["kind"] != "ConfigMap" || md["name"] != "agent-scheduler-config" {
			continue
		}
		data, _ := doc["data"].(map[string]interface{})
		got, _ := data["kube-scheduler-config.yaml"].(string)
		if got != string(file) {
			t.Fatalf("agentsched-sidecar.yaml's ConfigMap differs from kube-scheduler-config.yaml: " +
				"run deploy/kube-scheduler/sync-config.sh")
		}
		return
	}
}

// What the shipped configuration promises: GPU shares are counted by
// NodeResourcesFit against what the nodes advertise, every pod of the profile reaches agentsched, which
// binds; leader election on the agent-scheduler Lease.
func TestShippedConfig(t *testing.T) {
	cfg := shippedConfig(t)
	le, _ := cfg["leaderElection"].(map[string]interface{})
	if le["leaderElect"] != true || le["resourceName"] != "agent-scheduler" || le["resourceNamespace"] != "kube-system" {
		t.Errorf("leaderElection %v: want leaderElect true on kube-system/agent-scheduler", le)
	}
	ps, _ := cfg["profiles"].([]interface{})
	if len(ps) != 1 {
		t.Fatalf("want one profile, have %d", len(ps))
	}
	p := ps[0].(map[string]interface{})
	if p["schedulerName"] != "agent-scheduler" {
		t.Errorf("profile %v, want agent-scheduler", p["schedulerName"])
	}
	// deploy/gpu-share's advertiser puts agentsched.io/gpu-milli on the
	// GPU nodes, so NodeResourcesFit counts it like any resource: an
	// ignore list would hide an over-committed node from it.
	pcs, _ := p["pluginConfig"].([]interface{})
	for _, pc := range pcs {
		m := pc.(map[string]interface{})
		if m["name"] != "NodeResourcesFit" {
			continue
		}
		args, _ := m["args"].(map[string]interface{})
		ign, _ := args["ignoredResources"].([]interface{})
		for _, r := range ign {
			if r == "agentsched.io/gpu-milli" {
				t.Error("NodeResourcesFit ignores agentsched.io/gpu-milli: the advertiser (deploy/gpu-share) puts it on the nodes, let it count")
			}
		}
	}
	exts, _ := cfg["extenders"].([]interface{})
	if len(exts) != 1 {
		t.Fatalf("want one extender, have %d", len(exts))
	}
	e := exts[0].(map[string]interface{})
	if _, ok := e["managedResources"]; ok {
		t.Error("managedResources set: kube-scheduler would bind the pods without them itself")
	}
	for k, want := range map[string]interface{}{"bindVerb": "bind", "filterVerb": "filter",
		"prioritizeVerb": "prioritize", "preemptVerb": "preempt", "ignorable": false,
		"nodeCacheCapable": true, "httpTimeout": "5s"} {
		if e[k] != want {
			t.Errorf("extender %s = %v, want %v", k, e[k], want)
		}
	}
}

func TestDerivedConfigOnlySubstitutes(t *testing.T) {
	shipped := shippedConfig(t)
	o := deriveOpts{kubeconfig: "/tmp/state/kubeconfig-agent-scheduler", extenderURL: "http://127.0.0.1:40123"}
	d, err := deriveSchedulerConfig(shipped, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkDerived(shipped, d, o); err != nil {
		t.Fatal(err)
	}
	var diffs []string
	configDiff("", shipped, d, &diffs)
	if strings.Join(diffs, ",") != "clientConnection.kubeconfig,extenders[0].urlPrefix" {
		t.Errorf("derived config differs at %v, want only the kubeconfig and the extender's address", diffs)
	}
	if got := lookup(d, "extenders[0].urlPrefix"); got != "http://127.0.0.1:40123/scheduler" {
		t.Errorf("urlPrefix %v", got)
	}
	le := d["leaderElection"].(map[string]interface{})
	if le["leaderElect"] != true {
		t.Error("leader election turned off")
	}
}

// Any other change fails the check, unless asked for as a deviation.
func TestDerivedConfigCheckCatchesChanges(t *testing.T) {
	shipped := shippedConfig(t)
	o := deriveOpts{kubeconfig: "/k", extenderURL: "http://127.0.0.1:1"}
	for name, mutate := range map[string]func(m map[string]interface{}){
		"leader election off": func(m map[string]interface{}) {
			m["leaderElection"].(map[string]interface{})["leaderElect"] = false
		},
		"managedResources": func(m map[string]interface{}) {
			m["extenders"].([]interface{})[0].(map[string]interface{})["managedResources"] = []interface{}{"x"}
		},
		"extender path": func(m map[string]interface{}) {
			m["extenders"].([]interface{})[0].(map[string]interface{})["urlPrefix"] = "http://127.0.0.1:1/other"
		},
		"ignorable": func(m map[string]interface{}) {
			m["extenders"].([]interface{})[0].(map[string]interface{})["ignorable"] = true
		},
		"profile name": func(m map[string]interface{}) {
			m["profiles"].([]interface{})[0].(map[string]interface{})["schedulerName"] = "default-scheduler"
		},
		"qps": func(m map[string]interface{}) {
			m["clientConnection"].(map[string]interface{})["qps"] = 5000.0
		},
	} {
		d, err := deriveSchedulerConfig(shipped, o)
		if err != nil {
			t.Fatal(err)
		}
		mutate(d)
		if err := checkDerived(shipped, d, o); err == nil {
			t.Errorf("%s: not caught", name)
		}
	}
	// Asked for, the deviations pass, and only they.
	o2 := deriveOpts{kubeconfig: "/k", extenderURL: "https://127.0.0.1:1", extenderCA: "/ca.crt",
		profiles: "default-scheduler,agent-scheduler", qps: 5000, burst: 10000}
	d, err := deriveSchedulerConfig(shipped, o2)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkDerived(shipped, d, o2); err != nil {
		t.Fatal(err)
	}
	if err := checkDerived(shipped, d, o); err == nil {
		t.Error("deviations passed the check without being asked for")
	}
}

// The harness runs the Deployments' agentsched command lines with only
// --in-cluster, --listen, --metrics-listen and the certificate files
// substituted.
func TestAgentschedArgsOnlySubstitute(t *testing.T) {
	files := map[string]string{"--tls-cert": "/pki/as.crt", "--tls-key": "/pki/as.key",
		"--tls-client-ca": "/pki/ca.crt"}
	for _, m := range []struct{ file, deployment string }{
		{"deploy/kube-scheduler/agentsched-sidecar.yaml", "agent-scheduler"},
		{"deploy/standalone/agentsched.yaml", "agentsched"},
	} {
		c, err := deploymentContainer(readRepo(t, m.file), m.deployment, "agentsched")
		if err != nil {
			t.Fatal(err)
		}
		got, err := agentschedArgs(c, "/state/kc", "127.0.0.1:1234", "127.0.0.1:0", files)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, a := range c.Command[1:] {
			flag, _, _ := strings.Cut(a, "=")
			switch {
			case a == "--in-cluster":
				want = append(want, "--kubeconfig", "/state/kc")
			case strings.HasPrefix(a, "--listen="):
				want = append(want, "--listen", "127.0.0.1:1234")
			case strings.HasPrefix(a, "--metrics-listen="):
				want = append(want, "--metrics-listen", "127.0.0.1:0")
			case files[flag] != "" && strings.Contains(a, "="):
				want = append(want, flag, files[flag])
			default:
				want = append(want, a)
			}
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s: harness runs %q, want %q", m.file, got, want)
		}
	}
}

// The standalone Deployment serves mutual TLS from its Secret volume: the
// harness runs it with its own PKI there, and refuses to run it without.
func TestAgentschedArgsStandaloneTLS(t *testing.T) {
	c, err := deploymentContainer(readRepo(t, "deploy/standalone/agentsched.yaml"), "agentsched", "agentsched")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"--tls-cert": "/pki/as.crt", "--tls-key": "/pki/as.key",
		"--tls-client-ca": "/pki/ca.crt"}
	got, err := agentschedArgs(c, "/state/kc", "127.0.0.1:1234", "127.0.0.1:0", files)
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Join(got, " ")
	for _, want := range []string{"--tls-cert /pki/as.crt", "--tls-key /pki/as.key", "--tls-client-ca /pki/ca.crt",
		"--tls-client-auth-exempt=/volcano/"} {
		if !strings.Contains(line, want) {
			t.Errorf("harness runs %q: no %q", line, want)
		}
	}
	if strings.Contains(line, "/etc/agentsched-tls") {
		t.Errorf("harness runs %q: a path of the Secret volume is left", line)
	}
	delete(files, "--tls-client-ca")
	if _, err := agentschedArgs(c, "/state/kc", "127.0.0.1:1234", "127.0.0.1:0", files); err == nil ||
		!strings.Contains(err.Error(), "--tls-client-ca") {
		t.Errorf("without a client CA to substitute: err %v, want one naming --tls-client-ca", err)
	}
}
