#!/bin/sh
# check_estimate.sh: how far `oomlens estimate` lands from the recorded
# traces of tests/data. For each training step of a trace it finds the live
# bytes before the step's input batch is allocated (what persists across
# steps) and the step's peak, from the tensor-level alloc/free events; then
# it runs the uncalibrated estimate for that step's shape, and the estimate
# calibrated from oom_activations' batch-2 and batch-4 steps.
# Usage: scripts/check_estimate.sh [BUILD_DIR]   (default: build)
set -eu
cd "$(dirname "$0")/.."
cli=${1:-build}/tools/oomlens
data=tests/data

# Per step: index, base (live bytes before the input), peak, input bytes.
steps() { # TRACE
  python3 - "$1" <<'EOF'
import gzip, sys
cur, live, steps = 0, {}, []
for line in gzip.open(sys.argv[1], 'rt'):
    if line.startswith('#'):
        continue
    t, action, addr, size, stream, frames = (line.rstrip('\n').split(',', 5) + [''])[:6]
    size = int(size)
    if action == 'alloc':
        # The input batch is each step's first allocation made by the
        # training loop's own line (its outermost frame is the script's
        # module level: the loop is a generator driven from there).
        if frames.split(';')[-1].endswith('<module>'):
            steps.append([cur, cur, size])
        live[addr] = size
        cur += size
    elif action == 'free_completed':
        cur -= live.pop(addr, 0)
    if steps:
        steps[-1][1] = max(steps[-1][1], cur)
for i, (base, peak, x) in enumerate(steps):
    print(i, base, peak, x)
EOF
}

peak_of() { # ESTIMATE ARGS...
  "$cli" estimate "$@" --json | sed 's/.*"peak_allocated": \([0-9]*\).*/\1/'
}

row() { # NAME MEASURED ESTIMATE
  awk -v n="$1" -v m="$2" -v e="$3" \
    'BEGIN { printf "| %s | %.0f | %.0f | %+.1f%% |\n", n, m, e, 100 * (e - m) / m }'
}

gpt2="--hidden 768 --heads 12 --vocab 50257 --gelu eager --optimizer adamw"
echo "| case | measured peak allocated | estimate | error |"
echo "| --- | --- | --- | --- |"
row "gpt2: mixed-bf16, 16 x 1024 (PyTorch's figure)" 25393780736 \
  "$(peak_of $gpt2 --layers 12 --seq 1024 --batch 16 --precision mixed-bf16)"

# gpt2_varlen: 16 layers, 2048 positions; each step's shape from its input
# (int64 tokens). With flash attention only batch x length matters, so a
# count that two shapes give (4096: 8 x 512 or 4 x 1024) estimates the same.
varlen_params=153577728
steps $data/gpt2_varlen.csv.gz | while read -r i base peak x; do
  [ "$i" = 0 ] && continue # the first step has no optimizer state yet
  tokens=$((x / 8))
  for b in 8 6 4; do
    l=$((tokens / b))
    if [ $((l * b)) -eq "$tokens" ] && echo " 200 333 512 700 1024 1500 2048 " | grep -q " $l "; then
      row "gpt2_varlen step $i: mixed-bf16, $tokens tokens ($b x $l)" "$peak" \
        "$(peak_of $gpt2 --params $varlen_params --layers 16 --seq "$l" --batch "$b" --precision mixed-bf16)"
      break
    fi
  done
done

set -- $(steps $data/oom_activations.csv.gz | tr '\n' ' ')
base2=$2 peak2=$3 base4=$6 peak4=$7
fp32="$gpt2 --layers 12 --seq 1024 --precision fp32"
row "oom_activations: fp32, 4 x 1024" "$peak4" "$(peak_of $fp32 --batch 4)"
# Batch 2 was the first step (no optimizer state yet): its transient is
# peak - base as well; per sample is the rise from batch 2 to batch 4.
per_sample=$(( ((peak4 - base4) - (peak2 - base2)) / 2 ))
echo
echo "oom_activations: persistent $base4 bytes, per sample $per_sample bytes (batch 2 to 4)"
for cap in 12G 24G 80G; do
  for h in 0 0.2; do
    printf 'capacity %s headroom %s: largest batch model %s, calibrated %s, from-peak %s\n' \
      "$cap" "$h" \
      "$("$cli" estimate $fp32 --capacity $cap --headroom $h --json | sed 's/.*"max_batch": \([0-9]*\).*/\1/')" \
      "$("$cli" estimate $fp32 --capacity $cap --headroom $h --measured-persistent "$base4" \
          --measured-per-sample "$per_sample" --json | sed 's/.*"max_batch": \([0-9]*\).*/\1/')" \
      "$("$cli" estimate $fp32 --capacity $cap --headroom $h --from-peak "$peak4" --at-batch 4 \
          --json | sed 's/.*"max_batch": \([0-9]*\).*/\1/')"
  done
done
echo "calibrated peak at batch 4: $(peak_of $fp32 --batch 4 --measured-persistent "$base4" --measured-per-sample "$per_sample") (measured $peak4)"
echo "calibrated peak at batch 8: $(peak_of $fp32 --batch 8 --measured-persistent "$base4" --measured-per-sample "$per_sample") (ran out at a 12 GiB cap)"

# The command line's exit codes: 0 for --help and an answer, 2 for a usage error.
"$cli" estimate --help >/dev/null
for bad in "--batch 4" "--precision fp8 --params 1M" "--params 1M --zero 5" "--frobnicate"; do
  # shellcheck disable=SC2086 # the words are the arguments
  if "$cli" estimate $bad >/dev/null 2>&1; then rc=0; else rc=$?; fi
  [ "$rc" -eq 2 ] || { echo "estimate $bad: exit $rc, expected 2" >&2; exit 1; }
done
echo "exit codes: --help 0, usage errors 2"
