/* report_view.h: a report read back (`oomlens report`, `oomlens merge`).
 *
 * A JSON report (ours, format 1, any minor) or a trace in the CSV of
 * trace_csv.h is read into core's report model (ol_report_t, core.h),
 * which owns all it holds (free it with ol_report_free). Core's renderer
 * prints it as the library wrote it (ol_report_render_text), this folder
 * makes a page of it and sets several side by side, all from one set of
 * figures. A trace becomes a report of one device, of mode "trace": its
 * allocated and reserved memory over time, peaks, OOM and call sites. */
#ifndef OL_REPORT_VIEW_H
#define OL_REPORT_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "json.h"
#include "core.h"

/* 0, or -1 with the error in err, naming the file: it cannot be read, is
 * not JSON, or is not an oomlens report (OL_EXIT_USAGE); host memory ran
 * out (OL_EXIT_FAILURE). */
int ol_view_load_json(ol_report_t *view, const char *path, ol_error_t *err);
/* A trace (trace_csv.h): one device, timeline from its events. */
int ol_view_load_trace(ol_report_t *view, const char *path, ol_error_t *err);
/* Either: a file whose first byte is '{' is a JSON report. */
int ol_view_load(ol_report_t *view, const char *path, ol_error_t *err);

/* report_html.c: one self-contained page (no network, inline SVG). */
void ol_view_html(ol_buf_t *out, const ol_report_t *view);

/* merge.c: several reports side by side (`oomlens merge`). */
void ol_merge_text(ol_buf_t *out, const ol_report_t *views, size_t count);
void ol_merge_json(ol_buf_t *out, const ol_report_t *views, size_t count);

#endif
