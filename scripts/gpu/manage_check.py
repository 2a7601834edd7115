"""Runs on the GPU machine (scripts/gpu_stage.sh, then
OOMLENS_GPU_CHECK=manage_check.py sh .gpu/run.sh): real PyTorch jobs under
`oomlens run --manage` (our pool serves every tensor, PyTorch's cache off)
next to the same job on PyTorch's own caching allocator.

Per workload: step time (median of the steps after the first two), peak
reserved (ours: the pool's mapped memory; PyTorch's: its peak reserved),
and the ratio of peak reserved to peak allocated. Then the same seeded
GPT-2 training run both ways, deterministic kernels, losses compared.
Writes results.json and table.md into $OUT."""
import json, os, statistics, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
CLI = os.path.join(HERE, 'oomlens')
WORKLOADS = os.path.join(HERE, 'workloads.py')
OUT = os.environ.get('OUT', '/tmp/oomlens-out')


def run(cmd, managed, tag, extra_env=None):
    env = dict(os.environ)
    env.pop('LD_PRELOAD', None)
    env.update(extra_env or {})
    if managed:
        cmd = [CLI, 'run', '--manage', '--report', os.path.join(OUT, f'm-{tag}-%p.txt'), '--'] + cmd
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    result, losses = None, []
    for line in p.stdout.splitlines():
        if line.startswith('RESULT '):
            result = json.loads(line[7:])
        if line.startswith('LOSS '):
            losses.append(float(line.split()[1]))
    report = None
    for name in sorted(os.listdir(OUT)):
        if managed and name.startswith(f'm-{tag}-') and name.endswith('.json'):
            with open(os.path.join(OUT, name)) as f:
                report = json.load(f)
    if p.returncode != 0:
        sys.stderr.write(f'--- {tag} exited {p.returncode}\n{p.stderr[-3000:]}\n')
    notes = [l for l in p.stderr.splitlines() if 'first stream created' in l]
    return dict(rc=p.returncode, result=result, report=report, losses=losses,
                stderr=p.stderr[-1500:], notes=notes)


def steady(result):
    return statistics.median(result['step_s'][2:] or result['step_s'])


def workload_rows():
    rows = []
    plan = os.environ.get('OOMLENS_GPU_PLAN', 'gpt2:0,gpt2:1,resnet50:0,resnet50:1')
    for name, trim in (item.split(':') for item in plan.split(',') if item):
        steps = 10
        cmd = [sys.executable, WORKLOADS, name, '--steps', str(steps)]
        native = run(cmd, False, f'{name}-{trim}-native')
        ours = run(cmd, True, f'{name}-{trim}-manage', {'OOMLENS_POOL_TRIM': trim})
        row = dict(workload=f'{name} (OOMLENS_POOL_TRIM={trim})')
        if not (native['result'] and ours['result'] and ours['report']):
            row['error'] = ours['stderr'] or native['stderr']
            rows.append(row)
            continue
        dev = ours['report']['devices'][0]
        stats = dev['stats']
        row.update(native_step=steady(native['result']), manage_step=steady(ours['result']),
                   native_peak_reserved=native['result']['peak_reserved'],
                   native_peak_alloc=native['result']['peak_alloc'],
                   pool_peak=dev['origins']['pool']['peak'],
                   driver_peak=dev['origins']['driver']['peak'],
                   runtime_peak=dev['origins']['runtime']['peak'],
                   our_peak_alloc=stats['allocated_bytes']['all']['peak'],
                   pending_peak=stats['pending_free_bytes']['peak'],
                   calls=dev['calls'], native_steps=native['result']['step_s'],
                   manage_steps=ours['result']['step_s'])
        row['step_ratio'] = row['manage_step'] / row['native_step']
        row['our_ratio'] = row['pool_peak'] / max(1, row['our_peak_alloc'])
        row['native_ratio'] = row['native_peak_reserved'] / max(1, row['native_peak_alloc'])
        rows.append(row)
    return rows


LOSS = r'''
import os, torch
torch.manual_seed(0)
torch.use_deterministic_algorithms(True)
from transformers import GPT2Config, GPT2LMHeadModel
m = GPT2LMHeadModel(GPT2Config(n_layer=6)).cuda()
opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
g = torch.Generator(device='cuda'); g.manual_seed(1)
for step in range(6):
    x = torch.randint(0, 50257, (8, 512), device='cuda', generator=g)
    with torch.autocast('cuda', dtype=torch.bfloat16):
        loss = m(input_ids=x, labels=x).loss
    loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
    print('LOSS', repr(loss.item()), flush=True)
print('RESULT {}')
'''


def loss_rows():
    env = {'CUBLAS_WORKSPACE_CONFIG': ':4096:8', 'OOMLENS_VERBOSE': '1'}
    native = run([sys.executable, '-c', LOSS], False, 'loss-native', env)
    ours = run([sys.executable, '-c', LOSS], True, 'loss-manage', env)
    same = native['losses'] == ours['losses'] and len(native['losses']) == 6
    diff = max((abs(a - b) for a, b in zip(native['losses'], ours['losses'])), default=None)
    return dict(native=native['losses'], manage=ours['losses'], identical=same, max_abs_diff=diff,
                stderr=None if same else ours['stderr'], notes=ours['notes'],
                calls=ours['report']['devices'][0]['calls'] if ours['report'] else None)


def main():
    os.makedirs(OUT, exist_ok=True)
    rows = workload_rows()
    losses = loss_rows()
    with open(os.path.join(OUT, 'results.json'), 'w') as f:
        json.dump(dict(workloads=rows, losses=losses), f, indent=1)
    lines = ['| workload | step s PyTorch cache | step s oomlens --manage | ratio | PyTorch peak reserved '
             '(ratio to allocated) | oomlens pool peak (ratio) | driver-direct peak | pending-free peak | '
             'fence waits | device syncs | fallbacks |',
             '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |']
    for r in rows:
        if 'error' in r:
            lines.append(f"| {r['workload']} | error: {r['error'][-300:]!r} |")
            continue
        c = r['calls']
        lines.append(f"| {r['workload']} | {r['native_step']:.4f} | {r['manage_step']:.4f} | {r['step_ratio']:.4f} | "
                     f"{r['native_peak_reserved']} ({r['native_ratio']:.4f}) | {r['pool_peak']} ({r['our_ratio']:.4f}) | "
                     f"{r['driver_peak']} | {r['pending_peak']} | {c.get('fence_waits')} | {c.get('device_syncs')} | "
                     f"{c.get('manage_fallbacks')} |")
    lines += ['', f"losses identical: {losses['identical']} (max abs diff {losses['max_abs_diff']})",
              f"native: {losses['native']}", f"manage: {losses['manage']}",
              f"streams: {losses['notes']}", f"calls: {losses['calls']}"]
    text = '\n'.join(lines)
    with open(os.path.join(OUT, 'table.md'), 'w') as f:
        f.write(text + '\n')
    print(text)


if __name__ == '__main__':
    main()
