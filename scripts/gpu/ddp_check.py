"""Runs on the GPU machine (scripts/gpu_stage.sh, then
OOMLENS_GPU_CHECK=ddp_check.py sh .gpu/run.sh): a torchrun job of two
ranks (ddp_job.py, DistributedDataParallel) under `oomlens run --report
'mem-rank%r-%p.txt'`. With two GPUs each rank has its own and the backend
is NCCL; with one, both ranks share it and the backend is gloo (NCCL
refuses two ranks on one device), which this prints.

Scenarios, each a folder of per-rank reports under $OUT/ddp/:
  observe     observe mode: each rank's report peak against PyTorch's own
              (observe mode sees PyTorch's segments: max_memory_reserved),
              and what the device held outside the allocator
  manage      --manage: each rank's peak against the observe run's tensors
              (max_memory_allocated)
  pairs       alternated runs without oomlens and under --manage: step time
              per rank (median after warm-up) and the losses, identical?
  imbalance   rank 1 reads 4096-token sequences, rank 0 256, under
              --capacity: `oomlens merge` must name rank 1 as the first to
              run out, with the time lead and the imbalance of peaks
  checkpoint  rank 0 gathers a full copy of the model and optimizer state
              after step 3's backward: its peak above rank 1's, with the
              call site (save_checkpoint) at its peak
Writes $OUT/ddp.json and $OUT/ddp.tar.gz (every report and the merges).
OOMLENS_DDP_PAIRS=N sets the alternated pairs (default 2); OOMLENS_DDP_ONLY=pairs
runs the pairs alone (with each --manage rank's barriers, stream questions,
fence waits and synchronisations: NCCL's streams work on their own)."""
import json, os, statistics, subprocess, sys, tarfile

HERE = os.path.dirname(os.path.abspath(__file__))
CLI = os.path.join(HERE, 'oomlens')
JOB = os.path.join(HERE, 'ddp_job.py')
OUT = os.environ.get('OUT', '.')
ROOT = os.path.join(OUT, 'ddp')
PAIRS = int(os.environ.get('OOMLENS_DDP_PAIRS', '2'))


def torchrun(job_args):
    return [sys.executable, '-m', 'torch.distributed.run', '--standalone', '--nproc_per_node', '2',
            JOB] + job_args


def run(name, oomlens_args, job_args, timeout=300):
    """One job; oomlens_args None: without oomlens. Returns (results by
    rank, reports by rank, stderr)."""
    folder = os.path.join(ROOT, name)
    os.makedirs(folder, exist_ok=True)
    cmd = torchrun(job_args)
    if oomlens_args is not None:
        cmd = [CLI, 'run', '--report', os.path.join(folder, 'mem-rank%r-%p.txt')] + oomlens_args + \
              ['--'] + cmd
    env = dict(os.environ)
    env.pop('LD_PRELOAD', None)
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    results = {}
    for line in p.stdout.splitlines():
        if line.startswith('RESULT '):
            r = json.loads(line[7:])
            results[r['rank']] = r
    reports = {}
    for f in sorted(os.listdir(folder)):
        if f.endswith('.json') and f.startswith('mem-rank'):
            with open(os.path.join(folder, f)) as fh:
                rep = json.load(fh)
            if any(peak(d) > 0 for d in rep.get('devices', [])):  # not torchrun's own process
                reports[int(rep.get('rank') or 0)] = dict(rep, file=f)
    with open(os.path.join(folder, 'stderr.txt'), 'w') as fh:
        fh.write(p.stderr)
    return results, reports, p


def peak(dev, field='allocated_bytes'):
    return dev.get('stats', {}).get(field, {}).get('all', {}).get('peak', 0)


def device_of(rep):
    return max(rep['devices'], key=peak)


def held_outside(dev):
    """What the device held beyond this process's reserve at its last
    memory query: the context, libraries, NCCL, the other rank."""
    mi = dev.get('mem_info', {})
    if not mi.get('total'):
        return None
    return mi['total'] - mi['free'] - dev['stats']['reserved_bytes']['all']['current']


def per_rank(results, reports, theirs):
    rows = []
    for rank in sorted(set(results) | set(reports)):
        res, rep = results.get(rank, {}), reports.get(rank)
        dev = device_of(rep) if rep else {}
        rows.append(dict(rank=rank, backend=res.get('backend'), ours=peak(dev) if rep else None,
                         theirs=res.get(theirs), origins=dev.get('origins'),
                         outside=held_outside(dev) if rep else None, report=rep and rep['file'],
                         oom_class=(dev.get('oom') or {}).get('class') if rep else None,
                         steps=res.get('steps_done'), oom=res.get('oom')))
    return rows


def stream_calls(dev):
    """How manage mode's frees came back beside NCCL's streams: barriers
    (the streams taken as idle), rounds of questions, fences waited on."""
    calls = dev.get('calls', {})
    return {k: calls.get(k) for k in ('stream_barriers', 'stream_queries', 'fence_waits',
                                      'device_syncs')}


def steady(times):
    return statistics.median(times[2:]) if len(times) > 2 else None


def pairs():
    out = []
    for i in range(PAIRS):
        order = [('native', None), ('manage', ['--manage'])]
        if i % 2:
            order.reverse()
        got, calls = {}, {}
        for name, args in order:
            results, reports, _ = run(f'pair{i}-{name}', args, ['--steps', '10'])
            got[name] = results
            if name == 'manage':
                calls = {r: stream_calls(device_of(rep)) for r, rep in reports.items()}
        row = dict(pair=i, order=[o[0] for o in order])
        for rank in sorted(got['native']):
            n, m = got['native'][rank], got['manage'].get(rank, {})
            sn, sm = steady(n['times']), steady(m.get('times', []))
            row[f'rank{rank}'] = dict(native_s=sn, manage_s=sm,
                                      ratio=sm / sn if sn and sm else None,
                                      losses_identical=n['losses'] == m.get('losses'),
                                      calls=calls.get(rank))
        out.append(row)
        print('PAIR', json.dumps(row), flush=True)
    return out


def merge(name):
    folder = os.path.join(ROOT, name)
    files = [os.path.join(folder, f) for f in sorted(os.listdir(folder))
             if f.startswith('mem-rank') and f.endswith('.json')]
    text = subprocess.run([CLI, 'merge'] + files, capture_output=True, text=True)
    js = subprocess.run([CLI, 'merge', '--json'] + files, capture_output=True, text=True)
    with open(os.path.join(folder, 'merge.txt'), 'w') as fh:
        fh.write(text.stdout + text.stderr)
    try:
        return text.stdout + text.stderr, json.loads(js.stdout)
    except ValueError:
        return text.stdout + text.stderr, None


def at_peak_names(dev):
    return [' < '.join(f for f in s.get('frames', [])) for s in dev.get('sites', {}).get('at_peak', [])]


def main():
    summary = {}
    if os.environ.get('OOMLENS_DDP_ONLY') == 'pairs':  # the step times alone, in a short call
        summary['pairs'] = pairs()
        with open(os.path.join(OUT, 'ddp.json'), 'w') as fh:
            json.dump(summary, fh, indent=1)
        return
    results, reports, p = run('observe', [], ['--steps', '6'])
    summary['observe'] = per_rank(results, reports, 'max_reserved')
    tensors = {r: results[r]['max_allocated'] for r in results}
    print('OBSERVE', json.dumps(summary['observe']), flush=True)
    results, reports, p = run('manage', ['--manage'], ['--steps', '6'])
    rows = per_rank(results, reports, 'max_allocated')
    for row in rows:
        row['theirs'] = tensors.get(row['rank'])  # PyTorch keeps no statistics under --manage
    summary['manage'] = rows
    print('MANAGE', json.dumps(rows), flush=True)
    summary['pairs'] = pairs()
    results, reports, p = run('imbalance', ['--manage', '--capacity', '6G'],
                              ['--steps', '6', '--long-rank', '1', '--long-seq', '4096'])
    text, js = merge('imbalance')
    summary['imbalance'] = dict(ranks=per_rank(results, reports, 'max_allocated'), merge=js,
                                merge_text=text, rc=p.returncode)
    print('IMBALANCE', text, json.dumps(summary['imbalance']['ranks']), flush=True)
    results, reports, p = run('checkpoint', ['--manage'],
                              ['--steps', '6', '--checkpoint-at', '3'])
    text, js = merge('checkpoint')
    sites = {r: at_peak_names(device_of(rep))[:5] for r, rep in reports.items()}
    summary['checkpoint'] = dict(ranks=per_rank(results, reports, 'max_allocated'), merge=js,
                                 merge_text=text, at_peak=sites,
                                 checkpoint_at_rank0_peak=any('save_checkpoint' in s
                                                              for s in sites.get(0, [])))
    print('CHECKPOINT', text, json.dumps(sites), flush=True)
    with open(os.path.join(OUT, 'ddp.json'), 'w') as fh:
        json.dump(summary, fh, indent=1)
    with tarfile.open(os.path.join(OUT, 'ddp.tar.gz'), 'w:gz') as tar:
        tar.add(ROOT, arcname='ddp')
    subprocess.run(['rm', '-rf', ROOT])


if __name__ == '__main__':
    main()
