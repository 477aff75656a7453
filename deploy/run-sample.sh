#!/usr/bin/env bash
# deploy/run-sample.sh - run agentsched on the embedded sample cluster.
#
#   deploy/run-sample.sh [--build-dir DIR] [--listen HOST:PORT] [--once]
#
# Starts `agentsched serve --cluster deploy/examples/cluster.yaml`, waits for
# it to answer, shows /readyz, /version and a few metrics, asks for a dry-run
# placement of a few agent pods (POST /v1/placements via `agentsched place
# --server`), then keeps serving until Ctrl-C (--once: stop after the demo).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR="$ROOT/build"
LISTEN=127.0.0.1:8888
ONCE=0
while [ $# -gt 0 ]; do
    case "$1" in
    --build-dir) BUILD_DIR=$2; shift ;;
    --listen) LISTEN=$2; shift ;;
    --once) ONCE=1 ;;
    -h | --help) sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run-sample.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
    esac
    shift
done

BIN="$BUILD_DIR/agentsched"
CLUSTER="$ROOT/deploy/examples/cluster.yaml"
[ -x "$BIN" ] || { echo "run-sample: $BIN not built; run deploy/setup.sh first" >&2; exit 1; }
[ -f "$CLUSTER" ] || { echo "run-sample: sample cluster $CLUSTER is missing" >&2; exit 1; }
URL="http://$LISTEN"

"$BIN" serve --cluster "$CLUSTER" --listen "$LISTEN" &
PID=$!
cleanup() {
    if kill -0 "$PID" 2>/dev/null; then
        kill -TERM "$PID" 2>/dev/null || true
        wait "$PID" 2>/dev/null || true
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for _ in $(seq 1 100); do
    if curl -sf "$URL/healthz" >/dev/null 2>&1; then break; fi
    kill -0 "$PID" 2>/dev/null || { echo "run-sample: agentsched exited early" >&2; exit 1; }
    sleep 0.1
done

echo
echo "== GET $URL/readyz";  curl -s "$URL/readyz"
echo "== GET $URL/version"; curl -s "$URL/version"
echo "== GET $URL/metrics (cache gauges)"
curl -s "$URL/metrics" | grep -E '^agentsched_(cache_nodes|cache_pods|ready) ' || true
curl -s "$URL/metrics" | grep -E '^agentsched_cache_pods\{' || true

if "$BIN" --help | grep -E '^  place ' >/dev/null; then # not -q: see dev-cluster
    PODS="$ROOT/deploy/examples/pods.yaml"
    if [ ! -f "$PODS" ]; then
        PODS=$(mktemp --suffix=.yaml)
        trap 'rm -f "$PODS"; cleanup' EXIT
        cat >"$PODS" <<'PODS_EOF'
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Pod
  metadata: {name: agent-small, namespace: agents}
  spec:
    schedulerName: agent-scheduler
    containers:
    - name: agent
      resources: {requests: {cpu: 500m, memory: 512Mi}}
- apiVersion: v1
  kind: Pod
  metadata: {name: agent-large, namespace: agents}
  spec:
    schedulerName: agent-scheduler
    containers:
    - name: agent
      resources: {requests: {cpu: "4", memory: 8Gi}}
- apiVersion: v1
  kind: Pod
  metadata: {name: agent-huge, namespace: agents}
  spec:
    schedulerName: agent-scheduler
    containers:
    - name: agent
      resources: {requests: {cpu: "512", memory: 4Ti}}
PODS_EOF
    fi
    echo
    echo "== dry-run placement: agentsched place --server $URL -f $PODS"
    "$BIN" place --server "$URL" -f "$PODS" || echo "(placement failed, see above)"
fi

if [ "$ONCE" -eq 1 ]; then
    exit 0
fi
echo
echo "agentsched is serving on $URL (pid $PID); press Ctrl-C to stop."
wait "$PID"
