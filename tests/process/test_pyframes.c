/* test_pyframes.c: call sites named by their Python lines.
 *
 * Runs tests/progs/py_sites.py under liboomlens.so with each CPython 3.10-
 * 3.13 found on this machine (tests/find_pythons.sh, at configure time):
 * the report's sites must name the script's tagged lines with the bytes
 * each held. Also: no CPython, Python frames turned off, an unsupported
 * CPython, and byte-weighted sampling (whose sites still sum to the peak). */
#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "harness.h"

#define MiB (1ll << 20)
#define DEV "devices[0]."
#define MAX_PYTHONS 8

static char pythons[MAX_PYTHONS][PATH_MAX];
static int python_count;

static void find_pythons(void)
{
  const char *list = getenv("OOMLENS_TEST_PYTHONS");
  while (list && *list && python_count < MAX_PYTHONS) {
    size_t n = strcspn(list, ":");
    snprintf(pythons[python_count++], PATH_MAX, "%.*s", (int)n, list);
    list += n + (list[n] == ':');
  }
}

/* The line of py_sites.py tagged "# site: TAG". */
static int tagged_line(const char *tag)
{
  char want[64], text[512];
  snprintf(want, sizeof want, "# site: %s\n", tag);
  FILE *f = fopen(harness_env("OOMLENS_TEST_PYSCRIPT"), "r");
  ck_assert_ptr_nonnull(f);
  int line = 0, found = 0;
  while (!found && fgets(text, sizeof text, f)) {
    line++;
    const char *at = strstr(text, want);
    found = at && strlen(at) == strlen(want) ? line : 0;
  }
  fclose(f);
  ck_assert_msg(found, "no line tagged %s", tag);
  return found;
}

static ol_json_t *run_python(const char *python, const char *mode, const char *const env[],
                             harness_run_t *run)
{
  const char *argv[] = {python, harness_env("OOMLENS_TEST_PYSCRIPT"),
                        harness_env("OOMLENS_TEST_RUNTIME"), mode, NULL};
  harness_exec(run, true, env, argv);
  ck_assert_msg(run->status == 0, "%s %s exited %d:\n%s", python, mode, run->status, run->out);
  ol_json_t *report = harness_report(run->pid);
  ck_assert_msg(report, "no report from %s:\n%s", python, run->out);
  return report;
}

static const char *text_at(const ol_json_t *r, const char *path)
{
  const char *s = ol_json_string(ol_json_path(r, path));
  ck_assert_msg(s, "no %s in the report", path);
  return s;
}

/* Whether one of the site's frames (path ends in "frames") says want. */
static bool has_frame(const ol_json_t *r, const char *frames, const char *want)
{
  const ol_json_t *list = ol_json_path(r, frames);
  for (size_t i = 0; i < ol_json_length(list); i++)
    if (strstr(ol_json_string(ol_json_at(list, i)), want))
      return true;
  return false;
}

static void frame_line(char *out, size_t cap, const char *tag, const char *function)
{
  snprintf(out, cap, "py_sites.py:%d:%s", tagged_line(tag), function);
}

/* The whole text report of a run. */
static char *text_report(pid_t pid)
{
  char path[PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/r-%ld.txt", harness_dir(), (long)pid);
  FILE *f = fopen(path, "r");
  ck_assert_ptr_nonnull(f);
  static char text[1 << 16];
  size_t n = fread(text, 1, sizeof text - 1, f);
  text[n] = '\0';
  fclose(f);
  return text;
}

START_TEST(python_lines_at_the_peak)
{
  const char *env[] = {"OOMLENS_STACKS=1", NULL};
  const char *python = pythons[_i];
  harness_run_t run;
  ol_json_t *r = run_python(python, "two_sites", env, &run);
  ck_assert_str_eq(text_at(r, "stacks.python.state"), "ok");
  ck_assert_int_eq(harness_int(r, "stacks.python.without_frames"), 0);
  ck_assert_int_eq(harness_int(r, "stacks.python.with_frames"), 5);
  /* The capture clocked itself: some time, within the span since the
   * first charge; observe mode has no pool to clock. */
  double spent = ol_json_number(ol_json_path(r, "own_time.call_sites_s"));
  double span = ol_json_number(ol_json_path(r, "own_time.span_s"));
  ck_assert_msg(spent > 0 && spent <= span, "capture %f s in %f s", spent, span);
  ck_assert(ol_json_number(ol_json_path(r, "own_time.manage_pool_s")) == 0);
  char alloc_line[128], weights_line[128], forward_line[128];
  frame_line(alloc_line, sizeof alloc_line, "device_alloc", "device_alloc");
  snprintf(weights_line, sizeof weights_line, "py_sites.py:%d:", tagged_line("weights"));
  snprintf(forward_line, sizeof forward_line, "py_sites.py:%d:", tagged_line("forward"));
  /* Weights (3 x 32 MiB) and activations (2 x 8 MiB), Python frames
   * innermost first, before the native ones. */
  ck_assert_uint_eq(ol_json_length(ol_json_path(r, DEV "sites.at_peak")), 2);
  ck_assert_int_eq(harness_int(r, DEV "sites.at_peak[0].bytes"), 96 * MiB);
  ck_assert_int_eq(harness_int(r, DEV "sites.at_peak[0].allocations"), 3);
  ck_assert_str_eq(text_at(r, DEV "sites.at_peak[0].frames[0]"), alloc_line);
  ck_assert_msg(has_frame(r, DEV "sites.at_peak[0].frames", weights_line), "%s: no %s", python,
                weights_line);
  ck_assert_int_eq(harness_int(r, DEV "sites.at_peak[1].bytes"), 16 * MiB);
  ck_assert_int_eq(harness_int(r, DEV "sites.at_peak[1].allocations"), 2);
  ck_assert_str_eq(text_at(r, DEV "sites.at_peak[1].frames[0]"), alloc_line);
  ck_assert(has_frame(r, DEV "sites.at_peak[1].frames", forward_line));
  ck_assert(!has_frame(r, DEV "sites.at_peak[1].frames", weights_line));
  ck_assert_int_eq(harness_int(r, DEV "sites.by_total[0].bytes"), 96 * MiB);
  /* The text report names the same lines, and says where frames came from. */
  char *text = text_report(run.pid);
  ck_assert_ptr_nonnull(strstr(text, "Python frames: CPython 3."));
  ck_assert_ptr_nonnull(strstr(text, alloc_line));
  ck_assert_ptr_nonnull(strstr(text, weights_line));
  ol_json_free(r);
}
END_TEST

/* The trace file names a site once, with its Python lines first (the text
 * made on the capturing thread travels with the key to the writer). */
START_TEST(python_lines_in_the_trace_file)
{
  char trace[PATH_MAX + 32], env_trace[PATH_MAX + 64];
  snprintf(trace, sizeof trace, "%s/py.trace", harness_dir());
  snprintf(env_trace, sizeof env_trace, "OOMLENS_TRACE=%s", trace);
  const char *env[] = {"OOMLENS_STACKS=1", env_trace, NULL};
  harness_run_t run;
  ol_json_free(run_python(pythons[0], "two_sites", env, &run));
  char weights_line[128], text[4096];
  snprintf(weights_line, sizeof weights_line, "py_sites.py:%d:", tagged_line("weights"));
  FILE *f = fopen(trace, "r");
  ck_assert_ptr_nonnull(f);
  int sites = 0, weights = 0;
  while (fgets(text, sizeof text, f))
    if (strncmp(text, "site,", 5) == 0) {
      sites++;
      ck_assert_msg(strstr(text, ",py_sites.py:"), "site without Python frames first: %s", text);
      weights += strstr(text, weights_line) != NULL;
    }
  fclose(f);
  ck_assert_int_eq(sites, 2);
  ck_assert_int_eq(weights, 1);
}
END_TEST

/* Four Python threads and the main thread allocate at once: every stack
 * has its thread's frames; one site per line, exact counts. */
START_TEST(python_threads_each_their_own_frames)
{
  const char *env[] = {"OOMLENS_STACKS=1", NULL};
  harness_run_t run;
  ol_json_t *r = run_python(pythons[_i], "threads", env, &run);
  ck_assert_int_eq(harness_int(r, "stacks.python.with_frames"), 801);
  ck_assert_int_eq(harness_int(r, "stacks.python.without_frames"), 0);
  char worker[128], held[128];
  snprintf(worker, sizeof worker, "py_sites.py:%d:worker", tagged_line("worker"));
  snprintf(held, sizeof held, "py_sites.py:%d:threads", tagged_line("main_held"));
  ck_assert_int_eq(harness_int(r, DEV "sites.by_total[0].bytes"), 800 * MiB);
  ck_assert_int_eq(harness_int(r, DEV "sites.by_total[0].allocations"), 800);
  ck_assert(has_frame(r, DEV "sites.by_total[0].frames", worker));
  ck_assert_int_eq(harness_int(r, DEV "sites.by_total[1].bytes"), 4 * MiB);
  ck_assert(has_frame(r, DEV "sites.by_total[1].frames", held));
  ck_assert_ptr_null(ol_json_path(r, DEV "sites.by_total[2]"));
  ol_json_free(r);
}
END_TEST

/* A library's op 62 library frames above the job's own line, as PyTorch's
 * ops under a transformers forward with checkpointing: the site is the
 * three innermost frames and the job's line past all of them, under manage
 * mode's capture (Python frames only, every allocation at this sample),
 * the same for the allocations after the first, which the per-thread
 * tables answer. */
START_TEST(python_own_line_below_a_deep_library_stack)
{
  const char *env[] = {"OOMLENS_MANAGE=1", "OOMLENS_STACK_SAMPLE=1", NULL};
  harness_run_t run;
  ol_json_t *r = run_python(pythons[_i], "deep", env, &run);
  ck_assert_int_eq(harness_int(r, "stacks.python.with_frames"), 3);
  ck_assert_int_eq(harness_int(r, DEV "sites.by_total[0].bytes"), 48 * MiB);
  ck_assert_int_eq(harness_int(r, DEV "sites.by_total[0].allocations"), 3);
  ck_assert_ptr_null(ol_json_path(r, DEV "sites.by_total[1]"));
  char own[128];
  snprintf(own, sizeof own, "py_sites.py:%d:deep", tagged_line("deep"));
  const char *want[] = {"deeplib/ops.py:3:op", "deeplib/ops.py:126:level_60",
                        "deeplib/ops.py:124:level_59", own};
  const ol_json_t *frames = ol_json_path(r, DEV "sites.by_total[0].frames");
  ck_assert_uint_eq(ol_json_length(frames), 4);
  for (size_t i = 0; i < 4; i++)
    ck_assert_str_eq(ol_json_string(ol_json_at(frames, i)), want[i]);
  ol_json_free(r);
}
END_TEST

START_TEST(python_frames_can_be_turned_off)
{
  const char *env[] = {"OOMLENS_STACKS=1", "OOMLENS_PYTHON_FRAMES=0", NULL};
  harness_run_t run;
  ol_json_t *r = run_python(pythons[0], "two_sites", env, &run);
  ck_assert_str_eq(text_at(r, "stacks.python.state"), "off");
  /* Native frames alone end in the interpreter: both lines look alike. */
  ck_assert_int_eq(harness_int(r, DEV "sites.at_peak[0].bytes"), 112 * MiB);
  ck_assert(!has_frame(r, DEV "sites.at_peak[0].frames", "py_sites.py"));
  ck_assert_ptr_nonnull(strstr(text_report(run.pid), "Python frames: off"));
  ol_json_free(r);
}
END_TEST

/* An interpreter we have no layout for: native sites, and the report says why. */
START_TEST(unsupported_python_says_so)
{
  const char *env[] = {"OOMLENS_STACKS=1", NULL};
  harness_run_t run;
  ol_json_t *r = run_python(getenv("OOMLENS_TEST_PYTHON_OLD"), "two_sites", env, &run);
  ck_assert_str_eq(text_at(r, "stacks.python.state"), "unsupported");
  ck_assert_int_eq(harness_int(r, DEV "sites.at_peak[0].bytes"), 112 * MiB);
  ck_assert(!has_frame(r, DEV "sites.at_peak[0].frames", "py_sites.py"));
  ck_assert_ptr_nonnull(strstr(text_report(run.pid), "is not supported"));
  ol_json_free(r);
}
END_TEST

START_TEST(no_python_in_a_c_program)
{
  const char *env[] = {"OOMLENS_STACKS=1", NULL};
  const char *argv[] = {harness_env("OOMLENS_TEST_PROG"), "two_sites", NULL};
  harness_run_t run;
  harness_exec(&run, true, env, argv);
  ck_assert_int_eq(run.status, 0);
  ol_json_t *r = harness_report(run.pid);
  ck_assert_ptr_nonnull(r);
  ck_assert_str_eq(text_at(r, "stacks.python.state"), "none");
  ck_assert_ptr_nonnull(strstr(text_report(run.pid), "Python frames: none (no CPython"));
  ol_json_free(r);
}
END_TEST

/* Byte-weighted sampling: 256 MiB (always sampled: the first allocation,
 * and far above the mean) then 2000 x 64 KiB, all live. The small ones are
 * mostly in the "not sampled" site, some in their own; all the sites
 * together still hold the peak, and every allocation is in one. */
START_TEST(sampled_sites_still_sum_to_the_peak)
{
  const char *env[] = {"OOMLENS_STACKS=1", "OOMLENS_STACK_SAMPLE=1M", NULL};
  const char *argv[] = {harness_env("OOMLENS_TEST_PROG"), "sampled", NULL};
  harness_run_t run;
  harness_exec(&run, true, env, argv);
  ck_assert_msg(run.status == 0, "%s", run.out);
  ol_json_t *r = harness_report(run.pid);
  ck_assert_ptr_nonnull(r);
  int64_t peak = harness_int(r, DEV "stats.allocated_bytes.all.peak");
  ck_assert_int_eq(peak, 256 * MiB + 2000 * 64 * 1024);
  const ol_json_t *sites = ol_json_path(r, DEV "sites.at_peak");
  int64_t sum = 0, allocations = 0, unsampled = 0;
  for (size_t i = 0; i < ol_json_length(sites); i++) {
    const ol_json_t *site = ol_json_at(sites, i);
    int64_t bytes = (int64_t)ol_json_number(ol_json_get(site, "bytes"));
    sum += bytes;
    allocations += (int64_t)ol_json_number(ol_json_get(site, "allocations"));
    if (strstr(ol_json_string(ol_json_at(ol_json_get(site, "frames"), 0)), "not sampled"))
      unsampled = bytes;
  }
  ck_assert_uint_eq(ol_json_length(sites), 3);
  ck_assert_int_eq(harness_int(r, DEV "sites.at_peak[0].bytes"), 256 * MiB);
  ck_assert_int_le(sum, peak); /* marked within 1 MiB of the peak */
  ck_assert_int_ge(sum, peak - MiB);
  ck_assert_int_eq(allocations, 2001);
  ck_assert_int_gt(unsampled, 64 * MiB); /* about 124 of 125 MiB */
  ck_assert_int_lt(unsampled, 2000 * 64 * 1024);
  ck_assert_int_eq(harness_int(r, "stacks.sample_bytes"), MiB);
  ol_json_free(r);
}
END_TEST

/* The offsets pyframes.c reads, against each interpreter's own headers
 * (the script compiles a probe with them). */
START_TEST(layout_matches_the_headers)
{
  const char *argv[] = {harness_env("OOMLENS_TEST_LAYOUT_CHECK"), pythons[_i], NULL};
  harness_run_t run;
  harness_exec(&run, false, NULL, argv);
  ck_assert_msg(run.status == 0, "%s", run.out);
  ck_assert_ptr_nonnull(strstr(run.out, "layout matches its headers"));
}
END_TEST

static Suite *pyframes_suite(void)
{
  find_pythons();
  Suite *s = suite_create("pyframes");
  TCase *py = tcase_create("python");
  tcase_add_checked_fixture(py, harness_setup, harness_teardown);
  tcase_set_timeout(py, 120);
  tcase_add_test(py, no_python_in_a_c_program);
  tcase_add_test(py, sampled_sites_still_sum_to_the_peak);
  /* setup.sh installs python3; a machine with no CPython 3.10-3.13 fails
   * here rather than passing without testing anything. */
  if (python_count == 0) {
    fprintf(stderr, "no CPython 3.10-3.13 found (OOMLENS_TEST_PYTHONS is empty)\n");
    exit(EXIT_FAILURE);
  }
  tcase_add_loop_test(py, layout_matches_the_headers, 0, python_count);
  tcase_add_loop_test(py, python_lines_at_the_peak, 0, python_count);
  tcase_add_loop_test(py, python_threads_each_their_own_frames, 0, python_count);
  tcase_add_loop_test(py, python_own_line_below_a_deep_library_stack, 0, python_count);
  tcase_add_test(py, python_frames_can_be_turned_off);
  if (python_count > 0)
    tcase_add_test(py, python_lines_in_the_trace_file);
  if (getenv("OOMLENS_TEST_PYTHON_OLD") && *getenv("OOMLENS_TEST_PYTHON_OLD"))
    tcase_add_test(py, unsupported_python_says_so);
  suite_add_tcase(s, py);
  return s;
}

int main(void)
{
  return ol_run_suite(pyframes_suite());
}
