#!/usr/bin/env bash
# guest.sh -- the soft-RoCE test bed: a throw-away QEMU guest booted from Debian's own kernel
# package, with the kernel's rdma_rxe driver on a private netdev, the host's root file system
# (read-only, under a tmpfs overlay) and so the host's freshly built binaries and its rdma-core.
#
#   guest.sh prepare              install the host packages, fetch the kernel, build the initramfs
#   guest.sh check                exit 0 if the guest can boot here, else 77 with one line why
#   guest.sh run [options] -- CMD run CMD (sh -c) in the guest, in the current directory; print its
#                                 output and exit with its exit code
#       --timeout S      give up after S seconds (default 900): exit 124
#       --env NAME=VALUE export it to CMD (repeatable); RPMA_* and GTEST_* variables pass anyway
#       --netns          two network namespaces joined by a veth pair, each with its own rxe
#                        device, instead of one dummy netdev (see below)
#
# In the guest CMD finds RPMA_GUEST_ADDR (the rxe device's IPv4 address) and RPMA_GUEST=1. With
# --netns, RPMA_GUEST_NS_SERVER/RPMA_GUEST_NS_CLIENT name the namespaces and
# RPMA_GUEST_ADDR/RPMA_GUEST_ADDR_CLIENT their addresses. Nothing leaves the guest: it has no NIC.
#
# Environment: RPMA_GUEST_CACHE (default /var/tmp/rpma-guest) holds the kernel and initramfs;
# RPMA_GUEST_ACCEL (default tcg) may be kvm where KVM can boot a stock kernel (on the PVM KVM of
# our CI machines it cannot: "KVM internal error ... emulation failure"); RPMA_GUEST_MEM (MiB,
# default 2048); RPMA_GUEST_CPUS (default: the host's).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${RPMA_GUEST_CACHE:-/var/tmp/rpma-guest}
SKIP=77

PACKAGES=(qemu-system-x86 busybox-static kmod cpio xz-utils rdma-core ibverbs-providers
    ibverbs-utils rdmacm-utils perftest iproute2 librpma0 librpma-dev)
# Modules the init loads, in this order (dependencies first, from modprobe --show-depends at
# prepare time). rxe needs crc32, which nothing in the initramfs would load on demand.
MODULES=(crc32_generic crc32-pclmul virtio_pci virtio_rng 9pnet_virtio 9p overlay rdma_rxe ib_uverbs
    rdma_ucm dummy veth)

die() {
    echo "guest: $*" >&2
    exit 1
}

installed() { [[ $(dpkg-query -W -f='${Status}' "$1" 2>/dev/null) == "install ok installed" ]]; }

apt_locked_run() { # apt-get, waiting (up to 10 minutes) for another apt to let go of its lock
    "$here/../../scripts/apt-get-wait" "$@"
}

install_packages() {
    local missing=() p
    for p in "${PACKAGES[@]}"; do installed "$p" || missing+=("$p"); done
    [[ ${#missing[@]} -eq 0 ]] && return 0
    if [[ $(id -u) -ne 0 ]]; then # cannot install: the guest tests skip, saying why
        echo "SKIP: guest: missing ${missing[*]}; run guest.sh prepare as root"
        exit $SKIP
    fi
    echo "guest: installing ${missing[*]}"
    apt_locked_run update -q
    apt_locked_run install -y -q --no-install-recommends "${missing[@]}"
}

# The kernel Debian's linux-image-amd64 points at now (6.1.0-NN-amd64 on bookworm).
kernel_package() {
    local dep
    dep=$(apt-cache depends linux-image-amd64 2>/dev/null |
        sed -n 's/^ *Depends: \(linux-image-[0-9].*-amd64\)$/\1/p' | grep -v unsigned | head -1)
    [[ -n $dep ]] || dep=$(apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-amd64$' |
        cut -d' ' -f1 | sort -V | tail -1)
    [[ -n $dep ]] || die "no linux-image package known to apt (apt-get update?)"
    echo "$dep"
}

current_dir() { # the prepared kernel's folder, if any
    [[ -f $cache/current ]] && [[ -f $cache/$(cat "$cache/current")/ready ]] &&
        echo "$cache/$(cat "$cache/current")"
}

prepare() {
    install_packages
    mkdir -p "$cache"
    local pkg kver dir
    pkg=$(kernel_package 2>/dev/null) || { apt_locked_run update -q >/dev/null && pkg=$(kernel_package); }
    kver=${pkg#linux-image-}
    # a changed init or module list makes a new folder: a cached initramfs never goes stale
    local key
    key=$(cat "$here/guest-init.sh" <(echo "${MODULES[*]}") | sha256sum | cut -c1-12)
    dir=$cache/$kver-$key
    if [[ -f $dir/ready ]]; then
        echo "$kver-$key" >"$cache/current"
        return 0
    fi
    echo "guest: preparing $kver in $dir"
    rm -rf "$dir" && mkdir -p "$dir/deb"
    (cd "$dir/deb" && apt_locked_run download "$pkg" >/dev/null 2>&1) ||
        (apt_locked_run update -q >/dev/null && cd "$dir/deb" && apt_locked_run download "$pkg")
    dpkg -x "$dir"/deb/*.deb "$dir/root"
    rm -rf "$dir/deb"

    # The compressed bzImage hangs in its xz decompressor under PVM; the plain ELF vmlinux boots
    # through its PVH entry, faster too. It is the xz stream inside vmlinuz.
    local vmlinuz=$dir/root/boot/vmlinuz-$kver off
    off=$(grep -abo $'\xfd7zXZ\x00' "$vmlinuz" | head -1 | cut -d: -f1)
    [[ -n $off ]] || die "no xz stream in $vmlinuz"
    tail -c +$((off + 1)) "$vmlinuz" | xz -dc 2>/dev/null >"$dir/vmlinux" || true
    file "$dir/vmlinux" | grep -q 'ELF 64-bit' || die "could not extract vmlinux from $vmlinuz"

    depmod -b "$dir/root" "$kver"
    local init=$dir/initramfs m path
    mkdir -p "$init"/{bin,lib/modules,proc,sys,dev,lower,upper,newroot}
    cp /bin/busybox "$init/bin/busybox"
    : >"$init/modules.order"
    for m in "${MODULES[@]}"; do
        modprobe -d "$dir/root" -S "$kver" --show-depends "$m" | awk '$1 == "insmod" {print $2}'
    done | awk '!seen[$0]++' | while read -r path; do
        cp "$path" "$init/lib/modules/"
        basename "$path" >>"$init/modules.order"
    done
    cp "$here/guest-init.sh" "$init/init"
    chmod +x "$init/init"
    (cd "$init" && find . | cpio -o -H newc --quiet | gzip -1) >"$dir/initramfs.cpio.gz"
    rm -rf "$dir/root" "$init"
    echo "$kver" >"$dir/ready"
    echo "$kver-$key" >"$cache/current"
    find "$cache" -mindepth 1 -maxdepth 1 -type d ! -name "$kver-$key" -exec rm -rf {} + # older ones
    echo "guest: ready ($kver)"
}

check() { # can a guest run here at all? (prints one line why not)
    if ! command -v qemu-system-x86_64 >/dev/null; then
        echo "SKIP: guest: qemu-system-x86_64 is not installed (guest.sh prepare installs it)"
        return $SKIP
    fi
    if [[ -z $(current_dir) ]]; then
        echo "SKIP: guest: no kernel prepared in $cache (run guest.sh prepare)"
        return $SKIP
    fi
    return 0
}

run() {
    local timeout=900 netns=0 envs=()
    while [[ $# -gt 0 ]]; do
        case $1 in
        --timeout) timeout=$2 && shift 2 ;;
        --env) envs+=("$2") && shift 2 ;;
        --netns) netns=1 && shift ;;
        --) shift && break ;;
        *) die "unknown option $1" ;;
        esac
    done
    [[ $# -gt 0 ]] || die "usage: guest.sh run [--timeout S] [--env N=V] [--netns] -- CMD"
    local why rc
    why=$(check) || {
        rc=$?
        echo "$why"
        return $rc
    }
    local dir share
    dir=$(current_dir)
    share=$(mktemp -d /tmp/rpma-guest.XXXXXX)
    # shellcheck disable=SC2064
    trap "rm -rf '$share'" EXIT

    { # the script the guest runs as root in the overlay of the host's root
        echo "export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        echo "export HOME=/root RPMA_GUEST=1 RPMA_GUEST_NETNS=$netns"
        local v
        while IFS= read -r v; do
            printf 'export %q\n' "$v"
        done < <(env | grep -E '^(RPMA_|GTEST_|ASAN_|UBSAN_|TSAN_|LSAN_)' | grep -v '^RPMA_GUEST' || true)
        for v in "${envs[@]}"; do printf 'export %q\n' "$v"; done
        printf 'cd %q\n' "$PWD"
        printf 'exec sh -c %q\n' "$*"
    } >"$share/cmd.sh"
    # net.sh runs before cmd.sh: it must know the mode itself
    { echo "RPMA_GUEST_NETNS=$netns"; cat "$here/guest-net.sh"; } >"$share/net.sh"

    local accel=${RPMA_GUEST_ACCEL:-tcg} accel_opt
    case $accel in
    tcg) accel_opt=(-accel tcg,thread=multi -cpu max) ;;
    kvm) accel_opt=(-accel kvm -cpu host) ;;
    *) die "RPMA_GUEST_ACCEL must be tcg or kvm" ;;
    esac
    : >"$share/out"
    timeout -k 5 "$timeout" qemu-system-x86_64 "${accel_opt[@]}" \
        -smp "${RPMA_GUEST_CPUS:-$(nproc)}" -m "${RPMA_GUEST_MEM:-2048}" \
        -nodefaults -nographic -no-reboot -serial "file:$share/console" -nic none \
        -device virtio-rng-pci \
        -kernel "$dir/vmlinux" -initrd "$dir/initramfs.cpio.gz" \
        -append "console=ttyS0 quiet loglevel=3 panic=-1 rpma_share=$share" \
        -virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap" \
        -virtfs "local,path=$share,mount_tag=share,security_model=none" &
    local qemu=$!
    tail -n +1 -f --pid=$qemu "$share/out" 2>/dev/null &
    local tailer=$!
    rc=0
    wait $qemu || rc=$?
    wait $tailer 2>/dev/null || true
    if [[ -f $share/rc ]]; then
        return "$(cat "$share/rc")"
    fi
    if [[ $rc -eq 124 || $rc -eq 137 ]]; then
        echo "guest: timed out after ${timeout}s; console:" >&2
    else
        echo "guest: ended without an exit code (qemu $rc); console:" >&2
    fi
    tail -n 40 "$share/console" >&2 || true
    [[ $rc -eq 124 || $rc -eq 137 ]] && return 124
    return 1
}

case ${1:-} in
prepare) prepare ;;
check) check ;;
run)
    shift
    run "$@"
    ;;
*)
    echo "usage: $0 prepare | check | run [--timeout S] [--env N=V] [--netns] -- CMD" >&2
    exit 2
    ;;
esac
