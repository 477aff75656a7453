#!/usr/bin/env bash
# test_cli_flags.sh BINARY - flag parsing of `agentsched shard-controller` and
# `agentsched replay`: unknown flags and positional arguments are named (with
# a hint when close), --log-level takes names and the old numbers, empty and
# out-of-range values are refused with the valid choices, unknown or
# value-missing short options are named from the option itself, and --help
# states defaults and ranges; every command's --help has the Flags: list its
# table generates, and every command refuses a stray argument alike. Usage
# errors exit 2.
set -uo pipefail

BIN=${1:?usage: test_cli_flags.sh path/to/agentsched}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CLUSTER=$ROOT/deploy/examples/cluster.yaml
SHARDING=$ROOT/policy/sharding.yaml
WORK=$(mktemp -d)

cleanup() { rm -rf "$WORK"; }
trap cleanup EXIT

# shellcheck source=cli_lib.sh
source "$ROOT/test/integration/cli_lib.sh"

# ---- shard-controller: unknown flags and positional arguments -----------
SC=(shard-controller --config "$SHARDING" --cluster "$CLUSTER" --once)
expect_exit 2 "shard-controller --bogus" shard-controller --bogus
err_has "unknown flag '--bogus'" "unknown flag is named as unknown"
err_lacks "needs a value" "unknown flag is not said to need a value"
expect_exit 2 "shard-controller --confg=x" shard-controller --confg=x
err_has "unknown flag '--confg'" "unknown flag named without its value"
err_has "did you mean '--config'" "unknown flag hints the closest flag"
expect_exit 2 "shard-controller foo" shard-controller foo
err_has "unexpected argument 'foo'" "positional argument refused as unexpected"
err_lacks "needs a value" "positional argument is not said to need a value"
expect_exit 2 "positional after flags" "${SC[@]}" extra
err_has "unexpected argument 'extra'" "trailing positional argument refused"
expect_exit 2 "shard-controller --config (no value)" shard-controller --config
err_has "--config needs a value" "missing value names the flag"
expect_exit 2 "shard-controller --once=1" shard-controller --once=1
err_has "--once takes no value" "boolean flag with a value refused"

# ---- shard-controller: --log-level and --lease-duration -----------------
for lvl in error warn info debug 0 3; do
    expect_exit 0 "--log-level $lvl accepted" "${SC[@]}" --log-level "$lvl"
done
expect_exit 0 "--log-level=debug accepted" "${SC[@]}" --log-level=debug
expect_exit 2 "--log-level= (empty)" "${SC[@]}" --log-level=
err_has "error, warn, info, debug" "empty --log-level lists the choices"
expect_exit 2 "--log-level loud" "${SC[@]}" --log-level loud
err_has "--log-level" "bad --log-level names the flag"
err_has "error, warn, info, debug" "bad --log-level lists the choices"
expect_exit 2 "--log-level 4" "${SC[@]}" --log-level 4
expect_exit 0 "--lease-duration 30 accepted" "${SC[@]}" --lease-duration 30
expect_exit 2 "--lease-duration= (empty)" "${SC[@]}" --lease-duration=
err_has "2..3600" "empty --lease-duration gives the range"
expect_exit 2 "--lease-duration 1" "${SC[@]}" --lease-duration 1
err_has "--lease-duration" "bad --lease-duration names the flag"
err_has "2..3600" "bad --lease-duration gives the range"
expect_exit 2 "--lease-duration 3601" "${SC[@]}" --lease-duration 3601
expect_exit 2 "--lease-duration 10s" "${SC[@]}" --lease-duration 10s

# ---- shard-controller --help ----------------------------------------------
expect_exit 0 "shard-controller --help" shard-controller --help
out_has "-h, --help" "shard-controller --help lists -h, --help"
out_has "error | warn | info | debug" "shard-controller --help lists the log levels"
out_has "2..3600" "shard-controller --help gives the --lease-duration range"
expect_exit 0 "shard-controller -h" shard-controller -h

# ---- replay: short options are named from the option itself -------------
expect_exit 2 "replay --nodes a -zq" replay --nodes a -zq
err_has "unknown flag '-z'" "unknown short flag is named"
err_lacks "unknown flag 'a'" "the previous argument is not blamed"
expect_exit 2 "replay -zq" replay -zq
err_has "unknown flag '-z'" "unknown short flag in a cluster is named"
expect_exit 2 "replay --bogus=1" replay --bogus=1
err_has "unknown flag '--bogus'" "unknown long flag named without its value"
expect_exit 2 "replay --nodes (no value)" replay --pods p.csv --nodes
err_has "--nodes needs a value" "missing value names the long flag"
expect_exit 2 "replay --help=x" replay --help=x
err_has "--help takes no value" "--help=x explained"
expect_exit 2 "replay --p (ambiguous)" replay --p x
err_has "ambiguous flag '--p'" "ambiguous prefix explained"
expect_exit 2 "replay --inflate 0.5" replay --nodes a --pods b --inflate 0.5
err_has "1 to 100" "bad --inflate gives the range"

# ---- replay --help ----------------------------------------------------------
expect_exit 0 "replay --help" replay --help
out_has "[--policy a,b,c]" "replay usage shows --policy as optional"
out_has "(default fragment)" "replay --help gives the --policy default"
out_has "1..100" "replay --help gives the --inflate range"

# ---- the top-level --help: every command, its summary in one column -------
expect_exit 0 "--help" --help
for cmd in serve place replay shard-controller gpu-share-advertiser version; do
    out_has "  $cmd  " "--help lists $cmd with room before its summary"
done

# ---- every command's --help is generated from its flag table ---------------
for cmd in serve place replay shard-controller gpu-share-advertiser version; do
    expect_exit 0 "$cmd --help" "$cmd" --help
    out_has "Flags:" "$cmd --help has the generated Flags: section"
    out_has "  -h, --help" "$cmd --help lists -h, --help"
    expect_exit 2 "$cmd stray argument" "$cmd" stray
    err_has "agentsched $cmd: unexpected argument 'stray' ($cmd takes only flags)" \
        "$cmd refuses a stray argument in the shared wording"
done

cli_summary
