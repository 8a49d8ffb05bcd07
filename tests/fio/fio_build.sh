#!/usr/bin/env bash
# fio_build.sh RPMA_LIB_DIR FIO_DIR -- builds fio with its librpma engines against the rpma
# library in RPMA_LIB_DIR into FIO_DIR (bench/fio/build.sh; nothing to do when it is there).
# Exit 77 (skip) when fio's source cannot be fetched or built here.
set -uo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
start=$(date +%s)
# --no-opt: fio at -O0 builds faster; the tests check rpma, not fio's speed
bash "$REPO/bench/fio/build.sh" --rpma "$1" --out "$2" --jobs "$(nproc)" --no-opt
rc=$?
echo "fio_build: exit $rc after $(($(date +%s) - start)) s"
case $rc in
    0) exit 0 ;;
    3) echo "SKIP: fio's source could not be fetched (apt-get source fio): the fio tests are skipped"
       exit 77 ;;
    4) echo "SKIP: fio with its librpma engines could not be built (logs in $2): the fio tests are skipped"
       exit 77 ;;
    *) exit 1 ;;
esac
