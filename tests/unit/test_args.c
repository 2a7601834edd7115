/* test_args.c: the command-line parser every oomlens command uses
 * (tools/args.c), table-driven: both value forms, aliases, flags, "--",
 * operands gathered in order, options ending at the first operand, and
 * the one-line errors naming the option. */
#include <check.h>

#include "check_run.h"
#include <stdio.h>
#include <string.h>

#include "args.h"

typedef struct test_opts {
  bool flag;
  const char *text;
  uint64_t size, count;
  int device;
} test_opts_t;

static const ol_opt_t opts[] = {
  OL_FLAG("--flag", test_opts_t, flag),
  {"--text", "-t", &ol_arg_text, offsetof(test_opts_t, text), NULL, NULL},
  OL_VALUE("--size", &ol_arg_size, test_opts_t, size),
  OL_VALUE("--count", &ol_arg_uint, test_opts_t, count),
  OL_VALUE("--device", &ol_arg_device, test_opts_t, device),
  {0},
};

static void no_help(FILE *out)
{
  (void)out;
}

typedef struct {
  const char *line;   /* words split at spaces */
  bool options_first; /* the first operand ends the options */
  ol_args_result_t result;
  const char *operands; /* joined with '|' */
  const char *message;  /* a piece of the error, for OL_ARGS_BAD */
  test_opts_t want;     /* for OL_ARGS_OK */
} args_case_t;

#define GIB (UINT64_C(1) << 30)

static const args_case_t cases[] = {
  {"", false, OL_ARGS_OK, "", NULL, {.device = -1}},
  {"--flag", false, OL_ARGS_OK, "", NULL, {.flag = true, .device = -1}},
  {"--size 1.5G", false, OL_ARGS_OK, "", NULL, {.size = 3 * GIB / 2, .device = -1}},
  {"--size=1.5G", false, OL_ARGS_OK, "", NULL, {.size = 3 * GIB / 2, .device = -1}},
  {"--text=a=b", false, OL_ARGS_OK, "", NULL, {.text = "a=b", .device = -1}},
  {"-t x", false, OL_ARGS_OK, "", NULL, {.text = "x", .device = -1}},
  {"--text -x", false, OL_ARGS_OK, "", NULL, {.text = "-x", .device = -1}},
  {"--count 7 --device=3", false, OL_ARGS_OK, "", NULL, {.count = 7, .device = 3}},
  {"a --flag b", false, OL_ARGS_OK, "a|b", NULL, {.flag = true, .device = -1}},
  {"a - b", false, OL_ARGS_OK, "a|-|b", NULL, {.device = -1}},
  {"-- --flag x", false, OL_ARGS_OK, "--flag|x", NULL, {.device = -1}},
  {"--flag -- --", false, OL_ARGS_OK, "--", NULL, {.flag = true, .device = -1}},
  {"cmd --flag", true, OL_ARGS_OK, "cmd|--flag", NULL, {.device = -1}},
  {"--flag cmd -t x", true, OL_ARGS_OK, "cmd|-t|x", NULL, {.flag = true, .device = -1}},
  {"--help", false, OL_ARGS_HELP, "", NULL, {0}},
  {"a -h --bogus", false, OL_ARGS_HELP, "", NULL, {0}},
  {"--bogus", false, OL_ARGS_BAD, "", "unknown option --bogus", {0}},
  {"-x", false, OL_ARGS_BAD, "", "unknown option -x", {0}},
  {"--flag=1", false, OL_ARGS_BAD, "", "unknown option --flag=1 (--flag takes no value)", {0}},
  {"--size", false, OL_ARGS_BAD, "", "--size needs a value", {0}},
  {"-t", false, OL_ARGS_BAD, "", "--text needs a value", {0}},
  {"--size 12X", false, OL_ARGS_BAD, "", "bad size '12X' for --size: expected", {0}},
  {"--size -1", false, OL_ARGS_BAD, "", "bad size '-1' for --size", {0}},
  {"--size=", false, OL_ARGS_BAD, "", "bad size '' for --size", {0}},
  {"--size 9223372036854775808", false, OL_ARGS_BAD, "", "bad size", {0}},
  {"--text=", false, OL_ARGS_BAD, "", "bad value '' for --text", {0}},
  {"--count 1.5", false, OL_ARGS_BAD, "", "bad value '1.5' for --count", {0}},
  {"--count 18446744073709551616", false, OL_ARGS_BAD, "", "bad value", {0}},
  {"--device 64", false, OL_ARGS_BAD, "", "bad device '64' for --device: expected 0 to 63", {0}},
  {"--device -1", false, OL_ARGS_BAD, "", "bad device '-1'", {0}},
};

START_TEST(parse_table)
{
  const args_case_t *c = &cases[_i];
  char copy[256];
  char *argv[16] = {0};
  int argc = 0;
  snprintf(copy, sizeof copy, "%s", c->line);
  for (char *w = strtok(copy, " "); w && argc < 15; w = strtok(NULL, " "))
    argv[argc++] = w;
  const ol_cmd_t cmd = {"test", opts, no_help, c->options_first};
  test_opts_t got = {.device = -1};
  ol_error_t err;
  int n = -1;
  ol_args_result_t r = ol_args_parse(&cmd, argc, argv, &got, &n, &err);
  ck_assert_msg(r == c->result, "'%s': result %d, want %d (%s)", c->line, r, c->result, err.text);
  if (r == OL_ARGS_BAD) {
    ck_assert_msg(strstr(err.text, c->message), "'%s' gave '%s'", c->line, err.text);
    ck_assert_int_eq(err.status, OL_EXIT_USAGE);
    return;
  }
  ck_assert_int_eq(err.status, OL_EXIT_OK);
  if (r == OL_ARGS_HELP)
    return;
  char joined[256] = "";
  for (int i = 0; i < n; i++)
    snprintf(joined + strlen(joined), sizeof joined - strlen(joined), "%s%s", i ? "|" : "",
             argv[i]);
  ck_assert_msg(strcmp(joined, c->operands) == 0, "'%s': operands '%s'", c->line, joined);
  ck_assert_ptr_null(argv[n]); /* NULL after the operands, as execvp wants */
  ck_assert(got.flag == c->want.flag);
  ck_assert_str_eq(got.text ? got.text : "(null)", c->want.text ? c->want.text : "(null)");
  ck_assert_uint_eq(got.size, c->want.size);
  ck_assert_uint_eq(got.count, c->want.count);
  ck_assert_int_eq(got.device, c->want.device);
}
END_TEST

/* A bad value leaves the field as it was (the default). */
START_TEST(bad_value_keeps_field)
{
  char a0[] = "--size", a1[] = "1Q";
  char *argv[] = {a0, a1, NULL};
  const ol_cmd_t cmd = {"test", opts, no_help, false};
  test_opts_t got = {.size = 42};
  ol_error_t err;
  int n;
  ck_assert_int_eq(ol_args_parse(&cmd, 2, argv, &got, &n, &err), OL_ARGS_BAD);
  ck_assert_uint_eq(got.size, 42);
}
END_TEST

static Suite *args_suite(void)
{
  Suite *s = suite_create("args");
  TCase *tc = tcase_create("parse");
  tcase_add_loop_test(tc, parse_table, 0, sizeof cases / sizeof *cases);
  tcase_add_test(tc, bad_value_keeps_field);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  return ol_run_suite(args_suite());
}
