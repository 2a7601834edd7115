#!/bin/sh
# check_memory_viz.sh [TRACE...]: exports each trace (default: the shared
# traces of tests/data) as a memory_viz pickle and loads it with the
# unpickler of PyTorch's own web viewer under node
# (scripts/memory_viz_unpickle.mjs) and with Python's pickle
# (tests/unit/check_snapshot.py); prints one line per trace: accepted or
# not, and the reserved bytes the viewer read against ours.
#
# The viewer's code is given by $MEMORY_VIZ_JS (PyTorch's
# torch/utils/viz/MemoryViz.js, whole or only its unpickle function), never
# kept in this repository. No package ships it: pip's torch 2.11 wheel has
# no torch/utils/viz/MemoryViz.js, Debian's python3-torch (1.13.1) neither,
# and PyTorch's own _memory_viz.py page imports it from jsdelivr's
# pytorch@main. Exit 77 (skipped) when node or that file is not here; 1
# when a trace is refused or its figures differ. Run after `ninja -C build`.
set -eu
cd "$(dirname "$0")/.."

viewer=${MEMORY_VIZ_JS:-}
if ! command -v node >/dev/null 2>&1 || [ -z "$viewer" ] || [ ! -f "$viewer" ]; then
  echo "check_memory_viz: skipped: needs node and PyTorch's MemoryViz.js (set MEMORY_VIZ_JS" \
    "to torch/utils/viz/MemoryViz.js of a PyTorch checkout: no package ships it)"
  exit 77
fi
[ $# -gt 0 ] || set -- tests/data/*.csv.gz

scratch=$(mktemp -d build/check-memory-viz.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
failed=0
for trace in "$@"; do
  name=$(basename "$trace")
  pickle=$scratch/$name.pickle
  if ! build/tools/oomlens export "$trace" --format memory-viz -o "$pickle" 2>"$scratch/err"; then
    echo "memory-viz $name: export failed: $(cat "$scratch/err")"
    failed=1
    continue
  fi
  ours=$(python3 tests/unit/check_snapshot.py "$pickle" | sed -n 's/.* reserved=\([0-9]*\).*/\1/p')
  said=$(node scripts/memory_viz_unpickle.mjs "$viewer" "$pickle" || true)
  case $said in
  *": accepted: "*)
    theirs=$(printf '%s\n' "$said" | sed -n 's/.* reserved=\([0-9]*\).*/\1/p')
    verdict=same
    [ "$theirs" = "$ours" ] || { verdict=DIFFERENT; failed=1; }
    echo "memory-viz $name: accepted by MemoryViz.js; reserved $theirs, ours $ours ($verdict)" ;;
  *)
    echo "memory-viz $name: REFUSED by MemoryViz.js: ${said#*: refused: }"
    failed=1 ;;
  esac
done
exit $failed
