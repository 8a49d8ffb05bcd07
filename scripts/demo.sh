#!/usr/bin/env bash
# demo.sh [iterations] -- installs dependencies, builds rpma and runs the loopback demo:
# a server and a client process exchange writes, persistent flushes and reads over 127.0.0.1.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j"$(nproc)" --target rpma_demo
exec build/tools/rpma-demo/rpma_demo "$@"
