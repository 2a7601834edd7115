"""Runs on the GPU machine (scripts/gpu_stage.sh, then
OOMLENS_GPU_CHECK=recover_check.py sh .gpu/run.sh): jobs that catch their
out-of-memory errors and go on (oom_cases.py's auto_batch_fits and
skip_long_fits), so one process sees several OOMs and then fits; and,
the thirty-ninth held-out set, jobs whose allocations come from threads
other than the main one (threaded_infer_*, thread_train_*).

Each case runs under `oomlens run --capacity CAP --batch N` in three modes:
observe (PyTorch's cache), manage (our pool, PyTorch's cache off) and
manage with PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync (PyTorch's own
OutOfMemoryError under --manage). Per run it keeps, under $OUT/recover/:
the job's stderr, the text and JSON reports and (manage modes) the trace,
gzip'd; and prints one row: exit status, steps done, OOM paragraphs on
stderr and their classes, the report's num_ooms and last class, and
whether a leak warning stands at the end, the requests manage mode left
to the driver, the job's last error line where it failed otherwise than
by running out, and the losses a job prints (to compare between modes).
Writes $OUT/recover.json.

OOMLENS_RECOVER_CASES=name:cap:batch:steps,... picks the cases,
OOMLENS_RECOVER_MODES=observe,manage,... the modes."""
import gzip, json, os, re, shutil, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
CLI = os.path.join(HERE, 'oomlens')
JOB = os.path.join(HERE, 'oom_cases.py')
OUT = os.environ.get('OUT', '/tmp/oomlens-out')
CASES = [c.split(':') for c in os.environ.get(
    'OOMLENS_RECOVER_CASES', 'auto_batch_fits:12G:16:6,skip_long_fits:6G:8:30').split(',')]
MODES = {'observe': ([], {}), 'manage': (['--manage'], {}),
         'manage_async': (['--manage'],
                          {'PYTORCH_CUDA_ALLOC_CONF': 'backend:cudaMallocAsync'})}
MODES = {m: MODES[m] for m in os.environ.get('OOMLENS_RECOVER_MODES', ','.join(MODES)).split(',')}
PARAGRAPH = re.compile(r'oomlens: device \d+: out of memory \((\w+)')


def gzip_to(src, dst):
    with open(src, 'rb') as f, gzip.open(dst, 'wb') as g:
        shutil.copyfileobj(f, g)
    os.remove(src)


def run(name, cap, batch, steps, mode):
    folder = os.path.join(OUT, 'recover')
    tag = f'{name}-{cap}-{mode}'
    report = os.path.join(folder, f'{tag}.txt')
    trace = os.path.join(folder, f'{tag}.trace')
    flags, extra = MODES[mode]
    cmd = [CLI, 'run', '--capacity', cap, '--batch', batch, '--report', report] + flags
    if mode != 'observe':
        cmd += ['--trace', trace]
    cmd += ['--', sys.executable, JOB, name, '--batch', batch, '--steps', steps]
    env = dict(os.environ, **extra)
    env.pop('LD_PRELOAD', None)
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=500)
    with open(os.path.join(folder, f'{tag}.stderr'), 'w') as f:
        f.write(p.stderr)
    result = next((json.loads(line[len('RESULT '):]) for line in p.stdout.splitlines()
                   if line.startswith('RESULT ')), {})
    row = dict(case=name, mode=mode, cap=cap, batch=batch, rc=p.returncode,
               steps_done=result.get('steps_done'), job_oom=result.get('oom'),
               paragraphs=PARAGRAPH.findall(p.stderr))
    rep = report[:-len('.txt')] + '.json'
    if os.path.exists(rep):
        with open(rep) as f:
            d = json.load(f)['devices'][0]
        row.update(num_ooms=d.get('num_ooms'), recovered=d.get('recovered_allocs'),
                   last_class=(d.get('oom') or {}).get('class'),
                   leak_warning=d.get('leak_warning'),
                   manage_fallbacks=(d.get('calls') or {}).get('manage_fallbacks'))
    if p.returncode != 0:
        row['error'] = (p.stderr.strip().splitlines() or [''])[-1][:300]
    losses = re.findall(r': step \d+ loss (\S+)', p.stdout)
    if losses:
        row['losses'] = losses
    if os.path.exists(trace):
        gzip_to(trace, trace + '.gz')
    return row


def main():
    os.makedirs(os.path.join(OUT, 'recover'), exist_ok=True)
    rows = []
    for name, cap, batch, steps in CASES:
        for mode in MODES:
            row = run(name, cap, batch, steps, mode)
            rows.append(row)
            warned = row.get('leak_warning')
            print(f"{name} {mode}: rc {row['rc']}, steps {row['steps_done']}, paragraphs "
                  f"{row['paragraphs']}, num_ooms {row.get('num_ooms')}, last "
                  f"{row.get('last_class')}, leak warning "
                  f"{'standing' if warned and not warned.get('withdrawn_at_iteration') else warned and 'withdrawn'}, "
                  f"job's OOM {row['job_oom']}, manage_fallbacks {row.get('manage_fallbacks')}"
                  + (f", error {row['error']}" if 'error' in row else '')
                  + (f", losses {' '.join(row['losses'])}" if 'losses' in row else ''),
                  flush=True)
    with open(os.path.join(OUT, 'recover.json'), 'w') as f:
        json.dump(rows, f, indent=1)


if __name__ == '__main__':
    main()
