#!/usr/bin/env bash
# check_layout.sh SRC_DIR -- the provider seam (docs/architecture.md): src/core/ and src/api/
# include nothing under src/provider/ but provider/provider.h, and nothing under src/provider/
# includes src/core/ or src/api/. Prints every offending line; exits 1 if there is one.
set -uo pipefail
src=${1:?usage: check_layout.sh SRC_DIR}
bad=0
up=$(grep -rnE '#include "provider/' "$src/core" "$src/api" | grep -v '#include "provider/provider.h"')
if [ -n "$up" ]; then
    echo "core or api includes a provider's internals (only provider/provider.h is allowed):"
    echo "$up"
    bad=1
fi
down=$(grep -rnE '#include "(core|api)/' "$src/provider")
if [ -n "$down" ]; then
    echo "a provider includes core or api:"
    echo "$down"
    bad=1
fi
[ $bad -eq 0 ] && echo "provider seam: OK"
exit $bad
