/* manage_prog.c: programs for manage mode on the simulated CUDA. Each
 * scenario checks, from inside the job, the promises manage mode makes:
 * live blocks never overlap, data is never changed by someone else's
 * allocation, memory freed while a kernel may still write it is not handed
 * out again before that kernel is done, no device-wide synchronize per
 * free, nothing recorded or synchronized during a graph capture.
 *
 * usage: manage_prog SCENARIO */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "simcu.h"

#define CHECK(cond)                                                              \
  do {                                                                           \
    if (!(cond)) {                                                               \
      fprintf(stderr, "manage_prog: %s:%d: check failed: %s\n", __FILE__,        \
              __LINE__, #cond);                                                  \
      exit(3);                                                                   \
    }                                                                            \
  } while (0)

#define MiB (1u << 20)

typedef struct block {
  unsigned char *p;
  size_t size;
  unsigned char tag;
} block_t;

static void fill(block_t *b, unsigned char tag)
{
  b->tag = tag;
  memset(b->p, tag, b->size);
}

static bool intact(const block_t *b)
{
  for (size_t i = 0; i < b->size; i += 997)
    if (b->p[i] != b->tag)
      return false;
  return b->p[b->size - 1] == b->tag;
}

static bool overlap(const block_t *a, const block_t *b)
{
  return a->p < b->p + b->size && b->p < a->p + a->size;
}

static unsigned next_random(unsigned *state)
{
  *state = *state * 1103515245u + 12345u;
  return *state >> 8;
}

/* A stream of the job's that works on its own beside the churn (a data
 * stream, NCCL's): NULL but in churn_busy_stream. */
static cudaStream_t busy_stream;
static unsigned char busy_scratch_tag;

/* Random sizes, random frees, every live block checked against all others
 * and its own contents. Also: no device synchronize for all those frees. */
static int churn(void)
{
  enum { LIVE = 64, ROUNDS = 3000 };
  block_t live[LIVE] = {0};
  unsigned seed = 7;
  CHECK(cudaFree(NULL) == cudaSuccess); /* a context, as PyTorch makes first */
  unsigned long syncs = simcu_sync_count(), frees = 0;
  unsigned long queries = simcu_call_count("cuStreamQuery");
  void *scratch = NULL;
  if (busy_stream)
    CHECK(cudaMalloc(&scratch, 4096) == cudaSuccess);
  for (int round = 0; round < ROUNDS; round++) {
    if (busy_stream && round % 16 == 0)
      CHECK(simcu_launch_fill((CUstream)busy_stream, (CUdeviceptr)scratch, ++busy_scratch_tag,
                              4096, 2000) == CUDA_SUCCESS);
    block_t *b = &live[next_random(&seed) % LIVE];
    if (b->p) {
      CHECK(intact(b));
      CHECK(cudaFree(b->p) == cudaSuccess);
      b->p = NULL;
      frees++;
      continue;
    }
    b->size = 512 + next_random(&seed) % (3 * MiB);
    CHECK(cudaMalloc((void **)&b->p, b->size) == cudaSuccess);
    fill(b, (unsigned char)(round | 1));
    for (int j = 0; j < LIVE; j++)
      CHECK(&live[j] == b || !live[j].p || !overlap(b, &live[j]));
  }
  for (int j = 0; j < LIVE; j++)
    if (live[j].p) {
      CHECK(intact(&live[j]));
      CHECK(cudaFree(live[j].p) == cudaSuccess);
    }
  /* The real driver synchronizes on every free; manage mode must not (it
   * may before the rare unmap of memory queued work could still touch). */
  if (getenv("EXPECT_NO_SYNC"))
    CHECK(simcu_sync_count() - syncs <= frees / 50);
  /* A stream query costs microseconds (tens while the device is busy): one
   * round per batch of frees, not one per free. */
  if (getenv("EXPECT_FEW_QUERIES"))
    CHECK(simcu_call_count("cuStreamQuery") - queries <= frees / 8);
  /* ... and none where the other streams take marks: each is asked
   * nothing, it writes a word behind its work instead */
  if (getenv("EXPECT_NO_QUERIES"))
    CHECK(simcu_call_count("cuStreamQuery") == queries &&
          simcu_call_count("cuStreamWriteValue32_v2") > 0);
  /* ... or a barrier per batch, the streams asked one batch in sixteen */
  if (getenv("EXPECT_BARRIERS"))
    CHECK(simcu_call_count("cuCtxWaitEvent") > 0 &&
          simcu_call_count("cuStreamQuery") - queries <= simcu_call_count("cuCtxWaitEvent") / 8);
  if (scratch) {
    CHECK(cudaStreamSynchronize(busy_stream) == cudaSuccess);
    CHECK(cudaFree(scratch) == cudaSuccess);
  }
  CHECK(simcu_fault_count() == 0);
  return 0;
}

/* A kernel still writing a block when it is freed must not land in the next
 * allocation: fill A late on `late`, free A, allocate B of the same size,
 * write B on `next`, wait for the device: B must hold what we wrote. B is
 * written as a job writes device memory, by work on a stream, ordered after
 * whatever that stream already holds. 64 MiB blocks, so that every free
 * closes a batch at once and its fence (or barrier) is what protects A. */
static int pending_kernel(cudaStream_t late, cudaStream_t next)
{
  CHECK(cudaFree(NULL) == cudaSuccess);
  for (int round = 0; round < 20; round++) {
    block_t a = {0}, b = {0};
    a.size = b.size = 64 * MiB;
    CHECK(cudaMalloc((void **)&a.p, a.size) == cudaSuccess);
    CHECK(simcu_launch_fill((CUstream)late, (CUdeviceptr)a.p, 0xee, a.size, 5000) ==
          CUDA_SUCCESS);
    CHECK(cudaFree(a.p) == cudaSuccess);
    CHECK(cudaMalloc((void **)&b.p, b.size) == cudaSuccess);
    b.tag = 0x11;
    CHECK(simcu_launch_fill((CUstream)next, (CUdeviceptr)b.p, b.tag, b.size, 0) == CUDA_SUCCESS);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(intact(&b));
    CHECK(cudaFree(b.p) == cudaSuccess);
  }
  CHECK(simcu_fault_count() == 0);
  /* fences on the whole context, not an event on each stream */
  if (getenv("EXPECT_CONTEXT_FENCES"))
    CHECK(simcu_call_count("cuCtxRecordEvent") > 0);
  return 0;
}

static int pending_on_legacy(void)
{
  return pending_kernel(0, 0);
}

static int pending_on_nonblocking(void)
{
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  return pending_kernel(s, 0);
}

/* The same, the next block written on another non-blocking stream, which
 * the legacy stream's order does not cover: a barrier must hold back the
 * work of every stream, not the default stream's only. */
static int pending_across_nonblocking(void)
{
  cudaStream_t late, next;
  CHECK(cudaStreamCreateWithFlags(&late, cudaStreamNonBlocking) == cudaSuccess);
  CHECK(cudaStreamCreateWithFlags(&next, cudaStreamNonBlocking) == cudaSuccess);
  return pending_kernel(late, next);
}

/* With an idle library stream (cuDNN's under PyTorch) frees wait in a
 * batch. A request the pool's free memory cannot hold but a held free
 * would complete (the 8 MiB freed next to 12 free ones, for 20) must not
 * map new chunks: the batch goes back first, after one round of stream
 * queries. Was (issue 16): the pool grew past it, and on ResNet-50 the
 * layout so made trimmed and remapped chunks every step (16.7 maps and
 * 12.7 unmaps a step). */
static int held_before_growing(void)
{
  cudaStream_t idle;
  CHECK(cudaStreamCreateWithFlags(&idle, cudaStreamNonBlocking) == cudaSuccess);
  void *a, *b, *guard, *d, *e;
  CHECK(cudaMalloc(&a, 16 * MiB) == cudaSuccess);
  CHECK(cudaMalloc(&b, 8 * MiB) == cudaSuccess);
  CHECK(cudaMalloc(&guard, 2 * MiB) == cudaSuccess);
  CHECK(cudaFree(a) == cudaSuccess);
  CHECK(cudaMalloc(&d, 4 * MiB) == cudaSuccess); /* a's 16 come back for it: 12 stay free */
  CHECK(cudaFree(b) == cudaSuccess);             /* held: 8 MiB, less than the next request */
  unsigned long maps = simcu_call_count("cuMemMap");
  CHECK(cudaMalloc(&e, 20 * MiB) == cudaSuccess);
  CHECK(simcu_call_count("cuMemMap") == maps);
  CHECK((char *)e >= (char *)d + 4 * MiB || (char *)e + 20 * MiB <= (char *)d);
  CHECK((char *)e >= (char *)guard + 2 * MiB || (char *)e + 20 * MiB <= (char *)guard);
  CHECK(cudaFree(d) == cudaSuccess);
  CHECK(cudaFree(e) == cudaSuccess);
  CHECK(cudaFree(guard) == cudaSuccess);
  CHECK(simcu_fault_count() == 0);
  return 0;
}

/* With an idle library stream, a freed block waits in a batch. With
 * OOMLENS_POOL_REUSE_HELD=1 (EXPECT_REUSE) the next request finds it, not
 * other free memory of the pool: a loop freeing a tensor and asking for
 * one of its size finds the same place, step after step (held-out
 * video_fits, a 3D CNN beside cuDNN's streams: its requests went to other
 * holes, and the layout spanned 1.21x its peak where it spans 1.09x with
 * frees back at once). Without it the block waits for its batch to fill. */
static int held_block_reused(void)
{
  void *room, *a, *g, *b;
  CHECK(cudaMalloc(&room, 200 * MiB) == cudaSuccess); /* mapped, and free again at once */
  CHECK(cudaFree(room) == cudaSuccess);               /* (no other stream yet) */
  cudaStream_t idle;
  CHECK(cudaStreamCreateWithFlags(&idle, cudaStreamNonBlocking) == cudaSuccess);
  CHECK(cudaMalloc(&a, 24 * MiB) == cudaSuccess);
  CHECK(cudaMalloc(&g, 2 * MiB) == cudaSuccess);
  CHECK(cudaFree(a) == cudaSuccess);                  /* held in the batch */
  unsigned long maps = simcu_call_count("cuMemMap");
  CHECK(cudaMalloc(&b, 24 * MiB) == cudaSuccess);     /* 174 MiB free besides */
  CHECK(getenv("EXPECT_REUSE") ? b == a : b != a);     /* a's own place, or not yet */
  CHECK(simcu_call_count("cuMemMap") == maps);
  CHECK(cudaFree(g) == cudaSuccess);
  CHECK(cudaFree(b) == cudaSuccess);
  CHECK(simcu_fault_count() == 0);
  return 0;
}

#define THREADS 8

static void *thread_churn(void *arg)
{
  unsigned seed = (unsigned)(uintptr_t)arg;
  block_t live[16] = {0};
  for (int round = 0; round < 2000; round++) {
    block_t *b = &live[next_random(&seed) % 16];
    if (b->p) {
      if (!intact(b) || cudaFree(b->p) != cudaSuccess)
        return (void *)1;
      b->p = NULL;
    } else {
      b->size = 512 + next_random(&seed) % MiB;
      if (cudaMalloc((void **)&b->p, b->size) != cudaSuccess)
        return (void *)1;
      fill(b, (unsigned char)(seed | 1));
    }
  }
  for (int j = 0; j < 16; j++)
    if (live[j].p && (!intact(&live[j]) || cudaFree(live[j].p) != cudaSuccess))
      return (void *)1;
  return NULL;
}

/* Threads at once: every block keeps its own data. */
static int threads(void)
{
  pthread_t t[THREADS];
  CHECK(cudaFree(NULL) == cudaSuccess);
  for (uintptr_t i = 0; i < THREADS; i++)
    CHECK(pthread_create(&t[i], NULL, thread_churn, (void *)(i * 7919 + 1)) == 0);
  for (int i = 0; i < THREADS; i++) {
    void *result;
    pthread_join(t[i], &result);
    CHECK(result == NULL);
  }
  return 0;
}

/* During a capture: no synchronize, no event on a capturing stream; the
 * allocation still succeeds (the driver serves it). */
/* cuda.h names cuStreamBeginCapture_v2 so; the first form is the ABI's
 * cuStreamBeginCapture, which older driver code calls. */
#undef cuStreamBeginCapture
CUresult CUDAAPI cuStreamBeginCapture(CUstream stream);
CUresult CUDAAPI cuStreamBeginCapture_ptsz(CUstream stream);
CUresult CUDAAPI cuStreamBeginCaptureToGraph_ptsz(CUstream stream, CUgraph graph,
                                                  const CUgraphNode *deps,
                                                  const CUgraphEdgeData *edges, size_t count,
                                                  CUstreamCaptureMode mode);

/* How a capture begins: the runtime's call (cuStreamBeginCapture_v2), the
 * driver's first form, or into the caller's graph (CUDA 12.3); the last
 * two also as per-thread default stream code calls them (_ptsz). */
enum { CAPTURE_RUNTIME, CAPTURE_V1, CAPTURE_V1_PTSZ, CAPTURE_TO_GRAPH, CAPTURE_TO_GRAPH_PTSZ };

static int capture_by(int how)
{
  cudaStream_t s;
  void *before, *during, *big;
  CHECK(cudaFree(NULL) == cudaSuccess);
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  CHECK(cudaMalloc(&before, MiB) == cudaSuccess);
  /* In manage mode the pool serves a free during the capture, which the
   * driver would refuse (test_reliability runs this in observe mode). */
  const char *manage = getenv("OOMLENS_MANAGE");
  big = NULL;
  if (manage && !strcmp(manage, "1"))
    CHECK(cudaMalloc(&big, 64 * MiB) == cudaSuccess);
  CHECK(cudaFree(before) == cudaSuccess); /* pending in manage mode */
  enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  CHECK(cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess);
  CUgraph into = NULL;
  if (how == CAPTURE_RUNTIME)
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed) == cudaSuccess);
  else if (how == CAPTURE_V1)
    CHECK(cuStreamBeginCapture((CUstream)s) == CUDA_SUCCESS);
  else if (how == CAPTURE_V1_PTSZ)
    CHECK(cuStreamBeginCapture_ptsz((CUstream)s) == CUDA_SUCCESS);
  else {
    CHECK(cuGraphCreate(&into, 0) == CUDA_SUCCESS);
    CUresult (*begin)(CUstream, CUgraph, const CUgraphNode *, const CUgraphEdgeData *, size_t,
                      CUstreamCaptureMode) =
        how == CAPTURE_TO_GRAPH ? cuStreamBeginCaptureToGraph : cuStreamBeginCaptureToGraph_ptsz;
    CHECK(begin((CUstream)s, into, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_RELAXED) == CUDA_SUCCESS);
  }
  /* (a global-mode capture, the first form's, forbids the driver's
   * cuMemAlloc that a request during a capture becomes) */
  during = NULL;
  if (how != CAPTURE_V1 && how != CAPTURE_V1_PTSZ)
    CHECK(cudaMalloc(&during, MiB) == cudaSuccess);
  /* a batch's worth freed during the capture: nothing may be recorded,
   * asked or barred on the device until it ends */
  if (big)
    CHECK(cudaFree(big) == cudaSuccess);
  cudaGraph_t graph;
  CHECK(cudaStreamEndCapture(s, &graph) == cudaSuccess);
  CHECK(into == NULL || graph == (cudaGraph_t)into);
  CHECK(simcu_capture_violations() == 0);
  if (during)
    CHECK(cudaFree(during) == cudaSuccess);
  CHECK(cudaGraphDestroy(graph) == cudaSuccess);
  return 0;
}

static int capture(void)
{
  return capture_by(CAPTURE_RUNTIME);
}

/* More than the device holds at once, in turns: freed memory must come back
 * (waiting for fences when needed) instead of failing. */
static int reuse_under_pressure(void)
{
  CHECK(cudaFree(NULL) == cudaSuccess);
  size_t capacity = simcu_capacity(0);
  size_t size = capacity / 4;
  for (int round = 0; round < 12; round++) {
    void *p;
    CHECK(cudaMalloc(&p, size) == cudaSuccess);
    CHECK(simcu_launch_fill(0, (CUdeviceptr)p, 0x42, 4096, 500) == CUDA_SUCCESS);
    CHECK(cudaFree(p) == cudaSuccess);
  }
  void *too_big;
  CHECK(cudaMalloc(&too_big, capacity * 2) == cudaErrorMemoryAllocation);
  return 0;
}

/* Memory freed while a kernel still writes it must stay mapped until the
 * kernel is done, even when the pool gives it back to the device to serve
 * a request that does not fit otherwise. */
static int unmap_pending(void)
{
  CHECK(cudaFree(NULL) == cudaSuccess);
  size_t capacity = simcu_capacity(0);
  void *a, *b, *c;
  CHECK(cudaMalloc(&a, 256 * MiB) == cudaSuccess);
  CHECK(cudaMalloc(&c, 64 * MiB) == cudaSuccess); /* keeps B from growing A's hole */
  CHECK(simcu_launch_fill(0, (CUdeviceptr)a, 0x5a, 256 * MiB, 5000) == CUDA_SUCCESS);
  CHECK(cudaFree(a) == cudaSuccess);
  /* Fits only once A's memory is unmapped and mapped again behind C. */
  CHECK(cudaMalloc(&b, capacity - 128 * MiB) == cudaSuccess);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(simcu_fault_count() == 0);
  CHECK(cudaFree(b) == cudaSuccess);
  CHECK(cudaFree(c) == cudaSuccess);
  return 0;
}

/* The same on two non-blocking streams, and what B holds checked: A's
 * chunks, trimmed while `late` still writes them, back B at once (their
 * memory moves, the old addresses are unmapped once the kernel is done),
 * so B's own write on `next` must come after the late one: the barrier (or
 * the fence, without barriers) orders it. EXPECT_MOVES: the memory moved
 * (more maps than creates: no physical allocation made for it). */
static int move_pending(void)
{
  CHECK(cudaFree(NULL) == cudaSuccess);
  cudaStream_t late, next;
  CHECK(cudaStreamCreateWithFlags(&late, cudaStreamNonBlocking) == cudaSuccess);
  CHECK(cudaStreamCreateWithFlags(&next, cudaStreamNonBlocking) == cudaSuccess);
  size_t capacity = simcu_capacity(0);
  block_t b = {0};
  void *a, *c;
  CHECK(cudaMalloc(&a, 256 * MiB) == cudaSuccess);
  CHECK(cudaMalloc(&c, 64 * MiB) == cudaSuccess); /* keeps B from growing A's hole */
  CHECK(simcu_launch_fill((CUstream)late, (CUdeviceptr)a, 0x5a, 256 * MiB, 20000) ==
        CUDA_SUCCESS);
  CHECK(cudaFree(a) == cudaSuccess);
  unsigned long creates = simcu_call_count("cuMemCreate"), maps = simcu_call_count("cuMemMap");
  b.size = capacity - 128 * MiB; /* fits only with A's memory behind C */
  CHECK(cudaMalloc((void **)&b.p, b.size) == cudaSuccess);
  b.tag = 0x11;
  CHECK(simcu_launch_fill((CUstream)next, (CUdeviceptr)b.p, b.tag, b.size, 0) == CUDA_SUCCESS);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(intact(&b));
  CHECK(simcu_fault_count() == 0);
  if (getenv("EXPECT_MOVES"))
    CHECK(simcu_call_count("cuMemMap") - maps > simcu_call_count("cuMemCreate") - creates);
  CHECK(cudaFree(b.p) == cudaSuccess);
  CHECK(cudaFree(c) == cudaSuccess);
  return 0;
}

/* Stream-ordered frees: the same stream takes the block back at once (its
 * work is queued behind the free), and what it writes is never overwritten
 * by the work queued before the free. */
static int async_same_stream(void)
{
  cudaStream_t s;
  CHECK(cudaFree(NULL) == cudaSuccess);
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  int reused = 0;
  for (int round = 0; round < 10; round++) {
    block_t a = {0}, b = {0};
    a.size = b.size = 8 * MiB;
    CHECK(cudaMallocAsync((void **)&a.p, a.size, s) == cudaSuccess);
    CHECK(simcu_launch_fill((CUstream)s, (CUdeviceptr)a.p, 0xee, a.size, 3000) == CUDA_SUCCESS);
    CHECK(cudaFreeAsync(a.p, s) == cudaSuccess);
    CHECK(cudaMallocAsync((void **)&b.p, b.size, s) == cudaSuccess);
    reused += b.p == a.p;
    b.tag = 0x11;
    CHECK(simcu_launch_fill((CUstream)s, (CUdeviceptr)b.p, b.tag, b.size, 0) == CUDA_SUCCESS);
    CHECK(cudaStreamSynchronize(s) == cudaSuccess);
    CHECK(intact(&b));
    CHECK(cudaFreeAsync(b.p, s) == cudaSuccess);
  }
  if (getenv("EXPECT_REUSE"))
    CHECK(reused == 10);
  CHECK(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(cudaStreamDestroy(s) == cudaSuccess);
  CHECK(simcu_fault_count() == 0);
  return 0;
}

/* Freed on one stream, allocated on another: not before the first stream
 * has finished what it had queued. */
static int async_other_stream(void)
{
  cudaStream_t s1, s2;
  CHECK(cudaFree(NULL) == cudaSuccess);
  CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking) == cudaSuccess);
  CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking) == cudaSuccess);
  for (int round = 0; round < 10; round++) {
    block_t a = {0}, b = {0};
    a.size = b.size = 64 * MiB; /* a whole batch: fenced at once */
    CHECK(cudaMallocAsync((void **)&a.p, a.size, s1) == cudaSuccess);
    CHECK(simcu_launch_fill((CUstream)s1, (CUdeviceptr)a.p, 0xee, a.size, 5000) == CUDA_SUCCESS);
    CHECK(cudaFreeAsync(a.p, s1) == cudaSuccess);
    CHECK(cudaMallocAsync((void **)&b.p, b.size, s2) == cudaSuccess);
    b.tag = 0x22;
    CHECK(simcu_launch_fill((CUstream)s2, (CUdeviceptr)b.p, b.tag, b.size, 0) == CUDA_SUCCESS);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(intact(&b));
    CHECK(cudaFreeAsync(b.p, s2) == cudaSuccess);
  }
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(simcu_fault_count() == 0);
  return 0;
}

/* PyTorch's cudaMallocAsync backend: every request on one stream, of
 * sizes that vary (1 to 9 MiB), four live at a time, each filled by a late
 * kernel and checked by a kernel just before its free. The blocks come back
 * at once (its later work is queued behind the free): no fence is waited
 * for. Then, with a fill still landing late in a block just freed, a
 * cudaMalloc (the legacy stream: another stream than the one) is handed
 * memory the host writes at once: it must not be that fill's. */
static int async_one_stream(void)
{
  cudaStream_t s;
  CHECK(cudaFree(NULL) == cudaSuccess);
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  block_t live[4] = {{0}};
  unsigned seed = 11;
  for (int round = 0; round < 200; round++) {
    block_t *b = &live[round % 4];
    if (b->p) {
      CHECK(simcu_launch_check((CUstream)s, (CUdeviceptr)b->p, b->tag, b->size, 0) == CUDA_SUCCESS);
      CHECK(cudaFreeAsync(b->p, s) == cudaSuccess);
    }
    seed = seed * 1103515245u + 12345u;
    b->size = (1 + (seed >> 16) % 9) * MiB - (seed >> 8) % 4096;
    b->tag = (unsigned char)(round + 1);
    CHECK(cudaMallocAsync((void **)&b->p, b->size, s) == cudaSuccess);
    CHECK(simcu_launch_fill((CUstream)s, (CUdeviceptr)b->p, b->tag, b->size, 200) == CUDA_SUCCESS);
  }
  block_t *late = &live[0];
  CHECK(simcu_launch_fill((CUstream)s, (CUdeviceptr)late->p, 0x5a, late->size, 20000) == CUDA_SUCCESS);
  CHECK(cudaFreeAsync(late->p, s) == cudaSuccess);
  block_t h = {0};
  h.size = late->size;
  CHECK(cudaMalloc((void **)&h.p, h.size) == cudaSuccess);
  fill(&h, 0x77);
  CHECK(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(intact(&h));
  for (int i = 1; i < 4; i++)
    CHECK(cudaFreeAsync(live[i].p, s) == cudaSuccess);
  CHECK(cudaFree(h.p) == cudaSuccess);
  CHECK(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(cudaStreamDestroy(s) == cudaSuccess);
  CHECK(simcu_check_failures() == 0);
  CHECK(simcu_fault_count() == 0);
  return 0;
}

/* The one stream is the legacy stream, and another stream exists (cuDNN's,
 * NCCL's). A block freed with cudaFreeAsync on stream 0 while a fill is
 * still to land in it, then a cudaMalloc of its size: cudaMalloc promises
 * idle memory (NCCL would use it on its own stream at once), so the host
 * writes it at once and it must not be that fill's. */
static int async_legacy_then_malloc(void)
{
  cudaStream_t other;
  CHECK(cudaFree(NULL) == cudaSuccess);
  CHECK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking) == cudaSuccess);
  block_t a = {0}, h = {0};
  a.size = h.size = 8 * MiB;
  CHECK(cudaMallocAsync((void **)&a.p, a.size, 0) == cudaSuccess);
  CHECK(simcu_launch_fill(0, (CUdeviceptr)a.p, 0x5a, a.size, 20000) == CUDA_SUCCESS);
  CHECK(cudaFreeAsync(a.p, 0) == cudaSuccess);
  CHECK(cudaMalloc((void **)&h.p, h.size) == cudaSuccess);
  fill(&h, 0x77);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(intact(&h));
  CHECK(cudaFree(h.p) == cudaSuccess);
  CHECK(cudaStreamDestroy(other) == cudaSuccess);
  CHECK(simcu_fault_count() == 0);
  return 0;
}

/* Run with OOMLENS_CAPACITY=256M. A non-blocking stream still writing a
 * block freed with cudaFree is destroyed: the block must not come back
 * before that work is done, though the stream is gone (bug: the fence
 * recorded after the destroy missed it, and the next request got the
 * block while the kernel still wrote it). */
static int destroyed_stream_of(size_t size, int kept_blocks)
{
  cudaStream_t s;
  block_t a = {0}, b = {0};
  void *kept[8];
  a.size = b.size = size;
  CHECK(cudaFree(NULL) == cudaSuccess);
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  for (int i = 0; i < kept_blocks; i++)
    CHECK(cudaMalloc(&kept[i], size) == cudaSuccess);
  CHECK(cudaMalloc((void **)&a.p, a.size) == cudaSuccess);
  CHECK(simcu_launch_fill((CUstream)s, (CUdeviceptr)a.p, 0xee, a.size, 1000000) == CUDA_SUCCESS);
  CHECK(cudaFree(a.p) == cudaSuccess);
  CHECK(cudaStreamDestroy(s) == cudaSuccess);
  CHECK(cudaMalloc((void **)&b.p, b.size) == cudaSuccess);
  /* written as a job writes device memory, by work on its stream (a host
   * memset has no order with the device's work at all) */
  b.tag = 0x11;
  CHECK(simcu_launch_fill(0, (CUdeviceptr)b.p, b.tag, b.size, 0) == CUDA_SUCCESS);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
  simcu_wait_idle();
  CHECK(intact(&b));
  CHECK(cudaFree(b.p) == cudaSuccess);
  for (int i = 0; i < kept_blocks; i++)
    CHECK(cudaFree(kept[i]) == cudaSuccess);
  return 0;
}

/* A large block closes its batch at once (fenced while the stream still
 * exists); a small one waits in the open batch, which the destroy must
 * fence before the stream leaves the list. 256 MiB of device: the second
 * request can only have the first one's memory. */
static int destroyed_stream(void)
{
  return destroyed_stream_of(160 * MiB, 0) || destroyed_stream_of(32 * MiB, 7);
}

/* Manage mode under OOMLENS_CAPACITY=256M: the pool stops growing at the
 * smaller device and the job gets an out-of-memory error, then memory back
 * once it frees. */
static int smaller_device(void)
{
  void *a, *b;
  CHECK(cudaFree(NULL) == cudaSuccess);
  CHECK(cudaMalloc(&a, 192 * MiB) == cudaSuccess);
  CHECK(cudaMalloc(&b, 128 * MiB) == cudaErrorMemoryAllocation);
  CHECK(cudaFree(a) == cudaSuccess);
  CHECK(cudaMalloc(&b, 128 * MiB) == cudaSuccess);
  CHECK(cudaFree(b) == cudaSuccess);
  return 0;
}

/* Under OOMLENS_CAPACITY=256M, with a library named as PyTorch's
 * libc10_cuda.so loaded (ARG: its path; none: not loaded): the capacity
 * scenario's refusal. */
static int torch_oom(const char *c10)
{
  CHECK(!c10 || dlopen(c10, RTLD_NOW | RTLD_GLOBAL));
  return smaller_device();
}

/* Under OOMLENS_CAPACITY=256M, another process takes 224 MiB of the
 * device while the job runs (and never asks the driver what is free): the
 * smaller device has that much less for the job, as a real one would,
 * and more than the cap leaves beside the job's 64 MiB. It gives it back:
 * the job is served again. */
static int capacity_newcomer(void)
{
  void *a, *b;
  CHECK(cudaFree(NULL) == cudaSuccess);
  CHECK(cudaMalloc(&a, 64 * MiB) == cudaSuccess);
  simcu_set_external(0, 224 * MiB);
  struct timespec pause = {0, 30 * 1000 * 1000}; /* past the library's remeasure */
  nanosleep(&pause, NULL);
  CHECK(cudaMalloc(&b, 64 * MiB) == cudaErrorMemoryAllocation);
  simcu_set_external(0, 0);
  CHECK(cudaMalloc(&b, 16 * MiB) == cudaSuccess); /* another size: the 64 was an OOM */
  CHECK(cudaFree(b) == cudaSuccess);
  CHECK(cudaMalloc(&b, 128 * MiB) == cudaSuccess);
  CHECK(cudaFree(b) == cudaSuccess);
  CHECK(cudaFree(a) == cudaSuccess);
  return 0;
}

/* The job's own requests to the driver (cudaMalloc during a capture,
 * cuMemCreate) when the pool holds the device's memory free: under
 * OOMLENS_POOL_TRIM=0 the pool keeps what it mapped, and the driver
 * refuses until the pool gives it back. Each must be served (issue 15:
 * cuMemCreate failed with 2 while the pool held gigabytes free). */
static int driver_after_pool(void)
{
  CHECK(cudaFree(NULL) == cudaSuccess);
  size_t capacity = simcu_capacity(0);
  void *a;
  CHECK(cudaMalloc(&a, capacity / 4 * 3) == cudaSuccess);
  CHECK(cudaFree(a) == cudaSuccess);
  CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                              .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
  CUmemGenericAllocationHandle h;
  CHECK(cuMemCreate(&h, capacity / 2, &prop, 0) == CUDA_SUCCESS);
  CHECK(cuMemRelease(h) == CUDA_SUCCESS);
  CHECK(cudaMalloc(&a, capacity / 4 * 3) == cudaSuccess); /* the pool maps again */
  CHECK(cudaFree(a) == cudaSuccess);
  CHECK(cuMemCreate(&h, capacity / 2, &prop, 0) == CUDA_SUCCESS);
  CHECK(cuMemRelease(h) == CUDA_SUCCESS);
  return 0;
}

/* Under OOMLENS_CAPACITY=256M, the pool holds 192 MiB free (mapped, as
 * it keeps what a step used) when a thread that has made no runtime call
 * yet, and so has no context current (PyTorch's autograd thread before its
 * first kernel), asks for 128 MiB: the pool must serve it from that free
 * memory. It went to the driver, past a cap the pool's free memory
 * filled, and was refused. */
static void *ask_unbound(void *unused)
{
  (void)unused;
  void *a;
  CUcontext ctx = (CUcontext)1;
  CHECK(cuCtxGetCurrent(&ctx) == CUDA_SUCCESS && ctx == NULL); /* the case itself */
  if (cudaMalloc(&a, 128 * MiB) != cudaSuccess)
    return (void *)1;
  CHECK(cudaFree(a) == cudaSuccess);
  return NULL;
}

static int unbound_thread(void)
{
  void *a, *result = (void *)1;
  pthread_t t;
  CHECK(cudaFree(NULL) == cudaSuccess);
  CHECK(cudaMalloc(&a, 192 * MiB) == cudaSuccess);
  CHECK(cudaFree(a) == cudaSuccess);
  CHECK(pthread_create(&t, NULL, ask_unbound, NULL) == 0);
  pthread_join(t, &result);
  CHECK(result == NULL);
  return 0;
}

/* Under OOMLENS_CAPACITY=256M, the pool holds 192 MiB free when the job
 * asks the driver itself (cuMemCreate, which the pool never serves) for
 * 128 MiB: the smaller device refuses as the real one would, and the pool
 * gives its free memory back first, as it does when the driver refuses. */
static int create_under_capacity(void)
{
  void *a;
  CHECK(cudaFree(NULL) == cudaSuccess);
  CHECK(cudaMalloc(&a, 192 * MiB) == cudaSuccess);
  CHECK(cudaFree(a) == cudaSuccess);
  CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                              .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
  CUmemGenericAllocationHandle h;
  CHECK(cuMemCreate(&h, 128 * MiB, &prop, 0) == CUDA_SUCCESS);
  CHECK(cuMemRelease(h) == CUDA_SUCCESS);
  return 0;
}

/* Free memory in more separate runs than manage.c keeps retirements for,
 * all of it still under a running kernel's queue, given back at once to
 * serve a request the device holds only without them: each run retires
 * behind its own events, and none may cost a device synchronize. */
#define RUNS 80
static int many_retirements(void)
{
  CHECK(cudaFree(NULL) == cudaSuccess);
  void *hole[RUNS], *wall[RUNS];
  for (int i = 0; i < RUNS; i++) {
    CHECK(cudaMalloc(&hole[i], 2 * MiB) == cudaSuccess);
    CHECK(cudaMalloc(&wall[i], 2 * MiB) == cudaSuccess);
  }
  CHECK(simcu_launch_fill(0, (CUdeviceptr)wall[0], 0x11, 4096, 20000) == CUDA_SUCCESS);
  for (int i = 0; i < RUNS; i++)
    CHECK(cudaFree(hole[i]) == cudaSuccess);
  size_t capacity = simcu_capacity(0);
  void *big;
  CHECK(cudaMalloc(&big, capacity - RUNS * 2 * MiB - 64 * MiB) == cudaSuccess);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(simcu_fault_count() == 0);
  CHECK(cudaFree(big) == cudaSuccess);
  for (int i = 0; i < RUNS; i++)
    CHECK(cudaFree(wall[i]) == cudaSuccess);
  return 0;
}

int main(int argc, char **argv)
{
  if (argc != 2) {
    fprintf(stderr, "usage: manage_prog SCENARIO\n");
    return 2;
  }
  const char *s = argv[1];
  if (!strcmp(s, "churn")) return churn();
  if (!strcmp(s, "churn_idle_stream")) { /* a library's stream that never works */
    cudaStream_t idle;
    CHECK(cudaStreamCreateWithFlags(&idle, cudaStreamNonBlocking) == cudaSuccess);
    return churn();
  }
  if (!strcmp(s, "churn_busy_stream")) { /* a stream that works on its own */
    CHECK(cudaStreamCreateWithFlags(&busy_stream, cudaStreamNonBlocking) == cudaSuccess);
    return churn();
  }
  if (!strcmp(s, "churn_blocking_stream")) { /* the job's own side stream */
    cudaStream_t side;
    CHECK(cudaStreamCreate(&side) == cudaSuccess);
    return churn();
  }

  if (!strcmp(s, "pending_legacy")) return pending_on_legacy();
  if (!strcmp(s, "pending_nonblocking")) return pending_on_nonblocking();
  if (!strcmp(s, "pending_across")) return pending_across_nonblocking();
  if (!strcmp(s, "threads")) return threads();
  if (!strcmp(s, "capture")) return capture();
  if (!strcmp(s, "capture_v1")) return capture_by(CAPTURE_V1);
  if (!strcmp(s, "capture_v1_ptsz")) return capture_by(CAPTURE_V1_PTSZ);
  if (!strcmp(s, "capture_to_graph")) return capture_by(CAPTURE_TO_GRAPH);
  if (!strcmp(s, "capture_to_graph_ptsz")) return capture_by(CAPTURE_TO_GRAPH_PTSZ);
  if (!strcmp(s, "pressure")) return reuse_under_pressure();
  if (!strcmp(s, "unmap_pending")) return unmap_pending();
  if (!strcmp(s, "move_pending")) return move_pending();
  if (!strcmp(s, "async_same_stream")) return async_same_stream();
  if (!strcmp(s, "capacity")) return smaller_device();
  if (!strcmp(s, "capacity_newcomer")) return capacity_newcomer();
  if (!strcmp(s, "torch_oom")) return torch_oom(getenv("FAKE_C10"));
  if (!strcmp(s, "driver_after_pool")) return driver_after_pool();
  if (!strcmp(s, "async_other_stream")) return async_other_stream();
  if (!strcmp(s, "async_one_stream")) return async_one_stream();
  if (!strcmp(s, "async_legacy_then_malloc")) return async_legacy_then_malloc();
  if (!strcmp(s, "destroyed_stream")) return destroyed_stream();
  if (!strcmp(s, "held_before_growing")) return held_before_growing();
  if (!strcmp(s, "held_block_reused")) return held_block_reused();
  if (!strcmp(s, "many_retirements")) return many_retirements();
  if (!strcmp(s, "unbound_thread")) return unbound_thread();
  if (!strcmp(s, "create_under_capacity")) return create_under_capacity();
  fprintf(stderr, "manage_prog: unknown scenario %s\n", s);
  return 2;
}
