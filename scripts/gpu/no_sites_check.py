"""Runs on the GPU machine (scripts/gpu_stage.sh, then
OOMLENS_GPU_CHECK=no_sites_check.py sh .gpu/run.sh): jobs of oom_cases.py
live under `oomlens run --manage --capacity CAP --batch B`, once with call
sites (the default) and once without (OOMLENS_ROLES=0: a job whose frames
are not read), to check that a job without call sites is told no class
its truth does not allow (docs/diagnosis.md, "Without call sites").

Per run: the class, iterations found, oom.step_repeat_held (-1: no step's
repeat by sizes) and the steps done. The run with call sites records its
trace; all of them go into $OUT/no_sites_traces.tar.gz (for `oomlens
replay --no-sites` here, and the corpus). Prints one NO_SITES line a run
and writes $OUT/no_sites_check.md.

OOMLENS_NS_CASES=name:cap:batch:steps:truth,... picks the jobs (default:
session 38's held-out set)."""
import json, os, tarfile

import oomlens_run

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, 'oom_cases.py')
OUT = os.environ.get('OUT', '.')
DEFAULT = ('bert_loss_leak:8G:8:8:leak,convnext_loss_leak:10G:32:8:leak,'
           'convnext_sgd_batch:10G:256:2:activations')


def run(name, cap, batch, steps, sites):
    tag = f'{name}-{"sites" if sites else "nosites"}'
    trace = os.path.join(OUT, f'{name}.trace') if sites else None
    result, oom, p = oomlens_run.run([JOB, name, '--batch', str(batch), '--steps', str(steps)],
                                     cap, batch, f'ns-{tag}-', trace=trace, sites=sites,
                                     timeout=400)
    row = dict(job=name, cap=cap, batch=batch, sites=sites,
               steps_done=result.get('steps_done') if result else None,
               oom_class=oom.get('class') if oom else None,
               iterations=oom.get('iterations') if oom else None,
               step_repeat_held=oom.get('step_repeat_held') if oom else None,
               stderr_tail='' if oom else p.stderr[-600:])
    print('NO_SITES ' + json.dumps(row), flush=True)
    return row


def main():
    rows, traces = [], []
    for spec in os.environ.get('OOMLENS_NS_CASES', DEFAULT).split(','):
        name, cap, batch, steps, truth = spec.split(':')
        for sites in (True, False):
            row = run(name, cap, int(batch), int(steps), sites)
            row['truth'] = truth
            rows.append(row)
        traces.append(os.path.join(OUT, f'{name}.trace'))
    with tarfile.open(os.path.join(OUT, 'no_sites_traces.tar.gz'), 'w:gz') as tar:
        for t in traces:
            if os.path.exists(t):
                tar.add(t, arcname=os.path.basename(t))
                os.remove(t)
    lines = ['| job, cap, batch | truth | call sites | class | iterations | step_repeat_held '
             '| steps done |', '| --- | --- | --- | --- | --- | --- | --- |']
    for r in rows:
        held = r['step_repeat_held']
        held = f'{held / 2**30:.2f} GiB' if isinstance(held, int) and held >= 0 else held
        lines.append(f"| {r['job']}, {r['cap']}, {r['batch']} | {r['truth']} | "
                     f"{'yes' if r['sites'] else 'no'} | {r['oom_class']} | {r['iterations']} | "
                     f"{held} | {r['steps_done']} |")
    with open(os.path.join(OUT, 'no_sites_check.md'), 'w') as fh:
        fh.write('\n'.join(lines) + '\n')
    print('\n'.join(lines))


if __name__ == '__main__':
    main()
