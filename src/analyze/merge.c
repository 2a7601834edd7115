/* merge.c: several reports side by side (`oomlens merge`).
 *
 * One row per report and device, in rank order: peak allocated and
 * reserved, OOMs and the class of the last, when the first happened. Then
 * which rank ran out first (by the wall clock of its first OOM: ranks on
 * one host share that clock; across hosts it is as good as their clock
 * sync), and how unequal the ranks were: the largest peak over the
 * smallest, the spread between them and the mean. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "report_view.h"

typedef struct row {
  const ol_report_t *view;
  const ol_report_device_t *dev;
} row_t;

typedef struct spread {
  int64_t max, min;
  double mean;
  const row_t *max_row, *min_row;
} spread_t;

static int compare_ranks(const char *a, const char *b)
{
  char *ea, *eb;
  long ra = strtol(a, &ea, 10), rb = strtol(b, &eb, 10);
  if (*a && *b && !*ea && !*eb && ra != rb)
    return ra < rb ? -1 : 1;
  return strcmp(a, b);
}

static int compare_rows(const void *pa, const void *pb)
{
  const row_t *a = pa, *b = pb;
  int by_rank = compare_ranks(a->view->rank, b->view->rank);
  if (by_rank)
    return by_rank;
  if (a->view->pid != b->view->pid)
    return a->view->pid < b->view->pid ? -1 : 1;
  return a->dev->device - b->dev->device;
}

/* Rows of every device of every report, sorted; NULL with *n 0 if none or
 * no memory. */
static row_t *rows_of(const ol_report_t *views, size_t count, size_t *n)
{
  size_t total = 0;
  for (size_t i = 0; i < count; i++)
    total += (size_t)views[i].device_count;
  row_t *rows = total ? calloc(total, sizeof *rows) : NULL;
  *n = rows ? total : 0;
  for (size_t i = 0, k = 0; rows && i < count; i++)
    for (int d = 0; d < views[i].device_count; d++)
      rows[k++] = (row_t){&views[i], &views[i].devices[d]};
  if (rows)
    qsort(rows, total, sizeof *rows, compare_rows);
  return rows;
}

static int64_t peak_allocated(const row_t *r)
{
  return r->dev->stats.allocated_bytes[OL_POOL_ALL].peak;
}

static int64_t peak_reserved(const row_t *r)
{
  return r->dev->stats.reserved_bytes[OL_POOL_ALL].peak;
}

static spread_t spread_of(const row_t *rows, size_t n, int64_t (*figure)(const row_t *))
{
  spread_t s = {0};
  double sum = 0;
  for (size_t i = 0; i < n; i++) {
    int64_t v = figure(&rows[i]);
    if (!s.max_row || v > s.max)
      s.max = v, s.max_row = &rows[i];
    if (!s.min_row || v < s.min)
      s.min = v, s.min_row = &rows[i];
    sum += (double)v;
  }
  s.mean = n ? sum / (double)n : 0;
  return s;
}

static bool ran_out(const row_t *r)
{
  return r->dev->stats.num_ooms > 0;
}

/* The row whose first OOM came earliest, and the one after it; rows whose
 * report has no OOM time (format 1.0) cannot take part. */
static const row_t *first_out(const row_t *rows, size_t n, const row_t **next)
{
  const row_t *first = NULL;
  *next = NULL;
  for (size_t i = 0; i < n; i++) {
    double t = rows[i].dev->stats.first_oom_unix;
    if (!ran_out(&rows[i]) || t <= 0)
      continue;
    if (!first || t < first->dev->stats.first_oom_unix) {
      *next = first;
      first = &rows[i];
    } else if (!*next || t < (*next)->dev->stats.first_oom_unix) {
      *next = &rows[i];
    }
  }
  return first;
}

static const char *class_of(const row_t *r)
{
  if (!ran_out(r))
    return NULL;
  return r->dev->diagnosed ? ol_oom_class_name(r->dev->stats.last_oom_class) : "undiagnosed";
}

static void stamp_of(char *out, size_t cap, double unix_time)
{
  time_t when = (time_t)unix_time;
  struct tm tm;
  gmtime_r(&when, &tm);
  size_t n = strftime(out, cap, "%Y-%m-%d %H:%M:%S", &tm);
  snprintf(out + n, cap - n, ".%03d UTC", (int)((unix_time - floor(unix_time)) * 1000));
}

/* ---- text ---------------------------------------------------------------- */

static void text_row(ol_buf_t *out, const row_t *r, const row_t *first)
{
  char a[32], b[32], when[48] = "-";
  ol_format_bytes(a, sizeof a, peak_allocated(r));
  ol_format_bytes(b, sizeof b, peak_reserved(r));
  const char *cls = class_of(r);
  if (cls && first && r->dev->stats.first_oom_unix > 0)
    snprintf(when, sizeof when, "+%.3f s%s",
             r->dev->stats.first_oom_unix - first->dev->stats.first_oom_unix,
             r == first ? "  (first)" : "");
  ol_buf_printf(out, "%-6.16s %-8ld %6d  %14s  %14s  %5lld  %-13s  %s\n", r->view->rank,
                r->view->pid, r->dev->device, a, b, (long long)r->dev->stats.num_ooms,
                cls ? cls : "-", when);
}

/* The peaks come from report_view.c, which refuses any outside 0 to
 * 2^62: max - min and the mean cannot overflow (a peak of 2^63 - 1 beside
 * one of -5 once did). */
static void text_spread(ol_buf_t *out, const char *what, const spread_t *s)
{
  char hi[32], lo[32], gap[32], mean[32];
  ol_format_bytes(hi, sizeof hi, s->max);
  ol_format_bytes(lo, sizeof lo, s->min);
  ol_format_bytes(gap, sizeof gap, s->max - s->min);
  ol_format_bytes(mean, sizeof mean, (int64_t)s->mean);
  ol_buf_printf(out, "%s: largest %s (rank %s, device %d), smallest %s (rank %s, device %d)", what,
                hi, s->max_row->view->rank, s->max_row->dev->device, lo, s->min_row->view->rank,
                s->min_row->dev->device);
  if (s->min > 0)
    ol_buf_printf(out, ": %.2fx", (double)s->max / (double)s->min);
  ol_buf_printf(out, ", spread %s, mean %s\n", gap, mean);
}

static void text_first(ol_buf_t *out, const row_t *rows, size_t n)
{
  size_t out_count = 0;
  for (size_t i = 0; i < n; i++)
    out_count += ran_out(&rows[i]);
  const row_t *next, *first = first_out(rows, n, &next);
  if (out_count == 0) {
    ol_buf_printf(out, "No rank ran out of memory.\n");
    return;
  }
  if (!first) {
    ol_buf_printf(out, "%zu of %zu ran out; the reports carry no OOM times (written by an "
                  "oomlens before format 1.1), so which came first is unknown.\n", out_count, n);
    return;
  }
  char when[64];
  stamp_of(when, sizeof when, first->dev->stats.first_oom_unix);
  ol_buf_printf(out, "Ran out first: rank %s (pid %ld, device %d, %s) at %s", first->view->rank,
                first->view->pid, first->dev->device, class_of(first), when);
  if (next)
    ol_buf_printf(out, ", %.3f s before rank %s (device %d)",
                  next->dev->stats.first_oom_unix - first->dev->stats.first_oom_unix,
                  next->view->rank, next->dev->device);
  ol_buf_printf(out, ". %zu of %zu ran out.\n", out_count, n);
}

void ol_merge_text(ol_buf_t *out, const ol_report_t *views, size_t count)
{
  size_t n;
  row_t *rows = rows_of(views, count, &n);
  ol_buf_printf(out, "oomlens merge: %zu reports, %zu devices\n\n", count, n);
  if (!rows) {
    ol_buf_printf(out, "No device memory in these reports.\n");
    return;
  }
  const row_t *next, *first = first_out(rows, n, &next);
  ol_buf_printf(out, "%-6s %-8s %6s  %14s  %14s  %5s  %-13s  %s\n", "rank", "pid", "device",
                "peak allocated", "peak reserved", "OOMs", "class", "first OOM");
  for (size_t i = 0; i < n; i++)
    text_row(out, &rows[i], first);
  ol_buf_printf(out, "\n");
  text_first(out, rows, n);
  spread_t a = spread_of(rows, n, peak_allocated), r = spread_of(rows, n, peak_reserved);
  text_spread(out, "Peak allocated", &a);
  text_spread(out, "Peak reserved", &r);
  free(rows);
}

/* ---- JSON ---------------------------------------------------------------- */

static void json_row(ol_buf_t *out, const row_t *r)
{
  ol_buf_printf(out, "    {\"file\": ");
  ol_buf_json_string(out, r->view->source);
  ol_buf_printf(out, ", \"rank\": ");
  ol_buf_json_string(out, r->view->rank);
  ol_buf_printf(out, ", \"pid\": %ld, \"device\": %d, \"peak_allocated\": %lld, "
                "\"peak_reserved\": %lld, \"num_ooms\": %lld, \"oom_class\": ",
                r->view->pid, r->dev->device, (long long)peak_allocated(r),
                (long long)peak_reserved(r), (long long)r->dev->stats.num_ooms);
  const char *cls = class_of(r);
  if (cls)
    ol_buf_json_string(out, cls);
  else
    ol_buf_printf(out, "null");
  if (ran_out(r) && r->dev->stats.first_oom_unix > 0)
    ol_buf_printf(out, ", \"first_oom_time_unix\": %.6f}", r->dev->stats.first_oom_unix);
  else
    ol_buf_printf(out, ", \"first_oom_time_unix\": null}");
}

static void json_spread(ol_buf_t *out, const char *name, const spread_t *s)
{
  ol_buf_printf(out, "    \"%s\": {\"max\": %lld, \"min\": %lld, \"spread\": %lld, \"mean\": %.1f, "
                "\"ratio\": ", name, (long long)s->max, (long long)s->min,
                (long long)(s->max - s->min), s->mean);
  if (s->min > 0)
    ol_buf_printf(out, "%.6f", (double)s->max / (double)s->min);
  else
    ol_buf_printf(out, "null");
  ol_buf_printf(out, ", \"max_rank\": ");
  ol_buf_json_string(out, s->max_row->view->rank);
  ol_buf_printf(out, ", \"max_device\": %d, \"min_rank\": ", s->max_row->dev->device);
  ol_buf_json_string(out, s->min_row->view->rank);
  ol_buf_printf(out, ", \"min_device\": %d}", s->min_row->dev->device);
}

void ol_merge_json(ol_buf_t *out, const ol_report_t *views, size_t count)
{
  size_t n, out_count = 0;
  row_t *rows = rows_of(views, count, &n);
  ol_buf_printf(out, "{\n  \"oomlens_merge\": 1,\n  \"reports\": %zu,\n  \"rows\": [\n", count);
  for (size_t i = 0; i < n; i++) {
    json_row(out, &rows[i]);
    ol_buf_printf(out, "%s\n", i + 1 < n ? "," : "");
    out_count += ran_out(&rows[i]);
  }
  ol_buf_printf(out, "  ],\n  \"ran_out\": %zu,\n  \"first_oom\": ", out_count);
  const row_t *next, *first = rows ? first_out(rows, n, &next) : NULL;
  if (first) {
    ol_buf_printf(out, "{\"rank\": ");
    ol_buf_json_string(out, first->view->rank);
    ol_buf_printf(out, ", \"pid\": %ld, \"device\": %d, \"time_unix\": %.6f, \"lead_s\": ",
                  first->view->pid, first->dev->device, first->dev->stats.first_oom_unix);
    if (next)
      ol_buf_printf(out, "%.6f}", next->dev->stats.first_oom_unix -
                                    first->dev->stats.first_oom_unix);
    else
      ol_buf_printf(out, "null}");
  } else {
    ol_buf_printf(out, "null");
  }
  ol_buf_printf(out, ",\n  \"imbalance\": ");
  if (rows) {
    spread_t a = spread_of(rows, n, peak_allocated), r = spread_of(rows, n, peak_reserved);
    ol_buf_printf(out, "{\n");
    json_spread(out, "peak_allocated", &a);
    ol_buf_printf(out, ",\n");
    json_spread(out, "peak_reserved", &r);
    ol_buf_printf(out, "\n  }\n}\n");
  } else {
    ol_buf_printf(out, "null\n}\n");
  }
  free(rows);
}
