/* trace_csv.h: reading allocation traces one event at a time.
 *
 * Two formats, gzip'd or plain text, told apart by their first line:
 * - the CSV PyTorch's recorder gives us (tests/data/README.md): a `#`
 *   header line naming the columns
 *     time_us,action,addr,size,stream,frames
 *   then one event a line;
 * - oomlens's own trace (OOMLENS_TRACE, docs/trace-format.md): a first
 *   line `# oomlens-trace 1 ...`, call sites defined once and referred to
 *   by number, a device column. Each event comes out with its frames text
 *   and device, exactly as a CSV event does.
 * The reader keeps one line in memory whatever the trace's length (plus
 * each call site's text once), so traces of tens of millions of events
 * stream through in constant memory. Anything else is refused as
 * "unknown trace format".
 *
 * Every error message names the file and, for a bad line, its number:
 *   "t.csv.gz:7: bad action 'alloc2'"
 * and carries OL_EXIT_USAGE (a bad input file), or OL_EXIT_FAILURE when
 * the host ran out of memory reading it. */
#ifndef OL_TRACE_CSV_H
#define OL_TRACE_CSV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ol_error ol_error_t; /* ol.h */

/* Longest line accepted, newline excluded. Frames are four Python frames,
 * far below this; a longer line is a broken file, not a trace. */
#define OL_TRACE_MAX_LINE 65536

typedef enum ol_trace_action {
  OL_TRACE_ALLOC,          /* a tensor-level allocation */
  OL_TRACE_FREE_REQUESTED, /* the program let go; streams may still use it */
  OL_TRACE_FREE_COMPLETED, /* the memory may be handed out again */
  OL_TRACE_SEGMENT_ALLOC,  /* PyTorch's cache asked cudaMalloc for a segment */
  OL_TRACE_SEGMENT_FREE,
  OL_TRACE_SEGMENT_MAP,    /* expandable segments: pages mapped / unmapped */
  OL_TRACE_SEGMENT_UNMAP,
  OL_TRACE_OOM,            /* the request that failed in the recorded run */
  OL_TRACE_ACTION_COUNT
} ol_trace_action_t;

typedef struct ol_trace_event {
  uint64_t time_us;
  ol_trace_action_t action;
  uint64_t addr;
  uint64_t size;
  uint64_t stream;
  const char *frames; /* not NUL-terminated; valid until the next call */
  size_t frames_len;
  uint64_t line;      /* in the file, counted from 1 (the header is line 1) */
  int device;         /* CUDA device ordinal; 0 in the CSV, which has none */
} ol_trace_event_t;

typedef enum ol_trace_format {
  OL_TRACE_FORMAT_CSV,     /* PyTorch's recorder, tests/data */
  OL_TRACE_FORMAT_OOMLENS, /* ours, docs/trace-format.md */
} ol_trace_format_t;

/* The most devices our format names (device ordinals 0 to this - 1). */
#define OL_TRACE_MAX_DEVICES 64

typedef struct ol_trace ol_trace_t;

/* Opens a trace and reads its header. NULL with the error in err when the
 * file cannot be opened, is empty, or is not a trace we know. */
ol_trace_t *ol_trace_open(const char *path, ol_error_t *err);

/* 1 and *event filled; 0 at the end of the trace; -1 with the error in err
 * for a malformed line or a read error (the trace is unusable after that). */
int ol_trace_next(ol_trace_t *trace, ol_trace_event_t *event, ol_error_t *err);

void ol_trace_close(ol_trace_t *trace); /* NULL is fine */

ol_trace_format_t ol_trace_format(const ol_trace_t *trace);
/* What our format's header and device lines say: the recording process's
 * pid (0 unknown), when it started (microseconds since 1970, 0 unknown),
 * and a device's capacity in bytes as seen by the job (0 unknown). */
long ol_trace_pid(const ol_trace_t *trace);
uint64_t ol_trace_start_unix_us(const ol_trace_t *trace);
uint64_t ol_trace_capacity(const ol_trace_t *trace, int device);
/* How far through the file reading has got, 0 to 1 (bytes of the file as
 * stored, gzip'd or not); for progress displays. */
double ol_trace_progress(ol_trace_t *trace);

/* trace_actions.c (in the library too, which has no zlib):
 * "alloc", "free_completed", ...; "?" out of range. */
const char *ol_trace_action_name(ol_trace_action_t action);
/* The action named by the n bytes at p; false if none. */
bool ol_trace_action_parse(const char *p, size_t n, ol_trace_action_t *out);

#endif
