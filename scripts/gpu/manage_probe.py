"""Runs on the GPU machine (scripts/gpu_stage.sh, then
OOMLENS_GPU_CHECK=manage_probe.py sh .gpu/run.sh): where manage mode's step
time goes. Small probes, each natively (PyTorch's cache), under PyTorch's
expandable segments, and under `oomlens run --manage`:
  empty_pair_us   torch.empty + del, no kernel: our CPU cost per pair
  small_op_us     a tiny elementwise op with its output freed: launch-bound
  gemm_ms         8192^2 fp16 matmul with its output freed: compute-bound
  stream_gbps     elementwise over one 8 GiB tensor: memory bandwidth, which
                  shows a mapping that costs the GPU translation misses
  scattered_gbps  the same over 2048 separate 4 MiB tensors
then resnet50 steps under each. Writes probe.json into $OUT."""
import json, os, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
CLI = os.path.join(HERE, 'oomlens')
WORKLOADS = os.path.join(HERE, 'workloads.py')
OUT = os.environ.get('OUT', '/tmp/oomlens-out')

PROBE = r'''
import json, time, torch
torch.cuda.init(); torch.empty(1, device='cuda')
def timed(fn, n):
    fn(); torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(n): fn()
    torch.cuda.synchronize(); return (time.perf_counter() - t) / n
def pair(): y = torch.empty(1 << 20, device='cuda'); del y
a = torch.randn(1024, device='cuda')
def small(): b = a * 2; del b
m = torch.randn(8192, 8192, device='cuda', dtype=torch.half)
def gemm(): r = m @ m; del r
big = torch.empty(8 << 30, dtype=torch.uint8, device='cuda')
def stream(): big.add_(1)
parts = [torch.empty(4 << 20, dtype=torch.uint8, device='cuda') for _ in range(2048)]
def scattered(): torch._foreach_add_(parts, 1)
r = dict(empty_pair_us=timed(pair, 20000) * 1e6, small_op_us=timed(small, 20000) * 1e6,
         gemm_ms=timed(gemm, 50) * 1e3, stream_gbps=2 * (8 << 30) / timed(stream, 20) / 1e9,
         scattered_gbps=2 * (8 << 30) / timed(scattered, 20) / 1e9)
print('RESULT ' + json.dumps(r))
'''

MODES = [('native', [], {}), ('expandable', [], {'PYTORCH_CUDA_ALLOC_CONF': 'expandable_segments:True'}),
         ('manage', [CLI, 'run', '--manage', '--'], {'OOMLENS_POOL_TRIM': '0'})]


def run(prefix, extra, cmd):
    env = dict(os.environ)
    env.pop('LD_PRELOAD', None)
    env.update(extra)
    p = subprocess.run(prefix + cmd, env=env, capture_output=True, text=True, timeout=200)
    for line in p.stdout.splitlines():
        if line.startswith('RESULT '):
            return json.loads(line[7:])
    return dict(error=p.stderr[-1500:])


def main():
    os.makedirs(OUT, exist_ok=True)
    rows = {}
    for name, prefix, extra in MODES:
        rows[name] = dict(probe=run(prefix, extra, [sys.executable, '-c', PROBE]))
        res = run(prefix, extra, [sys.executable, WORKLOADS, 'resnet50', '--steps', '10'])
        rows[name]['resnet50_step_s'] = res.get('step_s', res)
        print(name, json.dumps(rows[name]), flush=True)
    with open(os.path.join(OUT, 'probe.json'), 'w') as f:
        json.dump(rows, f, indent=1)


if __name__ == '__main__':
    main()
