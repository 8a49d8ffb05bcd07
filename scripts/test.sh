#!/usr/bin/env bash
# test.sh [--quick|--asan|--tsan|--fuzz|--all] -- installs dependencies, builds rpma and runs the
# whole suite with ctest. Exits non-zero if anything fails.
#   (none)   the plain build (build/), its soft-RoCE guest stage (tests/guest), then ASan+UBSan
#            (build-asan/), then the fuzz targets' short runs (build-fuzz/, clang): what CI runs
#   --quick  the plain build only, without the guest stage
#   --guest  the plain build and its guest stage only
#   --asan   ASan+UBSan only (RPMA_SANITIZE=address)
#   --tsan   TSan only (RPMA_SANITIZE=thread, build-tsan/)
#   --fuzz   the libFuzzer targets' short runs only (clang, RPMA_BUILD_FUZZ=ON)
#   --all    everything: plain, ASan+UBSan, TSan and the fuzz short runs
# RPMA_BUILD_DIR (default: build) renames the build directories: DIR, DIR-asan, DIR-tsan, DIR-fuzz.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

mode=${1:-}
case $mode in
'' | --quick | --guest | --asan | --tsan | --fuzz | --all) ;;
*)
    echo "usage: $0 [--quick|--guest|--asan|--tsan|--fuzz|--all]" >&2
    exit 2
    ;;
esac

bash scripts/install-deps.sh

run() { # run BUILD_DIR SANITIZE [extra cmake args...]
    local dir=$1 sanitize=$2
    shift 2
    echo "=== build $dir (RPMA_SANITIZE='$sanitize')"
    cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRPMA_SANITIZE="$sanitize" "$@"
    cmake --build "$dir" -j"$(nproc)"
    echo "=== test $dir"
    (cd "$dir" && ctest --output-on-failure -j2 --timeout 300 -LE guest)
}

guest() { # the soft-RoCE guest's stage (tests/guest): alone, so nothing competes for the CPUs
    local dir=$1
    echo "=== guest stage $dir (soft-RoCE: the black-box suite against the reference librpma)"
    (cd "$dir" && ctest --output-on-failure -L guest)
}

fuzz() { # the fuzz targets need clang; only their short runs are ctests in that build
    local dir=$1
    [ -f tests/fuzz/CMakeLists.txt ] || return 0
    echo "=== build $dir (clang, libFuzzer, ASan+UBSan)"
    cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
        -DCMAKE_CXX_COMPILER=clang++ -DRPMA_BUILD_FUZZ=ON -DRPMA_BUILD_BENCH=OFF
    cmake --build "$dir" -j"$(nproc)" --target fuzz_frames fuzz_hello fuzz_descriptors
    echo "=== fuzz $dir"
    (cd "$dir" && ctest --output-on-failure -j2 --timeout 300 -R '^fuzz_')
}

dir=${RPMA_BUILD_DIR:-build}
case $mode in
'')
    run "$dir" ''
    guest "$dir"
    run "$dir-asan" address -DRPMA_BUILD_BENCH=OFF
    fuzz "$dir-fuzz"
    ;;
--quick) run "$dir" '' ;;
--guest)
    run "$dir" ''
    guest "$dir"
    ;;
--asan) run "$dir-asan" address -DRPMA_BUILD_BENCH=OFF ;;
--tsan) run "$dir-tsan" thread -DRPMA_BUILD_BENCH=OFF ;;
--fuzz) fuzz "$dir-fuzz" ;;
--all)
    run "$dir" ''
    guest "$dir"
    run "$dir-asan" address -DRPMA_BUILD_BENCH=OFF
    run "$dir-tsan" thread -DRPMA_BUILD_BENCH=OFF
    fuzz "$dir-fuzz"
    ;;
esac
echo "=== all tests passed"
