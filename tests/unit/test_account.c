/* test_account.c: one accounting model, live and offline (core/account.c).
 *
 * Each recorded trace of tests/data is fed two ways: through the live
 * tracker's API in this process, call by call as the hooks make them
 * (ol_track_alloc_at with a call-site key, ol_track_free, ...), and
 * offline. The figures must be the same to the byte:
 * - observe: against ol_view_load_trace (what `oomlens report` on a trace
 *   shows): every row of the report's table (each OL_STAT_FIELDS counter
 *   by pool, the oversize rows, the OOM and failed-allocation counts),
 *   iterations, the call-site lists, the timeline's peaks. The diagnosis
 *   at the trace's oom event (class and record, at the case's capacity) is
 *   checked against an account this test feeds the same events through
 *   ol_account_apply, the call ol_view_load_trace makes (the report of a
 *   trace carries no diagnosis: ol_view_load_trace makes none).
 * - manage: against ol_replay_file, whose policy serves the same tensors
 *   as the job's pool: the table's rows but reserved memory and segments
 *   (the policy's there, compared to its own figures), every call site's
 *   figures, and the diagnosis (class and record) at the same capacity.
 * Any difference in how the two paths count fails here. First, the
 * account's own rules: the O(1) at-peak marking against a full copy at
 * every peak, stale blocks, one site table over devices, reserved memory. */
#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "export.h"
#include "lib.h"
#include "policy.h"
#include "replay.h"
#include "report_view.h"
#include "trace_csv.h"

#define MiB ((int64_t)1 << 20)
#define GiB (1ull << 30)

static const char *data_path(const char *name)
{
  static char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/%s", OL_TEST_DATA_DIR, name);
  return path;
}

/* ---- the account's own rules -------------------------------------------- */

/* A small deterministic generator (xorshift), so failures repeat. */
static uint64_t next_random(uint64_t *state)
{
  *state ^= *state << 13;
  *state ^= *state >> 7;
  *state ^= *state << 17;
  return *state;
}

/* The lazy at-peak figure (sites.c) against the eager one it replaced: a
 * copy of every site's bytes at each mark. */
START_TEST(lazy_at_peak_equals_a_copy_at_each_mark)
{
  enum { SITES = 40, STEPS = 20000 };
  ol_sites_t *s = ol_sites_new();
  int64_t current[SITES] = {0}, copied[SITES] = {0};
  for (int i = 0; i < SITES; i++) {
    char key[16];
    snprintf(key, sizeof key, "site%d", i);
    ck_assert_int_eq(ol_sites_intern(s, key, strlen(key)), i);
  }
  uint64_t state = 88172645463325252ull;
  for (int step = 0; step < STEPS; step++) {
    uint64_t r = next_random(&state);
    int id = (int)(r % SITES);
    int64_t delta = (int64_t)((r >> 8) % 4096) - (current[id] > 0 ? 2048 : 0);
    if (current[id] + delta < 0)
      delta = -current[id];
    ol_sites_add(s, id, delta);
    current[id] += delta;
    if ((r >> 40) % 7 == 0) {
      ol_sites_mark_peak(s);
      memcpy(copied, current, sizeof copied);
    }
    if ((r >> 48) % 101 == 0) /* reads in between change nothing */
      for (int i = 0; i < SITES; i++)
        ck_assert_int_eq(ol_sites_figures(s, i)->at_peak, copied[i]);
  }
  for (int i = 0; i < SITES; i++) {
    ck_assert_int_eq(ol_sites_figures(s, i)->at_peak, copied[i]);
    ck_assert_int_eq(ol_sites_figures(s, i)->current, current[i]);
  }
  ol_sites_free(s);
}
END_TEST

static ol_record_t block_of(uint64_t addr, uint64_t size, int device, int32_t site)
{
  return (ol_record_t){.key = addr, .size = size, .device = device, .site = site,
                       .kind = OL_ORIGIN_NONE};
}

/* An address allocated again: the block there is counted freed first. */
START_TEST(a_stale_block_is_freed_first)
{
  ol_account_t a;
  ol_account_init(&a, OL_ACCOUNT_SITES);
  int32_t site = ol_account_site(&a, 0, "f.py:1:f", 8, NULL);
  ol_record_t b = block_of(0x1000, 100, 0, site), stale;
  bool replaced;
  ck_assert_ptr_nonnull(ol_account_alloc(&a, &b, &stale, &replaced));
  ck_assert(!replaced);
  b.size = 300;
  ck_assert_ptr_nonnull(ol_account_alloc(&a, &b, &stale, &replaced));
  ck_assert(replaced);
  ck_assert_uint_eq(stale.size, 100);
  const ol_device_stats_t *d = &a.devices[0].stats;
  ck_assert_int_eq(d->allocated_bytes[OL_POOL_ALL].current, 300);
  ck_assert_int_eq(d->allocation[OL_POOL_ALL].current, 1);
  ck_assert_int_eq(ol_sites_figures(ol_account_sites(&a, 0), site)->current, 300);
  ol_record_t gone;
  ck_assert(ol_account_release(&a, 0x1000, 0, &gone));
  ck_assert(!ol_account_release(&a, 0x1000, 0, &gone));
  ck_assert_int_eq(d->unknown_frees, 1);
  ck_assert_int_eq(d->allocated_bytes[OL_POOL_ALL].current, 0);
  ck_assert_uint_eq(ol_records_count(&a.blocks), 0);
  ol_account_free(&a);
}
END_TEST

/* One table over two devices: its peak is theirs together, and its at-peak
 * bytes sum to that, not to either device's own peak. */
START_TEST(shared_sites_peak_over_devices)
{
  ol_account_t a;
  ol_account_init(&a, OL_ACCOUNT_SITES_SHARED);
  int32_t x = ol_account_site(&a, 0, "x", 1, NULL), y = ol_account_site(&a, 1, "y", 1, NULL);
  ol_record_t stale, gone;
  bool replaced;
  ol_record_t b = block_of(0x1000, 8 * MiB, 0, x);
  ol_account_alloc(&a, &b, &stale, &replaced); /* device 0's peak: 8 MiB */
  b = block_of(0x2000, 3 * MiB, 1, y);
  ol_account_alloc(&a, &b, &stale, &replaced); /* together: 11 MiB */
  ol_account_release(&a, 0x1000, 0, &gone);
  b = block_of(0x3000, 6 * MiB, 1, y);
  ol_account_alloc(&a, &b, &stale, &replaced); /* device 1's peak: 9 MiB, together 9 */
  ck_assert_int_eq(a.peak, 11 * MiB);
  const ol_sites_t *s = ol_account_sites(&a, 1);
  ck_assert_ptr_eq(s, ol_account_sites(&a, 0));
  ck_assert_int_eq(ol_sites_figures(s, x)->at_peak, 8 * MiB);
  ck_assert_int_eq(ol_sites_figures(s, y)->at_peak, 3 * MiB);
  ck_assert_int_eq(a.devices[1].stats.allocated_bytes[OL_POOL_ALL].peak, 9 * MiB);
  ck_assert_int_eq(a.device_count, 2);
  ol_account_free(&a);
}
END_TEST

/* A trace recorded after its segments were made frees more than it saw
 * reserved: reserved memory stops at zero. Origins count where known. */
START_TEST(reserved_memory_never_below_zero)
{
  ol_account_t a;
  ol_account_init(&a, 0);
  ol_account_reserved(&a, 2, 4 * MiB, 4 * MiB, OL_ORIGIN_vmm);
  ol_account_reserved(&a, 2, 4 * MiB, -8 * MiB, OL_ORIGIN_vmm);
  const ol_device_stats_t *d = &a.devices[2].stats;
  ck_assert_int_eq(d->reserved_bytes[OL_POOL_ALL].current, 0);
  ck_assert_int_eq(d->reserved_bytes[OL_POOL_ALL].peak, 4 * MiB);
  ck_assert_int_eq(d->segment[OL_POOL_ALL].current, 0);
  ck_assert_int_eq(d->origin_bytes[OL_ORIGIN_vmm].current, 0);
  ol_account_reserved(&a, 2, 4 * MiB, -4 * MiB, OL_ORIGIN_vmm);
  ck_assert_int_eq(d->segment[OL_POOL_ALL].current, 0);
  ck_assert_int_eq(a.device_count, 3);
  ol_account_free(&a);
}
END_TEST

/* The timeline's notes and an OOM's bookkeeping are the account's, for the
 * tracker (its clock) and a trace (its events' times) alike: the memory
 * noted at the time given, an OOM counted (a failed allocation too), its
 * wall clock kept where known, and marked on the timeline. */
/* A failure's verdict: the same request served next is the allocator's
 * retry (each failed attempt counted recovered, no OOM); the same request
 * refused again is the same failure; another request settles it. */
START_TEST(failure_verdicts)
{
  ol_account_t a;
  ol_account_init(&a, OL_ACCOUNT_TIMELINE);
  ol_account_timeline(&a, 0, 0, 0);
  ck_assert(!ol_account_waiting(&a, 0));
  ck_assert_int_eq(ol_account_oom_at(&a, 0, 32 * MiB, 10, 0), OL_VERDICT_NONE);
  ck_assert_int_eq(ol_account_oom_at(&a, 0, 32 * MiB, 20, 0), OL_VERDICT_NONE); /* its retry */
  ck_assert(ol_account_waiting(&a, 0));
  ck_assert_int_eq(ol_account_served(&a, 0, 32 * MiB), OL_VERDICT_RECOVERED);
  const ol_device_stats_t *d = &a.devices[0].stats;
  ck_assert_int_eq(d->recovered_allocs, 2);
  ck_assert_int_eq(d->num_ooms, 0);
  ck_assert_int_eq(d->failed_allocs, 2);
  ck_assert_uint_eq(a.devices[0].timeline->oom_count, 0);
  ck_assert_int_eq(ol_account_served(&a, 0, 32 * MiB), OL_VERDICT_NONE); /* nothing waits */

  ol_account_oom_at(&a, 0, 64 * MiB, 30, 5.0);
  ol_account_oom_at(&a, 0, 64 * MiB, 40, 6.0);
  ck_assert_int_eq(ol_account_served(&a, 0, MiB), OL_VERDICT_OOM); /* the job went on */
  ck_assert_int_eq(d->num_ooms, 1);
  ck_assert_int_eq(d->last_oom_request, 64 * MiB);
  ck_assert(d->first_oom_unix == 6.0 && d->last_oom_unix == 6.0); /* its last attempt's */
  ck_assert_uint_eq(a.devices[0].timeline->ooms[0].t_ns, 40);

  ol_account_oom_at(&a, 0, 8 * MiB, 50, 0);
  ck_assert_int_eq(ol_account_oom_at(&a, 0, 4 * MiB, 60, 0), OL_VERDICT_OOM);
  ck_assert_int_eq(d->num_ooms, 2);
  ck_assert(ol_account_oom_settle(&a, 0));
  ck_assert(!ol_account_oom_settle(&a, 0));
  ck_assert_int_eq(d->num_ooms, 3);
  ck_assert_int_eq(d->recovered_allocs, 2);
  ol_account_free(&a);
}
END_TEST

START_TEST(notes_and_ooms_at_their_time)
{
  ol_account_t a;
  ol_account_init(&a, OL_ACCOUNT_TIMELINE);
  ol_timeline_t *tl = ol_account_timeline(&a, 1, 1000, 100.0);
  ck_assert_ptr_nonnull(tl);
  ol_record_t b = block_of(0x1000, 3 * MiB, 1, -1), stale;
  bool replaced;
  ck_assert_ptr_nonnull(ol_account_alloc(&a, &b, &stale, &replaced));
  ck_assert(!ol_account_note_before(&a, 1, 4000)); /* a new peak needs its time */
  ol_account_note(&a, 1, 5000);
  ck_assert_int_eq(tl->peak_allocated, 3 * MiB);
  ck_assert_uint_eq(tl->peak_allocated_ns, 5000);
  ol_account_oom_at(&a, 1, 8 * MiB, 7000, 200.5);
  ol_account_oom_at(&a, 1, 4 * MiB, 9000, 201.0);
  ol_account_oom_at(&a, 1, 2 * MiB, 9500, 0); /* a trace's: no wall clock */
  const ol_device_stats_t *d = &a.devices[1].stats;
  ck_assert_int_eq(d->num_ooms, 2); /* each settled by the next, different request */
  ck_assert(ol_account_oom_settle(&a, 1)); /* the last: its owner's word */
  ck_assert_int_eq(d->num_ooms, 3);
  ck_assert_int_eq(d->failed_allocs, 3);
  ck_assert_int_eq(d->last_oom_request, 2 * MiB);
  ck_assert(d->first_oom_unix == 200.5 && d->last_oom_unix == 201.0);
  ck_assert_uint_eq(tl->oom_count, 3);
  ck_assert_uint_eq(tl->ooms[0].t_ns, 7000);
  ck_assert_int_eq(tl->ooms[0].request, 8 * MiB);
  ck_assert_uint_eq(tl->ooms[2].t_ns, 9500);
  ol_account_free(&a);
}
END_TEST

/* ---- the live tracker fed a trace ------------------------------------- */

/* A frames text as a live call-site key: a header word saying there are no
 * Python frames (so the tracker's label reads none), then the text's bytes
 * as "native" words, zero-padded. */
static void key_of(const ol_trace_event_t *ev, ol_site_key_t *key)
{
  memset(key, 0, sizeof *key);
  size_t words = (ev->frames_len + sizeof(uintptr_t) - 1) / sizeof(uintptr_t);
  ck_assert_uint_le(1 + words, OL_SITE_WORDS);
  key->words[0] = (uintptr_t)words << 16;
  if (ev->frames_len)
    memcpy(&key->words[1], ev->frames, ev->frames_len);
  key->count = 1 + words;
}

/* The frames text back from a live key (padding dropped). */
static void key_text(const ol_sites_t *s, int32_t id, char *out, size_t cap)
{
  size_t len;
  const char *key = ol_sites_key_bytes(s, id, &len);
  ck_assert_uint_ge(len, sizeof(uintptr_t));
  size_t n = strnlen(key + sizeof(uintptr_t), len - sizeof(uintptr_t));
  ck_assert_uint_lt(n, cap);
  memcpy(out, key + sizeof(uintptr_t), n);
  out[n] = '\0';
}

/* The live sites made since the last call given the roles their frames
 * text names, as the tracker does from a live job's Python frames (the
 * keys above carry none): the live and offline diagnoses read the same
 * roles. Reset with the tracker (labelled_sites = 0). */
static size_t labelled_sites;

static void label_sites(const ol_sites_t *sites, void *arg)
{
  (void)arg;
  char text[1024];
  for (; labelled_sites < ol_sites_count(sites); labelled_sites++) {
    int32_t id = (int32_t)labelled_sites;
    key_text(sites, id, text, sizeof text);
    /* the test's own table: the tracker lends it read-only to reports */
    ol_sites_set_fold((ol_sites_t *)sites, id, ol_role_fold_of_frames(text, strlen(text)));
  }
}

static void label_new_live_sites(void)
{
  ol_track_sites(0, label_sites, NULL);
}

static ol_trace_t *open_trace(const char *name)
{
  ol_error_t err;
  ol_trace_t *t = ol_trace_open(data_path(name), &err);
  ck_assert_msg(t, "%s", err.text);
  return t;
}

static const ol_device_stats_t *live_stats(void)
{
  static ol_snapshot_t snap;
  ol_track_snapshot(&snap);
  ck_assert(!snap.tracking_failed);
  return &snap.devices[0];
}

/* What each path knows of an out-of-memory on a device of that capacity,
 * as oom_live.c fills it: the device's free memory is what no one holds,
 * nobody else is on it; free blocks as given (-1: not known). */
static void device_figures(ol_oom_record_t *r, uint64_t capacity, int64_t reserved,
                           int64_t free_reserved, int64_t largest_free_block)
{
  r->capacity = capacity;
  r->device_free = (int64_t)capacity - reserved;
  int64_t others = (int64_t)r->capacity - r->device_free - r->reserved;
  r->external = others > 0 ? others : 0;
  r->free_reserved = free_reserved;
  r->largest_free_block = largest_free_block;
}

/* ---- comparisons ------------------------------------------------------ */

static void same_stat(const char *what, const ol_stat_t *live, const ol_stat_t *offline)
{
  ck_assert_msg(live->current == offline->current && live->peak == offline->peak &&
                  live->allocated == offline->allocated && live->freed == offline->freed,
                "%s: live current %lld peak %lld allocated %lld freed %lld, offline %lld %lld "
                "%lld %lld", what, (long long)live->current, (long long)live->peak,
                (long long)live->allocated, (long long)live->freed, (long long)offline->current,
                (long long)offline->peak, (long long)offline->allocated,
                (long long)offline->freed);
}

static void same_pools(const char *what, const ol_stat_t *live, const ol_stat_t *offline)
{
  for (int p = 0; p < OL_POOL_COUNT; p++)
    same_stat(what, &live[p], &offline[p]);
}

static void same_phases(const ol_phases_t *live, const ol_phases_t *offline)
{
  ck_assert_uint_eq(live->iterations, offline->iterations);
  ck_assert_int_eq(ol_phases_persistent(live), ol_phases_persistent(offline));
  ck_assert_int_eq(ol_phases_growth(live), ol_phases_growth(offline));
  ck_assert_uint_eq(live->period, offline->period);
  ck_assert_int_eq(ol_phases_before_first_free(live), ol_phases_before_first_free(offline));
  ck_assert_int_eq(ol_phases_iteration_need(live), ol_phases_iteration_need(offline));
  ck_assert(live->leak.fired == offline->leak.fired);
  for (int i = 0; i < OL_PHASE_VALLEYS; i++)
    ck_assert_int_eq(live->valleys[i], offline->valleys[i]);
}

/* Allocated bytes and blocks, iterations, OOMs and frees of nothing. */
static void same_allocations(const ol_device_stats_t *live, const ol_device_stats_t *offline)
{
  same_pools("allocated_bytes", live->allocated_bytes, offline->allocated_bytes);
  same_pools("allocation", live->allocation, offline->allocation);
  same_phases(&live->phases, &offline->phases);
  ck_assert_int_eq(live->num_ooms, offline->num_ooms);
  ck_assert_int_eq(live->last_oom_request, offline->last_oom_request);
  ck_assert_int_eq(live->unknown_frees, offline->unknown_frees);
  ck_assert_int_gt(live->allocation[OL_POOL_ALL].allocated, 0); /* a real comparison */
}

/* Every row of the report's table: each OL_STAT_FIELDS counter by pool,
 * the oversize rows, and the OOM counts of its header. Without reserved,
 * all but reserved memory and its segments (replay's are its policy's). */
static void same_table(const ol_device_stats_t *live, const ol_device_stats_t *offline,
                       bool reserved)
{
#define SAME_FIELD(field, title, bytes)                                           \
  if (reserved || (live->field != live->reserved_bytes && live->field != live->segment)) \
    same_pools(#field, live->field, offline->field);
  OL_STAT_FIELDS(SAME_FIELD)
#undef SAME_FIELD
  same_stat("oversize_allocations", &live->oversize_allocations, &offline->oversize_allocations);
  same_stat("oversize_segments", &live->oversize_segments, &offline->oversize_segments);
  ck_assert_int_eq(live->num_ooms, offline->num_ooms);
  ck_assert_int_eq(live->failed_allocs, offline->failed_allocs);
}

/* Two records of the same failure. Sites by their frames text: the live
 * table's keys are stacks (here, words holding the text). */
static void same_record(const ol_oom_record_t *live, const ol_sites_t *live_sites,
                        const ol_oom_record_t *offline, const ol_sites_t *offline_sites)
{
  ck_assert_uint_eq(live->request, offline->request);
  ck_assert_uint_eq(live->capacity, offline->capacity);
  ck_assert_int_eq(live->device_free, offline->device_free);
  ck_assert_int_eq(live->allocated, offline->allocated);
  ck_assert_int_eq(live->reserved, offline->reserved);
  ck_assert_int_eq(live->free_reserved, offline->free_reserved);
  ck_assert_int_eq(live->largest_free_block, offline->largest_free_block);
  ck_assert_int_eq(live->external, offline->external);
  ck_assert_int_eq(live->persistent, offline->persistent);
  ck_assert_int_eq(live->growth, offline->growth);
  ck_assert_uint_eq(live->iterations, offline->iterations);
  ck_assert_int_eq(live->step_repeat_held, offline->step_repeat_held);
  ck_assert_int_eq(live->step_rest, offline->step_rest);
  ck_assert_int_eq(live->step_fixed.gradients, offline->step_fixed.gradients);
  ck_assert_int_eq(live->step_fixed.held_over, offline->step_fixed.held_over);
  ck_assert(live->managed == offline->managed);
  ck_assert_int_eq(live->holder_count, offline->holder_count);
  char a[1024];
  for (int i = 0; i < live->holder_count; i++) {
    ck_assert_int_eq(live->holders[i].bytes, offline->holders[i].bytes);
    key_text(live_sites, live->holders[i].id, a, sizeof a);
    ck_assert_str_eq(a, ol_sites_key(offline_sites, offline->holders[i].id));
  }
  ck_assert_int_eq(live->grower.bytes, offline->grower.bytes);
  ck_assert_int_eq(live->grower.id < 0, offline->grower.id < 0);
  if (live->grower.id >= 0) {
    key_text(live_sites, live->grower.id, a, sizeof a);
    ck_assert_str_eq(a, ol_sites_key(offline_sites, offline->grower.id));
  }
}

static ol_trace_event_t event_of(ol_trace_action_t action, uint64_t addr, uint64_t size)
{
  return (ol_trace_event_t){.action = action, .addr = addr, .size = size};
}

/* A trace's oom event carries the failed request's frames: the record says
 * what the request was for (AdamW's state, here), and nothing for one
 * without frames. */
START_TEST(the_failed_request_names_its_role)
{
  static const char weights[] = "module.py:965:_apply;workloads.py:9:gpt2";
  static const char adam[] = "adamw.py:480:_multi_tensor_adamw;workloads.py:12:gpt2";
  ol_account_t a;
  ol_account_init(&a, OL_ACCOUNT_SITES);
  ol_trace_event_t ev = event_of(OL_TRACE_ALLOC, 0x1000, 64 * MiB);
  ev.frames = weights;
  ev.frames_len = sizeof weights - 1;
  ck_assert(ol_account_apply(&a, &ev, NULL));
  ev = event_of(OL_TRACE_OOM, 0, 128 * MiB);
  ev.frames = adam;
  ev.frames_len = sizeof adam - 1;
  ck_assert(ol_account_apply(&a, &ev, NULL));
  ol_oom_record_t r;
  ol_oom_record_init(&r, 128 * MiB);
  ol_account_oom_figures(&a, 0, &r);
  ck_assert(r.request_role_known);
  ck_assert_int_eq(r.request_role, OL_ROLE_optimizer);
  ck_assert(r.roles_known);
  ck_assert_int_eq(r.role_bytes[OL_ROLE_weights], 64 * MiB);
  ev = event_of(OL_TRACE_OOM, 0, 256 * MiB);
  ck_assert(ol_account_apply(&a, &ev, NULL));
  ol_account_oom_figures(&a, 0, &r);
  ck_assert(!r.request_role_known);
  ol_account_free(&a);
}
END_TEST

static void apply_with_frames(ol_account_t *a, ol_trace_action_t action, uint64_t addr,
                              uint64_t size, const char *frames)
{
  ol_trace_event_t ev = event_of(action, addr, size);
  ev.frames = frames;
  ev.frames_len = frames ? strlen(frames) : 0;
  ck_assert(ol_account_apply(a, &ev, NULL));
}

/* The failed request made by an optimizer's foreach update, read from a
 * trace's key (test_stacks: from a live site's label). */
START_TEST(a_request_of_the_foreach_update_is_told_in_a_trace)
{
  static const char adam[] = "torch/optim/adam.py:791:_multi_tensor_adam;torch/optim/adam.py:971:adam";
  ol_account_t a;
  ol_account_init(&a, OL_ACCOUNT_SITES);
  apply_with_frames(&a, OL_TRACE_ALLOC, 0x1000, 64 * MiB, adam);
  apply_with_frames(&a, OL_TRACE_OOM, 0, 64 * MiB, adam);
  ol_oom_record_t r;
  ol_oom_record_init(&r, 64 * MiB);
  ol_account_oom_figures(&a, 0, &r);
  ck_assert(r.request_in_update);
  ck_assert_int_eq(r.update_bytes, 64 * MiB);
  ol_account_free(&a);
}
END_TEST

/* The frames of a module's weights moved to the device (roles.c: weights). */
static const char weights[] = "module.py:1097:<lambda>;module.py:965:_apply;train.py:9:main";

/* A first backward's gradients are "backward" by their frames (none has
 * outlived a backward yet): the backward's blocks of a live weight's size
 * are counted as the gradients being made, at most one per weight of that
 * size, and a request of such a size with a gradient still to come is one
 * more (held-out embed_grads: the embedding's dense gradient was read as
 * the batch's memory). */
START_TEST(a_first_backward_counts_the_gradients_it_makes)
{
  static const char engine[] = "(thread pt_autograd_0)";
  ol_account_t a;
  ol_account_init(&a, OL_ACCOUNT_SITES);
  apply_with_frames(&a, OL_TRACE_ALLOC, 0x100000000, 512 * MiB, weights); /* an embedding */
  apply_with_frames(&a, OL_TRACE_ALLOC, 0x200000000, 8 * MiB, weights);   /* two layers */
  apply_with_frames(&a, OL_TRACE_ALLOC, 0x210000000, 8 * MiB, weights);
  /* the backward: both layers' gradients and a third block of their size
   * (an activation's gradient, by chance as large), and a temporary */
  apply_with_frames(&a, OL_TRACE_ALLOC, 0x300000000, 8 * MiB, engine);
  apply_with_frames(&a, OL_TRACE_ALLOC, 0x310000000, 8 * MiB, engine);
  apply_with_frames(&a, OL_TRACE_ALLOC, 0x320000000, 8 * MiB, engine);
  apply_with_frames(&a, OL_TRACE_ALLOC, 0x330000000, 3 * MiB, engine);
  apply_with_frames(&a, OL_TRACE_OOM, 0, 512 * MiB, engine);
  ol_oom_record_t r;
  ol_oom_record_init(&r, 512 * MiB);
  ol_account_oom_figures(&a, 0, &r);
  ck_assert_int_eq(r.role_bytes[OL_ROLE_gradients], 0);
  ck_assert_int_eq(r.role_bytes[OL_ROLE_backward], 27 * MiB);
  ck_assert_int_eq(r.gradients_made, 16 * MiB);
  ck_assert(r.request_is_gradient);
  /* a request of no weight's size is not a gradient */
  apply_with_frames(&a, OL_TRACE_OOM, 0, 100 * MiB, engine);
  ol_oom_record_init(&r, 100 * MiB);
  ol_account_oom_figures(&a, 0, &r);
  ck_assert_int_eq(r.gradients_made, 16 * MiB);
  ck_assert(!r.request_is_gradient);
  /* nor one the forward makes */
  apply_with_frames(&a, OL_TRACE_OOM, 0, 512 * MiB, "linear.py:134:forward;train.py:20:step");
  ol_oom_record_init(&r, 512 * MiB);
  ol_account_oom_figures(&a, 0, &r);
  ck_assert(!r.request_is_gradient);
  ol_account_free(&a);
}
END_TEST

/* One training step of a small model whose loss's 64 MiB block is kept
 * where `keep` (a list of losses with their graphs, in effect): the input, four layers' activations and a temporary each, the
 * loss, the backward's temporaries. */
static void a_step(ol_account_t *a, int step, bool keep, uint64_t *addr)
{
  static const char layer[] = "torch/nn/modules/linear.py:134:forward;train.py:20:step";
  static const char act[] = "torch/nn/functional.py:1697:gelu;train.py:20:step";
  static const char loss[] = "torch/nn/functional.py:3504:cross_entropy;train.py:21:step";
  static const char engine[] = "(thread pt_autograd_0)";
  uint64_t base = 0x100000000ull * (uint64_t)(step + 2);
  apply_with_frames(a, OL_TRACE_ALLOC, base + 0xb0000000, 4 * MiB, "train.py:19:step");
  for (int l = 0; l < 4; l++) {
    apply_with_frames(a, OL_TRACE_ALLOC, base + (uint64_t)l * 0x4000000, 32 * MiB, layer);
    apply_with_frames(a, OL_TRACE_ALLOC, base + 0x80000000, 8 * MiB, act);
    apply_with_frames(a, OL_TRACE_FREE_COMPLETED, base + 0x80000000, 8 * MiB, NULL);
  }
  *addr = base + 0x90000000;
  apply_with_frames(a, OL_TRACE_ALLOC, *addr, 64 * MiB, loss);
  for (int l = 3; l >= 0; l--) {
    apply_with_frames(a, OL_TRACE_ALLOC, base + 0xa0000000, 16 * MiB, engine);
    apply_with_frames(a, OL_TRACE_FREE_COMPLETED, base + 0xa0000000, 16 * MiB, NULL);
    apply_with_frames(a, OL_TRACE_FREE_COMPLETED, base + (uint64_t)l * 0x4000000, 32 * MiB, NULL);
  }
  if (!keep)
    apply_with_frames(a, OL_TRACE_FREE_COMPLETED, *addr, 64 * MiB, NULL);
  apply_with_frames(a, OL_TRACE_FREE_COMPLETED, base + 0xb0000000, 4 * MiB, NULL);
}

/* Twelve steps of a_step on 256 MiB of weights, the losses of steps
 * keep_from to keep_to kept, a 512 MiB block of made_once's site made in
 * step 5 and kept; out in the 13th step, its input made, at a 64 MiB
 * request of the backward. */
static void out_after_kept_losses(ol_account_t *a, int keep_from, int keep_to,
                                  const char *made_once, ol_oom_record_t *r)
{
  ol_account_init(a, OL_ACCOUNT_SITES);
  apply_with_frames(a, OL_TRACE_ALLOC, 0x10000000, 256 * MiB, weights);
  uint64_t loss = 0;
  for (int step = 0; step < 12; step++) {
    a_step(a, step, step >= keep_from && step <= keep_to, &loss);
    if (step == 5)
      apply_with_frames(a, OL_TRACE_ALLOC, 0xe00000000, 512 * MiB, made_once);
  }
  apply_with_frames(a, OL_TRACE_ALLOC, 0xf00000000, 4 * MiB, "train.py:19:step");
  ck_assert_uint_ge(a->devices[0].stats.phases.iterations, 8);
  apply_with_frames(a, OL_TRACE_OOM, 0, 64 * MiB, "(thread pt_autograd_0)");
  ol_oom_record_init(r, 64 * MiB);
  ol_account_oom_figures(a, 0, r);
}

static void assert_the_loss_grew(const ol_account_t *a, const ol_oom_record_t *r, int64_t bytes)
{
  ck_assert_int_ge(r->grower.id, 0);
  const char *key = ol_sites_key(ol_account_sites(a, 0), r->grower.id);
  ck_assert_ptr_nonnull(strstr(key, "cross_entropy"));
  ck_assert_int_eq(r->grower.bytes, bytes);
  ck_assert_int_eq(r->grower_role, OL_ROLE_activations);
}

/* A leak that runs the job out two steps after it began: a site's memory
 * at the iterations' lowest points shows a block kept in a step only at
 * the next one's, known when that one ends, so at the third kept block
 * the lowest points held one, and a site that first holds memory at a
 * later lowest point reads as a state made once (held-out ddp_fits given
 * a 392 MiB loss kept each step, out at its third: `activations`). Its
 * live blocks say more: made in earlier iterations, of two ages at least,
 * one before the last iteration but one. A buffer made once (of one age,
 * larger than the leak) is not the grower where a site kept blocks of
 * two. */
START_TEST(blocks_kept_from_earlier_iterations_are_growth)
{
  ol_account_t a;
  ol_oom_record_t r;
  /* the losses of steps 9, 10 and 11 are kept: three made in earlier
   * iterations, where the lowest points show two (11's is seen at the
   * 12th step's lowest, known when the 12th ends) */
  out_after_kept_losses(&a, 9, 11, "train.py:40:step", &r);
  assert_the_loss_grew(&a, &r, 3 * 64 * MiB);
  ck_assert(r.grower_reading != OL_GROWER_ONCE);
  ol_account_free(&a);
}
END_TEST

/* A leak that runs the job out before its second kept block: one block
 * of the forward's, made mid-run and held since, is the grower, marked as
 * of one age (held-out ddp_fits given a 392 MiB loss kept every 4th step,
 * out before the 8th: `activations`); oom.c weighs it. A block of the
 * state's is not: a state made once mid-run is the state rules'. */
START_TEST(one_block_kept_from_mid_run_is_growth_of_one_age)
{
  ol_account_t a;
  ol_oom_record_t r;
  out_after_kept_losses(&a, 7, 7, "torch/optim/adamw.py:180:_init_group;train.py:22:step", &r);
  assert_the_loss_grew(&a, &r, 64 * MiB);
  ck_assert(r.grower_reading == OL_GROWER_ONCE);
  ck_assert(r.grower_per_step); /* the loss's site makes and frees one a step */
  ol_account_free(&a);
}
END_TEST

/* A block made once mid-run by a site that makes none a step (a cache
 * made at its first use) is of one age too, but no step's own: oom.c
 * weighs it against the iteration under way (grower_per_step false),
 * where a step's kept loss is blamed whatever that asked. */
START_TEST(a_cache_made_once_is_no_step_s_block)
{
  ol_account_t a;
  ol_oom_record_t r;
  out_after_kept_losses(&a, 99, 99, "train.py:40:step", &r);
  ck_assert_int_ge(r.grower.id, 0);
  ck_assert_ptr_nonnull(strstr(ol_sites_key(ol_account_sites(&a, 0), r.grower.id), "train.py:40"));
  ck_assert(r.grower_reading == OL_GROWER_ONCE);
  ck_assert(!r.grower_per_step);
  ol_account_free(&a);
}
END_TEST

/* Twelve steps of a_step on 256 MiB of weights, the losses of the steps
 * in the mask kept (bit k: step k), and a 1 MiB block of the job's own
 * line kept in those of little; the 13th begins, its input and first
 * layer made (layer bytes; a_step's are 32 MiB) and its activation's
 * temporary, and runs out asking for its second layer. */
static void out_in_the_step_after(ol_account_t *a, unsigned keep, unsigned little, uint64_t layer,
                                  ol_oom_record_t *r)
{
  static const char linear[] = "torch/nn/modules/linear.py:134:forward;train.py:20:step";
  ol_account_init(a, OL_ACCOUNT_SITES);
  apply_with_frames(a, OL_TRACE_ALLOC, 0x10000000, 256 * MiB, weights);
  uint64_t loss = 0;
  for (int step = 0; step < 12; step++) {
    a_step(a, step, keep >> step & 1, &loss);
    if (little >> step & 1)
      apply_with_frames(a, OL_TRACE_ALLOC, 0xe00000000 + (uint64_t)step * MiB, 1 * MiB,
                        "train.py:30:step");
  }
  apply_with_frames(a, OL_TRACE_ALLOC, 0xf00000000, 4 * MiB, "train.py:19:step");
  apply_with_frames(a, OL_TRACE_ALLOC, 0xf10000000, layer, linear);
  apply_with_frames(a, OL_TRACE_ALLOC, 0xf20000000, 8 * MiB, "torch/nn/functional.py:1697:gelu");
  apply_with_frames(a, OL_TRACE_FREE_COMPLETED, 0xf20000000, 8 * MiB, NULL);
  apply_with_frames(a, OL_TRACE_OOM, 0, layer, linear);
  ol_oom_record_init(r, layer);
  ol_account_oom_figures(a, 0, r);
}

#define STEP(k) (1u << (k))

/* A tensor kept in the step before the one that runs out is of no age
 * the blocks tell apart from that step's own: no lowest point has passed
 * since (a loss kept at the 10th step of ddp_fits, by corpus_leaks.py
 * --once: `activations`). The failed step made the same sizes as the one
 * before up to there, and holds more than it did at that point: the
 * loss's site holds it. A step that asks for larger tensors is not read
 * so: its sizes differ. */
START_TEST(a_block_kept_in_the_last_step_is_held_since_it)
{
  ol_account_t a;
  ol_oom_record_t r;
  out_in_the_step_after(&a, STEP(11), 0, 32 * MiB, &r);
  assert_the_loss_grew(&a, &r, 64 * MiB);
  ck_assert(r.grower_reading == OL_GROWER_SINCE_LAST);
  ck_assert_int_eq(r.held_since_last, 64 * MiB);
  ol_account_free(&a);
  /* nothing kept: the same point held as much, and no site grew */
  out_in_the_step_after(&a, 0, 0, 32 * MiB, &r);
  ck_assert_int_eq(r.held_since_last, 0);
  ck_assert_int_lt(r.grower.id, 0);
  ol_account_free(&a);
  /* a larger input: other sizes, the step before is no measure */
  out_in_the_step_after(&a, STEP(11), 0, 48 * MiB, &r);
  ck_assert_int_eq(r.held_since_last, -1);
  ck_assert(r.grower_reading != OL_GROWER_SINCE_LAST);
  ol_account_free(&a);
}
END_TEST

/* The grower across iterations and what the step before tells, together:
 * a site that grew a little across iterations (1 MiB twice) is not the
 * grower beside one that holds 64 MiB more than at the same point
 * (accum_fits given an output kept every 4th micro-step: the autograd
 * thread's 2 MiB was, and the leak `activations`); where the grower is
 * the site that gained, a block it made after the same point of the step
 * before is counted once (the losses of steps 8 and 11: 128 MiB, not
 * 192). */
START_TEST(what_the_step_before_tells_weighs_with_the_grower)
{
  ol_account_t a;
  ol_oom_record_t r;
  out_in_the_step_after(&a, STEP(11), STEP(6) | STEP(9), 32 * MiB, &r);
  assert_the_loss_grew(&a, &r, 64 * MiB);
  ck_assert(r.grower_reading == OL_GROWER_SINCE_LAST);
  ol_account_free(&a);
  out_in_the_step_after(&a, STEP(8) | STEP(11), 0, 32 * MiB, &r);
  assert_the_loss_grew(&a, &r, 128 * MiB);
  ck_assert(r.grower_reading == OL_GROWER_KEPT);
  ck_assert_int_eq(r.held_since_last, 64 * MiB);
  ol_account_free(&a);
}
END_TEST

/* An optimizer's request refused after a backward begins its step, as a
 * served one does: what the backward's sites hold are its gradients
 * (held-out optimizer_switch replayed at 0.6 of its cap: SGD before it
 * made no state, so no step had been marked, and Adam's first request,
 * refused, left the gradients read as the backward's temporaries). */
START_TEST(a_refused_optimizer_request_begins_the_step)
{
  static const char engine[] = "(thread pt_autograd_0)";
  static const char adam[] = "adamw.py:480:_multi_tensor_adamw;train.py:30:main";
  ol_account_t a;
  ol_account_init(&a, OL_ACCOUNT_SITES);
  apply_with_frames(&a, OL_TRACE_ALLOC, 0x100000000, 8 * MiB, weights);
  apply_with_frames(&a, OL_TRACE_ALLOC, 0x300000000, 8 * MiB, engine);
  apply_with_frames(&a, OL_TRACE_OOM, 0, 8 * MiB, adam);
  ol_oom_record_t r;
  ol_oom_record_init(&r, 8 * MiB);
  ol_account_oom_figures(&a, 0, &r);
  ck_assert_int_eq(r.request_role, OL_ROLE_optimizer);
  ck_assert_int_eq(r.role_bytes[OL_ROLE_gradients], 8 * MiB);
  ck_assert_int_eq(r.role_bytes[OL_ROLE_backward], 0);
  ol_account_free(&a);
}
END_TEST

/* The state by timing is what was made before the first free and is
 * still live: an input (or a first temporary) made then and freed since
 * is not in it (held-out video_batch without its sites: 1.60 GB made
 * before its first free, 0.81 GB of it the weights). */
START_TEST(the_state_by_timing_is_what_is_still_live)
{
  ol_account_t a;
  ol_account_init(&a, 0);
  apply_with_frames(&a, OL_TRACE_ALLOC, 0x100000000, 8 * MiB, NULL);  /* weights */
  apply_with_frames(&a, OL_TRACE_ALLOC, 0x200000000, 4 * MiB, NULL);  /* an input */
  apply_with_frames(&a, OL_TRACE_ALLOC, 0x300000000, 2 * MiB, NULL);  /* a temporary */
  apply_with_frames(&a, OL_TRACE_FREE_COMPLETED, 0x300000000, 2 * MiB, NULL); /* first free */
  apply_with_frames(&a, OL_TRACE_FREE_COMPLETED, 0x200000000, 4 * MiB, NULL);
  apply_with_frames(&a, OL_TRACE_ALLOC, 0x400000000, 16 * MiB, NULL); /* after: not in it */
  apply_with_frames(&a, OL_TRACE_OOM, 0, 32 * MiB, NULL);
  ol_oom_record_t r;
  ol_oom_record_init(&r, 32 * MiB);
  ol_account_oom_figures(&a, 0, &r);
  ck_assert_int_eq(r.before_first_free, 14 * MiB);
  ck_assert_int_eq(r.before_first_free - r.before_first_free_gone, 8 * MiB); /* still live */
  ol_account_free(&a);
}
END_TEST

/* One attempt of a job: a load of 8 MiB weights (at base), an input freed
 * (the first free), three activations, and a request of 64 MiB refused. */
static void an_attempt_runs_out(ol_account_t *a, uint64_t base, const char *frames)
{
  for (uint64_t i = 0; i < 8; i++)
    apply_with_frames(a, OL_TRACE_ALLOC, base + i * 0x1000000, 8 * MiB, frames);
  apply_with_frames(a, OL_TRACE_ALLOC, base + 0x10000000, 4 * MiB, NULL);
  apply_with_frames(a, OL_TRACE_FREE_COMPLETED, base + 0x10000000, 4 * MiB, NULL);
  for (uint64_t i = 0; i < 3; i++)
    apply_with_frames(a, OL_TRACE_ALLOC, base + 0x20000000 + i * 0x1000000, 16 * MiB, NULL);
  apply_with_frames(a, OL_TRACE_OOM, 0, 64 * MiB, NULL);
  ck_assert(ol_account_oom_settle(a, 0));
  for (uint64_t i = 0; i < 3; i++) /* the job catches it: its activations go */
    apply_with_frames(a, OL_TRACE_FREE_COMPLETED, base + 0x20000000 + i * 0x1000000, 16 * MiB,
                      NULL);
}

static void the_weights_go(ol_account_t *a, uint64_t base)
{
  for (uint64_t i = 0; i < 8; i++)
    apply_with_frames(a, OL_TRACE_FREE_COMPLETED, base + i * 0x1000000, 8 * MiB, NULL);
}

/* A batch size search (Hugging Face's auto_find_batch_size) catches the
 * OOM, drops its model and loads it again at a smaller batch: the second
 * attempt is read as a start of its own, its load the state by timing
 * (before, the new load was read as made after the first free: its state
 * by timing 0, and the first step's log read on from the first
 * attempt's). */
START_TEST(a_job_that_loads_again_after_an_oom_starts_again)
{
  for (int with_roles = 0; with_roles < 2; with_roles++) {
    ol_account_t a;
    ol_account_init(&a, with_roles ? OL_ACCOUNT_SITES : 0);
    const char *frames = with_roles ? weights : NULL;
    an_attempt_runs_out(&a, 0x100000000, frames);
    the_weights_go(&a, 0x100000000);
    an_attempt_runs_out(&a, 0x800000000, frames);
    ol_oom_record_t r;
    ol_oom_record_init(&r, 64 * MiB);
    ol_account_oom_figures(&a, 0, &r);
    ck_assert_int_eq(r.before_first_free - r.before_first_free_gone, 64 * MiB);
    ck_assert_int_eq(r.restarts, 1);
    ol_oom_set_batch(&r, 16);
    ck_assert_int_eq(r.batch, 0); /* the search may have halved it */
    ck_assert_int_eq(r.batch_given, 16);
    ol_account_free(&a);
  }
}
END_TEST

/* A job that skips the batch that ran out keeps its model: no restart,
 * whatever else it gives back; nor where, by timing, the load went but
 * the weights by role stay (under PyTorch's cache the load is every
 * segment made before its first release). */
START_TEST(a_job_that_keeps_its_model_after_an_oom_goes_on)
{
  ol_account_t a;
  ol_account_init(&a, 0);
  an_attempt_runs_out(&a, 0x100000000, NULL);
  apply_with_frames(&a, OL_TRACE_ALLOC, 0x900000000, 16 * MiB, NULL); /* the next step */
  ol_oom_record_t r;
  ol_oom_record_init(&r, 64 * MiB);
  ol_account_oom_figures(&a, 0, &r);
  ck_assert_int_eq(r.restarts, 0);
  ol_oom_set_batch(&r, 16);
  ck_assert_int_eq(r.batch, 16);
  ol_account_free(&a);

  ol_account_init(&a, OL_ACCOUNT_SITES);
  static const char activations[] = "linear.py:134:forward;train.py:20:step";
  apply_with_frames(&a, OL_TRACE_ALLOC, 0x100000000, 8 * MiB, weights); /* by role */
  for (uint64_t i = 0; i < 14; i++) /* made before the first free too */
    apply_with_frames(&a, OL_TRACE_ALLOC, 0x200000000 + i * 0x1000000, 8 * MiB, activations);
  apply_with_frames(&a, OL_TRACE_FREE_COMPLETED, 0x200000000, 8 * MiB, NULL);
  apply_with_frames(&a, OL_TRACE_OOM, 0, 64 * MiB, NULL);
  ck_assert(ol_account_oom_settle(&a, 0));
  for (uint64_t i = 1; i < 14; i++) /* all but the weights given back */
    apply_with_frames(&a, OL_TRACE_FREE_COMPLETED, 0x200000000 + i * 0x1000000, 8 * MiB, NULL);
  apply_with_frames(&a, OL_TRACE_ALLOC, 0x900000000, 16 * MiB, activations);
  ol_account_oom_figures(&a, 0, &r);
  ck_assert_int_eq(r.restarts, 0);
  ol_account_free(&a);
}
END_TEST

/* Copies of the parameters made before the first forward began (the
 * first request at an activation's site) are early: built with the model,
 * as fp32 masters are (held-out master_weights_state replayed at 0.4 of
 * its cap: its 495 MiB of masters read as the batch's memory in the first
 * backward); one the loop makes after is not. */
START_TEST(copies_made_before_the_first_forward_are_early)
{
  static const char masters[] = "train.py:12:main";
  static const char loop_copy[] = "train.py:25:step";
  static const char forward[] = "linear.py:134:forward;train.py:20:step";
  static const char engine[] = "(thread pt_autograd_0)";
  ol_account_t a;
  ol_account_init(&a, OL_ACCOUNT_SITES);
  apply_with_frames(&a, OL_TRACE_ALLOC, 0x100000000, 8 * MiB, weights);
  apply_with_frames(&a, OL_TRACE_ALLOC, 0x200000000, 16 * MiB, masters); /* fp32 of bf16 */
  apply_with_frames(&a, OL_TRACE_ALLOC, 0x300000000, 4 * MiB, forward);
  apply_with_frames(&a, OL_TRACE_ALLOC, 0x400000000, 16 * MiB, loop_copy);
  apply_with_frames(&a, OL_TRACE_OOM, 0, 1 * MiB, engine);
  ol_oom_record_t r;
  ol_oom_record_init(&r, 1 * MiB);
  ol_account_oom_figures(&a, 0, &r);
  ck_assert_int_eq(r.own_copies, 32 * MiB);
  ck_assert_int_eq(r.own_copies_early, 16 * MiB);
  ol_account_free(&a);
}
END_TEST

/* Copies of the parameters the job's own lines keep (held-out
 * master_weights_state: fp32 masters of bf16 weights and their fp32
 * gradients): blocks of role other of a weight's size, twice it or half
 * it, two at most for each weight of that size (a copy and its gradient).
 * A block of a batch's size is none, nor is a third copy of one weight.
 * Among segments (PyTorch's cache) only those made for one tensor count,
 * within their 2 MiB rounding. */
START_TEST(copies_of_the_parameters_by_their_sizes)
{
  static const char own[] = "train.py:12:main";
  ol_account_t a;
  ol_account_init(&a, OL_ACCOUNT_SITES);
  apply_with_frames(&a, OL_TRACE_ALLOC, 0x100000000, 74 * MiB, weights); /* bf16 embedding */
  apply_with_frames(&a, OL_TRACE_ALLOC, 0x110000000, 3 * MiB, weights);  /* a layer's */
  apply_with_frames(&a, OL_TRACE_ALLOC, 0x200000000, 148 * MiB, own);    /* its fp32 master */
  apply_with_frames(&a, OL_TRACE_ALLOC, 0x210000000, 148 * MiB, own);    /* its gradient */
  apply_with_frames(&a, OL_TRACE_ALLOC, 0x220000000, 148 * MiB, own);    /* a third: not one */
  apply_with_frames(&a, OL_TRACE_ALLOC, 0x230000000, 6 * MiB, own);      /* the layer's master */
  apply_with_frames(&a, OL_TRACE_ALLOC, 0x240000000, 3 * MiB, own);      /* an average's copy */
  apply_with_frames(&a, OL_TRACE_ALLOC, 0x250000000, 200 * MiB, own);    /* a batch's probs */
  apply_with_frames(&a, OL_TRACE_ALLOC, 0x260000000, 148 * MiB + 512, own); /* near: not one */
  apply_with_frames(&a, OL_TRACE_OOM, 0, 9 * MiB, "torch/optim/adam.py:178:_init_group");
  ol_oom_record_t r;
  ol_oom_record_init(&r, 9 * MiB);
  ol_account_oom_figures(&a, 0, &r);
  ck_assert_int_eq(r.role_bytes[OL_ROLE_other], (4 * 148 + 6 + 3 + 200) * MiB + 512);
  ck_assert_int_eq(r.own_copies, (2 * 148 + 6 + 3) * MiB);
  ck_assert_int_eq(r.own_copies_own_segments, 2 * 148 * MiB); /* over 20 MiB only */
  ol_account_free(&a);
}
END_TEST

/* The failed request of the job's own lines is one more copy when it has
 * a live weight's size, twice it or half it, however many copies of that
 * weight are held already (held-out handmade_adam_state: the third block
 * of the embedding's size, asked by the loop's own Adam); not one of
 * another size, nor a request of another role. Among segments only one
 * over 20 MiB, within 2 MiB. */
START_TEST(a_request_of_a_parameter_s_size)
{
  static const char own[] = "train.py:31:update";
  ol_account_t a;
  ol_account_init(&a, OL_ACCOUNT_SITES);
  apply_with_frames(&a, OL_TRACE_ALLOC, 0x100000000, 147 * MiB, weights); /* the embedding */
  apply_with_frames(&a, OL_TRACE_ALLOC, 0x110000000, 9 * MiB, weights);   /* a layer's */
  apply_with_frames(&a, OL_TRACE_ALLOC, 0x120000000, 3072, weights);      /* a bias */
  apply_with_frames(&a, OL_TRACE_ALLOC, 0x200000000, 147 * MiB, own);     /* its first moment */
  apply_with_frames(&a, OL_TRACE_ALLOC, 0x210000000, 147 * MiB, own);     /* its second */
  struct {
    uint64_t size;
    const char *frames;
    bool copy, own_segment;
  } asked[] = {
    {147 * MiB, own, true, true},          /* a third: an update's temporary, or state */
    {9 * MiB, own, true, false},           /* the layer's: too small for a segment of its own */
    {18 * MiB, own, true, false},          /* twice it (fp32 of a 16-bit weight) */
    {147 * MiB + 1536 * 1024, own, false, true}, /* a segment rounded up to 2 MiB */
    {100 * MiB, own, false, false},        /* of no weight's size */
    {3072, own, false, false},             /* a bias's: small sizes match by chance */
    {147 * MiB, "linear.py:134:forward;train.py:20:step", false, false}, /* the forward's */
  };
  for (size_t i = 0; i < sizeof asked / sizeof asked[0]; i++) {
    apply_with_frames(&a, OL_TRACE_OOM, 0, asked[i].size, asked[i].frames);
    ol_oom_record_t r;
    ol_oom_record_init(&r, asked[i].size);
    ol_account_oom_figures(&a, 0, &r);
    ck_assert_msg(r.request_is_copy == asked[i].copy, "request %zu", i);
    ck_assert_msg(r.request_is_copy_own_segment == asked[i].own_segment, "request %zu", i);
  }
  ol_account_free(&a);
}
END_TEST

/* DDP's gradient buckets are gradients by their frames (roles.c), and
 * state; they are not gradients that outlived a backward, so a first
 * backward's gradients being made are still counted beside them (before,
 * any gradient bytes at all stopped that count). */
START_TEST(ddp_buckets_are_state_beside_the_gradients_being_made)
{
  static const char buckets[] = "torch/nn/parallel/distributed.py:1255:_ddp_init_helper;"
                                "torch/nn/parallel/distributed.py:896:__init__;train.py:10:main";
  static const char engine[] = "(thread pt_autograd_0)";
  ol_account_t a;
  ol_account_init(&a, OL_ACCOUNT_SITES);
  apply_with_frames(&a, OL_TRACE_ALLOC, 0x100000000, 8 * MiB, weights);
  apply_with_frames(&a, OL_TRACE_ALLOC, 0x110000000, 8 * MiB, weights);
  apply_with_frames(&a, OL_TRACE_ALLOC, 0x200000000, 16 * MiB, buckets);
  apply_with_frames(&a, OL_TRACE_ALLOC, 0x300000000, 8 * MiB, engine); /* a gradient being made */
  apply_with_frames(&a, OL_TRACE_OOM, 0, 8 * MiB, engine);
  ol_oom_record_t r;
  ol_oom_record_init(&r, 8 * MiB);
  ol_account_oom_figures(&a, 0, &r);
  ck_assert_int_eq(r.role_bytes[OL_ROLE_gradients], 16 * MiB);
  ck_assert_int_eq(r.role_bytes[OL_ROLE_backward], 8 * MiB);
  ck_assert_int_eq(r.gradients_made, 8 * MiB);
  ck_assert(r.request_is_gradient);
  ol_account_free(&a);
}
END_TEST

/* VMM mapped memory: the job's cuMemMap and our pool's chunks, live, are
 * the trace's segment_map and segment_unmap events; both count them the
 * same, with the reserved memory and segments they make. */
START_TEST(mapped_memory_live_equals_trace)
{
  const uint64_t chunk = 2 * MiB, job = 0x100000000, pool = 0x200000000;
  ol_track_reset();
  labelled_sites = 0;
  ol_track_vmm_create(7, chunk, 0);
  ol_track_vmm_map(job, chunk, 7);
  ol_track_pool_mapped(0, pool, (int64_t)chunk);
  ol_track_vmm_unmap(job, chunk);
  ol_track_vmm_release(7);
  ol_track_pool_mapped(0, pool, -(int64_t)chunk);
  ol_snapshot_t *snap = malloc(sizeof *snap);
  ck_assert_ptr_nonnull(snap);
  ol_track_snapshot(snap);
  ol_account_t a;
  ol_account_init(&a, 0);
  const ol_trace_event_t events[] = {
    event_of(OL_TRACE_SEGMENT_MAP, job, chunk), event_of(OL_TRACE_SEGMENT_MAP, pool, chunk),
    event_of(OL_TRACE_SEGMENT_UNMAP, job, chunk), event_of(OL_TRACE_SEGMENT_UNMAP, pool, chunk),
  };
  for (size_t i = 0; i < sizeof events / sizeof *events; i++)
    ck_assert(ol_account_apply(&a, &events[i], NULL));
  const ol_device_stats_t *live = &snap->devices[0], *traced = &a.devices[0].stats;
  same_stat("vmm_mapped_bytes", &live->vmm_mapped_bytes, &traced->vmm_mapped_bytes);
  ck_assert_int_eq(traced->vmm_mapped_bytes.peak, 2 * (int64_t)chunk);
  same_pools("reserved_bytes", live->reserved_bytes, traced->reserved_bytes);
  same_pools("segment", live->segment, traced->segment);
  ol_account_free(&a);
  free(snap);
  ol_track_reset();
  labelled_sites = 0;
}
END_TEST

/* ---- observe: the tracker against `oomlens report` on the trace -------- */

typedef struct observe_case {
  const char *trace;
  uint64_t capacity; /* for the diagnosis at the trace's own oom event */
} observe_case_t;

static const observe_case_t observe_cases[] = {
  {"gpt2.csv.gz", 0},
  {"gpt2_varlen.csv.gz", 0},
  {"resnet50.csv.gz", 0},
  {"frag.csv.gz", 6 * GiB},
  {"oom_activations.csv.gz", 12 * GiB},
  {"oom_params.csv.gz", 8 * GiB},
};

#define VIEW_SITES (OL_REPORT_SITES_SHOWN * 4) /* as report_view.c lists a trace's */

typedef struct sites_check {
  const ol_report_sites_t *at_peak, *by_total; /* the report's lists */
  int64_t peak;                        /* the live tracker's peak allocated */
} sites_check_t;

/* The view's list (its frames joined back with ';') against the live
 * table's top sites, in the same order, with the same figures. */
static void same_list(const ol_sites_t *s, const ol_report_sites_t *list, ol_site_order_t order)
{
  int32_t top[VIEW_SITES];
  size_t n = ol_sites_top(s, order, top, VIEW_SITES);
  ck_assert_uint_gt(n, 0);
  ck_assert_uint_eq(n, list->count);
  for (size_t i = 0; i < n; i++) {
    const ol_report_site_t *site = &list->site[i];
    const ol_site_figures_t *f = ol_sites_figures(s, top[i]);
    ck_assert_int_eq(order == OL_SITES_BY_TOTAL ? f->total : f->at_peak, site->bytes);
    ck_assert_int_eq(f->allocations, site->allocations);
    char frames[1024] = "", live[1024];
    for (size_t k = 0; k < site->frames.count; k++)
      snprintf(frames + strlen(frames), sizeof frames - strlen(frames), "%s%s", k ? ";" : "",
               site->frames.frame[k]);
    key_text(s, top[i], live, sizeof live);
    ck_assert_str_eq(live, frames);
  }
}

static void check_sites(const ol_sites_t *s, void *arg)
{
  const sites_check_t *c = arg;
  same_list(s, c->at_peak, OL_SITES_BY_AT_PEAK);
  same_list(s, c->by_total, OL_SITES_BY_TOTAL);
  /* Exact, no longer within 1/256 of the peak: every byte live at the
   * peak belongs to one site. */
  int64_t sum = 0;
  for (size_t i = 0; i < ol_sites_count(s); i++)
    sum += ol_sites_figures(s, (int32_t)i)->at_peak;
  ck_assert_int_eq(sum, c->peak);
}

typedef struct oom_check {
  const ol_oom_record_t *live, *offline;
  const ol_sites_t *offline_sites;
} oom_check_t;

static void check_oom_sites(const ol_sites_t *live_sites, void *arg)
{
  const oom_check_t *c = arg;
  same_record(c->live, live_sites, c->offline, c->offline_sites);
}

/* At the trace's oom event: the live tracker's record against the one an
 * account fed the same events offline makes (ol_account_apply, what
 * ol_view_load_trace runs), both classified at the same capacity. */
static void diagnose_both(const ol_account_t *offline, const ol_trace_event_t *ev,
                          uint64_t capacity)
{
  ol_oom_record_t live = {.request = ev->size}, r = {.request = ev->size};
  ol_track_oom_figures(0, &live);
  device_figures(&live, capacity, live.reserved, -1, -1);
  ol_account_oom_figures(offline, 0, &r);
  device_figures(&r, capacity, r.reserved, -1, -1);
  /* This test's live keys are made from the frames text (key_of), not
   * from Python frames, so they name no role: the roles are the offline
   * account's here (role_capture checks a live job's roles against its
   * trace), and the rest of the record must agree. */
  live.roles_known = r.roles_known;
  memcpy(live.role_bytes, r.role_bytes, sizeof live.role_bytes);
  live.request_role_known = r.request_role_known;
  live.request_role = r.request_role;
  ck_assert_int_eq(ol_oom_classify(&live), ol_oom_classify(&r));
  ck_assert_int_gt(live.holder_count, 0);
  oom_check_t c = {&live, &r, ol_account_sites(offline, 0)};
  ck_assert(ol_track_sites(0, check_oom_sites, &c));
}

/* The hooks' calls for each event: tensors as a job's whose tensors we see
 * (manage mode, or PyTorch's cache off), PyTorch's segments as reserved
 * memory the tracker sees by handle (cuMemCreate). */
static void live_event(const ol_trace_event_t *ev)
{
  ol_site_key_t key;
  switch (ev->action) {
  case OL_TRACE_ALLOC:
    if (ev->size == 0)
      break;
    key_of(ev, &key);
    ck_assert_int_ge(ol_track_alloc_at(ev->addr, ev->size, 0, OL_KIND_MANAGED, ev->stream, &key,
                                       -1), 0);
    label_new_live_sites();
    break;
  case OL_TRACE_FREE_COMPLETED:
    ol_track_free(ev->addr, OL_KIND_MANAGED);
    break;
  case OL_TRACE_SEGMENT_ALLOC:
  case OL_TRACE_SEGMENT_MAP:
    ol_track_vmm_create(ev->addr, ev->size, 0);
    break;
  case OL_TRACE_SEGMENT_FREE:
  case OL_TRACE_SEGMENT_UNMAP:
    ol_track_vmm_release(ev->addr);
    break;
  case OL_TRACE_OOM:
    ol_track_failed_alloc(ev->size, 0, OL_KIND_RUNTIME, true, NULL);
    if (ev->oom_final) /* the recorder's: the job got its error there */
      ol_track_oom_settle(0);
    break;
  default:
    break;
  }
}

START_TEST(live_tracker_equals_the_report_of_its_trace)
{
  const observe_case_t *c = &observe_cases[_i];
  ol_track_reset();
  labelled_sites = 0;
  ol_account_t *offline = malloc(sizeof *offline);
  ck_assert_ptr_nonnull(offline);
  ol_account_init(offline, OL_ACCOUNT_SITES);
  ol_trace_t *t = open_trace(c->trace);
  ol_trace_event_t ev;
  ol_error_t err;
  int got, ooms = 0;
  while ((got = ol_trace_next(t, &ev, &err)) == 1) {
    live_event(&ev);
    ev.device = 0;
    ck_assert(ol_account_apply(offline, &ev, NULL));
    if (ev.action == OL_TRACE_OOM && c->capacity) {
      diagnose_both(offline, &ev, c->capacity);
      ooms++;
    }
  }
  ck_assert_msg(got == 0, "%s", err.text);
  ol_trace_close(t);
  ck_assert_int_eq(ooms, c->capacity ? 1 : 0);

  ol_report_t view;
  ck_assert_msg(ol_view_load_trace(&view, data_path(c->trace), &err) == 0, "%s", err.text);
  const ol_device_stats_t *live = live_stats(), *report = &view.devices[0].stats;
  same_allocations(live, report);
  same_pools("reserved_bytes", live->reserved_bytes, report->reserved_bytes);
  same_pools("segment", live->segment, report->segment);
  same_table(live, report, true);
  ck_assert_int_eq(report->failed_allocs, report->num_ooms); /* each OOM a failed allocation */
  same_allocations(live, &offline->devices[0].stats);
  ol_timeline_t tl;
  ck_assert(ol_track_timeline(0, &tl));
  ck_assert(view.devices[0].has_timeline);
  ck_assert_int_eq(tl.peak_allocated, view.devices[0].timeline.peak_allocated);
  ck_assert_int_eq(tl.peak_reserved, view.devices[0].timeline.peak_reserved);
  ck_assert_uint_eq(tl.oom_count, view.devices[0].timeline.oom_count);
  sites_check_t sc = {&view.devices[0].at_peak, &view.devices[0].by_total,
                      live->allocated_bytes[OL_POOL_ALL].peak};
  ck_assert(ol_track_sites(0, check_sites, &sc));
  ol_report_free(&view);
  ol_account_free(offline);
  free(offline);
  ol_track_reset();
  labelled_sites = 0;
}
END_TEST

/* ---- one peak: what the job held, whoever reads its trace ------------- */

/* The peak allocated of a trace is what the job held at its peak: a
 * request it was refused was never held, though replay's policy serves it
 * for an instant on its larger device (that is the policy's own figure,
 * stats.allocated_peak). Replay, the report of the trace and every export
 * give the same bytes; oom_activations' and frag's refused requests made
 * replay's differ. */
START_TEST(one_peak_for_replay_report_and_exports)
{
  const observe_case_t *c = &observe_cases[_i];
  ol_error_t err;
  ol_policy_options_t options = {.capacity = OL_REPLAY_DEFAULT_CAPACITY};
  ol_replay_result_t replayed;
  ck_assert_msg(ol_replay_file(data_path(c->trace), ol_policy_find("oomlens"), &options,
                               &replayed, &err) == 0, "%s", err.text);
  int64_t peak = replayed.peak_requested;
  ck_assert(!replayed.oom);
  ck_assert_int_ge(replayed.stats.allocated_peak, peak); /* the policy's: refused ones too */
  ol_replay_result_free(&replayed);

  ol_report_t view;
  ck_assert_msg(ol_view_load_trace(&view, data_path(c->trace), &err) == 0, "%s", err.text);
  ck_assert_int_eq(view.devices[0].stats.allocated_bytes[OL_POOL_ALL].peak, peak);
  ol_report_free(&view);

  FILE *sink = fopen("/dev/null", "w");
  ck_assert_ptr_nonnull(sink);
  for (int f = 0; f < OL_EXPORT_FORMAT_COUNT; f++) {
    ol_export_options_t eo = {.format = (ol_export_format_t)f, .device = -1};
    ol_export_result_t er;
    ck_assert_msg(ol_export_file(data_path(c->trace), sink, &eo, &er, &err) == 0, "%s",
                  err.text);
    ck_assert_msg(er.peak == peak, "%s, export %d: peak %lld, replay's %lld", c->trace, f,
                  (long long)er.peak, (long long)peak);
  }
  fclose(sink);
}
END_TEST

/* ---- manage: the tracker of a job our pool serves against replay ------ */

typedef struct replay_case {
  const char *trace, *policy;
  uint64_t capacity; /* 0: replay's default (an H200) */
  int expected;      /* the diagnosis known by construction; -1: no OOM */
} replay_case_t;

static const replay_case_t replay_cases[] = {
  {"gpt2.csv.gz", "oomlens", 0, -1},
  {"gpt2_varlen.csv.gz", "oomlens", 0, -1},
  {"resnet50.csv.gz", "pytorch", 0, -1},
  {"frag.csv.gz", "oomlens", 0, -1},
  {"oom_activations.csv.gz", "oomlens", 0, -1}, /* its recorded OOM fits: not held */
  {"oom_params.csv.gz", "pytorch", 8 * GiB, OL_OOM_persistent},
  {"oom_params.csv.gz", "oomlens", 8 * GiB, OL_OOM_persistent},
  {"oom_activations.csv.gz", "pytorch", 12 * GiB, OL_OOM_activations},
  {"oom_activations.csv.gz", "oomlens", 12 * GiB, OL_OOM_activations},
  {"frag.csv.gz", "pytorch", 6 * GiB, OL_OOM_fragmentation},
};

/* A job in manage mode, as this process: the policy serves each tensor,
 * the tracker records it (OL_KIND_MANAGED) and the pool's reserved memory
 * (ol_track_pool_mapped); trace addresses map to the policy's. */
typedef struct job {
  const ol_policy_ops_t *ops;
  ol_policy_t *policy;
  ol_records_t addresses; /* by trace address; value: the policy's */
  int64_t reserved;       /* told to the tracker so far */
  uint64_t events;
  bool oom;
  uint64_t oom_index;
  ol_oom_record_t record;
  ol_oom_class_t cause;
} job_t;

static void pool_changed(job_t *j)
{
  ol_policy_stats_t st;
  j->ops->stats(j->policy, &st);
  if (st.reserved != j->reserved)
    ol_track_pool_mapped(0, 0, st.reserved - j->reserved);
  j->reserved = st.reserved;
}

/* As oom_live.c at a failed allocation in manage mode: the tracker's
 * figures, the device's capacity, the pool's free blocks. */
static void job_ran_out(job_t *j, const ol_trace_event_t *ev, uint64_t capacity)
{
  pool_changed(j); /* a failing pool may have let go of its cache first */
  ol_policy_stats_t st;
  j->ops->stats(j->policy, &st);
  if (ev->action != OL_TRACE_OOM) { /* a recorded failure was counted as it came */
    ol_track_failed_alloc(ev->size, 0, OL_KIND_RUNTIME, true, NULL);
    ol_track_oom_settle(0); /* the job gives up here */
  }
  j->record = (ol_oom_record_t){.request = ev->size};
  ol_track_oom_figures(0, &j->record);
  device_figures(&j->record, capacity, j->record.reserved, st.free_reserved,
                 st.largest_free_block);
  j->record.managed = strcmp(j->ops->name, "oomlens") == 0;
  j->cause = ol_oom_classify(&j->record);
  j->oom = true;
  j->oom_index = j->events - 1;
}

static void job_free(job_t *j, uint64_t trace_addr)
{
  ol_record_t gone;
  if (!ol_records_take(&j->addresses, trace_addr, &gone)) {
    ol_track_free(trace_addr, OL_KIND_MANAGED); /* unknown to both */
    return;
  }
  ol_track_free(gone.value, OL_KIND_MANAGED);
  j->ops->free(j->policy, gone.value);
  pool_changed(j);
}

/* false: the policy ran out (the job's OOM). */
static bool job_event(job_t *j, const ol_trace_event_t *ev, uint64_t capacity)
{
  ol_site_key_t key;
  uint64_t addr;
  j->events++;
  bool is_oom = ev->action == OL_TRACE_OOM;
  if ((ev->action != OL_TRACE_ALLOC && !is_oom) || ev->size == 0) {
    if (ev->action == OL_TRACE_FREE_COMPLETED)
      job_free(j, ev->addr);
    return true;
  }
  if (!is_oom && ol_records_find(&j->addresses, ev->addr))
    job_free(j, ev->addr);
  if (is_oom) { /* the recorded job's failure, counted as it counted it */
    ol_track_failed_alloc(ev->size, 0, OL_KIND_RUNTIME, true, NULL);
    if (ev->oom_final)
      ol_track_oom_settle(0);
  }
  if (j->ops->alloc(j->policy, ev->size, ev->stream, &addr) != 0) {
    job_ran_out(j, ev, capacity);
    return false;
  }
  if (is_oom) { /* it fits this policy; the job was refused it and never held it */
    j->ops->free(j->policy, addr);
  } else {
    key_of(ev, &key);
    ol_track_alloc_at(addr, ev->size, 0, OL_KIND_MANAGED, ev->stream, &key, -1);
    label_new_live_sites();
    ol_record_t *rec = ol_records_add(&j->addresses, ev->addr);
    ck_assert_ptr_nonnull(rec);
    rec->value = addr;
  }
  pool_changed(j);
  return true;
}

static void same_sites(const ol_sites_t *live, const ol_sites_t *offline)
{
  ck_assert_uint_eq(ol_sites_count(live), ol_sites_count(offline));
  for (size_t i = 0; i < ol_sites_count(live); i++) {
    char text[1024];
    key_text(live, (int32_t)i, text, sizeof text);
    ck_assert_str_eq(text, ol_sites_key(offline, (int32_t)i));
    const ol_site_figures_t *a = ol_sites_figures(live, (int32_t)i);
    const ol_site_figures_t *b = ol_sites_figures(offline, (int32_t)i);
    ck_assert_int_eq(a->allocations, b->allocations);
    ck_assert_int_eq(a->current, b->current);
    ck_assert_int_eq(a->peak, b->peak);
    ck_assert_int_eq(a->at_peak, b->at_peak);
    ck_assert_int_eq(a->total, b->total);
    ck_assert(a->valley_seen == b->valley_seen);
    ck_assert_int_eq(a->first_valley, b->first_valley);
    ck_assert_int_eq(a->last_valley, b->last_valley);
  }
}

typedef struct replay_check {
  const ol_replay_result_t *result;
  const job_t *job;
} replay_check_t;

static void check_replay_sites(const ol_sites_t *live, void *arg)
{
  const replay_check_t *c = arg;
  same_sites(live, c->result->sites);
  if (c->job->oom)
    same_record(&c->job->record, live, &c->result->oom_at.record, c->result->sites);
}

START_TEST(live_tracker_equals_replay)
{
  const replay_case_t *c = &replay_cases[_i];
  uint64_t capacity = c->capacity ? c->capacity : OL_REPLAY_DEFAULT_CAPACITY;
  ol_policy_options_t options = {.capacity = capacity};
  ol_replay_result_t result;
  ol_error_t err;
  ck_assert_msg(ol_replay_file(data_path(c->trace), ol_policy_find(c->policy), &options, &result,
                               &err) == 0, "%s", err.text);

  ol_track_reset();
  labelled_sites = 0;
  job_t j = {.ops = ol_policy_find(c->policy)};
  j.policy = j.ops->create(&options);
  ck_assert_ptr_nonnull(j.policy);
  ol_records_init(&j.addresses);
  ol_trace_t *t = open_trace(c->trace);
  ol_trace_event_t ev;
  int got;
  while ((got = ol_trace_next(t, &ev, &err)) == 1 && job_event(&j, &ev, capacity))
    ;
  ck_assert_msg(got >= 0, "%s", err.text);
  ol_trace_close(t);

  ck_assert(j.oom == result.oom);
  ck_assert_int_eq(j.oom, c->expected >= 0);
  if (j.oom) {
    ck_assert_uint_eq(j.oom_index, result.oom_at.event_index);
    ck_assert_int_eq(j.cause, result.oom_at.cause);
    ck_assert_msg(j.cause == (ol_oom_class_t)c->expected, "%s under %s: %s", c->trace,
                  c->policy, ol_oom_class_name(j.cause));
  }
  const ol_device_stats_t *live = live_stats();
  same_allocations(live, &result.account->devices[0].stats);
  ol_device_stats_t replayed;
  ol_account_stats(result.account, 0, &replayed);
  same_table(live, &replayed, false);
  ck_assert_int_eq(live->allocated_bytes[OL_POOL_ALL].peak, result.peak_requested);
  ck_assert_int_eq(live->reserved_bytes[OL_POOL_ALL].current,
                   j.oom ? result.oom_at.stats.reserved : result.stats.reserved);
  replay_check_t rc = {&result, &j};
  ck_assert(ol_track_sites(0, check_replay_sites, &rc));

  j.ops->destroy(j.policy);
  ol_records_free(&j.addresses);
  ol_replay_result_free(&result);
  ol_track_reset();
  labelled_sites = 0;
}
END_TEST

static Suite *account_suite(void)
{
  Suite *s = suite_create("account");
  TCase *rules = tcase_create("rules");
  tcase_add_test(rules, lazy_at_peak_equals_a_copy_at_each_mark);
  tcase_add_test(rules, a_stale_block_is_freed_first);
  tcase_add_test(rules, the_failed_request_names_its_role);
  tcase_add_test(rules, a_first_backward_counts_the_gradients_it_makes);
  tcase_add_test(rules, a_refused_optimizer_request_begins_the_step);
  tcase_add_test(rules, blocks_kept_from_earlier_iterations_are_growth);
  tcase_add_test(rules, one_block_kept_from_mid_run_is_growth_of_one_age);
  tcase_add_test(rules, a_cache_made_once_is_no_step_s_block);
  tcase_add_test(rules, a_block_kept_in_the_last_step_is_held_since_it);
  tcase_add_test(rules, what_the_step_before_tells_weighs_with_the_grower);
  tcase_add_test(rules, copies_made_before_the_first_forward_are_early);
  tcase_add_test(rules, the_state_by_timing_is_what_is_still_live);
  tcase_add_test(rules, a_job_that_loads_again_after_an_oom_starts_again);
  tcase_add_test(rules, a_job_that_keeps_its_model_after_an_oom_goes_on);
  tcase_add_test(rules, ddp_buckets_are_state_beside_the_gradients_being_made);
  tcase_add_test(rules, copies_of_the_parameters_by_their_sizes);
  tcase_add_test(rules, a_request_of_a_parameter_s_size);
  tcase_add_test(rules, shared_sites_peak_over_devices);
  tcase_add_test(rules, reserved_memory_never_below_zero);
  tcase_add_test(rules, mapped_memory_live_equals_trace);
  tcase_add_test(rules, notes_and_ooms_at_their_time);
  tcase_add_test(rules, failure_verdicts);
  tcase_add_test(rules, a_request_of_the_foreach_update_is_told_in_a_trace);
  suite_add_tcase(s, rules);
  TCase *traces = tcase_create("live_equals_offline");
  tcase_set_timeout(traces, 120);
  tcase_add_loop_test(traces, live_tracker_equals_the_report_of_its_trace, 0,
                      sizeof observe_cases / sizeof *observe_cases);
  tcase_add_loop_test(traces, live_tracker_equals_replay, 0,
                      sizeof replay_cases / sizeof *replay_cases);
  tcase_add_loop_test(traces, one_peak_for_replay_report_and_exports, 0,
                      sizeof observe_cases / sizeof *observe_cases);
  suite_add_tcase(s, traces);
  return s;
}

int main(void)
{
  return ol_run_suite(account_suite());
}
