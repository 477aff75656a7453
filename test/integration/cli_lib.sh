# cli_lib.sh - checks the command-line test scripts share (sourced, not a
# test: ctest runs test_*.sh only). The script sets BIN (the agentsched
# binary) and WORK (a scratch directory) before sourcing it, and ends with
# cli_summary.

FAILS=0
CHECKS=0

ok() { CHECKS=$((CHECKS + 1)); echo "ok   - $1"; }
fail() { CHECKS=$((CHECKS + 1)); FAILS=$((FAILS + 1)); echo "FAIL - $1"; }
check() { # description command...
    local what=$1
    shift
    if "$@"; then ok "$what"; else fail "$what"; fi
}

# Runs BIN with args, capturing status (RC), stdout and stderr.
run() {
    "$BIN" "$@" >"$WORK/out" 2>"$WORK/err" </dev/null
    RC=$?
}
expect_exit() { # code description args...
    local code=$1 what=$2
    shift 2
    run "$@"
    if [ "$RC" -eq "$code" ]; then ok "$what (exit $code)"; else
        fail "$what: exit $RC, want $code"
        sed 's/^/      /' "$WORK/err" | head -n 5
    fi
}
err_has() { # text description
    if grep -qF -- "$1" "$WORK/err"; then ok "$2"; else
        fail "$2: stderr lacks '$1'"
        sed 's/^/      /' "$WORK/err" | head -n 5
    fi
}
err_lacks() { # text description
    if grep -qF -- "$1" "$WORK/err"; then
        fail "$2: stderr has '$1'"
        sed 's/^/      /' "$WORK/err" | head -n 5
    else ok "$2"; fi
}
out_has() { # text description
    if grep -qF -- "$1" "$WORK/out"; then ok "$2"; else
        fail "$2: stdout lacks '$1'"
        sed 's/^/      /' "$WORK/out" | head -n 5
    fi
}

# serving_port LOG PID prints the port of serve's start-up line in LOG
# (http or https), waiting for it up to 20 s; fails when PID exits first.
serving_port() {
    local log=$1 pid=$2 port
    for _ in $(seq 1 200); do
        port=$(sed -n 's/.*msg="agentsched serving".* listen=[^ ]*:\([0-9][0-9]*\) .*/\1/p' \
            "$log" | head -n 1)
        if [ -n "$port" ]; then
            echo "$port"
            return 0
        fi
        kill -0 "$pid" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

# cli_summary prints the count; its status is the script's.
cli_summary() {
    echo "# $CHECKS checks, $FAILS failed"
    [ "$FAILS" -eq 0 ]
}
