#!/usr/bin/env bash
# test.sh [--asan|--tsan|--all] -- installs dependencies, builds rpma and runs the whole suite.
#   (none)  RelWithDebInfo build in build/
#   --asan  ASan+UBSan build in build-asan/ (RPMA_SANITIZE=address)
#   --tsan  TSan build in build-tsan/ (RPMA_SANITIZE=thread)
#   --all   the plain build, then the ASan build
# RPMA_BUILD_DIR (default: build) renames the build directories: DIR, DIR-asan, DIR-tsan.
# Exits non-zero if anything fails.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

mode=${1:-}
case $mode in
'' | --asan | --tsan | --all) ;;
*)
    echo "usage: $0 [--asan|--tsan|--all]" >&2
    exit 2
    ;;
esac

bash scripts/install-deps.sh

run() { # run BUILD_DIR SANITIZE
    local dir=$1 sanitize=$2
    echo "=== build $dir (RPMA_SANITIZE='$sanitize')"
    cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRPMA_SANITIZE="$sanitize"
    cmake --build "$dir" -j"$(nproc)"
    echo "=== test $dir"
    (cd "$dir" && ctest --output-on-failure -j2 --timeout 300)
}

dir=${RPMA_BUILD_DIR:-build}
case $mode in
'') run "$dir" '' ;;
--asan) run "$dir-asan" address ;;
--tsan) run "$dir-tsan" thread ;;
--all)
    run "$dir" ''
    run "$dir-asan" address
    ;;
esac
echo "=== all tests passed"
