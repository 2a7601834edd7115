/* trace_prog.c: programs for the trace file's tests (tests/test_trace_file.c),
 * linked against the simulated libcudart.so.13 and reaching the driver
 * through dlsym, as cuda_prog does. Every scenario's events are known by
 * construction; the test reads them back from OOMLENS_TRACE.
 *
 * usage: trace_prog SCENARIO [ARG...] */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#define CHECK(cond)                                                                        \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      fprintf(stderr, "trace_prog: %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      exit(3);                                                                             \
    }                                                                                      \
  } while (0)

#define MiB (1u << 20)

/* Two call sites (exported, not inlined, so that dladdr names them). */
__attribute__((noinline)) void *trace_prog_weights(void);
__attribute__((noinline)) void *trace_prog_activation(void);

void *trace_prog_weights(void)
{
  void *p;
  CHECK(cudaMalloc(&p, 64 * MiB) == cudaSuccess);
  return p;
}

void *trace_prog_activation(void)
{
  void *p;
  CHECK(cudaMalloc(&p, 8 * MiB) == cudaSuccess);
  return p;
}

static void *driver(const char *name)
{
  void *h = dlopen("libcuda.so.1", RTLD_NOW);
  CHECK(h);
  void *fn = dlsym(h, name);
  CHECK(fn);
  return fn;
}

/* A VMM chunk mapped and unmapped, as expandable segments do. */
static void vmm_chunk(void)
{
  typedef CUresult (*reserve_fn)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
  typedef CUresult (*create_fn)(CUmemGenericAllocationHandle *, size_t,
                                const CUmemAllocationProp *, unsigned long long);
  typedef CUresult (*map_fn)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                             unsigned long long);
  typedef CUresult (*range_fn)(CUdeviceptr, size_t);
  typedef CUresult (*release_fn)(CUmemGenericAllocationHandle);
  CUdeviceptr base;
  CUmemGenericAllocationHandle h;
  CUmemAllocationProp prop = {0};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  CHECK(((reserve_fn)driver("cuMemAddressReserve"))(&base, 8 * MiB, 0, 0, 0) == CUDA_SUCCESS);
  CHECK(((create_fn)driver("cuMemCreate"))(&h, 2 * MiB, &prop, 0) == CUDA_SUCCESS);
  CHECK(((map_fn)driver("cuMemMap"))(base, 2 * MiB, 0, h, 0) == CUDA_SUCCESS);
  CHECK(((range_fn)driver("cuMemUnmap"))(base, 2 * MiB) == CUDA_SUCCESS);
  CHECK(((release_fn)driver("cuMemRelease"))(h) == CUDA_SUCCESS);
  CHECK(((range_fn)driver("cuMemAddressFree"))(base, 8 * MiB) == CUDA_SUCCESS);
}

/* 64 MiB of weights kept; three 8 MiB activations live together, then
 * freed (peak 88 MiB); 4 MiB stream-ordered, 2 MiB through the driver,
 * both freed; one impossible request; one VMM chunk.
 * Events: 6 alloc and 6 segment_alloc, 5 frees (requested, completed,
 * segment_free each), 1 oom, 1 segment_map, 1 segment_unmap. */
static int mixed(void)
{
  CHECK(cudaFree(NULL) == cudaSuccess);
  void *w = trace_prog_weights(), *a[3], *p;
  volatile int count = 3; /* one call site: the loop must not be unrolled */
  for (int i = 0; i < count; i++)
    a[i] = trace_prog_activation();
  for (int i = 0; i < 3; i++)
    CHECK(cudaFree(a[i]) == cudaSuccess);
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s) == cudaSuccess);
  CHECK(cudaMallocAsync(&p, 4 * MiB, s) == cudaSuccess);
  CHECK(cudaFreeAsync(p, s) == cudaSuccess);
  CHECK(cudaStreamSynchronize(s) == cudaSuccess);
  CUdeviceptr d;
  CHECK(((CUresult(*)(CUdeviceptr *, size_t))driver("cuMemAlloc_v2"))(&d, 2 * MiB) == CUDA_SUCCESS);
  CHECK(((CUresult(*)(CUdeviceptr))driver("cuMemFree_v2"))(d) == CUDA_SUCCESS);
  CHECK(cudaMalloc(&p, (size_t)1 << 40) == cudaErrorMemoryAllocation);
  vmm_chunk();
  (void)w;
  return 0;
}

static atomic_bool stop_churn;

static void *churn(void *arg)
{
  (void)arg;
  while (!atomic_load(&stop_churn)) {
    void *p;
    if (cudaMalloc(&p, MiB) == cudaSuccess)
      cudaFree(p);
  }
  return NULL;
}

/* Killed by SIGTERM while another thread still allocates: the trace must
 * be complete and readable all the same. */
static int sigterm_mid_run(void)
{
  void *keep;
  CHECK(cudaMalloc(&keep, 16 * MiB) == cudaSuccess);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, churn, NULL) == 0);
  for (int i = 0; i < 2000; i++) {
    void *p;
    CHECK(cudaMalloc(&p, 2 * MiB) == cudaSuccess);
    CHECK(cudaFree(p) == cudaSuccess);
  }
  raise(SIGTERM);
  for (int i = 0; i < 500; i++)
    usleep(10000);
  fprintf(stderr, "trace_prog: still alive after SIGTERM\n");
  return 3;
}

static double monotonic_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Far more events than the trace's buffers and a pipe hold (about 240
 * bytes each pair; 4 MiB of buffers): says the longest call took. */
static void flood(void)
{
  double longest = 0;
  for (int i = 0; i < 60000; i++) {
    void *p;
    double t0 = monotonic_s();
    CHECK(cudaMalloc(&p, 512) == cudaSuccess);
    CHECK(cudaFree(p) == cudaSuccess);
    double took = monotonic_s() - t0;
    longest = took > longest ? took : longest;
  }
  fprintf(stderr, "trace_prog: longest_call=%.3f\n", longest);
}

/* The trace goes to a reader that never reads: the allocations finish,
 * and the moment main returns is said (CLOCK_MONOTONIC, the test's clock)
 * so that the test can tell how long exit took. */
static int stalled_reader(void)
{
  flood();
  fprintf(stderr, "trace_prog: exit_at=%.3f\n", monotonic_s());
  return 0;
}

/* The same, then a SIGTERM while the writer is stuck. */
static int stalled_reader_sigterm(void)
{
  flood();
  fprintf(stderr, "trace_prog: sigterm_at=%.3f\n", monotonic_s());
  raise(SIGTERM);
  for (int i = 0; i < 2000; i++)
    usleep(10000);
  fprintf(stderr, "trace_prog: still alive after SIGTERM\n");
  return 3;
}

/* Allocates until a signal ends it (the test sends it), at most 20 s. */
static int until_signal(void)
{
  for (int i = 0; i < 2000; i++) {
    void *p;
    CHECK(cudaMalloc(&p, MiB) == cudaSuccess);
    CHECK(cudaFree(p) == cudaSuccess);
    usleep(10000);
  }
  fprintf(stderr, "trace_prog: no signal came\n");
  return 3;
}

/* The parent holds 3 MiB, then runs a program of its own (this one, as
 * torch.compile runs its compile workers) that inherits OOMLENS_TRACE and
 * runs the scenario child: one_alloc allocates 1 MiB, mem_info_only asks
 * the device's free memory and allocates nothing (a compile worker, a data
 * loader's worker); then frees and ends. */
static int exec_child(const char *self, const char *child)
{
  void *p;
  CHECK(cudaMalloc(&p, 3 * MiB) == cudaSuccess);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    execl(self, self, child, (char *)NULL);
    _exit(5);
  }
  int status;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECK(cudaFree(p) == cudaSuccess);
  return 0;
}

static int mem_info_only(void)
{
  size_t free_bytes = 0, total_bytes = 0;
  CHECK(cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess);
  return 0;
}

static int one_alloc(void)
{
  void *p;
  CHECK(cudaMalloc(&p, MiB) == cudaSuccess);
  CHECK(cudaFree(p) == cudaSuccess);
  return 0;
}

/* How many lines of the file at path contain text. */
static int lines_with(const char *path, const char *text)
{
  FILE *f = fopen(path, "r");
  if (!f)
    return -1;
  char line[4096];
  int n = 0;
  while (fgets(line, sizeof line, f))
    n += strstr(line, text) != NULL;
  fclose(f);
  return n;
}

/* SIGUSR1 writes the report and puts the trace so far on disk: once the
 * report is there (ARG 1), the trace (ARG 2) holds both allocations. */
static int usr1_flushes(const char *report, const char *trace)
{
  CHECK(report && trace);
  void *p, *q;
  CHECK(cudaMalloc(&p, 3 * MiB) == cudaSuccess);
  CHECK(cudaMalloc(&q, 5 * MiB) == cudaSuccess);
  CHECK(raise(SIGUSR1) == 0);
  struct stat st;
  for (int i = 0; i < 500 && stat(report, &st) != 0; i++)
    usleep(10000);
  CHECK(stat(report, &st) == 0);
  CHECK(lines_with(trace, ",alloc,") == 2);
  CHECK(cudaFree(p) == cudaSuccess);
  return 0;
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: trace_prog SCENARIO [ARG...]\n");
    return 2;
  }
  const char *s = argv[1];
  if (!strcmp(s, "mixed")) return mixed();
  if (!strcmp(s, "sigterm")) return sigterm_mid_run();
  if (!strcmp(s, "stalled")) return stalled_reader();
  if (!strcmp(s, "stalled_sigterm")) return stalled_reader_sigterm();
  if (!strcmp(s, "until_signal")) return until_signal();
  if (!strcmp(s, "exec_child")) return exec_child(argv[0], "one_alloc");
  if (!strcmp(s, "one_alloc")) return one_alloc();
  if (!strcmp(s, "exec_idle_child")) return exec_child(argv[0], "mem_info_only");
  if (!strcmp(s, "mem_info_only")) return mem_info_only();
  if (!strcmp(s, "usr1")) return usr1_flushes(argc > 2 ? argv[2] : NULL, argc > 3 ? argv[3] : NULL);
  fprintf(stderr, "trace_prog: unknown scenario %s\n", s);
  return 2;
}
