/* test_replay.c: the replay driver on small synthetic traces (address
 * mapping, unknown frees, the trace's oom event, stopping at the policy's
 * OOM) and `oomlens replay` as a user runs it: text and --json output,
 * exit codes, malformed traces reported with their line number. */
#include <check.h>

#include "check_run.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "json.h"
#include "policy.h"
#include "pytorch_model.h"
#include "replay.h"

#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)
#define HEADER "# time_us,action,addr,size,stream,frames\n"

static char dir[OL_TEST_DIR_MAX];
static char path[512];

static void setup(void)
{
  ol_test_make_dir(dir, sizeof dir, "replay");
  snprintf(path, sizeof path, "%s/t.csv", dir);
}

static void teardown(void)
{
  ol_test_remove_tree(dir);
}

static const char *write_trace(const char *text)
{
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  fclose(f);
  return path;
}

static ol_replay_result_t run_text(const char *text, uint64_t capacity, int want_rc,
                                   ol_error_t *err)
{
  ol_policy_options_t options = {.capacity = capacity};
  ol_replay_result_t r;
  int rc = ol_replay_file(write_trace(text), &ol_policy_pytorch, &options, &r, err);
  ck_assert_msg(rc == want_rc, "rc %d: %s", rc, err->text);
  ol_replay_result_free(&r); /* these tests do not look at call sites */
  return r;
}

START_TEST(maps_addresses_and_counts)
{
  ol_error_t err;
  ol_replay_result_t r = run_text(HEADER
                                  "1,alloc,0xa000,1048576,0,\n"
                                  "2,alloc,0xb000,1048576,0,\n"
                                  "3,free_requested,0xa000,1048576,0,\n"
                                  "4,free_completed,0xa000,1048576,0,\n"
                                  "5,free_completed,0xdead,512,0,\n"
                                  "6,segment_alloc,0x1,2097152,0,\n"
                                  "7,alloc,0xc000,1048576,0,\n"
                                  "8,alloc,0x0,0,0,\n",
                                  GiB, 0, &err);
  ck_assert_uint_eq(r.events, 8);
  ck_assert_uint_eq(r.allocs, 3);
  ck_assert_uint_eq(r.frees, 1);
  ck_assert_uint_eq(r.unknown_frees, 1);
  ck_assert_uint_eq(r.zero_allocs, 1);
  ck_assert(!r.oom);
  ck_assert_int_eq(r.peak_requested, (int64_t)(2 * MiB));
  /* The freed 1 MiB was reused: one 2 MiB small segment all along. */
  ck_assert_int_eq(r.stats.reserved_peak, (int64_t)(2 * MiB));
  ck_assert_int_eq(r.stats.allocated, (int64_t)(2 * MiB));
}
END_TEST

/* The recorded run's failed request is tried, and released when served. */
START_TEST(trace_oom_served_and_released)
{
  ol_error_t err;
  ol_replay_result_t r = run_text(HEADER
                                  "1,alloc,0xa000,31457280,0,\n"
                                  "2,oom,0x0,31457280,0,\n"
                                  "3,alloc,0xb000,31457280,0,\n",
                                  GiB, 0, &err);
  ck_assert(!r.oom);
  ck_assert_uint_eq(r.trace_ooms, 1);
  ck_assert_int_eq(r.stats.allocated, (int64_t)(60 * MiB));
  ck_assert_int_eq(r.stats.reserved, (int64_t)(60 * MiB)); /* the oom's block was reused */
  ck_assert_int_eq(r.peak_requested, (int64_t)(60 * MiB));
}
END_TEST

START_TEST(stops_at_first_oom)
{
  ol_error_t err;
  ol_replay_result_t r = run_text(HEADER
                                  "1,alloc,0xa000,31457280,0,\n"
                                  "# a comment\n"
                                  "2,alloc,0xb000,41943040,0,\n"
                                  "3,alloc,0xc000,512,0,\n",
                                  64 * MiB, 0, &err);
  ck_assert(r.oom);
  ck_assert(!r.oom_at.recorded);
  ck_assert_uint_eq(r.oom_at.event_index, 1);
  ck_assert_uint_eq(r.oom_at.line, 4);
  ck_assert_uint_eq(r.oom_at.size, 40 * MiB);
  ck_assert_int_eq(r.oom_at.stats.allocated, (int64_t)(30 * MiB));
  ck_assert_int_eq(r.oom_at.stats.reserved, (int64_t)(30 * MiB));
  ck_assert_uint_eq(r.events, 2); /* the last line was never read */
}
END_TEST

START_TEST(malformed_is_an_error)
{
  ol_error_t err;
  run_text(HEADER "1,alloc,0xa000,512,0,\n2,alloc,0xzz,512,0,\n", GiB, -1, &err);
  ck_assert_msg(strstr(err.text, "t.csv:3: addr '0xzz' is not a hex address") != NULL, "%s",
                err.text);
  ck_assert_int_eq(err.status, OL_EXIT_USAGE); /* a bad input file, not our failure */
}
END_TEST

/* ---- following the live pool ---------------------------------------------- */

#define OURS "# oomlens-trace 2 pid=1 rank=0 start_unix_us=0 stacks=0 manage=1\n" \
             "# time_us,action,addr,size,stream,site,device\n"                        \
             "device,0,1073741824\n"

static ol_replay_result_t run_pool(const char *text)
{
  ol_policy_options_t options = {.capacity = GiB};
  ol_replay_result_t r;
  ol_error_t err;
  ck_assert_msg(ol_replay_file(write_trace(text), ol_policy_find("oomlens"), &options, &r, &err) == 0,
                "%s", err.text);
  ol_replay_result_free(&r);
  return r;
}

/* A manage-mode trace: A's free was held behind the live pool's fence
 * until after C was served (pool_held, pool_freed), so C needed chunks of
 * its own and D took A's; E was freed and held on its stream and taken
 * back there by the next request; F was left to the driver (its own
 * segment). The replayed pool does the same: 4 chunks mapped, no more.
 * Was (issue 16): A went back at its free and C took its chunks, so D
 * mapped its own, and F took a chunk of the pool's (5). */
START_TEST(follows_the_live_pool)
{
  ol_replay_result_t r = run_pool(OURS
                                  "1,alloc,0x10000000,4194304,0,,0\n"
                                  "2,free_requested,0x10000000,4194304,0,,0\n"
                                  "3,free_completed,0x10000000,4194304,0,,0\n"
                                  "pool_held,0,0x10000000\n"
                                  "4,alloc,0x10400000,4194304,0,,0\n"
                                  "pool_freed,0,0x10000000\n"
                                  "5,alloc,0x10000000,4194304,0,,0\n"
                                  "6,free_requested,0x10400000,4194304,7,,0\n"
                                  "7,free_completed,0x10400000,4194304,7,,0\n"
                                  "pool_held,0,0x10400000\n"
                                  "8,alloc,0x10400000,4194304,7,,0\n"
                                  "9,segment_alloc,0x7f0000000,4,0,,0\n"
                                  "10,alloc,0x7f0000000,4,0,,0\n"
                                  "11,free_requested,0x7f0000000,4,0,,0\n"
                                  "12,free_completed,0x7f0000000,4,0,,0\n"
                                  "13,segment_free,0x7f0000000,4,0,,0\n");
  ck_assert_int_eq(r.stats.calls.maps, 4);
  ck_assert_int_eq(r.stats.reserved_peak, (int64_t)(8 * MiB));
  ck_assert_int_eq(r.stats.allocated, (int64_t)(8 * MiB));
  ck_assert_uint_eq(r.held_frees, 2);
  ck_assert_uint_eq(r.driver_allocs, 1);
  ck_assert_uint_eq(r.allocs, 4 + 1);
  ck_assert_uint_eq(r.events, 13); /* the pool lines are not events */
}
END_TEST

/* A trace recorded with OOMLENS_POOL_UNIT=4 says so in its header, and
 * replay maps in the same extents (16 MiB: two of 4 chunks, not 8 chunks)
 * unless --map-unit says otherwise. */
START_TEST(maps_in_the_recorded_unit)
{
  static const char *const units[] = {" pool_unit=4", ""};
  static const int64_t maps[] = {2, 8};
  char text[512];
  snprintf(text, sizeof text,
           "# oomlens-trace 2 pid=1 rank=0 start_unix_us=0 stacks=0 manage=1%s\n"
           "# time_us,action,addr,size,stream,site,device\n"
           "device,0,1073741824\n"
           "1,alloc,0x10000000,16777216,0,,0\n",
           units[_i]);
  ol_replay_result_t r = run_pool(text);
  ck_assert_int_eq(r.stats.calls.maps, maps[_i]);
}
END_TEST

/* Without manage=1 an allocation with its own segment is the job's (a
 * cudaMalloc seen in observe mode): the policy serves it. A pool line
 * for a block whose free the policy already has, or for no held block,
 * changes nothing. */
START_TEST(segments_are_the_jobs_without_manage)
{
  ol_replay_result_t r = run_pool("# oomlens-trace 2 pid=1 rank=0 start_unix_us=0 stacks=0\n"
                                  "# time_us,action,addr,size,stream,site,device\n"
                                  "device,0,1073741824\n"
                                  "1,segment_alloc,0x7f0000000,4194304,0,,0\n"
                                  "2,alloc,0x7f0000000,4194304,0,,0\n"
                                  "3,free_requested,0x7f0000000,4194304,0,,0\n"
                                  "4,free_completed,0x7f0000000,4194304,0,,0\n"
                                  "5,segment_free,0x7f0000000,4194304,0,,0\n"
                                  "6,alloc,0x7f0000000,2097152,0,,0\n"
                                  "pool_freed,0,0x7f0000000\n"
                                  "pool_held,0,0x12345000\n");
  ck_assert_uint_eq(r.driver_allocs, 0);
  ck_assert_uint_eq(r.held_frees, 0);
  ck_assert_int_eq(r.stats.calls.maps, 2);
  ck_assert_int_eq(r.stats.allocated, (int64_t)(2 * MiB));
}
END_TEST

/* ---- the command line ------------------------------------------------------ */

typedef struct cli_run {
  int status;
  char out[16384];
  char err[4096];
} cli_run_t;

static void slurp(int fd, char *buf, size_t cap)
{
  size_t len = 0;
  ssize_t n;
  while ((n = read(fd, buf + len, cap - 1 - len)) > 0 && len + (size_t)n < cap - 1)
    len += (size_t)n;
  if (n > 0)
    len += (size_t)n;
  buf[len] = '\0';
}

/* Runs `oomlens replay ARGS...` with stdout and stderr kept apart. */
static void cli(cli_run_t *run, const char *const args[])
{
  const char *exe = getenv("OOMLENS_TEST_CLI");
  ck_assert_msg(exe != NULL, "OOMLENS_TEST_CLI is not set");
  char out_path[600], err_path[600];
  snprintf(out_path, sizeof out_path, "%s/out", dir);
  snprintf(err_path, sizeof err_path, "%s/err", dir);
  const char *argv[16] = {exe, "replay"};
  int argc = 2;
  for (int i = 0; args[i] && argc < 15; i++)
    argv[argc++] = args[i];
  argv[argc] = NULL;
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    if (!freopen(out_path, "w", stdout) || !freopen(err_path, "w", stderr))
      _exit(127);
    execv(exe, (char *const *)argv);
    _exit(127);
  }
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  run->status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  FILE *f = fopen(out_path, "r");
  ck_assert_ptr_nonnull(f);
  slurp(fileno(f), run->out, sizeof run->out);
  fclose(f);
  f = fopen(err_path, "r");
  ck_assert_ptr_nonnull(f);
  slurp(fileno(f), run->err, sizeof run->err);
  fclose(f);
  unlink(out_path);
  unlink(err_path);
}

static const char *data(const char *name)
{
  static char buf[4][512];
  static int next;
  char *out = buf[next++ % 4];
  const char *root = getenv("OOMLENS_TEST_DATA");
  snprintf(out, 512, "%s/%s", root ? root : OL_TEST_DATA_DIR, name);
  return out;
}

static ol_json_t *parse_out(const cli_run_t *run)
{
  char err[256];
  ol_json_t *root = ol_json_parse(run->out, strlen(run->out), err, sizeof err);
  ck_assert_msg(root != NULL, "%s in: %s", err, run->out);
  return root;
}

START_TEST(cli_json_no_oom)
{
  cli_run_t run;
  cli(&run, (const char *[]){data("resnet50.csv.gz"), "--json", "--policy", "pytorch", NULL});
  ck_assert_msg(run.status == 0, "%d: %s", run.status, run.err);
  ol_json_t *root = parse_out(&run);
  ck_assert_str_eq(ol_json_string(ol_json_get(root, "policy")), "pytorch");
  ck_assert_int_eq(ol_json_path_int64(root, "capacity", -1), (int64_t)OL_REPLAY_DEFAULT_CAPACITY);
  ck_assert_int_eq(ol_json_path_int64(root, "events", -1), 15659);
  ck_assert_int_eq(ol_json_path_int64(root, "peak_reserved", -1), 7295991808);
  ck_assert_int_gt(ol_json_path_int64(root, "peak_allocated", -1), 6000000000);
  double ratio = ol_json_number(ol_json_get(root, "ratio"));
  ck_assert(ratio > 1.19 && ratio < 1.22);
  ck_assert_int_eq(ol_json_kind(ol_json_get(root, "oom")), OL_JSON_NULL);
  ol_json_free(root);
}
END_TEST

START_TEST(cli_json_oom)
{
  cli_run_t run;
  cli(&run, (const char *[]){"--capacity", "6G", "--policy=pytorch", data("frag.csv.gz"), "--json",
                             NULL});
  ck_assert_msg(run.status == 0, "%d: %s", run.status, run.err);
  ol_json_t *root = parse_out(&run);
  ck_assert_int_eq(ol_json_path_int64(root, "capacity", -1), 6 * (int64_t)GiB);
  const ol_json_t *oom = ol_json_get(root, "oom");
  ck_assert_int_eq(ol_json_kind(oom), OL_JSON_OBJECT);
  ck_assert_int_eq(ol_json_path_int64(oom, "line", -1), 810);
  ck_assert_int_eq(ol_json_path_int64(oom, "event_index", -1), 808);
  ck_assert_int_eq(ol_json_path_int64(oom, "size", -1), 1080033280);
  const char *fields[] = {"allocated", "reserved", "free_reserved", "largest_free_block"};
  for (size_t i = 0; i < 4; i++)
    ck_assert_int_gt(ol_json_path_int64(oom, fields[i], -1), 0);
  bool recorded = false;
  ck_assert(ol_json_bool(ol_json_get(oom, "recorded"), &recorded) && recorded);
  ol_json_free(root);
}
END_TEST

/* A job with call sites reads no step's repeat by its sizes: the OOM's
 * step_repeat_held says -1 (none), as the live report's does; the
 * replay's record of an OOM said 0, a repeat holding nothing more
 * (session 38, found in review). */
START_TEST(cli_no_step_repeat_read_with_call_sites)
{
  cli_run_t run;
  cli(&run, (const char *[]){"--capacity", "8G", data("oom/impossible.trace.xz"), "--json", NULL});
  ck_assert_msg(run.status == 0, "%d: %s", run.status, run.err);
  ol_json_t *root = parse_out(&run);
  const ol_json_t *diagnosis = ol_json_get(ol_json_get(root, "oom"), "diagnosis");
  ck_assert_int_eq(ol_json_kind(diagnosis), OL_JSON_OBJECT);
  bool roles = false;
  ck_assert(ol_json_bool(ol_json_get(diagnosis, "roles_known"), &roles) && roles);
  ck_assert_int_eq(ol_json_path_int64(diagnosis, "step_repeat_held", 0), -1);
  ol_json_free(root);
}
END_TEST

/* peak_sites as the report lists sites: frames joined " < ", every entry
 * (all the bytes live at the peak), the text the same names. */
START_TEST(cli_peak_sites_named_as_the_report)
{
  cli_run_t run;
  cli(&run, (const char *[]){data("gpt2.csv.gz"), "--json", NULL});
  ck_assert_msg(run.status == 0, "%d: %s", run.status, run.err);
  ol_json_t *root = parse_out(&run);
  const ol_json_t *sites = ol_json_get(root, "peak_sites");
  ck_assert_uint_gt(ol_json_length(sites), 1);
  int64_t sum = 0;
  for (size_t i = 0; i < ol_json_length(sites); i++) {
    const char *site = ol_json_string(ol_json_get(ol_json_at(sites, i), "site"));
    ck_assert_msg(site && !strchr(site, ';'), "site %s", site);
    ck_assert_int_ge(ol_json_path_int64(ol_json_at(sites, i), "stacks", -1), 1);
    sum += ol_json_path_int64(ol_json_at(sites, i), "bytes", -1);
  }
  ck_assert_int_eq(sum, ol_json_path_int64(root, "peak_allocated", -1));
  const char *top = "activations.py:66:forward < module.py:1790:_call_impl < "
                    "module.py:1779:_wrapped_call_impl < workloads.py:14:gpt2";
  ck_assert_str_eq(ol_json_string(ol_json_path(ol_json_at(sites, 0), "site")), top);
  ol_json_free(root);
  cli(&run, (const char *[]){data("gpt2.csv.gz"), NULL});
  ck_assert_msg(run.status == 0, "%d: %s", run.status, run.err);
  ck_assert_msg(strstr(run.out, "held at the peak, by call site:\n    7.88 GiB  ") &&
                strstr(run.out, top), "%s", run.out);
}
END_TEST

START_TEST(cli_policies)
{
  /* "oomlens" is pool.c's, tested with it. */
  const char *names[] = {"pytorch", "pytorch-expandable"};
  for (size_t i = 0; i < 2; i++) {
    cli_run_t run;
    cli(&run, (const char *[]){"--policy", names[i], "--max-split-size", "256M", "--json",
                               data("gpt2.csv.gz"), NULL});
    ck_assert_msg(run.status == 0, "%s: %d: %s", names[i], run.status, run.err);
    ol_json_t *root = parse_out(&run);
    ck_assert_str_eq(ol_json_string(ol_json_get(root, "policy")), names[i]);
    ck_assert_int_eq(ol_json_path_int64(root, "max_split_size", -1), 256 << 20);
    ck_assert_int_ge(ol_json_path_int64(root, "peak_reserved", -1),
                     ol_json_path_int64(root, "peak_allocated", -1));
    ol_json_free(root);
  }
}
END_TEST

/* Without --policy the replay runs our own allocator. */
START_TEST(cli_default_policy)
{
  cli_run_t run;
  cli(&run, (const char *[]){data("oom_params.csv.gz"), "--json", NULL});
  ck_assert_msg(run.status == 0, "%d: %s", run.status, run.err);
  ol_json_t *root = parse_out(&run);
  ck_assert_str_eq(ol_json_string(ol_json_get(root, "policy")), "oomlens");
  ol_json_free(root);
}
END_TEST

START_TEST(cli_text)
{
  cli_run_t run;
  cli(&run, (const char *[]){data("oom_params.csv.gz"), "--capacity", "8G", "--policy", "pytorch",
                             NULL});
  ck_assert_int_eq(run.status, 0);
  ck_assert_msg(strstr(run.out, "peak reserved:") && strstr(run.out, "ratio:"), "%s", run.out);
  ck_assert_msg(strstr(run.out, "out of memory:    yes, at event 159 (line 161)"), "%s", run.out);
}
END_TEST

/* Memory by role at the peak, in both outputs: GPT-2's batch-8 forward
 * under 12 GiB is the forward's activations over the model's weights and
 * AdamW state (124,439,808 fp32 parameters, the state twice that); frag's
 * frames name no role (its own script's lines): all other. */
START_TEST(cli_peak_roles)
{
  cli_run_t run;
  cli(&run, (const char *[]){data("oom_activations.csv.gz"), "--capacity", "12G", NULL});
  ck_assert_int_eq(run.status, 0);
  ck_assert_msg(strstr(run.out, "peak by role:     activations 10.20 GiB, optimizer 949.40 MiB, "
                                "weights 474.70 MiB, unknown 32.00 MiB"), "%s", run.out);
  cli(&run, (const char *[]){data("oom_activations.csv.gz"), "--capacity", "12G", "--json", NULL});
  ck_assert_int_eq(run.status, 0);
  ol_json_t *root = parse_out(&run);
  bool known = false;
  ck_assert(ol_json_bool(ol_json_get(root, "roles_known"), &known) && known);
  ck_assert_int_eq(ol_json_path_int64(root, "peak_roles.weights", -1), 124439808ll * 4);
  ck_assert_int_eq(ol_json_path_int64(root, "peak_roles.optimizer", -1), 124439808ll * 8);
  ol_json_free(root);
  cli(&run, (const char *[]){data("frag.csv.gz"), "--capacity", "6G", "--json", NULL});
  root = parse_out(&run);
  ck_assert_int_eq(ol_json_path_int64(root, "peak_roles.other", -1),
                   ol_json_path_int64(root, "peak_allocated", -2));
  ol_json_free(root);
}
END_TEST

typedef struct {
  const char *file; /* under tests/data/bad */
  const char *message;
} bad_file_t;

static const bad_file_t bad_files[] = {
  {"bad_action.csv", "bad_action.csv:3: bad action 'allocate'"},
  {"missing_fields.csv", "missing_fields.csv:3: missing fields: 4 of 6"},
  {"bad_addr.csv", "bad_addr.csv:2: addr '1000z' is not a hex address"},
  {"size_overflow.csv", "size_overflow.csv:2: size '99999999999999999999' is out of range"},
  {"unknown_format.csv", "unknown_format.csv:1: unknown trace format"},
  {"empty.csv", "empty.csv: empty file, not a trace"},
  {"truncated.csv.gz", "truncated.csv.gz:"},
  {"no_such_file.csv", "cannot open "},
};

START_TEST(cli_malformed)
{
  const bad_file_t *c = &bad_files[_i];
  char file[128];
  snprintf(file, sizeof file, "bad/%s", c->file);
  for (int json = 0; json < 2; json++) {
    cli_run_t run;
    cli(&run, (const char *[]){data(file), json ? "--json" : "--capacity", json ? NULL : "1G",
                               NULL});
    ck_assert_int_eq(run.status, 2);
    ck_assert_msg(strstr(run.err, c->message) != NULL, "want '%s' in '%s'", c->message, run.err);
    ck_assert_str_eq(run.out, "");
  }
}
END_TEST

/* One size grammar with one bound: a size past 2^56 bytes is refused by
 * every flag, as OOMLENS_* sizes and trace lines are. */
START_TEST(cli_size_beyond_any_device)
{
  cli_run_t run;
  cli(&run, (const char *[]){data("frag.csv.gz"), "--capacity", "65537T", NULL});
  ck_assert_int_eq(run.status, 2);
  ck_assert_msg(strstr(run.err, "bad size '65537T' for --capacity") &&
                strstr(run.err, "at most 65536T"), "%s", run.err);
  cli(&run, (const char *[]){data("frag.csv.gz"), "--max-split-size=72057594037927937", NULL});
  ck_assert_int_eq(run.status, 2);
}
END_TEST

/* Before: --device 7 on a trace without it replayed 0 events, exit 0. */
START_TEST(cli_device_not_in_the_trace)
{
  cli_run_t run;
  cli(&run, (const char *[]){data("frag.csv.gz"), "--device", "7", NULL});
  ck_assert_int_eq(run.status, 2);
  ck_assert_msg(strstr(run.err, "frag.csv.gz: no event of device 7 (its events are on device 0)"),
                "%s", run.err);
  ck_assert_str_eq(run.out, "");
}
END_TEST

/* Before: a trace cut mid-line was refused whole (exit 2). Now it is
 * replayed to its last whole line, and the note is on stderr and in the
 * JSON. */
START_TEST(cli_cut_trace_is_read_with_a_note)
{
  char named[600];
  snprintf(named, sizeof named, "%s/cut.csv", dir);
  FILE *f = fopen(named, "w");
  ck_assert_ptr_nonnull(f);
  fputs(HEADER "1,alloc,0x10,512,0,\n2,free_completed,0x10,512,0,\n3,alloc,0x2", f);
  fclose(f);
  cli_run_t run;
  cli(&run, (const char *[]){named, "--json", NULL});
  unlink(named);
  ck_assert_msg(run.status == 0, "%d: %s", run.status, run.err);
  ck_assert_msg(strstr(run.err, "cut.csv: cut short: line 4 ends without its newline"), "%s",
                run.err);
  ol_json_t *root = parse_out(&run);
  ck_assert_int_eq(ol_json_path_int64(root, "allocs", -1), 1);
  const char *note = ol_json_string(ol_json_get(root, "trace_note"));
  ck_assert_msg(note && strstr(note, "read up to line 3"), "%s", note ? note : "(none)");
  ol_json_free(root);
}
END_TEST

/* Sizes with fractions and every option's value after '='. */
START_TEST(cli_equals_and_fractions)
{
  cli_run_t run;
  cli(&run, (const char *[]){data("frag.csv.gz"), "--capacity=1.5G", "--max-split-size=0.5M",
                             "--policy=pytorch", "--device=0", "--json", NULL});
  ck_assert_msg(run.status == 0, "%d: %s", run.status, run.err);
  ol_json_t *root = parse_out(&run);
  ck_assert_int_eq(ol_json_path_int64(root, "capacity", -1), 3 * (int64_t)GiB / 2);
  ck_assert_int_eq(ol_json_path_int64(root, "max_split_size", -1), 512 << 10);
  ol_json_free(root);
}
END_TEST

/* The exit status is the error's, never read from its text: a malformed
 * trace whose name says "out of host memory" is still a bad input file. */
START_TEST(cli_status_from_the_error)
{
  char named[600];
  snprintf(named, sizeof named, "%s/out of host memory.csv", dir);
  FILE *f = fopen(named, "w");
  ck_assert_ptr_nonnull(f);
  fputs(HEADER "1,alloc,0xzz,512,0,\n", f);
  fclose(f);
  cli_run_t run;
  cli(&run, (const char *[]){named, NULL});
  unlink(named);
  ck_assert_int_eq(run.status, 2);
  ck_assert_msg(strstr(run.err, "out of host memory.csv:2: addr '0xzz'"), "%s", run.err);
}
END_TEST

typedef struct {
  const char *args[4];
  int status;
  const char *message; /* in stdout for 0, stderr otherwise */
} usage_case_t;

static const usage_case_t usage_cases[] = {
  {{"--help"}, 0, "usage: oomlens replay TRACE"},
  {{"-h"}, 0, "150109106995 bytes"},
  {{NULL}, 2, "no trace given"},
  {{"a", "b"}, 2, "more than one trace given"},
  {{"a", "--capacity"}, 2, "--capacity needs a value"},
  {{"a", "--capacity", "12X"}, 2, "bad size '12X' for --capacity"},
  {{"a", "--capacity", "0"}, 2, "--capacity must be more than 0"},
  {{"a", "--max-split-size", "-1"}, 2, "bad size '-1'"},
  {{"a", "--policy", "tcmalloc"}, 2, "unknown policy 'tcmalloc'"},
  {{"a", "--frobnicate"}, 2, "unknown option --frobnicate"},
  {{"a", "--json=1"}, 2, "unknown option --json=1"},
  {{"a", "--capacity="}, 2, "bad size '' for --capacity"},
  {{"a", "--max-split-size=1Q"}, 2, "bad size '1Q' for --max-split-size"},
  {{"a", "--capacity=1.5"}, 2, "bad size '1.5' for --capacity"}, /* a fraction of a byte */
  {{"a", "--device=64"}, 2, "bad device '64' for --device: expected 0 to 63"},
  {{"a", "--policy="}, 2, "bad value '' for --policy"},
  {{"--", "--json"}, 2, "cannot open --json"}, /* after --, an operand */
};

START_TEST(cli_usage)
{
  const usage_case_t *c = &usage_cases[_i];
  cli_run_t run;
  cli(&run, c->args);
  ck_assert_int_eq(run.status, c->status);
  const char *where = c->status == 0 ? run.out : run.err;
  ck_assert_msg(strstr(where, c->message) != NULL, "want '%s' in '%s'", c->message, where);
}
END_TEST

/* ---- driver calls ------------------------------------------------------ */

/* The driver calls each policy would make on the shared traces (the H200's
 * capacity), pinned: more is a regression of the trim or placement policy
 * and fails; fewer is progress, and the pin should come down with it. The
 * steady state is the last half of the iterations the account found (on
 * llama_varlen and gpt2_varlen those include the steps that first reach a
 * longer sequence: growth, not churn). Measured, see docs/measurements.md. */
typedef struct calls_pin {
  const char *trace, *policy;
  int64_t total, steady; /* at most */
  uint64_t map_unit;     /* oomlens's --map-unit; 0: the default */
} calls_pin_t;

static const calls_pin_t calls_pins[] = {
  {"gpt2.csv.gz", "oomlens", 27964, 0, 0},
  {"gpt2_varlen.csv.gz", "oomlens", 27876, 13464, 0},
  {"resnet50.csv.gz", "oomlens", 5898, 102, 0},
  {"frag.csv.gz", "oomlens", 17770, 9600, 0},
  {"oom_params.csv.gz", "oomlens", 8222, 0, 0},
  {"oom_activations.csv.gz", "oomlens", 13514, 0, 0},
  {"llama_varlen.csv.gz", "oomlens", 24362, 5042, 0},
  {"llama_varlen.csv.gz", "pytorch", 334, 9, 0},
  {"llama_varlen.csv.gz", "pytorch-expandable", 1628, 228, 0},
  {"gpt2.csv.gz", "pytorch", 162, 0, 0},
  {"frag.csv.gz", "pytorch-expandable", 550, 224, 0},
  /* extents of up to 10 chunks: a call each (pool.h's map_unit) */
  {"llama_varlen.csv.gz", "oomlens", 2872, 382, 10},
  {"gpt2.csv.gz", "oomlens", 3170, 0, 10},
};

START_TEST(driver_calls_pinned)
{
  const calls_pin_t *pin = &calls_pins[_i];
  ol_policy_options_t options = {.capacity = OL_REPLAY_DEFAULT_CAPACITY, .map_unit = pin->map_unit};
  ol_replay_result_t r;
  ol_error_t err;
  ck_assert_msg(ol_replay_file(data(pin->trace), ol_policy_find(pin->policy), &options, &r, &err) == 0,
                "%s", err.text);
  ol_replay_steady_t st;
  ol_replay_steady(&r, &st);
  int64_t total = ol_policy_calls_total(&r.stats.calls), steady = ol_policy_calls_total(&st.calls);
  printf("%s %s: %lld driver calls, %lld in the last %llu of %llu iterations\n", pin->trace,
         pin->policy, (long long)total, (long long)steady, (unsigned long long)st.iterations,
         (unsigned long long)st.of);
  ck_assert_msg(total <= pin->total, "%s %s: %lld calls, pinned at %lld", pin->trace, pin->policy,
                (long long)total, (long long)pin->total);
  ck_assert_msg(steady <= pin->steady, "%s %s: %lld steady-state calls, pinned at %lld",
                pin->trace, pin->policy, (long long)steady, (long long)pin->steady);
  /* one handle per mapping: each map creates one, each unmap releases one */
  ck_assert_int_eq(r.stats.calls.creates, r.stats.calls.maps);
  ck_assert_int_eq(r.stats.calls.releases, r.stats.calls.unmaps);
  ck_assert(total > 0);
  ol_replay_result_free(&r);
}
END_TEST

/* --keep-used (OOMLENS_POOL_KEEP_USED=1) on the live Llama-style trace,
 * whose layout shifts with the sequence length: the default trim unmaps
 * ~1442 chunks an iteration that later steps map again; keeping what was
 * used of late stops that, for more reserved memory (bounded here by what
 * no trimming at all reserves, plus a slack). Where a job does not come
 * back to trimmed memory (gpt2, resnet50) nothing changes; near the
 * capacity trims go on, and nothing runs out. */
static ol_replay_result_t replay_with(const char *trace, uint64_t capacity, bool keep_used,
                                      bool keep_mapped, ol_replay_steady_t *st)
{
  ol_policy_options_t options = {.capacity = capacity, .keep_used = keep_used,
                                 .keep_mapped = keep_mapped};
  ol_replay_result_t r;
  ol_error_t err;
  ck_assert_msg(ol_replay_file(data(trace), ol_policy_find("oomlens"), &options, &r, &err) == 0,
                "%s", err.text);
  ol_replay_steady(&r, st);
  return r;
}

START_TEST(keep_used_stops_remapping_what_was_trimmed)
{
  const char *live = "llama_varlen_live.trace.gz";
  ol_replay_steady_t eager_st, kept_st, none_st;
  ol_replay_result_t eager = replay_with(live, OL_REPLAY_DEFAULT_CAPACITY, false, false, &eager_st);
  ol_replay_result_t kept = replay_with(live, OL_REPLAY_DEFAULT_CAPACITY, true, false, &kept_st);
  ol_replay_result_t none = replay_with(live, OL_REPLAY_DEFAULT_CAPACITY, false, true, &none_st);
  printf("llama_varlen_live: steady unmaps %lld eager, %lld kept; reserved %lld, %lld, %lld "
         "without trimming\n", (long long)eager_st.calls.unmaps, (long long)kept_st.calls.unmaps,
         (long long)eager.stats.reserved_peak, (long long)kept.stats.reserved_peak,
         (long long)none.stats.reserved_peak);
  ck_assert_int_gt(eager_st.calls.unmaps, 1000); /* the churn this is for */
  ck_assert_int_le(kept_st.calls.unmaps, 8);
  ck_assert_int_lt(kept_st.calls.maps, eager_st.calls.maps);
  ck_assert_int_le(kept.stats.reserved_peak, none.stats.reserved_peak + none.stats.reserved_peak / 50);
  ck_assert(!kept.oom);
  ol_replay_result_free(&eager);
  ol_replay_result_free(&kept);
  ol_replay_result_free(&none);
}
END_TEST

START_TEST(keep_used_changes_nothing_without_remapping)
{
  static const char *const traces[] = {"gpt2.csv.gz", "resnet50.csv.gz", "oom_activations.csv.gz"};
  ol_replay_steady_t a_st, b_st;
  ol_replay_result_t a = replay_with(traces[_i], OL_REPLAY_DEFAULT_CAPACITY, false, false, &a_st);
  ol_replay_result_t b = replay_with(traces[_i], OL_REPLAY_DEFAULT_CAPACITY, true, false, &b_st);
  ck_assert_int_eq(a.stats.reserved_peak, b.stats.reserved_peak);
  ck_assert_int_eq(a.stats.calls.maps, b.stats.calls.maps);
  ck_assert_int_eq(a.stats.calls.unmaps, b.stats.calls.unmaps);
  ol_replay_result_free(&a);
  ol_replay_result_free(&b);
}
END_TEST

START_TEST(keep_used_trims_near_the_capacity)
{
  const uint64_t capacity = 18ull << 30; /* the trace's peak is 15.12 GiB */
  ol_replay_steady_t st;
  ol_replay_result_t r = replay_with("llama_varlen_live.trace.gz", capacity, true, false, &st);
  ck_assert(!r.oom);
  /* past the last sixteenth (16.875 GiB) memory is wanted: trims go on */
  ck_assert_int_le(r.stats.reserved_peak, (int64_t)(capacity - capacity / 16 + (256ull << 20)));
  ck_assert_int_gt(st.calls.unmaps, 0);
  ol_replay_result_free(&r);
}
END_TEST

/* A trace of calls of a decoder's generate (as test_phases builds them):
 * a prompt of the call's batch, then 24 tokens through 8 layers, each
 * layer's key/value cache grown by a token, all freed at the call's end. */
typedef struct gen_trace {
  FILE *f;
  uint64_t t, addr;
} gen_trace_t;

static uint64_t gen_take(gen_trace_t *g, int site, uint64_t size)
{
  g->addr += 0x100000000ull;
  fprintf(g->f, "%llu,alloc,0x%llx,%llu,0,gen.py:%d:site%d\n", (unsigned long long)++g->t,
          (unsigned long long)g->addr, (unsigned long long)size, site, site);
  return g->addr;
}

static void gen_give(gen_trace_t *g, uint64_t addr)
{
  fprintf(g->f, "%llu,free_completed,0x%llx,0,0,\n", (unsigned long long)++g->t,
          (unsigned long long)addr);
}

static void gen_call(gen_trace_t *g, uint64_t batch)
{
  const uint64_t token = batch * 64 * 1024;
  uint64_t prompt = gen_take(g, 30, 512 * token), keys[8] = {0}, values[8] = {0};
  for (uint64_t t = 1; t <= 24; t++)
    for (int l = 0; l < 8; l++) {
      uint64_t q = gen_take(g, 31, token);
      uint64_t k = gen_take(g, 32, t * token), v = gen_take(g, 33, t * token);
      if (keys[l]) {
        gen_give(g, keys[l]);
        gen_give(g, values[l]);
      }
      keys[l] = k;
      values[l] = v;
      gen_give(g, gen_take(g, 34, 4 * t * token));
      gen_give(g, q);
    }
  for (int l = 0; l < 8; l++) {
    gen_give(g, keys[l]);
    gen_give(g, values[l]);
  }
  gen_give(g, prompt);
}

/* The steady state is counted over the iterations the finder ends with:
 * when a longer repeat takes over (the call's, from the token's, at the
 * fourth call), the ends counted before it are dropped, not kept beside
 * the new ones (the text said "the last 47 of 94 iterations" of a job of
 * 8 calls). */
START_TEST(steady_state_counts_the_finders_iterations)
{
  static const uint64_t batches[] = {5, 3, 4, 15, 13, 7, 9, 2};
  gen_trace_t g = {.f = fopen(path, "w")};
  ck_assert_ptr_nonnull(g.f);
  fputs(HEADER, g.f);
  gen_take(&g, 1, 2 * GiB); /* the weights */
  for (int c = 0; c < 8; c++)
    gen_call(&g, batches[c]);
  fclose(g.f);
  ol_policy_options_t options = {.capacity = OL_REPLAY_DEFAULT_CAPACITY};
  ol_replay_result_t r;
  ol_error_t err;
  ck_assert_msg(ol_replay_file(path, ol_policy_find("oomlens"), &options, &r, &err) == 0, "%s",
                err.text);
  ol_replay_steady_t st;
  ol_replay_steady(&r, &st);
  ck_assert_uint_eq(r.calls_count, 7);
  ck_assert_uint_eq(st.of, 7);
  ck_assert_uint_eq(st.iterations, 4);
  ol_replay_result_free(&r);
}
END_TEST

/* Both outputs say them: the text's two lines, the JSON's objects. */
START_TEST(cli_driver_calls)
{
  cli_run_t run;
  cli(&run, (const char *[]){data("gpt2.csv.gz"), NULL});
  ck_assert_int_eq(run.status, 0);
  ck_assert_msg(strstr(run.out, "driver calls:     13078 cuMemCreate, 13078 cuMemMap, 904 cuMemUnmap, "
                                "904 cuMemRelease\n"), "%s", run.out);
  ck_assert_msg(strstr(run.out, "steady state:     the last 3 of 5 iterations: none; the worst "
                                "iteration: none\n"), "%s", run.out);
  cli(&run, (const char *[]){data("gpt2.csv.gz"), "--policy", "pytorch", "--json", NULL});
  ck_assert_int_eq(run.status, 0);
  ol_json_t *root = parse_out(&run);
  ck_assert_int_eq(ol_json_path_int64(root, "driver_calls.mallocs", -1), 162);
  ck_assert_int_eq(ol_json_path_int64(root, "driver_calls.maps", -1), 0);
  ck_assert_int_eq(ol_json_path_int64(root, "steady_state.iterations", -1), 3);
  ck_assert_int_eq(ol_json_path_int64(root, "steady_state.calls.total", -1), 0);
  ol_json_free(root);
  /* --no-trim: nothing unmapped on a trace that never runs out */
  cli(&run, (const char *[]){data("gpt2.csv.gz"), "--no-trim", "--json", NULL});
  ck_assert_int_eq(run.status, 0);
  root = parse_out(&run);
  ck_assert_int_eq(ol_json_path_int64(root, "driver_calls.unmaps", -1), 0);
  ck_assert_int_gt(ol_json_path_int64(root, "driver_calls.maps", -1), 0);
  ol_json_free(root);
  /* --map-unit 10: a tenth of the calls or so, each one extent */
  cli(&run, (const char *[]){data("gpt2.csv.gz"), "--map-unit", "10", NULL});
  ck_assert_int_eq(run.status, 0);
  ck_assert_msg(strstr(run.out, "driver calls:     1499 cuMemCreate, 1499 cuMemMap, 86 cuMemUnmap, "
                                "86 cuMemRelease\n"), "%s", run.out);
  cli(&run, (const char *[]){data("gpt2.csv.gz"), "--map-unit", "513", NULL});
  ck_assert_int_eq(run.status, 2);
  ck_assert_msg(strstr(run.err, "expected a whole number from 1 to 512"), "%s", run.err);
}
END_TEST

/* One OOM, one diagnosis: a corpus trace whose replay runs out where the
 * job did, for the same reason, printed two paragraphs of the same class
 * whose figures differed (20% headroom: batch 3, then 4; the first counts
 * what the job's device held outside the allocator). The second now points
 * at the first. */
static int count_of(const char *text, const char *what)
{
  int n = 0;
  for (const char *at = text; (at = strstr(at, what)); at += strlen(what))
    n++;
  return n;
}

START_TEST(cli_one_diagnosis_where_the_job_ran_out)
{
  cli_run_t run;
  cli(&run, (const char *[]){data("oom/gpt2_batch.trace.xz"), "--capacity", "12G", "--batch",
                             "8", NULL});
  ck_assert_int_eq(run.status, 0);
  ck_assert_msg(strstr(run.out, "(where the recorded run ran out too)"), "%s", run.out);
  ck_assert_msg(count_of(run.out, "  why:            out of memory (activations") == 1, "%s",
                run.out);
  ck_assert_msg(strstr(run.out, "  why:            as for the recorded OOM above (activations)\n"),
                "%s", run.out);
}
END_TEST

/* A PyTorch recorder trace says where its segments and tensors lie, so
 * the recorded OOM is diagnosed with the free pieces inside the segments:
 * shared trace frag (interleaved lifetimes, truth fragmentation: 1.61 GiB
 * free in PyTorch's segments, none of it in a piece of the 1.01 GiB asked
 * for) was `leak` before, because the record knew no largest free block
 * and the long-lived tensors it keeps had grown. */
START_TEST(recorded_oom_sees_the_pieces_in_the_segments)
{
  ol_policy_options_t options = {.capacity = 6ull << 30};
  ol_replay_result_t r;
  ol_error_t err;
  ck_assert_msg(ol_replay_file(data("frag.csv.gz"), ol_policy_find("pytorch"), &options, &r,
                               &err) == 0, "%s", err.text);
  ck_assert(r.recorded);
  const ol_oom_record_t *rec = &r.recorded_oom.record;
  ck_assert_int_eq(r.recorded_oom.cause, OL_OOM_fragmentation);
  ck_assert_int_ge(rec->free_reserved, (int64_t)(1600ull << 20));
  ck_assert_int_lt(rec->largest_free_block, (int64_t)rec->request);
  ck_assert_int_eq(rec->free_reserved, rec->reserved - rec->allocated);
  ol_replay_result_free(&r);
}
END_TEST

/* ---- every policy, any capacity ----------------------------------------- */

static const uint64_t huge_capacities[] = {(uint64_t)1 << 54, (uint64_t)1 << 56,
                                           (uint64_t)1 << 62, UINT64_MAX};

/* Any --capacity: each policy's tables stay small (the test's time limit
 * and the sanitizer build's memory), a 2000 TiB request is served, one
 * past the device is not. Was: the oomlens policy's granule bitmaps grew
 * with the capacity (16384 TiB: 1 GB and 8 s; 65536 TiB: out of host
 * memory); pytorch-expandable crashed on the request. */
START_TEST(any_capacity_stays_bounded)
{
  static const char *const names[] = {"oomlens", "pytorch", "pytorch-expandable"};
  uint64_t capacity = huge_capacities[_i];
  for (size_t n = 0; n < sizeof names / sizeof *names; n++) {
    const ol_policy_ops_t *ops = ol_policy_find(names[n]);
    ol_policy_options_t options = {.capacity = capacity};
    ol_policy_t *p = ops->create(&options);
    ck_assert_msg(p, "%s: no policy at capacity %llu", names[n], (unsigned long long)capacity);
    uint64_t big, small, none;
    ck_assert_int_eq(ops->alloc(p, 2000ull << 40, 0, &big), 0);
    ck_assert_int_eq(ops->alloc(p, 512, 0, &small), 0);
    ck_assert_int_eq(ops->alloc(p, UINT64_MAX, 0, &none), -1);
    ops->free(p, big);
    ops->free(p, small);
    ol_policy_stats_t st;
    ops->stats(p, &st);
    ck_assert_int_eq(st.allocated, 0);
    ops->destroy(p);
  }
}
END_TEST

static Suite *replay_suite(void)
{
  Suite *s = suite_create("replay");
  TCase *driver = tcase_create("driver");
  tcase_add_checked_fixture(driver, setup, teardown);
  tcase_add_test(driver, maps_addresses_and_counts);
  tcase_add_test(driver, trace_oom_served_and_released);
  tcase_add_test(driver, stops_at_first_oom);
  tcase_add_test(driver, malformed_is_an_error);
  tcase_add_test(driver, follows_the_live_pool);
  tcase_add_test(driver, segments_are_the_jobs_without_manage);
  tcase_add_loop_test(driver, maps_in_the_recorded_unit, 0, 2);
  tcase_add_test(driver, steady_state_counts_the_finders_iterations);
  tcase_add_test(driver, keep_used_stops_remapping_what_was_trimmed);
  tcase_add_loop_test(driver, keep_used_changes_nothing_without_remapping, 0, 3);
  tcase_add_test(driver, keep_used_trims_near_the_capacity);
  tcase_add_test(driver, cli_one_diagnosis_where_the_job_ran_out);
  tcase_add_test(driver, recorded_oom_sees_the_pieces_in_the_segments);
  suite_add_tcase(s, driver);
  TCase *huge = tcase_create("huge");
  tcase_add_loop_test(huge, any_capacity_stays_bounded, 0,
                      sizeof huge_capacities / sizeof *huge_capacities);
  suite_add_tcase(s, huge);
  TCase *cmd = tcase_create("cli");
  tcase_set_timeout(cmd, 60);
  tcase_add_checked_fixture(cmd, setup, teardown);
  tcase_add_test(cmd, cli_json_no_oom);
  tcase_add_test(cmd, cli_json_oom);
  tcase_add_test(cmd, cli_no_step_repeat_read_with_call_sites);
  tcase_add_test(cmd, cli_policies);
  tcase_add_test(cmd, cli_peak_sites_named_as_the_report);
  tcase_add_test(cmd, cli_default_policy);
  tcase_add_test(cmd, cli_text);
  tcase_add_test(cmd, cli_peak_roles);
  tcase_add_test(cmd, cli_equals_and_fractions);
  tcase_add_test(cmd, cli_device_not_in_the_trace);
  tcase_add_test(cmd, cli_size_beyond_any_device);
  tcase_add_test(cmd, cli_cut_trace_is_read_with_a_note);
  tcase_add_test(cmd, cli_status_from_the_error);
  tcase_add_loop_test(cmd, cli_malformed, 0, sizeof bad_files / sizeof *bad_files);
  tcase_add_loop_test(cmd, cli_usage, 0, sizeof usage_cases / sizeof *usage_cases);
  tcase_add_test(cmd, cli_driver_calls);
  suite_add_tcase(s, cmd);
  TCase *calls = tcase_create("driver_calls");
  tcase_set_timeout(calls, 300);
  tcase_add_loop_test(calls, driver_calls_pinned, 0, sizeof calls_pins / sizeof *calls_pins);
  suite_add_tcase(s, calls);
  return s;
}

int main(void)
{
  return ol_run_suite(replay_suite());
}
