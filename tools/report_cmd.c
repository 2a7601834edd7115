/* report_cmd.c: `oomlens report FILE [--html OUT]`: a report the library
 * wrote (JSON), or a recorded trace, printed as the text report or turned
 * into one self-contained HTML page. Exit codes: 0 done, 2 for a usage
 * error or a file that cannot be read or is not ours, 1 when the page
 * cannot be written. */
#include <stdio.h>
#include <string.h>

#include "report_view.h"

#define EXIT_USAGE 2

int ol_cmd_report(int argc, char **argv);

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
  if (buf->failed) {
    fprintf(stderr, "oomlens report: out of memory\n");
    return 1;
  }
  bool to_stdout = strcmp(path, "-") == 0;
  FILE *f = to_stdout ? stdout : fopen(path, "w");
  if (!f) {
    perror(path);
    return 1;
  }
  bool ok = fwrite(buf->data, 1, buf->len, f) == buf->len;
  ok &= to_stdout ? fflush(f) == 0 : fclose(f) == 0;
  if (!ok) {
    fprintf(stderr, "oomlens report: cannot write %s\n", path);
    return 1;
  }
  return 0;
}

int ol_cmd_report(int argc, char **argv)
{
  const char *file = NULL, *html = NULL;
  for (int i = 0; i < argc; i++) {
    const char *arg = argv[i], *value = NULL;
    char name[32];
    bool split = ol_split_option(&arg, &value, name, sizeof name);
    if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
      print_help(stdout);
      return 0;
    } else if (!strcmp(arg, "--html")) {
      if (!split && i + 1 >= argc) {
        fprintf(stderr, "oomlens report: --html needs a file name\n");
        return EXIT_USAGE;
      }
      html = split ? value : argv[++i];
    } else if (arg[0] == '-' && arg[1] != '\0') {
      fprintf(stderr, "oomlens report: unknown option %s (see oomlens report --help)\n", arg);
      return EXIT_USAGE;
    } else if (file) {
      fprintf(stderr, "oomlens report: one FILE only (oomlens merge reads several)\n");
      return EXIT_USAGE;
    } else {
      file = arg;
    }
  }
  if (!file) {
    print_help(stderr);
    return EXIT_USAGE;
  }
  ol_view_t view;
  ol_error_t err;
  if (ol_view_load(&view, file, &err) != 0) {
    fprintf(stderr, "oomlens report: %s\n", err.text);
    return err.status;
  }
  ol_buf_t out = {0};
  if (html)
    ol_view_html(&out, &view);
  else
    ol_view_text(&out, &view);
  int status = write_out(html ? html : "-", &out);
  ol_buf_free(&out);
  ol_view_free(&view);
  return status;
}
