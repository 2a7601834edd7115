#!/usr/bin/env python3
"""Replays every case of the OOM corpus (tests/data/oom/manifest.json) at
0.3 to 1.0 of its cap, with its call sites and without (`--no-sites`),
through two builds of oomlens, and prints every replay whose diagnosis
differs: the class of the policy's own OOM and of the recorded one, the
batch figures, the iterations found, the line it ran out at. What a
change to the rules moved, and nothing else, is what its commit may
claim (docs/diagnosis.md quotes these counts: "the corpus's 2,768
replays").

usage: corpus_sweep.py OLD_OOMLENS NEW_OOMLENS
e.g.   git stash; ninja -C build; cp build/tools/oomlens /work/old; git stash pop
       ninja -C build; corpus_sweep.py /work/old build/tools/oomlens"""
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from corpus_caps import cap_bytes, replay_command

FRACTIONS = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3)


def replay(oomlens, data, entry, fraction, no_sites):
    cmd = replay_command(oomlens, os.path.join(data, entry['trace']), entry,
                         int(cap_bytes(entry['cap']) * fraction), no_sites)
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return f'exit {done.returncode}: {done.stderr.strip()[:200]}'
    result = json.loads(done.stdout)
    read = []
    for key in ('oom', 'recorded_oom'):
        oom = result.get(key)
        if not oom:
            read.append(f'{key} none')
            continue
        d = oom['diagnosis']
        read.append(f"{key} {oom['class']} line {oom.get('line')} batch "
                    f"{d.get('batch_fits')}/{d.get('batch_fits_headroom')} "
                    f"iterations {d.get('iterations')}")
    return '; '.join(read)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    old, new = sys.argv[1:]
    data = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests', 'data', 'oom')
    with open(os.path.join(data, 'manifest.json'), encoding='utf-8') as f:
        manifest = json.load(f)
    runs = [(e, fr, ns) for e in manifest for fr in FRACTIONS for ns in (False, True)]

    def both(run):
        entry, fraction, no_sites = run
        return (replay(old, data, entry, fraction, no_sites),
                replay(new, data, entry, fraction, no_sites))

    with ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        results = list(pool.map(both, runs))
    changed = 0
    for (entry, fraction, no_sites), (a, b) in zip(runs, results):
        if a == b:
            continue
        changed += 1
        print(f"{entry['name']} at {fraction} {'without' if no_sites else 'with'} call sites "
              f"(truth at its cap {entry['truth']}):\n  old: {a}\n  new: {b}")
    print(f'{changed} of {len(runs)} replays changed')


if __name__ == '__main__':
    main()
