#!/usr/bin/env bash
# deb_test.sh BUILD_DIR SCRATCH_DIR SANITIZE CC CPACK VERSION CONSUMER_C
# Builds the Debian packages of BUILD_DIR with cpack into SCRATCH_DIR, checks their control
# fields and contents, unpacks both with dpkg -x into a scratch root, builds CONSUMER_C against
# that root with pkg-config and runs it with LD_LIBRARY_PATH into the root: a real loopback
# write + flush, after which the program must report that librpma.so.0 came from the root.
# Exit 77 (skipped) in sanitizer builds (packages are made from the plain build) and where
# dpkg-deb is missing.
set -euo pipefail

build=$1 scratch=$2 sanitize=$3 cc=$4 cpack=$5 version=$6 consumer=$7
step() { echo "== $*"; }
die() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }

[[ -z $sanitize ]] || skip "a RPMA_SANITIZE=$sanitize build; the packages are tested in the plain build"
command -v dpkg-deb >/dev/null || skip "dpkg-deb is not installed (not a Debian system?)"
command -v pkg-config >/dev/null || skip "pkg-config is not installed"

rm -rf "$scratch"
mkdir -p "$scratch/pkg" "$scratch/root"

step "cpack -G DEB"
"$cpack" -G DEB --config "$build/CPackConfig.cmake" -B "$scratch/pkg" >"$scratch/cpack.log" 2>&1 ||
    { cat "$scratch/cpack.log"; die "cpack failed"; }
arch=$(dpkg --print-architecture)
lib_deb=$scratch/pkg/librpma0_${version}-1_${arch}.deb
dev_deb=$scratch/pkg/librpma-dev_${version}-1_${arch}.deb
tools_deb=$scratch/pkg/rpma-tools_${version}-1_${arch}.deb
[[ -f $lib_deb && -f $dev_deb && -f $tools_deb ]] ||
    { ls -l "$scratch/pkg"; die "expected $lib_deb, $dev_deb and $tools_deb"; }

step "control fields"
field() { dpkg-deb -f "$1" "$2"; }
expect() { # DEB FIELD VALUE
    local got
    got=$(field "$1" "$2")
    [[ $got == "$3" ]] || die "$(basename "$1"): $2 is '$got', expected '$3'"
}
for deb in "$lib_deb" "$dev_deb" "$tools_deb"; do
    expect "$deb" Version "${version}-1"
    expect "$deb" Architecture "$arch"
    expect "$deb" Source rpma
    expect "$deb" Priority optional
    [[ -n $(field "$deb" Maintainer) ]] || die "$(basename "$deb"): no Maintainer"
    # same names as Debian's packages: a relation with itself would be meaningless
    for rel in Replaces Conflicts Provides Breaks; do
        [[ -z $(field "$deb" "$rel") ]] || die "$(basename "$deb"): unexpected $rel: $(field "$deb" "$rel")"
    done
done
expect "$lib_deb" Package librpma0
expect "$lib_deb" Section libs
expect "$dev_deb" Package librpma-dev
expect "$dev_deb" Section libdevel
expect "$dev_deb" Depends "librpma0 (= ${version}-1), libibverbs-dev, librdmacm-dev"
expect "$tools_deb" Package rpma-tools
expect "$tools_deb" Section utils
[[ $(field "$tools_deb" Depends) == "librpma0 (= ${version}-1), "* ]] ||
    die "rpma-tools Depends '$(field "$tools_deb" Depends)' does not start with librpma0 (= ${version}-1)"
lib_depends=$(field "$lib_deb" Depends)
for dep in libc6 libstdc++6 libibverbs1 librdmacm1; do
    [[ ", $lib_depends" == *", $dep ("* ]] || die "librpma0 Depends '$lib_depends' lacks $dep"
done
[[ $(field "$lib_deb" Description) == "remote persistent memory access library over TCP"* ]] ||
    die "librpma0: unexpected synopsis '$(field "$lib_deb" Description | head -1)'"

step "control files of librpma0"
mkdir -p "$scratch/control"
dpkg-deb -e "$lib_deb" "$scratch/control"
[[ $(cat "$scratch/control/shlibs") == "librpma 0 librpma0 (>= ${version})" ]] ||
    die "shlibs is '$(cat "$scratch/control/shlibs")'"
[[ $(head -1 "$scratch/control/symbols") == "librpma.so.0 librpma0 #MINVER#" ]] || die "symbols header"
n=$(grep -c '^ rpma_[a-z0-9_]*@LIBRPMA_1.0 ' "$scratch/control/symbols")
[[ $n == 84 ]] || die "symbols lists $n functions, expected 84"
grep -qx 'activate-noawait ldconfig' "$scratch/control/triggers" || die "no ldconfig trigger"

step "contents"
dpkg-deb -c "$lib_deb" | awk '{ print $6 }' | sed 's|^\./|/|' | sort >"$scratch/lib.files"
dpkg-deb -c "$dev_deb" | awk '{ print $6 }' | sed 's|^\./|/|' | sort >"$scratch/dev.files"
dpkg-deb -c "$tools_deb" | awk '{ print $6 }' | sed 's|^\./|/|' | sort >"$scratch/tools.files"
has() { grep -Eq "$2" "$scratch/$1.files" || die "$1 package lacks a file matching $2"; }
lacks() { ! grep -Eq "$2" "$scratch/$1.files" || die "$1 package has a file matching $2"; }
has lib '^/usr/lib/(.+/)?librpma\.so\.0$'
has lib '^/usr/lib/(.+/)?librpma\.so\.0\.[0-9.]+$'
has lib '^/usr/share/doc/librpma0/copyright$'
has lib '^/usr/share/doc/librpma0/changelog\.Debian\.gz$'
lacks lib 'librpma\.so$|librpma\.h|librpma\.pc|librpma\.a'
has dev '^/usr/include/librpma\.h$'
has dev '^/usr/lib/(.+/)?librpma\.so$'
has dev '^/usr/lib/(.+/)?librpma\.a$'
has dev '^/usr/lib/(.+/)?pkgconfig/librpma\.pc$'
has dev '^/usr/lib/(.+/)?cmake/rpma/rpmaConfig\.cmake$'
has dev '^/usr/share/doc/librpma-dev/copyright$'
has dev '^/usr/share/doc/librpma-dev/changelog\.Debian\.gz$'
lacks dev 'librpma\.so\.0'
lacks dev '/man1/|/bin/'
has tools '^/usr/bin/rpma-perf$'
has tools '^/usr/share/man/man1/rpma-perf\.1\.gz$'
has tools '^/usr/share/doc/rpma-tools/copyright$'
has tools '^/usr/share/doc/rpma-tools/changelog\.Debian\.gz$'
lacks tools 'librpma'
uncompressed=$(grep -hE '/share/man/.+/[^/]+$' "$scratch/dev.files" "$scratch/tools.files" |
    grep -v '\.gz$' || true)
[[ -z $uncompressed ]] || die "man pages not compressed: $uncompressed"
# a path in two packages would make dpkg refuse the second (directories aside)
for pair in "lib dev" "lib tools" "dev tools"; do
    read -r a b <<<"$pair"
    both=$(comm -12 <(grep -v '/$' "$scratch/$a.files") <(grep -v '/$' "$scratch/$b.files"))
    [[ -z $both ]] || die "files in both $a and $b packages: $both"
done

step "dpkg -x into $scratch/root"
dpkg -x "$lib_deb" "$scratch/root"
dpkg -x "$dev_deb" "$scratch/root"
dpkg -x "$tools_deb" "$scratch/root"
root=$(cd "$scratch/root" && pwd -P)
so=$(find "$root/usr/lib" -name librpma.so.0 -print -quit)
libdir=$(dirname "$so")
[[ $(readlink "$libdir/librpma.so") == librpma.so.0 ]] || die "librpma.so must point to librpma.so.0"
[[ -f $(readlink -f "$so") ]] || die "librpma.so.0 is a dangling link"
zcat "$root/usr/share/doc/librpma0/changelog.Debian.gz" | head -1 | grep -q "^rpma (${version}-1) " ||
    die "changelog.Debian.gz does not start with rpma (${version}-1)"

step "pkg-config consumer"
# the .pc file finds its prefix from its own location (${pcfiledir}), so no sysroot is needed
export PKG_CONFIG_PATH=$libdir/pkgconfig
[[ $(pkg-config --modversion librpma) == "$version" ]] || die "pkg-config --modversion librpma"
pc_libdir=$(pkg-config --variable=libdir librpma)
[[ $(readlink -f "$pc_libdir") == "$libdir" ]] || die "librpma.pc libdir '$pc_libdir' is not $libdir"
[[ $(readlink -f "$(pkg-config --variable=includedir librpma)") == "$root/usr/include" ]] ||
    die "librpma.pc includedir is not $root/usr/include"
read -r -a cflags <<<"$(pkg-config --cflags librpma)"
read -r -a libs <<<"$(pkg-config --libs librpma)"
"$cc" -std=c11 -Wall -Wextra -Werror "${cflags[@]}" -o "$scratch/consumer" "$consumer" "${libs[@]}" ||
    die "building the consumer failed"

step "run the consumer with LD_LIBRARY_PATH=$libdir"
export LD_LIBRARY_PATH=$libdir
where=$(ldd "$scratch/consumer" | awk '$1 == "librpma.so.0" { print $3 }')
[[ $(readlink -f "$where") == $(readlink -f "$so") ]] ||
    die "ldd: the consumer loads librpma.so.0 from '$where', not from $libdir"
out=$(timeout 60 "$scratch/consumer") || { echo "$out"; die "the consumer failed"; }
echo "$out"
loaded=$(sed -n 's/^librpma: //p' <<<"$out")
[[ -n $loaded && $(readlink -f "$loaded") == $(readlink -f "$so") ]] ||
    die "the consumer ran on '$loaded', not on the packaged $(readlink -f "$so")"

step "the packaged rpma-perf on the packaged librpma.so.0"
where=$(ldd "$root/usr/bin/rpma-perf" | awk '$1 == "librpma.so.0" { print $3 }')
[[ $(readlink -f "$where") == $(readlink -f "$so") ]] ||
    die "ldd: rpma-perf loads librpma.so.0 from '$where', not from $libdir"
[[ $("$root/usr/bin/rpma-perf" --version) == "rpma-perf $version" ]] || die "rpma-perf --version"

rm -rf "$scratch"
echo "deb test passed"
