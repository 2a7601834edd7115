#!/bin/sh
# fuzz.sh: builds the libFuzzer targets of tests/fuzz/ with clang (ASan and
# UBSan on) into build-fuzz/ and runs each for SECONDS (default 60):
#   scripts/fuzz.sh [SECONDS] [TARGET...]
# Targets: trace_csv, json, options, report. The seeds of tests/fuzz/corpus/<target>
# are copied into build-fuzz/corpus/<target>, which grows across runs and
# stays out of git; a crash lands in build-fuzz/crashes/<target>/ and makes
# the script exit 1. Not part of scripts/test.sh; the seeds are (the
# fuzz-corpus-* tests), and so is a Check test for each crash found
# (docs/reliability.md).
set -eu
cd "$(dirname "$0")/.."

seconds=${1:-60}
if [ $# -gt 0 ]; then shift; fi  # not `&& shift`: under set -e a false test there ends the script
targets=${*:-trace_csv json options report}

# Debian 12: clang 14; libFuzzer's runtime is in libclang-rt-14-dev.
missing=""
for p in clang libclang-rt-14-dev zlib1g-dev liblzma-dev; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "fuzz: installing$missing"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing >/dev/null
fi

cuda_headers=${CUDA_HEADERS:-/usr/local/cuda/include}
out=build-fuzz
mkdir -p "$out"
flags="-std=c11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
  -Isrc/core -Isrc/analyze -Iinclude"

# Each target links the core whole (one library, as meson builds it: a
# list of its files here went stale whenever a file was added) and the
# analyze files of what it reads.
core=$(ls src/core/*.c)
sources_of() {
  case "$1" in
    trace_csv) echo "src/analyze/trace_csv.c $core -lz -llzma -lm -lpthread" ;;
    json) echo "src/analyze/json.c $core -lz -lm -lpthread" ;;
    options) echo "$core -lm -lpthread" ;;
    report) echo "$(ls src/analyze/*.c src/alloc/*.c) $core -Isrc/alloc -lz -llzma -lm -lpthread" ;;
    *) echo "fuzz: unknown target $1" >&2; exit 2 ;;
  esac
}

status=0
for t in $targets; do
  # shellcheck disable=SC2046,SC2086 # word lists on purpose
  clang $flags -o "$out/fuzz_$t" "tests/fuzz/fuzz_$t.c" $(sources_of "$t")
  mkdir -p "$out/corpus/$t" "$out/crashes/$t"
  cp -n tests/fuzz/corpus/"$t"/* "$out/corpus/$t/" 2>/dev/null || true
  log="$out/fuzz_$t.log"
  # -close_fd_mask=2: the option loader warns on stderr for every bad value.
  if ! "$out/fuzz_$t" -max_total_time="$seconds" -print_final_stats=1 \
       -close_fd_mask=2 -artifact_prefix="$out/crashes/$t/" \
       "$out/corpus/$t" >"$log" 2>&1; then
    status=1
    echo "fuzz: $t FOUND A CRASH: see $log and $out/crashes/$t/"
  fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  corpus=$(find "$out/corpus/$t" -type f | wc -l)
  echo "fuzz: $t: ${execs:-?} inputs in ${seconds}s, corpus $corpus files ($(date -u +%F))"
done
exit $status
