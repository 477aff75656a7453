package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"
)

// cmdSAKubeconfig asks the API server for a token of a ServiceAccount
// (TokenRequest, as `kubectl create token` does) and writes a kubeconfig
// holding it: the harness's components run as the identities deploy/
// ships, with exactly their RBAC.
func cmdSAKubeconfig(args []string) error {
	fs := flag.NewFlagSet("sa-kubeconfig", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "admin kubeconfig (required)")
	sa := fs.String("sa", "", "NAMESPACE/NAME of the ServiceAccount (required)")
	out := fs.String("out", "", "output file (required)")
	expiration := fs.Duration("expiration", 48*time.Hour, "token lifetime")
	_ = fs.Parse(args)
	ns, name, ok := strings.Cut(*sa, "/")
	if *kubeconfig == "" || *out == "" || !ok || ns == "" || name == "" {
		return fmt.Errorf("--kubeconfig, --sa NAMESPACE/NAME and --out are required")
	}
	cs, rc, err := clientset(*kubeconfig)
	if err != nil {
		return err
	}
	secs := int64(expiration.Seconds())
	ctx, cancel := ctxTimeout(30 * time.Second)
	defer cancel()
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("token for ServiceAccount %s: %v", *sa, err)
	}
	caPEM := rc.TLSClientConfig.CAData
	if len(caPEM) == 0 && rc.TLSClientConfig.CAFile != "" {
		if caPEM, err = os.ReadFile(rc.TLSClientConfig.CAFile); err != nil {
			return err
		}
	}
	user := clientcmdapi.NewAuthInfo()
	user.Token = tr.Status.Token
	cluster := clientcmdapi.NewCluster()
	cluster.Server = rc.Host
	cluster.CertificateAuthorityData = caPEM
	c := clientcmdapi.NewContext()
	c.Cluster, c.AuthInfo, c.Namespace = "agentsched-e2e", name, ns
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["agentsched-e2e"] = cluster
	cfg.AuthInfos[name] = user
	cfg.Contexts[name] = c
	cfg.CurrentContext = name
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return err
	}
	if err := clientcmd.WriteToFile(*cfg, *out); err != nil {
		return err
	}
	fmt.Printf("token of ServiceAccount %s (%v) -> %s\n", *sa, *expiration, *out)
	return nil
}

// deployments returns the Deployments of a manifest.
func deployments(raw []byte) ([]appsv1.Deployment, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var out []appsv1.Deployment
	for {
		var doc map[string]interface{}
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if doc["kind"] != "Deployment" {
			continue
		}
		j, err := yaml.Marshal(doc)
		if err != nil {
			return nil, err
		}
		var d appsv1.Deployment
		if err := yaml.UnmarshalStrict(j, &d); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
}

// deploymentContainer finds container cname of Deployment dname in a
// manifest.
func deploymentContainer(raw []byte, dname, cname string) (*corev1.Container, error) {
	deps, err := deployments(raw)
	if err != nil {
		return nil, err
	}
	for _, d := range deps {
		if d.Name != dname {
			continue
		}
		for i := range d.Spec.Template.Spec.Containers {
			if c := &d.Spec.Template.Spec.Containers[i]; c.Name == cname {
				return c, nil
			}
		}
		return nil, fmt.Errorf("Deployment %s has no container %s", dname, cname)
	}
	return nil, fmt.Errorf("no Deployment %s", dname)
}

// tlsFileFlags are agentsched's flags naming a certificate or key file,
// the paths of a Secret volume in a Deployment, which the harness replaces
// with files of its own PKI.
var tlsFileFlags = []string{"--tls-cert", "--tls-key", "--tls-client-ca"}

// agentschedArgs turns the command line of an agentsched container of
// deploy/ into the harness's, substituting only how it reaches the API
// server (--in-cluster becomes --kubeconfig FILE), where it listens
// (--listen; --metrics-listen, when the manifest has it, becomes
// metricsListen) and the certificate and key files of tlsFileFlags
// (tlsFiles: flag -> the harness's file; a flag the manifest gives without
// a replacement is an error). Everything else stays as shipped.
func agentschedArgs(c *corev1.Container, kubeconfig, listen, metricsListen string, tlsFiles map[string]string) ([]string, error) {
	cmd := append(append([]string{}, c.Command...), c.Args...)
	if len(cmd) < 2 || filepath.Base(cmd[0]) != "agentsched" || (cmd[1] != "serve" && cmd[1] != "gpu-share-advertiser") {
		return nil, fmt.Errorf("container %s does not run `agentsched serve` (or gpu-share-advertiser): %q", c.Name, cmd)
	}
	out := []string{cmd[1]}
	inCluster, listened := false, false
	for i := 2; i < len(cmd); i++ {
		a := cmd[i]
		switch {
		case a == "--in-cluster":
			out = append(out, "--kubeconfig", kubeconfig)
			inCluster = true
		case a == "--listen":
			i++
			out = append(out, "--listen", listen)
			listened = true
		case strings.HasPrefix(a, "--listen="):
			out = append(out, "--listen", listen)
			listened = true
		case a == "--metrics-listen":
			i++
			out = append(out, "--metrics-listen", metricsListen)
		case strings.HasPrefix(a, "--metrics-listen="):
			out = append(out, "--metrics-listen", metricsListen)
		case a == "--kubeconfig" || strings.HasPrefix(a, "--kubeconfig=") || a == "--cluster" ||
			strings.HasPrefix(a, "--cluster="):
			return nil, fmt.Errorf("container %s: %s: the harness expects --in-cluster", c.Name, a)
		case tlsFileFlag(a) != "":
			f := tlsFileFlag(a)
			if !strings.Contains(a, "=") {
				if i++; i == len(cmd) {
					return nil, fmt.Errorf("container %s: %s without a value", c.Name, a)
				}
			}
			file, ok := tlsFiles[f]
			if !ok || file == "" {
				return nil, fmt.Errorf("container %s: %s: the harness has no file to put there (give agentsched-args %s)",
					c.Name, a, f)
			}
			out = append(out, f, file)
		default:
			out = append(out, a)
		}
	}
	if !inCluster {
		return nil, fmt.Errorf("container %s: no --in-cluster", c.Name)
	}
	if !listened {
		out = append(out, "--listen", listen)
	}
	return out, nil
}

// tlsFileFlag is the flag of tlsFileFlags that argument a is ("--tls-key"
// for "--tls-key" and "--tls-key=FILE"), or "".
func tlsFileFlag(a string) string {
	for _, f := range tlsFileFlags {
		if a == f || strings.HasPrefix(a, f+"=") {
			return f
		}
	}
	return ""
}

// cmdAgentschedArgs prints, one per line, the arguments (after the
// binary) of the agentsched container of a Deployment in deploy/, with the
// harness's kubeconfig, listen address and certificate files substituted.
func cmdAgentschedArgs(args []string) error {
	fs := flag.NewFlagSet("agentsched-args", flag.ExitOnError)
	file := fs.String("f", "", "manifest (required)")
	deployment := fs.String("deployment", "", "Deployment name (required)")
	container := fs.String("container", "agentsched", "container name")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig for --in-cluster (required)")
	listen := fs.String("listen", "", "HOST:PORT (required)")
	metricsListen := fs.String("metrics-listen", "127.0.0.1:0",
		"HOST:PORT for the manifest's --metrics-listen, if it has one (default: a free port)")
	tlsFiles := map[string]string{}
	for _, f := range tlsFileFlags {
		name := strings.TrimPrefix(f, "--")
		fs.Func(name, "the harness's file for the manifest's "+f, func(v string) error {
			tlsFiles[f] = v
			return nil
		})
	}
	_ = fs.Parse(args)
	if *file == "" || *deployment == "" || *kubeconfig == "" || *listen == "" {
		return fmt.Errorf("-f, --deployment, --kubeconfig and --listen are required")
	}
	raw, err := os.ReadFile(*file)
	if err != nil {
		return err
	}
	c, err := deploymentContainer(raw, *deployment, *container)
	if err != nil {
		return fmt.Errorf("%s: %v", *file, err)
	}
	a, err := agentschedArgs(c, *kubeconfig, *listen, *metricsListen, tlsFiles)
	if err != nil {
		return fmt.Errorf("%s: %v", *file, err)
	}
	for _, s := range a {
		if strings.ContainsAny(s, "\n") {
			return fmt.Errorf("%s: argument %q spans lines", *file, s)
		}
		fmt.Println(s)
	}
	return nil
}
