/* trace_csv.h: reading allocation traces one event at a time.
 *
 * The format today is the CSV PyTorch's recorder gives us (tests/data/README.md):
 * gzip'd or plain text, a `#` header line naming the columns
 *   time_us,action,addr,size,stream,frames
 * then one event a line. The reader keeps one line in memory whatever the
 * trace's length, so traces of tens of millions of events stream through in
 * constant memory. The first line decides the format; anything that is not
 * this CSV is refused as "unknown trace format", which is where the
 * project's own trace format will be told apart once it exists.
 *
 * Every error message names the file and, for a bad line, its number:
 *   "t.csv.gz:7: bad action 'alloc2'" */
#ifndef OL_TRACE_CSV_H
#define OL_TRACE_CSV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
} ol_trace_event_t;

typedef struct ol_trace ol_trace_t;

/* Opens a trace and reads its header. NULL with a message in err when the
 * file cannot be opened, is empty, or is not a trace we know. */
ol_trace_t *ol_trace_open(const char *path, char *err, size_t err_cap);

/* 1 and *event filled; 0 at the end of the trace; -1 with a message in err
 * for a malformed line or a read error (the trace is unusable after that). */
int ol_trace_next(ol_trace_t *trace, ol_trace_event_t *event, char *err, size_t err_cap);

void ol_trace_close(ol_trace_t *trace); /* NULL is fine */

/* "alloc", "free_completed", ...; "?" out of range. */
const char *ol_trace_action_name(ol_trace_action_t action);

#endif
