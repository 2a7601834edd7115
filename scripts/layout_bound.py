#!/usr/bin/env python3
"""What a placement that knew the job's lifetimes could do (issue 16).

    python3 scripts/layout_bound.py TRACE                 # the offline bound
    python3 scripts/layout_bound.py TRACE --plan SITE     # a plan learned step by step

TRACE: an oomlens trace (OOMLENS_TRACE, format 2) or a PyTorch recorder
CSV (tests/data/*.csv.gz), gzip'd or not. Offsets are in a flat address
space of 512-byte units; nothing here maps memory, it only places blocks.

The offline bound places every block of the whole trace at once, knowing
when each is freed: largest first, each at the lowest offset where no block
that lives at the same time lies (greedy by size, as ahead-of-time memory
planners do). Its footprint over the peak of live bytes says how much of a
pool's reserve above its peak is the placement's, not the job's.

--plan SITE cuts the trace into steps at each allocation whose site names
SITE (a step of fewer than 10 allocations joins the next) and places each
step's k-th allocation where a plan made at the end of the step before put
the k-th (the plan: greedy by size over that step's lifetimes, each size
the largest seen at that rank while steps keep the same count, around the
blocks still live at its end, where they are); an allocation that does not
fit its planned place, or has none, goes by best fit. Per step it prints
the allocations that fell back, the step's peak, the highest offset used
(the address space the step spans) and the plan's own footprint. A pool
that keeps that span mapped makes no driver call on a step with no
fallback.

--plan SITE --step K places step K alone, knowing its own lifetimes, three
ways: every block free to move; the blocks live at its start (weights,
optimizer state) fixed where the recorded pool put them; and those of them
an optimizer's state init made (frames torch/optim/... _init_group) set
apart, the rest where the pool put them. It tells whether a learned layout
is held back by the step's lifetimes or by where the long-lived blocks lie.

--plan SITE --online: the pool's way (best fit as allocations come, no
lifetimes), with the long-lived blocks (weights, optimizer state, by
their frames) in a range of their own and nothing ever unmapped: the span
it reaches over the peak. --plan SITE --aligned: a plan matched by
aligning each step's call sites with the step before's.

Numbers from it are in docs/measurements.md ("A placement that knew the
lifetimes", 2026-12-04); it is a measuring tool, slow on large traces
(pure Python, quadratic at worst)."""
import argparse, bisect, gzip, sys

UNIT = 512


def rounded(size):
    return (size + UNIT - 1) // UNIT * UNIT


def open_trace(path):
    with open(path, 'rb') as f:
        gz = f.read(2) == b'\x1f\x8b'
    return gzip.open(path, 'rt') if gz else open(path)


def read_events(path, marker):
    """[(kind, addr, size, marked, optimizer state, frames)] in order: 'a'
    allocations, 'f' frees."""
    sites, events = {}, []
    with open_trace(path) as f:
        for line in f:
            if line.startswith('#'):
                continue
            p = line.rstrip('\n').split(',')
            if p[0] == 'site' and len(p) >= 4:
                sites[p[2]] = ','.join(p[3:])
            elif len(p) >= 4 and p[1] == 'alloc':
                site = p[5] if len(p) > 5 else ''
                frames = sites.get(site, site)
                marked = bool(marker) and marker in frames
                state = 'torch/optim/' in frames and '_init_group' in frames
                events.append(('a', p[2], rounded(int(p[3])), marked, state, frames))
            elif len(p) >= 3 and p[1] in ('free', 'free_requested'):
                events.append(('f', p[2], 0, False, False, ''))
    if not any(e[0] == 'a' for e in events):
        sys.exit(f'layout_bound.py: {path}: no allocations read')
    return events


def lifetimes(events, before=None):
    """[(start, end, size)], event indices; a block never freed ends last.
    before: {addr: value} of blocks made before these events, each freed
    here removed from it, with (addr, free index, value) in the second
    list returned."""
    live, blocks, ended = {}, [], []
    for i, (kind, addr, size, *_) in enumerate(events):
        if kind == 'a':
            live[addr] = (i, size)
        elif addr in live:
            start, size = live.pop(addr)
            blocks.append((start, i, size))
        elif before is not None and addr in before:
            ended.append((addr, i, before.pop(addr)))
    blocks += [(start, len(events), size) for start, size in live.values()]
    return blocks, ended


def peak_of(blocks):
    changes = sorted([(s, z) for s, _, z in blocks] + [(e, -z) for _, e, z in blocks],
                     key=lambda c: (c[0], c[1]))
    now = top = 0
    for _, delta in changes:
        now += delta
        top = max(top, now)
    return top


def greedy(blocks, fixed=()):
    """Offsets for blocks [(start, end, size)], largest first, each at the
    lowest offset clear of the placed blocks alive with it; fixed:
    [(start, end, offset, size)] placed before. -> (offsets, footprint)"""
    placed = list(fixed)
    offsets = [0] * len(blocks)
    for i in sorted(range(len(blocks)), key=lambda i: -blocks[i][2]):
        start, end, size = blocks[i]
        taken = sorted((o, o + z) for s, e, o, z in placed if s < end and e > start)
        at = 0
        for lo, hi in taken:
            if lo - at >= size:
                break
            at = max(at, hi)
        offsets[i] = at
        placed.append((start, end, at, size))
    return offsets, max((o + z for _, _, o, z in placed), default=0)


def cut_steps(events):
    steps = [[]]
    for e in events:
        allocations = sum(1 for x in steps[-1] if x[0] == 'a')
        if e[0] == 'a' and e[3] and allocations >= 10:
            steps.append([])
        steps[-1].append(e)
    return steps


class Space:
    """Live blocks by offset, and best fit among the gaps between them."""

    def __init__(self):
        self.spans = []  # sorted (offset, end)

    def clear(self, at, size):
        i = bisect.bisect_left(self.spans, (at, -1))
        if i < len(self.spans) and self.spans[i][0] < at + size:
            return False
        return not (i > 0 and self.spans[i - 1][1] > at)

    def best_fit(self, size):
        best, prev = None, 0
        for lo, hi in self.spans:
            if lo - prev >= size and (best is None or lo - prev < best[0]):
                best = (lo - prev, prev)
            prev = max(prev, hi)
        return best[1] if best else prev

    def take(self, at, size):
        bisect.insort(self.spans, (at, at + size))

    def give(self, at, size):
        self.spans.remove((at, at + size))


def plan_keys(step, by_site, small):
    """The key of each allocation of a step that the plan places (None: it
    goes elsewhere): its rank; or, by_site, its frames and how many of the
    step's allocations had them before it, for allocations of `small`
    bytes or more whose frames were recorded (a sampled stack is not
    recorded every time for a small tensor: its count would shift)."""
    keys, seen, rank = [], {}, 0
    for kind, _, size, _, state, frames in step:
        if kind != 'a':
            keys.append(None)
        elif not by_site:
            keys.append(rank)
            rank += 1
        elif state or size < small or not frames or frames.startswith('(not sampled'):
            keys.append(None)
        else:
            seen[frames] = seen.get(frames, 0) + 1
            keys.append((frames, seen[frames]))
    return keys


def plan_steps(events, by_site, small):
    """Places each step by the plan the step before made (module doc).
    by_site: allocations keyed by frames, the optimizer's state and
    allocations not keyed placed apart (their bytes counted beside)."""
    space, aside, live = Space(), Space(), {}  # addr -> (space, offset, size)
    plan = {}  # key -> (offset, size)
    now = peak = apart = 0
    for n, step in enumerate(cut_steps(events)):
        allocations = fell_back = step_peak = span = 0
        made, made_at = [], {}  # [key, size, alloc index, free index or None]
        for i, ((kind, addr, size, _, state, _), key) in enumerate(zip(step, plan_keys(step, by_site, small))):
            if kind == 'a':
                allocations += 1
                now += size
                peak, step_peak = max(peak, now), max(step_peak, now)
                if by_site and state:  # never freed: a range of its own, end to end
                    live[addr] = (None, apart, size)
                    apart += size
                    continue
                where = space if key is not None else aside
                at = plan[key][0] if key in plan and plan[key][1] >= size and \
                    space.clear(plan[key][0], size) else None
                if at is None:
                    at = where.best_fit(size)
                    fell_back += key is not None
                where.take(at, size)
                live[addr] = (where, at, size)
                if key is not None:
                    made_at[addr] = len(made)
                    made.append([key, size, i, None])
                    span = max(span, at + size)
            elif addr in live:
                where, at, size = live.pop(addr)
                if where:
                    where.give(at, size)
                now -= size
                if addr in made_at:
                    made[made_at.pop(addr)][3] = i
        length = len(step)
        if not by_site and len(made) != len(plan):
            plan = {}  # ranks no longer line up: a plan from this step alone
        blocks = [(a, f if f is not None else length, max(z, plan.get(k, (0, 0))[1]))
                  for k, z, a, f in made]
        kept = [(0, length, at, size) for where, at, size in live.values() if where is space]
        offsets, footprint = greedy(blocks, kept)
        plan.update({m[0]: (o, b[2]) for m, o, b in zip(made, offsets, blocks)})
        beside = f' + {(apart + (aside.spans[-1][1] if aside.spans else 0)) / 2**30:.3f} apart' if by_site else ''
        print(f'step {n}: {allocations} allocations, {fell_back} fell back; peak {step_peak / 2**30:.3f} GiB, '
              f'span {span / 2**30:.3f}{beside} GiB; next plan {footprint / 2**30:.3f} GiB')
    print(f'peak of live bytes {peak / 2**30:.3f} GiB')


def one_step(events, k):
    """Step k placed knowing its own lifetimes: with every block free to
    move, with the blocks live at its start where the recorded pool put
    them, and with those of them an optimizer's state init made set apart
    (their bytes added, the rest where the pool put them)."""
    steps = cut_steps(events)
    if not 0 <= k < len(steps):
        sys.exit(f'layout_bound.py: --step {k}: the trace has steps 0 to {len(steps) - 1}')
    base = min(int(e[1], 16) for e in events if e[0] == 'a')
    before = {}  # addr -> (size, made by an optimizer's state init)
    for kind, addr, size, _, state, _ in (e for s in steps[:k] for e in s):
        if kind == 'a':
            before[addr] = (size, state)
        else:
            before.pop(addr, None)
    step = steps[k]
    moving, ended = lifetimes(step, before)
    fixed = [(0, i, int(a, 16) - base, z, st) for a, i, (z, st) in ended]
    fixed += [(0, len(step), int(a, 16) - base, z, st) for a, (z, st) in before.items()]
    peak = peak_of(moving + [(s, e, z) for s, e, _, z, _ in fixed])
    _, free = greedy(moving + [(s, e, z) for s, e, _, z, _ in fixed])
    _, where = greedy(moving, [f[:4] for f in fixed])
    apart = sum(f[3] for f in fixed if f[4])
    _, rest = greedy(moving, [f[:4] for f in fixed if not f[4]])
    print(f'step {k}: peak {peak / 2**30:.3f} GiB; placed knowing its lifetimes: '
          f'{free / peak:.4f}x with every block free, {where / peak:.4f}x with the '
          f'{sum(f[3] for f in fixed) / 2**30:.3f} GiB live at its start where the pool put them, '
          f'{(rest + apart) / peak:.4f}x with the optimizer state among them ({apart / 2**30:.3f} GiB) apart')


def long_lived(state, frames):
    """Made to outlive the steps: an optimizer's state (read_events' flag)
    or weights moved to the device (a module's _apply, load_state_dict)."""
    return state or '_apply' in frames or 'load_state_dict' in frames


def online_steps(events):
    """What a pool that never unmaps would span, placing each allocation by
    best fit as it comes, the long-lived blocks in a range of their own:
    per step, its peak, the span so far over the peak so far, and the
    granules (2 MiB) the span grew by (what would be mapped)."""
    granule = 2 << 20
    work, aside, live = Space(), Space(), {}
    now = peak = top = 0
    for n, step in enumerate(cut_steps(events)):
        step_peak, grown_from = 0, top
        for kind, addr, size, _, state, frames in step:
            if kind == 'a':
                now += size
                peak, step_peak = max(peak, now), max(step_peak, now)
                where = aside if long_lived(state, frames) else work
                at = where.best_fit(size)
                where.take(at, size)
                live[addr] = (where, at, size)
                if where is work:
                    top = max(top, -(-(at + size) // granule) * granule)
            elif addr in live:
                where, at, size = live.pop(addr)
                where.give(at, size)
                now -= size
        apart = aside.spans[-1][1] if aside.spans else 0
        print(f'step {n}: peak {step_peak / 2**30:.3f} GiB; span {top / 2**30:.3f} + '
              f'{apart / 2**30:.3f} apart = {(top + apart) / peak:.4f}x the peak so far; '
              f'grew {(top - grown_from) // granule} granules')


def aligned_steps(events, small):
    """A plan made at each step's end (greedy by size over its lifetimes,
    each size the largest seen through the alignment), each allocation of
    `small` bytes or more matched to it by aligning the step's sequence of
    call sites with the step before's (the next entry of its site within
    32 places): robust to a few allocations more or fewer, where ranks are
    not. Long-lived blocks and smaller allocations go apart."""
    work, aside, live, plan = Space(), Space(), {}, []
    now = peak = 0
    for n, step in enumerate(cut_steps(events)):
        made, made_at, at_plan, fell_back, step_peak, span = [], {}, 0, 0, 0, 0
        for i, (kind, addr, size, _, state, frames) in enumerate(step):
            if kind != 'a':
                if addr in live:
                    where, at, size = live.pop(addr)
                    where.give(at, size)
                    now -= size
                    if addr in made_at:
                        made[made_at.pop(addr)][3] = i
                continue
            now += size
            peak, step_peak = max(peak, now), max(step_peak, now)
            if long_lived(state, frames) or size < small:
                at = aside.best_fit(size)
                aside.take(at, size)
                live[addr] = (aside, at, size)
                continue
            j = next((k for k in range(at_plan, min(at_plan + 32, len(plan)))
                      if plan[k][0] == frames), None)
            at = None
            if j is not None:
                at_plan = j + 1
                if plan[j][2] >= size and work.clear(plan[j][1], size):
                    at = plan[j][1]
            if at is None:
                at = work.best_fit(size)
                fell_back += 1
            work.take(at, size)
            live[addr] = (work, at, size)
            made_at[addr] = len(made)
            made.append([frames, size, i, None, j])
            span = max(span, at + size)
        blocks = [(a, f if f is not None else len(step), max(z, plan[j][2]) if j is not None else z)
                  for _, z, a, f, j in made]
        kept = [(0, len(step), at, size) for where, at, size in live.values() if where is work]
        offsets, footprint = greedy(blocks, kept)
        plan = [(m[0], o, b[2]) for m, o, b in zip(made, offsets, blocks)]
        apart = aside.spans[-1][1] if aside.spans else 0
        print(f'step {n}: {len(made)} planned, {fell_back} fell back; peak {step_peak / 2**30:.3f} '
              f'GiB, span {span / 2**30:.3f} + {apart / 2**30:.3f} apart; next plan '
              f'{footprint / 2**30:.3f} GiB')


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('trace')
    ap.add_argument('--plan', metavar='SITE', help='learn a plan step by step, steps cut at SITE')
    ap.add_argument('--step', type=int, metavar='K', help='with --plan: place step K alone, three ways')
    ap.add_argument('--by-site', action='store_true',
                    help='with --plan: key allocations by frames, the optimizer state apart')
    ap.add_argument('--small', type=int, default=4 << 20, metavar='BYTES',
                    help='with --by-site or --aligned: smaller allocations go apart '
                         '(default 4 MiB)')
    ap.add_argument('--online', action='store_true',
                    help='with --plan: best fit as allocations come, long-lived blocks apart, '
                         'nothing unmapped')
    ap.add_argument('--aligned', action='store_true',
                    help='with --plan: match allocations to the plan by aligning call sites')
    args = ap.parse_args()
    try:
        events = read_events(args.trace, args.plan)
    except (OSError, EOFError, UnicodeDecodeError, ValueError) as e:
        sys.exit(f'layout_bound.py: {args.trace}: {e}')
    if args.plan:
        if not any(e[3] for e in events):
            sys.exit(f'layout_bound.py: no allocation names {args.plan!r}: no steps to cut')
        if args.step is not None:
            one_step(events, args.step)
        elif args.online:
            online_steps(events)
        elif args.aligned:
            aligned_steps(events, args.small)
        else:
            plan_steps(events, args.by_site, args.small)
        return
    if args.step is not None:
        sys.exit('layout_bound.py: --step needs --plan SITE (where steps begin)')
    blocks, _ = lifetimes(events)
    peak = peak_of(blocks)
    _, footprint = greedy(blocks)
    print(f'{len(blocks)} blocks; peak of live bytes {peak / 2**30:.3f} GiB; '
          f'placed knowing every lifetime: {footprint / 2**30:.3f} GiB ({footprint / peak:.4f}x)')


if __name__ == '__main__':
    main()
