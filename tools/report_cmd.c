/* report_cmd.c: `oomlens report FILE [--html OUT]`: a report the library
 * wrote (JSON), or a recorded trace, printed as the text report or turned
 * into one self-contained HTML page. Exit codes: 0 done, 2 for a usage
 * error, a file that cannot be read or is not ours, or an OUT that is not
 * a regular file of the user's (or is FILE itself), 1 when the page
 * cannot be written. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "input.h"
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
          "OUT.html may be - for stdout; a file is replaced only by a whole page, and\n"
          "refused when it is not a regular file of yours (a folder, link, device,\n"
          "FIFO) or is FILE itself.\n"
          "\n"
          "Exit status: 0 done, 2 for a usage error, an unreadable file or a refused\n"
          "OUT, 1 when the page cannot be written (OUT is then as it was).\n");
}

/* The page (or the text) whole: OUT replaced only by a complete page
 * (core's output_file.c), stdout written and flushed. */
static int write_out(const char *path, const ol_buf_t *buf)
{
  ol_error_t err;
  if (buf->failed) {
    ol_fail(&err, OL_EXIT_FAILURE, "out of memory");
    return ol_args_fail("report", &err);
  }
  if (strcmp(path, "-") != 0)
    return ol_output_write_file(path, buf->data, buf->len, OL_OUTPUT_SHARED, &err)
             ? OL_EXIT_OK
             : ol_args_fail("report", &err);
  if (fwrite(buf->data, 1, buf->len, stdout) != buf->len || fflush(stdout) != 0) {
    ol_fail(&err, OL_EXIT_FAILURE, "standard output: cannot write: %s", strerror(errno));
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
  const char *inputs[] = {argv[0], NULL};
  if (a.html && strcmp(a.html, "-") != 0 && !ol_output_check(a.html, inputs, &err))
    return ol_args_fail("report", &err); /* before reading: x --html x keeps x */
  char copy[64];
  const char *readable = ol_input_rereadable(argv[0], copy, sizeof copy, &err);
  if (!readable || ol_view_load(&view, readable, &err) != 0)
    return ol_args_fail("report", &err);
  if (readable != argv[0] && view.source) /* a copy of a pipe: the report names what was given */
    ol_report_set_text(&view, &view.source, argv[0]);
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
