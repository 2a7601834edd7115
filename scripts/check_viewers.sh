#!/bin/sh
# check_viewers.sh: the release check of the exports. Every export is
# opened by the real program it is made for, installed from the package
# registries at check time into build/viewers (never kept in this
# repository), on every shared trace (tests/data/*.csv.gz) and on a trace
# and metrics file written by a job run under `oomlens run --manage` on the
# simulated device. One line per viewer and trace: accepted or not, and the
# figure the viewer shows against ours (`oomlens replay`'s).
#
#   folded      speedscope (npm), its release page in headless Chromium
#               (scripts/speedscope_import.mjs): the total weight it
#               imported against replay's peak allocated (what the job
#               held: a request it was refused is not in it), and that each
#               root frame starts once in its time-order view
#   memory-viz  PyTorch's web viewer's own unpickler
#               (scripts/check_memory_viz.sh: MEMORY_VIZ_JS or torch)
#   metrics     promtool check metrics (Debian's prometheus, unpacked here,
#               not installed), and the allocated peak the file says
#               against replay's of the job's own trace
#   flamegraph.pl, Perfetto, RMM's log parser: no package of them is
#               reachable here; said so, and which test checks the format
#               by its rules instead
#
# Needs network once (npm, apt-get download); after that build/viewers is
# reused. Exit 0 when every viewer that could be installed accepted every
# file with our figures, 1 when one refused or differed, 77 when none could
# be installed. Run after `ninja -C build`.
set -u
cd "$(dirname "$0")/.."
viewers=$PWD/build/viewers
scratch=$(mktemp -d build/check-viewers.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
failed=0
ran=0

say() { printf '%s\n' "$*"; }

# ---- installing the viewers -------------------------------------------

chromium_path() {
  for c in chromium chromium-browser google-chrome; do
    command -v "$c" 2>/dev/null && return
  done
  return 1
}

# speedscope's release page and puppeteer-core (which downloads no browser:
# it drives the system's Chromium).
install_speedscope() {
  [ -f "$viewers/node_modules/speedscope/dist/release/index.html" ] &&
    [ -d "$viewers/node_modules/puppeteer-core" ] && return 0
  command -v npm >/dev/null 2>&1 || return 1
  mkdir -p "$viewers"
  npm install --prefix "$viewers" --no-audit --no-fund --silent \
    speedscope@1.25.0 puppeteer-core@24 >"$scratch/npm.log" 2>&1
}

# promtool from Debian's prometheus package, unpacked, not installed.
install_promtool() {
  promtool=$viewers/prometheus/usr/bin/promtool
  [ -x "$promtool" ] && return 0
  command -v apt-get >/dev/null 2>&1 || return 1
  mkdir -p "$viewers/deb"
  (cd "$viewers/deb" && apt-get download prometheus) >"$scratch/apt.log" 2>&1 || return 1
  dpkg -x "$viewers"/deb/prometheus_*.deb "$viewers/prometheus" && [ -x "$promtool" ]
}

# ---- our figures ---------------------------------------------------------

# replay's "peak allocated: ... (N bytes" of what the job held (its
# refused requests never held): the bytes the folded export sums to.
peak_allocated() {
  build/tools/oomlens replay "$1" 2>/dev/null |
    sed -n 's/^peak allocated: .*(\([0-9]*\) bytes.*/\1/p'
}

# A job on the simulated device under --manage: the recorded GPT-2 run
# played tensor by tensor on a 12 GiB device, where it runs out; its trace
# (OOMLENS_TRACE) and metrics file (OOMLENS_METRICS).
run_job() {
  LD_LIBRARY_PATH="$PWD/build/tests/sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
  SIMCU_CAPACITY=12G OOMLENS_STACKS=1 \
  OOMLENS_TRACE="$scratch/job.trace" OOMLENS_METRICS="$scratch/job.prom" \
    build/tools/oomlens run --manage --report "$scratch/job-report.txt" -- \
    build/tests/progs/trace_player tests/data/oom_activations.csv.gz >"$scratch/job.log" 2>&1
}

# ---- each viewer -----------------------------------------------------------

check_speedscope() {
  chromium=$(chromium_path) || { say "speedscope: skipped: no Chromium to run its page in"; return; }
  install_speedscope || { say "speedscope: skipped: npm could not install it ($(tail -n 1 "$scratch/npm.log" 2>/dev/null))"; return; }
  ran=1
  for trace in "$@"; do
    name=$(basename "$trace")
    folded=$scratch/$name.folded
    build/tools/oomlens export "$trace" --format folded -o "$folded" 2>"$scratch/err" ||
      { say "speedscope $name: export failed: $(cat "$scratch/err")"; failed=1; continue; }
  done
  ( cd "$scratch" && node "$OLDPWD/scripts/speedscope_import.mjs" "$viewers/node_modules" "$chromium" \
      *.folded ) >"$scratch/speedscope.out" 2>&1
  for trace in "$@"; do
    name=$(basename "$trace")
    said=$(grep "^$name.folded: " "$scratch/speedscope.out")
    ours=$(peak_allocated "$trace")
    case $said in
    *": accepted: "*)
      total=$(printf '%s\n' "$said" | sed -n 's/.* total=\([0-9]*\).*/\1/p')
      roots=$(printf '%s\n' "$said" | sed -n 's/.* roots=\([0-9]*\).*/\1/p')
      runs=$(printf '%s\n' "$said" | sed -n 's/.* root_runs=\([0-9]*\).*/\1/p')
      importer=$(printf '%s\n' "$said" | sed -n 's/.* importer="\([^"]*\)".*/\1/p')
      verdict=same
      [ "$total" = "$ours" ] && [ "$roots" = "$runs" ] || { verdict=DIFFERENT; failed=1; }
      say "speedscope $name: accepted as $importer; total $total bytes, ours $ours;" \
        "$roots roots shown $runs times ($verdict)" ;;
    *)
      say "speedscope $name: REFUSED: ${said#*: refused: }$(tail -n 2 "$scratch/speedscope.out" | tr '\n' ' ')"
      failed=1 ;;
    esac
  done
}

check_memory_viz() {
  scripts/check_memory_viz.sh "$@" >"$scratch/memory-viz.out" 2>&1
  rc=$?
  cat "$scratch/memory-viz.out"
  [ $rc -eq 77 ] && return
  ran=1
  [ $rc -eq 0 ] || failed=1
}

# The metrics file a job wrote: promtool's lint, and its allocated peak
# against replay's of the job's own trace.
check_promtool() {
  install_promtool || { say "promtool: skipped: apt-get could not fetch Debian's prometheus ($(tail -n 1 "$scratch/apt.log" 2>/dev/null))"; return; }
  ran=1
  if ! "$promtool" check metrics <"$scratch/job.prom" >"$scratch/promtool.out" 2>&1; then
    say "promtool job.prom: REFUSED: $(head -n 3 "$scratch/promtool.out" | tr '\n' ' ')"
    failed=1
    return
  fi
  theirs=$(sed -n 's/^oomlens_allocated_peak_bytes{.*} \([0-9]*\)$/\1/p' "$scratch/job.prom")
  ours=$(peak_allocated "$scratch/job.trace")
  verdict=same
  [ "$theirs" = "$ours" ] || { verdict=DIFFERENT; failed=1; }
  say "promtool job.prom: accepted ($(grep -vc '^#' "$scratch/job.prom") samples);" \
    "allocated peak $theirs, replay of the job's trace $ours ($verdict)"
}

not_here() {
  say "flamegraph.pl: not available here (neither Debian nor npm has a renderer that reads" \
    "folded stacks: npm's flamegraph reads cpuprofiles, stackvis splits frames at commas);" \
    "speedscope above reads the same file"
  say "perfetto: not available here (its trace processor and catapult's importer are on" \
    "neither registry); checked by the trace-event format's rules (tests/unit/test_export.c" \
    "perfetto_small)"
  say "rmm log_parser: not available here (RMM is on neither registry); checked by its" \
    "columns (tests/unit/test_export.c rmm_small, rmm_gpt2_columns)"
}

# ---- main ----------------------------------------------------------------

if ! run_job || [ ! -s "$scratch/job.trace" ] || [ ! -s "$scratch/job.prom" ]; then
  say "check_viewers: the job on the simulated device wrote no trace or metrics:"
  cat "$scratch/job.log"
  exit 1
fi
set -- tests/data/*.csv.gz "$scratch/job.trace"
check_speedscope "$@"
check_memory_viz "$@"
check_promtool
not_here
[ $failed -eq 0 ] || exit 1
[ $ran -eq 1 ] || exit 77
exit 0
