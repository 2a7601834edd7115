/* simcu.h - test-control API of the simulated CUDA driver.
 *
 * The fake libcuda.so.1 built in tests/sim exports these next to the real
 * driver ABI. Tests call them to set the scene (capacity, memory held by
 * others, failures to inject), to launch simulated kernels whose work lands
 * later in stream order, and to read back what happened (bytes in use,
 * synchronizations, capture violations, stray kernel accesses).
 *
 * Link the test against the fake libcuda (meson: sim_driver_dep) or resolve
 * these with dlsym on dlopen("libcuda.so.1"). All functions are thread-safe.
 * `dev` arguments out of range read as 0 / are ignored.
 */
#ifndef SIMCU_H
#define SIMCU_H

#include <cuda.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- scene ---- */

/* Drop all memory, streams, events and pending work, clear every counter and
 * re-read the SIMCU_* environment. Whether cuInit was called is kept, and
 * primary contexts stay valid, so a loaded cudart keeps working. Must not
 * race other calls into the driver. */
void simcu_reset(void);

/* simcu_reset, and forget cuInit too, as in a fresh process. */
void simcu_uninit(void);

int simcu_device_count(void);
size_t simcu_capacity(int dev);
void simcu_set_capacity(int dev, size_t bytes);
/* Bytes used on `dev` by "someone else" (other processes, CUDA context). */
void simcu_set_external(int dev, size_t bytes);
/* Make the nth allocation call from now on (1 = the next one; counting
 * cuMemAlloc, cuMemAllocAsync and cuMemCreate together) fail with
 * CUDA_ERROR_OUT_OF_MEMORY; 0 turns it off. SIMCU_FAIL_ALLOC=n does the
 * same counted from the start (or from simcu_reset). */
void simcu_fail_alloc_at(unsigned long n);
/* The error that picked call returns instead (a CUresult; 0 gives back the
 * default, CUDA_ERROR_OUT_OF_MEMORY). SIMCU_FAIL_ERROR=code does the same
 * from the start. */
void simcu_fail_alloc_error(CUresult err);
/* SIMCU_FAIL_EVENT=n: the nth cuEventCreate from the start (or from
 * simcu_reset) fails with CUDA_ERROR_OUT_OF_MEMORY, as when host memory
 * is short; the ones after it succeed. */

/* ---- what happened ---- */

/* external + every live allocation (cuMemAlloc sizes rounded up to 512 B,
 * cuMemCreate handles until released and unmapped). */
size_t simcu_used_bytes(int dev);
/* What the device holds for others (SIMCU_EXTERNAL, or simcu_set_external). */
size_t simcu_external_bytes(int dev);
size_t simcu_peak_used_bytes(int dev);
/* Allocations whose memory still counts as used: cuMemAlloc/cuMemAllocAsync
 * blocks not yet released, plus cuMemCreate handles. */
size_t simcu_live_allocations(void);
/* cuMemAddressReserve ranges not yet freed. */
size_t simcu_live_reservations(void);
unsigned long simcu_alloc_calls(void);
/* Device-wide synchronizations: cuCtxSynchronize and the implicit one in
 * cuMemFree. */
unsigned long simcu_sync_count(void);
/* cuStreamSynchronize and cuEventSynchronize calls. */
unsigned long simcu_stream_sync_count(void);
/* Calls made illegal by an ongoing stream capture (each invalidated it). */
unsigned long simcu_capture_violations(void);
/* Simulated kernels that touched memory that was not live, mapped and
 * accessible when they ran (they are skipped: use after free, overrun). */
unsigned long simcu_fault_count(void);
/* simcu_launch_check kernels that found other bytes than expected. */
unsigned long simcu_check_failures(void);
/* Calls of one exported driver function by ABI name ("cuMemAlloc_v2"),
 * whichever way it was reached; 0 for unknown names. */
unsigned long simcu_call_count(const char *abi_name);

/* ---- simulated kernels ----
 * Each runs in stream order: it starts when the work enqueued before it on
 * the stream (and, for the legacy default stream, on blocking streams) has
 * completed, then takes delay_us before its effect lands. Stream 0 is the
 * legacy default stream of the current context, CU_STREAM_PER_THREAD the
 * calling thread's default stream. Kernels enqueued on a capturing stream
 * are captured, not run. */

/* They return CUDA_SUCCESS once enqueued (or captured), or the error the
 * stream gives: CUDA_ERROR_INVALID_CONTEXT (stream 0 with no current
 * context), CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_STREAM_CAPTURE_*. */

/* memset(dst, value, bytes). */
CUresult simcu_launch_fill(CUstream s, CUdeviceptr dst, unsigned char value,
                           size_t bytes, unsigned delay_us);
CUresult simcu_launch_sleep(CUstream s, unsigned delay_us);
/* memmove(dst, src, bytes) between device ranges. */
CUresult simcu_launch_copy(CUstream s, CUdeviceptr dst, CUdeviceptr src,
                           size_t bytes, unsigned delay_us);
/* Read src and count a check failure unless every byte equals value. */
CUresult simcu_launch_check(CUstream s, CUdeviceptr src, unsigned char value,
                            size_t bytes, unsigned delay_us);
/* Work items not yet completed, all streams. */
size_t simcu_pending_work(void);
/* Wait until no work is pending; not counted as a synchronization. */
void simcu_wait_idle(void);

/* ---- memory checks ---- */

/* 0 if the driver's bookkeeping is sound: no two live blocks or mappings
 * overlap, every mapping lies in a reservation and no block does; 1 if
 * not, -1 if out of memory. */
int simcu_check_no_overlap(void);
/* 1 if every byte of [p, p+bytes) is live device memory a kernel may write
 * (a cuMemAlloc block, or mappings with read-write access, which may lie
 * end to end), else 0. */
int simcu_is_device_memory(CUdeviceptr p, size_t bytes);
/* For allocators under test: 1 if two of the n ranges [base[i],
 * base[i]+size[i]) overlap (their indices in *first, *second when not NULL),
 * 0 if none does, -1 if out of memory. Empty ranges never overlap. */
int simcu_ranges_overlap(const CUdeviceptr *base, const size_t *size, size_t n,
                         size_t *first, size_t *second);

/* ---- the lookup table ---- */

/* Row i of the cuGetProcAddress table: 0 and the fields, or -1 past the
 * end. Lets tests prove every exported function is reachable. */
int simcu_proc_entry(size_t i, const char **abi_name, const char **base_name,
                     int *version, int *per_thread);

#ifdef __cplusplus
}
#endif

#endif
