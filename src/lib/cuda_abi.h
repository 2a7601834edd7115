/* cuda_abi.h: the CUDA functions oomlens interposes, as one X-macro list.
 *
 * Each entry is X(name, return type, (parameters), (arguments)), where name is
 * the exact ABI symbol (cuMemAlloc_v2, not the header's cuMemAlloc macro).
 * The primitive layer expands it into its table of real function pointers,
 * the preload shim into its exported hooks, so the two can never disagree. */
#ifndef OL_CUDA_ABI_H
#define OL_CUDA_ABI_H

#include <cuda.h>
#include <cuda_runtime_api.h>

#define OL_DRIVER_FNS(X)                                                                \
  X(cuGetProcAddress, CUresult,                                                         \
    (const char *symbol, void **pfn, int version, cuuint64_t flags),                    \
    (symbol, pfn, version, flags))                                                      \
  X(cuGetProcAddress_v2, CUresult,                                                      \
    (const char *symbol, void **pfn, int version, cuuint64_t flags,                     \
     CUdriverProcAddressQueryResult *status),                                           \
    (symbol, pfn, version, flags, status))                                              \
  X(cuMemAlloc_v2, CUresult, (CUdeviceptr *dptr, size_t size), (dptr, size))            \
  X(cuMemFree_v2, CUresult, (CUdeviceptr dptr), (dptr))                                 \
  X(cuMemAllocAsync, CUresult, (CUdeviceptr *dptr, size_t size, CUstream stream),       \
    (dptr, size, stream))                                                               \
  X(cuMemAllocAsync_ptsz, CUresult,                                                     \
    (CUdeviceptr *dptr, size_t size, CUstream stream), (dptr, size, stream))            \
  X(cuMemFreeAsync, CUresult, (CUdeviceptr dptr, CUstream stream), (dptr, stream))      \
  X(cuMemFreeAsync_ptsz, CUresult, (CUdeviceptr dptr, CUstream stream), (dptr, stream)) \
  X(cuMemGetInfo_v2, CUresult, (size_t *free_bytes, size_t *total_bytes),               \
    (free_bytes, total_bytes))                                                          \
  X(cuMemCreate, CUresult,                                                              \
    (CUmemGenericAllocationHandle *handle, size_t size,                                 \
     const CUmemAllocationProp *prop, unsigned long long flags),                        \
    (handle, size, prop, flags))                                                        \
  X(cuMemRelease, CUresult, (CUmemGenericAllocationHandle handle), (handle))            \
  X(cuMemMap, CUresult,                                                                 \
    (CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,   \
     unsigned long long flags),                                                         \
    (ptr, size, offset, handle, flags))                                                 \
  X(cuMemUnmap, CUresult, (CUdeviceptr ptr, size_t size), (ptr, size))                  \
  X(cuMemAddressReserve, CUresult,                                                      \
    (CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,                 \
     unsigned long long flags),                                                         \
    (ptr, size, alignment, addr, flags))                                                \
  X(cuMemAddressFree, CUresult, (CUdeviceptr ptr, size_t size), (ptr, size))              \
  X(cuStreamCreate, CUresult, (CUstream *stream, unsigned int flags), (stream, flags))      \
  X(cuStreamCreateWithPriority, CUresult,                                               \
    (CUstream *stream, unsigned int flags, int priority), (stream, flags, priority))    \
  X(cuStreamDestroy_v2, CUresult, (CUstream stream), (stream))                          \
  X(cuStreamBeginCapture_v2, CUresult, (CUstream stream, CUstreamCaptureMode mode),     \
    (stream, mode))                                                                     \
  X(cuStreamBeginCapture_v2_ptsz, CUresult, (CUstream stream, CUstreamCaptureMode mode),\
    (stream, mode))                                                                     \
  X(cuStreamBeginCapture, CUresult, (CUstream stream), (stream))                        \
  X(cuStreamBeginCapture_ptsz, CUresult, (CUstream stream), (stream))                   \
  X(cuStreamBeginCaptureToGraph, CUresult,                                              \
    (CUstream stream, CUgraph graph, const CUgraphNode *deps,                           \
     const CUgraphEdgeData *edges, size_t count, CUstreamCaptureMode mode),             \
    (stream, graph, deps, edges, count, mode))                                          \
  X(cuStreamBeginCaptureToGraph_ptsz, CUresult,                                         \
    (CUstream stream, CUgraph graph, const CUgraphNode *deps,                           \
     const CUgraphEdgeData *edges, size_t count, CUstreamCaptureMode mode),             \
    (stream, graph, deps, edges, count, mode))                                          \
  X(cuStreamEndCapture, CUresult, (CUstream stream, CUgraph *graph), (stream, graph))   \
  X(cuStreamEndCapture_ptsz, CUresult, (CUstream stream, CUgraph *graph), (stream, graph))

#define OL_RUNTIME_FNS(X)                                                               \
  X(cudaMalloc, cudaError_t, (void **ptr, size_t size), (ptr, size))                    \
  X(cudaFree, cudaError_t, (void *ptr), (ptr))                                          \
  X(cudaMallocAsync, cudaError_t, (void **ptr, size_t size, cudaStream_t stream),       \
    (ptr, size, stream))                                                                \
  X(cudaMallocAsync_ptsz, cudaError_t,                                                  \
    (void **ptr, size_t size, cudaStream_t stream), (ptr, size, stream))                \
  X(cudaFreeAsync, cudaError_t, (void *ptr, cudaStream_t stream), (ptr, stream))        \
  X(cudaFreeAsync_ptsz, cudaError_t, (void *ptr, cudaStream_t stream), (ptr, stream))   \
  X(cudaMemGetInfo, cudaError_t, (size_t *free_bytes, size_t *total_bytes),             \
    (free_bytes, total_bytes))                                                          \
  X(cudaGetDriverEntryPoint, cudaError_t,                                               \
    (const char *symbol, void **pfn, unsigned long long flags,                          \
     enum cudaDriverEntryPointQueryResult *status),                                     \
    (symbol, pfn, flags, status))                                                       \
  X(cudaGetDriverEntryPointByVersion, cudaError_t,                                      \
    (const char *symbol, void **pfn, unsigned int version, unsigned long long flags,    \
     enum cudaDriverEntryPointQueryResult *status),                                     \
    (symbol, pfn, version, flags, status))

#define OL_INTERPOSED_FNS(X) OL_DRIVER_FNS(X) OL_RUNTIME_FNS(X)

/* One index per interposed function: OL_FN_cuMemAlloc_v2, ... */
typedef enum ol_fn {
#define OL_FN_ENUM(name, ret, params, args) OL_FN_##name,
  OL_INTERPOSED_FNS(OL_FN_ENUM)
#undef OL_FN_ENUM
  OL_FN_COUNT
} ol_fn_t;

#define OL_FN_FIRST_RUNTIME OL_FN_cudaMalloc

/* Pointer types of the real functions: ol_pfn_cuMemAlloc_v2, ... */
#define OL_FN_TYPEDEF(name, ret, params, args) typedef ret(*ol_pfn_##name) params;
OL_INTERPOSED_FNS(OL_FN_TYPEDEF)
#undef OL_FN_TYPEDEF

#endif
