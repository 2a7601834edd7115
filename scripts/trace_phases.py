#!/usr/bin/env python3
"""Per step of a trace: the most the blocks below a size hold at once (the
pool's main range), the most those at or above it hold (huge blocks,
OOMLENS_POOL_HUGE on branch `huge`) with what the others held then, and the memory the two
must hand each other in a step if they live in separate address ranges at
peak reserved = 1.0156 x peak allocated (the pool's trim slack).

usage: trace_phases.py TRACE.csv.gz SITE_THAT_STARTS_A_STEP [HUGE_MIB]
e.g.   trace_phases.py llama_varlen.csv.gz sparse.py:189:forward 256
(docs/measurements.md, "Huge blocks in their own range")."""
import gzip
import sys

GiB = 1 << 30


def main():
    path, step_site = sys.argv[1], sys.argv[2]
    huge_from = int(sys.argv[3] if len(sys.argv) > 3 else 256) << 20
    sites, live, steps = {}, {}, []
    main_now = huge_now = 0
    step = None
    for line in gzip.open(path, 'rt'):
        if line.startswith('site,'):
            fields = line.split(',', 3)
            sites[int(fields[2])] = fields[3]
            continue
        f = line.split(',')
        if len(f) < 4 or not f[0].isdigit():
            continue
        if f[1] == 'alloc':
            size = int(f[3])
            site = int(f[5]) if len(f) > 5 and f[5].strip().isdigit() else -1
            if step_site in sites.get(site, ''):
                step = {'total': 0, 'main': 0, 'huge': 0, 'main_then': 0}
                steps.append(step)
            live[f[2]] = size
        elif f[1] == 'free_completed':
            size = live.pop(f[2], None)
            if size is None:
                continue
            size = -size
        else:
            continue
        if abs(size) >= huge_from:
            huge_now += size
        else:
            main_now += size
        if step is not None:
            step['main'] = max(step['main'], main_now)
            if huge_now > step['huge']:
                step['huge'], step['main_then'] = huge_now, main_now
            step['total'] = max(step['total'], main_now + huge_now)
    peak = max(s['total'] for s in steps)
    print('step  total peak  main most  huge most (main then)  summed  to move (GiB)')
    for i, s in enumerate(steps):
        summed = s['main'] + s['huge']
        print('%4d  %10.2f  %9.2f  %9.2f (%9.2f)  %6.2f  %6.2f' % (
            i, s['total'] / GiB, s['main'] / GiB, s['huge'] / GiB, s['main_then'] / GiB,
            summed / GiB, max(0, summed - peak * 1.0156) / GiB))


if __name__ == '__main__':
    main()
