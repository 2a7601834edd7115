/* fuzz_report.c: libFuzzer target for what `oomlens report` and `oomlens
 * merge` do with a JSON report: the strict reader (report_view.c on
 * json_fields.c), then every printer of what it read: the text and JSON
 * renderers, the HTML page, merge's table and JSON (the report beside
 * itself). The input is an in-memory file (fuzz_input.h), as for
 * fuzz_trace_csv.c. What it checks beyond "no
 * crash, no sanitizer report": a refused report says why, naming the file;
 * a read one's figures are in the ranges the reader promises. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core.h"
#include "fuzz_input.h"
#include "report_view.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void print_all(const ol_report_t *v)
{
  ol_buf_t out = {0};
  ol_report_render_text(&out, v);
  ol_report_render_json(&out, v);
  ol_view_html(&out, v);
  ol_report_t two[2] = {*v, *v};
  ol_merge_text(&out, two, 2);
  ol_merge_json(&out, two, 2);
  ol_buf_free(&out);
}

static void check_ranges(const ol_report_t *v)
{
  for (int d = 0; d < v->device_count; d++) {
    const ol_device_stats_t *s = &v->devices[d].stats;
    if (s->allocated_bytes[OL_POOL_ALL].peak < 0 || s->reserved_bytes[OL_POOL_ALL].peak < 0 ||
        s->allocated_bytes[OL_POOL_ALL].peak < s->allocated_bytes[OL_POOL_ALL].current ||
        s->num_ooms < 0)
      __builtin_trap();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char path[64];
  int fd = fuzz_input_file(data, size, "report", path, sizeof path);
  if (fd < 0)
    return 0;
  ol_error_t err;
  ol_report_t v;
  if (ol_view_load_json(&v, path, &err) == 0) {
    check_ranges(&v);
    print_all(&v);
    ol_report_free(&v);
  } else if (!err.text[0] || (err.status == OL_EXIT_USAGE && !strstr(err.text, path) &&
                              !strstr(err.text, "no file path"))) {
    __builtin_trap(); /* refused without saying why, or without naming the file */
  }
  close(fd);
  return 0;
}
