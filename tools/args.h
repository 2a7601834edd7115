/* args.h: the one command-line parser of every oomlens command (the top
 * level, run, replay, export, report, merge, estimate).
 *
 * A command describes its options in a table, one row each: the name, an
 * alias, whether it takes a value and of what type, and where the value
 * goes (an offset into the command's own options struct). The parser gives
 * every command the same grammar:
 *   --opt value and --opt=value alike; -o value for an alias;
 *   --help and -h print the command's help;
 *   -- ends the options; a command may also end them at its first operand
 *   (run: what follows is the job's own command line);
 *   operands anywhere else, gathered in order;
 * and the same errors, one line naming the option, exit status 2:
 *   unknown option --frobnicate
 *   --capacity needs a value
 *   bad size '12X' for --capacity: expected ...                         */
#ifndef OL_ARGS_H
#define OL_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "core.h"

/* What an option's value is. */
typedef struct ol_arg_type {
  const char *what;   /* in "bad size '1Q' for --capacity" */
  const char *expect; /* said after it ("expected ..."); NULL: nothing */
  /* Parses text into the field; false for a bad value, the field then
   * unchanged. data: the row's. */
  bool (*parse)(const char *text, void *field, const void *data);
} ol_arg_type_t;

extern const ol_arg_type_t ol_arg_text;   /* const char *: any text but an empty one */
extern const ol_arg_type_t ol_arg_size;   /* uint64_t bytes: ol_parse_size, at most OL_MAX_BYTES */
extern const ol_arg_type_t ol_arg_uint;   /* uint64_t: decimal digits */
extern const ol_arg_type_t ol_arg_batch;  /* uint64_t: a batch size, 1 to 10^6 */
extern const ol_arg_type_t ol_arg_unit;   /* uint64_t: OOMLENS_POOL_UNIT's chunks, 1 to 512 */
extern const ol_arg_type_t ol_arg_device; /* int: a CUDA device, 0 to OL_TRACE_MAX_DEVICES - 1 */
/* ol_arg_size's parser, for a command's own size type (other words). */
bool ol_arg_parse_size(const char *text, void *field, const void *data);

/* One option. A table of them ends with a row whose name is NULL. */
typedef struct ol_opt {
  const char *name;          /* "--capacity" */
  const char *alias;         /* "-o", or NULL */
  const ol_arg_type_t *type; /* NULL: a flag, no value: the bool at offset becomes true */
  size_t offset;             /* of the field in the command's options struct */
  const void *data;          /* handed to type->parse; NULL if it needs none */
  const char *expect;        /* replaces type->expect in messages; NULL: the type's */
} ol_opt_t;

#define OL_FLAG(name, st, field) {name, NULL, NULL, offsetof(st, field), NULL, NULL}
#define OL_VALUE(name, type, st, field) {name, NULL, type, offsetof(st, field), NULL, NULL}

typedef struct ol_cmd {
  const char *name;     /* "replay": messages begin "oomlens replay: "; "" the top level */
  const ol_opt_t *opts; /* the table */
  void (*help)(FILE *out);
  bool options_first;   /* the first operand ends the options */
} ol_cmd_t;

typedef enum ol_args_result {
  OL_ARGS_OK,   /* parsed */
  OL_ARGS_HELP, /* --help or -h: nothing after it looked at */
  OL_ARGS_BAD,  /* a bad command line: err says why (status OL_EXIT_USAGE) */
} ol_args_result_t;

/* Parses argv[0..argc) (the words after the command's name) into opts,
 * the struct the table's offsets point into, which holds the defaults.
 * The operands are moved, in order, to argv[0..*operands), with NULL after
 * them where there is room (before argc; main's argv[argc] is NULL). */
ol_args_result_t ol_args_parse(const ol_cmd_t *cmd, int argc, char **argv, void *opts,
                               int *operands, ol_error_t *err);

/* ol_args_parse at a command's start: --help printed on stdout, a bad
 * command line said on stderr (ol_args_usage). true: go on; false: the
 * command returns *status (0 after the help, OL_EXIT_USAGE). */
bool ol_args_take(const ol_cmd_t *cmd, int argc, char **argv, void *opts, int *operands,
                  int *status);

/* "oomlens NAME: <message> (see oomlens NAME --help)" on stderr; returns
 * OL_EXIT_USAGE. */
int ol_args_usage(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* "oomlens NAME: <err->text>" on stderr; returns err->status, the status
 * the command exits with. */
int ol_args_fail(const char *name, const ol_error_t *err);

#endif
