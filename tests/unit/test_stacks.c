/* test_stacks.c: a live site's key as text (lib/stacks.c). The report's
 * frames (ol_stacks_site_frames) and the trace's line (ol_stacks_key_text)
 * come from one walk of the key, so a trace read back (a trace's table,
 * ol_sites_text_frames) names a site with the frames the live report gave
 * it: the same edge rules, the same length limit, ';' written ':'. */
#include <check.h>

#include "check_run.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib.h"

#define HEADER_UNSAMPLED ((uintptr_t)1 << 32)

__attribute__((noinline)) void stacks_test_caller(void);
void stacks_test_caller(void)
{
  __asm__ volatile("");
}

typedef struct stack_case {
  const char *what;
  uintptr_t header; /* python | native << 16 | flags */
  size_t words;     /* 0: as the header says */
  const char *label;
} stack_case_t;

static char long_label[2000];

static const stack_case_t cases[] = {
  {"an empty stack", 0, 0, NULL},
  {"the not-sampled bucket", HEADER_UNSAMPLED, 0, NULL},
  {"a key of the wrong length", 2 << 16, 2, NULL},
  {"native frames only", 3 << 16, 0, NULL},
  {"';' in a Python frame", 2 | 1 << 16, 0, "a.py:1:f;g\nb.py:2:<module>\n"},
  {"a Python frame longer than a frame may be", 1, 0, long_label},
};

typedef struct frames {
  char joined[8192]; /* as a trace would write them */
  size_t count, longest;
} frames_t;

static void add_frame(const char *frame, void *arg)
{
  frames_t *f = arg;
  size_t at = strlen(f->joined);
  if (f->count++)
    f->joined[at++] = ';';
  snprintf(f->joined + at, sizeof f->joined - at, "%s", frame);
  for (char *c = f->joined + at; *c; c++)
    if (*c == ';')
      *c = ':'; /* as the trace writes a frame */
  f->longest = strlen(frame) > f->longest ? strlen(frame) : f->longest;
}

static size_t make_key(const stack_case_t *c, uintptr_t *key)
{
  size_t python = c->header & 0xffff, native = c->header >> 16 & 0xffff;
  size_t words = c->words ? c->words : 1 + 2 * python + native;
  key[0] = c->header;
  for (size_t i = 1; i < words; i++)
    key[i] = i > 2 * python ? (uintptr_t)stacks_test_caller + i : 0;
  return words * sizeof *key;
}

START_TEST(trace_text_is_the_report_frames)
{
  memset(long_label, 'x', sizeof long_label - 2);
  long_label[sizeof long_label - 2] = '\n';
  const stack_case_t *c = &cases[_i];
  uintptr_t key[16];
  size_t len = make_key(c, key);
  ol_sites_t *live = ol_sites_new(), *trace = ol_sites_new();
  int32_t id = ol_sites_intern(live, (const char *)key, len);
  ck_assert_int_ge(id, 0);
  if (c->label)
    ck_assert(ol_sites_set_label(live, id, c->label));
  frames_t shown = {{0}, 0, 0};
  ck_assert_uint_ge(ol_stacks_site_frames(live, id, SIZE_MAX, add_frame, &shown), 1);
  ck_assert_uint_lt(shown.longest, OL_FRAME_TEXT_MAX);
  ol_buf_t text = {0};
  ol_stacks_key_text(key, len, c->label, &text);
  ck_assert(!text.failed && text.data);
  ck_assert_msg(strcmp(text.data, shown.joined) == 0, "%s: trace '%s', report '%s'", c->what,
                text.data, shown.joined);
  /* Read back, the trace's frames are the report's. */
  int32_t back = ol_sites_intern(trace, text.data, text.len);
  frames_t read = {{0}, 0, 0};
  ol_sites_text_frames(trace, back, SIZE_MAX, add_frame, &read);
  ck_assert_msg(strcmp(read.joined, shown.joined) == 0, "%s: read '%s', report '%s'", c->what,
                read.joined, shown.joined);
  ck_assert_uint_eq(read.count, shown.count);
  ol_buf_free(&text);
  ol_sites_free(live);
  ol_sites_free(trace);
}
END_TEST

/* The "not sampled" bucket is one site to the iteration finder live and
 * replayed: the live key says it is (the tracker marks its site), and the
 * text the trace writes for it is the one an account reading the trace
 * marks (a sampled size's misses are counted from it, core/phases.c). */
START_TEST(the_not_sampled_bucket_is_known_live_and_in_a_trace)
{
  uintptr_t key[16];
  size_t len = make_key(&cases[1], key);
  ck_assert(ol_stacks_key_unsampled(key, len));
  ck_assert(!ol_stacks_key_unsampled(key, make_key(&cases[3], key)));
  len = make_key(&cases[1], key);
  ol_buf_t text = {0};
  ol_stacks_key_text(key, len, NULL, &text);
  ck_assert_str_eq(text.data, OL_SITE_UNSAMPLED_TEXT);
  ol_account_t *a = calloc(1, sizeof *a);
  ol_account_init(a, OL_ACCOUNT_SITES);
  int32_t other = ol_account_site(a, 0, "a.py:1:f", 8, NULL);
  int32_t id = ol_account_site(a, 0, text.data, text.len, NULL);
  ck_assert(ol_account_site_unsampled(a, 0, id));
  ck_assert(!ol_account_site_unsampled(a, 0, other));
  ol_buf_free(&text);
  ol_account_free(a);
  free(a);
}
END_TEST

/* A live site's label holds its Python frames a line each: the request of
 * an optimizer's foreach update is told from it as from a trace's
 * ';'-joined key (held-out foreach_step said it replayed and not live,
 * the label read as one frame), a state's making is not. The site is made
 * as the tracker makes it (tracker.c site_for). */
START_TEST(a_live_label_tells_the_foreach_update)
{
  static const char *const labels[] = {
    "torch/optim/adam.py:791:_multi_tensor_adam\ntorch/optim/adam.py:971:adam\n",
    "torch/optim/adam.py:178:_init_group\ntorch/optim/adam.py:238:step\n"};
  for (size_t l = 0; l < 2; l++) {
    uintptr_t key[16];
    size_t len = make_key(&cases[4], key); /* two Python frames */
    ol_account_t *a = calloc(1, sizeof *a);
    ol_account_init(a, OL_ACCOUNT_SITES | OL_ACCOUNT_LIVE_KEYS);
    bool is_new;
    int32_t site = ol_account_site(a, 0, (const char *)key, len, &is_new);
    ck_assert(site >= 0 && is_new);
    ol_sites_t *sites = ol_account_sites(a, 0);
    ck_assert(ol_sites_set_label(sites, site, labels[l]));
    ol_sites_set_fold(sites, site, ol_stacks_role(key, len, labels[l]));
    ol_account_oom_site(a, 0, site);
    ol_oom_record_t r;
    ol_oom_record_init(&r, 64 << 20);
    ol_account_oom_figures(a, 0, &r);
    ck_assert(r.request_role_known && r.request_role == OL_ROLE_optimizer);
    ck_assert_msg(r.request_in_update == (l == 0), "%s", labels[l]);
    ol_account_free(a);
    free(a);
  }
}
END_TEST

/* The report asks for a few frames; the walk stops there. */
START_TEST(site_frames_stop_at_max)
{
  uintptr_t key[16];
  size_t len = make_key(&cases[4], key);
  ol_sites_t *live = ol_sites_new();
  int32_t id = ol_sites_intern(live, (const char *)key, len);
  ck_assert(ol_sites_set_label(live, id, cases[4].label));
  frames_t two = {{0}, 0, 0};
  ck_assert_uint_eq(ol_stacks_site_frames(live, id, 2, add_frame, &two), 2);
  ck_assert_str_eq(two.joined, "a.py:1:f:g;b.py:2:<module>");
  frames_t none = {{0}, 0, 0};
  ck_assert_uint_eq(ol_stacks_site_frames(live, id, 0, add_frame, &none), 0);
  ol_sites_free(live);
}
END_TEST

static Suite *stacks_suite(void)
{
  Suite *s = suite_create("stacks");
  TCase *text = tcase_create("text");
  tcase_add_loop_test(text, trace_text_is_the_report_frames, 0, sizeof cases / sizeof *cases);
  tcase_add_test(text, site_frames_stop_at_max);
  tcase_add_test(text, the_not_sampled_bucket_is_known_live_and_in_a_trace);
  tcase_add_test(text, a_live_label_tells_the_foreach_update);
  suite_add_tcase(s, text);
  return s;
}

int main(void)
{
  return ol_run_suite(stacks_suite());
}
