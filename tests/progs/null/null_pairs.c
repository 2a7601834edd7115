/* null_pairs.c N: the wall-clock ns per cudaMalloc(4 KiB) + cudaFree pair
 * on null_cudart (median of 20 batches after 2000 pairs of warm-up), for
 * scripts/bench_hooks.sh, run with and without liboomlens.so. 1000 blocks
 * stay live meanwhile, as a job's weights do (an empty table is not what
 * the tracker sees in a job). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef int cudaError_t; /* the ABI: an enum, 0 success */
#define cudaSuccess 0

cudaError_t cudaMalloc(void **ptr, size_t size);
cudaError_t cudaFree(void *ptr);

__attribute__((noinline)) static void run(long n)
{
  void *p;
  for (long i = 0; i < n; i++) {
    if (cudaMalloc(&p, 4096) != cudaSuccess || cudaFree(p) != cudaSuccess)
      exit(1);
  }
}

static double now_ns(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv)
{
  long n = argc > 1 ? atol(argv[1]) : 200000, batch = n / 20 > 0 ? n / 20 : 1;
  double per[20];
  void *held;
  for (int i = 0; i < 1000; i++)
    if (cudaMalloc(&held, 4096) != cudaSuccess)
      return 1;
  run(2000);
  for (int b = 0; b < 20; b++) {
    double t0 = now_ns();
    run(batch);
    per[b] = (now_ns() - t0) / (double)batch;
  }
  for (int i = 1; i < 20; i++)
    for (int j = i; j > 0 && per[j - 1] > per[j]; j--) {
      double t = per[j];
      per[j] = per[j - 1];
      per[j - 1] = t;
    }
  printf("%.0f\n", per[10]);
  return 0;
}
