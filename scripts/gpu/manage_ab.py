"""Runs on the GPU machine (OOMLENS_GPU_CHECK=manage_ab.py sh .gpu/run.sh):
alternated runs of one manage_jobs.py job under several configurations, to
tell what in manage mode costs step time (issue 16).

AB_JOB (default llama_varlen), AB_STEPS (default 14, the first 2 not timed),
AB_ROUNDS (default 2), AB_CONFS: configurations separated by ';', each
`default` (PyTorch's own cache) or `manage` followed by `:VAR=VALUE,...`
for oomlens's environment, e.g.
  AB_CONFS='default;manage:OOMLENS_ROLES=1;manage:OOMLENS_ROLES=0'
Every round runs each configuration once, the order rotated each round.
Prints per configuration the median step time of each run and, under
manage, the report's fence waits, device syncs and chunks mapped at exit,
and chunks mapped and unmapped per step after warm-up (steady_maps,
steady_unmaps, from the report manage_jobs.py has written then);
writes $OUT/manage_ab.json. Where `default` is among the configurations,
each other run's steps are also set beside the default run of its round,
step against step (print_step_ratios)."""
import json, os, statistics, subprocess, sys, glob

HERE = os.path.dirname(os.path.abspath(__file__))
CLI = os.path.join(HERE, 'oomlens')
JOBS_PY = os.path.join(HERE, 'manage_jobs.py')
OUT = os.environ.get('OUT', '.')
JOB = os.environ.get('AB_JOB', 'llama_varlen')
STEPS = int(os.environ.get('AB_STEPS', '14'))
ROUNDS = int(os.environ.get('AB_ROUNDS', '2'))
CONFS = os.environ.get('AB_CONFS', 'default;manage:OOMLENS_ROLES=1;manage:OOMLENS_ROLES=0').split(';')
WORK = os.path.join(HERE, 'ab_work', JOB)


def run(conf, tag):
    env = dict(os.environ)
    env.pop('LD_PRELOAD', None)
    env['CUBLAS_WORKSPACE_CONFIG'] = ':4096:8'
    kind, _, extra = conf.partition(':')
    cmd = [sys.executable, JOBS_PY, JOB, '--steps', str(STEPS), '--warm', '2']
    report = os.path.join(WORK, f'{tag}-%p.txt')
    for old in glob.glob(os.path.join(WORK, f'{tag}-*')):
        os.remove(old)  # a report left by an earlier call (same tags) is not this run's
    warm = os.path.join(WORK, f'{tag}-warm.json')
    if kind == 'manage':
        env['MANAGE_CHECK_MARK'] = warm  # manage_jobs.py: the reports after warm-up, copied here
        for kv in filter(None, extra.split(',')):
            k, _, v = kv.partition('=')
            env[k] = v
        cmd = [CLI, 'run', '--manage', '--report', report, '--'] + cmd
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    steps = [float(l.split()[1]) for l in p.stdout.splitlines() if l.startswith('STEP ')]
    r = dict(conf=conf, rc=p.returncode, median=statistics.median(steps[2:]) if len(steps) > 2 else None,
             steps=steps)
    half = steps[2 + (len(steps) - 2) // 2:]
    if half:  # the later half alone: the steady state, where shapes seen before come back
        r['median_late'] = statistics.median(half)
    reps = [p for p in glob.glob(os.path.join(WORK, f'{tag}-*.json')) if p != warm]
    if reps:
        with open(reps[0]) as f:
            rep = json.load(f)
        d = rep['devices'][0]
        own = rep.get('own_time') or {}
        if own.get('span_s'):  # report 1.6: oomlens's own time, shares of the run
            r['pool_share'] = own['manage_pool_s'] / own['span_s']
            r['capture_share'] = own['call_sites_s'] / own['span_s']
        r.update(fence_waits=d['calls'].get('fence_waits'), syncs=d['calls'].get('device_syncs'),
                 stream_queries=d['calls'].get('stream_queries'),  # report 1.8
                 stream_marks=d['calls'].get('stream_marks'), mark_waits=d['calls'].get('mark_waits'),
                 stream_barriers=d['calls'].get('stream_barriers'),  # report 1.9
                 handle_moves=d['calls'].get('handle_moves'),  # report 1.10
                 maps=d['stats']['segment']['all']['allocated'],
                 unmaps=d['stats']['segment']['all']['freed'])
        if os.path.exists(warm):  # per step after warm-up: the steady state, not the learning
            with open(warm) as f:
                w = json.load(f)['devices'][0]['stats']['segment']['all']
            n = max(1, len(steps) - 2)
            r.update(steady_maps=(r['maps'] - w['allocated']) / n,
                     steady_unmaps=(r['unmaps'] - w['freed']) / n)
    if p.returncode:
        r['error'] = p.stderr[-1500:]
    print(json.dumps(r), flush=True)
    return r


def print_step_ratios(results):
    """Step against step, each run beside the `default` run of its round:
    the jobs' shapes are seeded, so step i has the same shape in every run,
    and a step that grows or remaps shows as one ratio, where the run's
    median leaves it out. Per configuration: the median of the ratios
    (warm-up steps left out) and the steps above 1.2x."""
    per_round = len(CONFS)
    for i, r in enumerate(results):
        if r['conf'] == 'default' or not r.get('steps'):
            continue
        start = (i // per_round) * per_round
        base = [b for b in results[start:start + per_round] if b['conf'] == 'default' and b.get('steps')]
        if not base or len(base[0]['steps']) != len(r['steps']):
            continue
        ratios = [a / b for a, b in zip(r['steps'][2:], base[0]['steps'][2:]) if b > 0]
        if ratios:
            slow = [k + 2 for k, x in enumerate(ratios) if x > 1.2]
            print(f"{r['conf']} (round {i // per_round + 1}): step ratio median "
                  f"{statistics.median(ratios):.3f}, above 1.2x at steps {slow}", flush=True)


def main():
    os.makedirs(WORK, exist_ok=True)
    results = []
    for i in range(ROUNDS):
        order = CONFS[i % len(CONFS):] + CONFS[:i % len(CONFS)]
        for j, conf in enumerate(order):
            results.append(run(conf, f'r{i}-{j}'))
    for conf in CONFS:
        meds = [r['median'] for r in results if r['conf'] == conf and r['median']]
        late = [r['median_late'] for r in results if r['conf'] == conf and r.get('median_late')]
        print(f'{conf}: medians {meds}, later half {late}', flush=True)
    print_step_ratios(results)
    with open(os.path.join(OUT, 'manage_ab.json'), 'w') as f:
        json.dump(results, f, indent=1)


if __name__ == '__main__':
    main()
