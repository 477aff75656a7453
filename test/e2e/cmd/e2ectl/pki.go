package main

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"flag"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The files pki writes into its directory.
const (
	fileCACert     = "ca.crt"
	fileCAKey      = "ca.key"
	fileServerCert = "apiserver.crt"
	fileServerKey  = "apiserver.key"
	fileAdminCert  = "admin.crt"
	fileAdminKey   = "admin.key"
	fileASCert     = "agentsched.crt" // agentsched's HTTPS (the standalone manifest's, or --agentsched-tls)
	fileASKey      = "agentsched.key"
	fileSchedCert  = "kube-scheduler-client.crt" // kube-scheduler's client certificate to agentsched
	fileSchedKey   = "kube-scheduler-client.key"
	// the scenarios' and bench's client certificate to agentsched
	// (AGENTSCHED_CLIENT_CERT in the env file)
	fileE2EClientCert = "e2e-client.crt"
	fileE2EClientKey  = "e2e-client.key"
	fileSAKey         = "sa.key"
	fileSAPub         = "sa.pub"
	fileTokenCSV      = "tokens.csv"
)

// tokenUsers are the static-token users pki creates (token in NAME.token):
// the admin (system:masters), and the shard controller named as the API
// server names its ServiceAccount (deploy/shard-controller/rbac.yaml,
// applied by its scenario after the cluster is up). The ServiceAccounts
// that deploy/kube-scheduler and deploy/standalone ship get real tokens
// from the API server instead (e2ectl sa-kubeconfig).
var tokenUsers = []struct{ name, user, groups string }{
	{"admin", "agentsched-e2e-admin", "system:masters"},
	{"shard-controller", "system:serviceaccount:kube-system:agentsched-shard-controller",
		"system:serviceaccounts,system:serviceaccounts:kube-system"},
}

type keyPair struct {
	cert *x509.Certificate
	der  []byte
	key  *rsa.PrivateKey
}

func newSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(err)
	}
	return n
}

// issue signs tmpl with parent (self-signed when parent is nil). RSA keys
// because every TLS stack agentsched may link (OpenSSL, GnuTLS) reads them.
func issue(tmpl *x509.Certificate, parent *keyPair) (*keyPair, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = newSerial()
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(365 * 24 * time.Hour)
	signer, signerCert := key, tmpl
	if parent != nil {
		signer, signerCert = parent.key, parent.cert
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signerCert, &key.PublicKey, signer)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &keyPair{cert: cert, der: der, key: key}, nil
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode)
}

func (kp *keyPair) write(dir, certFile, keyFile string) error {
	if err := writePEM(filepath.Join(dir, certFile), "CERTIFICATE", kp.der, 0o644); err != nil {
		return err
	}
	return writePEM(filepath.Join(dir, keyFile), "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(kp.key), 0o600)
}

func cmdPKI(args []string) error {
	fs := flag.NewFlagSet("pki", flag.ExitOnError)
	dir := fs.String("dir", "", "output directory (required)")
	_ = fs.Parse(args)
	if *dir == "" {
		return fmt.Errorf("--dir is required")
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		return err
	}
	ca, err := issue(&x509.Certificate{
		Subject:               pkix.Name{CommonName: "agentsched-e2e-ca"},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
	}, nil)
	if err != nil {
		return err
	}
	server, err := issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1"), net.ParseIP("10.0.0.1")},
	}, ca)
	if err != nil {
		return err
	}
	// agentsched's serving certificate, in place of the standalone
	// manifest's (or for dev-cluster --agentsched-tls): kube-scheduler and
	// the scenarios check it against the same CA (tlsConfig.caFile).
	asServer, err := issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "agentsched"},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost", "agentsched.kube-system.svc"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")},
	}, ca)
	if err != nil {
		return err
	}
	// kube-scheduler's client certificate to agentsched (tlsConfig.certFile),
	// which agentsched --tls-client-ca checks against the same CA.
	schedClient, err := issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-scheduler"},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca)
	if err != nil {
		return err
	}
	// The scenarios' own client certificate to agentsched, for its routes
	// that need one (/scheduler/*, /v1/placements, /version).
	e2eClient, err := issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "agentsched-e2e-client"},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca)
	if err != nil {
		return err
	}
	admin, err := issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "agentsched-e2e-admin", Organization: []string{"system:masters"}},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca)
	if err != nil {
		return err
	}
	for _, w := range []struct {
		kp        *keyPair
		cert, key string
	}{{ca, fileCACert, fileCAKey}, {server, fileServerCert, fileServerKey}, {admin, fileAdminCert, fileAdminKey},
		{asServer, fileASCert, fileASKey}, {schedClient, fileSchedCert, fileSchedKey},
		{e2eClient, fileE2EClientCert, fileE2EClientKey}} {
		if err := w.kp.write(*dir, w.cert, w.key); err != nil {
			return err
		}
	}

	sa, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	if err := writePEM(filepath.Join(*dir, fileSAKey), "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(sa), 0o600); err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err != nil {
		return err
	}
	if err := writePEM(filepath.Join(*dir, fileSAPub), "PUBLIC KEY", pub, 0o644); err != nil {
		return err
	}

	// token,user,uid,"groups": static tokens are the simplest credential
	// every client (client-go, libcurl, kubectl) supports.
	var csv strings.Builder
	for _, u := range tokenUsers {
		raw := make([]byte, 24)
		if _, err := rand.Read(raw); err != nil {
			return err
		}
		tok := hex.EncodeToString(raw)
		if err := os.WriteFile(filepath.Join(*dir, u.name+".token"), []byte(tok), 0o600); err != nil {
			return err
		}
		fmt.Fprintf(&csv, "%s,%s,e2e-%s,\"%s\"\n", tok, u.user, u.name, u.groups)
	}
	return os.WriteFile(filepath.Join(*dir, fileTokenCSV), []byte(csv.String()), 0o600)
}

// cmdKubeconfig writes a kubeconfig with the CA embedded for a token user
// of tokenUsers (--user, default admin), or for the admin with its client
// certificate (--cert).
func cmdKubeconfig(args []string) error {
	fs := flag.NewFlagSet("kubeconfig", flag.ExitOnError)
	dir := fs.String("dir", "", "pki directory (required)")
	server := fs.String("server", "", "API server URL (required)")
	out := fs.String("out", "", "output file (required)")
	useCert := fs.Bool("cert", false, "authenticate with the client certificate instead of the token")
	userName := fs.String("user", "admin", "token user: admin or shard-controller")
	_ = fs.Parse(args)
	if *dir == "" || *server == "" || *out == "" {
		return fmt.Errorf("--dir, --server and --out are required")
	}
	caPEM, err := os.ReadFile(filepath.Join(*dir, fileCACert))
	if err != nil {
		return err
	}
	user := clientcmdapi.NewAuthInfo()
	if *useCert {
		if user.ClientCertificateData, err = os.ReadFile(filepath.Join(*dir, fileAdminCert)); err != nil {
			return err
		}
		if user.ClientKeyData, err = os.ReadFile(filepath.Join(*dir, fileAdminKey)); err != nil {
			return err
		}
	} else {
		known := false
		for _, u := range tokenUsers {
			known = known || u.name == *userName
		}
		if !known {
			return fmt.Errorf("--user %q: not one of admin, shard-controller", *userName)
		}
		tok, err := os.ReadFile(filepath.Join(*dir, *userName+".token"))
		if err != nil {
			return err
		}
		user.Token = string(tok)
	}
	cluster := clientcmdapi.NewCluster()
	cluster.Server = *server
	cluster.CertificateAuthorityData = caPEM
	ctx := clientcmdapi.NewContext()
	ctx.Cluster = "agentsched-e2e"
	ctx.AuthInfo = "admin"
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["agentsched-e2e"] = cluster
	cfg.AuthInfos["admin"] = user
	cfg.Contexts["agentsched-e2e"] = ctx
	cfg.CurrentContext = "agentsched-e2e"
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return err
	}
	return clientcmd.WriteToFile(*cfg, *out)
}
