"""Runs on the GPU machine (OOMLENS_GPU_CHECK=capture_ab.py sh .gpu/run.sh):
what manage mode's default call-site capture (OOMLENS_ROLES=1, Python frames
of a byte-weighted sample) costs a training step, measured step against
step inside one process, where alternated processes cannot show 1% (the
variable-shape jobs' runs differ by 10-25% from one process to the next:
docs/measurements.md, session 9).

For each job of CAPTURE_AB_JOBS (default "gpt2 resnet50 gpt2_varlen
llama_varlen"), one process under `oomlens run --manage` runs
manage_jobs.py with MANAGE_JOBS_REPEAT=3 (each drawn shape three times,
the same inputs) and MANAGE_JOBS_CAPTURE_AB=1: a shape's first run takes
the making of its input on the CPU and the pool's growth for it and is left
out; its other two are a pair, the capture on in one and off in the other
(through oomlens_capture), on first for every other shape. (With two runs
a shape, the first of each pair carried the input's making: ResNet-50's
pairs were 4x apart by order, measured 2026-12-03.) The first CAPTURE_AB_WARM pairs (default 3) are left
out. Per pair, on/off; per job, the geometric mean over the pairs (the
orders balance, so the second run of a shape being faster cancels), the
median, the two orders' medians, the worst pair and sum(on)/sum(off).
CAPTURE_AB_PAIRS pairs per job (default 40; llama_varlen 24).
CAPTURE_AB_CONTROL=1 runs each job a second time with the same pairs and
labels but the capture on throughout (MANAGE_JOBS_CAPTURE_AB=control): its
ratios are what the pairs differ by their order alone, so the capture's
cost is the job's figure over its control's. Each row also gives the two
orders' medians balanced (their geometric mean). Writes capture_ab.json
into $OUT."""
import json, math, os, statistics, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
CLI = os.path.join(HERE, 'oomlens')
JOBS_PY = os.path.join(HERE, 'manage_jobs.py')
OUT = os.environ.get('OUT', '/tmp/oomlens-out')
JOBS = os.environ.get('CAPTURE_AB_JOBS', 'gpt2 resnet50 gpt2_varlen llama_varlen').split()
PAIRS = int(os.environ.get('CAPTURE_AB_PAIRS', '40'))
PAIRS_OF = dict(llama_varlen=min(PAIRS, 24))
WARM = int(os.environ.get('CAPTURE_AB_WARM', '3'))


CONTROL = os.environ.get('CAPTURE_AB_CONTROL') == '1'


def run(job, control=False):
    pairs = PAIRS_OF.get(job, PAIRS) + WARM
    env = dict(os.environ)
    env.pop('LD_PRELOAD', None)
    env.pop('PYTORCH_CUDA_ALLOC_CONF', None)
    env.update(MANAGE_JOBS_REPEAT='3', MANAGE_JOBS_CAPTURE_AB='control' if control else '1',
               CUBLAS_WORKSPACE_CONFIG=':4096:8')
    report = os.path.join(OUT, f'ab-{job}-%p.txt')
    cmd = [CLI, 'run', '--manage', '--report', report, '--', sys.executable, JOBS_PY, job,
           '--steps', str(pairs), '--warm', '0']
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=540)
    steps, states = [], []
    for line in p.stdout.splitlines():
        if line.startswith('STEP '):
            steps.append(float(line.split()[1]))
        elif line.startswith('CAPTURE '):
            states.append(int(line.split()[1]))
    kept = [(t, c) for t, c in zip(steps, states) if c >= 0]  # each shape's first run out
    steps, states = [t for t, _ in kept], [c for _, c in kept]
    if p.returncode != 0 or len(steps) < 2 * (WARM + 1):
        sys.stderr.write(f'--- {job} exited {p.returncode}, {len(steps)} steps\n'
                         f'{p.stderr[-3000:]}\n')
        return None
    return steps, states


def summary(job, steps, states):
    ratios, first_on, first_off = [], [], []
    last = WARM + (len(steps) // 2 - WARM) // 2 * 2  # an even count: both orders alike
    for k in range(WARM, last):
        a, b = 2 * k, 2 * k + 1
        on, off = (steps[a], steps[b]) if states[a] == 1 else (steps[b], steps[a])
        assert states[a] != states[b]
        r = on / off
        ratios.append(r)
        (first_on if states[a] == 1 else first_off).append(r)
    kept, states_kept = steps[2 * WARM:2 * last], states[2 * WARM:2 * last]
    sum_on = sum(t for t, s in zip(kept, states_kept) if s == 1)
    sum_off = sum(t for t, s in zip(kept, states_kept) if s == 0)
    worst = max(ratios, key=lambda r: abs(math.log(r)))
    on_first = statistics.median(first_on) if first_on else None
    off_first = statistics.median(first_off) if first_off else None
    return dict(job=job, pairs=len(ratios),
                geomean=math.exp(statistics.fmean(math.log(r) for r in ratios)),
                median=statistics.median(ratios),
                median_on_first=on_first, median_off_first=off_first,
                balanced=math.sqrt(on_first * off_first) if on_first and off_first else None,
                worst=worst, sum_ratio=sum_on / sum_off,
                step_median=statistics.median(kept), ratios=[round(r, 4) for r in ratios])


def main():
    rows = []
    for job in JOBS:
        for control in ((False, True) if CONTROL else (False,)):
            t = time.monotonic()
            got = run(job, control)
            if not got:
                continue
            row = summary(job + (' (control)' if control else ''), *got)
            row['wall_s'] = round(time.monotonic() - t, 1)
            rows.append(row)
            print('ROW', json.dumps(row), flush=True)
    with open(os.path.join(OUT, 'capture_ab.json'), 'w') as f:
        json.dump(rows, f, indent=1)
    print('| job | pairs | on/off, geometric mean | median | on first, off first (medians) '
          '| the two balanced | worst pair | sum on / sum off | step median (s) |')
    print('| --- | --- | --- | --- | --- | --- | --- | --- | --- |')
    for r in rows:
        print(f"| {r['job']} | {r['pairs']} | {r['geomean']:.4f} | {r['median']:.4f} | "
              f"{r['median_on_first']:.4f}, {r['median_off_first']:.4f} | {r['balanced']:.4f} | "
              f"{r['worst']:.4f} | {r['sum_ratio']:.4f} | {r['step_median']:.4f} |")


if __name__ == '__main__':
    main()
