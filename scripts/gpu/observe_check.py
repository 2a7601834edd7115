"""Runs on the GPU machine (see scripts/gpu_run.sh): real PyTorch, CuPy and
JAX jobs under liboomlens.so in observe mode, each next to the same job
without it. Prints one table and writes results.json and a markdown table
into $OUT.

Checks, per PyTorch allocator configuration, against the memory PyTorch's
allocator itself asked for (our "origins": runtime calls, or VMM physical
memory under expandable segments; libraries' direct cuMemAlloc calls are
reported separately and are not in PyTorch's figures):
  default, expandable_segments   our peak == PyTorch's peak reserved
  cudaMallocAsync                our peak == PyTorch's peak allocated
  no caching                     our peak == PyTorch's peak allocated of the
                                 cudaMallocAsync run (with caching off PyTorch
                                 keeps no statistics: memory_stats() reads 0;
                                 the default allocator's peak allocated counts
                                 whole blocks, unsplit remainders included)
  step time with the library against the same run without it, runs
  alternated (without, with, without, with) and steps after the first two
  pooled; plus a direct cudaMalloc/cudaFree cost with and without.
"""
import json, os, statistics, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
LIB = os.path.join(HERE, 'liboomlens.so')
WORKLOADS = os.path.join(HERE, 'workloads.py')
OUT = os.environ.get('OUT', '/tmp/oomlens-out')
STEPS = int(os.environ.get('OOMLENS_GPU_STEPS', '10'))

# (name, environment, PyTorch figure to compare, our origin)
CONFIGS = [
    ('default', {}, 'peak_reserved', 'runtime'),
    ('expandable', {'PYTORCH_CUDA_ALLOC_CONF': 'expandable_segments:True'}, 'peak_reserved', 'vmm'),
    ('cudaMallocAsync', {'PYTORCH_CUDA_ALLOC_CONF': 'backend:cudaMallocAsync'}, 'peak_alloc', 'runtime'),
    ('no_caching', {'PYTORCH_NO_CUDA_MEMORY_CACHING': '1'}, 'async_peak_alloc', 'runtime'),
]


def run(cmd, env_extra, preload, tag):
    env = dict(os.environ)
    env.update(env_extra)
    env.pop('LD_PRELOAD', None)
    report = os.path.join(OUT, f'r-{tag}-%p.txt')
    if preload:
        env['LD_PRELOAD'] = LIB
        env['OOMLENS_REPORT'] = report
    t0 = time.time()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.time() - t0
    result = None
    for line in p.stdout.splitlines():
        if line.startswith('RESULT '):
            result = json.loads(line[7:])
    reports = []
    if preload:
        for name in sorted(os.listdir(OUT)):
            if name.startswith(f'r-{tag}-') and name.endswith('.json'):
                with open(os.path.join(OUT, name)) as f:
                    reports.append(json.load(f))
    if p.returncode != 0:
        sys.stderr.write(f'--- {tag} exited {p.returncode}\n{p.stderr[-3000:]}\n')
    return dict(rc=p.returncode, result=result, reports=reports, wall=wall,
                stderr_tail=p.stderr[-800:])


def origin_peak(report, origin):
    return report['devices'][0]['origins'][origin]['peak']


def steps_after_warmup(result):
    return result['step_s'][2:] or result['step_s']


def torch_checks():
    rows = []
    async_peak_alloc = None
    wanted = os.environ.get('OOMLENS_OBSERVE_CONFIGS')  # e.g. "default,expandable"
    for name, env, figure, origin in CONFIGS:
        if wanted and name not in wanted.split(','):
            continue
        cmd = [sys.executable, WORKLOADS, 'gpt2', '--steps', str(STEPS)]
        runs = [run(cmd, env, preload, f'{name}-{i}-{"ours" if preload else "base"}')
                for i, preload in enumerate([False, True, False, True])]
        base = [r for r in runs[0::2]]
        ours = [r for r in runs[1::2]]
        row = dict(config=name, figure=figure, origin=origin)
        if not all(r['result'] for r in runs) or not all(r['reports'] for r in ours):
            row['error'] = next((r['stderr_tail'] for r in runs if not r['result']), 'no report')
            rows.append(row)
            continue
        result = ours[0]['result']
        if name == 'cudaMallocAsync':
            async_peak_alloc = result['peak_alloc']
        torch_peak = async_peak_alloc if figure == 'async_peak_alloc' else result[figure]
        our_peaks = [origin_peak(r['reports'][0], origin) for r in ours]
        base_step = statistics.median([s for r in base for s in steps_after_warmup(r['result'])])
        our_step = statistics.median([s for r in ours for s in steps_after_warmup(r['result'])])
        dev = ours[0]['reports'][0]['devices'][0]
        row.update(torch_peak=torch_peak, our_peak=our_peaks[0], our_peaks=our_peaks,
                   peak_diff=our_peaks[0] - torch_peak if torch_peak is not None else None,
                   driver_direct_peak=dev['origins']['driver']['peak'],
                   base_step_s=base_step, our_step_s=our_step, step_ratio=our_step / base_step,
                   base_steps=[r['result']['step_s'] for r in base],
                   our_steps=[r['result']['step_s'] for r in ours],
                   calls=dev['calls'], torch_result=result)
        rows.append(row)
    return rows


PAIRS = r'''
import ctypes, json, time
import torch
torch.cuda.init(); torch.zeros(1, device='cuda')
rt = ctypes.CDLL('libcudart.so.13')
p = ctypes.c_void_p()
res = {}
for size in (1 << 20, 20 << 20):
    for _ in range(200):
        rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(size)); rt.cudaFree(p)
    n = 5000
    t0 = time.perf_counter()
    for _ in range(n):
        rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(size)); rt.cudaFree(p)
    res[str(size)] = (time.perf_counter() - t0) / n * 1e6
print("RESULT", json.dumps(res))
'''


def pair_cost():
    rows = []
    for i, preload in enumerate([False, True, False, True]):
        r = run([sys.executable, '-c', PAIRS], {}, preload, f'pairs-{i}')
        rows.append(dict(preload=preload, us_per_pair=r['result']))
    return rows


CUPY = r'''
import cupy
cupy.cuda.set_allocator(None)
xs = [cupy.zeros(1 << 20, dtype=cupy.float32) for _ in range(10)]
y = sum(xs)
del xs
print("RESULT", '{"ok": true}')
'''

JAX = r'''
import jax, jax.numpy as jnp
xs = [jnp.ones((1024, 1024)) * i for i in range(10)]
y = sum(xs).block_until_ready()
del xs
print("RESULT", '{"ok": true}')
'''


def framework_checks():
    rows = []
    for name, code, env in [('cupy', CUPY, {}),
                            ('jax', JAX, {'XLA_PYTHON_CLIENT_ALLOCATOR': 'platform',
                                          'XLA_PYTHON_CLIENT_PREALLOCATE': 'false'})]:
        r = run([sys.executable, '-c', code], env, True, name)
        row = dict(framework=name, rc=r['rc'])
        if r['reports']:
            dev = r['reports'][0]['devices'][0]
            row.update(calls=dev['calls'],
                       allocations=dev['stats']['allocation']['all']['allocated'],
                       peak_allocated=dev['stats']['allocated_bytes']['all']['peak'],
                       peak_reserved=dev['stats']['reserved_bytes']['all']['peak'])
        else:
            row['error'] = r['stderr_tail']
        rows.append(row)
    return rows


def main():
    os.makedirs(OUT, exist_ok=True)
    torch_rows = torch_checks()
    quick = os.environ.get('OOMLENS_OBSERVE_TORCH_ONLY') == '1'  # skip ctypes pairs, CuPy, JAX
    pairs = [] if quick else pair_cost()
    fw_rows = [] if quick else framework_checks()
    with open(os.path.join(OUT, 'results.json'), 'w') as f:
        json.dump(dict(torch=torch_rows, pairs=pairs, frameworks=fw_rows), f, indent=1)
    lines = ['| config | PyTorch figure | PyTorch peak | oomlens peak (origin) | diff (B) | '
             'direct cuMemAlloc peak | step s without | step s with | ratio |',
             '| --- | --- | --- | --- | --- | --- | --- | --- | --- |']
    for r in torch_rows:
        if 'error' in r:
            lines.append(f"| {r['config']} | error: {r['error'][-200:]!r} | | | | | | | |")
            continue
        lines.append(f"| {r['config']} | {r['figure']} | {r['torch_peak']} | {r['our_peak']} ({r['origin']}) | "
                     f"{r['peak_diff']} | {r['driver_direct_peak']} | {r['base_step_s']:.4f} | "
                     f"{r['our_step_s']:.4f} | {r['step_ratio']:.4f} |")
    lines += ['', '| cudaMalloc+cudaFree, us per pair (ctypes) | 1 MiB | 20 MiB |', '| --- | --- | --- |']
    for r in pairs:
        u = r['us_per_pair'] or {}
        lines.append(f"| {'with' if r['preload'] else 'without'} oomlens | "
                     f"{u.get(str(1 << 20), 0):.2f} | {u.get(str(20 << 20), 0):.2f} |")
    lines += ['', '| framework | exit | allocations seen | peak allocated | peak reserved |',
              '| --- | --- | --- | --- | --- |']
    for r in fw_rows:
        lines.append(f"| {r['framework']} | {r['rc']} | {r.get('allocations', 'none')} | "
                     f"{r.get('peak_allocated', '')} | {r.get('peak_reserved', '')} |")
    text = '\n'.join(lines)
    with open(os.path.join(OUT, 'table.md'), 'w') as f:
        f.write(text + '\n')
    print(text)
    


if __name__ == '__main__':
    main()
