"""Runs on the GPU machine (scripts/gpu_stage.sh, then
OOMLENS_GPU_CHECK=oom_check.py sh .gpu/run.sh): the three out-of-memory
workloads of workloads.py under `oomlens run --capacity CAP`, in manage mode
(our pool serves every tensor) and in observe mode (PyTorch's own cache),
with the caps the recorded traces were made under. Per run: the class and
the paragraph the library printed on stderr at the OOM, and the report's
`oom` object (class, figures, advice). Writes results.json and oom.md into
$OUT."""
import json, os, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
CLI = os.path.join(HERE, 'oomlens')
WORKLOADS = os.path.join(HERE, 'workloads.py')
OUT = os.environ.get('OUT', '/tmp/oomlens-out')

CASES = [('oom_params', '8G', 'persistent'), ('oom_activations', '12G', 'activations'),
         ('frag', '6G', 'fragmentation')]
# OOMLENS_OOM_CASES=name:cap:expected,... picks others (e.g. frag:6656M:none).
if os.environ.get('OOMLENS_OOM_CASES'):
    CASES = [tuple(c.split(':')) for c in os.environ['OOMLENS_OOM_CASES'].split(',')]


def run_case(name, cap, manage):
    tag = f"{name}-{'manage' if manage else 'observe'}"
    cmd = [CLI, 'run', '--capacity', cap, '--report', os.path.join(OUT, f'o-{tag}-%p.txt')]
    if manage:
        cmd.append('--manage')
    env = dict(os.environ)
    env.pop('LD_PRELOAD', None)
    env['OOMLENS_STACKS'] = '1'
    p = subprocess.run(cmd + ['--', sys.executable, WORKLOADS, name], env=env,
                       capture_output=True, text=True, timeout=240)
    paragraph = [l for l in p.stderr.splitlines() if l.startswith('oomlens')]
    result = None
    for line in p.stdout.splitlines():
        if line.startswith('RESULT '):
            result = json.loads(line[7:])
    oom = None
    for f in sorted(os.listdir(OUT)):
        if f.startswith(f'o-{tag}-') and f.endswith('.json'):
            with open(os.path.join(OUT, f)) as fh:
                for dev in json.load(fh).get('devices', []):
                    oom = dev.get('oom') or oom
    return dict(tag=tag, rc=p.returncode, stderr_lines=paragraph[-40:],
                pytorch_oom=(result or {}).get('oom'), oom=oom,
                stderr_tail=None if oom else p.stderr[-2500:])


HOG = r'''
import sys, time, torch
x = torch.empty(int(sys.argv[1]), dtype=torch.uint8, device='cuda')
torch.cuda.synchronize()
print('holding', flush=True)
time.sleep(600)
'''


def start_hog():
    """OOMLENS_OOM_HOG=GiB: another process holding that much of the device
    while the cases run (memory held elsewhere, named by NVML)."""
    gib = float(os.environ.get('OOMLENS_OOM_HOG', '0'))
    if gib <= 0:
        return None
    env = dict(os.environ)
    env.pop('LD_PRELOAD', None)
    hog = subprocess.Popen([sys.executable, '-c', HOG, str(int(gib * 2**30))], env=env,
                           stdout=subprocess.PIPE, text=True)
    hog.stdout.readline()
    print(f'another process (pid {hog.pid}) holds {gib} GiB of the device', flush=True)
    return hog


def main():
    os.makedirs(OUT, exist_ok=True)
    rows = []
    hog = start_hog()
    modes = [m == 'manage' for m in os.environ.get('OOMLENS_OOM_MODES', 'manage,observe').split(',')]
    for name, cap, expected in CASES:
        for manage in modes:
            r = run_case(name, cap, manage)
            r.update(workload=name, cap=cap, expected=expected)
            got = (r['oom'] or {}).get('class')
            r['class'] = got
            print(f"{r['tag']} cap {cap}: class {got} (expected {expected}) rc {r['rc']}", flush=True)
            for l in r['stderr_lines']:
                print('   ', l)
            rows.append(r)
    if hog:
        hog.kill()
    with open(os.path.join(OUT, 'oom_results.json'), 'w') as f:
        json.dump(rows, f, indent=1)


if __name__ == '__main__':
    main()
