/* tracker.c: observe mode's record of device memory.
 *
 * Owns the tables of what is live (allocations, VMM physical handles, their
 * mappings, reserved address ranges) and the per-device counters derived from
 * them. One lock guards all of it: the calls we record cost tens of
 * microseconds in the driver, so an uncontended lock is noise, and it keeps
 * counts exact under many threads. Records live in open-addressed tables
 * (records.c), so the hot path does not malloc; if a table cannot grow for
 * want of host memory, tracking stops with one warning and the job goes on
 * untouched. With OOMLENS_TRACE, each change is also handed to the trace
 * file (tracefile.c) here, under the same lock, so the trace's order is the
 * tracker's. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib.h"

typedef ol_record_t record_t;

static ol_lock_t lock = OL_LOCK_INIT; /* lock.c: cheaper than a pthread mutex */
static ol_records_t allocations; /* by address */
static ol_records_t handles;     /* VMM physical memory, by handle */
static ol_records_t mappings;    /* VMM mappings, by address */
static ol_records_t ranges;      /* reserved address ranges, by address */
static int device_count;
static ol_device_stats_t devices[OL_MAX_DEVICES];
static ol_sites_t *sites[OL_MAX_DEVICES];     /* call sites, when stacks are on */
static int64_t sites_marked[OL_MAX_DEVICES];  /* allocated bytes at the last mark */
static ol_timeline_t *timelines[OL_MAX_DEVICES]; /* memory over time, made at first use */
static atomic_bool warned_timeline;
static bool failed;
static atomic_bool seen_activity;
static atomic_bool warned_failure;

static uint64_t now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The coarse clock (the precise one at the last tick, read without the
 * TSC: 8-13 ns against 44 on the build VM), plus a margin no later than the
 * precise clock can be: two of its ticks. */
static uint64_t coarse_margin_ns(void)
{
  static uint64_t margin_ns; /* under the tracker's lock */
  struct timespec ts;
  if (!margin_ns)
    margin_ns = clock_getres(CLOCK_MONOTONIC_COARSE, &ts) == 0
                  ? 2 * ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) + 1
                  : UINT64_MAX / 2; /* no coarse clock: never used */
  return margin_ns;
}

static uint64_t coarse_bound_ns(void)
{
  struct timespec ts;
  if (clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) != 0)
    return UINT64_MAX;
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec + coarse_margin_ns();
}

static double wall_now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void stop_tracking(const char *why)
{
  failed = true;
  ol_log_warn_once(&warned_failure, "%s; tracking stops, the job continues unobserved", why);
}

/* Device ordinals outside what we keep counters for are folded into the last
 * slot rather than dropped, so totals stay right. */
static int device_index(int device)
{
  if (device < 0)
    device = 0;
  if (device >= OL_MAX_DEVICES)
    device = OL_MAX_DEVICES - 1;
  if (device >= device_count)
    device_count = device + 1;
  return device;
}

static ol_device_stats_t *device_stats(int device)
{
  return &devices[device_index(device)];
}

/* The new record, valid until the table's next change; NULL (and tracking
 * stops) when the host has no memory for the table to grow. */
static record_t *add_record(ol_records_t *table, uint64_t key, uint64_t size, int device)
{
  record_t *rec = ol_records_add(table, key);
  if (!rec) {
    stop_tracking("out of host memory for bookkeeping");
    return NULL;
  }
  rec->size = size;
  rec->device = device;
  return rec;
}

static bool begin(void)
{
  ol_lock(&lock);
  if (failed) {
    ol_unlock(&lock);
    return false;
  }
  atomic_store_explicit(&seen_activity, true, memory_order_relaxed);
  return true;
}

static void end(void)
{
  ol_unlock(&lock);
}

static bool is_runtime(ol_kind_t kind)
{
  return kind == OL_KIND_RUNTIME || kind == OL_KIND_RUNTIME_ASYNC;
}

static inline void pool_grow(ol_stat_t stat[OL_POOL_COUNT], int pool, int64_t n)
{
  ol_stat_grow(&stat[OL_POOL_ALL], n);
  ol_stat_grow(&stat[pool], n);
}

static inline void pool_shrink(ol_stat_t stat[OL_POOL_COUNT], int pool, int64_t n)
{
  ol_stat_shrink(&stat[OL_POOL_ALL], n);
  ol_stat_shrink(&stat[pool], n);
}

static ol_origin_t origin_of(ol_kind_t kind)
{
  return is_runtime(kind) ? OL_ORIGIN_runtime : OL_ORIGIN_driver;
}

/* A block from the driver is its own segment of reserved memory; a block
 * from our pool is carved out of memory the pool already counts. Growing
 * and shrinking are written apart: only growth can make a peak. What we
 * see of a block is all of it, so active and requested bytes and active
 * blocks always equal allocated bytes and blocks: they are kept once and
 * copied into snapshots (mirror_equal_stats). */
static void count_block_added(ol_device_stats_t *dev, size_t size, ol_kind_t kind)
{
  int pool = ol_stats_pool_of(size);
  int64_t bytes = (int64_t)size;
  pool_grow(dev->allocated_bytes, pool, bytes);
  ol_phases_note(&dev->phases, dev->allocated_bytes[OL_POOL_ALL].current);
  pool_grow(dev->allocation, pool, 1);
  if (kind == OL_KIND_MANAGED)
    return;
  ol_stat_grow(&dev->origin_bytes[origin_of(kind)], bytes);
  pool_grow(dev->reserved_bytes, pool, bytes);
  pool_grow(dev->segment, pool, 1);
}

static void count_block_removed(ol_device_stats_t *dev, size_t size, ol_kind_t kind)
{
  int pool = ol_stats_pool_of(size);
  int64_t bytes = (int64_t)size;
  pool_shrink(dev->allocated_bytes, pool, bytes);
  ol_phases_note(&dev->phases, dev->allocated_bytes[OL_POOL_ALL].current);
  pool_shrink(dev->allocation, pool, 1);
  if (kind == OL_KIND_MANAGED)
    return;
  ol_stat_shrink(&dev->origin_bytes[origin_of(kind)], bytes);
  pool_shrink(dev->reserved_bytes, pool, bytes);
  pool_shrink(dev->segment, pool, 1);
}

static int clamp_device(int device)
{
  return device < 0 ? 0 : device >= OL_MAX_DEVICES ? OL_MAX_DEVICES - 1 : device;
}

/* The device's site for this key, interned (and labelled with its Python
 * frames, on this thread, while they are alive) the first time it is seen. */
static int32_t site_for(int device, const ol_site_key_t *key, int32_t known)
{
  int d = clamp_device(device);
  if (known >= 0 || !key)
    return sites[d] && (size_t)known < ol_sites_count(sites[d]) ? known : -1;
  if (!sites[d] && !(sites[d] = ol_sites_new()))
    return -1;
  size_t before = ol_sites_count(sites[d]);
  size_t len = key->count * sizeof *key->words;
  int32_t id = ol_sites_intern(sites[d], (const char *)key->words, len);
  if (id >= 0 && (size_t)id == before) {
    ol_buf_t label = {0};
    ol_stacks_label(key->words, len, &label);
    if (label.len && !label.failed)
      ol_sites_set_label(sites[d], id, label.data);
    /* new: the trace defines it once, now */
    ol_tracefile_site(d, id, key->words, len, label.len && !label.failed ? label.data : NULL);
    ol_buf_free(&label);
  }
  return id;
}

/* ---- the trace file's events ----------------------------------------- */

static bool from_driver(ol_kind_t kind)
{
  return kind != OL_KIND_MANAGED; /* a block of its own, not carved from our pool */
}

/* A block the driver handed out is a segment holding one allocation. */
static void trace_alloc(const record_t *rec)
{
  if (!ol_tracefile_on())
    return;
  if (from_driver((ol_kind_t)rec->kind))
    ol_tracefile_event(OL_TRACE_SEGMENT_ALLOC, rec->key, rec->size, rec->stream, rec->site,
                       rec->device);
  ol_tracefile_event(OL_TRACE_ALLOC, rec->key, rec->size, rec->stream, rec->site, rec->device);
}

/* cudaFree waits for the device, and what we see of an asynchronous free
 * is its request only: requested and completed are one moment here. */
static void trace_free(const record_t *rec)
{
  if (!ol_tracefile_on())
    return;
  ol_tracefile_event(OL_TRACE_FREE_REQUESTED, rec->key, rec->size, rec->stream, rec->site,
                     rec->device);
  ol_tracefile_event(OL_TRACE_FREE_COMPLETED, rec->key, rec->size, rec->stream, rec->site,
                     rec->device);
  if (from_driver((ol_kind_t)rec->kind))
    ol_tracefile_event(OL_TRACE_SEGMENT_FREE, rec->key, rec->size, rec->stream, rec->site,
                       rec->device);
}

/* A block's bytes change hands at its site; when that change ended an
 * iteration (a valley of the live bytes, phases.c), the sites take note.
 * d is a device index (clamped). */
static void site_bytes(int d, int32_t site, int64_t delta, uint64_t iterations_before)
{
  if (!sites[d])
    return;
  if (site >= 0)
    ol_sites_add(sites[d], site, delta);
  if (devices[d].phases.iterations != iterations_before)
    ol_sites_mark_valley(sites[d]);
}

/* Who holds the device's memory at its peak: marked again whenever the
 * peak has grown past the last mark by 1/256 of itself (at least 1 MiB),
 * so the walk over all sites stays rare; the figures are those of a moment
 * within that margin of the true peak. */
static void mark_site_peak(int d, const ol_device_stats_t *dev)
{
  if (!sites[d])
    return;
  int64_t now = dev->allocated_bytes[OL_POOL_ALL].current;
  int64_t margin = now / 256 > (1 << 20) ? now / 256 : (1 << 20);
  if (now < dev->allocated_bytes[OL_POOL_ALL].peak || now < sites_marked[d] + margin)
    return;
  ol_sites_mark_peak(sites[d]);
  sites_marked[d] = now;
}

/* The device's timeline, made on its first event (one malloc per device);
 * NULL, with one warning, if there is no memory for it: the rest goes on. */
static ol_timeline_t *__attribute__((noinline)) new_timeline(int d, uint64_t t)
{
  if (!timelines[d]) {
    timelines[d] = malloc(sizeof *timelines[d]);
    if (!timelines[d]) {
      ol_log_warn_once(&warned_timeline, "out of host memory for the memory timeline");
      return NULL;
    }
    ol_timeline_init(timelines[d], t, wall_now());
  }
  return timelines[d];
}

static ol_timeline_t *timeline_of(int d, uint64_t t)
{
  return timelines[d] ? timelines[d] : new_timeline(d, t);
}

static void note_time(int d, const ol_device_stats_t *dev, uint64_t t)
{
  ol_timeline_t *tl = timeline_of(d, t);
  if (tl)
    ol_timeline_note(tl, t, dev->allocated_bytes[OL_POOL_ALL].current,
                     dev->reserved_bytes[OL_POOL_ALL].current);
}

/* The same for an allocation or a free, now. A precise clock read is the
 * largest cost of an event on a VM (44 ns on the build VM); once buckets
 * are wider than the coarse clock's margin (after some seconds of a job),
 * the coarse clock alone usually shows the event falls in the last bucket,
 * and then (no new peak) the precise time changes nothing the timeline
 * keeps. Before that, the coarse clock is not read at all. */
static void note_now(int d, const ol_device_stats_t *dev)
{
  ol_timeline_t *tl = timelines[d];
  if (!tl || tl->width_ns <= coarse_margin_ns() ||
      !ol_timeline_note_before(tl, coarse_bound_ns(), dev->allocated_bytes[OL_POOL_ALL].current,
                               dev->reserved_bytes[OL_POOL_ALL].current))
    note_time(d, dev, now_ns());
}

/* The old block at an address allocated again: its free went by a path we
 * do not see; count it as gone rather than keep a phantom. */
static void forget_stale(const record_t *stale)
{
  int d = device_index(stale->device);
  uint64_t before = devices[d].phases.iterations;
  trace_free(stale);
  count_block_removed(&devices[d], stale->size, (ol_kind_t)stale->kind);
  site_bytes(d, stale->site, -(int64_t)stale->size, before);
}

void ol_track_alloc(uintptr_t addr, size_t size, int device, ol_kind_t kind, uintptr_t stream)
{
  ol_track_alloc_at(addr, size, device, kind, stream, NULL, -1);
}

int32_t ol_track_alloc_at(uintptr_t addr, size_t size, int device, ol_kind_t kind,
                          uintptr_t stream, const ol_site_key_t *key, int32_t site)
{
  if (!begin())
    return -1;
  int d = device_index(device);
  ol_device_stats_t *dev = &devices[d];
  if (kind == OL_KIND_MANAGED)
    dev->managed_allocs++;
  else if (is_runtime(kind))
    dev->runtime_allocs++;
  else
    dev->driver_allocs++;
  record_t stale;
  bool replaced;
  record_t *rec = ol_records_put(&allocations, addr, &stale, &replaced);
  if (!rec) {
    stop_tracking("out of host memory for bookkeeping");
    end();
    return -1;
  }
  if (replaced)
    forget_stale(&stale);
  rec->size = size;
  rec->device = device;
  rec->kind = (uint8_t)kind;
  rec->stream = stream;
  int32_t site_used = rec->site = site_for(device, key, site);
  trace_alloc(rec);
  uint64_t before = dev->phases.iterations;
  count_block_added(dev, size, kind);
  site_bytes(d, site_used, (int64_t)size, before);
  mark_site_peak(d, dev);
  note_now(d, dev);
  end();
  return site_used;
}

bool ol_track_free(uintptr_t addr, ol_kind_t kind)
{
  if (!begin())
    return false;
  record_t rec;
  bool known = ol_records_take(&allocations, addr, &rec);
  int d = device_index(known ? rec.device : 0);
  ol_device_stats_t *dev = &devices[d];
  if (is_runtime(kind))
    dev->runtime_frees++;
  else
    dev->driver_frees++;
  if (known) {
    uint64_t before = dev->phases.iterations;
    trace_free(&rec);
    count_block_removed(dev, rec.size, (ol_kind_t)rec.kind);
    site_bytes(d, rec.site, -(int64_t)rec.size, before);
    note_now(d, dev);
  } else {
    dev->unknown_frees++;
  }
  end();
  return known;
}

void ol_track_failed_alloc(size_t size, int device, ol_kind_t kind, bool out_of_memory)
{
  if (!begin())
    return;
  ol_device_stats_t *dev = device_stats(device);
  if (kind == OL_KIND_VMM)
    dev->vmm_creates++;
  else if (is_runtime(kind))
    dev->runtime_allocs++;
  else
    dev->driver_allocs++;
  dev->failed_allocs++;
  if (out_of_memory) {
    dev->num_ooms++;
    dev->last_oom_request = (int64_t)size;
    dev->last_oom_unix = wall_now();
    if (dev->first_oom_unix == 0)
      dev->first_oom_unix = dev->last_oom_unix;
    ol_timeline_t *tl = timeline_of(clamp_device(device), now_ns());
    if (tl)
      ol_timeline_oom(tl, now_ns(), (int64_t)size);
    ol_tracefile_event(OL_TRACE_OOM, 0, size, 0, -1, device);
  }
  end();
}

/* VMM physical memory is what PyTorch's expandable segments reserve: it is
 * reserved memory and a segment, never an allocation we can see into. */
void ol_track_vmm_create(uint64_t handle, size_t size, int device)
{
  if (!begin())
    return;
  ol_device_stats_t *dev = device_stats(device);
  dev->vmm_creates++;
  if (add_record(&handles, handle, size, device)) {
    ol_stats_pool_update(dev->reserved_bytes, size, (int64_t)size);
    ol_stats_pool_update(dev->segment, size, 1);
    ol_stat_update(&dev->origin_bytes[OL_ORIGIN_vmm], (int64_t)size);
    note_time(clamp_device(device), dev, now_ns());
  }
  end();
}

void ol_track_vmm_release(uint64_t handle)
{
  if (!begin())
    return;
  record_t rec;
  bool known = ol_records_take(&handles, handle, &rec);
  ol_device_stats_t *dev = device_stats(known ? rec.device : 0);
  dev->vmm_releases++;
  if (known) {
    ol_stats_pool_update(dev->reserved_bytes, rec.size, -(int64_t)rec.size);
    ol_stats_pool_update(dev->segment, rec.size, -1);
    ol_stat_update(&dev->origin_bytes[OL_ORIGIN_vmm], -(int64_t)rec.size);
    note_time(clamp_device(rec.device), dev, now_ns());
  }
  end();
}

void ol_track_vmm_map(uintptr_t addr, size_t size, uint64_t handle)
{
  if (!begin())
    return;
  const record_t *owner = ol_records_find(&handles, handle);
  int device = owner ? owner->device : 0;
  ol_device_stats_t *dev = device_stats(device);
  dev->vmm_maps++;
  if (add_record(&mappings, addr, size, device)) {
    ol_stat_update(&dev->vmm_mapped_bytes, (int64_t)size);
    ol_tracefile_event(OL_TRACE_SEGMENT_MAP, addr, size, 0, -1, device);
  }
  end();
}

static void unmapped(const record_t *rec, void *unused)
{
  (void)unused;
  ol_tracefile_event(OL_TRACE_SEGMENT_UNMAP, rec->key, rec->size, 0, -1, rec->device);
  ol_stat_update(&device_stats(rec->device)->vmm_mapped_bytes, -(int64_t)rec->size);
}

/* cuMemUnmap may cover several mappings at once; the usual case (one mapping
 * unmapped at its own address) is a single lookup. */
void ol_track_vmm_unmap(uintptr_t addr, size_t size)
{
  if (!begin())
    return;
  const record_t *found = ol_records_find(&mappings, addr);
  device_stats(found ? found->device : 0)->vmm_unmaps++;
  record_t rec;
  if (found && found->size == size && ol_records_take(&mappings, addr, &rec))
    unmapped(&rec, NULL);
  else
    ol_records_take_range(&mappings, addr, addr + size, unmapped, NULL);
  end();
}

void ol_track_va_reserve(uintptr_t addr, size_t size, int device)
{
  if (!begin())
    return;
  if (add_record(&ranges, addr, size, device))
    ol_stat_update(&device_stats(device)->va_reserved_bytes, (int64_t)size);
  end();
}

void ol_track_va_free(uintptr_t addr)
{
  if (!begin())
    return;
  record_t rec;
  if (ol_records_take(&ranges, addr, &rec))
    ol_stat_update(&device_stats(rec.device)->va_reserved_bytes, -(int64_t)rec.size);
  end();
}

void ol_track_mem_info(int device, size_t free_bytes, size_t total_bytes)
{
  if (!begin())
    return;
  ol_device_stats_t *dev = device_stats(device);
  dev->mem_free = (int64_t)free_bytes;
  dev->mem_total = (int64_t)total_bytes;
  end();
}

/* Manage mode: the pool mapped or unmapped chunks of device memory. Each
 * chunk counts as a segment of the large pool. */
void ol_track_pool_mapped(int device, uint64_t addr, int64_t delta)
{
  if (!begin())
    return;
  ol_tracefile_event(delta > 0 ? OL_TRACE_SEGMENT_MAP : OL_TRACE_SEGMENT_UNMAP, addr,
                     (uint64_t)(delta > 0 ? delta : -delta), 0, -1, device);
  ol_device_stats_t *dev = device_stats(device);
  size_t large = OL_SMALL_SIZE + 1; /* any size of the large pool */
  ol_stats_pool_update(dev->reserved_bytes, large, delta);
  ol_stats_pool_update(dev->segment, large, delta > 0 ? 1 : -1);
  ol_stat_update(&dev->origin_bytes[OL_ORIGIN_pool], delta);
  note_time(clamp_device(device), dev, now_ns());
  end();
}

void ol_track_oom_figures(int device, ol_oom_record_t *record)
{
  ol_lock(&lock);
  ol_device_stats_t *dev = device_stats(device);
  record->allocated = dev->allocated_bytes[OL_POOL_ALL].current;
  record->reserved = dev->reserved_bytes[OL_POOL_ALL].current;
  record->persistent = ol_phases_persistent(&dev->phases);
  record->growth = ol_phases_growth(&dev->phases);
  record->iterations = dev->phases.iterations;
  ol_oom_note_sites(record, sites[clamp_device(device)]);
  ol_unlock(&lock);
}

void ol_track_oom_diagnosis(int device, const ol_oom_record_t *record, ol_oom_class_t cause)
{
  ol_lock(&lock);
  ol_device_stats_t *dev = device_stats(device);
  dev->last_oom = *record;
  dev->last_oom_class = cause;
  if (cause < OL_OOM_CLASS_COUNT)
    dev->ooms_by_class[cause]++;
  ol_unlock(&lock);
}

bool ol_track_sites(int device, void (*visit)(const ol_sites_t *sites, void *arg), void *arg)
{
  ol_lock(&lock);
  int d = clamp_device(device);
  bool some = sites[d] != NULL;
  if (some)
    visit(sites[d], arg);
  ol_unlock(&lock);
  return some;
}

bool ol_track_timeline(int device, ol_timeline_t *out)
{
  ol_lock(&lock);
  int d = clamp_device(device);
  bool have = timelines[d] != NULL;
  if (have)
    *out = *timelines[d];
  ol_unlock(&lock);
  return have;
}

int64_t ol_track_reserved_now(int device)
{
  ol_lock(&lock);
  int64_t bytes = device >= 0 && device < device_count
                    ? devices[device].reserved_bytes[OL_POOL_ALL].current : 0;
  ol_unlock(&lock);
  return bytes;
}

void ol_track_pending(int device, int64_t delta)
{
  if (!begin())
    return;
  ol_stat_update(&device_stats(device)->pending_bytes, delta);
  end();
}

#define OL_COUNTER_FN(fn, field)      \
  void fn(int device)                  \
  {                                    \
    if (!begin())                      \
      return;                          \
    device_stats(device)->field++;     \
    end();                             \
  }
OL_COUNTER_FN(ol_track_fence_wait, fence_waits)
OL_COUNTER_FN(ol_track_device_sync, device_syncs)
OL_COUNTER_FN(ol_track_manage_fallback, manage_fallbacks)
#undef OL_COUNTER_FN

bool ol_track_seen_activity(void)
{
  return atomic_load_explicit(&seen_activity, memory_order_relaxed);
}

static void mirror_equal_stats(ol_device_stats_t *dev)
{
  memcpy(dev->active_bytes, dev->allocated_bytes, sizeof dev->active_bytes);
  memcpy(dev->requested_bytes, dev->allocated_bytes, sizeof dev->requested_bytes);
  memcpy(dev->active, dev->allocation, sizeof dev->active);
}

void ol_track_snapshot(ol_snapshot_t *out)
{
  ol_lock(&lock);
  out->device_count = device_count;
  memcpy(out->devices, devices, sizeof devices);
  for (int d = 0; d < OL_MAX_DEVICES; d++)
    mirror_equal_stats(&out->devices[d]);
  out->live_records = (int64_t)ol_records_count(&allocations);
  out->tracking_failed = failed;
  ol_unlock(&lock);
}

/* Forget everything: a forked child starts with no device memory of its own. */
void ol_track_reset(void)
{
  ol_lock(&lock);
  ol_records_free(&allocations);
  ol_records_free(&handles);
  ol_records_free(&mappings);
  ol_records_free(&ranges);
  memset(devices, 0, sizeof devices);
  for (int d = 0; d < OL_MAX_DEVICES; d++) {
    ol_sites_free(sites[d]);
    sites[d] = NULL;
    free(timelines[d]);
    timelines[d] = NULL;
    sites_marked[d] = 0;
  }
  ol_stacks_forget_sites();
  device_count = 0;
  failed = false;
  atomic_store(&seen_activity, false);
  ol_unlock(&lock);
}

void ol_track_lock(void)
{
  ol_lock(&lock);
}

void ol_track_unlock(void)
{
  ol_unlock(&lock);
}
