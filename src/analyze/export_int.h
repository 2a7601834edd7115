/* export_int.h: what export.c (reading, live state, folded, Perfetto,
 * RMM) shares with export_viz.c (the memory_viz pickle). Not used
 * elsewhere. */
#ifndef OL_EXPORT_INT_H
#define OL_EXPORT_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "export.h"
#include "core.h"
#include "trace_csv.h"

/* What is live and each call site's bytes are an ol_account_t's (core/
 * account.c: the model the live tracker counts with), with one site table
 * for all devices exported, whose peak is theirs together: a site is a
 * distinct frames text, innermost frame first, ';' between frames. Its
 * live blocks are the account's (site in the record's site). Segments of
 * reserved memory, which only memory_viz lists, are a table of their own
 * by address: size, stream, device, site as there; kind 1 for a VMM
 * mapping (an expandable segment: each range as mapped, less what was
 * unmapped; memory_viz joins contiguous ranges into one segment). */
typedef struct ex_device {
  bool seen, has_segments;
} ex_device_t;

typedef struct ex_viz ex_viz_t; /* export_viz.c */

/* Perfetto: a counter sample waits until time moves on, so that each
 * device gets one sample per moment. */
typedef struct ex_perfetto {
  bool any; /* an event was written: the next needs a comma */
  bool pending[OL_TRACE_MAX_DEVICES];
  uint64_t pending_time[OL_TRACE_MAX_DEVICES];
} ex_perfetto_t;

typedef struct ex {
  FILE *out;
  const ol_export_options_t *options;
  ol_export_result_t *result;
  ol_trace_t *trace;
  ol_account_t *account; /* live blocks, bytes, peak, call sites */
  ol_records_t segments;
  ex_device_t devices[OL_TRACE_MAX_DEVICES];
  /* memory-viz with max_entries: each device's events counted by a first
   * pass, and how many of them come before the entries kept. */
  uint64_t device_events[OL_TRACE_MAX_DEVICES], skip_events[OL_TRACE_MAX_DEVICES];
  bool passes_two; /* progress: the first pass is the first half */
  ex_viz_t *viz;
  ex_perfetto_t perfetto;
  bool failed; /* host memory ran out */
} ex_t;

/* The shared site table (NULL until the first site), a device's bytes. */
static inline ol_sites_t *ex_sites(const ex_t *x)
{
  return ol_account_sites(x->account, 0);
}

static inline const ol_device_stats_t *ex_stats(const ex_t *x, int device)
{
  return &x->account->devices[ol_account_clamp(device)].stats;
}

/* export_viz.c: the memory_viz snapshot. begin and end return false when
 * host memory ran out. */
bool ol_viz_begin(ex_t *x);
void ol_viz_event(ex_t *x, const ol_trace_event_t *ev, int32_t site);
/* An oom_context line: the free memory of the OOM entry it settles. */
void ol_viz_context(ex_t *x, const ol_trace_event_t *ev);
bool ol_viz_end(ex_t *x);
void ol_viz_free(ex_t *x); /* whatever the viz writer still holds */

#endif
