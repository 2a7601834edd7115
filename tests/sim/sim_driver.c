/* sim_driver.c - cuInit, the simulated devices, their primary contexts, the
 * per-thread context stack, and error names and strings.
 *
 * Devices are a fixed array (SIM_MAX_DEVICES) so a context pointer stays
 * valid memory across simcu_reset; SIMCU_DEVICES says how many are real.
 */
#include "sim_internal.h"

#include <limits.h>
#include <stdio.h>

#define CTX_STACK_MAX 32

/* The thread's context stack; its top is the current context. */
static _Thread_local CUcontext ctx_stack[CTX_STACK_MAX];
static _Thread_local int ctx_depth;

/* ---- helpers shared with the other files (lock held) ---- */

CUresult sim_check_init(void)
{
    return sim.initialized ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

CUcontext sim_current_ctx(void)
{
    return ctx_depth ? ctx_stack[ctx_depth - 1] : NULL;
}

static bool ctx_valid(CUcontext c)
{
    for (int i = 0; c && i < sim.ndev; i++)
        if (c == &sim.dev[i].ctx)
            return true;
    return false;
}

/* The device of the current context: what every memory call needs. */
CUresult sim_current_dev(int *dev)
{
    CUresult r = sim_check_init();
    if (r)
        return r;
    CUcontext c = sim_current_ctx();
    if (!ctx_valid(c))
        return CUDA_ERROR_INVALID_CONTEXT;
    *dev = c->dev;
    return CUDA_SUCCESS;
}

static CUresult check_device(CUdevice dev)
{
    CUresult r = sim_check_init();
    if (!r && !sim_dev_valid(dev))
        r = CUDA_ERROR_INVALID_DEVICE;
    return r;
}

/* ---- init and version ---- */

CUresult CUDAAPI cuInit(unsigned int Flags)
{
    SIM_CALLED(cuInit);
    if (Flags)
        return CUDA_ERROR_INVALID_VALUE;
    sim_lock();
    CUresult r = CUDA_SUCCESS;
    if (sim.ndev == 0)
        r = CUDA_ERROR_NO_DEVICE;
    else
        sim.initialized = true;
    sim_unlock();
    return r;
}

CUresult CUDAAPI cuDriverGetVersion(int *driverVersion)
{
    SIM_CALLED(cuDriverGetVersion);
    if (!driverVersion)
        return CUDA_ERROR_INVALID_VALUE;
    sim_lock();
    *driverVersion = sim.driver_version;
    sim_unlock();
    return CUDA_SUCCESS;
}

/* ---- devices ---- */

CUresult CUDAAPI cuDeviceGet(CUdevice *device, int ordinal)
{
    SIM_CALLED(cuDeviceGet);
    sim_lock();
    CUresult r = check_device(ordinal);
    if (!r && !device)
        r = CUDA_ERROR_INVALID_VALUE;
    if (!r)
        *device = ordinal;
    sim_unlock();
    return r;
}

CUresult CUDAAPI cuDeviceGetCount(int *count)
{
    SIM_CALLED(cuDeviceGetCount);
    sim_lock();
    CUresult r = sim_check_init();
    if (!r && !count)
        r = CUDA_ERROR_INVALID_VALUE;
    if (!r)
        *count = sim.ndev;
    sim_unlock();
    return r;
}

CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice dev)
{
    SIM_CALLED(cuDeviceGetName);
    sim_lock();
    CUresult r = check_device(dev);
    if (!r && (!name || len <= 0))
        r = CUDA_ERROR_INVALID_VALUE;
    if (!r)
        snprintf(name, (size_t)len, "SimCU Device %d", dev);
    sim_unlock();
    return r;
}

/* Attributes a caller of an allocator may look at; the rest read as 0. The
 * figures are an H200's. */
static int attribute_value(CUdevice_attribute a, CUdevice dev)
{
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
        return !sim.no_vmm;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS:
        return 1;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
        return 9;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
        return 132;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
        return 32;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
        return 1024;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT:
        return 512;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
        return dev + 1;
    default:
        return 0;
    }
}

CUresult CUDAAPI cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib,
                                      CUdevice dev)
{
    SIM_CALLED(cuDeviceGetAttribute);
    sim_lock();
    CUresult r = check_device(dev);
    if (!r && (!pi || attrib < 1 || attrib >= CU_DEVICE_ATTRIBUTE_MAX))
        r = CUDA_ERROR_INVALID_VALUE;
    if (!r)
        *pi = attribute_value(attrib, dev);
    sim_unlock();
    return r;
}

static CUresult total_mem(size_t *bytes, CUdevice dev)
{
    sim_lock();
    CUresult r = check_device(dev);
    if (!r && !bytes)
        r = CUDA_ERROR_INVALID_VALUE;
    if (!r)
        *bytes = sim.dev[dev].capacity;
    sim_unlock();
    return r;
}

CUresult CUDAAPI cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    SIM_CALLED(cuDeviceTotalMem_v2);
    return total_mem(bytes, dev);
}

/* Device d sits on PCI bus 0x10 + d (sim_nvml.c finds it there). */
CUresult CUDAAPI cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
    SIM_CALLED(cuDeviceGetPCIBusId);
    sim_lock();
    CUresult r = check_device(dev);
    if (!r && (!pciBusId || len < 13))
        r = CUDA_ERROR_INVALID_VALUE;
    if (!r)
        snprintf(pciBusId, (size_t)len, "0000:%02x:00.0", 0x10 + dev);
    sim_unlock();
    return r;
}

/* Legacy 32-bit ABI: clamps. */
CUresult CUDAAPI cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
    SIM_CALLED(cuDeviceTotalMem);
    size_t v = 0;
    CUresult r = total_mem(bytes ? &v : NULL, dev);
    if (!r)
        *bytes = v > UINT_MAX ? UINT_MAX : (unsigned int)v;
    return r;
}

/* ---- primary contexts ---- */

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    SIM_CALLED(cuDevicePrimaryCtxRetain);
    sim_lock();
    CUresult r = check_device(dev);
    if (!r && !pctx)
        r = CUDA_ERROR_INVALID_VALUE;
    if (!r) {
        sim.dev[dev].ctx_refs++;
        *pctx = &sim.dev[dev].ctx;
    }
    sim_unlock();
    return r;
}

/* The context stays usable when the count drops to 0: unlike CUDA, the
 * simulation never tears down a primary context and frees its memory. */
static CUresult primary_release(CUdevice dev)
{
    sim_lock();
    CUresult r = check_device(dev);
    if (!r && sim.dev[dev].ctx_refs == 0)
        r = CUDA_ERROR_INVALID_CONTEXT;
    if (!r)
        sim.dev[dev].ctx_refs--;
    sim_unlock();
    return r;
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    SIM_CALLED(cuDevicePrimaryCtxRelease_v2);
    return primary_release(dev);
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev)
{
    SIM_CALLED(cuDevicePrimaryCtxRelease);
    return primary_release(dev);
}

CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags,
                                            int *active)
{
    SIM_CALLED(cuDevicePrimaryCtxGetState);
    sim_lock();
    CUresult r = check_device(dev);
    if (!r && (!flags || !active))
        r = CUDA_ERROR_INVALID_VALUE;
    if (!r) {
        *flags = 0;
        *active = sim.dev[dev].ctx_refs > 0;
    }
    sim_unlock();
    return r;
}

/* ---- the current context ---- */

CUresult CUDAAPI cuCtxGetCurrent(CUcontext *pctx)
{
    SIM_CALLED(cuCtxGetCurrent);
    sim_lock();
    CUresult r = sim_check_init();
    if (!r && !pctx)
        r = CUDA_ERROR_INVALID_VALUE;
    if (!r)
        *pctx = sim_current_ctx();
    sim_unlock();
    return r;
}

/* Replaces the top of the stack; NULL pops it, as in CUDA. */
CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx)
{
    SIM_CALLED(cuCtxSetCurrent);
    sim_lock();
    CUresult r = sim_check_init();
    if (!r && ctx && !ctx_valid(ctx))
        r = CUDA_ERROR_INVALID_CONTEXT;
    if (!r) {
        if (!ctx) {
            if (ctx_depth)
                ctx_depth--;
        } else if (ctx_depth) {
            ctx_stack[ctx_depth - 1] = ctx;
        } else {
            ctx_stack[ctx_depth++] = ctx;
        }
    }
    sim_unlock();
    return r;
}

static CUresult ctx_push(CUcontext ctx)
{
    sim_lock();
    CUresult r = sim_check_init();
    if (!r && !ctx_valid(ctx))
        r = CUDA_ERROR_INVALID_CONTEXT;
    if (!r && ctx_depth == CTX_STACK_MAX)
        r = CUDA_ERROR_INVALID_VALUE;
    if (!r)
        ctx_stack[ctx_depth++] = ctx;
    sim_unlock();
    return r;
}

CUresult CUDAAPI cuCtxPushCurrent_v2(CUcontext ctx)
{
    SIM_CALLED(cuCtxPushCurrent_v2);
    return ctx_push(ctx);
}

CUresult CUDAAPI cuCtxPushCurrent(CUcontext ctx)
{
    SIM_CALLED(cuCtxPushCurrent);
    return ctx_push(ctx);
}

static CUresult ctx_pop(CUcontext *pctx)
{
    sim_lock();
    CUresult r = sim_check_init();
    if (!r && ctx_depth == 0)
        r = CUDA_ERROR_INVALID_CONTEXT;
    if (!r) {
        CUcontext c = ctx_stack[--ctx_depth];
        if (pctx)
            *pctx = c;
    }
    sim_unlock();
    return r;
}

CUresult CUDAAPI cuCtxPopCurrent_v2(CUcontext *pctx)
{
    SIM_CALLED(cuCtxPopCurrent_v2);
    return ctx_pop(pctx);
}

CUresult CUDAAPI cuCtxPopCurrent(CUcontext *pctx)
{
    SIM_CALLED(cuCtxPopCurrent);
    return ctx_pop(pctx);
}

/* NULL means the current context (the CUDA 13 _v2 calls take one). */
static CUresult ctx_device(CUcontext ctx, int *dev)
{
    if (!ctx)
        return sim_current_dev(dev);
    CUresult r = sim_check_init();
    if (!r && !ctx_valid(ctx))
        r = CUDA_ERROR_INVALID_CONTEXT;
    if (!r)
        *dev = ctx->dev;
    return r;
}

static CUresult ctx_get_device(CUdevice *device, CUcontext ctx)
{
    sim_lock();
    int dev = 0;
    CUresult r = ctx_device(ctx, &dev);
    if (!r && !device)
        r = CUDA_ERROR_INVALID_VALUE;
    if (!r)
        *device = dev;
    sim_unlock();
    return r;
}

CUresult CUDAAPI cuCtxGetDevice(CUdevice *device)
{
    SIM_CALLED(cuCtxGetDevice);
    return ctx_get_device(device, NULL);
}

CUresult CUDAAPI cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
    SIM_CALLED(cuCtxGetDevice_v2);
    return ctx_get_device(device, ctx);
}

/* A device-wide synchronization: counted, and illegal during capture. */
static CUresult ctx_sync(CUcontext ctx)
{
    sim_lock();
    int dev = 0;
    CUresult r = ctx_device(ctx, &dev);
    if (!r)
        r = sim_device_sync_check(dev);
    if (!r) {
        sim.syncs++;
        sim_device_sync(dev, sim.seq);
    }
    sim_unlock();
    return r;
}

CUresult CUDAAPI cuCtxSynchronize(void)
{
    SIM_CALLED(cuCtxSynchronize);
    return ctx_sync(NULL);
}

CUresult CUDAAPI cuCtxSynchronize_v2(CUcontext ctx)
{
    SIM_CALLED(cuCtxSynchronize_v2);
    return ctx_sync(ctx);
}

CUresult CUDAAPI cuCtxGetStreamPriorityRange(int *leastPriority,
                                             int *greatestPriority)
{
    SIM_CALLED(cuCtxGetStreamPriorityRange);
    sim_lock();
    int dev;
    CUresult r = sim_current_dev(&dev);
    sim_unlock();
    if (r)
        return r;
    if (leastPriority)
        *leastPriority = 0;
    if (greatestPriority)
        *greatestPriority = -5;
    return CUDA_SUCCESS;
}

/* ---- errors ---- */

#define SIM_ERRORS(X) \
    X(CUDA_SUCCESS, "no error") \
    X(CUDA_ERROR_INVALID_VALUE, "invalid argument") \
    X(CUDA_ERROR_OUT_OF_MEMORY, "out of memory") \
    X(CUDA_ERROR_NOT_INITIALIZED, "initialization error") \
    X(CUDA_ERROR_DEINITIALIZED, "driver shutting down") \
    X(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected") \
    X(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal") \
    X(CUDA_ERROR_INVALID_CONTEXT, "invalid device context") \
    X(CUDA_ERROR_ALREADY_MAPPED, "resource already mapped") \
    X(CUDA_ERROR_NOT_MAPPED, "resource not mapped") \
    X(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle") \
    X(CUDA_ERROR_ILLEGAL_STATE, \
      "the operation cannot be performed in the present state") \
    X(CUDA_ERROR_NOT_FOUND, "named symbol not found") \
    X(CUDA_ERROR_NOT_READY, "device not ready") \
    X(CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered") \
    X(CUDA_ERROR_NOT_PERMITTED, "operation not permitted") \
    X(CUDA_ERROR_NOT_SUPPORTED, "operation not supported") \
    X(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, \
      "operation not permitted when stream is capturing") \
    X(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, \
      "operation failed due to a previous error during capture") \
    X(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, \
      "capture was not initiated in this stream") \
    X(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, \
      "operation would make the legacy stream depend on a capturing " \
      "blocking stream") \
    X(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, \
      "attempt to terminate a thread-local capture sequence from another " \
      "thread") \
    X(CUDA_ERROR_UNKNOWN, "unknown error")

static const struct {
    CUresult code;
    const char *name, *text;
} errors[] = {
#define SIM_ERROR_ROW(code, text) {code, #code, text},
    SIM_ERRORS(SIM_ERROR_ROW)
#undef SIM_ERROR_ROW
};

static CUresult error_lookup(CUresult e, const char **out, bool name)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof errors / sizeof *errors; i++) {
        if (errors[i].code == e) {
            *out = name ? errors[i].name : errors[i].text;
            return CUDA_SUCCESS;
        }
    }
    *out = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuGetErrorName(CUresult error, const char **pStr)
{
    SIM_CALLED(cuGetErrorName);
    return error_lookup(error, pStr, true);
}

CUresult CUDAAPI cuGetErrorString(CUresult error, const char **pStr)
{
    SIM_CALLED(cuGetErrorString);
    return error_lookup(error, pStr, false);
}
