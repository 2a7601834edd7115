/* stress_prog.c: randomized device memory traffic from many threads, for
 * the stress and fault tests (tests/test_stress.c, scripts/stress.sh).
 *
 * Each thread owns a few slots; each step frees the block in a random slot
 * (after checking its contents) or allocates one there by a random path:
 * cudaMalloc, cudaMallocAsync, cuMemAlloc, cuMemAllocAsync, or a VMM
 * mapping (cuMemAddressReserve, cuMemCreate, cuMemMap, cuMemSetAccess), and
 * now and then destroys one of its streams and makes another. The program
 * counts what it did, so a test can hold the report to it, and checks what
 * it can see itself:
 * - no two of its live blocks overlap (a registry of every live range, each
 *   new block checked against all of them);
 * - what it wrote into a block is still there when it frees it (host
 *   stamps for blocks the host may touch; for stream-ordered blocks a fill
 *   kernel at allocation and a check kernel before the free, on its stream);
 * - between epochs, with every block freed, the simulated driver's own
 *   bookkeeping is sound and no simulated kernel touched dead memory;
 * - the process's heap in use at those quiet points (mallinfo2), printed
 *   for each epoch, so growth over time shows.
 *
 * usage: stress_prog [--threads=N] [--seconds=S | --ops=N] [--epochs=E]
 *                    [--seed=N] [--renew=PERCENT] [--log] [--spawn]
 * --ops is per thread and epoch. --log (one thread) prints every call's
 * result code, for comparing runs with and without the library. Under
 * --spawn: at the end, fork and exec a small run of this program (one
 * thread, 50 steps), wait for it, and go on: its report must be its own.
 * Under SIMCU_FAIL_ALLOC an allocation may fail; the failure is counted and the
 * step skipped. Exits 0 when every check held, 3 on the first that did not. */
#include <malloc.h>
#include <sys/wait.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "simcu.h"

#define CHECK(cond)                                                                   \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      fprintf(stderr, "stress_prog: %s:%d: check failed: %s\n", __FILE__, __LINE__, \
              #cond);                                                                 \
      exit(3);                                                                        \
    }                                                                                 \
  } while (0)

#define MAX_THREADS 64
#define SLOTS 16
#define STREAMS 2
#define MAX_EPOCHS 1024
#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define STAMP_STRIDE (64 * KiB) /* a page in sixteen: page faults are the cost */
#define KERNEL_BYTES (64 * KiB) /* what fill and check kernels cover */

typedef enum { EMPTY, RUNTIME, RUNTIME_ASYNC, DRIVER, DRIVER_ASYNC, VMM } kind_t;

typedef struct block {
  kind_t kind;
  unsigned char *p;
  size_t size;
  uint64_t stamp;
  int stream;                        /* async blocks: index of its stream */
  CUmemGenericAllocationHandle handle; /* VMM */
} block_t;

typedef struct worker {
  int index;
  unsigned seed;
  block_t slot[SLOTS];
  cudaStream_t stream[STREAMS];
  uint64_t serial;
} worker_t;

/* What the program did, for the report to match. */
static struct {
  atomic_ullong runtime_allocs, runtime_failed, runtime_frees;
  atomic_ullong driver_allocs, driver_failed, driver_frees;
  atomic_ullong vmm_creates, vmm_failed, vmm_maps, vmm_unmaps, vmm_releases;
  atomic_ullong bytes, streams, steps;
} count;

static struct {
  int threads, epochs;
  double seconds;
  long ops;
  unsigned seed;
  bool log;
  int renew_percent; /* of the steps, those that renew a stream */
  bool faults;       /* SIMCU_FAIL_ALLOC set: an allocation may fail */
  bool spawn;
} opt = {.threads = 32, .epochs = 4, .seconds = 0, .ops = 200, .seed = 1, .renew_percent = 2};

static size_t granularity;
static atomic_bool epoch_over;
static pthread_barrier_t quiet, resume;

/* ---- the registry of live ranges ---- */

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t live_base[MAX_THREADS * SLOTS];
static size_t live_size[MAX_THREADS * SLOTS];

static void register_block(int thread, int slot, const block_t *b)
{
  uintptr_t base = (uintptr_t)b->p;
  pthread_mutex_lock(&registry_lock);
  for (size_t i = 0; i < MAX_THREADS * SLOTS; i++) {
    if (live_size[i] && base < live_base[i] + live_size[i] && live_base[i] < base + b->size) {
      fprintf(stderr, "stress_prog: block %#lx+%zu overlaps live block %#lx+%zu\n",
              (unsigned long)base, b->size, (unsigned long)live_base[i], live_size[i]);
      exit(3);
    }
  }
  live_base[thread * SLOTS + slot] = base;
  live_size[thread * SLOTS + slot] = b->size;
  pthread_mutex_unlock(&registry_lock);
}

static void unregister_block(int thread, int slot)
{
  pthread_mutex_lock(&registry_lock);
  live_size[thread * SLOTS + slot] = 0;
  pthread_mutex_unlock(&registry_lock);
}

/* ---- randomness and contents ---- */

static unsigned next_random(unsigned *state)
{
  *state = *state * 1103515245u + 12345u;
  return *state >> 8;
}

/* Mostly small blocks, some up to 2 MiB, a few up to 8 MiB. */
static size_t random_size(unsigned *seed)
{
  unsigned r = next_random(seed) % 100;
  if (r < 60)
    return 512 + next_random(seed) % (64 * KiB);
  if (r < 90)
    return 64 * KiB + next_random(seed) % (2 * MiB);
  return 2 * MiB + next_random(seed) % (6 * MiB);
}

/* A block from cudaMalloc or cuMemAlloc, written by the host. On the
 * simulated device the host reaches device memory directly, as no x86 host
 * can: its writes go through the context (cudaMemcpy, in the legacy
 * stream's order), which orders them after the barrier a manage-mode pool
 * releases freed blocks behind (cuCtxRecordEvent + cuCtxWaitEvent: earlier
 * work of every stream, a previous owner's kernels among it, done first).
 * So the first stamp goes through cuMemcpyHtoD, as a job's would, and the
 * rest follow it directly. Written directly from the start, a stamp raced
 * such a kernel (2-7% of runs of the UBSan build: "lost its contents"). */
static void stamp(block_t *b)
{
  CHECK(cuMemcpyHtoD((CUdeviceptr)b->p, &b->stamp, 8) == CUDA_SUCCESS);
  for (size_t at = STAMP_STRIDE; at + 16 <= b->size; at += STAMP_STRIDE) /* clear of the last 8 */
    memcpy(b->p + at, &b->stamp, 8);
  memcpy(b->p + b->size - 8, &b->stamp, 8);
}

static bool stamped(const block_t *b)
{
  for (size_t at = 0; at + 16 <= b->size; at += STAMP_STRIDE) /* clear of the last 8 */
    if (memcmp(b->p + at, &b->stamp, 8) != 0)
      return false;
  return memcmp(b->p + b->size - 8, &b->stamp, 8) == 0;
}

static size_t kernel_bytes(const block_t *b)
{
  return b->size < KERNEL_BYTES ? b->size : KERNEL_BYTES;
}

/* ---- one step ---- */

static void log_call(const char *what, int code)
{
  if (opt.log)
    printf("%s %d\n", what, code);
}

/* An allocation call's result: success, or a failure we accept only when
 * failures are being injected. */
static bool allocated(const char *what, int code, atomic_ullong *failed)
{
  log_call(what, code);
  if (code == 0)
    return true;
  if (!opt.faults) {
    fprintf(stderr, "stress_prog: %s failed with %d\n", what, code);
    exit(3);
  }
  atomic_fetch_add(failed, 1);
  return false;
}

static bool alloc_vmm(worker_t *w, block_t *b)
{
  b->size = granularity * (1 + next_random(&w->seed) % 2);
  CUdeviceptr base;
  CUresult r = cuMemAddressReserve(&base, b->size, 0, 0, 0);
  log_call("cuMemAddressReserve", r);
  CHECK(r == CUDA_SUCCESS);
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  atomic_fetch_add(&count.vmm_creates, 1);
  if (!allocated("cuMemCreate", cuMemCreate(&b->handle, b->size, &prop, 0), &count.vmm_failed)) {
    CHECK(cuMemAddressFree(base, b->size) == CUDA_SUCCESS);
    return false;
  }
  CHECK(cuMemMap(base, b->size, 0, b->handle, 0) == CUDA_SUCCESS);
  atomic_fetch_add(&count.vmm_maps, 1);
  CUmemAccessDesc access = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  CHECK(cuMemSetAccess(base, b->size, &access, 1) == CUDA_SUCCESS);
  b->p = (unsigned char *)(uintptr_t)base;
  return true;
}

static bool alloc_block(worker_t *w, block_t *b, kind_t kind)
{
  b->size = random_size(&w->seed);
  b->stream = (int)(next_random(&w->seed) % STREAMS);
  cudaStream_t s = w->stream[b->stream];
  bool ok = false;
  switch (kind) {
  case RUNTIME:
  case RUNTIME_ASYNC:
    atomic_fetch_add(&count.runtime_allocs, 1);
    ok = allocated(kind == RUNTIME ? "cudaMalloc" : "cudaMallocAsync",
                   kind == RUNTIME ? cudaMalloc((void **)&b->p, b->size)
                                   : cudaMallocAsync((void **)&b->p, b->size, s),
                   &count.runtime_failed);
    break;
  case DRIVER:
  case DRIVER_ASYNC: {
    CUdeviceptr d = 0;
    atomic_fetch_add(&count.driver_allocs, 1);
    ok = allocated(kind == DRIVER ? "cuMemAlloc" : "cuMemAllocAsync",
                   kind == DRIVER ? cuMemAlloc(&d, b->size)
                                  : cuMemAllocAsync(&d, b->size, (CUstream)s),
                   &count.driver_failed);
    b->p = (unsigned char *)(uintptr_t)d;
    break;
  }
  case VMM:
    return alloc_vmm(w, b);
  case EMPTY:
    break;
  }
  if (ok)
    atomic_fetch_add(&count.bytes, b->size);
  return ok;
}

static void allocate(worker_t *w, int slot)
{
  static const kind_t kinds[] = {RUNTIME, RUNTIME, RUNTIME, RUNTIME_ASYNC, RUNTIME_ASYNC,
                                 DRIVER, DRIVER, DRIVER_ASYNC, VMM, VMM};
  block_t *b = &w->slot[slot];
  kind_t kind = kinds[next_random(&w->seed) % (sizeof kinds / sizeof *kinds)];
  if (!alloc_block(w, b, kind))
    return;
  b->kind = kind;
  b->stamp = ((uint64_t)(w->index + 1) << 48) ^ (++w->serial * 0x9e3779b97f4a7c15ull);
  register_block(w->index, slot, b);
  if (kind == RUNTIME_ASYNC || kind == DRIVER_ASYNC) /* stream-ordered: a kernel writes */
    CHECK(simcu_launch_fill((CUstream)w->stream[b->stream], (CUdeviceptr)b->p,
                            (unsigned char)b->stamp, kernel_bytes(b),
                            next_random(&w->seed) % 20) == CUDA_SUCCESS);
  else
    stamp(b);
}

static void release(worker_t *w, int slot)
{
  block_t *b = &w->slot[slot];
  cudaStream_t s = w->stream[b->stream];
  if (b->kind == RUNTIME_ASYNC || b->kind == DRIVER_ASYNC)
    CHECK(simcu_launch_check((CUstream)s, (CUdeviceptr)b->p, (unsigned char)b->stamp,
                             kernel_bytes(b), 0) == CUDA_SUCCESS);
  else if (!stamped(b)) {
    fprintf(stderr, "stress_prog: block %p+%zu (kind %d) lost its contents\n", (void *)b->p,
            b->size, (int)b->kind);
    exit(3);
  }
  unregister_block(w->index, slot);
  int code = 0;
  switch (b->kind) {
  case RUNTIME:
    code = cudaFree(b->p);
    break;
  case RUNTIME_ASYNC:
    code = cudaFreeAsync(b->p, s);
    break;
  case DRIVER:
    code = cuMemFree((CUdeviceptr)b->p);
    break;
  case DRIVER_ASYNC:
    code = cuMemFreeAsync((CUdeviceptr)b->p, (CUstream)s);
    break;
  case VMM:
    CHECK(cuMemUnmap((CUdeviceptr)b->p, b->size) == CUDA_SUCCESS);
    CHECK(cuMemRelease(b->handle) == CUDA_SUCCESS);
    code = cuMemAddressFree((CUdeviceptr)b->p, b->size);
    atomic_fetch_add(&count.vmm_unmaps, 1);
    atomic_fetch_add(&count.vmm_releases, 1);
    break;
  case EMPTY:
    break;
  }
  log_call("free", code);
  CHECK(code == 0);
  if (b->kind == RUNTIME || b->kind == RUNTIME_ASYNC)
    atomic_fetch_add(&count.runtime_frees, 1);
  else if (b->kind == DRIVER || b->kind == DRIVER_ASYNC)
    atomic_fetch_add(&count.driver_frees, 1);
  b->kind = EMPTY;
}

static void make_stream(worker_t *w, int i)
{
  unsigned flags = next_random(&w->seed) % 2 ? cudaStreamNonBlocking : cudaStreamDefault;
  CHECK(cudaStreamCreateWithFlags(&w->stream[i], flags) == cudaSuccess);
  atomic_fetch_add(&count.streams, 1);
}

/* Frees the stream's blocks (in its order), then destroys it with their
 * check kernels possibly still queued, and makes a new one. */
static void renew_stream(worker_t *w, int i)
{
  for (int slot = 0; slot < SLOTS; slot++) {
    block_t *b = &w->slot[slot];
    if ((b->kind == RUNTIME_ASYNC || b->kind == DRIVER_ASYNC) && b->stream == i)
      release(w, slot);
  }
  CHECK(cudaStreamDestroy(w->stream[i]) == cudaSuccess);
  make_stream(w, i);
}

static void step(worker_t *w)
{
  atomic_fetch_add_explicit(&count.steps, 1, memory_order_relaxed);
  if (next_random(&w->seed) % 100 < (unsigned)opt.renew_percent) {
    renew_stream(w, (int)(next_random(&w->seed) % STREAMS));
    return;
  }
  int slot = (int)(next_random(&w->seed) % SLOTS);
  if (w->slot[slot].kind != EMPTY)
    release(w, slot);
  else
    allocate(w, slot);
}

static void release_all(worker_t *w)
{
  for (int slot = 0; slot < SLOTS; slot++)
    if (w->slot[slot].kind != EMPTY)
      release(w, slot);
}

static void *worker_main(void *arg)
{
  worker_t *w = arg;
  CHECK(cudaSetDevice(0) == cudaSuccess);
  CHECK(cudaFree(NULL) == cudaSuccess); /* the primary context, current here too */
  for (int i = 0; i < STREAMS; i++)
    make_stream(w, i);
  for (int epoch = 0; epoch < opt.epochs; epoch++) {
    if (opt.seconds > 0)
      while (!atomic_load(&epoch_over))
        step(w);
    else
      for (long i = 0; i < opt.ops; i++)
        step(w);
    release_all(w);
    pthread_barrier_wait(&quiet);
    pthread_barrier_wait(&resume);
  }
  for (int i = 0; i < STREAMS; i++)
    CHECK(cudaStreamDestroy(w->stream[i]) == cudaSuccess);
  return NULL;
}

/* ---- quiet points ---- */

static long long heap_in_use(void)
{
  struct mallinfo2 mi = mallinfo2();
  return (long long)(mi.uordblks + mi.hblkhd);
}

static long long resident_bytes(void)
{
  long pages = 0, resident = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (f) {
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
      resident = 0;
    fclose(f);
  }
  return (long long)resident * sysconf(_SC_PAGESIZE);
}

static void sleep_seconds(double s)
{
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&ts, &ts) != 0)
    ;
}

/* Every thread has freed all it held: the device's books must balance. */
static void quiet_point(int epoch, long long heap[], long long rss[])
{
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
  simcu_wait_idle();
  CHECK(simcu_check_no_overlap() == 0);
  CHECK(simcu_fault_count() == 0);
  CHECK(simcu_check_failures() == 0);
  heap[epoch] = heap_in_use();
  rss[epoch] = resident_bytes();
  fprintf(stderr, "stress_prog: epoch %d: %llu steps, heap in use %lld, resident %lld\n", epoch,
          (unsigned long long)atomic_load(&count.steps), heap[epoch], rss[epoch]);
}

static void parse_args(int argc, char **argv)
{
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strncmp(a, "--threads=", 10))
      opt.threads = atoi(a + 10);
    else if (!strncmp(a, "--seconds=", 10))
      opt.seconds = atof(a + 10);
    else if (!strncmp(a, "--ops=", 6))
      opt.ops = atol(a + 6);
    else if (!strncmp(a, "--epochs=", 9))
      opt.epochs = atoi(a + 9);
    else if (!strncmp(a, "--seed=", 7))
      opt.seed = (unsigned)strtoul(a + 7, NULL, 10);
    else if (!strncmp(a, "--renew=", 8))
      opt.renew_percent = atoi(a + 8);
    else if (!strcmp(a, "--spawn"))
      opt.spawn = true;
    else if (!strcmp(a, "--log"))
      opt.log = true;
    else {
      fprintf(stderr, "stress_prog: unknown argument %s\n", a);
      exit(2);
    }
  }
  const char *fail = getenv("SIMCU_FAIL_ALLOC");
  opt.faults = fail && *fail && strcmp(fail, "0") != 0;
  CHECK(opt.threads >= 1 && opt.threads <= MAX_THREADS);
  CHECK(opt.epochs >= 1 && opt.epochs <= MAX_EPOCHS);
  CHECK(!opt.log || opt.threads == 1);
}

static void find_granularity(void)
{
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  CHECK(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) ==
        CUDA_SUCCESS);
}

static void print_counts(const long long heap[], const long long rss[])
{
  printf("stress: threads=%d steps=%llu runtime_allocs=%llu runtime_failed=%llu "
         "runtime_frees=%llu driver_allocs=%llu driver_failed=%llu driver_frees=%llu "
         "vmm_creates=%llu vmm_failed=%llu vmm_maps=%llu vmm_unmaps=%llu vmm_releases=%llu "
         "bytes=%llu streams=%llu epochs=%d\n",
         opt.threads, atomic_load(&count.steps), atomic_load(&count.runtime_allocs),
         atomic_load(&count.runtime_failed), atomic_load(&count.runtime_frees),
         atomic_load(&count.driver_allocs), atomic_load(&count.driver_failed),
         atomic_load(&count.driver_frees), atomic_load(&count.vmm_creates),
         atomic_load(&count.vmm_failed), atomic_load(&count.vmm_maps),
         atomic_load(&count.vmm_unmaps), atomic_load(&count.vmm_releases),
         atomic_load(&count.bytes), atomic_load(&count.streams), opt.epochs);
  printf("heap:");
  for (int e = 0; e < opt.epochs; e++)
    printf(" %lld", heap[e]);
  printf("\nresident:");
  for (int e = 0; e < opt.epochs; e++)
    printf(" %lld", rss[e]);
  printf("\n");
}

/* A job that starts a helper program (fork, then exec): the helper is a
 * process of its own, with its own report. */
static void spawn_helper(const char *self)
{
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    execl(self, self, "--threads=1", "--ops=50", "--epochs=1", (char *)NULL);
    _exit(127);
  }
  int status;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  printf("spawned: %ld\n", (long)pid);
}

int main(int argc, char **argv)
{
  static worker_t workers[MAX_THREADS];
  static long long heap[MAX_EPOCHS], rss[MAX_EPOCHS];
  pthread_t threads[MAX_THREADS];
  parse_args(argc, argv);
  CHECK(cudaFree(NULL) == cudaSuccess);
  find_granularity();
  pthread_barrier_init(&quiet, NULL, (unsigned)opt.threads + 1);
  pthread_barrier_init(&resume, NULL, (unsigned)opt.threads + 1);
  for (int i = 0; i < opt.threads; i++) {
    workers[i].index = i;
    workers[i].seed = opt.seed * 7919u + (unsigned)i * 104729u + 1;
    CHECK(pthread_create(&threads[i], NULL, worker_main, &workers[i]) == 0);
  }
  for (int epoch = 0; epoch < opt.epochs; epoch++) {
    if (opt.seconds > 0) {
      sleep_seconds(opt.seconds / opt.epochs);
      atomic_store(&epoch_over, true);
    }
    pthread_barrier_wait(&quiet);
    atomic_store(&epoch_over, false);
    quiet_point(epoch, heap, rss);
    pthread_barrier_wait(&resume);
  }
  for (int i = 0; i < opt.threads; i++)
    CHECK(pthread_join(threads[i], NULL) == 0);
  if (opt.spawn)
    spawn_helper(argv[0]);
  print_counts(heap, rss);
  return 0;
}
