"""Runs on the GPU machine (scripts/gpu_stage.sh, then
OOMLENS_GPU_CHECK=batch_probe.py sh .gpu/run.sh): how the memory of a
training iteration grows with its batch, to check the batch figure's
model (docs/diagnosis.md, "The batch figure") against the real thing.

For each job of oom_cases.py with a batch, runs it under `oomlens run
--manage --capacity CAP --batch B` at several batches, keeps each run's
JSON report and the job's RESULT line, and prints per run: whether it
fitted, peak allocated and reserved, what outlives iterations, the
iteration's need, what is held outside, and the report's batch figure.
Writes $OUT/batch_probe.tar.gz (the reports) and $OUT/batch_probe.json.

OOMLENS_PROBE=case:cap:b1/b2/...;... picks the runs; a case job=NAME runs
first_step_check.py's job NAME (session 45: jobs under autocast). Each
run's trace comes back in the tarball too (probe-CASE-BATCH.trace).
OOMLENS_PROBE_STEPS (default 3) is each run's steps."""
import json, os, subprocess, sys, tarfile

HERE = os.path.dirname(os.path.abspath(__file__))
CLI = os.path.join(HERE, 'oomlens')
JOB = os.path.join(HERE, 'oom_cases.py')
OUT = os.environ.get('OUT', '.')
DEFAULT = 'gpt2_batch:12G:1/2/3/4/5/6;resnet_batch:8G:16/32/64/80/87/88'


def plan():
    for item in os.environ.get('OOMLENS_PROBE', DEFAULT).split(';'):
        case, cap, batches = item.split(':')
        for b in batches.split('/'):
            yield case, cap, int(b)


def peak(dev, field):
    return dev.get('stats', {}).get(field, {}).get('all', {}).get('peak', 0)


def run(case, cap, batch, steps=int(os.environ.get('OOMLENS_PROBE_STEPS', '3'))):
    report = os.path.join(OUT, f'probe-{case}-{batch}-%p.txt')
    trace = os.path.join(OUT, f'probe-{case}-{batch}.trace')
    if case.startswith('job='):  # a job of first_step_check.py's loop
        what = [os.path.join(HERE, 'first_step_check.py'), '--job', case[len('job='):]]
    else:
        what = [JOB, case]
    cmd = [CLI, 'run', '--manage', '--capacity', cap, '--batch', str(batch), '--report', report,
           '--trace', trace, '--', sys.executable, *what, '--batch', str(batch),
           '--steps', str(steps)]
    env = dict(os.environ)
    env.pop('LD_PRELOAD', None)
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    result = None
    for line in p.stdout.splitlines():
        if line.startswith('RESULT '):
            result = json.loads(line[7:])
    stem = f'probe-{case}-{batch}-'
    reports = [f for f in os.listdir(OUT) if f.startswith(stem) and f.endswith('.json')]
    dev = {}
    if reports:
        with open(os.path.join(OUT, reports[0])) as fh:
            devs = json.load(fh).get('devices', [])
        dev = max(devs, key=lambda d: peak(d, 'allocated_bytes')) if devs else {}
    return p, result, dev, reports


def main():
    rows = []
    for case, cap, batch in plan():
        p, result, dev, reports = run(case, cap, batch)
        s = dev.get('stats', {})
        row = dict(case=case, cap=cap, batch=batch, fitted=bool(result) and result.get('oom') is None,
                   peak_allocated=peak(dev, 'allocated_bytes'),
                   peak_reserved=peak(dev, 'reserved_bytes'),
                   batch_figure=dev.get('batch_figure'), oom=dev.get('oom'), reports=reports,
                   rc=p.returncode, stderr_tail=p.stderr[-1500:])
        rows.append(row)
        print('PROBE', json.dumps({k: row[k] for k in ('case', 'batch', 'fitted', 'peak_allocated',
                                                      'peak_reserved', 'batch_figure')}), flush=True)
    with open(os.path.join(OUT, 'batch_probe.json'), 'w') as fh:
        json.dump(rows, fh, indent=1)
    with tarfile.open(os.path.join(OUT, 'batch_probe.tar.gz'), 'w:gz') as tar:
        for f in sorted(os.listdir(OUT)):
            if f.startswith('probe-'):
                tar.add(os.path.join(OUT, f), arcname=f)
                os.remove(os.path.join(OUT, f))


if __name__ == '__main__':
    main()
