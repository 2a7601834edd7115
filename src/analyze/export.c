/* export.c: `oomlens export` (export.h). Reads a trace once, counts it
 * with an ol_account_t (core/account.c: live blocks, each call site's bytes
 * now, at the peak and in total, exactly as the live tracker counts a job),
 * keeps the segments of reserved memory memory_viz lists, and hands every
 * event to the format being written: folded stacks, Perfetto JSON and
 * RMM's log here, the memory_viz pickle in export_viz.c. */
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

const char *ol_export_format_name(ol_export_format_t format)
{
  return (unsigned)format < OL_EXPORT_FORMAT_COUNT ? format_names[format] : "?";
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

/* ---- the live state, event by event ------------------------------------ */

/* Every event's frames are a site (memory_viz shows them on each entry);
 * -1 when host memory ran out. */
static int32_t site_of(ex_t *x, const ol_trace_event_t *ev)
{
  int32_t id = ol_account_site(x->account, ev->device, ev->frames ? ev->frames : "",
                               ev->frames_len, NULL);
  if (id < 0)
    x->failed = true;
  return id;
}

/* memory_viz's segments: what is live of reserved memory, by address. */
static void note_segment(ex_t *x, const ol_trace_event_t *ev, int32_t site)
{
  bool mapped = ev->action == OL_TRACE_SEGMENT_MAP;
  x->devices[ev->device].has_segments = true;
  ol_record_t old;
  ol_records_take(&x->segments, ev->addr, &old);
  ol_record_t *rec = ol_records_add(&x->segments, ev->addr);
  if (!rec) {
    x->failed = true;
    return;
  }
  rec->size = ev->size;
  rec->stream = ev->stream;
  rec->device = ev->device;
  rec->site = site;
  rec->kind = mapped;
}

/* What is left of a mapped range after [first, end) is unmapped: its
 * part above end, kept as a range of its own. */
static void keep_tail(ex_t *x, const ol_record_t *range, uint64_t end)
{
  if (range->key + range->size <= end)
    return;
  ol_record_t *tail = ol_records_add(&x->segments, end);
  if (!tail) {
    x->failed = true;
    return;
  }
  *tail = *range;
  tail->key = end;
  tail->size = range->key + range->size - end;
}

typedef struct unmapping {
  uint64_t first, end;
  int32_t device;
  ol_record_t straddles; /* the range starting below first that reaches into it */
  bool found;
  ol_record_t overruns;  /* a range taken that reaches past end (at most one) */
  bool overran;
} unmapping_t;

/* Called while the table is walked: the tail is added after the walk. */
static void note_overrun(const ol_record_t *range, void *arg)
{
  unmapping_t *u = arg;
  if (range->key + range->size > u->end) {
    u->overruns = *range;
    u->overran = true;
  }
}

static void find_straddling(const ol_record_t *range, void *arg)
{
  unmapping_t *u = arg;
  if (range->device == u->device && range->kind && range->key < u->first &&
      range->key + range->size > u->first) {
    u->straddles = *range;
    u->found = true;
  }
}

/* Pages unmapped: usually one range exactly as it was mapped (our pool's
 * 2 MiB pages); PyTorch's expandable segments may unmap several ranges at
 * once, or part of one, so then every range inside [addr, addr + size) goes,
 * the one reaching into it from below is cut short and what lies above is
 * kept (a walk of the whole table, only on this rarer path). */
static void unmap_segment(ex_t *x, const ol_trace_event_t *ev)
{
  ol_record_t *exact = ol_records_find(&x->segments, ev->addr);
  ol_record_t gone;
  if (exact && exact->size == ev->size) {
    ol_records_take(&x->segments, ev->addr, &gone);
    return;
  }
  unmapping_t u = {.first = ev->addr, .end = ev->addr + ev->size, .device = ev->device};
  ol_records_each(&x->segments, find_straddling, &u);
  ol_records_take_range(&x->segments, u.first, u.end, note_overrun, &u);
  if (u.overran)
    keep_tail(x, &u.overruns, u.end);
  if (u.found) {
    ol_record_t *below = ol_records_find(&x->segments, u.straddles.key);
    below->size = u.first - u.straddles.key;
    keep_tail(x, &u.straddles, u.end);
  }
}

/* The account counts the event; the event's site (an alloc's is the
 * account's own) comes back. */
static int32_t update_state(ex_t *x, const ol_trace_event_t *ev, ol_account_step_t *step)
{
  if (!ol_account_apply(x->account, ev, step)) {
    x->failed = true;
    return -1;
  }
  int32_t site = ev->action == OL_TRACE_ALLOC && ev->size > 0 ? step->site : site_of(x, ev);
  ol_record_t gone;
  switch (ev->action) {
  case OL_TRACE_SEGMENT_ALLOC:
  case OL_TRACE_SEGMENT_MAP:
    note_segment(x, ev, site);
    break;
  case OL_TRACE_SEGMENT_FREE:
    ol_records_take(&x->segments, ev->addr, &gone);
    break;
  case OL_TRACE_SEGMENT_UNMAP:
    unmap_segment(x, ev);
    break;
  default:
    break;
  }
  return site;
}

/* ---- folded stacks ------------------------------------------------------ */

typedef struct folded_line {
  const char *text; /* the site's frames, innermost first, NUL-terminated */
  size_t len;
  int64_t bytes;
  char *stack;      /* the line's stack, outermost first, as printed */
} folded_line_t;

/* Frames outermost first; ';' already separates them. An empty site is
 * "[no frames]". The text goes to out (NULL: nowhere); its length back. */
static size_t folded_stack_text(const folded_line_t *line, char *out)
{
  static const char none[] = "[no frames]";
  if (line->len == 0) {
    if (out)
      memcpy(out, none, sizeof none - 1);
    return sizeof none - 1;
  }
  const char *text = line->text, *end = text + line->len;
  size_t at = 0;
  while (end > text) {
    const char *start = end;
    while (start > text && start[-1] != ';')
      start--;
    if (at > 0 && out)
      out[at] = ';';
    at += at > 0;
    if (out)
      memcpy(out + at, start, (size_t)(end - start));
    at += (size_t)(end - start);
    end = start > text ? start - 1 : start;
  }
  return at;
}

/* Lines sorted by their stack, byte by byte (as `sort` with LC_ALL=C and
 * flamegraph.pl's stackcollapse do), so that a viewer merging only
 * neighbouring equal prefixes (speedscope's time order) shows each root
 * once. */
static int by_stack(const void *a, const void *b)
{
  const folded_line_t *x = a, *y = b;
  return strcmp(x->stack, y->stack);
}

static int64_t folded_value(const ex_t *x, const ol_site_figures_t *f)
{
  switch (x->options->by) {
  case OL_EXPORT_BY_TOTAL: return f->total;
  case OL_EXPORT_BY_LEAKED: return f->current;
  default: return f->at_peak;
  }
}

static char *folded_stack(const folded_line_t *line)
{
  size_t n = folded_stack_text(line, NULL);
  char *stack = malloc(n + 1);
  if (stack) {
    folded_stack_text(line, stack);
    stack[n] = '\0';
  }
  return stack;
}

static bool folded_end(ex_t *x)
{
  const ol_sites_t *sites = ex_sites(x);
  size_t n = ol_sites_count(sites), count = 0;
  folded_line_t *lines = malloc((n ? n : 1) * sizeof *lines);
  if (!lines)
    return false;
  for (size_t i = 0; i < n; i++) {
    int64_t v = folded_value(x, ol_sites_figures(sites, (int32_t)i));
    if (v <= 0)
      continue;
    lines[count] = (folded_line_t){.bytes = v};
    lines[count].text = ol_sites_key_bytes(sites, (int32_t)i, &lines[count].len);
    count++;
  }
  bool ok = true;
  for (size_t i = 0; i < count; i++)
    ok = (lines[i].stack = folded_stack(&lines[i])) != NULL && ok;
  if (ok) {
    qsort(lines, count, sizeof *lines, by_stack);
    for (size_t i = 0; i < count; i++)
      fprintf(x->out, "%s %" PRId64 "\n", lines[i].stack, lines[i].bytes);
    x->result->written = count;
  }
  for (size_t i = 0; i < count; i++)
    free(lines[i].stack);
  free(lines);
  return ok;
}

/* ---- Chrome/Perfetto trace-event JSON ----------------------------------- */

static void json_event_start(ex_t *x)
{
  fputs(x->perfetto.any ? ",\n" : "\n", x->out);
  x->perfetto.any = true;
}

/* A device's process id: its ordinal + 1, as Perfetto keeps pid 0 for
 * itself (the idle process) and would fold device 0 into it. Its one
 * thread has the pid as its tid, a process's main thread as on Linux. */
static int perfetto_pid(int device)
{
  return device + 1;
}

/* allocated and reserved are counters of their own (each "C" event's name
 * is a track; two args of one event would be two series of one track,
 * which the trace viewers draw stacked, one on top of the other). */
static void perfetto_counter(ex_t *x, int device, uint64_t ts, const char *name, int64_t bytes)
{
  json_event_start(x);
  fprintf(x->out,
          "{\"ph\":\"C\",\"name\":\"%s\",\"pid\":%d,\"tid\":%d,\"ts\":%" PRIu64
          ",\"args\":{\"bytes\":%" PRId64 "}}",
          name, perfetto_pid(device), perfetto_pid(device), ts, bytes);
  x->result->written++;
}

/* One counter sample per device and moment: the figures after the last
 * event at that time. */
static void perfetto_sample(ex_t *x, int device)
{
  ex_perfetto_t *p = &x->perfetto;
  if (!p->pending[device])
    return;
  const ol_device_stats_t *d = ex_stats(x, device);
  uint64_t ts = p->pending_time[device];
  perfetto_counter(x, device, ts, "allocated", d->allocated_bytes[OL_POOL_ALL].current);
  if (x->devices[device].has_segments)
    perfetto_counter(x, device, ts, "reserved", d->reserved_bytes[OL_POOL_ALL].current);
  p->pending[device] = false;
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
    /* "I", the instant phase Chrome itself writes: the format's document
     * gives "i" too, which Perfetto and catapult read but Chrome DevTools'
     * trace engine drops (its Phase.INSTANT is "I" alone). */
    json_event_start(x);
    fprintf(x->out,
            "{\"ph\":\"I\",\"s\":\"p\",\"name\":\"out of memory\",\"pid\":%d,\"tid\":%d,"
            "\"ts\":%" PRIu64 ",\"args\":{\"request\":%" PRIu64 ",\"allocated\":%" PRId64
            ",\"reserved\":%" PRId64 "}}",
            perfetto_pid(d), perfetto_pid(d), ev->time_us, ev->size, ex_stats(x, d)->allocated_bytes[OL_POOL_ALL].current,
            ex_stats(x, d)->reserved_bytes[OL_POOL_ALL].current);
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
          perfetto_pid(device), device);
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

/* Pointer and stream in hex as RMM's logging_resource_adaptor writes them
 * (fmt::ptr: "0x" and lower-case digits; a failed allocation's pointer is
 * a null one, 0x0). The trace has no thread per event: the process id
 * stands for it, 1 where the trace has none. */
static void rmm_line(ex_t *x, const ol_trace_event_t *ev, const char *action, uint64_t addr,
                     uint64_t size)
{
  char when[32];
  long thread = ol_trace_pid(x->trace) > 0 ? ol_trace_pid(x->trace) : 1;
  rmm_time(x, ev->time_us, when, sizeof when);
  fprintf(x->out, "%ld,%s,%s,0x%" PRIx64 ",%" PRIu64 ",0x%" PRIx64 "\n", thread, when, action,
          addr, size, ev->stream);
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
  if (ev->action == OL_TRACE_OOM_CONTEXT) { /* counted (the OOM settled), no entry of its own */
    if (x->options->format == OL_EXPORT_MEMORY_VIZ)
      ol_viz_context(x, ev); /* the OOM entry's free memory */
    if (!ol_account_apply(x->account, ev, NULL))
      x->failed = true;
    return;
  }
  if (!x->devices[ev->device].seen)
    first_sight(x, ev->device);
  if (x->options->format == OL_EXPORT_PERFETTO)
    perfetto_before(x, ev);
  ol_account_step_t step;
  int32_t site = update_state(x, ev, &step);
  bool known = step.known;
  uint64_t freed = step.gone.size;
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
      rmm_line(x, ev, "allocate", ev->addr, ev->size);
    else if (ev->action == OL_TRACE_FREE_COMPLETED && known)
      rmm_line(x, ev, "free", ev->addr, freed);
    else if (ev->action == OL_TRACE_OOM)
      rmm_line(x, ev, "allocate failure", 0, ev->size);
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
    if ((o->device < 0 || ev.device == o->device) && ev.action != OL_TRACE_OOM_CONTEXT)
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
    x->result->events += ev.action != OL_TRACE_OOM_CONTEXT; /* a line, not an event */
    handle(x, &ev);
    if (x->failed) {
      ol_fail(err, OL_EXIT_FAILURE, "%s:%llu: out of host memory", path,
              (unsigned long long)ev.line);
      return -1;
    }
  }
  return got;
}

/* Sites named by frames (the site of events without any is not one). */
static uint64_t distinct_frames(const ol_sites_t *sites)
{
  uint64_t n = 0;
  for (size_t i = 0; i < ol_sites_count(sites); i++) {
    size_t len;
    ol_sites_key_bytes(sites, (int32_t)i, &len);
    n += len > 0;
  }
  return n;
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
  ol_records_init(&x.segments); /* tables grow as blocks and segments go live */
  x.account = malloc(sizeof *x.account);
  if (x.account)
    ol_account_init(x.account, OL_ACCOUNT_SITES_SHARED);
  if (!x.account || !begin(&x)) {
    ol_fail(err, OL_EXIT_FAILURE, "%s: out of host memory", path);
    goto done;
  }
  rc = run(&x, path, err);
  if (rc == 0)
    rc = ol_trace_finish(x.trace, options->device, result->note, sizeof result->note, err);
  result->peak = x.account->peak;
  result->sites = distinct_frames(ex_sites(&x));
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
  ol_records_free(&x.segments);
  if (x.account)
    ol_account_free(x.account);
  free(x.account);
  ol_trace_close(x.trace);
  return rc;
}
