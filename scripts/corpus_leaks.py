#!/usr/bin/env python3
"""Leaks the corpus's jobs never had: each job of tests/data/oom that fitted
(truth `none`) is given one, and replayed where it runs out of it.

A call site that allocates once a step (the fewest times of those that
recur at least 8 times and free what they make, blocks of 1 MiB or more:
a loss, logits, an input) keeps blocks it makes (its free dropped, its
address made its own), as a list of losses with their graphs or of
logits would: every k-th from the 4th on (k = 1 and 4, its largest such
site and a middle one), and, at its largest site, each from the 20th on
(a leak that begins late) and three in ten at random from the 4th on (a
leak the data decides, seeded). The cap is what the job fits in (its peak plus 5%) or, where
the leak would not run it out within the trace, its peak plus half of
what the leak keeps in all. The truth is `leak` where the job runs out;
what the diagnosis says is printed beside it, with the iterations found.
A job that runs out before iterations are found (a short trial trace)
has not shown a leak yet: `activations` there is what can be seen.

With --midway the cap is halfway between the job's peak and the peak of
its leaky trace replayed without a cap, so every leak runs the job out
halfway through what it keeps (most of the leaks above never run out:
the job's first-step peak stands above what the leak adds to its low
points); a leak that raises the peak by less than a tenth is counted as
`too small` and not replayed.

With --once each leak keeps one block only, its site's 10th (a tensor
kept once for a metric or a cache, never freed; the 10th, so that the
iterations are found before it), capped midway as above: the job runs
out in the step that kept it (its backward, where the steps before had
freed the block), read against the step before at the same point
(docs/diagnosis.md, "On smaller devices", sessions 27 and 28).

With --varlen the traces are the recorded 30-step jobs of varying
lengths (tests/data/steps30: llama_varlen, gpt2_varlen) instead: one
block of their three largest sites made once a step is kept, at the
8th, 12th, 16th, 19th, 24th or 27th step, capped midway as above where
it raises the peak at all: the job runs out in the step that kept it or
at a later, longer one (docs/diagnosis.md, "Kept in a step of other
sizes" and "Kept in an earlier step of a job whose input varies",
session 29).

With --expect FILE the output is compared with FILE (the meson tests
corpus_leaks_*, whose files are tests/data/oom/leaks_*.txt): any
difference, better or worse, fails, and the file is to be rewritten with
the change that made it.

usage: corpus_leaks.py [--midway | --once | --varlen] [--expect FILE] [OOMLENS]
(docs/measurements.md, "Leaks the corpus never had")."""
import collections
import difflib
import gzip
import json
import lzma
import os
import random
import subprocess
import sys
import tempfile

UNITS = {'K': 1 << 10, 'M': 1 << 20, 'G': 1 << 30, 'T': 1 << 40}


def replay(oomlens, trace, capacity=None, batch=None):
    cmd = [oomlens, 'replay', trace, '--json']
    if capacity:
        cmd += ['--capacity', str(capacity)]
    if batch:
        cmd += ['--batch', str(batch)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: exit {done.returncode}: {done.stderr.strip()}")
    return json.loads(done.stdout)


def sites_made(lines):
    """Per site of the trace: its allocations, their median size, and
    whether it freed any."""
    count, sizes, freed, live = collections.Counter(), collections.defaultdict(list), set(), {}
    for line in lines:
        if not line[0].isdigit():
            continue
        f = line.split(',')
        if f[1] == 'alloc' and f[5]:
            count[f[5]] += 1
            sizes[f[5]].append(int(f[3]))
            live[f[2]] = f[5]
        elif f[1] == 'free_completed' and f[2] in live:
            freed.add(live.pop(f[2]))
    median = {s: sorted(v)[len(v) // 2] for s, v in sizes.items()}
    return count, median, freed


def once_a_step_sites(lines):
    """(median size, site) of the sites made once a step, largest first."""
    count, median, freed = sites_made(lines)
    recurring = [s for s in count if count[s] >= 8 and s in freed]
    if not recurring:
        return []
    steps = min(count[s] for s in recurring)
    sites = [(median[s], s) for s in recurring if count[s] == steps]
    return sorted((c for c in sites if c[0] >= 1 << 20), reverse=True)


def with_leak(lines, site, keep):
    """The trace with the n-th block of site kept where keep(n)."""
    out, made, kept, fresh, blocks = [], 0, set(), 0xdead00000000, 0
    for line in lines:
        if line[0].isdigit():
            f = line.split(',')
            if f[1] == 'alloc' and f[5] == site:
                made += 1
                if keep(made):
                    blocks += 1
                    fresh += 1 << 24
                    kept.add(f[2])
                    f[2] = hex(fresh)
                    line = ','.join(f)
            elif f[1] in ('free_requested', 'free_completed') and f[2] in kept:
                if f[1] == 'free_completed':
                    kept.discard(f[2])
                continue
        out.append(line)
    return out, blocks


def step_sites(lines, most=3):
    """(median size, site) of the largest sites of 1 MiB or more made as
    many times as the largest one made 8 times or more (a loss, logits:
    once a step), largest first."""
    count, median, _ = sites_made(lines)
    large = {s: size for s, size in median.items() if size >= 1 << 20 and count[s] >= 8}
    if not large:
        return []
    steps = count[max(large, key=lambda s: (large[s], s))]
    return sorted(((size, s) for s, size in large.items() if count[s] == steps), reverse=True)[:most]


def varlen_leaks(oomlens, root, leaky, table, rows):
    """--varlen: one block kept at one step of the recorded varying-length jobs."""
    folder = os.path.join(root, 'tests/data/steps30')
    for name in sorted(os.listdir(folder)):
        trace = os.path.join(folder, name)
        with gzip.open(trace, 'rt') as f:
            lines = f.readlines()
        peak = replay(oomlens, trace)['peak_allocated']
        for size, site in step_sites(lines):
            for step in (8, 12, 16, 19, 24, 27):
                out, blocks = with_leak(lines, site, lambda n, k=step: n == k)
                if blocks < 1:
                    continue
                with gzip.open(leaky, 'wt', compresslevel=1) as f:
                    f.writelines(out)
                leaky_peak = replay(oomlens, leaky)['peak_allocated']
                if leaky_peak <= peak:
                    table['peak not raised'] += 1
                    continue
                oom = replay(oomlens, leaky, (peak + leaky_peak) // 2).get('oom')
                got = oom['class'] if oom else 'none'
                table[got] += 1
                if oom:
                    grower = oom['diagnosis'].get('growing_site') or {}
                    how = ('by calls' if oom['diagnosis'].get('since_last_by_calls') and
                           grower.get('since_last_iteration') else
                           'per step' if grower.get('per_step') else '')
                    rows.append(f"{name.split('.')[0]} site {site} ({size >> 20} MiB) kept at "
                                f"step {step}, {(leaky_peak - peak) >> 20} MiB more at the peak: "
                                f"{got}{', ' + how if how and got == 'leak' else ''}")


def patterns(sites, once=False):
    """(name, site, size, keep) of each leak given."""
    if once:
        for which, (size, site) in (('largest', sites[0]), ('middle', sites[len(sites) // 2])):
            yield f'{which} site ({size >> 20} MiB), its 10th only', site, size, lambda n: n == 10
        return
    draws = random.Random(7)
    coin = collections.defaultdict(lambda: draws.random() < 0.3)
    largest, middle = sites[0], sites[len(sites) // 2]
    for which, (size, site) in (('largest', largest), ('middle', middle)):
        for every in (1, 4):
            yield (f'{which} site ({size >> 20} MiB), every {every}', site, size,
                   lambda n, k=every: n >= 4 and n % k == 0)
    size, site = largest
    yield f'largest site ({size >> 20} MiB), from the 20th', site, size, lambda n: n >= 20
    yield (f'largest site ({size >> 20} MiB), 3 in 10 at random', site, size,
           lambda n: n >= 4 and coin[n])


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
    args = sys.argv[1:]
    expect = None
    if '--expect' in args:
        at = args.index('--expect')
        if at + 1 >= len(args):
            sys.exit('corpus_leaks.py: --expect wants a file')
        expect = args[at + 1]
        del args[at:at + 2]
    once = '--once' in args
    midway = '--midway' in args or once
    varlen = '--varlen' in args
    args = [a for a in args if a not in ('--midway', '--once', '--varlen')]
    oomlens = args[0] if args else os.path.join(root, 'build/tools/oomlens')
    data = os.path.join(root, 'tests/data/oom')
    with open(os.path.join(data, 'manifest.json'), encoding='utf-8') as f:
        manifest = json.load(f)
    table, rows = collections.Counter(), []
    with tempfile.TemporaryDirectory(prefix='oomlens-leaks-') as tmp:
        leaky = os.path.join(tmp, 'trace.gz')
        if varlen:
            varlen_leaks(oomlens, root, leaky, table, rows)
            manifest = []
        for entry in manifest:
            if entry['truth'] != 'none':
                continue
            trace = os.path.join(data, entry['trace'])
            with lzma.open(trace, 'rt') as f:
                lines = f.readlines()
            sites = once_a_step_sites(lines)
            if not sites:
                continue
            peak = replay(oomlens, trace)['peak_allocated']
            cap_given = int(float(entry['cap'][:-1]) * UNITS[entry['cap'][-1]])
            for name, site, size, keep in patterns(sites, once):
                out, blocks = with_leak(lines, site, keep)
                if blocks < (1 if once else 2):
                    continue
                with gzip.open(leaky, 'wt', compresslevel=1) as f:
                    f.writelines(out)
                if midway:
                    leaky_peak = replay(oomlens, leaky)['peak_allocated']
                    if leaky_peak < peak * 1.1:
                        table['too small'] += 1
                        continue
                    cap = (peak + leaky_peak) // 2
                else:
                    cap = max(int(peak * 1.05), min(cap_given, peak + size * blocks // 2))
                oom = replay(oomlens, leaky, cap, entry.get('batch')).get('oom')
                got = oom['class'] if oom else 'none'
                table[got] += 1
                if oom:
                    rows.append(f"{entry['name']} {name}: {got}, "
                                f"{oom['diagnosis']['iterations']} iterations found, "
                                f"cap {cap >> 20} MiB")
    given = "the recorded varying-length jobs" if varlen else "the corpus's fitted jobs"
    text = [f"leaks given to {given}: {sum(table.values())}; ran out: "
            f"{sum(n for c, n in table.items() if c not in ('none', 'too small', 'peak not raised'))}"]
    text += [f'  {cls}: {n}' for cls, n in sorted(table.items())]
    text += ['  ' + line for line in rows]
    print('\n'.join(text))
    if expect:
        with open(expect, encoding='utf-8') as f:
            wanted = f.read().splitlines()
        if wanted != text:
            diff = difflib.unified_diff(wanted, text, expect, 'now', lineterm='')
            sys.exit('corpus_leaks.py: not as ' + expect + ':\n' + '\n'.join(diff))


if __name__ == '__main__':
    main()
