#!/usr/bin/env bash
# test_place_cli.sh BINARY - `agentsched place`: offline table and JSON from
# multi-document YAML, Lists and single Pods; errors naming file and field;
# usage errors; and --server against a started `agentsched serve` (its
# answers must equal the offline ones), connection refused and non-200.
set -u
BIN=${1:?usage: test_place_cli.sh PATH-TO-agentsched}
HERE=$(cd "$(dirname "$0")" && pwd)
DATA=$HERE/data/place
CLUSTER=$HERE/../unit/data/placement/cluster.yaml
TMP=$(mktemp -d)
SERVER_PID=
fails=0
n=0

cleanup() {
    if [ -n "$SERVER_PID" ]; then
        kill "$SERVER_PID" 2>/dev/null
        wait "$SERVER_PID" 2>/dev/null
    fi
    rm -rf "$TMP"
}
trap cleanup EXIT

ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() {
    n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $1"
    [ -f "$TMP/out" ] && sed 's/^/#   out: /' "$TMP/out" | head -20
    [ -f "$TMP/err" ] && sed 's/^/#   err: /' "$TMP/err" | head -20
}
# run CMD... : runs with stdout/stderr captured, sets $rc.
run() { "$@" >"$TMP/out" 2>"$TMP/err"; rc=$?; }
expect_rc() { if [ "$rc" -eq "$1" ]; then ok "$2 (exit $1)"; else not_ok "$2: exit $rc, want $1"; fi; }
expect_out() { if grep -qF -- "$1" "$TMP/out"; then ok "$2"; else not_ok "$2: stdout lacks '$1'"; fi; }
expect_err() { if grep -qF -- "$1" "$TMP/err"; then ok "$2"; else not_ok "$2: stderr lacks '$1'"; fi; }
expect_jq() {
    if jq -e "$1" "$TMP/out" >/dev/null 2>&1; then ok "$2"; else not_ok "$2: jq '$1' is false"; fi
}

# --- help ------------------------------------------------------------------
run "$BIN" place --help
expect_rc 0 "place --help"
expect_out "--cluster FILE" "help names --cluster"
expect_out "--server URL" "help names --server"
expect_out "1..3600" "help gives the --timeout range"

# --- offline, table, multi-document YAML -----------------------------------
run "$BIN" place --cluster "$CLUSTER" -f "$DATA/pods.yaml"
expect_rc 0 "offline table"
if head -1 "$TMP/out" | grep -qE '^POD +NODE +SCORE +CANDIDATES +REASONS$'; then
    ok "table header"
else
    not_ok "table header"
fi
if grep -qE '^shop/web-1 +node-a ' "$TMP/out" && grep -qE '^shop/web-2 +node-a ' "$TMP/out"; then
    ok "first two pods fill node-a"
else
    not_ok "first two pods fill node-a"
fi
if grep -E '^shop/web-3 ' "$TMP/out" | grep -q '<none>.*1 Insufficient cpu'; then
    ok "third pod unplaceable, with reasons"
else
    not_ok "third pod unplaceable, with reasons"
fi
cp "$TMP/out" "$TMP/offline.table"

# --- offline, JSON -----------------------------------------------------------
run "$BIN" place --cluster "$CLUSTER" -f "$DATA/pods.yaml" -o json
expect_rc 0 "offline json"
expect_jq '.placements | length == 3' "one placement per pod"
expect_jq '.placements[0].pod == "shop/web-1" and .placements[0].node == "node-a"' "json pod 1"
expect_jq '.placements[2].node == null and .placements[2].candidates == []' "json pod 3 null"
expect_jq '.placements[2].reasons["Insufficient cpu"] == 1' "json reasons counted"
cp "$TMP/out" "$TMP/offline.json"

# --- List of pods in JSON, --candidates --------------------------------------
# More pods than a dry run takes (5000, as POST /v1/placements): refused,
# naming the file, before any is evaluated.
python3 -c 'import json,sys; print(json.dumps({"apiVersion": "v1", "kind": "List", "items": [{"kind": "Pod", "metadata": {"name": "p%d" % i}, "spec": {"containers": [{"name": "c"}]}} for i in range(5001)]}))' >"$TMP/many.json"
run "$BIN" place --cluster "$CLUSTER" -f "$TMP/many.json"
expect_rc 1 "5001 pods refused"
expect_err "more than 5000 pods" "the pod cap is named"
expect_err "many.json" "the file is named"

run "$BIN" place --cluster "$CLUSTER" -f "$DATA/pods-list.json" -o json --candidates 2
expect_rc 0 "List input"
expect_jq '(.placements[0].node | IN("node-a", "node-b", "node-c")) and (.placements[0].candidates | length) == 2' \
    "List pod 1 with 2 candidates"
expect_jq '.placements[1].pod == "ml/gpu" and .placements[1].node == "node-t"' "GPU pod on node-t"
run "$BIN" place --cluster "$CLUSTER" -f "$DATA/pod-single.yaml" -o json --candidates 1
expect_rc 0 "single Pod input"
expect_jq '.placements[0].pod == "default/solo" and (.placements[0].candidates | length) == 1' \
    "single pod, 1 candidate"

# --- --policy (offline) ---------------------------------------------------------
POLICY=$HERE/../../policy/most-allocated.yaml
if [ -f "$POLICY" ]; then
    run "$BIN" place --cluster "$CLUSTER" -f "$DATA/pods-list.json" -o json --policy "$POLICY"
    expect_rc 0 "--policy most-allocated"
    # node-c already runs a 1-cpu pod: most-allocated packs onto it.
    expect_jq '.placements[0].node == "node-c" and .placements[0].candidates[0].score == 75' \
        "most-allocated packs the fullest node"
fi
run "$BIN" place --cluster "$CLUSTER" -f "$DATA/pods.yaml" --policy "$DATA/no-such-policy.yaml"
expect_rc 1 "missing policy file"
expect_err "no-such-policy.yaml" "missing policy named"

# --- the shipped sample: deploy/examples/{cluster,pods}.yaml ---------------------
SAMPLE=$HERE/../../deploy/examples
if [ -f "$SAMPLE/cluster.yaml" ] && [ -f "$SAMPLE/pods.yaml" ]; then
    run "$BIN" place --cluster "$SAMPLE/cluster.yaml" -f "$SAMPLE/pods.yaml" -o json
    expect_rc 0 "sample cluster and pods"
    expect_jq '(.placements | length) == 6 and .placements[5].node == null' \
        "sample: six pods, the huge one unplaceable"
    expect_jq '.placements[4].node | startswith("cpu-large-0")' "sample: batch job on a batch node"
fi

# --- errors name the file and the field --------------------------------------
run "$BIN" place --cluster "$CLUSTER" -f "$DATA/bad-quantity.yaml"
expect_rc 1 "bad quantity"
expect_err "bad-quantity.yaml: document 2" "error names file and document"
expect_err "spec.containers[0].resources.requests.cpu" "error names the field"
run "$BIN" place --cluster "$CLUSTER" -f "$DATA/not-a-pod.yaml"
expect_rc 1 "not a Pod"
expect_err "kind Deployment is not a Pod" "error names the kind"
run "$BIN" place --cluster "$CLUSTER" -f "$DATA/malformed.yaml"
expect_rc 1 "malformed YAML"
expect_err "malformed.yaml" "YAML error names the file"
run "$BIN" place --cluster "$CLUSTER" -f "$DATA/does-not-exist.yaml"
expect_rc 1 "missing pods file"
expect_err "does-not-exist.yaml" "missing file named"
run "$BIN" place --cluster "$DATA/does-not-exist.yaml" -f "$DATA/pods.yaml"
expect_rc 1 "missing cluster file"
expect_err "does-not-exist.yaml" "missing cluster named"

# --- usage errors --------------------------------------------------------------
run "$BIN" place
expect_rc 2 "no arguments"
run "$BIN" place --cluster "$CLUSTER" --server http://127.0.0.1:1 -f "$DATA/pods.yaml"
expect_rc 2 "--cluster and --server together"
run "$BIN" place --cluster "$CLUSTER" -f "$DATA/pods.yaml" --candidates 17
expect_rc 2 "--candidates 17"
expect_err "1 to 16" "--candidates range explained"
run "$BIN" place --cluster "$CLUSTER" -f "$DATA/pods.yaml" -o yaml
expect_rc 2 "-o yaml"
run "$BIN" place --server http://127.0.0.1:1 -f "$DATA/pods.yaml" --policy x.yaml
expect_rc 2 "--policy with --server"
run "$BIN" place --cluster "$CLUSTER" -f "$DATA/pods.yaml" --bogus
expect_rc 2 "unknown flag"
expect_err "unknown flag '--bogus'" "unknown flag is named"
run "$BIN" place --cluster "$CLUSTER" -f "$DATA/pods.yaml" --bogus=1
expect_rc 2 "unknown flag with a value"
expect_err "unknown flag '--bogus'" "unknown flag named without its value"
run "$BIN" place -zq
expect_rc 2 "unknown short option in a cluster"
expect_err "unknown flag '-z'" "unknown short option is named, not argv[0]"
run "$BIN" place --cluster="$CLUSTER" -zq
expect_rc 2 "unknown short option after --flag=value"
expect_err "unknown flag '-z'" "unknown short option is named, not the flag before it"
run "$BIN" place --cluster "$CLUSTER" -f
expect_rc 2 "-f without a value"
expect_err "-f needs a value" "missing short value is named"
run "$BIN" place --cluster "$CLUSTER" --filename
expect_rc 2 "--filename without a value"
expect_err "--filename needs a value" "missing long value is named"
run "$BIN" place --cluster "$CLUSTER" --time
expect_rc 2 "abbreviated --timeout without a value"
expect_err "--timeout needs a value" "abbreviation named in full"
run "$BIN" place --help=1
expect_rc 2 "--help=1"
expect_err "--help takes no value" "--help=1 explained"
run "$BIN" place --c
expect_rc 2 "ambiguous --c"
expect_err "ambiguous flag '--c'" "ambiguous prefix explained"
run "$BIN" place --server http://127.0.0.1:1 -f "$DATA/pods.yaml" --timeout 0
expect_rc 2 "--timeout 0"
expect_err "1 to 3600" "--timeout range explained"

# --- --server: connection refused ----------------------------------------------
run "$BIN" place --server http://127.0.0.1:1 -f "$DATA/pods.yaml" --timeout 5
expect_rc 1 "connection refused"
expect_err "cannot reach agentsched at http://127.0.0.1:1/v1/placements" "refusal explained"

# --- --server against a running instance -----------------------------------------
"$BIN" serve --cluster "$CLUSTER" --listen 127.0.0.1:0 --log-level info 2>"$TMP/serve.log" &
SERVER_PID=$!
PORT=
for _ in $(seq 1 100); do
    PORT=$(sed -n 's/.*agentsched serving.* listen=[^ ]*:\([0-9][0-9]*\).*/\1/p' "$TMP/serve.log" |
        head -1)
    [ -n "$PORT" ] && break
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.1
done
if [ -z "$PORT" ]; then
    not_ok "serve did not start"
    sed 's/^/#   serve: /' "$TMP/serve.log" | head -20
else
    ok "serve started on port $PORT"
    URL=http://127.0.0.1:$PORT
    run "$BIN" place --server "$URL" -f "$DATA/pods.yaml"
    expect_rc 0 "--server table"
    if cmp -s "$TMP/out" "$TMP/offline.table"; then
        ok "--server table equals offline table"
    else
        not_ok "--server table differs from offline"
        diff "$TMP/offline.table" "$TMP/out" | sed 's/^/#   /'
    fi
    run "$BIN" place --server "$URL/" -f "$DATA/pods.yaml" -o json
    expect_rc 0 "--server json (trailing slash)"
    if cmp -s "$TMP/out" "$TMP/offline.json"; then
        ok "--server json equals offline json"
    else
        not_ok "--server json differs from offline"
    fi
    run "$BIN" place --server "$URL/v1/placements" -f "$DATA/pods-list.json" -o json --candidates 1
    expect_rc 0 "--server with the full endpoint URL"
    expect_jq '(.placements[0].candidates | length) == 1' "--candidates sent to the server"
    # Nothing was bound: placing again gives the same answer.
    run "$BIN" place --server "$URL" -f "$DATA/pods.yaml" -o json
    if cmp -s "$TMP/out" "$TMP/offline.json"; then
        ok "dry runs leave the server unchanged"
    else
        not_ok "second dry run differs"
    fi
    run "$BIN" place --server "$URL/nope" -f "$DATA/pods.yaml"
    expect_rc 1 "--server non-200"
    expect_err "HTTP 404" "non-200 status reported"
    expect_err "no such endpoint" "server's error body shown"
    # The HTTP API directly: a bad field is a 400 naming it.
    code=$(curl -s -o "$TMP/out" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
        --data '{"pods": [{"metadata": {"name": "a"}, "spec": {"containers": [{"resources": {"requests": {"cpu": "x"}}}]}}]}' \
        "$URL/v1/placements")
    if [ "$code" = 400 ]; then ok "HTTP 400 on a bad quantity"; else not_ok "HTTP $code, want 400"; fi
    expect_jq '.field == "pods[0].spec.containers[0].resources.requests.cpu"' "400 names the field"
fi

echo "1..$n"
if [ "$fails" -gt 0 ]; then
    echo "# $fails of $n checks failed"
    exit 1
fi
exit 0
