#!/usr/bin/env bash
# The README's first command: install what is missing, build, and run a short loopback tour of
# rpma-perf (write bandwidth, write+flush latency, read bandwidth, read latency), under a minute.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j"$(nproc)" --target rpma-perf
exec build/tools/rpma-perf/rpma-perf tour "$@"
