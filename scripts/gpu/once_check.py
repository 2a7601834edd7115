"""Runs on the GPU machine (scripts/gpu_stage.sh, then
OOMLENS_GPU_CHECK=once_check.py sh .gpu/run.sh): one OOM, one diagnosis,
and replay diagnosing the recorded OOM, on real PyTorch jobs. Each case runs
under `oomlens run [--manage] --capacity CAP --trace T`, in both modes
(observe: PyTorch's caching allocator, which frees its cache and retries a
refused cudaMalloc; manage: our pool, PyTorch's cache off). Per run:
  paragraphs      "oomlens: device 0: out of memory (" on stderr: want 1
  before_error    the paragraph comes before the job's OutOfMemoryError
  num_ooms, recovered_allocs, failed_allocs, class   from the JSON report
  replay          `oomlens replay T --json`: recorded_oom's class, and its
                  figures against the live report's oom object (want equal)
OOMLENS_ONCE_CASES=name:cap,... (workloads.py names). Writes results.json
and once.md into $OUT."""
import json, os, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
CLI = os.path.join(HERE, 'oomlens')
WORKLOADS = os.path.join(HERE, 'workloads.py')
OUT = os.environ.get('OUT', '/tmp/oomlens-out')
CASES = [tuple(c.split(':')) for c in os.environ.get(
    'OOMLENS_ONCE_CASES', 'oom_activations:12G,oom_params:12G,frag:6G').split(',')]
FIELDS = ['request', 'capacity', 'allocated', 'reserved', 'external', 'persistent',
          'iterations', 'growth_per_iteration', 'free_reserved', 'largest_free_block']
PARAGRAPH = 'oomlens: device 0: out of memory ('


def live_run(name, cap, manage):
    tag = f'{name}-{"manage" if manage else "observe"}'
    trace = os.path.join(OUT, f'o-{tag}.trace')
    report = os.path.join(OUT, f'o-{tag}-%p.txt')
    cmd = [CLI, 'run', '--capacity', cap, '--trace', trace, '--report', report]
    if manage:
        cmd.insert(2, '--manage')
    env = dict(os.environ)
    env.pop('LD_PRELOAD', None)
    p = subprocess.run(cmd + ['--', sys.executable, WORKLOADS, name], env=env,
                       capture_output=True, text=True, timeout=400)
    rep = None
    for f in sorted(os.listdir(OUT)):
        if f.startswith(f'o-{tag}-') and f.endswith('.json'):
            with open(os.path.join(OUT, f)) as fh:
                rep = json.load(fh)
    err = p.stderr
    at_par, at_exc = err.find(PARAGRAPH), err.find('OutOfMemoryError')
    row = {'case': name, 'cap': cap, 'mode': 'manage' if manage else 'observe', 'rc': p.returncode,
           'paragraphs': err.count(PARAGRAPH),
           'before_error': at_par >= 0 and (at_exc < 0 or at_par < at_exc)}
    if rep:
        d = rep['devices'][0]
        row.update(num_ooms=d['num_ooms'], recovered_allocs=d.get('recovered_allocs'),
                   failed_allocs=d['calls']['failed_allocs'],
                   live_class=(d['oom'] or {}).get('class'))
    r = subprocess.run([CLI, 'replay', trace, '--json'], capture_output=True, text=True,
                       timeout=400)
    if r.returncode == 0:
        j = json.loads(r.stdout)
        rec = j.get('recorded_oom') or {}
        row['replay_class'] = rec.get('class')
        row['replay_context'] = rec.get('context')
        row['policy_fits'] = rec.get('policy_fits')
        live = (rep or {}).get('devices', [{}])[0].get('oom') or {}
        diag = rec.get('diagnosis') or {}
        row['figures_differ'] = [f for f in FIELDS if live.get(f) != diag.get(f)]
    else:
        row['replay_error'] = r.stderr.strip()[-300:]
    return row


def main():
    os.makedirs(OUT, exist_ok=True)
    rows = [live_run(n, c, m) for n, c in CASES for m in (False, True)]
    with open(os.path.join(OUT, 'results.json'), 'w') as fh:
        json.dump(rows, fh, indent=1)
    lines = ['| case | cap | mode | paragraphs | before error | OOMs | recovered | failed | live | '
             'replay | context | figures differ |', '|' + ' --- |' * 12]
    for r in rows:
        lines.append('| {case} | {cap} | {mode} | {paragraphs} | {before_error} | {n} | {rec} | '
                     '{fail} | {lc} | {rc} | {ctx} | {diff} |'.format(
                         n=r.get('num_ooms'), rec=r.get('recovered_allocs'),
                         fail=r.get('failed_allocs'), lc=r.get('live_class'),
                         rc=r.get('replay_class', r.get('replay_error')),
                         ctx=r.get('replay_context'),
                         diff=','.join(r.get('figures_differ', [])) or '-', **r))
    text = '\n'.join(lines) + '\n'
    with open(os.path.join(OUT, 'once.md'), 'w') as fh:
        fh.write(text)
    print(text)


if __name__ == '__main__':
    main()
