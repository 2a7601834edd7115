/* sim_runtime.c - the simulated CUDA runtime, libcudart.so.13.
 *
 * It reaches the driver the way NVIDIA's cudart does, because that is the
 * path the interposer under test hooks: at first use (pthread_once) it
 * dlopen()s "libcuda.so.1", looks up "cuGetProcAddress_v2" with dlsym, and
 * obtains every driver function it calls from that pointer, by base name,
 * for CUDA 13000. It references no driver symbol: the library links
 * without libcuda and with --no-undefined, so a direct call would not
 * build, and a test checks its dynamic symbols.
 *
 * Each thread has a current device (cudaSetDevice, default 0) whose primary
 * context is retained once and made current before each call, unless the
 * thread already has a context made current through the driver API. Errors
 * other than cudaErrorNotReady become the thread's last error.
 */
#define __CUDA_API_VERSION_INTERNAL 1 /* declares the real _ptsz names */
#include <cuda_runtime_api.h>
#include <cudaTypedefs.h>

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define RT_VERSION CUDART_VERSION
#define RT_MAX_DEVICES 16
#define RT_PTDS CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM

/* Driver functions used: slot, base name, type, cuGetProcAddress flags. */
#define RT_DRIVER(X) \
    X(init, "cuInit", PFN_cuInit_v2000, 0) \
    X(device_count, "cuDeviceGetCount", PFN_cuDeviceGetCount_v2000, 0) \
    X(primary_retain, "cuDevicePrimaryCtxRetain", PFN_cuDevicePrimaryCtxRetain_v7000, 0) \
    X(ctx_get_current, "cuCtxGetCurrent", PFN_cuCtxGetCurrent_v4000, 0) \
    X(ctx_set_current, "cuCtxSetCurrent", PFN_cuCtxSetCurrent_v4000, 0) \
    X(ctx_get_device, "cuCtxGetDevice", PFN_cuCtxGetDevice_v13000, 0) \
    X(ctx_sync, "cuCtxSynchronize", PFN_cuCtxSynchronize_v13000, 0) \
    X(mem_alloc, "cuMemAlloc", PFN_cuMemAlloc_v3020, 0) \
    X(mem_free, "cuMemFree", PFN_cuMemFree_v3020, 0) \
    X(mem_get_info, "cuMemGetInfo", PFN_cuMemGetInfo_v3020, 0) \
    X(mem_alloc_async, "cuMemAllocAsync", PFN_cuMemAllocAsync_v11020, 0) \
    X(mem_free_async, "cuMemFreeAsync", PFN_cuMemFreeAsync_v11020, 0) \
    X(mem_alloc_async_ptsz, "cuMemAllocAsync", PFN_cuMemAllocAsync_v11020_ptsz, RT_PTDS) \
    X(mem_free_async_ptsz, "cuMemFreeAsync", PFN_cuMemFreeAsync_v11020_ptsz, RT_PTDS) \
    X(memcpy, "cuMemcpy", PFN_cuMemcpy_v4000, 0) \
    X(memcpy_htod, "cuMemcpyHtoD", PFN_cuMemcpyHtoD_v3020, 0) \
    X(memcpy_dtoh, "cuMemcpyDtoH", PFN_cuMemcpyDtoH_v3020, 0) \
    X(memcpy_dtod, "cuMemcpyDtoD", PFN_cuMemcpyDtoD_v3020, 0) \
    X(memset8, "cuMemsetD8", PFN_cuMemsetD8_v3020, 0) \
    X(stream_create, "cuStreamCreate", PFN_cuStreamCreate_v2000, 0) \
    X(stream_destroy, "cuStreamDestroy", PFN_cuStreamDestroy_v4000, 0) \
    X(stream_sync, "cuStreamSynchronize", PFN_cuStreamSynchronize_v2000, 0) \
    X(stream_query, "cuStreamQuery", PFN_cuStreamQuery_v2000, 0) \
    X(stream_wait_event, "cuStreamWaitEvent", PFN_cuStreamWaitEvent_v3020, 0) \
    X(event_create, "cuEventCreate", PFN_cuEventCreate_v2000, 0) \
    X(event_record, "cuEventRecord", PFN_cuEventRecord_v2000, 0) \
    X(event_query, "cuEventQuery", PFN_cuEventQuery_v2000, 0) \
    X(event_sync, "cuEventSynchronize", PFN_cuEventSynchronize_v2000, 0) \
    X(event_destroy, "cuEventDestroy", PFN_cuEventDestroy_v4000, 0) \
    X(begin_capture, "cuStreamBeginCapture", PFN_cuStreamBeginCapture_v10010, 0) \
    X(end_capture, "cuStreamEndCapture", PFN_cuStreamEndCapture_v10000, 0) \
    X(is_capturing, "cuStreamIsCapturing", PFN_cuStreamIsCapturing_v10000, 0) \
    X(exchange_mode, "cuThreadExchangeStreamCaptureMode", \
      PFN_cuThreadExchangeStreamCaptureMode_v10010, 0) \
    X(graph_destroy, "cuGraphDestroy", PFN_cuGraphDestroy_v10000, 0)

enum {
#define RT_ENUM(slot, name, type, flags) RT_##slot,
    RT_DRIVER(RT_ENUM)
#undef RT_ENUM
    RT_FN_COUNT
};

#define RT_TYPEDEF(slot, name, type, flags) typedef type rt_##slot##_t;
RT_DRIVER(RT_TYPEDEF)
#undef RT_TYPEDEF

static const struct {
    const char *name;
    cuuint64_t flags;
} imports[] = {
#define RT_IMPORT(slot, name, type, flags) {name, flags},
    RT_DRIVER(RT_IMPORT)
#undef RT_IMPORT
};

/* Stored as the generic function type; DRV() gives each its own type. */
typedef void (*rt_fn)(void);
static rt_fn drv_fn[RT_FN_COUNT];
#define DRV(slot) ((rt_##slot##_t)drv_fn[RT_##slot])

static struct {
    pthread_once_t once;
    cudaError_t load_err; /* why the driver cannot be used */
    PFN_cuGetProcAddress_v12000 getproc;
    PFN_cuDriverGetVersion_v2020 driver_version;
    pthread_mutex_t lock; /* guards primary */
    CUcontext primary[RT_MAX_DEVICES];
} rt = {.once = PTHREAD_ONCE_INIT, .lock = PTHREAD_MUTEX_INITIALIZER};

static _Thread_local int tls_device = -1; /* -1: never set */
static _Thread_local cudaError_t tls_last_error;

/* ---- errors ---- */

#define RT_NO_DRIVER_CODE (-1)

/* cudaError_t, the CUresult it stands for (if any), message. */
#define RT_ERRORS(X) \
    X(cudaSuccess, CUDA_SUCCESS, "no error") \
    X(cudaErrorInvalidValue, CUDA_ERROR_INVALID_VALUE, "invalid argument") \
    X(cudaErrorMemoryAllocation, CUDA_ERROR_OUT_OF_MEMORY, "out of memory") \
    X(cudaErrorInitializationError, CUDA_ERROR_NOT_INITIALIZED, \
      "initialization error") \
    X(cudaErrorCudartUnloading, CUDA_ERROR_DEINITIALIZED, \
      "driver shutting down") \
    X(cudaErrorInvalidDevicePointer, RT_NO_DRIVER_CODE, "invalid device pointer") \
    X(cudaErrorInvalidMemcpyDirection, RT_NO_DRIVER_CODE, \
      "invalid copy direction for memcpy") \
    X(cudaErrorInsufficientDriver, RT_NO_DRIVER_CODE, \
      "CUDA driver version is insufficient for CUDA runtime version") \
    X(cudaErrorNoDevice, CUDA_ERROR_NO_DEVICE, \
      "no CUDA-capable device is detected") \
    X(cudaErrorInvalidDevice, CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal") \
    X(cudaErrorDeviceUninitialized, CUDA_ERROR_INVALID_CONTEXT, \
      "invalid device context") \
    X(cudaErrorAlreadyMapped, CUDA_ERROR_ALREADY_MAPPED, "resource already mapped") \
    X(cudaErrorNotMapped, CUDA_ERROR_NOT_MAPPED, "resource not mapped") \
    X(cudaErrorInvalidResourceHandle, CUDA_ERROR_INVALID_HANDLE, \
      "invalid resource handle") \
    X(cudaErrorIllegalState, CUDA_ERROR_ILLEGAL_STATE, \
      "the operation cannot be performed in the present state") \
    X(cudaErrorSymbolNotFound, CUDA_ERROR_NOT_FOUND, "named symbol not found") \
    X(cudaErrorNotReady, CUDA_ERROR_NOT_READY, "device not ready") \
    X(cudaErrorIllegalAddress, CUDA_ERROR_ILLEGAL_ADDRESS, \
      "an illegal memory access was encountered") \
    X(cudaErrorNotPermitted, CUDA_ERROR_NOT_PERMITTED, "operation not permitted") \
    X(cudaErrorNotSupported, CUDA_ERROR_NOT_SUPPORTED, "operation not supported") \
    X(cudaErrorStreamCaptureUnsupported, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, \
      "operation not permitted when stream is capturing") \
    X(cudaErrorStreamCaptureInvalidated, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, \
      "operation failed due to a previous error during capture") \
    X(cudaErrorStreamCaptureUnmatched, CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, \
      "capture was not initiated in this stream") \
    X(cudaErrorStreamCaptureImplicit, CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, \
      "operation would make the legacy stream depend on a capturing " \
      "blocking stream") \
    X(cudaErrorStreamCaptureWrongThread, CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, \
      "attempt to terminate a thread-local capture sequence from another " \
      "thread") \
    X(cudaErrorUnknown, CUDA_ERROR_UNKNOWN, "unknown error")

static const struct {
    cudaError_t code;
    int driver_code;
    const char *name, *text;
} errors[] = {
#define RT_ERROR_ROW(code, cu, text) {code, (int)(cu), #code, text},
    RT_ERRORS(RT_ERROR_ROW)
#undef RT_ERROR_ROW
};

#define RT_N_ERRORS (sizeof errors / sizeof *errors)

/* CUresult to cudaError_t, as cudart maps them (OOM -> MemoryAllocation). */
static cudaError_t rt_error(CUresult r)
{
    for (size_t i = 0; i < RT_N_ERRORS; i++)
        if (errors[i].driver_code == (int)r)
            return errors[i].code;
    return cudaErrorUnknown;
}

/* Every API entry returns through here. */
static cudaError_t rt_ret(cudaError_t e)
{
    if (e != cudaSuccess && e != cudaErrorNotReady)
        tls_last_error = e;
    return e;
}

const char *CUDARTAPI cudaGetErrorName(cudaError_t error)
{
    for (size_t i = 0; i < RT_N_ERRORS; i++)
        if (errors[i].code == error)
            return errors[i].name;
    return "unrecognized error code";
}

const char *CUDARTAPI cudaGetErrorString(cudaError_t error)
{
    for (size_t i = 0; i < RT_N_ERRORS; i++)
        if (errors[i].code == error)
            return errors[i].text;
    return "unrecognized error code";
}

cudaError_t CUDARTAPI cudaGetLastError(void)
{
    cudaError_t e = tls_last_error;
    tls_last_error = cudaSuccess;
    return e;
}

cudaError_t CUDARTAPI cudaPeekAtLastError(void)
{
    return tls_last_error;
}

/* ---- loading the driver ---- */

static bool lookup(const char *name, int version, cuuint64_t flags, void **out)
{
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    *out = NULL;
    return rt.getproc(name, out, version, flags, &status) == CUDA_SUCCESS &&
           status == CU_GET_PROC_ADDRESS_SUCCESS && *out;
}

static cudaError_t open_driver(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    void *p = lib ? dlsym(lib, "cuGetProcAddress_v2") : NULL;
    if (!p)
        return cudaErrorInsufficientDriver;
    memcpy(&rt.getproc, &p, sizeof p);
    /* The version first, at the oldest ABI, so an old driver can say so. */
    if (!lookup("cuDriverGetVersion", 2020, 0, &p))
        return cudaErrorInsufficientDriver;
    memcpy(&rt.driver_version, &p, sizeof p);
    int v = 0;
    if (rt.driver_version(&v) != CUDA_SUCCESS || v < RT_VERSION)
        return cudaErrorInsufficientDriver;
    for (size_t i = 0; i < RT_FN_COUNT; i++) {
        if (!lookup(imports[i].name, RT_VERSION, imports[i].flags, &p))
            return cudaErrorInsufficientDriver;
        memcpy(&drv_fn[i], &p, sizeof p);
    }
    return cudaSuccess;
}

static void rt_load(void)
{
    rt.load_err = open_driver();
    if (!rt.load_err)
        rt.load_err = rt_error(DRV(init)(0));
}

static cudaError_t rt_loaded(void)
{
    pthread_once(&rt.once, rt_load);
    return rt.load_err;
}

static cudaError_t rt_primary(int dev, CUcontext *out)
{
    pthread_mutex_lock(&rt.lock);
    CUresult r = CUDA_SUCCESS;
    if (!rt.primary[dev])
        r = DRV(primary_retain)(&rt.primary[dev], dev);
    *out = rt.primary[dev];
    pthread_mutex_unlock(&rt.lock);
    return rt_error(r);
}

/* Ready for a call: driver loaded, the thread's device context current. */
static cudaError_t rt_enter(void)
{
    cudaError_t e = rt_loaded();
    if (e)
        return e;
    CUcontext cur = NULL;
    CUresult r = DRV(ctx_get_current)(&cur);
    if (r)
        return rt_error(r);
    if (tls_device < 0 && cur)
        return cudaSuccess; /* adopt a context set with the driver API */
    int dev = tls_device < 0 ? 0 : tls_device;
    CUcontext want = NULL;
    e = rt_primary(dev, &want);
    if (!e && cur != want)
        e = rt_error(DRV(ctx_set_current)(want));
    return e;
}

/* ---- version and devices ---- */

cudaError_t CUDARTAPI cudaDriverGetVersion(int *driverVersion)
{
    if (!driverVersion)
        return rt_ret(cudaErrorInvalidValue);
    rt_loaded();
    *driverVersion = 0; /* what cudart reports with no driver */
    if (rt.driver_version)
        rt.driver_version(driverVersion);
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaRuntimeGetVersion(int *runtimeVersion)
{
    if (!runtimeVersion)
        return rt_ret(cudaErrorInvalidValue);
    *runtimeVersion = RT_VERSION;
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaGetDeviceCount(int *count)
{
    if (!count)
        return rt_ret(cudaErrorInvalidValue);
    *count = 0;
    cudaError_t e = rt_loaded();
    if (!e)
        e = rt_error(DRV(device_count)(count));
    return rt_ret(e);
}

cudaError_t CUDARTAPI cudaSetDevice(int device)
{
    int n = 0;
    cudaError_t e = rt_loaded();
    if (!e)
        e = rt_error(DRV(device_count)(&n));
    if (!e && (device < 0 || device >= n || device >= RT_MAX_DEVICES))
        e = cudaErrorInvalidDevice;
    if (!e) {
        tls_device = device;
        e = rt_enter(); /* CUDA 12+ initializes the context here */
    }
    return rt_ret(e);
}

/* As the real runtime: the thread's device, binding no context to the
 * thread (c10's SetDevice asks it on a new thread and, finding the device
 * it wants, binds none: PyTorch's autograd thread). */
cudaError_t CUDARTAPI cudaGetDevice(int *device)
{
    cudaError_t e = device ? rt_loaded() : cudaErrorInvalidValue;
    CUcontext cur = NULL;
    if (!e && tls_device >= 0)
        *device = tls_device;
    else if (!e && DRV(ctx_get_current)(&cur) == CUDA_SUCCESS && cur)
        e = rt_error(DRV(ctx_get_device)(device, NULL)); /* a context set with the driver API */
    else if (!e)
        *device = 0;
    return rt_ret(e);
}

cudaError_t CUDARTAPI cudaDeviceSynchronize(void)
{
    cudaError_t e = rt_enter();
    if (!e)
        e = rt_error(DRV(ctx_sync)(NULL));
    return rt_ret(e);
}

/* ---- memory ---- */

cudaError_t CUDARTAPI cudaMalloc(void **devPtr, size_t size)
{
    cudaError_t e = rt_enter();
    if (!e && !devPtr)
        e = cudaErrorInvalidValue;
    if (!e && size == 0)
        *devPtr = NULL; /* CUDA: success, no allocation */
    else if (!e) {
        CUdeviceptr p = 0;
        e = rt_error(DRV(mem_alloc)(&p, size));
        if (!e)
            *devPtr = (void *)(uintptr_t)p;
    }
    return rt_ret(e);
}

cudaError_t CUDARTAPI cudaFree(void *devPtr)
{
    cudaError_t e = rt_enter(); /* cudaFree(NULL) only initializes */
    if (!e && devPtr)
        e = rt_error(DRV(mem_free)((CUdeviceptr)(uintptr_t)devPtr));
    return rt_ret(e);
}

/* `ptsz`: the per-thread default stream ABI, where stream 0 is the calling
 * thread's stream. The pointer is picked after rt_enter has loaded it. */
static cudaError_t malloc_async(void **devPtr, size_t size, cudaStream_t s,
                                bool ptsz)
{
    cudaError_t e = rt_enter();
    if (!e && !devPtr)
        e = cudaErrorInvalidValue;
    if (!e && size == 0)
        *devPtr = NULL;
    else if (!e) {
        rt_mem_alloc_async_t fn =
            ptsz ? DRV(mem_alloc_async_ptsz) : DRV(mem_alloc_async);
        CUdeviceptr p = 0;
        e = rt_error(fn(&p, size, s));
        if (!e)
            *devPtr = (void *)(uintptr_t)p;
    }
    return rt_ret(e);
}

static cudaError_t free_async(void *devPtr, cudaStream_t s, bool ptsz)
{
    cudaError_t e = rt_enter();
    if (!e && devPtr) {
        rt_mem_free_async_t fn =
            ptsz ? DRV(mem_free_async_ptsz) : DRV(mem_free_async);
        e = rt_error(fn((CUdeviceptr)(uintptr_t)devPtr, s));
    }
    return rt_ret(e);
}

cudaError_t CUDARTAPI cudaMallocAsync(void **devPtr, size_t size,
                                      cudaStream_t hStream)
{
    return malloc_async(devPtr, size, hStream, false);
}

cudaError_t CUDARTAPI cudaFreeAsync(void *devPtr, cudaStream_t hStream)
{
    return free_async(devPtr, hStream, false);
}

cudaError_t CUDARTAPI cudaMallocAsync_ptsz(void **devPtr, size_t size,
                                           cudaStream_t hStream)
{
    return malloc_async(devPtr, size, hStream, true);
}

cudaError_t CUDARTAPI cudaFreeAsync_ptsz(void *devPtr, cudaStream_t hStream)
{
    return free_async(devPtr, hStream, true);
}

cudaError_t CUDARTAPI cudaMemGetInfo(size_t *free, size_t *total)
{
    cudaError_t e = rt_enter();
    if (!e)
        e = rt_error(DRV(mem_get_info)(free, total));
    return rt_ret(e);
}

cudaError_t CUDARTAPI cudaMemcpy(void *dst, const void *src, size_t count,
                                 enum cudaMemcpyKind kind)
{
    cudaError_t e = rt_enter();
    CUdeviceptr d = (CUdeviceptr)(uintptr_t)dst, s = (CUdeviceptr)(uintptr_t)src;
    if (e)
        return rt_ret(e);
    switch (kind) {
    case cudaMemcpyHostToHost:
    case cudaMemcpyDefault:
        return rt_ret(rt_error(DRV(memcpy)(d, s, count)));
    case cudaMemcpyHostToDevice:
        return rt_ret(rt_error(DRV(memcpy_htod)(d, src, count)));
    case cudaMemcpyDeviceToHost:
        return rt_ret(rt_error(DRV(memcpy_dtoh)(dst, s, count)));
    case cudaMemcpyDeviceToDevice:
        return rt_ret(rt_error(DRV(memcpy_dtod)(d, s, count)));
    default:
        return rt_ret(cudaErrorInvalidMemcpyDirection);
    }
}

cudaError_t CUDARTAPI cudaMemset(void *devPtr, int value, size_t count)
{
    cudaError_t e = rt_enter();
    if (!e)
        e = rt_error(DRV(memset8)((CUdeviceptr)(uintptr_t)devPtr,
                                  (unsigned char)value, count));
    return rt_ret(e);
}

/* ---- streams and events ---- */

cudaError_t CUDARTAPI cudaStreamCreateWithFlags(cudaStream_t *pStream,
                                                unsigned int flags)
{
    cudaError_t e = rt_enter();
    if (!e && (flags & ~(unsigned)cudaStreamNonBlocking))
        e = cudaErrorInvalidValue;
    unsigned cu = flags & cudaStreamNonBlocking ? CU_STREAM_NON_BLOCKING
                                                : CU_STREAM_DEFAULT;
    if (!e)
        e = rt_error(DRV(stream_create)(pStream, cu));
    return rt_ret(e);
}

cudaError_t CUDARTAPI cudaStreamCreate(cudaStream_t *pStream)
{
    return cudaStreamCreateWithFlags(pStream, cudaStreamDefault);
}

/* One pattern for every call that maps straight onto one driver call. */
#define RT_FORWARD(call) \
    do { \
        cudaError_t e_ = rt_enter(); \
        if (!e_) \
            e_ = rt_error(call); \
        return rt_ret(e_); \
    } while (0)

cudaError_t CUDARTAPI cudaStreamDestroy(cudaStream_t stream)
{
    RT_FORWARD(DRV(stream_destroy)(stream));
}

cudaError_t CUDARTAPI cudaStreamSynchronize(cudaStream_t stream)
{
    RT_FORWARD(DRV(stream_sync)(stream));
}

cudaError_t CUDARTAPI cudaStreamQuery(cudaStream_t stream)
{
    RT_FORWARD(DRV(stream_query)(stream));
}

cudaError_t CUDARTAPI cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
                                          unsigned int flags)
{
    if (flags & ~(unsigned)cudaEventWaitExternal)
        return rt_ret(cudaErrorInvalidValue);
    RT_FORWARD(DRV(stream_wait_event)(
        stream, event, flags ? CU_EVENT_WAIT_EXTERNAL : CU_EVENT_WAIT_DEFAULT));
}

cudaError_t CUDARTAPI cudaEventCreateWithFlags(cudaEvent_t *event,
                                               unsigned int flags)
{
    const unsigned known =
        cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess;
    if (flags & ~known)
        return rt_ret(cudaErrorInvalidValue);
    unsigned cu = (flags & cudaEventBlockingSync ? CU_EVENT_BLOCKING_SYNC : 0) |
                  (flags & cudaEventDisableTiming ? CU_EVENT_DISABLE_TIMING : 0) |
                  (flags & cudaEventInterprocess ? CU_EVENT_INTERPROCESS : 0);
    RT_FORWARD(DRV(event_create)(event, cu));
}

cudaError_t CUDARTAPI cudaEventCreate(cudaEvent_t *event)
{
    return cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t CUDARTAPI cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    RT_FORWARD(DRV(event_record)(event, stream));
}

cudaError_t CUDARTAPI cudaEventQuery(cudaEvent_t event)
{
    RT_FORWARD(DRV(event_query)(event));
}

cudaError_t CUDARTAPI cudaEventSynchronize(cudaEvent_t event)
{
    RT_FORWARD(DRV(event_sync)(event));
}

cudaError_t CUDARTAPI cudaEventDestroy(cudaEvent_t event)
{
    RT_FORWARD(DRV(event_destroy)(event));
}

/* ---- capture ---- */

static bool capture_mode_to_cu(enum cudaStreamCaptureMode m,
                               CUstreamCaptureMode *out)
{
    switch (m) {
    case cudaStreamCaptureModeGlobal:
        *out = CU_STREAM_CAPTURE_MODE_GLOBAL;
        return true;
    case cudaStreamCaptureModeThreadLocal:
        *out = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
        return true;
    case cudaStreamCaptureModeRelaxed:
        *out = CU_STREAM_CAPTURE_MODE_RELAXED;
        return true;
    default:
        return false;
    }
}

static enum cudaStreamCaptureMode capture_mode_from_cu(CUstreamCaptureMode m)
{
    return m == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL ? cudaStreamCaptureModeThreadLocal
           : m == CU_STREAM_CAPTURE_MODE_RELAXED    ? cudaStreamCaptureModeRelaxed
                                                    : cudaStreamCaptureModeGlobal;
}

cudaError_t CUDARTAPI cudaStreamBeginCapture(cudaStream_t stream,
                                             enum cudaStreamCaptureMode mode)
{
    CUstreamCaptureMode cu;
    if (!capture_mode_to_cu(mode, &cu))
        return rt_ret(cudaErrorInvalidValue);
    RT_FORWARD(DRV(begin_capture)(stream, cu));
}

cudaError_t CUDARTAPI cudaStreamEndCapture(cudaStream_t stream,
                                           cudaGraph_t *pGraph)
{
    RT_FORWARD(DRV(end_capture)(stream, pGraph));
}

cudaError_t CUDARTAPI cudaStreamIsCapturing(cudaStream_t stream,
                                            enum cudaStreamCaptureStatus *pCaptureStatus)
{
    cudaError_t e = pCaptureStatus ? rt_enter() : cudaErrorInvalidValue;
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    if (!e)
        e = rt_error(DRV(is_capturing)(stream, &cs));
    if (!e)
        *pCaptureStatus = cs == CU_STREAM_CAPTURE_STATUS_ACTIVE
                              ? cudaStreamCaptureStatusActive
                          : cs == CU_STREAM_CAPTURE_STATUS_INVALIDATED
                              ? cudaStreamCaptureStatusInvalidated
                              : cudaStreamCaptureStatusNone;
    return rt_ret(e);
}

cudaError_t CUDARTAPI cudaThreadExchangeStreamCaptureMode(
    enum cudaStreamCaptureMode *mode)
{
    CUstreamCaptureMode cu;
    cudaError_t e = mode && capture_mode_to_cu(*mode, &cu) ? rt_enter()
                                                           : cudaErrorInvalidValue;
    if (!e)
        e = rt_error(DRV(exchange_mode)(&cu));
    if (!e)
        *mode = capture_mode_from_cu(cu);
    return rt_ret(e);
}

cudaError_t CUDARTAPI cudaGraphDestroy(cudaGraph_t graph)
{
    RT_FORWARD(DRV(graph_destroy)(graph));
}

/* ---- driver entry points ---- */

static bool entry_flags(unsigned long long flags, cuuint64_t *out)
{
    switch (flags) {
    case cudaEnableDefault:
        *out = CU_GET_PROC_ADDRESS_DEFAULT;
        return true;
    case cudaEnableLegacyStream:
        *out = CU_GET_PROC_ADDRESS_LEGACY_STREAM;
        return true;
    case cudaEnablePerThreadDefaultStream:
        *out = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
        return true;
    default:
        return false;
    }
}

static enum cudaDriverEntryPointQueryResult
entry_status(CUdriverProcAddressQueryResult s)
{
    switch (s) {
    case CU_GET_PROC_ADDRESS_SUCCESS:
        return cudaDriverEntryPointSuccess;
    case CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT:
        return cudaDriverEntryPointVersionNotSufficent; /* sic, cuda 13 */
    default:
        return cudaDriverEntryPointSymbolNotFound;
    }
}

/* Forwards to the driver's cuGetProcAddress_v2, as cudart does. Following
 * the documentation, a symbol that is unknown or too new is not an error:
 * cudaSuccess, *funcPtr NULL, and the status says which. */
static cudaError_t entry_point(const char *symbol, void **funcPtr,
                               unsigned int cudaVersion,
                               unsigned long long flags,
                               enum cudaDriverEntryPointQueryResult *driverStatus)
{
    cuuint64_t cu_flags = 0;
    cudaError_t e = rt_loaded();
    if (!e && (!symbol || !funcPtr || cudaVersion > INT_MAX ||
               !entry_flags(flags, &cu_flags)))
        e = cudaErrorInvalidValue;
    if (e)
        return rt_ret(e);
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUresult r = rt.getproc(symbol, funcPtr, (int)cudaVersion, cu_flags, &status);
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_FOUND)
        return rt_ret(rt_error(r));
    if (r == CUDA_ERROR_NOT_FOUND)
        *funcPtr = NULL;
    if (driverStatus)
        *driverStatus = entry_status(status);
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaGetDriverEntryPoint(
    const char *symbol, void **funcPtr, unsigned long long flags,
    enum cudaDriverEntryPointQueryResult *driverStatus)
{
    return entry_point(symbol, funcPtr, RT_VERSION, flags, driverStatus);
}

cudaError_t CUDARTAPI cudaGetDriverEntryPointByVersion(
    const char *symbol, void **funcPtr, unsigned int cudaVersion,
    unsigned long long flags, enum cudaDriverEntryPointQueryResult *driverStatus)
{
    return entry_point(symbol, funcPtr, cudaVersion, flags, driverStatus);
}
