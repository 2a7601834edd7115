#!/bin/sh
# demo.sh: sets everything up and shows oomlens on a job.
#   With a GPU and PyTorch: a few GPT-style training steps on the real device.
#   Without: a real recorded job (GPT-2 124M training, 9045 tensors, from
#   tests/data/gpt2.csv.gz) replayed tensor by tensor through cudaMalloc and
#   cudaFree on the simulated CUDA device.
# Either way under `oomlens run`, exactly as a user runs their own job; then
# the diagnosis of a recorded out-of-memory, replayed offline.
set -eu
cd "$(dirname "$0")/.."
scripts/setup.sh
out=${OOMLENS_DEMO_DIR:-build/demo}
mkdir -p "$out"
rm -f "$out"/demo-*

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 &&
   python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  echo "demo: GPU found; running scripts/demo_torch.py under oomlens"
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 build/tools/oomlens run --report "$out/demo-%p.txt" -- \
    python3 scripts/demo_torch.py
else
  echo "demo: no GPU here; replaying the recorded GPT-2 job on the simulated device"
  LD_LIBRARY_PATH="$PWD/build/tests/sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
  SIMCU_CAPACITY=140G OOMLENS_STACKS=1 \
    build/tools/oomlens run --report "$out/demo-%p.txt" -- \
    build/tests/progs/trace_player tests/data/gpt2.csv.gz
fi
echo
cat "$out"/demo-*.txt
echo
echo "demo: the same figures as JSON are in $(ls "$out"/demo-*.json)"
echo
echo "demo: why a recorded job ran out of memory (GPT-2 trained at batch 8 on a 12 GiB cap):"
build/tools/oomlens replay tests/data/oom_activations.csv.gz --capacity 12G --policy pytorch
