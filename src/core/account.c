/* account.c: the one accounting model (core.h, "account.c").
 *
 * Owns what an event stream means for memory: the live blocks by address,
 * and per device the PyTorch-shaped counters, the iterations (phases.c),
 * each call site's bytes now, at the peak and in total (sites.c), and the
 * timeline. The live tracker (lib/tracker.c) holds one account and updates
 * it under its lock; replay, export and `oomlens report` on a trace each
 * make one and feed it the trace's events (ol_account_apply). Before this,
 * the same accounting was written four times, and the copies drifted (the
 * tracker marked peak sites every 1/256 of growth, replay at every peak,
 * export lazily, the report reader per rise); now a job and its trace
 * give the same figures and the same diagnosis because they are counted
 * by the same code.
 *
 * An account is an instance: no globals, no lock (its owner locks), no
 * CUDA. A block's kind is the ol_origin_t of its own reserved memory, or
 * OL_ORIGIN_NONE when it was carved out of memory counted already (our
 * pool's chunks, the segments a trace showed). */
#include <stdlib.h>
#include <string.h>

#include "core.h"

void ol_account_init(ol_account_t *a, unsigned flags)
{
  memset(a, 0, sizeof *a);
  a->flags = flags;
  ol_records_init(&a->blocks);
}

void ol_account_free(ol_account_t *a)
{
  ol_records_free(&a->blocks);
  for (int d = 0; d < OL_MAX_DEVICES; d++) {
    ol_sites_free(a->devices[d].sites);
    free(a->devices[d].timeline);
  }
  ol_account_init(a, a->flags);
}

/* With one shared table, it is device 0's. */
static int sites_index(const ol_account_t *a, int d)
{
  return a->flags & OL_ACCOUNT_SITES_SHARED ? 0 : d;
}

ol_sites_t *ol_account_sites(const ol_account_t *a, int device)
{
  return a->devices[sites_index(a, ol_account_clamp(device))].sites;
}

int32_t ol_account_site(ol_account_t *a, int device, const char *key, size_t len, bool *is_new)
{
  if (is_new)
    *is_new = false;
  if (!(a->flags & (OL_ACCOUNT_SITES | OL_ACCOUNT_SITES_SHARED)))
    return -1;
  ol_sites_t **table = &a->devices[sites_index(a, ol_account_clamp(device))].sites;
  if (!*table && !(*table = ol_sites_new()))
    return -1; /* no host memory: the bytes count under no site */
  size_t before = ol_sites_count(*table);
  int32_t id = ol_sites_intern(*table, key, len);
  if (is_new)
    *is_new = id >= 0 && (size_t)id == before;
  return id;
}

ol_timeline_t *ol_account_timeline(ol_account_t *a, int device, uint64_t t_ns, double start_unix)
{
  ol_account_device_t *ad = &a->devices[ol_account_device(a, device)];
  if (!ad->timeline && (a->flags & OL_ACCOUNT_TIMELINE)) {
    ad->timeline = malloc(sizeof *ad->timeline);
    if (ad->timeline)
      ol_timeline_init(ad->timeline, t_ns, start_unix);
  }
  return ad->timeline;
}

/* ---- blocks ----------------------------------------------------------- */

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

/* A block's bytes change hands at its site; when that change ended an
 * iteration (a valley of the live bytes), the sites take note of what
 * outlives it. */
static void site_bytes(ol_sites_t *sites, int32_t site, int64_t delta, bool valley)
{
  ol_sites_add(sites, site, delta);
  if (valley)
    ol_sites_mark_valley(sites);
}

/* Growing and shrinking are written apart: only growth can make a peak.
 * A block with an origin is a segment of reserved memory of its own. */
static void added(ol_account_t *a, const ol_record_t *b)
{
  int d = ol_account_clamp(b->device);
  ol_device_stats_t *dev = &a->devices[d].stats;
  int pool = ol_stats_pool_of(b->size);
  int64_t bytes = (int64_t)b->size, peak = dev->allocated_bytes[OL_POOL_ALL].peak;
  uint64_t iterations = dev->phases.iterations;
  pool_grow(dev->allocated_bytes, pool, bytes);
  ol_phases_note(&dev->phases, dev->allocated_bytes[OL_POOL_ALL].current);
  pool_grow(dev->allocation, pool, 1);
  if (b->kind < OL_ORIGIN_COUNT) {
    ol_stat_grow(&dev->origin_bytes[b->kind], bytes);
    pool_grow(dev->reserved_bytes, pool, bytes);
    pool_grow(dev->segment, pool, 1);
  }
  bool shared = a->flags & OL_ACCOUNT_SITES_SHARED;
  a->allocated += bytes;
  bool new_peak = shared ? a->allocated > a->peak : dev->allocated_bytes[OL_POOL_ALL].current > peak;
  if (a->allocated > a->peak)
    a->peak = a->allocated;
  ol_sites_t *sites = a->devices[shared ? 0 : d].sites;
  if (!sites)
    return;
  site_bytes(sites, b->site, bytes, dev->phases.iterations != iterations);
  if (new_peak) /* O(1): who holds the bytes now is who holds the peak */
    ol_sites_mark_peak(sites);
}

static void removed(ol_account_t *a, const ol_record_t *b)
{
  int d = ol_account_clamp(b->device);
  ol_device_stats_t *dev = &a->devices[d].stats;
  int pool = ol_stats_pool_of(b->size);
  int64_t bytes = (int64_t)b->size;
  uint64_t iterations = dev->phases.iterations;
  pool_shrink(dev->allocated_bytes, pool, bytes);
  ol_phases_note(&dev->phases, dev->allocated_bytes[OL_POOL_ALL].current);
  pool_shrink(dev->allocation, pool, 1);
  if (b->kind < OL_ORIGIN_COUNT) {
    ol_stat_shrink(&dev->origin_bytes[b->kind], bytes);
    pool_shrink(dev->reserved_bytes, pool, bytes);
    pool_shrink(dev->segment, pool, 1);
  }
  a->allocated -= bytes;
  ol_sites_t *sites = a->devices[sites_index(a, d)].sites;
  if (sites)
    site_bytes(sites, b->site, -bytes, dev->phases.iterations != iterations);
}

ol_record_t *ol_account_alloc(ol_account_t *a, const ol_record_t *block, ol_record_t *stale,
                              bool *replaced)
{
  ol_account_device(a, block->device);
  ol_record_t *rec = ol_records_put(&a->blocks, block->key, stale, replaced);
  if (!rec)
    return NULL;
  if (*replaced) /* its free went by a path we do not see: gone, not a phantom */
    removed(a, stale);
  *rec = *block;
  added(a, rec);
  return rec;
}

bool ol_account_release(ol_account_t *a, uint64_t addr, int device, ol_record_t *gone)
{
  if (!ol_records_take(&a->blocks, addr, gone)) {
    a->devices[ol_account_device(a, device)].stats.unknown_frees++;
    return false;
  }
  removed(a, gone);
  return true;
}

void ol_account_probe(ol_account_t *a, int device, uint64_t size, int32_t site)
{
  ol_record_t b = {.size = size, .device = ol_account_device(a, device), .site = site,
                   .kind = OL_ORIGIN_NONE};
  added(a, &b);
  removed(a, &b);
}

/* ---- reserved memory, out-of-memory ------------------------------------ */

void ol_account_reserved(ol_account_t *a, int device, uint64_t size, int64_t delta,
                         ol_origin_t origin)
{
  ol_device_stats_t *dev = &a->devices[ol_account_device(a, device)].stats;
  int64_t held = dev->reserved_bytes[OL_POOL_ALL].current;
  if (delta < 0 && -delta > held) /* a trace begun after its segments were made */
    delta = held > 0 ? -held : 0;
  if (delta == 0)
    return;
  ol_stats_pool_update(dev->reserved_bytes, size, delta);
  ol_stats_pool_update(dev->segment, size, delta > 0 ? 1 : -1);
  if (origin < OL_ORIGIN_COUNT)
    ol_stat_update(&dev->origin_bytes[origin], delta);
}

void ol_account_oom(ol_account_t *a, int device, uint64_t request)
{
  ol_device_stats_t *dev = &a->devices[ol_account_device(a, device)].stats;
  dev->num_ooms++;
  dev->last_oom_request = (int64_t)request;
}

void ol_account_oom_figures(const ol_account_t *a, int device, ol_oom_record_t *r)
{
  const ol_device_stats_t *dev = &a->devices[ol_account_clamp(device)].stats;
  r->allocated = dev->allocated_bytes[OL_POOL_ALL].current;
  r->reserved = dev->reserved_bytes[OL_POOL_ALL].current;
  r->persistent = ol_phases_persistent(&dev->phases);
  r->growth = ol_phases_growth(&dev->phases);
  r->iterations = dev->phases.iterations;
  ol_oom_note_sites(r, ol_account_sites(a, device));
}

/* ---- a trace's events --------------------------------------------------- */

/* Tensor events drive allocated memory; segment events (PyTorch's cache
 * asking cudaMalloc, our trace's driver blocks and pool chunks) drive
 * reserved memory, as they did in the job. A trace does not say where a
 * segment came from, so it counts under no origin. */
bool ol_account_apply(ol_account_t *a, const ol_trace_event_t *ev, ol_account_step_t *step)
{
  ol_account_step_t unused;
  if (!step)
    step = &unused;
  *step = (ol_account_step_t){.site = -1};
  int d = ol_account_device(a, ev->device);
  uint64_t t = ev->time_us * 1000;
  ol_timeline_t *tl = ol_account_timeline(a, d, t, 0); /* from the first event on */
  ol_device_stats_t *dev = &a->devices[d].stats;
  switch (ev->action) {
  case OL_TRACE_ALLOC:
    if (ev->size > 0) {
      step->site = ol_account_site(a, d, ev->frames ? ev->frames : "", ev->frames_len, NULL);
      ol_record_t block = {.key = ev->addr, .size = ev->size, .stream = ev->stream,
                           .device = d, .site = step->site, .kind = OL_ORIGIN_NONE};
      bool replaced;
      if (!ol_account_alloc(a, &block, &step->gone, &replaced))
        return false;
    }
    break;
  case OL_TRACE_FREE_COMPLETED:
    step->known = ol_account_release(a, ev->addr, d, &step->gone);
    break;
  case OL_TRACE_SEGMENT_ALLOC:
  case OL_TRACE_SEGMENT_MAP:
    ol_account_reserved(a, d, ev->size, (int64_t)ev->size, OL_ORIGIN_NONE);
    break;
  case OL_TRACE_SEGMENT_FREE:
  case OL_TRACE_SEGMENT_UNMAP:
    ol_account_reserved(a, d, ev->size, -(int64_t)ev->size, OL_ORIGIN_NONE);
    break;
  case OL_TRACE_OOM:
    ol_account_oom(a, d, ev->size);
    if (tl)
      ol_timeline_oom(tl, t, (int64_t)ev->size);
    return true;
  default: /* free_requested: nothing changes until the free completes */
    return true;
  }
  if (tl)
    ol_timeline_note(tl, t, dev->allocated_bytes[OL_POOL_ALL].current,
                     dev->reserved_bytes[OL_POOL_ALL].current);
  return true;
}
