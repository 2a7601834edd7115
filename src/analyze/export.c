/* export.c: `oomlens export` (export.h). Reads a trace once, keeps what is
 * live (allocations by address, segments of reserved memory) and each
 * call site's bytes, and hands every event to the format being written:
 * folded stacks, Perfetto JSON and RMM's log here, the memory_viz pickle
 * in export_viz.c.
 *
 * Bytes at the peak without a walk over all sites at each new peak: a
 * site's figure at the peak is its current figure if it has not changed
 * since the peak, so each site keeps its value at the last peak only when
 * it changes after that peak (and once more at the end). */
#include "export.h"
#include "export_int.h"
#include "core.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PROGRESS_EVERY 65536 /* events between progress calls */

static const char *const format_names[OL_EXPORT_FORMAT_COUNT] = {
  [OL_EXPORT_FOLDED] = "folded",
  [OL_EXPORT_MEMORY_VIZ] = "memory-viz",
  [OL_EXPORT_PERFETTO] = "perfetto",
  [OL_EXPORT_RMM_CSV] = "rmm-csv",
};

bool ol_export_format_parse(const char *name, ol_export_format_t *out)
{
  for (int f = 0; f < OL_EXPORT_FORMAT_COUNT; f++) {
    if (strcmp(name, format_names[f]) == 0) {
      *out = (ol_export_format_t)f;
      return true;
    }
  }
  return false;
}

bool ol_export_by_parse(const char *name, ol_export_by_t *out)
{
  static const char *const names[] = {"peak", "total", "leaked"};
  for (int b = 0; b < 3; b++) {
    if (strcmp(name, names[b]) == 0) {
      *out = (ol_export_by_t)b;
      return true;
    }
  }
  return false;
}

/* ---- call sites: one record per distinct frames text ----------------- */

static ex_site_t *site_of(ex_t *x, const ol_trace_event_t *ev)
{
  if (ev->frames_len == 0)
    return &x->no_site;
  ex_site_t *s;
  HASH_FIND(hh, x->sites, ev->frames, ev->frames_len, s);
  if (s)
    return s;
  s = calloc(1, sizeof *s);
  char *text = malloc(ev->frames_len + 1);
  if (!s || !text) {
    free(s);
    free(text);
    x->failed = true;
    return &x->no_site;
  }
  memcpy(text, ev->frames, ev->frames_len);
  text[ev->frames_len] = '\0';
  s->text = text;
  s->len = ev->frames_len;
  HASH_ADD_KEYPTR(hh, x->sites, s->text, s->len, s);
  x->result->sites++;
  return s;
}

static void site_change(ex_t *x, ex_site_t *s, int64_t delta)
{
  if (s->last_change <= x->peak_seq)
    s->at_peak = s->current; /* unchanged since the peak: its value then */
  s->current += delta;
  s->last_change = x->seq;
  if (delta > 0)
    s->total += delta;
}

static int64_t site_at_peak(const ex_t *x, const ex_site_t *s)
{
  return s->last_change <= x->peak_seq ? s->current : s->at_peak;
}

static void free_sites(ex_t *x)
{
  ex_site_t *s, *tmp;
  HASH_ITER(hh, x->sites, s, tmp) {
    HASH_DELETE(hh, x->sites, s);
    free(s->text);
    free(s);
  }
}

/* ---- the live state, event by event ------------------------------------ */

/* The block at addr leaves; false when none was live there. */
static bool release_block(ex_t *x, uint64_t addr, uint64_t *size)
{
  ol_record_t b;
  if (!ol_records_take(&x->blocks, addr, &b))
    return false;
  site_change(x, ex_site_of(&b), -(int64_t)b.size);
  x->devices[b.device].allocated -= (int64_t)b.size;
  x->allocated -= (int64_t)b.size;
  if (size)
    *size = b.size;
  return true;
}

/* A record of what is live at addr (an earlier one there replaced). */
static ol_record_t *note_live(ol_records_t *t, const ol_trace_event_t *ev, ex_site_t *site,
                              bool mapped)
{
  ol_record_t *rec = ol_records_add(t, ev->addr);
  if (rec) {
    rec->size = ev->size;
    rec->stream = ev->stream;
    rec->device = ev->device;
    rec->value = (uintptr_t)site;
    rec->kind = mapped;
  }
  return rec;
}

static void on_alloc(ex_t *x, const ol_trace_event_t *ev, ex_site_t *site)
{
  release_block(x, ev->addr, NULL); /* never freed in the trace: gone now */
  if (!note_live(&x->blocks, ev, site, false)) {
    x->failed = true;
    return;
  }
  site_change(x, site, (int64_t)ev->size);
  x->devices[ev->device].allocated += (int64_t)ev->size;
  x->allocated += (int64_t)ev->size;
  if (x->allocated > x->result->peak) {
    x->result->peak = x->allocated;
    x->peak_seq = x->seq;
  }
}

static void on_segment(ex_t *x, const ol_trace_event_t *ev, ex_site_t *site, bool mapped)
{
  ex_device_t *d = &x->devices[ev->device];
  d->has_segments = true;
  d->reserved += (int64_t)ev->size;
  ol_record_t old;
  ol_records_take(&x->segments, ev->addr, &old);
  if (!note_live(&x->segments, ev, site, mapped))
    x->failed = true;
}

static void on_segment_gone(ex_t *x, const ol_trace_event_t *ev)
{
  ex_device_t *d = &x->devices[ev->device];
  ol_record_t s;
  int64_t size = ol_records_take(&x->segments, ev->addr, &s) ? (int64_t)s.size : (int64_t)ev->size;
  d->reserved = d->reserved > size ? d->reserved - size : 0;
}

/* Returns whether a free_completed met a block we knew (RMM's log only
 * frees what it allocated). */
static bool update_state(ex_t *x, const ol_trace_event_t *ev, ex_site_t *site, uint64_t *freed)
{
  switch (ev->action) {
  case OL_TRACE_ALLOC:
    if (ev->size > 0)
      on_alloc(x, ev, site);
    return true;
  case OL_TRACE_FREE_COMPLETED:
    return release_block(x, ev->addr, freed);
  case OL_TRACE_SEGMENT_ALLOC:
  case OL_TRACE_SEGMENT_MAP:
    on_segment(x, ev, site, ev->action == OL_TRACE_SEGMENT_MAP);
    return true;
  case OL_TRACE_SEGMENT_FREE:
  case OL_TRACE_SEGMENT_UNMAP:
    on_segment_gone(x, ev);
    return true;
  default:
    return true;
  }
}

/* ---- folded stacks ------------------------------------------------------ */

typedef struct folded_line {
  const ex_site_t *site;
  int64_t bytes;
} folded_line_t;

static int by_bytes_desc(const void *a, const void *b)
{
  const folded_line_t *x = a, *y = b;
  if (x->bytes != y->bytes)
    return x->bytes < y->bytes ? 1 : -1;
  return strcmp(x->site->text ? x->site->text : "", y->site->text ? y->site->text : "");
}

static int64_t folded_value(const ex_t *x, const ex_site_t *s)
{
  switch (x->options->by) {
  case OL_EXPORT_BY_TOTAL: return s->total;
  case OL_EXPORT_BY_LEAKED: return s->current;
  default: return site_at_peak(x, s);
  }
}

/* Frames outermost first; ';' already separates them. */
static void print_folded_stack(FILE *out, const ex_site_t *s)
{
  if (s->len == 0) {
    fputs("[no frames]", out);
    return;
  }
  const char *end = s->text + s->len;
  bool first = true;
  while (end > s->text) {
    const char *start = end;
    while (start > s->text && start[-1] != ';')
      start--;
    fprintf(out, "%s%.*s", first ? "" : ";", (int)(end - start), start);
    first = false;
    end = start > s->text ? start - 1 : start;
  }
}

static bool folded_end(ex_t *x)
{
  size_t n = HASH_COUNT(x->sites) + 1, count = 0;
  folded_line_t *lines = malloc(n * sizeof *lines);
  if (!lines)
    return false;
  int64_t v = folded_value(x, &x->no_site);
  if (v > 0)
    lines[count++] = (folded_line_t){&x->no_site, v};
  for (ex_site_t *s = x->sites; s; s = s->hh.next)
    if ((v = folded_value(x, s)) > 0)
      lines[count++] = (folded_line_t){s, v};
  qsort(lines, count, sizeof *lines, by_bytes_desc);
  for (size_t i = 0; i < count; i++) {
    print_folded_stack(x->out, lines[i].site);
    fprintf(x->out, " %" PRId64 "\n", lines[i].bytes);
  }
  x->result->written = count;
  free(lines);
  return true;
}

/* ---- Chrome/Perfetto trace-event JSON ----------------------------------- */

static void json_event_start(ex_t *x)
{
  fputs(x->perfetto.any ? ",\n" : "\n", x->out);
  x->perfetto.any = true;
}

/* One counter sample per device and moment: the figures after the last
 * event at that time. */
static void perfetto_sample(ex_t *x, int device)
{
  ex_perfetto_t *p = &x->perfetto;
  if (!p->pending[device])
    return;
  const ex_device_t *d = &x->devices[device];
  json_event_start(x);
  fprintf(x->out,
          "{\"ph\":\"C\",\"name\":\"memory\",\"pid\":%d,\"tid\":0,\"ts\":%" PRIu64
          ",\"args\":{\"allocated\":%" PRId64,
          device, p->pending_time[device], d->allocated);
  if (d->has_segments)
    fprintf(x->out, ",\"reserved\":%" PRId64, d->reserved);
  fputs("}}", x->out);
  p->pending[device] = false;
  x->result->written++;
}

static void perfetto_begin(ex_t *x)
{
  fputs("{\"displayTimeUnit\":\"ms\",\"otherData\":{\"producer\":\"oomlens export\"},"
        "\"traceEvents\":[", x->out);
}

/* Before the event changes the figures: the sample of an earlier moment
 * goes out with that moment's figures. */
static void perfetto_before(ex_t *x, const ol_trace_event_t *ev)
{
  ex_perfetto_t *p = &x->perfetto;
  int d = ev->device;
  if (p->pending[d] && (p->pending_time[d] != ev->time_us || ev->action == OL_TRACE_OOM))
    perfetto_sample(x, d);
}

static void perfetto_event(ex_t *x, const ol_trace_event_t *ev)
{
  ex_perfetto_t *p = &x->perfetto;
  int d = ev->device;
  if (ev->action == OL_TRACE_OOM) {
    json_event_start(x);
    fprintf(x->out,
            "{\"ph\":\"i\",\"s\":\"p\",\"name\":\"out of memory\",\"pid\":%d,\"tid\":0,"
            "\"ts\":%" PRIu64 ",\"args\":{\"request\":%" PRIu64 ",\"allocated\":%" PRId64
            ",\"reserved\":%" PRId64 "}}",
            d, ev->time_us, ev->size, x->devices[d].allocated, x->devices[d].reserved);
    x->result->written++;
    return;
  }
  if (ev->action == OL_TRACE_FREE_REQUESTED)
    return; /* nothing changes until the free completes */
  p->pending[d] = true;
  p->pending_time[d] = ev->time_us;
}

static void perfetto_device(ex_t *x, int device)
{
  json_event_start(x);
  fprintf(x->out,
          "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"args\":{\"name\":\"cuda:%d\"}}",
          device, device);
}

static bool perfetto_end(ex_t *x)
{
  for (int d = 0; d < OL_TRACE_MAX_DEVICES; d++)
    perfetto_sample(x, d);
  fputs("\n]}\n", x->out);
  return true;
}

/* ---- RAPIDS RMM's log --------------------------------------------------- */

/* RMM's logger writes the wall-clock time of day, HH:MM:SS.microseconds. */
static void rmm_time(const ex_t *x, uint64_t time_us, char *out, size_t cap)
{
  uint64_t us = ol_trace_start_unix_us(x->trace) + time_us;
  time_t seconds = (time_t)(us / 1000000);
  struct tm tm;
  gmtime_r(&seconds, &tm);
  snprintf(out, cap, "%02d:%02d:%02d.%06u", tm.tm_hour, tm.tm_min, tm.tm_sec,
           (unsigned)(us % 1000000));
}

static void rmm_begin(ex_t *x)
{
  fputs("Thread,Time,Action,Pointer,Size,Stream\n", x->out);
}

static void rmm_line(ex_t *x, const ol_trace_event_t *ev, const char *action, uint64_t size)
{
  char when[32];
  long thread = ol_trace_pid(x->trace) > 0 ? ol_trace_pid(x->trace) : 1;
  rmm_time(x, ev->time_us, when, sizeof when);
  fprintf(x->out, "%ld,%s,%s,0x%" PRIx64 ",%" PRIu64 ",%" PRIu64 "\n", thread, when, action,
          ev->addr, size, ev->stream);
  x->result->written++;
}

/* ---- the driver ---------------------------------------------------------- */

static void first_sight(ex_t *x, int device)
{
  x->devices[device].seen = true;
  if (x->options->format == OL_EXPORT_PERFETTO)
    perfetto_device(x, device);
}

static void handle(ex_t *x, const ol_trace_event_t *ev)
{
  x->seq++;
  if (!x->devices[ev->device].seen)
    first_sight(x, ev->device);
  ex_site_t *site = site_of(x, ev);
  if (x->options->format == OL_EXPORT_PERFETTO)
    perfetto_before(x, ev);
  uint64_t freed = 0;
  bool known = update_state(x, ev, site, &freed);
  switch (x->options->format) {
  case OL_EXPORT_MEMORY_VIZ:
    if (x->skip_events[ev->device] > 0) {
      x->skip_events[ev->device]--; /* its state is kept, its entry is not */
      x->result->left_out++;
    } else {
      ol_viz_event(x, ev, site);
    }
    break;
  case OL_EXPORT_PERFETTO:
    perfetto_event(x, ev);
    break;
  case OL_EXPORT_RMM_CSV:
    if (ev->action == OL_TRACE_ALLOC && ev->size > 0)
      rmm_line(x, ev, "allocate", ev->size);
    else if (ev->action == OL_TRACE_FREE_COMPLETED && known)
      rmm_line(x, ev, "free", freed);
    break;
  default:
    break;
  }
}

static bool begin(ex_t *x)
{
  switch (x->options->format) {
  case OL_EXPORT_MEMORY_VIZ: return ol_viz_begin(x);
  case OL_EXPORT_PERFETTO: perfetto_begin(x); return true;
  case OL_EXPORT_RMM_CSV: rmm_begin(x); return true;
  default: return true;
  }
}

static bool end(ex_t *x)
{
  switch (x->options->format) {
  case OL_EXPORT_FOLDED: return folded_end(x);
  case OL_EXPORT_MEMORY_VIZ: return ol_viz_end(x);
  case OL_EXPORT_PERFETTO: return perfetto_end(x);
  default: return true;
  }
}

static void show_progress(const ex_t *x, double fraction, bool counting)
{
  const ol_export_options_t *o = x->options;
  if (x->passes_two)
    fraction = counting ? fraction / 2 : 0.5 + fraction / 2;
  o->progress(fraction, o->progress_arg);
}

/* memory-viz's max_entries: each device's events are counted by reading
 * the trace once first, so that the entries still stream out in one pass
 * with memory that never grows with the trace (a ring of the last entries
 * would hold max_entries of them per device). */
static int count_entries(ex_t *x, const char *path, ol_error_t *err)
{
  const ol_export_options_t *o = x->options;
  ol_trace_t *t = ol_trace_open(path, err);
  if (!t)
    return -1;
  ol_trace_event_t ev;
  int got;
  uint64_t read = 0;
  while ((got = ol_trace_next(t, &ev, err)) == 1) {
    if (o->progress && ++read % PROGRESS_EVERY == 0)
      show_progress(x, ol_trace_progress(t), true);
    if (o->device < 0 || ev.device == o->device)
      x->device_events[ev.device]++;
  }
  ol_trace_close(t);
  for (int d = 0; d < OL_TRACE_MAX_DEVICES; d++)
    if (x->device_events[d] > o->max_entries)
      x->skip_events[d] = x->device_events[d] - o->max_entries;
  return got;
}

static int run(ex_t *x, const char *path, ol_error_t *err)
{
  ol_trace_event_t ev;
  int got;
  const ol_export_options_t *o = x->options;
  uint64_t read = 0;
  x->passes_two = o->format == OL_EXPORT_MEMORY_VIZ && o->max_entries > 0;
  if (x->passes_two && count_entries(x, path, err) != 0)
    return -1;
  while ((got = ol_trace_next(x->trace, &ev, err)) == 1) {
    if (o->progress && ++read % PROGRESS_EVERY == 0)
      show_progress(x, ol_trace_progress(x->trace), false);
    if (o->device >= 0 && ev.device != o->device)
      continue;
    x->result->events++;
    handle(x, &ev);
    if (x->failed) {
      ol_fail(err, OL_EXIT_FAILURE, "%s:%llu: out of host memory", path,
              (unsigned long long)ev.line);
      return -1;
    }
  }
  return got;
}

int ol_export_file(const char *path, FILE *out, const ol_export_options_t *options,
                   ol_export_result_t *result, ol_error_t *err)
{
  memset(result, 0, sizeof *result);
  ol_error_clear(err);
  ex_t x = {.out = out, .options = options, .result = result};
  x.trace = ol_trace_open(path, err);
  if (!x.trace)
    return -1;
  int rc = -1;
  ol_records_init(&x.blocks); /* tables grow as blocks and segments go live */
  ol_records_init(&x.segments);
  if (!begin(&x)) {
    ol_fail(err, OL_EXIT_FAILURE, "%s: out of host memory", path);
    goto done;
  }
  rc = run(&x, path, err);
  if (rc == 0 && !end(&x)) {
    ol_fail(err, OL_EXIT_FAILURE, "%s: out of host memory", path);
    rc = -1;
  }
  if (rc == 0 && options->progress)
    options->progress(1.0, options->progress_arg);
  if (rc == 0 && (fflush(out) != 0 || ferror(out))) {
    ol_fail(err, OL_EXIT_FAILURE, "cannot write the export: %s", "write error");
    rc = -1;
  }
done:
  ol_viz_free(&x);
  ol_records_free(&x.blocks);
  ol_records_free(&x.segments);
  free_sites(&x);
  ol_trace_close(x.trace);
  return rc;
}
