#!/usr/bin/env bash
# device_check.sh -- issue 21's 16-core measurements, prepared here and run on the lent device
# machine in one command (it has python3 and nothing else, no perf, no network):
#
#   bench/device_check.sh prepare DIR [REV]
#                                         here: bench/bundle.sh DIR, plus DIR/chunk1m/, a
#                                         librpma.so.0 built with 1 MiB per sendmsg, DIR/before/,
#                                         one built from git revision REV (default 55a938b, the
#                                         engine before its slow-turn rule changed), and this
#                                         script as DIR/device_check.sh
#   DIR/device_check.sh run OUT [SECONDS] there: writes into OUT
#     16core.json   bench/run.py: write/read 1 MiB, write 4 KiB, write+flush blocking and
#                   busy-poll, against raw TCP, tcp-2msg (and its spinning server), libfabric,
#                   and rpma_base = the 1 MiB-chunk library; 3 runs of SECONDS (default 1) each
#     latency.json  bench/run.py: write+flush blocking and busy-poll, GPSPM and send/recv
#                   busy-poll, against tcp-2msg (and its spinning server), with rpma_base =
#                   DIR/before
#     threads.txt   bench/thread_cpu.py over rpma-perf (both libraries) and fabric_peer, 1 MiB
#                   write and read, and rpma's write+flush blocking and busy-poll: each thread's
#                   CPU and sleeps (rpma-perf's JSON gives the round trips: ops)
#     machine.txt   nproc, the kernel, the CPU model
# About 5 minutes at 1 s. With the run tool, DIR must lie inside the repository (the tool
# copies the working tree): carry it, e.g. run(command="bash DIR/device_check.sh run $OUT",
# carry=["DIR"]), and the results come back from $OUT.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
case ${1:-} in
prepare)
    [[ $# -eq 2 || $# -eq 3 ]] || { echo "usage: bench/device_check.sh prepare DIR [REV]" >&2; exit 2; }
    DIR=$2
    REV=${3:-55a938b}
    REPO=$(dirname "$HERE")
    bash "$HERE/bundle.sh" "$DIR"
    DIR=$(cd "$DIR" && pwd)
    B=${RPMA_CHUNK_BUILD:-$REPO/build-chunk1m}
    cmake -S "$REPO" -B "$B" -DCMAKE_BUILD_TYPE=Release -DRPMA_BUILD_TESTS=OFF \
          -DRPMA_BUILD_BENCH=OFF -DRPMA_SEND_CHUNK=1048576 >/dev/null
    cmake --build "$B" -j"$(nproc)" --target rpma >/dev/null
    mkdir -p "$DIR/chunk1m"
    cp -L "$B/librpma.so.0" "$DIR/chunk1m/librpma.so.0"
    # the build before, from a throw-away worktree of REV
    WT=$(mktemp -d)
    trap 'git -C "$REPO" worktree remove --force "$WT/src" 2>/dev/null; rm -rf "$WT"' EXIT
    git -C "$REPO" worktree add -q --detach "$WT/src" "$REV"
    cmake -S "$WT/src" -B "$WT/build" -DCMAKE_BUILD_TYPE=Release -DRPMA_BUILD_TESTS=OFF \
          -DRPMA_BUILD_BENCH=OFF >/dev/null
    cmake --build "$WT/build" -j"$(nproc)" --target rpma >/dev/null
    mkdir -p "$DIR/before"
    cp -L "$WT/build/librpma.so.0" "$DIR/before/librpma.so.0"
    git -C "$REPO" rev-parse "$REV" > "$DIR/before/REVISION"
    cp "$HERE/device_check.sh" "$DIR/device_check.sh"
    echo "device_check.sh: $DIR is ready; there: $DIR/device_check.sh run OUT" >&2
    ;;
run)
    [[ $# -ge 2 ]] || { echo "usage: device_check.sh run OUT [SECONDS]" >&2; exit 2; }
    OUT=$2
    T=${3:-1}
    [[ -f $HERE/run.py && -d $HERE/chunk1m && -d $HERE/before ]] || {
        echo "device_check.sh: run it from a prepared DIR (device_check.sh prepare DIR)" >&2
        exit 2
    }
    mkdir -p "$OUT"
    { nproc; uname -r; grep -m1 "model name" /proc/cpuinfo || true; } > "$OUT/machine.txt"
    python3 "$HERE/run.py" --bin-dir "$HERE/bin" \
        --peers rpma,tcp,tcp-2msg,tcp-2msg-spin,libfabric,rpma_base \
        --baseline-lib "$HERE/chunk1m" \
        --cases write_1m,read_1m,write_4k,lat_blocking,lat_busy_poll \
        --runs 3 --time "$T" --out "$OUT/16core.json" >&2 ||
        echo "device_check.sh: the 16-core table failed (rc $?); going on" >&2
    python3 "$HERE/run.py" --bin-dir "$HERE/bin" --peers rpma,tcp-2msg,tcp-2msg-spin,rpma_base \
        --baseline-lib "$HERE/before" \
        --cases lat_blocking,lat_busy_poll,gpspm_busy_poll,sendrecv_busy_poll \
        --runs 3 --time "$T" --out "$OUT/latency.json" >&2 ||
        echo "device_check.sh: the latency A/B failed (rc $?); going on" >&2
    {
        set +e  # each view on its own: one that fails leaves the others
        for op in write read; do
            echo "== rpma $op 1 MiB"
            python3 "$HERE/thread_cpu.py" -- "$HERE/bin/rpma-perf" loopback --port 51901 \
                --time "$T" --json --provider tcp --op $op --size 1048576 --iodepth 32
            echo "== rpma (1 MiB per sendmsg) $op 1 MiB"
            RPMA_BUNDLE_LIB_FIRST=$HERE/chunk1m python3 "$HERE/thread_cpu.py" -- \
                "$HERE/bin/rpma-perf" loopback --port 51902 --time "$T" --json --provider tcp \
                --op $op --size 1048576 --iodepth 32
            if [[ -x $HERE/bin/fabric_peer ]]; then
                echo "== libfabric $op 1 MiB"
                python3 "$HERE/thread_cpu.py" -- "$HERE/bin/fabric_peer" $op --size 1048576 \
                    --iodepth 32 --time "$T" --port 53901
            fi
        done
        # does the target's engine poll between requests (few sleeps per round trip) or sleep?
        for mode in "" --busy-poll; do
            for lib in "" "$HERE/before"; do
                echo "== rpma${lib:+ (before)} write+flush 8 B ${mode:-blocking}"
                RPMA_BUNDLE_LIB_FIRST=$lib python3 "$HERE/thread_cpu.py" -- \
                    "$HERE/bin/rpma-perf" loopback --port 51903 --time "$T" --json \
                    --provider tcp --op write-flush --size 8 --iodepth 1 $mode
            done
        done
    } > "$OUT/threads.txt" 2>&1
    echo "device_check.sh: results in $OUT" >&2
    ;;
*)
    sed -n '2,26p' "$0" >&2
    exit 2
    ;;
esac
