"""Runs on the GPU machine (OOMLENS_GPU_CHECK=vmm_overlap.py sh .gpu/run.sh):
whether the driver's virtual-memory calls cost the job more than their own
CPU time (issue 16). vmm_cost.py timed each call with the device idle; in a
job the device is busy, and manage mode's trims and growth call the driver
between launches. Three questions, natively (no oomlens):

1. Does a call wait for the device? With ~WORK_MS of matmuls queued on the
   default stream, one cuMemCreate+cuMemMap+cuMemSetAccess and one
   cuMemUnmap+cuMemRelease of a 2 MiB chunk the work never touches, timed
   on the CPU, and whether the work had finished when the call returned
   (a call that waits for the device drains the job's queue).
2. Do the calls slow the device? The same work alone and with CHUNKS chunks
   mapped and unmapped on the CPU while it runs, its elapsed time by CUDA
   events (alternated, VMM_OVERLAP_REPS times).
3. Do the calls made on another thread slow the job's launches? LAUNCHES
   small kernels launched on the main thread, alone and with a second
   thread mapping and unmapping chunks all the while (ctypes lets go of
   the GIL during each call).

Prints a table and writes $OUT/vmm_overlap.json."""
import ctypes, json, os, statistics, threading, time

import torch

OUT = os.environ.get('OUT', '.')
REPS = int(os.environ.get('VMM_OVERLAP_REPS', '5'))
CHUNKS = int(os.environ.get('VMM_OVERLAP_CHUNKS', '200'))
LAUNCHES = int(os.environ.get('VMM_OVERLAP_LAUNCHES', '20000'))
MiB = 1 << 20
CHUNK = 2 * MiB

# the driver and its structures as vmm_cost.py declares them (staged beside it)
from vmm_cost import Access, Location, Prop, check, cu, u64

PROP = Prop(type=1, requestedHandleTypes=0, location=Location(type=1, id=0))
ACCESS = Access(location=Location(type=1, id=0), flags=3)


def map_chunk(va):
    h = u64()
    check(cu.cuMemCreate(ctypes.byref(h), u64(CHUNK), ctypes.byref(PROP), u64(0)), 'create')
    check(cu.cuMemMap(u64(va), u64(CHUNK), u64(0), h, u64(0)), 'map')
    check(cu.cuMemSetAccess(u64(va), u64(CHUNK), ctypes.byref(ACCESS), u64(1)), 'access')
    return h


def unmap_chunk(va, h):
    check(cu.cuMemUnmap(u64(va), u64(CHUNK)), 'unmap')
    check(cu.cuMemRelease(h), 'release')


class Work:
    """About WORK_MS of matmuls on the default stream, timed by events."""

    def __init__(self, ms):
        self.a = torch.randn(4096, 4096, device='cuda', dtype=torch.bfloat16)
        self.b = torch.randn(4096, 4096, device='cuda', dtype=torch.bfloat16)
        self.n = 1
        self.start, self.end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        while True:  # calibrate the count of matmuls to the wanted time
            self.enqueue()
            torch.cuda.synchronize()
            if self.elapsed_ms() >= ms or self.n > 1 << 16:
                break
            self.n *= 2

    def enqueue(self):
        self.start.record()
        for _ in range(self.n):
            torch.mm(self.a, self.b)
        self.end.record()

    def elapsed_ms(self):
        return self.start.elapsed_time(self.end)

    def done(self):
        return self.end.query()


def waits_for_device(work, va):
    """Q1: CPU time of a map and of an unmap while the device is busy, and
    whether the queued work was finished when each returned."""
    rows = []
    for _ in range(REPS):
        h_old = map_chunk(va + CHUNK)  # mapped while idle, unmapped while busy
        torch.cuda.synchronize()
        work.enqueue()
        t = time.perf_counter()
        h = map_chunk(va)
        t_map = (time.perf_counter() - t) * 1e6
        done_after_map = work.done()
        t = time.perf_counter()
        unmap_chunk(va + CHUNK, h_old)
        t_unmap = (time.perf_counter() - t) * 1e6
        done_after_unmap = work.done()
        torch.cuda.synchronize()
        unmap_chunk(va, h)
        rows.append(dict(map_us=t_map, unmap_us=t_unmap, work_ms=work.elapsed_ms(),
                         done_after_map=done_after_map, done_after_unmap=done_after_unmap))
    return rows


def slows_device(work, va):
    """Q2: the work's elapsed time alone and with CHUNKS maps and unmaps
    made on the CPU while it runs."""
    alone, with_vmm, cpu_us = [], [], []
    for _ in range(REPS):
        for busy in (False, True):
            torch.cuda.synchronize()
            work.enqueue()
            if busy:
                t = time.perf_counter()
                hs = [map_chunk(va + i * CHUNK) for i in range(CHUNKS)]
                for i, h in enumerate(hs):
                    unmap_chunk(va + i * CHUNK, h)
                cpu_us.append((time.perf_counter() - t) * 1e6 / CHUNKS)
            torch.cuda.synchronize()
            (with_vmm if busy else alone).append(work.elapsed_ms())
    return alone, with_vmm, cpu_us


def slows_launches(va):
    """Q3: the main thread's launch rate alone and beside a thread that maps
    and unmaps chunks all the while."""
    x = torch.zeros(256, device='cuda')
    stop = threading.Event()
    cycles = [0]
    ctx = ctypes.c_void_p()
    check(cu.cuCtxGetCurrent(ctypes.byref(ctx)), 'current')

    def churn():
        check(cu.cuCtxSetCurrent(ctx), 'set current')
        while not stop.is_set():
            h = map_chunk(va)
            unmap_chunk(va, h)
            cycles[0] += 1

    def launches():
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(LAUNCHES):
            x.add_(1.0)
        cpu = (time.perf_counter() - t) * 1e6 / LAUNCHES
        torch.cuda.synchronize()
        return cpu

    alone, beside = [], []
    for _ in range(REPS):
        alone.append(launches())
        stop.clear()
        th = threading.Thread(target=churn)
        th.start()
        time.sleep(0.01)
        beside.append(launches())
        stop.set()
        th.join()
    return alone, beside, cycles[0]


def main():
    torch.cuda.init()
    torch.zeros(1, device='cuda')
    work_ms = float(os.environ.get('VMM_OVERLAP_WORK_MS', '150'))
    work = Work(work_ms)
    va = u64()
    space = (CHUNKS + 2) * CHUNK
    check(cu.cuMemAddressReserve(ctypes.byref(va), u64(space), u64(0), u64(0), u64(0)), 'reserve')
    med = lambda v: round(statistics.median(v), 2)
    q1 = waits_for_device(work, va.value)
    print(f'work queued: {work.n} matmuls, {med([r["work_ms"] for r in q1])} ms')
    print(f'Q1 map+access while busy: {med([r["map_us"] for r in q1])} us, '
          f'work done after it {sum(r["done_after_map"] for r in q1)}/{len(q1)}; '
          f'unmap+release while busy: {med([r["unmap_us"] for r in q1])} us, '
          f'work done after it {sum(r["done_after_unmap"] for r in q1)}/{len(q1)}', flush=True)
    alone, with_vmm, cpu_us = slows_device(work, va.value)
    print(f'Q2 work alone {med(alone)} ms, with {CHUNKS} chunks mapped+unmapped meanwhile '
          f'{med(with_vmm)} ms (ratio {round(statistics.median(with_vmm) / statistics.median(alone), 4)}); '
          f'{med(cpu_us)} us a chunk on the CPU', flush=True)
    l_alone, l_beside, cycles = slows_launches(va.value)
    print(f'Q3 a launch alone {med(l_alone)} us, beside a mapping thread {med(l_beside)} us '
          f'(ratio {round(statistics.median(l_beside) / statistics.median(l_alone), 3)}; '
          f'{cycles} map+unmap cycles on the thread)', flush=True)
    check(cu.cuMemAddressFree(va, u64(space)), 'free')
    with open(os.path.join(OUT, 'vmm_overlap.json'), 'w') as f:
        json.dump(dict(work_matmuls=work.n, q1=q1, q2=dict(alone_ms=alone, with_vmm_ms=with_vmm,
                                                           cpu_us_per_chunk=cpu_us),
                       q3=dict(alone_us=l_alone, beside_us=l_beside, cycles=cycles)), f, indent=1)


if __name__ == '__main__':
    main()
