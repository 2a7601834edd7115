/* test_corpus.c: the labelled corpus of real out-of-memory errors
 * (tests/data/oom/, recorded on the H200 by scripts/gpu/diagnosis_check.py;
 * docs/diagnosis.md says how). Every case is replayed at the cap it ran
 * under and must get its class. Where the case has a batch truth (the
 * largest batch that fits, found by bisection under the same cap), the
 * batch figures must say what they claim: an OOM in the first iteration
 * gives an upper bound ("at most N": the truth is not above it, and the
 * trial batch it says to run once to get the figure fits), and,
 * where every layer of its forward had run, an estimate within one of the
 * truth (the manifest's first_step says how far each got); a job
 * whose iterations finished gives an estimate whose 20%-headroom figure
 * fits (is not above the truth) and whose no-headroom figure is not below
 * it by more than one. A batch truth of 0 (batch 1 runs out) wants the
 * figure to say no batch fits. Each case of state or a batch too large
 * is replayed again at four to seven tenths of its cap, as on a smaller
 * device, and its cause must still be what ran it out. The manifest is
 * the truth: nothing here is tuned per case. */
#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "core.h"
#include "json.h"
#include "replay.h"
#include "report_view.h"

#define MAX_CASES 320

typedef struct corpus_case {
  char name[64], trace[128], policy[32], expected[32];
  uint64_t capacity;
  int64_t batch, batch_truth; /* batch_truth -1: none */
  int64_t batch_out;          /* where no truth: the smallest batch known not to fit (-1: none) */
  bool leak_warning;          /* the early warning fires (before the OOM, if any) */
  bool leak_withdrawn;        /* ... fires and is withdrawn: the growth was given back */
  char first_step[16];        /* how far a first-step OOM's forward got ("": not said) */
  char leak_site[64];         /* a frame the leak warning's site names ("": not said) */
  char no_sites[32];          /* a known miss without call sites: what replay says then */
  char estimate_range[160];   /* a first step's estimate whose low end is known to be more
                                 than one below the truth, and why ("": within one) */
  bool bounded_growth;        /* what outlives steps grows to a bound (a cache): on a device
                                 smaller than the bound, that growth runs it out */
  bool state_mid_run;         /* the state that does not fit is made in mid-run (a second
                                 optimizer, a teacher): a smaller device may run out first */
  bool second_step;           /* out at its second step, the first having fit ("out_at") */
} corpus_case_t;

static corpus_case_t cases[MAX_CASES];
static int case_count;

static void text_of(const ol_json_t *entry, const char *key, char *out, size_t cap,
                    const char *fallback)
{
  const char *s = ol_json_string(ol_json_get(entry, key));
  snprintf(out, cap, "%s", s ? s : fallback);
}

/* What replay must say: the truth, unless the manifest says what replay
 * should say instead ("replay": e.g. a case PyTorch's cache made fail
 * that oomlens's pool fits). */
static bool read_case(const ol_json_t *entry, corpus_case_t *c)
{
  char cap[32];
  text_of(entry, "name", c->name, sizeof c->name, "?");
  text_of(entry, "trace", c->trace, sizeof c->trace, "");
  text_of(entry, "replay_policy", c->policy, sizeof c->policy, "oomlens");
  text_of(entry, "truth", c->expected, sizeof c->expected, "");
  if (ol_json_string(ol_json_get(entry, "replay")))
    text_of(entry, "replay", c->expected, sizeof c->expected, "");
  text_of(entry, "cap", cap, sizeof cap, "");
  text_of(entry, "first_step", c->first_step, sizeof c->first_step, "");
  text_of(entry, "leak_site", c->leak_site, sizeof c->leak_site, "");
  text_of(entry, "no_sites", c->no_sites, sizeof c->no_sites, "");
  text_of(entry, "estimate_range", c->estimate_range, sizeof c->estimate_range, "");
  char out_at[32];
  text_of(entry, "out_at", out_at, sizeof out_at, "");
  c->second_step = strcmp(out_at, "second_step") == 0;
  c->batch = ol_json_path_int64(entry, "batch", 0);
  c->batch_truth = ol_json_path_int64(entry, "batch_truth", -1);
  c->batch_out = ol_json_path_int64(entry, "batch_out", -1);
  c->leak_warning = c->leak_withdrawn = c->bounded_growth = c->state_mid_run = false;
  ol_json_bool(ol_json_get(entry, "bounded_growth"), &c->bounded_growth);
  ol_json_bool(ol_json_get(entry, "state_made_mid_run"), &c->state_mid_run);
  ol_json_bool(ol_json_get(entry, "leak_warning"), &c->leak_warning);
  ol_json_bool(ol_json_get(entry, "leak_warning_withdrawn"), &c->leak_withdrawn);
  return ol_parse_size(cap, &c->capacity) && c->capacity > 0 && *c->trace && *c->expected;
}

static void load_manifest(void)
{
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/oom/manifest.json", OL_TEST_DATA_DIR);
  ol_error_t err;
  ol_json_t *root = ol_json_parse_file(path, &err);
  if (!root) {
    fprintf(stderr, "corpus: %s\n", err.text);
    exit(1);
  }
  size_t n = ol_json_length(root);
  if (n > MAX_CASES) { /* never replay part of the corpus and pass */
    fprintf(stderr, "corpus: %s: %zu cases, more than the %d this test holds\n", path, n,
            MAX_CASES);
    exit(1);
  }
  for (size_t i = 0; i < n; i++)
    if (!read_case(ol_json_at(root, i), &cases[case_count++])) {
      fprintf(stderr, "corpus: %s: entry %zu lacks a name, trace, truth or cap\n", path, i);
      exit(1);
    }
  ol_json_free(root);
}

/* An estimate from an iteration that finished: within one of the truth,
 * and the batch kept with 20% headroom fits. */
static void check_estimate(const corpus_case_t *c, int64_t fits, int64_t fits_headroom)
{
  ck_assert_msg(fits_headroom <= c->batch_truth && c->batch_truth <= fits + 1 &&
                    fits <= c->batch_truth + 1,
                "%s: batch %lld fits with 20%% headroom and %lld with none by the figure, %lld "
                "by bisection", c->name, (long long)fits_headroom, (long long)fits,
                (long long)c->batch_truth);
}

/* A first-step estimate whose low end the manifest says is more than one
 * below the truth (estimate_range, with the reason: what the low end
 * counts that the job does not make): the range holds the truth, its low
 * end names no batch that runs out, and it is below the bound. */
static void check_estimate_range(const corpus_case_t *c, const ol_first_step_figure_t *f)
{
  ck_assert_msg(f->low.fits_headroom <= c->batch_truth && f->low.fits <= c->batch_truth + 1 &&
                  c->batch_truth <= f->high.fits + 1 && f->low.fits < f->bound.fits,
                "%s: about %lld to %lld (%lld with 20%% headroom, at most %lld) by the figure, "
                "%lld by bisection", c->name, (long long)f->low.fits, (long long)f->high.fits,
                (long long)f->low.fits_headroom, (long long)f->bound.fits,
                (long long)c->batch_truth);
}

/* A first-step OOM: its bound is never below the truth; where there is
 * an estimate (every layer of the forward had run, or the logits were
 * read ahead), its low end is within one of it, but where the manifest
 * says why not (check_estimate_range). */
static void check_first_step(const corpus_case_t *c, const ol_oom_record_t *record)
{
  ol_first_step_figure_t f;
  bool estimated = ol_oom_first_step_figure(record, &f);
  ck_assert_msg(c->batch_truth <= f.bound.fits, "%s: at most batch %lld fits by the diagnosis, "
                "%lld by bisection", c->name, (long long)f.bound.fits, (long long)c->batch_truth);
  ck_assert_msg(estimated || !*c->estimate_range, "%s: no estimate, where the manifest has "
                "one (%s)", c->name, c->estimate_range);
  if (estimated && *c->estimate_range)
    check_estimate_range(c, &f);
  else if (estimated)
    check_estimate(c, f.low.fits, f.low.fits_headroom);
  else if (f.bound.need_is_lower_bound) /* the batch it says to run once must finish */
    ck_assert_msg(ol_batch_figure_trial(&f.bound) <= c->batch_truth, "%s: the trial batch %lld "
                  "does not fit (%lld by bisection)", c->name,
                  (long long)ol_batch_figure_trial(&f.bound), (long long)c->batch_truth);
}

/* A first-step OOM whose bisection stopped before the truth: the trial
 * batch it says to run once must at least be below a batch known to run
 * out (held-out compiled_batch was told 12 where 11 does not fit). */
static void check_trial_below(const corpus_case_t *c, const ol_oom_record_t *record)
{
  ol_first_step_figure_t f;
  if (record->iterations > 0 || ol_oom_first_step_figure(record, &f) ||
      !f.bound.need_is_lower_bound)
    return;
  ck_assert_msg(ol_batch_figure_trial(&f.bound) < c->batch_out, "%s: the trial batch %lld, "
                "where %lld does not fit", c->name, (long long)ol_batch_figure_trial(&f.bound),
                (long long)c->batch_out);
}

/* How far the forward had got, as the manifest says it did. */
static void check_stage(const corpus_case_t *c, const ol_oom_record_t *record)
{
  static const char *const stages[] = {"unknown", "layers", "head"};
  ck_assert_msg(strcmp(stages[record->first_step.stage], c->first_step) == 0,
                "%s: the first step read as %s, the manifest says %s", c->name,
                stages[record->first_step.stage], c->first_step);
}

/* Out at its second step, with its call sites: the step is set beside
 * the first and its figure read from it, not a first step's bound
 * (held-out resnet50_adam_second_step was read as a first step that had
 * not finished: "at most"). */
static void check_second_step(const corpus_case_t *c, const ol_oom_record_t *record)
{
  int64_t fits, fits_headroom;
  bool bound;
  ck_assert(ol_oom_batch_figures(record, &fits, &fits_headroom, &bound));
  ck_assert_msg(record->iterations == 0 && record->step_rest > 0 && !bound,
                "%s: out at its second step, read as %s (%lld iterations, the rest of the "
                "first %lld bytes)", c->name, bound ? "a bound" : "no second step",
                (long long)record->iterations, (long long)record->step_rest);
}

static void check_oom_batch(const corpus_case_t *c, const ol_oom_record_t *record)
{
  int64_t fits, fits_headroom;
  bool bound;
  ck_assert(ol_oom_batch_figures(record, &fits, &fits_headroom, &bound));
  if (c->batch_truth == 0) { /* batch 1 runs out: the figure must say no batch fits */
    ck_assert_msg(fits < 1, "%s: batch %lld fits by the diagnosis, none by bisection", c->name,
                  (long long)fits);
    return;
  }
  if (record->iterations == 0 && !bound && record->step_rest > 0)
    check_estimate(c, fits, fits_headroom); /* out in its second step, read from the first */
  else if (record->iterations == 0)
    check_first_step(c, record);
  else if (bound) /* "at most": the iteration did not finish */
    ck_assert_msg(c->batch_truth <= fits, "%s: at most batch %lld fits by the diagnosis, %lld "
                  "by bisection", c->name, (long long)fits, (long long)c->batch_truth);
  else
    check_estimate(c, fits, fits_headroom);
}

/* The leak warning names the site the manifest says, by one of its frames. */
static void check_leak_site(const corpus_case_t *c, const ol_report_frames_t *site)
{
  bool named = false;
  for (size_t i = 0; i < site->count && !named; i++)
    named = strstr(site->frame[i], c->leak_site) != NULL;
  ck_assert_msg(named, "%s: the leak warning names %s, not %s", c->name,
                site->count ? site->frame[0] : "no site", c->leak_site);
}

/* `oomlens report` of the trace: the recorded OOM diagnosed as replay
 * diagnoses it; a leak warned of where what outlives iterations grows (by
 * construction), before the job ran out, and nowhere else. */
static void check_trace_report(const corpus_case_t *c, const ol_report_t *view,
                               const ol_replay_result_t *replayed)
{
  const ol_device_stats_t *s = &view->devices[0].stats;
  bool reached = replayed->recorded || !replayed->oom; /* the policy did not stop it first */
  ck_assert_msg(!reached || view->devices[0].diagnosed == replayed->recorded,
                "%s: report %s, replay %s", c->name,
                view->devices[0].diagnosed ? "diagnosed" : "did not diagnose",
                replayed->recorded ? "did" : "did not");
  if (replayed->recorded)
    ck_assert_str_eq(ol_oom_class_name(s->last_oom_class),
                     ol_oom_class_name(replayed->recorded_oom.cause));
  bool standing = ol_leak_standing(&s->phases.leak);
  ck_assert_msg(standing == c->leak_warning, "%s: leak warning %s", c->name,
                standing ? "standing" : s->phases.leak.fired ? "withdrawn" : "did not fire");
  ck_assert_msg(!c->leak_withdrawn || (s->phases.leak.fired && !standing),
                "%s: no leak warning was withdrawn", c->name);
  if (*c->leak_site)
    check_leak_site(c, &view->devices[0].leak_site);
  const ol_timeline_t *tl = &view->devices[0].timeline;
  if (s->phases.leak.fired && view->devices[0].has_timeline && tl->oom_count > 0) {
    double oom_s = ol_timeline_seconds(tl, tl->ooms[0].t_ns); /* both from the first event */
    ck_assert_msg(s->phases.leak.at_s <= oom_s, "%s: warned at %.3f s, ran out at %.3f s",
                  c->name, s->phases.leak.at_s, oom_s);
  }
}

/* A job that fitted: the report of its trace names the batch that would. */
static void check_report_batch(const corpus_case_t *c, const ol_report_t *view)
{
  const ol_report_device_t *d = &view->devices[0];
  ck_assert_msg(d->has_batch, "%s: the report names no batch", c->name);
  ck_assert_int_eq(d->batch.batch, c->batch);
  check_estimate(c, d->batch.fits, d->batch.fits_headroom);
}

/* Where a case's trace is. */
static void trace_path(const corpus_case_t *c, char path[PATH_MAX])
{
  snprintf(path, PATH_MAX, "%s/oom/%s", OL_TEST_DATA_DIR, c->trace);
}

/* Replays a case's trace on a device of capacity bytes, with its call
 * sites or as if it had none. */
static void replay_case(const corpus_case_t *c, uint64_t capacity, bool no_sites,
                        ol_replay_result_t *result)
{
  char path[PATH_MAX];
  trace_path(c, path);
  const ol_policy_ops_t *ops = ol_policy_find(c->policy);
  ck_assert_msg(ops, "%s: no policy %s", c->name, c->policy);
  ol_policy_options_t options = {.capacity = capacity};
  ol_replay_extras_t extras = {.device = -1, .batch = (uint64_t)(c->batch > 0 ? c->batch : 0),
                               .no_sites = no_sites};
  ol_error_t err;
  ck_assert_msg(ol_replay_file_with(path, ops, &options, &extras, result, &err) == 0, "%s: %s",
                c->name, err.text);
}

/* The recorded job's own OOM when it had one; else what the replayed
 * policy met (a case that fitted live but not under another policy). */
static const char *class_of(const ol_replay_result_t *result)
{
  return result->recorded ? ol_oom_class_name(result->recorded_oom.cause)
         : result->oom    ? ol_oom_class_name(result->oom_at.cause)
                          : "none";
}

START_TEST(each_case_gets_its_class_and_batch)
{
  const corpus_case_t *c = &cases[_i];
  ol_replay_result_t result;
  replay_case(c, c->capacity, false, &result);
  const ol_oom_record_t *record = result.recorded ? &result.recorded_oom.record
                                                  : &result.oom_at.record;
  const char *got = class_of(&result);
  ck_assert_msg(strcmp(got, c->expected) == 0, "%s: replay says %s, the truth is %s", c->name,
                got, c->expected);
  char path[PATH_MAX];
  trace_path(c, path);
  ol_error_t err;
  ol_report_t view; /* `oomlens report` of the same trace, read once */
  ck_assert_msg(ol_view_load_trace(&view, path, &err) == 0, "%s: %s", c->name, err.text);
  check_trace_report(c, &view, &result);
  if (*c->first_step && result.recorded)
    check_stage(c, record);
  if (c->second_step && result.recorded)
    check_second_step(c, record);
  if (c->batch_truth >= 0 && result.recorded)
    check_oom_batch(c, record);
  else if (c->batch_truth >= 0)
    check_report_batch(c, &view);
  else if (c->batch_out > 0 && result.recorded)
    check_trial_below(c, record);
  ol_report_free(&view);
  ol_replay_result_free(&result);
}
END_TEST

/* What a case's cause allows on a smaller device, where the job runs out
 * sooner (another GPU, another cap): state that does not fit does not fit
 * a smaller one either (persistent, or undetermined where the state to
 * come is what decides, or impossible), never the batch's memory; a batch
 * too large for a device is too large for a smaller one, its state may
 * not fit there, and nothing else is to blame (no leak, no pieces, no one
 * else). A job that fitted and keeps nothing from step to step runs out
 * of its state or its batch there (held-out accelerate_accum_fits at 0.4
 * of its cap was told `leak`); one whose kept memory grows to a bound
 * larger than the smaller device may run out of that growth. The replay
 * is the check: it has no context line there, so it runs out where the
 * policy does. */
static bool allowed_smaller(const corpus_case_t *c, const char *got)
{
  /* a device so small that the job runs out before the state made in
   * mid-run that its cap does not hold: nothing yet says that state will
   * come, and the step's own memory may be the lever there (held-out
   * vit_switch_state at 0.4 and 0.5 of its cap, in SGD's first step at
   * batch 4, where batch 3 fits until AdamW comes) */
  if (c->state_mid_run && strcmp(got, "activations") == 0)
    return true;
  if (strcmp(c->expected, "persistent") == 0)
    return strcmp(got, "persistent") == 0 || strcmp(got, "undetermined") == 0 ||
           strcmp(got, "impossible") == 0;
  if (strcmp(c->expected, "none") == 0 &&
      (strcmp(got, "none") == 0 || (c->bounded_growth && strcmp(got, "leak") == 0)))
    return true;
  return strcmp(got, "leak") != 0 && strcmp(got, "fragmentation") != 0 &&
         strcmp(got, "external") != 0 && strcmp(got, "none") != 0;
}

/* On a smaller device a leak may run out before it grows (its first
 * steps do not fit: not a leak there), so its class is not checked; but
 * a leak warned of, whose warning stands when it runs out, is the cause
 * the OOM names, and no job that keeps nothing is warned of one. */
static void check_smaller_warning(const corpus_case_t *c, double fraction, const char *got,
                                  const ol_oom_record_t *record)
{
  bool leak = strcmp(c->expected, "leak") == 0;
  if (leak && record->warned)
    ck_assert_msg(strcmp(got, "leak") == 0, "%s at %.1f of its cap: the leak warning stands "
                  "at the OOM, and replay says %s", c->name, fraction, got);
  else if (!leak && !c->bounded_growth)
    ck_assert_msg(!record->warned, "%s at %.1f of its cap: a leak warning stands at "
                  "the OOM, the truth at its cap is %s", c->name, fraction, c->expected);
}

/* Held-out persistent cases replayed at half their caps ran out in the
 * first backward and were told to cut the memory per sample; leaks
 * warned of at 0.5-0.7 were told their work was larger than any before
 * (docs/diagnosis.md, "On smaller devices"). */
START_TEST(a_smaller_device_keeps_the_cause)
{
  static const double fractions[] = {0.4, 0.5, 0.6, 0.7};
  const corpus_case_t *c = &cases[_i];
  if (strcmp(c->expected, "persistent") != 0 && strcmp(c->expected, "activations") != 0 &&
      strcmp(c->expected, "leak") != 0 && strcmp(c->expected, "none") != 0)
    return;
  for (size_t i = 0; i < sizeof fractions / sizeof fractions[0]; i++) {
    ol_replay_result_t result;
    replay_case(c, (uint64_t)((double)c->capacity * fractions[i]), false, &result);
    const char *got = class_of(&result);
    if (strcmp(c->expected, "leak") != 0)
      ck_assert_msg(allowed_smaller(c, got),
                    "%s at %.1f of its cap: replay says %s, the truth at its cap is %s", c->name,
                    fractions[i], got, c->expected);
    if (result.oom && !result.recorded)
      check_smaller_warning(c, fractions[i], got, &result.oom_at.record);
    ol_replay_result_free(&result);
  }
}
END_TEST

/* Without call sites (a job with no Python frames) the diagnosis goes by
 * timing alone, and says undetermined where timing cannot tell: no case
 * may get a class other than its own, but the known misses the manifest
 * lists with the reason (no_sites, no_sites_why; docs/diagnosis.md,
 * "Without call sites"). */
START_TEST(without_call_sites_no_case_is_told_wrong)
{
  const corpus_case_t *c = &cases[_i];
  ol_replay_result_t result;
  replay_case(c, c->capacity, true, &result);
  const char *got = class_of(&result);
  ck_assert_msg(strcmp(got, c->expected) == 0 || strcmp(got, "undetermined") == 0 ||
                  strcmp(got, c->no_sites) == 0,
                "%s without call sites: replay says %s, the truth is %s", c->name, got,
                c->expected);
  ol_replay_result_free(&result);
}
END_TEST

/* A leak that runs its job out at its third step, where the finder told
 * its first iteration's end at the second step's (two at once): the step
 * under way, set beside the second at the same point, holds the second's
 * kept graph more (recent.c, ol_recent_iteration_ended_after); or at its
 * second, before any iteration was told: the step under way repeats the
 * first (ol_recent_step_repeat). Each was told `activations`, its work
 * "larger than any before", until session 34 (docs/diagnosis.md, "A leak
 * out at its second or third step"). */
static const struct {
  const char *name;
  double fraction;
  uint64_t iterations; /* found when it ran out */
} early_leaks[] = {{"leak_loss", 0.5, 2}, {"leak_eval", 0.5, 2}, {"bptt_leak", 0.3, 2},
                   {"leak_loss", 0.4, 0}, {"leak_eval", 0.4, 0}, {"epoch_leak", 0.3, 0},
                   /* blocks made once after the point the step under way had reached
                    * (session 35: read as shifting it, they were `activations`) */
                   {"cnn_loss_leak", 0.7, 0}, {"vit_loss_leak", 0.5, 0}};

static const corpus_case_t *case_named(const char *name)
{
  for (int i = 0; i < case_count; i++)
    if (strcmp(cases[i].name, name) == 0)
      return &cases[i];
  ck_abort_msg("no corpus case %s", name);
  return NULL;
}

/* A case replayed at a fraction of its cap, run out there by the policy
 * itself (not the OOM it recorded). */
static void replay_own_oom_at(const corpus_case_t *c, double fraction,
                              ol_replay_result_t *result)
{
  replay_case(c, (uint64_t)((double)c->capacity * fraction), false, result);
  ck_assert_msg(result->oom && !result->recorded, "%s at %.3f of its cap: no OOM of its own",
                c->name, fraction);
}

START_TEST(a_leak_out_at_its_second_or_third_step_is_a_leak)
{
  const corpus_case_t *c = case_named(early_leaks[_i].name);
  double fraction = early_leaks[_i].fraction;
  ol_replay_result_t result;
  replay_own_oom_at(c, fraction, &result);
  ck_assert_msg(result.oom_at.record.iterations == early_leaks[_i].iterations,
                "%s at %.1f: %llu iterations found",
                c->name, fraction, (unsigned long long)result.oom_at.record.iterations);
  ck_assert_msg(strcmp(class_of(&result), "leak") == 0, "%s at %.1f of its cap: %s", c->name,
                fraction, class_of(&result));
  ol_replay_result_free(&result);
}
END_TEST

/* A job that fits and keeps nothing, replayed on a device so small that
 * it runs out at its second step: cuBLAS's workspace, made at the first
 * step's classifier (its first matrix product) and kept for good, is held
 * more than the first step held at the same point, and weighs a 32nd of
 * a device under 3 GiB; it is no tensor kept (session 41: `leak`, its
 * site the classifier's, before). */
static const struct {
  const char *name;
  double fraction;
} workspace_at_second_step[] = {{"resnet_fits", 0.362}, {"resnet_fits", 0.368},
                                {"resnet_batch_trial", 0.2}};

START_TEST(a_workspace_is_no_leak_at_the_second_step)
{
  const corpus_case_t *c = case_named(workspace_at_second_step[_i].name);
  double fraction = workspace_at_second_step[_i].fraction;
  ol_replay_result_t result;
  replay_own_oom_at(c, fraction, &result);
  ck_assert_msg(strcmp(class_of(&result), "activations") == 0, "%s at %.3f of its cap: %s",
                c->name, fraction, class_of(&result));
  ol_replay_result_free(&result);
}
END_TEST

/* A first backward's layers told as iterations (accelerate_accum_fits
 * on devices of a third of its cap, out in its second micro-step's
 * forward: three told, and that forward "larger than any before" where
 * no step had finished) are no iterations: the step under way is the
 * first (account.c iterations_are_layers). */
static const double accumulating_fractions[] = {0.33, 0.34, 0.36};

START_TEST(a_first_backward_s_layers_are_no_iterations)
{
  const corpus_case_t *c = case_named("accelerate_accum_fits");
  ol_replay_result_t result;
  replay_own_oom_at(c, accumulating_fractions[_i], &result);
  ck_assert_msg(result.oom_at.record.iterations == 0, "%s at %.2f: %llu iterations", c->name,
                accumulating_fractions[_i],
                (unsigned long long)result.oom_at.record.iterations);
  ck_assert_str_eq(class_of(&result), "activations");
  ol_replay_result_free(&result);
}
END_TEST

/* A forward that runs a stack of like layers and then more layers: an
 * encoder-decoder's decoder (its load made two stacks), a siamese
 * encoder's second pass (its asks repeat the first's). Replayed on
 * devices where each runs out just past the first stack, the build
 * before session 35 read the step as at its head and gave an estimate
 * that left the rest out (bart_long_target at 8 GiB: about 34 to 45 fits,
 * where fewer than 18 do); the figure is the bound there. */
static const struct {
  const char *name;
  double capacity_gib;
} past_a_stack[] = {{"bart_long_target", 3}, {"bart_long_target", 5}, {"bart_long_target", 8},
                    {"siamese_bert_fits", 3.5}, {"siamese_bert_fits", 4}};

START_TEST(a_second_stack_or_pass_is_no_head)
{
  const corpus_case_t *c = case_named(past_a_stack[_i].name);
  uint64_t capacity = (uint64_t)(past_a_stack[_i].capacity_gib * (double)(1 << 30));
  ol_replay_result_t result;
  replay_case(c, capacity, false, &result);
  ck_assert_msg(result.oom && !result.recorded, "%s at %.1f GiB: no OOM of its own", c->name,
                past_a_stack[_i].capacity_gib);
  const ol_oom_record_t *r = &result.oom_at.record;
  ck_assert_msg(r->first_step.stage != OL_FIRST_STEP_HEAD, "%s at %.1f GiB: read as the head",
                c->name, past_a_stack[_i].capacity_gib);
  ol_first_step_figure_t f;
  ck_assert(!ol_oom_first_step_figure(r, &f));
  ck_assert(f.bound.need_is_lower_bound);
  ol_replay_result_free(&result);
}
END_TEST

/* Truths bisected under other caps than the one a case ran under, its
 * trace replayed there: ckpt_batch (GPT-2 under bf16 autocast) under 6G
 * and 4915M, where its 12G trace runs out at its 16-bit logits, before the
 * loss's fp32 copy (session 35, on an H100: the build before said 12 and 8
 * fit, where 5 and 4 do). */
static const struct {
  const char *name;
  uint64_t capacity;
  int64_t truth;
} smaller_truths[] = {{"ckpt_batch", UINT64_C(6) << 30, 5}, {"ckpt_batch", UINT64_C(4915) << 20, 4}};

START_TEST(a_smaller_device_s_bisected_batch)
{
  const corpus_case_t *c = case_named(smaller_truths[_i].name);
  ol_replay_result_t result;
  replay_case(c, smaller_truths[_i].capacity, false, &result);
  ck_assert_msg(result.oom && !result.recorded, "%s: no OOM of its own", c->name);
  ck_assert_int_eq(result.oom_at.record.iterations, 0);
  corpus_case_t there = *c;
  there.batch_truth = smaller_truths[_i].truth;
  check_first_step(&there, &result.oom_at.record);
  ol_first_step_figure_t f;
  ck_assert(ol_oom_first_step_figure(&result.oom_at.record, &f));
  ol_replay_result_free(&result);
}
END_TEST

static Suite *corpus_suite(void)
{
  Suite *s = suite_create("corpus");
  TCase *t = tcase_create("replay");
  tcase_set_timeout(t, 120);
  tcase_add_loop_test(t, each_case_gets_its_class_and_batch, 0, case_count);
  tcase_add_loop_test(t, a_smaller_device_keeps_the_cause, 0, case_count);
  tcase_add_loop_test(t, without_call_sites_no_case_is_told_wrong, 0, case_count);
  tcase_add_loop_test(t, a_leak_out_at_its_second_or_third_step_is_a_leak, 0,
                      sizeof early_leaks / sizeof early_leaks[0]);
  tcase_add_loop_test(t, a_workspace_is_no_leak_at_the_second_step, 0,
                      sizeof workspace_at_second_step / sizeof workspace_at_second_step[0]);
  tcase_add_loop_test(t, a_first_backward_s_layers_are_no_iterations, 0,
                      sizeof accumulating_fractions / sizeof accumulating_fractions[0]);
  tcase_add_loop_test(t, a_second_stack_or_pass_is_no_head, 0,
                      sizeof past_a_stack / sizeof past_a_stack[0]);
  tcase_add_loop_test(t, a_smaller_device_s_bisected_batch, 0,
                      sizeof smaller_truths / sizeof smaller_truths[0]);
  suite_add_tcase(s, t);
  return s;
}

int main(void)
{
  load_manifest();
  return ol_run_suite(corpus_suite());
}
