/* export.h: a trace (ours or PyTorch's CSV) turned into the formats people
 * already view (`oomlens export`):
 * - folded stacks (flamegraph.pl, speedscope): "frame;frame;frame bytes",
 *   outermost frame first, by bytes live at the peak, allocated in total,
 *   or still live at the end;
 * - PyTorch's memory_viz snapshot: a pickle of {segments, device_traces}
 *   as torch.cuda.memory._snapshot() returns it;
 * - Chrome/Perfetto trace-event JSON: allocated and reserved bytes over
 *   time per device, an instant event at each out-of-memory;
 * - RAPIDS RMM's allocation log (Thread,Time,Action,Pointer,Size,Stream),
 *   which RMM's replay benchmark reads.
 * The trace is read once, streaming: memory grows with what is live and
 * with the number of call sites, never with the trace's length. */
#ifndef OL_EXPORT_H
#define OL_EXPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef struct ol_error ol_error_t; /* core.h */

typedef enum ol_export_format {
  OL_EXPORT_FOLDED,
  OL_EXPORT_MEMORY_VIZ,
  OL_EXPORT_PERFETTO,
  OL_EXPORT_RMM_CSV,
  OL_EXPORT_FORMAT_COUNT
} ol_export_format_t;

typedef enum ol_export_by {
  OL_EXPORT_BY_PEAK,   /* bytes live at the moment of peak allocated bytes */
  OL_EXPORT_BY_TOTAL,  /* bytes allocated over the whole trace */
  OL_EXPORT_BY_LEAKED, /* bytes still live at the end */
} ol_export_by_t;

typedef struct ol_export_options {
  ol_export_format_t format;
  ol_export_by_t by; /* folded only */
  int device;        /* only this device's events; -1: all */
  /* memory-viz only: the trace entries of each device are the last this
   * many (PyTorch's recorder's max_entries); 0: all. The segments are the
   * end state either way. Costs a first pass that counts the entries. */
  uint64_t max_entries;
  /* Called now and then with how far through the trace reading has got
   * (0 to 1); NULL: none. */
  void (*progress)(double fraction, void *arg);
  void *progress_arg;
} ol_export_options_t;

typedef struct ol_export_result {
  uint64_t events;     /* events read (of the device asked for) */
  uint64_t written;    /* lines, entries or samples written */
  uint64_t left_out;   /* memory-viz: entries before the last max_entries */
  int64_t peak;        /* peak allocated bytes */
  uint64_t sites;      /* distinct call sites (frames texts) */
  char note[200];      /* the trace's ol_trace_note (cut short...); "" for a whole trace */
} ol_export_result_t;

/* "folded", "memory-viz", "perfetto", "rmm-csv"; false if none matches. */
bool ol_export_format_parse(const char *name, ol_export_format_t *out);
bool ol_export_by_parse(const char *name, ol_export_by_t *out);
const char *ol_export_format_name(ol_export_format_t format); /* "folded", ...; "?" */

/* Exports the trace at path to out. 0 done; -1 with the error in err: a
 * malformed trace, named with its line (OL_EXIT_USAGE), or host memory
 * running out or a write error (OL_EXIT_FAILURE). */
int ol_export_file(const char *path, FILE *out, const ol_export_options_t *options,
                   ol_export_result_t *result, ol_error_t *err);

#endif
