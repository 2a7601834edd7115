/* test_report_model.c: the report model (core/report_model.c) and its one
 * renderer (core/report_render.c). A model built here from a sites table,
 * a diagnosis and a timeline owns what it shows (the table is freed before
 * rendering); its site lists are grouped as the library groups them; and
 * its text and its JSON agree: every figure of the text (the table's
 * cells, origins, calls, the site lists, the header, the OOM paragraph) is
 * found in the JSON with the same value. */
#include <check.h>

#include "check_run.h"
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "json.h"
#include "core.h"

#define MiB (1ll << 20)

static ol_report_t model;
static char *text;
static ol_json_t *json;

/* A site's key in a trace's shape: frames joined by ';'. */
static int32_t site(ol_sites_t *sites, const char *key, int64_t bytes)
{
  int32_t id = ol_sites_intern(sites, key, strlen(key));
  ck_assert_int_ge(id, 0);
  ol_sites_add(sites, id, bytes);
  return id;
}

/* Different magnitudes, so byte cells print in B, KiB, MiB and GiB. */
static int64_t figure(void)
{
  static int64_t k;
  k++;
  return (k * 7919 % 1000 + 1) << (k % 34);
}

static void fill_stat(ol_stat_t *s)
{
  *s = (ol_stat_t){figure(), figure(), figure(), figure()};
}

static void fill_stats(ol_device_stats_t *s)
{
#define FILL_POOLS(field, title, bytes) \
  for (int p = 0; p < OL_POOL_COUNT; p++) \
    fill_stat(&s->field[p]);
  OL_STAT_FIELDS(FILL_POOLS)
#undef FILL_POOLS
  fill_stat(&s->oversize_allocations);
  fill_stat(&s->oversize_segments);
  fill_stat(&s->vmm_mapped_bytes);
  fill_stat(&s->va_reserved_bytes);
  fill_stat(&s->pending_bytes);
  for (int o = 0; o < OL_ORIGIN_COUNT; o++)
    fill_stat(&s->origin_bytes[o]);
#define FILL_CALL(field, what) s->field = figure() % 100000;
  OL_CALL_FIELDS(FILL_CALL)
#undef FILL_CALL
  s->mem_free = 3 * MiB + 12345;
  s->mem_total = 1024 * MiB;
}

/* Sites: a deep one that grows across iterations, two stacks alike in the
 * six frames shown (one entry), and a short one. */
static ol_sites_t *sites_table(void)
{
  ol_sites_t *sites = ol_sites_new();
  const char *deep = "a0.py:1:f0;a1.py:2:f1;a2.py:3:f2;a3.py:4:f3;a4.py:5:f4;a5.py:6:f5;"
                     "a6.py:7:f6;a7.py:8:f7";
  site(sites, deep, 100 * MiB);
  site(sites, "b0:1:g;b1:2:g;b2:3:g;b3:4:g;b4:5:g;b5:6:g;native_one", 30 * MiB);
  site(sites, "b0:1:g;b1:2:g;b2:3:g;b3:4:g;b4:5:g;b5:6:g;native_two", 20 * MiB);
  site(sites, "c0.py:9:short", 5 * MiB);
  ol_sites_mark_peak(sites);
  ol_sites_mark_valley(sites, 2);
  site(sites, deep, 64 * MiB); /* kept: held at the next iteration's lowest too */
  ol_sites_mark_valley(sites, 3);
  ol_sites_mark_valley(sites, 4);
  site(sites, "c0.py:9:short", MiB);
  return sites;
}

static void diagnose(ol_device_stats_t *s, const ol_sites_t *sites)
{
  ol_oom_record_t *r = &s->last_oom;
  *r = (ol_oom_record_t){.request = 64 * MiB, .capacity = 1024 * MiB, .device_free = 3 * MiB,
                         .allocated = 220 * MiB, .reserved = 900 * MiB, .free_reserved = -1,
                         .largest_free_block = -1, .persistent = 500 * MiB, .growth = 64 * MiB,
                         .iterations = 5, .self_device_bytes = 0};
  ol_oom_note_sites(r, sites, -1);
  s->last_oom_class = ol_oom_classify(r);
  ck_assert_str_eq(ol_oom_class_name(s->last_oom_class), "leak");
  s->num_ooms = 2;
  s->last_oom_request = 64 * MiB;
  s->ooms_by_class[OL_OOM_leak] = 2;
  s->first_oom_unix = 1765000001.25;
  s->last_oom_unix = 1765000002.5;
}

static void render(void)
{
  ol_buf_t t = {0}, j = {0};
  ol_report_render_text(&t, &model);
  ol_report_render_json(&j, &model);
  ck_assert(!t.failed && !j.failed);
  char err[256];
  json = ol_json_parse(j.data, j.len, err, sizeof err);
  ck_assert_msg(json, "%s\n%s", err, j.data);
  text = t.data;
  ol_buf_free(&j);
}

static void setup(void)
{
  ck_assert_int_eq(ol_report_init(&model, 2), 0);
  ol_report_set_text(&model, &model.version, "9.8.7");
  ol_report_set_text(&model, &model.mode, "observe");
  ol_report_set_text(&model, &model.reason, "signal");
  ol_report_set_text(&model, &model.rank, "3");
  ol_report_set_text(&model, &model.command, "python train.py --batch 64");
  model.pid = 4321;
  model.time_unix = 1765000003.456;
  model.has_stacks = true;
  model.stacks = (ol_report_stacks_t){.native = true, .depth = 24, .sample = 1048576,
                                      .py_state = "ok", .py_version = "3.11.7",
                                      .with_python = 70, .without_python = 30};
  model.own_time = (ol_report_own_time_t){.known = true, .span_us = 50000000,
                                          .manage_us = 1000000, .call_sites_us = 250000};
  ol_device_stats_t stats = {0};
  fill_stats(&stats);
  ol_sites_t *sites = sites_table();
  diagnose(&stats, sites);
  ol_report_device_fill(&model, &model.devices[0], 0, &stats, sites, ol_sites_text_frames);
  ol_sites_free(sites); /* the model owns its names and lists */
  ol_timeline_t tl;
  ol_timeline_init(&tl, 5000, 1765000000.123456);
  for (uint64_t t = 0; t < 40; t++)
    ol_timeline_note(&tl, 5000 + t * 1000, (int64_t)(t * MiB), (int64_t)(t * 2 * MiB));
  ol_timeline_oom(&tl, 45000, 64 * MiB);
  ol_report_device_timeline(&model.devices[0], &tl);
  ol_device_stats_t plain = {0};
  fill_stats(&plain);
  ol_report_device_fill(&model, &model.devices[1], 1, &plain, NULL, NULL);
  ck_assert(!model.failed);
  render();
}

static void teardown(void)
{
  free(text);
  text = NULL;
  ol_json_free(json);
  json = NULL;
  ol_report_free(&model);
}

/* ---- reading the text back ------------------------------------------- */

static const ol_json_t *at(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const ol_json_t *at(const char *fmt, ...)
{
  char path[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(path, sizeof path, fmt, ap);
  va_end(ap);
  const ol_json_t *node = ol_json_path(json, path);
  ck_assert_msg(node, "no %s in the JSON", path);
  return node;
}

static int64_t int_of(const ol_json_t *node)
{
  int64_t v;
  ck_assert(ol_json_int64(node, &v));
  return v;
}

static const char *bytes_of(const ol_json_t *node)
{
  static char buf[4][32];
  static unsigned next;
  char *b = buf[next++ % 4];
  ol_format_bytes(b, 32, int_of(node));
  return b;
}

static void trim(char *s)
{
  size_t n = strlen(s), from = 0;
  while (n > 0 && s[n - 1] == ' ')
    s[--n] = '\0';
  while (s[from] == ' ')
    from++;
  memmove(s, s + from, n - from + 1);
}

/* The text of device d's section, up to the next device's. */
static char *section(int d)
{
  char title[64];
  snprintf(title, sizeof title, "device ID %d ", d);
  const char *from = strstr(text, title), *next;
  ck_assert_ptr_nonnull(from);
  snprintf(title, sizeof title, "device ID %d ", d + 1);
  next = strstr(from, title);
  size_t n = next ? (size_t)(next - from) : strlen(from);
  char *copy = strndup(from, n);
  ck_assert_ptr_nonnull(copy);
  return copy;
}

/* The next line of *cursor (consumed), NULL at the end. */
static char *next_line(char **cursor)
{
  if (!*cursor || !**cursor)
    return NULL;
  char *line = *cursor, *end = strchr(line, '\n');
  if (end) {
    *end = '\0';
    *cursor = end + 1;
  } else {
    *cursor = NULL;
  }
  return line;
}

static const char *single_field(const char *title)
{
  static const char *const map[][2] = {
    {"Oversize allocations", "oversize_allocations"},
    {"Oversize GPU segments", "oversize_segments"},
    {"VMM mapped memory", "vmm_mapped_bytes"},
    {"VMM address space", "va_reserved_bytes"},
    {"Freed, awaiting fence", "pending_free_bytes"},
  };
  for (size_t i = 0; i < sizeof map / sizeof *map; i++)
    if (!strcmp(title, map[i][0]))
      return map[i][1];
  return NULL;
}

/* One row of the table: its four cells against the JSON's stat. */
static int table_row(int d, char *line, const char **field, bool *bytes)
{
  char *cell[5];
  int n = 0;
  for (char *c = strtok(line + 1, "|"); c && n < 5; c = strtok(NULL, "|"))
    cell[n++] = c;
  if (n != 5)
    return 0;
  for (int i = 0; i < 5; i++)
    trim(cell[i]);
  char path[128];
  const char *pool = "all";
  if (!strcmp(cell[0], "Metric"))
    return 0;
  if (!strcmp(cell[0], "from large pool") || !strcmp(cell[0], "from small pool")) {
    pool = cell[0][5] == 'l' ? "large_pool" : "small_pool";
  } else {
    *field = NULL;
#define ROW_FIELD(name, row_title, is_bytes) \
    if (!strcmp(cell[0], row_title)) { *field = #name; *bytes = is_bytes; }
    OL_STAT_FIELDS(ROW_FIELD)
#undef ROW_FIELD
  }
  const char *single = single_field(cell[0]);
  if (single) {
    snprintf(path, sizeof path, "devices[%d].stats.%s", d, single);
    *bytes = strstr(single, "bytes") != NULL;
  } else {
    ck_assert_msg(*field, "row %s of no field", cell[0]);
    snprintf(path, sizeof path, "devices[%d].stats.%s.%s", d, *field, pool);
  }
  static const char *const columns[4] = {"current", "peak", "allocated", "freed"};
  for (int c = 0; c < 4; c++) {
    const ol_json_t *v = at("%s.%s", path, columns[c]);
    char want[32];
    if (*bytes)
      snprintf(want, sizeof want, "%s", bytes_of(v));
    else
      snprintf(want, sizeof want, "%lld", (long long)int_of(v));
    ck_assert_msg(!strcmp(cell[c + 1], want), "%s.%s: text %s, JSON %s", path, columns[c],
                  cell[c + 1], want);
  }
  if (single)
    *field = NULL;
  return 1;
}

static int origin_row(int d, const char *line)
{
  char name[16];
  if (sscanf(line, " %15s", name) != 1)
    return 0;
  const char *slash = strstr(line, " / ");
  if (!slash)
    return 0;
  char cur[32], peak[32];
  snprintf(cur, sizeof cur, "%.*s", (int)(slash - line - 2 - 8), line + 2 + 8);
  snprintf(peak, sizeof peak, "%.12s", slash + 3);
  trim(cur);
  trim(peak);
  ck_assert_str_eq(cur, bytes_of(at("devices[%d].origins.%s.current", d, name)));
  ck_assert_str_eq(peak, bytes_of(at("devices[%d].origins.%s.peak", d, name)));
  return 1;
}

static int call_row(int d, const char *line)
{
  char name[32];
  long long value;
  if (sscanf(line, " %31s %lld", name, &value) != 2)
    return 0;
  ck_assert_int_eq(value, int_of(at("devices[%d].calls.%s", d, name)));
  return 1;
}

/* "  768.00 MiB     104 allocs  a < b < c": figures and frames shown. */
static int site_row(int d, const char *list, int i, const char *line)
{
  char bytes[32];
  long long allocs;
  const char *frames = strstr(line, " allocs  ");
  ck_assert_ptr_nonnull(frames);
  frames += strlen(" allocs  ");
  snprintf(bytes, sizeof bytes, "%.10s", line + 2);
  trim(bytes);
  ck_assert_int_eq(sscanf(line + 12, "%lld", &allocs), 1);
  ck_assert_str_eq(bytes, bytes_of(at("devices[%d].sites.%s[%d].bytes", d, list, i)));
  ck_assert_int_eq(allocs, int_of(at("devices[%d].sites.%s[%d].allocations", d, list, i)));
  const ol_json_t *f = at("devices[%d].sites.%s[%d].frames", d, list, i);
  char joined[1024] = "";
  for (size_t k = 0; k < ol_json_length(f) && k < OL_REPORT_FRAMES_SHOWN; k++)
    snprintf(joined + strlen(joined), sizeof joined - strlen(joined), "%s%s",
             k ? OL_FRAME_SEP : "", ol_json_string(ol_json_at(f, k)));
  ck_assert_str_eq(frames, joined);
  return 1;
}

/* The name of a site in the paragraph: the JSON's name cut to its first
 * frames. */
static void paragraph_name(char *out, size_t cap, const char *json_name)
{
  const char *end = json_name;
  for (int k = 0; (end = strstr(end, OL_FRAME_SEP)) && ++k < OL_REPORT_FRAMES_IN_PARAGRAPH;
       end += strlen(OL_FRAME_SEP))
    ;
  snprintf(out, cap, "%.*s", (int)(end ? (size_t)(end - json_name) : strlen(json_name)),
           json_name);
}

static void check_paragraph(int d, const char *line)
{
  const ol_json_t *oom = at("devices[%d].oom", d);
  char want[512], name[256];
  snprintf(want, sizeof want, "out of memory (%s: ",
           ol_json_string(at("devices[%d].oom.class", d)));
  ck_assert_msg(strncmp(line, want, strlen(want)) == 0, "%s", line);
  snprintf(want, sizeof want, "a request of %s on a %s device where this process held %s "
           "reserved, %s allocated.", bytes_of(ol_json_get(oom, "request")),
           bytes_of(ol_json_get(oom, "capacity")), bytes_of(ol_json_get(oom, "reserved")),
           bytes_of(ol_json_get(oom, "allocated")));
  ck_assert_msg(strstr(line, want), "no \"%s\" in %s", want, line);
  ck_assert_msg(strstr(line, ol_json_string(ol_json_get(oom, "advice"))), "advice not in %s",
                line);
  const ol_json_t *holders = ol_json_get(oom, "sites");
  ck_assert_uint_eq(ol_json_length(holders), 3);
  for (size_t i = 0; i < ol_json_length(holders); i++) {
    const ol_json_t *h = ol_json_at(holders, i);
    paragraph_name(name, sizeof name, ol_json_string(ol_json_get(h, "site")));
    snprintf(want, sizeof want, "%s%s (%s)", i ? "; " : "Held at the failure by: ", name,
             bytes_of(ol_json_get(h, "bytes")));
    ck_assert_msg(strstr(line, want), "no \"%s\" in %s", want, line);
  }
  paragraph_name(name, sizeof name, ol_json_string(at("devices[%d].oom.growing_site.site", d)));
  snprintf(want, sizeof want, "Grew most across iterations (+%s): %s.",
           bytes_of(at("devices[%d].oom.growing_site.growth", d)), name);
  ck_assert_msg(strstr(line, want), "no \"%s\" in %s", want, line);
}

/* Walks a device's section line by line; returns the figures checked. */
static int check_device(int d)
{
  char *copy = section(d), *cursor = copy, *line;
  const char *field = NULL, *list = NULL;
  bool bytes = false;
  enum { TABLE, ORIGINS, SITES, CALLS } part = TABLE;
  int checked = 0, site_i = 0;
  char want[128];
  while ((line = next_line(&cursor))) {
    long long a, b;
    if (sscanf(line, "| CUDA OOMs: %lld | failed allocations: %lld", &a, &b) == 2) {
      ck_assert_int_eq(a, int_of(at("devices[%d].num_ooms", d)));
      ck_assert_int_eq(b, int_of(at("devices[%d].calls.failed_allocs", d)));
      checked += 2;
    } else if (!strncmp(line, "Where the reserved", 18)) {
      part = ORIGINS;
    } else if (!strcmp(line, "Call sites holding memory at the peak:") ||
               !strcmp(line, "Call sites by total allocated:")) {
      part = SITES;
      list = line[11] == 'h' ? "at_peak" : "by_total";
      site_i = 0;
    } else if (!strcmp(line, "Calls seen:")) {
      part = CALLS;
    } else if (!strncmp(line, "Device memory at the last cuMemGetInfo: ", 40)) {
      snprintf(want, sizeof want, "%s free of %s", bytes_of(at("devices[%d].mem_info.free", d)),
               bytes_of(at("devices[%d].mem_info.total", d)));
      ck_assert_str_eq(line + 40, want);
      checked += 2;
    } else if (!strncmp(line, "Last out-of-memory request: ", 28)) {
      ck_assert_str_eq(line + 28, bytes_of(at("devices[%d].last_oom_request", d)));
      checked++;
    } else if (!strncmp(line, "out of memory (", 15)) {
      check_paragraph(d, line);
      checked++;
    } else if (part == TABLE && line[0] == '|') {
      checked += 4 * table_row(d, line, &field, &bytes);
    } else if (part == ORIGINS) {
      checked += 2 * origin_row(d, line);
    } else if (part == SITES) {
      checked += 3 * site_row(d, list, site_i++, line);
    } else if (part == CALLS) {
      checked += call_row(d, line);
    }
  }
  free(copy);
  return checked;
}

#define TABLE_CELLS ((9 * 3 + 5) * 4)

START_TEST(every_figure_of_the_text_is_in_the_json)
{
  /* device 0: the table, 2 header counts, 4 origins x 2, 14 calls, the
   * device's memory (2), the last request, the paragraph, and 3 sites a
   * list (the two alike stacks are one) x 3 figures. */
  int calls = 0;
#define COUNT_CALL(field, what) calls++;
  OL_CALL_FIELDS(COUNT_CALL)
#undef COUNT_CALL
  int expected = TABLE_CELLS + 2 + OL_ORIGIN_COUNT * 2 + calls + 2 + 1 + 1 + 2 * 3 * 3;
  ck_assert_int_eq(check_device(0), expected);
  ck_assert_int_eq(check_device(1), TABLE_CELLS + 2 + OL_ORIGIN_COUNT * 2 + calls + 2);
  ck_assert_uint_eq(ol_json_length(at("devices[0].sites.at_peak")), 3);
  ck_assert_ptr_null(ol_json_path(json, "devices[1].sites"));
  ck_assert_int_eq(ol_json_kind(at("devices[1].oom")), OL_JSON_NULL);
}
END_TEST

START_TEST(header_and_note_agree_with_the_json)
{
  char want[256], stamp[64];
  snprintf(want, sizeof want, "oomlens %s memory report (%s mode)\n",
           ol_json_string(at("version")), ol_json_string(at("mode")));
  ck_assert_msg(!strncmp(text, want, strlen(want)), "%s", text);
  time_t when = (time_t)ol_json_number(at("time_unix"));
  struct tm tm;
  gmtime_r(&when, &tm);
  strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S UTC", &tm);
  snprintf(want, sizeof want, "pid %lld, rank %s, written at %s (%s)\ncommand: %s\n",
           (long long)int_of(at("pid")), ol_json_string(at("rank")),
           ol_json_string(at("reason")), stamp, ol_json_string(at("command")));
  ck_assert_msg(strstr(text, want), "no \"%s\"", want);
  snprintf(want, sizeof want, "Call sites: native frames by libunwind, stacks for a sample of "
           "one in %lld bytes; Python frames: CPython %s, in %lld of %lld stacks taken",
           (long long)int_of(at("stacks.sample_bytes")),
           ol_json_string(at("stacks.python.version")),
           (long long)int_of(at("stacks.python.with_frames")),
           (long long)(int_of(at("stacks.python.with_frames")) +
                       int_of(at("stacks.python.without_frames"))));
  ck_assert_msg(strstr(text, want), "no \"%s\"", want);
  ck_assert_int_eq(int_of(at("stacks.depth")), 24);
  /* oomlens's own time, and its shares of the span it was spent in. */
  double span = ol_json_number(at("own_time.span_s"));
  double hooks = ol_json_number(at("own_time.manage_pool_s"));
  double sites = ol_json_number(at("own_time.call_sites_s"));
  snprintf(want, sizeof want, "oomlens's own time on the job's threads in %.1f s: manage mode's "
           "pool %.3f s (%.2f%%), call sites %.3f s (%.2f%%)\n", span, hooks,
           100.0 * hooks / span, sites, 100.0 * sites / span);
  ck_assert_msg(strstr(text, want), "no \"%s\"", want);
  ck_assert_msg(strstr(text, "pool 1.000 s (2.00%), call sites 0.250 s (0.50%)"), "%s", text);
  ck_assert_int_eq(int_of(at("oomlens_report")), OL_REPORT_FORMAT);
  ck_assert_int_eq(int_of(at("oomlens_report_minor")), OL_REPORT_MINOR);
}
END_TEST

/* As the library lists them: two stacks alike in the six frames shown are
 * one entry named by those frames; a single stack keeps all its frames
 * (the text shows six); the diagnosis names its sites by three frames in
 * the paragraph and six in the JSON. */
START_TEST(lists_grouped_and_names_owned)
{
  const ol_report_device_t *d = &model.devices[0];
  ck_assert(d->has_sites && d->diagnosed);
  ck_assert_uint_eq(d->at_peak.count, 3);
  ck_assert_int_eq(d->at_peak.site[0].bytes, 100 * MiB);
  ck_assert_uint_eq(d->at_peak.site[0].frames.count, 8);
  ck_assert_int_eq(d->at_peak.site[1].bytes, 50 * MiB);
  ck_assert_int_eq(d->at_peak.site[1].stacks, 2);
  ck_assert_uint_eq(d->at_peak.site[1].frames.count, OL_REPORT_FRAMES_SHOWN);
  ck_assert_str_eq(d->at_peak.site[1].frames.frame[5], "b5:6:g");
  ck_assert_int_eq(d->by_total.site[0].bytes, 164 * MiB);
  ck_assert_uint_eq(ol_json_length(at("devices[0].sites.at_peak[0].frames")), 8);
  ck_assert_ptr_null(strstr(text, "a6.py:7:f6")); /* past the six frames shown */
  const ol_oom_record_t *r = &d->stats.last_oom;
  ck_assert_int_eq(r->holder_count, 3);
  ck_assert_int_eq(r->holders[0].id, 0);
  ck_assert_int_eq(r->grower.id, OL_REPORT_GROWER);
  ck_assert_int_eq(r->grower.bytes, 64 * MiB);
  ck_assert_str_eq(ol_json_string(at("devices[0].oom.growing_site.site")),
                   "a0.py:1:f0 < a1.py:2:f1 < a2.py:3:f2 < a3.py:4:f3 < a4.py:5:f4 < a5.py:6:f5");
  ck_assert_ptr_nonnull(strstr(text, "(+64.00 MiB): a0.py:1:f0 < a1.py:2:f1 < a2.py:3:f2."));
  double oom_at = ol_json_number(at("devices[0].timeline.ooms[0].time_unix"));
  ck_assert_msg(fabs(oom_at - (1765000000.123456 + 40e-6)) < 1e-6, "%.6f", oom_at);
}
END_TEST

/* A trace's model: its own two header lines, and a site without frames
 * said to have none. */
START_TEST(trace_mode_header_and_frameless_site)
{
  ol_report_t t;
  ck_assert_int_eq(ol_report_init(&t, 1), 0);
  ol_report_set_text(&t, &t.version, "9.8.7");
  ol_report_set_text(&t, &t.mode, "trace");
  ol_report_set_text(&t, &t.source, "run.csv.gz");
  ol_sites_t *sites = ol_sites_new();
  site(sites, "", 3 * MiB);
  ol_sites_mark_peak(sites);
  ol_report_device_t *d = &t.devices[0];
  ol_stats_pool_update(d->stats.allocated_bytes, 3 * MiB, 3 * MiB);
  ol_report_device_sites(&t, d, sites, ol_sites_text_frames);
  ol_sites_free(sites);
  ol_buf_t out = {0};
  ol_report_render_text(&out, &t);
  ck_assert(!out.failed);
  const char *header = "oomlens 9.8.7: the recorded trace run.csv.gz\npeak allocated 3.00 MiB "
                       "(tensors), peak reserved 0 B (PyTorch's segments), 0 out-of-memory "
                       "event(s) over 0.000 s\n\n|===";
  ck_assert_msg(!strncmp(out.data, header, strlen(header)), "%s", out.data);
  ck_assert_ptr_nonnull(strstr(out.data, "    3.00 MiB       1 allocs  (no frames recorded)\n"));
  ol_buf_free(&out);
  ol_report_free(&t);
}
END_TEST

/* A trace's site named as the report names one: frames joined " < ",
 * ';' splitting the key once (an empty frame skipped), the first three in
 * the paragraph, all those shown in its JSON; none said in the text. */
START_TEST(trace_site_names)
{
  ol_sites_t *sites = ol_sites_new();
  int32_t deep = site(sites, "a.py:1:f;;b.py:2:g;c.py:3:h;d.py:4:i;", 1);
  int32_t none = site(sites, "", 1);
  ol_buf_t out = {0};
  ol_report_site_name(&out, sites, ol_sites_text_frames, deep, false);
  ck_assert_str_eq(out.data, "a.py:1:f < b.py:2:g < c.py:3:h");
  out.len = 0;
  ol_report_site_name(&out, sites, ol_sites_text_frames, deep, true);
  ck_assert_str_eq(out.data, "\"a.py:1:f < b.py:2:g < c.py:3:h < d.py:4:i\"");
  out.len = 0;
  ol_report_site_name(&out, sites, ol_sites_text_frames, none, false);
  ck_assert_str_eq(out.data, "(no frames recorded)");
  out.len = 0;
  ol_report_site_name(&out, sites, ol_sites_text_frames, none, true);
  ck_assert_str_eq(out.data, "\"\"");
  ol_buf_free(&out);
  ol_sites_free(sites);
}
END_TEST

typedef struct spans {
  char text[4096];
  size_t longest;
} spans_t;

static void add_span(const char *frame, size_t len, void *arg)
{
  spans_t *s = arg;
  size_t at = strlen(s->text);
  snprintf(s->text + at, sizeof s->text - at, "[%.*s]", (int)(len < 8 ? len : 8), frame);
  s->longest = len > s->longest ? len : s->longest;
}

static void add_frame(const char *frame, void *arg)
{
  add_span(frame, strlen(frame), arg);
}

/* One split of a trace's key: export takes each frame whole, a report
 * cuts a frame at OL_FRAME_TEXT_MAX - 1 bytes; both skip empty frames. */
START_TEST(trace_keys_split_once)
{
  char key[2048];
  char long_frame[1001];
  memset(long_frame, 'x', 1000);
  long_frame[1000] = '\0';
  snprintf(key, sizeof key, ";a.py:1:f;;%s;b.py:2:g;", long_frame);
  ol_sites_t *sites = ol_sites_new();
  int32_t id = site(sites, key, 1);
  spans_t whole = {0}, cut = {0};
  ck_assert_uint_eq(ol_sites_text_spans(sites, id, SIZE_MAX, add_span, &whole), 3);
  ck_assert_uint_eq(ol_sites_text_frames(sites, id, SIZE_MAX, add_frame, &cut), 3);
  ck_assert_str_eq(whole.text, "[a.py:1:f][xxxxxxxx][b.py:2:g]");
  ck_assert_str_eq(cut.text, whole.text);
  ck_assert_uint_eq(whole.longest, 1000);
  ck_assert_uint_eq(cut.longest, OL_FRAME_TEXT_MAX - 1);
  spans_t two = {0};
  ck_assert_uint_eq(ol_sites_text_frames(sites, id, 2, add_frame, &two), 2);
  ck_assert_str_eq(two.text, "[a.py:1:f][xxxxxxxx]");
  ol_sites_free(sites);
}
END_TEST

#define GiB (1024 * MiB)

/* A fitted job on a 16 GiB device: one iteration found, its need above
 * the valley, the job's peak, at batch. */
static ol_report_device_t *fitted_job(ol_report_t *r, int64_t need, int64_t valley, int64_t peak,
                                      int64_t batch)
{
  ck_assert_int_eq(ol_report_init(r, 1), 0);
  ol_report_device_t *d = &r->devices[0];
  d->stats.phases.iterations = 1;
  d->stats.phases.need = need;
  d->stats.phases.valleys[1 % OL_PHASE_VALLEYS] = valley;
  d->stats.allocated_bytes[OL_POOL_ALL].peak = peak;
  d->stats.reserved_bytes[OL_POOL_ALL].peak = peak;
  d->stats.capacity = 16 * GiB;
  d->stats.outside = 0;
  d->stats.batch = batch;
  return d;
}

/* The report's text holds each of the texts (NULL-ended). */
static void text_says(const ol_report_t *r, const char *const *texts)
{
  ol_buf_t out = {0};
  ol_report_render_text(&out, r);
  for (size_t i = 0; texts[i]; i++)
    ck_assert_msg(strstr(out.data, texts[i]), "the text does not say: %s", texts[i]);
  ol_buf_free(&out);
}

/* The JSON report's devices[0].batch_figure.field. */
static int64_t batch_json(const ol_report_t *r, const char *field)
{
  ol_buf_t out = {0};
  ol_report_render_json(&out, r);
  char err[128];
  ol_json_t *j = ol_json_parse(out.data, out.len, err, sizeof err);
  ck_assert_msg(j != NULL, "%s", err);
  const ol_json_t *b = ol_json_path(j, "devices[0].batch_figure");
  ck_assert_ptr_nonnull(b);
  int64_t value = int_of(ol_json_get(b, field));
  ol_json_free(j);
  ol_buf_free(&out);
  return value;
}

/* A fitted job's batch figure counts autocast's copies of the weights
 * (stats.step_copies, account.c) beside what outlives iterations: 16 GiB,
 * 2 GiB outliving iterations, a peak 8 GiB above it at batch 4, 4 GiB of
 * it copies. Scaled whole: 4 x 14 / 8 = 7, 4 x 10.8 / 8 = 5.4; the copies
 * kept: 4 x 10 / 4 = 10, 4 x 6.8 / 4 = 6.8. The text and the JSON give the
 * need and state as measured, and the copies beside them. */
START_TEST(autocast_s_copies_in_a_fitted_job_s_figure)
{
  ol_report_t r;
  ol_report_device_t *d = fitted_job(&r, 8 * GiB, 2 * GiB, 10 * GiB, 4);
  ol_report_device_batch(d);
  ck_assert(d->has_batch);
  ck_assert_int_eq(d->batch.fits, 7);
  ck_assert_int_eq(d->batch.fits_headroom, 5);
  d->stats.step_copies = 4 * GiB;
  ol_report_device_batch(d);
  ck_assert_int_eq(d->batch.fits, 10);
  ck_assert_int_eq(d->batch.fits_headroom, 6);
  text_says(&r, (const char *const[]){"Batch that fits: the peak needed 8.00 GiB above the "
                                      "2.00 GiB that outlives iterations, 4.00 GiB of it "
                                      "autocast's 16-bit copies of the weights",
                                      "at batch 4: batch 10 fits, 6 with 20% headroom", NULL});
  ck_assert_int_eq(batch_json(&r, "state"), 2 * GiB);
  ck_assert_int_eq(batch_json(&r, "need"), 8 * GiB);
  ck_assert_int_eq(batch_json(&r, "copies"), 4 * GiB);
  ck_assert_int_eq(batch_json(&r, "fits"), 10);
  ol_report_free(&r);
}
END_TEST

/* A fitted job whose peak is its optimizer's update (account.c
 * read_step_highs; held-out qwen_small_autocast at batch 1: told 3 from
 * its peak, 5 fits by bisection): 16 GiB, a step begun at 6 GiB, its
 * forward and backward 2 GiB above that, its update 4 GiB. The update is
 * as large at any batch, so the forward and backward alone scale: 1 x 10
 * / 2 = 5, 1 x 6.8 / 2 = 3.4; from the peak it was 1 x 10 / 4 = 2. Where
 * the job's peak was above the update's (a first step's), the peak is
 * scaled as before; where the update does not fit in 80% of the device,
 * no batch keeps the headroom. */
START_TEST(an_update_that_is_the_peak_is_no_batch_s)
{
  ol_report_t r;
  ol_report_device_t *d = fitted_job(&r, 4 * GiB, 6 * GiB, 10 * GiB, 1);
  ol_report_device_batch(d);
  ck_assert_int_eq(d->batch.fits, 2);
  d->stats.step_base = 6 * GiB;
  d->stats.step_work_high = 8 * GiB;
  d->stats.step_update_high = 10 * GiB;
  ol_report_device_batch(d);
  ck_assert_int_eq(d->batch.need, 2 * GiB);
  ck_assert_int_eq(d->batch.update, 4 * GiB);
  ck_assert_int_eq(d->batch.fits, 5);
  ck_assert_int_eq(d->batch.fits_headroom, 3);
  text_says(&r, (const char *const[]){"Batch that fits: the forward and backward needed "
                                      "2.00 GiB above the 6.00 GiB that outlives "
                                      "iterations, and the optimizer's update 4.00 GiB",
                                      "at batch 1: batch 5 fits, 3 with 20% headroom", NULL});
  ck_assert_int_eq(batch_json(&r, "update"), 4 * GiB);
  ck_assert_int_eq(batch_json(&r, "need"), 2 * GiB);
  /* the job's peak a first step's, above the update's: scaled as before */
  d->stats.allocated_bytes[OL_POOL_ALL].peak = 11 * GiB;
  d->stats.phases.need = 5 * GiB;
  ol_report_device_batch(d);
  ck_assert_int_eq(d->batch.update, 0);
  ck_assert_int_eq(d->batch.fits, 2);
  /* an update above 80% of the device: no batch keeps the headroom */
  d->stats.allocated_bytes[OL_POOL_ALL].peak = 13 * GiB;
  d->stats.phases.need = 7 * GiB;
  d->stats.step_update_high = 13 * GiB;
  ol_report_device_batch(d);
  ck_assert_int_eq(d->batch.fits, 5);
  ck_assert_int_eq(d->batch.fits_headroom, 0);
  ol_report_free(&r);
}
END_TEST

static Suite *report_model_suite(void)
{
  Suite *s = suite_create("report_model");
  TCase *agree = tcase_create("text_and_json_agree");
  tcase_add_checked_fixture(agree, setup, teardown);
  tcase_add_test(agree, every_figure_of_the_text_is_in_the_json);
  tcase_add_test(agree, header_and_note_agree_with_the_json);
  tcase_add_test(agree, lists_grouped_and_names_owned);
  suite_add_tcase(s, agree);
  TCase *trace = tcase_create("trace");
  tcase_add_test(trace, trace_mode_header_and_frameless_site);
  tcase_add_test(trace, trace_site_names);
  tcase_add_test(trace, trace_keys_split_once);
  suite_add_tcase(s, trace);
  TCase *batch = tcase_create("batch");
  tcase_add_test(batch, autocast_s_copies_in_a_fitted_job_s_figure);
  tcase_add_test(batch, an_update_that_is_the_peak_is_no_batch_s);
  suite_add_tcase(s, batch);
  return s;
}

int main(void)
{
  return ol_run_suite(report_model_suite());
}
