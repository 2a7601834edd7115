/* test_outputs.c: no file oomlens writes destroys anything of the user's
 * (issue 15, "Data loss"), end to end: a job under the library with its
 * report, metrics and trace aimed at a FIFO, a link or a folder, and the
 * command line's outputs (export -o, report --html) aimed at a file that
 * exists, at their own input, at a link or a FIFO, and on a full disk.
 * Every refused output leaves what was there as it was and writes nothing
 * else (no x.json beside a refused x); nothing waits on a FIFO (the jobs
 * and commands run under timeout(1), so a regression fails instead of
 * hanging). Tests are not root: a FIFO, a socket or a link of the scratch
 * folder stands for /dev/null. */
#include <check.h>

#include "check_run.h"
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

/* Seconds a job or command may take before it counts as hung; KILL, since
 * a job waiting inside our library would have caught timeout's SIGTERM. */
#define TIMEOUT "20"

static const char *in_dir(char *out, size_t cap, const char *name)
{
  snprintf(out, cap, "%s/%s", harness_dir(), name);
  return out;
}

static void assert_kind(const char *path, mode_t kind)
{
  struct stat st;
  ck_assert_msg(lstat(path, &st) == 0, "%s is gone", path);
  ck_assert_msg((st.st_mode & S_IFMT) == kind, "%s changed kind: mode %o", path,
                (unsigned)st.st_mode);
}

/* Entries of the scratch folder (a refused output adds none). */
static int entries(void)
{
  int n = 0;
  DIR *d = opendir(harness_dir());
  ck_assert_ptr_nonnull(d);
  for (struct dirent *e; (e = readdir(d));)
    n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
  closedir(d);
  return n;
}

/* cuda_prog's runtime scenario under the library, env on top, under a
 * timeout; it must end as it would without us. */
static void job(harness_run_t *run, const char *const env[])
{
  const char *argv[] = {"timeout", "-s", "KILL", TIMEOUT, harness_env("OOMLENS_TEST_PROG"),
                        "runtime", NULL};
  harness_exec(run, true, env, argv);
  ck_assert_msg(run->status == 0, "exit %d:\n%s", run->status, run->out);
}

static void cli(harness_run_t *run, const char *const args[])
{
  const char *argv[20] = {"timeout", "-s", "KILL", TIMEOUT, harness_env("OOMLENS_TEST_CLI")};
  for (int i = 0; args[i]; i++)
    argv[i + 5] = args[i];
  harness_exec(run, false, NULL, argv);
}

static void assert_said(const harness_run_t *run, const char *what)
{
  ck_assert_msg(strstr(run->out, what), "wanted \"%s\" in:\n%s", what, run->out);
}

/* ---- the library's outputs --------------------------------------------- */

/* Before: rename() replaced the FIFO by a regular file holding the report
 * (as it did /dev/null as root), and wrote fifo.json beside it. */
START_TEST(report_at_a_fifo_is_refused)
{
  char fifo[PATH_MAX], env_report[PATH_MAX + 32], said[PATH_MAX + 64];
  ck_assert_int_eq(mkfifo(in_dir(fifo, sizeof fifo, "fifo"), 0600), 0);
  snprintf(env_report, sizeof env_report, "OOMLENS_REPORT=%s", fifo);
  harness_run_t run;
  job(&run, (const char *[]){env_report, NULL});
  assert_kind(fifo, S_IFIFO);
  ck_assert_int_eq(entries(), 1); /* no fifo.json */
  snprintf(said, sizeof said, "oomlens: warning: cannot write the report: %s: is a FIFO", fifo);
  assert_said(&run, said);
}
END_TEST

/* Before: the link was replaced by the report, and r.json written. */
START_TEST(report_at_a_link_is_refused)
{
  char victim[PATH_MAX], link_path[PATH_MAX], env_report[PATH_MAX + 32];
  ol_test_write_file(in_dir(victim, sizeof victim, "victim"), "precious\n");
  ck_assert_int_eq(symlink(victim, in_dir(link_path, sizeof link_path, "r.txt")), 0);
  snprintf(env_report, sizeof env_report, "OOMLENS_REPORT=%s", link_path);
  harness_run_t run;
  job(&run, (const char *[]){env_report, NULL});
  assert_kind(link_path, S_IFLNK);
  ol_test_assert_file_text(victim, "precious\n");
  ck_assert_int_eq(entries(), 2); /* no r.json */
  assert_said(&run, "r.txt: is a symbolic link; refused");
}
END_TEST

/* Before: "dir" warned for the text and wrote dir.json; "dir/" wrote
 * dir/.json. */
START_TEST(report_at_a_folder_is_refused)
{
  char sub[PATH_MAX], env_report[PATH_MAX + 32];
  ck_assert_int_eq(mkdir(in_dir(sub, sizeof sub, "sub"), 0700), 0);
  for (int i = 0; i < 2; i++) {
    snprintf(env_report, sizeof env_report, "OOMLENS_REPORT=%s", sub);
    if (i == 1)
      strcat(env_report, "/");
    harness_run_t run;
    job(&run, (const char *[]){env_report, NULL});
    ck_assert_int_eq(entries(), 1); /* no sub.json */
    ck_assert_int_eq(rmdir(sub), 0); /* still empty: no sub/.json */
    ck_assert_int_eq(mkdir(sub, 0700), 0);
    assert_said(&run, i == 0 ? "sub: is a folder, not a file; refused"
                             : "sub/: ends with '/': names a folder");
  }
}
END_TEST

/* Before: the FIFO (or /dev/full) was replaced by a regular file. */
START_TEST(metrics_at_a_fifo_is_refused)
{
  char fifo[PATH_MAX], env_metrics[PATH_MAX + 32];
  ck_assert_int_eq(mkfifo(in_dir(fifo, sizeof fifo, "m.prom"), 0600), 0);
  snprintf(env_metrics, sizeof env_metrics, "OOMLENS_METRICS=%s", fifo);
  harness_run_t run;
  job(&run, (const char *[]){env_metrics, NULL});
  assert_kind(fifo, S_IFIFO);
  ck_assert_int_eq(harness_count_files(".txt"), 1); /* the report is written all the same */
  assert_said(&run, "cannot write the metrics file: ");
  assert_said(&run, "m.prom: is a FIFO, not a regular file; refused");
}
END_TEST

/* Before: open() waited for a reader at the job's first cudaMalloc, for
 * ever (here: until timeout's 20 s, exit 124). */
START_TEST(trace_at_a_fifo_without_reader_never_waits)
{
  char fifo[PATH_MAX], env_trace[PATH_MAX + 32];
  ck_assert_int_eq(mkfifo(in_dir(fifo, sizeof fifo, "t.fifo"), 0600), 0);
  snprintf(env_trace, sizeof env_trace, "OOMLENS_TRACE=%s", fifo);
  harness_run_t run;
  job(&run, (const char *[]){env_trace, NULL});
  assert_said(&run, "t.fifo: is a FIFO no one reads; refused");
  assert_kind(fifo, S_IFIFO);
}
END_TEST

/* A trace aimed at a link: the link's target is never written. */
START_TEST(trace_at_a_link_is_refused)
{
  char victim[PATH_MAX], link_path[PATH_MAX], env_trace[PATH_MAX + 32];
  ol_test_write_file(in_dir(victim, sizeof victim, "victim"), "precious\n");
  ck_assert_int_eq(symlink(victim, in_dir(link_path, sizeof link_path, "t.trace")), 0);
  snprintf(env_trace, sizeof env_trace, "OOMLENS_TRACE=%s", link_path);
  harness_run_t run;
  job(&run, (const char *[]){env_trace, NULL});
  assert_kind(link_path, S_IFLNK);
  ol_test_assert_file_text(victim, "precious\n");
  assert_said(&run, "t.trace: is a symbolic link; refused");
}
END_TEST

/* ---- the command line's outputs ---------------------------------------- */

static const char small_trace[] =
  "# oomlens-trace 1 pid=77 rank=0 start_unix_us=1700000000000000 stacks=1\n"
  "# time_us,action,addr,size,stream,site,device\n"
  "device,0,1073741824\n"
  "site,0,0,model.py:10:weights;train.py:5:main\n"
  "10,alloc,0x1000000,1048576,0,0,0\n"
  "20,alloc,0x1100000,2097152,0,0,0\n"
  "# end events=2\n";

/* A trace that opens, then fails at its fourth line (site 9 undefined):
 * the export has begun when it fails. */
static const char bad_later_trace[] =
  "# oomlens-trace 1 pid=77 rank=0 start_unix_us=1700000000000000 stacks=1\n"
  "# time_us,action,addr,size,stream,site,device\n"
  "device,0,1073741824\n"
  "10,alloc,0x1000000,1048576,0,9,0\n";

/* Before: a failed export unlink()ed OUT, whatever OUT had been. */
START_TEST(export_failure_keeps_the_old_output)
{
  char trace[PATH_MAX], out[PATH_MAX];
  ol_test_write_file(in_dir(trace, sizeof trace, "bad.trace"), bad_later_trace);
  ol_test_write_file(in_dir(out, sizeof out, "out.folded"), "precious\n");
  const char *formats[] = {"folded", "memory-viz", "perfetto", "rmm-csv"};
  for (size_t i = 0; i < sizeof formats / sizeof *formats; i++) {
    harness_run_t run;
    cli(&run, (const char *[]){"export", trace, "--format", formats[i], "-o", out, NULL});
    ck_assert_msg(run.status == 2, "%s: exit %d:\n%s", formats[i], run.status, run.out);
    assert_said(&run, "bad.trace:4: site '9' of device 0 is not defined");
  }
  ol_test_assert_file_text(out, "precious\n");
  ck_assert_int_eq(entries(), 2); /* no temporary file left */
}
END_TEST

/* Before: `export same.trace -o same.trace` emptied the trace, then said
 * "empty file, not a trace". A hard link to it is the same file. */
START_TEST(export_onto_its_input_is_refused)
{
  char trace[PATH_MAX], hard[PATH_MAX], said[PATH_MAX + 64];
  ol_test_write_file(in_dir(trace, sizeof trace, "same.trace"), small_trace);
  ck_assert_int_eq(link(trace, in_dir(hard, sizeof hard, "hard.trace")), 0);
  const char *outs[] = {trace, hard};
  for (int i = 0; i < 2; i++) {
    harness_run_t run;
    cli(&run, (const char *[]){"export", trace, "--format", "folded", "-o", outs[i], NULL});
    ol_test_assert_file_text(trace, small_trace);
    ck_assert_msg(run.status == 2, "exit %d:\n%s", run.status, run.out);
    snprintf(said, sizeof said, "oomlens export: %s: is this command's input", outs[i]);
    assert_said(&run, said);
  }
  ol_test_assert_file_text(trace, small_trace);
  ck_assert_int_eq(entries(), 2);
}
END_TEST

/* Before: fopen("wb") truncated a link's target, waited on a FIFO for a
 * reader, and a failed export then unlink()ed the link. */
START_TEST(export_onto_a_link_fifo_or_folder_is_refused)
{
  char trace[PATH_MAX], victim[PATH_MAX], link_path[PATH_MAX], fifo[PATH_MAX], sub[PATH_MAX];
  ol_test_write_file(in_dir(trace, sizeof trace, "t.trace"), small_trace);
  ol_test_write_file(in_dir(victim, sizeof victim, "victim"), "precious\n");
  ck_assert_int_eq(symlink(victim, in_dir(link_path, sizeof link_path, "out")), 0);
  ck_assert_int_eq(mkfifo(in_dir(fifo, sizeof fifo, "fifo"), 0600), 0);
  ck_assert_int_eq(mkdir(in_dir(sub, sizeof sub, "sub"), 0700), 0);
  const char *outs[] = {link_path, fifo, sub};
  const char *why[] = {"is a symbolic link", "is a FIFO", "is a folder"};
  for (int i = 0; i < 3; i++) {
    harness_run_t run;
    cli(&run, (const char *[]){"export", trace, "--format", "perfetto", "-o", outs[i], NULL});
    assert_kind(link_path, S_IFLNK);
    ol_test_assert_file_text(victim, "precious\n");
    assert_kind(fifo, S_IFIFO);
    ck_assert_msg(run.status == 2, "exit %d:\n%s", run.status, run.out);
    assert_said(&run, why[i]);
  }
  ck_assert_int_eq(entries(), 5);
  ck_assert_int_eq(rmdir(sub), 0);
}
END_TEST

static const char *report_fixture(void)
{
  static char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/reports/rank1.json", harness_env("OOMLENS_TEST_DATA"));
  return path;
}

/* Before: `report x --html x` wrote the page over the report, exit 0. */
START_TEST(html_onto_its_input_is_refused)
{
  char copy[PATH_MAX];
  char *original = ol_test_read_file(report_fixture(), NULL);
  ol_test_write_file(in_dir(copy, sizeof copy, "x.json"), original);
  harness_run_t run;
  cli(&run, (const char *[]){"report", copy, "--html", copy, NULL});
  ol_test_assert_file_text(copy, original);
  ck_assert_msg(run.status == 2, "exit %d:\n%s", run.status, run.out);
  assert_said(&run, "x.json: is this command's input");
  free(original);
  ck_assert_int_eq(entries(), 1);
}
END_TEST

/* Before: the page went through the link, over its target. */
START_TEST(html_onto_a_link_is_refused)
{
  char victim[PATH_MAX], link_path[PATH_MAX];
  ol_test_write_file(in_dir(victim, sizeof victim, "victim"), "precious\n");
  ck_assert_int_eq(symlink(victim, in_dir(link_path, sizeof link_path, "page.html")), 0);
  harness_run_t run;
  cli(&run, (const char *[]){"report", report_fixture(), "--html", link_path, NULL});
  assert_kind(link_path, S_IFLNK);
  ol_test_assert_file_text(victim, "precious\n");
  ck_assert_msg(run.status == 2, "exit %d:\n%s", run.status, run.out);
  assert_said(&run, "page.html: is a symbolic link; refused");
}
END_TEST

/* A full disk (ulimit -f, SIGXFSZ ignored: EFBIG as ENOSPC would be).
 * Before: exit 1 with a partial page over the old one. */
START_TEST(html_on_a_full_disk_leaves_the_old_page)
{
  char page[PATH_MAX], script[3 * PATH_MAX];
  ol_test_write_file(in_dir(page, sizeof page, "page.html"), "old page\n");
  snprintf(script, sizeof script, "ulimit -f 8; trap '' XFSZ; exec '%s' report '%s' --html '%s'",
           harness_env("OOMLENS_TEST_CLI"), report_fixture(), page);
  const char *argv[] = {"/bin/sh", "-c", script, NULL};
  harness_run_t run;
  harness_exec(&run, false, NULL, argv);
  ck_assert_msg(run.status == 1, "exit %d:\n%s", run.status, run.out);
  ol_test_assert_file_text(page, "old page\n");
  ck_assert_int_eq(entries(), 1); /* no temporary file left */
  assert_said(&run, "page.html: cannot write: File too large");
}
END_TEST

/* A new page gets a new file's usual mode, an old page keeps its own. */
START_TEST(html_mode_from_umask_or_the_old_page)
{
  char page[PATH_MAX];
  in_dir(page, sizeof page, "page.html");
  harness_run_t run;
  cli(&run, (const char *[]){"report", report_fixture(), "--html", page, NULL});
  ck_assert_msg(run.status == 0, "exit %d:\n%s", run.status, run.out);
  mode_t mask = umask(022);
  umask(mask);
  struct stat st;
  ck_assert_int_eq(stat(page, &st), 0);
  ck_assert_int_eq(st.st_mode & 0777, 0666 & ~mask);
  ck_assert_int_eq(chmod(page, 0600), 0);
  cli(&run, (const char *[]){"report", report_fixture(), "--html", page, NULL});
  ck_assert_msg(run.status == 0, "exit %d:\n%s", run.status, run.out);
  ck_assert_int_eq(stat(page, &st), 0);
  ck_assert_int_eq(st.st_mode & 0777, 0600);
}
END_TEST

static Suite *outputs_suite(void)
{
  Suite *s = suite_create("outputs");
  TCase *lib = tcase_create("library");
  tcase_add_checked_fixture(lib, harness_setup, harness_teardown);
  tcase_set_timeout(lib, 120);
  tcase_add_test(lib, report_at_a_fifo_is_refused);
  tcase_add_test(lib, report_at_a_link_is_refused);
  tcase_add_test(lib, report_at_a_folder_is_refused);
  tcase_add_test(lib, metrics_at_a_fifo_is_refused);
  tcase_add_test(lib, trace_at_a_fifo_without_reader_never_waits);
  tcase_add_test(lib, trace_at_a_link_is_refused);
  suite_add_tcase(s, lib);
  TCase *cmd = tcase_create("command");
  tcase_add_checked_fixture(cmd, harness_setup, harness_teardown);
  tcase_set_timeout(cmd, 120);
  tcase_add_test(cmd, export_failure_keeps_the_old_output);
  tcase_add_test(cmd, export_onto_its_input_is_refused);
  tcase_add_test(cmd, export_onto_a_link_fifo_or_folder_is_refused);
  tcase_add_test(cmd, html_onto_its_input_is_refused);
  tcase_add_test(cmd, html_onto_a_link_is_refused);
  tcase_add_test(cmd, html_on_a_full_disk_leaves_the_old_page);
  tcase_add_test(cmd, html_mode_from_umask_or_the_old_page);
  suite_add_tcase(s, cmd);
  return s;
}

int main(void)
{
  return ol_run_suite(outputs_suite());
}
