/* test_pytorch_model.c: the model of PyTorch's caching allocator. Small
 * sequences whose answer is known by hand (rounding, segment sizes, pools,
 * splitting, merging, best fit, streams, max_split_size, release and retry
 * at the cap, expandable growth and release), then the recorded truth: the
 * peak reserved of tests/data's traces against PyTorch's own figures, the
 * OOM traces running out where the real runs did, and the model's segments
 * against the trace's segment_alloc/segment_free events step by step. */
#include <check.h>

#include "check_run.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pytorch_model.h"
#include "replay.h"
#include "trace_csv.h"

#define KiB ((uint64_t)1 << 10)
#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)

static ol_policy_t *policy;
static const ol_policy_ops_t *ops;

static void open_model(const ol_policy_ops_t *which, uint64_t capacity, uint64_t max_split)
{
  ol_policy_options_t options = {.capacity = capacity, .max_split_size = max_split};
  ops = which;
  policy = ops->create(&options);
  ck_assert_ptr_nonnull(policy);
}

static void close_model(void)
{
  if (policy)
    ops->destroy(policy);
  policy = NULL;
}

static uint64_t must_alloc(uint64_t size, uint64_t stream)
{
  uint64_t addr = 0;
  /* Check records every assertion it passes: test first, assert on failure. */
  if (ops->alloc(policy, size, stream, &addr) != 0)
    ck_abort_msg("alloc %llu failed", (unsigned long long)size);
  return addr;
}

static ol_policy_stats_t stats_now(void)
{
  ol_policy_stats_t s;
  ops->stats(policy, &s);
  return s;
}

static void expect(int64_t allocated, int64_t reserved, int64_t segments)
{
  ol_policy_stats_t s = stats_now();
  ck_assert_int_eq(s.allocated, allocated);
  ck_assert_int_eq(s.reserved, reserved);
  ck_assert_int_eq(s.segments, segments);
  ck_assert_int_eq(s.free_reserved, reserved - allocated);
}

/* ---- size rules ---------------------------------------------------------- */

typedef struct {
  uint64_t size, rounded, segment;
} size_case_t;

static const size_case_t size_cases[] = {
  {0, 512, 2 * MiB},
  {1, 512, 2 * MiB},
  {512, 512, 2 * MiB},
  {513, 1024, 2 * MiB},
  {MiB, MiB, 2 * MiB},
  {MiB + 1, MiB + 512, 20 * MiB},
  {10 * MiB - 1, 10 * MiB, 10 * MiB},
  {10 * MiB - 512, 10 * MiB - 512, 20 * MiB},
  {10 * MiB, 10 * MiB, 10 * MiB},
  {11 * MiB + 1, 11 * MiB + 512, 12 * MiB},
  {GiB + 1, GiB + 512, GiB + 2 * MiB},
};

START_TEST(size_table)
{
  const size_case_t *c = &size_cases[_i];
  uint64_t rounded = ol_pt_round_size(c->size);
  ck_assert_uint_eq(rounded, c->rounded);
  ck_assert_uint_eq(ol_pt_segment_size(rounded), c->segment);
}
END_TEST

/* ---- the default policy ----------------------------------------------------- */

static void open_default(void)
{
  open_model(&ol_policy_pytorch, 100 * GiB, 0);
}

START_TEST(small_pool_shares_2mib)
{
  uint64_t a = must_alloc(1000, 0);
  expect(1024, 2 * MiB, 1);
  uint64_t b = must_alloc(1000, 0);
  ck_assert_uint_eq(b, a + 1024); /* split off the same segment, next in line */
  expect(2048, 2 * MiB, 1);
  must_alloc(MiB, 0);
  expect(2048 + MiB, 2 * MiB, 1);
  must_alloc(MiB, 0); /* no room left: a second small segment */
  expect(2048 + 2 * MiB, 4 * MiB, 2);
}
END_TEST

START_TEST(large_pool_shares_20mib)
{
  uint64_t a = must_alloc(3 * MiB, 0);
  expect(3 * MiB, 20 * MiB, 1);
  uint64_t b = must_alloc(5 * MiB, 0);
  ck_assert_uint_eq(b, a + 3 * MiB);
  expect(8 * MiB, 20 * MiB, 1);
  must_alloc(MiB + 1, 0); /* large pool: just over 1 MiB */
  expect(9 * MiB + 512, 20 * MiB, 1);
  must_alloc(512, 0); /* the small pool never uses large segments */
  expect(9 * MiB + 1024, 22 * MiB, 2);
}
END_TEST

/* Large segments are split only for a remainder over 1 MiB; otherwise the
 * whole block is handed out and counted as allocated. */
START_TEST(large_split_rule)
{
  must_alloc(11 * MiB + 1, 0); /* 12 MiB segment, remainder < 1 MiB */
  expect(12 * MiB, 12 * MiB, 1);
  uint64_t a = must_alloc(3 * MiB, 0); /* a 20 MiB segment */
  ops->free(policy, a);
  must_alloc(19 * MiB, 0); /* remainder exactly 1 MiB: not split */
  expect(32 * MiB, 32 * MiB, 2);
  close_model();
  open_default();
  a = must_alloc(3 * MiB, 0);
  ops->free(policy, a);
  must_alloc(18 * MiB, 0); /* remainder 2 MiB: split */
  expect(18 * MiB, 20 * MiB, 1);
  must_alloc(2 * MiB, 0); /* the remainder serves it */
  expect(20 * MiB, 20 * MiB, 1);
}
END_TEST

START_TEST(free_blocks_merge)
{
  uint64_t a = must_alloc(5 * MiB, 0);
  uint64_t b = must_alloc(5 * MiB, 0);
  uint64_t c = must_alloc(5 * MiB, 0);
  ops->free(policy, a);
  ops->free(policy, c); /* c merges with the free tail */
  ck_assert_int_eq(stats_now().largest_free_block, (int64_t)(10 * MiB));
  ops->free(policy, b); /* b joins both: one free 20 MiB block */
  ck_assert_int_eq(stats_now().largest_free_block, (int64_t)(20 * MiB));
  uint64_t d = must_alloc(19 * MiB + 512, 0);
  ck_assert_uint_eq(d, a);
  expect(20 * MiB, 20 * MiB, 1);
}
END_TEST

/* Best fit: the smallest free block that fits, the lower address first. */
START_TEST(best_fit)
{
  uint64_t big = must_alloc(40 * MiB, 0);
  uint64_t keep1 = must_alloc(30 * MiB, 0);
  uint64_t small1 = must_alloc(30 * MiB, 0);
  uint64_t small2 = must_alloc(30 * MiB, 0);
  (void)keep1;
  ops->free(policy, small2);
  ops->free(policy, big);
  ops->free(policy, small1);
  /* Free: 40 MiB, 30 MiB, 30 MiB; a 25 MiB request takes the 30 MiB block
   * at the lower address. */
  ck_assert_uint_eq(must_alloc(25 * MiB, 0), small1 < small2 ? small1 : small2);
  ck_assert_uint_eq(must_alloc(35 * MiB, 0), big);
  expect(25 * MiB + 35 * MiB + 30 * MiB, 130 * MiB, 4);
}
END_TEST

START_TEST(streams_do_not_share)
{
  uint64_t a = must_alloc(4 * MiB, 1);
  ops->free(policy, a);
  uint64_t b = must_alloc(4 * MiB, 2);
  ck_assert_uint_ne(a, b);
  expect(4 * MiB, 40 * MiB, 2);
  ck_assert_uint_eq(must_alloc(4 * MiB, 1), a);
}
END_TEST

/* max_split_size: blocks at or above it are not split, requests below it do
 * not take them, and requests above it take a cached block only when it is
 * less than 20 MiB larger. */
START_TEST(max_split_size)
{
  close_model();
  open_model(&ol_policy_pytorch, 100 * GiB, 40 * MiB);
  uint64_t a = must_alloc(50 * MiB, 0);
  ops->free(policy, a);
  must_alloc(30 * MiB, 0); /* below the limit: a new segment */
  expect(30 * MiB, 80 * MiB, 2);
  ck_assert_uint_eq(must_alloc(45 * MiB, 0), a); /* not split: all 50 MiB */
  expect(80 * MiB, 80 * MiB, 2);
  uint64_t big = must_alloc(80 * MiB, 0);
  ops->free(policy, big);
  ck_assert_uint_ne(must_alloc(60 * MiB, 0), big); /* 80 >= 60 + 20: refused */
  expect(140 * MiB, 220 * MiB, 4);
  ck_assert_uint_eq(must_alloc(61 * MiB, 0), big); /* 80 < 61 + 20 */
  expect(220 * MiB, 220 * MiB, 4);
}
END_TEST

/* At the cap a failed segment allocation releases the cached whole
 * segments and tries again; split ones stay. */
START_TEST(release_and_retry)
{
  close_model();
  open_model(&ol_policy_pytorch, 40 * MiB, 0);
  uint64_t a = must_alloc(30 * MiB, 0);
  ops->free(policy, a);
  must_alloc(35 * MiB, 0); /* 30 + 36 > 40: release the cached 30, then fit */
  expect(36 * MiB, 36 * MiB, 1);
  close_model();
  open_model(&ol_policy_pytorch, 40 * MiB, 0);
  must_alloc(3 * MiB, 0); /* a 20 MiB segment, split and in use */
  uint64_t addr;
  ck_assert_int_eq(ops->alloc(policy, 25 * MiB, 0, &addr), -1);
  expect(3 * MiB, 20 * MiB, 1);
  ck_assert_int_eq(stats_now().largest_free_block, (int64_t)(17 * MiB));
}
END_TEST

START_TEST(release_available_oversize)
{
  close_model();
  open_model(&ol_policy_pytorch, 100 * MiB, 30 * MiB);
  uint64_t a = must_alloc(40 * MiB, 0);
  uint64_t b = must_alloc(50 * MiB, 0);
  ops->free(policy, a);
  ops->free(policy, b);
  /* 90 MiB cached; 20 MiB more do not fit, and a request below the limit
   * may not use oversize blocks: the smallest oversize block that covers
   * the limit (40 MiB) goes, the 50 MiB one stays. */
  must_alloc(20 * MiB, 0);
  expect(20 * MiB, 70 * MiB, 2);
}
END_TEST

START_TEST(unknown_free_ignored)
{
  must_alloc(MiB, 0);
  ops->free(policy, 12345);
  expect(MiB, 2 * MiB, 1);
}
END_TEST

/* ---- expandable segments ------------------------------------------------ */

static void open_expandable(void)
{
  open_model(&ol_policy_pytorch_expandable, 100 * GiB, 0);
}

START_TEST(expandable_grows)
{
  uint64_t a = must_alloc(3 * MiB, 0);
  expect(3 * MiB, 20 * MiB, 1); /* one 20 MiB page of the large pool */
  uint64_t b = must_alloc(30 * MiB, 0);
  ck_assert_uint_eq(b, a + 3 * MiB); /* the segment grew in place */
  expect(33 * MiB, 40 * MiB, 2);
  uint64_t c = must_alloc(1000, 0);
  expect(33 * MiB + 1024, 42 * MiB, 3); /* the small pool's own 2 MiB page */
  uint64_t d = must_alloc(7 * MiB, 0);
  ck_assert_uint_eq(d, b + 30 * MiB); /* fills the mapped tail exactly */
  expect(40 * MiB + 1024, 42 * MiB, 3);
  (void)c;
}
END_TEST

/* Splits any remainder of 512 B or more, in the large pool too (the
 * default would hand out the whole block). */
START_TEST(expandable_splits_small_remainders)
{
  must_alloc(3 * MiB, 0);
  must_alloc(16 * MiB + 512 * KiB, 0);
  expect(19 * MiB + 512 * KiB, 20 * MiB, 1);
  ck_assert_int_eq(stats_now().largest_free_block, (int64_t)(512 * KiB));
}
END_TEST

START_TEST(expandable_release_at_cap)
{
  close_model();
  open_model(&ol_policy_pytorch_expandable, 60 * MiB, 0);
  uint64_t a = must_alloc(3 * MiB, 0);
  uint64_t b = must_alloc(30 * MiB, 0);
  ops->free(policy, a);
  ops->free(policy, b);
  expect(0, 40 * MiB, 2);
  /* 40 + 50 > 60: the free pages are unmapped first, then 3 pages fit. */
  uint64_t c = must_alloc(50 * MiB, 0);
  expect(50 * MiB, 60 * MiB, 3);
  ck_assert_int_eq(stats_now().reserved_peak, (int64_t)(60 * MiB));
  uint64_t addr;
  ck_assert_int_eq(ops->alloc(policy, 11 * MiB, 0, &addr), -1);
  ops->free(policy, c);
  must_alloc(11 * MiB, 0);
}
END_TEST

/* Free pages in the middle are unmapped under pressure; pages a live block
 * touches stay. */
START_TEST(expandable_unmaps_only_whole_free_pages)
{
  close_model();
  open_model(&ol_policy_pytorch_expandable, 90 * MiB, 0);
  uint64_t a = must_alloc(10 * MiB, 0);
  uint64_t b = must_alloc(40 * MiB, 0); /* pages 0-2 */
  uint64_t c = must_alloc(10 * MiB, 0);
  expect(60 * MiB, 60 * MiB, 3);
  ops->free(policy, b); /* b spans [10, 50) MiB: page 1 [20, 40) is wholly free */
  /* 60 + 50 > 90: page 1 is unmapped; 40 + 50 passes the cap check but
   * the 3 pages 50 MiB need do not fit beside the 2 still mapped. */
  uint64_t addr;
  ck_assert_int_eq(ops->alloc(policy, 50 * MiB, 0, &addr), -1);
  expect(20 * MiB, 40 * MiB, 2);
  (void)a;
  (void)c;
}
END_TEST

/* ---- randomized --------------------------------------------------------- */

typedef struct {
  uint64_t addr, size;
} live_t;

static uint64_t next_random(uint64_t *state)
{
  *state ^= *state << 13;
  *state ^= *state >> 7;
  *state ^= *state << 17;
  return *state;
}

static uint64_t random_size(uint64_t *rng)
{
  switch (next_random(rng) % 3) {
  case 0:
    return 1 + next_random(rng) % MiB;
  case 1:
    return MiB + next_random(rng) % (9 * MiB);
  default:
    return 10 * MiB + next_random(rng) % (150 * MiB);
  }
}

static bool disjoint(const live_t *live, int n)
{
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      if (live[i].addr + live[i].size > live[j].addr &&
          live[j].addr + live[j].size > live[i].addr)
        return false;
  return true;
}

/* Random allocations and frees on two streams near the cap, both policies,
 * with and without max_split_size: live blocks never overlap, reserved
 * never passes the cap, allocated covers what is live, and everything
 * freed leaves nothing allocated. */
START_TEST(random_invariants)
{
  const ol_policy_ops_t *which = _i % 2 ? &ol_policy_pytorch_expandable : &ol_policy_pytorch;
  const uint64_t cap = GiB;
  open_model(which, cap, _i / 2 % 2 ? 64 * MiB : 0);
  uint64_t rng = 0x9e3779b97f4a7c15ull + (uint64_t)_i;
  enum { MAX = 200 };
  live_t live[MAX];
  int n = 0, failures = 0;
  for (int step = 0; step < 5000; step++) {
    if (n < MAX && (n == 0 || next_random(&rng) % 10 < 6)) {
      uint64_t size = random_size(&rng), addr;
      if (ops->alloc(policy, size, next_random(&rng) % 2, &addr) == 0)
        live[n++] = (live_t){addr, ol_pt_round_size(size)};
      else
        failures++;
    } else {
      int k = (int)(next_random(&rng) % (uint64_t)n);
      ops->free(policy, live[k].addr);
      live[k] = live[--n];
    }
    ol_policy_stats_t st = stats_now();
    uint64_t sum = 0;
    for (int i = 0; i < n; i++)
      sum += live[i].size;
    if (st.allocated < (int64_t)sum || st.allocated > st.reserved ||
        st.reserved > (int64_t)cap || st.reserved_peak > (int64_t)cap)
      ck_abort_msg("step %d: allocated %lld (live %llu), reserved %lld, peak %lld", step,
                   (long long)st.allocated, (unsigned long long)sum, (long long)st.reserved,
                   (long long)st.reserved_peak);
    if (step % 50 == 0 && !disjoint(live, n))
      ck_abort_msg("step %d: live blocks overlap", step);
  }
  ck_assert_int_gt(failures, 0); /* the cap was reached */
  while (n > 0)
    ops->free(policy, live[--n].addr);
  ol_policy_stats_t st = stats_now();
  ck_assert_int_eq(st.allocated, 0);
  ck_assert_int_eq(st.free_reserved, st.reserved);
}
END_TEST

/* ---- recorded truth -------------------------------------------------------- */

static void data_path(char *out, size_t cap, const char *name)
{
  snprintf(out, cap, "%s/%s.csv.gz", OL_TEST_DATA_DIR, name);
}

typedef struct {
  const char *name;
  int64_t allocated, reserved; /* PyTorch's default run */
  double expandable_ratio;      /* reserved / allocated, expandable run */
} truth_t;

/* tests/data/README.md */
static const truth_t truths[] = {
  {"gpt2", 25393780736, 26254245888, 1.097},
  {"gpt2_varlen", 23332057600, 25889341440, 1.060},
  {"resnet50", 6086117888, 7295991808, 1.010},
};

static ol_replay_result_t replay(const char *name, const ol_policy_ops_t *which, uint64_t cap)
{
  char p[512];
  ol_error_t err;
  data_path(p, sizeof p, name);
  ol_policy_options_t options = {.capacity = cap};
  ol_replay_result_t r;
  ck_assert_msg(ol_replay_file(p, which, &options, &r, &err) == 0, "%s", err.text);
  ol_replay_result_free(&r); /* call sites are test_oom's and test_replay's business */
  return r;
}

static void within_2_percent(const char *what, int64_t got, double want)
{
  double error = ((double)got - want) / want;
  ck_assert_msg(error < 0.02 && error > -0.02, "%s: %lld vs %.0f (%.2f%%)", what,
                (long long)got, want, error * 100);
}

START_TEST(peak_reserved_default)
{
  const truth_t *t = &truths[_i];
  ol_replay_result_t r = replay(t->name, &ol_policy_pytorch, OL_REPLAY_DEFAULT_CAPACITY);
  ck_assert(!r.oom);
  within_2_percent(t->name, r.stats.reserved_peak, (double)t->reserved);
  within_2_percent(t->name, r.stats.allocated_peak, (double)t->allocated);
}
END_TEST

/* The expandable run's allocated peak is not in the README, only its ratio;
 * the default run's allocated peak stands in (the tensors are the same). */
START_TEST(peak_reserved_expandable)
{
  const truth_t *t = &truths[_i];
  ol_replay_result_t r = replay(t->name, &ol_policy_pytorch_expandable, OL_REPLAY_DEFAULT_CAPACITY);
  ck_assert(!r.oom);
  within_2_percent(t->name, r.stats.reserved_peak, t->expandable_ratio * (double)t->allocated);
}
END_TEST

typedef struct {
  const char *name;
  uint64_t cap;
  uint64_t line, size; /* the trace's oom event */
} oom_truth_t;

static const oom_truth_t oom_truths[] = {
  {"oom_params", 8 * GiB, 161, 180355072},
  {"oom_activations", 12 * GiB, 7644, 1646821376},
  {"frag", 6 * GiB, 810, 1080033280},
};

START_TEST(runs_out_where_pytorch_did)
{
  const oom_truth_t *t = &oom_truths[_i];
  ol_replay_result_t r = replay(t->name, &ol_policy_pytorch, t->cap);
  ck_assert_msg(r.oom, "%s did not run out", t->name);
  ck_assert(r.oom_at.recorded);
  ck_assert_uint_eq(r.oom_at.line, t->line);
  ck_assert_uint_eq(r.oom_at.size, t->size);
  ck_assert_uint_eq(r.oom_at.event_index, t->line - 2);
}
END_TEST

/* PyTorch's message at the OOM of oom_params and frag: "7.86 GiB allocated,
 * 1.72 MiB reserved but unallocated"; "3.69 GiB allocated, 1.61 GiB
 * reserved but unallocated". */
START_TEST(oom_state_matches_message)
{
  ol_replay_result_t r = replay("oom_params", &ol_policy_pytorch, 8 * GiB);
  ck_assert_int_eq((r.oom_at.stats.allocated * 100 + (int64_t)GiB / 2) / (int64_t)GiB, 786);
  ck_assert_int_eq((r.oom_at.stats.free_reserved * 100 + (int64_t)MiB / 2) / (int64_t)MiB, 172);
  r = replay("frag", &ol_policy_pytorch, 6 * GiB);
  ck_assert_int_eq((r.oom_at.stats.allocated * 100 + (int64_t)GiB / 2) / (int64_t)GiB, 369);
  ck_assert_int_eq((r.oom_at.stats.free_reserved * 100 + (int64_t)GiB / 2) / (int64_t)GiB, 161);
}
END_TEST

/* Expandable segments get frag through where the default runs out. */
START_TEST(frag_fits_expandable)
{
  ol_replay_result_t r = replay("frag", &ol_policy_pytorch_expandable, 6 * GiB);
  ck_assert(!r.oom);
}
END_TEST

/* Step by step: after every tensor event the model holds the segments the
 * trace says PyTorch held (segment_alloc minus segment_free). */
typedef struct {
  const char *name;
  uint64_t cap;
} lockstep_t;

static const lockstep_t lockstep_cases[] = {
  {"gpt2", OL_REPLAY_DEFAULT_CAPACITY},
  {"resnet50", OL_REPLAY_DEFAULT_CAPACITY},
  {"frag", 6 * GiB},
  {"oom_params", 8 * GiB},
};

#define MAX_LIVE 65536

START_TEST(segments_match_trace)
{
  const lockstep_t *c = &lockstep_cases[_i];
  char p[512];
  ol_error_t err;
  data_path(p, sizeof p, c->name);
  open_model(&ol_policy_pytorch, c->cap, 0);
  ol_trace_t *t = ol_trace_open(p, &err);
  ck_assert_msg(t != NULL, "%s", err.text);
  static uint64_t keys[MAX_LIVE], addrs[MAX_LIVE];
  int live = 0;
  int64_t bytes = 0, count = 0, checked = 0;
  ol_trace_event_t ev;
  while (ol_trace_next(t, &ev, &err) == 1 && ev.action != OL_TRACE_OOM) {
    if (ev.action == OL_TRACE_SEGMENT_ALLOC || ev.action == OL_TRACE_SEGMENT_FREE) {
      int sign = ev.action == OL_TRACE_SEGMENT_ALLOC ? 1 : -1;
      bytes += sign * (int64_t)ev.size;
      count += sign;
      continue;
    }
    if (ev.action == OL_TRACE_ALLOC) {
      if (live == MAX_LIVE)
        ck_abort_msg("more than %d live tensors", MAX_LIVE);
      keys[live] = ev.addr;
      addrs[live++] = must_alloc(ev.size, ev.stream);
    } else if (ev.action == OL_TRACE_FREE_COMPLETED) {
      for (int i = live - 1; i >= 0; i--) {
        if (keys[i] == ev.addr) {
          ops->free(policy, addrs[i]);
          keys[i] = keys[--live];
          addrs[i] = addrs[live];
          break;
        }
      }
    } else {
      continue;
    }
    /* PyTorch records an allocation's segment_alloc before the alloc. */
    ol_policy_stats_t s = stats_now();
    if (s.reserved != bytes || s.segments != count)
      ck_abort_msg("%s line %llu: model %lld bytes in %lld segments, trace %lld in %lld", c->name,
                  (unsigned long long)ev.line, (long long)s.reserved, (long long)s.segments,
                  (long long)bytes, (long long)count);
    checked++;
  }
  ck_assert_int_gt(checked, 80);
  ol_trace_close(t);
}
END_TEST

/* ---- sizes past any device --------------------------------------------- */

#define TiB ((uint64_t)1 << 40)

/* A request past the 1 PiB a segment's address space is capped at (a
 * 4096 TiB --capacity): a segment its own size. Was: a segfault, the
 * segment too small and its block's next NULL. */
START_TEST(expandable_request_past_segment_cap)
{
  open_model(&ol_policy_pytorch_expandable, 4096 * TiB, 0);
  uint64_t size = 2000 * TiB;
  uint64_t addr = must_alloc(size, 0);
  ck_assert_int_ge(stats_now().reserved, (int64_t)size);
  ops->free(policy, addr);
  ck_assert_int_eq(stats_now().allocated, 0);
}
END_TEST

/* A request of 2^64 - 1 on a device of 2^64 - 1: never served. Was: its
 * rounding wrapped to 0 and it was served as 0 bytes. */
START_TEST(request_of_size_max_is_refused)
{
  for (int expandable = 0; expandable < 2; expandable++) {
    open_model(expandable ? &ol_policy_pytorch_expandable : &ol_policy_pytorch, UINT64_MAX, 0);
    uint64_t addr;
    ck_assert_int_eq(ops->alloc(policy, UINT64_MAX, 0, &addr), -1);
    ck_assert_int_eq(ops->alloc(policy, UINT64_MAX - 100, 0, &addr), -1);
    ck_assert_int_eq(stats_now().reserved, 0);
    close_model();
  }
}
END_TEST

/* Segment after segment of 3/4 of a 1 EiB device, each released to make
 * room for the next: more than 2^64 bytes of addresses in all. Each is
 * past the one before, or the model's start again once the addresses ran
 * out (was: they wrapped through 2^64 to anywhere). */
START_TEST(addresses_start_again_past_2_64)
{
  uint64_t device = (uint64_t)1 << 60, start = 0, last = 0;
  open_model(&ol_policy_pytorch, device, 0);
  int restarts = 0;
  for (uint64_t i = 0; i < 40; i++) {
    uint64_t addr = must_alloc(device / 4 * 3 + i * 2 * MiB, 0);
    if (i == 0)
      start = addr;
    else if (addr == start)
      restarts++;
    else
      ck_assert_uint_gt(addr, last);
    last = addr;
    ops->free(policy, addr);
  }
  ck_assert_int_ge(restarts, 1);
  ck_assert_int_eq(stats_now().allocated, 0);
}
END_TEST

static Suite *model_suite(void)
{
  Suite *s = suite_create("pytorch_model");
  TCase *sizes = tcase_create("sizes");
  tcase_add_loop_test(sizes, size_table, 0, sizeof size_cases / sizeof *size_cases);
  suite_add_tcase(s, sizes);

  TCase *def = tcase_create("default");
  tcase_add_checked_fixture(def, open_default, close_model);
  tcase_add_test(def, small_pool_shares_2mib);
  tcase_add_test(def, large_pool_shares_20mib);
  tcase_add_test(def, large_split_rule);
  tcase_add_test(def, free_blocks_merge);
  tcase_add_test(def, best_fit);
  tcase_add_test(def, streams_do_not_share);
  tcase_add_test(def, max_split_size);
  tcase_add_test(def, release_and_retry);
  tcase_add_test(def, release_available_oversize);
  tcase_add_test(def, unknown_free_ignored);
  suite_add_tcase(s, def);

  TCase *exp = tcase_create("expandable");
  tcase_add_checked_fixture(exp, open_expandable, close_model);
  tcase_add_test(exp, expandable_grows);
  tcase_add_test(exp, expandable_splits_small_remainders);
  tcase_add_test(exp, expandable_release_at_cap);
  tcase_add_test(exp, expandable_unmaps_only_whole_free_pages);
  suite_add_tcase(s, exp);

  TCase *huge = tcase_create("huge");
  tcase_add_checked_fixture(huge, NULL, close_model);
  tcase_add_test(huge, expandable_request_past_segment_cap);
  tcase_add_test(huge, request_of_size_max_is_refused);
  tcase_add_test(huge, addresses_start_again_past_2_64);
  suite_add_tcase(s, huge);

  TCase *random = tcase_create("random");
  tcase_add_checked_fixture(random, NULL, close_model);
  tcase_add_loop_test(random, random_invariants, 0, 8);
  suite_add_tcase(s, random);

  TCase *truth = tcase_create("recorded_truth");
  tcase_set_timeout(truth, 120);
  tcase_add_checked_fixture(truth, NULL, close_model);
  tcase_add_loop_test(truth, peak_reserved_default, 0, sizeof truths / sizeof *truths);
  tcase_add_loop_test(truth, peak_reserved_expandable, 0, sizeof truths / sizeof *truths);
  tcase_add_loop_test(truth, runs_out_where_pytorch_did, 0, sizeof oom_truths / sizeof *oom_truths);
  tcase_add_test(truth, oom_state_matches_message);
  tcase_add_test(truth, frag_fits_expandable);
  tcase_add_loop_test(truth, segments_match_trace, 0,
                      sizeof lockstep_cases / sizeof *lockstep_cases);
  suite_add_tcase(s, truth);
  return s;
}

int main(void)
{
  return ol_run_suite(model_suite());
}
