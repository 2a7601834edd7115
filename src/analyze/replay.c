/* replay.c: drives a policy with a trace's tensor-level events (replay.h).
 * What the trace asked for (live blocks, bytes, peaks, iterations, call
 * sites) is counted by an ol_account_t (core/account.c), the model the live
 * tracker counts with, so replay's figures and diagnosis are the job's. A
 * trace address maps to the policy's address through the account's table
 * of live blocks (the record's value; open addressing, no allocation per
 * entry), so a replay runs in memory proportional to what is live, never
 * to the trace's length. One simulated device: every event counts on the
 * account's device 0.
 *
 * Replaying our pool on a trace of manage mode follows what the live pool
 * did, so that the driver calls it counts are the job's: a block the live
 * pool kept behind a fence after its free (a pool_held line, while the job
 * had streams besides the default one) returns to the replayed pool at its
 * pool_freed line, not at its free; an allocation the live pool left to
 * the driver (its own segment_alloc in a trace whose header says manage=1)
 * is not the replayed pool's either. */
#include "replay.h"
#include "core.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace_csv.h"

/* ---- the replay -------------------------------------------------------- */

#define DEFERRED_MAX 16
/* The value of a block the live pool left to the driver: no policy address. */
#define DRIVER_BLOCK UINT64_MAX

typedef struct replay {
  const ol_policy_ops_t *ops;
  ol_policy_t *policy;
  ol_account_t *account; /* the result's */
  uint64_t capacity;
  ol_replay_result_t *result;
  const ol_replay_extras_t *extras;
  ol_replay_recorded_t failing; /* the recorded failure awaiting its verdict */
  uint64_t calls_cap;           /* room in result->calls_at */
  bool calls_lost;              /* host memory ran out for them */
  /* Following the live pool (our policy on a trace of manage mode): */
  bool follow_pool;             /* the oomlens policy: the trace's pool lines are followed */
  bool reuse_held;              /* ... but for pool_held, with options.reuse_held */
  bool managed;                 /* the trace's header says manage=1 */
  uint64_t driver_segment;      /* the address of a segment_alloc just read, 0 none */
  bool stopped; /* the policy ran out and the replay ended there */
  /* Frees the account has counted but the policy has not yet been given:
   * the live pool's pool_held line for one comes after its free. Given to
   * the policy, oldest first, before its next allocation. */
  ol_record_t deferred[DEFERRED_MAX];
  int deferred_count;
  ol_records_t held; /* trace address -> the policy's (value), behind the live pool's fence */
  /* The job's allocator's segments (segment_alloc/free: PyTorch's cache
   * asking cudaMalloc), to find the free pieces inside them at a recorded
   * OOM; a trace with mapped segments (VMM) gives no such figure. */
  ol_records_t segments;
  bool segments_mapped;
  bool segments_lost; /* host memory ran out for them */
} replay_t;

/* The same diagnosis a live job gets (the account's figures), with what a
 * simulated device says: no one else is on it, so its free memory is what
 * the policy has not reserved, and its reserved memory is the policy's. */
static void diagnose(replay_t *r, ol_replay_oom_t *o)
{
  const ol_policy_stats_t *st = &o->stats;
  o->record = (ol_oom_record_t){
    .request = o->size,
    .capacity = r->capacity,
    .device_free = (int64_t)r->capacity - st->reserved,
    .free_reserved = st->free_reserved,
    .largest_free_block = st->largest_free_block,
    .external = 0,
  };
  ol_account_oom_figures(r->account, 0, &o->record);
  o->record.reserved = st->reserved;
  o->record.managed = strcmp(r->ops->name, "oomlens") == 0;
  ol_oom_set_batch(&o->record, r->extras ? (int64_t)r->extras->batch : 0);
  o->cause = ol_oom_classify(&o->record);
}

/* Told to replay as a job without call sites (extras.no_sites). */
static bool without_sites(const replay_t *r)
{
  return r->extras && r->extras->no_sites;
}

/* An event's frames, none where the replay runs without them. */
static size_t frames_len_of(const replay_t *r, const ol_trace_event_t *ev)
{
  return without_sites(r) ? 0 : ev->frames_len;
}

static int32_t site_of(replay_t *r, const ol_trace_event_t *ev)
{
  size_t len = frames_len_of(r, ev);
  return ol_account_site(r->account, 0, len && ev->frames ? ev->frames : "", len, NULL);
}

static void ran_out(replay_t *r, const ol_trace_event_t *ev, bool recorded)
{
  ol_replay_result_t *res = r->result;
  res->oom = true;
  res->oom_at = (ol_replay_oom_t){
    .event_index = res->events - 1,
    .line = ev->line,
    .size = ev->size,
    .recorded = recorded,
  };
  r->ops->stats(r->policy, &res->oom_at.stats);
  if (!recorded) { /* the policy's own: counted as the live tracker counts a job's */
    ol_account_oom_at(r->account, 0, ev->size, ev->time_us * 1000, 0);
    ol_account_oom_site(r->account, 0, frames_len_of(r, ev) ? site_of(r, ev) : -1);
    ol_account_oom_settle(r->account, 0);
  }
  diagnose(r, &res->oom_at);
}

/* ---- the recorded job's out-of-memory ----------------------------------- */

/* The trace's events without frames share one site of no frames: not a
 * call site to name (the job, stacks off, named none). */
static bool frameless(const ol_sites_t *sites, int32_t id)
{
  size_t len = 0;
  return !sites || !ol_sites_key_bytes(sites, id, &len) || len == 0;
}

static void drop_frameless_sites(const ol_sites_t *sites, ol_oom_record_t *rec)
{
  int kept = 0;
  for (int i = 0; i < rec->holder_count; i++)
    if (!frameless(sites, rec->holders[i].id))
      rec->holders[kept++] = rec->holders[i];
  rec->holder_count = kept;
  if (rec->grower.id >= 0 && frameless(sites, rec->grower.id))
    rec->grower = (ol_oom_site_t){-1, 0};
}

void ol_replay_attempt_record(const ol_account_t *a, uint64_t request, ol_oom_record_t *out)
{
  ol_oom_record_init(out, request);
  ol_account_oom_figures(a, 0, out);
  drop_frameless_sites(a->devices[0].sites, out);
}

/* ---- free pieces inside the job's segments ------------------------------ */

typedef struct span {
  uint64_t addr, size;
} span_t;

typedef struct spans {
  span_t *at;
  size_t count, cap;
  bool lost;
} spans_t;

static void collect_span(const ol_record_t *rec, void *arg)
{
  spans_t *s = arg;
  if (s->count == s->cap) {
    span_t *grown = ol_grow_array(s->at, &s->cap, sizeof *grown, 256);
    if (!grown) {
      s->lost = true;
      return;
    }
    s->at = grown;
  }
  s->at[s->count++] = (span_t){rec->key, rec->size};
}

static int by_address(const void *a, const void *b)
{
  uint64_t x = ((const span_t *)a)->addr, y = ((const span_t *)b)->addr;
  return (x > y) - (x < y);
}

/* Free bytes inside the segments and the largest free piece, from the
 * live blocks (both sorted by address); false when a block straddles a
 * segment's end or lies outside every segment (not PyTorch's layout). */
static bool sweep_pieces(const spans_t *segs, const spans_t *live, int64_t *free_bytes,
                         int64_t *largest)
{
  size_t b = 0;
  *free_bytes = *largest = 0;
  for (size_t i = 0; i < segs->count; i++) {
    uint64_t at = segs->at[i].addr, end = at + segs->at[i].size;
    if (b < live->count && live->at[b].addr < at)
      return false;
    for (; b < live->count && live->at[b].addr < end; b++) {
      if (live->at[b].addr < at || live->at[b].addr + live->at[b].size > end)
        return false;
      uint64_t gap = live->at[b].addr - at;
      *free_bytes += (int64_t)gap;
      if ((int64_t)gap > *largest)
        *largest = (int64_t)gap;
      at = live->at[b].addr + live->at[b].size;
    }
    *free_bytes += (int64_t)(end - at);
    if ((int64_t)(end - at) > *largest)
      *largest = (int64_t)(end - at);
  }
  return b == live->count;
}

/* A PyTorch recorder trace says where each segment and each tensor lies:
 * the free pieces at a recorded OOM follow, so the diagnosis can tell
 * memory free but in pieces (shared trace frag: 1.61 GiB free, largest
 * piece 903 MiB, a 1.01 GiB request) from what the job kept, as the live
 * report under --manage would. */
static void recorded_pieces(replay_t *r, ol_oom_record_t *rec)
{
  if (r->segments_mapped || r->segments_lost || ol_records_count(&r->segments) == 0)
    return;
  spans_t segs = {0}, live = {0};
  ol_records_each(&r->segments, collect_span, &segs);
  ol_records_each(&r->account->blocks, collect_span, &live);
  int64_t free_bytes, largest;
  if (!segs.lost && !live.lost) {
    qsort(segs.at, segs.count, sizeof *segs.at, by_address);
    qsort(live.at, live.count, sizeof *live.at, by_address);
    if (sweep_pieces(&segs, &live, &free_bytes, &largest)) {
      rec->free_reserved = free_bytes;
      rec->largest_free_block = largest;
    }
  }
  free(segs.at);
  free(live.at);
}

static void note_segment(replay_t *r, const ol_trace_event_t *ev)
{
  if (ev->action == OL_TRACE_SEGMENT_MAP || ev->action == OL_TRACE_SEGMENT_UNMAP) {
    r->segments_mapped = true;
  } else if (ev->action == OL_TRACE_SEGMENT_ALLOC) {
    ol_record_t *rec = ol_records_add(&r->segments, ev->addr);
    if (rec)
      rec->size = ev->size;
    else
      r->segments_lost = true;
  } else {
    ol_record_t gone;
    ol_records_take(&r->segments, ev->addr, &gone);
  }
}

/* What the account knows at a recorded failed attempt: the record the job
 * took then, less what only the job could see (its oom_context line). */
static void recorded_failure(replay_t *r, const ol_trace_event_t *ev)
{
  ol_replay_recorded_t *f = &r->failing;
  *f = (ol_replay_recorded_t){.line = ev->line, .size = ev->size, .job_cause = OL_OOM_CLASS_COUNT};
  ol_replay_attempt_record(r->account, ev->size, &f->record);
  recorded_pieces(r, &f->record);
}

/* Without the job's context the device is the replayed one: its capacity,
 * nothing known free or held outside (the text says so). */
static void classify_recorded(replay_t *r, ol_replay_recorded_t *o)
{
  if (!o->has_context)
    o->record.capacity = r->capacity;
  if (r->extras && r->extras->batch > 0) /* given to replay: wins over what the job said */
    ol_oom_set_batch(&o->record, (int64_t)r->extras->batch);
  o->cause = ol_oom_classify(&o->record);
}

/* The account settled the waiting failure: an OOM the job saw; context,
 * the trace's oom_context line for it (NULL: none came). */
static void recorded_settled(replay_t *r, const ol_trace_event_t *context)
{
  ol_replay_result_t *res = r->result;
  res->recorded = true;
  res->recorded_ooms++;
  res->recorded_oom = r->failing;
  ol_replay_recorded_t *o = &res->recorded_oom;
  if (context) {
    ol_oom_context_apply(&o->record, context->context);
    o->has_context = true;
    o->job_cause = context->context_class;
  }
  classify_recorded(r, o);
}

/* An oom_context line: the job settled its failure. One that comes after
 * the account settled it (the job's record came late) completes it. */
static void on_context(replay_t *r, const ol_trace_event_t *ev)
{
  ol_replay_recorded_t *o = &r->result->recorded_oom;
  if (ol_account_oom_settle(r->account, 0)) {
    recorded_settled(r, ev);
  } else if (r->result->recorded && !o->has_context && o->size == ev->size) {
    ol_oom_context_apply(&o->record, ev->context);
    o->has_context = true;
    o->job_cause = ev->context_class;
    classify_recorded(r, o);
  }
}

/* The verdict on a recorded failure, as the live tracker gives it. */
static void recorded_verdict(replay_t *r, ol_oom_verdict_t verdict)
{
  if (verdict == OL_VERDICT_OOM)
    recorded_settled(r, NULL);
}

/* ---- following the live pool ------------------------------------------ */

static void give_deferred(replay_t *r)
{
  for (int i = 0; i < r->deferred_count; i++)
    r->ops->free(r->policy, r->deferred[i].value);
  r->deferred_count = 0;
}

/* A free the live pool may yet say it held: kept back until the policy's
 * next allocation (or the pool_held line). */
static void defer_free(replay_t *r, const ol_record_t *gone)
{
  if (r->deferred_count == DEFERRED_MAX) {
    r->ops->free(r->policy, r->deferred[0].value);
    memmove(r->deferred, r->deferred + 1, sizeof r->deferred[0] * (DEFERRED_MAX - 1));
    r->deferred_count--;
  }
  r->deferred[r->deferred_count++] = *gone;
}

/* pool_held: the block freed at trace_addr waits behind the live pool's
 * fence. A line whose free was given to the policy already (a line out of
 * order, which the live pool's lock rules out) is not followed. -1: out of
 * host memory. */
static int on_pool_held(replay_t *r, uint64_t trace_addr)
{
  for (int i = 0; i < r->deferred_count; i++) {
    if (r->deferred[i].key != trace_addr)
      continue;
    ol_record_t *rec = ol_records_add(&r->held, trace_addr);
    if (!rec)
      return -1;
    rec->value = r->deferred[i].value;
    memmove(r->deferred + i, r->deferred + i + 1,
            sizeof r->deferred[0] * (size_t)(r->deferred_count - i - 1));
    r->deferred_count--;
    r->result->held_frees++;
    break;
  }
  return 1;
}

/* pool_freed: the live pool took the block back. */
static void on_pool_freed(replay_t *r, uint64_t trace_addr)
{
  ol_record_t rec;
  if (ol_records_take(&r->held, trace_addr, &rec))
    r->ops->free(r->policy, rec.value);
}

/* An allocation at the address of a held block: the live pool handed it
 * out again from behind its fence (a stream-ordered free reused on its
 * stream), never through the pool. */
static bool take_held(replay_t *r, uint64_t trace_addr, uint64_t *addr)
{
  ol_record_t rec;
  if (!ol_records_take(&r->held, trace_addr, &rec))
    return false;
  *addr = rec.value;
  return true;
}

/* The live pool left this allocation to the driver: it came with its own
 * segment in a trace of manage mode. */
static bool left_to_driver(replay_t *r, const ol_trace_event_t *ev)
{
  bool driver = r->follow_pool && r->managed && r->driver_segment == ev->addr && ev->addr;
  r->driver_segment = 0;
  return driver;
}

/* 0 and *addr set: the policy's block for the request; -1 it ran out. */
static int policy_block(replay_t *r, const ol_trace_event_t *ev, uint64_t *addr)
{
  if (left_to_driver(r, ev)) {
    *addr = DRIVER_BLOCK;
    r->result->driver_allocs++;
    return 0;
  }
  give_deferred(r);
  if (take_held(r, ev->addr, addr))
    return 0;
  return r->ops->alloc(r->policy, ev->size, ev->stream, addr);
}

/* A tensor the trace let go of (or, at an address allocated again, one it
 * never freed: released so that the two cannot be confused). False when
 * nothing is live at that address. */
static bool forget(replay_t *r, uint64_t trace_addr)
{
  ol_record_t gone;
  if (!ol_account_release(r->account, trace_addr, 0, &gone))
    return false;
  if (gone.value == DRIVER_BLOCK)
    return true;
  gone.key = trace_addr;
  if (r->follow_pool)
    defer_free(r, &gone);
  else
    r->ops->free(r->policy, gone.value);
  return true;
}

/* 1 served, 0 out of device memory, -1 out of host memory. */
static int on_alloc(replay_t *r, const ol_trace_event_t *ev)
{
  if (ev->size == 0) {
    r->result->zero_allocs++;
    return 1;
  }
  if (ol_account_waiting(r->account, 0))
    recorded_verdict(r, ol_account_served(r->account, 0, ev->size));
  if (ol_records_find(&r->account->blocks, ev->addr))
    forget(r, ev->addr); /* before the policy allocates: its memory is free again */
  uint64_t addr;
  if (policy_block(r, ev, &addr) != 0)
    return 0;
  ol_record_t block = {.key = ev->addr, .size = ev->size, .stream = ev->stream,
                       .site = site_of(r, ev), .kind = OL_ORIGIN_NONE, .value = addr,
                       .signature_plus1 = without_sites(r) ? 0 : ev->site_plus1};
  ol_record_t stale;
  bool replaced;
  if (!ol_account_alloc(r->account, &block, &stale, &replaced))
    return -1;
  r->result->allocs++;
  return 1;
}

static void on_free(replay_t *r, const ol_trace_event_t *ev)
{
  if (forget(r, ev->addr))
    r->result->frees++;
  else
    r->result->unknown_frees++;
}

/* The recorded run failed here: the policy gets the same request, to say
 * whether it would have fitted, and gives it back at once. The account
 * does not count it: the job never held it, so the peak allocated stays
 * what the job held (the policy's own figures, stats.allocated_peak and
 * reserved_peak, count it). */
static int on_oom(replay_t *r, const ol_trace_event_t *ev)
{
  r->result->trace_ooms++;
  recorded_verdict(r, ol_account_oom_at(r->account, 0, ev->size, ev->time_us * 1000, 0));
  ol_account_oom_site(r->account, 0, frames_len_of(r, ev) ? site_of(r, ev) : -1);
  recorded_failure(r, ev);
  if (ev->oom_final && ol_account_oom_settle(r->account, 0))
    recorded_settled(r, NULL);
  uint64_t addr;
  if (ev->size == 0)
    return 1;
  give_deferred(r);
  if (r->ops->alloc(r->policy, ev->size, ev->stream, &addr) != 0)
    return 0;
  r->ops->free(r->policy, addr);
  return 1;
}

/* An iteration ended (the account found it): the policy's driver calls so
 * far, for the steady state's count. Without host memory for them the
 * replay goes on with no per-iteration figures. */
static void note_iterations(replay_t *r)
{
  ol_replay_result_t *res = r->result;
  uint64_t ended = r->account->devices[0].stats.phases.iterations;
  if (ended < res->calls_count) /* a longer repeat took over: recounted, its ends not known */
    res->calls_count = 0;
  if (ended <= res->calls_count || r->calls_lost)
    return;
  if (ended > r->calls_cap) {
    uint64_t cap = r->calls_cap ? r->calls_cap * 2 : 64;
    while (cap < ended)
      cap *= 2;
    ol_policy_calls_t *grown = realloc(res->calls_at, cap * sizeof *grown);
    if (!grown) {
      free(res->calls_at);
      res->calls_at = NULL;
      res->calls_count = 0;
      r->calls_lost = true;
      return;
    }
    res->calls_at = grown;
    r->calls_cap = cap;
  }
  ol_policy_stats_t st;
  r->ops->stats(r->policy, &st);
  while (res->calls_count < ended)
    res->calls_at[res->calls_count++] = st.calls;
}

int64_t ol_policy_calls_total(const ol_policy_calls_t *c)
{
  return c->creates + c->maps + c->unmaps + c->releases + c->mallocs + c->frees;
}

static ol_policy_calls_t calls_between(const ol_policy_calls_t *from, const ol_policy_calls_t *to)
{
  return (ol_policy_calls_t){to->creates - from->creates, to->maps - from->maps,
                             to->unmaps - from->unmaps, to->releases - from->releases,
                             to->mallocs - from->mallocs, to->frees - from->frees};
}

void ol_replay_steady(const ol_replay_result_t *result, ol_replay_steady_t *out)
{
  *out = (ol_replay_steady_t){.of = result->calls_count};
  uint64_t n = result->calls_count;
  if (n < 2)
    return;
  uint64_t first = n / 2; /* iteration i spans calls_at[i-1] to calls_at[i] */
  out->iterations = n - first;
  out->calls = calls_between(&result->calls_at[first - 1], &result->calls_at[n - 1]);
  for (uint64_t i = first; i < n; i++) {
    ol_policy_calls_t one = calls_between(&result->calls_at[i - 1], &result->calls_at[i]);
    if (ol_policy_calls_total(&one) > ol_policy_calls_total(&out->worst))
      out->worst = one;
  }
}

/* 1 go on, 0 the policy ran out, -1 out of host memory. */
static int apply(replay_t *r, const ol_trace_event_t *ev)
{
  int served = 1;
  switch (ev->action) {
  case OL_TRACE_ALLOC:
    served = on_alloc(r, ev);
    break;
  case OL_TRACE_FREE_COMPLETED:
    on_free(r, ev);
    break;
  case OL_TRACE_OOM:
    served = on_oom(r, ev);
    break;
  case OL_TRACE_OOM_CONTEXT:
    on_context(r, ev);
    break;
  case OL_TRACE_POOL_HELD:
    /* OOMLENS_POOL_REUSE_HELD=1 gives the batch back before the next
     * request: modelled by not holding it, on a trace made without */
    served = r->reuse_held ? 1 : on_pool_held(r, ev->addr);
    break;
  case OL_TRACE_POOL_FREED:
    on_pool_freed(r, ev->addr);
    break;
  case OL_TRACE_SEGMENT_ALLOC:
  case OL_TRACE_SEGMENT_FREE:
  case OL_TRACE_SEGMENT_MAP:
  case OL_TRACE_SEGMENT_UNMAP: { /* the job's reserved memory; the policy makes its own */
    if (ev->action == OL_TRACE_SEGMENT_ALLOC)
      r->driver_segment = ev->addr;
    note_segment(r, ev);
    ol_trace_event_t on_device = *ev;
    on_device.device = 0;
    ol_account_apply(r->account, &on_device, NULL);
    break;
  }
  default: /* free_requested */
    break;
  }
  if (served == 0)
    ran_out(r, ev, ev->action == OL_TRACE_OOM);
  else if (ev->action == OL_TRACE_ALLOC)
    note_iterations(r);
  return served;
}

/* After a stop, an event read only for the job's verdict on its waiting
 * failure: its oom_context line, its next request, another failure. */
static void verdict_from(replay_t *r, const ol_trace_event_t *ev)
{
  if (ev->action == OL_TRACE_OOM_CONTEXT)
    on_context(r, ev);
  else if (ev->action == OL_TRACE_ALLOC)
    recorded_verdict(r, ol_account_served(r->account, 0, ev->size));
  else if (ev->action == OL_TRACE_OOM && ev->size != r->failing.size &&
           ol_account_oom_settle(r->account, 0))
    recorded_settled(r, NULL);
}

/* The trace ends (or cannot be read on) on the failure: the job's last
 * word. */
static void verdict_at_end(replay_t *r)
{
  if (ol_account_waiting(r->account, 0) && ol_account_oom_settle(r->account, 0))
    recorded_settled(r, NULL);
}

/* The policy ran out where the recorded job had not: the replay stops
 * there (its figures are the policy's moment), but the job's verdict on
 * its own waiting failure, if any, lies ahead: the next request, its
 * oom_context line, or the trace's end. Nothing else read is counted. */
static int verdict_after_stop(replay_t *r, ol_trace_t *trace, ol_error_t *err)
{
  ol_trace_event_t ev;
  int got = 0;
  r->stopped = true;
  const ol_replay_extras_t *x = r->extras;
  while (ol_account_waiting(r->account, 0) && (got = ol_trace_next(trace, &ev, err)) == 1) {
    if (x->device < 0 || ev.device == x->device)
      verdict_from(r, &ev);
  }
  if (got < 0)
    ol_error_clear(err); /* the replay's answer stands; only the verdict was not read */
  verdict_at_end(r);
  return 0;
}

/* ---- a job that went on from its OOM ----------------------------------- */

/* Events read past the job's OOM, kept until its next request says
 * whether it went on (a copy: the reader's frames and context last until
 * its next call; none of these events is read for its frames). */
typedef struct kept_event {
  ol_trace_event_t ev;
  ol_oom_record_t context;
} kept_event_t;

typedef struct kept_events {
  kept_event_t *items;
  size_t count, cap;
} kept_events_t;

static bool keep_event(kept_events_t *k, const ol_trace_event_t *ev)
{
  if (k->count == k->cap) {
    kept_event_t *grown = ol_grow_array(k->items, &k->cap, sizeof *grown, 64);
    if (!grown)
      return false;
    k->items = grown;
  }
  kept_event_t *e = &k->items[k->count++];
  e->ev = *ev;
  e->ev.frames = NULL;
  e->ev.frames_len = 0;
  if (ev->context)
    e->context = *ev->context;
  return true;
}

/* Kept event i, its context (if it had one) its own copy: pointed at here,
 * since the array moves as it grows. */
static const ol_trace_event_t *kept_at(kept_events_t *k, size_t i)
{
  kept_event_t *e = &k->items[i];
  if (e->ev.context)
    e->ev.context = &e->context;
  return &e->ev;
}

/* Reads on past the job's OOM to its next request: 1 and *next the
 * request (the job went on: a batch size search, a trainer that skips the
 * batch), 0 the trace's end (the job ended with its OOM), -1 out of host
 * memory. A trace that cannot be read on ends there (the replay's answer
 * stands). */
static int next_request(replay_t *r, ol_trace_t *trace, kept_events_t *kept,
                        ol_trace_event_t *next, ol_error_t *err)
{
  int got;
  const ol_replay_extras_t *x = r->extras;
  while ((got = ol_trace_next(trace, next, err)) == 1) {
    if (x->device >= 0 && next->device != x->device)
      continue;
    if (next->action == OL_TRACE_ALLOC || next->action == OL_TRACE_OOM)
      return 1;
    if (!keep_event(kept, next))
      return -1;
  }
  if (got < 0)
    ol_error_clear(err);
  return 0;
}

/* The job ended with its OOM: as at a stop, the verdict only (its
 * oom_context line, or the end); its frees at exit are not counted, so
 * the figures stay those of the OOM. */
static void ended_at_oom(replay_t *r, kept_events_t *kept)
{
  r->stopped = true;
  for (size_t i = 0; i < kept->count && ol_account_waiting(r->account, 0); i++)
    verdict_from(r, kept_at(kept, i));
  verdict_at_end(r);
}

/* One event counted and applied: 1 go on, 0 the policy ran out, -1 out
 * of host memory. */
static int step(replay_t *r, const ol_trace_event_t *ev)
{
  if (!ol_trace_action_is_line(ev->action))
    r->result->events++;
  return apply(r, ev);
}

/* The policy was refused the request the job was refused. The replay goes
 * on as the job did, so that the OOM diagnosed last is the job's last, as
 * in the live report: what came between (frees, the job's oom_context
 * line) is applied, then the next request. 1 go on, 0 stopped (the job
 * ended there, or the policy ran out where the job had not), -1 out of
 * host memory. */
static int past_the_job_s_oom(replay_t *r, ol_trace_t *trace, ol_error_t *err)
{
  kept_events_t kept = {0};
  ol_trace_event_t next;
  int rc;
  for (;;) {
    kept.count = 0;
    rc = next_request(r, trace, &kept, &next, err);
    if (rc == 0) {
      ended_at_oom(r, &kept); /* stops the replay */
      break;
    }
    for (size_t i = 0; rc == 1 && i < kept.count; i++)
      rc = step(r, kept_at(&kept, i));
    if (rc == 1)
      rc = step(r, &next);
    if (rc != 0 || next.action != OL_TRACE_OOM)
      break; /* refused again at the job's next OOM: read on again */
  }
  free(kept.items);
  if (rc == 0 && !r->stopped) /* refused a request the job was served */
    return verdict_after_stop(r, trace, err);
  return rc;
}

static int run(replay_t *r, ol_trace_t *trace, const char *path, ol_error_t *err)
{
  ol_trace_event_t ev;
  int got;
  uint64_t read = 0;
  const ol_replay_extras_t *x = r->extras;
  while ((got = ol_trace_next(trace, &ev, err)) == 1) {
    if (x->progress && ++read % 65536 == 0)
      x->progress(ol_trace_progress(trace), x->progress_arg);
    if (x->device >= 0 && ev.device != x->device)
      continue;
    int rc = step(r, &ev);
    if (rc == 0)
      rc = ev.action == OL_TRACE_OOM ? past_the_job_s_oom(r, trace, err)
                                     : verdict_after_stop(r, trace, err);
    if (rc < 0) {
      ol_fail(err, OL_EXIT_FAILURE, "%s:%llu: out of host memory", path,
              (unsigned long long)ev.line);
      return -1;
    }
    if (rc == 0)
      return 0;
  }
  if (got == 0)
    verdict_at_end(r);
  give_deferred(r);
  return got;
}

int ol_replay_file(const char *path, const ol_policy_ops_t *ops,
                   const ol_policy_options_t *options, ol_replay_result_t *result,
                   ol_error_t *err)
{
  ol_replay_extras_t all = {.device = -1};
  return ol_replay_file_with(path, ops, options, &all, result, err);
}

int ol_replay_file_with(const char *path, const ol_policy_ops_t *ops,
                        const ol_policy_options_t *options, const ol_replay_extras_t *extras,
                        ol_replay_result_t *result, ol_error_t *err)
{
  memset(result, 0, sizeof *result);
  ol_error_clear(err);
  ol_trace_t *trace = ol_trace_open(path, err);
  if (!trace)
    return -1;
  replay_t r = {.ops = ops, .result = result, .capacity = options->capacity, .extras = extras};
  r.follow_pool = strcmp(ops->name, "oomlens") == 0;
  r.reuse_held = r.follow_pool && options->reuse_held;
  r.managed = ol_trace_managed(trace);
  if (r.follow_pool)
    ol_trace_want_pool_lines(trace);
  int rc = -1;
  result->account = r.account = malloc(sizeof *r.account);
  if (!r.account) {
    ol_fail(err, OL_EXIT_FAILURE, "%s: out of host memory", path);
    goto done;
  }
  ol_account_init(r.account, OL_ACCOUNT_SITES);
  for (int d = 0; d < OL_MAX_DEVICES; d++) /* the simulated device's, for a leak's projection */
    ol_account_set_capacity(r.account, d, options->capacity);
  /* The table exists from the start (NULL: the replay runs without sites). */
  r.account->devices[0].sites = ol_sites_new();
  /* our pool maps in the extents the recorded one did, unless told */
  ol_policy_options_t opts = *options;
  if (!opts.map_unit)
    opts.map_unit = ol_trace_pool_unit(trace);
  r.policy = ops->create(&opts);
  if (!r.policy) {
    ol_fail(err, OL_EXIT_FAILURE, "%s: cannot create the %s policy: out of host memory", path,
            ops->name);
    goto done;
  }
  rc = run(&r, trace, path, err);
  if (rc == 0)
    rc = ol_trace_finish(trace, extras->device, result->note, sizeof result->note, err);
  if (rc == 0 && extras->progress)
    extras->progress(1.0, extras->progress_arg);
  if (rc == 0 && !r.stopped)
    ops->stats(r.policy, &result->stats); /* at the trace's end */
  else if (rc == 0)
    result->stats = result->oom_at.stats;
  result->recovered_allocs = (uint64_t)r.account->devices[0].stats.recovered_allocs;
  result->peak_requested = r.account->devices[0].stats.allocated_bytes[OL_POOL_ALL].peak;
  result->sites = r.account->devices[0].sites;
done:
  if (rc < 0)
    ol_replay_result_free(result);
  if (r.policy)
    ops->destroy(r.policy);
  ol_records_free(&r.held);
  ol_records_free(&r.segments);
  ol_trace_close(trace);
  return rc < 0 ? -1 : 0;
}

void ol_replay_result_free(ol_replay_result_t *result)
{
  free(result->calls_at);
  result->calls_at = NULL;
  result->calls_count = 0;
  if (result->account) {
    ol_account_free(result->account);
    free(result->account);
  }
  result->account = NULL;
  result->sites = NULL;
}
