#!/usr/bin/env bash
# check_layout.sh SRC_DIR -- the provider seam (docs/architecture.md): src/core/ and src/api/
# include nothing under src/provider/ but provider/provider.h, and nothing under src/provider/
# includes src/core/ or src/api/; the RC engine (src/provider/rc/) and the software verbs pieces
# (src/provider/soft/) include no transport (src/provider/tcp/); and tcp includes nothing of shm,
# which it reaches only through tcp/upgrade.h (docs/rc-rebuild.md, b2). Prints every offending
# line; exits 1 if there is one.
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
side=$(grep -rnE '#include "provider/tcp/' "$src/provider/rc" "$src/provider/soft")
if [ -n "$side" ]; then
    echo "the RC engine or the soft pieces include a transport:"
    echo "$side"
    bad=1
fi
over=$(grep -rnE '#include "provider/shm/' "$src/provider/tcp")
if [ -n "$over" ]; then
    echo "tcp/ includes shm/ (shm is reached only through tcp/upgrade.h):"
    echo "$over"
    bad=1
fi
[ $bad -eq 0 ] && echo "provider seam: OK"
exit $bad
