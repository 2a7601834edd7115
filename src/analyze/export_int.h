/* export_int.h: what export.c (reading, live state, folded, Perfetto,
 * RMM) shares with export_viz.c (the memory_viz pickle). Not used
 * elsewhere. */
#ifndef OL_EXPORT_INT_H
#define OL_EXPORT_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <uthash.h>

#include "export.h"
#include "core.h"
#include "trace_csv.h"

/* A distinct frames text, with what the folded output needs. */
typedef struct ex_site {
  char *text; /* innermost frame first, ';' between frames */
  size_t len;
  int64_t current, total, at_peak;
  uint64_t last_change; /* event number of its last change */
  uint32_t memo;        /* memory_viz: memo slot of its frames list, 0 none yet */
  UT_hash_handle hh;
} ex_site_t;

/* Something live, an allocation or a segment of reserved memory, is a
 * record of the tracker's table (records.c) by address: size, stream and
 * device as there; its site (an ex_site_t) in value; kind 1 for a VMM
 * mapping (an expandable segment). */
static inline ex_site_t *ex_site_of(const ol_record_t *live)
{
  return (ex_site_t *)(uintptr_t)live->value;
}

static inline bool ex_mapped(const ol_record_t *live)
{
  return live->kind != 0;
}

typedef struct ex_device {
  bool seen, has_segments;
  int64_t allocated, reserved;
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
  ex_site_t *sites;
  ex_site_t no_site; /* events without frames */
  ol_records_t blocks, segments;
  ex_device_t devices[OL_TRACE_MAX_DEVICES];
  /* memory-viz with max_entries: each device's events counted by a first
   * pass, and how many of them come before the entries kept. */
  uint64_t device_events[OL_TRACE_MAX_DEVICES], skip_events[OL_TRACE_MAX_DEVICES];
  bool passes_two; /* progress: the first pass is the first half */
  int64_t allocated; /* over the devices exported */
  uint64_t seq, peak_seq;
  ex_viz_t *viz;
  ex_perfetto_t perfetto;
  bool failed; /* host memory ran out */
} ex_t;

/* export_viz.c: the memory_viz snapshot. begin and end return false when
 * host memory ran out. */
bool ol_viz_begin(ex_t *x);
void ol_viz_event(ex_t *x, const ol_trace_event_t *ev, ex_site_t *site);
bool ol_viz_end(ex_t *x);
void ol_viz_free(ex_t *x); /* whatever the viz writer still holds */

/* export.c, for export_viz.c: visits what is live. */

#endif
