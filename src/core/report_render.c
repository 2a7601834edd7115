/* report_render.c: the one renderer of a report (core.h's ol_report_t), as
 * text and as JSON.
 *
 * The text follows the rows and columns of PyTorch's
 * torch.cuda.memory_summary(), one table per device, so people read it the
 * way they already read theirs; the JSON carries the same figures under
 * memory_stats() names plus a format version. Both are printed from one
 * model, by whoever holds one: the live writer (lib/report.c) and `oomlens
 * report` (analyze/report_view.c) alike, so a report read back prints as
 * the library wrote it, and a report's text and JSON never disagree. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core.h"

#define RULE "|===========================================================================|\n"
#define LINE "|---------------------------------------------------------------------------|\n"

static const char *text_of(const char *text)
{
  return text ? text : "";
}

/* ---- names of sites ----------------------------------------------------- */

static void frames_text(ol_buf_t *out, const ol_report_frames_t *f, size_t max)
{
  ol_frame_join_t j = {out, 0};
  for (size_t i = 0; i < f->count && i < max; i++)
    ol_frame_join_text(f->frame[i], &j);
}

/* A trace's site may have no frames at all, which is said rather than
 * left blank (a live site always has one). */
void ol_report_frames_text(ol_buf_t *out, const ol_report_frames_t *f, size_t max)
{
  if (f->count == 0)
    ol_buf_printf(out, "(no frames recorded)");
  frames_text(out, f, max);
}

/* The paragraph names a site by its innermost frames; its JSON by the
 * frames shown as one string. Replay names a trace's sites so too
 * (ol_report_site_name). */
static void name_frames(ol_buf_t *out, const ol_report_frames_t *f, bool json)
{
  if (!json) {
    ol_report_frames_text(out, f, OL_REPORT_FRAMES_IN_PARAGRAPH);
    return;
  }
  ol_buf_t name = {0};
  frames_text(&name, f, OL_REPORT_FRAMES_SHOWN);
  out->failed |= name.failed;
  ol_buf_json_string(out, name.data ? name.data : "");
  ol_buf_free(&name);
}

void ol_report_oom_namer(ol_buf_t *out, int32_t id, bool json, void *device)
{
  const ol_report_device_t *d = device;
  static const ol_report_frames_t none;
  name_frames(out, id >= 0 && id <= OL_REPORT_GROWER ? &d->oom_names[id] : &none, json);
}

void ol_report_leak_namer(ol_buf_t *out, int32_t id, bool json, void *device)
{
  const ol_report_device_t *d = device;
  static const ol_report_frames_t none;
  name_frames(out, id == 0 ? &d->leak_site : &none, json);
}

void ol_report_site_name(ol_buf_t *out, const ol_sites_t *sites, ol_site_frames_fn frames_of,
                         int32_t id, bool json)
{
  ol_report_frames_t frames = {0};
  if (!ol_report_frames_collect(&frames, sites, frames_of, id,
                                json ? OL_REPORT_FRAMES_SHOWN : OL_REPORT_FRAMES_IN_PARAGRAPH))
    out->failed = true;
  name_frames(out, &frames, json);
  ol_report_frames_free(&frames);
}

/* ---- the text ------------------------------------------------------------ */

static void format_cell(char *out, size_t cap, int64_t value, bool bytes)
{
  if (bytes)
    ol_format_bytes(out, cap, value);
  else
    snprintf(out, cap, "%lld", (long long)value);
}

static void text_row(ol_buf_t *out, const char *title, const ol_stat_t *stat, bool bytes)
{
  char cells[4][32];
  format_cell(cells[0], sizeof cells[0], stat->current, bytes);
  format_cell(cells[1], sizeof cells[1], stat->peak, bytes);
  format_cell(cells[2], sizeof cells[2], stat->allocated, bytes);
  format_cell(cells[3], sizeof cells[3], stat->freed, bytes);
  ol_buf_printf(out, "| %-21s | %10s | %10s | %10s | %10s |\n", title, cells[0], cells[1],
                cells[2], cells[3]);
}

static void text_pool_rows(ol_buf_t *out, const char *title, const ol_stat_t stat[], bool bytes)
{
  text_row(out, title, &stat[OL_POOL_ALL], bytes);
  text_row(out, "      from large pool", &stat[OL_POOL_LARGE], bytes);
  text_row(out, "      from small pool", &stat[OL_POOL_SMALL], bytes);
  ol_buf_printf(out, LINE);
}

static void text_table(ol_buf_t *out, int device, const ol_device_stats_t *dev)
{
  char title[80], left[40], right[40];
  snprintf(title, sizeof title, "oomlens CUDA memory summary, device ID %d", device);
  snprintf(left, sizeof left, "CUDA OOMs: %lld", (long long)dev->num_ooms);
  snprintf(right, sizeof right, "failed allocations: %lld", (long long)dev->failed_allocs);
  ol_buf_printf(out, RULE "| %-73s |\n" LINE, title);
  ol_buf_printf(out, "| %-35s | %-35s |\n" RULE, left, right);
  ol_buf_printf(out, "| %-21s | %-10s | %-10s | %-10s | %-10s |\n" LINE, "Metric", "Cur Usage",
                "Peak Usage", "Tot Alloc", "Tot Freed");
#define OL_TEXT_ROWS(field, row_title, bytes) text_pool_rows(out, row_title, dev->field, bytes);
  OL_STAT_FIELDS(OL_TEXT_ROWS)
#undef OL_TEXT_ROWS
  text_row(out, "Oversize allocations", &dev->oversize_allocations, false);
  ol_buf_printf(out, LINE);
  text_row(out, "Oversize GPU segments", &dev->oversize_segments, false);
  ol_buf_printf(out, LINE);
  text_row(out, "VMM mapped memory", &dev->vmm_mapped_bytes, true);
  text_row(out, "VMM address space", &dev->va_reserved_bytes, true);
  text_row(out, "Freed, awaiting fence", &dev->pending_bytes, true);
  ol_buf_printf(out, RULE);
}

static void text_origins(ol_buf_t *out, const ol_device_stats_t *dev)
{
  ol_buf_printf(out, "Where the reserved memory came from (current / peak):\n");
#define OL_TEXT_ORIGIN(name, what)                                                  \
  {                                                                                 \
    char cur[32], peak[32];                                                         \
    ol_format_bytes(cur, sizeof cur, dev->origin_bytes[OL_ORIGIN_##name].current);  \
    ol_format_bytes(peak, sizeof peak, dev->origin_bytes[OL_ORIGIN_##name].peak);   \
    ol_buf_printf(out, "  %-8s %12s / %-12s %s\n", #name, cur, peak, what);         \
  }
  OL_ORIGINS(OL_TEXT_ORIGIN)
#undef OL_TEXT_ORIGIN
}

static void text_stacks_note(ol_buf_t *out, const ol_report_stacks_t *s)
{
  ol_buf_printf(out, "Call sites: native frames %s",
                s->roles_only ? "off (manage mode's role capture; OOMLENS_STACKS=1 adds them)"
                : s->native   ? "by libunwind"
                              : "unavailable (no libunwind.so.8)");
  if (s->sample)
    ol_buf_printf(out, ", stacks for a sample of one in %llu bytes",
                  (unsigned long long)s->sample);
  ol_buf_printf(out, "; Python frames: ");
  if (!strcmp(s->py_state, "ok"))
    ol_buf_printf(out, "CPython %s, in %llu of %llu stacks taken (the others: threads "
                       "without Python)\n", s->py_version, (unsigned long long)s->with_python,
                  (unsigned long long)(s->with_python + s->without_python));
  else if (!strcmp(s->py_state, "off"))
    ol_buf_printf(out, "off (OOMLENS_PYTHON_FRAMES=0)\n");
  else if (!strcmp(s->py_state, "none"))
    ol_buf_printf(out, "none (no CPython in this process)\n");
  else if (!strcmp(s->py_state, "unsupported"))
    ol_buf_printf(out, "none (CPython %s is not supported: 3.10 to 3.13)\n",
                  s->py_version[0] ? s->py_version : "of unknown version");
  else
    ol_buf_printf(out, "stopped (CPython %s frames did not look as expected)\n", s->py_version);
}

/* oomlens's own time on the job's threads against the span it was spent
 * in: an upper bound of what it cost the run (a step the GPU bounds hides
 * the CPU's time). */
static double share_of(uint64_t part_us, uint64_t span_us)
{
  return 100.0 * (double)part_us / (double)span_us;
}

static void text_own_time(ol_buf_t *out, const ol_report_own_time_t *t)
{
  if (!t->known || t->span_us == 0 || (t->manage_us == 0 && t->call_sites_us == 0))
    return;
  ol_buf_printf(out, "oomlens's own time on the job's threads in %.1f s:", (double)t->span_us / 1e6);
  if (t->manage_us)
    ol_buf_printf(out, " manage mode's pool %.3f s (%.2f%%)%s", (double)t->manage_us / 1e6,
                  share_of(t->manage_us, t->span_us), t->call_sites_us ? "," : "");
  if (t->call_sites_us)
    ol_buf_printf(out, " call sites %.3f s (%.2f%%)", (double)t->call_sites_us / 1e6,
                  share_of(t->call_sites_us, t->span_us));
  ol_buf_printf(out, "\n");
}

/* Memory by role (roles.c, sites.c): at the peak and now, each row with
 * what the role is. Where no frames named a role, that is said in one
 * line, and where the bytes are segments (observe mode under a caching
 * allocator), what a role then means. */
static void text_roles(ol_buf_t *out, const ol_report_t *r, const ol_report_device_t *d)
{
  if (!d->roles_known) {
    ol_buf_printf(out, "Memory by role: not known (no call site had Python frames that name "
                       "a role: frames off, not sampled, or no Python)\n");
    return;
  }
  ol_buf_printf(out, "Memory by role, from the call sites' frames (at the peak / now):\n");
  for (int i = 0; i < OL_ROLE_COUNT; i++) {
    char peak[32], now[32];
    ol_format_bytes(peak, sizeof peak, d->roles_at_peak[i]);
    ol_format_bytes(now, sizeof now, d->roles_now[i]);
    ol_buf_printf(out, "  %-11s %12s / %-12s %s\n", ol_role_name((ol_role_t)i), peak, now,
                  ol_role_meaning((ol_role_t)i));
  }
  if (r->mode && strcmp(r->mode, "observe") == 0)
    ol_buf_printf(out, "  (observe mode: under a caching allocator such as PyTorch's, each "
                       "segment counts under the role of the request that made it; --manage "
                       "sees every tensor)\n");
}

/* The first entries of a list. */
static void text_sites(ol_buf_t *out, const ol_report_sites_t *list, bool by_total)
{
  ol_buf_printf(out, "%s\n", by_total ? "Call sites by total allocated:"
                                      : "Call sites holding memory at the peak:");
  for (size_t i = 0; i < list->count && i < OL_REPORT_SITES_SHOWN; i++) {
    const ol_report_site_t *s = &list->site[i];
    char bytes[32];
    ol_format_bytes(bytes, sizeof bytes, s->bytes);
    ol_buf_printf(out, "  %10s  %6lld allocs  ", bytes, (long long)s->allocations);
    ol_report_frames_text(out, &s->frames, OL_REPORT_FRAMES_SHOWN);
    ol_buf_printf(out, "\n");
  }
}

/* The optimizer's update, the job's peak (ol_report_device_batch). */
static void text_update(ol_buf_t *out, const ol_batch_figure_t *f)
{
  char update[32];
  ol_format_bytes(update, sizeof update, f->update);
  ol_buf_printf(out, ", and the optimizer's update %s at its highest, the job's peak (its "
                "temporaries, as large as the weights: as large at any batch, and a batch is "
                "counted only where the update fits too%s)", update,
                f->fits_headroom == 0 ? "; with 20% headroom it does not" : "");
}

/* Format 1.2: the batch that would fit, for a job that fitted. */
static void text_batch(ol_buf_t *out, const ol_report_device_t *d)
{
  const ol_batch_figure_t *f = &d->batch;
  int64_t copies = f->fixed; /* autocast's copies (ol_report_device_batch) */
  char need[32], state[32], overhead[32], outside[32], cap[32], copied[32];
  ol_format_bytes(need, sizeof need, f->need);
  ol_format_bytes(state, sizeof state, f->state);
  ol_format_bytes(overhead, sizeof overhead, f->overhead);
  ol_format_bytes(outside, sizeof outside, d->stats.outside > 0 ? d->stats.outside : 0);
  ol_format_bytes(cap, sizeof cap, d->stats.capacity);
  ol_format_bytes(copied, sizeof copied, copies);
  ol_buf_printf(out, "Batch that fits: the %s needed %s above the %s that outlives iterations",
                f->update > 0 ? "forward and backward" : "peak", need, state);
  if (copies > 0)
    ol_buf_printf(out, ", %s of it autocast's 16-bit copies of the weights (one of each weight "
                  "the forward reads, held to the backward: counted as the same at any batch)",
                  copied);
  if (f->update > 0)
    text_update(out, f);
  if (f->overhead > 0)
    ol_buf_printf(out, ", and the allocator reserved %s more (counted as the same at any batch)",
                  overhead);
  if (d->stats.outside >= 0)
    ol_buf_printf(out, "; with %s held outside the allocator on this %s device, ", outside, cap);
  else
    ol_buf_printf(out, "; on this %s device (what is held outside the allocator not known: "
                       "none counted), ", cap);
  if (f->batch > 0)
    ol_buf_printf(out, "at batch %lld: batch %lld fits, %lld with 20%% headroom\n",
                  (long long)f->batch, (long long)f->fits, (long long)f->fits_headroom);
  else
    ol_buf_printf(out, "a batch of %lld%% of the current one fits, %lld%% with 20%% headroom "
                       "(OOMLENS_BATCH or --batch N gives it in samples)\n",
                  (long long)(f->fits / 10), (long long)(f->fits_headroom / 10));
}

/* The batch was given but no figure can be: say why, not nothing. */
static void text_no_batch(ol_buf_t *out, const ol_report_device_t *d)
{
  if (ol_phases_iteration_need(&d->stats.phases) <= 0)
    ol_buf_printf(out, "Batch that fits: not known: no iteration was found in the allocations "
                       "seen (too few steps, or only PyTorch's cached segments, which it keeps: "
                       "--manage sees the tensors)\n");
  else
    ol_buf_printf(out, "Batch that fits: not known: the device's size was not learnt\n");
}

static void text_calls(ol_buf_t *out, const ol_report_device_t *d)
{
  const ol_device_stats_t *dev = &d->stats;
  ol_buf_printf(out, "Calls seen:\n");
#define OL_TEXT_CALL(field, what) \
  ol_buf_printf(out, "  %-16s %12lld  %s\n", #field, (long long)dev->field, what);
  OL_CALL_FIELDS(OL_TEXT_CALL)
#undef OL_TEXT_CALL
  if (dev->mem_total > 0) {
    char free_text[32], total_text[32];
    ol_format_bytes(free_text, sizeof free_text, dev->mem_free);
    ol_format_bytes(total_text, sizeof total_text, dev->mem_total);
    ol_buf_printf(out, "Device memory at the last cuMemGetInfo: %s free of %s\n", free_text,
                  total_text);
  }
  if (dev->recovered_allocs > 0)
    ol_buf_printf(out, "Failed allocations the allocator's retry recovered (after releasing "
                       "its cache; not out-of-memory errors): %lld\n",
                  (long long)dev->recovered_allocs);
  if (dev->phases.leak.fired) { /* format 1.2 */
    ol_buf_printf(out, "Leak warning at iteration %llu: ",
                  (unsigned long long)dev->phases.leak.at);
    ol_leak_warning_text(out, &dev->phases.leak, ol_report_leak_namer, (void *)d);
    ol_buf_printf(out, "\n");
    if (!ol_leak_standing(&dev->phases.leak)) { /* format 1.14 */
      ol_buf_printf(out, "Withdrawn: ");
      ol_leak_withdrawn_text(out, &dev->phases.leak);
      ol_buf_printf(out, "\n");
    }
  }
  if (d->has_batch)
    text_batch(out, d);
  else if (dev->batch > 0 && dev->num_ooms == 0)
    text_no_batch(out, d);
  if (dev->num_ooms > 0) {
    char request[32];
    ol_format_size(request, sizeof request, dev->last_oom_request);
    ol_buf_printf(out, "Last out-of-memory request: %s\n", request);
    if (d->diagnosed) {
      ol_oom_explain(out, &dev->last_oom, dev->last_oom_class, ol_report_oom_namer, (void *)d);
      ol_buf_printf(out, "\n");
    }
  }
}

static void text_header(ol_buf_t *out, const ol_report_t *r)
{
  time_t when = (time_t)r->time_unix;
  struct tm tm;
  char stamp[64];
  gmtime_r(&when, &tm);
  strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S UTC", &tm);
  ol_buf_printf(out, "oomlens %s memory report (%s mode)\n", text_of(r->version),
                text_of(r->mode));
  ol_buf_printf(out, "pid %ld, rank %s, written at %s (%s)\n", r->pid, text_of(r->rank),
                text_of(r->reason), stamp);
  ol_buf_printf(out, "command: %s\n", text_of(r->command));
  if (r->tracking_failed)
    ol_buf_printf(out, "warning: tracking stopped early (out of host memory); "
                       "figures stop at that point\n");
  if (r->has_stacks)
    text_stacks_note(out, &r->stacks);
  text_own_time(out, &r->own_time);
  if (r->device_count == 0)
    ol_buf_printf(out, "\nNo device memory was allocated through CUDA in this process.\n");
}

/* A trace has no process to speak of: what it recorded, in two lines. */
static void trace_header(ol_buf_t *out, const ol_report_t *r)
{
  const ol_report_device_t *d = &r->devices[0];
  char a[32], b[32];
  ol_format_bytes(a, sizeof a, d->stats.allocated_bytes[OL_POOL_ALL].peak);
  ol_format_bytes(b, sizeof b, d->stats.reserved_bytes[OL_POOL_ALL].peak);
  ol_buf_printf(out, "oomlens %s: the recorded trace %s\n", text_of(r->version),
                text_of(r->source));
  ol_buf_printf(out, "peak allocated %s (tensors), peak reserved %s (PyTorch's segments), "
                "%lld out-of-memory event(s) over %.3f s\n", a, b,
                (long long)d->stats.num_ooms,
                d->has_timeline ? d->timeline.count * (double)d->timeline.width_ns / 1e9 : 0.0);
  /* report_view.c puts a trace's note (cut short, incomplete) in its reason */
  if (r->reason && strncmp(r->reason, "trace, ", strlen("trace, ")) == 0)
    ol_buf_printf(out, "note: %s\n", r->reason + strlen("trace, "));
}

void ol_report_render_text(ol_buf_t *out, const ol_report_t *r)
{
  bool trace = ol_report_is_trace(r) && r->device_count > 0;
  out->failed |= r->failed;
  if (trace)
    trace_header(out, r);
  else
    text_header(out, r);
  for (int i = 0; i < r->device_count; i++) {
    const ol_report_device_t *d = &r->devices[i];
    ol_buf_printf(out, "\n");
    text_table(out, d->device, &d->stats);
    text_origins(out, &d->stats);
    if (d->has_sites) {
      text_roles(out, r, d);
      text_sites(out, &d->at_peak, false);
      text_sites(out, &d->by_total, true);
    }
    text_calls(out, d);
  }
}

/* ---- the JSON ------------------------------------------------------------ */

static const char *const pool_names[OL_POOL_COUNT] = {"all", "large_pool", "small_pool"};

static void json_stat(ol_buf_t *out, const ol_stat_t *stat)
{
  ol_buf_printf(out, "{\"current\": %lld, \"peak\": %lld, \"allocated\": %lld, \"freed\": %lld}",
                (long long)stat->current, (long long)stat->peak, (long long)stat->allocated,
                (long long)stat->freed);
}

static void json_pools(ol_buf_t *out, const char *name, const ol_stat_t stat[])
{
  ol_buf_printf(out, "        \"%s\": {", name);
  for (int p = 0; p < OL_POOL_COUNT; p++) {
    ol_buf_printf(out, "%s\"%s\": ", p ? ", " : "", pool_names[p]);
    json_stat(out, &stat[p]);
  }
  ol_buf_printf(out, "},\n");
}

static void json_stats(ol_buf_t *out, const ol_device_stats_t *dev)
{
  ol_buf_printf(out, "      \"stats\": {\n");
#define OL_JSON_POOLS(field, title, bytes) json_pools(out, #field, dev->field);
  OL_STAT_FIELDS(OL_JSON_POOLS)
#undef OL_JSON_POOLS
  const struct { const char *name; const ol_stat_t *stat; } singles[] = {
    {"oversize_allocations", &dev->oversize_allocations},
    {"oversize_segments", &dev->oversize_segments},
    {"vmm_mapped_bytes", &dev->vmm_mapped_bytes},
    {"va_reserved_bytes", &dev->va_reserved_bytes},
    {"pending_free_bytes", &dev->pending_bytes},
  };
  for (size_t i = 0; i < sizeof singles / sizeof *singles; i++) {
    ol_buf_printf(out, "        \"%s\": ", singles[i].name);
    json_stat(out, singles[i].stat);
    ol_buf_printf(out, "%s\n", i + 1 < sizeof singles / sizeof *singles ? "," : "");
  }
  ol_buf_printf(out, "      },\n");
}

static void json_origins_calls(ol_buf_t *out, const ol_device_stats_t *dev)
{
  ol_buf_printf(out, "      \"origins\": {");
  const char *sep = "";
#define OL_JSON_ORIGIN(name, what)                          \
  ol_buf_printf(out, "%s\"%s\": ", sep, #name), sep = ", ";  \
  json_stat(out, &dev->origin_bytes[OL_ORIGIN_##name]);
  OL_ORIGINS(OL_JSON_ORIGIN)
#undef OL_JSON_ORIGIN
  ol_buf_printf(out, "},\n      \"calls\": {");
  sep = "";
#define OL_JSON_CALL(field, what) \
  ol_buf_printf(out, "%s\"%s\": %lld", sep, #field, (long long)dev->field), sep = ", ";
  OL_CALL_FIELDS(OL_JSON_CALL)
#undef OL_JSON_CALL
  ol_buf_printf(out, "},\n");
}

/* Format 1.1: when each device ran out (wall clock, for `oomlens merge`:
 * which rank ran out first), and how many OOMs of each class. */
static void json_oom_times(ol_buf_t *out, const ol_device_stats_t *dev)
{
  ol_buf_printf(out, ",\n      \"first_oom_time_unix\": %.6f,\n      \"last_oom_time_unix\": %.6f,"
                "\n      \"ooms_by_class\": {", dev->first_oom_unix, dev->last_oom_unix);
  for (int c = 0; c < OL_OOM_CLASS_COUNT; c++)
    ol_buf_printf(out, "%s\"%s\": %lld", c ? ", " : "", ol_oom_class_name((ol_oom_class_t)c),
                  (long long)dev->ooms_by_class[c]);
  ol_buf_printf(out, "}");
}

static void json_frames(ol_buf_t *out, const ol_report_frames_t *f)
{
  ol_frame_join_t j = {out, 0};
  ol_buf_printf(out, "[");
  for (size_t i = 0; i < f->count; i++)
    ol_frame_join_json(f->frame[i], &j);
  ol_buf_printf(out, "]");
}

static void json_site_list(ol_buf_t *out, const char *name, const ol_report_sites_t *list)
{
  ol_buf_printf(out, "\"%s\": [", name);
  for (size_t i = 0; i < list->count; i++) {
    const ol_report_site_t *s = &list->site[i];
    ol_buf_printf(out, "%s{\"bytes\": %lld, \"allocations\": %lld, \"stacks\": %d, \"frames\": ",
                  i ? ", " : "", (long long)s->bytes, (long long)s->allocations, s->stacks);
    json_frames(out, &s->frames);
    ol_buf_printf(out, "}");
  }
  ol_buf_printf(out, "]");
}

/* Format 1.2: the leak warning (phases.c), null when it did not fire. */
static void json_leak(ol_buf_t *out, const ol_report_device_t *d)
{
  const ol_leak_warning_t *w = &d->stats.phases.leak;
  ol_buf_printf(out, ",\n      \"leak_warning\": ");
  if (!w->fired) {
    ol_buf_printf(out, "null");
    return;
  }
  ol_buf_printf(out,
                "{\"growth_per_iteration\": %lld, \"since_iteration\": %llu, "
                "\"at_iteration\": %llu, \"at_s\": %.3f, \"runs_out_at_iteration\": %lld, "
                "\"runs_out_s\": %.3f, \"site\": ",
                (long long)w->growth, (unsigned long long)w->since, (unsigned long long)w->at,
                w->at_s, (long long)w->runs_out_at, w->runs_out_s);
  if (w->site >= 0)
    ol_report_leak_namer(out, w->site, true, (void *)d);
  else
    ol_buf_printf(out, "null");
  ol_buf_printf(out, ", \"site_growth\": %lld, \"allocations_growth_per_iteration\": %lld, "
                "\"withdrawn_at_iteration\": ",
                (long long)w->site_growth, (long long)w->allocations_growth);
  if (w->withdrawn_at > 0)
    ol_buf_printf(out, "%llu, \"withdrawn_because\": \"%s\"}", (unsigned long long)w->withdrawn_at,
                  w->stopped ? "stopped" : "given back");
  else
    ol_buf_printf(out, "null, \"withdrawn_because\": null}");
}

/* Format 1.2: the batch that would fit (null: none to give). */
static void json_batch(ol_buf_t *out, const ol_report_device_t *d)
{
  const ol_batch_figure_t *f = &d->batch;
  ol_buf_printf(out, ",\n      \"batch_figure\": ");
  if (!d->has_batch) {
    ol_buf_printf(out, "null");
    return;
  }
  /* copies (1.36): the part of need counted as the same at any batch;
   * update (1.37): the optimizer's update above the state where it was
   * the job's peak, else 0 (ol_report_device_batch) */
  ol_buf_printf(out, "{\"batch\": %lld, \"capacity\": %lld, \"outside\": %lld, \"available\": %lld, "
                "\"state\": %lld, \"need\": %lld, \"overhead\": %lld, \"copies\": %lld, "
                "\"update\": %lld, \"fits\": %lld, \"fits_headroom\": %lld}",
                (long long)f->batch, (long long)d->stats.capacity, (long long)d->stats.outside,
                (long long)f->available, (long long)f->state, (long long)f->need,
                (long long)f->overhead, (long long)f->fixed, (long long)f->update,
                (long long)f->fits, (long long)f->fits_headroom);
}

/* Format 1.2: memory by role, with the sites. */
static void json_roles(ol_buf_t *out, const ol_report_device_t *d)
{
  ol_buf_printf(out, ",\n      \"roles\": {\"known\": %s, \"at_peak\": ",
                d->roles_known ? "true" : "false");
  ol_roles_json(out, d->roles_at_peak);
  ol_buf_printf(out, ", \"now\": ");
  ol_roles_json(out, d->roles_now);
  ol_buf_printf(out, "}");
}

static void json_device(ol_buf_t *out, const ol_report_device_t *d)
{
  const ol_device_stats_t *dev = &d->stats;
  ol_buf_printf(out, "    {\n      \"device\": %d,\n", d->device);
  json_stats(out, dev);
  json_origins_calls(out, dev);
  ol_buf_printf(out, "      \"num_ooms\": %lld,\n      \"recovered_allocs\": %lld,\n"
                     "      \"last_oom_request\": %llu,\n",
                (long long)dev->num_ooms, (long long)dev->recovered_allocs,
                (unsigned long long)dev->last_oom_request);
  ol_buf_printf(out, "      \"mem_info\": {\"free\": %lld, \"total\": %lld},\n      \"oom\": ",
                (long long)dev->mem_free, (long long)dev->mem_total);
  if (d->diagnosed)
    ol_oom_json(out, &dev->last_oom, dev->last_oom_class, ol_report_oom_namer, (void *)d);
  else
    ol_buf_printf(out, "null");
  json_oom_times(out, dev);
  json_leak(out, d);
  json_batch(out, d);
  if (d->has_timeline) { /* format 1.1: memory over time (timeline.c) */
    ol_buf_printf(out, ",\n      \"timeline\": ");
    ol_timeline_json_times(out, &d->timeline, d->oom_time_unix);
  }
  if (d->has_sites) {
    ol_buf_printf(out, ",\n      \"sites\": {");
    json_site_list(out, "at_peak", &d->at_peak);
    ol_buf_printf(out, ", ");
    json_site_list(out, "by_total", &d->by_total);
    ol_buf_printf(out, "}");
    json_roles(out, d);
  }
  ol_buf_printf(out, "\n    }");
}

static void json_stacks(ol_buf_t *out, const ol_report_stacks_t *s)
{
  ol_buf_printf(out, "  \"stacks\": {\"native\": %s, \"depth\": %llu, \"sample_bytes\": %llu, "
                     "\"python\": {\"state\": ",
                s->native ? "true" : "false", (unsigned long long)s->depth,
                (unsigned long long)s->sample);
  ol_buf_json_string(out, s->py_state);
  ol_buf_printf(out, ", \"version\": ");
  ol_buf_json_string(out, s->py_version);
  ol_buf_printf(out, ", \"with_frames\": %llu, \"without_frames\": %llu}, "
                     "\"roles_only\": %s},\n",
                (unsigned long long)s->with_python, (unsigned long long)s->without_python,
                s->roles_only ? "true" : "false");
}

/* Always of this format and minor: the layout written is this one, whatever
 * the model was read from. */
void ol_report_render_json(ol_buf_t *out, const ol_report_t *r)
{
  out->failed |= r->failed;
  ol_buf_printf(out, "{\n  \"oomlens_report\": %d,\n  \"oomlens_report_minor\": %d,\n"
                "  \"version\": ", OL_REPORT_FORMAT, OL_REPORT_MINOR);
  ol_buf_json_string(out, text_of(r->version));
  ol_buf_printf(out, ",\n  \"mode\": ");
  ol_buf_json_string(out, text_of(r->mode));
  ol_buf_printf(out, ",\n  \"reason\": ");
  ol_buf_json_string(out, text_of(r->reason));
  ol_buf_printf(out, ",\n  \"pid\": %ld,\n  \"rank\": ", r->pid);
  ol_buf_json_string(out, text_of(r->rank));
  ol_buf_printf(out, ",\n  \"time_unix\": %.3f,\n  \"command\": ", r->time_unix);
  ol_buf_json_string(out, text_of(r->command));
  ol_buf_printf(out, ",\n  \"tracking_failed\": %s,\n", r->tracking_failed ? "true" : "false");
  if (r->has_stacks)
    json_stacks(out, &r->stacks);
  if (r->own_time.known)
    ol_buf_printf(out, "  \"own_time\": {\"span_s\": %.6f, \"manage_pool_s\": %.6f, "
                       "\"call_sites_s\": %.6f},\n",
                  (double)r->own_time.span_us / 1e6, (double)r->own_time.manage_us / 1e6,
                  (double)r->own_time.call_sites_us / 1e6);
  ol_buf_printf(out, "  \"devices\": [\n");
  for (int i = 0; i < r->device_count; i++) {
    json_device(out, &r->devices[i]);
    ol_buf_printf(out, "%s\n", i + 1 < r->device_count ? "," : "");
  }
  ol_buf_printf(out, "  ]\n}\n");
}
