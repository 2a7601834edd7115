/* report_view.c: a JSON report or a trace read back into the library's own
 * structures (report_view.h), and the text report printed from them.
 *
 * Reading is lenient about figures (a missing one is 0, so reports of
 * format 1.0, without the timeline, still read) and strict about identity:
 * a file that is not an oomlens report, or of a newer format, is refused
 * with a message naming it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* The record keeps site ids; here they index the report's own lists. */
static void read_oom_sites(const ol_json_t *oom, ol_view_device_t *d)
{
  ol_oom_record_t *r = &d->stats.last_oom;
  const ol_json_t *sites = ol_json_get(oom, "sites"), *grower = ol_json_get(oom, "growing_site");
  size_t n = ol_json_length(sites);
  r->holder_count = 0;
  for (size_t i = 0; sites && i < n && i < OL_OOM_SITES; i++) {
    r->holders[i] = (ol_oom_site_t){(int32_t)i, int_at(ol_json_at(sites, (uint32_t)i), "bytes")};
    r->holder_count++;
  }
  d->oom_sites = r->holder_count ? sites : NULL;
  d->oom_grower = grower && ol_json_get(grower, "site") ? grower : NULL;
  r->grower = (ol_oom_site_t){d->oom_grower ? r->holder_count : -1,
                              d->oom_grower ? int_at(grower, "growth") : 0};
}

#define FRAMES_IN_PARAGRAPH 3 /* as report.c names a site in the paragraph */

void ol_view_site_name(ol_buf_t *out, int32_t id, bool json, void *device)
{
  const ol_view_device_t *d = device;
  const ol_json_t *site = id >= 0 && id < d->stats.last_oom.holder_count
                            ? ol_json_get(ol_json_at(d->oom_sites, (uint32_t)id), "site")
                            : ol_json_get(d->oom_grower, "site");
  const char *name = ol_json_string(site);
  if (!name)
    name = "";
  if (json) {
    ol_buf_json_string(out, name);
    return;
  }
  const char *end = name;
  for (int frames = 0; (end = strstr(end, OL_FRAME_SEP)) && ++frames < FRAMES_IN_PARAGRAPH;
       end += strlen(OL_FRAME_SEP))
    ;
  ol_buf_printf(out, "%.*s", (int)(end ? (size_t)(end - name) : strlen(name)), name);
}

static const char *text_or(const ol_json_t *root, const char *key, const char *fallback);

/* What the call sites were made of, as the library wrote it. */
static void read_stacks(const ol_json_t *s, ol_view_t *v)
{
  const ol_json_t *py = ol_json_get(s, "python");
  v->has_stacks = s != NULL;
  if (!s)
    return;
  ol_json_bool(ol_json_get(s, "native"), &v->stacks.native);
  v->stacks.sample = (uint64_t)int_at(s, "sample_bytes");
  v->stacks.py.state = text_or(py, "state", "");
  v->stacks.py.version = text_or(py, "version", "");
  v->stacks.py.with_python = (uint64_t)int_at(py, "with_frames");
  v->stacks.py.without_python = (uint64_t)int_at(py, "without_frames");
}

static void read_oom(const ol_json_t *oom, ol_view_device_t *d)
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
  read_oom_sites(oom, d);
  read_outside(oom, r);
  d->advice = ol_json_string(ol_json_get(oom, "advice"));
  d->diagnosed = r->capacity > 0;
}

static void read_array(const ol_json_t *arr, int64_t *out, uint32_t n)
{
  for (uint32_t i = 0; i < n; i++)
    out[i] = ol_json_path_int64(ol_json_at(arr, i), "", 0);
}

/* The timeline back into its struct; times become nanoseconds from 0. */
static void read_timeline(const ol_json_t *t, ol_view_device_t *d)
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
  d->has_timeline = true;
}

static void read_device(const ol_json_t *dev, int index, ol_view_device_t *d)
{
  d->device = (int)ol_json_path_int64(dev, "device", index);
  read_stats(dev, &d->stats);
  read_oom(ol_json_get(dev, "oom"), d);
  d->at_peak = ol_json_path(dev, "sites.at_peak");
  d->by_total = ol_json_path(dev, "sites.by_total");
  read_timeline(ol_json_get(dev, "timeline"), d);
}

static const char *text_or(const ol_json_t *root, const char *key, const char *fallback)
{
  const char *s = ol_json_string(ol_json_get(root, key));
  return s ? s : fallback;
}

static int identify(const ol_json_t *root, const char *path, ol_view_t *v, char *err, size_t cap)
{
  int64_t format;
  if (!ol_json_int64(ol_json_get(root, "oomlens_report"), &format) ||
      ol_json_kind(ol_json_get(root, "devices")) != OL_JSON_ARRAY) {
    ol_set_error(err, cap, "%s: not an oomlens report (no \"oomlens_report\" format number "
                 "and \"devices\" list)", path);
    return -1;
  }
  if (format != OL_REPORT_FORMAT) {
    ol_set_error(err, cap, "%s: report format %lld; this oomlens reads format %d", path,
                 (long long)format, OL_REPORT_FORMAT);
    return -1;
  }
  v->format = (int)format;
  v->minor = (int)ol_json_path_int64(root, "oomlens_report_minor", 0);
  return 0;
}

int ol_view_load_json(ol_view_t *v, const char *path, char *err, size_t cap)
{
  memset(v, 0, sizeof *v);
  char msg[512];
  v->root = ol_json_parse_file(path, msg, sizeof msg);
  if (!v->root) {
    ol_set_error(err, cap, "%s", msg);
    return -1;
  }
  if (identify(v->root, path, v, err, cap) != 0) {
    ol_view_free(v);
    return -1;
  }
  const ol_json_t *r = v->root, *devices = ol_json_get(r, "devices");
  v->source = path;
  v->version = text_or(r, "version", "?");
  v->mode = text_or(r, "mode", "observe");
  v->reason = text_or(r, "reason", "?");
  v->rank = text_or(r, "rank", "0");
  v->command = text_or(r, "command", "");
  v->pid = (long)int_at(r, "pid");
  v->time_unix = ol_json_number(ol_json_get(r, "time_unix"));
  ol_json_bool(ol_json_get(r, "tracking_failed"), &v->tracking_failed);
  read_stacks(ol_json_get(r, "stacks"), v);
  v->device_count = (int)ol_json_length(devices);
  v->devices = v->device_count ? calloc((size_t)v->device_count, sizeof *v->devices) : NULL;
  if (v->device_count && !v->devices) {
    ol_set_error(err, cap, "%s: out of memory", path);
    ol_view_free(v);
    return -1;
  }
  for (int d = 0; d < v->device_count; d++)
    read_device(ol_json_at(devices, (size_t)d), d, &v->devices[d]);
  return 0;
}

/* ---- a trace ----------------------------------------------------------- */

/* A trace is counted by an ol_account_t (core/account.c), the model the
 * live tracker counts a job with, so the figures read back from a trace
 * are the ones the job's report had: tensor events drive allocated memory,
 * segment events (PyTorch's cache asking cudaMalloc) reserved memory, and
 * the at-peak sites are exact. A view of a trace is one device: every
 * event counts on device 0. */
static bool count_trace(ol_account_t *account, ol_trace_t *trace, char *err, size_t cap,
                        int *got)
{
  ol_trace_event_t e;
  while ((*got = ol_trace_next(trace, &e, err, cap)) == 1) {
    e.device = 0;
    if (!ol_account_apply(account, &e, NULL))
      return false;
  }
  return true;
}

/* One site of the list, shaped as the JSON report's. */
static void site_json(ol_buf_t *out, const ol_sites_t *sites, int32_t id, int64_t bytes)
{
  ol_buf_printf(out, "{\"bytes\": %lld, \"allocations\": %lld, \"frames\": [", (long long)bytes,
                (long long)ol_sites_figures(sites, id)->allocations);
  ol_frame_join_t j = {out, 0};
  ol_sites_text_frames(sites, id, SIZE_MAX, ol_frame_join_json, &j);
  ol_buf_printf(out, "]}");
}

static void sites_json(ol_buf_t *out, const ol_sites_t *sites, ol_site_order_t order)
{
  int32_t top[OL_REPORT_SITES_SHOWN * 4];
  size_t n = ol_sites_top(sites, order, top, OL_REPORT_SITES_SHOWN * 4);
  ol_buf_printf(out, "[");
  for (size_t i = 0; i < n; i++) {
    const ol_site_figures_t *f = ol_sites_figures(sites, top[i]);
    ol_buf_printf(out, "%s", i ? ", " : "");
    site_json(out, sites, top[i], order == OL_SITES_BY_TOTAL ? f->total : f->at_peak);
  }
  ol_buf_printf(out, "]");
}

/* The trace's sites as a small JSON tree, so the text and the page read
 * them as they read a report's. */
static void trace_sites(ol_view_t *v, const ol_sites_t *sites)
{
  if (!sites || ol_sites_count(sites) == 0)
    return;
  ol_buf_t text = {0};
  ol_buf_printf(&text, "{\"at_peak\": ");
  sites_json(&text, sites, OL_SITES_BY_AT_PEAK);
  ol_buf_printf(&text, ", \"by_total\": ");
  sites_json(&text, sites, OL_SITES_BY_TOTAL);
  ol_buf_printf(&text, "}");
  if (!text.failed)
    v->trace_sites = ol_json_parse(text.data, text.len, NULL, 0);
  ol_buf_free(&text);
  v->devices[0].at_peak = ol_json_get(v->trace_sites, "at_peak");
  v->devices[0].by_total = ol_json_get(v->trace_sites, "by_total");
}

/* The account's figures into the view's device 0. */
static void trace_figures(ol_view_t *v, const ol_account_t *account)
{
  ol_view_device_t *d = &v->devices[0];
  d->stats = account->devices[0].stats;
  d->has_timeline = account->devices[0].timeline != NULL;
  if (d->has_timeline)
    d->timeline = *account->devices[0].timeline;
  trace_sites(v, account->devices[0].sites);
}

int ol_view_load_trace(ol_view_t *v, const char *path, char *err, size_t cap)
{
  memset(v, 0, sizeof *v);
  ol_trace_t *trace = ol_trace_open(path, err, cap);
  if (!trace)
    return -1;
  v->devices = calloc(1, sizeof *v->devices);
  ol_account_t *account = malloc(sizeof *account);
  if (!v->devices || !account) {
    ol_trace_close(trace);
    free(account);
    ol_view_free(v);
    ol_set_error(err, cap, "%s: out of memory", path);
    return -1;
  }
  v->device_count = 1;
  v->format = OL_REPORT_FORMAT;
  v->version = OL_VERSION_TEXT;
  v->mode = "trace";
  v->reason = "trace";
  v->rank = "0";
  v->command = path;
  v->source = path;
  ol_account_init(account, OL_ACCOUNT_SITES | OL_ACCOUNT_TIMELINE);
  int got;
  bool counted = count_trace(account, trace, err, cap, &got);
  ol_trace_close(trace);
  if (!counted) {
    ol_set_error(err, cap, "%s: out of memory", path);
    got = -1;
  }
  if (got == 0)
    trace_figures(v, account);
  ol_account_free(account);
  free(account);
  if (got < 0) {
    ol_view_free(v);
    return -1;
  }
  return 0;
}

int ol_view_load(ol_view_t *v, const char *path, char *err, size_t cap)
{
  FILE *f = fopen(path, "rb");
  int first = f ? fgetc(f) : EOF;
  while (f && (first == ' ' || first == '\n' || first == '\t' || first == '\r'))
    first = fgetc(f);
  if (f)
    fclose(f);
  return first == '{' ? ol_view_load_json(v, path, err, cap)
                      : ol_view_load_trace(v, path, err, cap);
}

void ol_view_free(ol_view_t *v)
{
  ol_json_free(v->root);
  ol_json_free(v->trace_sites);
  free(v->devices);
  memset(v, 0, sizeof *v);
}

/* ---- the text report ---------------------------------------------------- */

static void text_sites(ol_buf_t *out, const ol_json_t *sites, bool by_total, bool v_is_report)
{
  ol_report_text_sites_title(out, by_total);
  for (size_t i = 0; i < ol_json_length(sites) && i < OL_REPORT_SITES_SHOWN; i++) {
    const ol_json_t *site = ol_json_at(sites, i);
    ol_report_text_site_figures(out, int_at(site, "bytes"), int_at(site, "allocations"));
    const ol_json_t *frames = ol_json_get(site, "frames");
    if (ol_json_length(frames) == 0 && !v_is_report)
      ol_buf_printf(out, "(no frames recorded)");
    ol_frame_join_t j = {out, 0};
    for (size_t f = 0; f < ol_json_length(frames) && f < OL_REPORT_FRAMES_SHOWN; f++) {
      const char *where = ol_json_string(ol_json_at(frames, f));
      ol_frame_join_text(where ? where : "?", &j);
    }
    ol_buf_printf(out, "\n");
  }
}

static void trace_header(ol_buf_t *out, const ol_view_t *v)
{
  const ol_view_device_t *d = &v->devices[0];
  char a[32], r[32];
  ol_format_bytes(a, sizeof a, d->stats.allocated_bytes[OL_POOL_ALL].peak);
  ol_format_bytes(r, sizeof r, d->stats.reserved_bytes[OL_POOL_ALL].peak);
  ol_buf_printf(out, "oomlens %s: the recorded trace %s\n", OL_VERSION_TEXT, v->source);
  ol_buf_printf(out, "peak allocated %s (tensors), peak reserved %s (PyTorch's segments), "
                "%lld out-of-memory event(s) over %.3f s\n", a, r,
                (long long)d->stats.num_ooms,
                d->has_timeline ? d->timeline.count * (double)d->timeline.width_ns / 1e9 : 0.0);
}

void ol_view_text(ol_buf_t *out, const ol_view_t *v)
{
  ol_report_context_t ctx = {v->reason, v->pid, v->rank, v->command, v->time_unix};
  if (v->root)
    ol_report_text_header(out, &ctx, v->version, v->mode, v->tracking_failed, v->device_count,
                          v->has_stacks ? &v->stacks : NULL);
  else
    trace_header(out, v);
  for (int d = 0; d < v->device_count; d++) {
    const ol_view_device_t *dev = &v->devices[d];
    ol_device_stats_t stats = dev->stats;
    if (!dev->diagnosed)
      stats.last_oom.capacity = 0; /* no paragraph without a diagnosis */
    ol_buf_printf(out, "\n");
    ol_report_text_device(out, dev->device, &stats);
    ol_report_text_origins(out, &stats);
    if (dev->at_peak) {
      text_sites(out, dev->at_peak, false, v->root != NULL);
      text_sites(out, dev->by_total, true, v->root != NULL);
    }
    ol_report_text_calls(out, &stats, ol_view_site_name, (void *)dev);
  }
}
