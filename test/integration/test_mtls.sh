#!/usr/bin/env bash
# test_mtls.sh BINARY - client certificates on `agentsched serve
# --tls-client-ca`: a PKI made here with openssl (two CAs, server and client
# certificates), which requests get 200/401/403, the probes and /metrics,
# --metrics-auth, --tls-client-auth-exempt, and reloading the certificate,
# key and client CA (file change and SIGHUP) while a connection stays open.
set -uo pipefail

BIN=${1:?usage: test_mtls.sh path/to/agentsched}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CLUSTER=${AGENTSCHED_TEST_CLUSTER:-$ROOT/deploy/examples/cluster.yaml}
FX=$ROOT/test/unit/data/extender/filter/names_mixed
PODS=$ROOT/test/integration/data/place/pods.yaml
WORK=$(mktemp -d)
PID=
CONN_PID=

cleanup() {
    exec 7>&- 2>/dev/null
    [ -n "$CONN_PID" ] && kill -KILL "$CONN_PID" 2>/dev/null
    [ -n "$PID" ] && kill -KILL "$PID" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT

# shellcheck source=cli_lib.sh
source "$ROOT/test/integration/cli_lib.sh"

if ! command -v openssl >/dev/null; then
    fail "openssl is needed to make the test PKI (deploy/setup.sh installs it)"
    cli_summary
    exit 1
fi

# ---- PKI --------------------------------------------------------------
P=$WORK/pki
mkdir -p "$P"
mkca() { # NAME
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
        -subj "/CN=$1" -addext basicConstraints=critical,CA:TRUE \
        -addext keyUsage=critical,keyCertSign -keyout "$P/$1.key" -out "$P/$1.pem" 2>/dev/null
}
mkcert() { # CA NAME EXTENSIONS
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$2" \
        -keyout "$P/$2.key" -out "$P/$2.csr" 2>/dev/null &&
        printf '%b' "$3" >"$P/$2.ext" &&
        openssl x509 -req -in "$P/$2.csr" -CA "$P/$1.pem" -CAkey "$P/$1.key" -CAcreateserial \
            -days 2 -extfile "$P/$2.ext" -out "$P/$2.pem" 2>/dev/null
}
SERVER_EXT='subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n'
CLIENT_EXT='extendedKeyUsage=clientAuth\n'
mkca ca-one && mkca ca-two &&
    mkcert ca-one server-a "$SERVER_EXT" && mkcert ca-one server-b "$SERVER_EXT" &&
    mkcert ca-one kube-scheduler "$CLIENT_EXT" && mkcert ca-two stranger "$CLIENT_EXT" &&
    mkcert ca-one server-only "$SERVER_EXT"
check "test PKI made with openssl" [ -s "$P/server-only.pem" ]
# The two CA files padded to one size (PEM readers skip the blank lines),
# so that swapping them with the time kept is a change only SIGHUP sees.
for f in "$P/ca-one.pem" "$P/ca-two.pem"; do
    printf '%*s' $((2048 - $(wc -c <"$f"))) '' | tr ' ' '\n' >>"$f"
done

# ---- CLI --------------------------------------------------------------
expect_exit 2 "--tls-client-ca without --tls-cert" serve --cluster "$CLUSTER" \
    --tls-client-ca "$P/ca-one.pem"
err_has "needs --tls-cert" "--tls-client-ca says it needs HTTPS"
expect_exit 2 "--metrics-auth without --tls-client-ca" serve --cluster "$CLUSTER" \
    --tls-cert "$P/server-a.pem" --tls-key "$P/server-a.key" --metrics-auth
err_has "need --tls-client-ca" "--metrics-auth says it needs --tls-client-ca"
expect_exit 2 "--tls-client-auth-exempt not a path" serve --cluster "$CLUSTER" \
    --tls-cert "$P/server-a.pem" --tls-key "$P/server-a.key" --tls-client-ca "$P/ca-one.pem" \
    --tls-client-auth-exempt volcano
err_has "starting with '/'" "a bad exempt prefix is explained"
expect_exit 1 "--tls-client-ca not PEM" serve --cluster "$CLUSTER" --listen 127.0.0.1:0 \
    --tls-cert "$P/server-a.pem" --tls-key "$P/server-a.key" --tls-client-ca "$CLUSTER"
err_has "--tls-client-ca" "a bad client CA file names the flag"
expect_exit 2 "place --cert without --key" place --server https://127.0.0.1:1 -f "$PODS" \
    --cert "$P/kube-scheduler.pem"
err_has "--cert needs --key" "place --cert alone names the missing flag"
expect_exit 2 "place --key without --cert" place --server https://127.0.0.1:1 -f "$PODS" \
    --key "$P/kube-scheduler.key"
err_has "--key needs --cert" "place --key alone names the missing flag"
expect_exit 2 "place --cacert with --cluster" place --cluster "$CLUSTER" -f "$PODS" \
    --cacert "$P/ca-one.pem"
err_has "--cacert applies to --server only" "place --cacert offline is refused"
expect_exit 2 "place --cert with an http:// server" place --server http://127.0.0.1:1 \
    -f "$PODS" --cert "$P/kube-scheduler.pem" --key "$P/kube-scheduler.key"
err_has "needs an https:// --server" "place --cert on plain HTTP is refused"
expect_exit 1 "place --cacert of a missing file" place --server https://127.0.0.1:1 -f "$PODS" \
    --cacert "$P/nothing.pem"
err_has "--cacert $P/nothing.pem" "a missing --cacert file is named"

# ---- serving ----------------------------------------------------------
# start_serve LOG ARGS...: starts serve on a free port, sets PID and URL.
start_serve() {
    local log=$1
    shift
    "$BIN" serve --cluster "$CLUSTER" --listen 127.0.0.1:0 --log-level debug "$@" \
        >/dev/null 2>"$log" </dev/null &
    PID=$!
    local port
    port=$(serving_port "$log" "$PID") || return 1
    URL="https://127.0.0.1:$port"
    grep -q 'listen=https:' "$log"
}
status() { curl -s -o "$WORK/body" -w '%{http_code}' --cacert "$P/ca-one.pem" "$@"; }
as() { # CLIENT curl-args...: a request with CLIENT's certificate
    local who=$1
    shift
    status --cert "$P/$who.pem" --key "$P/$who.key" "$@"
}
filter() { # curl-args...: POST the filter fixture
    status "$@" -X POST -H 'Content-Type: application/json' \
        --data-binary @"$FX/request.json" "$URL/scheduler/filter"
}
# wait_status WANT CMD...: retries CMD for up to 5 s until it prints WANT.
wait_status() {
    local want=$1 got=
    shift
    for _ in $(seq 1 50); do
        got=$("$@")
        [ "$got" = "$want" ] && return 0
        sleep 0.1
    done
    echo "      got $got, want $want" >&2
    return 1
}

cp "$P/server-a.pem" "$WORK/tls.crt"
cp "$P/server-a.key" "$WORK/tls.key"
cp "$P/ca-one.pem" "$WORK/client-ca.pem"
LOG=$WORK/serve.err
if start_serve "$LOG" --tls-cert "$WORK/tls.crt" --tls-key "$WORK/tls.key" \
    --tls-client-ca "$WORK/client-ca.pem"; then
    ok "serve with --tls-client-ca started"
    check "filter with a client certificate of the CA: 200" \
        [ "$(filter --cert "$P/kube-scheduler.pem" --key "$P/kube-scheduler.key")" = 200 ]
    check "the answer is the extender's" grep -q '"FailedNodes"' "$WORK/body"
    check "the request log names the caller" grep -q 'caller=kube-scheduler status=200' "$LOG"
    check "filter without a client certificate: 401" [ "$(filter)" = 401 ]
    check "the 401 body says what to present" grep -q 'client certificate is required' \
        "$WORK/body"
    check "the 401 body is JSON" python3 -c 'import json,sys; json.load(open(sys.argv[1]))' \
        "$WORK/body"
    check "filter with a certificate of another CA: 403" \
        [ "$(filter --cert "$P/stranger.pem" --key "$P/stranger.key")" = 403 ]
    check "the 403 body says it does not verify" grep -q 'does not verify' "$WORK/body"
    check "a certificate of the CA not for client use: 403" \
        [ "$(filter --cert "$P/server-only.pem" --key "$P/server-only.key")" = 403 ]
    check "refusals are logged with the peer" grep -q \
        'request refused: client certificate" status=401 peer=127.0.0.1:' "$LOG"
    check "/healthz without a certificate: 200" [ "$(status "$URL/healthz")" = 200 ]
    check "/readyz without a certificate: 200" [ "$(status "$URL/readyz")" = 200 ]
    check "/metrics without a certificate: 200" [ "$(status "$URL/metrics")" = 200 ]
    check "/version without a certificate: 401" [ "$(status "$URL/version")" = 401 ]
    check "/v1/placements without a certificate: 401" [ "$(status -X POST -d '{}' \
        "$URL/v1/placements")" = 401 ]
    check "an unknown path stays 404" [ "$(status "$URL/nowhere")" = 404 ]

    # `agentsched place --server` as a client of the mutual-TLS server.
    expect_exit 0 "place --server https with --cacert, --cert and --key" place --server "$URL" \
        --cacert "$P/ca-one.pem" --cert "$P/kube-scheduler.pem" --key "$P/kube-scheduler.key" \
        -f "$PODS"
    out_has "shop/web-1" "place printed the pods' placements"
    check "the request log names place's certificate" grep -q \
        'path=/v1/placements.*caller=kube-scheduler status=200' "$LOG"
    expect_exit 1 "place --server https without --cert" place --server "$URL" \
        --cacert "$P/ca-one.pem" -f "$PODS"
    err_has "HTTP 401" "place says the server answered 401"
    err_has "give --cert FILE --key FILE" "place says which flags to give"
    expect_exit 1 "place --server https with a certificate of another CA" place --server "$URL" \
        --cacert "$P/ca-one.pem" --cert "$P/stranger.pem" --key "$P/stranger.key" -f "$PODS"
    err_has "HTTP 403" "place says the server answered 403"
    expect_exit 1 "place --server https without --cacert" place --server "$URL" \
        --cert "$P/kube-scheduler.pem" --key "$P/kube-scheduler.key" -f "$PODS"
    err_has "--cacert" "an unverified server certificate points at --cacert"

    # A connection opened now, kept across the reloads below.
    mkfifo "$WORK/conn.in"
    openssl s_client -quiet -connect "127.0.0.1:${URL##*:}" -CAfile "$P/ca-one.pem" \
        -cert "$P/kube-scheduler.pem" -key "$P/kube-scheduler.key" \
        <"$WORK/conn.in" >"$WORK/conn.out" 2>"$WORK/conn.err" &
    CONN_PID=$!
    exec 7>"$WORK/conn.in"
    printf 'GET /version HTTP/1.1\r\nHost: t\r\n\r\n' >&7
    answers() { grep -c '^HTTP/1.1 200' "$WORK/conn.out"; }
    check "the open connection is served" wait_status 1 answers

    # The client CA file replaced: noticed within about a second.
    cp "$P/ca-two.pem" "$WORK/client-ca.pem"
    check "after the CA file changed, a client of the new CA: 200" wait_status 200 \
        filter --cert "$P/stranger.pem" --key "$P/stranger.key"
    check "after the CA file changed, a client of the old CA: 403" \
        [ "$(filter --cert "$P/kube-scheduler.pem" --key "$P/kube-scheduler.key")" = 403 ]
    check "the reload is logged" grep -q 'TLS certificate, key and client CA reloaded' "$LOG"

    # Back to the first CA with the same size and time: only SIGHUP sees it.
    touch -r "$WORK/client-ca.pem" "$WORK/ref"
    cp "$P/ca-one.pem" "$WORK/client-ca.pem"
    touch -r "$WORK/ref" "$WORK/client-ca.pem"
    sleep 1.5
    check "an unnoticed change is not applied" \
        [ "$(filter --cert "$P/kube-scheduler.pem" --key "$P/kube-scheduler.key")" = 403 ]
    # and a new serving certificate at the same time
    cp "$P/server-b.pem" "$WORK/tls.crt"
    cp "$P/server-b.key" "$WORK/tls.key"
    touch -r "$WORK/ref" "$WORK/tls.crt" "$WORK/tls.key"
    kill -HUP "$PID"
    check "after SIGHUP, a client of the first CA again: 200" wait_status 200 \
        filter --cert "$P/kube-scheduler.pem" --key "$P/kube-scheduler.key"
    served=$(openssl s_client -connect "127.0.0.1:${URL##*:}" -CAfile "$P/ca-one.pem" \
        </dev/null 2>/dev/null | openssl x509 -noout -fingerprint -sha256 2>/dev/null)
    want=$(openssl x509 -in "$P/server-b.pem" -noout -fingerprint -sha256)
    check "after SIGHUP, new connections get the new server certificate" [ "$served" = "$want" ]
    check "the server is alive after the reloads" kill -0 "$PID"

    printf 'GET /version HTTP/1.1\r\nHost: t\r\n\r\n' >&7
    check "the connection opened before the reloads is still served" wait_status 2 answers
    exec 7>&-
    kill "$CONN_PID" 2>/dev/null
    wait "$CONN_PID" 2>/dev/null
    CONN_PID=

    # A broken file is refused and the running credentials stay.
    echo "not a certificate" >"$WORK/client-ca.pem"
    kill -HUP "$PID"
    sleep 0.5
    check "a broken CA file is refused and logged" wait_status 1 \
        grep -c 'TLS reload failed.*--tls-client-ca' "$LOG"
    check "the running CA stays after a broken reload" \
        [ "$(filter --cert "$P/kube-scheduler.pem" --key "$P/kube-scheduler.key")" = 200 ]

    kill -TERM "$PID"
    wait "$PID"
    check "serve stops cleanly (exit 0)" [ $? = 0 ]
else
    fail "serve with --tls-client-ca did not start"
    sed 's/^/      /' "$LOG" | head -n 5
    kill -KILL "$PID" 2>/dev/null
fi
PID=

# ---- --metrics-auth and --tls-client-auth-exempt ----------------------
LOG=$WORK/serve2.err
if start_serve "$LOG" --tls-cert "$P/server-a.pem" --tls-key "$P/server-a.key" \
    --tls-client-ca "$P/ca-one.pem" --metrics-auth --tls-client-auth-exempt /volcano/; then
    ok "serve with --metrics-auth started"
    check "--metrics-auth: /metrics without a certificate: 401" [ "$(status "$URL/metrics")" = 401 ]
    check "--metrics-auth: /metrics with one: 200" \
        [ "$(as kube-scheduler "$URL/metrics")" = 200 ]
    check "--metrics-auth: /healthz stays open" [ "$(status "$URL/healthz")" = 200 ]
    v=$(status -X POST -H 'Content-Type: application/json' -d '{}' "$URL/volcano/predicate")
    check "an exempt prefix is served without a certificate (got $v)" \
        [ "$v" != 401 -a "$v" != 403 ]
    check "outside the exempt prefix a certificate is still needed" [ "$(filter)" = 401 ]
    kill -TERM "$PID"
    wait "$PID"
    check "serve stops cleanly (exit 0)" [ $? = 0 ]
else
    fail "serve with --metrics-auth did not start"
    sed 's/^/      /' "$LOG" | head -n 5
    kill -KILL "$PID" 2>/dev/null
fi
PID=

cli_summary
