#!/usr/bin/env bash
# test_hostile.sh BINARY - the hostile-input suite: every case of
# data/hostile/*.json against a running `agentsched serve`, the server
# alive after each, a slowloris cut off by the request deadline, RSS and
# latency bounds at the end (see hostile.py).
set -uo pipefail
BIN=${1:?usage: test_hostile.sh path/to/agentsched}
exec python3 "$(dirname "${BASH_SOURCE[0]}")/hostile.py" "$BIN"
