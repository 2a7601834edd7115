/* manage.c: manage mode, where oomlens's pool serves cudaMalloc/cuMemAlloc.
 *
 * Owns, per device: the pool (pool.c) on a backend of real VMM calls, and
 * the frees waiting until the device can no longer touch their memory.
 * cudaFree promises that: it synchronizes the device. Doing that on every
 * free is what makes PyTorch without its cache 2.5-3.7x slower, so freed
 * blocks wait in a batch instead; a closed batch carries a fence (an event
 * on the legacy default stream, which waits for every blocking stream, plus
 * one on each non-blocking stream) and its blocks return to the pool once
 * the fence has passed. Only when the pool cannot serve a request do we
 * wait for fences. During a graph capture nothing is recorded or waited
 * for, and new requests go to the real driver. Any failure of ours hands
 * the request to the real driver: never fail what it would have served. */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(obj) (handle_table_full = true)
static _Thread_local bool handle_table_full;
#include <uthash.h>
#include <utlist.h>

#include "lib.h"
#include "prim.h"
#include "pool.h"

#define BATCH_BYTES (64ull << 20) /* close a batch at this much freed memory */
#define BATCH_BLOCKS 256          /* ... or this many blocks */
#define FENCES 32                 /* batches in flight per device */
#define FENCE_STREAMS 64          /* non-blocking streams a fence covers */
#define MARK_SPIN_NS 20000        /* idle streams pass a mark well within it (2 us on the H200) */
#define MARK_RETRY 64             /* closes between waits once a mark was slow */
#define BARRIER_PROBE 16          /* every 16th close asks the streams instead of a barrier */
#define REUSE_PROBE 256           /* ... every 256th close before a request (close_for_reuse) */
#define BUSY_CLOSES 256           /* closes that ask after the streams were found working, */
#define BUSY_DOUBLINGS 8          /* doubled each time again, up to 256 << 8 */

enum { UNTRIED, ACTIVE, UNAVAILABLE };

typedef struct batch {
  uint64_t *blocks;
  size_t count, cap;
  uint64_t bytes;
  void *events[1 + FENCE_STREAMS];
  int event_count;
  bool marked; /* fenced by the streams' mark (ol_streams_mark), not events */
  uint32_t mark;
} batch_t;

/* Blocks freed with cudaFreeAsync on one stream: reusable at once by the
 * next allocation on that same stream (stream order protects them), by
 * others only once the stream has passed them. */
typedef struct stream_frees {
  bool used;
  void *stream;
  batch_t open;
} stream_frees_t;

#define STREAMS_KEPT 16

/* One physical allocation of the pool's: an extent of one or more chunks
 * (OOMLENS_POOL_UNIT), mapped and unmapped whole. */
typedef struct chunk_handle {
  uint64_t addr, size;
  uint64_t handle;
  uint64_t retired_by; /* 0: in the pool's use; else the retirement that will unmap it */
  /* moved: its memory now backs another chunk (move_retiring), so its
   * retirement unmaps the address alone; spare_prev/next: while retiring
   * and not moved, in the list of chunks whose memory may move */
  bool moved;
  struct chunk_handle *spare_prev, *spare_next;
  UT_hash_handle hh;
} chunk_handle_t;

/* Chunks the pool gave back, still mapped until the work queued before
 * then has passed (events instead of a device synchronize per trim). */
#define RETIREMENTS 64
typedef struct retirement {
  batch_t fence; /* events only */
  uint64_t seq, addr, size;
} retirement_t;

typedef struct managed {
  pthread_mutex_t lock;
  atomic_int state; /* read without the lock by frees looking for their owner */
  int device;
  ol_pool_t *pool;
  ol_backend_t backend;
  chunk_handle_t *handles;
  chunk_handle_t *spares; /* retiring chunks, oldest first: memory to move where wanted */
  batch_t open;
  batch_t fences[FENCES];
  int fence_head, fence_count;
  retirement_t retirements[RETIREMENTS];
  int retire_head, retire_count;
  uint64_t next_retirement;
  /* Device memory behind the pool's chunks, retiring ones included, and
   * the most the pool itself ever counted as mapped: retiring chunks may
   * delay an unmap, never raise the device memory held past that. */
  uint64_t physical, high_water;
  void *spare_events[2 * FENCES];
  int spare_count;
  /* Bytes mapped, handed out, and freed but waiting for a fence: what is
   * free right now is mapped - live - pending, known without asking the
   * pool (its own statistics walk every block). */
  uint64_t mapped, live, pending;
  stream_frees_t streams[STREAMS_KEPT];
  bool marks_slow; /* the last mark waited for did not pass within MARK_SPIN_NS */
  unsigned marks_skipped;
  /* Barriers (close_batch): the event each records, whether the driver
   * refused context events (then no barriers, and fences take an event
   * per stream), closes so far, closes left that ask the streams because
   * the last that asked found them working, and how often they were. */
  void *barrier_event;
  bool context_events_refused;
  unsigned closes, busy_closes, busy_found;
  unsigned reuse_closes; /* close_for_reuse's, every REUSE_PROBE-th of which asks the streams */
  /* One stream (one_stream below): the stream every stream-ordered
   * request to the pool has come on so far, while one_stream holds. */
  void *only_stream;
  bool stream_seen, streams_mixed;
  unsigned idle_waits; /* cudaMalloc's waits for the one stream (note_idle_wanted) */
} managed_t;

static managed_t devices[OL_MAX_DEVICES];
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static atomic_bool warned_unavailable, warned_failure;

static void init_locks(void)
{
  for (int d = 0; d < OL_MAX_DEVICES; d++) {
    pthread_mutex_init(&devices[d].lock, NULL);
    devices[d].device = d;
  }
}

bool ol_manage_on(void)
{
  return ol_option_bool(OL_OPT_MANAGE);
}

/* ---- the backend: 2 MiB chunks of real device memory ------------------ */

static int backend_reserve(void *ctx, uint64_t size, uint64_t *base)
{
  managed_t *m = ctx;
  return ol_prim_vmm_reserve(size, m->backend.granularity, base);
}

static void backend_unreserve(void *ctx, uint64_t base, uint64_t size)
{
  (void)ctx;
  ol_prim_vmm_unreserve(base, size);
}

static bool is_spare(const chunk_handle_t *c)
{
  return c->spare_prev != NULL; /* utlist: the head's prev is the tail, never NULL in the list */
}

static void unspare(managed_t *m, chunk_handle_t *c)
{
  if (is_spare(c))
    DL_DELETE2(m->spares, c, spare_prev, spare_next);
  c->spare_prev = c->spare_next = NULL;
}

static void release_chunk(managed_t *m, chunk_handle_t *c)
{
  unspare(m, c);
  if (c->moved) {
    ol_prim_vmm_unmap_only(c->addr, c->size); /* its memory went with the move */
  } else {
    ol_prim_vmm_unmap(c->addr, c->size, c->handle);
    ol_track_pool_mapped(m->device, c->addr, -(int64_t)c->size);
    m->physical -= c->size;
  }
  HASH_DELETE(hh, m->handles, c);
  free(c);
}

static chunk_handle_t *chunk_at(managed_t *m, uint64_t addr)
{
  chunk_handle_t *c;
  HASH_FIND(hh, m->handles, &addr, sizeof addr, c);
  return c;
}

static bool record_fence(managed_t *m, batch_t *b, const stream_frees_t *only);
static int fence_state(batch_t *b);
static void put_event(managed_t *m, void *event);

static void return_events(managed_t *m, batch_t *fence)
{
  for (int i = 0; i < fence->event_count; i++)
    put_event(m, fence->events[i]);
  fence->event_count = 0;
}

/* The next extent at or above at inside [at, end): the pool unmaps whole
 * extents, so each one starts at a chunk boundary of the range. */
static chunk_handle_t *extent_from(managed_t *m, uint64_t *at, uint64_t end)
{
  for (; *at < end; *at += m->backend.granularity) {
    chunk_handle_t *c = chunk_at(m, *at);
    if (c)
      return c;
  }
  return NULL;
}

/* During a capture nothing may wait for the device: the chunks stay
 * mapped, out of the pool's count, until the pool maps them again. */
#define PARKED UINT64_MAX

/* The chunks of a range leave the pool's count; `by` says what unmaps them
 * (a retirement, or nothing while parked). A retiring chunk's memory may
 * move to where the pool maps next (move_retiring). */
static void mark_retired(managed_t *m, uint64_t addr, uint64_t size, uint64_t by)
{
  chunk_handle_t *c;
  for (uint64_t at = addr; (c = extent_from(m, &at, addr + size)); at += c->size) {
    if (!c->retired_by) {
      c->retired_by = by;
      m->mapped -= c->size;
      if (by != PARKED)
        DL_APPEND2(m->spares, c, spare_prev, spare_next);
    }
  }
}

#define NO_WAIT UINT64_MAX
#define RETIRING_ALLOWANCE 128 /* a 128th of the peak may retire without a wait */

/* Unmaps the oldest retirement's chunks, once its fence has passed (state
 * 1), waiting for it first (0), or after a synchronize (-1). */
static void reap_oldest(managed_t *m, int state)
{
  retirement_t *r = &m->retirements[m->retire_head];
  if (state == 0)
    ol_track_fence_wait(m->device); /* the CPU waits for the device: counted */
  for (int i = 0; state == 0 && i < r->fence.event_count; i++)
    if (ol_prim_event_wait(r->fence.events[i]) != 0)
      state = -1; /* the events failed us: only a synchronize is safe */
  if (state < 0 && ol_prim_device_synchronize() == 0)
    ol_track_device_sync(m->device);
  chunk_handle_t *c;
  for (uint64_t at = r->addr; (c = extent_from(m, &at, r->addr + r->size));) {
    at += c->size;
    if (c->retired_by == r->seq)
      release_chunk(m, c);
  }
  return_events(m, &r->fence);
  m->retire_head = (m->retire_head + 1) % RETIREMENTS;
  m->retire_count--;
}

/* Unmaps the chunks of finished retirements, oldest first; while the device
 * memory behind the pool is above hold_at_most, waits for the next one too
 * (0: for all of them, memory is short; NO_WAIT: never). */
static void reap_retired(managed_t *m, uint64_t hold_at_most)
{
  while (m->retire_count > 0) {
    int state = fence_state(&m->retirements[m->retire_head].fence);
    if (state == 0 && m->physical <= hold_at_most)
      return;
    reap_oldest(m, state);
  }
}

/* Blocks of a single-stream job return to the pool at once, so free memory
 * may still be in use by queued work: the chunks stay mapped behind events
 * after that work, and are unmapped once it has passed (or mapped back
 * into use at no cost if the pool wants them first). False when no event
 * can be recorded (a capture, another device current, no room). */
static bool retire(managed_t *m, uint64_t addr, uint64_t size)
{
  reap_retired(m, NO_WAIT);
  if (ol_streams_capturing() || ol_prim_current_device_driver() != m->device)
    return false;
  /* all in use: wait for the oldest (queued first, done first) rather
   * than synchronize the device for this one */
  if (m->retire_count == RETIREMENTS)
    reap_oldest(m, fence_state(&m->retirements[m->retire_head].fence));
  retirement_t *r = &m->retirements[(m->retire_head + m->retire_count) % RETIREMENTS];
  r->fence.event_count = 0;
  if (!record_fence(m, &r->fence, NULL)) {
    return_events(m, &r->fence);
    return false;
  }
  r->seq = ++m->next_retirement;
  r->addr = addr;
  r->size = size;
  m->retire_count++;
  mark_retired(m, addr, size, r->seq);
  return true;
}

static void backend_unmap(void *ctx, uint64_t addr, uint64_t size)
{
  managed_t *m = ctx;
  if (retire(m, addr, size))
    return;
  if (ol_streams_capturing()) {
    mark_retired(m, addr, size, PARKED);
    return;
  }
  if (ol_prim_device_synchronize() == 0)
    ol_track_device_sync(m->device);
  chunk_handle_t *c;
  for (uint64_t at = addr; (c = extent_from(m, &at, addr + size));) {
    at += c->size;
    if (!c->retired_by)
      m->mapped -= c->size;
    release_chunk(m, c);
  }
}

/* Whether a retiring extent other than exactly [addr, addr+size) still
 * holds part of that range: the pool cut its extents differently there. */
static bool retiring_overlap(managed_t *m, uint64_t addr, uint64_t size)
{
  uint64_t gran = m->backend.granularity, reach = (uint64_t)ol_option_size(OL_OPT_POOL_UNIT);
  uint64_t from = addr > reach * gran ? addr - reach * gran : 0;
  for (uint64_t at = from; at < addr + size; at += gran) {
    chunk_handle_t *c = chunk_at(m, at);
    if (c && c->addr + c->size > addr && (c->addr != addr || c->size != size))
      return true;
  }
  return false;
}

/* The record of a mapping just made; NULL when host memory is short (the
 * caller undoes the mapping). */
static chunk_handle_t *add_chunk(managed_t *m, uint64_t addr, uint64_t size, uint64_t handle)
{
  chunk_handle_t *c = calloc(1, sizeof *c);
  if (!c)
    return NULL;
  *c = (chunk_handle_t){.addr = addr, .size = size, .handle = handle};
  handle_table_full = false;
  HASH_ADD(hh, m->handles, addr, sizeof c->addr, c);
  if (handle_table_full) {
    free(c);
    return NULL;
  }
  return c;
}

/* One handle per extent the pool maps, so that each can be unmapped on its
 * own. An extent still retiring is simply taken back. */
static int map_range(managed_t *m, uint64_t addr, uint64_t size)
{
  chunk_handle_t *c = chunk_at(m, addr);
  if (c && c->retired_by && !c->moved && c->size == size) {
    unspare(m, c);
    c->retired_by = 0;
    m->mapped += size;
    return 0;
  }
  if (retiring_overlap(m, addr, size) || (c && c->moved))
    reap_retired(m, 0); /* rare: wait for the old extents to go first */
  uint64_t handle;
  if (ol_prim_vmm_map(m->device, addr, size, &handle) != 0)
    return -1;
  if (!add_chunk(m, addr, size, handle)) {
    ol_prim_vmm_unmap(addr, size, handle);
    return -1;
  }
  m->mapped += size;
  m->physical += size;
  ol_track_pool_mapped(m->device, addr, (int64_t)size);
  return 0;
}

/* A trim's chunks stay mapped until the work queued before it has passed;
 * their memory need not wait: no live block is in it, and the pool hands
 * out its free memory only once every use of it is ordered before later
 * work (the frees' batches), so it may back the new address at once, as it
 * would its old one (the old address is unmapped when its fence passes).
 * One map and no create, no release, and no more device memory held: no
 * wait for a fence to stay within the peak. -1: no spare of that size, or
 * the new address still holds an old mapping (map_range waits for it). */
#define SPARES_LOOKED_AT 64

static int move_retiring(managed_t *m, uint64_t addr, uint64_t size)
{
  chunk_handle_t *spare = NULL, *c;
  int looked = 0; /* c: the walk's cursor */
  DL_FOREACH2(m->spares, c, spare_next) {
    if (c->size == size) {
      spare = c;
      break;
    }
    if (++looked == SPARES_LOOKED_AT)
      break; /* extents of many sizes (OOMLENS_POOL_UNIT): no long walk per map */
  }
  if (!spare || chunk_at(m, addr) || retiring_overlap(m, addr, size))
    return -1;
  if (ol_prim_vmm_map_handle(m->device, addr, size, spare->handle) != 0)
    return -1;
  if (!add_chunk(m, addr, size, spare->handle)) {
    ol_prim_vmm_unmap_only(addr, size);
    return -1;
  }
  unspare(m, spare);
  spare->moved = true;
  ol_track_pool_mapped(m->device, spare->addr, -(int64_t)size);
  ol_track_pool_mapped(m->device, addr, (int64_t)size);
  ol_track_handle_move(m->device);
  m->mapped += size;
  return 0;
}

/* Retired chunks still hold device memory: when it is short (the driver or
 * OOMLENS_CAPACITY says no), wait for them to go and try once more. */
static int backend_map(void *ctx, uint64_t addr, uint64_t size)
{
  managed_t *m = ctx;
  if (ol_option_bool(OL_OPT_POOL_MOVE) && move_retiring(m, addr, size) == 0) {
    if (m->mapped > m->high_water)
      m->high_water = m->mapped;
    return 0;
  }
  reap_retired(m, NO_WAIT);
  uint64_t peak = m->mapped + size > m->high_water ? m->mapped + size : m->high_water;
  /* Wait for the oldest work rather than hold more, but only as long as it
   * takes to come back under the peak. The chunks just given back retire
   * behind the work queued until now, so waiting for them drains the whole
   * queue: up to RETIRING_ALLOWANCE of the peak may stay retiring instead
   * (counted as the device memory it is) and go once the device has passed
   * them. peak - size >= mapped >= 0. */
  uint64_t allowed = peak + peak / RETIRING_ALLOWANCE;
  if (m->physical + size > allowed)
    reap_retired(m, allowed - size);
  if (m->mapped + size > m->high_water)
    m->high_water = m->mapped + size;
  if (ol_capacity_allows(m->device, size) && map_range(m, addr, size) == 0)
    return 0;
  if (m->retire_count == 0)
    return -1; /* OOMLENS_CAPACITY or the device: full */
  reap_retired(m, 0);
  return ol_capacity_allows(m->device, size) ? map_range(m, addr, size) : -1;
}

/* ---- starting a device ------------------------------------------------- */

static void give_up(managed_t *m, const char *why)
{
  m->state = UNAVAILABLE;
  ol_log_warn_once(&warned_unavailable, "manage mode off on device %d (%s); the CUDA driver "
                   "serves its allocations", m->device, why);
}

/* What the pool may come to hold: the device's free memory now (what the
 * context, libraries and other processes hold is not for it), within
 * OOMLENS_CAPACITY; 0 when the driver does not say. */
static uint64_t room_for_pool(int device)
{
  size_t free_bytes, total_bytes;
  if (ol_prim_mem_info(&free_bytes, &total_bytes) != 0)
    return 0;
  ol_capacity_clamp(device, &free_bytes, &total_bytes);
  return free_bytes;
}

static void start_device(managed_t *m)
{
  uint64_t granularity = ol_prim_vmm_granularity(m->device);
  uint64_t total = ol_prim_device_total_memory(m->device);
  if (!granularity || !total)
    return give_up(m, "no virtual memory management");
  m->backend = (ol_backend_t){m, granularity, backend_reserve, backend_unreserve, backend_map,
                              backend_unmap};
  /* Address space costs nothing: reserve twice the device, so that holes
   * left by long-lived blocks never make the pool run out of addresses
   * before the device runs out of memory. */
  uint64_t space = (total * 2 + granularity - 1) / granularity * granularity;
  ol_pool_config_t config = {.address_space = space,
                             .max_split_size = ol_option_size(OL_OPT_MAX_SPLIT_SIZE),
                             .keep_mapped = !ol_option_bool(OL_OPT_POOL_TRIM),
                             .map_unit = ol_option_size(OL_OPT_POOL_UNIT),
                             .keep_used = ol_option_bool(OL_OPT_POOL_KEEP_USED),
                             .capacity = room_for_pool(m->device)};
  m->pool = ol_pool_create(&m->backend, &config);
  if (!m->pool)
    return give_up(m, "cannot reserve address space");
  m->state = ACTIVE;
  ol_log_verbose("manage mode on device %d: %llu bytes of address space, %llu-byte chunks",
                 m->device, (unsigned long long)space, (unsigned long long)granularity);
}

/* ---- fences ------------------------------------------------------------ */
static bool single_stream(void);
static void note_stream(managed_t *m, void *stream, bool per_thread_api);
static void note_idle_wanted(managed_t *m);
static stream_frees_t *stream_slot(managed_t *m, void *stream, bool create);
static bool take_from_stream(managed_t *m, stream_frees_t *sf, uint64_t size, uint64_t *addr);

static void *take_event(managed_t *m)
{
  return m->spare_count ? m->spare_events[--m->spare_count] : ol_prim_event_create();
}

static void put_event(managed_t *m, void *event)
{
  if (m->spare_count < (int)(sizeof m->spare_events / sizeof *m->spare_events))
    m->spare_events[m->spare_count++] = event;
  else
    ol_prim_event_destroy(event);
}

/* Events after everything enqueued so far on every stream that could use
 * the memory. False when that cannot be done (then only a synchronize is
 * safe). */
static bool record_fence(managed_t *m, batch_t *b, const stream_frees_t *only)
{
  /* every stream: one context event (CUDA 12.5) where the driver has them */
  if (!only && !m->context_events_refused) {
    void *event = take_event(m);
    if (!event)
      return false; /* no event this time (host memory short): not an old driver */
    if (ol_prim_context_record(event) == 0) {
      b->events[0] = event;
      b->event_count = 1;
      return true;
    }
    put_event(m, event);
    m->context_events_refused = true; /* an older driver: an event on each stream */
  }
  void *streams[FENCE_STREAMS];
  int n = only ? 0 : ol_streams_nonblocking(streams, FENCE_STREAMS);
  if (n < 0)
    return false;
  b->event_count = 0;
  for (int i = -1; i < n; i++) {
    void *event = take_event(m);
    void *first = only ? only->stream : (void *)CU_STREAM_LEGACY;
    void *stream = i < 0 ? first : streams[i];
    if (!event)
      return false;
    b->events[b->event_count++] = event;
    if (ol_prim_event_record(event, stream) != 0)
      return false;
  }
  return true;
}

static void release_batch(managed_t *m, batch_t *b)
{
  for (size_t i = 0; i < b->count; i++) {
    ol_pool_free(m->pool, b->blocks[i]);
    ol_track_pool_held(m->device, b->blocks[i], false);
  }
  for (int i = 0; i < b->event_count; i++)
    put_event(m, b->events[i]);
  ol_track_pending(m->device, -(int64_t)b->bytes);
  m->pending -= b->bytes;
  b->count = 0;
  b->bytes = 0;
  b->event_count = 0;
  b->marked = false;
}

static int fence_state(batch_t *b)
{
  if (b->marked)
    return ol_streams_marked(b->mark);
  for (int i = 0; i < b->event_count; i++) {
    int done = ol_prim_event_done(b->events[i]);
    if (done != 1)
      return done;
  }
  return 1;
}

/* Returns the blocks of every fence that has passed to the pool. */
static void reclaim(managed_t *m)
{
  while (m->fence_count > 0) {
    batch_t *b = &m->fences[m->fence_head];
    int state = fence_state(b);
    if (state == 0)
      return;
    if (state < 0 && ol_prim_device_synchronize() != 0)
      return; /* keep the memory rather than risk it */
    release_batch(m, b);
    m->fence_head = (m->fence_head + 1) % FENCES;
    m->fence_count--;
  }
}

static bool wait_oldest(managed_t *m)
{
  if (m->fence_count == 0)
    return false;
  batch_t *b = &m->fences[m->fence_head];
  if (b->marked && ol_streams_marked(b->mark) != 1) {
    ol_track_mark_wait(m->device);
    if (!ol_streams_wait_marked(b->mark, UINT64_MAX)) {
      if (ol_prim_device_synchronize() != 0)
        return false;
      ol_track_device_sync(m->device);
      b->marked = false; /* all work is done: an empty fence has passed */
    }
    reclaim(m);
    return true;
  }
  for (int i = 0; i < b->event_count; i++)
    if (ol_prim_event_wait(b->events[i]) != 0 && ol_prim_device_synchronize() != 0)
      return false;
  ol_track_fence_wait(m->device);
  reclaim(m);
  return true;
}

/* The open batch's blocks go to the end of the fence queue; the open
 * batch takes the slot's emptied arrays. */
static batch_t *queue_fence(managed_t *m, batch_t *open)
{
  if (m->fence_count == FENCES)
    wait_oldest(m);
  batch_t *slot = &m->fences[(m->fence_head + m->fence_count) % FENCES];
  batch_t swap = *slot;
  *slot = *open;
  *open = swap;
  open->count = open->bytes = 0;
  open->event_count = 0;
  open->marked = false;
  m->fence_count++;
  return slot;
}

/* Moves a batch of freed blocks behind a fence: events after all work that
 * could still touch them (every stream; or, for stream-ordered frees, the
 * stream they were freed on). Only from a thread whose current device is
 * this one (events belong to its context), never during capture. */
static void fence_batch(managed_t *m, batch_t *open, const stream_frees_t *only)
{
  if (open->count == 0 || ol_streams_capturing() ||
      ol_prim_current_device_driver() != m->device)
    return;
  batch_t *slot = queue_fence(m, open);
  if (!record_fence(m, slot, only)) {
    if (ol_prim_device_synchronize() == 0) {
      ol_track_device_sync(m->device);
      for (int i = 0; i < slot->event_count; i++)
        put_event(m, slot->events[i]);
      slot->event_count = 0; /* an empty fence has passed */
    }
  }
  reclaim(m);
}

static bool barrier_possible(const managed_t *m)
{
  return !m->context_events_refused && ol_option_bool(OL_OPT_STREAM_BARRIER) &&
         !ol_streams_capturing() && ol_prim_current_device_driver() == m->device;
}

/* The barrier itself, asking no one, where barrier_possible held: false
 * where it cannot be had after all. */
static bool barrier_closes_now(managed_t *m)
{
  if (!m->barrier_event)
    m->barrier_event = ol_prim_event_create();
  if (!m->barrier_event)
    return false; /* no event this time (host memory short): ask, and try again next close */
  if (ol_prim_context_barrier(m->barrier_event) != 0) {
    m->context_events_refused = true; /* an older driver (before CUDA 12.5): ask */
    ol_log_verbose("manage mode: the driver has no context barrier; frees wait for the "
                   "other streams' answers");
    return false;
  }
  ol_track_stream_barrier(m->device);
  return true;
}

/* Closes a batch with a barrier: all later work of the context waits for
 * all work before it, on every stream, so the blocks go back at once, in
 * the order they were freed (what lets a loop find its last layout again),
 * for two driver calls that ask the device nothing, where a round of
 * queries asks each of the job's streams (cuDNN makes 15 or more under
 * PyTorch: 45 us a round while the device was busy, 11% of a Llama-style
 * step, docs/measurements.md). The barrier costs the device nothing while
 * the other streams are idle or take their work forked from the job's
 * stream (cuDNN's do); one that works on its own (a data stream, NCCL's)
 * would be held up behind it. So every BARRIER_PROBE-th close asks the
 * streams instead, and once they are found working (the batch has to be
 * fenced) the next BUSY_CLOSES closes ask too, twice as many each time
 * they are found working again: a job whose streams work on their own
 * (DDP's NCCL streams, busy in every backward) soon asks for good, one
 * whose library stream was caught working once loses little. False: ask. */
static bool barrier_closes(managed_t *m)
{
  if (!barrier_possible(m))
    return false;
  if (m->busy_closes > 0) {
    m->busy_closes--;
    return false;
  }
  if (++m->closes % BARRIER_PROBE == 0)
    return false;
  return barrier_closes_now(m);
}

/* One round of stream queries: the open batch goes back at once if every
 * stream is idle; else behind a fence, and the next closes ask too. */
static void ask_and_close(managed_t *m)
{
  ol_track_stream_query(m->device);
  if (ol_streams_quiet()) {
    release_batch(m, &m->open);
    return;
  }
  m->busy_closes = BUSY_CLOSES << (m->busy_found < BUSY_DOUBLINGS ? m->busy_found : BUSY_DOUBLINGS);
  m->busy_found++;
  fence_batch(m, &m->open, NULL);
}

/* A batch of frees made while other streams exist. Once every one of them
 * is past the work it was given before these frees, the default stream
 * orders the rest: the blocks go back. By default a barrier
 * (barrier_closes). Else one round of stream queries: if every stream is
 * idle now, at once; else events. With OOMLENS_STREAM_MARKS=1, the batch
 * waits for its mark instead, which idle streams pass within microseconds
 * (2.6-2.9 us median, query_probe.py), and the next request finds it
 * passed (reclaim). Not the default: writing a mark costs what a query
 * does (1.6 us), and on llama_varlen about one mark in eleven missed the
 * spin, so its batch came back late, the pool grew elsewhere and waited on
 * fences (docs/measurements.md, session 8). */
static void close_batch(managed_t *m)
{
  if (m->open.count == 0)
    return;
  uint32_t mark;
  if (ol_streams_mark(&mark)) {
    ol_track_stream_mark(m->device);
    batch_t *slot = queue_fence(m, &m->open);
    slot->marked = true;
    slot->mark = mark;
    /* Idle streams pass a mark in microseconds: waiting that long returns
     * the blocks now, in the order they were freed. After a mark that did
     * not pass in time (a stream busy), only every MARK_RETRY-th close
     * waits, until one passes again. */
    if (!m->marks_slow || ++m->marks_skipped % MARK_RETRY == 0)
      m->marks_slow = !ol_streams_wait_marked(mark, MARK_SPIN_NS);
    reclaim(m);
    return;
  }
  if (barrier_closes(m)) {
    release_batch(m, &m->open);
    return;
  }
  ask_and_close(m);
}

static void close_stream_batches(managed_t *m)
{
  for (int i = 0; i < STREAMS_KEPT; i++)
    if (m->streams[i].used)
      fence_batch(m, &m->streams[i].open, &m->streams[i]);
}

static bool append(batch_t *b, uint64_t addr, uint64_t size)
{
  if (b->count == b->cap) {
    uint64_t *blocks = ol_grow_array(b->blocks, &b->cap, sizeof *blocks, 64);
    if (!blocks)
      return false;
    b->blocks = blocks;
  }
  b->blocks[b->count++] = addr;
  b->bytes += size;
  return true;
}

/* ---- requests ---------------------------------------------------------- */

static managed_t *device_for_alloc(int device)
{
  if (device < 0 || device >= OL_MAX_DEVICES || !ol_prim_has_context())
    return NULL;
  pthread_once(&init_once, init_locks);
  return &devices[device];
}

/* The device runs behind the CPU, so memory freed a moment ago is still
 * waiting for its fence. Rather than grow the pool past it (reserving the
 * job's whole run-ahead twice), wait for the oldest fences while what waits
 * could serve the request and what is free cannot. The device keeps working
 * through the queue meanwhile; only the CPU's lead shrinks.
 * First, when the pool must map for this request (its free memory is less
 * than it) while frees wait in the open batch, the batch is closed: one
 * round of stream queries (microseconds, where a map costs ~50 us a chunk)
 * gives it back at once if the other streams are idle. Else the pool grew
 * past frees that only waited for the batch to fill, and a layout made so
 * was trimmed and mapped again every step (ResNet-50 beside cuDNN's idle
 * stream: 16.7 chunks mapped and 12.7 unmapped a step; with this, modelled
 * on its trace, none after its fifth step, for one more round of queries
 * in 17 steps; docs/measurements.md). */
static void wait_instead_of_growing(managed_t *m, uint64_t size)
{
  uint64_t need = (size + 511) / 512 * 512;
  if (m->mapped - m->live - m->pending < need && m->open.count > 0)
    close_batch(m);
  while (m->mapped - m->live - m->pending < need && m->pending >= need) {
    close_batch(m);
    close_stream_batches(m);
    if (!wait_oldest(m))
      return;
  }
}

/* With OOMLENS_POOL_REUSE_HELD=1 (off: on 14 steps of llama_varlen it
 * mapped no fewer chunks live, as replay of those steps says, session 24;
 * what it saves is in later steps, not measured live yet; each request
 * then costs a barrier, ~1 us, while frees wait) the open batch goes back
 * before every request, behind a barrier, so the pool sees the frees when
 * and as the job made them, as it does with one stream or PyTorch's cache
 * does: a loop finds the place it freed a moment ago rather than a place
 * elsewhere that its next step does not find again. Modelled on the
 * recorded traces (`oomlens replay --reuse-held`): held-out video_fits, a
 * 3D CNN beside cuDNN's idle streams whose frees waited for their batch
 * to fill 64 MiB, spans 1.09x its peak without trims where it spanned
 * 1.21x; the 30-step llama_varlen maps half as many chunks a steady step
 * (docs/measurements.md, session 22). The streams are still asked, at
 * every REUSE_PROBE-th such close (these come at most one a request, where
 * batches close at 64 MiB), and while they are found working there are no
 * such closes (each would put a batch of a block or two behind fences of
 * its own), nor with marks instead of barriers. */
static void close_for_reuse(managed_t *m)
{
  if (m->open.count == 0 || !ol_option_bool(OL_OPT_POOL_REUSE_HELD) || m->busy_closes > 0 ||
      ol_option_bool(OL_OPT_STREAM_MARKS) || !barrier_possible(m))
    return;
  if (++m->reuse_closes % REUSE_PROBE != 0 && barrier_closes_now(m)) {
    release_batch(m, &m->open);
    return;
  }
  ask_and_close(m);
}

static bool take(managed_t *m, uint64_t size, uint64_t *addr)
{
  if (ol_pool_alloc(m->pool, size, addr) != 0)
    return false;
  m->live += ol_pool_block_size(m->pool, *addr);
  return true;
}

static bool serve(managed_t *m, uint64_t size, uint64_t *addr)
{
  reclaim(m);
  close_for_reuse(m);
  wait_instead_of_growing(m, size);
  if (take(m, size, addr))
    return true;
  close_batch(m);
  close_stream_batches(m);
  while (m->fence_count > 0) {
    if (!wait_oldest(m))
      break;
    if (take(m, size, addr))
      return true;
  }
  return false;
}

/* Serves a request from the device's pool; with a stream (stream-ordered
 * requests), first from what was freed on that stream. */
static bool alloc_on(int device, uint64_t size, bool ordered, void *stream, bool per_thread_api,
                     uint64_t *addr)
{
  uint64_t clocked = ol_own_clock_ns(); /* the pool's own time (own_time.c) */
  managed_t *m = device_for_alloc(device);
  bool served = false;
  if (m && size > 0 && !ol_streams_capturing()) {
    pthread_mutex_lock(&m->lock);
    if (m->state == UNTRIED)
      start_device(m);
    if (m->state == ACTIVE) {
      if (ordered)
        note_stream(m, stream, per_thread_api);
      else
        note_idle_wanted(m);
      stream_frees_t *sf = ordered ? stream_slot(m, stream, false) : NULL;
      served = (sf && take_from_stream(m, sf, size, addr)) || serve(m, size, addr);
    }
    pthread_mutex_unlock(&m->lock);
  }
  if (!served && size > 0) /* the driver answers an empty request itself */
    ol_track_manage_fallback(device);
  ol_own_charge(OL_OWN_MANAGE, clocked);
  return served;
}

bool ol_manage_alloc(int device, uint64_t size, uint64_t *addr)
{
  return alloc_on(device, size, false, NULL, false, addr);
}

/* While all work is in the legacy default stream's order (no other stream
 * exists, see ol_streams_single), work that touches a block after its reuse
 * is queued behind the work before its free: the block can go back to the
 * pool at once, as PyTorch's caching allocator does. Otherwise it joins the
 * open batch, which close_batch releases at once when the other streams are
 * idle, or puts behind a fence. */
static bool single_stream(void)
{
  return ol_streams_single();
}

/* The device whose pool holds addr, locked, with the block's size; NULL
 * when no pool of ours does. */
static managed_t *owner_locked(uint64_t addr, uint64_t *size)
{
  if (addr == 0)
    return NULL;
  pthread_once(&init_once, init_locks);
  for (int d = 0; d < OL_MAX_DEVICES; d++) {
    managed_t *m = &devices[d];
    if (m->state != ACTIVE)
      continue;
    pthread_mutex_lock(&m->lock);
    *size = ol_pool_owns(m->pool, addr) ? ol_pool_block_size(m->pool, addr) : 0;
    if (*size)
      return m;
    pthread_mutex_unlock(&m->lock);
  }
  return NULL;
}

/* Adds a freed block to a batch; on a host allocation failure, waits for
 * the device instead so the block can go back at once. */
static void hold(managed_t *m, batch_t *b, uint64_t addr, uint64_t size)
{
  m->live -= size;
  if (!append(b, addr, size)) {
    ol_log_warn_once(&warned_failure, "out of host memory for pending frees; "
                     "synchronizing the device instead");
    if (ol_prim_device_synchronize() == 0)
      ol_pool_free(m->pool, addr);
    return;
  }
  m->pending += size;
  ol_track_pending(m->device, (int64_t)size);
  ol_track_pool_held(m->device, addr, true);
}

static bool batch_full(const batch_t *b)
{
  return b->bytes >= BATCH_BYTES || b->count >= BATCH_BLOCKS;
}

static bool free_to_pool(uint64_t addr)
{
  uint64_t size;
  managed_t *m = owner_locked(addr, &size);
  if (!m)
    return false;
  if (single_stream()) {
    m->live -= size;
    ol_pool_free(m->pool, addr);
  } else {
    hold(m, &m->open, addr, size);
    if (batch_full(&m->open))
      close_batch(m);
  }
  pthread_mutex_unlock(&m->lock);
  return true;
}

/* True when addr was ours: it now waits for its fence. False: not ours,
 * the real driver must free it. */
bool ol_manage_free(uint64_t addr)
{
  uint64_t clocked = ol_own_clock_ns(); /* the pool's own time (own_time.c) */
  bool ours = free_to_pool(addr);
  ol_own_charge(OL_OWN_MANAGE, clocked);
  return ours;
}

/* ---- stream-ordered requests (cudaMallocAsync, cudaFreeAsync) --------- */

/* One stream. While every stream-ordered request the pool has had came on
 * one stream (stream 0 outside the _ptsz entry points is the legacy
 * stream), a stream-ordered free goes back to the pool at once: whatever
 * reuses the block is that stream's later work, queued behind the work
 * before the free (a cudaMalloc meanwhile: note_idle_wanted). PyTorch's
 * cudaMallocAsync backend asks so on its current stream; per stream
 * (below) it ran 1.30x (a Llama-style job of varying lengths) and 1.44x
 * (GPT-2) the cudaFree path's step, remapping and waiting on fences about
 * every block (docs/measurements.md, 2026-12-03). The first request on another stream
 * (a recorded stream's free on PyTorch's unifying stream, a second
 * thread's per-thread stream, another stream's allocation) ends it for
 * good: the one stream is waited for once, so that the blocks it gave
 * back are idle before anything else can be handed them, and frees are
 * kept per stream from then on. */
static bool one_stream(const managed_t *m)
{
  return m->stream_seen && !m->streams_mixed && !ol_streams_capturing();
}

static void *stream_identity(void *stream, bool per_thread_api)
{
  if (stream == NULL && !per_thread_api)
    return (void *)CU_STREAM_LEGACY; /* stream 0 is the legacy stream */
  if (stream == NULL || stream == (void *)CU_STREAM_PER_THREAD)
    return NULL; /* a per-thread stream: whose, a request cannot say */
  return stream;
}

/* The one stream's work, all of it, done: an event on it waited for, else
 * the device synchronized (once a run at most). */
static void wait_for_one_stream(managed_t *m)
{
  void *event = ol_prim_current_device_driver() == m->device ? take_event(m) : NULL;
  if (event && ol_prim_event_record(event, m->only_stream) == 0 && ol_prim_event_wait(event) == 0) {
    put_event(m, event);
    return;
  }
  if (event)
    put_event(m, event);
  if (ol_prim_device_synchronize() == 0)
    ol_track_device_sync(m->device);
  else
    ol_log_warn_once(&warned_failure, "could not wait for a stream before its frees "
                     "were shared; blocks may be handed out early");
}

static void note_identity(managed_t *m, void *id)
{
  if (m->streams_mixed || ol_streams_capturing()) /* nothing waited for during a capture */
    return;
  if (!m->stream_seen && id) {
    m->only_stream = id;
    m->stream_seen = true;
    return;
  }
  if (m->stream_seen && id == m->only_stream)
    return;
  if (m->stream_seen)
    wait_for_one_stream(m);
  m->streams_mixed = true;
}

static void note_stream(managed_t *m, void *stream, bool per_thread_api)
{
  note_identity(m, stream_identity(stream, per_thread_api));
}

/* cudaMalloc and cuMemAlloc promise memory no work still touches: any
 * stream may use it at once (NCCL's buffers are so used). Only while the
 * one stream gives blocks back at once is there anything to wait for, so
 * every other cudaMalloc asks nothing more (this is on its path). While no
 * stream but the default ones exists, all work is in the legacy stream's
 * order: that is the one stream's, or ends it. Else the one stream is
 * waited for, so that what it gave back is idle; a library that asks so
 * every step would wait every step, so after IDLE_WAITS_MAX waits the one
 * stream ends. */
#define IDLE_WAITS_MAX 16

static void note_idle_wanted(managed_t *m)
{
  if (!one_stream(m))
    return; /* nothing was given back at once, or it is over */
  if (single_stream()) {
    note_identity(m, (void *)CU_STREAM_LEGACY);
    return;
  }
  wait_for_one_stream(m);
  if (++m->idle_waits >= IDLE_WAITS_MAX)
    m->streams_mixed = true;
}

static stream_frees_t *stream_slot(managed_t *m, void *stream, bool create)
{
  stream_frees_t *empty = NULL;
  for (int i = 0; i < STREAMS_KEPT; i++) {
    if (m->streams[i].used && m->streams[i].stream == stream)
      return &m->streams[i];
    if (!m->streams[i].used && !empty)
      empty = &m->streams[i];
  }
  if (!create || !empty)
    return NULL;
  empty->used = true;
  empty->stream = stream;
  return empty;
}

/* A block freed on this stream that fits the request without wasting more
 * than an eighth (plus a chunk): taken whole, as the pool cut it. */
static bool take_from_stream(managed_t *m, stream_frees_t *sf, uint64_t size, uint64_t *addr)
{
  uint64_t need = (size + 511) / 512 * 512, best_size = UINT64_MAX;
  size_t best = SIZE_MAX;
  for (size_t i = 0; i < sf->open.count; i++) {
    uint64_t have = ol_pool_block_size(m->pool, sf->open.blocks[i]);
    if (have >= need && have <= need + need / 8 + m->backend.granularity && have < best_size) {
      best = i;
      best_size = have;
    }
  }
  if (best == SIZE_MAX)
    return false;
  *addr = sf->open.blocks[best];
  sf->open.blocks[best] = sf->open.blocks[--sf->open.count];
  sf->open.bytes -= best_size;
  m->pending -= best_size;
  m->live += best_size;
  ol_track_pending(m->device, -(int64_t)best_size);
  return true;
}

bool ol_manage_alloc_async(int device, uint64_t size, void *stream, bool per_thread_api,
                           uint64_t *addr)
{
  return alloc_on(device, size, true, stream, per_thread_api, addr);
}

/* cudaFreeAsync: the memory is free once the work queued on the stream
 * before the call is done. The same stream may reuse it at once; the block
 * goes back to the pool behind an event on that stream. */
static bool free_to_stream(uint64_t addr, void *stream, bool per_thread_api)
{
  uint64_t size;
  managed_t *m = owner_locked(addr, &size);
  if (!m)
    return false;
  note_stream(m, stream, per_thread_api);
  if (one_stream(m)) { /* only this stream's later work can reuse it: in its order */
    m->live -= size;
    ol_pool_free(m->pool, addr);
    pthread_mutex_unlock(&m->lock);
    return true;
  }
  stream_frees_t *sf = ol_streams_capturing() ? NULL : stream_slot(m, stream, true);
  if (!sf) { /* no slot left: fence it like a cudaFree */
    hold(m, &m->open, addr, size);
    if (batch_full(&m->open))
      close_batch(m);
  } else {
    hold(m, &sf->open, addr, size);
    if (batch_full(&sf->open))
      fence_batch(m, &sf->open, sf);
  }
  pthread_mutex_unlock(&m->lock);
  return true;
}

bool ol_manage_free_async(uint64_t addr, void *stream, bool per_thread_api)
{
  uint64_t clocked = ol_own_clock_ns(); /* the pool's own time (own_time.c) */
  bool ours = free_to_stream(addr, stream, per_thread_api);
  ol_own_charge(OL_OWN_MANAGE, clocked);
  return ours;
}

/* Before a stream goes away, what was freed on it goes behind an event on
 * it, and its slot is given up. The batch of cudaFree'd blocks (and of
 * stream-ordered frees that found no slot) is fenced now too: its fence
 * would otherwise be recorded after the stream has left the list of
 * non-blocking streams, and miss the work still queued on it (found by
 * scripts/stress.sh: a check kernel on a destroyed stream read memory
 * already handed out again). */
/* PyTorch allocates a capture's memory with cudaMalloc itself where its
 * cache is off, and refuses to do that during a capture (the driver's
 * cudaMalloc would break it): torch.cuda.graph and torch.compile's
 * "reduce-overhead" mode fail under --manage, which turns the cache off
 * (held-out graph_leak on the H200: "operation failed due to a previous
 * error during capture", nothing of oomlens's said). Said before PyTorch's
 * error, with what to do: with its cudaMallocAsync backend the same job
 * captured its graphs under --manage and was diagnosed (a leak). */
void ol_manage_capture_began(void)
{
  static atomic_bool said;
  if (!ol_pytorch_cache_off() || ol_pytorch_async_backend())
    return;
  ol_log_warn_once(&said, "a CUDA graph capture began under --manage, where PyTorch's cache is "
                   "off (PYTORCH_NO_CUDA_MEMORY_CACHING=1): PyTorch cannot capture without it "
                   "and the capture will fail. For torch.cuda.graph, add "
                   "PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync (PyTorch then allocates "
                   "through the stream-ordered calls --manage serves, and captures work). "
                   "torch.compile's mode=\"reduce-overhead\" refuses that backend too (its CUDA "
                   "graph trees need PyTorch's own cache): run such a job without --manage, or "
                   "compile it without CUDA graphs (mode=\"default\")");
}

void ol_manage_stream_destroyed(void *stream)
{
  pthread_once(&init_once, init_locks);
  for (int d = 0; d < OL_MAX_DEVICES; d++) {
    managed_t *m = &devices[d];
    if (m->state != ACTIVE)
      continue;
    pthread_mutex_lock(&m->lock);
    /* the one stream going: what it gave back is idle once it has passed,
     * and a stream made later at the same address is another */
    if (one_stream(m) && m->only_stream == stream) {
      wait_for_one_stream(m);
      m->stream_seen = false;
    }
    close_batch(m);
    stream_frees_t *sf = stream_slot(m, stream, false);
    if (sf) {
      fence_batch(m, &sf->open, sf);
      /* Not fenced (another device is current, or a capture runs): the
       * blocks wait with the cudaFree ones, fenced on every stream. */
      for (size_t i = 0; i < sf->open.count; i++)
        if (!append(&m->open, sf->open.blocks[i], ol_pool_block_size(m->pool, sf->open.blocks[i])))
          break;
      sf->open.count = sf->open.bytes = 0;
      sf->used = false;
    }
    pthread_mutex_unlock(&m->lock);
  }
}

/* The driver refused a request that did not go through the pool (the
 * job's own cuMemCreate, a request the pool left to it): its free memory may
 * be what it lacks, so it all goes back to the device, with the frees
 * and the chunks still waiting behind fences (their work is waited for:
 * this is the failure path). True when anything was given back, so a
 * retry may succeed. Found with OOMLENS_MAX_SPLIT_SIZE and
 * OOMLENS_POOL_TRIM=0 together, where the pool grew to the whole device
 * and the job's own cuMemCreate failed. */
bool ol_manage_release_free(int device)
{
  /* during a capture nothing may wait for the device, and nothing it
   * unmapped would go back before the capture ends */
  if (device < 0 || device >= OL_MAX_DEVICES || !ol_manage_on() || ol_streams_capturing())
    return false;
  pthread_once(&init_once, init_locks);
  managed_t *m = &devices[device];
  if (m->state != ACTIVE)
    return false;
  pthread_mutex_lock(&m->lock);
  uint64_t before = m->physical;
  close_batch(m);
  close_stream_batches(m);
  /* frees waiting for the device: theirs too (a fence that cannot be
   * passed ends the loop rather than spin on it) */
  for (int n = m->fence_count; n > 0 && wait_oldest(m) && m->fence_count < n; n = m->fence_count)
    ;
  ol_pool_release(m->pool, UINT64_MAX);
  reap_retired(m, 0);
  bool gave = m->physical < before;
  pthread_mutex_unlock(&m->lock);
  return gave;
}

/* For the OOM diagnosis: the pool's free memory and its largest block.
 * False when the device has no pool of ours. */
bool ol_manage_free_blocks(int device, int64_t *free_reserved, int64_t *largest)
{
  if (device < 0 || device >= OL_MAX_DEVICES || !ol_manage_on())
    return false;
  pthread_once(&init_once, init_locks);
  managed_t *m = &devices[device];
  if (m->state != ACTIVE)
    return false;
  ol_policy_stats_t st;
  pthread_mutex_lock(&m->lock);
  ol_pool_stats(m->pool, &st);
  pthread_mutex_unlock(&m->lock);
  *free_reserved = st.free_reserved;
  *largest = st.largest_free_block;
  return true;
}
