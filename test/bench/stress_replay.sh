#!/usr/bin/env bash
# stress_replay.sh - builds the pod-mix variants of the openb default trace
# (stress_variants.py, into build/variants) and replays every one with
# bench_replay: least-allocated, most-allocated, best-fit (the published
# baselines), fgd and fragment at 130% arrival; prints each table, the
# target line per variant and a summary of the goal ratios.
#
# Usage: test/bench/stress_replay.sh [BENCH_REPLAY] [stress_variants.py flags...]
#   BENCH_REPLAY defaults to build-rel/bench_replay, else build/bench_replay.
#   The data folder is AGENTSCHED_OPENB_DIR (default ../shared/data/openb);
#   STRESS_CANDIDATE=POLICY judges that policy (file) in place of fragment.
# Exit status: bench_replay's (1 when a GPU goal is missed on some variant;
# the CPU-only pods ratio is printed there, not judged).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
bench=""
if [ $# -gt 0 ] && [ -x "$1" ]; then
	bench=$1
	shift
fi
for b in "$bench" "$repo/build-rel/bench_replay" "$repo/build/bench_replay"; do
	if [ -n "$b" ] && [ -x "$b" ]; then
		bench=$b
		break
	fi
done
[ -x "$bench" ] || { echo "stress_replay: build bench_replay first" >&2; exit 2; }
export AGENTSCHED_OPENB_DIR=${AGENTSCHED_OPENB_DIR:-$repo/../shared/data/openb}
if [ ! -r "$AGENTSCHED_OPENB_DIR/openb_pod_list_default.csv" ]; then
	echo "stress_replay: no openb data in $AGENTSCHED_OPENB_DIR; skipping"
	exit 0
fi
mapfile -t files < <(python3 "$here/stress_variants.py" --out "$repo/build/variants" "$@")
args=()
for f in "${files[@]}"; do args+=(--pods "$f"); done
exec nice "$bench" "${args[@]}" ${STRESS_CANDIDATE:+--candidate "$STRESS_CANDIDATE"}
