/* fuzz_trace_csv.c: libFuzzer target for the trace reader (src/analyze/trace_csv.c).
 * The reader takes a path, so each input becomes an in-memory file
 * (memfd) named through /proc/self/fd: the same gzopen/gzread path a
 * trace on disk takes, gzip'd or plain, without touching the disk. */
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core.h"
#include "fuzz_input.h"
#include "trace_csv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char path[64];
  int fd = fuzz_input_file(data, size, "trace", path, sizeof path);
  if (fd < 0)
    return 0;
  ol_error_t err;
  ol_trace_t *trace = ol_trace_open(path, &err);
  if (trace) {
    ol_trace_event_t ev;
    uint64_t last_line = 1;
    int rc;
    while ((rc = ol_trace_next(trace, &ev, &err)) == 1) {
      /* What the reader promises its callers: lines only go forward, the
       * action is one it names, the device is in range, the frames lie in
       * memory it owns. */
      if (ev.line <= last_line || ev.frames_len > OL_TRACE_MAX_LINE ||
          (unsigned)ev.action >= OL_TRACE_ACTION_COUNT ||
          (unsigned)ev.device >= OL_TRACE_MAX_DEVICES)
        __builtin_trap();
      if (ev.frames_len)
        (void)*(volatile const char *)(ev.frames + ev.frames_len - 1);
      last_line = ev.line;
    }
    ol_trace_close(trace);
  }
  close(fd);
  return 0;
}
