#!/usr/bin/env bash
# make-certs.sh - the certificates the standalone Deployment
# (deploy/standalone/agentsched.yaml) serves and checks, made with openssl:
#
#   ca.crt, ca.key                      a CA of its own (keep ca.key offline)
#   tls.crt, tls.key                    agentsched's serving certificate, for
#                                       the Service's names (below)
#   kube-scheduler.crt/.key             client certificate of a kube-scheduler
#                                       calling agentsched as its extender
#   placement-client.crt/.key           client certificate for dry runs
#                                       (`agentsched place --cert --key`)
#   secret.yaml                         the Secrets: kube-system/agentsched-tls
#                                       (kubernetes.io/tls: tls.crt, tls.key,
#                                       ca.crt, what the Deployment mounts) and
#                                       kube-system/agentsched-kube-scheduler-client
#                                       (the same keys for kube-scheduler's
#                                       tlsConfig: certFile tls.crt, keyFile
#                                       tls.key, caFile ca.crt)
#   volcano-ca.yaml                     ConfigMap volcano-system/agentsched-ca
#                                       holding ca.crt, for vc-scheduler's
#                                       SSL_CERT_FILE
#
# Usage: deploy/standalone/make-certs.sh [--dir DIR] [--days N] [--san NAME]...
#                                         [--client CN]... [--apply]
#   --dir DIR     where the files go (default ./agentsched-certs); an
#                 existing CA there (ca.crt, ca.key) is reused, so running it
#                 again renews agentsched's and the clients' certificates
#                 without changing what the callers trust
#   --days N      validity of the certificates (default 365; the CA: 10 years)
#   --san NAME    one more DNS name (or IP address) for agentsched's
#                 certificate, e.g. a name outside the cluster
#   --client CN   one more client certificate, CN.crt/CN.key (CN becomes the
#                 caller's name in agentsched's request log)
#   --apply       also `kubectl apply -f DIR/secret.yaml`
#
# agentsched's certificate names the Service of the manifest, agentsched in
# kube-system: agentsched, agentsched.kube-system, agentsched.kube-system.svc,
# agentsched.kube-system.svc.cluster.local; and localhost and 127.0.0.1, for
# `kubectl port-forward`. cert-manager can issue the same instead (a CA
# Issuer and a Certificate with secretName agentsched-tls): the Deployment
# needs only the Secret's three keys.
set -euo pipefail

DIR=agentsched-certs
DAYS=365
APPLY=0
SANS=()
CLIENTS=(kube-scheduler placement-client)
NS=kube-system
SERVICE=agentsched

die() { printf 'make-certs.sh: %s\n' "$*" >&2; exit 2; }
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit "${1:-0}"; }

while [ $# -gt 0 ]; do
	case "$1" in
	--dir) [ $# -ge 2 ] || die "--dir needs a value"; DIR=$2; shift 2 ;;
	--days)
		[ $# -ge 2 ] || die "--days needs a value"
		[[ $2 =~ ^[1-9][0-9]{0,4}$ ]] || die "--days $2: give whole days, 1..99999"
		DAYS=$2; shift 2 ;;
	--san) [ $# -ge 2 ] || die "--san needs a value"; SANS+=("$2"); shift 2 ;;
	--client)
		[ $# -ge 2 ] || die "--client needs a value"
		[[ $2 =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || die "--client $2: letters, digits, '.', '_' and '-' only"
		CLIENTS+=("$2"); shift 2 ;;
	--apply) APPLY=1; shift ;;
	-h|--help) usage 0 ;;
	*) die "unknown argument $1 (see --help)" ;;
	esac
done
command -v openssl >/dev/null || die "openssl is not installed"
mkdir -p "$DIR"
chmod 700 "$DIR"
cd "$DIR"
umask 077

# EC P-256 keys: short, and read by every TLS stack involved (agentsched's
# GnuTLS, Go's crypto/tls in kube-scheduler and vc-scheduler, libcurl).
newkey=(-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes)

if [ -s ca.crt ] && [ -s ca.key ]; then
	echo "make-certs.sh: reusing the CA in $DIR (ca.crt, ca.key)" >&2
else
	openssl req -x509 "${newkey[@]}" -days 3650 -subj "/CN=agentsched-ca" \
		-addext basicConstraints=critical,CA:TRUE \
		-addext keyUsage=critical,keyCertSign,cRLSign \
		-keyout ca.key -out ca.crt 2>/dev/null
	echo "make-certs.sh: new CA $DIR/ca.crt" >&2
fi

# issue NAME CN EXTENSIONS: NAME.key, NAME.crt signed by the CA.
issue() {
	openssl req "${newkey[@]}" -subj "/CN=$2" -keyout "$1.key" -out "$1.csr" 2>/dev/null
	printf '%b' "$3" >"$1.ext"
	openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days "$DAYS" \
		-extfile "$1.ext" -out "$1.crt" 2>/dev/null
	rm -f "$1.csr" "$1.ext"
	echo "make-certs.sh: $DIR/$1.crt (CN $2)" >&2
}

san="DNS:$SERVICE,DNS:$SERVICE.$NS,DNS:$SERVICE.$NS.svc,DNS:$SERVICE.$NS.svc.cluster.local"
san+=",DNS:localhost,IP:127.0.0.1"
for s in "${SANS[@]}"; do
	if [[ $s =~ ^[0-9.]+$ || $s == *:* ]]; then san+=",IP:$s"; else san+=",DNS:$s"; fi
done
issue tls agentsched "subjectAltName=$san\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n"
for c in "${CLIENTS[@]}"; do
	issue "$c" "$c" 'keyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n'
done
chmod 644 ./*.crt

b64() { openssl base64 -A <"$1"; }
# tls_secret NAME CERT KEY: a kubernetes.io/tls Secret with ca.crt.
tls_secret() {
	cat <<YAML
apiVersion: v1
kind: Secret
metadata:
  name: $1
  namespace: $NS
type: kubernetes.io/tls
data:
  tls.crt: $(b64 "$2")
  tls.key: $(b64 "$3")
  ca.crt: $(b64 ca.crt)
YAML
}
{
	echo "# Made by deploy/standalone/make-certs.sh. Holds private keys: do not commit it."
	tls_secret agentsched-tls tls.crt tls.key
	echo "---"
	tls_secret agentsched-kube-scheduler-client kube-scheduler.crt kube-scheduler.key
} >secret.yaml
cat >volcano-ca.yaml <<YAML
# Made by deploy/standalone/make-certs.sh: the CA of agentsched's certificate
# for vc-scheduler (mount it and set SSL_CERT_FILE to the file; see
# deploy/volcano/volcano-scheduler.conf).
apiVersion: v1
kind: ConfigMap
metadata:
  name: agentsched-ca
  namespace: volcano-system
data:
  ca.crt: |
$(sed 's/^/    /' ca.crt)
YAML
chmod 644 volcano-ca.yaml
echo "make-certs.sh: wrote $DIR/secret.yaml (Secrets agentsched-tls, agentsched-kube-scheduler-client in $NS) and $DIR/volcano-ca.yaml" >&2

if [ "$APPLY" = 1 ]; then
	command -v kubectl >/dev/null || die "--apply: kubectl is not installed"
	kubectl apply -f secret.yaml
else
	cat >&2 <<MSG
Next:
  kubectl apply -f $DIR/secret.yaml
  kubectl apply -f deploy/standalone/agentsched.yaml
  agentsched place --server https://$SERVICE.$NS.svc:8888 --cacert $DIR/ca.crt \\
      --cert $DIR/placement-client.crt --key $DIR/placement-client.key -f PODS
MSG
fi
