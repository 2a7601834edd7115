/* null_cudart.c: a libcudart.so.13 whose allocations cost next to nothing
 * (a bump pointer, never reused), for scripts/bench_hooks.sh's wall-clock
 * figures: with the simulated device's own cost (microseconds) out of the
 * way, what remains is what oomlens adds. Not a CUDA: only what the
 * benchmarks call. */
#include <stddef.h>
#include <stdint.h>

typedef int cudaError_t; /* the ABI: an enum, 0 success */
#define cudaSuccess 0

__attribute__((visibility("default"))) cudaError_t cudaMalloc(void **ptr, size_t size);
__attribute__((visibility("default"))) cudaError_t cudaFree(void *ptr);
__attribute__((visibility("default"))) cudaError_t cudaGetDevice(int *device);

static _Thread_local uintptr_t next = (uintptr_t)1 << 40;

cudaError_t cudaMalloc(void **ptr, size_t size)
{
  *ptr = (void *)next;
  next += (size + 511) & ~(uintptr_t)511;
  return cudaSuccess;
}

cudaError_t cudaFree(void *ptr)
{
  (void)ptr;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device)
{
  *device = 0;
  return cudaSuccess;
}
