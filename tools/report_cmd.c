/* report_cmd.c: `oomlens report FILE [--html OUT]`: a report the library
 * wrote (JSON), or a recorded trace, printed as the text report or turned
 * into one self-contained HTML page. Exit codes: 0 done, 2 for a usage
 * error or a file that cannot be read or is not ours, 1 when the page
 * cannot be written. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "report_view.h"

typedef struct report_args {
  const char *html; /* NULL: the text report on stdout */
} report_args_t;

static const ol_opt_t opts[] = {
  {"--html", NULL, &ol_arg_text, offsetof(report_args_t, html), NULL,
   "expected a file name (- for stdout)"},
  {0},
};

static void print_help(FILE *out)
{
  fprintf(out,
          "usage: oomlens report FILE [--html OUT.html]\n"
          "\n"
          "FILE is a JSON report oomlens wrote (oomlens-<pid>.json), or a recorded\n"
          "allocation trace (the CSV of tests/data, gzip'd or plain). Without --html,\n"
          "prints the text report. With --html, writes one self-contained page (no\n"
          "network): memory over time per device with the OOM marked, the call sites\n"
          "holding memory at the peak, why it ran out, and the summary table.\n"
          "OUT.html may be - for stdout.\n"
          "\n"
          "Exit status: 0 done, 2 for a usage error or an unreadable file, 1 when the\n"
          "page cannot be written.\n");
}

static int write_out(const char *path, const ol_buf_t *buf)
{
  ol_error_t err;
  if (buf->failed) {
    ol_fail(&err, OL_EXIT_FAILURE, "out of memory");
    return ol_args_fail("report", &err);
  }
  bool to_stdout = strcmp(path, "-") == 0;
  FILE *f = to_stdout ? stdout : fopen(path, "w");
  bool ok = f && fwrite(buf->data, 1, buf->len, f) == buf->len;
  if (f)
    ok &= to_stdout ? fflush(f) == 0 : fclose(f) == 0;
  if (!ok) {
    ol_fail(&err, OL_EXIT_FAILURE, "cannot write %s: %s", path, strerror(errno));
    return ol_args_fail("report", &err);
  }
  return OL_EXIT_OK;
}

int ol_cmd_report(int argc, char **argv)
{
  static const ol_cmd_t cmd = {"report", opts, print_help, false};
  report_args_t a = {0};
  int n, status;
  if (!ol_args_take(&cmd, argc, argv, &a, &n, &status))
    return status;
  if (n == 0) {
    print_help(stderr);
    return OL_EXIT_USAGE;
  }
  if (n > 1)
    return ol_args_usage("report", "one FILE only (oomlens merge reads several)");
  ol_report_t view;
  ol_error_t err;
  if (ol_view_load(&view, argv[0], &err) != 0)
    return ol_args_fail("report", &err);
  if (strcmp(view.mode, "trace") == 0 && strcmp(view.reason, "trace") != 0)
    fprintf(stderr, "oomlens report: %s: %s\n", argv[0], view.reason + strlen("trace, "));
  ol_buf_t out = {0};
  if (a.html)
    ol_view_html(&out, &view);
  else
    ol_report_render_text(&out, &view);
  status = write_out(a.html ? a.html : "-", &out);
  ol_buf_free(&out);
  ol_report_free(&view);
  return status;
}
