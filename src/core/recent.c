/* recent.c: a device's last events, to set the iteration under way beside
 * the one before it at the same point (core.h, "recent.c").
 *
 * An iteration that runs out where the ones before it did not has either
 * asked for more (a larger input: its tensors are larger) or finds more
 * held than they did at that point (something kept). The lowest points
 * and the blocks' ages tell what was kept across iterations; neither sees
 * a tensor kept in the very iteration that runs out (held-out-like leaks
 * given to ddp_fits: a 392 MiB loss kept at the 10th step ran that step's
 * backward out, where the steps before had freed it: told `activations`).
 * What tells it: the failed iteration made the same sizes in the same
 * order as the last one, and yet holds more than that one did there.
 *
 * The log keeps each allocation and free, its site and size, in a ring of
 * RING events, and where the last two iterations began (the account tells
 * it their ends). Per event the work is one store. At a failure the two
 * iterations are walked side by side, allocations matched in order: the
 * point in the last one where it made as many allocations as this one has
 * is "the same point", and the events since are what each site holds more
 * than it held there; what each made in this one beside what it made in
 * the last by then says whether it holds more because it freed less. An
 * iteration longer than the log keeps, or one that has made more
 * allocations than the last made in all, is not read. */
#include <stdlib.h>

#include "core.h"

#define RING (1u << 18) /* events kept: two iterations of most models' (2 MiB) */
#define UNIT_SHIFT 9    /* sizes in 512-byte units, as PyTorch rounds them */
#define FREED (UINT32_C(1) << 31)
#define MISMATCH_SHARE 32 /* sizes that differ: at most one in 32 (a cuBLAS
                           * workspace made at a new stream, a bucket) */

typedef struct event {
  uint32_t site_plus1; /* FREED | the block's site + 1; 0: none */
  uint32_t units;      /* size in 512-byte units, rounded up */
} event_t;

struct ol_recent {
  uint64_t n;        /* events so far */
  uint64_t began[2]; /* events before the last iteration but one began, and the last */
  uint32_t ends;     /* iteration ends seen, up to 2 */
  event_t ring[RING];
};

ol_recent_t *ol_recent_new(void)
{
  return calloc(1, sizeof(ol_recent_t));
}

void ol_recent_free(ol_recent_t *log)
{
  free(log);
}

static uint32_t units_of(uint64_t size)
{
  uint64_t units = (size >> UNIT_SHIFT) + ((size & ((1u << UNIT_SHIFT) - 1)) != 0);
  return units > UINT32_MAX ? UINT32_MAX : (uint32_t)units;
}

void ol_recent_note(ol_recent_t *log, int32_t site, uint64_t size, bool freed)
{
  uint32_t plus1 = site >= 0 && (uint32_t)site < FREED - 1 ? (uint32_t)site + 1 : 0;
  log->ring[log->n % RING] = (event_t){plus1 | (freed ? FREED : 0), units_of(size)};
  log->n++;
}

void ol_recent_iteration_ended(ol_recent_t *log)
{
  log->began[0] = log->began[1];
  log->began[1] = log->n;
  if (log->ends < 2)
    log->ends++;
}

static const event_t *at(const ol_recent_t *log, uint64_t i)
{
  return &log->ring[i % RING];
}

static bool is_alloc(const event_t *e)
{
  return !(e->site_plus1 & FREED);
}

/* The next allocation at or after i, before end; end where none. */
static uint64_t next_alloc(const ol_recent_t *log, uint64_t i, uint64_t end)
{
  while (i < end && !is_alloc(at(log, i)))
    i++;
  return i;
}

/* Bytes an event adds to what is held (a free's taken). */
static int64_t bytes_of(const event_t *e)
{
  int64_t bytes = (int64_t)e->units << UNIT_SHIFT;
  return is_alloc(e) ? bytes : -bytes;
}

/* This iteration, having made all the last one made, has come back down
 * as an iteration ends: it holds less than half the last one's rise above
 * where it began (phases.c's own test of a window: it gives back more
 * than it keeps). One that has freed little of it goes on longer instead
 * (the simulated oom_activations: each step makes more like blocks). */
static bool came_back_down(const ol_recent_t *log)
{
  int64_t level = 0, rise = 0, kept = 0;
  for (uint64_t i = log->began[0]; i < log->began[1]; i++) {
    level += bytes_of(at(log, i));
    rise = level > rise ? level : rise;
  }
  for (uint64_t i = log->began[1]; i < log->n; i++)
    kept += bytes_of(at(log, i));
  return kept * 2 < rise;
}

/* The same point: the last iteration's event where it was about to make
 * the allocation the failed request is to this one (its allocations so
 * far matched in order, sizes compared); false where the last made fewer,
 * or too many sizes differ. A request that would begin the next iteration
 * (this one has made all the last one made) is set beside this one's
 * first allocation where it came back down as iterations end: the same
 * point is where this one began (the simulated oom_kept_in_step runs out
 * at the allocation iterations are counted by). */
static bool same_point(const ol_recent_t *log, uint64_t request, uint64_t *point)
{
  uint64_t last = log->began[0], now = log->began[1];
  uint64_t made = 0, differ = 0;
  for (uint64_t j = now; j < log->n; j++) {
    const event_t *e = at(log, j);
    if (!is_alloc(e))
      continue;
    last = next_alloc(log, last, now);
    if (last == now)
      return false; /* this iteration has made more than the last did in all */
    differ += at(log, last)->units != e->units;
    made++;
    last++;
  }
  last = next_alloc(log, last, now);
  if (last == now) { /* the request may begin the next iteration, as this one's first began it */
    if (!came_back_down(log))
      return false; /* or this one goes on longer than the last */
    last = next_alloc(log, now, log->n);
  }
  if (last == log->n)
    return false;
  made++;
  differ += at(log, last)->units != units_of(request);
  *point = last;
  return differ * MISMATCH_SHARE <= made;
}

/* Each event's bytes (an allocation's added, a free's taken) into its
 * site's figure, where its site is one of count. */
static int64_t add_by_site(const ol_recent_t *log, uint64_t from, uint64_t to, bool allocs_only,
                           int64_t sign, int64_t *by_site, size_t count)
{
  int64_t total = 0;
  for (uint64_t i = from; i < to; i++) {
    const event_t *e = at(log, i);
    if (allocs_only && !is_alloc(e))
      continue;
    int64_t bytes = sign * bytes_of(e);
    total += bytes;
    uint32_t plus1 = e->site_plus1 & ~FREED;
    if (plus1 && plus1 <= count)
      by_site[plus1 - 1] += bytes;
  }
  return total;
}

bool ol_recent_against_last(const ol_recent_t *log, uint64_t request, int64_t *more,
                            int64_t *made, size_t site_count, int64_t *held_more)
{
  uint64_t point;
  if (!log || log->ends < 2 || log->n - log->began[0] > RING || !same_point(log, request, &point))
    return false;
  *held_more = add_by_site(log, point, log->n, false, 1, more, site_count);
  add_by_site(log, log->began[1], log->n, true, 1, made, site_count);
  add_by_site(log, log->began[0], point, true, -1, made, site_count);
  return true;
}
