"""Runs on the GPU machine (scripts/gpu_stage.sh here, then in one device
call: OOMLENS_GPU_CHECK=manage_check.py sh .gpu/run.sh): issue 16's
benchmark of manage mode against PyTorch's caching allocator.

Jobs (manage_jobs.py): gpt2, resnet50, gpt2_varlen, llama_varlen
(checkpointing, lengths 256..4096 per step) and generate (HF generate,
batch 1-16, prompt 128-1024, 48 new tokens); video (a 3D CNN beside
cuDNN's streams) when MANAGE_CHECK_JOBS names it. For each job, alternated pairs
(PyTorch's default cache, then `oomlens run --manage`), MANAGE_CHECK_PAIRS
of them (default 3) of MANAGE_CHECK_STEPS steps (default 18; the first
MANAGE_CHECK_WARM, default 2, are warm-up and not timed); then, as time
allows, one run each of PyTorch's other two configurations
(expandable_segments:True, backend:cudaMallocAsync). Every pair round runs
all jobs before the next round; a pair (or run) starts only if, at what
the job's last one took, it ends within MANAGE_CHECK_BUDGET_S (default
480 s); each run prints a RUN line as it ends, so a call cut short still
shows what ran.

Per job it prints: the median over pairs of the ratio of median step times
(--manage / default), the worst pair, for generate the worst call ratio
(call i has the same shape in every run), the ratio to the fastest of
PyTorch's three configurations, peak reserved / peak allocated for both,
and per steady-state step (after warm-up, from the report oomlens writes on
SIGUSR1 then and the one at exit): chunks mapped and unmapped (each a
cuMemCreate+cuMemMap+cuMemSetAccess, or a cuMemUnmap+cuMemRelease), device
synchronisations and fence waits; whether the seeded losses (for
generate, token checksums) are identical to PyTorch's, and, since a
kernel that is not deterministic makes PyTorch's own runs differ too, the
largest relative difference of a step's loss under --manage from PyTorch's
beside that among PyTorch's own runs.

Writes into $OUT: results.json, table.md, and manage_check.tar.gz holding
both and runs/ (every run's log and oomlens's reports)."""
import json, os, statistics, subprocess, sys, tarfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
CLI = os.path.join(HERE, 'oomlens')
JOBS_PY = os.path.join(HERE, 'manage_jobs.py')
OUT = os.environ.get('OUT', os.path.join(HERE, 'out'))
RUNS = os.path.join(HERE, 'runs')  # packed into the tar, not left in $OUT one by one
JOBS = os.environ.get('MANAGE_CHECK_JOBS', 'gpt2,resnet50,gpt2_varlen,llama_varlen,generate').split(',')
PAIRS = int(os.environ.get('MANAGE_CHECK_PAIRS', '3'))
STEPS = int(os.environ.get('MANAGE_CHECK_STEPS', '18'))
WARM = int(os.environ.get('MANAGE_CHECK_WARM', '2'))
BUDGET = float(os.environ.get('MANAGE_CHECK_BUDGET_S', '480'))
START = time.monotonic()
# generate: a call is a step; 12 timed calls, as the issue measured
STEPS_OF = {'generate': int(os.environ.get('MANAGE_CHECK_CALLS', str(WARM + 12)))}
CONFS = {'default': None, 'expandable': 'expandable_segments:True',
         'async': 'backend:cudaMallocAsync'}


def run(job, conf, tag):
    """One process of job under conf ('manage' or a key of CONFS)."""
    env = dict(os.environ)
    env.pop('LD_PRELOAD', None)
    env.pop('PYTORCH_CUDA_ALLOC_CONF', None)
    env['CUBLAS_WORKSPACE_CONFIG'] = ':4096:8'
    steps = STEPS_OF.get(job, STEPS)
    cmd = [sys.executable, JOBS_PY, job, '--steps', str(steps), '--warm', str(WARM)]
    report = os.path.join(RUNS, f'{tag}-%p.txt')
    mark = os.path.join(RUNS, f'{tag}-warm.json')
    if conf == 'manage':
        env['MANAGE_CHECK_MARK'] = mark
        cmd = [CLI, 'run', '--manage', '--report', report, '--'] + cmd
    elif CONFS[conf]:
        env['PYTORCH_CUDA_ALLOC_CONF'] = CONFS[conf]
    t = time.monotonic()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    with open(os.path.join(RUNS, f'{tag}.log'), 'w') as f:
        f.write(p.stdout + '\n--- stderr\n' + p.stderr)
    steps, losses, result = [], [], None
    for line in p.stdout.splitlines():
        if line.startswith('STEP '):
            steps.append(float(line.split()[1]))
        elif line.startswith('LOSS '):
            losses.append(line.split()[1])
        elif line.startswith('RESULT '):
            result = json.loads(line[7:])
    r = dict(job=job, conf=conf, rc=p.returncode, steps=steps, losses=losses, result=result,
             wall_s=round(time.monotonic() - t, 2))
    if conf == 'manage':
        r['report'] = read_json(final_report(tag))
        r['warm_report'] = read_json(mark)
    if p.returncode != 0 or not result:
        r['error'] = p.stderr[-2000:]
    return r


def final_report(tag):
    for name in sorted(os.listdir(RUNS)):
        if name.startswith(tag + '-') and name.endswith('.json') and not name.endswith('-warm.json'):
            return os.path.join(RUNS, name)
    return None


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, TypeError, ValueError):
        return None


def timed(r):
    return r['steps'][WARM:] or r['steps']


def median_step(r):
    return statistics.median(timed(r)) if timed(r) else None


def steady_calls(r):
    """Per step after warm-up: chunks mapped, unmapped, syncs, fence waits
    (the final report less the one written at the end of warm-up)."""
    fin, warm = r.get('report'), r.get('warm_report')
    if not fin or not warm:
        return None
    n = max(1, len(r['steps']) - WARM)

    def figures(rep):
        d = rep['devices'][0]
        seg = d['stats']['segment']['all']
        return dict(maps=seg['allocated'], unmaps=seg['freed'],
                    syncs=d['calls'].get('device_syncs', 0), fence_waits=d['calls'].get('fence_waits', 0))
    a, b = figures(warm), figures(fin)
    return {k: (b[k] - a[k]) / n for k in a} | {'total_' + k: b[k] for k in b}


def manage_ratio(r):
    d = (r.get('report') or {}).get('devices', [{}])[0]
    try:
        return d['origins']['pool']['peak'] / max(1, d['stats']['allocated_bytes']['all']['peak'])
    except (KeyError, TypeError):
        return None


def own_share(r, what):
    """oomlens's own time on the job's threads (report format 1.6:
    own_time.call_sites_s or manage_pool_s) over the span it was spent in:
    what it can cost the run at most."""
    t = (r.get('report') or {}).get('own_time') or {}
    if not t.get('span_s'):
        return None
    return t[what] / t['span_s']


def native_ratio(r):
    res = r.get('result') or {}
    return res.get('peak_reserved', 0) / max(1, res.get('peak_alloc', 0)) if res else None


TAKEN = {}  # job -> seconds its last run took (run's wall_s)


def over_budget(job, runs_ahead=2):
    """Whether the next runs_ahead runs of job would end past the budget,
    judged by what its last ones took (else by the longest job's): a pair
    started just under the budget ran the call past its limit and lost the
    whole table (2026-12-02)."""
    per_run = TAKEN.get(job, max(TAKEN.values(), default=0.0))
    return time.monotonic() - START + per_run * runs_ahead > BUDGET


def timed_run(job, conf, tag):
    r = run(job, conf, tag)
    TAKEN[job] = r['wall_s']
    print(f'RUN {tag}: {len(r["steps"])} steps, median {median_step(r)} s, rc {r["rc"]}, '
          f'{TAKEN[job]:.0f} s', flush=True)
    return r


def summarise(job, runs):
    pairs = [(d, m) for d, m in zip(runs['default'], runs['manage']) if not d.get('error') and not m.get('error')]
    row = dict(job=job, pairs=len(pairs))
    errors = [r['error'] for rs in runs.values() for r in rs if r.get('error')]
    if errors:
        row['errors'] = [e[-600:] for e in errors]
    if not pairs:
        return row
    ratios = [median_step(m) / median_step(d) for d, m in pairs]
    row.update(median_ratio=statistics.median(ratios), worst_pair=max(ratios), pair_ratios=ratios,
               default_step=statistics.median(median_step(d) for d, _ in pairs),
               manage_step=statistics.median(median_step(m) for _, m in pairs))
    if job == 'generate':  # call i has the same shape in every run
        per_call = [max(m['steps'][i] / d['steps'][i] for d, m in pairs)
                    for i in range(WARM, min(len(pairs[0][0]['steps']), len(pairs[0][1]['steps'])))]
        row['worst_call_ratio'] = max(per_call) if per_call else None
        row['call_ratios'] = per_call
    fastest = {'default': row['default_step']}
    for conf in ('expandable', 'async'):
        good = [r for r in runs.get(conf, []) if not r.get('error') and timed(r)]
        if good:
            fastest[conf] = median_step(good[0])
            row[conf + '_step'] = fastest[conf]
            row[conf + '_reserved_ratio'] = native_ratio(good[0])
    best = min(fastest, key=fastest.get)
    row.update(fastest_pytorch=best, ratio_to_fastest=row['manage_step'] / fastest[best])
    row['default_reserved_ratio'] = statistics.median(native_ratio(d) for d, _ in pairs)
    mr = [manage_ratio(m) for _, m in pairs if manage_ratio(m)]
    row['manage_reserved_ratio'] = max(mr) if mr else None
    for key, what in (('capture_share', 'call_sites_s'), ('pool_share', 'manage_pool_s')):
        shares = [own_share(m, what) for _, m in pairs if own_share(m, what) is not None]
        row[key] = max(shares) if shares else None
    calls = [steady_calls(m) for _, m in pairs]
    calls = [c for c in calls if c]
    if calls:
        row['steady_per_step'] = {k: max(c[k] for c in calls) for k in calls[0]}
    row['losses_identical'] = all(d['losses'] == m['losses'] and len(d['losses']) == STEPS_OF.get(job, STEPS)
                                  for d, m in pairs)
    # a kernel that is not deterministic (one warn_only let through) makes
    # PyTorch's own runs differ too: then a difference says nothing of ours
    row['default_runs_identical'] = all(d['losses'] == pairs[0][0]['losses'] for d, _ in pairs)
    # ... so the spread is what to compare: the largest relative difference
    # of a step's loss (generate: checksum) under --manage from its pair's
    # PyTorch run, against that among PyTorch's own runs (its first run)
    row['loss_spread_manage'] = max_spread((m['losses'], d['losses']) for d, m in pairs)
    row['loss_spread_default'] = max_spread((d['losses'], pairs[0][0]['losses']) for d, _ in pairs[1:])
    return row


def max_spread(couples):
    """Largest relative difference of step values over the couples; None
    where there is none to compare (a run without losses, one run)."""
    worst = None
    for a, b in couples:
        if not a or len(a) != len(b):
            continue
        for x, y in zip(a, b):
            x, y = float(x), float(y)
            d = abs(x - y) / max(abs(y), 1e-30)
            worst = d if worst is None else max(worst, d)
    return worst


def pct(v):
    return '-' if v is None else f'{100 * v:.2f}%'


def fmt(v, spec='.3f'):
    return '-' if v is None else format(v, spec)


def table(rows):
    lines = [f'manage_check: {PAIRS} alternated pairs of {STEPS} steps ({WARM} warm-up), '
             f'{round(time.monotonic() - START)} s', '',
             '| job | pairs | median ratio --manage/default | worst pair | worst call (generate) | '
             'ratio to fastest PyTorch (which) | reserved/allocated: default, --manage | '
             'steady state per step: maps, unmaps, syncs, fence waits | losses identical (default runs among themselves) | '
             'largest relative loss difference: --manage from default, default among its runs | '
             'own time, most of a run: the pool, the role capture |',
             '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |']
    for r in rows:
        if 'median_ratio' not in r:
            lines.append(f"| {r['job']} | 0 | error: {(r.get('errors') or ['no run'])[0][-300:]!r} |")
            continue
        s = r.get('steady_per_step') or {}
        lines.append(
            f"| {r['job']} | {r['pairs']} | {fmt(r['median_ratio'])} | {fmt(r['worst_pair'])} | "
            f"{fmt(r.get('worst_call_ratio'))} | {fmt(r['ratio_to_fastest'])} ({r['fastest_pytorch']}) | "
            f"{fmt(r['default_reserved_ratio'], '.4f')}, {fmt(r['manage_reserved_ratio'], '.4f')} | "
            f"{fmt(s.get('maps'), '.1f')}, {fmt(s.get('unmaps'), '.1f')}, {fmt(s.get('syncs'), '.2f')}, "
            f"{fmt(s.get('fence_waits'), '.2f')} | {r['losses_identical']} ({r['default_runs_identical']}) | "
            f"{fmt(r.get('loss_spread_manage'), '.1e')}, {fmt(r.get('loss_spread_default'), '.1e')} | "
            f"{pct(r.get('pool_share'))}, {pct(r.get('capture_share'))} |")
    lines += ['', 'step medians (s): ' + '; '.join(
        f"{r['job']} default {fmt(r.get('default_step'), '.4f')} manage {fmt(r.get('manage_step'), '.4f')} "
        f"expandable {fmt(r.get('expandable_step'), '.4f')} async {fmt(r.get('async_step'), '.4f')}"
        for r in rows if 'median_ratio' in r)]
    return '\n'.join(lines)


def main():
    os.makedirs(RUNS, exist_ok=True)
    runs = {job: {c: [] for c in ('default', 'manage', 'expandable', 'async')} for job in JOBS}
    skipped = []
    for pair in range(PAIRS):
        for job in JOBS:
            if over_budget(job):
                skipped.append(f'{job} pair {pair}')
                continue
            runs[job]['default'].append(timed_run(job, 'default', f'{job}-p{pair}-default'))
            runs[job]['manage'].append(timed_run(job, 'manage', f'{job}-p{pair}-manage'))
    for conf in ('expandable', 'async'):
        for job in JOBS:
            if over_budget(job, 1):
                skipped.append(f'{job} {conf}')
                continue
            runs[job][conf].append(timed_run(job, conf, f'{job}-{conf}'))
    rows = [summarise(job, runs[job]) for job in JOBS]
    text = table(rows) + ('\n\nskipped for the time budget: ' + ', '.join(skipped) if skipped else '')
    lean = {job: {c: [{k: v for k, v in r.items() if k not in ('report', 'warm_report')} for r in rs]
                  for c, rs in confs.items()} for job, confs in runs.items()}  # reports: in runs/
    with open(os.path.join(OUT, 'results.json'), 'w') as f:
        json.dump(dict(rows=rows, runs=lean, skipped=skipped, pairs=PAIRS, steps=STEPS, warm=WARM), f, indent=1)
    with open(os.path.join(OUT, 'table.md'), 'w') as f:
        f.write(text + '\n')
    with tarfile.open(os.path.join(OUT, 'manage_check.tar.gz'), 'w:gz') as tar:
        for name in ('results.json', 'table.md'):
            tar.add(os.path.join(OUT, name), arcname=name)
        tar.add(RUNS, arcname='runs')
    print(text)


if __name__ == '__main__':
    main()
