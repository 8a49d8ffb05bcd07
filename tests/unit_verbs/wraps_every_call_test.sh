#!/usr/bin/env bash
# wraps_every_call_test.sh "WRAPPED;..." "OBJ;OBJ;..." -- fails when an object of
# src/provider/verbs/ calls a libibverbs or librdmacm function that rpma_verbs_unit_tests does not
# replace (tests/CMakeLists.txt, RPMA_VERBS_WRAPPED): that call would reach the real library.
set -euo pipefail
IFS=';' read -r -a wrapped <<<"$1"
IFS=';' read -r -a objects <<<"$2"
harmless=(rdma_event_str) # a table lookup, no device behind it
verbs=()
for o in "${objects[@]}"; do
    [[ $o == */provider/verbs/* ]] && verbs+=("$o")
done
if [[ ${#verbs[@]} -eq 0 ]]; then
    echo "no object of src/provider/verbs among the arguments" >&2
    exit 1
fi
missing=0
while read -r sym; do
    if [[ " ${wrapped[*]} ${harmless[*]} " != *" $sym "* ]]; then
        echo "not wrapped for rpma_verbs_unit_tests: $sym" >&2
        missing=1
    fi
done < <(nm -u "${verbs[@]}" | awk '$2 ~ /^(ibv_|rdma_)/ {print $2}' | sort -u)
[[ $missing -eq 0 ]] && echo "every rdma-core call of src/provider/verbs is wrapped"
exit $missing
