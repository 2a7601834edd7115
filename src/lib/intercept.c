/* intercept.c: what happens at each interposed call.
 *
 * Each handler calls the real function and records the outcome in the
 * tracker. A thread-local depth makes only the outermost call record: the
 * runtime's cudaMalloc reaches the driver's cuMemAlloc through the pointer we
 * handed it, and that inner call must pass straight through. Frees are
 * recorded before the real free, so the address cannot be handed out again
 * (and recorded by another thread) before we forget it. Lookups (dlsym,
 * cuGetProcAddress, cudaGetDriverEntryPoint) swap a real function for our
 * hook only when the pointer is exactly the real ABI we wrap. */
#include <dlfcn.h>
#include <link.h>
#include <string.h>

#include "hooks.h"
#include "lib.h"
#include "prim.h"

static _Thread_local int depth;
static void *const *hook_table;
static atomic_bool warned_missing_runtime;

void ol_intercept_install(void *const hooks[OL_FN_COUNT])
{
  hook_table = hooks;
}

/* True when this call is the outermost and oomlens is on: record it. */
static bool enter(void)
{
  if (depth++ > 0)
    return false;
  return ol_lifecycle_enabled();
}

static void leave(void)
{
  depth--;
}

const char *ol_on_version(void)
{
  return OL_VERSION_TEXT;
}

int ol_on_write_report(void)
{
  return ol_lifecycle_enabled() ? ol_report_write_all("request") : -1;
}

int ol_on_capture(int on)
{
  if (!ol_lifecycle_enabled())
    return -1;
  return ol_stacks_set_paused(on == 0) ? 0 : 1;
}

void ol_on_unload(void)
{
  ol_lifecycle_at_exit();
}

void *ol_intercept_wrap(void *real_fn)
{
  if (!real_fn || !hook_table || !ol_lifecycle_enabled())
    return real_fn;
  int fn = ol_prim_fn_of(real_fn);
  return fn < 0 ? real_fn : hook_table[fn];
}

static cudaError_t missing_runtime(ol_fn_t fn)
{
  ol_log_warn_once(&warned_missing_runtime,
                   "%s called but no CUDA runtime is loaded behind oomlens", ol_prim_name(fn));
  return cudaErrorInsufficientDriver;
}

/* ---- runtime allocation ------------------------------------------------ */

/* Records a block the job now holds, with its call site when stacks are on
 * (taken here, in the hook, so the frames are the job's). A stack this
 * thread has seen before is known by its site id and not interned again. */
static void track_alloc(uintptr_t addr, size_t size, int device, ol_kind_t kind, uintptr_t stream)
{
  if (!ol_stacks_capturing()) {
    ol_track_alloc(addr, size, device, kind, stream);
    return;
  }
  ol_site_key_t key;
  ol_stacks_site_key(size, &key);
  int32_t site = ol_stacks_cached_site(device, &key);
  if (site >= 0) {
    ol_track_alloc_at(addr, size, device, kind, stream, NULL, site);
    return;
  }
  uint64_t start = ol_own_clock_ns(); /* a new site: interned and named */
  site = ol_track_alloc_at(addr, size, device, kind, stream, &key, -1);
  ol_stacks_cache_site(device, &key, site);
  ol_own_charge(OL_OWN_CALL_SITES, start);
}

/* A refused allocation; an out-of-memory one gets its diagnosis. */
static void failed(int device, size_t size, ol_kind_t kind, bool out_of_memory)
{
  ol_site_key_t key;
  bool with_site = out_of_memory && ol_stacks_capturing(); /* what the request was for */
  if (with_site)
    ol_stacks_request_key(&key);
  ol_track_failed_alloc(size, device, kind, out_of_memory, with_site ? &key : NULL);
  if (out_of_memory)
    ol_oom_at_failure(device, size, 0);
}

/* What the real allocator answered, for the device the hook already
 * looked up (once: the lookup is a call into the runtime or driver). */
static void record_result(bool ok, bool out_of_memory, uintptr_t ptr, size_t size, int device,
                          ol_kind_t kind, uintptr_t stream)
{
  if (ok && ptr)
    track_alloc(ptr, size, device, kind, stream);
  else if (!ok)
    failed(device, size, kind, out_of_memory);
}

/* Manage mode: our pool serves the request; false leaves it to the driver. */
static bool managed_alloc(int device, size_t size, uint64_t *addr)
{
  if (!ol_manage_on() || !ol_manage_alloc(device, size, addr))
    return false;
  track_alloc((uintptr_t)*addr, size, device, OL_KIND_MANAGED, 0);
  return true;
}

/* Manage mode: a block of our pool goes back to it (after its fence). */
static bool managed_free(uint64_t addr)
{
  return ol_manage_on() && ol_manage_free(addr);
}

/* The driver refused a request that our pool did not serve: the pool's
 * free memory goes back first, and then the request is worth one more try
 * (never fail what the driver would serve without us). */
static bool pool_gave_back(bool out_of_memory, int device)
{
  return out_of_memory && ol_manage_on() && ol_manage_release_free(device);
}

/* OOMLENS_CAPACITY: a request the smaller device could not hold fails as
 * the driver fails one, without reaching it; first, as when the driver
 * refuses, the pool's free memory goes back (a request the pool did not
 * serve was refused while the pool held gigabytes free: held-out
 * auto_batch_fits, session 32). */
static bool over_capacity(int device, size_t size, ol_kind_t kind)
{
  if (size == 0 || ol_capacity_allows(device, size))
    return false;
  if (pool_gave_back(true, device) && ol_capacity_allows(device, size))
    return false;
  failed(device, size, kind, true);
  return true;
}

/* Manage mode: the pool serves a thread only while a context is current
 * there (its mappings and fences are the context's). The runtime binds a
 * thread to its device's primary context at the thread's first call that
 * needs one, so a runtime request on a thread not bound yet would have
 * been bound by the real call: bind it first, once a thread. PyTorch's
 * autograd thread is such a thread until its first kernel (c10's
 * SetDevice skips cudaSetDevice for the device already current): its first
 * request, a gradient of the logits, went to the driver, and under a cap
 * that the pool's free memory filled it was refused at every batch size
 * (held-out auto_batch_fits, session 32). */
static _Thread_local bool runtime_bound;

static void bind_runtime_thread(void)
{
  /* not while a capture is under way: the pool serves nothing then, and a
   * runtime call on this thread could break another thread's capture */
  if (!runtime_bound && ol_manage_on() && !ol_streams_capturing())
    runtime_bound = ol_prim_bind_runtime_context();
}

cudaError_t ol_on_cudaMalloc(void **ptr, size_t size)
{
  ol_pfn_cudaMalloc real = OL_REAL(cudaMalloc);
  if (!real)
    return missing_runtime(OL_FN_cudaMalloc);
  bool track = enter();
  int device = track ? ol_prim_current_device_runtime() : 0;
  uint64_t addr;
  if (track)
    bind_runtime_thread();
  if (track && ptr && managed_alloc(device, size, &addr)) {
    *ptr = (void *)(uintptr_t)addr;
    leave();
    return cudaSuccess;
  }
  if (track && over_capacity(device, size, OL_KIND_RUNTIME)) {
    leave();
    return cudaErrorMemoryAllocation;
  }
  cudaError_t err = real(ptr, size);
  if (track && pool_gave_back(err == cudaErrorMemoryAllocation, device))
    err = real(ptr, size);
  if (track)
    record_result(err == cudaSuccess, err == cudaErrorMemoryAllocation,
                  (uintptr_t)(ptr ? *ptr : NULL), size, device, OL_KIND_RUNTIME, 0);
  leave();
  return err;
}

cudaError_t ol_on_cudaFree(void *ptr)
{
  ol_pfn_cudaFree real = OL_REAL(cudaFree);
  if (!real)
    return missing_runtime(OL_FN_cudaFree);
  if (enter() && ptr) {
    ol_track_free((uintptr_t)ptr, OL_KIND_RUNTIME);
    if (managed_free((uintptr_t)ptr)) {
      leave();
      return cudaSuccess;
    }
  }
  cudaError_t err = real(ptr);
  leave();
  return err;
}

/* Manage mode, stream-ordered: the pool serves, reusing at once what was
 * freed on the same stream. per_thread_api: a _ptsz entry point. */
static bool managed_alloc_async(int device, size_t size, void *stream, bool per_thread_api,
                                uint64_t *addr)
{
  if (!ol_manage_on() || !ol_manage_alloc_async(device, size, stream, per_thread_api, addr))
    return false;
  track_alloc((uintptr_t)*addr, size, device, OL_KIND_MANAGED, (uintptr_t)stream);
  return true;
}

static cudaError_t malloc_async(ol_fn_t fn, void **ptr, size_t size, cudaStream_t stream)
{
  ol_pfn_cudaMallocAsync real = (ol_pfn_cudaMallocAsync)ol_prim_real(fn);
  if (!real)
    return missing_runtime(fn);
  bool track = enter();
  int device = track ? ol_prim_current_device_runtime() : 0;
  uint64_t addr;
  if (track)
    bind_runtime_thread();
  if (track && ptr &&
      managed_alloc_async(device, size, (void *)stream, fn == OL_FN_cudaMallocAsync_ptsz, &addr)) {
    *ptr = (void *)(uintptr_t)addr;
    leave();
    return cudaSuccess;
  }
  if (track && over_capacity(device, size, OL_KIND_RUNTIME_ASYNC)) {
    leave();
    return cudaErrorMemoryAllocation;
  }
  cudaError_t err = real(ptr, size, stream);
  if (track && pool_gave_back(err == cudaErrorMemoryAllocation, device))
    err = real(ptr, size, stream);
  if (track)
    record_result(err == cudaSuccess, err == cudaErrorMemoryAllocation,
                  (uintptr_t)(ptr ? *ptr : NULL), size, device, OL_KIND_RUNTIME_ASYNC,
                  (uintptr_t)stream);
  leave();
  return err;
}

static cudaError_t free_async(ol_fn_t fn, void *ptr, cudaStream_t stream)
{
  ol_pfn_cudaFreeAsync real = (ol_pfn_cudaFreeAsync)ol_prim_real(fn);
  if (!real)
    return missing_runtime(fn);
  if (enter() && ptr) {
    ol_track_free((uintptr_t)ptr, OL_KIND_RUNTIME_ASYNC);
    if (ol_manage_on() &&
        ol_manage_free_async((uintptr_t)ptr, (void *)stream, fn == OL_FN_cudaFreeAsync_ptsz)) {
      leave();
      return cudaSuccess;
    }
  }
  cudaError_t err = real(ptr, stream);
  leave();
  return err;
}

cudaError_t ol_on_cudaMallocAsync(void **ptr, size_t size, cudaStream_t stream)
{
  return malloc_async(OL_FN_cudaMallocAsync, ptr, size, stream);
}

cudaError_t ol_on_cudaMallocAsync_ptsz(void **ptr, size_t size, cudaStream_t stream)
{
  return malloc_async(OL_FN_cudaMallocAsync_ptsz, ptr, size, stream);
}

cudaError_t ol_on_cudaFreeAsync(void *ptr, cudaStream_t stream)
{
  return free_async(OL_FN_cudaFreeAsync, ptr, stream);
}

cudaError_t ol_on_cudaFreeAsync_ptsz(void *ptr, cudaStream_t stream)
{
  return free_async(OL_FN_cudaFreeAsync_ptsz, ptr, stream);
}

/* ---- a framework's own refusal ---------------------------------------------- */

/* PyTorch's c10::OutOfMemoryError, as the Itanium ABI names its type. */
#define PYTORCH_OOM_TYPE "N3c1016OutOfMemoryErrorE"

/* PyTorch refused a request at the limit the job set on what it may
 * reserve (torch.cuda.set_per_process_memory_fraction): no allocation call
 * failed, so nothing else of ours saw it. An OutOfMemoryError that follows
 * a failure of ours (the device refused, and the failure waits for this:
 * ol_oom_framework_will_say) completes that failure with what PyTorch's
 * cache held, which decides whether the free memory was in pieces. */
static void framework_refused(void *exception)
{
  ol_framework_oom_t oom;
  if (!ol_framework_oom_parse(ol_prim_exception_message(exception), &oom))
    return;
  if (oom.limit > 0 && ol_track_framework_refusal(oom.request, oom.device))
    ol_oom_at_failure(oom.device, oom.request, oom.limit);
  else
    ol_oom_framework_word(oom.device, &oom);
}

void ol_on_cxa_throw(void *object, void *type, void (*destroy)(void *))
{
  const char *name = ol_prim_exception_type_name(type);
  if (object && name && strcmp(name, PYTORCH_OOM_TYPE) == 0) {
    if (enter())
      framework_refused(object);
    leave();
  }
  ol_prim_cxa_throw(object, type, destroy);
}

/* An allocator that was refused asks how much is free: PyTorch's caching
 * allocator does exactly that once it has given up (its retry after
 * releasing its cache refused too), for its OutOfMemoryError's message,
 * and nothing between a refusal and its retry asks it. So a failure still
 * waiting for its verdict is an OOM the job sees now, and its paragraph
 * comes before the job's traceback; unless that message will say what the
 * cache held (its throw settles it, a few microseconds later). */
static void allocator_gave_up(int device)
{
  /* the loader is asked about PyTorch only when a failure waits */
  if (ol_track_oom_waiting(device) && !ol_oom_framework_will_say())
    ol_track_oom_settle(device);
}

cudaError_t ol_on_cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
  ol_pfn_cudaMemGetInfo real = OL_REAL(cudaMemGetInfo);
  if (!real)
    return missing_runtime(OL_FN_cudaMemGetInfo);
  bool track = enter();
  cudaError_t err = real(free_bytes, total_bytes);
  if (track) {
    int device = ol_prim_current_device_runtime();
    allocator_gave_up(device);
    if (err == cudaSuccess && free_bytes && total_bytes) {
      ol_track_mem_info(device, *free_bytes, *total_bytes);
      ol_capacity_clamp(device, free_bytes, total_bytes);
    }
  }
  leave();
  return err;
}

/* ---- driver allocation ------------------------------------------------- */


CUresult ol_on_cuMemAlloc_v2(CUdeviceptr *dptr, size_t size)
{
  ol_pfn_cuMemAlloc_v2 real = OL_REAL(cuMemAlloc_v2);
  if (!real)
    return CUDA_ERROR_NOT_INITIALIZED;
  bool track = enter();
  int device = track ? ol_prim_current_device_driver() : 0;
  uint64_t addr;
  if (track && dptr && managed_alloc(device, size, &addr)) {
    *dptr = (CUdeviceptr)addr;
    leave();
    return CUDA_SUCCESS;
  }
  if (track && over_capacity(device, size, OL_KIND_DRIVER)) {
    leave();
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  CUresult res = real(dptr, size);
  if (track && pool_gave_back(res == CUDA_ERROR_OUT_OF_MEMORY, device))
    res = real(dptr, size);
  if (track)
    record_result(res == CUDA_SUCCESS, res == CUDA_ERROR_OUT_OF_MEMORY,
                  (uintptr_t)(dptr ? *dptr : 0), size, device, OL_KIND_DRIVER, 0);
  leave();
  return res;
}

CUresult ol_on_cuMemFree_v2(CUdeviceptr dptr)
{
  ol_pfn_cuMemFree_v2 real = OL_REAL(cuMemFree_v2);
  if (!real)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (enter() && dptr) {
    ol_track_free((uintptr_t)dptr, OL_KIND_DRIVER);
    if (managed_free(dptr)) {
      leave();
      return CUDA_SUCCESS;
    }
  }
  CUresult res = real(dptr);
  leave();
  return res;
}

static CUresult driver_alloc_async(ol_fn_t fn, CUdeviceptr *dptr, size_t size, CUstream stream)
{
  ol_pfn_cuMemAllocAsync real = (ol_pfn_cuMemAllocAsync)ol_prim_real(fn);
  if (!real)
    return CUDA_ERROR_NOT_INITIALIZED;
  bool track = enter();
  int device = track ? ol_prim_current_device_driver() : 0;
  uint64_t addr;
  if (track && dptr &&
      managed_alloc_async(device, size, (void *)stream, fn == OL_FN_cuMemAllocAsync_ptsz, &addr)) {
    *dptr = (CUdeviceptr)addr;
    leave();
    return CUDA_SUCCESS;
  }
  if (track && over_capacity(device, size, OL_KIND_DRIVER_ASYNC)) {
    leave();
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  CUresult res = real(dptr, size, stream);
  if (track && pool_gave_back(res == CUDA_ERROR_OUT_OF_MEMORY, device))
    res = real(dptr, size, stream);
  if (track)
    record_result(res == CUDA_SUCCESS, res == CUDA_ERROR_OUT_OF_MEMORY,
                  (uintptr_t)(dptr ? *dptr : 0), size, device, OL_KIND_DRIVER_ASYNC,
                  (uintptr_t)stream);
  leave();
  return res;
}

static CUresult driver_free_async(ol_fn_t fn, CUdeviceptr dptr, CUstream stream)
{
  ol_pfn_cuMemFreeAsync real = (ol_pfn_cuMemFreeAsync)ol_prim_real(fn);
  if (!real)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (enter() && dptr) {
    ol_track_free((uintptr_t)dptr, OL_KIND_DRIVER_ASYNC);
    if (ol_manage_on() &&
        ol_manage_free_async(dptr, (void *)stream, fn == OL_FN_cuMemFreeAsync_ptsz)) {
      leave();
      return CUDA_SUCCESS;
    }
  }
  CUresult res = real(dptr, stream);
  leave();
  return res;
}

CUresult ol_on_cuMemAllocAsync(CUdeviceptr *dptr, size_t size, CUstream stream)
{
  return driver_alloc_async(OL_FN_cuMemAllocAsync, dptr, size, stream);
}

CUresult ol_on_cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t size, CUstream stream)
{
  return driver_alloc_async(OL_FN_cuMemAllocAsync_ptsz, dptr, size, stream);
}

CUresult ol_on_cuMemFreeAsync(CUdeviceptr dptr, CUstream stream)
{
  return driver_free_async(OL_FN_cuMemFreeAsync, dptr, stream);
}

CUresult ol_on_cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream)
{
  return driver_free_async(OL_FN_cuMemFreeAsync_ptsz, dptr, stream);
}

CUresult ol_on_cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes)
{
  ol_pfn_cuMemGetInfo_v2 real = OL_REAL(cuMemGetInfo_v2);
  if (!real)
    return CUDA_ERROR_NOT_INITIALIZED;
  bool track = enter();
  CUresult res = real(free_bytes, total_bytes);
  if (track) {
    int device = ol_prim_current_device_driver();
    allocator_gave_up(device);
    if (res == CUDA_SUCCESS && free_bytes && total_bytes) {
      ol_track_mem_info(device, *free_bytes, *total_bytes);
      ol_capacity_clamp(device, free_bytes, total_bytes);
    }
  }
  leave();
  return res;
}

/* ---- driver virtual memory (PyTorch's expandable segments, JAX) --------- */

static int device_of_prop(const CUmemAllocationProp *prop)
{
  if (prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE)
    return prop->location.id;
  return ol_prim_current_device_driver();
}

CUresult ol_on_cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                           const CUmemAllocationProp *prop, unsigned long long flags)
{
  ol_pfn_cuMemCreate real = OL_REAL(cuMemCreate);
  if (!real)
    return CUDA_ERROR_NOT_INITIALIZED;
  bool track = enter();
  if (track && over_capacity(device_of_prop(prop), size, OL_KIND_VMM)) {
    leave();
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  CUresult res = real(handle, size, prop, flags);
  if (track && pool_gave_back(res == CUDA_ERROR_OUT_OF_MEMORY, device_of_prop(prop)))
    res = real(handle, size, prop, flags);
  if (track && res == CUDA_SUCCESS && handle)
    ol_track_vmm_create(*handle, size, device_of_prop(prop));
  else if (track && res != CUDA_SUCCESS)
    failed(device_of_prop(prop), size, OL_KIND_VMM, res == CUDA_ERROR_OUT_OF_MEMORY);
  leave();
  return res;
}

CUresult ol_on_cuMemRelease(CUmemGenericAllocationHandle handle)
{
  ol_pfn_cuMemRelease real = OL_REAL(cuMemRelease);
  if (!real)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (enter())
    ol_track_vmm_release(handle);
  CUresult res = real(handle);
  leave();
  return res;
}

CUresult ol_on_cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                        CUmemGenericAllocationHandle handle, unsigned long long flags)
{
  ol_pfn_cuMemMap real = OL_REAL(cuMemMap);
  if (!real)
    return CUDA_ERROR_NOT_INITIALIZED;
  bool track = enter();
  CUresult res = real(ptr, size, offset, handle, flags);
  if (track && res == CUDA_SUCCESS)
    ol_track_vmm_map((uintptr_t)ptr, size, handle);
  leave();
  return res;
}

CUresult ol_on_cuMemUnmap(CUdeviceptr ptr, size_t size)
{
  ol_pfn_cuMemUnmap real = OL_REAL(cuMemUnmap);
  if (!real)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (enter())
    ol_track_vmm_unmap((uintptr_t)ptr, size);
  CUresult res = real(ptr, size);
  leave();
  return res;
}

CUresult ol_on_cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
                                   CUdeviceptr addr, unsigned long long flags)
{
  ol_pfn_cuMemAddressReserve real = OL_REAL(cuMemAddressReserve);
  if (!real)
    return CUDA_ERROR_NOT_INITIALIZED;
  bool track = enter();
  CUresult res = real(ptr, size, alignment, addr, flags);
  if (track && res == CUDA_SUCCESS && ptr)
    ol_track_va_reserve((uintptr_t)*ptr, size, ol_prim_current_device_driver());
  leave();
  return res;
}

CUresult ol_on_cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
  ol_pfn_cuMemAddressFree real = OL_REAL(cuMemAddressFree);
  if (!real)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (enter())
    ol_track_va_free((uintptr_t)ptr);
  CUresult res = real(ptr, size);
  leave();
  return res;
}

/* ---- streams and graph capture (what manage mode must respect) -------- */

CUresult ol_on_cuStreamCreate(CUstream *stream, unsigned int flags)
{
  ol_pfn_cuStreamCreate real = OL_REAL(cuStreamCreate);
  if (!real)
    return CUDA_ERROR_NOT_INITIALIZED;
  CUresult res = real(stream, flags);
  if (res == CUDA_SUCCESS && stream && ol_lifecycle_enabled())
    ol_streams_created(*stream, flags);
  return res;
}

CUresult ol_on_cuStreamCreateWithPriority(CUstream *stream, unsigned int flags, int priority)
{
  ol_pfn_cuStreamCreateWithPriority real = OL_REAL(cuStreamCreateWithPriority);
  if (!real)
    return CUDA_ERROR_NOT_INITIALIZED;
  CUresult res = real(stream, flags, priority);
  if (res == CUDA_SUCCESS && stream && ol_lifecycle_enabled())
    ol_streams_created(*stream, flags);
  return res;
}

CUresult ol_on_cuStreamDestroy_v2(CUstream stream)
{
  ol_pfn_cuStreamDestroy_v2 real = OL_REAL(cuStreamDestroy_v2);
  if (!real)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (ol_lifecycle_enabled()) {
    /* Manage mode first, while the stream is still listed: the fence it
     * records for memory freed before must cover this stream's work. */
    if (ol_manage_on())
      ol_manage_stream_destroyed(stream);
    ol_streams_destroyed(stream);
  }
  return real(stream);
}

/* What every way of beginning a capture does after the driver's answer. */
static CUresult capture_begun(CUresult res, CUstream stream)
{
  if (res == CUDA_SUCCESS && ol_lifecycle_enabled()) {
    ol_streams_capture_began(stream);
    if (ol_manage_on())
      ol_manage_capture_began();
  }
  return res;
}

static CUresult begin_capture(ol_fn_t fn, CUstream stream, CUstreamCaptureMode mode)
{
  ol_pfn_cuStreamBeginCapture_v2 real = (ol_pfn_cuStreamBeginCapture_v2)ol_prim_real(fn);
  if (!real)
    return CUDA_ERROR_NOT_INITIALIZED;
  return capture_begun(real(stream, mode), stream);
}

static CUresult end_capture(ol_fn_t fn, CUstream stream, CUgraph *graph)
{
  ol_pfn_cuStreamEndCapture real = (ol_pfn_cuStreamEndCapture)ol_prim_real(fn);
  if (!real)
    return CUDA_ERROR_NOT_INITIALIZED;
  CUresult res = real(stream, graph);
  if (ol_lifecycle_enabled())
    ol_streams_capture_ended(stream); /* ended, even when it failed */
  return res;
}

CUresult ol_on_cuStreamBeginCapture_v2(CUstream stream, CUstreamCaptureMode mode)
{
  return begin_capture(OL_FN_cuStreamBeginCapture_v2, stream, mode);
}

CUresult ol_on_cuStreamBeginCapture_v2_ptsz(CUstream stream, CUstreamCaptureMode mode)
{
  return begin_capture(OL_FN_cuStreamBeginCapture_v2_ptsz, stream, mode);
}

/* The capture's first form (CUDA 10.0, global mode) and the one into the
 * caller's graph (CUDA 12.3): a capture oomlens did not see would be
 * invalidated by the fences and barriers it never records during one. */
static CUresult begin_capture_global(ol_fn_t fn, CUstream stream)
{
  ol_pfn_cuStreamBeginCapture real = (ol_pfn_cuStreamBeginCapture)ol_prim_real(fn);
  if (!real)
    return CUDA_ERROR_NOT_INITIALIZED;
  return capture_begun(real(stream), stream);
}

CUresult ol_on_cuStreamBeginCapture(CUstream stream)
{
  return begin_capture_global(OL_FN_cuStreamBeginCapture, stream);
}

CUresult ol_on_cuStreamBeginCapture_ptsz(CUstream stream)
{
  return begin_capture_global(OL_FN_cuStreamBeginCapture_ptsz, stream);
}

static CUresult begin_capture_to_graph(ol_fn_t fn, CUstream stream, CUgraph graph,
                                       const CUgraphNode *deps, const CUgraphEdgeData *edges,
                                       size_t count, CUstreamCaptureMode mode)
{
  ol_pfn_cuStreamBeginCaptureToGraph real = (ol_pfn_cuStreamBeginCaptureToGraph)ol_prim_real(fn);
  if (!real)
    return CUDA_ERROR_NOT_INITIALIZED;
  return capture_begun(real(stream, graph, deps, edges, count, mode), stream);
}

CUresult ol_on_cuStreamBeginCaptureToGraph(CUstream stream, CUgraph graph,
                                           const CUgraphNode *deps, const CUgraphEdgeData *edges,
                                           size_t count, CUstreamCaptureMode mode)
{
  return begin_capture_to_graph(OL_FN_cuStreamBeginCaptureToGraph, stream, graph, deps, edges,
                                count, mode);
}

CUresult ol_on_cuStreamBeginCaptureToGraph_ptsz(CUstream stream, CUgraph graph,
                                                const CUgraphNode *deps,
                                                const CUgraphEdgeData *edges, size_t count,
                                                CUstreamCaptureMode mode)
{
  return begin_capture_to_graph(OL_FN_cuStreamBeginCaptureToGraph_ptsz, stream, graph, deps,
                                edges, count, mode);
}

CUresult ol_on_cuStreamEndCapture(CUstream stream, CUgraph *graph)
{
  return end_capture(OL_FN_cuStreamEndCapture, stream, graph);
}

CUresult ol_on_cuStreamEndCapture_ptsz(CUstream stream, CUgraph *graph)
{
  return end_capture(OL_FN_cuStreamEndCapture_ptsz, stream, graph);
}

/* ---- lookups ----------------------------------------------------------- */

CUresult ol_on_cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
  ol_pfn_cuGetProcAddress real = OL_REAL(cuGetProcAddress);
  if (!real)
    return CUDA_ERROR_NOT_INITIALIZED;
  CUresult res = real(symbol, pfn, version, flags);
  if (res == CUDA_SUCCESS && pfn)
    *pfn = ol_intercept_wrap(*pfn);
  return res;
}

CUresult ol_on_cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                   cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
  ol_pfn_cuGetProcAddress_v2 real = OL_REAL(cuGetProcAddress_v2);
  if (!real)
    return CUDA_ERROR_NOT_INITIALIZED;
  CUresult res = real(symbol, pfn, version, flags, status);
  if (res == CUDA_SUCCESS && pfn)
    *pfn = ol_intercept_wrap(*pfn);
  return res;
}

cudaError_t ol_on_cudaGetDriverEntryPoint(const char *symbol, void **pfn,
                                          unsigned long long flags,
                                          enum cudaDriverEntryPointQueryResult *status)
{
  ol_pfn_cudaGetDriverEntryPoint real = OL_REAL(cudaGetDriverEntryPoint);
  if (!real)
    return missing_runtime(OL_FN_cudaGetDriverEntryPoint);
  cudaError_t err = real(symbol, pfn, flags, status);
  if (err == cudaSuccess && pfn)
    *pfn = ol_intercept_wrap(*pfn);
  return err;
}

cudaError_t ol_on_cudaGetDriverEntryPointByVersion(const char *symbol, void **pfn,
                                                   unsigned int version,
                                                   unsigned long long flags,
                                                   enum cudaDriverEntryPointQueryResult *status)
{
  ol_pfn_cudaGetDriverEntryPointByVersion real = OL_REAL(cudaGetDriverEntryPointByVersion);
  if (!real)
    return missing_runtime(OL_FN_cudaGetDriverEntryPointByVersion);
  cudaError_t err = real(symbol, pfn, version, flags, status);
  if (err == cudaSuccess && pfn)
    *pfn = ol_intercept_wrap(*pfn);
  return err;
}

static bool loaded_after(const struct link_map *self, const struct link_map *other)
{
  for (const struct link_map *lm = self->l_next; lm; lm = lm->l_next)
    if (lm == other)
      return true;
  return false;
}

/* Our own hook for a CUDA name we interpose, or NULL; no string function
 * of libc until the name starts with "cu" (see lookup_after). */
static void *our_hook(const char *name)
{
  if (!hook_table || name[0] != 'c' || name[1] != 'u')
    return NULL;
  int fn = ol_prim_fn_by_name(name);
  return fn < 0 ? NULL : hook_table[fn];
}

/* dlsym(RTLD_NEXT, ...) means "after the caller", and glibc finds the caller
 * from its return address, which is now ours. When the first definition of
 * all lies after the caller, it is the answer. When the caller comes before
 * us (ASan's runtime, which must come first; another interposer), the next
 * definition is ours if we have one, else glibc's own RTLD_NEXT from here,
 * which also searches the dynamic linker (ASan's start-up asks for
 * __tls_get_addr and _dl_get_tls_static_info this way and calls what it
 * gets). That path must not dlopen anything: ASan starts from the
 * executable's preinit_array, before libc's own initialisation, and a
 * dlopen() then runs libc's initialisation early, with no environment (the
 * job's getenv() saw nothing), and calls libc functions that ASan has not
 * yet wired. Objects between such a caller and us are not searched (a
 * second preloaded definition there is missed). Otherwise walk the objects
 * loaded after the caller for the first that defines it. */
static void *lookup_after(const void *caller, const char *name)
{
  struct link_map *self = ol_prim_owner_of(caller);
  struct link_map *ours = ol_prim_owner_of((const void *)lookup_after);
  if (!self)
    return NULL;
  void *first = ol_prim_dlsym(RTLD_DEFAULT, name);
  struct link_map *first_owner = ol_prim_owner_of(first);
  if (first_owner && loaded_after(self, first_owner))
    return first;
  if (ours && loaded_after(self, ours)) {
    void *hook = our_hook(name);
    return hook ? hook : ol_prim_dlsym(RTLD_NEXT, name);
  }
  return ol_prim_defined_after(self, name);
}

void *ol_on_dlsym(void *handle, const char *name, const void *caller)
{
  void *p = handle == RTLD_NEXT ? lookup_after(caller, name) : ol_prim_dlsym(handle, name);
  /* Only names we interpose may load anything: a process that never asks
   * for a CUDA symbol must see no side effect of ours. */
  if (!p || !name || name[0] != 'c' || name[1] != 'u' || ol_prim_opening_driver())
    return p;
  if (ol_prim_fn_by_name(name) < 0)
    return p;
  return ol_intercept_wrap(p);
}
