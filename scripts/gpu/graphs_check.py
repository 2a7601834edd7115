"""Runs on the GPU machine (scripts/gpu_stage.sh, then
OOMLENS_GPU_CHECK=graphs_check.py sh .gpu/run.sh): whether a job that
captures CUDA graphs (oom_cases.py compiled_graphs_fits: torch.compile
with mode="reduce-overhead") runs under `oomlens run --manage`, with and
without PyTorch's cudaMallocAsync backend, and under observe mode as the
control, and PyTorch's cudaMallocAsync backend without oomlens's pool
(GRAPHS_CHECK_ONLY=name,... runs those only). Prints, per configuration, the exit status, the job's RESULT
line (steps done, its error) and oomlens's capture line if any."""
import json, os, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
CLI = os.path.join(HERE, 'oomlens')
JOB = os.path.join(HERE, 'oom_cases.py')
STEPS = os.environ.get('GRAPHS_CHECK_STEPS', '8')
CONFIGS = [('observe', [], {}),
           ('manage', ['--manage'], {}),
           ('manage + cudaMallocAsync', ['--manage'],
            {'PYTORCH_CUDA_ALLOC_CONF': 'backend:cudaMallocAsync'}),
           ('observe + cudaMallocAsync', [],
            {'PYTORCH_CUDA_ALLOC_CONF': 'backend:cudaMallocAsync'})]
CONFIGS = [c for c in CONFIGS if not os.environ.get('GRAPHS_CHECK_ONLY') or
           c[0] in os.environ['GRAPHS_CHECK_ONLY'].split(',')]


def run(flags, extra_env):
    env = {k: v for k, v in os.environ.items() if k != 'LD_PRELOAD'}
    env.update(extra_env)
    cmd = [CLI, 'run', '--capacity', '8G', *flags, '--', sys.executable, JOB,
           'compiled_graphs_fits', '--batch', '64', '--steps', STEPS]
    t0 = time.time()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=400)
    result = next((json.loads(line[7:]) for line in p.stdout.splitlines()
                   if line.startswith('RESULT ')), None)
    capture = [line for line in p.stderr.splitlines() if 'capture' in line.lower()]
    error = [line for line in p.stderr.splitlines() if 'Error' in line][-1:]
    return dict(rc=p.returncode, seconds=round(time.time() - t0, 1), result=result,
                capture_lines=capture[:3], last_error=error)


def main():
    rows = []
    for name, flags, extra_env in CONFIGS:
        row = dict(config=name, **run(flags, extra_env))
        print(json.dumps(row), flush=True)
        rows.append(row)
    with open(os.path.join(os.environ.get('OUT', '.'), 'graphs.json'), 'w') as f:
        json.dump(rows, f, indent=1)


if __name__ == '__main__':
    main()
