/* test_corpus.c: the labelled corpus of real out-of-memory errors
 * (tests/data/oom/, recorded on the H200 by scripts/gpu/diagnosis_check.py;
 * tests/data/oom/README.md says how). Every case is replayed at the cap it
 * ran under and must get its class, and where the case has a batch truth
 * (found by bisection under the same cap), a batch figure within one of it.
 * The manifest is the truth: nothing here is tuned per case. */
#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "core.h"
#include "json.h"
#include "replay.h"

#define MAX_CASES 64

typedef struct corpus_case {
  char name[64], trace[128], policy[32], expected[32];
  uint64_t capacity;
  int64_t batch, batch_truth; /* batch_truth -1: none */
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
  c->batch = ol_json_path_int64(entry, "batch", 0);
  c->batch_truth = ol_json_path_int64(entry, "batch_truth", -1);
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
  for (size_t i = 0; i < n && case_count < MAX_CASES; i++)
    if (!read_case(ol_json_at(root, i), &cases[case_count++])) {
      fprintf(stderr, "corpus: %s: entry %zu lacks a name, trace, truth or cap\n", path, i);
      exit(1);
    }
  ol_json_free(root);
}

START_TEST(each_case_gets_its_class_and_batch)
{
  const corpus_case_t *c = &cases[_i];
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/oom/%s", OL_TEST_DATA_DIR, c->trace);
  const ol_policy_ops_t *ops = ol_policy_find(c->policy);
  ck_assert_msg(ops, "%s: no policy %s", c->name, c->policy);
  ol_policy_options_t options = {.capacity = c->capacity};
  ol_replay_extras_t extras = {.device = -1, .batch = (uint64_t)(c->batch > 0 ? c->batch : 0)};
  ol_replay_result_t result;
  ol_error_t err;
  ck_assert_msg(ol_replay_file_with(path, ops, &options, &extras, &result, &err) == 0, "%s: %s",
                c->name, err.text);
  /* The recorded job's own OOM when it had one; else what the replayed
   * policy met (a case that fitted live but not under another policy). */
  const ol_oom_record_t *record = result.recorded ? &result.recorded_oom.record
                                                  : &result.oom_at.record;
  const char *got = result.recorded ? ol_oom_class_name(result.recorded_oom.cause)
                    : result.oom    ? ol_oom_class_name(result.oom_at.cause)
                                    : "none";
  ck_assert_msg(strcmp(got, c->expected) == 0, "%s: replay says %s, the truth is %s", c->name,
                got, c->expected);
  if (c->batch_truth >= 0) {
    int64_t fits, fits_headroom;
    bool bound;
    ck_assert(ol_oom_batch_figures(record, &fits, &fits_headroom, &bound));
    ck_assert_msg(llabs(fits - c->batch_truth) <= 1,
                  "%s: batch %lld fits by the diagnosis, %lld by bisection", c->name,
                  (long long)fits, (long long)c->batch_truth);
  }
  ol_replay_result_free(&result);
}
END_TEST

static Suite *corpus_suite(void)
{
  Suite *s = suite_create("corpus");
  TCase *t = tcase_create("replay");
  tcase_set_timeout(t, 120);
  tcase_add_loop_test(t, each_case_gets_its_class_and_batch, 0, case_count);
  suite_add_tcase(s, t);
  return s;
}

int main(void)
{
  load_manifest();
  return ol_run_suite(corpus_suite());
}
