"""Runs on the GPU machine (OOMLENS_GPU_CHECK=manage_profile.py sh
.gpu/run.sh): resnet50 natively and under `oomlens run --manage`, with
torch.profiler over three steady steps: per step the CPU time to enqueue it
and the wall time to finish it, and the operators whose CPU or device time
changed most. Writes profile.json into $OUT."""
import json, os, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
CLI = os.path.join(HERE, 'oomlens')
OUT = os.environ.get('OUT', '/tmp/oomlens-out')
WORKLOAD = os.environ.get('OOMLENS_PROFILE_WORKLOAD', 'resnet50')

PROFILE = r'''
import json, sys, time, torch
sys.path.insert(0, %r)
import workloads
from torch.profiler import profile, ProfilerActivity
gen = getattr(workloads, %r)(9)
enq, wall = [], []
def step():
    t = time.perf_counter(); next(gen); e = time.perf_counter()
    torch.cuda.synchronize(); enq.append(e - t); wall.append(time.perf_counter() - t)
for _ in range(5): step()
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
    for _ in range(3): step()
ops = {}
for a in prof.key_averages():
    ops[a.key] = dict(n=a.count, cpu_us=a.self_cpu_time_total, dev_us=getattr(a, 'self_device_time_total', 0))
print('RESULT ' + json.dumps(dict(enqueue_s=enq, wall_s=wall, ops=ops)))
'''


def run(prefix, extra):
    env = dict(os.environ)
    env.pop('LD_PRELOAD', None)
    env.update(extra)
    p = subprocess.run(prefix + [sys.executable, '-c', PROFILE % (HERE, WORKLOAD)], env=env,
                       capture_output=True, text=True, timeout=250)
    for line in p.stdout.splitlines():
        if line.startswith('RESULT '):
            return json.loads(line[7:])
    return dict(error=p.stderr[-2000:])


def main():
    os.makedirs(OUT, exist_ok=True)
    native = run([], {})
    manage = run([CLI, 'run', '--manage', '--'], {'OOMLENS_POOL_TRIM': '0'})
    with open(os.path.join(OUT, 'profile.json'), 'w') as f:
        json.dump(dict(native=native, manage=manage), f)
    for name, r in (('native', native), ('manage', manage)):
        if 'error' in r:
            print(name, 'error', r['error']); continue
        print(name, 'enqueue', [round(x, 4) for x in r['enqueue_s']], 'wall', [round(x, 4) for x in r['wall_s']])
    if 'ops' in native and 'ops' in manage:
        rows = []
        for k in set(native['ops']) | set(manage['ops']):
            a, b = native['ops'].get(k, {}), manage['ops'].get(k, {})
            rows.append((b.get('cpu_us', 0) - a.get('cpu_us', 0), b.get('dev_us', 0) - a.get('dev_us', 0), k,
                         a.get('n', 0), b.get('n', 0)))
        print('largest CPU-time increases (us over 3 steps): delta_cpu delta_dev op n_native n_manage')
        for r in sorted(rows, reverse=True)[:25]:
            print(' ', r)
        print('largest device-time increases:')
        for r in sorted(rows, key=lambda r: -r[1])[:15]:
            print(' ', r)


if __name__ == '__main__':
    main()
