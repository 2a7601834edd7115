"""Runs on the GPU machine (OOMLENS_GPU_CHECK=stacks_check.py sh
.gpu/run.sh): GPT-2 training under `oomlens run --manage` with call sites
off and on (OOMLENS_STACKS=1: native stacks and Python frames), runs
alternated off/on/off/on; the step time ratio, the report's note on Python
frames, and the top call sites at the peak, which should name workloads.py's
lines. Then one run with OOMLENS_TRACE: the trace replayed offline must
reach the report's peak, and it exports to PyTorch's memory_viz pickle.
Writes stacks.json into $OUT."""
import json, os, statistics, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
CLI = os.path.join(HERE, 'oomlens')
WORKLOADS = os.path.join(HERE, 'workloads.py')
OUT = os.environ.get('OUT', '/tmp/oomlens-out')
WORKLOAD = os.environ.get('OOMLENS_STACKS_WORKLOAD', 'gpt2')


def run(tag, env_extra):
    env = dict(os.environ)
    env.pop('LD_PRELOAD', None)
    env.update(env_extra)
    report = os.path.join(OUT, f's-{tag}-%p.txt')
    cmd = [CLI, 'run', '--manage', '--report', report, '--', sys.executable, WORKLOADS, WORKLOAD,
           '--steps', '10']
    t0 = time.time()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    result = None
    for line in p.stdout.splitlines():
        if line.startswith('RESULT '):
            result = json.loads(line[7:])
    rep = None
    for name in sorted(os.listdir(OUT)):
        if name.startswith(f's-{tag}-') and name.endswith('.json'):
            with open(os.path.join(OUT, name)) as f:
                rep = json.load(f)
    if p.returncode != 0 or not result:
        sys.stderr.write(f'--- {tag} exited {p.returncode}\n{p.stderr[-3000:]}\n')
    return dict(result=result, report=rep, wall=time.time() - t0)


def steady(r):
    return statistics.median(r['result']['step_s'][2:])


def main():
    os.makedirs(OUT, exist_ok=True)
    runs = {'off': [], 'on': []}
    for i in range(int(os.environ.get('OOMLENS_STACKS_ROUNDS', '2'))):
        runs['off'].append(run(f'off{i}', {'OOMLENS_STACKS': '0'}))
        runs['on'].append(run(f'on{i}', {'OOMLENS_STACKS': '1'}))
    steps = {k: [s for r in v if r['result'] for s in r['result']['step_s'][2:]] for k, v in runs.items()}
    out = dict(step_off=statistics.median(steps['off']), step_on=statistics.median(steps['on']))
    out['ratio'] = out['step_on'] / out['step_off']
    rep = runs['on'][-1]['report'] or {}
    out['stacks'] = rep.get('stacks')
    dev = (rep.get('devices') or [{}])[0]
    out['peak_allocated'] = dev.get('stats', {}).get('allocated_bytes', {}).get('all', {}).get('peak')
    out['top_at_peak'] = [dict(bytes=s['bytes'], frames=s['frames'][:5])
                          for s in dev.get('sites', {}).get('at_peak', [])[:8]]
    print(f"{WORKLOAD} --manage step s, stacks off {out['step_off']:.4f}, on {out['step_on']:.4f}, "
          f"ratio {out['ratio']:.4f}")
    print('stacks:', json.dumps(out['stacks']))
    for s in out['top_at_peak']:
        print(f"  {s['bytes']:>12}  {' < '.join(s['frames'])[:300]}")
    trace = os.path.join(OUT, 'gpt2.trace')
    t = run('trace', {'OOMLENS_STACKS': '1', 'OOMLENS_TRACE': trace})
    if t['result'] and os.path.exists(trace):
        rp = subprocess.run([CLI, 'replay', trace, '--json'], capture_output=True, text=True)
        replay = json.loads(rp.stdout) if rp.returncode == 0 else dict(error=rp.stderr[-500:])
        viz = os.path.join(OUT, 'gpt2.pickle')
        ex = subprocess.run([CLI, 'export', trace, '--format', 'memory-viz', '-o', viz],
                            capture_output=True, text=True)
        tdev = t['report']['devices'][0]
        out['trace'] = dict(step=statistics.median(t['result']['step_s'][2:]),
                            bytes=os.path.getsize(trace),
                            report_peak=tdev['stats']['allocated_bytes']['all']['peak'],
                            replay_peak=replay.get('peak_allocated'), replay_error=replay.get('error'),
                            export_rc=ex.returncode, export_err=ex.stderr[-300:],
                            pickle_bytes=os.path.getsize(viz) if os.path.exists(viz) else None)
        print('trace:', json.dumps(out['trace']))
        os.remove(trace)
        if os.path.exists(viz):
            os.remove(viz)
    with open(os.path.join(OUT, 'stacks.json'), 'w') as f:
        json.dump(out, f, indent=1)


if __name__ == '__main__':
    main()
