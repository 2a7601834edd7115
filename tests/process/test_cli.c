/* test_cli.c: the oomlens command: help, version, and `run`, which preloads
 * the library (appended to LD_PRELOAD), passes the exit status through and
 * fails like a shell when the command cannot be run. */
#include <check.h>

#include "check_run.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static void cli(harness_run_t *run, const char *const env[], const char *const args[])
{
  const char *argv[16] = {harness_env("OOMLENS_TEST_CLI")};
  for (int i = 0; args[i]; i++)
    argv[i + 1] = args[i];
  harness_exec(run, false, env, argv);
}

START_TEST(help_lists_commands_and_options)
{
  harness_run_t run;
  cli(&run, NULL, (const char *[]){"--help", NULL});
  ck_assert_int_eq(run.status, 0);
  ck_assert_ptr_nonnull(
    strstr(run.out, "run [--manage] [--capacity SIZE] [--report PATH] [--stacks] [--trace PATH]"));
  ck_assert_ptr_nonnull(strstr(run.out, "OOMLENS_REPORT"));
  ck_assert_ptr_nonnull(strstr(run.out, "OOMLENS_ENABLE"));
  cli(&run, NULL, (const char *[]){"run", "--help", NULL});
  ck_assert_int_eq(run.status, 0);
  ck_assert_ptr_nonnull(strstr(run.out, "--stacks "));
  ck_assert_ptr_nonnull(strstr(run.out, "--trace PATH "));
}
END_TEST

START_TEST(version)
{
  harness_run_t run;
  cli(&run, NULL, (const char *[]){"--version", NULL});
  ck_assert_int_eq(run.status, 0);
  ck_assert_str_eq(run.out, "oomlens 0.1.0\n");
}
END_TEST

/* The estimate model names no flags; its command says each problem in the
 * flags the user typed. */
START_TEST(estimate_problems_name_their_flags)
{
  static const struct {
    const char *args[10];
    const char *said;
  } cases[] = {
    {{"estimate", "--batch", "4", NULL}, "give --params, or the shape (--hidden, --layers, --seq)"},
    {{"estimate", "--params", "1M", "--from-peak", "8G", NULL},
     "--from-peak and --at-batch go together"},
    {{"estimate", "--params", "1M", "--from-peak", "8G", "--at-batch", "4",
      "--measured-per-sample", "1G", NULL}, "give --measured-per-sample or --from-peak, not both"},
    {{"estimate", "--params", "124M", "--from-peak", "1000", "--at-batch", "4", NULL},
     "--from-peak 1000 is not above the persistent"},
    {{"estimate", "--params", "1M", "--gpus", "0", NULL},
     "--batch, --gpus and --capacity must be at least 1"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    harness_run_t run;
    cli(&run, NULL, cases[i].args);
    ck_assert_int_eq(run.status, 2);
    ck_assert_msg(strstr(run.out, cases[i].said), "case %zu said: %s", i, run.out);
  }
}
END_TEST

START_TEST(usage_errors_exit_2)
{
  harness_run_t run;
  cli(&run, NULL, (const char *[]){NULL});
  ck_assert_int_eq(run.status, 2);
  cli(&run, NULL, (const char *[]){"frobnicate", NULL});
  ck_assert_int_eq(run.status, 2);
  cli(&run, NULL, (const char *[]){"run", NULL});
  ck_assert_int_eq(run.status, 2);
  cli(&run, NULL, (const char *[]){"run", "--bogus", "--", "true", NULL});
  ck_assert_int_eq(run.status, 2);
  cli(&run, NULL, (const char *[]){"run", "--capacity", "lots", "--", "true", NULL});
  ck_assert_int_eq(run.status, 2);
  cli(&run, NULL, (const char *[]){"run", "--trace", NULL});
  ck_assert_int_eq(run.status, 2);
  cli(&run, NULL, (const char *[]){"run", "--trace", "", "--", "true", NULL});
  ck_assert_int_eq(run.status, 2);
}
END_TEST

START_TEST(run_passes_exit_status)
{
  harness_run_t run;
  cli(&run, NULL, (const char *[]){"run", "--", "sh", "-c", "exit 7", NULL});
  ck_assert_int_eq(run.status, 7);
  cli(&run, NULL, (const char *[]){"run", "sh", "-c", "exit 0", NULL});
  ck_assert_int_eq(run.status, 0);
}
END_TEST

START_TEST(run_missing_command_is_127)
{
  harness_run_t run;
  cli(&run, NULL, (const char *[]){"run", "--", "/nonexistent/prog", NULL});
  ck_assert_int_eq(run.status, 127);
}
END_TEST

START_TEST(run_appends_to_ld_preload)
{
  harness_run_t run;
  const char *env[] = {"LD_PRELOAD=", NULL};
  cli(&run, env, (const char *[]){"run", "--", "sh", "-c", "echo \"[$LD_PRELOAD]\"", NULL});
  ck_assert_int_eq(run.status, 0);
  ck_assert_ptr_nonnull(strstr(run.out, "liboomlens.so]"));
  /* An existing preload stays first; ours is appended once. */
  char existing[512];
  snprintf(existing, sizeof existing, "LD_PRELOAD=%s", harness_env("OOMLENS_TEST_LIB"));
  const char *env2[] = {existing, NULL};
  cli(&run, env2, (const char *[]){"run", "--", "sh", "-c", "echo \"[$LD_PRELOAD]\"", NULL});
  ck_assert_ptr_null(strstr(strstr(run.out, "liboomlens.so") + 1, "liboomlens.so"));
}
END_TEST

START_TEST(run_job_writes_report)
{
  char report[512];
  snprintf(report, sizeof report, "%s/job-%%p.txt", harness_dir());
  harness_run_t run;
  cli(&run, NULL,
      (const char *[]){"run", "--report", report, "--", harness_env("OOMLENS_TEST_PROG"),
                       "runtime", NULL});
  ck_assert_msg(run.status == 0, "%s", run.out);
  ck_assert_ptr_nonnull(strstr(run.out, "oomlens: report written to"));
  ck_assert_int_eq(harness_count_files(".txt"), 1);
  ck_assert_int_eq(harness_count_files(".json"), 1);
}
END_TEST

/* --stacks and --trace set the variables the library reads; a job run
 * with both leaves a trace and a report with call sites. */
START_TEST(run_stacks_and_trace_flags)
{
  harness_run_t run;
  const char *unset[] = {"OOMLENS_STACKS=", "OOMLENS_TRACE=", NULL};
  cli(&run, unset,
      (const char *[]){"run", "--stacks", "--trace", "t.trace", "--", "sh", "-c",
                       "echo \"[$OOMLENS_STACKS][$OOMLENS_TRACE]\"", NULL});
  ck_assert_int_eq(run.status, 0);
  ck_assert_ptr_nonnull(strstr(run.out, "[1][t.trace]"));
  char trace[512];
  snprintf(trace, sizeof trace, "%s/job-%%p.trace", harness_dir());
  cli(&run, unset,
      (const char *[]){"run", "--stacks", "--trace", trace, "--", harness_env("OOMLENS_TEST_PROG"),
                       "two_sites", NULL});
  ck_assert_msg(run.status == 0, "%s", run.out);
  ck_assert_int_eq(harness_count_files(".trace"), 1);
  ol_json_t *r = harness_report(run.pid); /* run execs the job: one pid */
  ck_assert_msg(r, "no report:\n%s", run.out);
  const char *frame = ol_json_string(ol_json_path(r, "devices[0].sites.at_peak[0].frames[0]"));
  ck_assert_msg(frame && strstr(frame, "cuda_prog_weights"), "frame %s", frame);
  ol_json_free(r);
}
END_TEST

/* --capacity takes the one size grammar (fractions too) and passes the
 * size on as written: the library reads OOMLENS_CAPACITY with the same
 * parser. Every option takes its value after '=' as well. */
START_TEST(run_capacity_and_equals_values)
{
  harness_run_t run;
  const char *unset[] = {"OOMLENS_CAPACITY=", "OOMLENS_TRACE=", "OOMLENS_REPORT=", NULL};
  const char *echo = "echo \"[$OOMLENS_CAPACITY][$OOMLENS_TRACE][$OOMLENS_REPORT]\"";
  cli(&run, unset, (const char *[]){"run", "--capacity", "1.5G", "--", "sh", "-c", echo, NULL});
  ck_assert_msg(run.status == 0, "%s", run.out);
  ck_assert_ptr_nonnull(strstr(run.out, "[1.5G][][]"));
  cli(&run, unset,
      (const char *[]){"run", "--capacity=0.5T", "--trace=t.trace", "--report=r-%p.txt", "sh",
                       "-c", echo, NULL});
  ck_assert_msg(run.status == 0, "%s", run.out);
  ck_assert_ptr_nonnull(strstr(run.out, "[0.5T][t.trace][r-%p.txt]"));
  /* The job's own options are its own: options end at the command. */
  cli(&run, unset, (const char *[]){"run", "sh", "-c", "echo \"[$0]\"", "--capacity", NULL});
  ck_assert_msg(run.status == 0, "%s", run.out);
  ck_assert_ptr_nonnull(strstr(run.out, "[--capacity]"));
}
END_TEST

/* The paragraph's "Held at the failure by: ... )." part of text. */
static void held_part(const char *text, char *out, size_t cap)
{
  const char *at = strstr(text, "Held at the failure by: ");
  const char *end = at ? strstr(at, ").") : NULL;
  ck_assert_msg(at && end, "no holders in: %s", text);
  snprintf(out, cap, "%.*s", (int)(end + 2 - at), at);
}

/* Replay names a trace's sites as the job's own report named them: the
 * paragraph's holders by their first frames (two holders that differ in
 * their second frame read differently), the JSON's by the frames shown,
 * and peak_sites as the report's list of sites at the peak. */
START_TEST(replay_names_sites_as_the_report)
{
  char trace[512], trace_env[600];
  snprintf(trace, sizeof trace, "%s/job.trace", harness_dir());
  snprintf(trace_env, sizeof trace_env, "OOMLENS_TRACE=%s", trace);
  const char *env[] = {"OOMLENS_STACKS=1", trace_env, NULL};
  harness_run_t job, run;
  harness_exec(&job, true, env,
               (const char *[]){harness_env("OOMLENS_TEST_PROG"), "oom_leak", NULL});
  ck_assert_msg(job.status == 0, "%s", job.out);
  char path[600], live[4096], replayed[4096];
  snprintf(path, sizeof path, "%s/r-%ld.txt", harness_dir(), (long)job.pid);
  held_part(harness_read_text(path), live, sizeof live);
  cli(&run, NULL, (const char *[]){"replay", trace, NULL});
  ck_assert_msg(run.status == 0, "%s", run.out);
  held_part(run.out, replayed, sizeof replayed);
  ck_assert_str_eq(replayed, live);

  ol_json_t *r = harness_report(job.pid);
  ck_assert_ptr_nonnull(r);
  cli(&run, NULL, (const char *[]){"replay", trace, "--json", NULL});
  ck_assert_msg(run.status == 0, "%s", run.out);
  char err[256];
  ol_json_t *p = ol_json_parse(run.out, strlen(run.out), err, sizeof err);
  ck_assert_msg(p, "%s in %s", err, run.out);
  const ol_json_t *holders = ol_json_path(r, "devices[0].oom.sites");
  ck_assert_uint_ge(ol_json_length(holders), 2);
  ck_assert_uint_eq(ol_json_length(ol_json_path(p, "oom.diagnosis.sites")),
                    ol_json_length(holders));
  for (size_t i = 0; i < ol_json_length(holders); i++)
    ck_assert_str_eq(ol_json_string(ol_json_get(ol_json_at(ol_json_path(p, "oom.diagnosis.sites"),
                                                           i), "site")),
                     ol_json_string(ol_json_get(ol_json_at(holders, i), "site")));
  ck_assert_str_eq(ol_json_string(ol_json_path(p, "oom.diagnosis.growing_site.site")),
                   ol_json_string(ol_json_path(r, "devices[0].oom.growing_site.site")));
  const ol_json_t *at_peak = ol_json_path(r, "devices[0].sites.at_peak");
  const ol_json_t *peak_sites = ol_json_get(p, "peak_sites");
  ck_assert_uint_ge(ol_json_length(at_peak), 2);
  ck_assert_uint_eq(ol_json_length(peak_sites), ol_json_length(at_peak));
  for (size_t i = 0; i < ol_json_length(at_peak); i++) {
    const ol_json_t *want = ol_json_at(at_peak, i), *got = ol_json_at(peak_sites, i);
    ol_buf_t name = {0};
    ol_frame_join_t j = {&name, 0};
    for (size_t f = 0; f < ol_json_length(ol_json_get(want, "frames")); f++)
      ol_frame_join_text(ol_json_string(ol_json_at(ol_json_get(want, "frames"), f)), &j);
    ck_assert_str_eq(ol_json_string(ol_json_get(got, "site")), name.data);
    ck_assert_int_eq(ol_json_path_int64(got, "bytes", -1), ol_json_path_int64(want, "bytes", -2));
    ol_buf_free(&name);
  }
  ol_json_free(p);
  ol_json_free(r);
}
END_TEST

/* A trace the replayed policy serves on the job's cap, but not beside what
 * the job's device held outside the allocator: "would fit" is not said
 * (held-out varlen_logits_leak: 6.19 GiB reserved and 0.61 GiB outside on
 * 6.42 GiB), and the capacity it names gives the job's own ending. */
START_TEST(replay_does_not_say_fits_beside_what_was_held_outside)
{
  char trace[1024];
  snprintf(trace, sizeof trace, "%s/oom/varlen_logits_leak.trace.xz",
           harness_env("OOMLENS_TEST_DATA"));
  harness_run_t run;
  cli(&run, NULL, (const char *[]){"replay", trace, "--capacity", "6.42G", NULL});
  ck_assert_msg(run.status == 0, "%s", run.out);
  const char *said = strstr(run.out, "this policy:      the oomlens policy served every request on "
                                     "6.42 GiB with nothing held outside it");
  ck_assert_msg(said && !strstr(run.out, "this policy:      would fit"), "%.3000s", run.out);
  const char *flag = strstr(said, "not shown to fit (--capacity ");
  ck_assert_msg(flag, "%.3000s", said);
  char capacity[32];
  ck_assert_int_eq(sscanf(flag, "not shown to fit (--capacity %31[0-9]", capacity), 1);
  cli(&run, NULL, (const char *[]){"replay", trace, "--capacity", capacity, NULL});
  ck_assert_msg(run.status == 0 && strstr(run.out, "(where the recorded run ran out too)"),
                "%.3000s", run.out);
}
END_TEST

/* One line naming the option, exit status 2. */
START_TEST(run_usage_messages)
{
  static const struct {
    const char *args[6];
    const char *message;
  } cases[] = {
    {{"run", "--bogus", "--", "true"},
     "oomlens run: unknown option --bogus (see oomlens run --help)"},
    {{"run", "--capacity"}, "oomlens run: --capacity needs a value"},
    {{"run", "--capacity", "1.5", "--", "true"}, "bad size '1.5' for --capacity"},
    {{"run", "--capacity=0", "--", "true"}, "bad size '0' for --capacity"},
    {{"run", "--capacity=2Q", "--", "true"}, "bad size '2Q' for --capacity"},
    {{"run", "--trace="}, "bad value '' for --trace"},
    {{"run", "--stacks=1", "--", "true"}, "unknown option --stacks=1"},
    {{"run", "--"}, "oomlens run: no command given"},
    {{"--bogus"}, "oomlens: unknown option --bogus (see oomlens --help)"},
    {{"frobnicate"}, "oomlens: unknown command 'frobnicate'"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    harness_run_t run;
    cli(&run, NULL, cases[i].args);
    ck_assert_msg(run.status == 2, "%s: exit %d", cases[i].message, run.status);
    ck_assert_msg(strstr(run.out, cases[i].message), "want '%s' in '%s'", cases[i].message,
                  run.out);
  }
}
END_TEST

static Suite *cli_suite(void)
{
  Suite *s = suite_create("cli");
  TCase *tc = tcase_create("run");
  tcase_add_checked_fixture(tc, harness_setup, harness_teardown);
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, help_lists_commands_and_options);
  tcase_add_test(tc, version);
  tcase_add_test(tc, usage_errors_exit_2);
  tcase_add_test(tc, estimate_problems_name_their_flags);
  tcase_add_test(tc, run_passes_exit_status);
  tcase_add_test(tc, run_missing_command_is_127);
  tcase_add_test(tc, run_appends_to_ld_preload);
  tcase_add_test(tc, run_job_writes_report);
  tcase_add_test(tc, run_stacks_and_trace_flags);
  tcase_add_test(tc, run_capacity_and_equals_values);
  tcase_add_test(tc, run_usage_messages);
  tcase_add_test(tc, replay_names_sites_as_the_report);
  tcase_add_test(tc, replay_does_not_say_fits_beside_what_was_held_outside);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  return ol_run_suite(cli_suite());
}
