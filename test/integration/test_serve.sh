#!/usr/bin/env bash
# test_serve.sh BINARY - `agentsched serve` end to end on the sample cluster:
# start on a free port, probe the core endpoints, reload, stop; and the CLI's
# error paths (bad cluster file, unknown flag, bad values, missing values).
set -uo pipefail

BIN=${1:?usage: test_serve.sh path/to/agentsched}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CLUSTER=${AGENTSCHED_TEST_CLUSTER:-$ROOT/deploy/examples/cluster.yaml}
WORK=$(mktemp -d)
PID=

cleanup() {
    [ -n "$PID" ] && kill -KILL "$PID" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT

# shellcheck source=cli_lib.sh
source "$ROOT/test/integration/cli_lib.sh"

# ---- CLI --------------------------------------------------------------
expect_exit 0 "--help" --help
out_has "serve" "--help lists serve"
out_has "version" "--help lists version"
expect_exit 0 "-h" -h
expect_exit 2 "no arguments"
expect_exit 0 "version" version
out_has "agentsched " "version prints the name"
expect_exit 2 "unknown command" serv
err_has "did you mean 'serve'" "unknown command hints"
expect_exit 0 "serve --help" serve --help
out_has "--cluster FILE" "serve --help lists --cluster"
out_has "--listen HOST:PORT" "serve --help lists --listen"
expect_exit 2 "unknown flag" serve --cluster "$CLUSTER" --lissten 127.0.0.1:0
err_has "unknown flag '--lissten'" "unknown flag is named"
err_has "did you mean '--listen'" "unknown flag hints"
expect_exit 2 "missing value" serve --cluster
err_has "--cluster" "missing value names the flag"
expect_exit 2 "no --cluster" serve
err_has "--cluster FILE is required" "serve requires --cluster"
expect_exit 2 "bad --listen" serve --cluster "$CLUSTER" --listen nowhere
err_has "--listen" "bad --listen names the flag"
expect_exit 2 "bad --listen port" serve --cluster "$CLUSTER" --listen 127.0.0.1:99999
expect_exit 2 "bad --shard-mode" serve --cluster "$CLUSTER" --shard-mode medium
err_has "--shard-mode" "bad --shard-mode names the flag"
expect_exit 2 "bad --max-body" serve --cluster "$CLUSTER" --max-body lots
err_has "--max-body" "bad --max-body names the flag"
expect_exit 2 "bad --http-threads" serve --cluster "$CLUSTER" --http-threads 0
expect_exit 2 "--http-timeout 0" serve --cluster "$CLUSTER" --http-timeout 0
err_has "--http-timeout" "bad --http-timeout names the flag"
expect_exit 2 "--placement-qps negative" serve --cluster "$CLUSTER" --placement-qps -1
err_has "--placement-qps" "bad --placement-qps names the flag"
expect_exit 0 "--http-timeout and --placement-qps 0 are accepted" serve --cluster "$CLUSTER" \
    --http-timeout 5 --placement-qps 0 --check
expect_exit 2 "bad --log-level" serve --cluster "$CLUSTER" --log-level loud
expect_exit 2 "bad --candidates" serve --cluster "$CLUSTER" --candidates=99
expect_exit 2 "bad --scheduler-name" serve --cluster "$CLUSTER" --scheduler-name "a b"
expect_exit 2 "upper-case --scheduler-name" serve --cluster "$CLUSTER" --scheduler-name My_S
err_has "DNS subdomain" "--scheduler-name is held to the API server's rule"
expect_exit 2 "--scheduler-name too long for the Lease" serve --cluster "$CLUSTER" \
    --scheduler-name "$(printf 'a%.0s' $(seq 1 243))"
err_has "242" "an over-long --scheduler-name names the limit"
expect_exit 2 "bad --shard-name" serve --cluster "$CLUSTER" --shard-name Shard_A
expect_exit 0 "--check accepts a valid command line" serve --cluster "$CLUSTER" \
    --scheduler-name agent-scheduler-2 --shard-name shard.a --check
out_has "command line ok" "--check says so"
expect_exit 2 "--check still applies the rules" serve --check
expect_exit 1 "--kubeconfig not a kubeconfig" serve --kubeconfig /dev/null --listen 127.0.0.1:0
err_has "/dev/null" "a bad --kubeconfig is named"
expect_exit 2 "--workers above 256" serve --cluster "$CLUSTER" --workers 257
err_has "0..256" "bad --workers says the range"
expect_exit 2 "bad --event-qps" serve --kubeconfig /dev/null --event-qps 1.5
err_has "--event-qps: '1.5' is not a whole number in 0..100000" "bad --event-qps names the flag and range"
expect_exit 2 "--bind-warm past the pool" serve --kubeconfig /dev/null --bind-warm 97
err_has "--bind-warm: '97' is not a whole number in 0..96" "bad --bind-warm names the flag and range"
expect_exit 2 "--leader-elect with --cluster" serve --cluster "$CLUSTER" --leader-elect
err_has "needs a live cluster" "--leader-elect explains it needs --kubeconfig/--in-cluster"
expect_exit 2 "--leader-elect takes no value" serve --kubeconfig /dev/null --leader-elect=yes
expect_exit 2 "lease flag without --leader-elect" serve --kubeconfig /dev/null \
    --leader-elect-lease kube-system/x
err_has "need --leader-elect" "lease flags without --leader-elect are refused"
expect_exit 2 "--leader-elect-lease without a namespace" serve --kubeconfig /dev/null \
    --leader-elect --leader-elect-lease agentsched
err_has "NAMESPACE/NAME" "bad --leader-elect-lease shows the form"
expect_exit 2 "--leader-elect-lease with a bad name" serve --kubeconfig /dev/null \
    --leader-elect --leader-elect-lease "kube-system/a b"
expect_exit 2 "--leader-elect-lease with upper case" serve --kubeconfig /dev/null \
    --leader-elect --leader-elect-lease kube-system/Agentsched
err_has "DNS subdomain" "an upper-case Lease name is refused as the API server would"
expect_exit 2 "--leader-elect-lease with a dotted namespace" serve --kubeconfig /dev/null \
    --leader-elect --leader-elect-lease kube.system/agentsched
err_has "DNS label" "a namespace must be a DNS label"
expect_exit 2 "--leader-elect-lease-duration 1" serve --kubeconfig /dev/null --leader-elect \
    --leader-elect-lease-duration 1
err_has "2..3600" "bad --leader-elect-lease-duration says the range"
expect_exit 1 "--leader-elect parses (then the kubeconfig fails)" serve --kubeconfig /dev/null \
    --listen 127.0.0.1:0 --leader-elect --leader-elect-lease kube-system/agentsched \
    --leader-elect-identity me --leader-elect-lease-duration 20
expect_exit 1 "--workers 0 parses (then the kubeconfig fails)" serve --kubeconfig /dev/null \
    --listen 127.0.0.1:0 --workers 0
expect_exit 2 "bad --metrics-listen" serve --cluster "$CLUSTER" --metrics-listen nowhere
err_has "--metrics-listen" "a bad --metrics-listen is named"
expect_exit 2 "--metrics-listen with --metrics-auth" serve --cluster "$CLUSTER" \
    --tls-cert /dev/null --tls-key /dev/null --tls-client-ca /dev/null --metrics-auth \
    --metrics-listen 127.0.0.1:0
err_has "drop one of them" "--metrics-listen and --metrics-auth exclude each other"
expect_exit 2 "two cluster sources" serve --cluster "$CLUSTER" --kubeconfig /dev/null
err_has "only one of" "--cluster and --kubeconfig exclude each other"

# ---- bad cluster files ------------------------------------------------
expect_exit 1 "missing cluster file" serve --cluster "$WORK/nope.yaml" --listen 127.0.0.1:0
err_has "nope.yaml" "missing cluster file is named"
printf 'items: [ {unclosed\n' >"$WORK/broken.yaml"
expect_exit 1 "malformed cluster file" serve --cluster "$WORK/broken.yaml" --listen 127.0.0.1:0
err_has "broken.yaml" "malformed cluster file is named"
cat >"$WORK/badqty.yaml" <<'YAML'
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata: {name: n1}
  status: {allocatable: {cpu: "4 cores", memory: 8Gi}}
YAML
expect_exit 1 "bad quantity in cluster" serve --cluster "$WORK/badqty.yaml" --listen 127.0.0.1:0
err_has "status.allocatable.cpu" "bad quantity names the field"
expect_exit 1 "missing policy file" serve --cluster "$CLUSTER" --policy "$WORK/nopolicy.yaml" \
    --listen 127.0.0.1:0
err_has "nopolicy.yaml" "missing policy file is named"

# ---- serve on the sample cluster -------------------------------------
if [ ! -f "$CLUSTER" ]; then
    fail "sample cluster $CLUSTER is missing"
    cli_summary
    exit 1
fi

"$BIN" serve --cluster "$CLUSTER" --listen 127.0.0.1:0 --http-threads 2 --max-body 1Mi \
    --metrics-listen 127.0.0.1:0 >"$WORK/serve.out" 2>"$WORK/serve.err" </dev/null &
PID=$!
PORT=$(serving_port "$WORK/serve.err" "$PID")
if [ -z "$PORT" ]; then
    fail "serve did not start"
    cat "$WORK/serve.err"
    exit 1
fi
ok "serve started on port $PORT"
grep -q 'nodes=[1-9]' "$WORK/serve.err" && ok "start-up line has node count" ||
    fail "start-up line has node count"
URL="http://127.0.0.1:$PORT"

status() { curl -s -o "$WORK/body" -w '%{http_code}' "$@"; }
check "/healthz 200" [ "$(status "$URL/healthz")" = 200 ]
check "/healthz says ok" grep -q '^ok' "$WORK/body"
check "/readyz 200" [ "$(status "$URL/readyz")" = 200 ]
check "/version 200" [ "$(status "$URL/version")" = 200 ]
check "/version is JSON with version" python3 -c \
    'import json,sys; d=json.load(open(sys.argv[1])); assert d["version"] and "commit" in d' \
    "$WORK/body"
check "/metrics 200" [ "$(status "$URL/metrics")" = 200 ]
check "/metrics has node gauge" grep -qE '^agentsched_cache_nodes [1-9]' "$WORK/body"
check "/metrics has TYPE lines" grep -q '^# TYPE agentsched_http_requests_total counter' \
    "$WORK/body"
check "/metrics has histogram" grep -q '^agentsched_request_duration_seconds_bucket{verb=' \
    "$WORK/body"
check "unknown path 404" [ "$(status "$URL/no/such/thing")" = 404 ]
check "404 body is JSON error" grep -q '"error"' "$WORK/body"
check "wrong method 405" [ "$(status -X POST -d x "$URL/healthz")" = 405 ]
check "keep-alive: 3 requests, 1 connection" [ "$(curl -s -o /dev/null -o /dev/null \
    -o /dev/null -w '%{num_connects}\n' "$URL/healthz" "$URL/readyz" "$URL/version" |
    paste -sd' ')" = "1 0 0" ]
# --metrics-listen: the probes and /metrics, and nothing else
MPORT=$(sed -n 's/.*msg="probes and metrics served" address=http:[^ ]*:\([0-9][0-9]*\) .*/\1/p' \
    "$WORK/serve.err" | head -n 1)
check "the metrics listener's address is logged" [ -n "$MPORT" ]
MURL="http://127.0.0.1:${MPORT:-1}"
check "metrics listener: /healthz 200" [ "$(status "$MURL/healthz")" = 200 ]
check "metrics listener: /readyz 200" [ "$(status "$MURL/readyz")" = 200 ]
check "metrics listener: /metrics 200" [ "$(status "$MURL/metrics")" = 200 ]
check "metrics listener: /metrics has the node gauge" grep -qE '^agentsched_cache_nodes [1-9]' \
    "$WORK/body"
check "metrics listener: /version is not there (404)" [ "$(status "$MURL/version")" = 404 ]
check "metrics listener: the extender is not there (404)" [ "$(status -X POST \
    -H 'Content-Type: application/json' -d '{}' "$MURL/scheduler/filter")" = 404 ]
check "metrics listener: dry runs are not there (404)" [ "$(status -X POST \
    -H 'Content-Type: application/json' -d '{"pods": []}' "$MURL/v1/placements")" = 404 ]
check "metrics listener: only GET (405)" [ "$(status -X POST -d x "$MURL/metrics")" = 405 ]
head -c 2000000 /dev/zero >"$WORK/big"
check "2 MB body over --max-body 1Mi is 413" [ "$(status -H 'Expect: 100-continue' -X POST --data-binary @"$WORK/big" \
    "$URL/v1/placements")" = 413 ]

kill -HUP "$PID"
sleep 0.3
check "SIGHUP without --policy keeps serving" [ "$(status "$URL/healthz")" = 200 ]
check "SIGHUP logged" grep -q 'policy reload failed' "$WORK/serve.err"

kill -TERM "$PID"
RC=
for _ in $(seq 1 100); do
    if ! kill -0 "$PID" 2>/dev/null; then
        wait "$PID"
        RC=$?
        break
    fi
    sleep 0.1
done
PID_DONE=$PID
PID=
check "SIGTERM stops cleanly (exit 0)" [ "${RC:-none}" = 0 ]
check "shutdown logged" grep -q 'shutting down' "$WORK/serve.err"

# ---- HTTPS (--tls-cert / --tls-key) ------------------------------------
TLS=$ROOT/test/integration/data/tls
expect_exit 2 "--tls-cert without --tls-key" serve --cluster "$CLUSTER" --tls-cert "$TLS/cert.pem"
err_has "needs --tls-key" "a certificate without a key is refused"
expect_exit 2 "--tls-key without --tls-cert" serve --cluster "$CLUSTER" --tls-key "$TLS/key.pem"
expect_exit 1 "--tls-cert not PEM" serve --cluster "$CLUSTER" --listen 127.0.0.1:0 \
    --tls-cert "$CLUSTER" --tls-key "$TLS/key.pem"
err_has "not PEM" "a non-PEM certificate file is named as such"
err_has "--tls-cert" "the error names --tls-cert"
expect_exit 1 "--tls-key missing" serve --cluster "$CLUSTER" --listen 127.0.0.1:0 \
    --tls-cert "$TLS/cert.pem" --tls-key "$WORK/nokey.pem"
err_has "nokey.pem" "a missing key file is named"
expect_exit 1 "key of another certificate" serve --cluster "$CLUSTER" --listen 127.0.0.1:0 \
    --tls-cert "$TLS/cert.pem" --tls-key "$TLS/other-key.pem"
err_has "refused" "a key that does not match the certificate is refused"

"$BIN" serve --cluster "$CLUSTER" --listen 127.0.0.1:0 --tls-cert "$TLS/cert.pem" \
    --tls-key "$TLS/key.pem" >/dev/null 2>"$WORK/tls.err" </dev/null &
PID=$!
PORT=$(serving_port "$WORK/tls.err" "$PID")
if [ -n "$PORT" ] && grep -q 'msg="agentsched serving".* listen=https:' "$WORK/tls.err"; then
    ok "HTTPS serve started (listen=https://...:$PORT logged)"
    TURL="https://127.0.0.1:$PORT"
    check "HTTPS /healthz 200, certificate verified" \
        [ "$(status --cacert "$TLS/cert.pem" "$TURL/healthz")" = 200 ]
    FX=$ROOT/test/unit/data/extender/filter/names_mixed
    check "HTTPS filter answers" [ "$(status --cacert "$TLS/cert.pem" -X POST \
        -H 'Content-Type: application/json' --data-binary @"$FX/request.json" \
        "$TURL/scheduler/filter")" = 200 ]
    check "HTTPS filter body is the extender's" grep -q '"FailedNodes"' "$WORK/body"
    check "keep-alive over TLS: 2 requests, 1 connection" [ "$(curl -s --cacert "$TLS/cert.pem" \
        -o /dev/null -o /dev/null -w '%{num_connects}\n' "$TURL/healthz" "$TURL/readyz" |
        paste -sd' ')" = "1 0" ]
    check "plain HTTP to the HTTPS port gets no answer" \
        [ "$(status --max-time 5 "http://127.0.0.1:$PORT/healthz")" != 200 ]
    check "HTTPS still serves after the plain request" \
        [ "$(status --cacert "$TLS/cert.pem" "$TURL/healthz")" = 200 ]
    kill -TERM "$PID"
    wait "$PID"
    check "HTTPS serve stops cleanly (exit 0)" [ $? = 0 ]
else
    fail "HTTPS serve did not start"
    sed 's/^/      /' "$WORK/tls.err" | head -n 5
    kill -KILL "$PID" 2>/dev/null
fi
PID=

# port already taken -> exit 1 naming the address
"$BIN" serve --cluster "$CLUSTER" --listen 127.0.0.1:0 >/dev/null 2>"$WORK/a.err" </dev/null &
PID=$!
PORT=
for _ in $(seq 1 200); do
    PORT=$(sed -n 's/.* listen=[^ ]*:\([0-9][0-9]*\) .*/\1/p' "$WORK/a.err" | head -n 1)
    [ -n "$PORT" ] && break
    sleep 0.1
done
expect_exit 1 "port in use" serve --cluster "$CLUSTER" --listen "127.0.0.1:$PORT"
err_has "127.0.0.1:$PORT" "port in use names the address"
kill -INT "$PID"
wait "$PID"
check "SIGINT stops cleanly (exit 0)" [ $? = 0 ]
PID=
: "$PID_DONE"

cli_summary
