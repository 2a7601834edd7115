/* export_cmd.c: `oomlens export TRACE --format F [-o OUT]`, a trace (ours
 * or PyTorch's CSV) in a format other tools view (src/export.h). Exit
 * codes: 0 written; 2 for a usage or input error; 1 when the host runs
 * out of memory or the output cannot be written. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "export.h"
#include "ol.h"
#include "trace_args.h"

#define EXIT_USAGE OL_EXIT_USAGE
#define usage_error(...) ol_trace_cmd_usage("export", __VA_ARGS__)
/* memory-viz keeps each device's last million entries by default: the 10M
 * events of docs/measurements.md's synthetic run made a 439 MiB pickle, too
 * big for the viewer, which holds the whole file in the browser; a million
 * entries is about 45 MiB, many training iterations of history. PyTorch's
 * own guide records 100,000 (--max-entries 100000 for a quicker viewer). */
#define DEFAULT_MAX_ENTRIES 1000000

int ol_cmd_export(int argc, char **argv);

typedef struct export_args {
  const char *trace;
  const char *output; /* NULL: stdout */
  ol_export_options_t options;
  bool format_given;
} export_args_t;

static void print_help(FILE *out)
{
  fprintf(out,
          "usage: oomlens export TRACE --format FORMAT [--by WHAT] [--device N]\n"
          "                      [--max-entries N] [-o OUT]\n"
          "\n"
          "Writes a recorded allocation trace (oomlens's own, OOMLENS_TRACE, or the CSV\n"
          "of PyTorch's recorder; gzip'd or plain) in a format other tools view.\n"
          "\n"
          "  --format folded       flame graph stacks, \"frame;frame;frame bytes\" with the\n"
          "                        outermost frame first (flamegraph.pl, speedscope)\n"
          "  --format memory-viz   PyTorch's memory snapshot pickle: drop it on\n"
          "                        https://pytorch.org/memory_viz\n"
          "  --format perfetto     Chrome/Perfetto trace JSON: allocated and reserved\n"
          "                        bytes over time per device, out-of-memory events\n"
          "                        (https://ui.perfetto.dev, chrome://tracing)\n"
          "  --format rmm-csv      RAPIDS RMM's allocation log (Thread,Time,Action,\n"
          "                        Pointer,Size,Stream), for RMM's replay benchmark\n"
          "  --by peak|total|leaked  folded: bytes live at the peak (default), allocated\n"
          "                        in total, or still live at the end of the trace\n"
          "  --device N            only device N's events (default: all)\n"
          "  --max-entries N       memory-viz: only each device's last N trace entries\n"
          "                        (default 1000000; 0: all); the segments still show\n"
          "                        the memory at the end of the trace\n"
          "  -o, --output OUT      write to OUT (default: standard output)\n"
          "\n"
          "Exit status: 0 when written, 2 for a usage or input error, 1 when the host\n"
          "runs out of memory or the output cannot be written.\n");
}

static int set_option(void *args, const char *name, const char *value)
{
  export_args_t *a = args;
  if (strcmp(name, "--format") == 0) {
    if (!ol_export_format_parse(value, &a->options.format))
      return usage_error("unknown format '%s' (folded, memory-viz, perfetto, rmm-csv)", value);
    a->format_given = true;
  } else if (strcmp(name, "--by") == 0) {
    if (!ol_export_by_parse(value, &a->options.by))
      return usage_error("--by takes peak, total or leaked, not '%s'", value);
  } else if (strcmp(name, "--device") == 0) {
    return ol_trace_cmd_device("export", value, &a->options.device);
  } else if (strcmp(name, "--max-entries") == 0) {
    char *end;
    unsigned long long n = strtoull(value, &end, 10);
    if (*value < '0' || *value > '9' || *end || n == ULLONG_MAX)
      return usage_error("--max-entries takes a count of entries (0: all), not '%s'", value);
    a->options.max_entries = n;
  } else {
    a->output = value;
  }
  return 0;
}

static const char *const valued[] = {"--format", "--by", "--device", "--max-entries", "-o",
                                     "--output", NULL};

/* 0 parsed, 1 help printed, EXIT_USAGE on a bad command line. */
static int parse_args(int argc, char **argv, export_args_t *a)
{
  static const ol_trace_cmd_t cmd = {"export", print_help, valued, NULL, set_option};
  *a = (export_args_t){.options = {.device = -1, .max_entries = DEFAULT_MAX_ENTRIES}};
  int rc = ol_trace_cmd_parse(&cmd, argc, argv, a, &a->trace);
  if (rc == 0 && !a->format_given)
    return usage_error("no --format given");
  return rc;
}

/* The output is opened only once the trace is known to open, so a bad
 * trace never leaves an empty file behind; a failed export removes it. */
int ol_cmd_export(int argc, char **argv)
{
  export_args_t a;
  int parsed = parse_args(argc, argv, &a);
  if (parsed)
    return parsed == 1 ? 0 : parsed;
  ol_error_t err;
  ol_trace_t *probe = ol_trace_open(a.trace, &err);
  if (!probe) {
    fprintf(stderr, "oomlens export: %s\n", err.text);
    return err.status;
  }
  ol_trace_close(probe);
  FILE *out = a.output ? fopen(a.output, "wb") : stdout;
  if (!out) {
    perror(a.output);
    return 1;
  }
  static char buffer[1 << 16];
  setvbuf(out, buffer, _IOFBF, sizeof buffer);
  ol_progress_t progress;
  ol_progress_start(&progress, "oomlens export");
  a.options.progress = ol_progress_show;
  a.options.progress_arg = &progress;
  ol_export_result_t result;
  int rc = ol_export_file(a.trace, out, &a.options, &result, &err);
  ol_progress_end(&progress);
  bool closed = !a.output || fclose(out) == 0;
  if (rc == 0 && !closed) {
    ol_fail(&err, OL_EXIT_FAILURE, "cannot write %s", a.output);
    rc = -1;
  }
  if (rc != 0) {
    fprintf(stderr, "oomlens export: %s\n", err.text);
    if (a.output)
      unlink(a.output);
    return err.status;
  }
  if (result.left_out)
    fprintf(stderr, "oomlens export: kept the last %llu entries of each device, left out %llu "
                    "earlier ones (--max-entries 0 keeps all)\n",
            (unsigned long long)a.options.max_entries, (unsigned long long)result.left_out);
  return 0;
}
