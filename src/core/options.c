/* options.c: the OOMLENS_* environment variables, one table with defaults.
 *
 * Read once, lazily, on first use. A value that does not parse gives one
 * warning line naming the variable and the default kept: a typo in a
 * variable must never take the user's job down. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core.h"

/* KIND_COUNT: a plain number of things (frames), no unit. */
typedef enum { KIND_BOOL, KIND_STRING, KIND_SIZE, KIND_COUNT, KIND_SECONDS } option_kind_t;

typedef struct option {
  const char *name;
  option_kind_t kind;
  const char *default_text;
  const char *help;
  long long value;  /* bool, size, and seconds (in milliseconds) */
  const char *text; /* string, or the raw text of the others */
  long long min, max; /* sizes and counts accepted; both 0: any the kind parses */
} option_t;

#define MAX_BYTES ((long long)OL_MAX_BYTES)

static option_t options[OL_OPT_COUNT] = {
  [OL_OPT_ENABLE] = {"OOMLENS_ENABLE", KIND_BOOL, "1",
                     "0 passes every call straight through and records nothing", 0, NULL},
  [OL_OPT_REPORT] = {"OOMLENS_REPORT", KIND_STRING, "oomlens-%p.txt",
                     "text report path; %p = pid, %r = rank (RANK, else LOCAL_RANK, else 0), %% = %",
                     0, NULL},
  [OL_OPT_JSON] = {"OOMLENS_JSON", KIND_BOOL, "1",
                   "also write the JSON report beside the text one (.txt replaced by .json)", 0,
                   NULL},
  [OL_OPT_REPORT_AT_EXIT] = {"OOMLENS_REPORT_AT_EXIT", KIND_BOOL, "1",
                             "write the reports when a process that used CUDA exits", 0, NULL},
  [OL_OPT_SIGNAL] = {"OOMLENS_SIGNAL", KIND_BOOL, "1",
                     "SIGUSR1 writes the reports without stopping the job", 0, NULL},
  [OL_OPT_VERBOSE] = {"OOMLENS_VERBOSE", KIND_BOOL, "0",
                      "explain on stderr what is intercepted and why", 0, NULL},
  [OL_OPT_MANAGE] = {"OOMLENS_MANAGE", KIND_BOOL, "0",
                     "1 serves cudaMalloc/cuMemAlloc from oomlens's pool (oomlens run --manage)",
                     0, NULL},
  [OL_OPT_MAX_SPLIT_SIZE] = {"OOMLENS_MAX_SPLIT_SIZE", KIND_SIZE, "0",
                             "manage mode: free blocks this large or larger are never split "
                             "(0: no limit; bytes, or K/M/G/T, fractions such as 1.5G)", 0, NULL,
                             0, MAX_BYTES},
  [OL_OPT_CAPACITY] = {"OOMLENS_CAPACITY", KIND_SIZE, "0",
                       "make each device look this small (memory queries included) to see "
                       "whether a job fits a smaller card; 0: off (oomlens run --capacity)",
                       0, NULL, 0, MAX_BYTES},
  [OL_OPT_STACKS] = {"OOMLENS_STACKS", KIND_BOOL, "0",
                     "record the native call stack of each allocation (needs libunwind.so.8) "
                     "and report the call sites that held memory at the peak", 0, NULL},
  [OL_OPT_STACK_DEPTH] = {"OOMLENS_STACK_DEPTH", KIND_COUNT, "16",
                          "frames kept per call site (1 to 64)", 0, NULL, 1, 64},
  [OL_OPT_STACK_SAMPLE] = {"OOMLENS_STACK_SAMPLE", KIND_SIZE, "0",
                           "take stacks for a sample: on average one every this many bytes, "
                           "large allocations almost always (K/M/G/T, 1.5M; 0: every allocation); the "
                           "rest is counted under one \"not sampled\" site", 0, NULL, 0,
                           MAX_BYTES},
  [OL_OPT_PYTHON_FRAMES] = {"OOMLENS_PYTHON_FRAMES", KIND_BOOL, "1",
                            "with OOMLENS_STACKS, name the Python lines (file:line:function) of "
                            "each call site when the job runs CPython 3.10-3.13", 0, NULL},
  [OL_OPT_TRACE] = {"OOMLENS_TRACE", KIND_STRING, "",
                    "write every allocation event to this file while the job runs "
                    "(docs/trace-format.md); %p = pid, %r = rank; empty: no trace", 0, NULL},
  [OL_OPT_SOURCE_LINES] = {"OOMLENS_SOURCE_LINES", KIND_BOOL, "1",
                           "name the source file:line of native frames in reports and traces "
                           "where the binaries carry debug info (needs libdw.so.1)", 0, NULL},
  [OL_OPT_BATCH] = {"OOMLENS_BATCH", KIND_COUNT, "0",
                     "the job's batch size, so that the out-of-memory advice names the batch "
                     "that fits in samples (oomlens run --batch N); 0: not known", 0, NULL,
                     0, 1000000},
  [OL_OPT_ROLES] = {"OOMLENS_ROLES", KIND_BOOL, "1",
                    "take the Python frames (no native ones) of a byte-weighted "
                    "sample of allocations, one in OOMLENS_STACK_SAMPLE bytes (1M when that is "
                    "0), to attribute memory by role (weights, gradients, optimizer state, "
                    "activations), in manage mode and, for a CPython job, in observe mode; "
                    "0: off", 0, NULL},
  [OL_OPT_STREAM_MARKS] = {"OOMLENS_STREAM_MARKS", KIND_BOOL, "0",
                           "manage mode: learn that the job's other streams are past a free "
                           "from a mark each writes into host memory, not by asking each "
                           "(cuStreamQuery); measured slower on the H200", 0, NULL},
  [OL_OPT_STREAM_BARRIER] = {"OOMLENS_STREAM_BARRIER", KIND_BOOL, "1",
                             "manage mode: give a batch of frees back at once behind a "
                             "barrier that orders all later work of the context after all "
                             "earlier work (cuCtxRecordEvent, cuCtxWaitEvent), not after a "
                             "round of questions to each of the job's other streams; 0: the "
                             "questions", 0, NULL},
  [OL_OPT_POOL_TRIM] = {"OOMLENS_POOL_TRIM", KIND_BOOL, "1",
                        "manage mode: unmap free memory to keep reserved near peak allocated "
                        "(0: never, trading memory for no remapping)", 0, NULL},
  [OL_OPT_POOL_KEEP_USED] = {"OOMLENS_POOL_KEEP_USED", KIND_BOOL, "0",
                             "manage mode: once the job has mapped again memory a trim "
                             "unmapped, trims spare what it used of late (fewer remaps, more "
                             "reserved) until the device is nearly full; 0: off", 0, NULL},
  [OL_OPT_POOL_REUSE_HELD] = {"OOMLENS_POOL_REUSE_HELD", KIND_BOOL, "0",
                              "manage mode: frees waiting beside the job's other streams go "
                              "back behind a barrier before the next request, so a loop finds "
                              "the place it freed (as with one stream); 0: when their batch "
                              "fills or the pool would grow", 0, NULL},
  [OL_OPT_POOL_MOVE] = {"OOMLENS_POOL_MOVE", KIND_BOOL, "0",
                        "manage mode: memory a trim gives back while queued work may still "
                        "use its old place backs the next map at once (no new allocation, "
                        "no wait); 0: off", 0, NULL},
  [OL_OPT_POOL_UNIT] = {"OOMLENS_POOL_UNIT", KIND_COUNT, "1",
                        "manage mode: 2 MiB chunks one physical allocation may hold (1 to 512); "
                        "more makes fewer driver calls, but free memory goes back only in "
                        "whole allocations", 0, NULL, 1, OL_POOL_UNIT_MAX},
  [OL_OPT_METRICS] = {"OOMLENS_METRICS", KIND_STRING, "",
                      "keep this file current in the Prometheus text format (node exporter's "
                      "textfile collector: name it *.prom); %p, %r as in OOMLENS_REPORT; "
                      "empty: off", 0, NULL},
  [OL_OPT_METRICS_INTERVAL] = {"OOMLENS_METRICS_INTERVAL", KIND_SECONDS, "5",
                               "seconds between rewrites of OOMLENS_METRICS (0.1 to 86400; "
                               "a ms suffix for milliseconds)", 0, NULL},
};

static pthread_once_t options_once = PTHREAD_ONCE_INIT;
long long ol_option_values[OL_OPT_COUNT]; /* each option's value, for core.h's inline readers */
atomic_bool ol_options_ready;

bool ol_parse_bool(const char *text, bool *out)
{
  static const char *const yes[] = {"1", "true", "yes", "on"};
  static const char *const no[] = {"0", "false", "no", "off"};
  for (size_t i = 0; i < 4; i++) {
    if (strcasecmp(text, yes[i]) == 0) {
      *out = true;
      return true;
    }
    if (strcasecmp(text, no[i]) == 0) {
      *out = false;
      return true;
    }
  }
  return false;
}

/* Digits at *p as a number, *p moved past them; false on overflow. */
static bool take_digits(const char **p, uint64_t *out)
{
  uint64_t n = 0;
  for (; **p >= '0' && **p <= '9'; (*p)++) {
    unsigned d = (unsigned)(**p - '0');
    if (n > (UINT64_MAX - d) / 10)
      return false;
    n = n * 10 + d;
  }
  *out = n;
  return true;
}

/* round(0.DIGITS * 2^shift), exactly: the fraction's digits (at most 18
 * count, far below a byte even of a T) by long division. */
static uint64_t fraction_bytes(const char *digits, size_t len, unsigned shift)
{
  uint64_t num = 0, den = 1;
  for (size_t i = 0; i < len && i < 18; i++) {
    num = num * 10 + (uint64_t)(digits[i] - '0');
    den *= 10;
  }
  uint64_t q = 0;
  for (unsigned i = 0; i < shift; i++) { /* num < den <= 1e18: 2 * num fits */
    num *= 2;
    q = q * 2 + (num >= den);
    if (num >= den)
      num -= den;
  }
  return q + (2 * num >= den);
}

/* Sizes, the one grammar of every size in oomlens (OOMLENS_* variables and
 * command-line flags alike): a decimal count of bytes ("100", "512B"), or a
 * number with K, M, G or T (powers of 1024, any case), which may have a
 * fraction ("1.5G", "0.5T", "139.8G", rounded to the nearest byte), and an
 * optional trailing "B" or "iB". Empty, negative, overflowing, a fraction
 * of a byte, spaces and trailing junk are errors. */
bool ol_parse_size(const char *text, uint64_t *out)
{
  if (!text || *text < '0' || *text > '9')
    return false;
  const char *p = text;
  uint64_t whole;
  if (!take_digits(&p, &whole))
    return false;
  const char *fraction = NULL;
  size_t fraction_len = 0;
  if (*p == '.') {
    fraction = ++p;
    while (*p >= '0' && *p <= '9')
      p++;
    fraction_len = (size_t)(p - fraction);
    if (fraction_len == 0)
      return false;
  }
  unsigned shift = 0;
  switch (*p) {
  case 'k': case 'K': shift = 10; break;
  case 'm': case 'M': shift = 20; break;
  case 'g': case 'G': shift = 30; break;
  case 't': case 'T': shift = 40; break;
  default: break;
  }
  p += shift != 0;
  if (shift && strcasecmp(p, "ib") == 0)
    p += 2;
  else if (strcasecmp(p, "b") == 0)
    p++;
  if (*p != '\0' || (fraction && !shift))
    return false;
  if (shift && whole > (UINT64_MAX >> shift))
    return false;
  uint64_t bytes = whole << shift;
  uint64_t part = fraction ? fraction_bytes(fraction, fraction_len, shift) : 0;
  if (part > UINT64_MAX - bytes)
    return false;
  *out = bytes + part;
  return true;
}

/* Durations: seconds as a decimal number ("5", "0.5", "2s") or whole
 * milliseconds ("250ms"), from 0.1 s to a day: a shorter interval would
 * make our thread busy, not the figures better. */
bool ol_parse_seconds(const char *text, uint64_t *millis)
{
  if (!text || *text < '0' || *text > '9')
    return false;
  char *end;
  errno = 0;
  double value = strtod(text, &end);
  if (errno == ERANGE)
    return false;
  if (strcmp(end, "ms") == 0)
    value /= 1000.0;
  else if (strcmp(end, "s") != 0 && *end != '\0')
    return false;
  if (!(value >= 0.1 && value <= 86400.0))
    return false;
  *millis = (uint64_t)(value * 1000.0 + 0.5);
  return true;
}

/* Decimal digits alone, no sign, no unit, no overflow: a count (frames,
 * a device ordinal, a number of steps), for options and flags alike. */
bool ol_parse_count(const char *text, uint64_t *out)
{
  uint64_t n = 0;
  if (!*text)
    return false;
  for (const char *c = text; *c; c++) {
    if (*c < '0' || *c > '9' || n > (UINT64_MAX - (uint64_t)(*c - '0')) / 10)
      return false;
    n = n * 10 + (uint64_t)(*c - '0');
  }
  *out = n;
  return true;
}

static bool parse_value(option_t *opt, const char *text)
{
  bool b;
  uint64_t size;
  switch (opt->kind) {
  case KIND_BOOL:
    if (!ol_parse_bool(text, &b))
      return false;
    opt->value = b;
    return true;
  case KIND_SIZE:
    if (!ol_parse_size(text, &size) || size > LLONG_MAX)
      return false;
    opt->value = (long long)size;
    return true;
  case KIND_COUNT:
    if (!ol_parse_count(text, &size) || size > LLONG_MAX) /* each row says its range */
      return false;
    opt->value = (long long)size;
    return true;
  case KIND_SECONDS:
    if (!ol_parse_seconds(text, &size))
      return false;
    opt->value = (long long)size;
    return true;
  case KIND_STRING:
    /* Only a string whose default is empty may be set empty (off). */
    return *text != '\0' || *opt->default_text == '\0';
  }
  return false;
}

static bool in_range(const option_t *opt)
{
  return (opt->min == 0 && opt->max == 0) || (opt->value >= opt->min && opt->value <= opt->max);
}

/* A value that does not parse, or parses out of the option's range, is
 * warned about once (each load) and the default kept, its text too: what
 * the report says the option was is what the library used. */
static void load_option(option_t *opt)
{
  bool ok = parse_value(opt, opt->default_text);
  (void)ok; /* defaults are ours and always parse; the tests check it */
  opt->text = opt->default_text;
  const char *env = getenv(opt->name);
  if (!env)
    return;
  bool parsed = parse_value(opt, env);
  if (parsed && in_range(opt)) {
    opt->text = env;
    return;
  }
  parse_value(opt, opt->default_text);
  if (parsed)
    ol_log_warn("%s=\"%.64s\" is out of range (%lld to %lld); using the default %s", opt->name,
                env, opt->min, opt->max, opt->default_text);
  else
    ol_log_warn("%s=\"%.64s\" is not valid; using the default %s", opt->name, env,
                opt->default_text);
}

static void load_all(void)
{
  for (int i = 0; i < OL_OPT_COUNT; i++) {
    load_option(&options[i]);
    ol_option_values[i] = options[i].value;
  }
  atomic_store_explicit(&ol_options_ready, true, memory_order_release);
}

void ol_options_load(void)
{
  pthread_once(&options_once, load_all);
}

void ol_options_reload(void)
{
  load_all();
}

static void ensure_loaded(void)
{
  if (!atomic_load_explicit(&ol_options_ready, memory_order_acquire))
    ol_options_load();
}

uint64_t ol_option_millis(ol_option_t opt)
{
  ensure_loaded();
  return (uint64_t)options[opt].value;
}

const char *ol_option_text(ol_option_t opt)
{
  ensure_loaded();
  return options[opt].text;
}

void ol_options_print(FILE *out)
{
  for (int i = 0; i < OL_OPT_COUNT; i++)
    fprintf(out, "  %-24s default %-16s %s\n", options[i].name,
            *options[i].default_text ? options[i].default_text : "(empty)", options[i].help);
}

bool ol_options_defaults_valid(void)
{
  for (int i = 0; i < OL_OPT_COUNT; i++) {
    option_t copy = options[i];
    if (!parse_value(&copy, copy.default_text) || !in_range(&copy))
      return false;
  }
  return true;
}
