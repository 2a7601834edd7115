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
 * CUDA. Its allocation and free are inline in core.h, since the tracker
 * makes them on every cudaMalloc and cudaFree; the rest is here. A block's
 * kind is the ol_origin_t of its own reserved memory, or OL_ORIGIN_NONE
 * when it was carved out of memory counted already (our pool's chunks, the
 * segments a trace showed).
 *
 * Every row of the report's table (ol_account_stats) reads the same from
 * a job's report and from `oomlens report` of its trace, but for what a
 * trace cannot carry (docs/trace-format.md lists the same; a test,
 * trace_report_table_equals_live, checks the rest):
 * - calls by API ("Calls seen": runtime or driver, the VMM calls, manage
 *   mode's fence waits, syncs and fallbacks, frees of memory never seen),
 *   and allocations refused for a reason other than out of memory (the
 *   live table counts them among failed allocations; an oom event is the
 *   only failure a trace records);
 * - where reserved memory came from (a segment event does not say);
 * - cuMemGetInfo's answers;
 * - VMM address space (cuMemAddressReserve has no event), and manage
 *   mode's frees awaiting a fence (a trace's free is requested and
 *   completed at one moment);
 * - VMM memory is reserved live at cuMemCreate, per handle, and in a trace
 *   at its mapping (cuMemCreate has no event): the same while each handle
 *   is mapped once at a time, as PyTorch's expandable segments and our
 *   pool do, but a handle mapped again counts again in the trace;
 * - the OOMs' wall clock and diagnosis (a trace's report makes none). */
#include <stdlib.h>
#include <string.h>

#include "core.h"

void ol_account_init(ol_account_t *a, unsigned flags)
{
  memset(a, 0, sizeof *a);
  a->flags = flags;
  ol_records_init(&a->blocks);
}

/* Everything counted goes; who is told of a leak stays. */
void ol_account_free(ol_account_t *a)
{
  ol_records_free(&a->blocks);
  for (int d = 0; d < OL_MAX_DEVICES; d++) {
    ol_sites_free(a->devices[d].sites);
    free(a->devices[d].timeline);
    ol_phase_finder_free(a->devices[d].finder);
    ol_first_step_log_free(a->devices[d].first_step);
    ol_recent_free(a->devices[d].recent);
  }
  ol_account_leak_fn on_leak = a->on_leak;
  void *arg = a->on_leak_arg;
  ol_account_init(a, a->flags);
  a->on_leak = on_leak;
  a->on_leak_arg = arg;
}

void ol_account_set_capacity(ol_account_t *a, int device, uint64_t bytes)
{
  a->devices[ol_account_clamp(device)].capacity = bytes; /* not yet a device seen */
}

ol_sites_t *ol_account_sites(const ol_account_t *a, int device)
{
  return a->devices[ol_account_sites_index(a, ol_account_clamp(device))].sites;
}

int32_t ol_account_site(ol_account_t *a, int device, const char *key, size_t len, bool *is_new)
{
  if (is_new)
    *is_new = false;
  if (!(a->flags & (OL_ACCOUNT_SITES | OL_ACCOUNT_SITES_SHARED)))
    return -1;
  ol_sites_t **table = &a->devices[ol_account_sites_index(a, ol_account_clamp(device))].sites;
  if (!*table && !(*table = ol_sites_new()))
    return -1; /* no host memory: the bytes count under no site */
  size_t before = ol_sites_count(*table);
  int32_t id = ol_sites_intern(*table, key, len);
  bool made = id >= 0 && (size_t)id == before;
  if (made && !(a->flags & OL_ACCOUNT_LIVE_KEYS)) /* a trace's key is its frames text */
    ol_sites_set_fold(*table, id, ol_role_fold_of_frames(key, len));
  if (is_new)
    *is_new = made;
  if (id >= 0 && len == 0)
    a->devices[ol_account_sites_index(a, ol_account_clamp(device))].frameless_site_plus1 = id + 1;
  if (made && !(a->flags & OL_ACCOUNT_LIVE_KEYS) && len == sizeof OL_SITE_UNSAMPLED_TEXT - 1 &&
      memcmp(key, OL_SITE_UNSAMPLED_TEXT, len) == 0)
    ol_account_mark_unsampled(a, device, id);
  return id;
}

void ol_account_mark_unsampled(ol_account_t *a, int device, int32_t site)
{
  if (site >= 0)
    a->devices[ol_account_sites_index(a, ol_account_clamp(device))].unsampled_site_plus1 = site + 1;
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

/* ---- blocks: the hot path is inline in core.h ---------------------------- */

void __attribute__((cold)) ol_account_forget(ol_account_t *a, const ol_record_t *stale)
{
  ol_account_removed(a, stale, ol_account_clamp(stale->device));
}

bool __attribute__((cold)) ol_account_unknown_free(ol_account_t *a, int device)
{
  a->devices[ol_account_device(a, device)].stats.unknown_frees++;
  return false;
}

/* ---- iterations ------------------------------------------------------------ */

/* The device's size for the leak's projection: as its owner set it, else
 * the driver's last answer seen (cuMemGetInfo's total). */
static uint64_t capacity_of(const ol_account_device_t *ad)
{
  return ad->capacity ? ad->capacity : (uint64_t)(ad->stats.mem_total > 0 ? ad->stats.mem_total : 0);
}

/* What the device offers the allocator: its size less what is held
 * outside it (the CUDA context, others), where known. The leak's
 * projection counted the whole size, and on a 6.6 GB cap with 0.53 GB
 * outside said "runs out at about iteration 81" of a job that ran out at
 * its 43rd. */
static uint64_t available_of(const ol_account_device_t *ad)
{
  uint64_t size = capacity_of(ad);
  if (ad->outside_known && ad->outside > 0 && (uint64_t)ad->outside < size)
    return size - (uint64_t)ad->outside;
  return size;
}

/* The leak's site: the one whose bytes at iterations' lowest points grew
 * most, of those that name a call site; else, for memory kept (not work
 * that grows, which keeps nothing), at their ends: a site's lowest point
 * is read an iteration late, so at a fast leak's second rise none has
 * grown there yet. */
static void name_grower(ol_leak_warning_t *w, const ol_sites_t *sites, int32_t unsampled)
{
  if (!sites)
    return;
  ol_site_order_t order = OL_SITES_BY_GROWTH;
  int32_t top = ol_sites_grew_most(sites, unsampled, order);
  if (top < 0 && w->allocations_growth == 0) {
    order = OL_SITES_BY_END_GROWTH;
    top = ol_sites_grew_most(sites, unsampled, order);
  }
  if (top >= 0) {
    w->site = top;
    w->site_growth = ol_sites_figure(sites, top, order);
  }
}

static void read_step_copies(ol_account_t *a, int d);
static uint8_t *sites_work(const ol_sites_t *sites, size_t count);

/* The work of the last iteration told, by its sites' roles (recent.c
 * ol_recent_last_work: OL_RECENT_FORWARD, OL_RECENT_BACKWARD); false
 * where not known. */
static bool last_iteration_work(const ol_account_t *a, int device, uint8_t *last)
{
  size_t count = ol_sites_count(ol_account_sites(a, device));
  uint8_t *work = sites_work(ol_account_sites(a, device), count);
  bool known =
    work && ol_recent_last_work(a->devices[ol_account_clamp(device)].recent, work, count, last);
  free(work);
  return known;
}

/* Whether the iterations told are a first backward's layers: shorter than
 * a training step (ol_phases_shorter_than_state), of a backward's work,
 * gradients made, and no update has made an optimizer's state yet. Each
 * layer of a checkpointed backward, its forward run again and given back,
 * keeps its parameters' gradients, and those layers read as iterations
 * whose kept memory grows (held-out gpt2_medium_ckpt at batch 16: 23
 * layers of 70 allocations, each rising 1.1 GiB and keeping 16 MiB, less
 * than the 64th of its rise that phases.c lets such a window keep: a leak
 * warned of at the 5th and standing to the end). A leak of a training
 * job's whole steps (plain SGD's too: no optimizer state) is told over
 * iterations as long as a step; an evaluation's forwards that keep their
 * graphs do no backward work, and an inference's makes no gradients. */
static bool first_backward_layers(const ol_account_t *a, int d)
{
  const ol_account_device_t *ad = &a->devices[d];
  uint8_t last = 0;
  if (!ol_phases_shorter_than_state(&ad->stats.phases, ad->finder) ||
      !last_iteration_work(a, d, &last) || !(last & OL_RECENT_BACKWARD))
    return false;
  bool known;
  int64_t bytes[OL_ROLE_COUNT];
  ol_account_role_bytes(a, d, OL_SITES_BY_CURRENT, &known, bytes);
  return known && bytes[OL_ROLE_gradients] > 0 && bytes[OL_ROLE_optimizer] == 0;
}

void __attribute__((cold)) ol_account_iteration_ended(ol_account_t *a, int d)
{
  ol_account_device_t *ad = &a->devices[d];
  ol_sites_t *sites = ol_account_sites(a, d);
  ad->iteration_ends++;
  if (ad->recent)
    ol_recent_iteration_ended_after(ad->recent, ad->stats.phases.iterations,
                                    ad->stats.phases.period);
  read_step_copies(a, d);
  ol_sites_mark_valley(sites, ad->stats.phases.iterations);
  uint64_t start = ad->timeline ? ad->timeline->start_ns : 0;
  ol_phases_t *p = &ad->stats.phases;
  ol_leak_warning_t before = p->leak;
  ol_leak_event_t event = ol_phases_watch_leak(p, available_of(ad), ad->last_ns, start);
  if (event == OL_LEAK_WARNED && first_backward_layers(a, d)) {
    p->leak = before; /* not warned: no step has finished */
    return;
  }
  if (event == OL_LEAK_QUIET)
    return;
  if (event == OL_LEAK_WARNED)
    name_grower(&p->leak, sites, ol_account_unsampled_site(a, d));
  if (a->on_leak)
    a->on_leak(a, d, a->on_leak_arg);
}

void __attribute__((cold)) ol_account_recent_start(ol_account_t *a, int d, ol_record_t *b)
{
  ol_account_device_t *ad = &a->devices[d];
  ad->recent = ol_recent_new();
  ad->recent_off = !ad->recent;
  if (ad->recent)
    b->logged_as = ol_recent_note(ad->recent, b->site, b->size, false);
}

/* The first iteration's allocations are logged (inline, core.h) until
 * the log is full (a first step longer than it keeps is not read: kept
 * past the first iterations found, since a repeat the finder takes for a
 * loop may be a model's load, ol_phases_loop_ended), or there is no
 * host memory for it: the hot path then never comes here again. */
void __attribute__((cold)) ol_account_first_step(ol_account_t *a, int d, uint64_t size,
                                                  ol_role_t role)
{
  ol_account_device_t *ad = &a->devices[d];
  const ol_device_stats_t *dev = &ad->stats;
  if (!ad->first_step && (ad->first_step = ol_first_step_log_new())) {
    ad->first_step->size[0] = size;
    ad->first_step->role[0] = (uint8_t)role;
    ad->first_step->after[0] = dev->allocated_bytes[OL_POOL_ALL].current;
    ad->first_step->count = 1;
    return;
  }
  ol_first_step_log_free(ad->first_step);
  ad->first_step = NULL;
  ad->first_step_done = true;
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

void ol_account_mapped(ol_account_t *a, int device, int64_t delta)
{
  ol_stat_t *mapped = &a->devices[ol_account_device(a, device)].stats.vmm_mapped_bytes;
  if (delta < 0 && -delta > mapped->current) /* a trace begun after its mappings were made */
    delta = -mapped->current;
  if (delta != 0)
    ol_stat_update(mapped, delta);
}

/* ---- a failed allocation's verdict ---------------------------------------
 * PyTorch's caching allocator, refused by cudaMalloc, frees its cached
 * segments and asks for the same size again (CUDACachingAllocator.cpp:
 * alloc_block, release_cached_blocks, alloc_block); only when that fails
 * too does the job get an OutOfMemoryError. So a failure is not an OOM the
 * job saw until what comes next says so: the same request served is the
 * retry (recovered), the same request refused again is the same OOM (its
 * last attempt's figures are the ones that count), anything else settles
 * it. One rule for the live tracker and every reader of a trace. */

/* The weights by role live on a device now; 0 where no role is known. */
static int64_t weights_now(const ol_account_t *a, int d)
{
  bool known = false;
  int64_t roles[OL_ROLE_COUNT];
  ol_account_role_bytes(a, d, OL_SITES_BY_CURRENT, &known, roles);
  return known ? roles[OL_ROLE_weights] : 0;
}

/* A job that goes on after an out-of-memory may drop all it had loaded
 * and load it again (a batch size search, as Hugging Face's
 * auto_find_batch_size does it: the model and optimizer made anew at half
 * the batch): watched from its failure, by what is left of the load (the
 * blocks made before the first free), told when it falls under an eighth
 * of what was left at the failure (not where its allocator's retry was
 * served). A job that keeps its model (one that skips the
 * batch that ran out) never comes near. */
#define RESTART_SHARE 8

/* Set at the failure, before the job can free anything: where nothing
 * settles it at once (a program whose allocator may retry), its verdict
 * comes at the next request, after the frees. */
static void watch_for_restart(ol_account_t *a, int d)
{
  ol_account_device_t *ad = &a->devices[d];
  ad->restart_below = ad->stats.phases.before_free_live / RESTART_SHARE;
  ad->restart_weights = weights_now(a, d);
}

/* An out-of-memory is a failed allocation too: the trace's oom events are
 * all a trace knows of failures, so the tracker counts only the others
 * (the driver refusing for another reason) itself. */
ol_oom_verdict_t ol_account_oom_at(ol_account_t *a, int device, uint64_t request, uint64_t t_ns,
                                   double wall_unix)
{
  int d = ol_account_device(a, device);
  ol_account_device_t *ad = &a->devices[d];
  ad->stats.failed_allocs++;
  ol_oom_verdict_t verdict = OL_VERDICT_NONE;
  if (ad->wait.request && ad->wait.request != request && ol_account_oom_settle(a, d))
    verdict = OL_VERDICT_OOM;
  watch_for_restart(a, d);
  int64_t failures = ad->wait.request == request ? ad->wait.failures : 0;
  ad->wait = (ol_oom_wait_t){.request = request ? request : 1 /* 0 means none */,
                             .failures = failures + 1, .t_ns = t_ns, .wall_unix = wall_unix};
  return verdict;
}

void ol_account_set_outside(ol_account_t *a, int device, int64_t bytes)
{
  ol_account_device_t *ad = &a->devices[ol_account_clamp(device)];
  ad->outside_known = bytes >= 0;
  ad->outside = bytes;
}

void ol_account_oom_site(ol_account_t *a, int device, int32_t site)
{
  a->devices[ol_account_clamp(device)].request_site_plus1 = site >= 0 ? site + 1 : 0;
  ol_sites_t *sites = ol_account_sites(a, device);
  if (sites)
    ol_sites_requested(sites, site);
}

/* What the failed request was for, from its call site's role, and whether
 * an optimizer's multi-tensor update made it; not known without a site,
 * or when its frames named none. */
static void request_role(const ol_account_t *a, int device, ol_oom_record_t *r)
{
  const ol_account_device_t *ad = &a->devices[ol_account_clamp(device)];
  const ol_sites_t *sites = ol_account_sites(a, device);
  int32_t site = ad->request_site_plus1 - 1;
  r->request_role_known = r->request_in_update = false;
  r->update_bytes = 0;
  r->request_state_buffers = 0;
  r->request_update_makes_state = false;
  if (!sites || site < 0 || (size_t)site >= ol_sites_count(sites))
    return;
  ol_role_fold_t fold = ol_sites_fold(sites, site);
  r->request_role = ol_sites_role(sites, site);
  r->request_role_known = r->request_role != OL_ROLE_unknown;
  r->request_in_update = fold.update;
  r->update_bytes = r->request_in_update ? ol_sites_figure(sites, site, OL_SITES_BY_CURRENT) : 0;
  r->request_state_buffers = fold.state_buffers;
  r->request_update_makes_state = fold.update && fold.update_makes_state;
}

/* ---- the gradients a first backward is making ------------------------ */

/* A live block of weights or of another role, by size. */
typedef struct sized_block {
  uint64_t size;
  bool weight;
  bool early; /* made at a site that allocated before the first forward began */
} sized_block_t;

typedef struct sized_blocks {
  const ol_sites_t *sites;
  int device;
  ol_role_t other; /* the role collected beside the weights */
  sized_block_t *all;
  size_t count, room;
} sized_blocks_t;

static void collect_sized(const ol_record_t *rec, void *arg)
{
  sized_blocks_t *c = arg;
  if (ol_account_clamp(rec->device) != c->device || rec->site < 0 || c->count == c->room)
    return;
  ol_role_t role = ol_sites_role(c->sites, rec->site);
  if (role == OL_ROLE_weights || role == c->other)
    c->all[c->count++] = (sized_block_t){rec->size, role == OL_ROLE_weights,
                                         ol_sites_early(c->sites, rec->site)};
}

static int by_size(const void *x, const void *y)
{
  const sized_block_t *a = x, *b = y;
  return a->size < b->size ? -1 : a->size > b->size;
}

/* The live weights and the blocks of role `other`, sorted by size; false
 * without host memory for them (then nothing is counted). */
static bool sized_of(const ol_account_t *a, int device, const ol_sites_t *sites, ol_role_t other,
                     sized_blocks_t *c)
{
  *c = (sized_blocks_t){sites, ol_account_clamp(device), other, NULL, 0,
                        ol_records_count(&a->blocks)};
  if (c->room == 0 || !(c->all = malloc(c->room * sizeof *c->all)))
    return false;
  ol_records_each(&a->blocks, collect_sized, c);
  qsort(c->all, c->count, sizeof *c->all, by_size);
  return true;
}

/* sites.c tells gradients from backward temporaries by what outlives a
 * backward pass, so in the first one (or wherever none is held yet) every
 * gradient is still "backward". A parameter's gradient has its shape and
 * dtype: the backward's blocks of a live weight block's size are taken as
 * gradients, at most as many of a size as there are weights of it (a
 * parameter has one gradient; an activation's gradient of a weight's size
 * by chance beyond that is not counted). The failed request, made by the
 * backward and of such a size with a gradient of it still to come, is one
 * more (held-out embed_grads on the H200: a 1.9 GiB embedding's dense
 * gradient asked for under a 4G cap, read as the batch's memory). */
static void gradients_being_made(const ol_account_t *a, int device, ol_oom_record_t *r)
{
  r->gradients_made = r->gradients_made_own_segments = 0;
  r->request_is_gradient = false;
  const ol_sites_t *sites = ol_account_sites(a, device);
  bool request_backward = r->request_role_known && r->request_role == OL_ROLE_backward;
  if (!sites || !r->roles_known || ol_sites_backward_kept(sites, OL_SITES_BY_CURRENT) ||
      (r->role_bytes[OL_ROLE_backward] <= 0 && !request_backward))
    return;
  sized_blocks_t c;
  if (!sized_of(a, device, sites, OL_ROLE_backward, &c))
    return; /* no host memory: none counted, as before this rule */
  for (size_t i = 0; i < c.count;) {
    size_t weights = 0, made = 0, j = i;
    for (; j < c.count && c.all[j].size == c.all[i].size; j++)
      c.all[j].weight ? weights++ : made++;
    uint64_t grads = made < weights ? made : weights, bytes;
    if (__builtin_mul_overflow(c.all[i].size, grads, &bytes) || bytes > (uint64_t)INT64_MAX)
      bytes = (uint64_t)INT64_MAX;
    r->gradients_made = ol_sat_add(r->gradients_made, (int64_t)bytes);
    if (c.all[i].size > OL_SHARED_SEGMENT_BYTES)
      r->gradients_made_own_segments = ol_sat_add(r->gradients_made_own_segments, (int64_t)bytes);
    if (request_backward && c.all[i].size == r->request && made < weights)
      r->request_is_gradient = true;
    i = j;
  }
  free(c.all);
}

/* ---- copies of the parameters the job's own lines keep ----------------- */

/* A weight's size, and how many more blocks of the job's own may still be
 * taken as copies of weights of that size. */
typedef struct weight_size {
  uint64_t size;
  size_t room;
} weight_size_t;

/* The first of sizes[0, n) (ascending) at least lo. */
static size_t first_at_least(const weight_size_t *sizes, size_t n, uint64_t lo)
{
  size_t l = 0, h = n;
  while (l < h) {
    size_t m = l + (h - l) / 2;
    if (sizes[m].size < lo)
      l = m + 1;
    else
      h = m;
  }
  return l;
}

/* The weight whose copy a block of `size` would be: one of that size, of
 * half of it or of twice it (another dtype), within tol bytes, with room
 * for one more copy where with_room; NULL when none. sizes: distinct,
 * ascending. */
static weight_size_t *copied_weight(weight_size_t *sizes, size_t n, uint64_t size, uint64_t tol,
                                   bool with_room)
{
  uint64_t lo = size > tol ? size - tol : 0, hi = size + tol;
  /* the weight's size w for each: the block is w, 2w (a 16-bit weight's
   * fp32 copy) or w/2 (the other way) */
  const uint64_t from[3][2] = {{lo, hi}, {(lo + 1) / 2, hi / 2}, {2 * lo, 2 * hi}};
  for (int k = 0; k < 3; k++)
    for (size_t i = first_at_least(sizes, n, from[k][0]); i < n && sizes[i].size <= from[k][1];
         i++)
      if (sizes[i].room || !with_room)
        return &sizes[i];
  return NULL;
}

/* The distinct sizes of the live weights, ascending (c's blocks are
 * sorted), each with room for two copies of every weight of it (a copy
 * and its gradient); NULL without host memory. */
static weight_size_t *weight_sizes(const sized_blocks_t *c, size_t *n)
{
  weight_size_t *sizes = malloc((c->count + 1) * sizeof *sizes);
  *n = 0;
  if (!sizes)
    return NULL;
  for (size_t i = 0; i < c->count; i++)
    if (c->all[i].weight) {
      if (*n && sizes[*n - 1].size == c->all[i].size)
        sizes[*n - 1].room += 2;
      else
        sizes[(*n)++] = (weight_size_t){c->all[i].size, 2};
    }
  return sizes;
}

/* Bytes of blocks of role other taken as copies of weights (own_copies),
 * blocks of at least min_size only, within tol of a copy's size, and
 * where early only those of early sites; counted in room, a copy of sizes
 * whose room each copy taken uses up. */
static int64_t copies_of(const sized_blocks_t *c, const weight_size_t *sizes, weight_size_t *room,
                         size_t n, uint64_t min_size, uint64_t tol, bool early)
{
  int64_t bytes = 0;
  memcpy(room, sizes, n * sizeof *room);
  for (size_t i = 0; i < c->count; i++) {
    if (c->all[i].weight || c->all[i].size < min_size || (early && !c->all[i].early))
      continue;
    weight_size_t *w = copied_weight(room, n, c->all[i].size, tol, true);
    if (!w)
      continue;
    w->room--;
    bytes = ol_sat_add(bytes, c->all[i].size > INT64_MAX ? INT64_MAX : (int64_t)c->all[i].size);
  }
  return bytes;
}

/* The job's own lines keep copies of the parameters: fp32 masters of
 * 16-bit weights and their fp32 gradients, an average of the weights.
 * Their sizes give them away, as a gradient's does (held-out
 * master_weights_state: 944 MiB of masters and their gradients, role
 * other, read as the iteration's memory); a tensor of a batch's size the
 * loop made and holds is not one. Under PyTorch's cache only segments
 * made for one tensor count, their sizes rounded to 2 MiB. The failed
 * request, of role other, may be one more, however many copies of its
 * weight are held already (held-out handmade_adam_state: an Adam written
 * in the loop ran out making a moment of the embedding's size, two and a
 * temporary held). */
static void parameter_copies(const ol_account_t *a, int device, ol_oom_record_t *r)
{
  r->own_copies = r->own_copies_own_segments = 0;
  r->own_copies_early = r->own_copies_early_own_segments = 0;
  r->request_is_copy = r->request_is_copy_own_segment = false;
  const ol_sites_t *sites = ol_account_sites(a, device);
  bool request_other = r->request_role_known && r->request_role == OL_ROLE_other;
  sized_blocks_t c;
  if (!sites || !r->roles_known || (r->role_bytes[OL_ROLE_other] <= 0 && !request_other) ||
      !sized_of(a, device, sites, OL_ROLE_other, &c))
    return;
  size_t n;
  weight_size_t *sizes = weight_sizes(&c, &n), *room = NULL;
  if (sizes && (room = malloc((n + 1) * sizeof *room))) {
    const uint64_t segment_tol = 2ull << 20, segment_min = OL_SHARED_SEGMENT_BYTES + 1;
    r->own_copies = copies_of(&c, sizes, room, n, 0, 0, false);
    r->own_copies_own_segments = copies_of(&c, sizes, room, n, segment_min, segment_tol, false);
    r->own_copies_early = copies_of(&c, sizes, room, n, 0, 0, true);
    r->own_copies_early_own_segments = copies_of(&c, sizes, room, n, segment_min, segment_tol,
                                                 true);
    /* a small request matches some bias or norm weight's size by chance
     * (a 3 KiB temporary beside GPT-2's 768-float biases): an update's
     * request that matters is a weight's of PyTorch's large pool */
    r->request_is_copy = request_other && r->request > OL_SMALL_SIZE &&
                         copied_weight(sizes, n, r->request, 0, false);
    r->request_is_copy_own_segment = request_other && r->request >= segment_min &&
                                      copied_weight(sizes, n, r->request, segment_tol, false);
  }
  free(room);
  free(sizes);
  free(c.all);
}

ol_oom_verdict_t ol_account_served(ol_account_t *a, int device, uint64_t size)
{
  ol_account_device_t *ad = &a->devices[ol_account_clamp(device)];
  if (!ad->wait.request)
    return OL_VERDICT_NONE;
  if (ad->wait.request != size)
    return ol_account_oom_settle(a, device) ? OL_VERDICT_OOM : OL_VERDICT_NONE;
  ad->stats.recovered_allocs += ad->wait.failures;
  ad->wait = (ol_oom_wait_t){0};
  ad->restart_below = 0; /* no OOM: the job had nothing to begin again from */
  return OL_VERDICT_RECOVERED;
}

bool ol_account_oom_settle(ol_account_t *a, int device)
{
  ol_account_device_t *ad = &a->devices[ol_account_clamp(device)];
  ol_oom_wait_t w = ad->wait;
  if (!w.request)
    return false;
  ad->wait = (ol_oom_wait_t){0};
  ad->stats.num_ooms++;
  ad->stats.last_oom_request = w.request;
  if (w.wall_unix > 0) {
    ad->stats.last_oom_unix = w.wall_unix;
    if (ad->stats.first_oom_unix == 0)
      ad->stats.first_oom_unix = w.wall_unix;
  }
  if (ad->timeline)
    ol_timeline_oom(ad->timeline, w.t_ns, w.request);
  return true;
}

/* By timing the load is gone; where roles are known, the weights must be
 * too: under PyTorch's cache the load is every segment made before the
 * first release of its cache (at the first OOM), and a job that keeps its
 * model and gives back the rest (torch.cuda.empty_cache() after skipping
 * a batch) would read as one that started again. */
void __attribute__((cold)) ol_account_load_dropped(ol_account_t *a, int d)
{
  ol_account_device_t *ad = &a->devices[d];
  ad->restart_below = 0;
  ad->restart_pending =
    ad->restart_weights <= 0 || weights_now(a, d) < ad->restart_weights / RESTART_SHARE;
}

/* The job dropped its load after an out-of-memory (ol_account_removed
 * saw it, RESTART_SHARE): it is told at its next allocation, its first
 * after it has freed what it meant to. Iterations, the first step's log,
 * the last events and what each site grew by are read again from there
 * (the load made anew is the state by timing again, its first step a
 * first step again); counters, peaks and the diagnoses already made stay.
 * The load's blocks still live keep their count (before_free_live): their
 * frees to come take it down as ever. */
void __attribute__((cold)) ol_account_restarted(ol_account_t *a, int d)
{
  ol_account_device_t *ad = &a->devices[d];
  ad->restart_pending = false;
  ad->stats.restarts++;
  int64_t left = ad->stats.phases.before_free_live;
  ol_phases_init(&ad->stats.phases);
  ad->stats.phases.before_free_live = left;
  ol_phase_finder_free(ad->finder);
  ad->finder = NULL;
  ol_first_step_log_free(ad->first_step);
  ad->first_step = NULL;
  ad->first_step_done = false;
  ol_recent_free(ad->recent);
  ad->recent = NULL;
  ad->recent_off = false;
  ad->stats.step_copies = 0; /* the model made anew: read again */
  ad->stats.step_base = ad->stats.step_update_high = ad->stats.step_work_high = 0;
  ad->copies_reads = 0;
  ol_sites_restart(ol_account_sites(a, d));
}

/* What we see of a block is all of it, so active and requested bytes and
 * active blocks always equal allocated bytes and blocks: they are counted
 * once (allocated) and copied here, for every reader alike. */
void ol_account_stats(const ol_account_t *a, int device, ol_device_stats_t *out)
{
  const ol_account_device_t *ad = &a->devices[ol_account_clamp(device)];
  *out = ad->stats;
  out->capacity = (int64_t)capacity_of(ad);
  /* held outside: at the last OOM if any (its record measured it), else
   * as the owner measured it */
  out->outside = out->num_ooms > 0 && out->last_oom.capacity > 0 ? out->last_oom.external
                 : ad->outside_known                             ? ad->outside
                                                                 : -1;
  memcpy(out->active_bytes, out->allocated_bytes, sizeof out->active_bytes);
  memcpy(out->requested_bytes, out->allocated_bytes, sizeof out->requested_bytes);
  memcpy(out->active, out->allocation, sizeof out->active);
}

/* ---- what a call site kept from earlier iterations ---------------------- */

/* A site's live blocks made before the last iteration ended, by age: the
 * iterations ended since each was made (1: in the last one), up to
 * OL_KEPT_AGES; and those made since (grower_since_last weighs them).
 * Blocks made before the first iteration ended are the first step's (the
 * autograd thread's cuBLAS workspaces, buffers, state made once), not
 * kept from step to step: beside a window's gradients, made in one
 * backward under accumulation, the workspaces would make two ages. */
typedef struct kept_by_age {
  int64_t bytes;
  uint64_t ages; /* bit k - 1: a block of age k */
  int64_t this_iteration; /* live blocks made in the iteration under way (age 0) */
} kept_by_age_t;

typedef struct kept_walk {
  int device;
  uint16_t now; /* iteration_ends, modulo 2^16 as made_in */
  kept_by_age_t *sites;
  size_t count;
} kept_walk_t;

static void collect_kept(const ol_record_t *rec, void *arg)
{
  kept_walk_t *w = arg;
  if (ol_account_clamp(rec->device) != w->device || rec->site < 0 ||
      (size_t)rec->site >= w->count || rec->made_in == 0)
    return;
  uint16_t age = (uint16_t)(w->now - rec->made_in);
  kept_by_age_t *k = &w->sites[rec->site];
  if (age == 0)
    k->this_iteration = ol_sat_add(k->this_iteration, (int64_t)rec->size);
  if (age == 0 || age > OL_KEPT_AGES)
    return;
  k->bytes = ol_sat_add(k->bytes, (int64_t)rec->size);
  k->ages |= UINT64_C(1) << (age - 1);
}

/* Whether what a site holds from earlier iterations reads as kept from
 * step to step: blocks of two ages at least, one of them made before the
 * last iteration but one. An iteration is found a few allocations after
 * it began, so its first blocks (held-out varlen_long's embedding of its
 * long sequence) count as made in the last: of one age, they are not
 * kept. A state made once (a copy of the weights, a buffer) is of one age
 * too. */
static bool kept_over_iterations(const kept_by_age_t *k)
{
  return __builtin_popcountll(k->ages) >= 2 && (k->ages & ~UINT64_C(1)) != 0;
}

/* Blocks of one age, made before the last iteration but one: a tensor
 * kept once mid-run (a loss kept every 4th step, out before the second) or
 * a state made once (a cache made at its first use). Which one is not
 * told by the blocks; oom.c weighs it against the iteration under way. */
static bool kept_once(const kept_by_age_t *k)
{
  return __builtin_popcountll(k->ages) == 1 && (k->ages & ~UINT64_C(1)) != 0;
}

/* A role whose blocks, kept, are read as kept by mistake: of no state
 * (a state made once mid-run is the state rules' to weigh), nor a
 * library's, nor unknown; nor the backward's, whose blocks that outlive
 * it are gradients (sites.c), kept on purpose from micro-step to
 * micro-step under gradient accumulation (accum_fits at 0.7 of its cap:
 * the autograd thread held 474 MiB more in its second micro-step's
 * forward than in its first's, and was taken for a leak). */
static bool may_be_kept(ol_role_t role)
{
  return role != OL_ROLE_unknown && role != OL_ROLE_library && role != OL_ROLE_backward &&
         !ol_role_is_state(role);
}

/* The "not sampled" site and the one of no frames hold many call sites'
 * blocks, and are no call site to name. */
static bool a_call_site(const ol_account_t *a, int d, int32_t site)
{
  return site != ol_account_unsampled_site(a, d) && ol_account_phase_site(a, d, site) >= 0;
}

/* Where weights grow, their gradients and optimizer state grow with them,
 * Adam's twice as much: the weights are what the paragraph must name
 * (held-out task_heads_leak, a new head each step). */
static bool follows_weights(const ol_sites_t *sites, int32_t id)
{
  ol_role_t role = ol_sites_role(sites, id);
  return role == OL_ROLE_gradients || role == OL_ROLE_optimizer;
}

/* The grower (ol_oom_note_sites: what a site held at the iterations'
 * lowest points rose) sees a block kept in an iteration only at the next
 * one's lowest point, known when that one ends: a leak that runs the job
 * out two or three steps after it begins shows one block there (held-out
 * ddp_fits given a 392 MiB loss kept each step, out at its third, and
 * accum_fits under gradient accumulation: `activations`). At the OOM a
 * site's growth is also read from its live blocks: what it holds that it
 * made in earlier iterations (kept_over_iterations), above what it held
 * at its first lowest point, where that held less than the site holds at
 * its last (it grew, so no buffer it always held). The site that grew
 * most either way is the grower, but for the state that follows weights
 * that grew (follows_weights). As for the grower by lowest points, the
 * site's role is the rules' to weigh; the "not sampled" site and the one
 * of no frames hold many call sites' blocks, and are no call site. */
static void grower_by_kept_blocks(const ol_account_t *a, int device, const kept_by_age_t *kept,
                                  size_t count, ol_oom_record_t *r)
{
  const ol_sites_t *sites = ol_account_sites(a, device);
  int d = ol_account_clamp(device);
  if (r->iterations < 2)
    return;
  bool weights_grew = r->grower.id >= 0 && r->grower.bytes > 0 &&
                      r->grower_role == OL_ROLE_weights;
  ol_oom_site_t once = {-1, INT64_MIN};
  for (size_t i = 0; i < count; i++) {
    const kept_by_age_t *k = &kept[i];
    ol_role_t role = ol_sites_role(sites, (int32_t)i);
    bool over = kept_over_iterations(k);
    bool one_age = kept_once(k) && may_be_kept(role); /* of one age, kept by mistake */
    if (!a_call_site(a, d, (int32_t)i) ||
        (!over && !one_age) || (over && weights_grew && follows_weights(sites, (int32_t)i)))
      continue;
    int64_t base = ol_sites_growth_base(sites, (int32_t)i);
    if (base == INT64_MAX)
      continue;
    ol_oom_site_t grew = {(int32_t)i, ol_sat_sub(k->bytes, base)};
    if (over && grew.bytes > r->grower.bytes) {
      r->grower = grew;
      r->grower_role = role;
    } else if (!over && grew.bytes > once.bytes) {
      once = grew;
    }
  }
  /* Where no site grew over two ages or more, the site that holds most of
   * one age made mid-run is the grower, marked once: oom.c takes it for a
   * leak only where the iteration under way asked no more than earlier
   * ones needed, or where the site makes and frees blocks every iteration
   * (growers_by_blocks: grower_per_step). */
  if ((r->grower.id < 0 || r->grower.bytes <= 0) && once.id >= 0 && once.bytes > r->grower.bytes) {
    r->grower = once;
    r->grower_role = ol_sites_role(sites, once.id);
    r->grower_reading = OL_GROWER_ONCE;
  }
}

/* The request is the step's work, a forward's or a backward's: an
 * optimizer's first update makes a block of each weight's size in the
 * order the backward made their gradients (held-out sgd_momentum_step: a
 * repeat of them, its momentum read as kept), a model loaded mid-run a
 * weight's (teacher_late), a job's own fp32 copies of its gradients the
 * sizes of its fp32 masters made before (master_weights_state at half its
 * cap: role other). */
static bool request_of_the_work(const ol_oom_record_t *r)
{
  return r->roles_known && r->request_role_known && !r->request_in_update &&
         (r->request_role == OL_ROLE_activations || r->request_role == OL_ROLE_backward);
}

/* Each site's work by its role (recent.c's OL_RECENT_*): a repeat found
 * at the failure is a step's where the period before it ran a backward
 * and the repeat is a forward's. NULL: no host memory. */
static uint8_t *sites_work(const ol_sites_t *sites, size_t count)
{
  uint8_t *work = calloc(count ? count : 1, sizeof *work);
  for (size_t i = 0; work && i < count; i++) {
    ol_role_t role = ol_sites_role(sites, (int32_t)i);
    work[i] = role == OL_ROLE_activations                             ? OL_RECENT_FORWARD
              : role == OL_ROLE_backward || role == OL_ROLE_gradients ? OL_RECENT_BACKWARD
              : role == OL_ROLE_optimizer ? OL_RECENT_UPDATE | OL_RECENT_STATE
              : role == OL_ROLE_weights   ? OL_RECENT_STATE
                                          : 0;
  }
  return work;
}

/* A block of the weights: of the weights' sites, or made before the
 * first free where its site's role is not known (the load). */
static bool a_weight(const ol_record_t *rec, const ol_sites_t *sites)
{
  ol_role_t role = ol_sites_role(sites, rec->site);
  return role == OL_ROLE_weights || (rec->before_free && role == OL_ROLE_unknown);
}

/* The weights' sizes of one device's live blocks (a_weight). */
typedef struct weight_sizes {
  int device;
  const ol_sites_t *sites;
  uint64_t *sizes;
  size_t count, room;
} weight_sizes_t;

static void collect_weight(const ol_record_t *rec, void *arg)
{
  weight_sizes_t *w = arg;
  if (ol_account_clamp(rec->device) == w->device && w->count < w->room &&
      a_weight(rec, w->sites))
    w->sizes[w->count++] = rec->size;
}

/* The tags of one device's live blocks (ol_record_t.logged_as): what a
 * step made and still holds, left out of the rest of the one before; and
 * the weights' sizes, whose autocast copies the step may hold. */
typedef struct live_tags {
  uint32_t *tags;
  size_t count;
  weight_sizes_t weights; /* its device and room are the walk's */
} live_tags_t;

/* What was allocated as the last step the log holds between two
 * optimizer's updates began, at its update's highest point and at its
 * forward's and backward's (recent.c ol_recent_iteration_highs), into
 * stats for the report's batch figure; highs set where read. */
static bool read_step_highs(ol_account_t *a, int d, ol_recent_highs_t *highs)
{
  ol_account_device_t *ad = &a->devices[d];
  size_t count = ol_sites_count(ol_account_sites(a, d));
  uint8_t *work = sites_work(ol_account_sites(a, d), count);
  bool read = work && ol_recent_iteration_highs(ad->recent, work, count, highs);
  free(work);
  if (!read)
    return false;
  /* the step's levels are above where it began: the log's end is now
   * (whether its update was its highest point, report_model.c asks) */
  int64_t began = ol_sat_sub(ad->stats.allocated_bytes[OL_POOL_ALL].current, highs->now);
  ad->stats.step_base = began;
  ad->stats.step_update_high = ol_sat_add(began, highs->update);
  ad->stats.step_work_high = ol_sat_add(began, highs->work);
  return true;
}

/* Autocast's copies of the weights held at the highest point of the
 * iteration that just ended, or of its forward and backward where its
 * update was higher (recent.c ol_recent_iteration_copies), into
 * stats.step_copies for the report's batch figure, with those highs:
 * read while the weights are live (a job that frees its model before it
 * exits leaves none at its report), at the first COPIES_READS iteration
 * ends until copies are found (the first told may be a first step's
 * layers, which cast one layer's weights each): a walk of the live blocks
 * and of one iteration's events, a few times a job. */
#define COPIES_READS 8

static void read_step_copies(ol_account_t *a, int d)
{
  ol_account_device_t *ad = &a->devices[d];
  if (ad->stats.step_copies > 0 || ad->copies_reads >= COPIES_READS || !ad->recent)
    return;
  ad->copies_reads++;
  ol_recent_highs_t highs;
  bool read = read_step_highs(a, d, &highs);
  weight_sizes_t w = {d, ol_account_sites(a, d), NULL, 0, ol_records_count(&a->blocks)};
  if (!w.room || !(w.sizes = malloc(w.room * sizeof *w.sizes)))
    return;
  ol_records_each(&a->blocks, collect_weight, &w);
  int64_t copies = ol_recent_iteration_copies(ad->recent, w.sizes, w.count, read ? &highs : NULL);
  ad->stats.step_copies = copies > 0 ? copies : 0;
  free(w.sizes);
}

static void collect_tag(const ol_record_t *rec, void *arg)
{
  live_tags_t *l = arg;
  if (ol_account_clamp(rec->device) != l->weights.device)
    return;
  if (rec->logged_as != 0 && l->count < l->weights.room)
    l->tags[l->count++] = rec->logged_as;
  collect_weight(rec, &l->weights);
}

/* The rest of the step before the one under way (reading's), less what
 * it made there that is live still, into r->step_rest: 0 where not known
 * (no host memory for the live blocks' tags, the log no longer holding
 * it). What of it and of what it made does not shrink with the batch,
 * into r->step_fixed: with roles, its gradients and what it held over
 * (ol_recent_rest_fixed); the weights' autocast copies, by their sizes
 * (ol_recent_rest_copies). */
static void rest_of_last_step(const ol_account_t *a, int device,
                              const ol_recent_reading_t *reading, ol_oom_record_t *r)
{
  int d = ol_account_clamp(device);
  const ol_sites_t *sites = ol_account_sites(a, device);
  size_t room = ol_records_count(&a->blocks);
  live_tags_t l = {NULL, 0, {d, sites, NULL, 0, room}};
  if (room && (!(l.tags = malloc(room * sizeof *l.tags)) ||
               !(l.weights.sizes = malloc(room * sizeof *l.weights.sizes)))) {
    free(l.tags);
    return;
  }
  ol_records_each(&a->blocks, collect_tag, &l);
  ol_recent_t *log = a->devices[d].recent;
  int64_t rest = ol_recent_rest_of_last(log, reading, l.tags, l.count);
  r->step_rest = rest > 0 ? rest : 0;
  size_t count = ol_sites_count(sites);
  uint8_t *work = r->roles_known ? sites_work(sites, count) : NULL;
  if (work)
    r->step_fixed = ol_recent_rest_fixed(log, reading, l.tags, l.count, work, count);
  free(work);
  r->step_fixed.copies =
    ol_recent_rest_copies(log, reading, l.tags, l.count, l.weights.sizes, l.weights.count);
  free(l.weights.sizes);
  free(l.tags);
}

/* Where fewer than two iterations were told, the step under way set
 * beside the one before it, found at the failure (recent.c): by its
 * sites' roles (ol_recent_step_repeat: a leak out at its second step), or,
 * without roles, by its sizes alone (ol_recent_step_by_sizes). */
static bool against_step_repeat(const ol_account_t *a, int device, ol_recent_sites_t no_call_site,
                                int64_t *more, int64_t *made, size_t count,
                                const ol_oom_record_t *r, ol_recent_reading_t *reading)
{
  ol_recent_t *log = a->devices[ol_account_clamp(device)].recent;
  uint64_t began[2];
  bool found;
  if (r->roles_known) {
    uint8_t *work = sites_work(ol_account_sites(a, device), count);
    found = work && ol_recent_step_repeat(log, r->request, work, count, began);
    free(work);
  } else {
    found = ol_recent_step_by_sizes(log, r->request, began);
  }
  return found &&
         ol_recent_against_step(log, began, r->request, no_call_site, more, made, count, reading);
}

/* A tensor kept in the very iteration that runs out is of that
 * iteration's age: no lowest point has passed since, and its blocks read
 * as the iteration's own (a loss kept at the 10th step of corpus_leaks.py
 * --once's ddp_fits ran that step's backward out: `activations`). Where
 * the iteration made the same sizes in the same order as the one before
 * up to the failure (recent.c), what it holds more than that one held
 * there was kept: the site that holds most of it, of a role that may be
 * kept by mistake, having made no more so far than in the one before (it
 * holds more because it freed less: a loader that made its next batch
 * earlier than the step before did, one size among many moved, holds
 * more by making more), is the grower where no site grew across
 * iterations, or one grew by less (accum_fits given a 392 MiB output kept
 * every 4th micro-step: the autograd thread's 2 MiB across iterations
 * was the grower, and the kept block, of the failed micro-step, no
 * site's). Where the sizes differed but the same sites made them in the
 * same order (a curriculum, a varying length), a site's blocks more than
 * it held there are what it holds more (recent.c, by calls). */
static void grower_since_last(const ol_account_t *a, int device, const kept_by_age_t *kept,
                              size_t count, ol_oom_record_t *r)
{
  int d = ol_account_clamp(device);
  const ol_sites_t *sites = ol_account_sites(a, device);
  int64_t *more = count ? calloc(2 * count, sizeof *more) : NULL;
  int64_t *made = more ? more + count : NULL;
  if (count && !more) /* no host memory: not read */
    return;
  ol_recent_reading_t reading;
  ol_recent_sites_t no_call_site = {ol_account_unsampled_site(a, d),
                                    ol_account_frameless_site(a, d)};
  bool known = ol_recent_against_last(a->devices[d].recent, r->request, no_call_site, more, made,
                                      count, &reading);
  if (!known && r->iterations < 2 && request_of_the_work(r))
    known = r->since_last_by_repeat =
      against_step_repeat(a, device, no_call_site, more, made, count, r, &reading);
  /* without roles no site is known to be kept: what the step holds more
   * says only that it is past the first (oom.c step_kept_beyond_state) */
  bool by_sizes = !known && r->iterations < 2 && !r->roles_known &&
                  against_step_repeat(a, device, no_call_site, more, made, count, r, &reading);
  if (by_sizes)
    r->step_repeat_held = reading.held_more > 0 ? reading.held_more : 0;
  /* a step that finished, found at the failure: the rest of it tells the
   * need of the one under way (oom.c second_step_figure) */
  if (r->since_last_by_repeat || by_sizes)
    rest_of_last_step(a, device, &reading, r);
  if (known) {
    r->held_since_last = reading.held_more > 0 ? reading.held_more : 0;
    r->since_last_by_calls = reading.by_calls;
    ol_oom_site_t best = {-1, 0};
    for (size_t i = 0; i < count; i++)
      if (more[i] > best.bytes && made[i] <= 0 && a_call_site(a, d, (int32_t)i) &&
          may_be_kept(ol_sites_role(sites, (int32_t)i)))
        best = (ol_oom_site_t){(int32_t)i, more[i]};
    bool no_grower = r->grower.id < 0 || r->grower.bytes <= 0;
    if (best.id >= 0 && !no_grower && best.id == r->grower.id) {
      /* the grower kept more in this iteration too: what it holds that
       * this iteration made counts beside what earlier ones made, and a
       * grower of one age is of two (gpt2_medium_fits given a 196 MiB
       * output kept every 4th step, out in the step that kept its second:
       * the first read as once, and the iteration as larger than before);
       * a block made after the same point of the iteration before is
       * counted once: it is of an earlier age too */
      int64_t now = kept ? kept[best.id].this_iteration : 0;
      r->grower.bytes = ol_sat_add(r->grower.bytes, best.bytes < now ? best.bytes : now);
      r->grower_reading = OL_GROWER_KEPT;
    } else if (best.id >= 0 && (no_grower || best.bytes > r->grower.bytes)) {
      r->grower = best;
      r->grower_role = ol_sites_role(sites, best.id);
      r->grower_reading = OL_GROWER_SINCE_LAST;
    }
  }
  free(more);
}

/* The growers that the live blocks and the last events tell, beside the
 * lowest points' (ol_oom_note_sites): one walk of the blocks for both. */
static void growers_by_blocks(const ol_account_t *a, int device, ol_oom_record_t *r)
{
  int d = ol_account_clamp(device);
  size_t count = ol_sites_count(ol_account_sites(a, device));
  r->held_since_last = -1;
  r->step_repeat_held = -1; /* a record not begun by ol_oom_record_init (replay's) too */
  r->step_rest = 0;
  r->step_fixed = (ol_recent_fixed_t){0, 0, 0};
  r->since_last_by_calls = false;
  kept_walk_t w = {d, (uint16_t)a->devices[d].iteration_ends,
                   count ? calloc(count, sizeof *w.sites) : NULL, count};
  if (w.sites) { /* else no host memory: the lowest points and the events alone */
    ol_records_each(&a->blocks, collect_kept, &w);
    grower_by_kept_blocks(a, device, w.sites, count, r);
  }
  grower_since_last(a, device, w.sites, count, r);
  free(w.sites);
  /* A block of one age, made two iterations ago or more, of a site that
   * made blocks in the last iteration and freed as many there: a step's
   * own tensor (a loss, logits) kept past its step, where a cache made
   * once is made once (its site makes none a step). The one-age reading
   * then needs no iteration as small as the earlier ones: a job whose
   * input varies may run out at a larger one, kept block and all (a loss
   * block kept at llama_varlen's 8th step, out at its 10th, the longest:
   * `activations`). */
  r->grower_per_step = r->grower_reading == OL_GROWER_ONCE &&
                       ol_recent_made_and_freed(a->devices[d].recent, r->grower.id);
}

/* Whether the last iteration told was one of a backward's layers, not a
 * step (recent.c ol_recent_last_work): a first backward's layers repeat,
 * and were told as iterations (accelerate_accum_fits at a third of its
 * cap: three, and its second micro-step's forward "larger than any
 * before"). Read where no update has made an optimizer's state: the step
 * under way is then the first. Where one has, a step finished, and the
 * layers' lowest points may yet tell what it kept (convnext_loss_leak at
 * 0.7 of its cap, its first step's graph retained: `leak` by them). */
static bool iterations_are_layers(const ol_account_t *a, int device)
{
  uint8_t last = 0;
  return last_iteration_work(a, device, &last) && (last & OL_RECENT_BACKWARD) &&
         !(last & OL_RECENT_FORWARD);
}

void ol_account_oom_figures(const ol_account_t *a, int device, ol_oom_record_t *r)
{
  const ol_device_stats_t *dev = &a->devices[ol_account_clamp(device)].stats;
  const ol_phase_finder_t *finder = a->devices[ol_account_clamp(device)].finder;
  r->allocated = dev->allocated_bytes[OL_POOL_ALL].current;
  r->reserved = dev->reserved_bytes[OL_POOL_ALL].current;
  r->persistent = ol_phases_persistent(&dev->phases);
  r->growth = ol_phases_growth(&dev->phases);
  r->iterations = dev->phases.iterations;
  /* a repeat that stopped long before the failure is not the loop the
   * job runs now (a load that cast its weights layer by layer): what the
   * iterations say does not speak for this one */
  if (ol_phases_loop_ended(&dev->phases, finder))
    r->iterations = 0;
  ol_account_role_bytes(a, device, OL_SITES_BY_CURRENT, &r->roles_known, r->role_bytes);
  if (r->iterations > 0 && r->roles_known && r->role_bytes[OL_ROLE_optimizer] == 0 &&
      iterations_are_layers(a, device))
    r->iterations = 0;
  r->before_first_free = ol_phases_before_first_free(&dev->phases);
  /* every block made before the first free was live at it: what is not
   * live of them now went since */
  r->before_first_free_gone =
    dev->phases.freed ? ol_sat_sub(dev->phases.before_first_free, dev->phases.before_free_live) : 0;
  r->iteration_need = ol_phases_iteration_need(&dev->phases);
  r->restarts = dev->restarts;
  int64_t made = dev->allocation[OL_POOL_ALL].allocated;
  r->allocations_made = made > 0 ? (uint64_t)made : 0;
  r->swings = ol_phases_swings(&dev->phases, finder, &r->swings_kept);
  ol_phases_work_growth(&dev->phases, &r->need_growth, &r->work_growth);
  ol_phases_input_growth(&dev->phases, &r->input_growth);
  if (r->iterations == 0)
    r->need_growth = r->work_growth = r->input_growth = 0;
  r->first_persistent = dev->phases.first_low_known ? dev->phases.first_low : -1;
  const ol_leak_warning_t *w = &dev->phases.leak;
  r->warned = ol_leak_standing(w) && w->allocations_growth == 0;
  r->warned_from = r->warned ? w->from : 0;
  r->warned_since = r->warned ? w->since : 0;
  r->warned_rate = r->warned ? w->growth : 0;
  request_role(a, device, r);
  gradients_being_made(a, device, r);
  parameter_copies(a, device, r);
  if (r->iterations == 0) /* a log left full reads as unknown */
    ol_first_step_read(a->devices[ol_account_clamp(device)].first_step, r->request,
                       &r->first_step);
  else
    r->first_step = (ol_first_step_t){.stage = OL_FIRST_STEP_UNKNOWN};
  ol_oom_note_sites(r, ol_account_sites(a, device), ol_account_unsampled_site(a, device));
  growers_by_blocks(a, device, r);
  if (!ol_recent_repeated_then_more(a->devices[ol_account_clamp(device)].recent, r->request,
                                    &r->past_repeat))
    r->past_repeat = (ol_recent_more_t){.held = -1};
}

/* With one table for all devices, the table's figures are theirs
 * together, as its peak is. */
void ol_account_role_bytes(const ol_account_t *a, int device, ol_site_order_t order, bool *known,
                           int64_t out[OL_ROLE_COUNT])
{
  const ol_stat_t *mine = &a->devices[ol_account_clamp(device)].stats.allocated_bytes[OL_POOL_ALL];
  bool shared = a->flags & OL_ACCOUNT_SITES_SHARED, now = order == OL_SITES_BY_CURRENT;
  int64_t total = shared ? (now ? a->allocated : a->peak) : now ? mine->current : mine->peak;
  *known = ol_sites_role_bytes(ol_account_sites(a, device), order, total, out);
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
  ol_account_timeline(a, d, t, 0); /* from the first event on */
  switch (ev->action) {
  case OL_TRACE_ALLOC:
    if (ol_account_waiting(a, d))
      ol_account_served(a, d, ev->size);
    if (ev->size > 0) {
      step->site = ol_account_site(a, d, ev->frames ? ev->frames : "", ev->frames_len, NULL);
      ol_record_t block = {.key = ev->addr, .size = ev->size, .stream = ev->stream,
                           .device = d, .site = step->site, .kind = OL_ORIGIN_NONE,
                           .signature_plus1 = ev->site_plus1};
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
    if (ev->action == OL_TRACE_SEGMENT_MAP) /* pages mapped: VMM memory */
      ol_account_mapped(a, d, (int64_t)ev->size);
    break;
  case OL_TRACE_SEGMENT_FREE:
  case OL_TRACE_SEGMENT_UNMAP:
    ol_account_reserved(a, d, ev->size, -(int64_t)ev->size, OL_ORIGIN_NONE);
    if (ev->action == OL_TRACE_SEGMENT_UNMAP)
      ol_account_mapped(a, d, -(int64_t)ev->size);
    break;
  case OL_TRACE_OOM:
    ol_account_oom_at(a, d, ev->size, t, 0); /* a trace's events have no wall clock */
    ol_account_oom_site(a, d, ev->frames_len ? ol_account_site(a, d, ev->frames, ev->frames_len, NULL) : -1);
    if (ev->oom_final)
      ol_account_oom_settle(a, d);
    return true;
  case OL_TRACE_OOM_CONTEXT: /* the job settled it: an OOM it saw */
    ol_account_oom_settle(a, d);
    return true;
  default: /* free_requested: nothing changes until the free completes */
    return true;
  }
  ol_account_note(a, d, t);
  return true;
}
