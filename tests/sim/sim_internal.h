/* sim_internal.h - shared state of the simulated CUDA driver (libcuda.so.1).
 *
 * The fake driver is split by concern:
 *   sim_state.c   global state, lock, environment, counters, reset, fork
 *   sim_driver.c  cuInit, devices, contexts, error strings
 *   sim_getproc.c the cuGetProcAddress table (one row per exported ABI name)
 *   sim_mem.c     cuMemAlloc/Free (+Async), copies, pointer attributes,
 *                 the registry of live device memory
 *   sim_vmm.c     virtual memory management (reserve/create/map/...)
 *   sim_stream.c  streams, events, the worker thread, graph capture
 *
 * Names: `cu*` are the exported driver ABI, `simcu_*` the exported test
 * control API (simcu.h), `sim_*` shared between these files only (a version
 * script keeps them out of the dynamic symbol table), plain names static.
 *
 * Everything runs under one mutex (sim_lock). A device pointer is a real host
 * address so tests can read and write through it.
 */
#ifndef SIM_INTERNAL_H
#define SIM_INTERNAL_H

/* Ask cuda.h for the real ABI names: with this, `cuMemAlloc` is the legacy
 * v1 function, `cuMemAlloc_v2` the current one, and the `_ptsz` variants are
 * declared, exactly as the driver itself exports them. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "simcu.h"

#define SIM_MAX_DEVICES 16
#define SIM_GRANULARITY ((size_t)2 << 20) /* VMM granularity, as on H200 */
#define SIM_ALLOC_ROUND ((size_t)512)     /* cuMemAlloc accounting unit */
#define SIM_DRIVER_VERSION 13000

/* Every exported driver function: ABI name, the base name cuGetProcAddress
 * knows it by, the CUDA version that introduced this ABI, and whether it is
 * the per-thread-default-stream variant. One table drives the lookup
 * (sim_getproc.c) and the per-function call counters. */
#define SIM_ABI_TABLE(X) \
    X(cuInit, "cuInit", 2000, 0) \
    X(cuDriverGetVersion, "cuDriverGetVersion", 2020, 0) \
    X(cuGetErrorName, "cuGetErrorName", 6000, 0) \
    X(cuGetErrorString, "cuGetErrorString", 6000, 0) \
    X(cuGetProcAddress, "cuGetProcAddress", 11030, 0) \
    X(cuGetProcAddress_v2, "cuGetProcAddress", 12000, 0) \
    X(cuDeviceGet, "cuDeviceGet", 2000, 0) \
    X(cuDeviceGetCount, "cuDeviceGetCount", 2000, 0) \
    X(cuDeviceGetName, "cuDeviceGetName", 2000, 0) \
    X(cuDeviceGetAttribute, "cuDeviceGetAttribute", 2000, 0) \
    X(cuDeviceTotalMem, "cuDeviceTotalMem", 2000, 0) \
    X(cuDeviceTotalMem_v2, "cuDeviceTotalMem", 3020, 0) \
    X(cuDeviceGetPCIBusId, "cuDeviceGetPCIBusId", 4010, 0) \
    X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 7000, 0) \
    X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease", 7000, 0) \
    X(cuDevicePrimaryCtxRelease_v2, "cuDevicePrimaryCtxRelease", 11000, 0) \
    X(cuDevicePrimaryCtxGetState, "cuDevicePrimaryCtxGetState", 7000, 0) \
    X(cuCtxGetCurrent, "cuCtxGetCurrent", 4000, 0) \
    X(cuCtxSetCurrent, "cuCtxSetCurrent", 4000, 0) \
    X(cuCtxPushCurrent, "cuCtxPushCurrent", 2000, 0) \
    X(cuCtxPushCurrent_v2, "cuCtxPushCurrent", 4000, 0) \
    X(cuCtxPopCurrent, "cuCtxPopCurrent", 2000, 0) \
    X(cuCtxPopCurrent_v2, "cuCtxPopCurrent", 4000, 0) \
    X(cuCtxGetDevice, "cuCtxGetDevice", 2000, 0) \
    X(cuCtxGetDevice_v2, "cuCtxGetDevice", 13000, 0) \
    X(cuCtxSynchronize, "cuCtxSynchronize", 2000, 0) \
    X(cuCtxSynchronize_v2, "cuCtxSynchronize", 13000, 0) \
    X(cuCtxGetStreamPriorityRange, "cuCtxGetStreamPriorityRange", 5050, 0) \
    X(cuMemAlloc, "cuMemAlloc", 2000, 0) \
    X(cuMemAlloc_v2, "cuMemAlloc", 3020, 0) \
    X(cuMemFree, "cuMemFree", 2000, 0) \
    X(cuMemFree_v2, "cuMemFree", 3020, 0) \
    X(cuMemGetInfo, "cuMemGetInfo", 2000, 0) \
    X(cuMemGetInfo_v2, "cuMemGetInfo", 3020, 0) \
    X(cuMemGetAddressRange_v2, "cuMemGetAddressRange", 3020, 0) \
    X(cuMemAllocAsync, "cuMemAllocAsync", 11020, 0) \
    X(cuMemAllocAsync_ptsz, "cuMemAllocAsync", 11020, 1) \
    X(cuMemFreeAsync, "cuMemFreeAsync", 11020, 0) \
    X(cuMemFreeAsync_ptsz, "cuMemFreeAsync", 11020, 1) \
    X(cuMemcpy, "cuMemcpy", 4000, 0) \
    X(cuMemcpyHtoD_v2, "cuMemcpyHtoD", 3020, 0) \
    X(cuMemcpyDtoH_v2, "cuMemcpyDtoH", 3020, 0) \
    X(cuMemcpyDtoD_v2, "cuMemcpyDtoD", 3020, 0) \
    X(cuMemsetD8_v2, "cuMemsetD8", 3020, 0) \
    X(cuPointerGetAttribute, "cuPointerGetAttribute", 4000, 0) \
    X(cuMemAddressReserve, "cuMemAddressReserve", 10020, 0) \
    X(cuMemAddressFree, "cuMemAddressFree", 10020, 0) \
    X(cuMemCreate, "cuMemCreate", 10020, 0) \
    X(cuMemRelease, "cuMemRelease", 10020, 0) \
    X(cuMemMap, "cuMemMap", 10020, 0) \
    X(cuMemUnmap, "cuMemUnmap", 10020, 0) \
    X(cuMemSetAccess, "cuMemSetAccess", 10020, 0) \
    X(cuMemGetAccess, "cuMemGetAccess", 10020, 0) \
    X(cuMemGetAllocationGranularity, "cuMemGetAllocationGranularity", 10020, 0) \
    X(cuMemGetAllocationPropertiesFromHandle, "cuMemGetAllocationPropertiesFromHandle", 10020, 0) \
    X(cuMemRetainAllocationHandle, "cuMemRetainAllocationHandle", 11000, 0) \
    X(cuStreamCreate, "cuStreamCreate", 2000, 0) \
    X(cuStreamCreateWithPriority, "cuStreamCreateWithPriority", 5050, 0) \
    X(cuStreamDestroy, "cuStreamDestroy", 2000, 0) \
    X(cuStreamDestroy_v2, "cuStreamDestroy", 4000, 0) \
    X(cuStreamQuery, "cuStreamQuery", 2000, 0) \
    X(cuStreamQuery_ptsz, "cuStreamQuery", 7000, 1) \
    X(cuStreamSynchronize, "cuStreamSynchronize", 2000, 0) \
    X(cuStreamSynchronize_ptsz, "cuStreamSynchronize", 7000, 1) \
    X(cuStreamWaitEvent, "cuStreamWaitEvent", 3020, 0) \
    X(cuStreamWaitEvent_ptsz, "cuStreamWaitEvent", 7000, 1) \
    X(cuStreamBeginCapture, "cuStreamBeginCapture", 10000, 0) \
    X(cuStreamBeginCapture_ptsz, "cuStreamBeginCapture", 10000, 1) \
    X(cuStreamBeginCapture_v2, "cuStreamBeginCapture", 10010, 0) \
    X(cuStreamBeginCapture_v2_ptsz, "cuStreamBeginCapture", 10010, 1) \
    X(cuStreamBeginCaptureToGraph, "cuStreamBeginCaptureToGraph", 12030, 0) \
    X(cuStreamBeginCaptureToGraph_ptsz, "cuStreamBeginCaptureToGraph", 12030, 1) \
    X(cuGraphCreate, "cuGraphCreate", 10000, 0) \
    X(cuStreamEndCapture, "cuStreamEndCapture", 10000, 0) \
    X(cuStreamEndCapture_ptsz, "cuStreamEndCapture", 10000, 1) \
    X(cuStreamIsCapturing, "cuStreamIsCapturing", 10000, 0) \
    X(cuStreamIsCapturing_ptsz, "cuStreamIsCapturing", 10000, 1) \
    X(cuStreamGetCaptureInfo, "cuStreamGetCaptureInfo", 10010, 0) \
    X(cuStreamGetCaptureInfo_v2, "cuStreamGetCaptureInfo", 11030, 0) \
    X(cuStreamGetCaptureInfo_v3, "cuStreamGetCaptureInfo", 12030, 0) \
    X(cuThreadExchangeStreamCaptureMode, "cuThreadExchangeStreamCaptureMode", 10010, 0) \
    X(cuGraphDestroy, "cuGraphDestroy", 10000, 0) \
    X(cuEventCreate, "cuEventCreate", 2000, 0) \
    X(cuEventRecord, "cuEventRecord", 2000, 0) \
    X(cuEventRecord_ptsz, "cuEventRecord", 7000, 1) \
    X(cuEventQuery, "cuEventQuery", 2000, 0) \
    X(cuEventSynchronize, "cuEventSynchronize", 2000, 0) \
    X(cuEventDestroy, "cuEventDestroy", 2000, 0) \
    X(cuEventDestroy_v2, "cuEventDestroy", 4000, 0) \
    X(cuEventElapsedTime, "cuEventElapsedTime", 2000, 0) \
    X(cuEventElapsedTime_v2, "cuEventElapsedTime", 12080, 0) \
    X(cuMemHostAlloc, "cuMemHostAlloc", 2020, 0) \
    X(cuMemFreeHost, "cuMemFreeHost", 2000, 0) \
    X(cuMemHostGetDevicePointer_v2, "cuMemHostGetDevicePointer", 3020, 0) \
    X(cuStreamWriteValue32_v2, "cuStreamWriteValue32", 11070, 0) \
    X(cuCtxRecordEvent, "cuCtxRecordEvent", 12050, 0) \
    X(cuCtxWaitEvent, "cuCtxWaitEvent", 12050, 0)

enum {
#define SIM_ABI_ENUM(abi, base, ver, ptds) SIM_FN_##abi,
    SIM_ABI_TABLE(SIM_ABI_ENUM)
#undef SIM_ABI_ENUM
    SIM_FN_COUNT
};

/* Count one call of an exported function (simcu_call_count). */
#define SIM_CALLED(abi) sim_count_call(SIM_FN_##abi)

/* ---- device memory registry (sim_mem.c, used by sim_vmm.c) ---- */

typedef enum {
    SIM_REGION_ALLOC, /* cuMemAlloc / cuMemAllocAsync: its own mmap */
    SIM_REGION_MAP,   /* one cuMemMap of a physical handle */
} sim_region_kind_t;

typedef struct sim_handle sim_handle_t;

typedef struct sim_region {
    uintptr_t base;
    size_t size;              /* bytes a kernel may touch */
    sim_region_kind_t kind;
    int dev;
    uint64_t id;              /* process-unique, for BUFFER_ID */
    /* SIM_REGION_ALLOC */
    size_t charged;           /* size rounded to SIM_ALLOC_ROUND */
    size_t map_len;           /* length of the host mapping */
    bool free_pending;        /* freed with cuMemFreeAsync, not yet released */
    struct sim_region *deferred_next; /* freed during capture */
    /* SIM_REGION_MAP */
    sim_handle_t *handle;
    int prot;                 /* PROT_* granted by cuMemSetAccess */
} sim_region_t;

/* A physical allocation from cuMemCreate: a slice of the device's memfd. */
struct sim_handle {
    uint64_t id;
    int dev;
    size_t size;
    size_t file_off;
    unsigned maps;            /* live cuMemMap of it */
    unsigned refs;            /* cuMemCreate + cuMemRetainAllocationHandle */
    CUmemAllocationProp prop;
};

typedef struct sim_reservation {
    uintptr_t base;
    size_t size;
} sim_reservation_t;

typedef struct sim_extent {
    size_t off, len;
} sim_extent_t;

/* ---- streams, events, work (sim_stream.c) ---- */

typedef enum {
    SIM_WORK_FILL,
    SIM_WORK_SLEEP,
    SIM_WORK_COPY,
    SIM_WORK_CHECK,
    SIM_WORK_RELEASE,
    SIM_WORK_RECORD,
    SIM_WORK_WAIT,
    SIM_WORK_WRITE32, /* cuStreamWriteValue32: target stored at dst */
} sim_work_kind_t;

typedef struct sim_item {
    struct sim_item *next;
    sim_work_kind_t kind;
    uint64_t seq;             /* global enqueue order */
    uint64_t barrier;         /* blocking stream: legacy seq to wait for */
    uint64_t due_ns;
    unsigned delay_us;
    bool started;
    uintptr_t dst, src;
    size_t bytes;
    unsigned char value;
    bool check_dst, check_src; /* range must be device memory */
    CUresult *result;         /* synchronous callers wait for this */
    sim_region_t *region;     /* SIM_WORK_RELEASE */
    struct CUevent_st *event; /* SIM_WORK_RECORD / SIM_WORK_WAIT */
    uint64_t target;
    /* a context-recorded event it waits for (cuCtxWaitEvent, or
     * cuStreamWaitEvent on one): it starts once every stream of its device
     * has finished the work enqueued up to gate_upto (0: none) */
    uint64_t gate_upto;
} sim_item_t;

typedef enum {
    SIM_STREAM_USER,
    SIM_STREAM_LEGACY,
    SIM_STREAM_PER_THREAD,
} sim_stream_kind_t;

typedef enum {
    SIM_CAP_NONE,
    SIM_CAP_ACTIVE,
    SIM_CAP_INVALIDATED,
} sim_cap_state_t;

struct CUgraph_st {
    struct CUgraph_st *next;
    unsigned long nodes;
};

struct CUstream_st {
    struct CUstream_st *next;
    sim_stream_kind_t kind;
    int dev;
    unsigned flags;
    int priority;
    bool destroyed;
    sim_item_t *head, *tail;
    uint64_t last_seq;
    sim_cap_state_t cap;
    CUstreamCaptureMode cap_mode;
    pthread_t cap_thread;
    uint64_t cap_id;
    struct CUgraph_st *cap_graph;
    sim_region_t *cap_frees;  /* cuMemFreeAsync while capturing */
};

struct CUevent_st {
    struct CUevent_st *next;
    unsigned flags;
    uint64_t recorded;        /* records issued */
    uint64_t completed;       /* highest record completed */
    uint64_t time_ns;
    unsigned refs;            /* handle + queued items */
    bool destroyed;
    int dev;                  /* its context's device */
    /* cuCtxRecordEvent: record ctx_target passes once every stream of the
     * device has finished its work enqueued up to ctx_upto */
    uint64_t ctx_target, ctx_upto;
};

struct CUctx_st {
    int dev;
};

/* ---- global state (sim_state.c) ---- */

typedef struct sim_dev {
    struct CUctx_st ctx;      /* the primary context */
    int ctx_refs;
    size_t capacity, external, used, peak;
    struct CUstream_st *legacy;
    /* cuCtxWaitEvent: work enqueued after it starts once every stream has
     * finished the work enqueued up to gate_upto (the latest such wait's
     * is the furthest, and covers the earlier ones) */
    uint64_t gate_upto;
    int memfd;                /* backs cuMemCreate handles, -1 if none yet */
    size_t memfd_size;
    sim_extent_t *free_ext;   /* free slices of the memfd, sorted */
    size_t n_free_ext, cap_free_ext;
} sim_dev_t;

typedef struct sim_state {
    bool initialized;
    int ndev;
    bool no_vmm;
    bool no_stream_mem_ops; /* SIMCU_NO_STREAM_MEM_OPS: cuStreamWriteValue32 unsupported */
    bool no_ctx_events; /* SIMCU_NO_CTX_EVENTS: cuCtxRecordEvent/cuCtxWaitEvent unsupported */
    int driver_version;
    sim_dev_t dev[SIM_MAX_DEVICES];

    unsigned long fail_at, alloc_calls;
    unsigned long fail_event_at, event_creates; /* SIMCU_FAIL_EVENT: that cuEventCreate fails */
    CUresult fail_error; /* what the picked allocation call returns */
    unsigned long syncs, stream_syncs, violations, faults, check_failures;

    sim_region_t **regions;   /* sorted by base */
    size_t n_regions, cap_regions;
    sim_handle_t **handles;   /* sorted by id */
    size_t n_handles, cap_handles;
    sim_reservation_t *resv;
    size_t n_resv, cap_resv;
    uint64_t next_id;

    struct CUstream_st *streams;
    struct CUevent_st *events;
    struct CUgraph_st *graphs;
    uint64_t seq;
    uint64_t capture_ids;
    size_t pending;
    uint64_t generation;      /* bumped by reset: stale per-thread caches */

    bool worker_running, worker_stop;
    pthread_t worker;
} sim_state_t;

extern sim_state_t sim;

/* "sim_state.c" */
void sim_lock(void);
void sim_unlock(void);
void sim_wait_done(void);
void sim_signal_done(void);
void sim_signal_work(void);
void sim_wait_work(uint64_t deadline_ns);
uint64_t sim_now_ns(void);
void sim_count_call(int fn);
unsigned long sim_call_count_at(int fn);
void *sim_grow(void *arr, size_t *cap, size_t need, size_t elem);
bool sim_parse_size(const char *s, uint64_t *out);
bool sim_dev_valid(int dev);
CUresult sim_charge(int dev, size_t bytes);
void sim_uncharge(int dev, size_t bytes);
bool sim_alloc_call_fails(void);
bool sim_event_create_fails(void);
CUresult sim_injected_error(void); /* SIMCU_FAIL_ERROR, out of memory by default */

/* "sim_driver.c" */
CUresult sim_check_init(void);
CUresult sim_current_dev(int *dev);
CUcontext sim_current_ctx(void);

/* "sim_mem.c" */
sim_region_t *sim_region_find(uintptr_t addr);
sim_region_t *sim_region_at(uintptr_t base, sim_region_kind_t kind);
CUresult sim_region_insert(sim_region_t *r);
void sim_region_remove(sim_region_t *r);
void sim_region_release(sim_region_t *r);
bool sim_range_accessible(uintptr_t p, size_t n, bool write);
bool sim_range_unused(uintptr_t p, size_t n);
void sim_mem_free_all(void);

/* "sim_vmm.c" */
void sim_vmm_free_all(void);

/* "sim_stream.c" */
CUresult sim_stream_resolve(CUstream h, bool ptds, struct CUstream_st **out);
sim_item_t *sim_item_new(sim_work_kind_t kind);
CUresult sim_enqueue(struct CUstream_st *s, sim_item_t *it);
CUresult sim_run_sync(struct CUstream_st *s, sim_item_t *it);
void sim_device_sync(int dev, uint64_t upto);
CUresult sim_unsafe_call_check(void);
CUresult sim_device_sync_check(int dev);
void sim_stream_free_all(void);
void sim_worker_stop(void);
void sim_after_fork_child(void);

#endif
