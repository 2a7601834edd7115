/* test_timeline.c: memory over time in bounded memory: buckets keep their
 * highest value, quiet spans carry the level, halving keeps the peak, OOM
 * moments keep the first and the last; and the tracker's timeline agrees
 * with its counters. */
#include <check.h>

#include "check_run.h"
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "lib.h"
#include "report_view.h"

#define US 1000ull /* ns */

static ol_timeline_t tl;

static int64_t highest(const int64_t *v, uint32_t n)
{
  int64_t h = 0;
  for (uint32_t i = 0; i < n; i++)
    h = v[i] > h ? v[i] : h;
  return h;
}

START_TEST(bucket_keeps_its_highest_and_quiet_spans_carry_the_level)
{
  ol_timeline_init(&tl, 1000 * US, 1.5e9);
  ol_timeline_note(&tl, 1000 * US, 100, 200);
  ol_timeline_note(&tl, 1000 * US + 10, 300, 400); /* same bucket: the higher stays */
  ol_timeline_note(&tl, 1000 * US + 20, 50, 400);
  ol_timeline_note(&tl, 1010 * US, 60, 500);     /* ten buckets later */
  ck_assert_uint_eq(tl.count, 11);
  ck_assert_int_eq(tl.allocated[0], 300);
  for (int i = 1; i < 10; i++) {
    ck_assert_int_eq(tl.allocated[i], 50); /* the level left at the end of bucket 0 */
    ck_assert_int_eq(tl.reserved[i], 400);
  }
  ck_assert_int_eq(tl.allocated[10], 60);
  ck_assert_int_eq(tl.reserved[10], 500);
  ck_assert_int_eq(tl.peak_allocated, 300);
  ck_assert_uint_eq(tl.peak_allocated_ns, 1000 * US + 10);
}
END_TEST

/* A million events over a simulated week: the points stay bounded, the
 * width doubled, and a one-event spike in the middle is still the peak. */
START_TEST(bounded_whatever_the_length_and_peak_exact)
{
  const uint64_t week = 7ull * 24 * 3600 * 1000000000ull, n = 1000000;
  ol_timeline_init(&tl, 0, 0);
  for (uint64_t i = 0; i < n; i++) {
    int64_t value = (int64_t)(i % 1000) * 1000;
    if (i == n / 2)
      value = 987654321; /* the spike */
    ol_timeline_note(&tl, i * (week / n), value, value + 1);
  }
  ck_assert_uint_le(tl.count, OL_TIMELINE_POINTS);
  ck_assert_uint_gt(tl.count, OL_TIMELINE_POINTS / 2);
  ck_assert_uint_ge(tl.width_ns * OL_TIMELINE_POINTS, week - week / n);
  ck_assert_int_eq(highest(tl.allocated, tl.count), 987654321);
  ck_assert_int_eq(highest(tl.reserved, tl.count), 987654322);
  ck_assert_int_eq(tl.peak_allocated, 987654321);
  uint64_t spike_bucket = (n / 2) * (week / n) / tl.width_ns;
  ck_assert_int_eq(tl.allocated[spike_bucket], 987654321);
}
END_TEST

START_TEST(first_and_last_ooms_kept)
{
  ol_timeline_init(&tl, 0, 100.0);
  for (int i = 0; i < 20; i++)
    ol_timeline_oom(&tl, (uint64_t)(i + 1) * 1000 * US, 1000 + i);
  ck_assert_uint_eq(tl.oom_count, 20);
  ck_assert_int_eq(tl.ooms[0].request, 1000);
  ck_assert_int_eq(tl.ooms[OL_TIMELINE_OOMS - 2].request, 1000 + OL_TIMELINE_OOMS - 2);
  ck_assert_int_eq(tl.ooms[OL_TIMELINE_OOMS - 1].request, 1019);
}
END_TEST

START_TEST(json_reads_back)
{
  ol_timeline_init(&tl, 0, 1700000000.25);
  ol_timeline_note(&tl, 0, 10, 20);
  ol_timeline_note(&tl, 3 * US, 30, 40);
  ol_timeline_oom(&tl, 5 * US, 77);
  ol_buf_t out = {0};
  ol_timeline_json(&out, &tl);
  char err[128];
  ol_json_t *j = ol_json_parse(out.data, out.len, err, sizeof err);
  ck_assert_msg(j, "%s\n%s", err, out.data);
  ck_assert_int_eq(ol_json_path_int64(j, "points", -1), 6);
  ck_assert_int_eq(ol_json_path_int64(j, "allocated[3]", -1), 30);
  ck_assert_int_eq(ol_json_path_int64(j, "reserved[1]", -1), 20);
  ck_assert_int_eq(ol_json_path_int64(j, "peak.reserved", -1), 40);
  ck_assert_int_eq(ol_json_path_int64(j, "ooms[0].request", -1), 77);
  ck_assert(ol_json_number(ol_json_path(j, "ooms[0].time_unix")) == 1700000000.25 + 5e-6);
  ck_assert(ol_json_number(ol_json_path(j, "interval_s")) == 1e-6);
  ol_json_free(j);
  ol_buf_free(&out);
}
END_TEST

START_TEST(tracker_timeline_matches_counters)
{
  ol_track_reset();
  ck_assert(!ol_track_timeline(0, &tl));
  for (int i = 0; i < 5000; i++) {
    ol_track_alloc(0x10000 + (uintptr_t)i * 0x1000, 4096 + (size_t)(i % 7) * 512, 1,
                   OL_KIND_RUNTIME, 0);
    if (i % 3)
      ol_track_free(0x10000 + (uintptr_t)i * 0x1000, OL_KIND_RUNTIME);
  }
  ol_track_failed_alloc(1 << 30, 1, OL_KIND_RUNTIME, true, NULL);
  ol_track_oom_settle(1); /* an OOM now: the allocator gave up */
  ol_snapshot_t *snap = malloc(sizeof *snap);
  ol_track_snapshot(snap);
  ck_assert(ol_track_timeline(1, &tl));
  const ol_device_stats_t *d = &snap->devices[1];
  ck_assert_int_eq(highest(tl.allocated, tl.count), d->allocated_bytes[OL_POOL_ALL].peak);
  ck_assert_int_eq(tl.peak_reserved, d->reserved_bytes[OL_POOL_ALL].peak);
  ck_assert_int_eq(tl.allocated_now, d->allocated_bytes[OL_POOL_ALL].current);
  ck_assert_uint_eq(tl.oom_count, 1);
  ck_assert(d->first_oom_unix > 1e9 && d->first_oom_unix == d->last_oom_unix);
  ck_assert(!ol_track_timeline(0, &tl));
  free(snap);
  ol_track_reset();
  ck_assert(!ol_track_timeline(1, &tl));
}
END_TEST

/* The tracker's note without the precise time: only inside the last
 * bucket and without a new peak, and then the same as a precise note. */
START_TEST(note_before_only_when_the_bucket_is_certain)
{
  ol_timeline_t precise;
  ol_timeline_init(&tl, 0, 1.5e9);
  ck_assert(!ol_timeline_note_before(&tl, 10, 100, 100)); /* no bucket yet */
  tl.width_ns = 1000 * US;                                /* as after some halvings */
  ol_timeline_note(&tl, 10 * US, 500, 800);               /* bucket 0: [0, 1 ms) */
  ol_timeline_note(&tl, 20 * US, 100, 800);
  precise = tl;
  ck_assert(ol_timeline_note_before(&tl, 900 * US, 300, 700)); /* surely in bucket 0 */
  ol_timeline_note(&precise, 600 * US, 300, 700);
  ck_assert_mem_eq(&tl, &precise, sizeof tl);
  ck_assert_int_eq(tl.allocated_now, 300);
  ck_assert(!ol_timeline_note_before(&tl, 1000 * US, 200, 700)); /* may be bucket 1 */
  ck_assert(!ol_timeline_note_before(&tl, 900 * US, 501, 700));  /* a new peak: its moment */
  ck_assert(!ol_timeline_note_before(&tl, 900 * US, 100, 801));
  ck_assert_mem_eq(&tl, &precise, sizeof tl); /* refusals change nothing */
  ck_assert_uint_eq(tl.count, 1);
}
END_TEST

/* The HTML chart of a timeline at the ends of the range (a crafted trace
 * or report): finished, with its axis labels printed as sizes. Were: a
 * tick value past INT64_MAX cast to int64_t (undefined; the sanitizer
 * build stops at it), and a step too small for the span never ended. */
START_TEST(html_chart_of_extreme_figures)
{
  static const int64_t highs[] = {INT64_MAX, 1, 0};
  static const uint64_t widths[] = {UINT64_MAX, 1, 0};
  for (size_t h = 0; h < sizeof highs / sizeof *highs; h++) {
    for (size_t w = 0; w < sizeof widths / sizeof *widths; w++) {
      ol_report_t r;
      ck_assert_int_eq(ol_report_init(&r, 1), 0);
      ol_timeline_t *line = &r.devices[0].timeline;
      r.devices[0].has_timeline = true;
      line->width_ns = widths[w];
      line->count = 3;
      for (uint32_t i = 0; i < line->count; i++)
        line->allocated[i] = line->reserved[i] = highs[h];
      line->peak_allocated = line->peak_reserved = highs[h];
      line->oom_count = 1;
      line->ooms[0] = (ol_timeline_oom_t){.t_ns = UINT64_MAX, .request = INT64_MAX};
      ol_buf_t html = {0};
      ol_view_html(&html, &r);
      ck_assert(!html.failed);
      ck_assert_ptr_nonnull(strstr(html.data, "<svg class=\"chart\""));
      if (highs[h] == INT64_MAX)
        ck_assert_ptr_nonnull(strstr(html.data, " EiB</text>"));
      ck_assert_msg(!strstr(html.data, "\">-"), "a negative axis label"); /* the cast's wrap */
      ol_buf_free(&html);
      ol_report_free(&r);
    }
  }
}
END_TEST

static Suite *timeline_suite(void)
{
  Suite *s = suite_create("timeline");
  TCase *t = tcase_create("timeline");
  tcase_add_test(t, bucket_keeps_its_highest_and_quiet_spans_carry_the_level);
  tcase_add_test(t, bounded_whatever_the_length_and_peak_exact);
  tcase_add_test(t, first_and_last_ooms_kept);
  tcase_add_test(t, json_reads_back);
  tcase_add_test(t, tracker_timeline_matches_counters);
  tcase_add_test(t, note_before_only_when_the_bucket_is_certain);
  tcase_add_test(t, html_chart_of_extreme_figures);
  suite_add_tcase(s, t);
  return s;
}

int main(void)
{
  return ol_run_suite(timeline_suite());
}
