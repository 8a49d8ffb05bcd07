#!/usr/bin/env bash
# install_test.sh BUILD_DIR [SANITIZE [CC]]
# Installs the build into a temporary prefix, then builds and runs small C consumers against
# the installed copy only: with find_package(rpma), and with pkg-config (shared with an rpath,
# fully static with --static, and librpma-static.pc's archive). Where Debian's librpma0 is
# installed too, each must still run on the prefix's library, not on the one the loader's cache
# offers (upstream 1.2, which has no device for 127.0.0.1 without RDMA hardware). SANITIZE is the
# build's RPMA_SANITIZE value (an instrumented library needs instrumented consumers) and CC the
# build's C compiler, so the sanitizer runtimes match.
set -euo pipefail

build=${1:?usage: install_test.sh BUILD_DIR [SANITIZE]}
sanitize=${2:-}
cc=${3:-cc}
case $sanitize in
'') san_flags=() ;;
address) san_flags=('-fsanitize=address,undefined') ;;
thread) san_flags=(-fsanitize=thread) ;;
*) echo "unknown sanitizer '$sanitize'" >&2; exit 2 ;;
esac

tmp=$(mktemp -d /tmp/rpma-install.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
step() { echo "== $*"; }
die() { echo "FAIL: $*" >&2; exit 1; }

step "cmake --install into $prefix"
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; die "install failed"; }

libdir=$(dirname "$(find "$prefix" -name librpma.so.0 -print -quit)")
[[ -d $libdir && $libdir != . ]] || die "librpma.so.0 was not installed"
for f in "$prefix/include/librpma.h" "$libdir/librpma.so" "$libdir/librpma.a" \
    "$libdir/pkgconfig/librpma.pc" "$libdir/pkgconfig/librpma-static.pc" \
    "$libdir/cmake/rpma/rpmaConfig.cmake" \
    "$libdir/cmake/rpma/rpmaConfigVersion.cmake"; do
    [[ -e $f ]] || die "not installed: $f"
done
[[ -L $libdir/librpma.so && -L $libdir/librpma.so.0 ]] || die "librpma.so and librpma.so.0 must be symlinks"
[[ $(readlink -f "$libdir/librpma.so") == $(readlink -f "$libdir/librpma.so.0") ]] ||
    die "librpma.so and librpma.so.0 point to different files"

# The consumer checks a default and an argument error, so a dead library cannot pass, and asks
# for the device of 127.0.0.1, which only rpma has without RDMA hardware.
mkdir -p "$tmp/src"
cat >"$tmp/src/consumer.c" <<'C'
#include <librpma.h>

int main(void)
{
	struct rpma_conn_cfg *cfg = NULL;
	struct ibv_context *dev = NULL;
	int timeout = 0;
	if (rpma_conn_cfg_new(&cfg) || rpma_conn_cfg_get_timeout(cfg, &timeout) ||
	    timeout != RPMA_DEFAULT_TIMEOUT_MS || rpma_conn_cfg_delete(&cfg) || cfg != NULL)
		return 1;
	if (rpma_conn_cfg_new(NULL) != RPMA_E_INVAL)
		return 2;
	int ret = rpma_utils_get_ibv_context("127.0.0.1", RPMA_UTIL_IBV_CONTEXT_LOCAL, &dev);
	if (ret) {
		printf("no device for 127.0.0.1: %s (not rpma's library?)\n", rpma_err_2str(ret));
		return 3;
	}
	printf("consumer OK: %s\n", rpma_err_2str(RPMA_E_NOSUPP));
	return 0;
}
C

# only the installed library may satisfy librpma.so.0
check_resolves_to_prefix() {
    local exe=$1 where
    where=$(ldd "$exe" | awk '$1 == "librpma.so.0" { print $3 }')
    [[ $(readlink -f "$where") == $(readlink -f "$libdir/librpma.so.0") ]] ||
        die "$exe loads librpma.so.0 from '$where', not from $libdir"
}

step "find_package(rpma) consumer"
cat >"$tmp/src/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.22)
project(rpma_consumer C)
find_package(rpma 1.3 REQUIRED CONFIG)
add_executable(consumer_shared consumer.c)
target_link_libraries(consumer_shared PRIVATE rpma::rpma)
add_executable(consumer_static consumer.c)
target_link_libraries(consumer_static PRIVATE rpma::rpma_static)
CM
cmake -S "$tmp/src" -B "$tmp/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_C_COMPILER="$cc" -DCMAKE_C_FLAGS="${san_flags[*]}" \
    -DCMAKE_EXE_LINKER_FLAGS="${san_flags[*]}" >"$tmp/cmake.log" 2>&1 ||
    { cat "$tmp/cmake.log"; die "configuring the find_package consumer failed"; }
cmake --build "$tmp/cmake-build" >>"$tmp/cmake.log" 2>&1 ||
    { cat "$tmp/cmake.log"; die "building the find_package consumer failed"; }
check_resolves_to_prefix "$tmp/cmake-build/consumer_shared"
"$tmp/cmake-build/consumer_shared" || die "find_package consumer (shared) failed"
"$tmp/cmake-build/consumer_static" || die "find_package consumer (static) failed"
readelf -d "$tmp/cmake-build/consumer_static" | grep -q 'librpma' &&
    die "the static consumer still depends on librpma.so"

step "pkg-config consumer"
export PKG_CONFIG_PATH=$libdir/pkgconfig
[[ $(pkg-config --modversion librpma) == 1.3.0 ]] || die "pkg-config --modversion librpma is not 1.3.0"
pc_libdir=$(pkg-config --variable=libdir librpma)
[[ $(readlink -f "$pc_libdir") == $(readlink -f "$libdir") ]] ||
    die "librpma.pc libdir '$pc_libdir' is not $libdir"
read -r -a cflags <<<"$(pkg-config --cflags librpma)"
read -r -a libs <<<"$(pkg-config --libs librpma)"
"$cc" -std=c11 -Wall -Wextra -Werror "${san_flags[@]}" "${cflags[@]}" -o "$tmp/pc_consumer" \
    "$tmp/src/consumer.c" "${libs[@]}" -Wl,-rpath,"$pc_libdir" || die "building the pkg-config consumer failed"
check_resolves_to_prefix "$tmp/pc_consumer"
"$tmp/pc_consumer" || die "pkg-config consumer failed"

# static consumers: no librpma.so.0 to resolve, wherever the program runs
check_static() {
    local exe=$1
    readelf -d "$exe" | grep -q 'librpma' && die "$exe still depends on librpma.so"
    "$exe" || die "$exe failed"
}
step "pkg-config consumer, librpma-static: the archive, the rest shared"
read -r -a cflags <<<"$(pkg-config --cflags librpma-static)"
read -r -a libs <<<"$(pkg-config --libs librpma-static)"
"$cc" -std=c11 -Wall -Wextra -Werror "${san_flags[@]}" "${cflags[@]}" -o "$tmp/pc_archive" \
    "$tmp/src/consumer.c" "${libs[@]}" || die "building the librpma-static consumer failed"
check_static "$tmp/pc_archive"

# glibc's static libraries and the sanitizers' runtimes do not mix
if [[ ${#san_flags[@]} -eq 0 ]]; then
    step "pkg-config consumer, -static with --static: everything static"
    read -r -a cflags <<<"$(pkg-config --static --cflags librpma)"
    read -r -a libs <<<"$(pkg-config --static --libs librpma)"
    # the linker warns that getaddrinfo in a static program needs glibc's shared NSS modules
    "$cc" -static -std=c11 -Wall -Wextra -Werror "${cflags[@]}" -o "$tmp/pc_static" \
        "$tmp/src/consumer.c" "${libs[@]}" 2>"$tmp/static.log" ||
        { cat "$tmp/static.log"; die "building the -static consumer failed"; }
    check_static "$tmp/pc_static"
fi

echo "install test passed"
