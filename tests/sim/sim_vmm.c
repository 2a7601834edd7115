/* sim_vmm.c - the driver's virtual memory management API on host memory.
 *
 *   cuMemAddressReserve  PROT_NONE MAP_NORESERVE mapping, aligned
 *   cuMemCreate          a slice of the device's memfd (physical memory)
 *   cuMemMap             that slice mapped MAP_SHARED|MAP_FIXED in a
 *                        reservation, so its data survives unmap and remap
 *   cuMemSetAccess       mprotect to what was granted
 *   cuMemUnmap           PROT_NONE anonymous memory back in its place
 *   cuMemRelease         the handle goes once released AND unmapped
 *
 * One memfd per device, not one per handle: an expandable segment of tens
 * of GiB is thousands of 2 MiB handles, more than the file descriptors a
 * test process may have. Slices are carved first-fit from a sparse file and
 * their pages punched out on release.
 */
#include "sim_internal.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MEMFD_STEP ((size_t)64 << 30) /* sparse: costs nothing untouched */

static CUresult vmm_check(void)
{
    CUresult r = sim_check_init();
    if (!r && sim.no_vmm)
        r = CUDA_ERROR_NOT_SUPPORTED;
    return r;
}

static CUresult prop_check(const CUmemAllocationProp *prop)
{
    if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
        prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    return sim_dev_valid(prop->location.id) ? CUDA_SUCCESS
                                            : CUDA_ERROR_INVALID_DEVICE;
}

static bool aligned(uintptr_t v, size_t to)
{
    return v % to == 0;
}

/* ---- slices of the device memfd ---- */

static bool ext_insert(sim_dev_t *d, size_t i, sim_extent_t e)
{
    void *p = sim_grow(d->free_ext, &d->cap_free_ext, d->n_free_ext + 1,
                       sizeof *d->free_ext);
    if (!p)
        return false;
    d->free_ext = p;
    memmove(&d->free_ext[i + 1], &d->free_ext[i],
            (d->n_free_ext - i) * sizeof *d->free_ext);
    d->free_ext[i] = e;
    d->n_free_ext++;
    return true;
}

static void ext_erase(sim_dev_t *d, size_t i)
{
    memmove(&d->free_ext[i], &d->free_ext[i + 1],
            (d->n_free_ext - i - 1) * sizeof *d->free_ext);
    d->n_free_ext--;
}

/* Return a slice, merging it with free neighbours. */
static void ext_free(sim_dev_t *d, size_t off, size_t len)
{
    size_t i = 0;
    while (i < d->n_free_ext && d->free_ext[i].off < off)
        i++;
    if (i > 0 && d->free_ext[i - 1].off + d->free_ext[i - 1].len == off) {
        d->free_ext[i - 1].len += len;
        if (i < d->n_free_ext && off + len == d->free_ext[i].off) {
            d->free_ext[i - 1].len += d->free_ext[i].len;
            ext_erase(d, i);
        }
    } else if (i < d->n_free_ext && off + len == d->free_ext[i].off) {
        d->free_ext[i].off = off;
        d->free_ext[i].len += len;
    } else {
        /* Out of memory here only leaks file space, never data. */
        (void)ext_insert(d, i, (sim_extent_t){off, len});
    }
}

static bool ext_take(sim_dev_t *d, size_t len, size_t *off)
{
    for (size_t i = 0; i < d->n_free_ext; i++) {
        sim_extent_t *e = &d->free_ext[i];
        if (e->len < len)
            continue;
        *off = e->off;
        e->off += len;
        e->len -= len;
        if (e->len == 0)
            ext_erase(d, i);
        return true;
    }
    return false;
}

/* Grow the sparse file by at least `len` and hand the new space out. */
static bool memfd_grow(sim_dev_t *d, size_t len)
{
    if (d->memfd < 0) {
        d->memfd = memfd_create("simcu-vmm", MFD_CLOEXEC);
        if (d->memfd < 0)
            return false;
    }
    size_t add = len > MEMFD_STEP ? len : MEMFD_STEP;
    if (ftruncate(d->memfd, (off_t)(d->memfd_size + add)) != 0)
        return false;
    ext_free(d, d->memfd_size, add);
    d->memfd_size += add;
    return true;
}

static bool slice_take(sim_dev_t *d, size_t len, size_t *off)
{
    return ext_take(d, len, off) || (memfd_grow(d, len) && ext_take(d, len, off));
}

/* ---- physical handles ---- */

/* Index of the first handle with an id >= id. */
static size_t handle_index(uint64_t id)
{
    size_t lo = 0, hi = sim.n_handles;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (sim.handles[mid]->id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* A handle the caller may still use: created or retained, not released. */
static sim_handle_t *handle_find(CUmemGenericAllocationHandle id)
{
    size_t i = handle_index(id);
    if (i < sim.n_handles && sim.handles[i]->id == id && sim.handles[i]->refs > 0)
        return sim.handles[i];
    return NULL;
}

static void handle_free(sim_handle_t *h)
{
    sim_dev_t *d = &sim.dev[h->dev];
    /* Drop the pages: the next handle in this slice starts from zeros. */
    fallocate(d->memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
              (off_t)h->file_off, (off_t)h->size);
    ext_free(d, h->file_off, h->size);
    sim_uncharge(h->dev, h->size);
    size_t i = handle_index(h->id);
    memmove(&sim.handles[i], &sim.handles[i + 1],
            (sim.n_handles - i - 1) * sizeof *sim.handles);
    sim.n_handles--;
    free(h);
}

/* Memory counts as used until the handle is released AND unmapped. */
static void handle_drop(sim_handle_t *h)
{
    if (h->refs == 0 && h->maps == 0)
        handle_free(h);
}

static CUresult handle_create(const CUmemAllocationProp *prop, size_t size,
                              CUmemGenericAllocationHandle *out)
{
    if (sim_alloc_call_fails())
        return sim_injected_error();
    int dev = prop->location.id;
    CUresult r = sim_charge(dev, size);
    if (r)
        return r;
    sim_handle_t *h = calloc(1, sizeof *h);
    void *arr = sim_grow(sim.handles, &sim.cap_handles, sim.n_handles + 1,
                         sizeof *sim.handles);
    size_t off;
    if (arr)
        sim.handles = arr;
    if (!h || !arr || !slice_take(&sim.dev[dev], size, &off)) {
        free(h);
        sim_uncharge(dev, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *h = (sim_handle_t){.id = sim.next_id++, .dev = dev, .size = size,
                        .file_off = off, .refs = 1, .prop = *prop};
    sim.handles[sim.n_handles++] = h; /* ids only grow: stays sorted */
    *out = h->id;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                             const CUmemAllocationProp *prop,
                             unsigned long long flags)
{
    SIM_CALLED(cuMemCreate);
    sim_lock();
    CUresult r = vmm_check();
    if (!r && (!handle || flags))
        r = CUDA_ERROR_INVALID_VALUE;
    if (!r)
        r = prop_check(prop);
    if (!r && (size == 0 || !aligned(size, SIM_GRANULARITY)))
        r = CUDA_ERROR_INVALID_VALUE;
    if (!r)
        r = handle_create(prop, size, handle);
    sim_unlock();
    return r;
}

CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle)
{
    SIM_CALLED(cuMemRelease);
    sim_lock();
    CUresult r = vmm_check();
    sim_handle_t *h = r ? NULL : handle_find(handle);
    if (!r && !h)
        r = CUDA_ERROR_INVALID_VALUE;
    if (!r) {
        h->refs--;
        handle_drop(h);
    }
    sim_unlock();
    return r;
}

CUresult CUDAAPI cuMemGetAllocationPropertiesFromHandle(
    CUmemAllocationProp *prop, CUmemGenericAllocationHandle handle)
{
    SIM_CALLED(cuMemGetAllocationPropertiesFromHandle);
    sim_lock();
    CUresult r = vmm_check();
    sim_handle_t *h = r ? NULL : handle_find(handle);
    if (!r && (!h || !prop))
        r = CUDA_ERROR_INVALID_VALUE;
    if (!r)
        *prop = h->prop;
    sim_unlock();
    return r;
}

CUresult CUDAAPI cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle,
                                             void *addr)
{
    SIM_CALLED(cuMemRetainAllocationHandle);
    sim_lock();
    CUresult r = vmm_check();
    sim_region_t *m = r ? NULL : sim_region_find((uintptr_t)addr);
    if (!r && (!handle || !m || m->kind != SIM_REGION_MAP))
        r = CUDA_ERROR_INVALID_VALUE;
    if (!r) {
        m->handle->refs++;
        *handle = m->handle->id;
    }
    sim_unlock();
    return r;
}

CUresult CUDAAPI cuMemGetAllocationGranularity(
    size_t *granularity, const CUmemAllocationProp *prop,
    CUmemAllocationGranularity_flags option)
{
    SIM_CALLED(cuMemGetAllocationGranularity);
    sim_lock();
    CUresult r = vmm_check();
    if (!r && !granularity)
        r = CUDA_ERROR_INVALID_VALUE;
    if (!r)
        r = prop_check(prop);
    if (!r && option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
        option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)
        r = CUDA_ERROR_INVALID_VALUE;
    if (!r)
        *granularity = SIM_GRANULARITY;
    sim_unlock();
    return r;
}

/* ---- address reservations ---- */

static sim_reservation_t *resv_find(uintptr_t p, size_t n)
{
    for (size_t i = 0; i < sim.n_resv; i++) {
        sim_reservation_t *v = &sim.resv[i];
        if (p - v->base < v->size && n <= v->size - (p - v->base))
            return v;
    }
    return NULL;
}

static void *map_none(void *at, size_t len, int extra)
{
    return mmap(at, len, PROT_NONE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | extra, -1, 0);
}

/* A PROT_NONE range at `hint` when it is free, else anywhere, aligned. */
static void *reserve_range(size_t size, size_t align, uintptr_t hint)
{
    if (hint && aligned(hint, align)) {
        void *p = map_none((void *)hint, size, MAP_FIXED_NOREPLACE);
        if (p == (void *)hint)
            return p;
        if (p != MAP_FAILED) /* a kernel that ignores the flag */
            munmap(p, size);
    }
    if (size > SIZE_MAX - align)
        return NULL;
    char *raw = map_none(NULL, size + align, 0);
    if (raw == MAP_FAILED)
        return NULL;
    uintptr_t start = ((uintptr_t)raw + align - 1) / align * align;
    size_t head = start - (uintptr_t)raw;
    if (head)
        munmap(raw, head);
    if (align - head)
        munmap((void *)(start + size), align - head);
    return (void *)start;
}

CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr *ptr, size_t size,
                                     size_t alignment, CUdeviceptr addr,
                                     unsigned long long flags)
{
    SIM_CALLED(cuMemAddressReserve);
    sim_lock();
    CUresult r = vmm_check();
    if (alignment == 0)
        alignment = SIM_GRANULARITY;
    if (!r && (!ptr || flags || size == 0 || !aligned(size, SIM_GRANULARITY) ||
               (alignment & (alignment - 1))))
        r = CUDA_ERROR_INVALID_VALUE;
    if (alignment < SIM_GRANULARITY)
        alignment = SIM_GRANULARITY; /* mappings need granularity anyway */
    void *arr = r ? NULL : sim_grow(sim.resv, &sim.cap_resv, sim.n_resv + 1,
                                    sizeof *sim.resv);
    if (!r && !arr)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (arr) /* the grow may have moved it: keep it whatever follows */
        sim.resv = arr;
    void *p = r ? NULL : reserve_range(size, alignment, (uintptr_t)addr);
    if (!r && !p)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (!r) {
        sim.resv[sim.n_resv++] = (sim_reservation_t){(uintptr_t)p, size};
        *ptr = (CUdeviceptr)(uintptr_t)p;
    }
    sim_unlock();
    return r;
}

/* Strict: the whole reservation, and nothing may still be mapped in it. */
CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    SIM_CALLED(cuMemAddressFree);
    sim_lock();
    CUresult r = vmm_check();
    sim_reservation_t *v = r ? NULL : resv_find((uintptr_t)ptr, size);
    if (!r && (!v || v->base != ptr || v->size != size ||
               !sim_range_unused(v->base, v->size)))
        r = CUDA_ERROR_INVALID_VALUE;
    if (!r) {
        munmap((void *)v->base, v->size);
        *v = sim.resv[--sim.n_resv];
    }
    sim_unlock();
    return r;
}

/* ---- mapping ---- */

static CUresult map_checks(uintptr_t p, size_t size, size_t offset,
                           const sim_handle_t *h, unsigned long long flags)
{
    if (flags || offset || !h || size == 0 || size > h->size ||
        !aligned(p, SIM_GRANULARITY) || !aligned(size, SIM_GRANULARITY))
        return CUDA_ERROR_INVALID_VALUE;
    if (!resv_find(p, size) || !sim_range_unused(p, size))
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                          CUmemGenericAllocationHandle handle,
                          unsigned long long flags)
{
    SIM_CALLED(cuMemMap);
    sim_lock();
    CUresult r = vmm_check();
    sim_handle_t *h = r ? NULL : handle_find(handle);
    uintptr_t p = (uintptr_t)ptr;
    if (!r)
        r = map_checks(p, size, offset, h, flags);
    sim_region_t *m = r ? NULL : calloc(1, sizeof *m);
    if (!r && !m)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    /* PROT_NONE until cuMemSetAccess, as in CUDA. */
    if (!r && mmap((void *)p, size, PROT_NONE, MAP_SHARED | MAP_FIXED,
                   sim.dev[h->dev].memfd, (off_t)h->file_off) == MAP_FAILED)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (!r) {
        *m = (sim_region_t){.base = p, .size = size, .kind = SIM_REGION_MAP,
                            .dev = h->dev, .handle = h, .prot = PROT_NONE};
        r = sim_region_insert(m);
        if (r)
            map_none((void *)p, size, MAP_FIXED);
    }
    if (r)
        free(m);
    else
        h->maps++;
    sim_unlock();
    return r;
}

/* [p, p+size) must be whole mappings laid end to end. */
static bool whole_mappings(uintptr_t p, size_t size)
{
    uintptr_t end = p + size;
    if (size == 0 || end < p)
        return false;
    while (p < end) {
        sim_region_t *m = sim_region_at(p, SIM_REGION_MAP);
        if (!m || m->size > end - p)
            return false;
        p += m->size;
    }
    return true;
}

CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    SIM_CALLED(cuMemUnmap);
    sim_lock();
    CUresult r = vmm_check();
    uintptr_t p = (uintptr_t)ptr, end = p + size;
    if (!r && !whole_mappings(p, size))
        r = CUDA_ERROR_INVALID_VALUE;
    while (!r && p < end) {
        sim_region_t *m = sim_region_at(p, SIM_REGION_MAP);
        p += m->size;
        map_none((void *)m->base, m->size, MAP_FIXED); /* back to reserved */
        sim_region_remove(m);
        m->handle->maps--;
        handle_drop(m->handle);
        free(m);
    }
    sim_unlock();
    return r;
}

static CUresult access_prot(const CUmemAccessDesc *desc, size_t count,
                            int *prot)
{
    *prot = PROT_NONE;
    if (!desc || count == 0)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < count; i++) {
        if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE)
            return CUDA_ERROR_INVALID_VALUE;
        if (!sim_dev_valid(desc[i].location.id))
            return CUDA_ERROR_INVALID_DEVICE;
        switch (desc[i].flags) {
        case CU_MEM_ACCESS_FLAGS_PROT_NONE:
            break;
        case CU_MEM_ACCESS_FLAGS_PROT_READ:
            *prot |= PROT_READ;
            break;
        case CU_MEM_ACCESS_FLAGS_PROT_READWRITE:
            *prot |= PROT_READ | PROT_WRITE;
            break;
        default:
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    return CUDA_SUCCESS;
}

/* The host view stands for every device's: the widest grant wins. */
CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size,
                                const CUmemAccessDesc *desc, size_t count)
{
    SIM_CALLED(cuMemSetAccess);
    sim_lock();
    int prot = PROT_NONE;
    CUresult r = vmm_check();
    if (!r)
        r = access_prot(desc, count, &prot);
    uintptr_t p = (uintptr_t)ptr, end = p + size;
    if (!r && !whole_mappings(p, size))
        r = CUDA_ERROR_INVALID_VALUE;
    while (!r && p < end) {
        sim_region_t *m = sim_region_at(p, SIM_REGION_MAP);
        if (mprotect((void *)m->base, m->size, prot) != 0)
            r = CUDA_ERROR_OUT_OF_MEMORY;
        else
            m->prot = prot;
        p += m->size;
    }
    sim_unlock();
    return r;
}

CUresult CUDAAPI cuMemGetAccess(unsigned long long *flags,
                                const CUmemLocation *location, CUdeviceptr ptr)
{
    SIM_CALLED(cuMemGetAccess);
    sim_lock();
    CUresult r = vmm_check();
    sim_region_t *m = r ? NULL : sim_region_find((uintptr_t)ptr);
    if (!r && (!flags || !location || !m || m->kind != SIM_REGION_MAP))
        r = CUDA_ERROR_INVALID_VALUE;
    if (!r)
        *flags = (m->prot & PROT_WRITE)  ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE
                 : (m->prot & PROT_READ) ? CU_MEM_ACCESS_FLAGS_PROT_READ
                                         : CU_MEM_ACCESS_FLAGS_PROT_NONE;
    sim_unlock();
    return r;
}

/* simcu_reset and exit: mappings, reservations, handles, files. */
void sim_vmm_free_all(void)
{
    size_t keep = 0;
    for (size_t i = 0; i < sim.n_regions; i++) {
        if (sim.regions[i]->kind == SIM_REGION_MAP)
            free(sim.regions[i]);
        else
            sim.regions[keep++] = sim.regions[i];
    }
    sim.n_regions = keep;
    for (size_t i = 0; i < sim.n_resv; i++)
        munmap((void *)sim.resv[i].base, sim.resv[i].size);
    free(sim.resv);
    sim.resv = NULL;
    sim.n_resv = sim.cap_resv = 0;
    for (size_t i = 0; i < sim.n_handles; i++)
        free(sim.handles[i]);
    free(sim.handles);
    sim.handles = NULL;
    sim.n_handles = sim.cap_handles = 0;
    for (int i = 0; i < SIM_MAX_DEVICES; i++) {
        sim_dev_t *d = &sim.dev[i];
        if (d->memfd >= 0)
            close(d->memfd);
        free(d->free_ext);
        *d = (sim_dev_t){.ctx = d->ctx, .ctx_refs = d->ctx_refs,
                         .capacity = d->capacity, .external = d->external,
                         .used = d->used, .peak = d->peak, .legacy = d->legacy,
                         .memfd = -1};
    }
}
