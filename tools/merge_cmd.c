/* merge_cmd.c: `oomlens merge REPORT...`: the JSON reports of several
 * ranks side by side (merge.c). Exit codes: 0 done, 2 for a usage error or
 * any file that cannot be read or is not an oomlens report, 1 when memory
 * runs out or the table cannot be written. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "report_view.h"

typedef struct merge_args {
  bool json;
} merge_args_t;

static const ol_opt_t opts[] = {
  OL_FLAG("--json", merge_args_t, json),
  {0},
};

static void print_help(FILE *out)
{
  fprintf(out,
          "usage: oomlens merge [--json] REPORT.json...\n"
          "\n"
          "Reads the JSON reports of several processes (one per rank: run with\n"
          "--report 'mem-rank%%r-%%p.txt') and prints one row per rank and device:\n"
          "peak allocated, peak reserved, out-of-memory errors and their class, when\n"
          "each ran out; then which rank ran out first and how unequal the peaks are\n"
          "(largest / smallest, and the spread between them).\n"
          "\n"
          "  --json   one JSON object on stdout instead of the table\n"
          "\n"
          "Exit status: 0 done, 2 for a usage error or a file that is not a report.\n");
}

/* Every report read before any is printed: one bad file, no half table. */
int ol_cmd_merge(int argc, char **argv)
{
  static const ol_cmd_t cmd = {"merge", opts, print_help, false};
  merge_args_t a = {0};
  int n, status;
  if (!ol_args_take(&cmd, argc, argv, &a, &n, &status))
    return status;
  if (n == 0)
    return ol_args_usage("merge", "no reports given");
  ol_report_t *views = calloc((size_t)n, sizeof *views);
  if (!views) {
    fprintf(stderr, "oomlens merge: out of memory\n");
    return OL_EXIT_FAILURE;
  }
  int count = 0;
  ol_error_t err;
  while (count < n && ol_view_load_json(&views[count], argv[count], &err) == 0)
    count++;
  status = count < n ? ol_args_fail("merge", &err) : OL_EXIT_OK;
  if (status == OL_EXIT_OK) {
    ol_buf_t out = {0};
    if (a.json)
      ol_merge_json(&out, views, (size_t)count);
    else
      ol_merge_text(&out, views, (size_t)count);
    if (out.failed || fwrite(out.data, 1, out.len, stdout) != out.len || fflush(stdout) != 0) {
      fprintf(stderr, "oomlens merge: %s\n", out.failed ? "out of memory" : "cannot write");
      status = OL_EXIT_FAILURE;
    }
    ol_buf_free(&out);
  }
  for (int i = 0; i < count; i++)
    ol_report_free(&views[i]);
  free(views);
  return status;
}
