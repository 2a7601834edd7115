"""Runs on the GPU machine (scripts/gpu_stage.sh, then
OOMLENS_GPU_CHECK=second_step_check.py sh .gpu/run.sh): an OOM in a job's
second step, its first having fit (the first update made the optimizer's
state: Adam's moments), on jobs the rule was not built on, its batch
figure against the truth found by bisection (docs/diagnosis.md, "Out at
the second step").

Per job (first_step_check.py's models and loop, each at one batch):
1. one plain run of two steps (no oomlens) for each step's peak as PyTorch
   counts it (max_memory_allocated);
2. the cap set halfway between the two peaks, and the job run under
   `oomlens run --manage --capacity CAP --batch B` for two steps, the cap
   bisected (up to a GiB above the second peak, four tries) until the
   first step fits and the second runs out;
3. that run again without call sites (OOMLENS_ROLES=0);
4. the largest batch whose two steps fit under that cap, searched from
   the figure out (its neighbour first, then halves).
Prints one SECOND_STEP line a job and writes $OUT/second_step_check.json,
$OUT/second_step_check.md (the table for docs/measurements.md) and the
traces of the runs with call sites in $OUT/second_step_traces.tar.gz.

OOMLENS_SS_JOBS=name:batch,... picks the jobs (default: JOBS below);
OOMLENS_FS_BUDGET_S (default 540) is the whole script's time."""
import json, os, subprocess, sys, tarfile, time

import first_step_check as fs

# name, batch: families, shapes and optimizers the rule was not built on
# (it was built on gpt2_batch at batch 4, session 39). Chosen before any ran.
JOBS = [('llama_small', 8), ('vit_base', 64), ('bert_large_mlm', 64),
        ('mistral_small_bf16', 16), ('gpt2_medium', 8), ('pythia_160m', 8)]
# session 41, listed before they ran: convolutional networks (layers that
# differ, a second step never tried on one) under AdamW, whose moments are
# what the second step adds: resnet50_adam:64, convnext_tiny_adam:48
# session 42, listed before they ran: CNNs whose first step's classifier
# makes cuBLAS's workspaces (recent.c beside_by_alignment):
# resnet101_adam:48, densenet121_adam:32, efficientnet_b0_adam:64,
# mobilenet_v3_adam:96; and two leaks out at their second step (an
# evaluation's output kept with its graph): resnet50_eval_kept:64,
# convnext_tiny_eval_kept:48; then (after recent.c rose_and_fell, built
# on those two) four more, held out: resnet101_eval_kept:48,
# densenet121_eval_kept:32, efficientnet_b0_eval_kept:64,
# mobilenet_v3_eval_kept:96; and three CNNs that fit their first step,
# held out from rose_and_fell: vgg16_adam:32, regnet_adam:64,
# wide_resnet_adam:32; last, the three families first_step_check ran
# this session, now at their second step: bloom_560m:2, falcon_small:4,
# opt_350m:4
# session 43, listed before they ran, held out from what a second step's
# need does not shrink (recent.c ol_recent_rest_fixed, built on vgg16_adam
# and resnet101_adam's traces): vgg19_adam:32, alexnet_adam:512,
# resnext50_adam:48, swin_t_adam:64, vit_b16_adam:64; and session 42's
# bloom_560m:2, not run then
# session 44, listed before they ran: CNNs under SGD with momentum, whose
# first update makes the momentum and nothing else (recent.c
# ol_recent_rest_fixed reads the gradients up to that update's first
# allocation): vgg16_sgd:32, resnet50_sgd:64, swin_t_sgd:64, regnet_sgd:64;
# then jobs under gradient accumulation out in their second micro-step
# (the first's gradients held, no update yet; account.c
# iterations_are_layers was built on accelerate_accum_fits's trace):
# gpt2_medium_accum4:8, mistral_small_bf16_accum4:16, vit_b16_adam_accum4:64;
# then one under bf16 autocast, as accelerate_accum_fits ran:
# qwen_small_autocast_accum4:8
# session 45, listed before they ran: second steps under bf16 autocast,
# held out from what of a second step autocast's copies of the weights
# are (recent.c ol_recent_rest_copies, built on qwen_small_autocast_accum4
# at batches 8 and 7): qwen_small_autocast:8, gpt2_large_autocast:8,
# llama_small_amp:8 (NAME_amp: first_step_check's job under autocast);
# then pythia_160m_amp:8, gpt2_medium_amp:8, vit_b16_adam_amp:64,
# resnet50_adam_amp:64; then second steps under gradient checkpointing
# (NAME_ckpt: each layer's forward run again in its backward, a second
# step never tried so): gpt2_medium_ckpt:16, llama_small_amp_ckpt:16,
# pythia_160m_ckpt:16 (not run in session 45: no device to be had; the
# next session's to run, still held out)
TRIES = 4


def step_peaks(name, batch):
    """Each of two steps' peak in bytes, run plainly; None if it failed."""
    p = subprocess.run([sys.executable, fs.HERE, '--job', name, '--batch', str(batch),
                        '--steps', '2'], capture_output=True, text=True, timeout=300,
                       env={k: v for k, v in os.environ.items() if k != 'LD_PRELOAD'})
    for line in p.stdout.splitlines():
        if line.startswith('RESULT '):
            peaks = json.loads(line[7:]).get('peaks') or []
            return peaks if len(peaks) == 2 else None
    print(f'  {name}: no peaks ({p.stderr[-300:]})', flush=True)
    return None


def steps_done(p):
    for line in p.stdout.splitlines():
        if line.startswith('RESULT '):
            return json.loads(line[7:]).get('steps')
    print(f'  no RESULT: {p.stderr[-400:]}', flush=True)
    return None


def out_at_second_step(job, batch, peaks):
    """A cap (M) where the first step fits and the second runs out, with
    that run's report's oom, or None. Searched between the first step's
    peak and the second's and a GiB more (what oomlens's pool, cuBLAS's
    workspaces and rounding add beside PyTorch's count): halves of it,
    from the middle of the two peaks."""
    low, high = peaks[0], peaks[1] + (1 << 30)
    cap_bytes = (peaks[0] + peaks[1]) // 2
    for _ in range(TRIES):
        job['cap'] = f'{cap_bytes >> 20}M'
        _, oom, p = fs.under_oomlens(job, batch, 2, 'oom')
        done = steps_done(p)
        print(f'  {job["name"]} batch {batch} under {job["cap"]}: {done} steps, '
              f'{oom.get("class") if oom else "no OOM"}', flush=True)
        if done == 1 and oom:
            return oom
        if (done or 0) < 1:
            low = cap_bytes
        else:
            high = cap_bytes
        cap_bytes = (low + high) // 2
    return None


def without_sites(job, batch):
    _, oom, _ = fs.under_oomlens(job, batch, 2, 'nosites', sites=False)
    return oom


def two_steps_fit(job, batch):
    fitted, _, _ = fs.under_oomlens(job, batch, 2, 'bisect')
    print(f'  {job["name"]} batch {batch}: {"fits" if fitted else "out of memory"}', flush=True)
    return fitted


def truth_near(job, guess, batch, per_try):
    """The largest batch below the one that ran out whose two steps fit,
    searched from the figure (guess) out: the guess, its neighbour on the
    side it points to, then halves of what is left. Returns (fits, runs
    out, ended); not ended: the budget stopped it."""
    fit, out = 0, batch  # the batch that ran out, ran out
    probe, probes = min(max(guess or 1, 1), batch - 1), 0
    while out - fit > 1:
        if fs.left_s() < per_try:
            return fit, out, False
        if two_steps_fit(job, probe):
            fit = probe
        else:
            out = probe
        probes += 1
        nearest = fit + 1 if probe == fit else out - 1
        probe = nearest if probes == 1 else (fit + out) // 2
    return fit, out, True


def figure_of(oom):
    if not oom:
        return None
    return dict(cls=oom.get('class'), fits=oom.get('batch_fits'),
                headroom=oom.get('batch_fits_headroom'), at_most=oom.get('batch_fits_at_most'),
                estimate=oom.get('batch_figure_is_estimate'),
                step_rest=oom.get('step_rest'), iterations=oom.get('iterations'))


def check(name, batch):
    t0 = time.time()
    row = dict(job=name, batch=batch)
    peaks = step_peaks(name, batch)
    row['peaks_mib'] = [x >> 20 for x in peaks] if peaks else None
    job = dict(name=name, cap='')
    oom = out_at_second_step(job, batch, peaks) if peaks else None
    row['cap'] = job['cap'] if oom else None
    row['sites'] = figure_of(oom)
    if oom:
        row['no_sites'] = figure_of(without_sites(job, batch))
        per_try = max(60, (time.time() - t0) / 4)
        if name.endswith('_kept'):  # a leak: its truth is the class, no batch fits for good
            row['truth'] = 'leak'
        else:
            fit, out, ended = truth_near(job, row['sites']['fits'], batch, per_try)
            row['truth' if ended else 'bracket'] = fit if ended else [fit, out]
    row['seconds'] = round(time.time() - t0, 1)
    print('SECOND_STEP ' + json.dumps(row), flush=True)
    return row


def said(f):
    if not f:
        return 'no OOM at step 2'
    bound = 'at most ' if f['at_most'] is not None else ''
    return f"{f['cls']}: {bound}{f['fits']}, {f['headroom']} with headroom (step_rest {f['step_rest']})"


def table(rows):
    lines = ['| job, batch | step peaks (MiB) | cap | with call sites | without | truth |',
             '| --- | --- | --- | --- | --- | --- |']
    for r in rows:
        truth = r.get('truth', '')
        if 'bracket' in r:
            truth = f"in [{r['bracket'][0]}, {r['bracket'][1]}) (budget)"
        lines.append(f"| {r['job']}, {r['batch']} | {r['peaks_mib']} | {r['cap']} | "
                     f"{said(r['sites'])} | {said(r.get('no_sites'))} | {truth} |")
    return '\n'.join(lines) + '\n'


def keep_traces():
    names = [f for f in os.listdir(fs.OUT) if f.startswith('trace-') and f.endswith('.trace')]
    with tarfile.open(os.path.join(fs.OUT, 'second_step_traces.tar.gz'), 'w:gz') as tar:
        for f in names:
            tar.add(os.path.join(fs.OUT, f), arcname=f)
    for f in names:
        os.remove(os.path.join(fs.OUT, f))


def main():
    os.environ['OOMLENS_FS_TRACE'] = '1'  # the run with call sites keeps its trace
    wanted = os.environ.get('OOMLENS_SS_JOBS')
    jobs = [(w.split(':')[0], int(w.split(':')[1])) for w in wanted.split(',')] if wanted else JOBS
    rows = []
    for name, batch in jobs:
        if fs.left_s() < 120:
            print(f'skipped {name} and after: budget spent', flush=True)
            break
        rows.append(check(name, batch))
    keep_traces()
    with open(os.path.join(fs.OUT, 'second_step_check.json'), 'w') as fh:
        json.dump(rows, fh, indent=1)
    with open(os.path.join(fs.OUT, 'second_step_check.md'), 'w') as fh:
        fh.write(table(rows))
    print(table(rows))


if __name__ == '__main__':
    main()
