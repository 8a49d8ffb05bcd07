#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# link_loss.sh BIN ADDR PORT LINK [ENV...] -- runs link_loss.c's two roles (with ENV, e.g.
# RPMA_PROVIDER=verbs, or the reference's LD_LIBRARY_PATH) and deletes the rdma link LINK (rxe0)
# once the client is connected. Passes if the client sees LOST, the server LOST or CLOSED
# (link_loss.c says why), and both end cleanly. The link stays
# deleted: run it last in a guest.
set -u
BIN=$1 ADDR=$2 PORT=$3 LINK=$4
shift 4
SCALE=${RPMA_TEST_TIME_SCALE:-1}
LIMIT=$((60 * SCALE))
if [ ! -e /dev/infiniband/rdma_cm ] || ! rdma link show "$LINK/1" >/dev/null 2>&1; then
	echo "SKIP: no rdma link $LINK here; runs in the soft-RoCE guest"
	exit 77
fi
sout=$(mktemp) cout=$(mktemp)
trap 'kill -KILL $spid $cpid 2>/dev/null; rm -f "$sout" "$cout"' EXIT
timeout -k 5 "$LIMIT" env "$@" "$BIN" server "$ADDR" "$PORT" >"$sout" 2>&1 &
spid=$!
wait_for() { # FILE TEXT
	local i
	for ((i = 0; i < LIMIT * 10; i++)); do
		grep -q "$2" "$1" && return 0
		sleep 0.1
	done
	return 1
}
wait_for "$sout" READY || { echo "the server never listened"; cat "$sout"; exit 1; }
timeout -k 5 "$LIMIT" env "$@" "$BIN" client "$ADDR" "$PORT" >"$cout" 2>&1 &
cpid=$!
wait_for "$cout" CONNECTED || { echo "the client never connected"; cat "$cout" "$sout"; exit 1; }
# the kernel finishes the removal once every process has let go of the device
timeout "$LIMIT" rdma link delete "$LINK" &
dpid=$!
wait $cpid
crc=$?
wait $spid
src=$?
wait $dpid
drc=$?
echo "---- client (exit $crc)"
cat "$cout"
echo "---- server (exit $src)"
cat "$sout"
echo "---- rdma link delete (exit $drc)"
[ $crc -eq 0 ] && [ $src -eq 0 ] && [ $drc -eq 0 ]
