"""Runs on the GPU machine (OOMLENS_GPU_CHECK=free_probe.py sh .gpu/run.sh):
the CPU cost of a torch.empty + del pair natively and under
`oomlens run --manage`, in the states a real job passes through: nothing
else created, after a cuDNN convolution (cuDNN makes its own stream), after
PyTorch's stream pool exists (torch.cuda.Stream()), and with the device busy
(a queue of matmuls ahead). Writes free_probe.json into $OUT."""
import json, os, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
CLI = os.path.join(HERE, 'oomlens')
OUT = os.environ.get('OUT', '/tmp/oomlens-out')

PROBE = r'''
import json, time, torch
torch.cuda.init(); torch.empty(1, device='cuda')
def pairs(n=5000):
    t = time.perf_counter()
    for _ in range(n):
        y = torch.empty(1 << 20, device='cuda'); del y
    return (time.perf_counter() - t) / n * 1e6
def busy_pairs():
    m = torch.randn(8192, 8192, device='cuda', dtype=torch.half)
    torch.cuda.synchronize()
    rs = [m @ m for _ in range(200)]  # ~0.3 s of queued work
    del rs
    us = pairs(2000); torch.cuda.synchronize(); return us
r = dict(plain=pairs(), busy=busy_pairs())
x = torch.randn(8, 3, 64, 64, device='cuda', dtype=torch.half)
w = torch.randn(16, 3, 3, 3, device='cuda', dtype=torch.half)
torch.nn.functional.conv2d(x, w); torch.cuda.synchronize()
r.update(after_cudnn=pairs(), after_cudnn_busy=busy_pairs())
s = torch.cuda.Stream(); torch.cuda.synchronize()
r.update(after_stream_pool=pairs(), after_stream_pool_busy=busy_pairs())
print('RESULT ' + json.dumps(r))
'''


def run(prefix, extra):
    env = dict(os.environ)
    env.pop('LD_PRELOAD', None)
    env.update(extra)
    p = subprocess.run(prefix + [sys.executable, '-c', PROBE], env=env, capture_output=True,
                       text=True, timeout=200)
    for line in p.stdout.splitlines():
        if line.startswith('RESULT '):
            return json.loads(line[7:])
    return dict(error=p.stderr[-2000:])


def main():
    os.makedirs(OUT, exist_ok=True)
    rows = dict(native=run([], {}), manage=run([CLI, 'run', '--manage', '--'], {'OOMLENS_POOL_TRIM': '0',
                                                                                   'OOMLENS_VERBOSE': '1'}))
    for k, v in rows.items():
        print(k, json.dumps(v), flush=True)
    with open(os.path.join(OUT, 'free_probe.json'), 'w') as f:
        json.dump(rows, f, indent=1)


if __name__ == '__main__':
    main()
