/* timeline.c: a device's memory over time, in bounded memory.
 *
 * Fixed-width buckets from the first event on, each keeping the highest
 * allocated and reserved bytes seen in it (a bucket nothing happened in
 * holds the level carried over from before). When the last bucket is
 * full, neighbours are merged pairwise (each keeping the larger value) and
 * the width doubles: a job of seconds and one of weeks both fit in
 * OL_TIMELINE_POINTS points, and since merging keeps maxima the peak is
 * always in the timeline exactly. A note within the last bucket costs a
 * multiply and a few compares, one in a new bucket a division, except at a
 * halving (OL_TIMELINE_POINTS steps, a few dozen times in a job's life). Out-of-memory moments are kept beside it: the
 * first ones, and the latest always in the last slot. */
#include <inttypes.h>

#include "core.h"

void ol_timeline_init(ol_timeline_t *tl, uint64_t now_ns, double now_unix)
{
  *tl = (ol_timeline_t){.start_ns = now_ns, .start_unix = now_unix,
                        .width_ns = OL_TIMELINE_FIRST_WIDTH_NS};
}

static int64_t larger(int64_t a, int64_t b)
{
  return a > b ? a : b;
}

static void halve(ol_timeline_t *tl)
{
  uint32_t kept = (tl->count + 1) / 2;
  for (uint32_t j = 0; j < kept; j++) {
    uint32_t a = 2 * j, b = 2 * j + 1 < tl->count ? 2 * j + 1 : 2 * j;
    tl->allocated[j] = larger(tl->allocated[a], tl->allocated[b]);
    tl->reserved[j] = larger(tl->reserved[a], tl->reserved[b]);
  }
  tl->count = kept;
  tl->width_ns *= 2;
}

/* The bucket of time t; earlier than the last bucket (a clock read before
 * another thread's) counts in the last one. */
static uint32_t bucket_of(ol_timeline_t *tl, uint64_t t)
{
  uint64_t since = t > tl->start_ns ? t - tl->start_ns : 0;
  while (since / tl->width_ns >= OL_TIMELINE_POINTS)
    halve(tl);
  uint32_t idx = (uint32_t)(since / tl->width_ns);
  return tl->count > 0 && idx < tl->count - 1 ? tl->count - 1 : idx;
}

/* A note in a bucket after the last one: buckets skipped hold the level
 * carried over. Rare next to notes within the last bucket. */
static void __attribute__((noinline)) note_new_bucket(ol_timeline_t *tl, uint64_t t)
{
  uint32_t idx = bucket_of(tl, t);
  for (; tl->count <= idx; tl->count++) {
    tl->allocated[tl->count] = tl->allocated_now;
    tl->reserved[tl->count] = tl->reserved_now;
  }
}

void ol_timeline_note(ol_timeline_t *tl, uint64_t t, int64_t allocated, int64_t reserved)
{
  uint64_t since = t > tl->start_ns ? t - tl->start_ns : 0;
  if (tl->count == 0 || since >= (uint64_t)tl->count * tl->width_ns)
    note_new_bucket(tl, t);
  uint32_t idx = tl->count - 1;
  tl->allocated[idx] = larger(tl->allocated[idx], allocated);
  tl->reserved[idx] = larger(tl->reserved[idx], reserved);
  tl->allocated_now = allocated;
  tl->reserved_now = reserved;
  if (allocated > tl->peak_allocated) {
    tl->peak_allocated = allocated;
    tl->peak_allocated_ns = t;
  }
  if (reserved > tl->peak_reserved) {
    tl->peak_reserved = reserved;
    tl->peak_reserved_ns = t;
  }
}

/* The hot path's note, made without the precise time when it is not needed:
 * bound_ns is a time the note is known to come before. When that is still
 * inside the last bucket and the note makes no new peak (whose moment is
 * kept exactly), the note belongs to the last bucket whatever its precise
 * time; false leaves the note to ol_timeline_note. */
bool ol_timeline_note_before(ol_timeline_t *tl, uint64_t bound_ns, int64_t allocated,
                             int64_t reserved)
{
  if (tl->count == 0 || allocated > tl->peak_allocated || reserved > tl->peak_reserved ||
      bound_ns >= tl->start_ns + (uint64_t)tl->count * tl->width_ns)
    return false;
  uint32_t idx = tl->count - 1;
  tl->allocated[idx] = larger(tl->allocated[idx], allocated);
  tl->reserved[idx] = larger(tl->reserved[idx], reserved);
  tl->allocated_now = allocated;
  tl->reserved_now = reserved;
  return true;
}

void ol_timeline_oom(ol_timeline_t *tl, uint64_t t, uint64_t request)
{
  ol_timeline_note(tl, t, tl->allocated_now, tl->reserved_now); /* the moment is on the chart */
  uint32_t slot = tl->oom_count < OL_TIMELINE_OOMS ? tl->oom_count : OL_TIMELINE_OOMS - 1;
  tl->ooms[slot] = (ol_timeline_oom_t){.t_ns = t, .request = request};
  tl->oom_count++;
}

double ol_timeline_seconds(const ol_timeline_t *tl, uint64_t t)
{
  return t > tl->start_ns ? (double)(t - tl->start_ns) / 1e9 : 0.0;
}

static void json_array(ol_buf_t *out, const char *name, const int64_t *values, uint32_t n)
{
  ol_buf_printf(out, "\"%s\": [", name);
  for (uint32_t i = 0; i < n; i++)
    ol_buf_printf(out, "%s%" PRId64, i ? ", " : "", values[i]);
  ol_buf_printf(out, "]");
}

/* Point i covers [i * interval_s, (i + 1) * interval_s) after start_unix
 * and holds the highest value in it; times are seconds since start_unix. */
void ol_timeline_json(ol_buf_t *out, const ol_timeline_t *tl)
{
  ol_timeline_json_times(out, tl, NULL);
}

void ol_timeline_json_times(ol_buf_t *out, const ol_timeline_t *tl, const double *oom_unix)
{
  ol_buf_printf(out, "{\"start_unix\": %.6f, \"interval_s\": %.9f, \"points\": %" PRIu32 ", ",
                tl->start_unix, (double)tl->width_ns / 1e9, tl->count);
  json_array(out, "allocated", tl->allocated, tl->count);
  ol_buf_printf(out, ", ");
  json_array(out, "reserved", tl->reserved, tl->count);
  ol_buf_printf(out, ", \"peak\": {\"allocated\": %" PRId64 ", \"allocated_t\": %.6f, "
                "\"reserved\": %" PRId64 ", \"reserved_t\": %.6f}, \"num_ooms\": %" PRIu32
                ", \"ooms\": [",
                tl->peak_allocated, ol_timeline_seconds(tl, tl->peak_allocated_ns),
                tl->peak_reserved, ol_timeline_seconds(tl, tl->peak_reserved_ns), tl->oom_count);
  uint32_t kept = tl->oom_count < OL_TIMELINE_OOMS ? tl->oom_count : OL_TIMELINE_OOMS;
  for (uint32_t i = 0; i < kept; i++) {
    double t = ol_timeline_seconds(tl, tl->ooms[i].t_ns);
    ol_buf_printf(out, "%s{\"t\": %.6f, \"time_unix\": %.6f, \"request\": %" PRIu64 "}",
                  i ? ", " : "", t, oom_unix ? oom_unix[i] : tl->start_unix + t,
                  tl->ooms[i].request);
  }
  ol_buf_printf(out, "]}");
}
