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
#               flamegraph.pl (brendangregg/FlameGraph, never kept here:
#               FLAMEGRAPH_PL, or FLAMEGRAPH_GIT a clone to take it from):
#               accepted with no line ignored, and the bytes of its "all"
#               frame against replay's
#   memory-viz  PyTorch's web viewer's own unpickler
#               (scripts/check_memory_viz.sh: MEMORY_VIZ_JS or torch), and
#               when MEMORY_VIZ_JS is the whole MemoryViz.js, its page in
#               headless Chromium with d3 from npm
#               (scripts/memory_viz_page.mjs): each pickle dropped on it,
#               its three views drawn, their figures against ours
#   perfetto    Chrome DevTools' trace engine (npm's
#               @paulirish/trace_engine, scripts/perfetto_trace_engine.mjs):
#               accepted, the processes and out-of-memory instants it found
#               against the trace's, and that it takes none of our counters
#               (it draws only its own)
#   metrics     promtool check metrics (Debian's prometheus, unpacked here,
#               not installed), and the allocated peak the file says
#               against replay's of the job's own trace
#   RMM's log parser: no package of it is reachable here; said so, and
#               which test checks the format by its rules instead
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

# From npm, each at the version it was checked with: speedscope's release
# page, puppeteer-core (which downloads no browser: it drives the system's
# Chromium), d3 5 and d3-scale 1 (the versions MemoryViz.js imports from its
# CDN) and DevTools' trace engine.
node_viewers="speedscope@1.25.0 puppeteer-core@24 d3@5.16.0 d3-scale-1@npm:d3-scale@1.0.7
  @paulirish/trace_engine@0.0.65"
install_node_viewers() {
  m=$viewers/node_modules
  [ -f "$m/speedscope/dist/release/index.html" ] && [ -d "$m/puppeteer-core" ] &&
    [ -d "$m/d3" ] && [ -d "$m/d3-scale-1" ] && [ -d "$m/@paulirish/trace_engine" ] && return 0
  command -v npm >/dev/null 2>&1 || return 1
  mkdir -p "$viewers"
  # shellcheck disable=SC2086 # one word per package
  npm install --prefix "$viewers" --no-audit --no-fund --silent $node_viewers >"$scratch/npm.log" 2>&1
}

# flamegraph.pl: FLAMEGRAPH_PL, else the one taken from FLAMEGRAPH_GIT (a
# clone of brendangregg/FlameGraph, bare or not) into build/viewers.
find_flamegraph() {
  if [ -n "${FLAMEGRAPH_PL:-}" ]; then
    flamegraph=$FLAMEGRAPH_PL
    [ -f "$flamegraph" ]
    return
  fi
  flamegraph=$viewers/flamegraph.pl
  [ -f "$flamegraph" ] && return 0
  [ -n "${FLAMEGRAPH_GIT:-}" ] || return 1
  mkdir -p "$viewers"
  git --git-dir="$FLAMEGRAPH_GIT" show HEAD:flamegraph.pl >"$flamegraph.part" 2>/dev/null ||
    git -C "$FLAMEGRAPH_GIT" show HEAD:flamegraph.pl >"$flamegraph.part" 2>/dev/null ||
    { rm -f "$flamegraph.part"; return 1; }
  mv "$flamegraph.part" "$flamegraph"
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

# Every trace in every format the viewers read, into the scratch folder
# as NAME.folded, NAME.pickle, NAME.json; a failed export is said and fails
# the check.
export_all() {
  for trace in "$@"; do
    name=$(basename "$trace")
    for f in folded:folded memory-viz:pickle perfetto:json; do
      build/tools/oomlens export "$trace" --format "${f%%:*}" -o "$scratch/$name.${f#*:}" \
        2>"$scratch/err" ||
        { say "export $name ${f%%:*}: failed: $(cat "$scratch/err")"; failed=1; }
    done
  done
}

# Our reserved peak: the account's, as the Perfetto export's reserved track
# says it (the largest sample); the segment timeline's figure.
reserved_peak() {
  node -e 'let m = 0; for (const e of JSON.parse(require("fs").readFileSync(process.argv[1])).traceEvents)
    if (e.ph === "C" && e.name === "reserved") m = Math.max(m, e.args.bytes); console.log(m)' "$1"
}

# The end state the pickle holds (Python's pickle, tests/unit/check_snapshot.py):
# FIELD=active (bytes of live blocks) or reserved (of segments).
snapshot_figure() {
  python3 tests/unit/check_snapshot.py "$1" | sed -n "s/.* $2=\([0-9]*\).*/\1/p"
}

# A figure the viewer printed as KEY=N in its line.
said_figure() {
  printf '%s\n' "$1" | sed -n "s/.* $2=\([0-9]*\).*/\1/p"
}

# ---- each viewer -----------------------------------------------------------

check_speedscope() {
  chromium=$(chromium_path) || { say "speedscope: skipped: no Chromium to run its page in"; return; }
  install_node_viewers || { say "speedscope: skipped: npm could not install it ($(tail -n 1 "$scratch/npm.log" 2>/dev/null))"; return; }
  ran=1
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

# The folded files in flamegraph.pl: no line ignored (it warns on stderr),
# and its "all" frame's bytes against replay's peak.
check_flamegraph() {
  find_flamegraph || { say "flamegraph.pl: skipped: set FLAMEGRAPH_PL to it, or FLAMEGRAPH_GIT to a" \
    "clone of brendangregg/FlameGraph (no registry reached here has it)"; return; }
  ran=1
  for trace in "$@"; do
    name=$(basename "$trace")
    if ! perl "$flamegraph" --countname bytes "$scratch/$name.folded" >"$scratch/$name.svg" \
        2>"$scratch/flamegraph.err" || [ -s "$scratch/flamegraph.err" ]; then
      say "flamegraph.pl $name: REFUSED: $(head -n 2 "$scratch/flamegraph.err" | tr '\n' ' ')"
      failed=1
      continue
    fi
    theirs=$(sed -n 's/.*<title>all (\([0-9,]*\) bytes, 100%)<\/title>.*/\1/p' "$scratch/$name.svg" | tr -d ,)
    ours=$(peak_allocated "$trace")
    verdict=same
    [ "$theirs" = "$ours" ] || { verdict=DIFFERENT; failed=1; }
    say "flamegraph.pl $name: accepted; all $theirs bytes, ours $ours ($verdict)"
  done
}

# The page of PyTorch's viewer itself, with the whole MemoryViz.js: the
# peak of its allocation timeline against replay's, of its segment
# timeline against our reserved peak, and the allocated / reserved bytes
# its state history shows at the last event against the pickle's end state.
check_memory_viz_page() {
  if [ -z "${MEMORY_VIZ_JS:-}" ] || ! grep -q '^export function add_local_files' "$MEMORY_VIZ_JS"; then
    say "memory-viz page: skipped: set MEMORY_VIZ_JS to the whole torch/utils/viz/MemoryViz.js" \
      "(no package reached here ships it)"
    return
  fi
  chromium=$(chromium_path) || { say "memory-viz page: skipped: no Chromium"; return; }
  install_node_viewers || { say "memory-viz page: skipped: npm could not install d3"; return; }
  ran=1
  shots=$viewers/memory-viz-shots
  mkdir -p "$shots"
  ( cd "$scratch" && node "$OLDPWD/scripts/memory_viz_page.mjs" "$viewers/node_modules" "$chromium" \
      "$MEMORY_VIZ_JS" --shots "$shots" *.pickle ) >"$scratch/page.out" 2>&1
  for trace in "$@"; do
    name=$(basename "$trace")
    said=$(grep "^$name.pickle: " "$scratch/page.out")
    case $said in
    *": accepted: "*) ;;
    *)
      say "memory-viz page $name: REFUSED: ${said#*: refused: }$(tail -n 2 "$scratch/page.out" | tr '\n' ' ')"
      failed=1
      continue ;;
    esac
    peak=$(peak_allocated "$trace") reserved=$(reserved_peak "$scratch/$name.json")
    active=$(snapshot_figure "$scratch/$name.pickle" active)
    held=$(snapshot_figure "$scratch/$name.pickle" reserved)
    verdict=same
    [ "$(said_figure "$said" timeline_peak)" = "$peak" ] &&
      [ "$(said_figure "$said" segment_peak)" = "$reserved" ] &&
      [ "$(said_figure "$said" allocated)" = "$active" ] &&
      [ "$(said_figure "$said" reserved)" = "$held" ] &&
      [ "$(said_figure "$said" timeline_polygons)" -gt 0 ] && [ "$(said_figure "$said" rects)" -gt 0 ] ||
      { verdict=DIFFERENT; failed=1; }
    say "memory-viz page $name: drawn by MemoryViz.js ($(said_figure "$said" timeline_polygons) polygons," \
      "$(said_figure "$said" rects) rectangles); timeline peak $(said_figure "$said" timeline_peak)," \
      "ours $peak; segment timeline peak $(said_figure "$said" segment_peak), ours $reserved;" \
      "state at the end $(said_figure "$said" allocated) allocated / $(said_figure "$said" reserved)" \
      "reserved, ours $active / $held ($verdict)"
  done
}

# The Perfetto JSON in DevTools' trace engine: accepted, one process per
# device named as ours, each OOM of the trace placed as an instant, and
# none of our counters taken (DevTools draws only its own).
check_trace_engine() {
  install_node_viewers || { say "perfetto: skipped: npm could not install DevTools' trace engine"; return; }
  ran=1
  ( cd "$scratch" && node "$OLDPWD/scripts/perfetto_trace_engine.mjs" "$viewers/node_modules" \
      *.json ) >"$scratch/engine.out" 2>&1
  for trace in "$@"; do
    name=$(basename "$trace")
    said=$(grep "^$name.json: " "$scratch/engine.out")
    case $said in
    *": accepted: "*) ;;
    *)
      say "devtools trace engine $name: REFUSED: ${said#*: refused: }$(tail -n 2 "$scratch/engine.out" | tr '\n' ' ')"
      failed=1
      continue ;;
    esac
    ooms=$(build/tools/oomlens replay "$trace" --json 2>/dev/null | sed -n 's/.*"trace_ooms": \([0-9]*\).*/\1/p')
    processes=$(printf '%s\n' "$said" | sed -n 's/.* processes=\([^ ]*\) .*/\1/p')
    verdict=same
    [ "$(said_figure "$said" ooms)" = "$ooms" ] && [ "$(said_figure "$said" warnings)" = 0 ] &&
      [ "$(said_figure "$said" counters_taken)" = 0 ] || { verdict=DIFFERENT; failed=1; }
    say "devtools trace engine $name: accepted; processes $processes; out-of-memory instants" \
      "$(said_figure "$said" ooms), the trace's $ooms; warnings $(said_figure "$said" warnings);" \
      "counters taken $(said_figure "$said" counters_taken) of $(said_figure "$said" counters)" \
      "(it draws only its own) ($verdict)"
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
  say "perfetto ui: its trace processor and catapult's importer are on neither registry reached" \
    "here; the counter tracks are checked by the trace-event format's rules" \
    "(tests/unit/test_export.c perfetto_small)"
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
export_all "$@"
check_speedscope "$@"
check_flamegraph "$@"
check_memory_viz "$@"
check_memory_viz_page "$@"
check_trace_engine "$@"
check_promtool
not_here
[ $failed -eq 0 ] || exit 1
[ $ran -eq 1 ] || exit 77
exit 0
