#!/usr/bin/env bash
# bench_volcano.sh - what Volcano's extender path costs on a realistic
# cluster: the real vc-scheduler with deploy/volcano/volcano-scheduler.conf,
# agentsched behind its extender plugin (a benchmark, not a test; not in CI).
#
#   test/bench/bench_volcano.sh [--nodes 1000] [--gpu-nodes 4] [--gpus 4]
#                               [--share 600] [--unfit 46] [--stream 2]
#                               [--sessions 5] [--warmup 1] [--healthz-calls 20000]
#                               [--replay-calls 5000]
#                               [--no-proxy] [--no-baseline]
#                               [--layout sidecar] [--state-dir build/bench-volcano]
#
# One run, one dev-cluster (test/e2e/dev-cluster up --volcano: Volcano's
# CRDs, vc-controller-manager, vc-scheduler with the shipped conf, only
# extender.urlPrefix pointed at this agentsched). The layout is the one the
# shipped conf describes as its default: agentsched beside the scheduler,
# plain HTTP on loopback (the sidecar layout; --layout standalone for the
# HTTPS Deployment). Steps:
#   nodes    --nodes Node objects as a real kubelet writes them (`e2ectl
#            nodes --kubelet-like`: 5 conditions, addresses, 50 images with
#            sizes, zone/region/instance-type labels, nodeInfo,
#            daemonEndpoints), 16 cpu / 64Gi / 110 pods each; the first
#            --gpu-nodes with --gpus nvidia.com/gpu devices, on which the
#            harness's gpu-share advertiser writes agentsched.io/gpu-milli
#   fill     every device filled with --share milli-GPU Volcano pods
#            (floor(1000/share) per device), waited for until bound
#   unfit    --unfit more such pods, which no device can take (Volcano's
#            per-node sums may still see room: agentsched's predicate says no)
#   stream   CPU-only Volcano pods at --stream pods/s through every phase
#            (they fit; the shipped managedResources never send them to
#            agentsched)
#   (a)      --sessions vc-scheduler sessions with the shipped conf, after
#            --warmup (1) to warm up (each phase starts as a session
#            ends): session latency (vc-scheduler's own
#            volcano_e2e_scheduling_latency_milliseconds, sum/count), its CPU
#            per session, agentsched's CPU per session, its Volcano calls per
#            verb (agentsched_volcano_answers_total) per session and per
#            second, how its memos took the task Pods and NodeInfos,
#            agentsched CPU per predicate call (all its CPU over the
#            phase divided by the predicate calls; "net" also subtracts
#            agentsched's CPU rate of phase (b), where it gets no calls),
#            TIME-WAIT sockets at the end (all, and those on agentsched's
#            port)
#   healthz  vc-scheduler paused (SIGSTOP; SIGCONT after): `e2ectl http-load`
#            GETs agentsched's /healthz --healthz-calls times, 16 in
#            parallel, a new connection per call (the pattern the plugin ends
#            up with: Go's default transport keeps two idle connections per
#            host), agentsched's CPU delta over it (less its idle rate over
#            5 s before) per call; RATIO = predicate CPU per call / healthz
#            CPU per call. After the bytes phase (which runs first), the
#            first 64 predicate bodies vc-scheduler sent are POSTed
#            --replay-calls times in turn in the same pattern: agentsched's
#            CPU per predicate call alone (no prioritize, no session), and
#            its RATIO to /healthz
#   bytes    mean request (and response) body per verb: from agentsched's
#            agentsched_volcano_request_bytes_total{verb} over (a) when it
#            has that counter; and, unless --no-proxy, from a separate short
#            phase (never timed) where vc-scheduler is restarted with
#            urlPrefix pointed at `e2ectl body-proxy`, a logging reverse
#            proxy in front of agentsched, for one session
#   (b)      vc-scheduler restarted with the same conf minus the extender
#            plugin (Volcano alone): the same figures, and what becomes of
#            the unfit pods (Volcano's per-node sums bind some of them onto
#            devices agentsched would refuse; the rest stay pending)
# Each restart is `dev-cluster vc-scheduler-kill` then `vc-scheduler-start
# --volcano-conf FILE`; the output says so. The figures go to stdout and to
# STATE.results.txt; the cluster is torn down at the end, also on failure.
#
# Environment: AGENTSCHED_BIN (default build-rel/agentsched, a Release
# build: cmake -S . -B build-rel -DCMAKE_BUILD_TYPE=Release && cmake --build
# build-rel --target agentsched), E2E_BIN_DIR (e2ectl with vc-pods,
# http-load and body-proxy, and the Volcano binaries), VOLCANO_SRC,
# SAVE_MAX (predicate bodies the proxy keeps, default 64, all replayed
# in turn: their file names go on one command line, so a few hundred at
# most; a larger number is for reading them under STATE/bodies before
# the teardown).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
E2E=$REPO/test/e2e
BIN=${E2E_BIN_DIR:-$E2E/bin}
case "$BIN" in /*) ;; *) BIN=$PWD/$BIN ;; esac
export E2E_BIN_DIR=$BIN
NODES=1000
GPU_NODES=4
GPUS=4
SHARE=600
UNFIT=46
STREAM=2
SESSIONS=5
WARMUP=1
HEALTHZ_CALLS=20000
REPLAY_CALLS=5000
PROXY=1
BASELINE=1
LAYOUT=sidecar
STATE=$REPO/build/bench-volcano
export AGENTSCHED_BIN=${AGENTSCHED_BIN:-$REPO/build-rel/agentsched}
export E2E_SKIP_BUILD=${E2E_SKIP_BUILD:-1}
export VOLCANO_SRC=${VOLCANO_SRC:-$REPO/../shared/volcano}

while [ $# -gt 0 ]; do
	case "$1" in
	--nodes) NODES=$2; shift 2 ;;
	--gpu-nodes) GPU_NODES=$2; shift 2 ;;
	--gpus) GPUS=$2; shift 2 ;;
	--share) SHARE=$2; shift 2 ;;
	--unfit) UNFIT=$2; shift 2 ;;
	--stream) STREAM=$2; shift 2 ;;
	--sessions) SESSIONS=$2; shift 2 ;;
	--warmup) WARMUP=$2; shift 2 ;;
	--healthz-calls) HEALTHZ_CALLS=$2; shift 2 ;;
	--replay-calls) REPLAY_CALLS=$2; shift 2 ;;
	--no-proxy) PROXY=0; shift ;;
	--no-baseline) BASELINE=0; shift ;;
	--layout) LAYOUT=$2; shift 2 ;;
	--state-dir) STATE=$2; shift 2 ;;
	-h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
	*) echo "bench_volcano: unknown option $1 (see --help)" >&2; exit 2 ;;
	esac
done
case "$STATE" in /*) ;; *) STATE=$PWD/$STATE ;; esac
[ "$SHARE" -ge 1 ] && [ "$SHARE" -le 1000 ] || { echo "bench_volcano: --share takes 1..1000" >&2; exit 2; }
[ "$GPU_NODES" -le "$NODES" ] || { echo "bench_volcano: --gpu-nodes exceeds --nodes" >&2; exit 2; }
[ -x "$AGENTSCHED_BIN" ] || { echo "bench_volcano: no agentsched at $AGENTSCHED_BIN (build it, see --help)" >&2; exit 2; }
[[ $("$BIN/e2ectl" 2>&1 || true) == *http-load* ]] || { echo "bench_volcano: $BIN/e2ectl has no http-load: build e2ectl (see --help)" >&2; exit 2; }
log() { printf '[bench_volcano %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
OUT=$STATE.results.txt
: >"$OUT"
say() { printf '%s\n' "$*" | tee -a "$OUT"; }
T_START=$SECONDS

STREAM_PID="" PROXY_PID="" PAUSED=""
finish() {
	local rc=$?
	[ -n "$PAUSED" ] && kill -CONT -- "-$PAUSED" 2>/dev/null
	for p in $STREAM_PID $PROXY_PID; do
		kill -TERM "$p" 2>/dev/null && wait "$p" 2>/dev/null
	done
	bash "$E2E/dev-cluster" down --state-dir "$STATE" >&2 || rc=1
	exit $rc
}
trap finish EXIT
trap 'exit 130' INT TERM

mkdir -p "$(dirname "$STATE")"
bash "$E2E/dev-cluster" up --layout "$LAYOUT" --volcano --nodes 0 --state-dir "$STATE" >&2
# shellcheck disable=SC1091
. "$STATE/env"
export KUBECONFIG
KUBECTL=$BIN/kubectl
TLS_ARGS=()
[ -n "$AGENTSCHED_CA" ] && TLS_ARGS=(--ca "$AGENTSCHED_CA" --cert "$AGENTSCHED_CLIENT_CERT" --key "$AGENTSCHED_CLIENT_KEY")
CURL_TLS=()
[ -n "$AGENTSCHED_CA" ] && CURL_TLS=(--cacert "$AGENTSCHED_CA" --cert "$AGENTSCHED_CLIENT_CERT" --key "$AGENTSCHED_CLIENT_KEY")
AS_PORT=${AGENTSCHED_URL##*:}
tick=$(getconf CLK_TCK)

t0=$SECONDS
"$BIN/e2ectl" nodes --kubeconfig "$KUBECONFIG" --count "$NODES" --cpu 16 --memory 64Gi --pods 110 \
	--gpus "$GPUS" --gpu-nodes "$GPU_NODES" --kubelet-like >&2
nodes_s=$((SECONDS - t0))
node_bytes=$("$KUBECTL" get node node-0000 -o json | wc -c)

# CPU ticks (user+system, waited-for children included) of a process group.
cpu_of_group() {
	local t=0 pid f
	for pid in $(pgrep -g "$1" 2>/dev/null); do
		f=$(cut -d' ' -f14-17 "/proc/$pid/stat" 2>/dev/null) || continue
		set -- $f
		t=$((t + $1 + $2 + $3 + $4))
	done
	echo "$t"
}
pid_of() { cat "$STATE/pids/$1"; }
# vc_lat: "COUNT SUM" of vc-scheduler's session latency histogram (ms).
vc_lat() {
	curl -s "$VC_SCHEDULER_METRICS_URL" 2>/dev/null | awk '
		$1 == "volcano_e2e_scheduling_latency_milliseconds_count" { c = $2 }
		$1 == "volcano_e2e_scheduling_latency_milliseconds_sum" { s = $2 }
		END { printf "%d %s\n", c, (s == "" ? 0 : s) }'
}
vc_count() { vc_lat | cut -d' ' -f1; }
# vc_errors: "VERB N" failed extender calls so far, from vc-scheduler's log
# (its plugin logs "<Verb> failed with error ...": e.g. httpTimeout exceeded).
vc_errors() {
	{ grep -o 'extender.go:[0-9]*\] [A-Za-z]* failed' "$STATE/logs/vc-scheduler.log" 2>/dev/null || true; } |
		awk '{ n[$2]++ } END { for (v in n) print v, n[v] }'
}
# as_verbs: "calls VERB N" (answers, every result), "bytes VERB N"
# (request bytes, when agentsched counts them) and "memo KIND:RESULT N"
# (its memos of task Pods and NodeInfos) from agentsched's /metrics.
as_verbs() {
	curl -s "${CURL_TLS[@]}" "$AGENTSCHED_URL/metrics" 2>/dev/null | awk '
		/^agentsched_volcano_answers_total\{/ { split($1, a, "\""); t["calls " a[2]] += $2 }
		/^agentsched_volcano_request_bytes_total\{/ { split($1, a, "\""); t["bytes " a[2]] += $2 }
		/^agentsched_volcano_pod_memo_total\{/ { split($1, a, "\""); t["memo pod:" a[2]] += $2 }
		/^agentsched_volcano_node_memo_total\{/ { split($1, a, "\""); t["memo node:" a[2]] += $2 }
		END { for (k in t) print k, t[k] }'
}
# wait_sessions N TIMEOUT_S: until vc-scheduler has finished N more sessions.
wait_sessions() {
	local want=$(( $(vc_count) + $1 )) end=$((SECONDS + $2))
	while [ "$(vc_count)" -lt "$want" ]; do
		[ "$SECONDS" -lt "$end" ] || { log "vc-scheduler finished fewer than $1 sessions in $2 s (log: $STATE/logs/vc-scheduler.log)"; return 1; }
		sleep 0.5
	done
}
# vc_restart CONF: vc-scheduler killed and started with --scheduler-conf CONF
# (in a folder of its own), then its metrics endpoint awaited.
vc_restart() {
	bash "$E2E/dev-cluster" vc-scheduler-kill --state-dir "$STATE" >&2
	bash "$E2E/dev-cluster" vc-scheduler-start --state-dir "$STATE" --volcano-conf "$1" >&2
	"$BIN/e2ectl" wait-url --url "$VC_SCHEDULER_METRICS_URL" --timeout 180s --pid "$(pid_of vc-scheduler)" >&2
}
tw_all() { echo $(( $(ss -tan state time-wait | wc -l) - 1 )); }
tw_port() { echo $(( $(ss -tan state time-wait "( sport = :$AS_PORT or dport = :$AS_PORT )" | wc -l) - 1 )); }
pods_where() { # PREFIX -> "bound N pending M"
	"$KUBECTL" get pods -n vcbench -l "agentsched.io/vcbench=$1" -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' |
		awk 'NF { b++ } !NF { p++ } END { printf "bound %d pending %d\n", b, p }'
}
pg_phases() {
	"$KUBECTL" get podgroups -n vcbench -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}' 2>/dev/null |
		sort | uniq -c | awk '{ printf "%s%s %d", (NR > 1 ? ", " : ""), ($2 == "" ? "none" : $2), $1 }'
}
session_wait_s=$(( 60 + NODES / 10 ))

# Wait for the advertiser's share resource on the GPU nodes.
for _ in $(seq 1 120); do
	n=$("$KUBECTL" get nodes -o jsonpath='{range .items[*]}{.status.allocatable.agentsched\.io/gpu-milli}{"\n"}{end}' | grep -c . || true)
	[ "$n" -ge "$GPU_NODES" ] && break
	sleep 1
done
log "$n nodes advertise agentsched.io/gpu-milli"
per_dev=$((1000 / SHARE))
FILL=$((GPU_NODES * GPUS * per_dev))
"$BIN/e2ectl" vc-pods --kubeconfig "$KUBECONFIG" --prefix fill --count "$FILL" --gpu-milli "$SHARE" \
	--wait-bound "$((120 + NODES / 20))s" >&2
"$BIN/e2ectl" vc-pods --kubeconfig "$KUBECONFIG" --prefix unfit --count "$UNFIT" --gpu-milli "$SHARE" >&2
if [ "$STREAM" != 0 ]; then
	"$BIN/e2ectl" vc-pods --kubeconfig "$KUBECONFIG" --prefix stream --count 0 --rate "$STREAM" >&2 &
	STREAM_PID=$!
fi
log "warming up: $WARMUP sessions with the unfit pods pending"
wait_sessions "$WARMUP" "$((WARMUP * session_wait_s))"

# measure LABEL: SESSIONS sessions of the running vc-scheduler; sets M_*.
measure() {
	local vpid apid l0 l1 c0 c1 a0 a1 w0 v0 v1
	vpid=$(pid_of vc-scheduler) apid=$(pid_of agentsched)
	e0=$(vc_errors) l0=$(vc_lat) v0=$(as_verbs)
	c0=$(cpu_of_group "$vpid") a0=$(cpu_of_group "$apid") w0=$(date +%s%N)
	wait_sessions "$SESSIONS" "$((SESSIONS * session_wait_s))" || return 1
	l1=$(vc_lat) v1=$(as_verbs) e1=$(vc_errors)
	c1=$(cpu_of_group "$vpid") a1=$(cpu_of_group "$apid")
	M_WALL=$(awk -v a="$w0" -v b="$(date +%s%N)" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')
	read -r M_N M_LAT <<<"$(awk -v a="$l0" -v b="$l1" 'BEGIN { split(a, x, " "); split(b, y, " ")
		n = y[1] - x[1]; printf "%d %.0f\n", n, (n > 0 ? (y[2] - x[2]) / n : 0) }')"
	M_VC_CPU=$(awk -v a="$c0" -v b="$c1" -v k="$tick" 'BEGIN { printf "%.2f", (b - a) / k }')
	M_AS_CPU=$(awk -v a="$a0" -v b="$a1" -v k="$tick" 'BEGIN { printf "%.2f", (b - a) / k }')
	# "VERB calls bytes" deltas
	M_VERBS=$({ echo "$v0" | sed 's/^/B /'; echo "$v1" | sed 's/^/A /'; } | awk '
		NF == 4 { v[$1 " " $2 " " $3] = $4; verbs[$3] = 1 }
		END { for (x in verbs) { c = v["A calls " x] - v["B calls " x]; b = v["A bytes " x] - v["B bytes " x]
			if (c > 0) print x, c, b } }' | sort)
	M_MEMO=$({ echo "$v0" | sed 's/^/B /'; echo "$v1" | sed 's/^/A /'; } | awk '
		$2 == "memo" { v[$1 " " $3] = $4; k[$3] = 1 }
		END { for (x in k) { d = v["A " x] - v["B " x]; if (d > 0) printf "%s%s %d", (n++ ? ", " : ""), x, d } }')
	M_PRED=$(echo "$M_VERBS" | awk '$1 == "predicate" { p = $2 } END { print p + 0 }')
	M_CALLS=$(echo "$M_VERBS" | awk '{ t += $2 } END { print t + 0 }')
	M_ERRS=$({ echo "$e0" | sed 's/^/B /'; echo "$e1" | sed 's/^/A /'; } | awk '
		NF == 3 { v[$1 " " $2] = $3; k[$2] = 1 }
		END { for (x in k) { d = v["A " x] - v["B " x]; if (d > 0) printf "%s%s %d", (n++ ? ", " : ""), x, d } }')
}
report() { # LABEL
	say "$1: $M_N sessions in $M_WALL s; session latency (vc-scheduler's histogram) mean $M_LAT ms"
	say "  vc-scheduler CPU $(awk -v c="$M_VC_CPU" -v n="$M_N" -v w="$M_WALL" 'BEGIN { printf "%.2f s per session (%.0f%% of a core)", c / n, 100 * c / w }')"
	say "  agentsched CPU $(awk -v c="$M_AS_CPU" -v n="$M_N" -v w="$M_WALL" 'BEGIN { printf "%.3f s per session (%.1f%% of a core)", c / n, 100 * c / w }')"
	if [ "$M_CALLS" -gt 0 ]; then
		echo "$M_VERBS" | while read -r verb calls bytes; do
			say "$(awk -v v="$verb" -v c="$calls" -v b="$bytes" -v n="$M_N" -v w="$M_WALL" 'BEGIN {
				printf "  %-15s %8d calls: %.0f per session, %.0f/s", v, c, c / n, c / w
				if (b > 0) printf "; request body mean %.0f bytes (agentsched_volcano_request_bytes_total)", b / c }')"
		done
	else
		say "  no Volcano verb reached agentsched"
	fi
	[ -z "$M_MEMO" ] || say "  agentsched's memos (task Pods pod:, NodeInfos node:): $M_MEMO"
	[ -z "$M_ERRS" ] || say "  extender calls vc-scheduler logged as failed (e.g. extender.httpTimeout exceeded): $M_ERRS"
}

# ---- (a) the shipped conf, agentsched behind the extender plugin
log "phase (a): $SESSIONS sessions, shipped conf"
measure
A_N=$M_N A_WALL=$M_WALL A_AS_CPU=$M_AS_CPU A_PRED=$M_PRED A_CALLS=$M_CALLS
A_TW_ALL=$(tw_all) A_TW_PORT=$(tw_port)
say "bench_volcano: $NODES kubelet-like nodes (node-0000 is $node_bytes bytes of JSON; registered in ${nodes_s}s), $GPU_NODES with $GPUS GPUs,"
say "  $FILL fill pods of $SHARE milli-GPU bound, $UNFIT more pending that no device fits, CPU-only stream at $STREAM pods/s;"
say "  layout $LAYOUT, agentsched at $AGENTSCHED_URL ($AGENTSCHED_BIN), $(nproc) cores, $(uptime | sed 's/.*load/load/')"
report "(a) shipped conf, agentsched behind the extender plugin"
say "  unfit pods: $(pods_where unfit); PodGroups in vcbench: $(pg_phases)"
say "  TIME-WAIT sockets at the end of (a): $A_TW_ALL on the machine, $A_TW_PORT on agentsched's port $AS_PORT"

# ---- bytes per verb through a logging proxy (separate, untimed); it also
# keeps the first predicate bodies, replayed below
BODIES=$STATE/bodies
if [ "$PROXY" = 1 ]; then
	pport=$("$BIN/e2ectl" freeports 1)
	pconf=$STATE/volcano-conf-proxy/volcano-scheduler.conf
	mkdir -p "$(dirname "$pconf")"
	sed "s#^\( *extender.urlPrefix: \).*#\1http://127.0.0.1:$pport/volcano#" "$STATE/volcano-conf/volcano-scheduler.conf" >"$pconf"
	"$BIN/e2ectl" body-proxy --listen "127.0.0.1:$pport" --target "$AGENTSCHED_URL" "${TLS_ARGS[@]}" \
		--save-dir "$BODIES" --save-max ${SAVE_MAX:-64} >"$STATE.proxy.txt" &
	PROXY_PID=$!
	log "bytes: vc-scheduler restarted with urlPrefix http://127.0.0.1:$pport/volcano (e2ectl body-proxy -> agentsched)"
	vc_restart "$pconf"
	wait_sessions 1 "$session_wait_s" || true
	# paused before the proxy goes (its calls would fail meanwhile)
	VPID=$(pid_of vc-scheduler)
	kill -STOP -- "-$VPID"
	PAUSED=$VPID
	kill -TERM "$PROXY_PID"; wait "$PROXY_PID" || true
	PROXY_PID=""
	say "bytes per verb (a separate phase: vc-scheduler restarted with urlPrefix pointed at e2ectl body-proxy, a logging reverse proxy to agentsched; 1 session):"
	if [ -s "$STATE.proxy.txt" ]; then
		while read -r verb _ calls _ req _ resp _ rmean _ smean; do
			say "$(printf '  %-15s %6d calls, request body mean %8.0f bytes, response mean %6.0f bytes' "$verb" "$calls" "$rmean" "$smean")"
		done <"$STATE.proxy.txt"
	else
		say "  no calls went through the proxy"
	fi
fi

# ---- healthz: agentsched's cost per connection+request, Volcano's pattern;
# then the saved predicate bodies replayed in the same pattern
VPID=$(pid_of vc-scheduler) APID=$(pid_of agentsched)
if [ -z "$PAUSED" ]; then
	kill -STOP -- "-$VPID"
	PAUSED=$VPID
fi
sleep 1
i0=$(cpu_of_group "$APID") iw0=$(date +%s%N)
sleep 5
i1=$(cpu_of_group "$APID") iw1=$(date +%s%N)
# load URL CALLS [http-load flags]: sets L_OUT, L_US (agentsched CPU per
# call less its idle rate), L_RAW_US
load() {
	local u=$1 n=$2 c0 c1 w0 w1
	shift 2
	c0=$(cpu_of_group "$APID") w0=$(date +%s%N)
	L_OUT=$("$BIN/e2ectl" http-load --url "$u" --parallel 16 --conns-per-call --count "$n" "${TLS_ARGS[@]}" "$@")
	c1=$(cpu_of_group "$APID") w1=$(date +%s%N)
	read -r L_US L_RAW_US <<<"$(awk -v i0="$i0" -v i1="$i1" -v iw0="$iw0" -v iw1="$iw1" -v h0="$c0" -v h1="$c1" \
		-v hw0="$w0" -v hw1="$w1" -v k="$tick" -v n="$n" 'BEGIN {
		idle = (i1 - i0) / k / ((iw1 - iw0) / 1e9); cpu = (h1 - h0) / k; wall = (hw1 - hw0) / 1e9
		net = cpu - idle * wall; if (net < 0) net = 0
		printf "%.1f %.1f\n", net / n * 1e6, cpu / n * 1e6 }')"
}
IDLE_PCT=$(awk -v i0="$i0" -v i1="$i1" -v iw0="$iw0" -v iw1="$iw1" -v k="$tick" \
	'BEGIN { printf "%.2f", 100 * (i1 - i0) / k / ((iw1 - iw0) / 1e9) }')
load "$AGENTSCHED_URL/healthz" "$HEALTHZ_CALLS"
H_US=$L_US
say "healthz (vc-scheduler paused): $L_OUT"
say "  agentsched CPU per /healthz call: $H_US us (raw $L_RAW_US us; its idle rate ${IDLE_PCT}% of a core subtracted)"
if [ -n "$(ls "$BODIES"/predicate-*.json 2>/dev/null)" ]; then
	load "$AGENTSCHED_URL/volcano/predicate" "$REPLAY_CALLS" --body-files "$(ls "$BODIES"/predicate-*.json | paste -sd,)"
	say "predicate replay (vc-scheduler paused; the first bodies the proxy saw, in turn): $L_OUT"
	say "  agentsched CPU per predicate call: $L_US us (raw $L_RAW_US us); RATIO to /healthz: $(awk -v r="$L_US" -v h="$H_US" 'BEGIN { printf "%.2f", (h > 0 ? r / h : 0) }')"
fi
kill -CONT -- "-$VPID"
PAUSED=""

# ---- (b) Volcano alone: the same conf without the extender plugin
if [ "$BASELINE" = 1 ]; then
	bconf=$STATE/volcano-conf-baseline/volcano-scheduler.conf
	mkdir -p "$(dirname "$bconf")"
	awk '/^  - name: extender$/ { skip = 1; next }
		skip && /^  - name:|^- |^[a-z]/ { skip = 0 }
		!skip' "$STATE/volcano-conf/volcano-scheduler.conf" >"$bconf"
	! grep -q '^ *extender\.urlPrefix' "$bconf" || { log "could not remove the extender plugin from the conf"; exit 1; }
	log "phase (b): vc-scheduler restarted with the conf minus the extender plugin"
	vc_restart "$bconf"
	wait_sessions "$WARMUP" "$((WARMUP * session_wait_s))"
	measure
	say "(b) restarted vc-scheduler with the same conf minus the extender plugin ($(diff "$STATE/volcano-conf/volcano-scheduler.conf" "$bconf" | grep -c '^<') lines removed):"
	report "(b) Volcano alone"
	say "  unfit pods: $(pods_where unfit) (bound ones sit on devices agentsched's predicate refused: Volcano alone checks per-node sums only); PodGroups: $(pg_phases)"
	B_RATE=$(awk -v c="$M_AS_CPU" -v w="$M_WALL" 'BEGIN { print c / w }')
else
	B_RATE=0
fi

# ---- the ratios
read -r P_US P_NET_US RATIO RATIO_NET <<<"$(awk -v c="$A_AS_CPU" -v n="$A_PRED" -v w="$A_WALL" -v bg="$B_RATE" -v h="$H_US" 'BEGIN {
	if (n <= 0) { print "- - - -"; exit }
	p = c / n * 1e6; net = (c - bg * w); if (net < 0) net = 0; net = net / n * 1e6
	printf "%.1f %.1f %.2f %.2f\n", p, net, (h > 0 ? p / h : 0), (h > 0 ? net / h : 0) }')"
say "agentsched CPU per predicate call in (a): $P_US us (all its CPU / predicate calls; $A_CALLS Volcano calls in all);"
say "  net of its CPU rate in (b) ($(awk -v r="$B_RATE" 'BEGIN { printf "%.1f", r * 100 }')% of a core, no calls): $P_NET_US us"
say "RATIO predicate-CPU-per-call / healthz-CPU-per-call: $RATIO (net: $RATIO_NET; the goal is <= 2)"
say "bench_volcano: done in $((SECONDS - T_START)) s; figures in $OUT"
