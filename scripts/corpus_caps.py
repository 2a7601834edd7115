#!/usr/bin/env python3
"""Replays every case of the OOM corpus (tests/data/oom/manifest.json) at
fractions of the cap it ran under, as on smaller devices, and prints how
each truth at its cap was classed there, then the cases whose class is
not one the truth allows on a smaller device (a job that fitted: its
state or its batch, or `leak` where the manifest says its kept memory
grows to a bound; test_corpus's a_smaller_device_keeps_the_cause checks
0.4-0.7 of the cap; this goes wider, for reading, not for passing).

With --no-sites it replays each case at its own cap as if it had no call
sites (`oomlens replay --no-sites`: a job without Python frames, not
CPython 3.10 to 3.13, OOMLENS_ROLES=0, a C++ job), as the diagnosis by
timing alone sees it, and prints the manifest's class beside what replay
says (test_corpus's without_call_sites_no_case_is_told_wrong checks the
same, the manifest's no_sites naming the known misses).

usage: corpus_caps.py [--no-sites] [OOMLENS] [FRACTIONS]
e.g.   corpus_caps.py build/tools/oomlens 0.4,0.5,0.6,0.7,0.8,0.9
(docs/diagnosis.md, "On smaller devices" and "Without call sites")."""
import collections
import json
import os
import subprocess
import sys

UNITS = {'K': 1 << 10, 'M': 1 << 20, 'G': 1 << 30, 'T': 1 << 40}
ALLOWED = {  # what a cause at the cap may be on a smaller device
    'persistent': {'persistent', 'undetermined', 'impossible'},
    'activations': {'activations', 'persistent', 'undetermined', 'impossible'},
    # a job that fitted: its state or its batch (`leak` where its kept
    # memory grows to a bound: the manifest's bounded_growth)
    'none': {'none', 'activations', 'persistent', 'undetermined', 'impossible'},
}


def cap_bytes(text):
    if text[-1] in UNITS:
        return int(float(text[:-1]) * UNITS[text[-1]])
    return int(text)


def replay_command(oomlens, trace, entry, capacity, no_sites=False):
    """`oomlens replay --json` of a case's trace as the corpus replays it:
    its batch and its replay policy, on a device of capacity bytes."""
    cmd = [oomlens, 'replay', trace, '--capacity', str(capacity), '--json']
    if no_sites:
        cmd.append('--no-sites')
    if entry.get('batch'):
        cmd += ['--batch', str(entry['batch'])]
    if entry.get('replay_policy', 'oomlens') != 'oomlens':
        cmd += ['--policy', entry['replay_policy']]
    return cmd


def replay(oomlens, trace, entry, capacity, recorded=False, no_sites=False):
    cmd = replay_command(oomlens, trace, entry, capacity, no_sites)
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: exit {done.returncode}: {done.stderr.strip()}")
    result = json.loads(done.stdout)
    oom = (recorded and result.get('recorded_oom')) or result.get('oom')
    return (oom['class'], oom['diagnosis'].get('iterations')) if oom else ('none', None)


def no_sites(oomlens, data, manifest):
    table, wrong = collections.Counter(), []
    for entry in manifest:
        got, _ = replay(oomlens, os.path.join(data, entry['trace']), entry,
                        cap_bytes(entry['cap']), recorded=True, no_sites=True)
        want = entry.get('replay') or entry['truth']
        table[(want, got)] += 1
        if got not in (want, 'undetermined'):
            known = ' (a known miss)' if entry.get('no_sites') == got else ''
            wrong.append(f"{entry['name']}: {got} (the manifest: {want}){known}")
    print(f"{len(manifest)} cases at their caps, call sites taken out")
    print('| the manifest | replay without call sites | cases |')
    print('| --- | --- | --- |')
    for (want, got), n in sorted(table.items()):
        print(f'| {want} | {got} | {n} |')
    print(f'wrong: {len(wrong)}')
    for line in wrong:
        print('  ' + line)


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
    args = sys.argv[1:]
    bare = '--no-sites' in args
    args = [a for a in args if a != '--no-sites']
    oomlens = args[0] if args else os.path.join(root, 'build/tools/oomlens')
    fractions = [float(f) for f in (args[1] if len(args) > 1
                                    else '0.4,0.5,0.6,0.7,0.8,0.9').split(',')]
    data = os.path.join(root, 'tests/data/oom')
    with open(os.path.join(data, 'manifest.json'), encoding='utf-8') as f:
        manifest = json.load(f)
    if bare:
        no_sites(oomlens, data, manifest)
        return
    table, odd = collections.Counter(), []
    for entry in manifest:
        trace = os.path.join(data, entry['trace'])
        for fraction in fractions:
            got, iterations = replay(oomlens, trace, entry,
                                     int(cap_bytes(entry['cap']) * fraction))
            table[(entry['truth'], got)] += 1
            allowed = ALLOWED.get(entry['truth'])
            if allowed and entry.get('bounded_growth'):
                allowed = allowed | {'leak'}
            if allowed and got not in allowed and got != 'none':
                odd.append(f"{entry['name']} at {fraction}: {got} (truth at its cap "
                           f"{entry['truth']}, {iterations} iterations)")
    print(f"{len(manifest)} cases at {', '.join(map(str, fractions))} of their caps")
    print('| truth at the cap | class on the smaller device | replays |')
    print('| --- | --- | --- |')
    for (truth, got), n in sorted(table.items()):
        print(f'| {truth} | {got} | {n} |')
    print('not allowed:' if odd else 'not allowed: none')
    for line in odd:
        print('  ' + line)


if __name__ == '__main__':
    main()
