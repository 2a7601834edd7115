#!/usr/bin/env python3
"""bench_trace.py: how long `oomlens replay` and each `oomlens export`
format take on a large trace, and their peak memory (a benchmark, not a
test). Generates the trace first with scripts/gen_trace.py if it is not
there yet.

usage: scripts/bench_trace.py [TRACE] [--events N] [--cli build/tools/oomlens]
prints one line per command: seconds, peak RSS, output size"""
import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def measure(argv, out_path):
    """Seconds and peak RSS in MiB. GNU time is asked for the RSS where it
    is installed: a child forked from this Python keeps Python's own size
    as its high-water mark across exec, so wait4's figure would be ours."""
    timer = "/usr/bin/time"
    if os.path.exists(timer):
        argv = [timer, "-f", "%e %M"] + argv
    start = time.monotonic()
    with open(out_path, "wb") as out:
        proc = subprocess.run(argv, stdout=out, stderr=subprocess.PIPE, text=True)
    seconds = time.monotonic() - start
    if proc.returncode != 0:
        sys.exit("failed: " + " ".join(argv) + "\n" + proc.stderr)
    if os.path.exists(timer):
        wall, kib = proc.stderr.strip().splitlines()[-1].split()
        return float(wall), int(kib) / 1024.0
    return seconds, float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", nargs="?", default="/tmp/oomlens-bench-10m.trace")
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--cli", default=os.path.join(HERE, "..", "build", "tools", "oomlens"))
    a = ap.parse_args()
    if not os.path.exists(a.trace):
        t0 = time.monotonic()
        subprocess.run([sys.executable, os.path.join(HERE, "gen_trace.py"), a.trace,
                        "--events", str(a.events)], check=True)
        print("generated %s in %.1f s" % (a.trace, time.monotonic() - t0))
    print("trace: %s, %.0f MiB" % (a.trace, os.path.getsize(a.trace) / 2**20))
    out = a.trace + ".out"
    runs = [("replay", [a.cli, "replay", a.trace])]
    for fmt in ("folded", "memory-viz", "perfetto", "rmm-csv"):
        runs.append(("export " + fmt, [a.cli, "export", a.trace, "--format", fmt]))
    runs.append(("report --html", [a.cli, "report", a.trace, "--html", "-"]))
    for name, argv in runs:
        seconds, rss = measure(argv, out)
        print("%-18s %6.1f s  peak RSS %7.1f MiB  output %7.1f MiB"
              % (name, seconds, rss, os.path.getsize(out) / 2**20))
    os.unlink(out)


main()
