"""Runs on the GPU machine (scripts/gpu_stage.sh, then
OOMLENS_GPU_CHECK=account_check.py sh .gpu/run.sh): one accounting model
live and offline, on real PyTorch jobs. Each workload runs under
`oomlens run --manage --stacks --trace T` (our pool serves every tensor, so
the library sees tensors); then the trace it wrote is read back offline:
`oomlens replay T --json` (the oomlens policy, at the job's capacity) and
`oomlens report T`. Compared, per job:
  live report's peak allocated        == replay's peak_allocated
  live report's allocations (total)   == replay's allocs
  live at-peak sites sum              == live peak allocated (exact)
  replay's peak sites sum             == replay's peak_allocated
  live report's peak, formatted       == the line `oomlens report T` prints
  at an OOM: the live class           vs replay's class (printed; replay has
                                         no memory outside the allocator)
OOMLENS_ACCOUNT_CASES=name:cap,... (cap 0: the whole device). Writes
results.json and account.md into $OUT."""
import json, os, re, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
CLI = os.path.join(HERE, 'oomlens')
WORKLOADS = os.path.join(HERE, 'workloads.py')
OUT = os.environ.get('OUT', '/tmp/oomlens-out')
CASES = [tuple(c.split(':')) for c in
         os.environ.get('OOMLENS_ACCOUNT_CASES', 'gpt2:0,resnet50:0,oom_activations:12G').split(',')]


def fmt_bytes(n):
    units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB']
    v, u = float(n), 0
    while u + 1 < len(units) and abs(v) >= 1024.0:
        v /= 1024.0
        u += 1
    return f'{n} B' if u == 0 else f'{v:.2f} {units[u]}'


def live_case(name, cap):
    trace = os.path.join(OUT, f'a-{name}.trace')
    report = os.path.join(OUT, f'a-{name}-%p.txt')
    cmd = [CLI, 'run', '--manage', '--stacks', '--trace', trace, '--report', report]
    if cap != '0':
        cmd += ['--capacity', cap]
    env = dict(os.environ)
    env.pop('LD_PRELOAD', None)
    args = [sys.executable, WORKLOADS, name]
    if name in ('gpt2', 'resnet50'):
        args += ['--steps', os.environ.get('OOMLENS_ACCOUNT_STEPS', '4')]
    p = subprocess.run(cmd + ['--'] + args, env=env, capture_output=True, text=True, timeout=300)
    rep = None
    for f in sorted(os.listdir(OUT)):
        if f.startswith(f'a-{name}-') and f.endswith('.json'):
            with open(os.path.join(OUT, f)) as fh:
                rep = json.load(fh)
    return trace, rep, p


def offline(trace, cap):
    cmd = [CLI, 'replay', trace, '--json']
    if cap != '0':
        cmd += ['--capacity', cap]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    replay = json.loads(r.stdout) if r.returncode == 0 and r.stdout.strip() else None
    t = subprocess.run([CLI, 'report', trace], capture_output=True, text=True, timeout=300)
    return replay, (r.stderr[-800:] if replay is None else None), t.stdout


def check(name, cap):
    trace, rep, p = live_case(name, cap)
    row = dict(case=f'{name}:{cap}', rc=p.returncode)
    if not rep or not rep.get('devices'):
        row['error'] = 'no live report: ' + p.stderr[-1500:]
        return row
    dev = rep['devices'][0]
    st = dev['stats']
    live_peak = st['allocated_bytes']['all']['peak']
    row['live_peak_allocated'] = live_peak
    row['live_allocs'] = st['allocation']['all']['allocated']
    at_peak = (dev.get('sites') or {}).get('at_peak') or []
    row['live_sites_listed'] = len(at_peak)
    row['live_oom_class'] = (dev.get('oom') or {}).get('class')
    replay, err, text = offline(trace, cap)
    if replay is None:
        row['error'] = 'replay failed: ' + (err or '')
        return row
    row['replay_peak_allocated'] = replay['peak_allocated']
    row['replay_allocs'] = replay['allocs']
    row['replay_sites_sum'] = sum(s['bytes'] for s in replay.get('peak_sites', []))
    row['replay_oom_class'] = (replay.get('oom') or {}).get('class')
    m = re.search(r'peak allocated (\S+ \S+) \(tensors\)', text)
    row['report_trace_peak'] = m.group(1) if m else None
    row['same_peak'] = live_peak == replay['peak_allocated']
    row['same_allocs'] = row['live_allocs'] == replay['allocs']
    row['report_trace_peak_matches'] = row['report_trace_peak'] == fmt_bytes(live_peak)
    return row


def main():
    os.makedirs(OUT, exist_ok=True)
    rows = [check(n, c) for n, c in CASES]
    with open(os.path.join(OUT, 'account.json'), 'w') as fh:
        json.dump(rows, fh, indent=1)
    lines = ['| case | live peak allocated | replay peak | same | live allocs | replay allocs | same | '
             '`oomlens report` peak | live class | replay class |', '|' + ' --- |' * 10]
    for r in rows:
        if 'error' in r:
            lines.append(f"| {r['case']} | error: {r['error'][:200]} |" + ' |' * 8)
            continue
        lines.append(f"| {r['case']} | {r['live_peak_allocated']} | {r['replay_peak_allocated']} | "
                     f"{r['same_peak']} | {r['live_allocs']} | {r['replay_allocs']} | "
                     f"{r['same_allocs']} | {r['report_trace_peak']} "
                     f"({'=' if r['report_trace_peak_matches'] else '!='}) | "
                     f"{r['live_oom_class']} | {r['replay_oom_class']} |")
    md = '\n'.join(lines)
    with open(os.path.join(OUT, 'account.md'), 'w') as fh:
        fh.write(md + '\n')
    print(md)
    for f in os.listdir(OUT):  # traces are large: keep only the tables
        if f.endswith('.trace'):
            os.remove(os.path.join(OUT, f))


if __name__ == '__main__':
    main()
