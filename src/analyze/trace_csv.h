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

#include "core.h" /* the events' vocabulary */

/* Longest line accepted, newline excluded. Frames are four Python frames,
 * far below this; a longer line is a broken file, not a trace. */
#define OL_TRACE_MAX_LINE 65536

/* The largest size (and device capacity, and bytes outside) a line may
 * carry, and the latest time: beyond them a line is refused with its
 * number, so that no sum or product the readers make can overflow. */
#define OL_TRACE_MAX_BYTES OL_MAX_BYTES
#define OL_TRACE_MAX_TIME_US ((uint64_t)1 << 53)
/* All the sizes of a trace's events added up: at most this. */
#define OL_TRACE_MAX_TOTAL ((uint64_t)1 << 62)


typedef enum ol_trace_format {
  OL_TRACE_FORMAT_CSV,     /* PyTorch's recorder, tests/data */
  OL_TRACE_FORMAT_OOMLENS, /* ours, docs/trace-format.md */
} ol_trace_format_t;


typedef struct ol_trace ol_trace_t;

/* Opens a trace and reads its header. NULL with the error in err when the
 * file cannot be opened, is empty, or is not a trace we know. */
ol_trace_t *ol_trace_open(const char *path, ol_error_t *err);

/* 1 and *event filled; 0 at the end of the trace; -1 with the error in err
 * for a malformed line or a read error (the trace is unusable after that).
 * A last line cut short (no newline, and ours, or not readable) is the
 * end: every line before it is whole; ol_trace_note says so. */
int ol_trace_next(ol_trace_t *trace, ol_trace_event_t *event, ol_error_t *err);

void ol_trace_close(ol_trace_t *trace); /* NULL is fine */

/* Once read to its end (before it: NULL): NULL for a whole trace, else one line saying how
 * it was not (valid until the next call or the close), for a note on
 * stderr and in what the command writes:
 *   "cut short: no end line (...); read its 1200 lines"       (ours only)
 *   "cut short: line 7 ends without its newline (...); read up to line 6"
 *   "incomplete: tracing stopped early (REASON)"               (its end line) */
const char *ol_trace_note(ol_trace_t *trace);

/* -1 with "PATH: no event of device N (its events are on device 0, 1)"
 * (OL_EXIT_USAGE) when device >= 0 and no event read so far was on it;
 * else 0. For --device, once the trace is read. */
int ol_trace_check_device(const ol_trace_t *trace, int device, ol_error_t *err);

/* Both, for a command that read the trace to its end: the note copied into
 * note (cap bytes; "" for a whole trace), and 0; or -1 from the device
 * check. */
int ol_trace_finish(ol_trace_t *trace, int device, char *note, size_t cap, ol_error_t *err);

ol_trace_format_t ol_trace_format(const ol_trace_t *trace);
/* What our format's header and device lines say: the recording process's
 * pid (0 unknown), when it started (microseconds since 1970, 0 unknown),
 * and a device's capacity in bytes as seen by the job (0 unknown). */
long ol_trace_pid(const ol_trace_t *trace);
uint64_t ol_trace_start_unix_us(const ol_trace_t *trace);
uint64_t ol_trace_batch(const ol_trace_t *trace); /* the job's OOMLENS_BATCH; 0 none */
/* The header's manage=1: oomlens's pool served the job's tensors, so an
 * allocation with a segment of its own was one the pool left to the driver. */
bool ol_trace_managed(const ol_trace_t *trace);
/* The header's pool_unit=N: the chunks per physical extent the live pool
 * mapped in (OOMLENS_POOL_UNIT); 0 where the header does not say. */
uint64_t ol_trace_pool_unit(const ol_trace_t *trace);
/* From now on ol_trace_next hands out the pool_held and pool_freed lines
 * (OL_TRACE_POOL_HELD, OL_TRACE_POOL_FREED: device and addr set, size 0),
 * which every other reader skips. For replay, which follows them. */
void ol_trace_want_pool_lines(ol_trace_t *trace);
/* A device's outside line, read so far: what it held outside the
 * allocator at the job's first allocation; -1 none. */
int64_t ol_trace_outside(const ol_trace_t *trace, int device);
uint64_t ol_trace_capacity(const ol_trace_t *trace, int device);
/* How far through the file reading has got, 0 to 1 (bytes of the file as
 * stored, gzip'd or not); for progress displays. */
double ol_trace_progress(ol_trace_t *trace);

#endif
