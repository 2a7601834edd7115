/* test_report_file.c: report paths (%p, %r, %%) and the report's text and
 * JSON written as one output: whole or nothing, mode 0600, a refused half
 * (a link, a FIFO, a folder) refusing both. */
#include <check.h>

#include "check_run.h"
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core.h"

static char dir[PATH_MAX];

static void make_dir(void)
{
  ol_test_make_dir(dir, sizeof dir, "report-file");
}

static void remove_dir(void)
{
  ol_test_remove_tree(dir);
}

static int count_entries(void)
{
  int n = 0;
  DIR *d = opendir(dir);
  struct dirent *e;
  while (d && (e = readdir(d)))
    n += e->d_name[0] != '.';
  if (d)
    closedir(d);
  return n;
}

static char *slurp(const char *path)
{
  static char text[4096];
  FILE *f = fopen(path, "r");
  if (!f)
    return NULL;
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = '\0';
  return text;
}

typedef struct {
  const char *pattern, *rank, *expected;
} path_case_t;

static const path_case_t path_cases[] = {
  {"oomlens-%p.txt", "0", "oomlens-4242.txt"},
  {"r%r-p%p", "3", "r3-p4242"},
  {"100%%", "0", "100%"},
  {"a%xb", "0", "a%xb"},
  {"trailing%", "0", "trailing%"},
  {"%p%p", "0", "42424242"},
  {"", "0", ""},
};

START_TEST(expand_table)
{
  const path_case_t *c = &path_cases[_i];
  char out[256];
  ck_assert_int_eq(ol_expand_path(c->pattern, 4242, c->rank, out, sizeof out), 0);
  ck_assert_str_eq(out, c->expected);
}
END_TEST

START_TEST(expand_too_long)
{
  char out[8];
  ck_assert_int_eq(ol_expand_path("abcdefgh", 1, "0", out, sizeof out), -1);
  ck_assert_int_eq(ol_expand_path("abc%p", 123456, "0", out, sizeof out), -1);
  ck_assert_int_eq(ol_expand_path("abc%p", 1234, "0", out, sizeof out), 0);
  ck_assert_str_eq(out, "abc1234");
}
END_TEST

/* The one rule for every file a process writes (report, trace, metrics):
 * a forked child never takes its parent's name. */
START_TEST(forked_child_gets_its_own_name)
{
  char out[64];
  ck_assert_int_eq(ol_output_path("r.txt", 77, "0", false, NULL, out, sizeof out), 0);
  ck_assert_str_eq(out, "r.txt");
  ck_assert_int_eq(ol_output_path("r.txt", 77, "0", true, NULL, out, sizeof out), 0);
  ck_assert_str_eq(out, "r.txt.77");
  ck_assert_int_eq(ol_output_path("m-%r.prom", 77, "3", true, ".prom", out, sizeof out), 0);
  ck_assert_str_eq(out, "m-3.77.prom");
  ck_assert_int_eq(ol_output_path("m.txt", 77, "0", true, ".prom", out, sizeof out), 0);
  ck_assert_str_eq(out, "m.txt.77");
  ck_assert_int_eq(ol_output_path("r-%p.txt", 77, "0", true, NULL, out, sizeof out), 0);
  ck_assert_str_eq(out, "r-77.txt"); /* %p already tells them apart */
  char small[8];
  ck_assert_int_eq(ol_output_path("abcde", 77, "0", false, NULL, small, sizeof small), 0);
  ck_assert_int_eq(ol_output_path("abcde", 77, "0", true, NULL, small, sizeof small), -1);
}
END_TEST

START_TEST(json_beside_text)
{
  char out[64];
  ck_assert_int_eq(ol_json_path_for("a/report.txt", out, sizeof out), 0);
  ck_assert_str_eq(out, "a/report.json");
  ck_assert_int_eq(ol_json_path_for("report", out, sizeof out), 0);
  ck_assert_str_eq(out, "report.json");
  ck_assert_int_eq(ol_json_path_for(".txt", out, sizeof out), 0);
  ck_assert_str_eq(out, ".json");
}
END_TEST

START_TEST(rank_from_environment)
{
  unsetenv("RANK");
  unsetenv("LOCAL_RANK");
  ck_assert_str_eq(ol_rank_text(), "0");
  setenv("LOCAL_RANK", "5", 1);
  ck_assert_str_eq(ol_rank_text(), "5");
  setenv("RANK", "12", 1);
  ck_assert_str_eq(ol_rank_text(), "12");
  setenv("RANK", "../../etc", 1); /* unsafe: falls back to LOCAL_RANK */
  ck_assert_str_eq(ol_rank_text(), "5");
  unsetenv("RANK");
  unsetenv("LOCAL_RANK");
}
END_TEST

/* Writes "text" and "json" as a report pair at dir/name. */
static bool write_pair(const char *name, bool with_json, ol_error_t *err)
{
  char path[PATH_MAX + 16];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  ol_buf_t text = {0}, json = {0};
  ol_buf_printf(&text, "text\n");
  ol_buf_printf(&json, "{}\n");
  bool ok = ol_report_files_write(path, &text, with_json ? &json : NULL, err);
  ol_buf_free(&text);
  ol_buf_free(&json);
  return ok;
}

START_TEST(pair_whole_and_private)
{
  ol_error_t err;
  ck_assert_msg(write_pair("report.txt", true, &err), "%s", err.text);
  ck_assert_msg(write_pair("report.txt", true, &err), "%s", err.text);
  char path[PATH_MAX + 16];
  snprintf(path, sizeof path, "%s/report.txt", dir);
  ck_assert_str_eq(slurp(path), "text\n");
  struct stat st;
  ck_assert_int_eq(stat(path, &st), 0);
  ck_assert_int_eq(st.st_mode & 0077, 0); /* 0600 less the umask */
  snprintf(path, sizeof path, "%s/report.json", dir);
  ck_assert_str_eq(slurp(path), "{}\n");
  ck_assert_int_eq(count_entries(), 2); /* no temporary file left behind */
}
END_TEST

/* Before: the link was replaced by the report (and the JSON written
 * beside it); now refused, link and target as they were, no JSON. */
START_TEST(planted_link_refused)
{
  char victim[PATH_MAX + 16], path[PATH_MAX + 16];
  snprintf(victim, sizeof victim, "%s/victim", dir);
  snprintf(path, sizeof path, "%s/report.txt", dir);
  FILE *f = fopen(victim, "w");
  fputs("precious\n", f);
  fclose(f);
  ck_assert_int_eq(symlink(victim, path), 0);
  ol_error_t err;
  ck_assert(!write_pair("report.txt", true, &err));
  ck_assert_msg(strstr(err.text, "report.txt: is a symbolic link"), "%s", err.text);
  ck_assert_str_eq(slurp(victim), "precious\n");
  struct stat st;
  ck_assert_int_eq(lstat(path, &st), 0);
  ck_assert(S_ISLNK(st.st_mode));
  ck_assert_int_eq(count_entries(), 2);
}
END_TEST

/* One refused file refuses the pair: a FIFO as the text leaves no JSON
 * (before: x.json was written beside a refused x), a FIFO as the JSON
 * leaves no text. */
START_TEST(refused_half_refuses_the_pair)
{
  char path[PATH_MAX + 16];
  snprintf(path, sizeof path, "%s/a.txt", dir);
  ck_assert_int_eq(mkfifo(path, 0600), 0);
  ol_error_t err;
  ck_assert(!write_pair("a.txt", true, &err));
  ck_assert_int_eq(err.status, OL_EXIT_USAGE);
  snprintf(path, sizeof path, "%s/b.json", dir);
  ck_assert_int_eq(mkfifo(path, 0600), 0);
  ck_assert(!write_pair("b.txt", true, &err));
  ck_assert_msg(strstr(err.text, "b.json: is a FIFO"), "%s", err.text);
  ck_assert_int_eq(count_entries(), 2); /* the two FIFOs alone */
  ck_assert_msg(write_pair("b.txt", false, &err), "%s", err.text); /* no JSON asked */
  ck_assert_int_eq(count_entries(), 3);
}
END_TEST

/* "dir/" and a folder: before, dir/.json and dir.json were written. */
START_TEST(folder_refused_no_json_beside)
{
  char sub[PATH_MAX + 16];
  snprintf(sub, sizeof sub, "%s/sub", dir);
  ck_assert_int_eq(mkdir(sub, 0700), 0);
  ol_error_t err;
  ck_assert(!write_pair("sub", true, &err));
  ck_assert(!write_pair("sub/", true, &err));
  ck_assert_msg(strstr(err.text, "sub/: ends with '/'"), "%s", err.text);
  ck_assert_int_eq(count_entries(), 1);
  ck_assert_int_eq(rmdir(sub), 0); /* still empty */
}
END_TEST

START_TEST(missing_directory_fails_cleanly)
{
  ol_error_t err;
  ck_assert(!write_pair("no/such/dir/report.txt", true, &err));
  ck_assert_int_eq(err.status, OL_EXIT_FAILURE);
  ck_assert_int_eq(count_entries(), 0);
}
END_TEST

START_TEST(read_only_directory_refused)
{
  chmod(dir, 0500);
  ol_error_t err;
  bool ok = write_pair("report.txt", true, &err);
  chmod(dir, 0700);
  if (geteuid() != 0) /* root may write anyway */
    ck_assert(!ok);
  ck_assert_int_eq(count_entries(), ok ? 2 : 0);
}
END_TEST

static Suite *report_file_suite(void)
{
  Suite *s = suite_create("report_file");
  TCase *paths = tcase_create("paths");
  tcase_add_loop_test(paths, expand_table, 0, sizeof path_cases / sizeof *path_cases);
  tcase_add_test(paths, expand_too_long);
  tcase_add_test(paths, json_beside_text);
  tcase_add_test(paths, forked_child_gets_its_own_name);
  tcase_add_test(paths, rank_from_environment);
  suite_add_tcase(s, paths);
  TCase *writer = tcase_create("writer");
  tcase_add_checked_fixture(writer, make_dir, remove_dir);
  tcase_add_test(writer, pair_whole_and_private);
  tcase_add_test(writer, planted_link_refused);
  tcase_add_test(writer, refused_half_refuses_the_pair);
  tcase_add_test(writer, folder_refused_no_json_beside);
  tcase_add_test(writer, missing_directory_fails_cleanly);
  tcase_add_test(writer, read_only_directory_refused);
  suite_add_tcase(s, writer);
  return s;
}

int main(void)
{
  return ol_run_suite(report_file_suite());
}
