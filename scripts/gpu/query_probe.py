"""Runs on the GPU machine (OOMLENS_GPU_CHECK=query_probe.py sh .gpu/run.sh):
what it costs the CPU to learn that a side stream has no work ahead of a
free, by each way the driver offers, natively (no oomlens), idle and with
the device busy on the legacy default stream (a queue of matmuls ahead):

- cuStreamQuery on a non-blocking stream never used, and on one that ran
  a kernel before (as cuDNN's own stream has);
- cuEventRecord of an event on that stream, cuEventQuery of an event
  recorded long ago (passed), cuStreamWaitEvent of the legacy stream on it;
- how long after it is recorded an event on the idle side stream passes
  while the legacy stream is busy (what a fence on the side streams only
  would keep a free waiting);
- cuStreamWriteValue32 of a mark into pinned host memory on the side
  stream, and how long until the CPU reads it there (a fence whose
  passing is read from memory, not asked of the driver);
- a context barrier (cuCtxRecordEvent then cuCtxWaitEvent, CUDA 12.5),
  which orders all later work after all earlier work on every stream,
  with 16 more side streams that ran a kernel (cuDNN makes 15 or more),
  against a round of cuStreamQuery on those 17 streams; and whether the
  barrier holds later work back: a side stream writes a tensor late
  (behind a sleep), then the barrier, then the default stream writes it:
  the default stream's value must win (without the barrier, the side
  stream's does).

Each call is timed over many calls through ctypes; cuCtxGetCurrent, which
asks the device nothing, is the cost of the call itself. Writes
query_probe.json into $OUT. The question it answers (issue 16): whether a
free beside cuDNN's idle stream can return without a cuStreamQuery per
batch (45 us each on the H200 while the device was busy)."""
import ctypes, json, os, statistics, time

OUT = os.environ.get('OUT', '/tmp/oomlens-out')
LEGACY = ctypes.c_void_p(1)  # CU_STREAM_LEGACY


def main():
    import torch
    torch.cuda.init()
    torch.empty(1, device='cuda')
    cu = ctypes.CDLL('libcuda.so.1')
    for name in ('cuStreamQuery', 'cuEventRecord', 'cuEventQuery', 'cuStreamWaitEvent',
                 'cuEventCreate', 'cuCtxGetCurrent', 'cuEventSynchronize'):
        getattr(cu, name).restype = ctypes.c_int
    fresh = torch.cuda.Stream()
    used = torch.cuda.Stream()
    with torch.cuda.stream(used):
        torch.ones(1024, device='cuda').add_(1)
    torch.cuda.synchronize()
    sf, su = ctypes.c_void_p(fresh.cuda_stream), ctypes.c_void_p(used.cuda_stream)
    ev = ctypes.c_void_p()
    assert cu.cuEventCreate(ctypes.byref(ev), 2) == 0  # CU_EVENT_DISABLE_TIMING
    old = ctypes.c_void_p()
    assert cu.cuEventCreate(ctypes.byref(old), 2) == 0
    assert cu.cuEventRecord(old, su) == 0
    torch.cuda.synchronize()
    ctx = ctypes.c_void_p()
    for name in ('cuMemHostAlloc', 'cuMemHostGetDevicePointer_v2', 'cuStreamWriteValue32_v2',
                 'cuCtxRecordEvent', 'cuCtxWaitEvent'):
        getattr(cu, name).restype = ctypes.c_int
    host = ctypes.c_void_p()
    assert cu.cuMemHostAlloc(ctypes.byref(host), 4096, 1 | 2) == 0  # PORTABLE | DEVICEMAP
    dev = ctypes.c_uint64()
    assert cu.cuMemHostGetDevicePointer_v2(ctypes.byref(dev), host, 0) == 0
    word = ctypes.cast(host, ctypes.POINTER(ctypes.c_uint32))
    counter = [0]

    def write_mark(stream):
        counter[0] += 1
        return cu.cuStreamWriteValue32_v2(stream, dev, ctypes.c_uint32(counter[0] & 0xffffffff), 0)

    assert cu.cuCtxGetCurrent(ctypes.byref(ctx)) == 0
    sides = [torch.cuda.Stream() for _ in range(16)]
    for st in sides:
        with torch.cuda.stream(st):
            torch.ones(1024, device='cuda').add_(1)
    torch.cuda.synchronize()
    side_handles = [ctypes.c_void_p(st.cuda_stream) for st in sides] + [su]
    bar = ctypes.c_void_p()
    assert cu.cuEventCreate(ctypes.byref(bar), 2) == 0

    def barrier():
        assert cu.cuCtxRecordEvent(ctx, bar) == 0
        return cu.cuCtxWaitEvent(ctx, bar)

    def query_round():
        for h in side_handles:
            cu.cuStreamQuery(h)

    def barrier_holds(with_barrier):
        """The value the default stream wrote after the side stream's late write."""
        t = torch.zeros(1 << 20, device='cuda')
        torch.cuda.synchronize()
        with torch.cuda.stream(used):
            torch.cuda._sleep(50_000_000)  # ~25 ms of spinning on the side stream
            t.fill_(1.0)
        if with_barrier:
            assert barrier() == 0
        t.fill_(2.0)  # the default stream: not ordered after the side stream
        torch.cuda.synchronize()
        return float(t.min().item()), float(t.max().item())

    calls = dict(
        ctx_get_current=lambda: cu.cuCtxGetCurrent(ctypes.byref(ctx)),
        context_barrier=barrier,
        query_round_17=query_round,
        stream_query_fresh=lambda: cu.cuStreamQuery(sf),
        stream_query_used=lambda: cu.cuStreamQuery(su),
        event_record_used=lambda: cu.cuEventRecord(ev, su),
        event_query_passed=lambda: cu.cuEventQuery(old),
        legacy_wait_event=lambda: cu.cuStreamWaitEvent(LEGACY, old, 0),
        write_value_used=lambda: write_mark(su),
        read_mark=lambda: word[0],
    )

    def per_call(f, n=2000):
        t = time.perf_counter()
        for _ in range(n):
            f()
        return (time.perf_counter() - t) / n * 1e6

    m = torch.randn(8192, 8192, device='cuda', dtype=torch.half)

    def busy():
        rs = [m @ m for _ in range(300)]
        del rs

    def fence_latency(n=200):
        """us from recording an event on the idle side stream to its passing."""
        out = []
        for _ in range(n):
            cu.cuEventRecord(ev, su)
            t = time.perf_counter()
            while cu.cuEventQuery(ev) != 0:
                pass
            out.append((time.perf_counter() - t) * 1e6)
        return dict(median=statistics.median(out), max=max(out))

    def mark_latency(n=200):
        """us from writing a mark on the idle side stream to seeing it in host memory."""
        out = []
        for _ in range(n):
            assert write_mark(su) == 0
            want = counter[0] & 0xffffffff
            t = time.perf_counter()
            while word[0] != want:
                pass
            out.append((time.perf_counter() - t) * 1e6)
        return dict(median=statistics.median(out), max=max(out))

    r = {'write_value_result': write_mark(su),
         'barrier_holds.with': barrier_holds(True), 'barrier_holds.without': barrier_holds(False)}
    for state in ('idle', 'busy'):
        for name, f in calls.items():
            torch.cuda.synchronize()
            if state == 'busy':
                busy()
            r[f'{state}.{name}'] = per_call(f)
            r[f'{state}.{name}.device_still_busy'] = cu.cuStreamQuery(LEGACY) != 0
        torch.cuda.synchronize()
        if state == 'busy':
            busy()
        r[f'{state}.fence_latency'] = fence_latency()
        r[f'{state}.fence_latency.device_still_busy'] = cu.cuStreamQuery(LEGACY) != 0
        torch.cuda.synchronize()
        if state == 'busy':
            busy()
        r[f'{state}.mark_latency'] = mark_latency()
        r[f'{state}.mark_latency.device_still_busy'] = cu.cuStreamQuery(LEGACY) != 0
    torch.cuda.synchronize()
    for k, v in r.items():
        print(k, v, flush=True)
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, 'query_probe.json'), 'w') as f:
        json.dump(r, f, indent=1)


if __name__ == '__main__':
    main()
