/* test_trace_file.c: OOMLENS_TRACE end to end. Programs of tests/progs run
 * under liboomlens.so on the simulated CUDA; their traces are read back
 * with the trace reader: every event present, each call site defined
 * once, the trace replays to the report's own peak, `oomlens report` of
 * the trace shows the live report's table, and the file is whole after
 * SIGTERM, SIGUSR1 and fork, and its memory_viz export is one PyTorch's
 * web viewer reads. The writer's failure paths (a full
 * disk, a disk that cannot keep up) run in-process, in a child each. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check_run.h"
#include "check_pickle.h"
#include "harness.h"
#include "lib.h"
#include "policy.h"
#include "replay.h"
#include "report_view.h"
#include "trace_csv.h"

#define MiB (1ll << 20)
#define DEV "devices[0]."

typedef struct trace_summary {
  int actions[OL_TRACE_ACTION_COUNT];
  int events, events_with_frames, site_lines, distinct_sites, device_lines;
  uint64_t end_events; /* from the "# end events=N" line, 0 if none */
  bool ends_with_end_line;
  char weights_frames[1024], activation_frames[1024];
  int activation_sites; /* distinct frames texts of the activation allocs */
} trace_summary_t;

static void trace_path(pid_t pid, char *out, size_t cap)
{
  snprintf(out, cap, "%s/t-%ld.trace", harness_dir(), (long)pid);
}

/* The raw lines: site and device definitions, and the end line. */
static void scan_lines(const char *path, trace_summary_t *s)
{
  FILE *f = fopen(path, "r");
  ck_assert_msg(f, "no trace %s", path);
  char line[8192], seen[64][1024];
  int seen_count = 0;
  while (fgets(line, sizeof line, f)) {
    s->ends_with_end_line = strncmp(line, "# end events=", 13) == 0;
    if (s->ends_with_end_line)
      s->end_events = strtoull(line + 13, NULL, 10);
    if (strncmp(line, "device,", 7) == 0)
      s->device_lines++;
    if (strncmp(line, "site,", 5) != 0)
      continue;
    s->site_lines++;
    const char *text = strchr(strchr(line + 5, ',') + 1, ',') + 1;
    bool again = false;
    for (int i = 0; i < seen_count; i++)
      again |= strcmp(seen[i], text) == 0;
    ck_assert_msg(!again, "site defined twice: %s", text);
    if (seen_count < 64)
      snprintf(seen[seen_count++], sizeof seen[0], "%s", text);
  }
  fclose(f);
}

static void summarize(const char *path, trace_summary_t *s)
{
  memset(s, 0, sizeof *s);
  scan_lines(path, s);
  char last_activation[1024] = "";
  ol_error_t err;
  ol_trace_t *t = ol_trace_open(path, &err);
  ck_assert_msg(t, "%s", err.text);
  ck_assert_int_eq(ol_trace_format(t), OL_TRACE_FORMAT_OOMLENS);
  ol_trace_event_t ev;
  int got;
  while ((got = ol_trace_next(t, &ev, &err)) == 1) {
    s->events += ev.action != OL_TRACE_OOM_CONTEXT; /* a line of its own, not an event */
    s->actions[ev.action]++;
    s->events_with_frames += ev.frames_len > 0;
    if (ev.action != OL_TRACE_ALLOC || ev.frames_len == 0)
      continue;
    char frames[1024];
    snprintf(frames, sizeof frames, "%.*s", (int)ev.frames_len, ev.frames);
    if (strstr(frames, "trace_prog_weights"))
      snprintf(s->weights_frames, sizeof s->weights_frames, "%s", frames);
    if (strstr(frames, "trace_prog_activation") && strcmp(frames, last_activation) != 0) {
      s->activation_sites++;
      snprintf(last_activation, sizeof last_activation, "%s", frames);
      snprintf(s->activation_frames, sizeof s->activation_frames, "%s", frames);
    }
  }
  ck_assert_msg(got == 0, "%s", err.text);
  ol_trace_close(t);
}

static int64_t replayed_peak(const char *path)
{
  ol_policy_options_t options = {.capacity = 1ull << 40};
  ol_replay_result_t result;
  ol_error_t err;
  ck_assert_msg(ol_replay_file(path, ol_policy_find("oomlens"), &options, &result, &err) == 0,
                "%s", err.text);
  int64_t peak = result.peak_requested;
  ol_replay_result_free(&result);
  return peak;
}

static void run_prog(harness_run_t *run, const char *const env_extra[], const char *const argv[])
{
  char trace_env[PATH_MAX + 32];
  snprintf(trace_env, sizeof trace_env, "OOMLENS_TRACE=%s/t-%%p.trace", harness_dir());
  const char *env[8] = {trace_env};
  for (int i = 0; env_extra && env_extra[i] && i < 6; i++)
    env[i + 1] = env_extra[i];
  harness_exec(run, true, env, argv);
}

/* The mixed scenario's events (tests/progs/trace_prog.c), and a replay of
 * its trace reaching the report's own peak. */
static void check_mixed(const trace_summary_t *s, pid_t pid, const char *path)
{
  ck_assert_int_eq(s->actions[OL_TRACE_ALLOC], 6);
  ck_assert_int_eq(s->actions[OL_TRACE_SEGMENT_ALLOC], 6);
  ck_assert_int_eq(s->actions[OL_TRACE_FREE_REQUESTED], 5);
  ck_assert_int_eq(s->actions[OL_TRACE_FREE_COMPLETED], 5);
  ck_assert_int_eq(s->actions[OL_TRACE_SEGMENT_FREE], 5);
  ck_assert_int_eq(s->actions[OL_TRACE_OOM], 1);
  ck_assert_int_eq(s->actions[OL_TRACE_OOM_CONTEXT], 1); /* settled: the job saw it */
  ck_assert_int_eq(s->actions[OL_TRACE_SEGMENT_MAP], 1);
  ck_assert_int_eq(s->actions[OL_TRACE_SEGMENT_UNMAP], 1);
  ck_assert_int_eq(s->events, 30);
  ck_assert(s->ends_with_end_line);
  ck_assert_uint_eq(s->end_events, 30);
  ck_assert_int_eq(s->device_lines, 1);
  ol_json_t *r = harness_report(pid);
  ck_assert_ptr_nonnull(r);
  int64_t peak = harness_int(r, "devices[0].stats.allocated_bytes.all.peak");
  ck_assert_int_eq(peak, 88 * MiB);
  ck_assert_int_eq(replayed_peak(path), peak);
  ol_json_free(r);
}

START_TEST(every_event_without_stacks)
{
  const char *argv[] = {harness_env("OOMLENS_TEST_TRACE_PROG"), "mixed", NULL};
  harness_run_t run;
  run_prog(&run, NULL, argv);
  ck_assert_msg(run.status == 0, "exit %d:\n%s", run.status, run.out);
  char path[PATH_MAX];
  trace_path(run.pid, path, sizeof path);
  trace_summary_t s;
  summarize(path, &s);
  check_mixed(&s, run.pid, path);
  ck_assert_int_eq(s.site_lines, 0);
  ck_assert_int_eq(s.events_with_frames, 0);
}
END_TEST

/* With stacks on, each site is defined once, before its first use, and
 * the three activations share one. */
START_TEST(sites_written_once)
{
  const char *env[] = {"OOMLENS_STACKS=1", NULL};
  const char *argv[] = {harness_env("OOMLENS_TEST_TRACE_PROG"), "mixed", NULL};
  harness_run_t run;
  run_prog(&run, env, argv);
  ck_assert_msg(run.status == 0, "exit %d:\n%s", run.status, run.out);
  char path[PATH_MAX];
  trace_path(run.pid, path, sizeof path);
  trace_summary_t s;
  summarize(path, &s);
  check_mixed(&s, run.pid, path);
  ck_assert_int_ge(s.site_lines, 3); /* weights, activation, the others */
  ck_assert_int_le(s.site_lines, 6); /* at most one per allocation call */
  ck_assert_ptr_nonnull(strstr(s.weights_frames, "trace_prog_weights"));
  /* trace_prog is built with -g: frames name their source line. */
  ck_assert_msg(strstr(s.weights_frames, "trace_prog_weights (trace_prog.c:"), "%s",
                s.weights_frames);
  ck_assert_ptr_nonnull(strstr(s.weights_frames, ";"));
  ck_assert_int_eq(s.activation_sites, 1);
  /* Allocations and their frees carry their site, and so does the failed
   * request (what it was for is the diagnosis's); VMM events have none. */
  ck_assert_int_eq(s.events_with_frames, 6 * 2 + 5 * 3 + 1);
}
END_TEST

/* A job ended by SIGTERM while a thread still allocates: the trace ends
 * with its end line, every line reads, the count matches. */
START_TEST(sigterm_leaves_complete_trace)
{
  const char *argv[] = {harness_env("OOMLENS_TEST_TRACE_PROG"), "sigterm", NULL};
  harness_run_t run;
  run_prog(&run, NULL, argv);
  ck_assert_msg(run.status == 128 + SIGTERM, "exit %d:\n%s", run.status, run.out);
  char path[PATH_MAX];
  trace_path(run.pid, path, sizeof path);
  trace_summary_t s;
  summarize(path, &s);
  ck_assert(s.ends_with_end_line);
  ck_assert_uint_eq(s.end_events, (uint64_t)s.events);
  ck_assert_int_ge(s.actions[OL_TRACE_ALLOC], 2001);
  ck_assert_int_ge(replayed_peak(path), 18 * MiB);
}
END_TEST

START_TEST(usr1_puts_trace_on_disk)
{
  char report[PATH_MAX + 32], trace[PATH_MAX + 32], report_env[PATH_MAX + 64],
    trace_env[PATH_MAX + 64];
  snprintf(report, sizeof report, "%s/usr1.txt", harness_dir());
  snprintf(trace, sizeof trace, "%s/usr1.trace", harness_dir());
  snprintf(report_env, sizeof report_env, "OOMLENS_REPORT=%s", report);
  snprintf(trace_env, sizeof trace_env, "OOMLENS_TRACE=%s", trace);
  const char *env[] = {report_env, trace_env, "OOMLENS_REPORT_AT_EXIT=0", NULL};
  const char *argv[] = {harness_env("OOMLENS_TEST_TRACE_PROG"), "usr1", report, trace, NULL};
  harness_run_t run;
  harness_exec(&run, true, env, argv);
  ck_assert_msg(run.status == 0, "exit %d:\n%s", run.status, run.out);
  trace_summary_t s;
  summarize(trace, &s);
  ck_assert(s.ends_with_end_line);
  ck_assert_int_eq(s.actions[OL_TRACE_ALLOC], 2);
  ck_assert_int_eq(s.actions[OL_TRACE_FREE_COMPLETED], 1);
}
END_TEST

/* The forked child writes its own trace, with only its own allocation. */
START_TEST(forked_child_has_its_own_trace)
{
  const char *argv[] = {harness_env("OOMLENS_TEST_PROG"), "fork", NULL};
  harness_run_t run;
  run_prog(&run, NULL, argv);
  ck_assert_msg(run.status == 0, "exit %d:\n%s", run.status, run.out);
  ck_assert_int_eq(harness_count_files(".trace"), 2);
  char path[PATH_MAX];
  trace_path(run.pid, path, sizeof path);
  ck_assert_int_eq(replayed_peak(path), 3 * MiB);
  trace_summary_t s;
  summarize(path, &s);
  ck_assert_int_eq(s.actions[OL_TRACE_ALLOC], 1);
}
END_TEST

/* A program the job starts inherits OOMLENS_TRACE; with no %p in it, that
 * program writes a trace of its own name beside the job's, which stays
 * whole. Was: the second process opened the same path, emptying the job's
 * trace under its writer (held-out compiled_batch on the H200: torch.compile's
 * compile workers left an empty trace's lines and a hole where its header
 * was, and replay refused it). */
/* Runs trace_prog's scenario with OOMLENS_TRACE=<dir>/t.trace (path: that
 * file), which must end well. */
static void run_traced(const char *scenario, harness_run_t *run, char *path, size_t cap)
{
  char trace_env[PATH_MAX + 32];
  snprintf(trace_env, sizeof trace_env, "OOMLENS_TRACE=%s/t.trace", harness_dir());
  const char *env[] = {trace_env, NULL};
  const char *argv[] = {harness_env("OOMLENS_TEST_TRACE_PROG"), scenario, NULL};
  harness_exec(run, true, env, argv);
  ck_assert_msg(run->status == 0, "exit %d:\n%s", run->status, run->out);
  snprintf(path, cap, "%s/t.trace", harness_dir());
}

/* How many traces of programs the job started (t.trace.<pid>) are there;
 * the last one's path in child. */
static int child_traces(char *child, size_t cap)
{
  int n = 0;
  DIR *d = opendir(harness_dir());
  for (struct dirent *e; d && (e = readdir(d));)
    if (strncmp(e->d_name, "t.trace.", 8) == 0) {
      snprintf(child, cap, "%s/%s", harness_dir(), e->d_name);
      n++;
    }
  if (d)
    closedir(d);
  return n;
}

START_TEST(started_program_does_not_empty_the_jobs_trace)
{
  char path[PATH_MAX], child[PATH_MAX] = "";
  harness_run_t run;
  run_traced("exec_child", &run, path, sizeof path);
  FILE *f = fopen(path, "r");
  char header[256] = "", want[64];
  ck_assert_ptr_nonnull(f);
  ck_assert_ptr_nonnull(fgets(header, sizeof header, f));
  fclose(f);
  snprintf(want, sizeof want, " pid=%ld ", (long)run.pid);
  ck_assert_msg(strstr(header, want), "the job's trace begins %s", header);
  trace_summary_t s;
  summarize(path, &s);
  ck_assert_int_eq(s.actions[OL_TRACE_ALLOC], 1); /* the job's 3 MiB, no more */
  ck_assert(s.ends_with_end_line);
  ck_assert_int_eq(replayed_peak(path), 3 * MiB);
  ck_assert_msg(child_traces(child, sizeof child) == 1,
                "not one trace of the program the job started:\n%s", run.out);
  ck_assert_int_eq(replayed_peak(child), 1 * MiB);
}
END_TEST

/* A program the job starts that allocates nothing leaves no trace of its
 * own (held-out compiled_batch left a header-only PATH.<pid>), and the
 * job's trace is whole. */
START_TEST(started_program_that_allocates_nothing_leaves_no_trace)
{
  char path[PATH_MAX], child[PATH_MAX];
  harness_run_t run;
  run_traced("exec_idle_child", &run, path, sizeof path);
  ck_assert_int_eq(replayed_peak(path), 3 * MiB);
  ck_assert_msg(child_traces(child, sizeof child) == 0, "the idle program left a trace:\n%s",
                run.out);
}
END_TEST

START_TEST(unwritable_trace_does_not_hurt_job)
{
  const char *env[] = {"OOMLENS_TRACE=/nonexistent/dir/t.trace", NULL};
  const char *argv[] = {harness_env("OOMLENS_TEST_TRACE_PROG"), "mixed", NULL};
  harness_run_t run;
  harness_exec(&run, true, env, argv);
  ck_assert_msg(run.status == 0, "exit %d:\n%s", run.status, run.out);
  ck_assert_ptr_nonnull(strstr(run.out, "oomlens: warning: cannot write the trace: /nonexistent/dir/t.trace: cannot create it"));
  ol_json_t *r = harness_report(run.pid);
  ck_assert_ptr_nonnull(r); /* the report is written all the same */
  ol_json_free(r);
}
END_TEST

/* ---- the job's report against `oomlens report` of its trace ----------- */

/* Rows a trace cannot carry (core/account.c's list, docs/trace-format.md):
 * no event records reserving address space. */
static const char *const not_in_trace[] = {"| VMM address space "};

static bool in_trace(const char *line)
{
  for (size_t i = 0; i < sizeof not_in_trace / sizeof *not_in_trace; i++)
    if (strncmp(line, not_in_trace[i], strlen(not_in_trace[i])) == 0)
      return false;
  return true;
}

/* The device table of a text report: its lines from the first rule to the
 * last (every line of it starts with '|'), less what a trace cannot carry;
 * returns how many lines it had in all. */
static int table_of(const char *text, char *out, size_t cap)
{
  const char *at = strstr(text, "\n|===");
  ck_assert_msg(at, "no table in:\n%s", text);
  int lines = 0;
  size_t len = 0;
  out[0] = '\0';
  for (at++; *at == '|'; lines++) {
    const char *end = strchr(at, '\n');
    size_t n = end ? (size_t)(end - at) + 1 : strlen(at);
    if (in_trace(at)) {
      ck_assert_uint_lt(len + n, cap);
      memcpy(out + len, at, n);
      out[len += n] = '\0';
    }
    at += n;
  }
  return lines;
}

/* The cuda_prog scenario under env with its trace; the text of its live
 * report, and `oomlens report` of its trace in cli. */
static const char *job_and_trace_report(const char *scenario, const char *const env[],
                                        harness_run_t *cli)
{
  const char *argv[] = {harness_env("OOMLENS_TEST_PROG"), scenario, NULL};
  harness_run_t run;
  run_prog(&run, env, argv);
  ck_assert_msg(run.status == 0, "exit %d:\n%s", run.status, run.out);
  char path[PATH_MAX], report[PATH_MAX + 32];
  trace_path(run.pid, path, sizeof path);
  snprintf(report, sizeof report, "%s/r-%ld.txt", harness_dir(), (long)run.pid);
  const char *report_argv[] = {harness_env("OOMLENS_TEST_CLI"), "report", path, NULL};
  harness_exec(cli, false, NULL, report_argv);
  ck_assert_msg(cli->status == 0, "exit %d:\n%s", cli->status, cli->out);
  return harness_read_text(report);
}

/* The batch figure of a job that fitted reads the same from its trace:
 * the header's batch= and the outside line carry what no event does. */
START_TEST(trace_batch_figure_equals_live)
{
  const char *env[] = {"OOMLENS_CAPACITY=1G", "OOMLENS_BATCH=4", "SIMCU_EXTERNAL=100M", NULL};
  harness_run_t cli;
  const char *live = strstr(job_and_trace_report("train_fits", env, &cli), "Batch that fits: ");
  ck_assert_ptr_nonnull(live);
  ck_assert_ptr_nonnull(strstr(live, "with 100.00 MiB held outside the allocator"));
  static char line[1024];
  snprintf(line, sizeof line, "%.*s", (int)strcspn(live, "\n"), live);
  ck_assert_msg(strstr(cli.out, line), "live: %s\ntrace:\n%s", line, cli.out);
}
END_TEST

/* The batch given, but nothing repeats (a job of a few allocations): the
 * report says why it names no batch, live and from the trace. */
START_TEST(no_batch_figure_is_said_with_its_reason)
{
  const char *env[] = {"OOMLENS_CAPACITY=1G", "OOMLENS_BATCH=4", NULL};
  harness_run_t cli;
  const char *live = job_and_trace_report("runtime", env, &cli);
  const char *why = "Batch that fits: not known: no iteration was found";
  ck_assert_msg(strstr(live, why), "%s", live);
  ck_assert_msg(strstr(cli.out, why), "%s", cli.out);
}
END_TEST

/* The same job's figures live and from its trace: every row of the table
 * the live report shows (by pool; the OOM counts) reads the same from
 * `oomlens report TRACE`, but what a trace cannot carry. Call sites on. */
START_TEST(trace_report_table_equals_live)
{
  const char *env[] = {"OOMLENS_STACKS=1", NULL};
  harness_run_t cli;
  static char live[16384], traced[16384];
  int live_lines = table_of(job_and_trace_report("oom_leak", env, &cli), live, sizeof live);
  ck_assert_int_eq(table_of(cli.out, traced, sizeof traced), live_lines);
  ck_assert_int_ge(live_lines, 40); /* the whole table */
  for (char *a = live, *b = traced; *a || *b;) { /* line by line, to name the first apart */
    size_t n = strcspn(a, "\n"), m = strcspn(b, "\n");
    ck_assert_msg(n == m && strncmp(a, b, n) == 0, "live:  %.*s\ntrace: %.*s", (int)n, a, (int)m,
                  b);
    a += n + (a[n] != '\0');
    b += m + (b[m] != '\0');
  }
  /* ... and it is a real comparison: the job ran out, its tensors active. */
  ck_assert_ptr_nonnull(strstr(live, "| CUDA OOMs: 1 "));
  ck_assert_ptr_nonnull(strstr(live, "| failed allocations: 1 "));
  ck_assert_ptr_null(strstr(live, "| Active memory         |        0 B |"));
}
END_TEST

/* ---- replay diagnoses the recorded OOM ---------------------------------- */

typedef struct recorded_case {
  const char *scenario;
  const char *env[5];
  bool policy_fits; /* the oomlens policy fits on the replayed device (nothing held outside) */
} recorded_case_t;

/* Jobs that ran out on the simulated device, live; each trace, replayed,
 * gives the live report's diagnosis: the account's figures from the
 * events, the rest from the trace's oom_context line. The first is the
 * issue's case: a leak under manage mode with 600 MiB held outside the
 * allocator, which the oomlens policy alone would fit. */
static const recorded_case_t recorded_cases[] = {
  {"oom_leak", {"OOMLENS_MANAGE=1", "SIMCU_CAPACITY=2G", "SIMCU_EXTERNAL=600M", NULL}, true},
  {"oom_activations", {"PYTORCH_NO_CUDA_MEMORY_CACHING=1", "SIMCU_CAPACITY=8G",
                       "OOMLENS_CAPACITY=1G", "SIMCU_EXTERNAL=0", NULL}, false},
  {"oom_external", {"PYTORCH_NO_CUDA_MEMORY_CACHING=1", "SIMCU_CAPACITY=1G",
                    "SIMCU_EXTERNAL=700M", NULL}, true},
};

static const char *const recorded_fields[] = {
  "request", "capacity", "device_free", "allocated", "reserved", "free_reserved",
  "largest_free_block", "external", "persistent", "transient", "iterations",
  "growth_per_iteration", "allocations_made",
};

START_TEST(trace_replays_to_the_live_diagnosis)
{
  const recorded_case_t *c = &recorded_cases[_i];
  const char *argv[] = {harness_env("OOMLENS_TEST_PROG"), c->scenario, NULL};
  harness_run_t run, cli;
  run_prog(&run, c->env, argv);
  ck_assert_msg(run.status == 0, "exit %d:\n%s", run.status, run.out);
  ol_json_t *live = harness_report(run.pid);
  ck_assert_ptr_nonnull(live);
  char path[PATH_MAX];
  trace_path(run.pid, path, sizeof path);

  ol_policy_options_t options = {.capacity = (uint64_t)harness_int(live, DEV "oom.capacity")};
  ol_replay_result_t result;
  ol_error_t err;
  ck_assert_msg(ol_replay_file(path, ol_policy_find("oomlens"), &options, &result, &err) == 0,
                "%s", err.text);
  ck_assert(result.recorded);
  ck_assert(result.recorded_oom.has_context);
  ck_assert_uint_eq(result.recorded_ooms, (uint64_t)harness_int(live, DEV "num_ooms"));
  ol_buf_t text = {0};
  ol_oom_json(&text, &result.recorded_oom.record, result.recorded_oom.cause, NULL, NULL);
  ck_assert(!text.failed);
  ol_json_t *replayed = ol_json_parse(text.data, text.len, NULL, 0);
  ck_assert_ptr_nonnull(replayed);
  const char *live_class = ol_json_string(ol_json_path(live, DEV "oom.class"));
  ck_assert_str_eq(ol_json_string(ol_json_get(replayed, "class")), live_class);
  ck_assert_str_eq(ol_oom_class_name(result.recorded_oom.job_cause), live_class);
  /* `oomlens report` of the trace diagnoses it the same way */
  ol_report_t view;
  ck_assert_msg(ol_view_load_trace(&view, path, &err) == 0, "%s", err.text);
  ck_assert(view.devices[0].diagnosed);
  ck_assert_str_eq(ol_oom_class_name(view.devices[0].stats.last_oom_class), live_class);
  ck_assert_int_eq(view.devices[0].stats.last_oom.allocated, harness_int(live, DEV "oom.allocated"));
  ck_assert_int_eq(view.devices[0].stats.last_oom.external, harness_int(live, DEV "oom.external"));
  ol_report_free(&view);
  for (size_t i = 0; i < sizeof recorded_fields / sizeof *recorded_fields; i++) {
    char at[96];
    snprintf(at, sizeof at, DEV "oom.%s", recorded_fields[i]);
    ck_assert_msg(harness_int(live, at) ==
                    (int64_t)ol_json_number(ol_json_get(replayed, recorded_fields[i])),
                  "%s %s: live %lld", c->scenario, recorded_fields[i],
                  (long long)harness_int(live, at));
  }
  ck_assert_str_eq(ol_json_string(ol_json_get(replayed, "advice")),
                   ol_json_string(ol_json_path(live, DEV "oom.advice")));
  ck_assert(result.oom != c->policy_fits);
  ol_json_free(replayed);
  ol_buf_free(&text);
  ol_replay_result_free(&result);

  /* What the command line says of it: why the job ran out, and that the
   * policy served the trace (or not); "would fit" only where it also fits
   * beside what the job's device held outside the allocator (these jobs'
   * others held 600-700 MiB of 1-2 GiB: not shown). */
  const char *replay_argv[] = {harness_env("OOMLENS_TEST_CLI"), "replay", path, NULL};
  harness_exec(&cli, false, NULL, replay_argv);
  ck_assert_msg(cli.status == 0, "exit %d:\n%s", cli.status, cli.out);
  char says[128];
  snprintf(says, sizeof says, "  why:            out of memory (%s", live_class);
  ck_assert_msg(strstr(cli.out, "recorded OOM:     the job ran out at line ") &&
                  strstr(cli.out, says), "%s", cli.out);
  ck_assert_msg((strstr(cli.out, "the oomlens policy served every request") != NULL) ==
                  c->policy_fits, "%s", cli.out);
  ck_assert_msg(!strstr(cli.out, "this policy:      would fit") ||
                  !strstr(cli.out, "is more than the"), "%s", cli.out);
  ol_json_free(live);
}
END_TEST

/* The memory_viz export of a trace the library wrote on the simulated
 * device: in the opcodes PyTorch's web viewer reads, its entries on the
 * wall clock (from the trace's start_unix_us), and its OOM entry's free
 * memory what the job's own report says the device had free. */
START_TEST(trace_exports_for_the_viewer)
{
  const char *argv[] = {harness_env("OOMLENS_TEST_TRACE_PROG"), "mixed", NULL};
  harness_run_t run, cli;
  run_prog(&run, NULL, argv);
  ck_assert_msg(run.status == 0, "exit %d:\n%s", run.status, run.out);
  char path[PATH_MAX], pickle[PATH_MAX + 32], command[3 * PATH_MAX], got[256] = "", want[256];
  trace_path(run.pid, path, sizeof path);
  snprintf(pickle, sizeof pickle, "%s/t.pickle", harness_dir());
  const char *export_argv[] = {harness_env("OOMLENS_TEST_CLI"), "export", path, "--format",
                               "memory-viz", "-o", pickle, NULL};
  harness_exec(&cli, false, NULL, export_argv);
  ck_assert_msg(cli.status == 0, "exit %d:\n%s", cli.status, cli.out);
  ol_test_check_viewer_opcodes(pickle, "the mixed job's trace");

  ol_error_t err;
  ol_trace_t *t = ol_trace_open(path, &err);
  ck_assert_msg(t, "%s", err.text);
  unsigned long long start = (unsigned long long)ol_trace_start_unix_us(t);
  ol_trace_close(t);
  ck_assert_uint_gt(start, 0);
  ol_json_t *r = harness_report(run.pid);
  ck_assert_ptr_nonnull(r);
  snprintf(want, sizeof want, "%d [%lld]\n", 1, (long long)harness_int(r, DEV "oom.device_free"));
  ol_json_free(r);
  snprintf(command, sizeof command,
           "python3 -c 'import pickle,sys; e=pickle.load(open(sys.argv[1],\"rb\"))"
           "[\"device_traces\"][0]; print(int(min(x[\"time_us\"] for x in e) >= %llu), "
           "[x[\"device_free\"] for x in e if x[\"action\"]==\"oom\"])' '%s'", start, pickle);
  FILE *p = popen(command, "r");
  ck_assert_ptr_nonnull(p);
  got[fread(got, 1, sizeof got - 1, p)] = '\0';
  ck_assert_int_eq(pclose(p), 0);
  ck_assert_str_eq(got, want);
}
END_TEST

/* ---- a trace nobody reads: the job never waits for it ----------------- */

#define WRITER_WAIT_S 1.0 /* the longest exit or SIGTERM waits for a stuck writer (README) */
#define ENDING_LIMIT_S 5.0 /* the longest a SIGTERM of ours waits for its report (README) */
#define SLACK_S 3.0        /* a loaded machine (the old waits were 10 s and forever) */

/* A FIFO in the test's folder, OOMLENS_TRACE naming it in env_out. With
 * a reader, its read end is opened here and never read: the job's open
 * succeeds, and its writes stop once the pipe is full. Returns that fd
 * (-1 without a reader). */
static int fifo_trace(bool with_reader, char *env_out, size_t cap)
{
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/stalled.fifo", harness_dir());
  ck_assert_int_eq(mkfifo(path, 0600), 0);
  snprintf(env_out, cap, "OOMLENS_TRACE=%s", path);
  if (!with_reader)
    return -1;
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ck_assert_int_ge(fd, 0);
  return fd;
}

/* The number the program wrote after "name=". */
static double said(const harness_run_t *run, const char *name)
{
  char key[64];
  snprintf(key, sizeof key, "%s=", name);
  const char *at = strstr(run->out, key);
  ck_assert_msg(at, "the program did not say %s:\n%s", name, run->out);
  return strtod(at + strlen(key), NULL);
}

static void report_says(pid_t pid, const char *reason)
{
  ol_json_t *r = harness_report(pid);
  ck_assert_msg(r, "no report");
  ck_assert_str_eq(ol_json_string(ol_json_path(r, "reason")), reason);
  ol_json_free(r);
}

/* A reader that stopped reading: every allocation is served at once (the
 * hooks never wait for the writer), tracing stops with one warning, and
 * exit waits for the stuck writer at most WRITER_WAIT_S. Was: 10 s. */
START_TEST(stalled_reader_holds_up_nothing)
{
  char trace_env[PATH_MAX + 32];
  int reader = fifo_trace(true, trace_env, sizeof trace_env);
  const char *env[] = {trace_env, NULL};
  const char *argv[] = {harness_env("OOMLENS_TEST_TRACE_PROG"), "stalled", NULL};
  harness_run_t run;
  harness_spawn(&run, true, env, argv);
  harness_finish(&run, 60);
  close(reader);
  ck_assert_msg(!run.timed_out && run.status == 0, "exit %d:\n%s", run.status, run.out);
  ck_assert_double_lt(said(&run, "longest_call"), 1.0);
  double exit_took = run.ended_at - said(&run, "exit_at");
  ck_assert_msg(exit_took < WRITER_WAIT_S + SLACK_S, "exit took %.2f s:\n%s", exit_took, run.out);
  ck_assert_ptr_nonnull(strstr(run.out, "the disk cannot keep up"));
  report_says(run.pid, "exit");
}
END_TEST

/* The same, ended by SIGTERM while the writer is stuck: the job ends as
 * the signal asks, its report written, within WRITER_WAIT_S. Was: 10 s. */
START_TEST(stalled_reader_sigterm_ends_soon)
{
  char trace_env[PATH_MAX + 32];
  int reader = fifo_trace(true, trace_env, sizeof trace_env);
  const char *env[] = {trace_env, NULL};
  const char *argv[] = {harness_env("OOMLENS_TEST_TRACE_PROG"), "stalled_sigterm", NULL};
  harness_run_t run;
  harness_spawn(&run, true, env, argv);
  harness_finish(&run, 60);
  close(reader);
  ck_assert_msg(!run.timed_out && run.status == 128 + SIGTERM, "exit %d:\n%s", run.status,
                run.out);
  double took = run.ended_at - said(&run, "sigterm_at");
  ck_assert_msg(took < WRITER_WAIT_S + SLACK_S, "SIGTERM took %.2f s:\n%s", took, run.out);
  report_says(run.pid, "SIGTERM");
}
END_TEST

/* A thread stuck while opening the trace (a FIFO nobody opened, without
 * O_NONBLOCK): a SIGTERM still ends the job, with its report. Was: the
 * report thread waited for the lock the open held; only SIGKILL ended it. */
START_TEST(sigterm_ends_job_stuck_in_trace_open)
{
  char trace_env[PATH_MAX + 32];
  fifo_trace(false, trace_env, sizeof trace_env);
  const char *env[] = {trace_env, NULL};
  const char *argv[] = {harness_env("OOMLENS_TEST_TRACE_PROG"), "until_signal", NULL};
  harness_run_t run;
  harness_spawn(&run, true, env, argv);
  usleep(500000); /* at its first allocation by now, opening the trace */
  double sent = harness_now();
  kill(run.pid, SIGTERM);
  harness_finish(&run, 20);
  ck_assert_msg(!run.timed_out && run.status == 128 + SIGTERM, "exit %d:\n%s", run.status,
                run.out);
  double took = run.ended_at - sent;
  ck_assert_msg(took < ENDING_LIMIT_S + SLACK_S, "SIGTERM took %.2f s:\n%s", took, run.out);
  report_says(run.pid, "SIGTERM");
}
END_TEST

/* ---- the writer's failure paths, in-process (each in a child) --------- */

static int in_child(int (*body)(void))
{
  fflush(NULL);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0)
    _exit(body());
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* A file that stops growing (a full disk): tracing stops, calls go on. */
static int full_disk(void)
{
  char path[PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/full.trace", harness_dir());
  struct rlimit limit = {1 << 20, 1 << 20};
  signal(SIGXFSZ, SIG_IGN);
  if (setrlimit(RLIMIT_FSIZE, &limit) != 0 || ol_tracefile_open(path) != 0)
    return 10;
  for (int i = 0; i < 2000000 && ol_tracefile_taking(); i++) {
    ol_tracefile_event(OL_TRACE_ALLOC, (uint64_t)i << 9, 512, 0, -1, 0);
    if (i % 100000 == 0)
      ol_tracefile_flush();
  }
  if (ol_tracefile_taking())
    return 11; /* 2M events are far more than 1 MiB of text */
  ol_tracefile_event(OL_TRACE_ALLOC, 1, 1, 0, -1, 0); /* ignored, no harm */
  ol_tracefile_close();
  struct stat st;
  return stat(path, &st) == 0 && st.st_size <= (1 << 20) ? 0 : 12;
}

START_TEST(full_disk_stops_tracing)
{
  ck_assert_int_eq(in_child(full_disk), 0);
}
END_TEST

static int reader_fd = -1;
static char drained_tail[256];

/* Reads the pipe to its end once asked, keeping the last bytes. */
static void *drain(void *arg)
{
  (void)arg;
  char buf[65536];
  ssize_t n;
  int flags = fcntl(reader_fd, F_GETFL);
  fcntl(reader_fd, F_SETFL, flags & ~O_NONBLOCK);
  size_t kept = 0;
  while ((n = read(reader_fd, buf, sizeof buf)) > 0) {
    size_t take = (size_t)n < sizeof drained_tail - 1 ? (size_t)n : sizeof drained_tail - 1;
    memmove(drained_tail, buf + n - take, take);
    kept = take;
  }
  drained_tail[kept] = '\0';
  return NULL;
}

static double seconds(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A reader that never reads (a disk that cannot keep up): no call waits
 * long, tracing stops, and the end line says why. */
static int slow_disk(void)
{
  char path[PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/slow.fifo", harness_dir());
  if (mkfifo(path, 0600) != 0 || (reader_fd = open(path, O_RDONLY | O_NONBLOCK)) < 0)
    return 10;
  if (ol_tracefile_open(path) != 0)
    return 11;
  double longest = 0;
  for (int i = 0; i < 5000000 && ol_tracefile_taking(); i++) {
    double t0 = seconds();
    ol_tracefile_event(OL_TRACE_ALLOC, (uint64_t)i << 9, 512, 0, -1, 0);
    double took = seconds() - t0;
    longest = took > longest ? took : longest;
  }
  if (ol_tracefile_taking())
    return 12;
  if (longest > 1.0)
    return 13; /* no hook waits for the writer; a loaded machine gets slack */
  uint64_t dropped = ol_tracefile_dropped();
  for (int i = 0; i < 10; i++)
    ol_tracefile_event(OL_TRACE_FREE_COMPLETED, (uint64_t)i << 9, 512, 0, -1, 0);
  if (ol_tracefile_dropped() != dropped + 10)
    return 15; /* what comes after the stop is counted */
  char want[64];
  snprintf(want, sizeof want, "dropped=%llu incomplete: the disk cannot keep up",
           (unsigned long long)dropped + 10);
  pthread_t t;
  pthread_create(&t, NULL, drain, NULL);
  ol_tracefile_close();
  pthread_join(t, NULL);
  return strstr(drained_tail, want) ? 0 : 14;
}

START_TEST(slow_disk_stops_tracing)
{
  ck_assert_int_eq(in_child(slow_disk), 0);
}
END_TEST

static int dev_full_at_open(void)
{
  return ol_tracefile_open("/dev/full") == -1 && !ol_tracefile_on() ? 0 : 1;
}

START_TEST(unwritable_header_means_no_trace)
{
  ck_assert_int_eq(in_child(dev_full_at_open), 0);
}
END_TEST

/* A disk full from the start (RLIMIT_FSIZE 0, SIGXFSZ ignored): the file
 * created for the trace goes again. Before: a 0-byte trace was left. */
static int header_past_the_limit(void)
{
  char path[PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/empty.trace", harness_dir());
  struct rlimit limit = {0, 0};
  signal(SIGXFSZ, SIG_IGN);
  if (setrlimit(RLIMIT_FSIZE, &limit) != 0)
    return 10;
  if (ol_tracefile_open(path) != -1 || ol_tracefile_on())
    return 11;
  return access(path, F_OK) != 0 ? 0 : 12;
}

START_TEST(unwritable_header_leaves_no_file)
{
  ck_assert_int_eq(in_child(header_past_the_limit), 0);
}
END_TEST

static Suite *trace_file_suite(void)
{
  Suite *s = suite_create("trace_file");
  TCase *job = tcase_create("job");
  tcase_add_checked_fixture(job, harness_setup, harness_teardown);
  tcase_set_timeout(job, 60);
  tcase_add_test(job, every_event_without_stacks);
  tcase_add_test(job, trace_exports_for_the_viewer);
  tcase_add_test(job, sites_written_once);
  tcase_add_test(job, sigterm_leaves_complete_trace);
  tcase_add_test(job, stalled_reader_holds_up_nothing);
  tcase_add_test(job, stalled_reader_sigterm_ends_soon);
  tcase_add_test(job, sigterm_ends_job_stuck_in_trace_open);
  tcase_add_test(job, usr1_puts_trace_on_disk);
  tcase_add_test(job, forked_child_has_its_own_trace);
  tcase_add_test(job, started_program_does_not_empty_the_jobs_trace);
  tcase_add_test(job, started_program_that_allocates_nothing_leaves_no_trace);
  tcase_add_test(job, unwritable_trace_does_not_hurt_job);
  tcase_add_test(job, trace_report_table_equals_live);
  tcase_add_test(job, trace_batch_figure_equals_live);
  tcase_add_test(job, no_batch_figure_is_said_with_its_reason);
  tcase_add_loop_test(job, trace_replays_to_the_live_diagnosis, 0,
                      sizeof recorded_cases / sizeof *recorded_cases);
  suite_add_tcase(s, job);
  TCase *writer = tcase_create("writer");
  tcase_add_checked_fixture(writer, harness_setup, harness_teardown);
  tcase_set_timeout(writer, 60);
  tcase_add_test(writer, full_disk_stops_tracing);
  tcase_add_test(writer, slow_disk_stops_tracing);
  tcase_add_test(writer, unwritable_header_means_no_trace);
  tcase_add_test(writer, unwritable_header_leaves_no_file);
  suite_add_tcase(s, writer);
  return s;
}

int main(void)
{
  return ol_run_suite(trace_file_suite());
}
