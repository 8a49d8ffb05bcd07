#!/usr/bin/env bash
# install-deps.sh -- installs what building and testing rpma needs on Debian (bookworm), as root.
# Only missing packages are installed; apt-get update runs only when something is missing. When
# another apt holds the dpkg or apt lock, it waits (up to 10 minutes; scripts/apt-get-wait).
set -euo pipefail

# The one list of build and test dependencies.
PACKAGES=(
    cmake g++ make pkg-config
    libibverbs-dev librdmacm-dev         # librpma.h's verbs types; the verbs provider
    libgtest-dev libgmock-dev            # unit tests
    libbenchmark-dev                     # bench/
    liburing-dev                         # bench/tcp_peer's io_uring servers (bench.run_py_smoke)
    clang                                # clang-format, clang builds
    iproute2 procps                      # ip, ss, ps, pgrep in integration tests
    iptables                             # network cuts inside test namespaces (tests/hardening)
    libpmem2-dev                         # persistence on DAX mappings
    dpkg-dev file                        # dpkg-shlibdeps, file: .deb Depends (tests/deb)
    python3 mandoc                       # man page checks (tests/man), layout checks
    libpmem-dev                          # fio's librpma engines, built from Debian's fio source
    libprotobuf-c-dev zlib1g-dev         #   (tests/fio, bench/fio/build.sh)
)
# Nice to have: a missing one is reported, not fatal.
OPTIONAL_PACKAGES=(
    libclang-rt-14-dev                   # sanitizer runtimes for clang builds
)

installed() {
    [[ $(dpkg-query -W -f='${Status}' "$1" 2>/dev/null) == "install ok installed" ]]
}

missing=() missing_optional=()
for p in "${PACKAGES[@]}"; do installed "$p" || missing+=("$p"); done
for p in "${OPTIONAL_PACKAGES[@]}"; do installed "$p" || missing_optional+=("$p"); done

if [[ ${#missing[@]} -eq 0 && ${#missing_optional[@]} -eq 0 ]]; then
    echo "install-deps: all dependencies present"
    exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null; then
        SUDO=(sudo)
    else
        echo "install-deps: missing ${missing[*]} ${missing_optional[*]}; run as root" >&2
        exit 1
    fi
else
    SUDO=()
fi

# apt-get, waiting for another apt (unattended-upgrades, say) to release its lock
APT=("${SUDO[@]}" "$(dirname "${BASH_SOURCE[0]}")/apt-get-wait" -q)
echo "install-deps: installing ${missing[*]} ${missing_optional[*]}"
"${APT[@]}" update
if [[ ${#missing[@]} -gt 0 ]]; then
    "${APT[@]}" install -y --no-install-recommends "${missing[@]}"
fi
for p in "${missing_optional[@]}"; do
    "${APT[@]}" install -y --no-install-recommends "$p" ||
        echo "install-deps: optional package $p is not available; continuing" >&2
done
