"""One job of the GPU checks run under `oomlens run --manage` (shared by
first_step_check.py, second_step_check.py and no_sites_check.py): the
job's RESULT line and the oom of the report it left, which is removed
from $OUT once read."""
import json, os, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
CLI = os.path.join(HERE, 'oomlens')
OUT = os.environ.get('OUT', '.')


def result_of(stdout):
    """The job's last RESULT line's JSON, or None."""
    result = None
    for line in stdout.splitlines():
        if line.startswith('RESULT '):
            result = json.loads(line[7:])
    return result


def oom_of_reports(stem):
    """The last oom of the reports in $OUT whose names begin with stem
    (None: no OOM), the reports removed."""
    oom = None
    for f in sorted(os.listdir(OUT)):
        if f.startswith(stem):
            if f.endswith('.json'):
                with open(os.path.join(OUT, f)) as fh:
                    for dev in json.load(fh).get('devices', []):
                        oom = dev.get('oom') or oom
            os.remove(os.path.join(OUT, f))
    return oom


def run(job_argv, cap, batch, stem, trace=None, sites=True, timeout=300):
    """Runs `python job_argv...` under `oomlens run --manage --capacity cap
    --batch batch`, its report at $OUT/stem*, its trace at trace (None:
    none), without call sites where sites is False (OOMLENS_ROLES=0).
    Returns (the job's RESULT, the report's oom, the finished process)."""
    cmd = [CLI, 'run', '--manage', '--capacity', cap, '--batch', str(batch), '--report',
           os.path.join(OUT, f'{stem}%p.txt')]
    if trace:
        cmd += ['--trace', trace]
    cmd += ['--', sys.executable, *job_argv]
    env = dict(os.environ)
    env.pop('LD_PRELOAD', None)
    if not sites:
        env['OOMLENS_ROLES'] = '0'
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    return result_of(p.stdout), oom_of_reports(stem), p
