#!/usr/bin/env bash
# bundle.sh -- builds rpma-perf and the peers (Release) and copies into DIR everything
# bench/run.py needs, so that DIR runs on another x86-64 Linux machine that has python3 and
# nothing else installed (no rpma, libfabric, UCX, not even the same glibc):
#
#   bench/bundle.sh DIR [--build BUILD_DIR] [--jobs N]
#   scp -r DIR host: && ssh host DIR/run.sh [run.py options, e.g. --cases write_64k --runs 3]
#
# DIR/libexec/   rpma-perf, tcp_peer, shm_peer, idle_conns, fabric_peer, ucx_perftest (the ELF
#                programs)
# DIR/bin/       one sh wrapper per program: it starts the program through the bundled dynamic
#                loader with --library-path DIR/lib, FI_PROVIDER_PATH=DIR/lib/libfabric and
#                UCX_MODULE_DIR=DIR/lib/ucx, so only bundled libraries are loaded
# DIR/lib/       librpma.so.0 and every shared library the programs, the UCX modules and the
#                libfabric providers load (ldd), glibc and ld-linux-x86-64.so.2 included
# DIR/run.py     bench/run.py;  DIR/run.sh: python3 run.py --bin-dir DIR/bin "$@"
# DIR/thread_cpu.py  bench/thread_cpu.py (each thread's CPU and sleeps; it needs only /proc)
# DIR/MANIFEST   each bundled file with the Debian package (and version) it was copied from
#
# RPMA_BUNDLE_LIB_FIRST=DIR2 puts DIR2 before DIR/lib (run.py's --baseline-lib sets it, so the
# rpma_base peer can load another librpma.so.0; LD_LIBRARY_PATH is not honoured, see below).
# The library path is given to the loader per program rather than exported as LD_LIBRARY_PATH:
# the host's python3 must keep the host's libc (a bundled libc.so.6 next to the host's loader
# would not start). Missing peers (no libfabric or UCX installed here) are left out with a
# message, as bench/run.sh does; bench/install-deps.sh installs them.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(dirname "$HERE")
BUILD=${RPMA_BUNDLE_BUILD:-$REPO/build-bundle}
JOBS=${RPMA_BUNDLE_JOBS:-$(nproc)}
DIR=""
while [[ $# -gt 0 ]]; do
    case $1 in
        --build) BUILD=$2; shift 2 ;;
        --jobs) JOBS=$2; shift 2 ;;
        -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
        -*) echo "bundle.sh: unknown option $1" >&2; exit 2 ;;
        *) [[ -z $DIR ]] || { echo "bundle.sh: one DIR only" >&2; exit 2; }; DIR=$1; shift ;;
    esac
done
[[ -n $DIR ]] || { echo "usage: bench/bundle.sh DIR [--build BUILD_DIR] [--jobs N]" >&2; exit 2; }
[[ $(uname -m) == x86_64 ]] || echo "bundle.sh: warning: building on $(uname -m), not x86_64" >&2
for tool in cmake ldd python3; do
    command -v "$tool" >/dev/null || { echo "bundle.sh: $tool is required" >&2; exit 1; }
done

# DIR is new, empty or an earlier bundle (it has a MANIFEST): nothing else gets overwritten
if [[ -d $DIR && -n $(ls -A "$DIR") && ! -f $DIR/MANIFEST ]]; then
    echo "bundle.sh: $DIR is neither empty nor a bundle; give a new or empty directory" >&2
    exit 1
fi
echo "bundle.sh: building in $BUILD (Release)" >&2
cmake -S "$REPO" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DRPMA_BUILD_TESTS=OFF \
      -DRPMA_BUILD_BENCH=ON >/dev/null
targets=(rpma rpma-perf tcp_peer shm_peer idle_conns)
if pkg-config --exists libfabric 2>/dev/null; then
    targets+=(fabric_peer)
else
    echo "bundle.sh: libfabric not found (pkg-config libfabric): fabric_peer is left out" >&2
fi
cmake --build "$BUILD" -j"$JOBS" --target "${targets[@]}" >/dev/null

mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
rm -rf "${DIR:?}/bin" "${DIR:?}/libexec" "${DIR:?}/lib"
mkdir -p "$DIR/bin" "$DIR/libexec" "$DIR/lib"

progs=("$BUILD/tools/rpma-perf/rpma-perf" "$BUILD/bench/tcp_peer" "$BUILD/bench/shm_peer"
       "$BUILD/bench/idle_conns")
[[ -x $BUILD/bench/fabric_peer ]] && progs+=("$BUILD/bench/fabric_peer")
UCX=$(command -v ucx_perftest || true)
if [[ -n $UCX ]]; then
    progs+=("$UCX")
else
    echo "bundle.sh: ucx_perftest not found: the UCX peer is left out (ucx-utils)" >&2
fi

# every library an ELF file loads, as "soname path" lines (ldd resolves the whole tree)
deps() {
    ldd "$1" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }
                    $1 ~ /^\// && $2 ~ /^\(/ { print "LOADER", $1 }'
}

declare -A seen=()
loader=""
copy_deps() {  # ELF file
    local name path
    while read -r name path; do
        if [[ $name == LOADER ]]; then
            loader=$path
            continue
        fi
        [[ -n ${seen[$name]:-} ]] && continue
        seen[$name]=$path
        cp -L "$path" "$DIR/lib/$name"
    done < <(deps "$1")
}

for p in "${progs[@]}"; do
    cp -L "$p" "$DIR/libexec/"
    copy_deps "$p"
done
if [[ -z ${seen[librpma.so.0]:-} ]]; then
    echo "bundle.sh: rpma-perf does not load librpma.so.0?" >&2
    exit 1
fi

# plugins loaded with dlopen: UCX modules and libfabric providers, next to their libraries
if [[ -n ${seen[libucs.so.0]:-} ]]; then
    mods=$(dirname "${seen[libucs.so.0]}")/ucx
    if [[ -d $mods ]]; then
        mkdir -p "$DIR/lib/ucx"
        cp -a "$mods"/. "$DIR/lib/ucx/"
        for m in "$DIR"/lib/ucx/*.so*; do [[ -L $m ]] || copy_deps "$m"; done
    fi
fi
if [[ -n ${seen[libfabric.so.1]:-} ]]; then
    provs=$(dirname "${seen[libfabric.so.1]}")/libfabric
    mkdir -p "$DIR/lib/libfabric"  # FI_PROVIDER_PATH must name a directory, even an empty one
    if [[ -d $provs ]]; then
        cp -a "$provs"/. "$DIR/lib/libfabric/"
        for m in "$DIR"/lib/libfabric/*.so*; do [[ -L $m ]] || copy_deps "$m"; done
    fi
fi
[[ -n $loader ]] || { echo "bundle.sh: no dynamic loader in ldd's output" >&2; exit 1; }
cp -L "$loader" "$DIR/lib/$(basename "$loader")"
LOADER_NAME=$(basename "$loader")
seen[$LOADER_NAME]=$loader

for p in "${progs[@]}"; do
    name=$(basename "$p")
    cat > "$DIR/bin/$name" <<EOF
#!/bin/sh
# $name from the bundle: the bundled loader and libraries only (bench/bundle.sh)
case \$0 in */*) B=\${0%/*} ;; *) B=. ;; esac
L=\$B/../lib
FI_PROVIDER_PATH=\$L/libfabric UCX_MODULE_DIR=\$L/ucx
export FI_PROVIDER_PATH UCX_MODULE_DIR
exec "\$L/$LOADER_NAME" --library-path "\${RPMA_BUNDLE_LIB_FIRST:+\$RPMA_BUNDLE_LIB_FIRST:}\$L" \\
    --argv0 "\$0" "\$B/../libexec/$name" "\$@"
EOF
    chmod +x "$DIR/bin/$name"
done

cp "$HERE/run.py" "$DIR/run.py"
cp "$HERE/thread_cpu.py" "$DIR/thread_cpu.py"
cat > "$DIR/run.sh" <<'EOF'
#!/bin/sh
# Runs bench/run.py over the bundled programs: run.sh [--cases a,b] [--runs N] [--time S] ...
# (python3 run.py --help lists the options). Results go to ./results.json unless --out is given.
case $0 in */*) D=${0%/*} ;; *) D=. ;; esac
exec python3 "$D/run.py" --bin-dir "$D/bin" "$@"
EOF
chmod +x "$DIR/run.sh"

# where each file came from
{
    # shellcheck disable=SC1091
    os=$(. /etc/os-release 2>/dev/null; echo "${PRETTY_NAME:-?}")
    echo "# bundle of $(git -C "$REPO" describe --always --dirty 2>/dev/null || echo unknown)" \
         "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $os"
    for name in $(printf '%s\n' "${!seen[@]}" | sort); do
        path=${seen[$name]}
        pkg=$(dpkg -S "$(readlink -f "$path")" 2>/dev/null | head -1 | cut -d: -f1 || true)
        [[ -z $pkg ]] && pkg=$(dpkg -S "$path" 2>/dev/null | head -1 | cut -d: -f1 || true)
        ver=""
        [[ -n $pkg ]] && ver=$(dpkg-query -W -f='${Version}' "$pkg" 2>/dev/null || true)
        echo "lib/$name $path ${pkg:-(built here)} $ver"
    done
    for p in "${progs[@]}"; do echo "libexec/$(basename "$p") $p"; done
} > "$DIR/MANIFEST"

echo "bundle.sh: $DIR: ${#progs[@]} programs, ${#seen[@]} libraries," \
     "$(du -sh "$DIR" | cut -f1); run: $DIR/run.sh --cases write_64k,lat_blocking" >&2
