#!/usr/bin/env bash
# run.sh -- runs fio's own librpma engines (APM and GPSPM, client and server) over rpma on
# loopback and prints a table: engine, memory, mode, rw, bs, iodepth: bandwidth, IOPS, mean,
# p50 and p99 latency (fio's total latency, lat_ns). Every case must pass (exit 0, no fio error,
# no abort, no sanitizer report) or the exit status is 1.
#
#   bench/fio/run.sh [--rpma DIR] [--fio-dir DIR] [--time S] [--ramp S] [--cases LIST]
#                    [--iodepth N] [--busy-poll] [--no-perf] [--out FILE] [--keep DIR]
#     --rpma DIR     the rpma build fio links to (default build-bench/, configured Release and
#                    built (target rpma) when it has no librpma.so)
#     --fio-dir DIR  where bench/fio/build.sh builds fio (default build-fio/)
#     --cases LIST   comma-separated ENGINE:MODE:RW:BS:MEM, e.g. apm:async:write:64KiB:file
#                    (default: APM and GPSPM writes, DRAM and file, sync and async, 4 and 64 KiB,
#                    and APM reads from DRAM; see bench/fio/run.py)
#     --time S       measured seconds per case (default 5, after --ramp S, default 1)
#     --out FILE     every result as JSON (default: results.json in the --fio-dir folder, untracked;
#                    the tracked bench/fio/results.json, quoted by docs, is written only if named)
#     --no-perf      skip the rpma-perf loopback run (same op, size, iodepth, busy-poll) that
#                    follows each APM case on DRAM for comparison (columns "rpma-perf ...")
# Ports 25900-25999 on 127.0.0.1.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
RPMA=$REPO/build-bench
FIODIR=$REPO/build-fio
OUT=
PASS=()
WITH_PERF=yes
while [[ $# -gt 0 ]]; do
    case $1 in
        --rpma) RPMA=$2; shift 2 ;;
        --fio-dir) FIODIR=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        --time|--ramp|--cases|--iodepth|--keep) PASS+=("$1" "$2"); shift 2 ;;
        --busy-poll) PASS+=("$1"); shift ;;
        --no-perf) WITH_PERF=no; shift ;;
        -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
        *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
# a run on a busy machine must not replace the tracked record by accident
OUT=${OUT:-$FIODIR/results.json}

if [[ ! -e $RPMA/librpma.so ]]; then
    echo "run.sh: building rpma in $RPMA (Release)" >&2
    cmake -S "$REPO" -B "$RPMA" -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$RPMA" -j"$(nproc)" --target rpma >/dev/null
fi
PERF=$RPMA/tools/rpma-perf/rpma-perf
if [[ $WITH_PERF == yes && ! -x $PERF && -f $RPMA/CMakeCache.txt ]]; then
    cmake --build "$RPMA" -j"$(nproc)" --target rpma-perf >/dev/null || true
fi
[[ $WITH_PERF == yes && -x $PERF ]] && PASS+=(--rpma-perf "$PERF")
FIO=$(bash "$HERE/build.sh" --rpma "$RPMA" --out "$FIODIR" | tail -n1)
echo "run.sh: $FIO loads $(ldd "$FIO" | awk '$1 == "librpma.so.0" { print $3 }')" >&2
mkdir -p "$(dirname "$OUT")"
echo "run.sh: every result goes to $OUT" >&2
exec python3 "$HERE/run.py" --fio "$FIO" --out "$OUT" "${PASS[@]}"
