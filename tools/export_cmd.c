/* export_cmd.c: `oomlens export TRACE --format F [-o OUT]`, a trace (ours
 * or PyTorch's CSV) in a format other tools view (src/analyze/export.h). Exit
 * codes: 0 written; 2 for a usage or input error; 1 when the host runs
 * out of memory or the output cannot be written. OUT is never anything but
 * a regular file of the user's, and never the trace itself (exit 2). */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "input.h"
#include "commands.h"
#include "export.h"
#include "core.h"
#include "progress.h"
#include "trace_csv.h"

/* memory-viz keeps each device's last million entries by default: the 10M
 * events of docs/measurements.md's synthetic run made a 439 MiB pickle, too
 * big for the viewer, which holds the whole file in the browser; a million
 * entries is about 45 MiB, many training iterations of history. PyTorch's
 * own guide records 100,000 (--max-entries 100000 for a quicker viewer). */
#define DEFAULT_MAX_ENTRIES 1000000

/* A flag that only some formats take: given or not, so that giving it
 * to a format it does not apply to is an error, not ignored. */
typedef struct by_flag {
  ol_export_by_t by;
  bool given;
} by_flag_t;

typedef struct count_flag {
  uint64_t n;
  bool given;
} count_flag_t;

typedef struct export_args {
  const char *trace;
  const char *output; /* NULL: stdout */
  ol_export_options_t options;
  by_flag_t by;            /* folded only */
  count_flag_t max_entries; /* memory-viz only */
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
          "  -o, --output OUT      write to OUT (default: standard output): replaced\n"
          "                        only by a whole export; refused when it is not a\n"
          "                        regular file of yours (a folder, link, device, FIFO)\n"
          "                        or is TRACE itself\n"
          "--by and --max-entries with a format they are not for are errors, as is\n"
          "--device N on a trace without device N.\n"
          "\n"
          "Exit status: 0 when written, 2 for a usage or input error or a refused OUT,\n"
          "1 when the host runs out of memory or the output cannot be written (OUT is\n"
          "then as it was).\n");
}

static bool parse_format(const char *text, void *field, const void *data)
{
  return ol_export_format_parse(text, field);
}

static bool parse_by(const char *text, void *field, const void *data)
{
  by_flag_t *f = field;
  return (f->given = ol_export_by_parse(text, &f->by));
}

static bool parse_entries(const char *text, void *field, const void *data)
{
  count_flag_t *f = field;
  return (f->given = ol_parse_count(text, &f->n));
}

static const ol_arg_type_t format_type = {
  "format", "expected folded, memory-viz, perfetto or rmm-csv", parse_format};
static const ol_arg_type_t by_type = {"value", "expected peak, total or leaked", parse_by};
static const ol_arg_type_t entries_type = {"value", "expected a count of entries (0: all)",
                                           parse_entries};

static const ol_opt_t opts[] = {
  OL_VALUE("--format", &format_type, export_args_t, options.format),
  OL_VALUE("--by", &by_type, export_args_t, by),
  OL_VALUE("--device", &ol_arg_device, export_args_t, options.device),
  OL_VALUE("--max-entries", &entries_type, export_args_t, max_entries),
  {"--output", "-o", &ol_arg_text, offsetof(export_args_t, output), NULL, NULL},
  {0},
};

/* --by is folded's, --max-entries memory-viz's: with another format each
 * is a usage error (it used to be ignored without a word). */
static bool flags_apply(export_args_t *a, int *status)
{
  ol_export_format_t f = a->options.format;
  const char *stray = a->by.given && f != OL_EXPORT_FOLDED           ? "--by (folded only)"
                      : a->max_entries.given && f != OL_EXPORT_MEMORY_VIZ ? "--max-entries (memory-viz only)"
                                                                          : NULL;
  if (stray) {
    *status = ol_args_usage("export", "%s does not apply to --format %s", stray,
                            ol_export_format_name(f));
    return false;
  }
  a->options.by = a->by.by;
  a->options.max_entries = a->max_entries.n;
  return true;
}

/* true parsed; false: return *status (help printed, or a usage error said). */
static bool parse_args(int argc, char **argv, export_args_t *a, int *status)
{
  static const ol_cmd_t cmd = {"export", opts, print_help, false};
  const ol_export_format_t unset = OL_EXPORT_FORMAT_COUNT; /* tells --format given */
  *a = (export_args_t){.options = {.format = unset, .device = -1},
                       .by = {OL_EXPORT_BY_PEAK, false},
                       .max_entries = {DEFAULT_MAX_ENTRIES, false}};
  int n;
  if (!ol_args_take(&cmd, argc, argv, a, &n, status))
    return false;
  if (n != 1) {
    *status = n == 0 ? ol_args_usage("export", "no trace given")
                     : ol_args_usage("export", "more than one trace given ('%s')", argv[1]);
    return false;
  }
  a->trace = argv[0];
  if (a->options.format == unset) {
    *status = ol_args_usage("export", "no --format given");
    return false;
  }
  return flags_apply(a, status);
}

/* OUT as a stream for the exporter: a temporary file beside OUT (its own
 * descriptor, so fclose leaves the output's to commit), published only once
 * the whole export is written (core's output_file.c). */
static FILE *open_output(ol_output_t *o, const char *path, ol_error_t *err)
{
  if (!ol_output_begin(o, path, OL_OUTPUT_SHARED, err))
    return NULL;
  int fd = dup(o->fd);
  FILE *out = fd >= 0 ? fdopen(fd, "wb") : NULL;
  if (!out) {
    ol_fail(err, OL_EXIT_FAILURE, "%s: cannot write: %s", path, strerror(errno));
    if (fd >= 0)
      close(fd);
    ol_output_abort(o);
  }
  return out;
}

/* The output is checked before anything is read (a refused OUT, such as
 * the trace itself, costs nothing), and opened only once the trace is
 * known to open; OUT is replaced only by a whole export, so a failed
 * one leaves it as it was. */
int ol_cmd_export(int argc, char **argv)
{
  export_args_t a;
  int status;
  if (!parse_args(argc, argv, &a, &status))
    return status;
  ol_error_t err;
  const char *inputs[] = {a.trace, NULL};
  if (a.output && !ol_output_check(a.output, inputs, &err))
    return ol_args_fail("export", &err);
  char copy[64];
  const char *readable = ol_input_rereadable(a.trace, copy, sizeof copy, &err);
  if (!readable)
    return ol_args_fail("export", &err);
  ol_trace_t *probe = ol_trace_open(readable, &err);
  if (!probe)
    return ol_args_fail("export", &err);
  ol_trace_close(probe);
  ol_output_t output;
  FILE *out = a.output ? open_output(&output, a.output, &err) : stdout;
  if (!out)
    return ol_args_fail("export", &err);
  static char buffer[1 << 16];
  setvbuf(out, buffer, _IOFBF, sizeof buffer);
  ol_progress_t progress;
  ol_progress_start(&progress, "oomlens export");
  a.options.progress = ol_progress_show;
  a.options.progress_arg = &progress;
  ol_export_result_t result;
  int rc = ol_export_file(readable, out, &a.options, &result, &err);
  ol_progress_end(&progress);
  bool closed = a.output ? fclose(out) == 0 : fflush(out) == 0;
  if (rc == 0 && !closed) {
    ol_fail(&err, OL_EXIT_FAILURE, "%s: cannot write: %s", a.output ? a.output : "standard output",
            strerror(errno));
    rc = -1;
  }
  if (a.output && rc != 0)
    ol_output_abort(&output);
  if (a.output && rc == 0 && !ol_output_commit(&output, &err))
    rc = -1;
  if (rc != 0)
    return ol_args_fail("export", &err);
  if (result.note[0])
    fprintf(stderr, "oomlens export: %s: %s\n", a.trace, result.note);
  if (result.left_out)
    fprintf(stderr, "oomlens export: kept the last %llu entries of each device, left out %llu "
                    "earlier ones (--max-entries 0 keeps all)\n",
            (unsigned long long)a.options.max_entries, (unsigned long long)result.left_out);
  return 0;
}
