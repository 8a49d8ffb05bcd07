#!/usr/bin/env bash
# build.sh -- builds fio with its librpma engines (librpma_apm_*, librpma_gpspm_*) against THIS
# rpma: headers from include/, librpma.so.0 from an rpma build directory or install prefix.
#
#   bench/fio/build.sh [--rpma DIR] [--out DIR] [--jobs N] [--no-opt]
#     --rpma DIR  an rpma build dir holding librpma.so (or a prefix with lib/ or
#                 lib/<multiarch>/librpma.so); default: build/
#     --out DIR   where fio's source and binary go; default: build-fio/ (git-ignored)
#     --jobs N    make -jN; default: nproc
#     --no-opt    configure --disable-optimizations: a faster build, for tests (not benchmarks)
#
# Debian's fio binary is built without the librpma engines, so this fetches Debian's fio source
# (`apt-get source fio`; adds a deb-src entry and runs apt-get update when there is none) and
# installs the build dependencies it needs with apt-get (libpmem-dev, librdmacm-dev,
# libprotobuf-c-dev, ... -- never Debian's librpma-dev, which is not linked even when installed).
# fio gets a RUNPATH to the rpma library directory: OUT/fio then loads our librpma.so.0
# (LD_LIBRARY_PATH still overrides it). Nothing is installed outside OUT except apt packages.
#
# fio 3.33 is built against libpmem, not libpmem2: with libpmem2 its GPSPM server calls
# pmem2_get_persist_fn(NULL) in server_init and crashes (a fio bug), so CONFIG_LIBPMEM2_INSTALLED
# is dropped from the generated config after configure.
#
# Idempotent: when OUT/fio exists and OUT/stamp names the same rpma library directory, header and
# build recipe, nothing is downloaded or built. The last line on stdout is the path of fio.
# Exit status: 0 built (or already there), 3 fio's source could not be fetched, 4 the build
# failed, 2 bad arguments or no rpma library.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
RPMA=$REPO/build
OUT=$REPO/build-fio
JOBS=$(nproc)
OPT=(--disable-native)
while [[ $# -gt 0 ]]; do
    case $1 in
        --rpma) RPMA=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        --jobs) JOBS=$2; shift 2 ;;
        --no-opt) OPT+=(--disable-optimizations); shift ;;
        -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
        *) echo "build.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
log() { echo "fio/build.sh: $*" >&2; }

# The directory holding our librpma.so (the link-time name) and librpma.so.0.
LIBDIR=""
for d in "$RPMA" "$RPMA/lib" "$RPMA"/lib/*-linux-gnu "$RPMA/lib64"; do
    if [[ -e $d/librpma.so && -e $d/librpma.so.0 ]]; then LIBDIR=$(cd "$d" && pwd); break; fi
done
if [[ -z $LIBDIR ]]; then
    log "no librpma.so in $RPMA (build rpma first: cmake -S . -B build && cmake --build build)"
    exit 2
fi
INCDIR=$REPO/include
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

stamp="rpma-lib=$LIBDIR
header=$(sha256sum <"$INCDIR/librpma.h" | cut -d' ' -f1)
recipe=$(sha256sum <"$HERE/build.sh" | cut -d' ' -f1)
options=${OPT[*]}"
if [[ -x $OUT/fio && -f $OUT/stamp && $(cat "$OUT/stamp") == "$stamp" ]]; then
    log "$OUT/fio is already built against $LIBDIR"
    echo "$OUT/fio"
    exit 0
fi

SUDO=()
if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null; then SUDO=(sudo); else SUDO=(false); fi
fi
export DEBIAN_FRONTEND=noninteractive
# apt-get-wait waits for another apt's lock (the dpkg lock and apt-get update's lists lock)
APT=("${SUDO[@]}" "$REPO/scripts/apt-get-wait" -q -o Acquire::http::Timeout=30 -o Acquire::Retries=2)

installed() { [[ $(dpkg-query -W -f='${Status}' "$1" 2>/dev/null) == "install ok installed" ]]; }
# What fio's configure needs for the librpma engines (libverbs + rdmacm + libpmem, protobuf-c for
# GPSPM), and dpkg-dev for apt-get source.
DEPS=(build-essential pkg-config dpkg-dev libibverbs-dev librdmacm-dev libpmem-dev
      libprotobuf-c-dev zlib1g-dev)
missing=()
for p in "${DEPS[@]}"; do installed "$p" || missing+=("$p"); done
updated=no
if [[ ${#missing[@]} -gt 0 ]]; then
    log "installing ${missing[*]}"
    "${APT[@]}" update >&2 && updated=yes
    "${APT[@]}" install -y --no-install-recommends "${missing[@]}" >&2 ||
        { log "could not install ${missing[*]}"; exit 4; }
fi

# ---- fio's source (Debian's, with Debian's patches applied by dpkg-source)
SRC=$(find "$OUT/src" -maxdepth 1 -type d -name 'fio-*' 2>/dev/null | sort | tail -n1 || true)
if [[ -z $SRC || ! -f $SRC/configure ]]; then
    has_src() { apt-cache showsrc fio 2>/dev/null | grep '^Package: fio' >/dev/null; }
    if ! has_src; then
        if [[ $updated == no ]]; then "${APT[@]}" update >&2 || true; updated=yes; fi
    fi
    if ! has_src; then
        # No deb-src entry: add one next to the deb entries (deb822 or one-line style).
        deb822=/etc/apt/sources.list.d/debian.sources
        if [[ -f $deb822 ]] && grep -q '^Types: *deb *$' "$deb822"; then
            log "adding deb-src to $deb822"
            "${SUDO[@]}" sed -i 's/^Types: *deb *$/Types: deb deb-src/' "$deb822" || true
        elif [[ -f /etc/apt/sources.list ]] && grep -q '^deb ' /etc/apt/sources.list; then
            log "adding deb-src lines to /etc/apt/sources.list"
            sed -n 's/^deb /deb-src /p' /etc/apt/sources.list |
                "${SUDO[@]}" tee /etc/apt/sources.list.d/rpma-fio-deb-src.list >/dev/null || true
        fi
        "${APT[@]}" update >&2 || true
    fi
    rm -rf "$OUT/src"
    mkdir -p "$OUT/src"
    log "fetching fio's source (apt-get source fio)"
    if ! (cd "$OUT/src" && apt-get -q -o Acquire::http::Timeout=30 -o Acquire::Retries=2 source fio) >&2; then
        log "could not fetch fio's source with apt-get source fio (no deb-src entry or no network)"
        exit 3
    fi
    SRC=$(find "$OUT/src" -maxdepth 1 -type d -name 'fio-*' | sort | tail -n1)
    [[ -n $SRC && -f $SRC/configure ]] || { log "apt-get source fio gave no source tree"; exit 3; }
fi

# ---- configure and build only fio, with the librpma engines against our rpma
log "building $SRC against $LIBDIR (make -j$JOBS)"
start=$(date +%s)
rm -f "$OUT/fio" "$OUT/stamp"
(
    cd "$SRC"
    make clean >/dev/null 2>&1 || true
    LDFLAGS="-L$LIBDIR -Wl,-rpath,$LIBDIR -Wl,--enable-new-dtags" ./configure \
        --extra-cflags="-I$INCDIR" "${OPT[@]}" --disable-numa --disable-rados --disable-rbd \
        --disable-http --disable-gfapi --disable-libnfs --disable-xnvme --disable-libzbc \
        --disable-tcmalloc --disable-dfs >"$OUT/configure.log" 2>&1 ||
        { cat "$OUT/configure.log" >&2; exit 1; }
    grep -E '^(librpma|libpmem|libpmem2|libprotobuf_c|libverbs|rdmacm) ' "$OUT/configure.log" >&2 || true
    for f in config-host.h config-host.mak; do
        grep -q 'CONFIG_LIBRPMA_APM' "$f" || { echo "configure found no librpma engines" >&2; exit 1; }
    done
    grep -q 'CONFIG_LIBRPMA_GPSPM' config-host.mak ||
        { echo "configure did not enable librpma_gpspm (libprotobuf-c?)" >&2; exit 1; }
    # fio's GPSPM server crashes when built with libpmem2 (see above): use libpmem.
    sed -i '/CONFIG_LIBPMEM2_INSTALLED/d' config-host.h config-host.mak
    nice make -j"$JOBS" fio >"$OUT/make.log" 2>&1 || { tail -n 40 "$OUT/make.log" >&2; exit 1; }
) || { log "building fio failed (logs in $OUT)"; exit 4; }
# ---- check that fio loads our librpma.so.0, not Debian's, and has the engines
loaded=$(ldd "$SRC/fio" | awk '$1 == "librpma.so.0" { print $3 }')
if [[ $(readlink -f "$loaded") != $(readlink -f "$LIBDIR/librpma.so.0") ]]; then
    log "fio loads librpma.so.0 from '$loaded', not from $LIBDIR"
    exit 4
fi
# fio is not instrumented: a sanitizer runtime that librpma.so.0 needs must be loaded first
runtime=$(ldd "$LIBDIR/librpma.so.0" | awk '$1 ~ /^lib(asan|tsan)\.so/ { print $3; exit }')
engines=$(LD_PRELOAD=$runtime ASAN_OPTIONS=detect_leaks=0 "$SRC/fio" --enghelp 2>&1 || true)
if ! grep -q librpma_gpspm_server <<<"$engines"; then
    log "fio has no librpma engines: fio --enghelp says:"
    echo "$engines" | tail -n 20 >&2
    exit 4
fi
cp "$SRC/fio" "$OUT/fio"
rm -rf "$OUT/examples"
cp -r "$SRC/examples" "$OUT/examples"
echo "$stamp" >"$OUT/stamp"
log "built $OUT/fio in $(($(date +%s) - start)) s; librpma.so.0 => $loaded"
echo "$OUT/fio"
