#!/bin/sh
# test.sh: sets everything up and runs the whole test suite (no GPU needed:
# the tests run on the simulated CUDA built under tests/sim).
set -eu
cd "$(dirname "$0")/.."
scripts/setup.sh
meson test -C build --print-errorlogs "$@"
