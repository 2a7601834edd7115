#!/usr/bin/env python3
"""fuzz_cli.py: the whole command line fuzzed with mutated inputs.

Driven by scripts/fuzz_cli.sh, which builds build-fuzzcli/ (ASan, and UBSan
with -fno-sanitize-recover) and calls:

    fuzz_cli.py OOMLENS SECONDS OUTDIR SEED...

Each round takes a seed (a trace, CSV or ours, or a JSON report), mutates it
(bytes, lines (one repeated up to 300 times), numbers swapped for the values that broke readers before:
2^63, 2^64, -1, 1e309, -1e9, inf, 1.1e19, a size above 2^56; fields of a
JSON report removed or given another type; the file cut anywhere) and runs
one target on it:

    replay (each policy), export (each format), report, report --html, merge

A finding is an exit status other than 0, 1 or 2, a signal, a sanitizer
report on stderr, or a run past the time limit (a hang). Each is kept once
(by target and first line of what went wrong) in OUTDIR/findings/, the
input beside a file saying the command. Every file is written under OUTDIR
(TMPDIR too), never in /tmp. Prints executions per target and the findings,
and exits 1 if there were any.
"""
import gzip
import json
import os
import random
import re
import subprocess
import sys
import time

INTERESTING = [
    "0", "1", "-1", "-5", "255", "4096", "2097152",
    str(2**31), str(2**32), str(2**56), str(2**56 + 1), str(2**62),
    str(2**63 - 1), str(2**63), str(2**64 - 1), str(2**64), "18446744073709551617",
    "1e309", "-1e9", "1.1e19", "9.3e18", "inf", "nan", "-0", "0.5", "1e-300",
    '"big"', "null", "true", "[]", "{}",
]
TIMEOUT_S = 20
SANITIZER = re.compile(r"runtime error:|AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer")


def read_seed(path):
    data = open(path, "rb").read()
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except Exception:
            pass
    if len(data) > 64 * 1024:  # the head of a long trace: fast rounds
        data = data[: 64 * 1024]
        data = data[: data.rfind(b"\n") + 1]
    return data


def mutate_number(rng, data):
    spans = [m.span() for m in re.finditer(rb"-?\d+(\.\d+)?([eE][-+]?\d+)?", data)]
    if not spans:
        return data
    for _ in range(rng.randint(1, 4)):
        a, b = rng.choice(spans)
        new = rng.choice(INTERESTING).encode()
        data = data[:a] + new + data[b:]
        spans = [m.span() for m in re.finditer(rb"-?\d+(\.\d+)?([eE][-+]?\d+)?", data)]
        if not spans:
            break
    return data


def mutate_lines(rng, data):
    lines = data.split(b"\n")
    if len(lines) < 2:
        return data
    op = rng.randrange(5)
    i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
    if op == 4:  # one line many times: running totals (2^56 x 128 passes 2^63)
        fields = lines[i].split(b",")
        if len(fields) > 3 and rng.random() < 0.5:
            fields[3] = rng.choice([b"72057594037927936", b"4611686018427387904", b"1099511627776"])
        lines[i:i] = [b",".join(fields)] * rng.randint(2, 300)
    elif op == 0:
        del lines[i]
    elif op == 1:
        lines.insert(i, lines[j])
    elif op == 2:
        lines[i], lines[j] = lines[j], lines[i]
    else:
        fields = lines[i].split(b",")
        k = rng.randrange(len(fields))
        fields[k] = rng.choice(INTERESTING).encode() if rng.random() < 0.7 else b""
        lines[i] = b",".join(fields)
    return b"\n".join(lines)


def mutate_bytes(rng, data):
    data = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        if not data:
            break
        i = rng.randrange(len(data))
        op = rng.randrange(3)
        if op == 0:
            data[i] = rng.randrange(256)
        elif op == 1:
            del data[i]
        else:
            data.insert(i, rng.choice(b",.\n-0x9{}[]\":e"))
    return bytes(data)


def json_nodes(node, path=()):
    yield path, node
    if isinstance(node, dict):
        for k, v in node.items():
            yield from json_nodes(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from json_nodes(v, path + (i,))


def mutate_json(rng, data):
    try:
        doc = json.loads(data)
    except Exception:
        return mutate_bytes(rng, data)
    raw = []
    for _ in range(rng.randint(1, 5)):
        nodes = [p for p, _ in json_nodes(doc) if p]  # again: the last change moved them
        if not nodes:
            break
        path = rng.choice(nodes)
        parent = doc
        for step in path[:-1]:
            parent = parent[step]
        key = path[-1]
        op = rng.randrange(3)
        if op == 0:
            del parent[key]
        elif op == 1:  # a raw token, which may not be JSON at all (inf, 2^64)
            raw.append(rng.choice(INTERESTING))
            parent[key] = "@@raw%d@@" % (len(raw) - 1)
        else:
            parent[key] = rng.choice([-(2**63), 2**63, 2**64, -1e9, 1.1e19, 1e300, "x", [1],
                                      {"a": 1}, None])
    text = json.dumps(doc, indent=1)
    for i, token in enumerate(raw):
        text = text.replace('"@@raw%d@@"' % i, token)
    return text.encode()


def mutate(rng, data, is_json):
    choice = rng.random()
    if is_json and choice < 0.6:
        out = mutate_json(rng, data)
    elif choice < 0.45:
        out = mutate_number(rng, data)
    elif choice < 0.75:
        out = mutate_lines(rng, data)
    else:
        out = mutate_bytes(rng, data)
    if rng.random() < 0.15 and out:  # cut anywhere: a full disk, a killed job
        out = out[: rng.randrange(len(out))]
    return out


TRACE_TARGETS = [
    ("replay", ["replay", "{in}"]),
    ("replay-pytorch", ["replay", "{in}", "--policy", "pytorch"]),
    ("replay-expandable", ["replay", "{in}", "--policy", "pytorch-expandable"]),
    ("replay-json", ["replay", "{in}", "--json", "--capacity", "1G"]),
    ("replay-no-sites", ["replay", "{in}", "--no-sites", "--json", "--capacity", "1G"]),
    ("export-folded", ["export", "{in}", "--format", "folded", "-o", "{out}"]),
    ("export-memory-viz", ["export", "{in}", "--format", "memory-viz", "-o", "{out}"]),
    ("export-perfetto", ["export", "{in}", "--format", "perfetto", "-o", "{out}"]),
    ("export-rmm-csv", ["export", "{in}", "--format", "rmm-csv", "-o", "{out}"]),
    ("report-trace", ["report", "{in}"]),
    ("report-trace-html", ["report", "{in}", "--html", "{out}"]),
]
JSON_TARGETS = [
    ("report-json", ["report", "{in}"]),
    ("report-json-html", ["report", "{in}", "--html", "{out}"]),
    ("merge", ["merge", "{in}", "{seed}"]),
    ("merge-json", ["merge", "--json", "{in}", "{seed}"]),
]


def run_one(oomlens, argv, env):
    start = time.monotonic()
    try:
        p = subprocess.run([oomlens] + argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, env=env, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return "hang: no exit in %d s" % TIMEOUT_S, time.monotonic() - start
    err = p.stderr.decode("utf-8", "replace")
    m = SANITIZER.search(err)
    if m:
        line = next(l for l in err.splitlines() if SANITIZER.search(l))
        return "sanitizer: " + re.sub(r"0x[0-9a-f]+", "0x?", line.strip()), 0
    if p.returncode < 0:
        return "signal %d" % -p.returncode, 0
    if p.returncode not in (0, 1, 2):
        return "exit status %d" % p.returncode, 0
    return None, 0


def main():
    oomlens, seconds, outdir = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    seeds = sys.argv[4:]
    work = os.path.join(outdir, "work")
    found_dir = os.path.join(outdir, "findings")
    os.makedirs(work, exist_ok=True)
    os.makedirs(found_dir, exist_ok=True)
    env = dict(os.environ, TMPDIR=work,
               UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1",
               ASAN_OPTIONS="detect_leaks=1:abort_on_error=0")
    rng = random.Random(int(os.environ.get("FUZZ_SEED", time.time())))
    loaded = [(s, read_seed(s)) for s in seeds]
    reports = [s for s, d in loaded if d.lstrip()[:1] == b"{"]
    counts, findings = {}, {}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        # half the rounds on a JSON report, half on a trace: fewer reports than traces seed it
        want_json = rng.random() < 0.5
        pool = [(s, d) for s, d in loaded if (d.lstrip()[:1] == b"{") == want_json]
        seed, data = rng.choice(pool or loaded)
        is_json = data.lstrip()[:1] == b"{"
        mutant = mutate(rng, data, is_json)
        inp = os.path.join(work, "input.json" if is_json else "input.trace")
        out = os.path.join(work, "out")
        with open(inp, "wb") as f:
            f.write(mutant)
        name, argv = rng.choice(JSON_TARGETS if is_json else TRACE_TARGETS)
        other = rng.choice(reports) if reports else inp
        argv = [a.format(**{"in": inp, "out": out, "seed": other}) for a in argv]
        what, _ = run_one(oomlens, argv, env)
        counts[name] = counts.get(name, 0) + 1
        if what and (name, what) not in findings:
            n = len(findings)
            kept = os.path.join(found_dir, "%03d-%s%s" % (n, name, ".json" if is_json else ".trace"))
            with open(kept, "wb") as f:
                f.write(mutant)
            with open(kept + ".txt", "w") as f:
                f.write("%s\noomlens %s\n(seed %s)\n" % (what, " ".join(argv).replace(inp, kept), seed))
            findings[(name, what)] = kept
            print("fuzz_cli: FOUND %s: %s (%s)" % (name, what, kept), flush=True)
        if os.path.exists(out):
            os.unlink(out)
    for name, _ in TRACE_TARGETS + JSON_TARGETS:
        print("fuzz_cli: %-18s %7d runs" % (name, counts.get(name, 0)))
    print("fuzz_cli: %d runs in %.0f s, %d findings" % (sum(counts.values()), seconds, len(findings)))
    for f in (inp, os.path.join(work, "input.json")):
        if os.path.exists(f):
            os.unlink(f)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
