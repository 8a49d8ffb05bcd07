#!/usr/bin/env bash
# check_symbols.sh LIB EXPECTED [MAP]
# Fails unless LIB (librpma.so.0) exports exactly the names in EXPECTED, all at version
# LIBRPMA_1.0, defines no other dynamic symbol (the version node itself aside) and has the
# soname librpma.so.0. With MAP, the version script must list the same names.
# Both readelf and objdump are asked, so a quirk of one tool cannot hide a leak.
set -euo pipefail

lib=${1:?usage: check_symbols.sh LIB EXPECTED [MAP]}
expected=${2:?usage: check_symbols.sh LIB EXPECTED [MAP]}
map=${3:-}
version=LIBRPMA_1.0
soname=librpma.so.0

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rpma-abi.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail=0
err() { echo "FAIL: $*" >&2; fail=1; }

[[ -r $lib ]] || { echo "FAIL: cannot read $lib" >&2; exit 1; }
grep -v '^[[:space:]]*$' "$expected" | LC_ALL=C sort >"$tmp/expected"
n=$(wc -l <"$tmp/expected")
[[ $n -eq 84 ]] || err "$expected lists $n names, not 84"
dups=$(uniq -d "$tmp/expected")
[[ -z $dups ]] || err "duplicates in $expected: $dups"

# readelf: "Num: Value Size Type Bind Vis Ndx Name[@@ver]"; keep defined, non-local symbols.
readelf --dyn-syms -W "$lib" |
    awk '$1 ~ /^[0-9]+:$/ && $7 != "UND" && $5 != "LOCAL" { print $8 }' |
    LC_ALL=C sort >"$tmp/readelf"
# the version definition may appear as an absolute symbol named after the node
grep -vx "$version@@$version\|$version" "$tmp/readelf" >"$tmp/readelf.syms" || true
sed "s/\$/@@$version/" "$tmp/expected" >"$tmp/expected.versioned"
if ! diff -u "$tmp/expected.versioned" "$tmp/readelf.syms" >"$tmp/diff"; then
    err "readelf --dyn-syms: exports differ from $expected (- missing, + unexpected):"
    grep '^[-+][^-+]' "$tmp/diff" | sed 's/^+/  unexpected export: /; s/^-/  missing export: /' >&2
fi

# objdump -T: "addr flags section size version name"; keep defined global/weak symbols.
objdump -T "$lib" |
    awk '/^[0-9a-f]+ / && $0 !~ /\*UND\*/ && substr($0, 18, 1) != "l" { print $(NF-1), $NF }' |
    grep -v "^\(($version)\|$version\) $version\$" | LC_ALL=C sort -k2 >"$tmp/objdump" || true
sed "s/^/$version /" "$tmp/expected" | LC_ALL=C sort -k2 >"$tmp/expected.objdump"
if ! diff -u "$tmp/expected.objdump" "$tmp/objdump" >"$tmp/diff"; then
    err "objdump -T: exports differ from $expected (version name):"
    grep '^[-+][^-+]' "$tmp/diff" | sed 's/^+/  unexpected: /; s/^-/  missing: /' >&2
fi

# the soname binaries built against upstream's librpma 1.x look for
got_soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')
[[ $got_soname == "$soname" ]] || err "SONAME is '${got_soname}', expected '$soname'"

if [[ -n $map ]]; then
    sed -n 's/^[[:space:]]*\(rpma_[A-Za-z0-9_]*\);.*/\1/p' "$map" | LC_ALL=C sort >"$tmp/map"
    diff -u "$tmp/expected" "$tmp/map" >/dev/null || err "$map and $expected list different names"
fi

if [[ $fail -ne 0 ]]; then
    exit 1
fi
echo "check_symbols: $n functions exported at $version, nothing else; SONAME $soname"
