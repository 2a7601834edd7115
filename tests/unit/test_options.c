/* test_options.c: the OOMLENS_* table: value parsers, defaults, and a bad
 * value keeping the default with a warning instead of failing. */
#include <check.h>

#include "check_run.h"
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"

typedef struct {
  const char *text;
  bool ok;
  uint64_t value;
} size_case_t;

static const size_case_t size_cases[] = {
  {"0", true, 0},
  {"512", true, 512},
  {"512B", true, 512},
  {"1K", true, 1024},
  {"1k", true, 1024},
  {"2M", true, 2u << 20},
  {"24G", true, 24ull << 30},
  {"24GiB", true, 24ull << 30},
  {"24GB", true, 24ull << 30},
  {"1T", true, 1ull << 40},
  {"18446744073709551615", true, UINT64_MAX},
  {"18446744073709551616", false, 0},
  {"16777216T", false, 0}, /* 2^64: overflows after the shift */
  {"", false, 0},
  {"G", false, 0},
  {"-1", false, 0},
  {" 1", false, 0},
  {"1 G", false, 0},
  {"1X", false, 0},
  {"1GG", false, 0},
  {"0x10", false, 0},
  /* Fractions, with a unit (the one size grammar of the CLI and the
   * variables alike): rounded to the nearest byte. */
  {"1.5G", true, 3ull << 29},
  {"1.5g", true, 3ull << 29},
  {"0.5T", true, 1ull << 39},
  {"0.5K", true, 512},
  {"1.5GiB", true, 3ull << 29},
  {"1.25MB", true, 5ull << 18},
  {"139.8G", true, 150109106995ull}, /* 150109106995.2: OL_REPLAY_DEFAULT_CAPACITY */
  {"0.3K", true, 307},               /* 307.2 */
  {"0.0009765625K", true, 1},
  {"0.0001K", true, 0},              /* 0.1024 rounds to 0 */
  {"1.000000000000000000001K", true, 1024}, /* digits past 18 ignored */
  {"16777215.999999T", true, 0xffffffffffef3908ull}, /* just under 2^64 */
  {"16777215.99999999999999T", false, 0}, /* rounds up to 2^64 */
  {"17179869184G", false, 0},        /* 2^64 */
  {"1.5", false, 0},                 /* a fraction of a byte */
  {"1.5B", false, 0},
  {"1.", false, 0},
  {"1.G", false, 0},
  {".5G", false, 0},
  {"1..5G", false, 0},
  {"1.5.5G", false, 0},
  {"-1.5G", false, 0},
  {"+1G", false, 0},
  {"1.5G ", false, 0},
  {"1.5 G", false, 0},
  {"1e3", false, 0},
  {"1.5Gx", false, 0},
  {"1.5GiBB", false, 0},
  {"512iB", false, 0},
  {"1 ", false, 0},
  {"1\t", false, 0},
};

START_TEST(parse_size_table)
{
  const size_case_t *c = &size_cases[_i];
  uint64_t value = 12345;
  ck_assert_msg(ol_parse_size(c->text, &value) == c->ok, "'%s'", c->text);
  if (c->ok)
    ck_assert_uint_eq(value, c->value);
}
END_TEST

typedef struct {
  const char *text;
  bool ok, value;
} bool_case_t;

static const bool_case_t bool_cases[] = {
  {"1", true, true},     {"true", true, true}, {"YES", true, true}, {"on", true, true},
  {"0", true, false},    {"false", true, false}, {"No", true, false}, {"off", true, false},
  {"", false, false},    {"2", false, false},  {"tru", false, false}, {"yes ", false, false},
};

START_TEST(parse_bool_table)
{
  const bool_case_t *c = &bool_cases[_i];
  bool value = !c->value;
  ck_assert_msg(ol_parse_bool(c->text, &value) == c->ok, "'%s'", c->text);
  if (c->ok)
    ck_assert(value == c->value);
}
END_TEST

static const size_case_t seconds_cases[] = { /* value in milliseconds */
  {"5", true, 5000},   {"0.5", true, 500},  {"2s", true, 2000},  {"250ms", true, 250},
  {"0.1", true, 100},  {"86400", true, 86400000},
  {"0", false, 0},     {"0.05", false, 0},  {"99ms", false, 0},  {"86401", false, 0},
  {"", false, 0},      {"-1", false, 0},    {"5 s", false, 0},   {"5m", false, 0},
  {"nan", false, 0},   {"inf", false, 0},   {"1e999", false, 0},
};

START_TEST(parse_seconds_table)
{
  const size_case_t *c = &seconds_cases[_i];
  uint64_t value = 12345;
  ck_assert_msg(ol_parse_seconds(c->text, &value) == c->ok, "'%s'", c->text);
  ck_assert_uint_eq(value, c->ok ? c->value : 12345);
}
END_TEST

START_TEST(defaults_parse)
{
  ck_assert(ol_options_defaults_valid());
}
END_TEST

START_TEST(env_overrides_default)
{
  setenv("OOMLENS_JSON", "off", 1);
  setenv("OOMLENS_REPORT", "/tmp/x-%p.txt", 1);
  ol_options_reload();
  ck_assert(!ol_option_bool(OL_OPT_JSON));
  ck_assert_str_eq(ol_option_text(OL_OPT_REPORT), "/tmp/x-%p.txt");
  unsetenv("OOMLENS_JSON");
  unsetenv("OOMLENS_REPORT");
  ol_options_reload();
  ck_assert(ol_option_bool(OL_OPT_JSON));
  ck_assert_str_eq(ol_option_text(OL_OPT_REPORT), "oomlens-%p.txt");
}
END_TEST

/* OOMLENS_CAPACITY takes what `oomlens run --capacity` takes. */
START_TEST(env_size_with_fraction)
{
  setenv("OOMLENS_CAPACITY", "1.5G", 1);
  ol_options_reload();
  ck_assert_uint_eq(ol_option_size(OL_OPT_CAPACITY), 3ull << 29);
  setenv("OOMLENS_CAPACITY", "1.5", 1); /* a fraction of a byte: warned, default kept */
  ol_options_reload();
  ck_assert_uint_eq(ol_option_size(OL_OPT_CAPACITY), 0);
  unsetenv("OOMLENS_CAPACITY");
  ol_options_reload();
}
END_TEST

/* A count of frames takes no unit: a size's grammar is not a count's. */
START_TEST(stack_depth_is_a_count)
{
  static const struct {
    const char *text;
    uint64_t value;
  } cases[] = {{"32", 32}, {"1", 1}, {"64", 64}, {"1.5K", 16}, {"16B", 16}, {"2K", 16},
               {"-1", 16}, {"", 16}, {"99999999999", 16},
               /* issue 15: out of range, no longer call sites turned off or 1000 kept */
               {"0", 16}, {"65", 16}, {"1000", 16}, {"3G", 16}, {"4G", 16}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    setenv("OOMLENS_STACK_DEPTH", cases[i].text, 1);
    ol_options_reload();
    ck_assert_msg(ol_option_size(OL_OPT_STACK_DEPTH) == cases[i].value, "'%s' gave %llu",
                  cases[i].text, (unsigned long long)ol_option_size(OL_OPT_STACK_DEPTH));
  }
  unsetenv("OOMLENS_STACK_DEPTH");
  ol_options_reload();
}
END_TEST

START_TEST(bad_value_keeps_default)
{
  setenv("OOMLENS_ENABLE", "maybe", 1);
  setenv("OOMLENS_REPORT", "", 1);
  ol_options_reload();
  ck_assert(ol_option_bool(OL_OPT_ENABLE));
  ck_assert_str_eq(ol_option_text(OL_OPT_REPORT), "oomlens-%p.txt");
  unsetenv("OOMLENS_ENABLE");
  unsetenv("OOMLENS_REPORT");
  ol_options_reload();
}
END_TEST

static int lines_in(const char *text)
{
  int n = 0;
  for (; *text; text++)
    n += *text == '\n';
  return n;
}

/* The options' warnings, as the job's stderr would show them, for one
 * load with name=value. */
static char *warnings_of(const char *name, const char *value)
{
  char dir[OL_TEST_DIR_MAX], path[OL_TEST_DIR_MAX + 16];
  ol_test_make_dir(dir, sizeof dir, "options");
  snprintf(path, sizeof path, "%s/stderr", dir);
  int saved = dup(STDERR_FILENO), fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ck_assert(saved >= 0 && fd >= 0);
  dup2(fd, STDERR_FILENO);
  close(fd);
  setenv(name, value, 1);
  ol_options_reload();
  unsetenv(name);
  dup2(saved, STDERR_FILENO);
  close(saved);
  char *text = ol_test_read_file(path, NULL);
  ck_assert(ol_test_remove_tree(dir));
  return text;
}

/* Before: OOMLENS_STACK_DEPTH=1000 was taken silently (the stacks capped
 * at 64, the report saying 1000), 0 turned call sites off without a word,
 * and a capacity of 100000T was kept. Out of range: one warning naming
 * the range, the default kept, value and text alike. */
START_TEST(out_of_range_warns_and_keeps_default)
{
  static const struct {
    const char *name, *value, *warning;
    ol_option_t opt;
    uint64_t kept;
  } cases[] = {
    {"OOMLENS_STACK_DEPTH", "1000", "OOMLENS_STACK_DEPTH=\"1000\" is out of range (1 to 64); "
     "using the default 16", OL_OPT_STACK_DEPTH, 16},
    {"OOMLENS_STACK_DEPTH", "0", "is out of range (1 to 64)", OL_OPT_STACK_DEPTH, 16},
    {"OOMLENS_STACK_DEPTH", "3G", "OOMLENS_STACK_DEPTH=\"3G\" is not valid; using the default 16",
     OL_OPT_STACK_DEPTH, 16},
    {"OOMLENS_CAPACITY", "100000T", "OOMLENS_CAPACITY=\"100000T\" is out of range (0 to "
     "72057594037927936)", OL_OPT_CAPACITY, 0},
    {"OOMLENS_MAX_SPLIT_SIZE", "65537T", "is out of range", OL_OPT_MAX_SPLIT_SIZE, 0},
    {"OOMLENS_STACK_SAMPLE", "65537T", "is out of range", OL_OPT_STACK_SAMPLE, 0},
    {"OOMLENS_BATCH", "1000001", "OOMLENS_BATCH=\"1000001\" is out of range (0 to 1000000)",
     OL_OPT_BATCH, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char *said = warnings_of(cases[i].name, cases[i].value);
    ck_assert_msg(strstr(said, cases[i].warning), "%s=%s said '%s'", cases[i].name,
                  cases[i].value, said);
    ck_assert_int_eq(lines_in(said), 1);
    free(said);
    setenv(cases[i].name, cases[i].value, 1);
    ol_options_reload();
    unsetenv(cases[i].name);
    ck_assert_uint_eq(ol_option_size(cases[i].opt), cases[i].kept);
    ck_assert_str_ne(ol_option_text(cases[i].opt), cases[i].value);
  }
  ol_options_reload();
}
END_TEST

static Suite *options_suite(void)
{
  Suite *s = suite_create("options");
  TCase *parsers = tcase_create("parsers");
  tcase_add_loop_test(parsers, parse_size_table, 0, sizeof size_cases / sizeof *size_cases);
  tcase_add_loop_test(parsers, parse_bool_table, 0, sizeof bool_cases / sizeof *bool_cases);
  tcase_add_loop_test(parsers, parse_seconds_table, 0, sizeof seconds_cases / sizeof *seconds_cases);
  suite_add_tcase(s, parsers);
  TCase *table = tcase_create("table");
  tcase_add_test(table, defaults_parse);
  tcase_add_test(table, env_overrides_default);
  tcase_add_test(table, env_size_with_fraction);
  tcase_add_test(table, stack_depth_is_a_count);
  tcase_add_test(table, out_of_range_warns_and_keeps_default);
  tcase_add_test(table, bad_value_keeps_default);
  suite_add_tcase(s, table);
  return s;
}

int main(void)
{
  return ol_run_suite(options_suite());
}
