/* report.c: the live reports a user attaches to a ticket, written at exit,
 * at a signal and on request.
 *
 * The text (whose pieces are core/report_text.c's) and the JSON, which
 * carries the same figures under PyTorch's memory_stats() names plus a
 * format version, are built from one snapshot taken under the tracker's
 * lock, so they always agree. */
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib.h"

static const char *const pool_names[OL_POOL_COUNT] = {"all", "large_pool", "small_pool"};

#define SITES_SHOWN OL_REPORT_SITES_SHOWN
#define FRAMES_SHOWN OL_REPORT_FRAMES_SHOWN

static void site_frames_text_upto(ol_buf_t *out, const ol_sites_t *sites, int32_t id,
                                  size_t shown)
{
  ol_frame_join_t j = {out, 0};
  ol_stacks_site_frames(sites, id, shown < FRAMES_SHOWN ? shown : FRAMES_SHOWN, ol_frame_join_text,
                        &j);
}

static void site_frames_text(ol_buf_t *out, const ol_sites_t *sites, int32_t id)
{
  site_frames_text_upto(out, sites, id, FRAMES_SHOWN);
}

/* An out-of-memory paragraph names a site by its innermost frames; its JSON
 * by the same text as one string, as replay names a trace's sites. */
#define FRAMES_IN_PARAGRAPH 3
void ol_report_site_name(ol_buf_t *out, int32_t id, bool json, void *sites)
{
  if (!json) {
    site_frames_text_upto(out, sites, id, FRAMES_IN_PARAGRAPH);
    return;
  }
  ol_buf_t name = {0};
  site_frames_text_upto(&name, sites, id, FRAMES_SHOWN);
  ol_buf_json_string(out, name.failed || !name.data ? "" : name.data);
  ol_buf_free(&name);
}

typedef struct oom_view {
  ol_buf_t *out;
  const ol_device_stats_t *dev;
  bool json;
} oom_view_t;

/* Under the tracker's lock: the record's site ids name sites of this table. */
static void visit_oom(const ol_sites_t *sites, void *arg)
{
  oom_view_t *v = arg;
  if (v->json)
    ol_oom_json(v->out, &v->dev->last_oom, v->dev->last_oom_class, ol_report_site_name,
                (void *)sites);
  else
    ol_report_text_calls(v->out, v->dev, ol_report_site_name, (void *)sites);
}

/* The device's calls and last out-of-memory diagnosis (text), or the
 * diagnosis alone (JSON), its sites named when the device has a sites table
 * (stacks on). */
static void oom_diagnosis(ol_buf_t *out, int device, const ol_device_stats_t *dev, bool json)
{
  oom_view_t view = {out, dev, json};
  if (ol_track_sites(device, visit_oom, &view))
    return;
  if (json)
    ol_oom_json(out, &dev->last_oom, dev->last_oom_class, NULL, NULL);
  else
    ol_report_text_calls(out, dev, NULL, NULL);
}

#define SITE_FRAMES_ALL (OL_STACK_MAX + OL_PY_FRAMES_MAX)

static void site_frames_json(ol_buf_t *out, const ol_sites_t *sites, int32_t id, size_t frames)
{
  ol_frame_join_t j = {out, 0};
  ol_buf_printf(out, "[");
  ol_stacks_site_frames(sites, id, frames, ol_frame_join_json, &j);
  ol_buf_printf(out, "]");
}

/* What the call sites are made of in this process (the text report's
 * note; `oomlens report` reads the same back from the JSON). */
void ol_report_stacks_now(ol_report_stacks_t *s)
{
  s->native = ol_stacks_native_available();
  s->sample = ol_option_size(OL_OPT_STACK_SAMPLE);
  ol_pyframes_status(&s->py);
}

static void json_stacks(ol_buf_t *out)
{
  ol_pyframes_status_t py;
  ol_pyframes_status(&py);
  ol_buf_printf(out, "  \"stacks\": {\"native\": %s, \"depth\": %llu, \"sample_bytes\": %llu, "
                     "\"python\": {\"state\": ",
                ol_stacks_native_available() ? "true" : "false",
                (unsigned long long)ol_option_size(OL_OPT_STACK_DEPTH),
                (unsigned long long)ol_option_size(OL_OPT_STACK_SAMPLE));
  ol_buf_json_string(out, py.state);
  ol_buf_printf(out, ", \"version\": ");
  ol_buf_json_string(out, py.version);
  ol_buf_printf(out, ", \"with_frames\": %llu, \"without_frames\": %llu}},\n",
                (unsigned long long)py.with_python, (unsigned long long)py.without_python);
}

static int64_t figure_of(const ol_sites_t *sites, int32_t id, ol_site_order_t order)
{
  const ol_site_figures_t *f = ol_sites_figures(sites, id);
  return order == OL_SITES_BY_TOTAL ? f->total : f->at_peak;
}

/* The largest sites as the report shows them: stacks alike in the frames
 * shown are one entry (on PyTorch, one Python line reaches the allocator by
 * several native paths); singly if grouping ran out of host memory. */
static size_t top_groups(const ol_sites_t *sites, ol_site_order_t order, ol_site_group_t *out,
                         size_t max)
{
  long n = ol_site_groups_top(sites, order, FRAMES_SHOWN, ol_stacks_site_frames, out, max);
  if (n >= 0)
    return (size_t)n;
  int32_t top[SITES_SHOWN * 4];
  size_t singly = ol_sites_top(sites, order, top, max < SITES_SHOWN * 4 ? max : SITES_SHOWN * 4);
  for (size_t i = 0; i < singly; i++)
    out[i] = (ol_site_group_t){top[i], figure_of(sites, top[i], order),
                               ol_sites_figures(sites, top[i])->allocations, 1};
  return singly;
}

static void text_site_list(ol_buf_t *out, const ol_sites_t *sites, ol_site_order_t order)
{
  ol_site_group_t top[SITES_SHOWN];
  size_t n = top_groups(sites, order, top, SITES_SHOWN);
  ol_report_text_sites_title(out, order == OL_SITES_BY_TOTAL);
  for (size_t i = 0; i < n; i++) {
    ol_report_text_site_figures(out, top[i].bytes, top[i].allocations);
    site_frames_text(out, sites, top[i].id);
    ol_buf_printf(out, "\n");
  }
}

/* A group of several stacks is named by the frames they share. */
static void json_site_list(ol_buf_t *out, const ol_sites_t *sites, ol_site_order_t order)
{
  ol_site_group_t top[SITES_SHOWN * 4];
  size_t n = top_groups(sites, order, top, SITES_SHOWN * 4);
  ol_buf_printf(out, "\"%s\": [", order == OL_SITES_BY_TOTAL ? "by_total" : "at_peak");
  for (size_t i = 0; i < n; i++) {
    ol_buf_printf(out, "%s{\"bytes\": %lld, \"allocations\": %lld, \"stacks\": %d, \"frames\": ",
                  i ? ", " : "", (long long)top[i].bytes, (long long)top[i].allocations,
                  top[i].sites);
    site_frames_json(out, sites, top[i].id, top[i].sites > 1 ? FRAMES_SHOWN : SITE_FRAMES_ALL);
    ol_buf_printf(out, "}");
  }
  ol_buf_printf(out, "]");
}

static void visit_text(const ol_sites_t *sites, void *arg)
{
  text_site_list(arg, sites, OL_SITES_BY_AT_PEAK);
  text_site_list(arg, sites, OL_SITES_BY_TOTAL);
}

static void visit_json(const ol_sites_t *sites, void *arg)
{
  ol_buf_printf(arg, ",\n      \"sites\": {");
  json_site_list(arg, sites, OL_SITES_BY_AT_PEAK);
  ol_buf_printf(arg, ", ");
  json_site_list(arg, sites, OL_SITES_BY_TOTAL);
  ol_buf_printf(arg, "}");
}

void ol_report_text(ol_buf_t *out, const ol_snapshot_t *snap, const ol_report_context_t *ctx)
{
  ol_report_stacks_t stacks;
  if (ol_stacks_on())
    ol_report_stacks_now(&stacks);
  ol_report_text_header(out, ctx, OL_VERSION_TEXT, ol_manage_on() ? "manage" : "observe",
                        snap->tracking_failed, snap->device_count,
                        ol_stacks_on() ? &stacks : NULL);
  for (int d = 0; d < snap->device_count; d++) {
    ol_buf_printf(out, "\n");
    ol_report_text_device(out, d, &snap->devices[d]);
    ol_report_text_origins(out, &snap->devices[d]);
    ol_track_sites(d, visit_text, out);
    oom_diagnosis(out, d, &snap->devices[d], false);
  }
}

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

/* Format 1.1: the device's memory over time (timeline.c). */
static void json_timeline(ol_buf_t *out, int device)
{
  ol_timeline_t *tl = malloc(sizeof *tl);
  if (tl && ol_track_timeline(device, tl)) {
    ol_buf_printf(out, ",\n      \"timeline\": ");
    ol_timeline_json(out, tl);
  }
  free(tl);
}

static void json_device(ol_buf_t *out, int device, const ol_device_stats_t *dev)
{
  ol_buf_printf(out, "    {\n      \"device\": %d,\n      \"stats\": {\n", device);
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
  ol_buf_printf(out, "      },\n      \"origins\": {");
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
  ol_buf_printf(out, "},\n      \"num_ooms\": %lld,\n      \"last_oom_request\": %lld,\n",
                (long long)dev->num_ooms, (long long)dev->last_oom_request);
  ol_buf_printf(out, "      \"mem_info\": {\"free\": %lld, \"total\": %lld},\n      \"oom\": ",
                (long long)dev->mem_free, (long long)dev->mem_total);
  if (dev->num_ooms > 0 && dev->last_oom.capacity > 0)
    oom_diagnosis(out, device, dev, true);
  else
    ol_buf_printf(out, "null");
  json_oom_times(out, dev);
  json_timeline(out, device);
  ol_track_sites(device, visit_json, out);
  ol_buf_printf(out, "\n    }");
}

void ol_report_json(ol_buf_t *out, const ol_snapshot_t *snap, const ol_report_context_t *ctx)
{
  ol_buf_printf(out, "{\n  \"oomlens_report\": %d,\n  \"oomlens_report_minor\": %d,\n"
                "  \"version\": \"%s\",\n", OL_REPORT_FORMAT, OL_REPORT_MINOR, OL_VERSION_TEXT);
  ol_buf_printf(out, "  \"mode\": \"%s\",\n  \"reason\": ", ol_manage_on() ? "manage" : "observe");
  ol_buf_json_string(out, ctx->reason);
  ol_buf_printf(out, ",\n  \"pid\": %ld,\n  \"rank\": ", ctx->pid);
  ol_buf_json_string(out, ctx->rank);
  ol_buf_printf(out, ",\n  \"time_unix\": %.3f,\n  \"command\": ", ctx->time_unix);
  ol_buf_json_string(out, ctx->command);
  ol_buf_printf(out, ",\n  \"tracking_failed\": %s,\n",
                snap->tracking_failed ? "true" : "false");
  if (ol_stacks_on())
    json_stacks(out);
  ol_buf_printf(out, "  \"devices\": [\n");
  for (int d = 0; d < snap->device_count; d++) {
    json_device(out, d, &snap->devices[d]);
    ol_buf_printf(out, "%s\n", d + 1 < snap->device_count ? "," : "");
  }
  ol_buf_printf(out, "  ]\n}\n");
}

/* /proc/self/cmdline with the NULs turned into spaces, at most 1 KiB. */
static void read_command(char *out, size_t cap)
{
  out[0] = '\0';
  int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return;
  ssize_t n = read(fd, out, cap - 1);
  close(fd);
  if (n <= 0)
    return;
  while (n > 0 && out[n - 1] == '\0')
    n--;
  for (ssize_t i = 0; i < n; i++)
    if (out[i] == '\0')
      out[i] = ' ';
  out[n] = '\0';
}

static int publish(const char *path, ol_buf_t *buf)
{
  if (buf->failed) {
    ol_log_warn("out of memory while formatting %s; not written", path);
    return -1;
  }
  return ol_write_file_atomic(path, buf->data, buf->len);
}

static int report_paths(char *text_path, char *json_path, size_t cap)
{
  const char *pattern = ol_option_text(OL_OPT_REPORT);
  if (ol_lifecycle_output_path(pattern, NULL, text_path, cap) != 0)
    return -1;
  return ol_json_path_for(text_path, json_path, cap);
}

static pthread_mutex_t writing = PTHREAD_MUTEX_INITIALIZER;

/* Returns once no report is being written: a report started (on a signal)
 * is finished before the process goes away. */
void ol_report_wait(void)
{
  pthread_mutex_lock(&writing);
  pthread_mutex_unlock(&writing);
}

int ol_report_write_all(const char *reason)
{
  char text_path[PATH_MAX], json_path[PATH_MAX], command[1024];
  ol_snapshot_t *snap = malloc(sizeof *snap);
  if (!snap)
    return -1;
  pthread_mutex_lock(&writing);
  ol_track_snapshot(snap);
  read_command(command, sizeof command);
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  ol_report_context_t ctx = {reason, (long)getpid(), ol_rank_text(), command,
                             (double)now.tv_sec + now.tv_nsec / 1e9};
  int result = -1;
  if (report_paths(text_path, json_path, sizeof text_path) != 0) {
    ol_log_warn("report path from OOMLENS_REPORT is too long; no report written");
  } else {
    ol_buf_t text = {0}, json = {0};
    ol_report_text(&text, snap, &ctx);
    result = publish(text_path, &text);
    if (ol_option_bool(OL_OPT_JSON)) {
      ol_report_json(&json, snap, &ctx);
      result |= publish(json_path, &json);
    }
    if (result == 0)
      ol_log_info("report written to %s", text_path);
    ol_buf_free(&text);
    ol_buf_free(&json);
  }
  pthread_mutex_unlock(&writing);
  free(snap);
  return result;
}
