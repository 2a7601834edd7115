#!/usr/bin/env python3
"""Replays every case of the OOM corpus (tests/data/oom/manifest.json) at
fractions of the cap it ran under, as on smaller devices, and prints how
each truth at its cap was classed there, then the cases whose class is
not one the truth allows on a smaller device (test_corpus's
a_smaller_device_keeps_the_cause checks 0.5-0.7 of the cap; this goes
wider, for reading, not for passing).

usage: corpus_caps.py [OOMLENS] [FRACTIONS]
e.g.   corpus_caps.py build/tools/oomlens 0.4,0.5,0.6,0.7,0.8,0.9
(docs/diagnosis.md, "On smaller devices")."""
import collections
import json
import os
import subprocess
import sys

UNITS = {'K': 1 << 10, 'M': 1 << 20, 'G': 1 << 30, 'T': 1 << 40}
ALLOWED = {  # what a cause at the cap may be on a smaller device
    'persistent': {'persistent', 'undetermined', 'impossible'},
    'activations': {'activations', 'persistent', 'undetermined', 'impossible'},
}


def cap_bytes(text):
    if text[-1] in UNITS:
        return int(float(text[:-1]) * UNITS[text[-1]])
    return int(text)


def replay(oomlens, trace, entry, capacity):
    cmd = [oomlens, 'replay', trace, '--capacity', str(capacity), '--json']
    if entry.get('batch'):
        cmd += ['--batch', str(entry['batch'])]
    if entry.get('replay_policy', 'oomlens') != 'oomlens':
        cmd += ['--policy', entry['replay_policy']]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: exit {done.returncode}: {done.stderr.strip()}")
    oom = json.loads(done.stdout).get('oom')
    return (oom['class'], oom['diagnosis'].get('iterations')) if oom else ('none', None)


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
    oomlens = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, 'build/tools/oomlens')
    fractions = [float(f) for f in (sys.argv[2] if len(sys.argv) > 2
                                    else '0.4,0.5,0.6,0.7,0.8,0.9').split(',')]
    data = os.path.join(root, 'tests/data/oom')
    with open(os.path.join(data, 'manifest.json'), encoding='utf-8') as f:
        manifest = json.load(f)
    table, odd = collections.Counter(), []
    for entry in manifest:
        trace = os.path.join(data, entry['trace'])
        for fraction in fractions:
            got, iterations = replay(oomlens, trace, entry,
                                     int(cap_bytes(entry['cap']) * fraction))
            table[(entry['truth'], got)] += 1
            allowed = ALLOWED.get(entry['truth'])
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
