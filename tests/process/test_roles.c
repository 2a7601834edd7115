/* test_roles.c: memory attributed by role, in whole programs.
 *
 * tests/progs/roles/train.py is a training loop whose files and functions
 * are named as PyTorch's (module.py's _apply and forward, adam.py's
 * _init_group, a backward on a thread named "pt_autograd_0"), run under
 * liboomlens.so in manage mode on the simulated CUDA with the default
 * capture (Python frames of a byte-weighted sample): the report's memory
 * by role is what the job built, the same from `oomlens report` of its own
 * trace, and gone with OOMLENS_ROLES=0. A C program's thread named as
 * PyTorch's autograd threads gets the marker frame and the backward role
 * without any Python frame. */
#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "harness.h"

#define MiB (1ll << 20)
#define DEV "devices[0]."

/* The first CPython 3.10-3.13 found at configure time. */
static const char *python(void)
{
  static char first[PATH_MAX];
  const char *list = harness_env("OOMLENS_TEST_PYTHONS");
  snprintf(first, sizeof first, "%.*s", (int)strcspn(list, ":"), list);
  ck_assert_msg(*first, "no CPython 3.10-3.13 found (OOMLENS_TEST_PYTHONS is empty)");
  return first;
}

static ol_json_t *run_job(const char *const env[], harness_run_t *run)
{
  const char *argv[] = {python(), harness_env("OOMLENS_TEST_ROLES_JOB"),
                        harness_env("OOMLENS_TEST_RUNTIME"), "3", NULL};
  harness_exec(run, true, env, argv);
  ck_assert_msg(run->status == 0, "exited %d:\n%s", run->status, run->out);
  ol_json_t *report = harness_report(run->pid);
  ck_assert_msg(report, "no report:\n%s", run->out);
  return report;
}

static int64_t role_at(const ol_json_t *r, const char *when, const char *role)
{
  char path[128];
  snprintf(path, sizeof path, DEV "roles.%s.%s", when, role);
  return harness_int(r, path);
}

/* The text report's "Memory by role" block: its heading and rows, up to
 * the next list, into out. */
static void roles_block(const char *text, char *out, size_t cap)
{
  const char *at = strstr(text, "Memory by role");
  ck_assert_msg(at, "no memory by role in:\n%s", text);
  const char *end = strstr(at, "Call sites holding memory at the peak:");
  ck_assert_ptr_nonnull(end);
  snprintf(out, cap, "%.*s", (int)(end - at), at);
}

/* Blocks of 32 MiB (train.py says which): the peak is the second step's
 * backward (weights 3, optimizer state 6, input 1, activations 2, the
 * backward's temporary 1 and its 3 gradients, which the first step's
 * optimizer saw live: gradients, not temporaries); at exit what outlives
 * the loop. Every allocation is sampled at 32 MiB, so nothing is unknown. */
START_TEST(roles_of_a_training_loop)
{
  const char *env[] = {"OOMLENS_MANAGE=1", NULL};
  harness_run_t run;
  ol_json_t *r = run_job(env, &run);
  const int64_t block = 32 * MiB;
  ck_assert_int_eq(harness_int(r, DEV "stats.allocated_bytes.all.peak"), 16 * block);
  const struct { const char *role; int64_t peak, now; } want[] = {
    {"weights", 3 * block, 3 * block},   {"gradients", 3 * block, 0},
    {"optimizer", 6 * block, 6 * block}, {"activations", 2 * block, 0},
    {"backward", block, 0},              {"other", block, block},
    {"unknown", 0, 0},
  };
  for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
    ck_assert_msg(role_at(r, "at_peak", want[i].role) == want[i].peak, "%s at the peak: %lld",
                  want[i].role, (long long)role_at(r, "at_peak", want[i].role));
    ck_assert_msg(role_at(r, "now", want[i].role) == want[i].now, "%s now: %lld", want[i].role,
                  (long long)role_at(r, "now", want[i].role));
  }
  bool known = false, roles_only = false, native = true;
  ck_assert(ol_json_bool(ol_json_path(r, DEV "roles.known"), &known) && known);
  /* the default capture: Python frames only, a 1 MiB sample */
  ck_assert(ol_json_bool(ol_json_path(r, "stacks.roles_only"), &roles_only) && roles_only);
  ck_assert(ol_json_bool(ol_json_path(r, "stacks.native"), &native) && !native);
  ck_assert_int_eq(harness_int(r, "stacks.sample_bytes"), MiB);
  ol_json_free(r);
}
END_TEST

/* The job's own trace gives the same rows: its site lines carry the
 * frames the rule read, the autograd thread's marker included. */
START_TEST(roles_live_equal_its_trace)
{
  char trace[PATH_MAX], env_trace[PATH_MAX + 32], report[PATH_MAX + 32];
  snprintf(trace, sizeof trace, "%s/job.trace", harness_dir());
  snprintf(env_trace, sizeof env_trace, "OOMLENS_TRACE=%s", trace);
  const char *env[] = {"OOMLENS_MANAGE=1", env_trace, NULL};
  harness_run_t run, cli;
  ol_json_free(run_job(env, &run));
  snprintf(report, sizeof report, "%s/r-%ld.txt", harness_dir(), (long)run.pid);
  static char live[4096], traced[4096];
  roles_block(harness_read_text(report), live, sizeof live);
  ck_assert_ptr_nonnull(strstr(harness_read_text(trace), ";(thread pt_autograd_0)\n"));
  const char *argv[] = {harness_env("OOMLENS_TEST_CLI"), "report", trace, NULL};
  harness_exec(&cli, false, NULL, argv);
  ck_assert_msg(cli.status == 0, "exit %d:\n%s", cli.status, cli.out);
  roles_block(cli.out, traced, sizeof traced);
  ck_assert_str_eq(traced, live);
  ck_assert_ptr_nonnull(strstr(live, "gradients      96.00 MiB / 0 B"));
}
END_TEST

/* Observe mode takes the same frames for a CPython job (under PyTorch's
 * cache they are its segments' requests): the weights and optimizer state
 * of the training loop are told without --manage. */
START_TEST(roles_in_observe_mode_for_python)
{
  const char *env[] = {"OOMLENS_MANAGE=0", NULL};
  harness_run_t run;
  ol_json_t *r = run_job(env, &run);
  bool known = false;
  ck_assert(ol_json_bool(ol_json_path(r, DEV "roles.known"), &known) && known);
  ck_assert_int_eq(role_at(r, "at_peak", "weights"), 3 * 32 * MiB);
  ck_assert_int_eq(role_at(r, "at_peak", "optimizer"), 6 * 32 * MiB);
  ol_json_free(r);
}
END_TEST

/* The C program's autograd_thread scenario under env, and its report. */
static ol_json_t *run_autograd_thread(const char *const env[])
{
  const char *argv[] = {harness_env("OOMLENS_TEST_PROG"), "autograd_thread", NULL};
  harness_run_t run;
  harness_exec(&run, true, env, argv);
  ck_assert_msg(run.status == 0, "exit %d:\n%s", run.status, run.out);
  ol_json_t *r = harness_report(run.pid);
  ck_assert_ptr_nonnull(r);
  return r;
}

/* A native job in observe mode takes no frames by default: its sites would
 * name no role, and each call would pay for the capture. */
START_TEST(no_capture_for_a_native_job_in_observe_mode)
{
  const char *env[] = {"OOMLENS_MANAGE=0", NULL};
  ol_json_t *r = run_autograd_thread(env);
  ck_assert_ptr_null(ol_json_path(r, DEV "sites"));
  ck_assert_ptr_null(ol_json_get(r, "stacks"));
  ol_json_free(r);
}
END_TEST

/* OOMLENS_ROLES=0: manage mode takes no call sites, and no role is shown. */
START_TEST(roles_can_be_turned_off)
{
  const char *env[] = {"OOMLENS_MANAGE=1", "OOMLENS_ROLES=0", NULL};
  harness_run_t run;
  ol_json_t *r = run_job(env, &run);
  ck_assert_int_eq(harness_int(r, DEV "stats.allocated_bytes.all.peak"), 16 * 32 * MiB);
  ck_assert_ptr_null(ol_json_path(r, DEV "roles"));
  ck_assert_ptr_null(ol_json_path(r, DEV "sites"));
  ck_assert_ptr_null(ol_json_get(r, "stacks"));
  char report[PATH_MAX + 32];
  snprintf(report, sizeof report, "%s/r-%ld.txt", harness_dir(), (long)run.pid);
  ck_assert_ptr_null(strstr(harness_read_text(report), "Memory by role"));
  ol_json_free(r);
}
END_TEST

/* A thread with no Python, named "pt_autograd_3": its site is the marker
 * frame alone, of the backward role; the main thread's has no frames at
 * all (unknown). No optimizer step and no iteration: all of it counts as
 * temporaries. Peak: 32 (main) + 16 + 48; at exit 32 + 48. */
START_TEST(autograd_thread_without_python)
{
  const char *env[] = {"OOMLENS_MANAGE=1", NULL};
  ol_json_t *r = run_autograd_thread(env);
  const char *frame = ol_json_string(ol_json_path(r, DEV "sites.by_total[0].frames[0]"));
  ck_assert_str_eq(frame ? frame : "", "(thread pt_autograd_3)");
  ck_assert_uint_eq(ol_json_length(ol_json_path(r, DEV "sites.by_total[0].frames")), 1);
  ck_assert_int_eq(role_at(r, "at_peak", "backward"), 64 * MiB);
  ck_assert_int_eq(role_at(r, "at_peak", "unknown"), 32 * MiB);
  ck_assert_int_eq(role_at(r, "now", "backward"), 48 * MiB);
  ck_assert_int_eq(role_at(r, "now", "gradients"), 0);
  ck_assert_int_eq(role_at(r, "now", "unknown"), 32 * MiB);
  ol_json_free(r);
}
END_TEST

static Suite *roles_suite(void)
{
  Suite *s = suite_create("roles");
  TCase *t = tcase_create("roles");
  tcase_add_checked_fixture(t, harness_setup, harness_teardown);
  tcase_set_timeout(t, 120);
  tcase_add_test(t, roles_of_a_training_loop);
  tcase_add_test(t, roles_live_equal_its_trace);
  tcase_add_test(t, roles_can_be_turned_off);
  tcase_add_test(t, roles_in_observe_mode_for_python);
  tcase_add_test(t, no_capture_for_a_native_job_in_observe_mode);
  tcase_add_test(t, autograd_thread_without_python);
  suite_add_tcase(s, t);
  return s;
}

int main(void)
{
  return ol_run_suite(roles_suite());
}
