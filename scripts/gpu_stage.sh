#!/bin/sh
# gpu_stage.sh: builds here and stages what the GPU machine needs in .gpu/
# (ignored by git, sent with `carry`): the library, the check scripts, and
# ../shared/gpu/workloads.py. Then, in one device call from the repo root:
#     sh .gpu/run.sh
# which runs scripts/gpu/observe_check.py there and leaves its results in $OUT.
set -eu
cd "$(dirname "$0")/.."
scripts/setup.sh src/liboomlens.so tools/oomlens
rm -rf .gpu
mkdir -p .gpu
cp build/src/liboomlens.so build/tools/oomlens .gpu/
# Without their DWARF (symbols kept): 2.8 MB less to carry, and the tree
# with the corpus and the carry must stay within the 64 MiB the device's
# copy holds (the run refuses past it). Native frames are the job's, read
# from its own libraries, not from ours.
strip --strip-debug .gpu/liboomlens.so .gpu/oomlens
# The GPU machine has no libunwind: send ours, found through LD_LIBRARY_PATH.
unwind=$(ldconfig -p | sed -n 's/.*libunwind.so.8 (libc6,x86-64) => //p' | head -n 1)
[ -n "$unwind" ] && cp -L "$unwind" .gpu/libunwind.so.8
cp scripts/gpu/*.py .gpu/
shared=${OOMLENS_SHARED:-../shared}
cp "$shared/gpu/workloads.py" .gpu/
# Its table W is built before gpt2_varlen and the oom_* workloads are
# defined (KeyError for those names): register them once all are defined.
sed -i 's/^def frames_of(e):/W.update(gpt2_varlen=(gpt2_varlen, 10), oom_params=(oom_params, 1),\n         oom_activations=(oom_activations, 7))\n\ndef frames_of(e):/' .gpu/workloads.py
grep -q '^W.update(gpt2_varlen' .gpu/workloads.py
cat > .gpu/run.sh <<'RUN'
#!/bin/sh
# Runs on the GPU machine, from the repository root.
set -u
export PATH=/opt/torch/.venv/bin:$PATH
export PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH="$PWD/.gpu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__)"
for check in ${OOMLENS_GPU_CHECK:-observe_check.py}; do
  python3 .gpu/$check 2>&1 | tee -a "$OUT/log.txt"
done
RUN
echo "staged .gpu/: $(ls .gpu | tr '\n' ' ')"
