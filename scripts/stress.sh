#!/bin/sh
# stress.sh [SECONDS] [THREADS]: the long stress run (docs/reliability.md).
# tests/progs/stress_prog under the library on the simulated CUDA, in
# observe and then manage mode, SECONDS each (default 300) in 10 epochs:
# random cudaMalloc/cudaMallocAsync/cuMemAlloc/cuMemAllocAsync/VMM traffic
# and stream churn from THREADS threads (default 32). The program checks
# overlaps and contents itself; this script holds the report to the
# program's own counts and prints the heap in use at each quiet point
# (glibc's tcache off, so the figure is exact). Exit 1 on any mismatch, or
# heap growth after the first epoch over 16 KiB (manage mode: 128 KiB).
set -eu
cd "$(dirname "$0")/.."
seconds=${1:-300}
threads=${2:-32}
scripts/setup.sh >/dev/null
out=$(mktemp -d /tmp/oomlens-stress-XXXXXX)
trap 'rm -rf "$out"' EXIT
status=0
for mode in observe manage; do
  manage=0
  [ "$mode" = manage ] && manage=1
  log="$out/$mode.log"
  start=$(date +%s)
  if ! env LD_PRELOAD="$PWD/build/src/liboomlens.so" LD_LIBRARY_PATH="$PWD/build/tests/sim" \
      OOMLENS_MANAGE=$manage OOMLENS_REPORT="$out/$mode-%p.txt" SIMCU_CAPACITY=16G \
      GLIBC_TUNABLES=glibc.malloc.tcache_count=0 \
      build/tests/progs/stress_prog --threads="$threads" --seconds="$seconds" --epochs=10 \
      >"$log" 2>&1; then
    echo "stress: $mode: the program failed:"; tail -20 "$log"; status=1; continue
  fi
  took=$(( $(date +%s) - start ))
  json=$(ls "$out"/"$mode"-*.json)
  python3 - "$log" "$json" "$mode" "$took" <<'PY' || status=1
import json, re, sys
log, path, mode, took = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
text = open(log).read()
c = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", re.findall(r"^stress: .*$", text, re.M)[-1])}
heap = [int(v) for v in re.search(r"^heap: (.*)$", text, re.M).group(1).split()]
rss = [int(v) for v in re.search(r"^resident: (.*)$", text, re.M).group(1).split()]
d = json.load(open(path))["devices"][0]
calls, st = d["calls"], d["stats"]
ok = c["runtime_allocs"] - c["runtime_failed"] + c["driver_allocs"] - c["driver_failed"]
checks = {
    "allocations": (st["allocation"]["all"]["allocated"], ok),
    "frees": (calls["runtime_frees"] + calls["driver_frees"], c["runtime_frees"] + c["driver_frees"]),
    "bytes allocated": (st["allocated_bytes"]["all"]["allocated"], c["bytes"]),
    "bytes freed": (st["allocated_bytes"]["all"]["freed"], c["bytes"]),
    "live at the end": (st["allocation"]["all"]["current"], 0),
    "vmm creates": (calls["vmm_creates"], c["vmm_creates"]),
    "vmm maps": (calls["vmm_maps"], c["vmm_maps"]),
    "vmm unmaps": (calls["vmm_unmaps"], c["vmm_unmaps"]),
    "unknown frees": (calls["unknown_frees"], 0),
    "calls": (calls["runtime_allocs"] + calls["driver_allocs"] + calls["managed_allocs"],
              c["runtime_allocs"] + c["driver_allocs"]),
}
bad = {k: v for k, v in checks.items() if v[0] != v[1]}
growth = max(heap[1:]) - heap[1]
print(f"stress: {mode}: {took} s, {c['threads']} threads, {c['steps']} steps, {ok} allocations "
      f"({c['bytes'] / 2**30:.1f} GiB), {c['vmm_creates']} VMM mappings, {c['streams']} streams")
print(f"stress: {mode}: report matches the program: {'yes' if not bad else 'NO ' + repr(bad)}")
print(f"stress: {mode}: heap in use at the quiet points (bytes): {' '.join(map(str, heap))}; "
      f"growth after the first epoch: {growth}")
print(f"stress: {mode}: resident (KiB): {' '.join(str(r // 1024) for r in rss)}")
# Manage mode's pool keeps a record per free block: its heap grows with
# fragmentation, then levels off (docs/reliability.md).
sys.exit(1 if bad or growth > (131072 if mode == "manage" else 16384) else 0)
PY
done
exit $status
