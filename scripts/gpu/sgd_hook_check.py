"""Runs on the GPU machine (scripts/gpu_stage.sh, then
OOMLENS_GPU_CHECK=sgd_hook_check.py sh .gpu/run.sh): a leak of the
backward's own tensors in a job whose optimizer keeps no state (session
44, held out from the removal of oom.c's gradients_being_made guard,
which kept such a leak from being told until it passed the weights).

The job: GPT-2 124M's shape (Hugging Face GPT2LMHeadModel, fp32,
sequence 512, batch 8), plain SGD (no momentum: no optimizer state), a
full backward hook on its 7th block appending the gradient flowing into
it (8 x 512 x 768 fp32, 12 MiB a step, made on the autograd thread) to a
list for a gradient-norm plot. Three plain steps without the hook give
the step's peak (max_memory_allocated); the job with the hook then runs
under `oomlens run --manage` on a cap of that peak, the context's
OOMLENS_SGD_CONTEXT_MIB (default 640) and 300 MiB more, until it runs
out: what it kept then (some 300 MiB) is less than the weights (475
MiB). Prints SGD_HOOK lines and writes $OUT/sgd_hook_check.json and the
run's trace, $OUT/trace-sgd_hook.trace (truth: leak).

The job runs from this file: python3 sgd_hook_check.py --job --steps N
[--keep]."""
import argparse, json, os, sys

import oomlens_run

HERE = os.path.abspath(__file__)
OUT = os.environ.get('OUT', '.')
BATCH = 8


def job(steps, keep):
    import torch
    import transformers as tf
    model = tf.GPT2LMHeadModel(tf.GPT2Config()).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    kept = []
    if keep:
        model.transformer.h[6].register_full_backward_hook(
            lambda mod, gin, gout: kept.append(gout[0]))
    done, error = 0, None
    try:
        for _ in range(steps):
            x = torch.randint(0, 50257, (BATCH, 512), device='cuda')
            model(input_ids=x, labels=x).loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            done += 1
        torch.cuda.synchronize()
    except RuntimeError as e:
        if not isinstance(e, torch.OutOfMemoryError) and 'out of memory' not in str(e):
            raise
        error = str(e).splitlines()[0][:200]
    print('RESULT ' + json.dumps(dict(steps=done, oom=error,
                                      peak=torch.cuda.max_memory_allocated())), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--job', action='store_true')
    ap.add_argument('--steps', type=int, default=3)
    ap.add_argument('--keep', action='store_true')
    a = ap.parse_args()
    if a.job:
        return job(a.steps, a.keep)
    import subprocess
    env = {k: v for k, v in os.environ.items() if k != 'LD_PRELOAD'}
    p = subprocess.run([sys.executable, HERE, '--job', '--steps', '3'], env=env,
                       capture_output=True, text=True, timeout=300)
    plain = oomlens_run.result_of(p.stdout)
    if not plain:
        sys.exit(f'no plain run: {p.stderr[-600:]}')
    context = int(os.environ.get('OOMLENS_SGD_CONTEXT_MIB', '640'))
    cap = f"{(plain['peak'] >> 20) + context + 300}M"
    print('SGD_HOOK plain ' + json.dumps(plain), flush=True)
    trace = os.path.join(OUT, 'trace-sgd_hook.trace')
    result, oom, p = oomlens_run.run([HERE, '--job', '--steps', '400', '--keep'], cap, BATCH,
                                     'sgd-hook-', trace=trace)
    warned = 'leak warning' in p.stderr
    row = dict(cap=cap, plain_peak_mib=plain['peak'] >> 20, steps=(result or {}).get('steps'),
               oom_class=(oom or {}).get('class'),
               growing_site=(oom or {}).get('growing_site'),
               stderr_leak_lines=[l for l in p.stderr.splitlines() if 'leak' in l][:4])
    print('SGD_HOOK ' + json.dumps(row), flush=True)
    with open(os.path.join(OUT, 'sgd_hook_check.json'), 'w') as fh:
        json.dump(dict(row, warned=warned), fh, indent=1)


if __name__ == '__main__':
    main()
