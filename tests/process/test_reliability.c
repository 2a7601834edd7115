/* test_reliability.c: issue 7's promises, on whole programs under the
 * library (docs/reliability.md): never take the job down, never lose a
 * report, never corrupt device memory.
 *
 * - stress: tests/progs/stress_prog, 32 threads of random traffic, in
 *   observe and manage mode; the report must match what the program
 *   counted, and the heap at its quiet points must not grow;
 * - faults: every allocation call of a small run fails in turn (out of
 *   memory, then another error); the job sees exactly what it sees without
 *   the library, and the report is written;
 * - a full disk, hostile option values, a graph capture in observe mode, a
 *   helper program started with fork and exec;
 * - a job built with AddressSanitizer, started with ASan's runtime first;
 * - child programs under valgrind. */
#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_run.h"
#include "harness.h"

#define DEV "devices[0]."

/* tcache keeps freed chunks counted as in use, per thread and size: off, so
 * that the heap figure at each quiet point is exact. */
#define EXACT_HEAP "GLIBC_TUNABLES=glibc.malloc.tcache_count=0"

typedef struct counts {
  long long threads, steps, runtime_allocs, runtime_failed, runtime_frees, driver_allocs,
    driver_failed, driver_frees, vmm_creates, vmm_failed, vmm_maps, vmm_unmaps, vmm_releases,
    bytes, streams, epochs;
} counts_t;

/* The program's counts: its last "stress:" line (a helper it started
 * prints its own before). */
static void read_counts(const char *out, counts_t *c)
{
  const char *line = NULL;
  for (const char *at = strstr(out, "stress: "); at; at = strstr(at + 1, "stress: "))
    line = at;
  ck_assert_msg(line, "no counts in:\n%s", out);
  int n = sscanf(line,
                 "stress: threads=%lld steps=%lld runtime_allocs=%lld runtime_failed=%lld "
                 "runtime_frees=%lld driver_allocs=%lld driver_failed=%lld driver_frees=%lld "
                 "vmm_creates=%lld vmm_failed=%lld vmm_maps=%lld vmm_unmaps=%lld "
                 "vmm_releases=%lld bytes=%lld streams=%lld epochs=%lld",
                 &c->threads, &c->steps, &c->runtime_allocs, &c->runtime_failed,
                 &c->runtime_frees, &c->driver_allocs, &c->driver_failed, &c->driver_frees,
                 &c->vmm_creates, &c->vmm_failed, &c->vmm_maps, &c->vmm_unmaps,
                 &c->vmm_releases, &c->bytes, &c->streams, &c->epochs);
  ck_assert_int_eq(n, 16);
}

/* The heap in use at every quiet point after the first (warm-up) stays
 * within limit bytes of the second: a leak of 8 bytes a step would add
 * 38 KiB an epoch here. Observe mode's heap does not move at all; manage
 * mode's pool keeps a record per free block, which grows with its
 * fragmentation before it levels off (scripts/stress.sh: 11 KiB over 9
 * epochs of 240 s), hence a looser bound there. */
static void heap_flat(const char *out, long long epochs, long long limit)
{
  const char *line = strstr(out, "heap:");
  ck_assert_ptr_nonnull(line);
  line += 5;
  long long first = -1;
  for (long long e = 0; e < epochs; e++) {
    char *end;
    long long v = strtoll(line, &end, 10);
    ck_assert_ptr_ne(end, line);
    line = end;
    if (e == 1)
      first = v;
    if (e > 1)
      ck_assert_msg(v - first <= limit, "heap grew from %lld to %lld by epoch %lld\n%s",
                    first, v, e, out);
  }
}

static ol_json_t *run_stress(const char *const env[], const char *const args[],
                             harness_run_t *run, counts_t *c)
{
  const char *argv[12] = {harness_env("OOMLENS_TEST_STRESS_PROG")};
  for (int i = 0; args[i] && i < 10; i++)
    argv[i + 1] = args[i];
  harness_exec(run, true, env, argv);
  ck_assert_msg(run->status == 0, "stress_prog exited %d:\n%s", run->status, run->out);
  read_counts(run->out, c);
  ol_json_t *r = harness_report(run->pid);
  ck_assert_msg(r, "no report:\n%s", run->out);
  return r;
}

/* What every mode must count exactly: each block, each byte, each free. */
static void blocks_match(const ol_json_t *r, const counts_t *c)
{
  long long ok = c->runtime_allocs - c->runtime_failed + c->driver_allocs - c->driver_failed;
  ck_assert_int_eq(harness_int(r, DEV "stats.allocation.all.allocated"), ok);
  ck_assert_int_eq(harness_int(r, DEV "stats.allocation.all.freed"), ok);
  ck_assert_int_eq(harness_int(r, DEV "stats.allocation.all.current"), 0);
  ck_assert_int_eq(harness_int(r, DEV "stats.allocated_bytes.all.allocated"), c->bytes);
  ck_assert_int_eq(harness_int(r, DEV "stats.allocated_bytes.all.freed"), c->bytes);
  ck_assert_int_eq(harness_int(r, DEV "calls.runtime_frees") +
                     harness_int(r, DEV "calls.driver_frees"),
                   c->runtime_frees + c->driver_frees);
  ck_assert_int_eq(harness_int(r, DEV "calls.vmm_creates"), c->vmm_creates);
  ck_assert_int_eq(harness_int(r, DEV "calls.vmm_maps"), c->vmm_maps);
  ck_assert_int_eq(harness_int(r, DEV "calls.vmm_unmaps"), c->vmm_unmaps);
  ck_assert_int_eq(harness_int(r, DEV "calls.vmm_releases"), c->vmm_releases);
  ck_assert_int_eq(harness_int(r, DEV "calls.unknown_frees"), 0);
  ck_assert_int_eq(harness_int(r, DEV "stats.reserved_bytes.all.current"),
                   harness_int(r, DEV "origins.pool.current"));
}

static const char *const short_run[] = {"--threads=32", "--ops=150", "--epochs=4", NULL};

START_TEST(stress_observe_counts_exact)
{
  const char *env[] = {"SIMCU_CAPACITY=16G", EXACT_HEAP, NULL};
  harness_run_t run;
  counts_t c;
  ol_json_t *r = run_stress(env, short_run, &run, &c);
  ck_assert_str_eq(ol_json_string(ol_json_path(r, "mode")), "observe");
  ck_assert_int_gt(c.vmm_creates, 0);
  ck_assert_int_gt(c.streams, 64);
  ck_assert_int_eq(harness_int(r, DEV "calls.runtime_allocs"), c.runtime_allocs);
  ck_assert_int_eq(harness_int(r, DEV "calls.runtime_frees"), c.runtime_frees);
  ck_assert_int_eq(harness_int(r, DEV "calls.driver_allocs"), c.driver_allocs);
  ck_assert_int_eq(harness_int(r, DEV "calls.driver_frees"), c.driver_frees);
  ck_assert_int_eq(harness_int(r, DEV "calls.failed_allocs"), 0);
  blocks_match(r, &c);
  heap_flat(run.out, c.epochs, 4096);
  ol_json_free(r);
}
END_TEST

START_TEST(stress_manage_counts_exact)
{
  const char *env[] = {"OOMLENS_MANAGE=1", "SIMCU_CAPACITY=16G", EXACT_HEAP, NULL};
  harness_run_t run;
  counts_t c;
  ol_json_t *r = run_stress(env, short_run, &run, &c);
  ck_assert_str_eq(ol_json_string(ol_json_path(r, "mode")), "manage");
  ck_assert_int_eq(harness_int(r, DEV "calls.runtime_allocs") +
                     harness_int(r, DEV "calls.driver_allocs") +
                     harness_int(r, DEV "calls.managed_allocs"),
                   c.runtime_allocs + c.driver_allocs);
  ck_assert_int_gt(harness_int(r, DEV "calls.managed_allocs"), 0);
  blocks_match(r, &c);
  heap_flat(run.out, c.epochs, 128 * 1024);
  ol_json_free(r);
}
END_TEST

/* ---- faults ---- */

/* The lines of --log output (each call and its result), nothing else. */
static void call_log(const char *out, char *log, size_t cap)
{
  size_t len = 0;
  for (const char *line = out; *line;) {
    const char *end = strchr(line, '\n');
    size_t n = end ? (size_t)(end - line) + 1 : strlen(line);
    bool call = !strncmp(line, "cu", 2) || !strncmp(line, "free ", 5);
    ck_assert(len + n < cap);
    if (call) {
      memcpy(log + len, line, n);
      len += n;
    }
    line += n;
  }
  log[len] = '\0';
}

static int allocation_calls(const char *log)
{
  static const char *const allocs[] = {"cudaMalloc ", "cudaMallocAsync ", "cuMemAlloc ",
                                       "cuMemAllocAsync ", "cuMemCreate "};
  int n = 0;
  for (const char *line = log; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL)
    for (size_t i = 0; i < sizeof allocs / sizeof *allocs; i++)
      n += !strncmp(line, allocs[i], strlen(allocs[i]));
  return n;
}

static void run_logged(bool preload, const char *fail_at, const char *error, harness_run_t *run,
                       char *log, size_t cap)
{
  char fail_env[64], error_env[64];
  snprintf(fail_env, sizeof fail_env, "SIMCU_FAIL_ALLOC=%s", fail_at);
  snprintf(error_env, sizeof error_env, "SIMCU_FAIL_ERROR=%s", error);
  const char *env[] = {fail_env, error_env, NULL};
  const char *argv[] = {harness_env("OOMLENS_TEST_STRESS_PROG"), "--threads=1", "--ops=60",
                        "--epochs=1", "--renew=10", "--log", NULL};
  harness_exec(run, preload, env, argv);
  ck_assert_msg(run->status == 0, "exit %d (fail at %s, error %s):\n%s", run->status, fail_at,
                error, run->out);
  call_log(run->out, log, cap);
}

/* Each allocation call fails in turn, with out of memory (2) and with an
 * unknown error (999): the job sees the very codes it sees without us, in
 * the same order, and the report counts the failure. */
static const char *const injected_errors[] = {"2", "999"};

START_TEST(every_allocation_failure_reaches_the_job_unchanged)
{
  const char *error = injected_errors[_i];
  static char plain[8192], under[8192];
  harness_run_t run;
  run_logged(false, "0", error, &run, plain, sizeof plain);
  int calls = allocation_calls(plain);
  ck_assert_int_gt(calls, 10);
  for (int i = 1; i <= calls; i++) {
    char at[16];
    snprintf(at, sizeof at, "%d", i);
    run_logged(false, at, error, &run, plain, sizeof plain);
    run_logged(true, at, error, &run, under, sizeof under);
    ck_assert_msg(strcmp(plain, under) == 0, "call %d failing (%s): without us\n%s\nwith us\n%s",
                  i, error, plain, under);
    ol_json_t *r = harness_report(run.pid);
    ck_assert_msg(r, "no report with call %d failing:\n%s", i, run.out);
    ck_assert_int_eq(harness_int(r, DEV "calls.failed_allocs"), 1);
    ck_assert_int_eq(harness_int(r, DEV "num_ooms"), strcmp(error, "2") == 0);
    ol_json_free(r);
  }
}
END_TEST

/* Manage mode makes allocation calls of its own (its chunks): any of them
 * failing must not fail the job, crash, or lose the report. */
START_TEST(manage_survives_every_allocation_failure)
{
  const char *error = injected_errors[_i];
  for (int i = 1; i <= 40; i++) {
    char fail_env[64], error_env[64];
    snprintf(fail_env, sizeof fail_env, "SIMCU_FAIL_ALLOC=%d", i);
    snprintf(error_env, sizeof error_env, "SIMCU_FAIL_ERROR=%s", error);
    const char *env[] = {"OOMLENS_MANAGE=1", fail_env, error_env, NULL};
    const char *argv[] = {harness_env("OOMLENS_TEST_STRESS_PROG"), "--threads=1", "--ops=60",
                          "--epochs=1", "--renew=10", NULL};
    harness_run_t run;
    harness_exec(&run, true, env, argv);
    ck_assert_msg(run.status == 0, "exit %d with call %d failing:\n%s", run.status, i, run.out);
    ol_json_t *r = harness_report(run.pid);
    ck_assert_msg(r, "no report with call %d failing:\n%s", i, run.out);
    ck_assert_int_eq(harness_int(r, DEV "stats.allocation.all.current"), 0);
    ol_json_free(r);
  }
}
END_TEST

/* ---- the report's own troubles ---- */

/* A disk that takes no more (RLIMIT_FSIZE, SIGXFSZ ignored: writes fail
 * with EFBIG as on a full disk): one warning, the job's own exit status,
 * and nothing left behind, neither a partial report nor a temporary file. */
START_TEST(full_disk_leaves_nothing_behind)
{
  char script[PATH_MAX + 64];
  snprintf(script, sizeof script, "ulimit -f 1; trap '' XFSZ; exec '%s' runtime",
           harness_env("OOMLENS_TEST_PROG"));
  const char *argv[] = {"/bin/sh", "-c", script, NULL};
  harness_run_t run;
  harness_exec(&run, true, NULL, argv);
  ck_assert_msg(run.status == 0, "exit %d:\n%s", run.status, run.out);
  ck_assert_msg(strstr(run.out, "oomlens: warning: cannot write the report"), "%s", run.out);
  ck_assert_int_eq(harness_count_files(".txt"), 0);
  ck_assert_int_eq(harness_count_files(".json"), 0);
  char command[PATH_MAX + 32];
  snprintf(command, sizeof command, "ls -A '%s' | grep -q .", harness_dir());
  ck_assert_msg(system(command) != 0, "files left in %s", harness_dir());
}
END_TEST

/* No value of ours is ever a format: printf directives in the report path,
 * in a bad option value and in the job's command line come out as text. */
START_TEST(format_directives_stay_text)
{
  char report[PATH_MAX + 64];
  snprintf(report, sizeof report, "OOMLENS_REPORT=%s/r%%n%%s%%x%%d-%%p.txt", harness_dir());
  const char *env[] = {report, "OOMLENS_STACK_DEPTH=%n%s%x%s", "OOMLENS_JSON=%n%n%n%s", NULL};
  const char *argv[] = {harness_env("OOMLENS_TEST_PROG"), "runtime", "%n%s%x%n%s%s", NULL};
  harness_run_t run;
  harness_exec(&run, true, env, argv);
  ck_assert_msg(run.status == 0, "exit %d:\n%s", run.status, run.out);
  ck_assert_msg(strstr(run.out, "OOMLENS_STACK_DEPTH=\"%n%s%x%s\""), "%s", run.out);
  ck_assert_msg(strstr(run.out, "OOMLENS_JSON=\"%n%n%n%s\""), "%s", run.out);
  char path[PATH_MAX + 64];
  ol_error_t err;
  snprintf(path, sizeof path, "%s/r%%n%%s%%x%%d-%ld.json", harness_dir(), (long)run.pid);
  ol_json_t *r = ol_json_parse_file(path, &err);
  ck_assert_msg(r, "%s: %s\n%s", path, err.text, run.out);
  const char *command = ol_json_string(ol_json_path(r, "command"));
  ck_assert_msg(command && strstr(command, "runtime %n%s%x%n%s%s"), "command: %s", command);
  ol_json_free(r);
}
END_TEST

/* ---- processes ---- */

/* A graph capture in observe mode: nothing synchronized, nothing invalid
 * (manage_prog checks the capture from inside), the report written. */
START_TEST(capture_in_observe_mode)
{
  const char *argv[] = {harness_env("OOMLENS_TEST_MANAGE_PROG"), "capture", NULL};
  harness_run_t run;
  harness_exec(&run, true, NULL, argv);
  ck_assert_msg(run.status == 0, "exit %d:\n%s", run.status, run.out);
  ol_json_t *r = harness_report(run.pid);
  ck_assert_ptr_nonnull(r);
  ck_assert_str_eq(ol_json_string(ol_json_path(r, "mode")), "observe");
  ck_assert_int_eq(harness_int(r, DEV "calls.device_syncs"), 0);
  ck_assert_int_eq(harness_int(r, DEV "stats.allocation.all.allocated"), 2);
  ol_json_free(r);
}
END_TEST

/* The job forks and execs a helper that allocates too: two reports, each
 * with its own process's figures; the job's are exact after the helper. */
START_TEST(exec_helper_has_its_own_report)
{
  const char *env[] = {"SIMCU_CAPACITY=16G", NULL};
  const char *args[] = {"--threads=4", "--ops=100", "--epochs=2", "--spawn", NULL};
  harness_run_t run;
  counts_t c;
  ol_json_t *r = run_stress(env, args, &run, &c);
  blocks_match(r, &c);
  ck_assert_int_eq(harness_int(r, "pid"), run.pid);
  ol_json_free(r);
  const char *spawned = strstr(run.out, "spawned: ");
  ck_assert_ptr_nonnull(spawned);
  long helper = atol(spawned + 9);
  ck_assert_int_ne(helper, run.pid);
  ol_json_t *h = harness_report((pid_t)helper);
  ck_assert_msg(h, "no report of the helper %ld", helper);
  ck_assert_int_eq(harness_int(h, "pid"), helper);
  ck_assert_int_le(harness_int(h, DEV "stats.allocation.all.allocated"), 50);
  ol_json_free(h);
  ck_assert_int_eq(harness_count_files(".json"), 2);
}
END_TEST

/* ---- other tools in the same process ---- */

/* An ASan-built job, ASan's runtime first as ASan requires: it starts
 * (bug: SIGSEGV before main, in our dlsym during ASan's start-up), runs 8
 * threads of traffic, and the report counts it exactly. */
START_TEST(asan_built_job_runs_under_the_library)
{
  const char *prog = getenv("OOMLENS_TEST_ASAN_PROG"), *libasan = getenv("OOMLENS_TEST_LIBASAN");
  if (!prog || !*prog || !libasan || !*libasan || access(libasan, R_OK) != 0)
    return; /* no ASan runtime on this machine */
  char preload[2 * PATH_MAX + 32];
  snprintf(preload, sizeof preload, "LD_PRELOAD=%s:%s", libasan, harness_env("OOMLENS_TEST_LIB"));
  const char *env[] = {preload, "SIMCU_CAPACITY=16G", "ASAN_OPTIONS=detect_leaks=0", NULL};
  const char *argv[] = {prog, "--threads=8", "--ops=150", "--epochs=2", NULL};
  harness_run_t run;
  harness_exec(&run, true, env, argv);
  ck_assert_msg(run.status == 0, "exit %d:\n%s", run.status, run.out);
  counts_t c;
  read_counts(run.out, &c);
  ol_json_t *r = harness_report(run.pid);
  ck_assert_msg(r, "no report:\n%s", run.out);
  blocks_match(r, &c);
  ol_json_free(r);
}
END_TEST

/* The programs the other suites start, under memcheck with the library
 * preloaded: no invalid access, no use of uninitialised memory, no
 * definite leak in the job's process (valgrind's exit code 99 says). */
static const char *const valgrind_runs[][6] = {
  {"OOMLENS_TEST_PROG", "runtime", NULL},
  {"OOMLENS_TEST_PROG", "driver", NULL},
  {"OOMLENS_TEST_PROG", "vmm", NULL},
  {"OOMLENS_TEST_PROG", "fork", NULL},
  {"OOMLENS_TEST_MANAGE_PROG", "churn", "OOMLENS_MANAGE=1", NULL},
  {"OOMLENS_TEST_STRESS_PROG", "--threads=4", "--ops=60", "--epochs=2", NULL},
  {"OOMLENS_TEST_STRESS_PROG", "--threads=4", "--ops=60", "--epochs=2", "OOMLENS_MANAGE=1"},
};

START_TEST(child_programs_under_valgrind)
{
  if (system("command -v valgrind >/dev/null 2>&1") != 0)
    return; /* not installed here */
  const char *const *spec = valgrind_runs[_i];
  char suppressions[PATH_MAX + 32];
  snprintf(suppressions, sizeof suppressions, "--suppressions=%s",
           harness_env("OOMLENS_TEST_VALGRIND_SUPP"));
  const char *argv[18] = {"valgrind", "-q", "--error-exitcode=99", "--leak-check=full",
                          "--errors-for-leak-kinds=definite", "--show-leak-kinds=definite",
                          "--trace-children=yes", suppressions,
                          harness_env(spec[0])};
  ck_assert_ptr_nonnull(argv[8]);
  const char *env[4] = {"OOMLENS_STACKS=1", NULL};
  int n = 9, e = 1;
  for (int i = 1; i < 6 && spec[i]; i++) {
    if (!strncmp(spec[i], "OOMLENS_", 8))
      env[e++] = spec[i];
    else
      argv[n++] = spec[i];
  }
  harness_run_t run;
  harness_exec(&run, true, env, argv);
  ck_assert_msg(run.status == 0, "%s %s: exit %d:\n%s", spec[0], spec[1], run.status, run.out);
  ck_assert_ptr_null(strstr(run.out, "=="));
  ck_assert_int_ge(harness_count_files(".json"), 1);
}
END_TEST

static Suite *reliability_suite(void)
{
  Suite *s = suite_create("reliability");
  TCase *stress = tcase_create("stress");
  tcase_add_checked_fixture(stress, harness_setup, harness_teardown);
  tcase_set_timeout(stress, 120);
  tcase_add_test(stress, stress_observe_counts_exact);
  tcase_add_test(stress, stress_manage_counts_exact);
  suite_add_tcase(s, stress);
  TCase *faults = tcase_create("faults");
  tcase_add_checked_fixture(faults, harness_setup, harness_teardown);
  tcase_set_timeout(faults, 240);
  tcase_add_loop_test(faults, every_allocation_failure_reaches_the_job_unchanged, 0, 2);
  tcase_add_loop_test(faults, manage_survives_every_allocation_failure, 0, 2);
  tcase_add_test(faults, full_disk_leaves_nothing_behind);
  tcase_add_test(faults, format_directives_stay_text);
  suite_add_tcase(s, faults);
  TCase *procs = tcase_create("processes");
  tcase_add_checked_fixture(procs, harness_setup, harness_teardown);
  tcase_set_timeout(procs, 240);
  tcase_add_test(procs, capture_in_observe_mode);
  tcase_add_test(procs, exec_helper_has_its_own_report);
  tcase_add_test(procs, asan_built_job_runs_under_the_library);
  tcase_add_loop_test(procs, child_programs_under_valgrind, 0,
                      sizeof valgrind_runs / sizeof *valgrind_runs);
  suite_add_tcase(s, procs);
  return s;
}

int main(void)
{
  return ol_run_suite(reliability_suite());
}
