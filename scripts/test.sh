#!/usr/bin/env bash
# test.sh [--quick|--asan|--tsan|--fuzz|--all] -- installs dependencies, builds rpma and runs the
# whole suite with ctest. Every stage runs even when an earlier one failed; a summary of each
# stage's verdict ends the output, and the exit status is non-zero if any stage failed.
#   (none)   the plain build (build/), its soft-RoCE guest stage (tests/guest), then ASan+UBSan
#            (build-asan/: the plain suite, then the guest's verbs run), then the fuzz targets'
#            short runs (build-fuzz/, clang): what CI runs
#   --quick  the plain build only, without the guest stage
#   --guest  the plain build and its guest stage only
#   --asan   ASan+UBSan only (RPMA_SANITIZE=address; the guest's verbs run included)
#   --tsan   TSan only (RPMA_SANITIZE=thread, build-tsan/)
#   --fuzz   the libFuzzer targets' short runs only (clang, RPMA_BUILD_FUZZ=ON)
#   --all    everything: plain, ASan+UBSan, TSan and the fuzz short runs
# RPMA_BUILD_DIR (default: build) renames the build directories: DIR, DIR-asan, DIR-tsan, DIR-fuzz.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit

mode=${1:-}
case $mode in
'' | --quick | --guest | --asan | --tsan | --fuzz | --all) ;;
*)
    echo "usage: $0 [--quick|--guest|--asan|--tsan|--fuzz|--all]" >&2
    exit 2
    ;;
esac

# Without the dependencies no stage can run: this one failure ends the script.
bash scripts/install-deps.sh || exit

summary=() # one line per stage: its name, verdict and time
failed=0
skip_why= # set by a stage that skips (exit 77)
declare -A built # build folders whose build succeeded (the guest stage needs the plain one)

# stage NAME CMD...: runs CMD and records its verdict; a failure does not stop the next stage.
stage() {
    local name=$1 start=$SECONDS rc took
    shift
    skip_why=
    "$@"
    rc=$?
    took=$(printf '%dm%02ds' $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60)))
    if [[ $rc -eq 0 ]]; then
        summary+=("$(printf '%-6s passed   %s' "$name" "$took")")
    elif [[ $rc -eq 77 ]]; then
        summary+=("$(printf '%-6s skipped  %s' "$name" "$skip_why")")
    else
        summary+=("$(printf '%-6s FAILED   %s (its output follows "=== %s:")' "$name" "$took" "$name")")
        failed=1
    fi
}

build() { # build NAME BUILD_DIR SANITIZE [extra cmake args...]
    local name=$1 dir=$2 sanitize=$3
    shift 3
    echo "=== $name: build $dir (RPMA_SANITIZE='$sanitize')"
    cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRPMA_SANITIZE="$sanitize" "$@" &&
        cmake --build "$dir" -j"$(nproc)" && built[$dir]=1
}

# isolated CMD...: runs CMD in a network namespace of its own with its own loopback, where this
# user may create one (root), so the suite's fixed ports (27001, 26012, ...) are never taken by
# another run of it on the same host (a second checkout, CI beside a developer). Otherwise, or
# with RPMA_TEST_NETNS=0, on the host's loopback.
isolated() {
    if [[ ${RPMA_TEST_NETNS:-1} != 0 ]] && unshare -n true 2>/dev/null; then
        unshare -n -- bash -c 'ip link set lo up && exec "$@"' isolated "$@"
    else
        "$@"
    fi
}

run() { # run NAME BUILD_DIR SANITIZE [extra cmake args...]
    local name=$1 dir=$2
    shift
    build "$name" "$@" || return
    # fio_build fetches fio's source from Debian's archive, which the namespace cannot reach: it
    # runs first, outside; inside, it then finds fio built (or skips again, saying why).
    if grep -qs 'fio_build' "$dir/tests/fio/CTestTestfile.cmake"; then
        echo "=== $name: fio's build, outside the network namespace (it fetches fio's source)"
        (cd "$dir" && ctest --output-on-failure -R '^fio_build$') || true
    fi
    echo "=== $name: test $dir"
    (cd "$dir" && isolated ctest --output-on-failure -j2 --timeout 300 -LE guest)
}

guest() { # the soft-RoCE guest's stage (tests/guest): alone, so nothing competes for the CPUs
    local dir=$1
    if [[ -z ${built[$dir]:-} ]]; then
        skip_why="the build in $dir failed"
        return 77
    fi
    echo "=== guest: the soft-RoCE stage in $dir (the black-box suite against the reference librpma)"
    (cd "$dir" && ctest --output-on-failure -L guest)
}

fuzz() { # the fuzz targets need clang; only their short runs are ctests in that build
    local dir=$1
    if [[ ! -f tests/fuzz/CMakeLists.txt ]]; then
        skip_why="no tests/fuzz in this tree"
        return 77
    fi
    echo "=== fuzz: build $dir (clang, libFuzzer, ASan+UBSan)"
    cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
        -DCMAKE_CXX_COMPILER=clang++ -DRPMA_BUILD_FUZZ=ON -DRPMA_BUILD_BENCH=OFF &&
        cmake --build "$dir" -j"$(nproc)" --target fuzz_frames fuzz_hello fuzz_descriptors || return
    echo "=== fuzz: test $dir"
    (cd "$dir" && ctest --output-on-failure -j2 --timeout 300 -R '^fuzz_')
}

dir=${RPMA_BUILD_DIR:-build}
plain() { stage plain run plain "$dir" ''; }
# the plain suite under ASan+UBSan, then the guest's verbs run (tests/guest) from that build, so
# the verbs provider meets ASan on the real verbs stack too
asan_suite() {
    local rc=0
    run asan "$dir-asan" address -DRPMA_BUILD_BENCH=OFF || rc=$?
    [[ -n ${built[$dir-asan]:-} ]] || return $rc
    echo "=== asan: the soft-RoCE guest's verbs run from $dir-asan"
    (cd "$dir-asan" && ctest --output-on-failure -R '^guest\.verbs$') || rc=1
    return $rc
}
asan() { stage asan asan_suite; }
tsan() { stage tsan run tsan "$dir-tsan" thread -DRPMA_BUILD_BENCH=OFF; }
guest_stage() { stage guest guest "$dir"; }
fuzz_stage() { stage fuzz fuzz "$dir-fuzz"; }
case $mode in
'') plain; guest_stage; asan; fuzz_stage ;;
--quick) plain ;;
--guest) plain; guest_stage ;;
--asan) asan ;;
--tsan) tsan ;;
--fuzz) fuzz_stage ;;
--all) plain; guest_stage; asan; tsan; fuzz_stage ;;
esac

echo "=== summary"
printf '  %s\n' "${summary[@]}"
if [[ $failed -ne 0 ]]; then
    echo "=== some stages failed"
    exit 1
fi
echo "=== all stages passed"
