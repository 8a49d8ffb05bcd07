#!/usr/bin/env bash
# load.sh [BUILD_DIR] [N] [MAX_KIB] -- N concurrent connections (default 1000) from one client
# process to one server process over 127.0.0.1:29650, each doing a verified write and read; both
# print their resident memory and descriptors per idle connection. With MAX_KIB (default 64) a
# side above that many KiB per idle connection fails. Build first (a Release build measures
# what users get), e.g.:
#   cmake -S . -B build-load -DCMAKE_BUILD_TYPE=Release && cmake --build build-load -j2
#   scripts/load.sh build-load 1000
# The ctest threads.load.1000 runs the same program with 1000 connections.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
dir=${1:-build}
n=${2:-1000}
max_kib=${3:-64}
bin=$dir/tests/threads/load
if [ ! -x "$bin" ]; then
    echo "load.sh: $bin not found: build $dir first" >&2
    exit 2
fi
# both processes raise RLIMIT_NOFILE to the hard limit themselves; the hard limit must fit
hard=$(ulimit -Hn)
if [ "$hard" != unlimited ] && [ "$hard" -lt $((n * 5 + 64)) ]; then
    echo "load.sh: the hard RLIMIT_NOFILE ($hard) is too low for $n connections" >&2
    exit 2
fi
RPMA_IT_TIMEOUT=${RPMA_IT_TIMEOUT:-300} exec tests/integration/run_pair.sh "$bin" 29650 "$n" "$max_kib"
