/* trace_args.c: the command line of `oomlens replay` and `oomlens export`
 * (trace_args.h): one loop, so the two read options, values after '=' and
 * their operand the same way and say the same things when they cannot. */
#include "trace_args.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

int ol_trace_cmd_usage(const char *name, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "oomlens %s: ", name);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, " (see oomlens %s --help)\n", name);
  va_end(ap);
  return OL_EXIT_USAGE;
}

static bool listed(const char *const *names, const char *option)
{
  for (size_t i = 0; names && names[i]; i++)
    if (strcmp(option, names[i]) == 0)
      return true;
  return false;
}

int ol_trace_cmd_parse(const ol_trace_cmd_t *cmd, int argc, char **argv, void *args,
                       const char **trace)
{
  *trace = NULL;
  for (int i = 0; i < argc; i++) {
    char name[32];
    const char *arg = argv[i];
    const char *value = i + 1 < argc ? argv[i + 1] : NULL;
    bool inline_value = ol_split_option(&arg, &value, name, sizeof name);
    int rc = 0;
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
      cmd->help(stdout);
      return 1;
    } else if (!inline_value && listed(cmd->flags, arg)) {
      rc = cmd->set(args, arg, NULL);
    } else if (listed(cmd->valued, arg)) {
      if (!value)
        return ol_trace_cmd_usage(cmd->name, "%s needs a value", arg);
      i += !inline_value;
      rc = cmd->set(args, arg, value);
    } else if (arg[0] == '-' && arg[1] != '\0') {
      return ol_trace_cmd_usage(cmd->name, "unknown option %s", argv[i]);
    } else if (*trace) {
      return ol_trace_cmd_usage(cmd->name, "more than one trace given ('%s')", arg);
    } else {
      *trace = arg;
    }
    if (rc)
      return OL_EXIT_USAGE;
  }
  if (!*trace)
    return ol_trace_cmd_usage(cmd->name, "no trace given");
  return 0;
}

int ol_trace_cmd_device(const char *name, const char *value, int *device)
{
  char *end;
  long d = strtol(value, &end, 10);
  if (*value < '0' || *value > '9' || *end || d >= OL_TRACE_MAX_DEVICES)
    return ol_trace_cmd_usage(name, "bad device '%s' (0 to %d)", value, OL_TRACE_MAX_DEVICES - 1);
  *device = (int)d;
  return 0;
}
