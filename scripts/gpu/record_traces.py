"""Runs on the GPU machine (scripts/gpu_stage.sh here, then in one device
call: OOMLENS_GPU_CHECK=record_traces.py sh .gpu/run.sh): records the
allocation traces of manage_check.py's jobs under `oomlens run --manage
--trace`, so that `oomlens replay` can be checked against what the live
pool did (issue 16: the steady state's driver calls).

RECORD_JOBS (default llama_varlen,resnet50,gpt2_varlen,generate) and
RECORD_STEPS (default 18; the first 2 are warm-up, as in manage_check.py).
Each job runs once; its trace is gzip'd into $OUT/traces/JOB.csv.gz, its
final JSON report into $OUT/traces/JOB.json and the one written after
warm-up into $OUT/traces/JOB-warm.json; the step times go into
$OUT/traces/JOB.log. Prints one line per job: steps, median step, chunks
mapped and unmapped in the steady state (final report less the warm one),
then `oomlens replay` of the trace against the live pool: the chunks
replay maps and unmaps (plus the requests the pool left to the driver,
each a segment of the report's) against the report's, and whether they
agree within 1%."""
import glob, gzip, json, os, shutil, statistics, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
CLI = os.path.join(HERE, 'oomlens')
JOBS_PY = os.path.join(HERE, 'manage_jobs.py')
OUT = os.environ.get('OUT', os.path.join(HERE, 'out'))
DEST = os.path.join(OUT, 'traces')
JOBS = os.environ.get('RECORD_JOBS', 'llama_varlen,resnet50,gpt2_varlen,generate').split(',')
STEPS = int(os.environ.get('RECORD_STEPS', '18'))
WORK = os.path.join(HERE, 'record_work')


def pool_calls(report):
    """(chunks mapped, chunks unmapped) from a JSON report, or None."""
    try:
        with open(report) as f:
            r = json.load(f)
    except (OSError, ValueError):
        return None
    try:
        seg = r['devices'][0]['stats']['segment']['all']
        return seg['allocated'], seg['freed']
    except (KeyError, IndexError, TypeError):
        return None


def record(job):
    os.makedirs(WORK, exist_ok=True)
    trace = os.path.join(WORK, f'{job}.csv')
    report = os.path.join(WORK, f'{job}-%p.txt')
    mark = os.path.join(DEST, f'{job}-warm.json')
    env = dict(os.environ)
    env.pop('LD_PRELOAD', None)
    env['MANAGE_CHECK_MARK'] = mark
    env['CUBLAS_WORKSPACE_CONFIG'] = ':4096:8'
    cmd = [CLI, 'run', '--manage', '--trace', trace, '--report', report, '--',
           sys.executable, JOBS_PY, job, '--steps', str(STEPS), '--warm', '2']
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    with open(os.path.join(DEST, f'{job}.log'), 'w') as f:
        f.write(p.stdout + '\n--- stderr\n' + p.stderr[-20000:])
    steps = [float(l.split()[1]) for l in p.stdout.splitlines() if l.startswith('STEP ')]
    if os.path.exists(trace):
        with open(trace, 'rb') as src, gzip.open(os.path.join(DEST, f'{job}.csv.gz'), 'wb') as dst:
            shutil.copyfileobj(src, dst)
    finals = sorted(glob.glob(os.path.join(WORK, f'{job}-*.json')))
    if finals:
        shutil.copyfile(finals[-1], os.path.join(DEST, f'{job}.json'))
    end, warm = pool_calls(os.path.join(DEST, f'{job}.json')), pool_calls(mark)
    steady = None
    if end and warm and len(steps) > 2:
        n = len(steps) - 2
        steady = (round((end[0] - warm[0]) / n, 1), round((end[1] - warm[1]) / n, 1))
    med = statistics.median(steps[2:]) if len(steps) > 2 else None
    print(f'{job}: rc {p.returncode}, {len(steps)} steps, median step {med}, '
          f'pool calls at end {end}, after warm-up {warm}, per steady step (maps, unmaps) {steady}',
          flush=True)
    if p.returncode:
        print(p.stderr[-3000:], flush=True)
    if end:
        replay_against(job, end)


def replay_against(job, live):
    """Replay of the job's trace against its report's segments (mapped, unmapped)."""
    trace = os.path.join(DEST, f'{job}.csv.gz')
    p = subprocess.run([CLI, 'replay', trace, '--json'], capture_output=True, text=True)
    try:
        r = json.loads(p.stdout)
        driver = r['followed']['driver_allocs']
        got = (r['driver_calls']['maps'] + driver, r['driver_calls']['unmaps'] + driver)
    except (ValueError, KeyError, TypeError):
        print(f'{job}: replay failed (rc {p.returncode}): {p.stderr[-500:]}', flush=True)
        return
    close = all(abs(g - l) <= l / 100 for g, l in zip(got, live))
    print(f'{job}: replay (maps, unmaps; {driver} left to the driver) {got}, live {tuple(live)}, '
          f'held frees followed {r["followed"]["held_frees"]}, within 1%: {close}', flush=True)


def main():
    os.makedirs(DEST, exist_ok=True)
    for job in JOBS:
        record(job)
    shutil.rmtree(WORK, ignore_errors=True)


if __name__ == '__main__':
    main()
