#!/bin/sh
# fuzz_cli.sh: the whole command line fuzzed (replay with each policy,
# export in every format, report of a trace and of a JSON report, report
# --html, merge) with inputs mutated from seeds:
#   scripts/fuzz_cli.sh [SECONDS]     # default 600
# Builds tools/oomlens into build-fuzzcli/ with ASan and UBSan, every UBSan
# check fatal (-fno-sanitize-recover=all), float-to-integer overflow too
# (gcc leaves -fsanitize=float-cast-overflow out of "undefined"), then runs scripts/fuzz_cli.py,
# which says what it mutates and what counts as a finding. Seeds: the
# recorded traces of tests/data (their heads), the OOM traces of
# tests/data/oom, the trace corpus of tests/fuzz, the JSON reports of
# tests/data/reports and tests/json_data, and the earlier findings kept in
# tests/data/fuzz_cli/. Findings land in build-fuzzcli/fuzz/findings/
# (input and command); the script exits 1 if there were any. Everything it
# writes stays under build-fuzzcli/ (docs/reliability.md has the runs).
set -eu
cd "$(dirname "$0")/.."

seconds=${1:-600}
cuda_headers=${CUDA_HEADERS:-/usr/local/cuda/include}
out=build-fuzzcli
if [ ! -f "$out/build.ninja" ]; then
  meson setup "$out" -Dcudaheaders="$cuda_headers" -Dbuildtype=debug \
    -Db_sanitize=address,undefined -Db_lundef=false \
    -Dc_args='-fno-sanitize-recover=all -fsanitize=float-cast-overflow' \
    -Dc_link_args=-fsanitize=float-cast-overflow >/dev/null
fi
ninja -C "$out" tools/oomlens >/dev/null

seeds=$(ls tests/data/*.csv.gz tests/data/oom/*.trace.xz tests/fuzz/corpus/trace_csv/* \
  tests/data/reports/*.json tests/json_data/*.json 2>/dev/null)
if [ -d tests/data/fuzz_cli ]; then
  seeds="$seeds $(ls tests/data/fuzz_cli/* | grep -v '\.txt$' || true)"
fi
# shellcheck disable=SC2086 # a word list on purpose
exec python3 scripts/fuzz_cli.py "$out/tools/oomlens" "$seconds" "$out/fuzz" $seeds
