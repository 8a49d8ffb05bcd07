#!/usr/bin/env bash
# install-deps.sh -- installs the peers bench/run.sh compares against (Debian bookworm), as root.
# Only missing packages are installed; apt-get update runs only when something is missing.
set -euo pipefail

PACKAGES=(
    libfabric-dev libfabric-bin   # bench/fabric_peer.c (tcp provider), fi_info
    ucx-utils                     # ucx_perftest (UCX_TLS=tcp)
    iperf3                        # a second opinion on raw TCP bandwidth
    liburing-dev                  # tcp_peer lat --server uring* (bench/tcp_peer_uring.c)
    python3-matplotlib            # run.py --plot (docs/performance.svg)
    pkg-config
)

installed() {
    [[ $(dpkg-query -W -f='${Status}' "$1" 2>/dev/null) == "install ok installed" ]]
}

missing=()
for p in "${PACKAGES[@]}"; do installed "$p" || missing+=("$p"); done
if [[ ${#missing[@]} -eq 0 ]]; then
    echo "bench/install-deps: all peers present"
    exit 0
fi

SUDO=()
if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null; then
        SUDO=(sudo)
    else
        echo "bench/install-deps: missing ${missing[*]}; run as root" >&2
        exit 1
    fi
fi

export DEBIAN_FRONTEND=noninteractive
echo "bench/install-deps: installing ${missing[*]}"
"${SUDO[@]}" apt-get update -q
"${SUDO[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
