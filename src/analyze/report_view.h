/* report_view.h: a report read back (`oomlens report`, `oomlens merge`).
 *
 * A JSON report (ours, format 1, any minor) is read into the library's own
 * structures, so the text printed from it is the text the library wrote,
 * and the HTML page and the merge table work from one set of figures. A
 * trace in the CSV of trace_csv.h is read into the same shape: its
 * allocated and reserved memory over time, peaks and OOM. Strings and site
 * arrays point into the parsed tree: valid until ol_view_free(). */
#ifndef OL_REPORT_VIEW_H
#define OL_REPORT_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "json.h"
#include "core.h"

typedef struct ol_view_device {
  int device;
  ol_device_stats_t stats;
  bool diagnosed;         /* stats.last_oom and last_oom_class hold a diagnosis */
  const char *advice;     /* the diagnosis's advice as written, or NULL */
  const ol_json_t *at_peak, *by_total; /* call sites (arrays), NULL without */
  const ol_json_t *oom_sites, *oom_grower; /* the diagnosis's sites, NULL without */
  bool has_timeline;
  ol_timeline_t timeline;
} ol_view_device_t;

typedef struct ol_view {
  ol_json_t *root; /* NULL for a trace */
  ol_json_t *trace_sites; /* a trace's call sites, in the JSON report's shape */
  int format, minor;
  const char *version, *mode, *reason, *rank, *command, *source;
  long pid;
  double time_unix;
  bool tracking_failed;
  bool has_stacks;           /* the report says what its call sites are made of */
  ol_report_stacks_t stacks;
  int device_count;
  ol_view_device_t *devices;
} ol_view_t;

/* Names the diagnosis's sites as the library did (an ol_site_namer_t; arg:
 * the ol_view_device_t): ids 0.. are oom.sites, then oom.growing_site. */
void ol_view_site_name(ol_buf_t *out, int32_t id, bool json, void *device);

/* 0, or -1 with the error in err, naming the file: it cannot be read, is
 * not JSON, or is not an oomlens report (OL_EXIT_USAGE); host memory ran
 * out (OL_EXIT_FAILURE). */
int ol_view_load_json(ol_view_t *view, const char *path, ol_error_t *err);
/* A trace (trace_csv.h): one device, timeline from its events. */
int ol_view_load_trace(ol_view_t *view, const char *path, ol_error_t *err);
/* Either: a file whose first byte is '{' is a JSON report. */
int ol_view_load(ol_view_t *view, const char *path, ol_error_t *err);
void ol_view_free(ol_view_t *view);

/* The text report, as the library writes it. */
void ol_view_text(ol_buf_t *out, const ol_view_t *view);
/* report_html.c: one self-contained page (no network, inline SVG). */
void ol_view_html(ol_buf_t *out, const ol_view_t *view);

/* merge.c: several reports side by side (`oomlens merge`). */
void ol_merge_text(ol_buf_t *out, const ol_view_t *views, size_t count);
void ol_merge_json(ol_buf_t *out, const ol_view_t *views, size_t count);

#endif
