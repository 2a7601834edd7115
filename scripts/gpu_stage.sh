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
# The GPU machine has no libunwind: send ours, found through LD_LIBRARY_PATH.
unwind=$(ldconfig -p | sed -n 's/.*libunwind.so.8 (libc6,x86-64) => //p' | head -n 1)
[ -n "$unwind" ] && cp -L "$unwind" .gpu/libunwind.so.8
cp scripts/gpu/*.py .gpu/
shared=${OOMLENS_SHARED:-../shared}
cp "$shared/gpu/workloads.py" .gpu/
cat > .gpu/run.sh <<'RUN'
#!/bin/sh
# Runs on the GPU machine, from the repository root.
set -u
export PATH=/opt/torch/.venv/bin:$PATH
export PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH="$PWD/.gpu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__)"
python3 .gpu/${OOMLENS_GPU_CHECK:-observe_check.py} 2>&1 | tee "$OUT/log.txt"
RUN
echo "staged .gpu/: $(ls .gpu | tr '\n' ' ')"
