/* bench_pool.c: the pool's figures against issue 3's targets, printed, not
 * asserted (timings belong to a quiet machine, not to CI):
 * - replay speed, events per second on one core, per recorded trace, for
 *   every policy ol_policy_find knows (trace parsing excluded);
 * - peak reserved / peak allocated per trace and policy, at 139.8 GiB, and
 *   whether the frag trace fits at 6 GiB;
 * - map/unmap traffic of the oomlens pool per trace, and what it would cost
 *   on an H200 (~50 us per 2 MiB mapped, ~48 us per 2 MiB unmapped);
 * - the median ns of an allocate+free pair served from mapped memory, for
 *   the pool, the PyTorch model and glibc malloc as a host yardstick.
 * Usage: bench_pool DATA_DIR [TRACE...] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include "policy.h"
#include "pool.h"
#include "simdev.h"

#define GiB (1ull << 30)
#define MiB (1ull << 20)
#define GRAN (2 * MiB)
#define H200_CAPACITY (1398ull * GiB / 10) /* 139.8 GiB, rounded down */

enum { EV_ALLOC, EV_FREE, EV_OOM };

typedef struct event {
  uint32_t op, slot; /* slot: which live allocation, numbered at load */
  uint64_t size;
} event_t;

typedef struct trace {
  event_t *ev;
  size_t n, cap;
  uint32_t slots;
} trace_t;

static double now_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *xrealloc(void *p, size_t n)
{
  p = realloc(p, n);
  if (!p) {
    fprintf(stderr, "bench_pool: out of memory\n");
    exit(1);
  }
  return p;
}

/* ---- loading: trace addresses become slot numbers, so that replay does no
 * lookups of its own ------------------------------------------------------ */

typedef struct slot_map {
  uint64_t *keys;
  uint32_t *vals;
  size_t cap;
} slot_map_t;

static size_t slot_find(const slot_map_t *m, uint64_t key)
{
  size_t i = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 20) & (m->cap - 1);
  while (m->keys[i] && m->keys[i] != key)
    i = (i + 1) & (m->cap - 1);
  return i;
}

static void trace_push(trace_t *t, event_t e)
{
  if (t->n == t->cap) {
    t->cap = t->cap ? t->cap * 2 : 4096;
    t->ev = xrealloc(t->ev, t->cap * sizeof *t->ev);
  }
  t->ev[t->n++] = e;
}

/* A free's address leaves the map by marking it with a bit no device
 * address has, so that probing stays simple (tombstones). */
#define GONE (1ull << 63)

static int trace_load(const char *path, trace_t *t)
{
  gzFile in = gzopen(path, "rb");
  if (!in)
    return -1;
  slot_map_t m = {.cap = 1 << 20};
  m.keys = calloc(m.cap, sizeof *m.keys);
  m.vals = calloc(m.cap, sizeof *m.vals);
  if (!m.keys || !m.vals)
    exit(1);
  char line[4096];
  memset(t, 0, sizeof *t);
  while (gzgets(in, line, sizeof line)) {
    char action[32];
    unsigned long long ts, addr, size;
    if (line[0] == '#' || sscanf(line, "%llu,%31[^,],%llx,%llu", &ts, action, &addr, &size) != 4)
      continue;
    if (strcmp(action, "alloc") == 0) {
      size_t i = slot_find(&m, addr);
      m.keys[i] = addr;
      m.vals[i] = t->slots;
      trace_push(t, (event_t){EV_ALLOC, t->slots++, size});
    } else if (strcmp(action, "free_completed") == 0) {
      size_t i = slot_find(&m, addr);
      if (!m.keys[i])
        continue;
      m.keys[i] |= GONE;
      trace_push(t, (event_t){EV_FREE, m.vals[i], 0});
    } else if (strcmp(action, "oom") == 0) {
      trace_push(t, (event_t){EV_OOM, 0, size});
    }
  }
  gzclose(in);
  free(m.keys);
  free(m.vals);
  return 0;
}

/* ---- replay ------------------------------------------------------------- */

typedef struct result {
  long ooms;
  ol_policy_stats_t stats;
  double seconds; /* of the replay loop alone */
} result_t;

static result_t replay(const ol_policy_ops_t *ops, const trace_t *t, uint64_t capacity,
                       uint64_t *addrs)
{
  ol_policy_options_t opt = {.capacity = capacity};
  ol_policy_t *policy = ops->create(&opt);
  if (!policy)
    exit(1);
  result_t r = {0};
  uint8_t *live = calloc(t->slots + 1, 1);
  double t0 = now_s();
  for (size_t i = 0; i < t->n; i++) {
    const event_t *e = &t->ev[i];
    if (e->op == EV_ALLOC) {
      if (ops->alloc(policy, e->size, 0, &addrs[e->slot]) == 0)
        live[e->slot] = 1;
      else
        r.ooms++;
    } else if (e->op == EV_FREE) {
      if (live[e->slot]) {
        ops->free(policy, addrs[e->slot]);
        live[e->slot] = 0;
      }
    } else {
      uint64_t a;
      if (ops->alloc(policy, e->size, 0, &a) == 0)
        ops->free(policy, a);
      else
        r.ooms++;
    }
  }
  r.seconds = now_s() - t0;
  ops->stats(policy, &r.stats);
  ops->destroy(policy);
  free(live);
  return r;
}

/* Events per second: the best of enough repetitions to fill ~0.3 s. */
static double events_per_s(const ol_policy_ops_t *ops, const trace_t *t, uint64_t *addrs)
{
  double best = 1e30, spent = 0;
  for (int rep = 0; rep < 200 && (rep < 3 || spent < 0.3); rep++) {
    result_t r = replay(ops, t, H200_CAPACITY, addrs);
    spent += r.seconds;
    best = r.seconds < best ? r.seconds : best;
  }
  return (double)t->n / best;
}

/* The oomlens pool's own counters on a trace: device traffic. */
static void pool_traffic(const trace_t *t, uint64_t *addrs, ol_pool_counts_t *out)
{
  ol_simdev_t *dev = ol_simdev_create(H200_CAPACITY, GRAN);
  ol_backend_t be;
  ol_simdev_backend(dev, &be);
  ol_pool_config_t cfg = {.address_space = (H200_CAPACITY + GRAN - 1) & ~(GRAN - 1)};
  ol_pool_t *pool = ol_pool_create(&be, &cfg);
  uint8_t *live = calloc(t->slots + 1, 1);
  for (size_t i = 0; i < t->n; i++) {
    const event_t *e = &t->ev[i];
    uint64_t a;
    if (e->op == EV_ALLOC)
      live[e->slot] = ol_pool_alloc(pool, e->size, &addrs[e->slot]) == 0;
    else if (e->op == EV_FREE && live[e->slot])
      ol_pool_free(pool, addrs[e->slot]), live[e->slot] = 0;
    else if (e->op == EV_OOM && ol_pool_alloc(pool, e->size, &a) == 0)
      ol_pool_free(pool, a);
  }
  ol_pool_counts(pool, out);
  ol_pool_destroy(pool);
  ol_simdev_destroy(dev);
  free(live);
}

/* ---- the hot path: allocate+free pairs ---------------------------------- */

static uint64_t rng = 88172645463325252ull;

static uint64_t rnd(void)
{
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

/* Sizes as a training step asks for them: mostly small and medium tensors,
 * some of several MiB. */
static uint64_t mixed_size(void)
{
  switch (rnd() % 8) {
  case 0: case 1: case 2:
    return (rnd() % 64 + 1) * 512;
  case 3: case 4:
    return (rnd() % 2048 + 1) * 512;
  case 5: case 6:
    return (rnd() % 8 + 1) * MiB + (rnd() % 64) * 512;
  default:
    return (rnd() % 32 + 1) * MiB;
  }
}

typedef struct pair_target {
  const char *name;
  void *ctx;
  int (*alloc)(void *ctx, uint64_t size, uint64_t *addr);
  void (*free)(void *ctx, uint64_t addr);
} pair_target_t;

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

enum { BATCH = 1000, BATCHES = 1000, SIZES = 4096, WINDOW = 16 };

/* Median ns per pair over BATCHES batches of BATCH pairs. window 1: each
 * allocation freed at once; WINDOW: WINDOW allocations, then their frees,
 * so that blocks split and coalesce with live neighbours. */
static double pair_ns(const pair_target_t *t, const uint64_t *sizes, int window)
{
  static double per[BATCHES];
  uint64_t addrs[WINDOW];
  unsigned next = 0; /* runs through all SIZES sizes, batch after batch */
  for (int b = -50; b < BATCHES; b++) { /* 50 warm-up batches */
    double t0 = now_s();
    for (int i = 0; i < BATCH; i += window) {
      for (int k = 0; k < window; k++)
        if (t->alloc(t->ctx, sizes[next++ % SIZES], &addrs[k]) != 0)
          exit(1);
      for (int k = window; k-- > 0;)
        t->free(t->ctx, addrs[(k * 7) % window]);
    }
    if (b >= 0)
      per[b] = (now_s() - t0) * 1e9 / BATCH;
  }
  qsort(per, BATCHES, sizeof per[0], cmp_double);
  return per[BATCHES / 2];
}

static int pool_alloc_fn(void *ctx, uint64_t size, uint64_t *addr)
{
  return ol_pool_alloc(ctx, size, addr);
}

static void pool_free_fn(void *ctx, uint64_t addr)
{
  ol_pool_free(ctx, addr);
}

typedef struct policy_ctx {
  const ol_policy_ops_t *ops;
  ol_policy_t *policy;
} policy_ctx_t;

static int policy_alloc_fn(void *ctx, uint64_t size, uint64_t *addr)
{
  policy_ctx_t *c = ctx;
  return c->ops->alloc(c->policy, size, 0, addr);
}

static void policy_free_fn(void *ctx, uint64_t addr)
{
  policy_ctx_t *c = ctx;
  c->ops->free(c->policy, addr);
}

static int malloc_alloc_fn(void *ctx, uint64_t size, uint64_t *addr)
{
  void *p = malloc(size);
  *addr = (uint64_t)(uintptr_t)p;
  return p ? 0 : -1;
}

static void malloc_free_fn(void *ctx, uint64_t addr)
{
  free((void *)(uintptr_t)addr);
}

/* Live blocks left in place while pairs run, so that the free structure
 * is not trivially one block: 2000 blocks of mixed sizes, every other one
 * freed again. */
static void fragment(const pair_target_t *t)
{
  enum { N = 2000 };
  static uint64_t held[N];
  for (int i = 0; i < N; i++)
    t->alloc(t->ctx, mixed_size(), &held[i]);
  for (int i = 0; i < N; i += 2)
    t->free(t->ctx, held[i]);
}

static void bench_pairs(void)
{
  static uint64_t sizes[SIZES];
  for (int i = 0; i < SIZES; i++)
    sizes[i] = mixed_size();

  ol_simdev_t *dev = ol_simdev_create(H200_CAPACITY, GRAN);
  ol_backend_t be;
  ol_simdev_backend(dev, &be);
  ol_pool_config_t cfg = {.address_space = (H200_CAPACITY + GRAN - 1) & ~(GRAN - 1)};
  ol_pool_t *pool = ol_pool_create(&be, &cfg);
  pair_target_t targets[4] = {{"oomlens pool", pool, pool_alloc_fn, pool_free_fn}};
  int n = 1;
  static policy_ctx_t pctx[2];
  const char *models[] = {"pytorch", "pytorch-expandable"};
  for (int i = 0; i < 2; i++) {
    pctx[i].ops = ol_policy_find(models[i]);
    if (!pctx[i].ops)
      continue;
    ol_policy_options_t opt = {.capacity = H200_CAPACITY};
    pctx[i].policy = pctx[i].ops->create(&opt);
    targets[n++] = (pair_target_t){models[i], &pctx[i], policy_alloc_fn, policy_free_fn};
  }
  targets[n++] = (pair_target_t){"glibc malloc (host; mmap > 32M)", NULL, malloc_alloc_fn,
                                 malloc_free_fn};
  printf("\nallocate+free pair, median ns of %d batches of %d pairs, sizes 512 B-32 MiB\n",
         BATCHES, BATCH);
  printf("%-32s %12s %12s\n", "allocator", "immediate", "16 deep");
  ol_pool_counts_t before;
  for (int i = 0; i < n; i++) {
    fragment(&targets[i]);
    if (i == 0)
      ol_pool_counts(pool, &before);
    double a = pair_ns(&targets[i], sizes, 1);
    double b = pair_ns(&targets[i], sizes, WINDOW);
    printf("%-32s %12.1f %12.1f\n", targets[i].name, a, b);
  }
  ol_pool_counts_t c;
  ol_pool_counts(pool, &c);
  printf("(pool during the pairs: %llu free blocks, %llu live; %llu map calls: served "
         "from mapped memory)\n", (unsigned long long)c.free_blocks,
         (unsigned long long)c.live_blocks, (unsigned long long)(c.map_calls - before.map_calls));
  ol_pool_destroy(pool);
  ol_simdev_destroy(dev);
  for (int i = 0; i < 2; i++)
    if (pctx[i].policy)
      pctx[i].ops->destroy(pctx[i].policy);
}

/* ---- main ------------------------------------------------------------- */

static void bench_trace(const char *dir, const char *name)
{
  char path[1024];
  snprintf(path, sizeof path, "%s/%s.csv.gz", dir, name);
  trace_t t;
  if (trace_load(path, &t) != 0) {
    fprintf(stderr, "bench_pool: cannot read %s\n", path);
    return;
  }
  uint64_t *addrs = calloc(t.slots + 1, sizeof *addrs);
  const char *policies[] = {"oomlens", "pytorch", "pytorch-expandable"};
  for (int i = 0; i < 3; i++) {
    const ol_policy_ops_t *ops = ol_policy_find(policies[i]);
    if (!ops)
      continue;
    result_t r = replay(ops, &t, H200_CAPACITY, addrs);
    double eps = events_per_s(ops, &t, addrs);
    result_t six = replay(ops, &t, 6 * GiB, addrs);
    printf("%-16s %-19s %7zu %12.2f %14lld %14lld %7.4f %8s\n", name, policies[i], t.n,
           eps / 1e6, (long long)r.stats.allocated_peak, (long long)r.stats.reserved_peak,
           (double)r.stats.reserved_peak / (double)r.stats.allocated_peak,
           six.ooms ? "OOM" : "fits");
  }
  ol_pool_counts_t c;
  pool_traffic(&t, addrs, &c);
  double cost_ms = ((double)c.mapped_bytes / GRAN * 50e-3) + ((double)c.unmapped_bytes / GRAN * 48e-3);
  printf("%-16s oomlens traffic: %llu map calls (%llu MiB), %llu unmap calls (%llu MiB), "
         "%llu trim scans: ~%.0f ms of H200 time\n",
         "", (unsigned long long)c.map_calls, (unsigned long long)(c.mapped_bytes >> 20),
         (unsigned long long)c.unmap_calls, (unsigned long long)(c.unmapped_bytes >> 20),
         (unsigned long long)c.release_scans, cost_ms);
  free(addrs);
  free(t.ev);
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: bench_pool DATA_DIR [TRACE...]\n");
    return 2;
  }
  static const char *const all[] = {"gpt2", "gpt2_varlen", "resnet50",
                                    "frag", "oom_params", "oom_activations"};
  printf("replay at 139.8 GiB (%llu B); \"6 GiB\": whether the trace fits at 6 GiB\n",
         (unsigned long long)H200_CAPACITY);
  printf("%-16s %-19s %7s %12s %14s %14s %7s %8s\n", "trace", "policy", "events", "Mevents/s",
         "peak alloc", "peak reserved", "ratio", "6 GiB");
  if (argc > 2) {
    for (int i = 2; i < argc; i++)
      bench_trace(argv[1], argv[i]);
  } else {
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
      bench_trace(argv[1], all[i]);
  }
  bench_pairs();
  return 0;
}
