#!/usr/bin/env python3
"""gen_trace.py: writes a synthetic oomlens trace (docs/trace-format.md) of
about N events, shaped like training: weights allocated once, then
iterations that allocate activations of varied sizes from a few hundred
call sites (Python frames), free them in reverse, and now and then take or
return a segment. For the scale benchmark (scripts/bench_trace.py); not a
test input.

usage: gen_trace.py OUT [--events N] [--sites S] [--seed K]
"""
import argparse
import random


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--sites", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    with open(a.out, "w") as f:
        w = f.write
        w("# oomlens-trace 1 pid=4242 rank=0 start_unix_us=1795939200000000 stacks=1\n")
        w("# time_us,action,addr,size,stream,site,device\n")
        w("device,0,150109106995\n")
        for s in range(a.sites):
            layer = s % 24
            w(f"site,0,{s},model.py:{100 + s}:op{s};model.py:{40 + layer}:layer{layer};"
              f"train.py:{10 + s % 7}:step;train.py:200:main\n")
        t, addr, events = 0, 0x7f0000000000, 0
        out = []
        # Weights: kept to the end.
        for i in range(2000):
            size = rng.choice((512, 4096, 1 << 20, 3 << 20, 9 << 20))
            out.append(f"{t},alloc,{addr:#x},{size},0,{i % 50},0\n")
            addr += size + 512
            t += 1
        events += 2000
        sizes = [rng.choice((512, 2048, 65536, 1 << 20, 2 << 20, 6 << 20, 24 << 20))
                 for _ in range(997)]
        step = 0
        while events < a.events:
            live = []
            base = addr + (step % 4) * (1 << 36)
            if step % 50 == 0:
                out.append(f"{t},segment_alloc,{base:#x},{1 << 30},0,,0\n")
                events += 1
            at = base
            for i, size in enumerate(sizes):
                site = 50 + (i * 7 + step) % (a.sites - 50)
                out.append(f"{t},alloc,{at:#x},{size},0,{site},0\n")
                live.append((at, size, site))
                at += size
                t += rng.randint(1, 3)
            for at, size, site in reversed(live):
                out.append(f"{t},free_requested,{at:#x},{size},0,{site},0\n"
                           f"{t},free_completed,{at:#x},{size},0,{site},0\n")
                t += 1
            events += 3 * len(sizes)
            if step % 50 == 49:
                out.append(f"{t},segment_free,{base:#x},{1 << 30},0,,0\n")
                events += 1
            step += 1
            if len(out) > 100000:
                w("".join(out))
                out.clear()
        w("".join(out))
        w(f"# end events={events}\n")


main()
