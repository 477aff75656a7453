#!/usr/bin/env bash
# sync-config.sh - copy kube-scheduler-config.yaml, unchanged, into the
# ConfigMap agent-scheduler-config of agentsched-sidecar.yaml (the block
# under "kube-scheduler-config.yaml: |", indented by four spaces).
#
#   deploy/kube-scheduler/sync-config.sh          rewrite the ConfigMap
#   deploy/kube-scheduler/sync-config.sh --check  exit 1 if they differ
set -euo pipefail
DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$DIR/kube-scheduler-config.yaml
DST=$DIR/agentsched-sidecar.yaml
BEGIN='  kube-scheduler-config.yaml: |'
grep -qxF -- "$BEGIN" "$DST" || { echo "sync-config: no '$BEGIN' line in $DST" >&2; exit 1; }
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
# Keep everything up to the block's first line, then the source indented,
# then everything from the end of the block (the next line not indented by
# four spaces, e.g. the "---" that ends the ConfigMap) on.
awk -v begin="$BEGIN" -v src="$SRC" '
	state == 0 { print; if ($0 == begin) { state = 1; while ((getline l < src) > 0) print (l == "" ? "" : "    " l) } next }
	state == 1 { if ($0 ~ /^    / || $0 == "") next; state = 2 }
	{ print }
' "$DST" >"$tmp"
if [ "${1:-}" = --check ]; then
	if ! cmp -s "$tmp" "$DST"; then
		diff -u "$DST" "$tmp" >&2 || true
		echo "sync-config: $DST's ConfigMap differs from $SRC (run $0)" >&2
		exit 1
	fi
	exit 0
fi
cat "$tmp" >"$DST"
