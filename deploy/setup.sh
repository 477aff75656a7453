#!/usr/bin/env bash
# deploy/setup.sh - set up a fresh Debian 12 machine for agentsched and build it.
#
#   sudo deploy/setup.sh          install the Debian packages, build build/agentsched
#                                 (Release)
#   sudo deploy/setup.sh --run    ... then run the main job on the sample cluster
#                                 (deploy/run-sample.sh)
#   deploy/setup.sh --no-deps     only (re)build; no root needed
#
# Idempotent: packages already installed are not touched (apt-get update runs
# only when something is missing), and the build is incremental. When started
# through sudo, the build runs as the invoking user so build/ stays theirs.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR="$ROOT/build"
RUN=0
DEPS=1

usage() {
    sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

while [ $# -gt 0 ]; do
    case "$1" in
    --run) RUN=1 ;;
    --no-deps) DEPS=0 ;;
    --build-dir)
        [ $# -ge 2 ] || { echo "setup.sh: --build-dir needs a directory" >&2; exit 2; }
        BUILD_DIR=$2
        shift
        ;;
    -h | --help) usage; exit 0 ;;
    *) echo "setup.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
    esac
    shift
done

# Everything the build, the tests (plain, ASan/UBSan, TSan, fuzzers), the
# benchmarks' plots and the scripts need.
PACKAGES=(
    build-essential gcc clang clang-format libclang-rt-14-dev cmake ninja-build pkg-config git
    libmicrohttpd-dev libgnutls28-dev libjansson-dev libcurl4-openssl-dev libyaml-dev libyajl-dev
    libcriterion-dev curl openssl ca-certificates python3 gnuplot-nox procps
)

install_deps() {
    local missing=()
    for p in "${PACKAGES[@]}"; do
        if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
            missing+=("$p")
        fi
    done
    if [ ${#missing[@]} -eq 0 ]; then
        echo "setup: all ${#PACKAGES[@]} packages already installed"
        return
    fi
    echo "setup: installing ${missing[*]}"
    local SUDO=()
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1; then
            SUDO=(sudo)
        else
            echo "setup: need root to install packages: run 'sudo deploy/setup.sh'" >&2
            exit 1
        fi
    fi
    export DEBIAN_FRONTEND=noninteractive
    "${SUDO[@]}" apt-get update -q
    "${SUDO[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# Runs a command as the user who called sudo (so build/ is not root-owned).
as_user() {
    if [ "$(id -u)" -eq 0 ] && [ -n "${SUDO_USER:-}" ] && [ "$SUDO_USER" != root ]; then
        sudo -u "$SUDO_USER" -- "$@"
    else
        "$@"
    fi
}

build() {
    local jobs
    jobs=$(nproc 2>/dev/null || echo 2)
    echo "setup: building $BUILD_DIR (Release, -j$jobs)"
    as_user cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
    # Only the binary: deploy/test.sh builds the tests and benchmarks.
    as_user cmake --build "$BUILD_DIR" -j "$jobs" --target agentsched
    echo "setup: built $BUILD_DIR/agentsched"
    "$BUILD_DIR/agentsched" version
}

[ "$DEPS" -eq 1 ] && install_deps
build
if [ "$RUN" -eq 1 ]; then
    if [ "$(id -u)" -eq 0 ] && [ -n "${SUDO_USER:-}" ] && [ "$SUDO_USER" != root ]; then
        exec sudo -u "$SUDO_USER" -- "$ROOT/deploy/run-sample.sh" --build-dir "$BUILD_DIR"
    fi
    exec "$ROOT/deploy/run-sample.sh" --build-dir "$BUILD_DIR"
fi
