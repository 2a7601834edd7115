#!/bin/sh
# test.sh: sets everything up and runs the whole test suite (no GPU needed:
# the tests run on the simulated CUDA built under tests/sim), then, on a
# full run (no arguments), runs it again under valgrind and built with
# sanitizers. OOMLENS_SANITIZE=0 skips those passes.
set -eu
cd "$(dirname "$0")/.."
scripts/setup.sh

# Tests leave nothing behind. Each pass runs with TMPDIR a folder of this
# run's (every test's scratch folder is made under it: tests/check_run.h),
# which must be empty after the pass; and nothing of ours (oomlens*, ol_*)
# may have appeared in /tmp itself, where a test ignoring TMPDIR would
# write. Scratch roots (oomlens-tests-*) are left out of the /tmp look:
# with TMPDIR set ours are never there, and other checkouts' runs on the
# same machine make theirs.
run_dir=$(mktemp -d "$PWD/build/test-run.XXXXXX")
trap 'rm -rf "$run_dir"' EXIT
TMPDIR=$run_dir/tmp
export TMPDIR
mkdir "$TMPDIR"
touch "$run_dir/start"
left_behind() { # PASS
  left=$(find "$TMPDIR" -mindepth 1 -maxdepth 1
    find /tmp -maxdepth 1 -newer "$run_dir/start" -user "$(id -u)" \
      \( -name 'oomlens*' -o -name 'ol_*' \) ! -name 'oomlens-tests-*' 2>/dev/null || true)
  if [ -n "$left" ]; then
    echo "test: the $1 pass left files behind:"
    echo "$left"
    exit 1
  fi
}

meson test -C build --print-errorlogs "$@"
left_behind plain

[ $# -eq 0 ] && [ "${OOMLENS_SANITIZE:-1}" != 0 ] || exit 0

# valgrind: each suite's own process (Check without fork), not the programs
# the whole-program suites start; those are covered by the UBSan pass below.
echo "test: valgrind pass"
under_valgrind=$(meson test -C build --no-rebuild --list | grep -v '^corpus_leaks_')
meson test -C build --no-rebuild --setup=valgrind --print-errorlogs $under_valgrind
left_behind valgrind

cuda_headers=${CUDA_HEADERS:-/usr/local/cuda/include}
# UBSan only reports and carries on unless told otherwise; a finding must
# fail the suite, in the test and in every program it runs.
UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export UBSAN_OPTIONS

# b_lundef=false: the sanitizer runtimes' symbols stay undefined in shared
# libraries until the process loads the runtime.
sanitized_build() { # DIR SANITIZERS
  if [ ! -f "$1/build.ninja" ]; then
    meson setup "$1" -Dcudaheaders="$cuda_headers" -Db_sanitize="$2" \
      -Db_lundef=false >/dev/null
  fi
  ninja -C "$1" >/dev/null
}

# The suites that run whole programs under LD_PRELOAD=liboomlens.so
# (preload, cli, manage, rtld_next, outputs, pyframes, role_capture, trace_file) cannot run under ASan: the library
# exports dlsym, ASan's start-up calls dlsym to find the functions it
# intercepts before it has mapped its shadow memory, and the instrumented
# hook faults on its first shadow write. They run in a build with UBSan
# alone, which needs no shadow memory (docs/reliability.md).
whole_programs='preload|cli|manage|rtld_next|outputs|pyframes|role_capture|trace_file|reliability'

echo "test: sanitizer pass 1/2: address,undefined (all but $whole_programs)"
sanitized_build build-asan address,undefined
in_process=$(meson test -C build-asan --no-rebuild --list | grep -vxE "$whole_programs")
# shellcheck disable=SC2086 # one test name per word
meson test -C build-asan --no-rebuild --print-errorlogs $in_process
left_behind address,undefined

echo "test: sanitizer pass 2/2: undefined ($whole_programs)"
sanitized_build build-ubsan undefined
meson test -C build-ubsan --no-rebuild --print-errorlogs preload cli manage rtld_next outputs \
  pyframes role_capture trace_file reliability
left_behind undefined
