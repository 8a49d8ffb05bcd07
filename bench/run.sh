#!/usr/bin/env bash
# run.sh -- builds rpma-perf and the peers (Release) and runs them side by side on loopback:
# rpma-perf, raw TCP (tcp_peer), libfabric's tcp provider (fabric_peer) and UCX over TCP
# (ucx_perftest); rpma-perf --provider shm and the same-host limits (shm_peer, idle_conns).
# Medians of 3 runs; the table goes to stdout, the data to results.json in the build folder (the
# tracked bench/results*.json, which docs/performance.md quotes, only when --out names them).
#
#   bench/run.sh [--build DIR] [--time S] [--runs N] [--cases a,b] [--peers a,b] [--out FILE]
#                [--baseline-lib DIR]   (rpma-perf also over DIR/librpma.so.0, column "rpma base")
#
# Installs nothing: missing peers are skipped with a message (bench/install-deps.sh adds them).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(dirname "$HERE")
BUILD=${RPMA_BENCH_BUILD:-$REPO/build-bench}
TIME=3
RUNS=3
OUT=
CASES=""
PEERS=""
BASELINE=""
while [[ $# -gt 0 ]]; do
    case $1 in
        --build) BUILD=$2; shift 2 ;;
        --time) TIME=$2; shift 2 ;;
        --runs) RUNS=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        --cases) CASES=$2; shift 2 ;;
        --peers) PEERS=$2; shift 2 ;;
        --baseline-lib) BASELINE=$2; shift 2 ;;
        -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
        *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done

OUT=${OUT:-$BUILD/results.json} # a run must not replace the tracked record by accident

for tool in cmake python3; do
    command -v "$tool" >/dev/null || { echo "run.sh: $tool is required" >&2; exit 1; }
done

echo "run.sh: building in $BUILD (Release)" >&2
cmake -S "$REPO" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DRPMA_BUILD_BENCH=ON >/dev/null
targets=(rpma-perf tcp_peer shm_peer idle_conns)
if pkg-config --exists libfabric 2>/dev/null; then
    targets+=(fabric_peer)
else
    echo "run.sh: libfabric not found (pkg-config libfabric): the libfabric column is skipped" \
         "(bench/install-deps.sh installs libfabric-dev)" >&2
fi
cmake --build "$BUILD" -j2 --target "${targets[@]}" >/dev/null

PERF=$BUILD/tools/rpma-perf/rpma-perf
TCP=$BUILD/bench/tcp_peer
SHM=$BUILD/bench/shm_peer
IDLE=$BUILD/bench/idle_conns
FABRIC=""
[[ -x $BUILD/bench/fabric_peer ]] && FABRIC=$BUILD/bench/fabric_peer
UCX=$(command -v ucx_perftest || true)
if [[ -z $UCX ]]; then
    echo "run.sh: ucx_perftest not found: the UCX column is skipped" \
         "(bench/install-deps.sh installs ucx-utils)" >&2
fi

echo "run.sh: every sample goes to $OUT" >&2
exec python3 "$HERE/run.py" --perf "$PERF" --tcp "$TCP" --fabric "$FABRIC" --ucx "$UCX" \
    --shm "$SHM" --idle "$IDLE" \
    --time "$TIME" --runs "$RUNS" --out "$OUT" ${CASES:+--cases "$CASES"} ${PEERS:+--peers "$PEERS"} \
    ${BASELINE:+--baseline-lib "$BASELINE"}
