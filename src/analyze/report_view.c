/* report_view.c: a JSON report or a trace read back into core's report
 * model (report_view.h), which core's renderer prints as the library
 * wrote it.
 *
 * Reading is lenient about figures (a missing one is 0, so reports of
 * format 1.0, without the timeline, still read) and strict about identity:
 * a file that is not an oomlens report, or of a newer format, is refused
 * with a message naming it. What is read is copied into the model, so the
 * parsed tree is freed before anything is printed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"
#include "report_view.h"
#include "trace_csv.h"

static int64_t int_at(const ol_json_t *node, const char *path)
{
  return ol_json_path_int64(node, path, 0);
}

static void read_stat(const ol_json_t *node, ol_stat_t *stat)
{
  stat->current = int_at(node, "current");
  stat->peak = int_at(node, "peak");
  stat->allocated = int_at(node, "allocated");
  stat->freed = int_at(node, "freed");
}

static const char *const pool_names[OL_POOL_COUNT] = {"all", "large_pool", "small_pool"};

static void read_pools(const ol_json_t *stats, const char *name, ol_stat_t stat[])
{
  const ol_json_t *field = ol_json_get(stats, name);
  for (int p = 0; p < OL_POOL_COUNT; p++)
    read_stat(ol_json_get(field, pool_names[p]), &stat[p]);
}

static void read_stats(const ol_json_t *dev, ol_device_stats_t *s)
{
  const ol_json_t *stats = ol_json_get(dev, "stats");
#define OL_READ_POOLS(field, title, bytes) read_pools(stats, #field, s->field);
  OL_STAT_FIELDS(OL_READ_POOLS)
#undef OL_READ_POOLS
  read_stat(ol_json_get(stats, "oversize_allocations"), &s->oversize_allocations);
  read_stat(ol_json_get(stats, "oversize_segments"), &s->oversize_segments);
  read_stat(ol_json_get(stats, "vmm_mapped_bytes"), &s->vmm_mapped_bytes);
  read_stat(ol_json_get(stats, "va_reserved_bytes"), &s->va_reserved_bytes);
  read_stat(ol_json_get(stats, "pending_free_bytes"), &s->pending_bytes);
  const ol_json_t *origins = ol_json_get(dev, "origins");
#define OL_READ_ORIGIN(name, what) read_stat(ol_json_get(origins, #name), &s->origin_bytes[OL_ORIGIN_##name]);
  OL_ORIGINS(OL_READ_ORIGIN)
#undef OL_READ_ORIGIN
  const ol_json_t *calls = ol_json_get(dev, "calls");
#define OL_READ_CALL(field, what) s->field = int_at(calls, #field);
  OL_CALL_FIELDS(OL_READ_CALL)
#undef OL_READ_CALL
  s->num_ooms = int_at(dev, "num_ooms");
  s->recovered_allocs = int_at(dev, "recovered_allocs"); /* format 1.2; 0 before */
  s->last_oom_request = int_at(dev, "last_oom_request");
  s->mem_free = int_at(dev, "mem_info.free");
  s->mem_total = int_at(dev, "mem_info.total");
  s->first_oom_unix = ol_json_number(ol_json_get(dev, "first_oom_time_unix"));
  s->last_oom_unix = ol_json_number(ol_json_get(dev, "last_oom_time_unix"));
  const ol_json_t *by_class = ol_json_get(dev, "ooms_by_class");
  for (int c = 0; c < OL_OOM_CLASS_COUNT; c++)
    s->ooms_by_class[c] = int_at(by_class, ol_oom_class_name((ol_oom_class_t)c));
}

static bool class_named(const char *name, ol_oom_class_t *out)
{
  for (int c = 0; name && c < OL_OOM_CLASS_COUNT; c++)
    if (strcmp(name, ol_oom_class_name((ol_oom_class_t)c)) == 0) {
      *out = (ol_oom_class_t)c;
      return true;
    }
  return false;
}

/* Who held what was outside this process's allocations (NVML). */
static void read_outside(const ol_json_t *oom, ol_oom_record_t *r)
{
  const ol_json_t *list = ol_json_get(oom, "external_holders");
  size_t n = ol_json_length(list);
  r->other_count = 0;
  for (size_t i = 0; list && i < n && i < OL_OOM_SITES; i++) {
    const ol_json_t *h = ol_json_at(list, (uint32_t)i);
    const char *name = ol_json_string(ol_json_get(h, "name"));
    r->others[i].pid = (uint32_t)int_at(h, "pid");
    r->others[i].bytes = int_at(h, "bytes");
    snprintf(r->others[i].name, sizeof r->others[i].name, "%s", name ? name : "");
    r->other_count++;
  }
  r->self_device_bytes = int_at(oom, "self_device_bytes");
}

/* A site named as the library wrote it: its frames joined by
 * OL_FRAME_SEP, split back so the paragraph shows the first few. */
static void read_name(ol_report_t *v, ol_report_frames_t *frames, const char *name)
{
  for (const char *at = name && *name ? name : NULL; at;) {
    const char *sep = strstr(at, OL_FRAME_SEP);
    size_t n = sep ? (size_t)(sep - at) : strlen(at);
    ol_report_frames_add(v, frames, at, n);
    at = sep ? sep + strlen(OL_FRAME_SEP) : NULL;
  }
}

/* The record keeps site ids; here they index the device's own names. */
static void read_oom_sites(const ol_json_t *oom, ol_report_t *v, ol_report_device_t *d)
{
  ol_oom_record_t *r = &d->stats.last_oom;
  const ol_json_t *sites = ol_json_get(oom, "sites"), *grower = ol_json_get(oom, "growing_site");
  size_t n = ol_json_length(sites);
  r->holder_count = 0;
  for (size_t i = 0; sites && i < n && i < OL_OOM_SITES; i++) {
    const ol_json_t *site = ol_json_at(sites, (uint32_t)i);
    r->holders[i] = (ol_oom_site_t){(int32_t)i, int_at(site, "bytes")};
    read_name(v, &d->oom_names[i], ol_json_string(ol_json_get(site, "site")));
    r->holder_count++;
  }
  r->grower = (ol_oom_site_t){-1, 0};
  if (grower && ol_json_get(grower, "site")) {
    r->grower = (ol_oom_site_t){OL_REPORT_GROWER, int_at(grower, "growth")};
    read_name(v, &d->oom_names[OL_REPORT_GROWER], ol_json_string(ol_json_get(grower, "site")));
  }
}

static const char *text_or(const ol_json_t *root, const char *key, const char *fallback)
{
  const char *s = ol_json_string(ol_json_get(root, key));
  return s ? s : fallback;
}

/* What the call sites were made of, as the library wrote it. */
static void read_stacks(const ol_json_t *s, ol_report_t *v)
{
  const ol_json_t *py = ol_json_get(s, "python");
  v->has_stacks = s != NULL;
  if (!s)
    return;
  ol_json_bool(ol_json_get(s, "native"), &v->stacks.native);
  v->stacks.depth = (uint64_t)int_at(s, "depth");
  v->stacks.sample = (uint64_t)int_at(s, "sample_bytes");
  snprintf(v->stacks.py_state, sizeof v->stacks.py_state, "%s", text_or(py, "state", ""));
  snprintf(v->stacks.py_version, sizeof v->stacks.py_version, "%s", text_or(py, "version", ""));
  v->stacks.with_python = (uint64_t)int_at(py, "with_frames");
  v->stacks.without_python = (uint64_t)int_at(py, "without_frames");
  ol_json_bool(ol_json_get(s, "roles_only"), &v->stacks.roles_only);
}

/* What the memory was for at the failure, and the request's own role. */
static void read_oom_roles(const ol_json_t *oom, ol_oom_record_t *r)
{
  const ol_json_t *roles = ol_json_get(oom, "roles");
  ol_json_bool(ol_json_get(oom, "roles_known"), &r->roles_known);
  for (int i = 0; roles && i < OL_ROLE_COUNT; i++)
    r->role_bytes[i] = int_at(roles, ol_role_name((ol_role_t)i));
  r->request_role_known = ol_role_parse(ol_json_string(ol_json_get(oom, "request_role")),
                                        &r->request_role);
}

static void read_oom(const ol_json_t *oom, ol_report_t *v, ol_report_device_t *d)
{
  ol_oom_record_t *r = &d->stats.last_oom;
  if (!class_named(ol_json_string(ol_json_get(oom, "class")), &d->stats.last_oom_class))
    return;
  r->request = (uint64_t)int_at(oom, "request");
  r->capacity = (uint64_t)int_at(oom, "capacity");
  r->device_free = int_at(oom, "device_free");
  r->allocated = int_at(oom, "allocated");
  r->reserved = int_at(oom, "reserved");
  r->free_reserved = int_at(oom, "free_reserved");
  r->largest_free_block = int_at(oom, "largest_free_block");
  r->external = int_at(oom, "external");
  r->persistent = int_at(oom, "persistent");
  r->iterations = (uint64_t)int_at(oom, "iterations");
  r->growth = int_at(oom, "growth_per_iteration");
  ol_json_bool(ol_json_get(oom, "segments_only"), &r->segments_only);
  read_oom_roles(oom, r);
  r->before_first_free = ol_json_path_int64(oom, "before_first_free", -1);
  r->iteration_need = ol_json_path_int64(oom, "iteration_need", -1);
  r->first_persistent = ol_json_path_int64(oom, "first_persistent", -1);
  r->batch = int_at(oom, "batch");
  /* Not in the JSON: a live job's pool served its tensors in manage mode
   * (oom_live.c), which the advice on fragmentation depends on. */
  r->managed = strcmp(v->mode, "manage") == 0;
  read_oom_sites(oom, v, d);
  read_outside(oom, r);
  const char *advice = ol_json_string(ol_json_get(oom, "advice"));
  if (advice)
    ol_report_set_text(v, &d->advice, advice);
  d->diagnosed = r->capacity > 0;
}

static void read_array(const ol_json_t *arr, int64_t *out, uint32_t n)
{
  for (uint32_t i = 0; i < n; i++)
    out[i] = ol_json_path_int64(ol_json_at(arr, i), "", 0);
}

/* The timeline back into its struct; times become nanoseconds from 0, and
 * each OOM keeps the wall clock it was written with. */
static void read_timeline(const ol_json_t *t, ol_report_device_t *d)
{
  ol_timeline_t *tl = &d->timeline;
  const ol_json_t *alloc = ol_json_get(t, "allocated"), *res = ol_json_get(t, "reserved");
  double interval = ol_json_number(ol_json_get(t, "interval_s"));
  size_t n = ol_json_length(alloc);
  if (!t || interval <= 0 || n != ol_json_length(res) || n > OL_TIMELINE_POINTS)
    return;
  ol_timeline_init(tl, 0, ol_json_number(ol_json_get(t, "start_unix")));
  tl->width_ns = (uint64_t)(interval * 1e9 + 0.5);
  tl->count = (uint32_t)n;
  read_array(alloc, tl->allocated, tl->count);
  read_array(res, tl->reserved, tl->count);
  tl->peak_allocated = int_at(t, "peak.allocated");
  tl->peak_reserved = int_at(t, "peak.reserved");
  tl->peak_allocated_ns = (uint64_t)(ol_json_number(ol_json_path(t, "peak.allocated_t")) * 1e9);
  tl->peak_reserved_ns = (uint64_t)(ol_json_number(ol_json_path(t, "peak.reserved_t")) * 1e9);
  tl->oom_count = (uint32_t)int_at(t, "num_ooms");
  const ol_json_t *ooms = ol_json_get(t, "ooms");
  for (size_t i = 0; i < ol_json_length(ooms) && i < OL_TIMELINE_OOMS; i++) {
    tl->ooms[i].t_ns = (uint64_t)(ol_json_number(ol_json_path(ol_json_at(ooms, i), "t")) * 1e9);
    tl->ooms[i].request = int_at(ol_json_at(ooms, i), "request");
  }
  ol_report_device_timeline(d, tl);
  for (size_t i = 0; i < ol_json_length(ooms) && i < OL_TIMELINE_OOMS; i++) {
    const ol_json_t *when = ol_json_get(ol_json_at(ooms, i), "time_unix");
    if (when)
      d->oom_time_unix[i] = ol_json_number(when);
  }
}

/* A list of call sites; a frame that is not text shows as "?". */
static void read_sites(const ol_json_t *arr, ol_report_t *v, ol_report_sites_t *list)
{
  size_t n = ol_json_length(arr);
  list->site = n ? calloc(n, sizeof *list->site) : NULL;
  if (n && !list->site) {
    v->failed = true;
    return;
  }
  list->count = n;
  for (size_t i = 0; i < n; i++) {
    const ol_json_t *site = ol_json_at(arr, i), *frames = ol_json_get(site, "frames");
    ol_report_site_t *s = &list->site[i];
    s->bytes = int_at(site, "bytes");
    s->allocations = int_at(site, "allocations");
    s->stacks = (int)ol_json_path_int64(site, "stacks", 1);
    for (size_t f = 0; f < ol_json_length(frames); f++) {
      const char *where = ol_json_string(ol_json_at(frames, f));
      ol_report_frames_add(v, &s->frames, where ? where : "?", strlen(where ? where : "?"));
    }
  }
}

/* Format 1.2's leak warning (null, or absent before it: none). */
static void read_leak(const ol_json_t *leak, ol_report_t *v, ol_report_device_t *d)
{
  ol_leak_warning_t *w = &d->stats.phases.leak;
  *w = (ol_leak_warning_t){.site = -1};
  if (ol_json_kind(leak) != OL_JSON_OBJECT)
    return;
  w->fired = true;
  w->growth = int_at(leak, "growth_per_iteration");
  w->since = (uint64_t)int_at(leak, "since_iteration");
  w->at = (uint64_t)int_at(leak, "at_iteration");
  w->at_s = ol_json_number(ol_json_get(leak, "at_s"));
  w->runs_out_at = int_at(leak, "runs_out_at_iteration");
  w->runs_out_s = ol_json_number(ol_json_get(leak, "runs_out_s"));
  w->site_growth = int_at(leak, "site_growth");
  const char *site = ol_json_string(ol_json_get(leak, "site"));
  if (site) {
    read_name(v, &d->leak_site, site);
    w->site = 0;
  }
}

/* The batch figure (format 1.2) as written: null or absent, none. */
static void read_batch(const ol_json_t *b, ol_report_device_t *d)
{
  d->has_batch = ol_json_kind(b) == OL_JSON_OBJECT;
  if (!d->has_batch)
    return;
  d->stats.capacity = int_at(b, "capacity");
  d->stats.outside = ol_json_path_int64(b, "outside", -1);
  d->batch = (ol_batch_figure_t){
    .batch = int_at(b, "batch"), .available = int_at(b, "available"),
    .state = int_at(b, "state"), .need = int_at(b, "need"), .fixed = int_at(b, "fixed"),
    .fits = int_at(b, "fits"), .fits_headroom = int_at(b, "fits_headroom")};
  d->stats.batch = d->batch.batch;
}

/* Memory by role (format 1.2); a report before it has none: not known. */
static void read_roles(const ol_json_t *roles, ol_report_device_t *d)
{
  const ol_json_t *peak = ol_json_get(roles, "at_peak"), *now = ol_json_get(roles, "now");
  ol_json_bool(ol_json_get(roles, "known"), &d->roles_known);
  for (int i = 0; i < OL_ROLE_COUNT; i++) {
    d->roles_at_peak[i] = int_at(peak, ol_role_name((ol_role_t)i));
    d->roles_now[i] = int_at(now, ol_role_name((ol_role_t)i));
  }
}

static void read_device(const ol_json_t *dev, int index, ol_report_t *v, ol_report_device_t *d)
{
  d->device = (int)ol_json_path_int64(dev, "device", index);
  read_stats(dev, &d->stats);
  read_oom(ol_json_get(dev, "oom"), v, d);
  const ol_json_t *at_peak = ol_json_path(dev, "sites.at_peak");
  d->has_sites = at_peak != NULL;
  read_sites(at_peak, v, &d->at_peak);
  read_sites(ol_json_path(dev, "sites.by_total"), v, &d->by_total);
  read_roles(ol_json_get(dev, "roles"), d);
  read_timeline(ol_json_get(dev, "timeline"), d);
  read_leak(ol_json_get(dev, "leak_warning"), v, d);
  read_batch(ol_json_get(dev, "batch_figure"), d);
}

static int identify(const ol_json_t *root, const char *path, ol_error_t *err)
{
  int64_t format;
  if (!ol_json_int64(ol_json_get(root, "oomlens_report"), &format) ||
      ol_json_kind(ol_json_get(root, "devices")) != OL_JSON_ARRAY) {
    ol_fail(err, OL_EXIT_USAGE, "%s: not an oomlens report (no \"oomlens_report\" format number "
                 "and \"devices\" list)", path);
    return -1;
  }
  if (format != OL_REPORT_FORMAT) {
    ol_fail(err, OL_EXIT_USAGE, "%s: report format %lld; this oomlens reads format %d", path,
                 (long long)format, OL_REPORT_FORMAT);
    return -1;
  }
  return 0;
}

static void read_report(const ol_json_t *r, const char *path, ol_report_t *v)
{
  const ol_json_t *devices = ol_json_get(r, "devices");
  ol_report_set_text(v, &v->source, path);
  ol_report_set_text(v, &v->version, text_or(r, "version", "?"));
  ol_report_set_text(v, &v->mode, text_or(r, "mode", "observe"));
  ol_report_set_text(v, &v->reason, text_or(r, "reason", "?"));
  ol_report_set_text(v, &v->rank, text_or(r, "rank", "0"));
  ol_report_set_text(v, &v->command, text_or(r, "command", ""));
  v->pid = (long)int_at(r, "pid");
  v->time_unix = ol_json_number(ol_json_get(r, "time_unix"));
  ol_json_bool(ol_json_get(r, "tracking_failed"), &v->tracking_failed);
  read_stacks(ol_json_get(r, "stacks"), v);
  for (int d = 0; d < v->device_count && !v->failed; d++)
    read_device(ol_json_at(devices, (size_t)d), d, v, &v->devices[d]);
}

int ol_view_load_json(ol_report_t *v, const char *path, ol_error_t *err)
{
  ol_report_init(v, 0); /* empty: freeing it after a failed load is harmless */
  ol_json_t *root = ol_json_parse_file(path, err);
  if (!root)
    return -1;
  if (identify(root, path, err) != 0) {
    ol_json_free(root);
    return -1;
  }
  if (ol_report_init(v, (int)ol_json_length(ol_json_get(root, "devices"))) == 0) {
    v->minor = (int)ol_json_path_int64(root, "oomlens_report_minor", 0);
    read_report(root, path, v);
  }
  ol_json_free(root);
  if (v->failed) {
    ol_fail(err, OL_EXIT_FAILURE, "%s: out of memory", path);
    ol_report_free(v);
    return -1;
  }
  return 0;
}

/* ---- a trace ----------------------------------------------------------- */

/* A trace is counted by an ol_account_t (core/account.c), the model the
 * live tracker counts a job with, so the figures read back from a trace
 * are the ones the job's report had: tensor events drive allocated memory,
 * segment events (PyTorch's cache asking cudaMalloc) reserved memory, and
 * the at-peak sites are exact. A view of a trace is one device: every
 * event counts on device 0. */
/* The recorded job's last OOM, diagnosed as replay diagnoses it: the
 * account's record at the failed attempt the OOM settled on, and the
 * trace's oom_context line for it. */
typedef struct recorded {
  ol_oom_record_t attempt; /* the last failed attempt's, while the account waits */
  bool diagnosed;
  ol_oom_record_t oom;    /* the last OOM the job saw */
  bool has_context;
} recorded_t;

static void settled(recorded_t *rec, const ol_oom_record_t *attempt)
{
  rec->oom = *attempt;
  rec->diagnosed = true;
  rec->has_context = false;
}

/* After each event: an OOM event is a failed attempt (settling an earlier
 * one of another size first, and itself when the recorder marks it
 * final); any other event may settle the waiting one (the account says:
 * its OOM count rose); an oom_context line completes the OOM it follows. */
static void note_recorded(recorded_t *rec, const ol_account_t *a, const ol_trace_event_t *e,
                          uint64_t waited, int64_t ooms_before)
{
  int64_t settled_now = a->devices[0].stats.num_ooms - ooms_before;
  if (e->action == OL_TRACE_OOM) {
    if (settled_now > 0 && waited && waited != e->size)
      settled(rec, &rec->attempt);
    ol_replay_attempt_record(a, e->size, &rec->attempt);
    if (e->oom_final && !a->devices[0].wait.request)
      settled(rec, &rec->attempt);
    return;
  }
  if (settled_now > 0)
    settled(rec, &rec->attempt);
  if (e->action == OL_TRACE_OOM_CONTEXT && rec->diagnosed && !rec->has_context &&
      rec->oom.request == e->size) {
    ol_oom_context_apply(&rec->oom, e->context);
    rec->has_context = true;
  }
}

static bool count_trace(ol_account_t *account, ol_trace_t *trace, recorded_t *rec,
                        ol_error_t *err, int *got)
{
  ol_trace_event_t e;
  while ((*got = ol_trace_next(trace, &e, err)) == 1) {
    e.device = 0;
    if (account->devices[0].capacity == 0) /* the trace's device line, for a leak's projection */
      ol_account_set_capacity(account, 0, ol_trace_capacity(trace, 0));
    if (!account->devices[0].outside_known) /* its outside line, for the batch figure */
      ol_account_set_outside(account, 0, ol_trace_outside(trace, 0));
    uint64_t waited = account->devices[0].wait.request;
    int64_t ooms = account->devices[0].stats.num_ooms;
    if (!ol_account_apply(account, &e, NULL))
      return false;
    note_recorded(rec, account, &e, waited, ooms);
  }
  /* a failure still waiting at the end was the job's last */
  if (ol_account_oom_settle(account, 0))
    settled(rec, &rec->attempt);
  return true;
}

/* The diagnosis the job's report had: without its context the device is
 * the trace's (its device line), nothing known free or held outside. */
static void trace_diagnosis(ol_report_device_t *d, const ol_account_t *account, recorded_t *rec)
{
  if (!rec->diagnosed)
    return;
  if (!rec->has_context)
    rec->oom.capacity = account->devices[0].capacity;
  d->stats.last_oom = rec->oom;
  d->stats.last_oom_class = ol_oom_classify(&rec->oom);
  d->diagnosed = rec->oom.capacity > 0;
}

/* The account's figures into the report's device 0; its sites into the
 * report's lists by the builder the library uses (a trace's keys are
 * frames text). */
static void trace_figures(ol_report_t *v, const ol_account_t *account, recorded_t *rec,
                          int64_t batch)
{
  ol_report_device_t *d = &v->devices[0];
  ol_account_stats(account, 0, &d->stats);
  trace_diagnosis(d, account, rec);
  const ol_sites_t *sites = account->devices[0].sites;
  if (sites && ol_sites_count(sites) > 0)
    ol_report_device_sites(v, d, sites, ol_sites_text_frames);
  if (account->devices[0].timeline)
    ol_report_device_timeline(d, account->devices[0].timeline);
  d->stats.batch = batch;
  ol_report_device_batch(d);
}

int ol_view_load_trace(ol_report_t *v, const char *path, ol_error_t *err)
{
  ol_report_init(v, 0);
  ol_trace_t *trace = ol_trace_open(path, err);
  if (!trace)
    return -1;
  ol_account_t *account = malloc(sizeof *account);
  if (!account || ol_report_init(v, 1) != 0) {
    ol_trace_close(trace);
    free(account);
    ol_fail(err, OL_EXIT_FAILURE, "%s: out of memory", path);
    return -1;
  }
  ol_report_set_text(v, &v->version, OL_VERSION_TEXT);
  ol_report_set_text(v, &v->mode, "trace");
  ol_report_set_text(v, &v->reason, "trace");
  ol_report_set_text(v, &v->rank, "0");
  ol_report_set_text(v, &v->command, path);
  ol_report_set_text(v, &v->source, path);
  ol_account_init(account, OL_ACCOUNT_SITES | OL_ACCOUNT_TIMELINE);
  int got;
  recorded_t rec = {0};
  if (!count_trace(account, trace, &rec, err, &got)) {
    ol_fail(err, OL_EXIT_FAILURE, "%s: out of memory", path);
    got = -1;
  }
  int64_t batch = (int64_t)ol_trace_batch(trace);
  const char *note = got == 0 ? ol_trace_note(trace) : NULL;
  if (note) { /* the report says it, in its reason */
    char reason[256];
    snprintf(reason, sizeof reason, "trace, %s", note);
    ol_report_set_text(v, &v->reason, reason);
  }
  ol_trace_close(trace);
  if (got == 0)
    trace_figures(v, account, &rec, batch);
  ol_account_free(account);
  free(account);
  if (got >= 0 && v->failed)
    ol_fail(err, OL_EXIT_FAILURE, "%s: out of memory", path);
  if (got < 0 || v->failed) {
    ol_report_free(v);
    return -1;
  }
  return 0;
}

int ol_view_load(ol_report_t *v, const char *path, ol_error_t *err)
{
  FILE *f = fopen(path, "rb");
  int first = f ? fgetc(f) : EOF;
  while (f && (first == ' ' || first == '\n' || first == '\t' || first == '\r'))
    first = fgetc(f);
  if (f)
    fclose(f);
  return first == '{' ? ol_view_load_json(v, path, err)
                      : ol_view_load_trace(v, path, err);
}
