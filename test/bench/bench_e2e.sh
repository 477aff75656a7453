#!/usr/bin/env bash
# bench_e2e.sh - end-to-end scheduling throughput on one real control plane
# (a benchmark, not a test; the end-to-end and fast-path targets of docs/performance.md).
#
#   test/bench/bench_e2e.sh [--nodes 1000] [--pods 5000] [--workers 64]
#                           [--modes "plain extender shortlist fastpath ceiling bindonly"]
#                           [--shortlist 10] [--rate 0] [--timeout 10m]
#                           [--state-dir build/bench-e2e] [--agentsched-args "..."]
#                           [--shipped-qps]
#                           [--vc-agent-workers 1] [--warmup 0]
#
# Brings up a dev-cluster (test/e2e/dev-cluster: etcd, kube-apiserver,
# kube-scheduler with agentsched as extender, agentsched serve --kubeconfig
# with its fast path) with --nodes fake nodes big enough for every pod, then
# runs `e2ectl bench` once per mode, one after another, on that control plane:
#   plain     (a) a second kube-scheduler, no extenders, profile bench-plain
#             (same client QPS/burst; it runs through every mode, idle in
#             the others, as the dev-cluster's kube-scheduler idles in this
#             one, so that every mode carries the same background load)
#   extender  (b) the dev-cluster's kube-scheduler + agentsched extender
#             (filter, prioritize, bind), pods of default-scheduler
#   shortlist (b') the same with the policy's extender.shortlist set to
#             --shortlist N (agentsched runs with --policy, a copy of
#             policy/default.yaml, reloaded with SIGHUP before and after)
#   fastpath  (c) agentsched standalone, pods of agent-scheduler
#   vc-agent  (v) Volcano's vc-agent-scheduler (dev-cluster --volcano-agent:
#             Volcano's shipped agent-scheduler.conf, its default client
#             QPS 2000 / burst 2000, --scheduler-worker-count
#             --vc-agent-workers, default 1 as Volcano ships it), the same
#             pods with schedulerName vc-agent-scheduler; started only when
#             the modes name it, idle in the other modes
#   ceiling   (d) no scheduler: the client creates each pod and posts a
#             precomputed Binding as soon as the create returns
#   bindonly  (d') pods pre-created untimed, then only Bindings timed
# Both kube-schedulers' clients run at QPS 5000, burst 10000, so that the
# modes compare schedulers, not client limits; --shipped-qps leaves
# clientConnection as deploy/ ships it (kube-scheduler's defaults, QPS 50,
# burst 100) in both: the extender mode then runs the shipped configuration
# (the dev-cluster's mixed layout, which differs from the sidecar only in
# serving default-scheduler pods).
# --rate R paces the creates (binds in bindonly) at R pods/s, open loop, so
# that latency is measured below saturation; 0 (default) creates as fast as
# the workers can, which measures throughput. --agentsched-args adds flags to
# agentsched's command line (e.g. "--event-qps 20").
# --warmup W first runs each mode once with W pods, untimed, its pods
# deleted, so that the timed run measures a scheduler in its steady state:
# caches and heaps grown, every connection it opens on demand open. 0
# (default) times each mode's first pods. Either way the modes start once
# agentsched has opened the bind connections it keeps open while leading
# (--bind-warm, 96 by default; in its first seconds, at most 30 s waited),
# as every mode starts after its scheduler's start-up.
# Each mode's pods are deleted (grace 0) before the next mode starts. Prints
# the table (pods/s, p50/p99 create->bound, the scheduler's CPU seconds per
# 1000 pods) and the ratios b/a, c/a, c/d and fastpath/vc-agent, and
# tears the cluster down at the end, also on failure or Ctrl-C.
# The scheduler's CPU is read from /proc over the timed window (first create
# to last bind) for its process groups: agentsched (fastpath), kube-scheduler
# and agentsched (extender, shortlist), the plain kube-scheduler (plain),
# vc-agent-scheduler (vc-agent); none for ceiling and bindonly.
#
# Environment: AGENTSCHED_BIN (default build/agentsched), E2E_SKIP_BUILD
# (default 1: use test/e2e/bin as built; 0 rebuilds, seconds when warm),
# E2E_BIN_DIR (the binaries, vc-agent-scheduler among them), VOLCANO_SRC
# (Volcano's source: its CRDs and agent-scheduler.conf; default
# ../shared/volcano beside the repository).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
E2E=$REPO/test/e2e
BIN=${E2E_BIN_DIR:-$E2E/bin}
NODES=1000
PODS=5000
WORKERS=64
RATE=0
MODES="plain extender shortlist fastpath ceiling bindonly"
SHORTLIST=10
TIMEOUT=10m
STATE=$REPO/build/bench-e2e
EXTRA_ARGS=
SCHED_QPS=5000
SCHED_BURST=10000
VC_AGENT_WORKERS=1
WARMUP=0
export AGENTSCHED_BIN=${AGENTSCHED_BIN:-$REPO/build/agentsched}
export E2E_SKIP_BUILD=${E2E_SKIP_BUILD:-1}

while [ $# -gt 0 ]; do
	case "$1" in
	--nodes) NODES=$2; shift 2 ;;
	--pods) PODS=$2; shift 2 ;;
	--workers) WORKERS=$2; shift 2 ;;
	--rate) RATE=$2; shift 2 ;;
	--modes) MODES=$2; shift 2 ;;
	--shortlist) SHORTLIST=$2; shift 2 ;;
	--timeout) TIMEOUT=$2; shift 2 ;;
	--state-dir) STATE=$2; shift 2 ;;
	--agentsched-args) EXTRA_ARGS=$2; shift 2 ;;
	--shipped-qps) SCHED_QPS="" SCHED_BURST=""; shift ;;
	--vc-agent-workers) VC_AGENT_WORKERS=$2; shift 2 ;;
	--warmup) WARMUP=$2; shift 2 ;;
	-h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
	*) echo "bench_e2e: unknown option $1 (see --help)" >&2; exit 2 ;;
	esac
done
case "$STATE" in /*) ;; *) STATE=$PWD/$STATE ;; esac
case "$WARMUP" in
'' | *[!0-9]*) echo "bench_e2e: --warmup takes a number of pods (0: none), not '$WARMUP'" >&2; exit 2 ;;
esac
case "$SHORTLIST" in
[1-9] | [1-9][0-9] | 100) ;;
*) echo "bench_e2e: --shortlist takes 1..100 (the policy's extender.shortlist), not '$SHORTLIST'" >&2; exit 2 ;;
esac
log() { printf '[bench_e2e %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# Every pod fits on any node several times over: the benchmark measures
# scheduling and binding, not packing (each mode starts on empty nodes).
per_node=$(( (PODS + NODES - 1) / NODES * 4 + 10 ))
RESULTS=$STATE.results.jsonl
PLAIN_PID=""
rm -f "$RESULTS"

stop_plain() {
	if [ -n "$PLAIN_PID" ] && kill -0 "$PLAIN_PID" 2>/dev/null; then
		kill -TERM -- "-$PLAIN_PID" 2>/dev/null || kill -TERM "$PLAIN_PID" 2>/dev/null || true
		for _ in $(seq 1 100); do kill -0 "$PLAIN_PID" 2>/dev/null || break; sleep 0.1; done
		kill -KILL -- "-$PLAIN_PID" 2>/dev/null || true
	fi
	PLAIN_PID=""
}
finish() {
	local rc=$?
	stop_plain
	bash "$E2E/dev-cluster" down --state-dir "$STATE" || rc=1
	exit $rc
}
trap finish EXIT
trap 'exit 130' INT TERM

log "machine: $(nproc) cores, $(uptime)"
mkdir -p "$(dirname "$STATE")"
POLICY=$STATE.policy.yaml
cp "$REPO/policy/default.yaml" "$POLICY"
# The bench layout: kube-scheduler also serves default-scheduler pods and
# its client is not throttled (the modes compare schedulers, not configs).
# vc-agent-scheduler, when asked for, with its own defaults but the worker count.
VC_UP=()
case " $MODES " in *" vc-agent "*)
	VC_UP=(--volcano-agent --volcano-agent-args "--scheduler-worker-count $VC_AGENT_WORKERS") ;;
esac
layout=bench
[ -n "$SCHED_QPS" ] || layout=mixed
bash "$E2E/dev-cluster" up --layout "$layout" --state-dir "$STATE" --nodes "$NODES" --node-cpu "$((per_node))" \
	--node-memory "$((per_node))Gi" --node-pods "$per_node" --agentsched-args "--policy $POLICY${EXTRA_ARGS:+ $EXTRA_ARGS}" \
	"${VC_UP[@]}"
# shellcheck disable=SC1091
. "$STATE/env"
# agentsched's bind connections, opened in its first seconds as leader
warm_target=96
case " $EXTRA_ARGS " in *" --bind-warm"*)
	warm_target=$(sed 's/.*--bind-warm[ =]\([0-9]*\).*/\1/' <<<"$EXTRA_ARGS") ;;
esac
if [ "$warm_target" -gt 0 ]; then
	opened=0
	for _ in $(seq 150); do
		opened=$(curl -s --cacert "$AGENTSCHED_CA" "$AGENTSCHED_URL/metrics" |
			awk '/^agentsched_k8s_bind_connections_warmed_total\{how="opened"\}/ {print int($2)}')
		[ "${opened:-0}" -ge "$warm_target" ] && break
		sleep 0.2
	done
	log "agentsched's bind connections open before the first mode: ${opened:-0} of $warm_target"
fi
log "kube-scheduler (extender) client settings: $(grep -A4 '^clientConnection:' "$STATE/kube-scheduler.yaml" | grep -E 'qps|burst' | tr -s ' \n' ' ')"

start_plain() {
	local port
	port=$("$BIN/e2ectl" freeports 1)
	cat >"$STATE/kube-scheduler-plain.yaml" <<YAML
# bench_e2e.sh: kube-scheduler without extenders, same client settings.
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: $KUBECONFIG
${SCHED_QPS:+  qps: $SCHED_QPS
  burst: $SCHED_BURST
}leaderElection:
  leaderElect: false
profiles:
- schedulerName: bench-plain
YAML
	setsid "$BIN/controlplane" kube-scheduler --config "$STATE/kube-scheduler-plain.yaml" \
		--bind-address 127.0.0.1 --secure-port "$port" --cert-dir "$STATE/scheduler-plain-certs" \
		>>"$STATE/logs/kube-scheduler-plain.log" 2>&1 </dev/null &
	PLAIN_PID=$!
	"$BIN/e2ectl" wait-url --url "https://127.0.0.1:$port/healthz" --insecure --timeout 180s --pid "$PLAIN_PID" >&2 ||
		{ tail -n 30 "$STATE/logs/kube-scheduler-plain.log" >&2; exit 1; }
	log "plain kube-scheduler (pid $PLAIN_PID, qps ${SCHED_QPS:-default} burst ${SCHED_BURST:-default}, no extenders) ready"
}

# A mode's wall-clock budget: its bind timeout plus creation and cleanup.
to_s() { case "$1" in *m) echo $(( ${1%m} * 60 )) ;; *s) echo "${1%s}" ;; *) echo "$1" ;; esac; }
budget=$(( $(to_s "$TIMEOUT") + 600 ))
failed=0
# CPU seconds (user+system, children included) of every process group the
# mode ran: where the machine's cores went, so a ratio can be explained.
CPU_TABLE=$STATE.cpu.txt
: >"$CPU_TABLE"
tick=$(getconf CLK_TCK)
cpu_of_group() { # pgid -> CPU ticks of every process in the group
	local t=0 pid f
	for pid in $(pgrep -g "$1" 2>/dev/null); do
		f=$(cut -d' ' -f14-17 "/proc/$pid/stat" 2>/dev/null) || continue
		set -- $f
		t=$((t + $1 + $2 + $3 + $4))
	done
	echo "$t"
}
cpu_snapshot() { # prints "name ticks" for the dev-cluster's processes and the plain scheduler
	local name pid
	for name in $(ls "$STATE/pids" 2>/dev/null); do
		pid=$(cat "$STATE/pids/$name" 2>/dev/null) || continue
		echo "$name $(cpu_of_group "$pid")"
	done
	[ -n "$PLAIN_PID" ] && echo "kube-scheduler-plain $(cpu_of_group "$PLAIN_PID")"
	return 0
}
# agentsched's mean time per extender verb (its own handler time, from
# agentsched_request_duration_seconds sum/count) and per fast-path stage
# (agentsched_fastpath_stage_seconds: sum, count and cumulative buckets, so
# a p99 bound can be read off the mode's difference) over a mode.
verb_stats() {
	# HTTPS in the bench layout (the standalone manifest's); /metrics needs
	# no client certificate.
	curl -s ${AGENTSCHED_CA:+--cacert "$AGENTSCHED_CA"} "$AGENTSCHED_URL/metrics" 2>/dev/null |
		awk '/^agentsched_request_duration_seconds_(sum|count)\{verb="(filter|prioritize|bind)"\}/ {
			split($1, a, "\""); print a[2], ($1 ~ /_sum/ ? "sum" : "count"), $2 }
		/^agentsched_fastpath_stage_seconds_(sum|count|bucket)\{/ {
			split($1, a, "\"")
			if ($1 ~ /_bucket/) print a[2], "le=" a[4], $2
			else print a[2], ($1 ~ /_sum/ ? "sum" : "count"), $2 }'
}
# The API server's own time per write (apiserver_request_duration_seconds
# sum/count of pod creates, bindings and Events, both Event APIs), so a mode
# whose every write slows down (a busier control plane) shows as such.
api_stats() {
	"$BIN/kubectl" --kubeconfig "$KUBECONFIG" get --raw /metrics 2>/dev/null |
		awk '/^apiserver_request_duration_seconds_(sum|count)\{/ && /verb="POST"/ {
			w = ""
			if ($0 ~ /resource="pods"/ && $0 ~ /subresource=""/) w = "create"
			else if ($0 ~ /subresource="binding"/) w = "binding"
			else if ($0 ~ /resource="events"/) w = "event"
			if (w != "") t[w " " ($1 ~ /_sum/ ? "sum" : "count")] += $2 }
			END { for (k in t) print k, t[k] }'
}
# means LABEL "NAME..." BEFORE AFTER prints ";  LABEL: NAME N x MEAN ms ..."
# for each NAME whose count grew between two snapshots of "NAME sum|count V"
# lines (verb_stats, api_stats).
means() {
	{ echo "$3" | sed 's/^/B /'; echo "$4" | sed 's/^/A /'; } | awk -v label="$1" -v names="$2" '
		NF == 4 { v[$1 " " $2 " " $3] = $4 }
		END { out = ""; k = split(names, ns, " ")
			for (i = 1; i <= k; i++) {
				n = v["A " ns[i] " count"] - v["B " ns[i] " count"]
				t = v["A " ns[i] " sum"] - v["B " ns[i] " sum"]
				if (n > 0) out = out sprintf(" %s %d x %.2f ms", ns[i], n, t / n * 1000)
			}
			if (out != "") printf ";  %s:%s", label, out }'
}
# the bench client's CPU: user+sys seconds of this shell's waited-for
# children (bash's times, which must run in this shell, not a subshell)
child_cpu() { awk 'NR == 2 { gsub(/[ms]/, " "); print ($1 * 60 + $2) + ($3 * 60 + $4) }' "$STATE.times"; }
# set_shortlist N: the policy file's extender.shortlist, reloaded by
# agentsched (SIGHUP), waiting for its log line
set_shortlist() {
	local alog=$STATE/logs/agentsched.log n
	n=$(grep -c 'policy reloaded' "$alog" || true)
	sed -i "s/^  shortlist: .*/  shortlist: $1/" "$POLICY"
	grep -q "^  shortlist: $1\$" "$POLICY" || { log "cannot set extender.shortlist in $POLICY"; exit 1; }
	kill -HUP "$(cat "$STATE/pids/agentsched")"
	for _ in $(seq 1 100); do
		[ "$(grep -c 'policy reloaded' "$alog" || true)" -gt "$n" ] && { log "extender.shortlist: $1"; return 0; }
		sleep 0.1
	done
	log "agentsched did not reload $POLICY (see $alog)"
	exit 1
}
# cpu_groups MODE: NAME:PGID of the processes that schedule MODE's pods
cpu_groups() {
	local names="" n out=""
	case "$1" in
	fastpath) names=agentsched ;;
	extender | shortlist) names="kube-scheduler agentsched" ;;
	vc-agent) names=vc-agent-scheduler ;;
	plain) echo "kube-scheduler-plain:$PLAIN_PID"; return 0 ;;
	esac
	for n in $names; do
		[ -f "$STATE/pids/$n" ] && out="$out${out:+,}$n:$(cat "$STATE/pids/$n")"
	done
	echo "$out"
}
case " $MODES " in *" plain "*) start_plain ;; esac
for mode in $MODES; do
	[ "$mode" = shortlist ] && set_shortlist "$SHORTLIST"
	if [ "$WARMUP" -gt 0 ]; then
		log "mode $mode: warm-up, $WARMUP pods (untimed)"
		timeout -k 10 "$budget" "$BIN/e2ectl" bench --state-dir "$STATE" --mode "$mode" --pods "$WARMUP" \
			--workers "$WORKERS" --rate "$RATE" --timeout "$TIMEOUT" >&2 ||
			log "mode $mode: warm-up failed (see above); timing it anyway"
		sleep 2 # the deletions' events, past
	fi
	before=$(cpu_snapshot)
	vbefore=$(verb_stats)
	abefore=$(api_stats)
	times >"$STATE.times"
	cbefore=$(child_cpu)
	t0=$(date +%s%N)
	if ! timeout -k 10 "$budget" "$BIN/e2ectl" bench --state-dir "$STATE" --mode "$mode" --pods "$PODS" \
		--workers "$WORKERS" --rate "$RATE" --timeout "$TIMEOUT" --out "$RESULTS" --cpu-groups "$(cpu_groups "$mode")"; then
		log "mode $mode failed (see above); continuing"
		failed=1
	fi
	after=$(cpu_snapshot)
	vafter=$(verb_stats)
	aafter=$(api_stats)
	times >"$STATE.times"
	cafter=$(child_cpu)
	wall=$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')
	{
		printf '%-10s wall %6s s; CPU s:' "$mode" "$wall"
		echo "$after" | while read -r name t; do
			b=$(echo "$before" | awk -v n="$name" '$1 == n { print $2 }')
			awk -v n="$name" -v a="${b:-0}" -v z="${t:-0}" -v k="$tick" \
				'BEGIN { printf " %s %.1f", n, (z - a) / k }'
		done
		awk -v a="${cbefore:-0}" -v z="${cafter:-0}" 'BEGIN { printf " bench-client %.1f", z - a }'
		means "agentsched verbs" "filter prioritize bind" "$vbefore" "$vafter"
		# fast-path stages: mean, and the bucket bound under which 99% fell
		{ echo "$vbefore" | sed 's/^/B /'; echo "$vafter" | sed 's/^/A /'; } | awk '
			NF == 4 { v[$1 " " $2 " " $3] = $4 }
			END { out = ""; np = 0; split("queue_wait evaluate binder api_bind", st, " ")
				for (i = 1; i <= 4; i++) {
					n = v["A " st[i] " count"] - v["B " st[i] " count"]
					if (n <= 0) continue
					if (n > np) np = n
					t = v["A " st[i] " sum"] - v["B " st[i] " sum"]
					p99 = "inf"; best = -1
					for (k in v) {
						split(k, f, " ")
						if (f[1] != "A" || f[2] != st[i] || f[3] !~ /^le=/) continue
						le = substr(f[3], 4)
						if (le == "+Inf") continue
						c = v[k] - v["B " st[i] " " f[3]]
						if (c >= 0.99 * n && (best < 0 || le + 0 < best)) best = le + 0
					}
					if (best >= 0) p99 = sprintf("<%g ms", best * 1000)
					out = out sprintf(" %s %.2f ms (p99 %s)", st[i], t / n * 1000, p99)
				}
				if (out != "") printf ";  fast path (%d pods):%s", np, out }'
		means "API server per write" "create binding event" "$abefore" "$aafter"
		echo
	} >>"$CPU_TABLE"
	[ "$mode" = shortlist ] && set_shortlist 0
done
stop_plain

echo
echo "bench_e2e: $NODES nodes, $PODS pods per mode, $WORKERS client workers, arrival rate $RATE/s (0: max), warm-up $WARMUP pods; $(nproc) cores; load: $(uptime | sed 's/.*load/load/')"
[ -n "$EXTRA_ARGS" ] && echo "agentsched flags added: $EXTRA_ARGS"
echo "kube-scheduler client qps=${SCHED_QPS:-default} burst=${SCHED_BURST:-default} (both instances); bench client qps 20000 burst 40000; (b') extender.shortlist $SHORTLIST"
[ ${#VC_UP[@]} -gt 0 ] && echo "vc-agent-scheduler: Volcano's agent-scheduler.conf, --scheduler-worker-count $VC_AGENT_WORKERS, default client qps 2000 burst 2000"
[ -s "$RESULTS" ] && "$BIN/e2ectl" bench table --in "$RESULTS"
echo
echo "CPU per mode (whole mode: creates, scheduling, cleanup wait), per process group:"
cat "$CPU_TABLE"
exit $failed
