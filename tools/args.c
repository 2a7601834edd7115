/* args.c: the command-line parser of every oomlens command (args.h): the
 * one loop over the words, the value types the commands share, and the
 * usage messages. */
#include "args.h"

#include <stdarg.h>
#include <stdint.h>
#include <string.h>

#include "trace_csv.h" /* OL_TRACE_MAX_DEVICES */

/* ---- value types ---------------------------------------------------------- */

static bool parse_text(const char *text, void *field, const void *data)
{
  if (!*text)
    return false;
  *(const char **)field = text;
  return true;
}

bool ol_arg_parse_size(const char *text, void *field, const void *data)
{
  uint64_t bytes;
  if (!ol_parse_size(text, &bytes) || bytes > OL_MAX_BYTES)
    return false;
  *(uint64_t *)field = bytes;
  return true;
}

static bool parse_uint(const char *text, void *field, const void *data)
{
  return ol_parse_count(text, (uint64_t *)field);
}

static bool parse_device(const char *text, void *field, const void *data)
{
  uint64_t d;
  if (!ol_parse_count(text, &d) || d >= OL_TRACE_MAX_DEVICES)
    return false;
  *(int *)field = (int)d;
  return true;
}

_Static_assert(OL_TRACE_MAX_DEVICES == 64, "ol_arg_device's message says 0 to 63");

const ol_arg_type_t ol_arg_text = {"value", "expected a non-empty text", parse_text};
const ol_arg_type_t ol_arg_size = {
  "size", "expected bytes or a K, M, G, T size (powers of 1024) such as 24G or 1.5G, "
  "at most 65536T",
  ol_arg_parse_size};
const ol_arg_type_t ol_arg_uint = {"value", "expected a whole number", parse_uint};
/* A count from 1 to max, as options.c's counts accept them. */
static bool parse_count_to(const char *text, void *field, uint64_t max)
{
  uint64_t n;
  if (!ol_parse_count(text, &n) || n == 0 || n > max)
    return false;
  *(uint64_t *)field = n;
  return true;
}

/* A batch: what OOMLENS_BATCH accepts (at most 10^6). */
static bool parse_batch(const char *text, void *field, const void *data)
{
  return parse_count_to(text, field, 1000000);
}

const ol_arg_type_t ol_arg_batch = {"batch", "expected a whole number from 1 to 1000000",
                                    parse_batch};
/* A pool unit: what OOMLENS_POOL_UNIT accepts (1 to 512 chunks). */
static bool parse_unit(const char *text, void *field, const void *data)
{
  return parse_count_to(text, field, OL_POOL_UNIT_MAX);
}

const ol_arg_type_t ol_arg_unit = {"chunks", "expected a whole number from 1 to 512", parse_unit};
const ol_arg_type_t ol_arg_device = {"device", "expected 0 to 63", parse_device};

/* ---- the loop ------------------------------------------------------------- */

static const ol_opt_t *find(const ol_opt_t *opts, const char *name, size_t len)
{
  for (const ol_opt_t *o = opts; o && o->name; o++) {
    if (strlen(o->name) == len && strncmp(o->name, name, len) == 0)
      return o;
    if (o->alias && strlen(o->alias) == len && strncmp(o->alias, name, len) == 0)
      return o;
  }
  return NULL;
}

static bool is_option(const char *arg)
{
  return arg[0] == '-' && arg[1] != '\0';
}

/* Sets one option from argv[*i] (and the next word, if it takes that as
 * its value). */
static ol_args_result_t take_option(const ol_cmd_t *cmd, int argc, char **argv, int *i,
                                    void *opts, ol_error_t *err)
{
  const char *arg = argv[*i];
  /* --name=value: long options only; -o takes its value as the next word. */
  const char *eq = arg[1] == '-' ? strchr(arg, '=') : NULL;
  size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
  const ol_opt_t *o = find(cmd->opts, arg, len);
  if (!o) {
    ol_fail(err, OL_EXIT_USAGE, "unknown option %s", arg);
    return OL_ARGS_BAD;
  }
  char *field = (char *)opts + o->offset;
  if (!o->type) {
    if (eq) {
      ol_fail(err, OL_EXIT_USAGE, "unknown option %s (%s takes no value)", arg, o->name);
      return OL_ARGS_BAD;
    }
    *(bool *)field = true;
    return OL_ARGS_OK;
  }
  const char *value = eq ? eq + 1 : *i + 1 < argc ? argv[*i + 1] : NULL;
  if (!value) {
    ol_fail(err, OL_EXIT_USAGE, "%s needs a value", o->name);
    return OL_ARGS_BAD;
  }
  *i += !eq;
  if (!o->type->parse(value, field, o->data)) {
    const char *expect = o->expect ? o->expect : o->type->expect;
    ol_fail(err, OL_EXIT_USAGE, "bad %s '%s' for %s%s%s", o->type->what, value, o->name,
            expect ? ": " : "", expect ? expect : "");
    return OL_ARGS_BAD;
  }
  return OL_ARGS_OK;
}

ol_args_result_t ol_args_parse(const ol_cmd_t *cmd, int argc, char **argv, void *opts,
                               int *operands, ol_error_t *err)
{
  ol_error_clear(err);
  int n = 0;
  bool options = true;
  for (int i = 0; i < argc; i++) {
    const char *arg = argv[i];
    if (options && strcmp(arg, "--") == 0) {
      options = false;
    } else if (options && (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0)) {
      *operands = 0;
      return OL_ARGS_HELP;
    } else if (options && is_option(arg)) {
      ol_args_result_t r = take_option(cmd, argc, argv, &i, opts, err);
      if (r != OL_ARGS_OK) {
        *operands = 0;
        return r;
      }
    } else {
      options &= !cmd->options_first;
      argv[n++] = argv[i]; /* n <= i: only words already read are overwritten */
    }
  }
  if (n < argc)
    argv[n] = NULL;
  *operands = n;
  return OL_ARGS_OK;
}

bool ol_args_take(const ol_cmd_t *cmd, int argc, char **argv, void *opts, int *operands,
                  int *status)
{
  ol_error_t err;
  switch (ol_args_parse(cmd, argc, argv, opts, operands, &err)) {
  case OL_ARGS_OK:
    return true;
  case OL_ARGS_HELP:
    cmd->help(stdout);
    *status = OL_EXIT_OK;
    return false;
  case OL_ARGS_BAD:
    break;
  }
  *status = ol_args_usage(cmd->name, "%s", err.text);
  return false;
}

/* "oomlens replay: ..." or, at the top level (name ""), "oomlens: ...". */
int ol_args_usage(const char *name, const char *fmt, ...)
{
  const char *space = *name ? " " : "";
  fprintf(stderr, "oomlens%s%s: ", space, name);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, " (see oomlens%s%s --help)\n", space, name);
  return OL_EXIT_USAGE;
}

int ol_args_fail(const char *name, const ol_error_t *err)
{
  fprintf(stderr, "oomlens%s%s: %s\n", *name ? " " : "", name, err->text);
  return err->status;
}
