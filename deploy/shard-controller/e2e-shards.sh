#!/usr/bin/env bash
# e2e-shards.sh - the NodeShard scenario on a real control plane
# (test/e2e/dev-cluster --layout mixed: etcd, kube-apiserver, kube-scheduler
# with agentsched as extender, 4 fake nodes of 8 CPUs, deploy/crds installed):
#
#   1. agentsched serves in hard shard mode as shard "agent-scheduler";
#      a second NodeShard "volcano" stands for another scheduler.
#   2. agent-scheduler desires node-0000 and node-0001, but volcano still
#      has node-0001 in nodesInUse: agentsched publishes nodesInUse
#      [node-0000], nodesToAdd [node-0001], and binds only to node-0000
#      (pods through kube-scheduler + extender, and through the fast path).
#   3. A pod that only fits node-0001 stays pending until volcano drops
#      node-0001 from nodesInUse; then it binds there and agentsched's
#      status shows both nodes in use.
#   4. `agentsched shard-controller` (two replicas, one Lease) computes the
#      shards from CPU utilisation; when a node crosses the band it moves
#      to agent-scheduler's nodesDesired; the leader's SIGTERM releases the
#      Lease and the other replica takes over. A third replica reads its
#      config from a ConfigMap and rejects a bad edit, keeping the old one.
#      The controllers run as their ServiceAccount with rbac.yaml's rules,
#      agentsched with deploy/rbac/agentsched.yaml's.
#   Invariant checked at the end: no pod is bound outside the usable set
#   agentsched had published when it was bound (hard mode).
#
#   AGENTSCHED_BIN=build/agentsched deploy/shard-controller/e2e-shards.sh
#
# E2E_KEEP_LOGS=DIR keeps the controllers' and the cluster's logs.
# Needs go (to build the control plane once, see test/e2e/dev-cluster).
# Exit status 0 when every check passes.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
AS=${AGENTSCHED_BIN:-$REPO/build/agentsched}
case "$AS" in /*) ;; *) AS=$PWD/$AS ;; esac
STATE=${E2E_STATE:-$REPO/build/e2e-runs/shards}
K=$REPO/test/e2e/bin/kubectl
DC=$REPO/test/e2e/dev-cluster
TMP=$(mktemp -d)
PIDS=()

fail() { echo "e2e-shards: FAIL: $*" >&2; exit 1; }
ok() { echo "e2e-shards: ok: $*"; }
cleanup() {
	local rc=$?
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	if [ $rc -ne 0 ] && [ -d "$STATE/logs" ]; then
		tail -n 20 "$STATE/logs/agentsched.log" >&2 || true
		for f in "$TMP"/ctl-*.log; do [ -f "$f" ] && tail -n 10 "$f" >&2; done
	fi
	if [ -n "${E2E_KEEP_LOGS:-}" ]; then
		mkdir -p "$E2E_KEEP_LOGS"
		cp "$TMP"/*.log "$E2E_KEEP_LOGS"/ 2>/dev/null || true
		export DEV_CLUSTER_KEEP_LOGS=$E2E_KEEP_LOGS/cluster
	fi
	bash "$DC" down --state-dir "$STATE" >/dev/null 2>&1 || true
	rm -rf "$TMP"
	exit $rc
}
trap cleanup EXIT

# wait_for DESC CMD...: retry CMD for up to 30 s.
wait_for() {
	local desc=$1
	shift
	for _ in $(seq 1 60); do
		if "$@" >/dev/null 2>&1; then
			ok "$desc"
			return 0
		fi
		sleep 0.5
	done
	fail "$desc"
}
jsonpath() { "$K" get "$1" "$2" -o "jsonpath=$3"; }
status_is() { [ "$(jsonpath nodeshard agent-scheduler "{.status.$1}")" = "$2" ]; }
node_of() { jsonpath pod "$1" '{.spec.nodeName}'; }

# The mixed layout: the standalone agentsched (fast path) and kube-scheduler
# serving default-scheduler with it as extender, so that both paths meet
# the shards.
AGENTSCHED_BIN=$AS bash "$DC" up --layout mixed --state-dir "$STATE" --nodes 4 --node-cpu 8 \
	--agentsched-args "--shard-mode hard --shard-name agent-scheduler" >"$TMP/up.log" 2>&1 ||
	{ cat "$TMP/up.log" >&2; fail "dev-cluster up"; }
export KUBECONFIG=$STATE/kubeconfig
# The controllers run as ServiceAccount kube-system/agentsched-shard-controller
# with exactly the RBAC of rbac.yaml (Lease and ConfigMap in kube-system).
# Its Role on Volcano's Lease lives in volcano-system (no Volcano here: the
# Lease is absent and the controller writes).
"$K" get namespace volcano-system >/dev/null 2>&1 || "$K" create namespace volcano-system >/dev/null
"$REPO/test/e2e/bin/e2ectl" apply --kubeconfig "$KUBECONFIG" -f "$REPO/deploy/shard-controller/rbac.yaml" >/dev/null
CTL_KC=$STATE/kubeconfig-shard-controller

# 2. the two shards
"$K" apply -f - >/dev/null <<'EOF'
apiVersion: shard.volcano.sh/v1alpha1
kind: NodeShard
metadata: {name: volcano}
spec: {nodesDesired: [node-0001, node-0002, node-0003]}
EOF
"$K" patch nodeshard volcano --subresource=status --type=merge \
	-p '{"status":{"nodesInUse":["node-0001","node-0002","node-0003"]}}' >/dev/null
"$K" apply -f - >/dev/null <<'EOF'
apiVersion: shard.volcano.sh/v1alpha1
kind: NodeShard
metadata: {name: agent-scheduler}
spec: {nodesDesired: [node-0000, node-0001]}
EOF
wait_for "nodesInUse is the usable set" status_is nodesInUse '["node-0000"]'
wait_for "nodesToAdd names the node the other shard holds" status_is nodesToAdd '["node-0001"]'

pod() { # name scheduler cpu
	"$K" apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: default}
spec:
  schedulerName: $2
  containers: [{name: c, image: registry.invalid/agent, resources: {requests: {cpu: "$3", memory: 64Mi}}}]
EOF
}
for i in 1 2 3; do pod "ext-$i" default-scheduler 1; pod "fast-$i" agent-scheduler 1; done
for p in ext-1 ext-2 ext-3 fast-1 fast-2 fast-3; do
	wait_for "$p bound" test -n "$(node_of $p)"
	[ "$(node_of $p)" = node-0000 ] || fail "$p bound to $(node_of $p), outside the usable set"
done
ok "hard mode: every pod on node-0000"

# 3. a pod that fits only node-0001 waits for the other side
pod big agent-scheduler 5
sleep 3
[ -z "$(node_of big)" ] || fail "big bound to $(node_of big) while node-0001 was still in use by volcano"
ok "big pending while node-0001 belongs to volcano's nodesInUse"
"$K" patch nodeshard volcano --subresource=status --type=merge \
	-p '{"status":{"nodesInUse":["node-0002","node-0003"]}}' >/dev/null
wait_for "nodesInUse grows once the other shard released node-0001" \
	status_is nodesInUse '["node-0000","node-0001"]'
wait_for "big bound to node-0001" test "$(node_of big)" = node-0001

# 4. the controller: node-0000 (6/8) and node-0001 (5/8) are above 0.5
cat >"$TMP/sharding.yaml" <<'EOF'
schedulerConfigs:
  - name: agent-scheduler
    type: agent
    policies:
      - {name: allocation-rate, arguments: {minCPUUtil: 0.5, maxCPUUtil: 1.0}}
      - {name: node-limit, arguments: {maxNodes: 3}}
  - name: volcano
    type: volcano
    policies:
      - {name: allocation-rate, arguments: {minCPUUtil: 0.0, maxCPUUtil: 0.49}}
shardSyncPeriod: 30s
EOF
for id in a b; do
	"$AS" shard-controller --config "$TMP/sharding.yaml" --kubeconfig "$CTL_KC" \
		--identity "ctl-$id" --listen none >"$TMP/ctl-$id.log" 2>&1 &
	PIDS+=($!)
	sleep 1
done
desired() { [ "$(jsonpath nodeshard "$1" '{.spec.nodesDesired}')" = "$2" ]; }
wait_for "controller: busy nodes to agent-scheduler" desired agent-scheduler '["node-0000","node-0001"]'
wait_for "controller: idle nodes to volcano" desired volcano '["node-0002","node-0003"]'
holder=$("$K" get lease -n kube-system agentsched-shard-controller -o 'jsonpath={.spec.holderIdentity}')
[ "$holder" = ctl-a ] || fail "lease holder is '$holder', want ctl-a"
ok "one leader (ctl-a)"
# utilisation of node-0002 crosses the band
"$K" apply -f - >/dev/null <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: hot, namespace: default}
spec:
  nodeName: node-0002
  containers: [{name: c, image: registry.invalid/batch, resources: {requests: {cpu: "6", memory: 64Mi}}}]
EOF
wait_for "controller rebalances node-0002 to agent-scheduler" \
	desired agent-scheduler '["node-0000","node-0001","node-0002"]'
wait_for "agentsched waits for volcano to release node-0002" status_is nodesToAdd '["node-0002"]'
kill -TERM "${PIDS[0]}"
holder_is() { [ "$("$K" get lease -n kube-system agentsched-shard-controller -o 'jsonpath={.spec.holderIdentity}')" = "$1" ]; }
wait_for "ctl-b takes the lease after ctl-a releases it" holder_is ctl-b

# the config from a ConfigMap: loaded, then a bad edit rejected (old kept)
"$K" create configmap sharding -n kube-system --save-config --from-file=sharding.yaml="$TMP/sharding.yaml" >/dev/null
"$AS" shard-controller --configmap kube-system/sharding --kubeconfig "$CTL_KC" --identity ctl-c \
	--listen none --dry-run >"$TMP/ctl-c.log" 2>&1 &
PIDS+=($!)
wait_for "configmap: config loaded" grep -q 'sharding config loaded" source=ConfigMap kube-system/sharding' "$TMP/ctl-c.log"
printf 'schedulerConfigs: [{name: agent-scheduler, policies: [{name: nope}]}]\n' >"$TMP/bad.yaml"
"$K" create configmap sharding -n kube-system --from-file=sharding.yaml="$TMP/bad.yaml" \
	--dry-run=client -o yaml | "$K" apply -f - >/dev/null
wait_for "configmap: bad edit rejected, old config kept" grep -q 'rejected; keeping the current one' "$TMP/ctl-c.log"
wait_for "configmap: dry run computed the shards" grep -q 'dry run: would write NodeShard" shard=agent-scheduler' "$TMP/ctl-c.log"

# another writer of agentsched's own NodeShard status (kubectl here, as a
# second scheduler would be): agentsched warns, naming its field manager
"$K" patch nodeshard agent-scheduler --subresource=status --type=merge \
	-p "{\"status\":{\"lastUpdateTime\":\"$(date -u +%Y-%m-%dT%H:%M:%SZ)\"}}" >/dev/null
wait_for "agentsched warns of another status writer on its NodeShard" \
	grep -q 'another scheduler publishes status on our NodeShard.*manager=kubectl' "$STATE/logs/agentsched.log"

# invariant: in hard mode nothing was bound outside what agentsched used
for p in $("$K" get pods -o 'jsonpath={.items[*].metadata.name}'); do
	n=$(node_of "$p")
	case "$p:$n" in
	hot:node-0002 | big:node-0001 | *:node-0000) ;;
	*) fail "pod $p on $n" ;;
	esac
done
ok "no pod bound outside the usable set"
echo "e2e-shards: PASS"
