#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# run_interop.sh BIN PORT rpma-client|rpma-server
#
# Runs interop.c's two roles through run_pair.sh with one side on Debian's librpma (the
# reference, over its own verbs) and the other on this build's verbs provider. Needs an RDMA
# device (the soft-RoCE guest, tests/guest) and Debian's librpma0: exits 77 where either is
# missing.
set -u
BIN=$1
PORT=$2
WHO=$3
REF_DIR=/usr/lib/x86_64-linux-gnu

if [ ! -e /dev/infiniband/rdma_cm ]; then
	echo "SKIP: no RDMA device here (/dev/infiniband/rdma_cm); runs in the soft-RoCE guest"
	exit 77
fi
ref=$(LD_LIBRARY_PATH=$REF_DIR ldd "$BIN" | awk '/librpma\.so/ {print $3}')
if [ "$ref" != "$REF_DIR/librpma.so.0" ] || ! dpkg -S "$(readlink -f "$ref")" 2>/dev/null | grep -q '^librpma0'; then
	echo "SKIP: Debian's librpma0 is not installed (the reference side)"
	exit 77
fi
ours=$(ldd "$BIN" | awk '/librpma\.so/ {print $3}')
if [ "$(readlink -f "$ours")" = "$(readlink -f "$ref")" ]; then
	echo "run_interop: $BIN loads the reference on both sides" >&2
	exit 1
fi

REFERENCE_ENV="LD_LIBRARY_PATH=$REF_DIR RPMA_TEST_REFERENCE=1"
RPMA_ENV="RPMA_PROVIDER=verbs"
case $WHO in
rpma-client) export RPMA_IT_SERVER_ENV=$REFERENCE_ENV RPMA_IT_CLIENT_ENV=$RPMA_ENV ;;
rpma-server) export RPMA_IT_SERVER_ENV=$RPMA_ENV RPMA_IT_CLIENT_ENV=$REFERENCE_ENV ;;
*)
	echo "usage: $0 BIN PORT rpma-client|rpma-server" >&2
	exit 2
	;;
esac
echo "run_interop: server: $RPMA_IT_SERVER_ENV; client: $RPMA_IT_CLIENT_ENV"
exec "$(dirname "$0")/../integration/run_pair.sh" "$BIN" "$PORT"
