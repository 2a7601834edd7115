/* prim.c: the primitive layer, the only code that finds and calls into the
 * real CUDA libraries and the real dlsym.
 *
 * Contract: every function here is safe to call from any thread at any time,
 * never aborts, and reports "not available" with NULL or -1. libcuda.so.1 is
 * opened at run time (never linked), so a machine without a GPU simply gets
 * NULL and the hooks pass through. The runtime's functions are found with
 * RTLD_NEXT, the definition our preloaded copy hides. */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "lib.h"
#include "prim.h"

typedef void *(*dlsym_fn)(void *, const char *);

static _Atomic(dlsym_fn) real_dlsym_fn;
static void *_Atomic real_fns[OL_FN_COUNT];
static const char *const fn_names[OL_FN_COUNT] = {
#define OL_FN_NAME(name, ret, params, args) #name,
  OL_INTERPOSED_FNS(OL_FN_NAME)
#undef OL_FN_NAME
};

static pthread_once_t driver_once = PTHREAD_ONCE_INIT;
static void *libcuda_handle;
static CUresult (*real_cuCtxGetDevice)(CUdevice *);

/* Driver functions oomlens calls for its own work (manage mode) but does not
 * interpose: found once, with the interposed ones, by their ABI names. */
#define OL_HELPER_FNS(X)                                                                  \
  X(cuMemSetAccess, CUresult, (CUdeviceptr, size_t, const CUmemAccessDesc *, size_t))     \
  X(cuMemGetAllocationGranularity, CUresult,                                              \
    (size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags))             \
  X(cuDeviceGetAttribute, CUresult, (int *, CUdevice_attribute, CUdevice))               \
  X(cuEventCreate, CUresult, (CUevent *, unsigned int))                                   \
  X(cuEventRecord, CUresult, (CUevent, CUstream))                                         \
  X(cuEventQuery, CUresult, (CUevent))                                                    \
  X(cuEventSynchronize, CUresult, (CUevent))                                              \
  X(cuEventDestroy_v2, CUresult, (CUevent))                                               \
  X(cuCtxSynchronize, CUresult, (void))                                                   \
  X(cuStreamQuery, CUresult, (CUstream))                                                  \
  X(cuCtxGetCurrent, CUresult, (CUcontext *))                                             \
  X(cuDeviceTotalMem_v2, CUresult, (size_t *, CUdevice))                                \
  X(cuDeviceGetPCIBusId, CUresult, (char *, int, CUdevice))                             \
  X(cuMemHostAlloc, CUresult, (void **, size_t, unsigned int))                            \
  X(cuMemHostGetDevicePointer_v2, CUresult, (CUdeviceptr *, void *, unsigned int))       \
  X(cuStreamWriteValue32_v2, CUresult, (CUstream, CUdeviceptr, cuuint32_t, unsigned int)) \
  X(cuCtxRecordEvent, CUresult, (CUcontext, CUevent))                                     \
  X(cuCtxWaitEvent, CUresult, (CUcontext, CUevent))

static struct {
#define OL_HELPER_MEMBER(name, ret, params) ret(*name) params;
  OL_HELPER_FNS(OL_HELPER_MEMBER)
#undef OL_HELPER_MEMBER
} helper;
static cudaError_t (*_Atomic real_cudaGetDevice)(int *);

/* True on the thread that is opening libcuda, whose constructors may call
 * dlsym (and so our hook) before the table is complete. */
static _Thread_local bool opening_driver;

static void *find_versioned(const char *name);

/* glibc 2.34 moved dlsym into libc with a new version; older glibc only has
 * the original one. Ask for each explicitly so we never find our own hook. */
static dlsym_fn find_real_dlsym(void)
{
  dlsym_fn fn = atomic_load_explicit(&real_dlsym_fn, memory_order_acquire);
  if (fn)
    return fn;
  fn = (dlsym_fn)find_versioned("dlsym");
  atomic_store_explicit(&real_dlsym_fn, fn, memory_order_release);
  return fn;
}

void *ol_prim_dlsym(void *handle, const char *name)
{
  dlsym_fn fn = find_real_dlsym();
  return fn ? fn(handle, name) : NULL;
}

/* glibc's own dlopen and dlclose, asked for by version: a sanitizer
 * runtime preloaded before us defines unversioned ones, and their wrappers
 * jump through a pointer that is still NULL while the runtime starts up and
 * looks up its functions with dlsym(RTLD_NEXT), that is, through our hook
 * (an ASan-built job died at start-up). dlvsym only matches the exact
 * version, so it never finds such a wrapper. */
typedef void *(*dlopen_fn)(const char *, int);
typedef int (*dlclose_fn)(void *);

static void *find_versioned(const char *name)
{
  static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"};
  void *fn = NULL;
  for (size_t i = 0; i < sizeof versions / sizeof *versions && !fn; i++)
    fn = dlvsym(RTLD_NEXT, name, versions[i]);
  return fn;
}

void *ol_prim_dlopen_loaded(const char *path)
{
  static _Atomic(dlopen_fn) real_dlopen;
  dlopen_fn fn = atomic_load_explicit(&real_dlopen, memory_order_acquire);
  if (!fn) {
    fn = (dlopen_fn)find_versioned("dlopen");
    atomic_store_explicit(&real_dlopen, fn, memory_order_release);
  }
  return fn ? fn(path, RTLD_LAZY | RTLD_NOLOAD) : NULL;
}

void ol_prim_dlclose(void *handle)
{
  static _Atomic(dlclose_fn) real_dlclose;
  dlclose_fn fn = atomic_load_explicit(&real_dlclose, memory_order_acquire);
  if (!fn) {
    fn = (dlclose_fn)find_versioned("dlclose");
    atomic_store_explicit(&real_dlclose, fn, memory_order_release);
  }
  if (fn && handle)
    fn(handle);
}

/* The object that defines p, or NULL. */
struct link_map *ol_prim_owner_of(const void *p)
{
  Dl_info info;
  struct link_map *owner = NULL;
  if (!p || !dladdr1(p, &info, (void **)&owner, RTLD_DL_LINKMAP))
    return NULL;
  return owner;
}

/* The first definition of name in lm itself, or NULL. A link map is not a
 * handle: glibc builds the search list of an object loaded at start-up only
 * once it is dlopen()ed, and dlsym on the bare map walks a NULL list (any
 * dlsym(RTLD_NEXT) crashed the process). RTLD_NOLOAD hands out a real
 * handle to what is already loaded; glibc's own dlopen, because a
 * sanitizer's wrapper may not work yet. The dynamic linker's handle
 * answers no lookup at all: callers cover it another way. */
static void *defined_in(struct link_map *lm, const char *name)
{
  void *handle = lm->l_name && *lm->l_name ? ol_prim_dlopen_loaded(lm->l_name) : NULL;
  if (!handle)
    return NULL;
  void *p = ol_prim_dlsym(handle, name);
  ol_prim_dlclose(handle);
  return p && ol_prim_owner_of(p) == lm ? p : NULL;
}

void *ol_prim_defined_after(const struct link_map *self, const char *name)
{
  for (struct link_map *lm = self->l_next; lm; lm = lm->l_next) {
    void *p = defined_in(lm, name);
    if (p)
      return p;
  }
  return NULL;
}

static void open_driver(void)
{
  opening_driver = true;
  void *handle = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (!handle)
    handle = dlopen("libcuda.so.1", RTLD_LAZY);
  if (handle) {
    for (int fn = 0; fn < OL_FN_FIRST_RUNTIME; fn++)
      atomic_store(&real_fns[fn], ol_prim_dlsym(handle, fn_names[fn]));
    real_cuCtxGetDevice = (CUresult(*)(CUdevice *))ol_prim_dlsym(handle, "cuCtxGetDevice");
#define OL_HELPER_FIND(name, ret, params) helper.name = (ret(*) params)ol_prim_dlsym(handle, #name);
    OL_HELPER_FNS(OL_HELPER_FIND)
#undef OL_HELPER_FIND
  }
  libcuda_handle = handle;
  opening_driver = false;
}

bool ol_prim_opening_driver(void)
{
  return opening_driver;
}

bool ol_prim_driver_available(void)
{
  if (opening_driver)
    return false;
  pthread_once(&driver_once, open_driver);
  return libcuda_handle != NULL;
}

/* A runtime opened with RTLD_LOCAL is not in the global scope that
 * RTLD_NEXT searches; it is still loaded under one of these names. */
static void *find_runtime_symbol(const char *name)
{
  static const char *const runtimes[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so"};
  void *p = ol_prim_dlsym(RTLD_NEXT, name);
  for (size_t i = 0; !p && i < sizeof runtimes / sizeof *runtimes; i++) {
    void *handle = dlopen(runtimes[i], RTLD_LAZY | RTLD_NOLOAD);
    if (handle) {
      p = ol_prim_dlsym(handle, name);
      dlclose(handle);
    }
  }
  return p;
}

/* Runtime functions are looked up again while missing: libcudart may be
 * loaded after our first call (Python imports torch late). */
static void *resolve_runtime(ol_fn_t fn)
{
  void *p = find_runtime_symbol(fn_names[fn]);
  if (p)
    atomic_store_explicit(&real_fns[fn], p, memory_order_release);
  return p;
}

void *ol_prim_real(ol_fn_t fn)
{
  void *p = atomic_load_explicit(&real_fns[fn], memory_order_acquire);
  if (p)
    return p;
  if (fn >= OL_FN_FIRST_RUNTIME)
    return resolve_runtime(fn);
  if (!ol_prim_driver_available())
    return NULL;
  return atomic_load_explicit(&real_fns[fn], memory_order_acquire);
}

const char *ol_prim_name(ol_fn_t fn)
{
  return fn >= 0 && fn < OL_FN_COUNT ? fn_names[fn] : "?";
}

int ol_prim_fn_by_name(const char *name)
{
  for (int fn = 0; fn < OL_FN_COUNT; fn++)
    if (strcmp(fn_names[fn], name) == 0)
      return fn;
  return -1;
}

int ol_prim_fn_of(const void *p)
{
  if (!p)
    return -1;
  for (int fn = 0; fn < OL_FN_COUNT; fn++)
    if (ol_prim_real((ol_fn_t)fn) == p)
      return fn;
  return -1;
}

int ol_prim_current_device_driver(void)
{
  CUdevice dev;
  if (!ol_prim_driver_available() || !real_cuCtxGetDevice)
    return 0;
  return real_cuCtxGetDevice(&dev) == CUDA_SUCCESS ? (int)dev : 0;
}

int ol_prim_current_device_runtime(void)
{
  cudaError_t (*get)(int *) = atomic_load(&real_cudaGetDevice);
  if (!get) {
    get = (cudaError_t(*)(int *))find_runtime_symbol("cudaGetDevice");
    atomic_store(&real_cudaGetDevice, get);
  }
  int dev = 0;
  if (!get || get(&dev) != cudaSuccess)
    return 0;
  return dev;
}

/* ---- for manage mode: VMM and events, calling the real driver directly so
 * that our own memory never shows up as the job's in observe counters ----- */

static CUmemAllocationProp device_prop(int device)
{
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  return prop;
}

/* 0 when the device cannot do virtual memory management (or we cannot). */
uint64_t ol_prim_vmm_granularity(int device)
{
  int supported = 0;
  size_t granularity = 0;
  if (!ol_prim_driver_available() || !helper.cuDeviceGetAttribute ||
      !helper.cuMemGetAllocationGranularity || !helper.cuMemSetAccess ||
      !OL_REAL(cuMemCreate) || !OL_REAL(cuMemMap) || !OL_REAL(cuMemUnmap) ||
      !OL_REAL(cuMemRelease) || !OL_REAL(cuMemAddressReserve) || !OL_REAL(cuMemAddressFree))
    return 0;
  if (helper.cuDeviceGetAttribute(&supported,
                                  CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                                  (CUdevice)device) != CUDA_SUCCESS || !supported)
    return 0;
  CUmemAllocationProp prop = device_prop(device);
  if (helper.cuMemGetAllocationGranularity(&granularity, &prop,
                                           CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) != CUDA_SUCCESS)
    return 0;
  return granularity;
}

int ol_prim_vmm_reserve(uint64_t size, uint64_t alignment, uint64_t *base)
{
  CUdeviceptr ptr = 0;
  if (OL_REAL(cuMemAddressReserve)(&ptr, size, alignment, 0, 0) != CUDA_SUCCESS)
    return -1;
  *base = (uint64_t)ptr;
  return 0;
}

void ol_prim_vmm_unreserve(uint64_t base, uint64_t size)
{
  OL_REAL(cuMemAddressFree)((CUdeviceptr)base, size);
}

/* handle's memory behind [addr, addr+size), readable and writable from
 * the device. All or nothing: a failure undoes what was done. */
int ol_prim_vmm_map_handle(int device, uint64_t addr, uint64_t size, uint64_t handle)
{
  if (OL_REAL(cuMemMap)((CUdeviceptr)addr, size, 0, (CUmemGenericAllocationHandle)handle, 0) !=
      CUDA_SUCCESS)
    return -2;
  CUmemAccessDesc access = {{CU_MEM_LOCATION_TYPE_DEVICE, device},
                            CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  if (helper.cuMemSetAccess((CUdeviceptr)addr, size, &access, 1) != CUDA_SUCCESS) {
    OL_REAL(cuMemUnmap)((CUdeviceptr)addr, size);
    return -2;
  }
  return 0;
}

/* New physical memory behind [addr, addr+size), the same way. */
int ol_prim_vmm_map(int device, uint64_t addr, uint64_t size, uint64_t *handle_out)
{
  CUmemAllocationProp prop = device_prop(device);
  CUmemGenericAllocationHandle handle;
  CUresult res = OL_REAL(cuMemCreate)(&handle, size, &prop, 0);
  if (res != CUDA_SUCCESS)
    return res == CUDA_ERROR_OUT_OF_MEMORY ? -1 : -2;
  if (ol_prim_vmm_map_handle(device, addr, size, (uint64_t)handle) != 0) {
    OL_REAL(cuMemRelease)(handle);
    return -2;
  }
  *handle_out = (uint64_t)handle;
  return 0;
}

void ol_prim_vmm_unmap_only(uint64_t addr, uint64_t size)
{
  OL_REAL(cuMemUnmap)((CUdeviceptr)addr, size);
}

void ol_prim_vmm_unmap(uint64_t addr, uint64_t size, uint64_t handle)
{
  ol_prim_vmm_unmap_only(addr, size);
  OL_REAL(cuMemRelease)((CUmemGenericAllocationHandle)handle);
}

void *ol_prim_event_create(void)
{
  CUevent event = NULL;
  if (!helper.cuEventCreate || helper.cuEventCreate(&event, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
    return NULL;
  return event;
}

int ol_prim_event_record(void *event, void *stream)
{
  return helper.cuEventRecord((CUevent)event, (CUstream)stream) == CUDA_SUCCESS ? 0 : -1;
}

/* 1: the work before the event is done; 0: not yet; -1: error. */
int ol_prim_event_done(void *event)
{
  CUresult res = helper.cuEventQuery((CUevent)event);
  return res == CUDA_SUCCESS ? 1 : res == CUDA_ERROR_NOT_READY ? 0 : -1;
}

int ol_prim_event_wait(void *event)
{
  return helper.cuEventSynchronize((CUevent)event) == CUDA_SUCCESS ? 0 : -1;
}

void ol_prim_event_destroy(void *event)
{
  if (event)
    helper.cuEventDestroy_v2((CUevent)event);
}

/* All work submitted to the current context after this call waits for all
 * work submitted to it before, on every stream (streams made later too),
 * while the CPU goes on: what cudaFree's synchronize guarantees the next
 * user of the memory, without the wait. CUDA 12.5's context events; -1
 * where the driver has none or refuses (a capture in progress: callers
 * never ask then, since the driver would invalidate the capture). */
static CUcontext context_recorded(void *event)
{
  CUcontext ctx = NULL;
  if (!helper.cuCtxRecordEvent || !helper.cuCtxGetCurrent ||
      helper.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx ||
      helper.cuCtxRecordEvent(ctx, (CUevent)event) != CUDA_SUCCESS)
    return NULL;
  return ctx;
}

/* The event passes once all work submitted to the current context so far,
 * on every stream, is done: one call where an event per stream takes one
 * each. -1 as for the barrier. */
int ol_prim_context_record(void *event)
{
  return context_recorded(event) ? 0 : -1;
}

int ol_prim_context_barrier(void *event)
{
  CUcontext ctx = helper.cuCtxWaitEvent ? context_recorded(event) : NULL;
  if (!ctx)
    return -1;
  return helper.cuCtxWaitEvent(ctx, (CUevent)event) == CUDA_SUCCESS ? 0 : -1;
}

int ol_prim_device_synchronize(void)
{
  return helper.cuCtxSynchronize && helper.cuCtxSynchronize() == CUDA_SUCCESS ? 0 : -1;
}

uint64_t ol_prim_device_total_memory(int device)
{
  size_t bytes = 0;
  if (!ol_prim_driver_available() || !helper.cuDeviceTotalMem_v2 ||
      helper.cuDeviceTotalMem_v2(&bytes, (CUdevice)device) != CUDA_SUCCESS)
    return 0;
  return bytes;
}

bool ol_prim_has_context(void)
{
  CUcontext ctx = NULL;
  return ol_prim_driver_available() && helper.cuCtxGetCurrent &&
         helper.cuCtxGetCurrent(&ctx) == CUDA_SUCCESS && ctx != NULL;
}

/* cudaFree(NULL) frees nothing; like every runtime call that needs a
 * context, it first makes the thread's device's primary context current
 * (creating it if no call has yet), as the request it precedes would. */
bool ol_prim_bind_runtime_context(void)
{
  if (ol_prim_has_context())
    return true;
  ol_pfn_cudaFree free_nothing = OL_REAL(cudaFree);
  return free_nothing && free_nothing(NULL) == cudaSuccess && ol_prim_has_context();
}

int ol_prim_stream_idle(void *stream)
{
  if (!helper.cuStreamQuery)
    return -1;
  CUresult res = helper.cuStreamQuery((CUstream)stream);
  return res == CUDA_SUCCESS ? 1 : res == CUDA_ERROR_NOT_READY ? 0 : -1;
}

/* Pinned host memory, mapped for every device (portable), which streams
 * write marks into and the CPU reads without asking the driver. Never
 * freed: one page a process. */
uint32_t *ol_prim_host_words(size_t count, uint64_t *device_addr)
{
  void *host = NULL;
  CUdeviceptr dev = 0;
  if (!helper.cuMemHostAlloc || !helper.cuMemHostGetDevicePointer_v2 ||
      !helper.cuStreamWriteValue32_v2 ||
      helper.cuMemHostAlloc(&host, count * sizeof(uint32_t),
                            CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP) != CUDA_SUCCESS)
    return NULL;
  if (helper.cuMemHostGetDevicePointer_v2(&dev, host, 0) != CUDA_SUCCESS)
    return NULL; /* a page lost, once: not worth a path that frees it */
  *device_addr = (uint64_t)dev;
  return host;
}

/* The stream stores value at device_addr once the work enqueued on it
 * before is done (the default flags: a memory barrier before the write). */
int ol_prim_stream_write_word(void *stream, uint64_t device_addr, uint32_t value)
{
  return helper.cuStreamWriteValue32_v2((CUstream)stream, (CUdeviceptr)device_addr, value, 0) ==
             CUDA_SUCCESS ? 0 : -1;
}

int ol_prim_mem_info(size_t *free_bytes, size_t *total_bytes)
{
  ol_pfn_cuMemGetInfo_v2 info = OL_REAL(cuMemGetInfo_v2);
  return info && info(free_bytes, total_bytes) == CUDA_SUCCESS ? 0 : -1;
}

void *ol_prim_unwinder(void)
{
  void *lib = dlopen("libunwind.so.8", RTLD_LAZY | RTLD_LOCAL);
  return lib ? ol_prim_dlsym(lib, "unw_backtrace") : NULL;
}

/* A helper library of our own (libdw for source lines), kept private to
 * us: RTLD_LOCAL, so its symbols never resolve the job's. */
void *ol_prim_open_library(const char *soname)
{
  return dlopen(soname, RTLD_LAZY | RTLD_LOCAL);
}

/* CPython's own symbols: global when the python executable links
 * libpython (or is it); an embedding program may have opened libpython
 * privately, so the usual names are also tried among what is loaded. */
void *ol_prim_python_symbol(const char *name)
{
  static const char *const libraries[] = {"libpython3.13.so.1.0", "libpython3.12.so.1.0",
                                          "libpython3.11.so.1.0", "libpython3.10.so.1.0"};
  void *p = ol_prim_dlsym(RTLD_DEFAULT, name);
  for (size_t i = 0; !p && i < sizeof libraries / sizeof *libraries; i++) {
    void *handle = dlopen(libraries[i], RTLD_LAZY | RTLD_NOLOAD);
    if (handle) {
      p = ol_prim_dlsym(handle, name);
      dlclose(handle);
    }
  }
  return p;
}

/* ---- NVML: who holds a device's memory (at an out-of-memory only) ----- */

/* NVML's ABI, from its documentation: the few calls used here. */
typedef struct nvml_process_info {
  unsigned int pid;
  unsigned long long used_bytes;
  unsigned int gpu_instance, compute_instance;
} nvml_process_info_t;
#define NVML_VALUE_NOT_AVAILABLE 0xffffffffffffffffull

static struct {
  int (*init)(void);
  int (*by_bus_id)(const char *, void **);
  int (*processes)(void *, unsigned int *, nvml_process_info_t *);
} nvml;

static void open_nvml(void)
{
  void *handle = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (!handle)
    return;
  nvml.init = (int (*)(void))ol_prim_dlsym(handle, "nvmlInit_v2");
  nvml.by_bus_id = (int (*)(const char *, void **))ol_prim_dlsym(
    handle, "nvmlDeviceGetHandleByPciBusId_v2");
  nvml.processes = (int (*)(void *, unsigned int *, nvml_process_info_t *))ol_prim_dlsym(
    handle, "nvmlDeviceGetComputeRunningProcesses_v3");
  if (!nvml.init || !nvml.by_bus_id || !nvml.processes || nvml.init() != 0)
    nvml.processes = NULL;
}

/* The processes using the device and their memory, as NVML sees them (the
 * pids may be another pid namespace's); -1 without NVML. The device is
 * found by its PCI bus id, so CUDA_VISIBLE_DEVICES cannot mislead it. */
int ol_prim_device_processes(int device, ol_gpu_process_t *out, int max)
{
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  char bus[32];
  void *handle;
  nvml_process_info_t info[64];
  unsigned int count = sizeof info / sizeof *info;
  pthread_once(&once, open_nvml);
  if (!nvml.processes || !helper.cuDeviceGetPCIBusId ||
      helper.cuDeviceGetPCIBusId(bus, sizeof bus, device) != CUDA_SUCCESS ||
      nvml.by_bus_id(bus, &handle) != 0 || nvml.processes(handle, &count, info) != 0)
    return -1;
  int n = 0;
  for (unsigned int i = 0; i < count && n < max; i++)
    out[n++] = (ol_gpu_process_t){
      info[i].pid, info[i].used_bytes == NVML_VALUE_NOT_AVAILABLE ? -1 : (int64_t)info[i].used_bytes};
  return n;
}

/* ---- C++ exceptions -------------------------------------------------------- */

/* std::type_info is, in the Itanium ABI, a vtable pointer and then the
 * mangled name (with a leading '*' for a type local to one object). */
const char *ol_prim_exception_type_name(const void *type)
{
  const char *name = type ? ((const char *const *)type)[1] : NULL;
  return name && *name == '*' ? name + 1 : name;
}

/* what() of an object derived from std::exception at offset 0 (single
 * inheritance, as c10::Error is): its vtable's third slot, after the two
 * destructors. Only called for a type known to be such. */
const char *ol_prim_exception_message(void *object)
{
  typedef const char *(*what_fn)(const void *);
  what_fn what = (*(what_fn *const *)object)[2];
  return what ? what(object) : NULL;
}

typedef void (*cxa_throw_fn)(void *, void *, void (*)(void *));

/* The C++ runtime's __cxa_throw. Not always in the global scope behind
 * us: Python loads torch's libraries, and with them libstdc++, with
 * RTLD_LOCAL, yet their throws bind to ours, the first in the global
 * scope (PyTorch under the first build with this hook aborted at its
 * first exception). So: the next in the global scope, else the first
 * object loaded after ours that defines it. */
static cxa_throw_fn find_cxa_throw(void)
{
  cxa_throw_fn fn = (cxa_throw_fn)ol_prim_dlsym(RTLD_NEXT, "__cxa_throw");
  struct link_map *ours = fn ? NULL : ol_prim_owner_of((const void *)find_cxa_throw);
  return ours ? (cxa_throw_fn)ol_prim_defined_after(ours, "__cxa_throw") : fn;
}

_Noreturn void ol_prim_cxa_throw(void *object, void *type, void (*destroy)(void *))
{
  static _Atomic(cxa_throw_fn) real_throw;
  cxa_throw_fn fn = atomic_load_explicit(&real_throw, memory_order_acquire);
  if (!fn) {
    fn = find_cxa_throw();
    atomic_store_explicit(&real_throw, fn, memory_order_release);
  }
  if (fn)
    fn(object, type, destroy);
  abort(); /* a throw with no C++ runtime loaded: nothing could have caught it */
}
