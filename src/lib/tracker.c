/* tracker.c: observe mode's record of device memory.
 *
 * The figures themselves (live blocks, counters, iterations, call sites,
 * timeline) are one ol_account_t (core/account.c), the same model replay,
 * export and `oomlens report` fold a trace with, so a job and its trace
 * give the same figures. What is the library's own stays here: the lock,
 * the tables of VMM physical handles, their mappings and reserved address
 * ranges (driver objects a trace never names), the clocks, the call
 * counters, and handing each change to the trace file (tracefile.c) under
 * the same lock, so the trace's order is the tracker's. One lock guards all
 * of it: the calls we record cost tens of microseconds in the driver, so an
 * uncontended lock is noise, and it keeps counts exact under many threads.
 * Records live in open-addressed tables (records.c), so the hot path does
 * not malloc; if a table cannot grow for want of host memory, tracking
 * stops with one warning and the job goes on untouched. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib.h"
#include "prim.h"

typedef ol_record_t record_t;

static ol_lock_t lock = OL_LOCK_INIT; /* lock.c: cheaper than a pthread mutex */
static void leak_found(ol_account_t *a, int device, void *arg);
/* Call sites are interned only when stacks are on (a key is given), so
 * their tables exist only then. */
static ol_account_t account = {.flags = OL_ACCOUNT_SITES | OL_ACCOUNT_TIMELINE |
                                        OL_ACCOUNT_LIVE_KEYS,
                               .on_leak = leak_found};
static ol_records_t handles;     /* VMM physical memory, by handle */
static ol_records_t mappings;    /* VMM mappings, by address */
static ol_records_t ranges;      /* reserved address ranges, by address */
static atomic_bool warned_timeline;
static bool failed;
static atomic_bool seen_activity;
static atomic_bool warned_failure;

/* A failed allocation's diagnosis (oom_live.c made it from the figures of
 * its last attempt), kept until the account settles the failure: then it
 * is the device's diagnosis, its paragraph and the trace's oom_context
 * line; a recovered one is dropped. A failure settled before its record
 * came (another thread's request came first) is settled bare, and its
 * record explained as soon as it comes. Under the lock. */
static struct {
  bool has;
  ol_oom_record_t record;
  ol_oom_class_t cause;
  uint64_t bare_request; /* settled without its record; 0: none */
} pending[OL_MAX_DEVICES];

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

/* The device's counters; devices past what we keep fold into the last
 * (ol_account_device). */
static ol_device_stats_t *device_stats(int device)
{
  return &account.devices[ol_account_device(&account, device)].stats;
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

/* A block from the driver is its own segment of reserved memory, from the
 * runtime or the driver; a block from our pool is carved out of memory the
 * pool already counts (ol_track_pool_mapped). The account keeps the origin
 * as the block's kind. */
static uint8_t origin_of(ol_kind_t kind)
{
  return kind == OL_KIND_MANAGED ? OL_ORIGIN_NONE
         : is_runtime(kind)      ? OL_ORIGIN_runtime
                                 : OL_ORIGIN_driver;
}

/* The device's site for this key, interned (and labelled with its Python
 * frames, on this thread, while they are alive, and given the role they
 * name) the first time it is seen. */
static int32_t site_for(int device, const ol_site_key_t *key, int32_t known)
{
  if (!key && known < 0)
    return -1; /* stacks off: the usual case */
  int d = ol_account_clamp(device);
  if (known >= 0 || !key) {
    const ol_sites_t *sites = account.devices[d].sites;
    return sites && (size_t)known < ol_sites_count(sites) ? known : -1;
  }
  size_t len = key->count * sizeof *key->words;
  bool is_new;
  int32_t id = ol_account_site(&account, d, (const char *)key->words, len, &is_new);
  if (is_new) {
    ol_buf_t label = {0};
    ol_stacks_label(key->words, len, &label);
    const char *text = label.len && !label.failed ? label.data : NULL;
    if (text)
      ol_sites_set_label(account.devices[d].sites, id, text);
    ol_sites_set_fold(account.devices[d].sites, id, ol_stacks_role(key->words, len, text));
    if (ol_stacks_key_unsampled(key->words, len))
      ol_account_mark_unsampled(&account, d, id);
    /* new: the trace defines it once, now */
    ol_tracefile_site(d, id, key->words, len, text);
    ol_buf_free(&label);
  }
  return id;
}

/* ---- the trace file's events ----------------------------------------- */

static bool from_driver(const record_t *rec)
{
  return rec->kind != OL_ORIGIN_NONE; /* a block of its own, not carved from our pool */
}

/* A block the driver handed out is a segment holding one allocation. */
static void trace_alloc(const record_t *rec)
{
  if (!ol_tracefile_on())
    return;
  if (from_driver(rec))
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
  if (from_driver(rec))
    ol_tracefile_event(OL_TRACE_SEGMENT_FREE, rec->key, rec->size, rec->stream, rec->site,
                       rec->device);
}

/* ---- the timeline's clock ---------------------------------------------- */

/* The device's timeline, made on its first event (one malloc per device);
 * NULL, with one warning, if there is no memory for it: the rest goes on. */
static ol_timeline_t *__attribute__((noinline)) new_timeline(int d, uint64_t t)
{
  ol_timeline_t *tl = ol_account_timeline(&account, d, t, wall_now());
  if (!tl)
    ol_log_warn_once(&warned_timeline, "out of host memory for the memory timeline");
  return tl;
}

static ol_timeline_t *timeline_of(int d, uint64_t t)
{
  ol_timeline_t *tl = account.devices[d].timeline;
  return tl ? tl : new_timeline(d, t);
}

/* What the timeline notes is the account's (ol_account_note, as for a
 * trace's events); the tracker only chooses the time. */
static void note_time(int d, uint64_t t)
{
  if (timeline_of(d, t))
    ol_account_note(&account, d, t);
}

/* The same for an allocation or a free, now. A precise clock read is the
 * largest cost of an event on a VM (44 ns on the build VM); once buckets
 * are wider than the coarse clock's margin (after some seconds of a job),
 * the coarse clock alone usually shows the event falls in the last bucket,
 * and then (no new peak) the precise time changes nothing the timeline
 * keeps. Before that, the coarse clock is not read at all. */
static void note_now(int d)
{
  const ol_timeline_t *tl = account.devices[d].timeline;
  if (tl && tl->width_ns > coarse_margin_ns() &&
      ol_account_note_before(&account, d, coarse_bound_ns()))
    return;
  uint64_t t = now_ns();
  if (tl || new_timeline(d, t)) /* note_time, with tl read once: 35 instructions a pair less */
    ol_account_note(&account, d, t);
}

/* ---- a failed allocation's verdict ---------------------------------------- */

/* The settled failure's record is the device's diagnosis now: counted by
 * class, its oom_context line after its last oom event in the trace, its
 * paragraph on stderr (under the lock, as its sites are named from the
 * live table: an OOM is rare, and its paragraph must not wait). */
static void explain_settled(int d)
{
  ol_device_stats_t *dev = &account.devices[d].stats;
  dev->last_oom = pending[d].record;
  dev->last_oom_class = pending[d].cause;
  if (pending[d].cause < OL_OOM_CLASS_COUNT)
    dev->ooms_by_class[pending[d].cause]++;
  pending[d].has = false;
  ol_tracefile_oom_context(d, &dev->last_oom, dev->last_oom_class);
  ol_oom_paragraph(d, &dev->last_oom, dev->last_oom_class, ol_account_sites(&account, d));
}

/* The account settled device d's failure as an OOM the job saw. */
static void settled(int d)
{
  if (pending[d].has)
    explain_settled(d);
  else
    pending[d].bare_request = account.devices[d].stats.last_oom_request;
}

/* A request of size was served on d: if a failure waited, its verdict (a
 * recovered one's diagnosis is dropped). One compare when none waits. */
static void served(int d, uint64_t size)
{
  if (__builtin_expect(!account.devices[d].wait.request, 1)) /* d is a device index already */
    return;
  if (ol_account_served(&account, d, size) == OL_VERDICT_OOM)
    settled(d);
  else
    pending[d].has = false;
}

/* ---- the leak warning ------------------------------------------------------ */

/* The account finds a leak under the lock (at an iteration's end); the
 * line is made there, its site named from the live table, and printed
 * once the lock is let go: one line for a warning, one for its withdrawal
 * (a larger growth may warn again after one). */
static char leak_line[1024];   /* under the lock */
static int leak_device;        /* under the lock */
static atomic_bool leak_waiting;

static void leak_found(ol_account_t *a, int device, void *arg)
{
  (void)arg;
  ol_buf_t text = {0};
  const ol_sites_t *sites = ol_account_sites(a, device);
  const ol_leak_warning_t *w = &a->devices[device].stats.phases.leak;
  bool standing = ol_leak_standing(w);
  if (standing)
    ol_leak_warning_text(&text, w, sites ? ol_report_stack_namer : NULL, (void *)sites);
  else
    ol_leak_withdrawn_text(&text, w);
  snprintf(leak_line, sizeof leak_line, "%s: %s",
           standing ? "leak warning" : "leak warning withdrawn",
           text.data && !text.failed ? text.data : "memory that outlives iterations grows");
  ol_buf_free(&text);
  leak_device = device;
  atomic_store_explicit(&leak_waiting, true, memory_order_relaxed);
}

static void __attribute__((noinline, cold)) say_leak(void)
{
  char line[sizeof leak_line];
  ol_lock(&lock);
  bool waiting = atomic_exchange(&leak_waiting, false);
  int device = leak_device;
  memcpy(line, leak_line, sizeof line);
  ol_unlock(&lock);
  if (waiting)
    ol_log_info("device %d: %s", device, line);
}

/* The device's size, for the warning's projection and the batch figure:
 * OOMLENS_CAPACITY, else the driver's total; and what others hold then,
 * at the job's first allocation (the CUDA context, libraries, other
 * processes). Asked outside the tracker's lock, once a device: the current
 * device's, which an allocation's usually is. */
static atomic_bool capacity_asked[OL_MAX_DEVICES];

static void __attribute__((noinline, cold)) learn_capacity(int d, size_t just_served)
{
  if (atomic_exchange(&capacity_asked[d], true))
    return;
  uint64_t bytes = ol_option_size(OL_OPT_CAPACITY);
  size_t free_bytes, total_bytes;
  int64_t outside = ol_capacity_outside(d); /* measured before any allocation */
  if (ol_prim_mem_info(&free_bytes, &total_bytes) == 0) {
    if (bytes == 0 || bytes > total_bytes)
      bytes = total_bytes;
    /* The driver's used memory holds the allocation just served, which
     * the tracker has not counted yet. */
    int64_t held = (int64_t)(total_bytes - free_bytes) - ol_track_reserved_now(d) -
                   (int64_t)just_served;
    if (outside < 0)
      outside = held > 0 ? held : 0;
  }
  ol_lock(&lock);
  ol_account_set_capacity(&account, d, bytes);
  ol_account_set_outside(&account, d, outside);
  ol_tracefile_outside(d, outside);
  ol_unlock(&lock);
}

/* ---- the hooks' calls ---------------------------------------------------- */

/* An allocation call, served or refused, counted by the path it took. */
static void count_alloc_call(ol_device_stats_t *dev, ol_kind_t kind)
{
  if (is_runtime(kind))
    dev->runtime_allocs++;
  else if (kind == OL_KIND_MANAGED)
    dev->managed_allocs++;
  else if (kind == OL_KIND_VMM)
    dev->vmm_creates++;
  else
    dev->driver_allocs++;
}

void ol_track_alloc(uintptr_t addr, size_t size, int device, ol_kind_t kind, uintptr_t stream)
{
  ol_track_alloc_at(addr, size, device, kind, stream, NULL, -1);
}

int32_t ol_track_alloc_at(uintptr_t addr, size_t size, int device, ol_kind_t kind,
                          uintptr_t stream, const ol_site_key_t *key, int32_t site)
{
  if (__builtin_expect(!atomic_load_explicit(&capacity_asked[ol_account_clamp(device)],
                                             memory_order_relaxed),
                       0))
    learn_capacity(ol_account_clamp(device), origin_of(kind) != OL_ORIGIN_NONE ? size : 0);
  if (!begin())
    return -1;
  int d = ol_account_device(&account, device);
  ol_device_stats_t *dev = &account.devices[d].stats;
  count_alloc_call(dev, kind);
  served(d, size);
  record_t block = {.key = addr, .size = size, .stream = stream, .device = device,
                    .site = site_for(device, key, site), .kind = origin_of(kind)};
  record_t stale;
  bool replaced;
  record_t *rec = ol_account_alloc(&account, &block, &stale, &replaced);
  if (!rec) {
    stop_tracking("out of host memory for bookkeeping");
    end();
    return -1;
  }
  if (replaced) /* its free went by unseen: the account counted it gone */
    trace_free(&stale);
  trace_alloc(rec);
  note_now(d);
  end();
  if (__builtin_expect(atomic_load_explicit(&leak_waiting, memory_order_relaxed), 0))
    say_leak();
  return block.site;
}

bool ol_track_free(uintptr_t addr, ol_kind_t kind)
{
  if (!begin())
    return false;
  record_t rec;
  bool known = ol_account_release(&account, addr, 0, &rec);
  int d = ol_account_device(&account, known ? rec.device : 0);
  ol_device_stats_t *dev = &account.devices[d].stats;
  if (is_runtime(kind))
    dev->runtime_frees++;
  else
    dev->driver_frees++;
  if (known) {
    trace_free(&rec);
    note_now(d);
  }
  end();
  return known;
}

/* Allocation calls made on d so far, served or not; at the last failed
 * one (0: none failed yet). Under the lock. */
static int64_t calls_at_failure[OL_MAX_DEVICES];

static int64_t alloc_calls(const ol_device_stats_t *dev)
{
  return dev->runtime_allocs + dev->managed_allocs + dev->vmm_creates + dev->driver_allocs;
}

/* A refused request, the account's to count, as a trace's oom event. */
static void refused(int d, int device, size_t size, const ol_site_key_t *key)
{
  uint64_t t = now_ns();
  timeline_of(d, t);
  if (pending[d].bare_request != size)
    pending[d].bare_request = 0; /* a new failure: an older bare one's record never came */
  if (ol_account_oom_at(&account, d, size, t, wall_now()) == OL_VERDICT_OOM)
    settled(d); /* a different request waited: its context line first */
  int32_t site = site_for(device, key, -1);
  ol_account_oom_site(&account, d, site);
  ol_tracefile_event(OL_TRACE_OOM, 0, size, 0, site, device);
}

void ol_track_failed_alloc(size_t size, int device, ol_kind_t kind, bool out_of_memory,
                           const ol_site_key_t *key)
{
  if (!begin())
    return;
  int d = ol_account_device(&account, device);
  ol_device_stats_t *dev = &account.devices[d].stats;
  count_alloc_call(dev, kind);
  if (out_of_memory) {
    calls_at_failure[d] = alloc_calls(dev);
    refused(d, device, size, key);
  } else {
    dev->failed_allocs++; /* refused for another reason: no trace event says so */
  }
  end();
}

bool ol_track_framework_refusal(size_t size, int device)
{
  if (!begin())
    return false;
  int d = ol_account_device(&account, device);
  bool fresh = alloc_calls(&account.devices[d].stats) != calls_at_failure[d];
  if (fresh)
    refused(d, device, size, NULL);
  end();
  return fresh;
}

/* PyTorch's expandable segments make their physical memory in pages of 2
 * or 20 MiB (its small and large segment sizes); a handle of 32 MiB or
 * more is another library's (JAX's preallocation is one handle of most of
 * the device). What such handles hold, per device, under the lock. */
#define LIBRARY_HANDLE_BYTES (32ull << 20)
static int64_t large_handle_bytes[OL_MAX_DEVICES];

/* VMM physical memory (PyTorch's expandable segments', or another
 * library's) is reserved memory and a segment, never an allocation we can
 * see into. */
void ol_track_vmm_create(uint64_t handle, size_t size, int device)
{
  if (!begin())
    return;
  int d = ol_account_device(&account, device);
  account.devices[d].stats.vmm_creates++;
  served(d, size); /* expandable segments' retry is a cuMemCreate again */
  if (add_record(&handles, handle, size, device)) {
    ol_account_reserved(&account, d, size, (int64_t)size, OL_ORIGIN_vmm);
    if (size >= LIBRARY_HANDLE_BYTES)
      large_handle_bytes[d] += (int64_t)size;
    note_time(d, now_ns());
  }
  end();
}

void ol_track_vmm_release(uint64_t handle)
{
  if (!begin())
    return;
  record_t rec;
  bool known = ol_records_take(&handles, handle, &rec);
  int d = ol_account_device(&account, known ? rec.device : 0);
  account.devices[d].stats.vmm_releases++;
  if (known) {
    ol_account_reserved(&account, d, rec.size, -(int64_t)rec.size, OL_ORIGIN_vmm);
    if (rec.size >= LIBRARY_HANDLE_BYTES)
      large_handle_bytes[d] -= (int64_t)rec.size;
    note_time(d, now_ns());
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
    ol_account_mapped(&account, device, (int64_t)size);
    ol_tracefile_event(OL_TRACE_SEGMENT_MAP, addr, size, 0, -1, device);
  }
  end();
}

static void unmapped(const record_t *rec, void *unused)
{
  (void)unused;
  ol_tracefile_event(OL_TRACE_SEGMENT_UNMAP, rec->key, rec->size, 0, -1, rec->device);
  ol_account_mapped(&account, rec->device, -(int64_t)rec->size);
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
 * chunk counts as a segment of the large pool, and as VMM memory mapped
 * (prim.c maps it with cuMemMap): what its segment_map event means in the
 * trace, which cannot tell the pool's mappings from the job's. */
void ol_track_pool_mapped(int device, uint64_t addr, int64_t delta)
{
  if (!begin())
    return;
  ol_tracefile_event(delta > 0 ? OL_TRACE_SEGMENT_MAP : OL_TRACE_SEGMENT_UNMAP, addr,
                     (uint64_t)(delta > 0 ? delta : -delta), 0, -1, device);
  int d = ol_account_device(&account, device);
  ol_account_reserved(&account, d, OL_SMALL_SIZE + 1 /* any size of the large pool */, delta,
                      OL_ORIGIN_pool);
  ol_account_mapped(&account, d, delta);
  note_time(d, now_ns());
  end();
}

void ol_track_oom_figures(int device, ol_oom_record_t *record)
{
  ol_lock(&lock);
  int d = ol_account_device(&account, device);
  ol_account_oom_figures(&account, d, record);
  record->vmm_reserved = large_handle_bytes[d];
  ol_unlock(&lock);
}

void ol_track_oom_pending(int device, const ol_oom_record_t *record, ol_oom_class_t cause)
{
  ol_lock(&lock);
  int d = ol_account_clamp(device);
  bool waits = account.devices[d].wait.request == record->request;
  bool bare = pending[d].bare_request == record->request;
  if (waits || bare) {
    pending[d].has = true;
    pending[d].record = *record;
    pending[d].cause = cause;
  }
  if (bare && !waits) {
    pending[d].bare_request = 0;
    explain_settled(d);
  }
  ol_unlock(&lock);
}

bool ol_track_oom_waiting(int device)
{
  ol_lock(&lock);
  bool waits = account.devices[ol_account_clamp(device)].wait.request != 0;
  ol_unlock(&lock);
  return waits;
}

void ol_track_oom_amend(int device, void (*amend)(ol_oom_record_t *r, const void *arg),
                        const void *arg)
{
  ol_lock(&lock);
  int d = ol_account_clamp(device);
  if (pending[d].has) {
    amend(&pending[d].record, arg);
    pending[d].cause = ol_oom_classify(&pending[d].record);
  }
  ol_unlock(&lock);
}

void ol_track_oom_settle(int device)
{
  ol_lock(&lock);
  int first = device < 0 ? 0 : ol_account_clamp(device);
  int end = device < 0 ? account.device_count : first + 1;
  for (int d = first; d < end; d++)
    if (ol_account_oom_settle(&account, d))
      settled(d);
  ol_unlock(&lock);
}

bool ol_track_sites(int device, void (*visit)(const ol_sites_t *sites, void *arg), void *arg)
{
  ol_lock(&lock);
  const ol_sites_t *sites = ol_account_sites(&account, device);
  if (sites)
    visit(sites, arg);
  ol_unlock(&lock);
  return sites != NULL;
}

bool ol_track_timeline(int device, ol_timeline_t *out)
{
  ol_lock(&lock);
  const ol_timeline_t *tl = account.devices[ol_account_clamp(device)].timeline;
  if (tl)
    *out = *tl;
  ol_unlock(&lock);
  return tl != NULL;
}

/* One moment for a report, under one hold of the lock: the counters as
 * ol_account_stats shows them, the timelines, and a copy of each call-site
 * table. The lists are built and their sites named from the copies after
 * the lock is let go: naming a native frame (ol_stacks_site_frames) asks
 * dladdr and reads debug info (libdw), far slower than a copy, and the
 * hooks wait on this lock. */
void ol_track_report(ol_report_t *r, ol_sites_t *sites[OL_MAX_DEVICES])
{
  ol_lock(&lock);
  ol_report_init(r, account.device_count);
  r->tracking_failed = failed;
  for (int d = 0; d < r->device_count; d++) {
    ol_report_device_t *rd = &r->devices[d];
    const ol_sites_t *table = ol_account_sites(&account, d);
    ol_account_stats(&account, d, &rd->stats);
    if (account.devices[d].timeline)
      ol_report_device_timeline(rd, account.devices[d].timeline);
    sites[d] = table ? ol_sites_copy(table) : NULL;
    if (table && !sites[d])
      r->failed = true; /* out of host memory: the report is not written */
  }
  ol_unlock(&lock);
}

int64_t ol_track_reserved_now(int device)
{
  ol_lock(&lock);
  int64_t bytes = device >= 0 && device < account.device_count
                    ? account.devices[device].stats.reserved_bytes[OL_POOL_ALL].current : 0;
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

/* Only a trace's line (the figures count pending bytes above), under the
 * lock so that it falls in the events' order; nothing without a trace. */
void ol_track_pool_held(int device, uint64_t addr, bool held)
{
  if (!ol_tracefile_on() || !begin())
    return;
  ol_tracefile_pool(device, addr, held);
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
OL_COUNTER_FN(ol_track_stream_query, stream_queries)
OL_COUNTER_FN(ol_track_stream_mark, stream_marks)
OL_COUNTER_FN(ol_track_mark_wait, mark_waits)
OL_COUNTER_FN(ol_track_stream_barrier, stream_barriers)
OL_COUNTER_FN(ol_track_handle_move, handle_moves)
OL_COUNTER_FN(ol_track_device_sync, device_syncs)
OL_COUNTER_FN(ol_track_manage_fallback, manage_fallbacks)
#undef OL_COUNTER_FN

bool ol_track_seen_activity(void)
{
  return atomic_load_explicit(&seen_activity, memory_order_relaxed);
}

/* The counters as every report shows them (ol_account_stats), the ones a
 * trace's report shows too. */
void ol_track_snapshot(ol_snapshot_t *out)
{
  ol_lock(&lock);
  out->device_count = account.device_count;
  for (int d = 0; d < OL_MAX_DEVICES; d++)
    ol_account_stats(&account, d, &out->devices[d]);
  out->live_records = (int64_t)ol_records_count(&account.blocks);
  out->tracking_failed = failed;
  ol_unlock(&lock);
}

/* Forget everything: a forked child starts with no device memory of its own. */
void ol_track_reset(void)
{
  ol_lock(&lock);
  ol_account_free(&account);
  ol_records_free(&handles);
  ol_records_free(&mappings);
  ol_records_free(&ranges);
  ol_stacks_forget_sites();
  memset(pending, 0, sizeof pending);
  for (int d = 0; d < OL_MAX_DEVICES; d++)
    atomic_store(&capacity_asked[d], false);
  atomic_store(&leak_waiting, false);
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
