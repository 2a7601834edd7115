"""Runs on the GPU machine (OOMLENS_GPU_CHECK=capture_cost.py sh .gpu/run.sh):
what manage mode's default capture for memory by role (OOMLENS_ROLES=1:
the Python frames of a byte-weighted sample of 1 MiB) costs a training
step, against the same run with OOMLENS_ROLES=0.

For each workload of CAPTURE_WORKLOADS (default "gpt2 resnet50
gpt2_varlen"), CAPTURE_PAIRS pairs (default 5) of runs under `oomlens run
--manage`, alternated (roles on, off, on, off, ...; the order flips every
pair so a warming machine favours neither), CAPTURE_STEPS steps each
(default 8). A run's time is the sum of its step times after the first two
(workloads.py's RESULT line; gpt2_varlen's lengths are seeded, so each run
has the same steps). Prints per workload the median ratio on/off and the
worst pair, and the memory by role at the peak from one run's report (GPT-2
124M in fp32: weights about 475 MiB, AdamW's state twice that). Writes
capture_cost.json into $OUT.

Ten runs of GPT-2 take about 4 minutes; if one device call cannot hold
them all, run one workload a call: CAPTURE_WORKLOADS=gpt2 ..."""
import json, os, statistics, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
CLI = os.path.join(HERE, 'oomlens')
WORKLOADS = os.path.join(HERE, 'workloads.py')
OUT = os.environ.get('OUT', '/tmp/oomlens-out')
NAMES = os.environ.get('CAPTURE_WORKLOADS', 'gpt2 resnet50 gpt2_varlen').split()
PAIRS = int(os.environ.get('CAPTURE_PAIRS', '5'))
STEPS = int(os.environ.get('CAPTURE_STEPS', '8'))


def run(name, tag, roles):
    env = dict(os.environ)
    env.pop('LD_PRELOAD', None)
    env['OOMLENS_ROLES'] = '1' if roles else '0'
    report = os.path.join(OUT, f'c-{name}-{tag}-%p.txt')
    cmd = [CLI, 'run', '--manage', '--report', report, '--', sys.executable, WORKLOADS, name,
           '--steps', str(STEPS)]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    result = None
    for line in p.stdout.splitlines():
        if line.startswith('RESULT '):
            result = json.loads(line[7:])
    rep = None
    for f in sorted(os.listdir(OUT)):
        path = os.path.join(OUT, f)
        if f.startswith(f'c-{name}-{tag}-'):
            if f.endswith('.json'):
                with open(path) as fh:
                    rep = json.load(fh)
            os.remove(path)  # keep $OUT small: the figures go to capture_cost.json
    if p.returncode != 0 or not result:
        sys.stderr.write(f'--- {name} {tag} exited {p.returncode}\n{p.stderr[-3000:]}\n')
        return None, rep
    return sum(result['step_s'][2:]), rep


def roles_of(rep):
    dev = ((rep or {}).get('devices') or [{}])[0]
    return dev.get('roles'), (rep or {}).get('stacks')


def workload(name):
    pairs, role_rows, stacks = [], None, None
    for i in range(PAIRS):
        order = [True, False] if i % 2 == 0 else [False, True]
        times = {}
        for roles in order:
            t, rep = run(name, f'{i}{"on" if roles else "off"}', roles)
            times[roles] = t
            if roles and rep and role_rows is None:
                role_rows, stacks = roles_of(rep)
        if times[True] and times[False]:
            pairs.append(dict(on=times[True], off=times[False], ratio=times[True] / times[False]))
    ratios = [p['ratio'] for p in pairs]
    out = dict(workload=name, pairs=pairs, steps=STEPS,
               median_ratio=statistics.median(ratios) if ratios else None,
               worst_ratio=max(ratios) if ratios else None, roles=role_rows, stacks=stacks)
    if ratios:
        print(f'{name}: {len(ratios)} pairs, step time roles on / off: median '
              f'{out["median_ratio"]:.4f}, worst {out["worst_ratio"]:.4f} '
              f'(on {statistics.median(p["on"] for p in pairs):.3f} s, '
              f'off {statistics.median(p["off"] for p in pairs):.3f} s over {STEPS - 2} steps)')
    else:
        print(f'{name}: no pair ran')
    if role_rows:
        print(f'  memory by role (known: {role_rows.get("known")}), at the peak / now, MiB:')
        for role, peak in role_rows['at_peak'].items():
            print(f'    {role:<12} {peak / 2**20:12.1f} / {role_rows["now"][role] / 2**20:.1f}')
    if stacks:
        print('  capture:', json.dumps(stacks))
    return out


def main():
    os.makedirs(OUT, exist_ok=True)
    t0 = time.time()
    results = [workload(name) for name in NAMES]
    with open(os.path.join(OUT, 'capture_cost.json'), 'w') as f:
        json.dump(dict(results=results, wall_s=time.time() - t0), f, indent=1)


if __name__ == '__main__':
    main()
