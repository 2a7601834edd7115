/* replay.c: drives a policy with a trace's tensor-level events (replay.h).
 * A trace address maps to the policy's address through the tracker's table
 * of live blocks (records.c: open addressing, no allocation per entry), so
 * a replay runs in memory proportional to what is live, never to the
 * trace's length. */
#include "replay.h"
#include "core.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace_csv.h"

/* ---- the replay -------------------------------------------------------- */

typedef struct replay {
  const ol_policy_ops_t *ops;
  ol_policy_t *policy;
  ol_records_t live; /* by the trace's address; value: the policy's address */
  int64_t requested;
  uint64_t capacity;
  ol_phases_t phases; /* iterations, from the live bytes the trace asked for */
  ol_replay_result_t *result;
  const ol_replay_extras_t *extras;
} replay_t;

/* The same diagnosis a live job gets: a simulated device has no one else
 * on it, so its free memory is what the policy has not reserved. */
static void diagnose(replay_t *r, ol_replay_oom_t *o)
{
  const ol_policy_stats_t *st = &o->stats;
  o->record = (ol_oom_record_t){
    .request = o->size,
    .capacity = r->capacity,
    .device_free = (int64_t)r->capacity - st->reserved,
    .allocated = r->requested,
    .reserved = st->reserved,
    .free_reserved = st->free_reserved,
    .largest_free_block = st->largest_free_block,
    .external = 0,
    .persistent = ol_phases_persistent(&r->phases),
    .growth = ol_phases_growth(&r->phases),
    .iterations = r->phases.iterations,
  };
  o->record.managed = strcmp(r->ops->name, "oomlens") == 0;
  ol_oom_note_sites(&o->record, r->result->sites);
  o->cause = ol_oom_classify(&o->record);
}

/* The live bytes move: phases.c finds iterations in them, and the sites
 * note each iteration's end (what outlives it, what grows across them). */
static void note_live(replay_t *r)
{
  uint64_t before = r->phases.iterations;
  ol_phases_note(&r->phases, r->requested);
  if (r->phases.iterations != before && r->result->sites)
    ol_sites_mark_valley(r->result->sites);
}

static int32_t site_of(replay_t *r, const ol_trace_event_t *ev)
{
  ol_sites_t *sites = r->result->sites;
  if (!sites)
    return -1;
  int32_t id = ol_sites_intern(sites, ev->frames ? ev->frames : "", ev->frames_len);
  if (id < 0) { /* out of host memory: carry on without sites */
    ol_sites_free(sites);
    r->result->sites = NULL;
  }
  return id;
}

/* Bytes live (plus, for a replayed OOM, the request) make a new peak:
 * remember who held them. */
static void new_peak(replay_t *r, int64_t live, int32_t extra_site, int64_t extra)
{
  r->result->peak_requested = live;
  if (!r->result->sites)
    return;
  ol_sites_add(r->result->sites, extra_site, extra);
  ol_sites_mark_peak(r->result->sites);
  ol_sites_add(r->result->sites, extra_site, -extra);
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
  diagnose(r, &res->oom_at);
}

/* A tensor the trace let go of (or, at an address allocated again, one it
 * never freed: released so that the two cannot be confused). False when
 * nothing is live at that address. */
static bool forget(replay_t *r, uint64_t trace_addr)
{
  ol_record_t gone;
  if (!ol_records_take(&r->live, trace_addr, &gone))
    return false;
  r->ops->free(r->policy, gone.value);
  r->requested -= (int64_t)gone.size;
  if (r->result->sites)
    ol_sites_add(r->result->sites, gone.site, -(int64_t)gone.size);
  note_live(r);
  return true;
}

/* 1 served, 0 out of device memory, -1 out of host memory. */
static int on_alloc(replay_t *r, const ol_trace_event_t *ev)
{
  if (ev->size == 0) {
    r->result->zero_allocs++;
    return 1;
  }
  forget(r, ev->addr);
  uint64_t addr;
  if (r->ops->alloc(r->policy, ev->size, ev->stream, &addr) != 0)
    return 0;
  int32_t site = site_of(r, ev);
  ol_record_t *rec = ol_records_add(&r->live, ev->addr);
  if (!rec)
    return -1;
  rec->value = addr;
  rec->size = ev->size;
  rec->site = site;
  r->result->allocs++;
  r->requested += (int64_t)ev->size;
  if (r->result->sites)
    ol_sites_add(r->result->sites, site, (int64_t)ev->size);
  note_live(r);
  if (r->requested > r->result->peak_requested)
    new_peak(r, r->requested, -1, 0);
  return 1;
}

static void on_free(replay_t *r, const ol_trace_event_t *ev)
{
  if (forget(r, ev->addr))
    r->result->frees++;
  else
    r->result->unknown_frees++;
}

/* The recorded run failed here: the policy gets the same request. */
static int on_oom(replay_t *r, const ol_trace_event_t *ev)
{
  r->result->trace_ooms++;
  uint64_t addr;
  if (ev->size == 0)
    return 1;
  if (r->ops->alloc(r->policy, ev->size, ev->stream, &addr) != 0)
    return 0;
  if (r->requested + (int64_t)ev->size > r->result->peak_requested)
    new_peak(r, r->requested + (int64_t)ev->size, site_of(r, ev), (int64_t)ev->size);
  r->ops->free(r->policy, addr);
  return 1;
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
  default: /* free_requested and PyTorch's own segment events */
    break;
  }
  if (served == 0)
    ran_out(r, ev, ev->action == OL_TRACE_OOM);
  return served;
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
    r->result->events++;
    int step = apply(r, &ev);
    if (step < 0) {
      ol_fail(err, OL_EXIT_FAILURE, "%s:%llu: out of host memory", path,
              (unsigned long long)ev.line);
      return -1;
    }
    if (step == 0)
      return 0;
  }
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
  result->sites = ol_sites_new(); /* NULL: the replay runs without sites */
  ol_phases_init(&r.phases);
  int rc = -1;
  ol_records_init(&r.live);
  r.policy = ops->create(options);
  if (!r.policy) {
    ol_fail(err, OL_EXIT_FAILURE, "%s: cannot create the %s policy: out of host memory", path,
            ops->name);
    goto done;
  }
  rc = run(&r, trace, path, err);
  if (rc == 0 && extras->progress)
    extras->progress(1.0, extras->progress_arg);
  if (rc == 0 && !result->oom)
    ops->stats(r.policy, &result->stats);
  else if (rc == 0)
    result->stats = result->oom_at.stats;
done:
  if (rc < 0)
    ol_replay_result_free(result);
  if (r.policy)
    ops->destroy(r.policy);
  ol_records_free(&r.live);
  ol_trace_close(trace);
  return rc < 0 ? -1 : 0;
}

void ol_replay_result_free(ol_replay_result_t *result)
{
  ol_sites_free(result->sites);
  result->sites = NULL;
}
