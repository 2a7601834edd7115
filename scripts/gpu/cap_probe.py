"""Runs on the GPU machine (scripts/gpu_stage.sh, then
CAP_PROBE_CASES=name:batch:steps,... OOMLENS_GPU_CHECK=cap_probe.py sh .gpu/run.sh):
what a held-out case's job holds at its peak, uncapped, so that the cap of
a case built to run out between two figures (a job's own peak, and that
peak plus a kept block) is set from a measure on the device rather than
guessed (session 28's step_logits_leak ran out in its second step twice
on a cap guessed from another card's figures).

For each case and mode (CAP_PROBE_MODES, default manage,observe): the job
under `oomlens run [--manage] --report` with no cap; prints the report's
peak allocated and reserved, what was held outside the allocator, and
their sum (the device use `--capacity` counts: reserved plus outside),
and writes $OUT/cap_probe.json."""
import json, os, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
CLI = os.path.join(HERE, 'oomlens')
JOB = os.path.join(HERE, 'oom_cases.py')
OUT = os.environ.get('OUT', '/tmp/oomlens-out')


def probe(name, batch, steps, manage):
    mode = 'manage' if manage else 'observe'
    report = os.path.join(OUT, f'cap-{name}-{mode}.txt')  # its JSON beside it, .json
    cmd = [CLI, 'run', '--report', report] + (['--manage'] if manage else [])
    cmd += ['--', sys.executable, JOB, name, '--batch', str(batch), '--steps', str(steps)]
    env = dict(os.environ)
    env.pop('LD_PRELOAD', None)
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    row = dict(name=name, mode=mode, batch=batch, steps=steps, rc=p.returncode)
    report_json = report[:-len('.txt')] + '.json'
    if p.returncode != 0 or not os.path.exists(report_json):
        row['error'] = p.stderr[-2000:]
        return row
    with open(report_json) as f:
        r = json.load(f)
    device = r['devices'][0]  # the job's one device
    peak = device['timeline']['peak']
    row['peak_allocated'], row['peak_reserved'] = peak['allocated'], peak['reserved']
    outside = (device.get('batch_figure') or {}).get('outside', -1)
    row['outside'] = outside if outside >= 0 else None  # -1: not known
    if row.get('peak_reserved') is not None and row['outside'] is not None:
        row['use_at_peak'] = row['peak_reserved'] + row['outside']
    for line in p.stdout.splitlines():
        if line.startswith('RESULT '):
            row['result'] = json.loads(line[7:])
    return row


def main():
    cases = [c.split(':') for c in os.environ.get('CAP_PROBE_CASES', '').split(',') if c]
    if not cases:
        sys.exit('cap_probe.py: CAP_PROBE_CASES=name:batch:steps,... names the jobs')
    modes = os.environ.get('CAP_PROBE_MODES', 'manage,observe').split(',')
    rows = []
    for name, batch, steps in cases:
        for mode in modes:
            row = probe(name, int(batch), int(steps), mode == 'manage')
            rows.append(row)
            gb = {k: round(row[k] / 1e9, 3) for k in ('peak_allocated', 'peak_reserved',
                                                        'outside', 'use_at_peak')
                  if row.get(k) is not None}
            print(json.dumps(dict(name=name, mode=mode, rc=row['rc'], GB=gb,
                                  oom=(row.get('result') or {}).get('oom'),
                                  error=row.get('error', '')[-400:])), flush=True)
    with open(os.path.join(OUT, 'cap_probe.json'), 'w') as f:
        json.dump(rows, f, indent=1)


if __name__ == '__main__':
    main()
