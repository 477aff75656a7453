#!/usr/bin/env bash
# test_docs.sh BINARY - the reference docs name what the code has, and only
# that: every metric family the source registers is in docs/metrics.md and
# every `agentsched_*` series docs/metrics.md names is registered somewhere
# (so a renamed metric fails here, not on a user's dashboard); what
# `agentsched serve` exports from the sample cluster is documented; every
# flag each command's --help lists is in docs/cli.md, and every flag a
# docs/cli.md table row names is one its command takes; the shipped
# dashboard and alert rules query only registered series (agentsched's own
# are checked against a live /metrics by the unit test
# fastpath_live::dashboard_and_alerts_use_served_metrics).
set -uo pipefail

BIN=${1:?usage: test_docs.sh path/to/agentsched}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
WORK=$(mktemp -d)
METRICS=$ROOT/docs/metrics.md
CLI=$ROOT/docs/cli.md
SERVE_PID=

cleanup() {
    [ -n "$SERVE_PID" ] && kill "$SERVE_PID" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT

# shellcheck source=cli_lib.sh
source "$ROOT/test/integration/cli_lib.sh"

# documented NAME: NAME appears in docs/metrics.md as a whole name (not as
# the prefix of a longer one).
documented() {
    grep -qE "(^|[^a-z0-9_])$1([^a-z0-9_]|\$)" "$METRICS"
}

# ---- the source's metric families against docs/metrics.md --------------
# Families are the string literals that start with agentsched_ in src/ (a
# label set, if any, cut off); "agentsched_commit.h" is an include.
grep -rhoE '"agentsched_[a-z0-9_]+[{"]' "$ROOT/src" | sed -E 's/^"//; s/[{"]$//' |
    sort -u >"$WORK/src"
check "the source registers metric families" test "$(wc -l <"$WORK/src")" -gt 50
missing=
while read -r m; do documented "$m" || missing="$missing $m"; done <"$WORK/src"
check "every registered family is in docs/metrics.md${missing:+ (missing:$missing)}" \
    test -z "$missing"

# The other way: a documented series no source registers is stale. Names
# ending in _ are prefixes (agentsched_shardctl_*); histograms' _bucket,
# _sum and _count series belong to their family.
grep -oE 'agentsched_[a-z0-9_]+' "$METRICS" | grep -v '_$' | sed -E 's/_(bucket|sum|count)$//' |
    sort -u >"$WORK/doc"
stale=$(comm -13 "$WORK/src" "$WORK/doc" | tr '\n' ' ')
check "every series docs/metrics.md names is registered${stale:+ (not in src/: $stale)}" \
    test -z "$stale"

# The shipped dashboard and alert rules query only registered series (the
# controllers' rules included, which serve's /metrics does not have).
for f in "$ROOT"/deploy/dashboards/*.json "$ROOT"/deploy/dashboards/*.yaml; do
    grep -oE 'agentsched_[a-z0-9_]+' "$f" | grep -v '_$' | sed -E 's/_(bucket|sum|count)$//' |
        sort -u >"$WORK/dash"
    unknown=$(comm -13 "$WORK/src" "$WORK/dash" | tr '\n' ' ')
    check "$(basename "$f") queries only registered series${unknown:+ (not in src/: $unknown)}" \
        test -z "$unknown"
done

# ---- what serve exports --------------------------------------------------
"$BIN" serve --cluster "$ROOT/deploy/examples/cluster.yaml" --listen 127.0.0.1:0 \
    >"$WORK/serve.out" 2>"$WORK/serve.err" </dev/null &
SERVE_PID=$!
PORT=$(serving_port "$WORK/serve.err" "$SERVE_PID")
check "serve answers /metrics on the sample cluster" \
    curl -sf "http://127.0.0.1:${PORT:-1}/metrics" -o "$WORK/metrics"
awk '$1 == "#" && $2 == "TYPE" { print $3 }' "$WORK/metrics" 2>/dev/null | sort -u >"$WORK/served"
check "serve exports metric families" test "$(wc -l <"$WORK/served")" -gt 10
missing=
while read -r m; do documented "$m" || missing="$missing $m"; done <"$WORK/served"
check "every family serve exports is in docs/metrics.md${missing:+ (missing:$missing)}" \
    test -z "$missing"
kill "$SERVE_PID" 2>/dev/null
wait "$SERVE_PID" 2>/dev/null
SERVE_PID=

# ---- flags: --help against docs/cli.md -----------------------------------
# docs/cli.md has a section per command ("## `agentsched CMD`"); its table
# rows start with the flag ("| `--flag ...").
section() { # command: that command's section of docs/cli.md
    awk -v h="## \`agentsched $1\`" 'index($0, h) == 1 { on = 1; next }
        /^## / { on = 0 } on' "$CLI"
}
for cmd in serve place replay shard-controller gpu-share-advertiser; do
    "$BIN" "$cmd" --help >"$WORK/help" 2>&1
    sed -n '/^Flags:/,$p' "$WORK/help" | grep -oE '^ +(-[a-zA-Z], )?--[a-z][a-z0-9-]*' |
        grep -oE -- '--[a-z][a-z0-9-]*' | grep -vx -- '--help' | sort -u >"$WORK/flags"
    section "$cmd" >"$WORK/section"
    check "docs/cli.md has a section for $cmd" test -s "$WORK/section"
    check "$cmd --help lists flags" test -s "$WORK/flags"
    missing=
    while read -r f; do
        grep -qE -- "\`$f([ =\`]|\$)" "$WORK/section" || missing="$missing $f"
    done <"$WORK/flags"
    check "every flag of $cmd --help is in its docs/cli.md section${missing:+ (missing:$missing)}" \
        test -z "$missing"
    grep -oE '^\| `--[a-z][a-z0-9-]*' "$WORK/section" | grep -oE -- '--[a-z][a-z0-9-]*' |
        sort -u >"$WORK/rows"
    stale=$(comm -13 "$WORK/flags" "$WORK/rows" | tr '\n' ' ')
    check "every flag row of $cmd in docs/cli.md is a flag it takes${stale:+ (not taken: $stale)}" \
        test -z "$stale"
done

cli_summary
