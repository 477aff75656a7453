#!/usr/bin/env bash
# deploy/test.sh - build and run every test of agentsched.
#
#   deploy/test.sh [--quick] [--no-fuzz] [--no-e2e] [--jobs N] [--prefix NAME]
#
# Stages (each in its own build directory, after a clang-format check of
# every C file):
#   build/       Release          ctest -L unit, -L integration, -L quality
#                                 (the placement goals on the openb traces,
#                                 where they lie beside the repository)
#   build/asan/  ASan + UBSan     ctest -L unit, -L integration
#   build/tsan/  TSan             ctest -L unit  (every unit test: the
#                                 concurrency tests are unit tests), under
#                                 setarch -R where the kernel allows it
#   build/fuzz/  clang libFuzzer  each test/fuzz/fuzz_*.c for FUZZ_SECONDS
#                                 (default 15) on its seed corpus
#   build/       + AGENTSCHED_E2E ctest -L e2e: a real control plane built with
#                                 Go (skipped, loudly, when go is missing)
# All build output stays under build/. --quick runs only the first stage;
# --prefix NAME uses NAME/, NAME/asan/, ... instead of build/, build/asan/,
# ... Prints ctest's summary per stage
# (and each failed test's whole output) and a final table; exits non-zero
# when any stage failed.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
JOBS=$(nproc 2>/dev/null || echo 2)
QUICK=0
FUZZ=1
E2E=1
FUZZ_SECONDS=${FUZZ_SECONDS:-15}
P=build
while [ $# -gt 0 ]; do
    case "$1" in
    --quick) QUICK=1 ;;
    --no-fuzz) FUZZ=0 ;;
    --no-e2e) E2E=0 ;;
    --jobs) JOBS=$2; shift ;;
    --prefix) P=$2; shift ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "test.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
    esac
    shift
done

declare -a RESULTS=()
FAILED=0
record() { # name status seconds
    RESULTS+=("$(printf '%-34s %-6s %5ss' "$1" "$2" "$3")")
    [ "$2" = ok ] || [ "$2" = skip ] || FAILED=1
}

configure_build() { # dir cmake-args...
    local dir=$1
    shift
    cmake -S "$ROOT" -B "$ROOT/$dir" -G Ninja "$@" >/dev/null || return 2
    # -k 0: build everything that can be built, so one broken test source
    # does not hide the results of all the others.
    cmake --build "$ROOT/$dir" -j "$JOBS" -- -k 0
}

# The tail above can lose a failed test's output among the later tests'
# lines (ctest -j interleaves them), so print each failed test's whole
# output again from ctest's own log, up to 150 lines per test.
print_failed_output() { # dir
    local tmp=$1/Testing/Temporary name
    [ -f "$tmp/LastTestsFailed.log" ] && [ -f "$tmp/LastTest.log" ] || return 0
    while IFS= read -r name || [ -n "$name" ]; do
        name=${name#*:}
        echo "--- output of failed test $name:"
        awk -v n="$name" '
            $0 ~ /^[0-9]+\/[0-9]+ Test: / && $3 == n { on = 1 }
            on { print }
            on && index($0, "\"" n "\" end time:") == 1 { on = 0 }
        ' "$tmp/LastTest.log" | head -n 150
    done <"$tmp/LastTestsFailed.log"
}

run_ctest() { # dir label
    local dir=$1 label=$2 t0 rc logs
    t0=$(date +%s)
    echo "=== $dir: ctest -L $label"
    # Sanitizer reports go to files: Criterion runs each test in a child and
    # does not fail a test whose child reports a leak at exit, so the files
    # are what tells.
    logs="$ROOT/$dir/sanitizer-logs/$label"
    rm -rf "$logs"
    mkdir -p "$logs"
    ASAN_OPTIONS="$ASAN_OPTIONS:log_path=$logs/asan" \
        UBSAN_OPTIONS="$UBSAN_OPTIONS:log_path=$logs/ubsan" \
        TSAN_OPTIONS="$TSAN_OPTIONS:log_path=$logs/tsan" \
        "${WRAP[@]}" ctest --test-dir "$ROOT/$dir" -L "^$label\$" --output-on-failure --no-tests=ignore \
        -j "$JOBS" 2>&1 | tail -n 80
    rc=${PIPESTATUS[0]}
    [ "$rc" -eq 0 ] || print_failed_output "$ROOT/$dir"
    if [ -n "$(ls -A "$logs")" ]; then
        echo "--- sanitizer reports in $logs:"
        for f in "$logs"/*; do
            echo "--- $f"
            head -n 60 "$f"
        done
        rc=1
    fi
    record "$dir ctest -L $label" "$([ "$rc" -eq 0 ] && echo ok || echo FAIL)" "$(($(date +%s) - t0))"
}

stage() { # dir labels... -- cmake args
    local dir=$1 t0
    shift
    local labels=()
    while [ "$1" != -- ]; do labels+=("$1"); shift; done
    shift
    t0=$(date +%s)
    echo "=== building $dir"
    configure_build "$dir" "$@"
    case $? in
    0) record "$dir build" ok "$(($(date +%s) - t0))" ;;
    2)
        record "$dir configure" FAIL "$(($(date +%s) - t0))"
        return
        ;;
    *) record "$dir build (some targets)" FAIL "$(($(date +%s) - t0))" ;;
    esac
    for l in "${labels[@]}"; do run_ctest "$dir" "$l"; done
}

# Sanitizers: fail on the first report, with stacks (reports are also
# written to <build>/sanitizer-logs/<label>/, see run_ctest).
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}

# Prefix for ctest (the TSan stage sets it, see below).
WRAP=()

# House style: every C source and header as .clang-format formats it.
format_check() {
    local t0 bad=() f
    t0=$(date +%s)
    if ! command -v clang-format >/dev/null; then
        echo "=== clang-format not installed (deploy/setup.sh installs it): style not checked"
        record "clang-format" skip 0
        return
    fi
    echo "=== clang-format --dry-run on src/, include/, test/"
    while IFS= read -r f; do
        clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
    done < <(find "$ROOT/src" "$ROOT/include" "$ROOT/test" -name '*.[ch]' \
        -not -path "$ROOT/test/e2e/*" | sort)
    if [ "${#bad[@]}" -gt 0 ]; then
        printf 'not formatted (run clang-format -i on them): %s\n' "${bad[*]#"$ROOT/"}"
        record "clang-format" FAIL "$(($(date +%s) - t0))"
    else
        record "clang-format" ok "$(($(date +%s) - t0))"
    fi
}
format_check

# The sidecar's ConfigMap holds deploy/kube-scheduler/kube-scheduler-config.yaml
# unchanged (also checked, with more, by the e2e harness's go test).
if "$ROOT/deploy/kube-scheduler/sync-config.sh" --check; then
    record "sidecar ConfigMap in sync" ok 0
else
    record "sidecar ConfigMap in sync" FAIL 0
fi

stage "$P" unit integration -- -DCMAKE_BUILD_TYPE=Release -DAGENTSCHED_E2E=OFF
# The placement-quality goals on the openb traces, where they lie beside
# the repository (../shared/data/openb, or AGENTSCHED_OPENB_DIR).
# (The list is read whole before it is searched: with pipefail, grep -q
# leaving early could fail ctest on SIGPIPE and skip the stage.)
quality_tests=$(ctest --test-dir "$ROOT/$P" -N -L '^quality$' 2>/dev/null)
if grep -q 'quality/' <<<"$quality_tests"; then
    run_ctest "$P" quality
else
    echo "=== quality: SKIPPED: no openb traces in ../shared/data/openb (AGENTSCHED_OPENB_DIR)"
    record "$P ctest -L quality (no data)" skip 0
fi
if [ "$QUICK" -eq 0 ]; then
    stage "$P/asan" unit integration -- -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DAGENTSCHED_SANITIZE=address,undefined -DAGENTSCHED_BENCH=OFF
    # GCC 12's TSan aborts at start-up now and then ("unexpected memory
    # mapping") on kernels whose address randomisation uses more bits than
    # its shadow layout allows (vm.mmap_rnd_bits > 28), failing whichever
    # test binary drew a bad layout. Run its tests without randomisation
    # where the kernel lets us (setarch -R), the usual workaround; this does
    # not hide a race report, which does not depend on the layout.
    if setarch "$(uname -m)" -R true 2>/dev/null; then
        WRAP=(setarch "$(uname -m)" -R)
    fi
    stage "$P/tsan" unit -- -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DAGENTSCHED_SANITIZE=thread -DAGENTSCHED_BENCH=OFF
    WRAP=()
    if [ "$FUZZ" -eq 1 ] && ls "$ROOT"/test/fuzz/fuzz_*.c >/dev/null 2>&1; then
        t0=$(date +%s)
        echo "=== building $P/fuzz"
        if configure_build "$P/fuzz" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAGENTSCHED_FUZZ=ON \
            -DCMAKE_C_COMPILER=clang; then
            record "$P/fuzz build" ok "$(($(date +%s) - t0))"
            for src in "$ROOT"/test/fuzz/fuzz_*.c; do
                name=$(basename "$src" .c)
                t0=$(date +%s)
                corpus="$ROOT/test/fuzz/corpus/${name#fuzz_}"
                [ -d "$corpus" ] || corpus="$ROOT/test/fuzz/corpus/$name"
                work=$(mktemp -d)
                args=(-max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048
                    -artifact_prefix="$work/")
                echo "=== fuzzing $name for ${FUZZ_SECONDS}s"
                if [ -d "$corpus" ]; then
                    "$ROOT/$P/fuzz/$name" "${args[@]}" "$work" "$corpus" >"$work/log" 2>&1
                else
                    "$ROOT/$P/fuzz/$name" "${args[@]}" "$work" >"$work/log" 2>&1
                fi
                rc=$?
                tail -n 3 "$work/log"
                if [ "$rc" -ne 0 ]; then
                    tail -n 40 "$work/log"
                    ls "$work"/crash-* "$work"/leak-* "$work"/timeout-* 2>/dev/null
                fi
                record "fuzz $name" "$([ "$rc" -eq 0 ] && echo ok || echo FAIL)" \
                    "$(($(date +%s) - t0))"
                rm -rf "$work"
            done
        else
            record "$P/fuzz build" FAIL "$(($(date +%s) - t0))"
        fi
    fi
fi

# Last, as it is the slowest (the first run builds much of Kubernetes).
if [ "$QUICK" -eq 0 ] && [ "$E2E" -eq 1 ]; then
    # The official tarball's place, often missing from non-login PATHs.
    if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
        export PATH="$PATH:/usr/local/go/bin"
    fi
    if command -v go >/dev/null 2>&1; then
        stage "$P" e2e -- -DCMAKE_BUILD_TYPE=Release -DAGENTSCHED_E2E=ON
    else
        echo "=== e2e: SKIPPED: go is not installed (needed to build the control plane;"
        echo "    see docs/testing.md)"
        record "$P ctest -L e2e (no go)" skip 0
    fi
fi

echo
echo "=== summary"
printf '%s\n' "${RESULTS[@]}"
if [ "$FAILED" -ne 0 ]; then
    echo "FAILED"
    exit 1
fi
echo "all stages passed"
