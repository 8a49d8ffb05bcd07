#!/usr/bin/env bash
# fio_pair.sh FIO_DIR RPMA_LIB_DIR CASES PORT SECONDS -- runs fio librpma server/client pairs
# (bench/fio/run.py --cases CASES, comma-separated, ports from PORT) over
# RPMA_LIB_DIR/librpma.so.0, SECONDS each. When that library is built
# with a sanitizer, its runtime is preloaded into fio (which is not instrumented).
# Exit 77 (skip) when fio_build could not build fio.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
FIO=$1/fio LIBDIR=$2 CASES=$3 PORT=$4 SECONDS_=$5
if [[ ! -x $FIO ]]; then
    echo "SKIP: $FIO was not built (see the fio_build test's output)"
    exit 77
fi
command -v python3 >/dev/null || { echo "SKIP: python3 is needed to run bench/fio/run.py"; exit 77; }

export LD_LIBRARY_PATH=$LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
runtime=$(ldd "$LIBDIR/librpma.so.0" | awk '$1 ~ /^lib(asan|tsan)\.so/ { print $3; exit }')
if [[ -n $runtime ]]; then
    # fio itself is not instrumented: the sanitizer runtime must come first
    export LD_PRELOAD=$runtime${LD_PRELOAD:+:$LD_PRELOAD}
    # fio's own allocations are not freed at exit; the reports that matter abort right away
    export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}
    export UBSAN_OPTIONS=print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}
    echo "fio_pair: LD_PRELOAD=$LD_PRELOAD ASAN_OPTIONS=$ASAN_OPTIONS"
fi
echo "fio_pair: $FIO loads $(ldd "$FIO" | awk '$1 == "librpma.so.0" { print $3 }')"
exec python3 "$REPO/bench/fio/run.py" --fio "$FIO" --cases "$CASES" --port-base "$PORT" \
    --time "$SECONDS_" --ramp 0
