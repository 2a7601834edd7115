"""Runs on the GPU machine (OOMLENS_GPU_CHECK=vmm_cost.py sh .gpu/run.sh):
what each virtual-memory call of the CUDA driver costs by the size of the
physical allocation, to choose manage mode's mapping unit (issue 16).

For sizes of 2 MiB to 2 GiB: the microseconds of cuMemCreate, cuMemMap,
cuMemSetAccess, cuMemUnmap and cuMemRelease (median of VMM_COST_REPS,
default 20, with a cuCtxSynchronize before each timed call so that queued
work is not counted), and the same map+set-access on a handle created
earlier (reuse). Prints a table and writes $OUT/vmm_cost.json.

VMM_COST_SIZES (MiB, comma-separated) picks the sizes, and then the part
on many 2 MiB handles side by side is left out: the huge blocks' extents
(branch `huge`) alone, in well under a minute:
    VMM_COST_SIZES=256,512,1024,2048 VMM_COST_REPS=10"""
import ctypes, json, os, statistics, time

OUT = os.environ.get('OUT', '.')
REPS = int(os.environ.get('VMM_COST_REPS', '20'))
MiB = 1 << 20
SIZES = [2 * MiB, 8 * MiB, 20 * MiB, 64 * MiB, 256 * MiB, 512 * MiB, 1024 * MiB, 2048 * MiB]
CHOSEN = os.environ.get('VMM_COST_SIZES', '')
if CHOSEN:
    SIZES = [int(x) * MiB for x in CHOSEN.split(',')]

cu = ctypes.CDLL('libcuda.so.1')
u64, i32 = ctypes.c_uint64, ctypes.c_int


class Location(ctypes.Structure):
    _fields_ = [('type', i32), ('id', i32)]


class AllocFlags(ctypes.Structure):
    _fields_ = [('compressionType', ctypes.c_ubyte), ('gpuDirectRDMACapable', ctypes.c_ubyte),
                ('usage', ctypes.c_ushort), ('reserved', ctypes.c_ubyte * 4)]


class Prop(ctypes.Structure):
    _fields_ = [('type', i32), ('requestedHandleTypes', i32), ('location', Location),
                ('win32HandleMetaData', ctypes.c_void_p), ('allocFlags', AllocFlags)]


class Access(ctypes.Structure):
    _fields_ = [('location', Location), ('flags', i32)]


def check(r, what):
    if r != 0:
        raise RuntimeError(f'{what}: CUDA error {r}')


def main():
    check(cu.cuInit(0), 'cuInit')
    dev, ctx = i32(), ctypes.c_void_p()
    check(cu.cuDeviceGet(ctypes.byref(dev), 0), 'cuDeviceGet')
    check(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), 'retain')
    check(cu.cuCtxSetCurrent(ctx), 'set current')
    prop = Prop(type=1, requestedHandleTypes=0, location=Location(type=1, id=0))
    access = Access(location=Location(type=1, id=0), flags=3)
    va = u64()
    space = 2 * max(SIZES)
    check(cu.cuMemAddressReserve(ctypes.byref(va), u64(space), u64(0), u64(0), u64(0)), 'reserve')
    rows = []

    def timed(fn):
        cu.cuCtxSynchronize()
        t = time.perf_counter()
        fn()
        return (time.perf_counter() - t) * 1e6

    for size in SIZES:
        t = {k: [] for k in ('create', 'map', 'access', 'unmap', 'release', 'remap')}
        for _ in range(REPS):
            h = u64()
            t['create'].append(timed(lambda: check(cu.cuMemCreate(ctypes.byref(h), u64(size), ctypes.byref(prop), u64(0)), 'create')))
            t['map'].append(timed(lambda: check(cu.cuMemMap(va, u64(size), u64(0), h, u64(0)), 'map')))
            t['access'].append(timed(lambda: check(cu.cuMemSetAccess(va, u64(size), ctypes.byref(access), u64(1)), 'access')))
            t['unmap'].append(timed(lambda: check(cu.cuMemUnmap(va, u64(size)), 'unmap')))
            # the same handle mapped again at another address: reuse, no create
            other = u64(va.value + max(SIZES))
            t['remap'].append(timed(lambda: (check(cu.cuMemMap(other, u64(size), u64(0), h, u64(0)), 'remap'),
                                             check(cu.cuMemSetAccess(other, u64(size), ctypes.byref(access), u64(1)), 'access2'))))
            check(cu.cuMemUnmap(other, u64(size)), 'unmap2')
            t['release'].append(timed(lambda: check(cu.cuMemRelease(h), 'release')))
        row = {'size_mib': size // MiB} | {k: round(statistics.median(v), 1) for k, v in t.items()}
        rows.append(row)
        print(' '.join(f'{k}={v}' for k, v in row.items()), flush=True)
    # Many 2 MiB handles side by side: one cuMemSetAccess and one cuMemUnmap
    # over all of them (the driver accepts a range of whole mappings?)
    for n in () if CHOSEN else (1, 4, 16, 64):
        t = {k: [] for k in ('create_each', 'map_each', 'access_all', 'unmap_all', 'release_each')}
        ok = True
        for _ in range(REPS):
            hs = [u64() for _ in range(n)]
            t['create_each'].append(sum(timed(lambda h=h: check(cu.cuMemCreate(ctypes.byref(h), u64(2 * MiB), ctypes.byref(prop), u64(0)), 'create')) for h in hs) / n)
            t['map_each'].append(sum(timed(lambda i=i, h=h: check(cu.cuMemMap(u64(va.value + i * 2 * MiB), u64(2 * MiB), u64(0), h, u64(0)), 'map')) for i, h in enumerate(hs)) / n)
            try:
                t['access_all'].append(timed(lambda: check(cu.cuMemSetAccess(va, u64(n * 2 * MiB), ctypes.byref(access), u64(1)), 'access over handles')))
                t['unmap_all'].append(timed(lambda: check(cu.cuMemUnmap(va, u64(n * 2 * MiB)), 'unmap over handles')))
            except RuntimeError as e:
                print('multi', n, e, flush=True)
                ok = False
                for i in range(n):
                    cu.cuMemUnmap(u64(va.value + i * 2 * MiB), u64(2 * MiB))
            t['release_each'].append(sum(timed(lambda h=h: check(cu.cuMemRelease(h), 'release')) for h in hs) / n)
            if not ok:
                break
        row = {'handles': n, 'ok': ok} | {k: round(statistics.median(v), 1) for k, v in t.items() if v}
        rows.append(row)
        print(' '.join(f'{k}={v}' for k, v in row.items()), flush=True)
    cu.cuMemAddressFree(va, u64(space))
    with open(os.path.join(OUT, 'vmm_cost.json'), 'w') as f:
        json.dump(rows, f, indent=1)


if __name__ == '__main__':
    main()
