/* trace_args.h: the command line shared by the commands that read one
 * trace (`oomlens replay`, `oomlens export`): one TRACE operand, options
 * that take their value as the next argument or after '=' (--device=1),
 * flags, --help/-h, and their usage errors (exit status 2). */
#ifndef OL_TRACE_ARGS_H
#define OL_TRACE_ARGS_H

#include <stdbool.h>
#include <stdio.h>

#define OL_EXIT_USAGE 2

typedef struct ol_trace_cmd {
  const char *name;            /* "replay": "oomlens replay: ..." in messages */
  void (*help)(FILE *out);
  const char *const *valued;   /* options that take a value; NULL-terminated */
  const char *const *flags;    /* options that take none; NULL-terminated, or NULL */
  /* Sets an option (value NULL for a flag): 0, or OL_EXIT_USAGE with the
   * error printed. */
  int (*set)(void *args, const char *option, const char *value);
} ol_trace_cmd_t;

/* "oomlens NAME: <message> (see oomlens NAME --help)" on stderr; returns
 * OL_EXIT_USAGE. */
int ol_trace_cmd_usage(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* 0 parsed (*trace set), 1 help printed, OL_EXIT_USAGE on a bad command
 * line (said on stderr). */
int ol_trace_cmd_parse(const ol_trace_cmd_t *cmd, int argc, char **argv, void *args,
                       const char **trace);

/* --device N: 0 with *device set, or OL_EXIT_USAGE said. */
int ol_trace_cmd_device(const char *name, const char *value, int *device);

#endif
