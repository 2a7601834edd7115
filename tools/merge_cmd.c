/* merge_cmd.c: `oomlens merge REPORT...`: the JSON reports of several
 * ranks side by side (merge.c). Exit codes: 0 done, 2 for a usage error or
 * any file that cannot be read or is not an oomlens report. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report_view.h"

#define EXIT_USAGE 2

int ol_cmd_merge(int argc, char **argv);

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

int ol_cmd_merge(int argc, char **argv)
{
  bool json = false;
  ol_view_t *views = calloc((size_t)argc + 1, sizeof *views);
  size_t count = 0;
  int status = 0;
  if (!views)
    return 1;
  for (int i = 0; i < argc && status == 0; i++) {
    ol_error_t err;
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      print_help(stdout);
      status = -1;
    } else if (!strcmp(argv[i], "--json")) {
      json = true;
    } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
      fprintf(stderr, "oomlens merge: unknown option %s (see oomlens merge --help)\n", argv[i]);
      status = EXIT_USAGE;
    } else if (ol_view_load_json(&views[count], argv[i], &err) != 0) {
      fprintf(stderr, "oomlens merge: %s\n", err.text);
      status = err.status;
    } else {
      count++;
    }
  }
  if (status == 0 && count == 0) {
    fprintf(stderr, "oomlens merge: no reports given (see oomlens merge --help)\n");
    status = EXIT_USAGE;
  }
  if (status == 0) {
    ol_buf_t out = {0};
    if (json)
      ol_merge_json(&out, views, count);
    else
      ol_merge_text(&out, views, count);
    if (out.failed || fwrite(out.data, 1, out.len, stdout) != out.len || fflush(stdout) != 0)
      status = 1;
    ol_buf_free(&out);
  }
  for (size_t i = 0; i < count; i++)
    ol_view_free(&views[i]);
  free(views);
  return status < 0 ? 0 : status;
}
