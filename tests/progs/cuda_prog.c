/* cuda_prog.c: a small CUDA program for the tests, linked against the
 * (simulated) libcudart.so.13 the way PyTorch links the real one, and
 * reaching the driver only through dlopen/dlsym and cuGetProcAddress, the
 * way CuPy, JAX and cudart itself do. Each scenario checks what the program
 * itself can see (which pointers it was handed, what the calls returned)
 * and exits non-zero on a surprise; tests/test_preload.c checks the report.
 *
 * usage: cuda_prog SCENARIO [ARG] */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

/* The per-thread-stream entry points exist in every libcudart but are only
 * declared when a program is compiled for per-thread default streams. */
cudaError_t cudaMallocAsync_ptsz(void **ptr, size_t size, cudaStream_t stream);
cudaError_t cudaFreeAsync_ptsz(void *ptr, cudaStream_t stream);

#define CHECK(cond)                                                        \
  do {                                                                     \
    if (!(cond)) {                                                         \
      fprintf(stderr, "cuda_prog: %s:%d: check failed: %s\n", __FILE__,    \
              __LINE__, #cond);                                            \
      exit(3);                                                             \
    }                                                                      \
  } while (0)

#define MiB (1u << 20)

/* True when p is a function of liboomlens.so: the call is intercepted. */
static bool from_oomlens(const void *p)
{
  Dl_info info;
  return p && dladdr(p, &info) && info.dli_fname && strstr(info.dli_fname, "liboomlens");
}

static bool expect_hooked(void)
{
  const char *preload = getenv("LD_PRELOAD");
  return preload && strstr(preload, "liboomlens");
}

static void *libcuda(void)
{
  void *h = dlopen("libcuda.so.1", RTLD_NOW);
  CHECK(h);
  return h;
}

typedef CUresult (*getproc_fn)(const char *, void **, int, cuuint64_t,
                               CUdriverProcAddressQueryResult *);

static void *driver_fn(const char *base, int version, cuuint64_t flags)
{
  getproc_fn getproc = (getproc_fn)dlsym(libcuda(), "cuGetProcAddress_v2");
  CHECK(getproc);
  void *p = NULL;
  CUdriverProcAddressQueryResult status;
  CHECK(getproc(base, &p, version, flags, &status) == CUDA_SUCCESS);
  return p;
}

static void driver_context(void)
{
  CUresult (*init)(unsigned) = (CUresult(*)(unsigned))driver_fn("cuInit", 13000, 0);
  CUresult (*retain)(CUcontext *, CUdevice) =
    (CUresult(*)(CUcontext *, CUdevice))driver_fn("cuDevicePrimaryCtxRetain", 13000, 0);
  CUresult (*set)(CUcontext) = (CUresult(*)(CUcontext))driver_fn("cuCtxSetCurrent", 13000, 0);
  CUcontext ctx;
  CHECK(init(0) == CUDA_SUCCESS);
  CHECK(retain(&ctx, 0) == CUDA_SUCCESS);
  CHECK(set(ctx) == CUDA_SUCCESS);
}

/* cudaMalloc 1 MiB, 8 MiB and 100 B; free the 8 MiB; keep the rest live.
 * Peak 9 MiB + 100, current 1 MiB + 100 at exit. */
static int runtime_basic(void)
{
  void *a, *b, *c, *zero = (void *)1;
  CHECK(!expect_hooked() || from_oomlens(dlsym(RTLD_DEFAULT, "cudaMalloc")));
  CHECK(cudaMalloc(&a, MiB) == cudaSuccess);
  CHECK(cudaMalloc(&b, 8 * MiB) == cudaSuccess);
  CHECK(cudaMalloc(&c, 100) == cudaSuccess);
  memset(b, 0xab, 8 * MiB); /* host memory stands behind the simulated device */
  CHECK(cudaFree(b) == cudaSuccess);
  CHECK(cudaMalloc(&zero, 0) == cudaSuccess && zero == NULL);
  CHECK(cudaFree(NULL) == cudaSuccess);
  size_t free_bytes, total;
  CHECK(cudaMemGetInfo(&free_bytes, &total) == cudaSuccess && total > 0);
  return 0;
}

/* The driver reached only through dlsym and cuGetProcAddress: 4 MiB with
 * cuMemAlloc_v2 (freed), 2 MiB through cuGetProcAddress (kept). */
static int driver_lookup(void)
{
  void *h = libcuda();
  void *alloc = dlsym(h, "cuMemAlloc_v2");
  void *free_fn = dlsym(h, "cuMemFree_v2");
  bool hooked = expect_hooked();
  CHECK(!hooked || (from_oomlens(alloc) && from_oomlens(free_fn)));
  CHECK(!hooked || from_oomlens(dlsym(h, "cuGetProcAddress_v2")));
  CHECK(!from_oomlens(dlsym(h, "cuInit"))); /* not ours: untouched */
  /* cuGetProcAddress answers for the ABI the caller asked for. */
  CHECK(!hooked || from_oomlens(driver_fn("cuMemAlloc", 13000, 0)));
  CHECK(!from_oomlens(driver_fn("cuMemAlloc", 3000, 0))); /* legacy 32-bit ABI */
  CHECK(!hooked || from_oomlens(driver_fn("cuGetProcAddress", 13000, 0)));
  void *ptsz = driver_fn("cuMemAllocAsync", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
  void *legacy = driver_fn("cuMemAllocAsync", 13000, CU_GET_PROC_ADDRESS_DEFAULT);
  CHECK(ptsz != legacy);
  CHECK(!hooked || (from_oomlens(ptsz) && from_oomlens(legacy)));
  driver_context();
  CUdeviceptr p, q;
  CHECK(((CUresult(*)(CUdeviceptr *, size_t))alloc)(&p, 4 * MiB) == CUDA_SUCCESS);
  CHECK(((CUresult(*)(CUdeviceptr))free_fn)(p) == CUDA_SUCCESS);
  CUresult (*alloc2)(CUdeviceptr *, size_t) =
    (CUresult(*)(CUdeviceptr *, size_t))driver_fn("cuMemAlloc", 13000, 0);
  CHECK(alloc2(&q, 2 * MiB) == CUDA_SUCCESS);
  return 0;
}

/* PyTorch's expandable segments: the VMM calls come from
 * cudaGetDriverEntryPointByVersion. Two 2 MiB chunks mapped, data kept
 * across an unmap and remap, then everything released. */
static int vmm_segments(void)
{
  void *create, *map, *unmap, *release, *reserve, *afree, *access;
  const char *names[] = {"cuMemCreate", "cuMemMap", "cuMemUnmap", "cuMemRelease",
                         "cuMemAddressReserve", "cuMemAddressFree", "cuMemSetAccess"};
  void **slots[] = {&create, &map, &unmap, &release, &reserve, &afree, &access};
  cudaFree(NULL); /* the runtime's usual way to make a context */
  for (int i = 0; i < 7; i++) {
    enum cudaDriverEntryPointQueryResult status;
    CHECK(cudaGetDriverEntryPointByVersion(names[i], slots[i], 12000, cudaEnableDefault,
                                           &status) == cudaSuccess);
    CHECK(!expect_hooked() || i == 6 || from_oomlens(*slots[i]));
  }
  const size_t chunk = 2 * MiB;
  CUdeviceptr base;
  CHECK(((CUresult(*)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long))reserve)(
          &base, 16 * chunk, 0, 0, 0) == CUDA_SUCCESS);
  CUmemAllocationProp prop = {0};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  CUmemGenericAllocationHandle h[2];
  CUmemAccessDesc desc = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  typedef CUresult (*create_fn)(CUmemGenericAllocationHandle *, size_t,
                                const CUmemAllocationProp *, unsigned long long);
  typedef CUresult (*map_fn)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                             unsigned long long);
  typedef CUresult (*access_fn)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
  typedef CUresult (*range_fn)(CUdeviceptr, size_t);
  for (int i = 0; i < 2; i++) {
    CHECK(((create_fn)create)(&h[i], chunk, &prop, 0) == CUDA_SUCCESS);
    CHECK(((map_fn)map)(base + i * chunk, chunk, 0, h[i], 0) == CUDA_SUCCESS);
  }
  CHECK(((access_fn)access)(base, 2 * chunk, &desc, 1) == CUDA_SUCCESS);
  memset((void *)base, 0x5a, 2 * chunk);
  CHECK(((range_fn)unmap)(base, 2 * chunk) == CUDA_SUCCESS);
  CHECK(((map_fn)map)(base + 4 * chunk, chunk, 0, h[1], 0) == CUDA_SUCCESS);
  CHECK(((access_fn)access)(base + 4 * chunk, chunk, &desc, 1) == CUDA_SUCCESS);
  CHECK(((unsigned char *)base)[4 * chunk + 123] == 0x5a);
  CHECK(((range_fn)unmap)(base + 4 * chunk, chunk) == CUDA_SUCCESS);
  for (int i = 0; i < 2; i++)
    CHECK(((CUresult(*)(CUmemGenericAllocationHandle))release)(h[i]) == CUDA_SUCCESS);
  CHECK(((range_fn)afree)(base, 16 * chunk) == CUDA_SUCCESS);
  return 0;
}

/* Stream-ordered allocation, legacy and per-thread entry points. Peak 6 MiB,
 * nothing live at exit. */
static int async_streams(void)
{
  cudaStream_t s;
  void *a, *b;
  CHECK(cudaStreamCreate(&s) == cudaSuccess);
  CHECK(cudaMallocAsync(&a, 2 * MiB, s) == cudaSuccess);
  CHECK(cudaMallocAsync_ptsz(&b, 4 * MiB, s) == cudaSuccess);
  CHECK(cudaFreeAsync(a, s) == cudaSuccess);
  CHECK(cudaFreeAsync_ptsz(b, s) == cudaSuccess);
  CHECK(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(cudaStreamDestroy(s) == cudaSuccess);
  return 0;
}

#define THREADS 16
#define PAIRS 200

static void *thread_churn(void *arg)
{
  size_t size = (size_t)(uintptr_t)arg * 4096;
  for (int i = 0; i < PAIRS; i++) {
    void *p;
    if (cudaMalloc(&p, size) != cudaSuccess || cudaFree(p) != cudaSuccess)
      return (void *)1;
  }
  return NULL;
}

/* 16 threads, 200 malloc/free pairs each: 3200 allocations, none live. */
static int threads(void)
{
  pthread_t t[THREADS];
  for (uintptr_t i = 0; i < THREADS; i++)
    CHECK(pthread_create(&t[i], NULL, thread_churn, (void *)(i + 1)) == 0);
  for (int i = 0; i < THREADS; i++) {
    void *result;
    pthread_join(t[i], &result);
    CHECK(result == NULL);
  }
  return 0;
}

/* A request the device cannot hold: the job sees the driver's own error. */
static int out_of_memory(void)
{
  void *p = (void *)1;
  CHECK(cudaMalloc(&p, (size_t)1 << 40) == cudaErrorMemoryAllocation);
  CHECK(cudaGetLastError() == cudaErrorMemoryAllocation);
  CHECK(cudaMalloc(&p, MiB) == cudaSuccess);
  return 0;
}

/* The largest request there is: refused, and the program goes on. */
static int size_max_request(void)
{
  void *p = (void *)1;
  CHECK(cudaMalloc(&p, SIZE_MAX) == cudaErrorMemoryAllocation);
  CHECK(cudaMalloc(&p, MiB) == cudaSuccess);
  return 0;
}

/* What an allocator above us does with a refusal, on a 64 MiB device
 * (OOMLENS_CAPACITY): "recovers" frees what it cached and asks again, and
 * is served; "gives_up" asks again, is refused again, and asks
 * cudaMemGetInfo for its error message, as PyTorch's caching allocator
 * does; "caught" is refused once and goes on with smaller requests; "many"
 * is refused eight times, a different request each time, going on after
 * each. Markers on stderr say where the program is, so the tests can tell
 * when the paragraph came. */
static int allocator_retry(const char *how)
{
  void *held, *cached, *p;
  CHECK(how != NULL);
  if (!strcmp(how, "many")) {
    for (int i = 0; i < 8; i++) {
      CHECK(cudaMalloc(&p, (size_t)(100 + i) * MiB) == cudaErrorMemoryAllocation);
      CHECK(cudaMalloc(&p, MiB) == cudaSuccess);
      CHECK(cudaFree(p) == cudaSuccess);
    }
    return 0;
  }
  CHECK(cudaMalloc(&held, 40 * MiB) == cudaSuccess);
  CHECK(cudaMalloc(&cached, 8 * MiB) == cudaSuccess);
  CHECK(cudaMalloc(&p, 32 * MiB) == cudaErrorMemoryAllocation);
  fprintf(stderr, "cuda_prog: refused\n");
  if (!strcmp(how, "caught")) {
    CHECK(cudaMalloc(&p, 4 * MiB) == cudaSuccess);
    fprintf(stderr, "cuda_prog: went on\n");
    CHECK(cudaFree(p) == cudaSuccess);
    return 0;
  }
  CHECK(cudaFree(cached) == cudaSuccess); /* the cache released */
  if (!strcmp(how, "recovers")) {
    CHECK(cudaFree(held) == cudaSuccess);
    CHECK(cudaMalloc(&p, 32 * MiB) == cudaSuccess);
    return 0;
  }
  CHECK(!strcmp(how, "gives_up"));
  CHECK(cudaMalloc(&p, 32 * MiB) == cudaErrorMemoryAllocation);
  size_t free_bytes, total;
  CHECK(cudaMemGetInfo(&free_bytes, &total) == cudaSuccess);
  fprintf(stderr, "cuda_prog: raised\n");
  return 0;
}

/* The parent keeps 3 MiB; the forked child allocates 1 MiB of its own and
 * exits normally: two reports, each with only its own process's memory. */
static int fork_child(void)
{
  void *p;
  CHECK(cudaMalloc(&p, 3 * MiB) == cudaSuccess);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    void *q;
    exit(cudaMalloc(&q, MiB) == cudaSuccess ? 0 : 4);
  }
  int status;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  return 0;
}

/* SIGUSR1 writes a report while the job goes on; ARG is its path. */
static int report_on_signal(const char *path)
{
  void *p;
  CHECK(path);
  CHECK(cudaMalloc(&p, 5 * MiB) == cudaSuccess);
  CHECK(raise(SIGUSR1) == 0);
  struct stat st;
  for (int i = 0; i < 500 && stat(path, &st) != 0; i++)
    usleep(10000);
  CHECK(stat(path, &st) == 0);
  CHECK(cudaFree(p) == cudaSuccess);
  return 0;
}

/* ARG malloc/free pairs of 1 MiB, for scripts/bench_hooks.sh: the cost
 * oomlens adds to each call, counted by callgrind with and without it. */
static int pairs_of(const char *count, size_t size)
{
  long n = count ? atol(count) : 1000;
  void *p;
  CHECK(cudaFree(NULL) == cudaSuccess);
  for (long i = 0; i < n; i++) {
    CHECK(cudaMalloc(&p, size) == cudaSuccess);
    CHECK(cudaFree(p) == cudaSuccess);
  }
  return 0;
}

static int pairs(const char *count)
{
  return pairs_of(count, MiB);
}

/* For scripts/bench_hooks.sh: the wall-clock ns per malloc/free pair,
 * median of 20 batches after 1000 pairs of warm-up. 4 KiB: the simulated
 * device's host memory behind a larger block would be an mmap and munmap
 * a pair, whose cost would hide ours. */
static int timed_pairs(const char *count)
{
  long n = count ? atol(count) : 100000, batch = n / 20 > 0 ? n / 20 : 1;
  double per[20];
  CHECK(pairs("1000") == 0);
  for (int b = 0; b < 20; b++) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    char text[32];
    snprintf(text, sizeof text, "%ld", batch);
    CHECK(pairs_of(text, 4096) == 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    per[b] = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / (double)batch;
  }
  for (int i = 1; i < 20; i++) /* insertion sort, for the median */
    for (int j = i; j > 0 && per[j - 1] > per[j]; j--) {
      double t = per[j];
      per[j] = per[j - 1];
      per[j - 1] = t;
    }
  printf("%.0f\n", per[10]);
  return 0;
}

/* Run with OOMLENS_CAPACITY=64M on a larger simulated device: the device
 * looks 64 MiB large to both APIs and refuses what would not fit there. */
static int smaller_device(void)
{
  size_t free_bytes, total;
  void *a, *b;
  CHECK(cudaMemGetInfo(&free_bytes, &total) == cudaSuccess);
  CHECK(total == 64 * MiB && free_bytes <= total);
  CUresult (*info)(size_t *, size_t *) =
    (CUresult(*)(size_t *, size_t *))driver_fn("cuMemGetInfo", 13000, 0);
  CHECK(info(&free_bytes, &total) == CUDA_SUCCESS && total == 64 * MiB);
  CHECK(cudaMalloc(&a, 48 * MiB) == cudaSuccess);
  CHECK(cudaMalloc(&b, 32 * MiB) == cudaErrorMemoryAllocation);
  CHECK(cudaMemGetInfo(&free_bytes, &total) == cudaSuccess && free_bytes <= 16 * MiB);
  CHECK(cudaFree(a) == cudaSuccess);
  CHECK(cudaMalloc(&b, 32 * MiB) == cudaSuccess);
  return 0;
}

/* Training-shaped programs that run out of memory for a known reason, on a
 * 1 GiB simulated device, run with PYTORCH_NO_CUDA_MEMORY_CACHING=1 so the
 * diagnosis knows it sees tensors. Each step allocates its activations in
 * 32 MiB pieces and frees them; `keep` bytes a step are never freed (a
 * leak); steps grow by `grow` bytes of activations. Returns 0 once a
 * cudaMalloc fails with the out-of-memory error. */
/* Free memory in pieces: 1 MiB blocks fill the device, every other one is
 * freed, and a 4 MiB request finds half the memory free but no 4 MiB run.
 * Run in manage mode: each 2 MiB chunk keeps one live block, so even a pool
 * that remaps whole chunks cannot join the halves. */
static int fragment_until_oom(void)
{
  enum { MAX_BLOCKS = 4096 };
  static void *block[MAX_BLOCKS];
  int n = 0;
  while (n < MAX_BLOCKS && cudaMalloc(&block[n], MiB) == cudaSuccess)
    n++;
  CHECK(n > 16 && n < MAX_BLOCKS);
  for (int i = 0; i < n; i += 2)
    CHECK(cudaFree(block[i]) == cudaSuccess);
  void *big;
  CHECK(cudaMalloc(&big, 4 * MiB) == cudaErrorMemoryAllocation);
  return 0;
}

/* The leak's own call site (exported, not inlined, so dladdr names it; the
 * volatile result keeps the call from becoming a jump that leaves no frame). */
__attribute__((noinline)) cudaError_t cuda_prog_kept(void **p);

cudaError_t cuda_prog_kept(void **p)
{
  volatile cudaError_t err = cudaMalloc(p, 32 * MiB);
  return err;
}

static int train_until_oom(size_t persistent, size_t activations, size_t grow, size_t keep)
{
  enum { PIECES = 256 };
  void *piece[PIECES], *p;
  for (size_t held = 0; held < persistent; held += 32 * MiB)
    if (cudaMalloc(&p, 32 * MiB) != cudaSuccess)
      return 0; /* ran out building the state */
  for (int step = 0; step < 200; step++) {
    size_t n = (activations + step * grow) / (32 * MiB);
    CHECK(n <= PIECES);
    for (size_t i = 0; i < n; i++) {
      cudaError_t err = cudaMalloc(&piece[i], 32 * MiB);
      if (err == cudaErrorMemoryAllocation)
        return 0;
      CHECK(err == cudaSuccess);
    }
    for (size_t i = 0; i < n; i++)
      CHECK(cudaFree(piece[i]) == cudaSuccess);
    for (size_t kept = 0; kept < keep; kept += 32 * MiB)
      if (cuda_prog_kept(&p) == cudaErrorMemoryAllocation)
        return 0;
  }
  fprintf(stderr, "cuda_prog: never ran out\n");
  return 3;
}

/* Steps of like sizes (a state, eight activations, a loss, a backward
 * temporary, a large update at the end) whose tenth keeps its loss past
 * where the steps before freed it and runs out at its update: a tensor
 * kept in the step that runs out, no lowest point between (recent.c: the
 * step holds 96 MiB more than the one before at that point). growing:
 * each step's tensors a 16th larger than the last's (a curriculum's
 * longer sequences): no two steps make the same sizes, but the same calls
 * make them in the same order, so with call sites (OOMLENS_STACKS=1) the
 * step holds one block more than the one before at that point (recent.c,
 * by calls). */
static int kept_in_step_until_oom(bool growing)
{
  void *state, *act[8], *loss, *p;
  CHECK(cudaMalloc(&state, 256 * MiB) == cudaSuccess);
  for (int step = 0; step < 20; step++) {
    size_t sixteenths = growing ? 16 + (size_t)step : 16;
    for (int i = 0; i < 8; i++)
      CHECK(cudaMalloc(&act[i], (size_t)(16 + 8 * i) * MiB * sixteenths / 16) == cudaSuccess);
    CHECK(cudaMalloc(&loss, 96 * MiB * sixteenths / 16) == cudaSuccess);
    CHECK(cudaMalloc(&p, 32 * MiB) == cudaSuccess);
    CHECK(cudaFree(p) == cudaSuccess);
    for (int i = 7; i >= 0; i--)
      CHECK(cudaFree(act[i]) == cudaSuccess);
    if (step != 9)
      CHECK(cudaFree(loss) == cudaSuccess);
    cudaError_t err = cudaMalloc(&p, 700 * MiB);
    if (err == cudaErrorMemoryAllocation)
      return 0;
    CHECK(err == cudaSuccess);
    CHECK(cudaFree(p) == cudaSuccess);
  }
  fprintf(stderr, "cuda_prog: never ran out\n");
  return 3;
}

/* A loop whose sizes never repeat (a C job: no call sites; each step's
 * tensors sized anew, as a job of varying lengths makes them) that keeps
 * 2 MiB more every step, until it runs out: the finder sees no
 * iteration, and the failure comes tens of thousands of allocations in
 * (oom.c loop_unseen: not told from one step's own memory). */
static int varying_until_oom(void)
{
  enum { PER_STEP = 64 };
  void *piece[PER_STEP], *p;
  uint32_t seed = 12345;
  for (int step = 0; step < 2000; step++) {
    for (int i = 0; i < PER_STEP; i++) {
      seed = seed * 1103515245u + 12345u;
      size_t size = (size_t)(1 + (seed >> 8) % 4096) * 1024; /* 1 KiB to 4 MiB, by the KiB */
      cudaError_t err = cudaMalloc(&piece[i], size);
      if (err == cudaErrorMemoryAllocation)
        return 0;
      CHECK(err == cudaSuccess);
    }
    for (int i = 0; i < PER_STEP; i++)
      CHECK(cudaFree(piece[i]) == cudaSuccess);
    if (cudaMalloc(&p, 2 * MiB + (size_t)step * 512) == cudaErrorMemoryAllocation)
      return 0; /* kept: never freed */
  }
  fprintf(stderr, "cuda_prog: never ran out\n");
  return 3;
}

/* Another library preallocates as JAX does, one physical handle of most of
 * the device made and mapped through the driver's VMM calls, then the
 * framework trains beside it until it runs out (`handles` handles of
 * `each` bytes; JAX makes one, PyTorch's expandable segments make pages
 * of 2 or 20 MiB). */
static int preallocated_then_oom(int handles, size_t each)
{
  void *create, *map, *reserve, *access;
  const char *names[] = {"cuMemCreate", "cuMemMap", "cuMemAddressReserve", "cuMemSetAccess"};
  void **slots[] = {&create, &map, &reserve, &access};
  cudaFree(NULL);
  for (int i = 0; i < 4; i++) {
    enum cudaDriverEntryPointQueryResult status;
    CHECK(cudaGetDriverEntryPointByVersion(names[i], slots[i], 12000, cudaEnableDefault,
                                           &status) == cudaSuccess);
  }
  CUdeviceptr base;
  CHECK(((CUresult(*)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long))reserve)(
          &base, handles * each, 0, 0, 0) == CUDA_SUCCESS);
  CUmemAllocationProp prop = {0};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  CUmemAccessDesc desc = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  for (int i = 0; i < handles; i++) {
    CUmemGenericAllocationHandle h;
    CHECK(((CUresult(*)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                        unsigned long long))create)(&h, each, &prop, 0) == CUDA_SUCCESS);
    CHECK(((CUresult(*)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                        unsigned long long))map)(base + i * each, each, 0, h, 0) == CUDA_SUCCESS);
  }
  CHECK(((CUresult(*)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t))access)(
          base, handles * each, &desc, 1) == CUDA_SUCCESS);
  return train_until_oom(64 * MiB, 128 * MiB, 64 * MiB, 0);
}

/* Steps of like activations beside a cache that grows 64 MiB a step for
 * twelve steps and is then emptied (a `generate` call's key/value cache, an
 * epoch's buffer): a leak warning, then its withdrawal. Every step asks
 * the cache's site once (kept, or given back at once), as a loop does.
 * Never runs out. */
static int cache_given_back(void)
{
  void *piece[8], *cache[24], *state[4];
  int cached = 0;
  for (int i = 0; i < 4; i++)
    CHECK(cudaMalloc(&state[i], 32 * MiB) == cudaSuccess);
  for (int step = 0; step < 30; step++) {
    for (int i = 0; i < 8; i++)
      CHECK(cudaMalloc(&piece[i], 32 * MiB) == cudaSuccess);
    for (int i = 0; i < 8; i++)
      CHECK(cudaFree(piece[i]) == cudaSuccess);
    for (int k = 0; k < 2; k++) {
      void *p;
      CHECK(cuda_prog_kept(&p) == cudaSuccess);
      if (step < 12)
        cache[cached++] = p;
      else
        CHECK(cudaFree(p) == cudaSuccess);
    }
    if (step == 18)
      while (cached > 0)
        CHECK(cudaFree(cache[--cached]) == cudaSuccess);
  }
  for (int i = 0; i < 4; i++)
    CHECK(cudaFree(state[i]) == cudaSuccess);
  return 0;
}

/* oom_external with the other process this program's own child (a
 * DataLoader worker that used the device): the simulated NVML is told its
 * pid once it is known. The child waits to be killed, and dies with us. */
static int oom_external_child(void)
{
  pid_t child = fork();
  CHECK(child >= 0);
  if (child == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    pause();
    _exit(0);
  }
  char procs[64];
  snprintf(procs, sizeof procs, "%d:600M", (int)child);
  setenv("SIMNVML_PROCS", procs, 1);
  int rc = train_until_oom(64 * MiB, 128 * MiB, 64 * MiB, 0);
  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  return rc;
}

/* A first step that runs out after its stack: 8 like layers of weights
 * made at load (their sizes repeat), a forward whose 8 layers each keep
 * 24 + 8 MiB and free a 16 MiB temporary, then a head of 2 x 400 MiB,
 * the second of which does not fit in 1 GiB (first_step.c reads it). */
static int first_step_oom(void)
{
  static const size_t weights[] = {1 * MiB, 4096, 2 * MiB, 4096};
  void *p, *temp;
  CHECK(cudaMalloc(&p, 8 * MiB) == cudaSuccess); /* the embedding */
  for (int layer = 0; layer < 8; layer++)
    for (size_t i = 0; i < sizeof weights / sizeof *weights; i++)
      CHECK(cudaMalloc(&p, weights[i]) == cudaSuccess);
  CHECK(cudaMalloc(&temp, 4 * MiB) == cudaSuccess);
  CHECK(cudaFree(temp) == cudaSuccess);
  for (int layer = 0; layer < 8; layer++) {
    CHECK(cudaMalloc(&p, 24 * MiB) == cudaSuccess);
    CHECK(cudaMalloc(&temp, 16 * MiB) == cudaSuccess);
    CHECK(cudaFree(temp) == cudaSuccess);
    CHECK(cudaMalloc(&p, 8 * MiB) == cudaSuccess);
  }
  for (int i = 0; i < 2; i++)
    if (cudaMalloc(&p, 400 * MiB) == cudaErrorMemoryAllocation)
      return 0;
  fprintf(stderr, "cuda_prog: never ran out\n");
  return 3;
}

/* A loop that fits: 64 MiB kept, then 6 steps that each take 10 x 16 MiB
 * and give it back, then the kept memory freed as a job tears down (the
 * report's batch figure). */
static int train_fits(void)
{
  void *kept[2], *piece[10];
  for (int i = 0; i < 2; i++)
    CHECK(cudaMalloc(&kept[i], 32 * MiB) == cudaSuccess);
  for (int step = 0; step < 6; step++) {
    for (int i = 0; i < 10; i++)
      CHECK(cudaMalloc(&piece[i], 16 * MiB) == cudaSuccess);
    for (int i = 0; i < 10; i++)
      CHECK(cudaFree(piece[i]) == cudaSuccess);
  }
  for (int i = 0; i < 2; i++)
    CHECK(cudaFree(kept[i]) == cudaSuccess);
  return 0;
}

/* Two call sites a report must tell apart (exported, not inlined, so
 * dladdr names them): 96 MiB of "weights" kept, and 3 x 16 MiB of
 * "activations" live at the peak, then freed. */
__attribute__((noinline)) void *cuda_prog_weights(void);
__attribute__((noinline)) void *cuda_prog_activation(void);

void *cuda_prog_weights(void)
{
  void *p;
  CHECK(cudaMalloc(&p, 96 * MiB) == cudaSuccess);
  return p;
}

void *cuda_prog_activation(void)
{
  void *p;
  CHECK(cudaMalloc(&p, 16 * MiB) == cudaSuccess);
  return p;
}

/* Three activations from one call site, all live at once, then freed. */
static void three_activations(void)
{
  void *a[3];
  volatile int count = 3; /* one call site: the loop must not be unrolled */
  for (int i = 0; i < count; i++)
    a[i] = cuda_prog_activation();
  for (int i = 0; i < 3; i++)
    CHECK(cudaFree(a[i]) == cudaSuccess);
}

static int two_sites(void)
{
  void *w = cuda_prog_weights();
  three_activations();
  (void)w;
  return 0;
}

/* two_sites with the weights made while the job paused the capture
 * (oomlens_capture, looked up so the program runs without oomlens too). */
static int paused_sites(void)
{
  int (*capture)(int) = (int (*)(int))dlsym(RTLD_DEFAULT, "oomlens_capture");
  CHECK(capture);
  CHECK(capture(0) == 1);
  CHECK(capture(0) == 0);
  void *w = cuda_prog_weights();
  CHECK(capture(1) == 0);
  three_activations();
  (void)w;
  return 0;
}

/* One allocating function reached at two depths of recursion: two stacks
 * that differ only below the frames a report shows (as one Python line
 * reaches PyTorch's allocator through different operators). 16 MiB each,
 * both live at the end. */
__attribute__((noinline)) void *cuda_prog_nested(int depth);

void *cuda_prog_nested(int depth)
{
  void *p = NULL;
  if (depth > 0) {
    p = cuda_prog_nested(depth - 1);
    __asm__ volatile("" : : "r"(p) : "memory"); /* not a tail call: a frame per level */
    return p;
  }
  CHECK(cudaMalloc(&p, 16 * MiB) == cudaSuccess);
  return p;
}

static int nested_sites(void)
{
  void *a = cuda_prog_nested(8), *b = cuda_prog_nested(11);
  return a && b ? 0 : 1;
}

/* For sampled stacks: 256 MiB, then 2000 x 64 KiB from one site, all
 * live at the end. */
__attribute__((noinline)) void *cuda_prog_small(void);

void *cuda_prog_small(void)
{
  void *p;
  CHECK(cudaMalloc(&p, 64 * 1024) == cudaSuccess);
  return p;
}

/* A thread named as PyTorch names its autograd engine's device threads:
 * it holds 48 MiB and frees 16 MiB; the main thread holds 32 MiB. */
static void *autograd_engine(void *unused)
{
  (void)unused;
  void *grad, *temp;
  CHECK(prctl(PR_SET_NAME, "pt_autograd_3", 0, 0, 0) == 0);
  CHECK(cudaMalloc(&temp, 16 * MiB) == cudaSuccess);
  CHECK(cudaMalloc(&grad, 48 * MiB) == cudaSuccess);
  CHECK(cudaFree(temp) == cudaSuccess);
  return grad;
}

static int autograd_thread(void)
{
  void *held, *grad;
  pthread_t t;
  CHECK(cudaMalloc(&held, 32 * MiB) == cudaSuccess);
  CHECK(pthread_create(&t, NULL, autograd_engine, NULL) == 0);
  CHECK(pthread_join(t, &grad) == 0 && grad);
  return 0;
}

static int sampled(void)
{
  void *big;
  CHECK(cudaMalloc(&big, 256 * MiB) == cudaSuccess);
  volatile int count = 2000;
  for (int i = 0; i < count; i++)
    (void)cuda_prog_small();
  return 0;
}

/* Killed by SIGTERM (a scheduler's time limit) while holding 7 MiB: the
 * report is written, then the job dies of that signal. A forked child that
 * never used CUDA must still die of SIGTERM at once. */
static int killed(void)
{
  void *p;
  CHECK(cudaMalloc(&p, 7 * MiB) == cudaSuccess);
  pid_t child = fork();
  CHECK(child >= 0);
  if (child == 0) {
    pause(); /* waits for its SIGTERM */
    _exit(0);
  }
  CHECK(kill(child, SIGTERM) == 0);
  int status;
  CHECK(waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
  raise(SIGTERM);
  for (int i = 0; i < 500; i++)
    usleep(10000);
  fprintf(stderr, "cuda_prog: still alive after SIGTERM\n");
  return 3;
}

/* Run with OOMLENS_METRICS=ARG and a short interval: holds 5 MiB until the
 * metrics file shows it (rewritten while the job runs), then ends holding
 * 3 MiB after a peak of 8 MiB; the final write at exit must say so. */
static bool file_has(const char *path, const char *text)
{
  char buf[8192];
  FILE *f = fopen(path, "r");
  if (!f)
    return false;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  return strstr(buf, text) != NULL;
}

static int metrics(const char *path)
{
  void *a, *b;
  CHECK(path);
  CHECK(cudaMalloc(&a, 5 * MiB) == cudaSuccess);
  bool seen = false;
  for (int i = 0; i < 500 && !(seen = file_has(path, "device=\"0\"} 5242880\n")); i++)
    usleep(10000);
  CHECK(seen);
  CHECK(cudaMalloc(&b, 3 * MiB) == cudaSuccess);
  CHECK(cudaFree(a) == cudaSuccess);
  return 0;
}

/* No driver to be found: the runtime's own error reaches the job. */
static int no_driver(void)
{
  void *p;
  CHECK(cudaMalloc(&p, MiB) != cudaSuccess);
  return 0;
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: cuda_prog SCENARIO [ARG]\n");
    return 2;
  }
  const char *s = argv[1];
  if (!strcmp(s, "runtime")) return runtime_basic();
  if (!strcmp(s, "driver")) return driver_lookup();
  if (!strcmp(s, "vmm")) return vmm_segments();
  if (!strcmp(s, "async")) return async_streams();
  if (!strcmp(s, "threads")) return threads();
  if (!strcmp(s, "oom")) return out_of_memory();
  if (!strcmp(s, "size_max")) return size_max_request();
  if (!strcmp(s, "retry")) return allocator_retry(argc > 2 ? argv[2] : NULL);
  if (!strcmp(s, "fork")) return fork_child();
  if (!strcmp(s, "signal")) return report_on_signal(argc > 2 ? argv[2] : NULL);
  if (!strcmp(s, "nodriver")) return no_driver();
  if (!strcmp(s, "capacity")) return smaller_device();
  if (!strcmp(s, "two_sites")) return two_sites();
  if (!strcmp(s, "paused_sites")) return paused_sites();
  if (!strcmp(s, "nested_sites")) return nested_sites();
  if (!strcmp(s, "sigterm")) return killed();
  if (!strcmp(s, "sampled")) return sampled();
  if (!strcmp(s, "autograd_thread")) return autograd_thread();
  if (!strcmp(s, "train_fits")) return train_fits();
  if (!strcmp(s, "oom_first_step")) return first_step_oom();
  if (!strcmp(s, "oom_persistent")) return train_until_oom((size_t)2 << 30, 0, 0, 0);
  if (!strcmp(s, "oom_activations")) return train_until_oom(256 * MiB, 256 * MiB, 128 * MiB, 0);
  if (!strcmp(s, "oom_leak")) return train_until_oom(128 * MiB, 256 * MiB, 0, 64 * MiB);
  if (!strcmp(s, "oom_fragmentation")) return fragment_until_oom();
  if (!strcmp(s, "oom_varying_leak")) return varying_until_oom();
  if (!strcmp(s, "oom_kept_in_step")) return kept_in_step_until_oom(false);
  if (!strcmp(s, "oom_kept_in_growing_step")) return kept_in_step_until_oom(true);
  if (!strcmp(s, "oom_external")) return train_until_oom(64 * MiB, 128 * MiB, 64 * MiB, 0);
  if (!strcmp(s, "oom_external_child")) return oom_external_child();
  if (!strcmp(s, "oom_library_vmm")) return preallocated_then_oom(1, 640 * MiB);
  if (!strcmp(s, "oom_pages_vmm")) return preallocated_then_oom(32, 20 * MiB);
  if (!strcmp(s, "cache_given_back")) return cache_given_back();
  if (!strcmp(s, "metrics")) return metrics(argc > 2 ? argv[2] : NULL);
  if (!strcmp(s, "pairs")) return pairs(argc > 2 ? argv[2] : NULL);
  if (!strcmp(s, "timed_pairs")) return timed_pairs(argc > 2 ? argv[2] : NULL);
  fprintf(stderr, "cuda_prog: unknown scenario %s\n", s);
  return 2;
}
