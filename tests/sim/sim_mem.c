/* sim_mem.c - device memory of the simulated driver: cuMemAlloc/cuMemFree
 * and their async forms, cuMemGetInfo, synchronous copies and memset,
 * pointer attributes, and the registry of live device memory.
 *
 * Each cuMemAlloc block is its own anonymous MAP_NORESERVE mapping, so a
 * device pointer is a host address tests can read and write, and a large
 * block costs nothing until touched. The registry is one array of regions
 * (cuMemAlloc blocks and cuMemMap mappings) sorted by address: kernels look
 * up every range they touch in it, and cuMemFree finds blocks in it.
 */
#include "sim_internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- the registry ---- */

/* Index of the first region starting above addr. */
static size_t upper_bound(uintptr_t addr)
{
    size_t lo = 0, hi = sim.n_regions;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (sim.regions[mid]->base <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

sim_region_t *sim_region_find(uintptr_t addr)
{
    size_t i = upper_bound(addr);
    if (i == 0)
        return NULL;
    sim_region_t *r = sim.regions[i - 1];
    return addr - r->base < r->size ? r : NULL;
}

sim_region_t *sim_region_at(uintptr_t base, sim_region_kind_t kind)
{
    sim_region_t *r = sim_region_find(base);
    return r && r->base == base && r->kind == kind ? r : NULL;
}

CUresult sim_region_insert(sim_region_t *r)
{
    void *p = sim_grow(sim.regions, &sim.cap_regions, sim.n_regions + 1,
                       sizeof *sim.regions);
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    sim.regions = p;
    size_t i = upper_bound(r->base);
    memmove(&sim.regions[i + 1], &sim.regions[i],
            (sim.n_regions - i) * sizeof *sim.regions);
    sim.regions[i] = r;
    sim.n_regions++;
    r->id = sim.next_id++;
    return CUDA_SUCCESS;
}

void sim_region_remove(sim_region_t *r)
{
    size_t i = upper_bound(r->base) - 1;
    memmove(&sim.regions[i], &sim.regions[i + 1],
            (sim.n_regions - i - 1) * sizeof *sim.regions);
    sim.n_regions--;
}

/* Give a cuMemAlloc block back: the device and the host both get it. */
void sim_region_release(sim_region_t *r)
{
    sim_uncharge(r->dev, r->charged);
    munmap((void *)r->base, r->map_len);
    sim_region_remove(r);
    free(r);
}

/* Could a kernel touch [p, p+n)? Every byte must be in a live block or in a
 * mapping whose access allows it; adjacent mappings may share the range, as
 * an expandable segment's chunks do. */
bool sim_range_accessible(uintptr_t p, size_t n, bool write)
{
    if (n == 0)
        return true;
    if (p + n < p)
        return false;
    while (n) {
        sim_region_t *r = sim_region_find(p);
        if (!r)
            return false;
        int need = write ? PROT_WRITE : PROT_READ;
        if (r->kind == SIM_REGION_MAP && !(r->prot & need))
            return false;
        size_t avail = r->base + r->size - p;
        if (avail >= n)
            return true;
        p += avail;
        n -= avail;
    }
    return true;
}

/* No region intersects [p, p+n). */
bool sim_range_unused(uintptr_t p, size_t n)
{
    if (sim_region_find(p))
        return false;
    size_t i = upper_bound(p);
    return i == sim.n_regions || sim.regions[i]->base - p >= n;
}

/* Drop every cuMemAlloc block (simcu_reset, exit); mappings went first. */
void sim_mem_free_all(void)
{
    while (sim.n_regions)
        sim_region_release(sim.regions[sim.n_regions - 1]);
    free(sim.regions);
    sim.regions = NULL;
    sim.cap_regions = 0;
}

/* ---- allocation ---- */

static size_t round_up(size_t v, size_t to)
{
    return (v + to - 1) / to * to;
}

static CUresult map_block(size_t len, bool low32, void **out)
{
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    if (low32) {
#ifdef MAP_32BIT
        flags |= MAP_32BIT; /* the legacy ABI has 32-bit device pointers */
#else
        return CUDA_ERROR_NOT_SUPPORTED;
#endif
    }
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (p == MAP_FAILED)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *out = p;
    return CUDA_SUCCESS;
}

/* One allocation call: counted, maybe failed on purpose, charged against
 * the device, then backed by host memory. Lock held. */
static CUresult alloc_locked(int dev, size_t bytes, bool low32,
                             CUdeviceptr *dptr)
{
    if (sim_alloc_call_fails())
        return sim_injected_error();
    long page = sysconf(_SC_PAGESIZE);
    if (bytes > SIZE_MAX - (size_t)page)
        return CUDA_ERROR_OUT_OF_MEMORY;
    size_t charged = round_up(bytes, SIM_ALLOC_ROUND);
    CUresult r = sim_charge(dev, charged);
    if (r)
        return r;
    sim_region_t *reg = calloc(1, sizeof *reg);
    void *p = NULL;
    size_t map_len = round_up(bytes, (size_t)page);
    r = reg ? map_block(map_len, low32, &p) : CUDA_ERROR_OUT_OF_MEMORY;
    if (!r) {
        *reg = (sim_region_t){.base = (uintptr_t)p, .size = bytes,
                              .kind = SIM_REGION_ALLOC, .dev = dev,
                              .charged = charged, .map_len = map_len};
        r = sim_region_insert(reg);
        if (r)
            munmap(p, map_len);
    }
    if (r) {
        free(reg);
        sim_uncharge(dev, charged);
        return r;
    }
    *dptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

/* cuMemAlloc is a "potentially unsafe" call during a global-mode capture. */
static CUresult alloc_sync(CUdeviceptr *dptr, size_t bytes, bool low32)
{
    sim_lock();
    int dev;
    CUresult r = sim_current_dev(&dev);
    if (!r && (!dptr || bytes == 0))
        r = CUDA_ERROR_INVALID_VALUE;
    if (!r)
        r = sim_unsafe_call_check();
    if (!r)
        r = alloc_locked(dev, bytes, low32, dptr);
    sim_unlock();
    return r;
}

CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    SIM_CALLED(cuMemAlloc_v2);
    return alloc_sync(dptr, bytesize, false);
}

CUresult CUDAAPI cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
    SIM_CALLED(cuMemAlloc);
    if (!dptr)
        return CUDA_ERROR_INVALID_VALUE;
    CUdeviceptr p = 0;
    CUresult r = alloc_sync(&p, bytesize, true);
    if (!r)
        *dptr = (CUdeviceptr_v1)p;
    return r;
}

/* cuMemFree keeps CUDA's promise: memory is released only once all work
 * enqueued on the device before the call has completed, which makes it a
 * device-wide synchronization (counted in simcu_sync_count). */
static CUresult free_sync(CUdeviceptr dptr)
{
    sim_lock();
    int dev;
    sim_region_t *reg = NULL;
    CUresult r = sim_current_dev(&dev);
    if (r || dptr == 0)
        goto out;
    r = sim_unsafe_call_check();
    reg = r ? NULL : sim_region_at((uintptr_t)dptr, SIM_REGION_ALLOC);
    if (!r && (!reg || reg->free_pending))
        r = CUDA_ERROR_INVALID_VALUE;
    if (!r)
        r = sim_device_sync_check(reg->dev);
    if (!r) {
        reg->free_pending = true; /* a racing second free now fails */
        sim.syncs++;
        sim_device_sync(reg->dev, sim.seq);
        sim_region_release(reg);
    }
out:
    sim_unlock();
    return r;
}

CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr)
{
    SIM_CALLED(cuMemFree_v2);
    return free_sync(dptr);
}

CUresult CUDAAPI cuMemFree(CUdeviceptr_v1 dptr)
{
    SIM_CALLED(cuMemFree);
    return free_sync(dptr);
}

/* ---- stream-ordered allocation ---- */

/* Memory is taken at once (a fresh block cannot be in use by older work). */
static CUresult alloc_async(CUdeviceptr *dptr, size_t bytes, CUstream h,
                            bool ptds)
{
    sim_lock();
    struct CUstream_st *s = NULL;
    CUresult r = sim_stream_resolve(h, ptds, &s);
    if (!r && (!dptr || bytes == 0))
        r = CUDA_ERROR_INVALID_VALUE;
    if (!r && s->cap == SIM_CAP_INVALIDATED)
        r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    if (!r)
        r = alloc_locked(s->dev, bytes, false, dptr);
    sim_unlock();
    return r;
}

CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize,
                                 CUstream hStream)
{
    SIM_CALLED(cuMemAllocAsync);
    return alloc_async(dptr, bytesize, hStream, false);
}

CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                      CUstream hStream)
{
    SIM_CALLED(cuMemAllocAsync_ptsz);
    return alloc_async(dptr, bytesize, hStream, true);
}

/* The release is queued on the stream: it happens once the work enqueued
 * there before it has completed, and nobody waits for it. */
static CUresult free_async(CUdeviceptr dptr, CUstream h, bool ptds)
{
    sim_lock();
    struct CUstream_st *s = NULL;
    sim_region_t *reg = NULL;
    CUresult r = sim_stream_resolve(h, ptds, &s);
    if (r || dptr == 0)
        goto out;
    reg = sim_region_at((uintptr_t)dptr, SIM_REGION_ALLOC);
    if (!reg || reg->free_pending) {
        r = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    sim_item_t *it = sim_item_new(SIM_WORK_RELEASE);
    if (it)
        it->region = reg;
    reg->free_pending = true;
    r = sim_enqueue(s, it);
    if (r)
        reg->free_pending = false;
out:
    sim_unlock();
    return r;
}

CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    SIM_CALLED(cuMemFreeAsync);
    return free_async(dptr, hStream, false);
}

CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    SIM_CALLED(cuMemFreeAsync_ptsz);
    return free_async(dptr, hStream, true);
}

/* ---- information ---- */

static CUresult mem_info(size_t *free_bytes, size_t *total)
{
    sim_lock();
    int dev;
    CUresult r = sim_current_dev(&dev);
    if (!r && (!free_bytes || !total))
        r = CUDA_ERROR_INVALID_VALUE;
    if (!r) {
        sim_dev_t *d = &sim.dev[dev];
        size_t used = d->external > SIZE_MAX - d->used ? SIZE_MAX
                                                       : d->external + d->used;
        *total = d->capacity;
        *free_bytes = used >= d->capacity ? 0 : d->capacity - used;
    }
    sim_unlock();
    return r;
}

CUresult CUDAAPI cuMemGetInfo_v2(size_t *free, size_t *total)
{
    SIM_CALLED(cuMemGetInfo_v2);
    return mem_info(free, total);
}

CUresult CUDAAPI cuMemGetInfo(unsigned int *free, unsigned int *total)
{
    SIM_CALLED(cuMemGetInfo);
    size_t f = 0, t = 0;
    CUresult r = mem_info(free ? &f : NULL, total ? &t : NULL);
    if (!r) {
        *free = f > UINT_MAX ? UINT_MAX : (unsigned int)f;
        *total = t > UINT_MAX ? UINT_MAX : (unsigned int)t;
    }
    return r;
}

CUresult CUDAAPI cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize,
                                         CUdeviceptr dptr)
{
    SIM_CALLED(cuMemGetAddressRange_v2);
    sim_lock();
    int dev;
    CUresult r = sim_current_dev(&dev);
    sim_region_t *reg = r ? NULL : sim_region_find((uintptr_t)dptr);
    if (!r && !reg)
        r = CUDA_ERROR_NOT_FOUND;
    if (!r && pbase)
        *pbase = (CUdeviceptr)reg->base;
    if (!r && psize)
        *psize = reg->size;
    sim_unlock();
    return r;
}

static CUresult pointer_attribute(void *data, CUpointer_attribute attr,
                                  const sim_region_t *reg, CUdeviceptr ptr)
{
    switch (attr) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        *(CUcontext *)data = &sim.dev[reg->dev].ctx;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned int *)data = CU_MEMORYTYPE_DEVICE;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        *(CUdeviceptr *)data = ptr;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = reg->dev;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
        *(unsigned long long *)data = reg->id;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *(CUdeviceptr *)data = (CUdeviceptr)reg->base;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *(size_t *)data = reg->size;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *(bool *)data = false;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED:
        *(bool *)data = true;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

CUresult CUDAAPI cuPointerGetAttribute(void *data, CUpointer_attribute attribute,
                                       CUdeviceptr ptr)
{
    SIM_CALLED(cuPointerGetAttribute);
    sim_lock();
    CUresult r = sim_check_init();
    sim_region_t *reg = r ? NULL : sim_region_find((uintptr_t)ptr);
    if (!r && (!data || !reg))
        r = CUDA_ERROR_INVALID_VALUE;
    if (!r)
        r = pointer_attribute(data, attribute, reg, ptr);
    sim_unlock();
    return r;
}

/* ---- synchronous copies and memset ----
 * They run on the legacy default stream of the current context, so they see
 * the results of earlier kernels on blocking streams, and return once done. */

static CUresult sync_op(sim_item_t *it)
{
    int dev;
    CUresult r = sim_current_dev(&dev);
    struct CUstream_st *s = NULL;
    if (!r && it->bytes == 0) {
        free(it);
        return CUDA_SUCCESS;
    }
    if (!r && ((it->check_dst && !sim_range_accessible(it->dst, it->bytes, true)) ||
               (it->check_src && !sim_range_accessible(it->src, it->bytes, false))))
        r = CUDA_ERROR_INVALID_VALUE;
    if (!r)
        r = sim_stream_resolve(CU_STREAM_LEGACY, false, &s);
    if (r) {
        free(it);
        return r;
    }
    return sim_run_sync(s, it);
}

static CUresult copy_sync(uintptr_t dst, uintptr_t src, size_t n, bool dst_dev,
                          bool src_dev)
{
    if ((!dst || !src) && n)
        return CUDA_ERROR_INVALID_VALUE;
    sim_item_t *it = sim_item_new(SIM_WORK_COPY);
    if (!it)
        return CUDA_ERROR_OUT_OF_MEMORY;
    it->dst = dst;
    it->src = src;
    it->bytes = n;
    it->check_dst = dst_dev;
    it->check_src = src_dev;
    sim_lock();
    CUresult r = sync_op(it);
    sim_unlock();
    return r;
}

CUresult CUDAAPI cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost,
                                 size_t ByteCount)
{
    SIM_CALLED(cuMemcpyHtoD_v2);
    return copy_sync((uintptr_t)dstDevice, (uintptr_t)srcHost, ByteCount,
                     true, false);
}

CUresult CUDAAPI cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice,
                                 size_t ByteCount)
{
    SIM_CALLED(cuMemcpyDtoH_v2);
    return copy_sync((uintptr_t)dstHost, (uintptr_t)srcDevice, ByteCount,
                     false, true);
}

CUresult CUDAAPI cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                 size_t ByteCount)
{
    SIM_CALLED(cuMemcpyDtoD_v2);
    return copy_sync((uintptr_t)dstDevice, (uintptr_t)srcDevice, ByteCount,
                     true, true);
}

/* Unified addressing: either side may be host or device memory. */
CUresult CUDAAPI cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
    SIM_CALLED(cuMemcpy);
    return copy_sync((uintptr_t)dst, (uintptr_t)src, ByteCount, false, false);
}

CUresult CUDAAPI cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc,
                               size_t N)
{
    SIM_CALLED(cuMemsetD8_v2);
    sim_item_t *it = sim_item_new(SIM_WORK_FILL);
    if (!it)
        return CUDA_ERROR_OUT_OF_MEMORY;
    it->dst = (uintptr_t)dstDevice;
    it->value = uc;
    it->bytes = N;
    it->check_dst = true;
    sim_lock();
    CUresult r = sync_op(it);
    sim_unlock();
    return r;
}

/* ---- checks for tests ---- */

int simcu_is_device_memory(CUdeviceptr p, size_t bytes)
{
    sim_lock();
    int ok = sim_range_accessible((uintptr_t)p, bytes, true);
    sim_unlock();
    return ok;
}

typedef struct span {
    uintptr_t base;
    size_t size;
    size_t index;
} span_t;

static int span_cmp(const void *a, const void *b)
{
    const span_t *x = a, *y = b;
    return (x->base > y->base) - (x->base < y->base);
}

/* Sort, then any overlap shows between neighbours... or between a long
 * range and any later one, so track the furthest end seen so far. */
static int spans_overlap(span_t *v, size_t n, size_t *first, size_t *second)
{
    qsort(v, n, sizeof *v, span_cmp);
    size_t far = 0;
    for (size_t i = 1; i < n; i++) {
        if (v[i].base - v[far].base < v[far].size) {
            if (first)
                *first = v[far].index;
            if (second)
                *second = v[i].index;
            return 1;
        }
        if (v[i].base + v[i].size > v[far].base + v[far].size)
            far = i;
    }
    return 0;
}

int simcu_ranges_overlap(const CUdeviceptr *base, const size_t *size, size_t n,
                         size_t *first, size_t *second)
{
    span_t *v = calloc(n ? n : 1, sizeof *v);
    size_t m = 0;
    if (!v)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (size[i])
            v[m++] = (span_t){(uintptr_t)base[i], size[i], i};
    int res = spans_overlap(v, m, first, second);
    free(v);
    return res;
}

/* Blocks, mappings and reservations are real host mappings, so the kernel
 * keeps them apart; this checks the bookkeeping says the same: blocks and
 * mappings pairwise disjoint, each mapping inside one reservation, no block
 * inside any reservation. */
int simcu_check_no_overlap(void)
{
    sim_lock();
    size_t n = sim.n_regions + sim.n_resv;
    span_t *v = calloc(n ? n : 1, sizeof *v);
    int bad = v ? 0 : -1;
    size_t m = 0;
    for (size_t i = 0; v && i < sim.n_regions; i++) {
        sim_region_t *r = sim.regions[i];
        size_t len = r->kind == SIM_REGION_ALLOC ? r->map_len : r->size;
        if (r->kind == SIM_REGION_ALLOC)
            v[m++] = (span_t){r->base, len, i};
        bool inside = false;
        for (size_t j = 0; j < sim.n_resv; j++)
            inside |= r->base - sim.resv[j].base < sim.resv[j].size &&
                      r->base + r->size <= sim.resv[j].base + sim.resv[j].size;
        bad |= inside != (r->kind == SIM_REGION_MAP);
    }
    for (size_t j = 0; v && j < sim.n_resv; j++)
        v[m++] = (span_t){sim.resv[j].base, sim.resv[j].size, sim.n_regions + j};
    /* Mappings are checked against each other through the sorted registry. */
    for (size_t i = 1; v && i < sim.n_regions; i++)
        bad |= sim.regions[i]->base <
               sim.regions[i - 1]->base + sim.regions[i - 1]->size;
    if (v && !bad)
        bad = spans_overlap(v, m, NULL, NULL);
    free(v);
    sim_unlock();
    return bad;
}
