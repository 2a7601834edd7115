/* test_preload.c: whole programs under liboomlens.so on the simulated CUDA.
 * Each runs tests/progs/cuda_prog (which checks what it was handed) and then
 * checks the JSON report against figures known by construction. */
#include <check.h>
#include <ctype.h>
#include <signal.h>

#include "check_run.h"
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "report_view.h"

#define MiB (1ll << 20)
#define DEV "devices[0]."
#define STAT(name) DEV "stats." name

/* One scenario of a test program (the harness variable naming it) under
 * the library: it must exit 0 and leave its report. */
static ol_json_t *run_program(const char *program, const char *scenario,
                              const char *const env[], harness_run_t *run)
{
  const char *argv[] = {harness_env(program), scenario, NULL};
  harness_exec(run, true, env, argv);
  ck_assert_msg(run->status == 0, "%s exited %d:\n%s", scenario, run->status, run->out);
  ol_json_t *report = harness_report(run->pid);
  ck_assert_msg(report, "no report for %s:\n%s", scenario, run->out);
  return report;
}

static ol_json_t *run_scenario(const char *scenario, const char *const env[], harness_run_t *run)
{
  return run_program("OOMLENS_TEST_PROG", scenario, env, run);
}

START_TEST(runtime_calls_counted_once)
{
  harness_run_t run;
  ol_json_t *r = run_scenario("runtime", NULL, &run);
  ck_assert_int_eq(harness_int(r, "oomlens_report"), 1);
  ck_assert_int_eq(harness_int(r, "pid"), run.pid);
  ck_assert_str_eq(ol_json_string(ol_json_path(r, "reason")), "exit");
  ck_assert_int_eq(harness_int(r, STAT("allocated_bytes.all.peak")), 9 * MiB + 100);
  ck_assert_int_eq(harness_int(r, STAT("allocated_bytes.all.current")), MiB + 100);
  ck_assert_int_eq(harness_int(r, STAT("allocated_bytes.large_pool.peak")), 8 * MiB);
  ck_assert_int_eq(harness_int(r, STAT("allocated_bytes.small_pool.current")), MiB + 100);
  ck_assert_int_eq(harness_int(r, STAT("reserved_bytes.all.peak")), 9 * MiB + 100);
  ck_assert_int_eq(harness_int(r, STAT("allocation.all.allocated")), 3);
  ck_assert_int_eq(harness_int(r, DEV "calls.runtime_allocs"), 3);
  ck_assert_int_eq(harness_int(r, DEV "calls.runtime_frees"), 1);
  /* cudart's own cuMemAlloc calls went through our hook and were not
   * counted a second time. */
  ck_assert_int_eq(harness_int(r, DEV "calls.driver_allocs"), 0);
  ck_assert_int_gt(harness_int(r, DEV "mem_info.total"), 0);
  ck_assert_int_eq(ol_json_kind(ol_json_path(r, DEV "oom")), OL_JSON_NULL);
  ol_json_free(r);
  ck_assert_int_eq(harness_count_files(".txt"), 1);
}
END_TEST

START_TEST(driver_through_dlsym_and_getproc)
{
  harness_run_t run;
  ol_json_t *r = run_scenario("driver", NULL, &run);
  ck_assert_int_eq(harness_int(r, STAT("allocated_bytes.all.peak")), 4 * MiB);
  ck_assert_int_eq(harness_int(r, STAT("allocated_bytes.all.current")), 2 * MiB);
  ck_assert_int_eq(harness_int(r, DEV "calls.driver_allocs"), 2);
  ck_assert_int_eq(harness_int(r, DEV "calls.driver_frees"), 1);
  ck_assert_int_eq(harness_int(r, DEV "calls.runtime_allocs"), 0);
  ol_json_free(r);
}
END_TEST

START_TEST(vmm_through_driver_entry_point)
{
  harness_run_t run;
  ol_json_t *r = run_scenario("vmm", NULL, &run);
  ck_assert_int_eq(harness_int(r, STAT("reserved_bytes.all.peak")), 4 * MiB);
  ck_assert_int_eq(harness_int(r, STAT("reserved_bytes.all.current")), 0);
  ck_assert_int_eq(harness_int(r, STAT("segment.all.peak")), 2);
  ck_assert_int_eq(harness_int(r, STAT("vmm_mapped_bytes.peak")), 4 * MiB);
  ck_assert_int_eq(harness_int(r, STAT("vmm_mapped_bytes.current")), 0);
  ck_assert_int_eq(harness_int(r, STAT("va_reserved_bytes.peak")), 32 * MiB);
  ck_assert_int_eq(harness_int(r, STAT("allocated_bytes.all.peak")), 0);
  ck_assert_int_eq(harness_int(r, DEV "calls.vmm_creates"), 2);
  ck_assert_int_eq(harness_int(r, DEV "calls.vmm_maps"), 3);
  ck_assert_int_eq(harness_int(r, DEV "calls.vmm_unmaps"), 2);
  ck_assert_int_eq(harness_int(r, DEV "calls.vmm_releases"), 2);
  ol_json_free(r);
}
END_TEST

START_TEST(async_and_per_thread_entry_points)
{
  harness_run_t run;
  ol_json_t *r = run_scenario("async", NULL, &run);
  ck_assert_int_eq(harness_int(r, STAT("allocated_bytes.all.peak")), 6 * MiB);
  ck_assert_int_eq(harness_int(r, STAT("allocated_bytes.all.current")), 0);
  ck_assert_int_eq(harness_int(r, DEV "calls.runtime_allocs"), 2);
  ck_assert_int_eq(harness_int(r, DEV "calls.runtime_frees"), 2);
  ck_assert_int_eq(harness_int(r, DEV "calls.driver_allocs"), 0);
  ol_json_free(r);
}
END_TEST

START_TEST(exact_under_sixteen_threads)
{
  harness_run_t run;
  ol_json_t *r = run_scenario("threads", NULL, &run);
  ck_assert_int_eq(harness_int(r, STAT("allocation.all.allocated")), 16 * 200);
  ck_assert_int_eq(harness_int(r, STAT("allocation.all.current")), 0);
  ck_assert_int_eq(harness_int(r, STAT("allocated_bytes.all.allocated")), 200ll * 4096 * 136);
  ck_assert_int_eq(harness_int(r, STAT("allocated_bytes.all.freed")), 200ll * 4096 * 136);
  ck_assert_int_le(harness_int(r, STAT("allocated_bytes.all.peak")), 4096ll * 136);
  ol_json_free(r);
}
END_TEST

START_TEST(out_of_memory_reaches_the_job)
{
  const char *env[] = {"SIMCU_CAPACITY=64M", NULL};
  harness_run_t run;
  ol_json_t *r = run_scenario("oom", env, &run);
  ck_assert_int_eq(harness_int(r, DEV "num_ooms"), 1);
  ck_assert_int_eq(harness_int(r, DEV "last_oom_request"), 1ll << 40);
  ck_assert_int_eq(harness_int(r, DEV "calls.failed_allocs"), 1);
  ck_assert_int_eq(harness_int(r, STAT("allocated_bytes.all.current")), MiB);
  /* One paragraph at the moment, and the diagnosis in the report. */
  ck_assert_ptr_nonnull(strstr(run.out, "oomlens: device 0: out of memory (impossible"));
  ck_assert_str_eq(ol_json_string(ol_json_path(r, DEV "oom.class")), "impossible");
  ck_assert_int_eq(harness_int(r, DEV "oom.capacity"), 64 * MiB);
  ck_assert_int_eq(harness_int(r, DEV "oom.request"), 1ll << 40);
  ck_assert_ptr_nonnull(strstr(ol_json_string(ol_json_path(r, DEV "oom.advice")), "larger"));
  ol_json_free(r);
}
END_TEST

/* ---- one OOM, one diagnosis: what an allocator's retry makes of it ---- */

static ol_json_t *run_retry(const char *how, const char *extra, harness_run_t *run)
{
  const char *env[] = {"OOMLENS_CAPACITY=64M", "SIMCU_CAPACITY=8G", "SIMCU_EXTERNAL=0", extra,
                       NULL};
  const char *argv[] = {harness_env("OOMLENS_TEST_PROG"), "retry", how, NULL};
  harness_exec(run, true, env, argv);
  ck_assert_msg(run->status == 0, "retry %s exited %d:\n%s", how, run->status, run->out);
  ol_json_t *report = harness_report(run->pid);
  ck_assert_msg(report, "no report for retry %s:\n%s", how, run->out);
  return report;
}

static int paragraphs_in(const char *text)
{
  int n = 0;
  for (const char *at = text; (at = strstr(at, "oomlens: device 0: out of memory (")); at++)
    n++;
  return n;
}

/* Line a comes before line b in the output (both there). */
static void comes_before(const char *text, const char *a, const char *b)
{
  const char *at_a = strstr(text, a), *at_b = strstr(text, b);
  ck_assert_msg(at_a && at_b && at_a < at_b, "'%s' not before '%s' in:\n%s", a, b, text);
}

/* A request of 2^64 - 1 bytes: impossible, and every figure of it reads
 * 16.00 EiB, in the paragraph, the report's line and the JSON. Was:
 * "persistent: a request of -1 B". */
START_TEST(size_max_request_is_impossible)
{
  const char *argv[] = {harness_env("OOMLENS_TEST_PROG"), "size_max", NULL};
  harness_run_t run;
  harness_exec(&run, true, NULL, argv);
  ck_assert_msg(run.status == 0, "exit %d:\n%s", run.status, run.out);
  char path[PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/r-%ld.txt", harness_dir(), (long)run.pid);
  const char *text = harness_read_text(path);
  ck_assert_msg(strstr(text, "out of memory (impossible") &&
                  strstr(text, "a request of 16.00 EiB") &&
                  strstr(text, "Last out-of-memory request: 16.00 EiB"), "%s", text);
  ck_assert_msg(!strstr(text, "-1 B"), "%s", text);
  snprintf(path, sizeof path, "%s/r-%ld.json", harness_dir(), (long)run.pid);
  ck_assert_ptr_nonnull(strstr(harness_read_text(path), "\"last_oom_request\": 18446744073709551615"));
}
END_TEST

START_TEST(retry_served_is_counted_not_diagnosed)
{
  harness_run_t run;
  ol_json_t *r = run_retry("recovers", NULL, &run);
  ck_assert_int_eq(paragraphs_in(run.out), 0);
  ck_assert_int_eq(harness_int(r, DEV "num_ooms"), 0);
  ck_assert_int_eq(harness_int(r, DEV "recovered_allocs"), 1);
  ck_assert_int_eq(harness_int(r, DEV "calls.failed_allocs"), 1);
  ck_assert_int_eq(ol_json_kind(ol_json_path(r, DEV "oom")), OL_JSON_NULL);
  ol_json_free(r);
}
END_TEST

/* Refused, cache released, refused again, then cudaMemGetInfo (PyTorch's
 * error message): one paragraph, before the job's own error, with the
 * figures of the last attempt (the 8 MiB cache released by then). */
START_TEST(retry_refused_is_one_oom)
{
  harness_run_t run;
  ol_json_t *r = run_retry("gives_up", NULL, &run);
  ck_assert_int_eq(paragraphs_in(run.out), 1);
  comes_before(run.out, "oomlens: device 0: out of memory (", "cuda_prog: raised");
  comes_before(run.out, "cuda_prog: refused", "oomlens: device 0: out of memory (");
  ck_assert_int_eq(harness_int(r, DEV "num_ooms"), 1);
  ck_assert_int_eq(harness_int(r, DEV "recovered_allocs"), 0);
  ck_assert_int_eq(harness_int(r, DEV "calls.failed_allocs"), 2);
  ck_assert_int_eq(harness_int(r, DEV "oom.request"), 32 * MiB);
  ck_assert_int_eq(harness_int(r, DEV "oom.allocated"), 40 * MiB);
  ck_assert_int_eq(harness_int(r, DEV "timeline.num_ooms"), 1);
  int64_t by_class = 0;
  const ol_json_t *classes = ol_json_path(r, DEV "ooms_by_class");
  for (size_t i = 0; i < ol_json_length(classes); i++)
    by_class += (int64_t)ol_json_number(ol_json_value_at(classes, i));
  ck_assert_int_eq(by_class, 1);
  ol_json_free(r);
}
END_TEST

/* A job that catches its error and goes on: diagnosed once, at its next
 * request (no retry came), before what it does next. */
START_TEST(caught_oom_is_diagnosed_once)
{
  harness_run_t run;
  ol_json_t *r = run_retry("caught", NULL, &run);
  ck_assert_int_eq(paragraphs_in(run.out), 1);
  comes_before(run.out, "cuda_prog: refused", "oomlens: device 0: out of memory (");
  comes_before(run.out, "oomlens: device 0: out of memory (", "cuda_prog: went on");
  ck_assert_int_eq(harness_int(r, DEV "num_ooms"), 1);
  ck_assert_int_eq(harness_int(r, DEV "oom.request"), 32 * MiB);
  ol_json_free(r);
}
END_TEST

/* With PyTorch's cache off nothing retries: the paragraph comes at once,
 * before the job hears of the error. */
START_TEST(no_cache_means_at_once)
{
  harness_run_t run;
  ol_json_t *r = run_retry("caught", "PYTORCH_NO_CUDA_MEMORY_CACHING=1", &run);
  ck_assert_int_eq(paragraphs_in(run.out), 1);
  comes_before(run.out, "oomlens: device 0: out of memory (", "cuda_prog: refused");
  ck_assert_int_eq(harness_int(r, DEV "num_ooms"), 1);
  ol_json_free(r);
}
END_TEST

/* PyTorch turns its cache off for PYTORCH_NO_CUDA_MEMORY_CACHING=1 only
 * (c10::utils::check_env); "true" or an empty value leave it on, so its
 * retry is still to come and what we see are segments: one paragraph,
 * after the retry (two, at once, when "true" was taken for off), and the
 * record says segments (an empty value was taken for tensors). */
static const char *const cache_left_on[] = {"PYTORCH_NO_CUDA_MEMORY_CACHING=true",
                                            "PYTORCH_NO_CUDA_MEMORY_CACHING="};

START_TEST(cache_flag_other_than_1_leaves_the_cache_on)
{
  harness_run_t run;
  ol_json_t *r = run_retry("gives_up", cache_left_on[_i], &run);
  ck_assert_int_eq(paragraphs_in(run.out), 1);
  comes_before(run.out, "cuda_prog: refused", "oomlens: device 0: out of memory (");
  ck_assert_int_eq(harness_int(r, DEV "num_ooms"), 1);
  bool segments = false;
  ck_assert(ol_json_bool(ol_json_path(r, DEV "oom.segments_only"), &segments));
  ck_assert_msg(segments, "%s: the record says tensors were seen", cache_left_on[_i]);
  ol_json_free(r);
}
END_TEST

START_TEST(several_ooms_one_paragraph_each_up_to_a_bound)
{
  harness_run_t run;
  ol_json_t *r = run_retry("many", NULL, &run);
  ck_assert_int_eq(paragraphs_in(run.out), 5);
  ck_assert_ptr_nonnull(strstr(run.out, "further out-of-memory errors are counted"));
  ck_assert_int_eq(harness_int(r, DEV "num_ooms"), 8);
  ck_assert_int_eq(harness_int(r, DEV "ooms_by_class.impossible"), 8);
  ck_assert_int_eq(harness_int(r, DEV "last_oom_request"), 107 * MiB);
  ol_json_free(r);
}
END_TEST

START_TEST(capacity_makes_the_device_smaller)
{
  const char *env[] = {"OOMLENS_CAPACITY=64M", "SIMCU_CAPACITY=8G", NULL};
  harness_run_t run;
  ol_json_t *r = run_scenario("capacity", env, &run);
  ck_assert_int_eq(harness_int(r, DEV "num_ooms"), 1);
  ck_assert_int_eq(harness_int(r, DEV "last_oom_request"), 32 * MiB);
  ck_assert_int_le(harness_int(r, STAT("reserved_bytes.all.peak")), 64 * MiB);
  ck_assert_int_eq(harness_int(r, DEV "oom.capacity"), 64 * MiB);
  ck_assert_int_eq(harness_int(r, DEV "oom.reserved"), 48 * MiB);
  ck_assert_ptr_nonnull(ol_json_string(ol_json_path(r, DEV "oom.class")));
  ol_json_free(r);
}
END_TEST

typedef struct {
  const char *scenario, *external, *expected, *mode;
} class_case_t;

/* Programs on the simulated CUDA that run out for a known reason; the
 * report must name it (fragmentation in manage mode, where the pool's free
 * blocks are known; replay's traces cover PyTorch's cache). */
static const class_case_t live_classes[] = {
  {"oom_persistent", "SIMCU_EXTERNAL=0", "persistent", NULL},
  {"oom_activations", "SIMCU_EXTERNAL=0", "activations", NULL},
  {"oom_leak", "SIMCU_EXTERNAL=0", "leak", NULL},
  {"oom_external", "SIMCU_EXTERNAL=700M", "external", NULL},
  /* a library's 640 MiB handle (held-out jax_external: JAX's preallocation,
   * taken for PyTorch's reserve, said activations); 640 MiB in 20 MiB pages,
   * as PyTorch's expandable segments make them, stays the framework's */
  {"oom_library_vmm", "SIMCU_EXTERNAL=0", "external", NULL},
  {"oom_pages_vmm", "SIMCU_EXTERNAL=0", "activations", NULL},
  {"oom_fragmentation", "SIMCU_EXTERNAL=0", "fragmentation", "OOMLENS_MANAGE=1"},
  /* no call sites, no iteration found in ~30,000 allocations of sizes that
   * never repeat, 2 MiB kept a step: a leak not told from one step's own
   * memory (was activations) */
  {"oom_varying_leak", "SIMCU_EXTERNAL=0", "undetermined", NULL},
  /* no call sites; steps of like sizes, the tenth keeps its 96 MiB loss
   * and runs out at its end: held more than the step before at that
   * point, a kept tensor or state made in it (was activations) */
  {"oom_kept_in_step", "SIMCU_EXTERNAL=0", "undetermined", NULL},
};

/* A C job whose tenth step keeps its loss and runs out at the 700 MiB
 * request that ends the step, live; stacks: OOMLENS_STACKS=1 or NULL. Its
 * report, the held more than the step before at the same point checked. */
static ol_json_t *kept_in_step_report(const char *scenario, const char *stacks, int64_t held)
{
  const char *env[] = {"SIMCU_CAPACITY=1G", "SIMCU_EXTERNAL=0",
                       "PYTORCH_NO_CUDA_MEMORY_CACHING=1", stacks, NULL};
  harness_run_t run;
  ol_json_t *r = run_scenario(scenario, env, &run);
  ck_assert_int_eq(harness_int(r, DEV "oom.held_since_last_iteration"), held);
  ck_assert_int_eq(harness_int(r, DEV "oom.request"), 700 * MiB);
  return r;
}

/* The live library keeps the last events as replay does: a C job's tenth
 * step keeps its 96 MiB loss and runs out at its end, holding that much
 * more than the step before at the same point (no call sites: the class
 * is undetermined, oom_kept_in_step above). */
START_TEST(a_tensor_kept_in_the_step_is_held_since_the_last)
{
  ol_json_free(kept_in_step_report("oom_kept_in_step", NULL, 96 * MiB));
}
END_TEST

/* The same with each step's tensors larger than the last's: no two steps
 * make the same sizes, but the same calls make them in the same order, and
 * with call sites the step is read by them: one block more than the step
 * before held at that point, the loss kept at the tenth (native frames
 * name no role: undetermined; was activations, "a larger input"). */
START_TEST(a_tensor_kept_in_a_larger_step_is_held_since_the_last)
{
  ol_json_t *r = kept_in_step_report("oom_kept_in_growing_step", "OOMLENS_STACKS=1",
                                     96 * MiB * 25 / 16);
  bool by_calls = false;
  ck_assert(ol_json_bool(ol_json_path(r, DEV "oom.since_last_by_calls"), &by_calls) && by_calls);
  const char *got = ol_json_string(ol_json_path(r, DEV "oom.class"));
  ck_assert_msg(got && strcmp(got, "undetermined") == 0, "class %s", got ? got : "(none)");
  ol_json_free(r);
}
END_TEST

START_TEST(live_oom_classes)
{
  const class_case_t *c = &live_classes[_i];
  const char *env[] = {"SIMCU_CAPACITY=1G", "PYTORCH_NO_CUDA_MEMORY_CACHING=1", c->external,
                       c->mode, NULL};
  harness_run_t run;
  ol_json_t *r = run_scenario(c->scenario, env, &run);
  const char *got = ol_json_string(ol_json_path(r, DEV "oom.class"));
  ck_assert_msg(got && strcmp(got, c->expected) == 0, "%s: class %s, expected %s\n%s",
                c->scenario, got ? got : "none", c->expected, run.out);
  ol_json_free(r);
}
END_TEST

/* A first step that ran out after its stack of like layers, live: how
 * far its forward got, and the figure given as an estimate with its
 * bound, in the paragraph and the JSON. */
START_TEST(first_step_figure_after_its_stack)
{
  const char *env[] = {"SIMCU_CAPACITY=1G", "PYTORCH_NO_CUDA_MEMORY_CACHING=1",
                       "SIMCU_EXTERNAL=0", "OOMLENS_BATCH=8", NULL};
  harness_run_t run;
  ol_json_t *r = run_scenario("oom_first_step", env, &run);
  ck_assert_str_eq(ol_json_string(ol_json_path(r, DEV "oom.class")), "activations");
  ck_assert_str_eq(ol_json_string(ol_json_path(r, DEV "oom.first_step.stage")), "head");
  ck_assert_int_eq(ol_json_path_int64(r, DEV "oom.first_step.layers", -1), 8);
  ck_assert_int_eq(ol_json_path_int64(r, DEV "oom.first_step.per_layer", -1), 32 << 20);
  bool estimate = false;
  ck_assert(ol_json_bool(ol_json_path(r, DEV "oom.batch_figure_is_estimate"), &estimate));
  ck_assert(estimate);
  ck_assert_int_le(ol_json_path_int64(r, DEV "oom.batch_fits", -1),
                   ol_json_path_int64(r, DEV "oom.batch_fits_at_most", -1));
  ck_assert_msg(strstr(run.out, "All 8 layers of its stack") && strstr(run.out, "about batch"),
                "%s", run.out);
  ol_json_free(r);
}
END_TEST

/* Memory held outside the job: NVML (here the fake libnvidia-ml of
 * tests/sim) names the other process and its bytes, largest first, in the
 * paragraph and the JSON. */
START_TEST(external_names_the_other_process)
{
  const char *env[] = {"SIMCU_CAPACITY=1G", "PYTORCH_NO_CUDA_MEMORY_CACHING=1",
                       "SIMCU_EXTERNAL=700M", "SIMNVML_PROCS=77:100M,4242:600M", NULL};
  harness_run_t run;
  ol_json_t *r = run_scenario("oom_external", env, &run);
  ck_assert_str_eq(ol_json_string(ol_json_path(r, DEV "oom.class")), "external");
  ck_assert_uint_eq(ol_json_length(ol_json_path(r, DEV "oom.external_holders")), 2);
  ck_assert_int_eq(harness_int(r, DEV "oom.external_holders[0].pid"), 4242);
  ck_assert_int_eq(harness_int(r, DEV "oom.external_holders[0].bytes"), 600 * MiB);
  ck_assert_int_eq(harness_int(r, DEV "oom.external_holders[1].pid"), 77);
  /* This process per NVML: what the simulated driver counts as ours (no
   * context of its own: the same as our reserved memory). */
  ck_assert_int_eq(harness_int(r, DEV "oom.self_device_bytes"), harness_int(r, DEV "oom.reserved"));
  ck_assert_msg(strstr(run.out, "Held by other processes: pid 4242"), "paragraph:\n%s", run.out);
  ol_json_free(r);
}
END_TEST

/* More processes than the paragraph lists: the rest are counted, with
 * what they hold (before, they went unsaid: held-out worker_external
 * named three of its four workers). */
START_TEST(external_counts_the_processes_beyond_the_list)
{
  const char *env[] = {"SIMCU_CAPACITY=1G", "PYTORCH_NO_CUDA_MEMORY_CACHING=1",
                       "SIMCU_EXTERNAL=780M",
                       "SIMNVML_PROCS=77:100M,4242:600M,5:50M,6:20M,7:10M", NULL};
  harness_run_t run;
  ol_json_t *r = run_scenario("oom_external", env, &run);
  ck_assert_uint_eq(ol_json_length(ol_json_path(r, DEV "oom.external_holders")), 3);
  ck_assert_int_eq(harness_int(r, DEV "oom.external_holders[2].pid"), 5);
  ck_assert_int_eq(harness_int(r, DEV "oom.external_unlisted.processes"), 2);
  ck_assert_int_eq(harness_int(r, DEV "oom.external_unlisted.bytes"), 30 * MiB);
  ck_assert_msg(strstr(run.out, "; 2 more, 30.00 MiB in all."), "paragraph:\n%s", run.out);
  ol_json_free(r);
}
END_TEST

/* The other process is one this process started (a DataLoader worker
 * that used the device, held-out worker_external): the paragraph says
 * so and what to change in the job, and the JSON marks it. */
START_TEST(external_names_a_child_process_as_the_jobs_own)
{
  const char *env[] = {"SIMCU_CAPACITY=1G", "PYTORCH_NO_CUDA_MEMORY_CACHING=1",
                       "SIMCU_EXTERNAL=600M", NULL};
  harness_run_t run;
  ol_json_t *r = run_scenario("oom_external_child", env, &run);
  ck_assert_str_eq(ol_json_string(ol_json_path(r, DEV "oom.class")), "external");
  bool child = false;
  ck_assert(ol_json_bool(ol_json_path(r, DEV "oom.external_holders[0].child"), &child));
  ck_assert(child);
  ck_assert_msg(strstr(run.out, "was started by this process (DataLoader workers"),
                "paragraph:\n%s", run.out);
  ol_json_free(r);
}
END_TEST

/* With call sites on, a leak's diagnosis names the site that grows (the
 * paragraph at the failure and the report's oom object), and the largest
 * holders at the failure. */
START_TEST(leak_names_the_growing_site)
{
  const char *env[] = {"SIMCU_CAPACITY=1G", "PYTORCH_NO_CUDA_MEMORY_CACHING=1", "SIMCU_EXTERNAL=0",
                       "OOMLENS_STACKS=1", NULL};
  harness_run_t run;
  ol_json_t *r = run_scenario("oom_leak", env, &run);
  ck_assert_str_eq(ol_json_string(ol_json_path(r, DEV "oom.class")), "leak");
  const char *grower = ol_json_string(ol_json_path(r, DEV "oom.growing_site.site"));
  ck_assert_msg(grower && strstr(grower, "cuda_prog_kept"), "growing site %s", grower);
  /* 64 MiB kept a step in two pieces, from the second iteration's lowest
   * point to the last one's (an iteration may end between the pieces). */
  int64_t growth = harness_int(r, DEV "oom.growing_site.growth");
  ck_assert_int_ge(growth, 64 * MiB);
  ck_assert_int_eq(growth % (32 * MiB), 0);
  const ol_json_t *holders = ol_json_path(r, DEV "oom.sites");
  ck_assert_uint_ge(ol_json_length(holders), 2);
  int64_t first = harness_int(r, DEV "oom.sites[0].bytes");
  ck_assert_int_ge(first, harness_int(r, DEV "oom.sites[1].bytes"));
  ck_assert_int_le(first, harness_int(r, DEV "oom.allocated"));
  ck_assert_msg(strstr(run.out, "Grew most across iterations") && strstr(run.out, "cuda_prog_kept"),
                "paragraph without the growing site:\n%s", run.out);
  ol_json_free(r);
}
END_TEST

/* The leak is said before the job runs out: one stderr line (before the
 * OOM's paragraph) and the report's leak_warning, with the rate, the
 * growing site and the iteration the 1 GiB device runs out at. */
START_TEST(leak_warned_before_the_oom)
{
  const char *env[] = {"SIMCU_CAPACITY=1G", "PYTORCH_NO_CUDA_MEMORY_CACHING=1", "SIMCU_EXTERNAL=0",
                       "OOMLENS_STACKS=1", NULL};
  harness_run_t run;
  ol_json_t *r = run_scenario("oom_leak", env, &run);
  const char *line = strstr(run.out, "oomlens: device 0: leak warning: memory that outlives "
                                     "iterations grows by 64.00 MiB per iteration since iteration ");
  const char *oom = strstr(run.out, "out of memory (leak");
  ck_assert_msg(line && oom && line < oom, "no warning before the OOM:\n%s", run.out);
  ck_assert_ptr_eq(strstr(line + 1, "oomlens: device 0: leak warning:"), NULL); /* once */
  ck_assert_int_eq(harness_int(r, DEV "leak_warning.growth_per_iteration"), 64 * MiB);
  int64_t at = harness_int(r, DEV "leak_warning.at_iteration");
  int64_t runs_out = harness_int(r, DEV "leak_warning.runs_out_at_iteration");
  ck_assert_int_gt(runs_out, at);
  ck_assert_int_le(runs_out, harness_int(r, DEV "oom.iterations") + 2);
  const char *site = ol_json_string(ol_json_path(r, DEV "leak_warning.site"));
  ck_assert_msg(site && strstr(site, "cuda_prog_kept"), "site %s", site);
  ol_json_free(r);
  r = run_scenario("oom_activations", env, &run);
  ck_assert_int_eq(ol_json_kind(ol_json_path(r, DEV "leak_warning")), OL_JSON_NULL);
  ck_assert_ptr_eq(strstr(run.out, "leak warning:"), NULL);
  ol_json_free(r);
}
END_TEST

/* A cache that grows for twelve steps and is then emptied: warned of as a
 * leak while it grows (it cannot be told from one then), withdrawn once
 * it is given back, on stderr and in the report, and `oomlens report` of
 * the JSON says so too (held-out serve_fits kept a standing warning). */
START_TEST(a_cache_given_back_withdraws_the_warning)
{
  const char *env[] = {"SIMCU_CAPACITY=2G", "PYTORCH_NO_CUDA_MEMORY_CACHING=1", "SIMCU_EXTERNAL=0",
                       "OOMLENS_STACKS=1", NULL};
  harness_run_t run;
  ol_json_t *r = run_scenario("cache_given_back", env, &run);
  const char *line = strstr(run.out, "oomlens: device 0: leak warning: memory that outlives");
  const char *withdrawn = strstr(run.out, "oomlens: device 0: leak warning withdrawn: the growth "
                                          "warned of at iteration ");
  ck_assert_msg(line && withdrawn && line < withdrawn, "stderr:\n%s", run.out);
  int64_t at = harness_int(r, DEV "leak_warning.at_iteration");
  ck_assert_int_gt(harness_int(r, DEV "leak_warning.withdrawn_at_iteration"), at);
  char json[PATH_MAX + 16];
  snprintf(json, sizeof json, "%s/r-%ld.json", harness_dir(), (long)run.pid);
  ck_assert_int_eq(access(json, F_OK), 0);
  const char *argv[] = {harness_env("OOMLENS_TEST_CLI"), "report", json, NULL};
  harness_run_t shown;
  harness_exec(&shown, false, NULL, argv);
  ck_assert_msg(shown.status == 0 && strstr(shown.out, "\nWithdrawn: the growth warned of at "
                                                        "iteration "), "%s", shown.out);
  ol_json_free(r);
}
END_TEST

/* Occurrences of what in text. */
static int occurrences(const char *text, const char *what)
{
  int n = 0;
  for (const char *p = strstr(text, what); p; p = strstr(p + 1, what))
    n++;
  return n;
}

static ol_json_t *run_throw_prog(const char *scenario, const char *const env[],
                                 harness_run_t *run)
{
  return run_program("OOMLENS_TEST_THROW_PROG", scenario, env, run);
}

/* A trace file in the test's folder, and the OOMLENS_TRACE that asks for it. */
static void trace_named(const char *name, char trace[PATH_MAX], char env[PATH_MAX + 32])
{
  snprintf(trace, PATH_MAX, "%s/%s", harness_dir(), name);
  snprintf(env, PATH_MAX + 32, "OOMLENS_TRACE=%s", trace);
}

/* `oomlens replay` of the trace ran and said what, and the trace is gone. */
static void replay_says(const char *trace, const char *what)
{
  const char *argv[] = {harness_env("OOMLENS_TEST_CLI"), "replay", trace, NULL};
  harness_run_t replayed;
  harness_exec(&replayed, false, NULL, argv);
  ck_assert_msg(replayed.status == 0 && strstr(replayed.out, what), "%s", replayed.out);
  unlink(trace);
}

/* PyTorch refusing at its own memory fraction throws c10::OutOfMemoryError
 * with no cudaMalloc refused: seen as it is thrown, diagnosed against the
 * limit its message names, in one paragraph, the report and the trace,
 * whose replay says the same (held-out fraction_batch's observe run said
 * no OOM at all before). */
START_TEST(pytorch_refusing_at_its_fraction_is_diagnosed)
{
  char trace[PATH_MAX], trace_env[PATH_MAX + 32];
  trace_named("fraction.trace", trace, trace_env);
  const char *env[] = {"SIMCU_CAPACITY=1G", "SIMCU_EXTERNAL=0", trace_env, NULL};
  harness_run_t run;
  ol_json_t *r = run_throw_prog("fraction", env, &run);
  const char *said = "out of memory (undetermined: what oomlens saw cannot tell which memory did "
                     "not fit): a request of 32.00 MiB, refused by PyTorch itself at the 64.00 "
                     "MiB the job allowed it (torch.cuda.set_per_process_memory_fraction)";
  ck_assert_msg(occurrences(run.out, said) == 1, "stderr:\n%s", run.out);
  ck_assert_msg(strstr(run.out, "add --capacity 64.00 MiB"), "stderr:\n%s", run.out);
  ck_assert_int_eq(harness_int(r, DEV "num_ooms"), 1);
  ck_assert_int_eq(harness_int(r, DEV "oom.request"), 32 * MiB);
  ck_assert_int_eq(harness_int(r, DEV "oom.capacity"), 64 * MiB);
  ck_assert_int_eq(harness_int(r, DEV "oom.framework_limit"), 64 * MiB);
  ck_assert_int_eq(harness_int(r, DEV "oom.reserved"), 48 * MiB);
  ck_assert_int_eq(harness_int(r, DEV "oom.external"), 0);
  ol_json_free(r);
  replay_says(trace, "refused by PyTorch itself at the 64.00 MiB the job allowed it");
}
END_TEST

/* The device refused first (a cudaMalloc, its retry, PyTorch asking for
 * memory info), then PyTorch threw, its message naming a fraction too:
 * one out-of-memory, diagnosed at the device's refusal, not twice. */
START_TEST(a_throw_after_a_refusal_is_not_a_second_oom)
{
  const char *env[] = {"OOMLENS_CAPACITY=64M", "SIMCU_EXTERNAL=0", NULL};
  harness_run_t run;
  ol_json_t *r = run_throw_prog("device", env, &run);
  ck_assert_msg(occurrences(run.out, "out of memory (") == 1, "stderr:\n%s", run.out);
  ck_assert_msg(!strstr(run.out, "refused by PyTorch itself"), "stderr:\n%s", run.out);
  ck_assert_int_eq(harness_int(r, DEV "num_ooms"), 1);
  ck_assert_int_eq(harness_int(r, DEV "oom.framework_limit"), 0);
  ol_json_free(r);
}
END_TEST

/* PyTorch's cache gave up (a refusal, its retry, cudaMemGetInfo) and its
 * error says most of what it reserved is free: its free blocks are in
 * pieces, which no hook sees (they are inside its segments). The failure
 * waits for that word and is diagnosed with it, once, in the report and
 * the trace; replay says the same (held-out serve_frag's observe run, and
 * every observe run before, could only say undetermined). */
START_TEST(pytorch_s_free_pieces_are_fragmentation)
{
  char trace[PATH_MAX], trace_env[PATH_MAX + 32];
  trace_named("pieces.trace", trace, trace_env);
  const char *env[] = {"OOMLENS_CAPACITY=64M", "SIMCU_EXTERNAL=0", trace_env, NULL};
  harness_run_t run;
  ol_json_t *r = run_throw_prog("pieces", env, &run);
  ck_assert_msg(occurrences(run.out, "out of memory (") == 1, "stderr:\n%s", run.out);
  const char *said = "held 48.00 MiB reserved, 20.00 MiB of it in PyTorch's tensors by its own "
                     "count. 28.00 MiB of it is reserved but free";
  ck_assert_msg(strstr(run.out, "out of memory (fragmentation") && strstr(run.out, said),
                "stderr:\n%s", run.out);
  ck_assert_str_eq(ol_json_string(ol_json_path(r, DEV "oom.class")), "fragmentation");
  ck_assert_int_eq(harness_int(r, DEV "oom.framework_allocated"), 20 * MiB);
  ck_assert_int_eq(harness_int(r, DEV "oom.free_reserved"), 28 * MiB);
  ol_json_free(r);
  replay_says(trace, said);
}
END_TEST

/* Other exceptions pass untouched, even with the words of a limit. */
START_TEST(other_exceptions_are_not_oom)
{
  const char *env[] = {"SIMCU_CAPACITY=1G", "SIMCU_EXTERNAL=0", NULL};
  harness_run_t run;
  ol_json_t *r = run_throw_prog("other", env, &run);
  ck_assert_msg(!strstr(run.out, "out of memory ("), "stderr:\n%s", run.out);
  ck_assert_int_eq(harness_int(r, DEV "num_ooms"), 0);
  ol_json_free(r);
}
END_TEST

/* A job that fits says the batch that would: 64 MiB outlives each step,
 * each step needs 160 MiB above it at batch 4, on 1 GiB with nothing held
 * outside: 4 * 960 / 160 = 24, and 4 * (819.2 - 64) / 160 = 18.9 with 20%
 * headroom. */
START_TEST(batch_figure_of_a_job_that_fits)
{
  const char *env[] = {"OOMLENS_CAPACITY=1G", "OOMLENS_BATCH=4", "SIMCU_EXTERNAL=0",
                       "PYTORCH_NO_CUDA_MEMORY_CACHING=1", NULL};
  harness_run_t run;
  ol_json_t *r = run_scenario("train_fits", env, &run);
  ck_assert_int_eq(harness_int(r, DEV "batch_figure.batch"), 4);
  ck_assert_int_eq(harness_int(r, DEV "batch_figure.state"), 64 * MiB);
  ck_assert_int_eq(harness_int(r, DEV "batch_figure.need"), 160 * MiB);
  ck_assert_int_eq(harness_int(r, DEV "batch_figure.outside"), 0);
  ck_assert_int_eq(harness_int(r, DEV "batch_figure.fits"), 24);
  ck_assert_int_eq(harness_int(r, DEV "batch_figure.fits_headroom"), 18);
  ol_json_free(r);
  char report[PATH_MAX + 32];
  snprintf(report, sizeof report, "%s/r-%ld.txt", harness_dir(), (long)run.pid);
  ck_assert_ptr_nonnull(strstr(harness_read_text(report), "at batch 4: batch 24 fits, 18 with "
                                                          "20% headroom\n"));
  /* without the batch: shares of it */
  const char *no_batch[] = {"OOMLENS_CAPACITY=1G", "SIMCU_EXTERNAL=0",
                            "PYTORCH_NO_CUDA_MEMORY_CACHING=1", NULL};
  r = run_scenario("train_fits", no_batch, &run);
  ck_assert_int_eq(harness_int(r, DEV "batch_figure.fits"), 6000); /* per mille: 6x */
  ol_json_free(r);
  /* an OOM gives its own figure, not this one */
  r = run_scenario("oom_activations", env, &run);
  ck_assert_int_eq(ol_json_kind(ol_json_path(r, DEV "batch_figure")), OL_JSON_NULL);
  ol_json_free(r);
}
END_TEST

/* Native call sites: the weights' site and the activations' site, with
 * the bytes each held at the peak (96 MiB and 48 MiB) and in total. */
START_TEST(call_sites_at_the_peak)
{
  const char *env[] = {"OOMLENS_STACKS=1", NULL};
  harness_run_t run;
  ol_json_t *r = run_scenario("two_sites", env, &run);
  const ol_json_t *peak = ol_json_path(r, DEV "sites.at_peak");
  ck_assert_uint_eq(ol_json_length(peak), 2);
  ck_assert_int_eq(harness_int(r, DEV "sites.at_peak[0].bytes"), 96 * MiB);
  ck_assert_ptr_nonnull(strstr(ol_json_string(ol_json_path(r, DEV "sites.at_peak[0].frames[0]")),
                               "cuda_prog_weights"));
  ck_assert_int_eq(harness_int(r, DEV "sites.at_peak[1].bytes"), 48 * MiB);
  ck_assert_int_eq(harness_int(r, DEV "sites.at_peak[1].allocations"), 3);
  ck_assert_ptr_nonnull(strstr(ol_json_string(ol_json_path(r, DEV "sites.at_peak[1].frames[0]")),
                               "cuda_prog_activation"));
  ck_assert_int_eq(harness_int(r, DEV "sites.by_total[0].bytes"), 96 * MiB);
  ol_json_free(r);
}
END_TEST

/* Allocations made while the job paused the capture have no call site:
 * the weights' 96 MiB are not at the peak by site, the activations' are. */
START_TEST(paused_capture_takes_no_site)
{
  const char *env[] = {"OOMLENS_STACKS=1", NULL};
  harness_run_t run;
  ol_json_t *r = run_scenario("paused_sites", env, &run);
  const ol_json_t *peak = ol_json_path(r, DEV "sites.at_peak");
  bool activations = false;
  for (size_t i = 0; i < ol_json_length(peak); i++) {
    const ol_json_t *site = ol_json_at(peak, i);
    const char *frame = ol_json_string(ol_json_path(site, "frames[0]"));
    ck_assert_msg(!frame || !strstr(frame, "cuda_prog_weights"), "a site for paused weights");
    if (frame && strstr(frame, "cuda_prog_activation"))
      activations = harness_int(site, "bytes") == 48 * MiB;
  }
  ck_assert_msg(activations, "the activations' site after the capture resumed");
  ck_assert_int_eq(harness_int(r, STAT("allocated_bytes.all.peak")), 144 * MiB);
  ol_json_free(r);
}
END_TEST

/* The number of the first line of the file at path holding needle. */
static int line_of(const char *path, const char *needle)
{
  FILE *f = fopen(path, "r");
  ck_assert_msg(f, "cannot read %s", path);
  char text[512];
  int line = 0, found = 0;
  while (!found && fgets(text, sizeof text, f)) {
    line++;
    if (strstr(text, needle))
      found = line;
  }
  fclose(f);
  ck_assert_msg(found, "no \"%s\" in %s", needle, path);
  return found;
}

/* cuda_prog is built with -g: each native frame of a call site names the
 * source line of its call ("cuda_prog+0x3f12 cuda_prog_weights
 * (cuda_prog.c:405)"), here the cudaMalloc in cuda_prog_weights. */
START_TEST(call_sites_carry_source_lines)
{
  const char *env[] = {"OOMLENS_STACKS=1", NULL};
  harness_run_t run;
  ol_json_t *r = run_scenario("two_sites", env, &run);
  const char *frame = ol_json_string(ol_json_path(r, DEV "sites.at_peak[0].frames[0]"));
  char expected[64];
  snprintf(expected, sizeof expected, "cuda_prog_weights (cuda_prog.c:%d)",
           line_of(harness_env("OOMLENS_TEST_PROG_SOURCE"), "96 * MiB) == cudaSuccess"));
  ck_assert_msg(frame && strstr(frame, expected), "frame %s, expected %s", frame, expected);
  ol_json_free(r);
}
END_TEST

/* OOMLENS_SOURCE_LINES=0 (as without libdw.so.1): the frames are named as
 * before, "module+0xoffset function" and nothing after. */
START_TEST(no_source_lines_when_off)
{
  const char *env[] = {"OOMLENS_STACKS=1", "OOMLENS_SOURCE_LINES=0", NULL};
  harness_run_t run;
  ol_json_t *r = run_scenario("two_sites", env, &run);
  const char *frame = ol_json_string(ol_json_path(r, DEV "sites.at_peak[0].frames[0]"));
  ck_assert_msg(frame && strncmp(frame, "cuda_prog+0x", 12) == 0, "frame %s", frame);
  const char *name = strchr(frame, ' ');
  ck_assert_msg(name && strcmp(name, " cuda_prog_weights") == 0, "frame %s", frame);
  ol_json_free(r);
}
END_TEST

/* Stacks alike in the frames a report shows are one entry, their bytes
 * summed: two depths of recursion into one allocating function. */
START_TEST(sites_alike_in_shown_frames_are_one)
{
  const char *env[] = {"OOMLENS_STACKS=1", "OOMLENS_STACK_DEPTH=24", NULL};
  harness_run_t run;
  ol_json_t *r = run_scenario("nested_sites", env, &run);
  ck_assert_uint_eq(ol_json_length(ol_json_path(r, DEV "sites.at_peak")), 1);
  ck_assert_int_eq(harness_int(r, DEV "sites.at_peak[0].bytes"), 32 * MiB);
  ck_assert_int_eq(harness_int(r, DEV "sites.at_peak[0].allocations"), 2);
  ck_assert_int_eq(harness_int(r, DEV "sites.at_peak[0].stacks"), 2);
  ck_assert_ptr_nonnull(strstr(ol_json_string(ol_json_path(r, DEV "sites.at_peak[0].frames[0]")),
                               "cuda_prog_nested"));
  ol_json_free(r);
}
END_TEST

START_TEST(no_sites_unless_asked)
{
  harness_run_t run;
  ol_json_t *r = run_scenario("two_sites", NULL, &run);
  ck_assert_ptr_null(ol_json_path(r, DEV "sites"));
  ol_json_free(r);
}
END_TEST

START_TEST(forked_child_writes_its_own_report)
{
  harness_run_t run;
  ol_json_t *parent = run_scenario("fork", NULL, &run);
  ck_assert_int_eq(harness_int(parent, STAT("allocated_bytes.all.peak")), 3 * MiB);
  ol_json_free(parent);
  ck_assert_int_eq(harness_count_files(".json"), 2);
  ck_assert_int_eq(harness_count_files(".txt"), 2);
}
END_TEST

START_TEST(forked_child_never_overwrites_parent)
{
  char fixed[PATH_MAX + 32], env_report[PATH_MAX + 64];
  snprintf(fixed, sizeof fixed, "%s/fixed.txt", harness_dir());
  snprintf(env_report, sizeof env_report, "OOMLENS_REPORT=%s", fixed);
  const char *env[] = {env_report, NULL};
  const char *argv[] = {harness_env("OOMLENS_TEST_PROG"), "fork", NULL};
  harness_run_t run;
  harness_exec(&run, true, env, argv);
  ck_assert_int_eq(run.status, 0);
  char json[PATH_MAX + 32];
  ol_error_t err;
  snprintf(json, sizeof json, "%s/fixed.json", harness_dir());
  ol_json_t *parent = ol_json_parse_file(json, &err);
  ck_assert_msg(parent, "%s", err.text);
  ck_assert_int_eq(harness_int(parent, "pid"), run.pid);
  ck_assert_int_eq(harness_int(parent, STAT("allocated_bytes.all.peak")), 3 * MiB);
  ol_json_free(parent);
  ck_assert_int_eq(harness_count_files(".json"), 2); /* fixed.json and fixed.txt.<pid>.json */
}
END_TEST

START_TEST(signal_writes_report_and_job_continues)
{
  char path[PATH_MAX + 32];
  ol_error_t err;
  const char *env[] = {"OOMLENS_REPORT_AT_EXIT=0", NULL};
  harness_run_t run;
  /* The program waits for its own report to appear after raising SIGUSR1;
   * its pid is only known once it runs, so it polls a fixed name. */
  char fixed[PATH_MAX + 64];
  snprintf(fixed, sizeof fixed, "OOMLENS_REPORT=%s/signal.txt", harness_dir());
  const char *env2[] = {env[0], fixed, NULL};
  snprintf(path, sizeof path, "%s/signal.txt", harness_dir());
  const char *argv[] = {harness_env("OOMLENS_TEST_PROG"), "signal", path, NULL};
  harness_exec(&run, true, env2, argv);
  ck_assert_msg(run.status == 0, "exit %d:\n%s", run.status, run.out);
  snprintf(path, sizeof path, "%s/signal.json", harness_dir());
  ol_json_t *r = ol_json_parse_file(path, &err);
  ck_assert_msg(r, "%s", err.text);
  ck_assert_str_eq(ol_json_string(ol_json_path(r, "reason")), "signal");
  ck_assert_int_eq(harness_int(r, STAT("allocated_bytes.all.current")), 5 * MiB);
  ol_json_free(r);
}
END_TEST

START_TEST(sigterm_writes_report_then_ends_the_job)
{
  const char *argv[] = {harness_env("OOMLENS_TEST_PROG"), "sigterm", NULL};
  harness_run_t run;
  harness_exec(&run, true, NULL, argv);
  ck_assert_msg(run.status == 128 + SIGTERM, "exit %d:\n%s", run.status, run.out);
  ol_json_t *r = harness_report(run.pid);
  ck_assert_ptr_nonnull(r);
  ck_assert_str_eq(ol_json_string(ol_json_path(r, "reason")), "SIGTERM");
  ck_assert_int_eq(harness_int(r, STAT("allocated_bytes.all.current")), 7 * MiB);
  ol_json_free(r);
}
END_TEST

START_TEST(no_driver_means_pass_through)
{
  const char *env[] = {"LD_LIBRARY_PATH=/nonexistent", NULL};
  const char *argv[] = {harness_env("OOMLENS_TEST_PROG"), "nodriver", NULL};
  harness_run_t run;
  harness_exec(&run, true, env, argv);
  ck_assert_msg(run.status == 0, "exit %d:\n%s", run.status, run.out);
}
END_TEST

START_TEST(disabled_records_nothing)
{
  const char *env[] = {"OOMLENS_ENABLE=0", NULL};
  const char *argv[] = {harness_env("OOMLENS_TEST_PROG"), "runtime", NULL};
  harness_run_t run;
  harness_exec(&run, true, env, argv);
  ck_assert_int_eq(run.status, 0);
  ck_assert_int_eq(harness_count_files(".txt"), 0);
}
END_TEST

START_TEST(bad_option_warns_and_keeps_default)
{
  const char *env[] = {"OOMLENS_JSON=perhaps", NULL};
  harness_run_t run;
  ol_json_t *r = run_scenario("runtime", env, &run);
  ck_assert_ptr_nonnull(strstr(run.out, "oomlens: warning: OOMLENS_JSON=\"perhaps\" is not valid"));
  ol_json_free(r);
}
END_TEST

START_TEST(unrelated_program_untouched)
{
  const char *argv[] = {"sh", "-c", "echo fine", NULL};
  harness_run_t run;
  harness_exec(&run, true, NULL, argv);
  ck_assert_int_eq(run.status, 0);
  ck_assert_str_eq(run.out, "fine\n");
  ck_assert_int_eq(harness_count_files(".txt"), 0);
}
END_TEST

START_TEST(unwritable_report_dir_does_not_hurt_job)
{
  const char *env[] = {"OOMLENS_REPORT=/nonexistent/dir/r.txt", NULL};
  const char *argv[] = {harness_env("OOMLENS_TEST_PROG"), "runtime", NULL};
  harness_run_t run;
  harness_exec(&run, true, env, argv);
  ck_assert_int_eq(run.status, 0);
  ck_assert_ptr_nonnull(strstr(run.out, "oomlens: warning: cannot write the report: /nonexistent/dir/r.txt: cannot create a temporary file in its folder"));
}
END_TEST

/* A real recorded job: GPT-2 training steps, each tensor a cudaMalloc. The
 * report's peak must be the trace's own peak, to the byte. */
START_TEST(recorded_gpt2_trace_peak_exact)
{
  const char *env[] = {"SIMCU_CAPACITY=140G", NULL};
  harness_run_t run;
  harness_play_trace(&run, "gpt2.csv.gz", env);
  long long events, allocs, peak, live;
  const char *summary = strstr(run.out, "events=");
  ck_assert_msg(summary, "%s", run.out);
  ck_assert_int_eq(sscanf(summary, "events=%lld allocs=%lld peak_allocated=%lld live_at_end=%lld",
                          &events, &allocs, &peak, &live), 4);
  ck_assert_int_eq(peak, 25379906248ll);
  ol_json_t *r = harness_report(run.pid);
  ck_assert_ptr_nonnull(r);
  ck_assert_int_eq(harness_int(r, STAT("allocated_bytes.all.peak")), peak);
  ck_assert_int_eq(harness_int(r, STAT("allocated_bytes.all.current")), live);
  ck_assert_int_eq(harness_int(r, STAT("allocation.all.allocated")), allocs);
  ol_json_free(r);
}
END_TEST

/* ---- OOMLENS_METRICS ------------------------------------------------- */

#define PROM_MAX_SERIES 256

/* The rules node exporter's textfile collector holds a file to: every line
 * is "# HELP name text", "# TYPE name gauge|counter" or a sample
 * `name{label="value",...} number` (no timestamp); a family's HELP and
 * TYPE come once, before its samples, which stay together; no series
 * twice; valid names; the file ends with a newline. Fails the test on the
 * first broken rule; returns the number of samples. */
static bool valid_name(const char *s, size_t n)
{
  if (n == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_' || s[0] == ':'))
    return false;
  for (size_t i = 1; i < n; i++)
    if (!(isalnum((unsigned char)s[i]) || s[i] == '_' || s[i] == ':'))
      return false;
  return true;
}

/* Labels from after '{' to past '}': name="value" pairs, escapes \\ \" \n. */
static const char *skip_labels(const char *c, int line)
{
  while (*c != '}') {
    const char *name = c;
    while (*c && *c != '=')
      c++;
    ck_assert_msg(*c == '=' && valid_name(name, (size_t)(c - name)), "line %d: label name", line);
    ck_assert_msg(c[1] == '"', "line %d: label value not quoted", line);
    for (c += 2; *c != '"'; c++) {
      ck_assert_msg(*c && *c != '\n', "line %d: label value not closed", line);
      if (*c == '\\') {
        c++;
        ck_assert_msg(*c == '\\' || *c == '"' || *c == 'n', "line %d: bad escape", line);
      }
    }
    c++;
    if (*c == ',')
      c++;
    else
      ck_assert_msg(*c == '}', "line %d: expected , or }", line);
  }
  return c + 1;
}

static int prom_check(const char *text)
{
  static char series[PROM_MAX_SERIES][256];
  char family[128] = "", done[64][128];
  int samples = 0, families = 0, line_no = 0;
  bool help = false, type = false;
  size_t len = strlen(text);
  ck_assert_msg(len > 0 && text[len - 1] == '\n', "the file must end with a newline");
  for (const char *line = text; *line; line = strchr(line, '\n') + 1) {
    size_t n = (size_t)(strchr(line, '\n') - line);
    char l[512];
    line_no++;
    ck_assert_msg(n < sizeof l, "line %d too long", line_no);
    memcpy(l, line, n);
    l[n] = '\0';
    char name[128], kind[32];
    if (sscanf(l, "# HELP %127s", name) == 1) {
      for (int f = 0; f < families; f++)
        ck_assert_msg(strcmp(done[f], name) != 0, "line %d: %s seen before", line_no, name);
      ck_assert_msg(strcmp(name, family) != 0 || !help, "line %d: second HELP", line_no);
      if (strcmp(name, family) != 0) {
        if (*family)
          snprintf(done[families++], sizeof done[0], "%s", family);
        snprintf(family, sizeof family, "%s", name);
        type = false;
      }
      help = true;
      continue;
    }
    if (sscanf(l, "# TYPE %127s %31s", name, kind) == 2) {
      ck_assert_msg(strcmp(name, family) == 0 && help && !type, "line %d: TYPE out of place",
                    line_no);
      ck_assert_msg(!strcmp(kind, "gauge") || !strcmp(kind, "counter"), "line %d: type %s",
                    line_no, kind);
      type = true;
      continue;
    }
    ck_assert_msg(l[0] != '#', "line %d: unexpected comment", line_no);
    const char *brace = strchr(l, '{');
    ck_assert_msg(brace, "line %d: sample without labels: %s", line_no, l);
    ck_assert_msg(valid_name(l, (size_t)(brace - l)), "line %d: bad name", line_no);
    ck_assert_msg((size_t)(brace - l) == strlen(family) && !strncmp(l, family, strlen(family)) &&
                    help && type, "line %d: sample outside its family %s", line_no, family);
    const char *after = skip_labels(brace + 1, line_no);
    ck_assert_msg(*after == ' ', "line %d: no value", line_no);
    char *end;
    strtod(after + 1, &end);
    ck_assert_msg(end != after + 1 && *end == '\0', "line %d: value then something else "
                  "(a timestamp?): %s", line_no, l);
    ck_assert_int_lt(samples, PROM_MAX_SERIES);
    snprintf(series[samples], sizeof series[0], "%.*s", (int)(after - l), l);
    for (int i = 0; i < samples; i++)
      ck_assert_msg(strcmp(series[i], series[samples]) != 0, "line %d: series twice", line_no);
    samples++;
  }
  return samples;
}

/* The value of the sample whose text starts with series, e.g.
 * `oomlens_allocated_bytes{pid="1",rank="0",device="0"}`. */
static double prom_value(const char *text, const char *series)
{
  const char *at = strstr(text, series);
  ck_assert_msg(at, "no %s in\n%s", series, text);
  return strtod(at + strlen(series), NULL);
}

START_TEST(metrics_file_kept_current)
{
  char path[PATH_MAX + 32], env_metrics[PATH_MAX + 64];
  snprintf(path, sizeof path, "%s/m-%%r.prom", harness_dir());
  snprintf(env_metrics, sizeof env_metrics, "OOMLENS_METRICS=%s", path);
  snprintf(path, sizeof path, "%s/m-3.prom", harness_dir());
  const char *env[] = {env_metrics, "OOMLENS_METRICS_INTERVAL=100ms", "RANK=3", NULL};
  const char *argv[] = {harness_env("OOMLENS_TEST_PROG"), "metrics", path, NULL};
  harness_run_t run;
  harness_exec(&run, true, env, argv); /* the program waits to see 5 MiB in the file */
  ck_assert_msg(run.status == 0, "exit %d:\n%s", run.status, run.out);
  const char *text = harness_read_text(path);
  /* five gauges, and the OOM counter by class plus its "unknown" */
  ck_assert_int_eq(prom_check(text), 5 + OL_OOM_CLASS_COUNT + 1);
  ol_json_t *r = harness_report(run.pid);
  ck_assert_ptr_nonnull(r);
  char series[128];
  const char *const names[][2] = {
    {"oomlens_allocated_bytes", STAT("allocated_bytes.all.current")},
    {"oomlens_allocated_peak_bytes", STAT("allocated_bytes.all.peak")},
    {"oomlens_reserved_bytes", STAT("reserved_bytes.all.current")},
    {"oomlens_reserved_peak_bytes", STAT("reserved_bytes.all.peak")},
  };
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    snprintf(series, sizeof series, "%s{pid=\"%ld\",rank=\"3\",device=\"0\"} ", names[i][0],
             (long)run.pid);
    ck_assert_int_eq((int64_t)prom_value(text, series), harness_int(r, names[i][1]));
  }
  ck_assert_int_eq(harness_int(r, STAT("allocated_bytes.all.peak")), 8 * MiB);
  snprintf(series, sizeof series, "oomlens_wasted_ratio{pid=\"%ld\",rank=\"3\",device=\"0\"} ",
           (long)run.pid);
  ck_assert(prom_value(text, series) == 0.0);
  ol_json_free(r);
  ck_assert_int_eq(harness_count_files(".prom"), 1);
  ck_assert_int_eq(harness_count_files(".tmp"), 0);
}
END_TEST

/* An OOM counted under its class, and a forked child that uses CUDA
 * writes its own file (x.<pid>.prom), never the parent's. */
START_TEST(metrics_oom_classes_and_fork)
{
  char env_metrics[PATH_MAX + 64], path[PATH_MAX + 32];
  snprintf(env_metrics, sizeof env_metrics, "OOMLENS_METRICS=%s/m.prom", harness_dir());
  const char *env[] = {env_metrics, "SIMCU_CAPACITY=64M", NULL};
  const char *argv[] = {harness_env("OOMLENS_TEST_PROG"), "oom", NULL};
  harness_run_t run;
  harness_exec(&run, true, env, argv);
  ck_assert_msg(run.status == 0, "exit %d:\n%s", run.status, run.out);
  snprintf(path, sizeof path, "%s/m.prom", harness_dir());
  const char *text = harness_read_text(path);
  prom_check(text);
  char series[160];
  snprintf(series, sizeof series,
           "oomlens_ooms_total{pid=\"%ld\",rank=\"0\",device=\"0\",class=\"impossible\"} ",
           (long)run.pid);
  ck_assert(prom_value(text, series) == 1.0);
  snprintf(series, sizeof series,
           "oomlens_ooms_total{pid=\"%ld\",rank=\"0\",device=\"0\",class=\"leak\"} ",
           (long)run.pid);
  ck_assert(prom_value(text, series) == 0.0);

  const char *argv2[] = {harness_env("OOMLENS_TEST_PROG"), "fork", NULL};
  harness_exec(&run, true, env, argv2);
  ck_assert_msg(run.status == 0, "exit %d:\n%s", run.status, run.out);
  ck_assert_int_eq(harness_count_files(".prom"), 2);
  text = harness_read_text(path);
  prom_check(text);
  snprintf(series, sizeof series,
           "oomlens_allocated_bytes{pid=\"%ld\",rank=\"0\",device=\"0\"} ", (long)run.pid);
  ck_assert_int_eq((int64_t)prom_value(text, series), 3 * MiB);
}
END_TEST

/* A job ended by SIGTERM: the file gets its last figures before the job
 * goes (the interval is far longer than the job: only that write can
 * have put them there). */
START_TEST(metrics_written_before_sigterm)
{
  char env_metrics[PATH_MAX + 64], path[PATH_MAX + 32];
  snprintf(env_metrics, sizeof env_metrics, "OOMLENS_METRICS=%s/m.prom", harness_dir());
  const char *env[] = {env_metrics, "OOMLENS_METRICS_INTERVAL=600", NULL};
  const char *argv[] = {harness_env("OOMLENS_TEST_PROG"), "sigterm", NULL};
  harness_run_t run;
  harness_exec(&run, true, env, argv);
  ck_assert_msg(run.status == 128 + SIGTERM, "exit %d:\n%s", run.status, run.out);
  snprintf(path, sizeof path, "%s/m.prom", harness_dir());
  ck_assert_int_eq(access(path, F_OK), 0);
  const char *text = harness_read_text(path);
  prom_check(text);
  char series[160];
  snprintf(series, sizeof series,
           "oomlens_allocated_bytes{pid=\"%ld\",rank=\"0\",device=\"0\"} ", (long)run.pid);
  ck_assert_int_eq((int64_t)prom_value(text, series), 7 * MiB);
}
END_TEST

/* The report's timeline: its peak is the counters' peak to the byte, and
 * the OOM is on it with its wall-clock time. */
START_TEST(timeline_in_the_report)
{
  const char *env[] = {"SIMCU_CAPACITY=1G", "PYTORCH_NO_CUDA_MEMORY_CACHING=1",
                       "SIMCU_EXTERNAL=0", NULL};
  harness_run_t run;
  ol_json_t *r = run_scenario("oom_activations", env, &run);
  ck_assert_int_eq(harness_int(r, "oomlens_report_minor"), OL_REPORT_MINOR);
  const ol_json_t *points = ol_json_path(r, DEV "timeline.allocated");
  size_t n = ol_json_length(points);
  ck_assert_uint_gt(n, 1);
  ck_assert_uint_le(n, 1024);
  ck_assert_int_eq(harness_int(r, DEV "timeline.points"), (int64_t)n);
  int64_t highest = 0, v;
  for (size_t i = 0; i < n; i++)
    if (ol_json_int64(ol_json_at(points, i), &v) && v > highest)
      highest = v;
  ck_assert_int_eq(highest, harness_int(r, STAT("allocated_bytes.all.peak")));
  ck_assert_int_eq(harness_int(r, DEV "timeline.peak.reserved"),
                   harness_int(r, STAT("reserved_bytes.all.peak")));
  ck_assert_int_eq(harness_int(r, DEV "timeline.num_ooms"), 1);
  ck_assert_int_eq(harness_int(r, DEV "timeline.ooms[0].request"), 32 * MiB);
  double oom_at = ol_json_number(ol_json_path(r, DEV "first_oom_time_unix"));
  double start = ol_json_number(ol_json_path(r, DEV "timeline.start_unix"));
  double written = ol_json_number(ol_json_path(r, "time_unix"));
  ck_assert(start > 1e9 && oom_at >= start - 0.01 && oom_at <= written + 0.01);
  ck_assert_int_eq(harness_int(r, DEV "ooms_by_class.activations"), 1);
  ol_json_free(r);
}
END_TEST

/* `oomlens report r.json` prints what the library wrote to r.txt, byte for
 * byte: call sites, the OOM paragraph and all. */
static void same_text_back(const char *scenario, const char *const env[])
{
  harness_run_t run, back;
  ol_json_free(run_scenario(scenario, env, &run));
  char json[PATH_MAX + 32], txt[PATH_MAX + 32];
  snprintf(json, sizeof json, "%s/r-%ld.json", harness_dir(), (long)run.pid);
  snprintf(txt, sizeof txt, "%s/r-%ld.txt", harness_dir(), (long)run.pid);
  const char *argv[] = {harness_env("OOMLENS_TEST_CLI"), "report", json, NULL};
  harness_exec(&back, false, NULL, argv);
  ck_assert_int_eq(back.status, 0);
  const char *written = harness_read_text(txt);
  ck_assert_uint_lt(strlen(written), sizeof back.out - 1); /* the whole of it was compared */
  ck_assert_str_eq(back.out, written);
}

START_TEST(report_command_prints_the_text_back)
{
  const char *sites[] = {"OOMLENS_STACKS=1", NULL};
  same_text_back("two_sites", sites);
  const char *oom[] = {"SIMCU_CAPACITY=1G", "PYTORCH_NO_CUDA_MEMORY_CACHING=1",
                       "SIMCU_EXTERNAL=0", NULL};
  same_text_back("oom_activations", oom);
  /* The diagnosis names its sites; the JSON carries them for the text. */
  const char *leak[] = {"SIMCU_CAPACITY=1G", "PYTORCH_NO_CUDA_MEMORY_CACHING=1",
                        "SIMCU_EXTERNAL=0", "OOMLENS_STACKS=1", NULL};
  same_text_back("oom_leak", leak);
  const char *external[] = {"SIMCU_CAPACITY=1G", "PYTORCH_NO_CUDA_MEMORY_CACHING=1",
                            "SIMCU_EXTERNAL=700M", "SIMNVML_PROCS=4242:700M", NULL};
  same_text_back("oom_external", external);
}
END_TEST

/* Equal byte for byte; else where they part, with a little of each. */
static void assert_same(const char *what, const char *got, const char *want)
{
  size_t at = 0;
  while (got[at] && got[at] == want[at])
    at++;
  size_t from = at > 60 ? at - 60 : 0;
  ck_assert_msg(got[at] == want[at], "%s differs at byte %zu:\nrendered: ...%.120s\nwritten:  "
                "...%.120s", what, at, got + from, want + from);
}

typedef struct {
  const char *scenario;
  const char *env[7];
} round_trip_t;

/* Call sites (grouped, with source lines), a diagnosis naming its holders
 * and its growing site, NVML's other processes, manage mode's advice, the
 * timeline's OOM times, and a report without call sites. */
static const round_trip_t round_trips[] = {
  {"runtime", {NULL}},
  {"two_sites", {"OOMLENS_STACKS=1", NULL}},
  {"nested_sites", {"OOMLENS_STACKS=1", "OOMLENS_STACK_DEPTH=24", NULL}},
  {"oom_leak", {"SIMCU_CAPACITY=1G", "PYTORCH_NO_CUDA_MEMORY_CACHING=1", "SIMCU_EXTERNAL=0",
                "OOMLENS_STACKS=1", NULL}},
  {"oom_external", {"SIMCU_CAPACITY=1G", "PYTORCH_NO_CUDA_MEMORY_CACHING=1",
                    "SIMCU_EXTERNAL=700M", "SIMNVML_PROCS=77:100M,4242:600M", NULL}},
  {"oom_fragmentation", {"SIMCU_CAPACITY=1G", "PYTORCH_NO_CUDA_MEMORY_CACHING=1",
                         "SIMCU_EXTERNAL=0", "OOMLENS_MANAGE=1", "OOMLENS_STACKS=1", NULL}},
  /* manage mode's role capture: memory by role, known (the autograd marker) */
  {"autograd_thread", {"OOMLENS_MANAGE=1", NULL}},
  /* a job that fitted: the batch that would */
  {"train_fits", {"OOMLENS_CAPACITY=1G", "OOMLENS_BATCH=4", "SIMCU_EXTERNAL=0", NULL}},
  /* a first step run out after its stack of layers: its estimate and bound */
  {"oom_first_step", {"SIMCU_CAPACITY=1G", "PYTORCH_NO_CUDA_MEMORY_CACHING=1",
                      "SIMCU_EXTERNAL=0", "OOMLENS_BATCH=8", NULL}},
};

/* The JSON report the library wrote, read back into the report model and
 * rendered again, is that JSON byte for byte, and its text is the text
 * the library wrote: one model, one renderer, nothing lost on the way. */
START_TEST(report_read_back_renders_the_same)
{
  const round_trip_t *c = &round_trips[_i];
  harness_run_t run;
  ol_json_free(run_scenario(c->scenario, c->env, &run));
  char json[PATH_MAX + 32], txt[PATH_MAX + 32];
  snprintf(json, sizeof json, "%s/r-%ld.json", harness_dir(), (long)run.pid);
  snprintf(txt, sizeof txt, "%s/r-%ld.txt", harness_dir(), (long)run.pid);
  ol_report_t back;
  ol_error_t err;
  ck_assert_msg(ol_view_load_json(&back, json, &err) == 0, "%s", err.text);
  ol_buf_t again = {0}, text = {0};
  ol_report_render_json(&again, &back);
  ol_report_render_text(&text, &back);
  ck_assert(!again.failed && !text.failed);
  char *written_json = ol_test_read_file(json, NULL), *written_text = ol_test_read_file(txt, NULL);
  assert_same(c->scenario, again.data, written_json);
  assert_same(c->scenario, text.data, written_text);
  if (strstr(c->scenario, "oom_"))
    ck_assert_ptr_nonnull(strstr(written_json, "\"oom\": {\"class\""));
  free(written_json);
  free(written_text);
  ol_buf_free(&again);
  ol_buf_free(&text);
  ol_report_free(&back);
}
END_TEST

static Suite *preload_suite(void)
{
  Suite *s = suite_create("preload");
  TCase *paths = tcase_create("interception");
  tcase_add_checked_fixture(paths, harness_setup, harness_teardown);
  tcase_set_timeout(paths, 60);
  tcase_add_test(paths, runtime_calls_counted_once);
  tcase_add_test(paths, driver_through_dlsym_and_getproc);
  tcase_add_test(paths, vmm_through_driver_entry_point);
  tcase_add_test(paths, async_and_per_thread_entry_points);
  tcase_add_test(paths, exact_under_sixteen_threads);
  tcase_add_test(paths, out_of_memory_reaches_the_job);
  tcase_add_test(paths, retry_served_is_counted_not_diagnosed);
  tcase_add_test(paths, retry_refused_is_one_oom);
  tcase_add_test(paths, caught_oom_is_diagnosed_once);
  tcase_add_test(paths, size_max_request_is_impossible);
  tcase_add_test(paths, no_cache_means_at_once);
  tcase_add_loop_test(paths, cache_flag_other_than_1_leaves_the_cache_on, 0,
                      (int)(sizeof cache_left_on / sizeof cache_left_on[0]));
  tcase_add_test(paths, several_ooms_one_paragraph_each_up_to_a_bound);
  tcase_add_test(paths, capacity_makes_the_device_smaller);
  tcase_add_test(paths, call_sites_at_the_peak);
  tcase_add_test(paths, paused_capture_takes_no_site);
  tcase_add_test(paths, call_sites_carry_source_lines);
  tcase_add_test(paths, no_source_lines_when_off);
  tcase_add_test(paths, leak_names_the_growing_site);
  tcase_add_test(paths, leak_warned_before_the_oom);
  tcase_add_test(paths, batch_figure_of_a_job_that_fits);
  tcase_add_test(paths, first_step_figure_after_its_stack);
  tcase_add_test(paths, external_names_the_other_process);
  tcase_add_test(paths, external_counts_the_processes_beyond_the_list);
  tcase_add_test(paths, external_names_a_child_process_as_the_jobs_own);
  tcase_add_test(paths, a_cache_given_back_withdraws_the_warning);
  tcase_add_test(paths, pytorch_refusing_at_its_fraction_is_diagnosed);
  tcase_add_test(paths, a_throw_after_a_refusal_is_not_a_second_oom);
  tcase_add_test(paths, pytorch_s_free_pieces_are_fragmentation);
  tcase_add_test(paths, other_exceptions_are_not_oom);
  tcase_add_test(paths, no_sites_unless_asked);
  tcase_add_test(paths, sites_alike_in_shown_frames_are_one);
  tcase_add_loop_test(paths, live_oom_classes, 0, sizeof live_classes / sizeof *live_classes);
  tcase_add_test(paths, a_tensor_kept_in_the_step_is_held_since_the_last);
  tcase_add_test(paths, a_tensor_kept_in_a_larger_step_is_held_since_the_last);
  tcase_add_test(paths, timeline_in_the_report);
  tcase_add_test(paths, report_command_prints_the_text_back);
  tcase_add_loop_test(paths, report_read_back_renders_the_same, 0,
                      sizeof round_trips / sizeof *round_trips);
  suite_add_tcase(s, paths);
  TCase *metrics = tcase_create("metrics");
  tcase_add_checked_fixture(metrics, harness_setup, harness_teardown);
  tcase_set_timeout(metrics, 60);
  tcase_add_test(metrics, metrics_file_kept_current);
  tcase_add_test(metrics, metrics_oom_classes_and_fork);
  tcase_add_test(metrics, metrics_written_before_sigterm);
  suite_add_tcase(s, metrics);
  TCase *life = tcase_create("lifecycle");
  tcase_add_checked_fixture(life, harness_setup, harness_teardown);
  tcase_set_timeout(life, 60);
  tcase_add_test(life, forked_child_writes_its_own_report);
  tcase_add_test(life, forked_child_never_overwrites_parent);
  tcase_add_test(life, signal_writes_report_and_job_continues);
  tcase_add_test(life, sigterm_writes_report_then_ends_the_job);
  tcase_add_test(life, no_driver_means_pass_through);
  tcase_add_test(life, disabled_records_nothing);
  tcase_add_test(life, bad_option_warns_and_keeps_default);
  tcase_add_test(life, unrelated_program_untouched);
  tcase_add_test(life, unwritable_report_dir_does_not_hurt_job);
  suite_add_tcase(s, life);
  TCase *trace = tcase_create("recorded_job");
  tcase_add_checked_fixture(trace, harness_setup, harness_teardown);
  tcase_set_timeout(trace, 120);
  tcase_add_test(trace, recorded_gpt2_trace_peak_exact);
  suite_add_tcase(s, trace);
  return s;
}

int main(void)
{
  return ol_run_suite(preload_suite());
}
