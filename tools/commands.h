/* commands.h: the commands of the oomlens command line, one per *_cmd.c,
 * each given the words after its name and returning the exit status; and
 * the parsing of `oomlens estimate`, which the tests reach directly. */
#ifndef OL_COMMANDS_H
#define OL_COMMANDS_H

#include <stdbool.h>
#include <stdint.h>

#include "estimate.h"
#include "core.h"

int ol_cmd_replay(int argc, char **argv);   /* replay_cmd.c */
int ol_cmd_estimate(int argc, char **argv); /* estimate_cmd.c */
int ol_cmd_report(int argc, char **argv);   /* report_cmd.c */
int ol_cmd_merge(int argc, char **argv);    /* merge_cmd.c */
int ol_cmd_export(int argc, char **argv);   /* export_cmd.c */

/* ---- estimate_cmd.c ------------------------------------------------------ */

/* The command line of `oomlens estimate` (the words after it). */
typedef struct ol_estimate_args {
  ol_estimate_input_t in;
  bool json;
  bool help;
} ol_estimate_args_t;

/* 0 parsed (or --help seen: args->help), -1 with the error in err on a bad
 * command line. Options take their value as the next word or after '='. */
int ol_estimate_parse_args(int argc, char **argv, ol_estimate_args_t *args, ol_error_t *err);

/* A count: digits with an optional fraction and a K, M or B suffix
 * (thousands, millions, billions): "124M", "1.5B", "7000000000". */
bool ol_estimate_parse_count(const char *text, uint64_t *out);

#endif
