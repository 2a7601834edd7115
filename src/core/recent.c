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
 * Where its sizes differ (a curriculum's longer sequences, a variable-length
 * batch: every tensor larger or smaller) the bytes tell nothing, but the
 * calls still do: made by the same call sites in the same order, each
 * site holds as many blocks at the same point as it did in the last one,
 * whatever their sizes, and a site that holds more blocks kept one
 * (rnn_curriculum_fits given a loss kept at its 10th step: `activations`,
 * "a larger input", before this reading).
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
#include <string.h>

#include "core.h"

#define RING (1u << 18) /* events kept: two iterations of most models' (2 MiB) */
#define UNIT_SHIFT 9    /* sizes in 512-byte units, as PyTorch rounds them */
#define FREED (UINT32_C(1) << 31)
#define MISMATCH_SHARE 32 /* sizes that differ: at most one in 32 (a cuBLAS
                           * workspace made at a new stream, a bucket) */
#define CALLS_COMPARED 8  /* by calls: fewer sites set side by side are not told from chance */
/* By calls, under manage mode's byte-weighted sample of stacks (a block of
 * B bytes is missed with odds exp(-B / 1 MiB) at the default), the sites
 * of blocks the sample took are compared, and only a site all of whose
 * blocks are of this size or more, sure to carry their site, is counted:
 * a smaller one's blocks may be its own in one iteration and the miss's
 * in the next. */
#define SURELY_SAMPLED_UNITS ((UINT32_C(16) << 20) >> UNIT_SHIFT)

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

static uint32_t tag_of(uint64_t event)
{
  return (uint32_t)(event + 1);
}

uint32_t ol_recent_note(ol_recent_t *log, int32_t site, uint64_t size, bool freed)
{
  uint32_t plus1 = site >= 0 && (uint32_t)site < FREED - 1 ? (uint32_t)site + 1 : 0;
  log->ring[log->n % RING] = (event_t){plus1 | (freed ? FREED : 0), units_of(size)};
  return tag_of(log->n++);
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

/* The event of the period-th allocation back from the last, where the log
 * still holds it; false where it does not. */
static bool allocations_back(const ol_recent_t *log, uint64_t period, uint64_t *event)
{
  uint64_t counted = 0, oldest = log->n > RING ? log->n - RING : 0;
  for (uint64_t i = log->n; i > oldest; i--) {
    if (!is_alloc(at(log, i - 1)) || ++counted < period)
      continue;
    *event = i - 1;
    return true;
  }
  return false;
}

/* The finder tells a repeat once it has seen it whole twice or more, so
 * its first end may come with two iterations ended (held-out leak_loss at
 * half its cap: the first end told at its second step's, out in its
 * third). The one before began a period of allocations earlier: without
 * it the iteration under way had no whole one to be set beside, and a
 * leak that runs a job out at its third step read as a larger input. */
void ol_recent_iteration_ended_after(ol_recent_t *log, uint64_t ended, uint64_t period)
{
  uint64_t began;
  if (log->ends == 0 && ended >= 2 && period > 0 && allocations_back(log, period, &began)) {
    log->began[1] = began;
    log->ends = 1;
  }
  ol_recent_iteration_ended(log);
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

/* How the iteration under way lines up with the last one so far. */
typedef struct match {
  uint64_t point;   /* the last one's event set beside the request */
  uint64_t made;    /* allocations set side by side, the request's included */
  uint64_t differ;  /* of them, of other sizes */
  uint64_t compared, other_sites; /* of them, both of known sites (sampled); of other sites */
} match_t;

static uint32_t site_of(const event_t *e)
{
  return e->site_plus1 & ~FREED;
}

static bool is_site(const event_t *e, int32_t site)
{
  return site >= 0 && site_of(e) == (uint32_t)site + 1;
}

/* Whether an event carries its call site: not none, not the site of no
 * frames (every block without Python frames, or all of a job's without
 * call sites), not the sample's miss (whose blocks' sites, were they
 * taken, are not known). */
static bool site_known(const event_t *e, ol_recent_sites_t sites)
{
  return site_of(e) && !is_site(e, sites.frameless) && !is_site(e, sites.unsampled);
}

/* One pair of allocations set side by side, this one's and the last's. */
static void compare(match_t *m, const event_t *now, const event_t *last, ol_recent_sites_t sites)
{
  m->made++;
  m->differ += now->units != last->units;
  if (site_known(now, sites) && site_known(last, sites)) {
    m->compared++;
    m->other_sites += site_of(now) != site_of(last);
  }
}

/* The same point: the last iteration's event where it was about to make
 * the allocation the failed request is to this one (its allocations so
 * far matched in order); false where the last made fewer. A request that
 * would begin the next iteration (this one has made all the last one
 * made) is set beside this one's first allocation where it came back down
 * as iterations end: the same point is where this one began (the
 * simulated oom_kept_in_step runs out at the allocation iterations are
 * counted by). The request's own site is not known here: its size alone
 * is compared. */
static bool same_point(const ol_recent_t *log, uint64_t request, ol_recent_sites_t sites,
                       match_t *m)
{
  uint64_t last = log->began[0], now = log->began[1];
  *m = (match_t){0};
  for (uint64_t j = now; j < log->n; j++) {
    const event_t *e = at(log, j);
    if (!is_alloc(e))
      continue;
    last = next_alloc(log, last, now);
    if (last == now)
      return false; /* this iteration has made more than the last did in all */
    compare(m, e, at(log, last), sites);
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
  m->made++;
  m->differ += at(log, last)->units != units_of(request);
  m->point = last;
  return true;
}

static bool same_sizes(const match_t *m)
{
  return m->differ * MISMATCH_SHARE <= m->made;
}

static bool same_calls(const match_t *m)
{
  return m->compared >= CALLS_COMPARED && m->other_sites * MISMATCH_SHARE <= m->compared;
}

/* The sizes the log made (the request's among them) and freed, each
 * sorted: which sizes no step makes (sizes_made_once, sizes_made_for_good). */
typedef struct sizes_seen {
  uint32_t *made, *freed;
  uint64_t made_count, freed_count;
  uint32_t request;
} sizes_seen_t;

/* Sizes (in units) or tags (ol_recent_note's) in order: qsort's and
 * bsearch's comparator for both. */
static int ascending(const void *a, const void *b)
{
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

static int ascending64(const void *a, const void *b)
{
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

static void sizes_seen_free(sizes_seen_t *s)
{
  free(s->made);
  free(s->freed);
}

static bool sizes_seen_of(const ol_recent_t *log, uint64_t request, sizes_seen_t *s)
{
  uint64_t oldest = log->n > RING ? log->n - RING : 0, room = log->n - oldest + 1;
  *s = (sizes_seen_t){malloc(room * sizeof *s->made), malloc(room * sizeof *s->freed), 0, 0,
                      units_of(request)};
  if (!s->made || !s->freed) {
    sizes_seen_free(s);
    return false;
  }
  for (uint64_t i = oldest; i < log->n; i++) {
    const event_t *e = at(log, i);
    if (is_alloc(e))
      s->made[s->made_count++] = e->units;
    else
      s->freed[s->freed_count++] = e->units;
  }
  s->made[s->made_count++] = s->request;
  qsort(s->made, s->made_count, sizeof *s->made, ascending);
  qsort(s->freed, s->freed_count, sizeof *s->freed, ascending);
  return true;
}

/* The first of sorted[0..count) not below units. */
static uint64_t first_not_below(const uint32_t *sorted, uint64_t count, uint32_t units)
{
  uint64_t low = 0, high = count;
  while (low < high) {
    uint64_t mid = low + (high - low) / 2;
    if (sorted[mid] < units)
      low = mid + 1;
    else
      high = mid;
  }
  return low;
}

/* Blocks of the size made, the request's included, up to most + 1. */
static uint64_t made_of_size(const sizes_seen_t *s, uint32_t units, uint64_t most)
{
  uint64_t first = first_not_below(s->made, s->made_count, units), n = 0;
  while (first + n < s->made_count && s->made[first + n] == units && n <= most)
    n++;
  return n;
}

static bool sizes_made_once(const sizes_seen_t *s, uint32_t units)
{
  return made_of_size(s, units, 1) <= 1;
}

/* Made a few times, once by each thread or stream that makes it, and
 * never given back: cuBLAS's workspaces. More blocks of a size than that
 * are a step's: a first step's forward gives back none of what it keeps
 * for its backward, and its layers make each such size once a layer
 * (corpus gemma2_softcap_batch without call sites, out in its first
 * forward, those sizes left out, was read by its temporaries alone as two
 * stacks, a step). */
#define MADE_FOR_GOOD_MOST 4

static bool sizes_made_for_good(const sizes_seen_t *s, uint32_t units)
{
  if (units == s->request)
    return false; /* the step under way makes it too */
  uint64_t freed = first_not_below(s->freed, s->freed_count, units);
  if (freed < s->freed_count && s->freed[freed] == units)
    return false;
  return made_of_size(s, units, MADE_FOR_GOOD_MOST) <= MADE_FOR_GOOD_MOST;
}

/* Each event's bytes (an allocation's added, a free's taken) into its
 * site's figure, where its site is one of count; an allocation of a size
 * made for good (for_good's, where given) into the total alone: a
 * workspace the step before made past the point is held more than there,
 * and is no site's tensor kept (resnet_fits replayed at 0.362 of its cap,
 * out at its second step on 2.9 GiB: cuBLAS's 96 MiB, made at the first
 * step's classifier, was that layer's "kept" block, a leak). */
static int64_t add_by_site(const ol_recent_t *log, uint64_t from, uint64_t to, bool allocs_only,
                           int64_t sign, int64_t *by_site, size_t count,
                           const sizes_seen_t *for_good)
{
  int64_t total = 0;
  for (uint64_t i = from; i < to; i++) {
    const event_t *e = at(log, i);
    if (allocs_only && !is_alloc(e))
      continue;
    int64_t bytes = sign * bytes_of(e);
    total += bytes;
    uint32_t plus1 = site_of(e);
    if (for_good && is_alloc(e) && sizes_made_for_good(for_good, e->units))
      continue;
    if (plus1 && plus1 <= count)
      by_site[plus1 - 1] += bytes;
  }
  return total;
}

/* Per site, for the reading by calls: blocks held more than at the same
 * point, their bytes, the smallest and largest block made in the two
 * iterations, and allocations made in this one less those of the last by
 * then. */
typedef struct by_site {
  int64_t blocks, bytes, made;
  uint32_t smallest, largest;
} by_site_t;

/* One event of the walk from the last iteration's beginning to now. */
static void count_event(const ol_recent_t *log, uint64_t i, const match_t *m, by_site_t *s)
{
  const event_t *e = at(log, i);
  if (is_alloc(e)) {
    s->smallest = e->units < s->smallest ? e->units : s->smallest;
    s->largest = e->units > s->largest ? e->units : s->largest;
    if (i >= log->began[1])
      s->made++;
    else if (i < m->point)
      s->made--;
  }
  if (i >= m->point) {
    s->blocks += is_alloc(e) ? 1 : -1;
    s->bytes += bytes_of(e);
  }
}

/* The reading by calls: a site all of whose blocks carry their site that
 * holds more blocks than at the same point holds more by them (at most as
 * many of its largest: its other blocks may be larger now); made[] counts
 * allocations, not bytes. False where a block the sample missed was large
 * enough to carry its site (one of them was not counted where it
 * belongs), where such a site has made another number of blocks by then,
 * or no host memory. */
static bool more_by_calls(const ol_recent_t *log, const match_t *m, uint32_t big,
                          ol_recent_sites_t sites, int64_t *more, int64_t *made,
                          size_t site_count, int64_t *held_more)
{
  by_site_t *by = calloc(site_count ? site_count : 1, sizeof *by);
  if (!by)
    return false;
  for (size_t s = 0; s < site_count; s++)
    by[s].smallest = UINT32_MAX;
  bool missed = false;
  for (uint64_t i = log->began[0]; i < log->n && !missed; i++) {
    const event_t *e = at(log, i);
    uint32_t plus1 = site_of(e);
    missed = is_alloc(e) && is_site(e, sites.unsampled) && e->units >= big;
    if (site_known(e, sites) && plus1 <= site_count)
      count_event(log, i, m, &by[plus1 - 1]);
  }
  /* Where a site sure of its count made more or fewer by now than the
   * last one had made by the same point, the walks are not in step: the
   * same sites in another order or number (serve_fits's decode steps,
   * mostly too small to carry their sites, set beside a new call's
   * prefill: its layer norms had made 11 more) */
  bool in_step = !missed;
  for (size_t s = 0; s < site_count && in_step; s++)
    in_step = by[s].smallest == UINT32_MAX || by[s].smallest < big || by[s].made == 0;
  *held_more = 0;
  for (size_t s = 0; s < site_count && in_step; s++) {
    made[s] += by[s].made;
    if (by[s].blocks <= 0 || by[s].smallest < big)
      continue;
    int64_t most = by[s].blocks * ((int64_t)by[s].largest << UNIT_SHIFT);
    int64_t bytes = by[s].bytes < most ? by[s].bytes : most;
    if (bytes > 0) {
      more[s] += bytes;
      *held_more += bytes;
    }
  }
  free(by);
  return in_step;
}

/* The course of the events from one to another: where they were highest
 * above where they began, where they end, the allocations and frees;
 * leaving out the allocations whose blocks are live (their tags, sorted;
 * live_count of them: made once, held now). */
typedef struct course {
  int64_t highest, level;
  uint64_t allocations, frees;
} course_t;

/* The event's site's work (site_work[site]: bits), 0 where none. */
static uint8_t work_of(const event_t *e, const uint8_t *site_work, size_t site_count)
{
  uint32_t plus1 = site_of(e);
  return plus1 && plus1 - 1 < site_count ? site_work[plus1 - 1] : 0;
}

/* Whether the block the event made is live (its tag among live's, sorted). */
static bool is_live(uint64_t event, const uint32_t *live, size_t live_count)
{
  uint32_t tag = tag_of(event);
  return live_count && bsearch(&tag, live, live_count, sizeof *live, ascending);
}

static course_t course_leaving_out(const ol_recent_t *log, uint64_t from, uint64_t end,
                                   const uint32_t *live, size_t live_count)
{
  course_t c = {0};
  for (uint64_t i = from; i < end; i++) {
    if (is_alloc(at(log, i)) && is_live(i, live, live_count))
      continue;
    c.level += bytes_of(at(log, i));
    c.highest = c.level > c.highest ? c.level : c.highest;
    if (is_alloc(at(log, i)))
      c.allocations++;
    else
      c.frees++;
  }
  return c;
}

static course_t course_of(const ol_recent_t *log, uint64_t from, uint64_t end)
{
  return course_leaving_out(log, from, end, NULL, 0);
}

/* The log holds the last two iterations whole, from the last but one's
 * beginning. */
static bool holds_two_iterations(const ol_recent_t *log)
{
  return log && log->ends >= 2 && log->n - log->began[0] <= RING;
}

bool ol_recent_against_last(const ol_recent_t *log, uint64_t request, ol_recent_sites_t sites,
                            int64_t *more, int64_t *made, size_t site_count,
                            ol_recent_reading_t *reading)
{
  match_t m;
  uint32_t big = sites.unsampled >= 0 ? SURELY_SAMPLED_UNITS : 0;
  *reading = (ol_recent_reading_t){0};
  if (!holds_two_iterations(log) || !same_point(log, request, sites, &m))
    return false;
  if (same_sizes(&m)) {
    sizes_seen_t seen;
    bool seen_known = sizes_seen_of(log, request, &seen);
    reading->held_more =
      add_by_site(log, m.point, log->n, false, 1, more, site_count, seen_known ? &seen : NULL);
    if (seen_known)
      sizes_seen_free(&seen);
    if (m.point < log->began[1]) {
      reading->rest_from = m.point;
      reading->rest_end = log->began[1];
    }
    add_by_site(log, log->began[1], log->n, true, 1, made, site_count, NULL);
    add_by_site(log, log->began[0], m.point, true, -1, made, site_count, NULL);
    return true;
  }
  reading->by_calls = true;
  return same_calls(&m) &&
         more_by_calls(log, &m, big, sites, more, made, site_count, &reading->held_more);
}

/* ---- a step found at the failure -----------------------------------------
 * A leak that runs its job out in its second step does so before the
 * finder has told any iteration (it tells a repeat once it has seen it
 * whole twice): the job read as in its first step, and the graph its
 * first step kept as the batch's own memory (held-out leak_loss at 0.4 of
 * its cap: `activations`). Nor does the finder tell the steps of a leak
 * that keeps most of what each step makes (a window that keeps more than
 * three quarters of its rise is no iteration's: held-out vit_loss_leak,
 * ViT-B/16's graph kept each step, out at its fourth with none told). At
 * the failure the allocations up to the request may repeat, in size and
 * order, those a period earlier: the period whose repeat reaches furthest
 * back. Where the period before the step under way (the repeat's last
 * period's worth) made a forward's blocks and a backward's (its sites'
 * roles say so: a first step's layers, which repeat each other, make one
 * kind each), and the repeat is a forward's or a backward's work, not
 * blocks of the weights' sizes in their order alone (an optimizer's
 * update, a job's own fp32 copies of its weights, repeat the gradients'
 * or the load's), the two are set beside each other as two iterations
 * are. */
#define REPEAT_MIN 32                    /* allocations repeated, the request's included */
#define REPEAT_WORK (UINT64_C(1) << 24) /* sizes compared at most, a cold path's bound */

typedef struct repeat {
  uint64_t period, run; /* in allocations */
} repeat_t;

/* How far back from the end sizes[] repeats itself a period earlier. */
static uint64_t run_of(const uint32_t *sizes, uint64_t count, uint64_t period, uint64_t *work)
{
  uint64_t run = 0;
  while (run + period < count && sizes[count - 1 - run] == sizes[count - 1 - run - period])
    run++;
  *work += run + 1;
  return run;
}

/* The period whose repeat reaches furthest back (the shorter of two that
 * reach as far); run 0 where none, or the work ran past its bound. */
static repeat_t longest_repeat(const uint32_t *sizes, uint64_t count)
{
  repeat_t best = {0, 0};
  uint64_t work = 0;
  for (uint64_t period = 1; period < count && work <= REPEAT_WORK; period++) {
    if (sizes[count - 1 - period] != sizes[count - 1])
      continue;
    uint64_t run = run_of(sizes, count, period, &work);
    if (run > best.run)
      best = (repeat_t){period, run};
  }
  return work > REPEAT_WORK ? (repeat_t){0, 0} : best;
}

/* Of the allocations from first to end (of events[]), those of a site
 * whose work is kind. */
static uint64_t made_of(const ol_recent_t *log, const uint64_t *events, uint64_t first,
                        uint64_t end, const uint8_t *site_work, size_t site_count, uint8_t kind)
{
  uint64_t made = 0;
  for (uint64_t k = first; k < end; k++)
    made += (work_of(at(log, events[k]), site_work, site_count) & kind) != 0;
  return made;
}

/* A period that made a forward's blocks and a backward's is a step's: a
 * forward's layer makes no backward's, a backward's layer no forward's
 * (a first step's layers repeat each other). */
static bool a_step(const ol_recent_t *log, const uint64_t *events, uint64_t first, uint64_t end,
                   const uint8_t *site_work, size_t site_count)
{
  return made_of(log, events, first, end, site_work, site_count, OL_RECENT_FORWARD) > 0 &&
         made_of(log, events, first, end, site_work, site_count, OL_RECENT_BACKWARD) > 0;
}

/* The log's allocations, oldest first, and the request last. Sizes made
 * once in the log are no step's work and are left out: a first step makes
 * blocks that no later step makes again and keeps them (a matrix
 * product's first workspace, cuBLAS's, which PyTorch keeps for good; the
 * autograd thread's in the first backward), and each shifts the first
 * step's allocations from the second's by one, breaking their repeat
 * short of its reach (a leak out early in its second backward was read as
 * a first step's). So are sizes no block of which was ever given back:
 * cuBLAS's workspaces are made once a thread, the main thread's in the
 * first forward and the autograd thread's, of the same sizes, in the
 * first backward; made twice, they broke the repeat in the first layer,
 * and the second step was set beside the first from a later layer of
 * like sizes (held-out gpt2_medium at batch 3, out at its second step:
 * set six layers late, their 1.15 GB missing from the rest, batch 2 said
 * to fit where only 1 does). A leak's kept tensors never given back are
 * left out of both steps alike. The events left out are kept apart
 * (once[]), so the two steps are set beside each other from past them. */
typedef struct allocs {
  uint64_t *events; /* the log's index of each but the request */
  uint32_t *sizes;
  uint64_t count;   /* the request's included */
  uint64_t *once;   /* the log's index of each left out, in order */
  uint64_t once_count;
} allocs_t;

/* The request counts among the sizes: the block of its size the step
 * before made is made twice with it. */
static void leave_out_sizes_no_step_makes(allocs_t *a, const sizes_seen_t *seen)
{
  uint64_t logged = a->count - 1, kept = 0; /* the last is the request */
  for (uint64_t i = 0; i < logged; i++)
    if (sizes_made_once(seen, a->sizes[i]) || sizes_made_for_good(seen, a->sizes[i])) {
      a->once[a->once_count++] = a->events[i];
    } else {
      a->events[kept] = a->events[i];
      a->sizes[kept++] = a->sizes[i];
    }
  a->sizes[kept++] = a->sizes[logged];
  a->count = kept;
}

static bool allocs_of(const ol_recent_t *log, uint64_t request, allocs_t *a)
{
  uint64_t oldest = log->n > RING ? log->n - RING : 0, room = log->n - oldest + 1;
  *a = (allocs_t){malloc(room * sizeof *a->events), malloc(room * sizeof *a->sizes), 0,
                  malloc(room * sizeof *a->once), 0};
  if (!a->events || !a->sizes || !a->once)
    return false;
  for (uint64_t i = oldest; i < log->n; i++)
    if (is_alloc(at(log, i))) {
      a->events[a->count] = i;
      a->sizes[a->count++] = at(log, i)->units;
    }
  a->sizes[a->count++] = units_of(request);
  sizes_seen_t seen;
  if (sizes_seen_of(log, request, &seen)) { /* without host memory for it, none left out */
    leave_out_sizes_no_step_makes(a, &seen);
    sizes_seen_free(&seen);
  }
  return true;
}

static void allocs_free(allocs_t *a)
{
  free(a->events);
  free(a->sizes);
  free(a->once);
}

/* Past the last block left out in the step before, up to where it was
 * when it had made what the step under way has (made: the kept
 * allocations since now): how many of its kept allocations come before
 * that block (0: none; one left out past that point shifts nothing
 * before it). */
static uint64_t past_left_out(const allocs_t *a, uint64_t last, uint64_t made)
{
  uint64_t latest = 0, point = a->events[last + made];
  bool any = false;
  for (uint64_t k = 0; k < a->once_count; k++)
    if (a->once[k] > a->events[last] && a->once[k] < point) {
      latest = a->once[k];
      any = true;
    }
  uint64_t skip = 0;
  while (any && skip < made && a->events[last + skip] < latest)
    skip++;
  return skip;
}

/* Without call sites, a step is told from a layer by what it holds: a
 * step's allocations hold its forward's stack of like layers and its
 * backward's, two repeats apart from each other, where a forward's layer
 * (or a few of them, Gemma 3's five local to one global) holds one run of
 * like layers at most, and a backward's layer or an optimizer's none.
 * Sizes asked again at once count once: a layer's run of one size (a
 * compiled layer's 60 buffers of 384 MiB, one a head) is no stack, and
 * held two of them (corpus compiled_batch at 0.7 of its cap, without its
 * sites: a first step's layer read as a step, `undetermined`). */
#define INNER_PERIOD_MIN 3    /* sizes a layer, one of each run, at least */
#define INNER_PERIOD_MAX 1024 /* allocations a layer, at most */
#define INNER_COPIES 3        /* a stack: fewer repeats are not told from chance */

/* Periods up to the least of a layer's most, a third of the sizes, and
 * what REPEAT_WORK comparisons reach (n each): a step of 100,000
 * allocations is searched for layers of up to 167. */
static bool a_stack(const uint64_t *sizes, size_t n, size_t *start, size_t *covered)
{
  size_t period, most = n / INNER_COPIES, reach = n ? REPEAT_WORK / n : 0;
  most = most < INNER_PERIOD_MAX ? most : INNER_PERIOD_MAX;
  return ol_first_step_repeat(sizes, n, most < reach ? most : reach, &period, start, covered) &&
         period >= INNER_PERIOD_MIN && *covered >= INNER_COPIES * period;
}

/* units[0..n) with each run of one size as one. */
static size_t runs_as_one(const uint32_t *units, uint64_t n, uint64_t *sizes)
{
  size_t kept = 0;
  for (uint64_t i = 0; i < n; i++)
    if (kept == 0 || sizes[kept - 1] != units[i])
      sizes[kept++] = units[i];
  return kept;
}

static bool two_stacks(const uint32_t *units, uint64_t n)
{
  uint64_t *sizes = malloc((n ? n : 1) * sizeof *sizes);
  if (!sizes)
    return false;
  size_t count = runs_as_one(units, n, sizes), start, covered, other, other_covered;
  bool two = a_stack(sizes, count, &start, &covered) &&
             (a_stack(sizes, start, &other, &other_covered) ||
              a_stack(sizes + start + covered, count - start - covered, &other, &other_covered));
  free(sizes);
  return two;
}

/* Without call sites, a network of unlike layers (a CNN's stages of
 * other widths, ResNet's or ConvNeXt's) shows no stack of like layers in
 * its backward, and its steps were not told by their sizes (held-out
 * resnet50_eval_kept and convnext_tiny_eval_kept, an evaluation's
 * output kept with its graph, out at their second step: `activations`,
 * "no iteration finished", where call sites tell `leak`). A step tells
 * itself by what it holds, too: its forward rises by most of what the
 * job ever rose (half at least: RISE_SHARE; those two, 85% and 79%),
 * and its backward gives back a good part of that before the next
 * begins (a quarter at least, FALL_SHARE: they kept the evaluation's
 * graph and gave back 43% and 40%); and it makes many allocations
 * (STEP_ALLOCATIONS_LEAST; theirs about 1,400). A layer of long inputs
 * rises by as much and gives its attention's temporaries back, in a few
 * dozen (corpus gpt_neo_batch, seq_batch1 and infer_lm_batch without
 * call sites, out in their first forward: 23 to 47 allocations, up to
 * 61% of the rise, 25% to 88% given back, read as steps at a quarter
 * and no count); a forward of micro-batches whose losses are summed
 * gives back only its temporaries. */
#define RISE_SHARE 2
#define FALL_SHARE 4
#define STEP_ALLOCATIONS_LEAST 256

static bool rose_and_fell(const ol_recent_t *log, const allocs_t *a, uint64_t last,
                          uint64_t now)
{
  if (now - last < STEP_ALLOCATIONS_LEAST)
    return false;
  uint64_t oldest = log->n > RING ? log->n - RING : 0;
  course_t whole = course_of(log, oldest, log->n), period = course_of(log, a->events[last],
                                                                     a->events[now]);
  int64_t fell = period.highest - period.level;
  return period.highest > 0 && period.highest * RISE_SHARE >= whole.highest &&
         fell * FALL_SHARE >= period.highest;
}

/* Whether the period from last to now (of a's allocations; the repeat
 * reaching run back from the request) is a step's: by the roles of its
 * sites where site_work is given, else by its sizes (two stacks) or what
 * it held (rose_and_fell). */
static bool a_step_by(const ol_recent_t *log, const allocs_t *a, uint64_t last, uint64_t now,
                      uint64_t run, const uint8_t *site_work, size_t site_count)
{
  if (!site_work)
    return two_stacks(a->sizes + last, now - last) || rose_and_fell(log, a, last, now);
  return a_step(log, a->events, last, now, site_work, site_count) &&
         made_of(log, a->events, a->count - run, a->count - 1, site_work, site_count,
                 OL_RECENT_FORWARD | OL_RECENT_BACKWARD) >= REPEAT_MIN / 4;
}

/* The step before set beside the one under way: where each began (a's
 * allocations; last before now), the allocations repeated back from the
 * request, and where the walk side by side starts (from past what the
 * step before made that this one does not). */
typedef struct beside {
  uint64_t last, now, run;
  uint64_t from_last, from_now;
} beside_t;

/* The step under way as a repeat of the one before, in sizes and order:
 * its last period's worth (all of it where it began within one period). */
static bool beside_by_repeat(const allocs_t *a, beside_t *b)
{
  repeat_t r = longest_repeat(a->sizes, a->count);
  uint64_t in_step = r.period ? (r.run - 1) % r.period + 1 : 0;
  uint64_t now = a->count - in_step;
  *b = (beside_t){now - r.period, now, r.run, now - r.period, now};
  return r.run >= REPEAT_MIN && in_step >= 2 && now >= r.period;
}

/* A first step makes blocks the second does not make again, at places of
 * its own, of sizes other blocks have too: cuBLAS's workspaces where a
 * network's only matrix product is its classifier (held-out resnet50_adam
 * at batch 64, out early in its second backward: the first step's head
 * made 1 KiB, 128 KiB, 1 MiB, 32 MiB and 64 MiB blocks, sizes its
 * convolutions ask too, and the repeat back from the request broke at
 * the head after 3 allocations: the step was read as the first, "at most"
 * a bound). Where no repeat reaches far enough, the step under way is set
 * beside the one before with such blocks passed over: a few allocations
 * of the one before at one place (INSERT_MOST), past which the sizes go
 * on alike (RESYNC in a row), a few in all (one in INSERTS_SHARE of those
 * matched: held-out VGG-16's head made 11 its second step does not,
 * cuBLAS's and cuDNN's workspaces, within 90 matched; one in 16 read its
 * step as the first, a bound a third above its truth). Within one
 * period: where the walk reaches back past the step under way's whole
 * period without the sizes parting, the period repeats whole, and a
 * shorter one, if any, is the step's (a first step's micro-batches,
 * summed before one backward: two of them as one "step" set beside the
 * two before, corpus accum_sum_batch without call sites at 0.8 of its
 * cap; the repeat, beside_by_repeat, reads them). */
#define INSERT_MOST 8
#define RESYNC 4
#define INSERTS_SHARE 8

typedef struct aligned {
  uint64_t run, first_old, past_insert, passed; /* past_insert 0: none passed over */
  bool parted; /* the walk ended where the sizes part or the log begins, not a period back */
} aligned_t;

/* Allocations of the step before, just before old, that the step under
 * way does not make before now: 0 where none are passed over to match. */
static uint64_t insert_before(const uint32_t *sizes, uint64_t old, uint64_t now,
                              uint64_t *work)
{
  for (uint64_t k = 1; k <= INSERT_MOST && old >= k + RESYNC - 1 && now >= RESYNC - 1; k++) {
    uint64_t t = 0;
    while (t < RESYNC && sizes[old - k - t] == sizes[now - t])
      t++;
    *work += t + 1;
    if (t == RESYNC)
      return k;
  }
  return 0;
}

static aligned_t aligned_at(const uint32_t *sizes, uint64_t count, uint64_t period,
                            uint64_t *work)
{
  aligned_t al = {0, 0, 0, 0, false};
  uint64_t now = count - 1, old = now - period, floor = now - period;
  while (now > floor) {
    if (sizes[now] != sizes[old]) {
      uint64_t k = insert_before(sizes, old, now, work);
      al.parted = k == 0;
      if (k == 0)
        break;
      al.past_insert = al.past_insert ? al.past_insert : old + 1;
      al.passed += k;
      old -= k;
    }
    al.run++;
    al.first_old = old;
    (*work)++;
    al.parted = old == 0; /* the log's first allocation: the step before began there */
    if (al.parted)
      break;
    now--;
    old--;
  }
  return al;
}

/* The period whose walk matched most, and of those the one that passed
 * over fewest: where the walk ran to the log's first allocation, periods
 * a gradient's size apart all match as far, by passing over more (a
 * second step out in its backward, one of like gradients after the
 * other: the one that passed over only its first step's workspaces). */
static bool beside_by_alignment(const allocs_t *a, beside_t *b)
{
  aligned_t best = {0, 0, 0, 0, false};
  uint64_t best_period = 0, work = 0, count = a->count;
  for (uint64_t period = 1; period < count && work <= REPEAT_WORK; period++) {
    if (a->sizes[count - 1 - period] != a->sizes[count - 1])
      continue;
    aligned_t al = aligned_at(a->sizes, count, period, &work);
    bool better = al.run > best.run || (al.run == best.run && al.passed < best.passed);
    if (al.parted && better && al.passed * INSERTS_SHARE <= al.run) {
      best = al;
      best_period = period;
    }
  }
  if (work > REPEAT_WORK || best.run < REPEAT_MIN)
    return false;
  uint64_t from_last = best.past_insert ? best.past_insert : best.first_old;
  *b = (beside_t){best.first_old, count - best.run, best.run, from_last, from_last + best_period};
  return true;
}

/* ol_recent_step_repeat's and ol_recent_step_by_sizes's search: one
 * repeat, one step under way, told a step's by roles or by sizes. Read
 * whatever iteration ends the log was told: the account asks where it
 * counts fewer than two iterations, and the ends it told may be a first
 * backward's layers, which it then no longer counts (held-out
 * gpt2_medium_ckpt: a checkpointed backward's 23 layers, each recomputed
 * and given back, told as iterations and set aside at its second step's
 * failure; with the log's two ends standing, the step was read as the
 * first, "at most 13" where 9 fits). */
static bool step_repeat_found(ol_recent_t *log, uint64_t request, const uint8_t *site_work,
                              size_t site_count, uint64_t began[2])
{
  if (!log)
    return false;
  allocs_t a;
  bool found = false;
  if (allocs_of(log, request, &a)) {
    beside_t b;
    found = beside_by_repeat(&a, &b) &&
            a_step_by(log, &a, b.last, b.now, b.run, site_work, site_count);
    /* where no repeat reached far: one that did and is no step's (a first
     * step's micro-batches) is not read again with inserts passed over */
    if (!found && b.run < REPEAT_MIN)
      found = beside_by_alignment(&a, &b) &&
              a_step_by(log, &a, b.last, b.now, b.run, site_work, site_count);
    /* set beside each other from past what the first made once or the
     * walk passed over */
    uint64_t skip = found ? past_left_out(&a, b.from_last, a.count - 1 - b.from_now) : 0;
    found = found && b.from_now + skip < a.count - 1;
    if (found) {
      began[0] = a.events[b.from_last + skip];
      began[1] = a.events[b.from_now + skip];
    }
  }
  allocs_free(&a);
  return found;
}

bool ol_recent_step_repeat(ol_recent_t *log, uint64_t request, const uint8_t *site_work,
                           size_t site_count, uint64_t began[2])
{
  return site_work && step_repeat_found(log, request, site_work, site_count, began);
}

bool ol_recent_step_by_sizes(ol_recent_t *log, uint64_t request, uint64_t began[2])
{
  return step_repeat_found(log, request, NULL, 0, began);
}

bool ol_recent_against_step(ol_recent_t *log, const uint64_t began[2], uint64_t request,
                            ol_recent_sites_t sites, int64_t *more, int64_t *made,
                            size_t site_count, ol_recent_reading_t *reading)
{
  uint64_t kept[2] = {log->began[0], log->began[1]};
  uint32_t ends = log->ends;
  log->began[0] = began[0];
  log->began[1] = began[1];
  log->ends = 2;
  bool known = ol_recent_against_last(log, request, sites, more, made, site_count, reading);
  log->began[0] = kept[0];
  log->began[1] = kept[1];
  log->ends = ends;
  return known;
}

int64_t ol_recent_rest_of_last(const ol_recent_t *log, const ol_recent_reading_t *reading,
                               uint32_t *live, size_t live_count)
{
  uint64_t from = reading->rest_from, end = reading->rest_end;
  if (!log || from >= end || end > log->n || log->n - from > RING)
    return -1;
  if (live_count > 1)
    qsort(live, live_count, sizeof *live, ascending);
  return course_leaving_out(log, from, end, live, live_count).highest;
}

/* The rest's parts that a smaller batch does not shrink (core.h). The
 * rest runs a period from the point set beside the request, into the
 * step under way: what it made and holds still past the last update's
 * allocation is that step's own. The backward's sites hold gradients and
 * temporaries alike; what they made by the rest's highest point and
 * still held when the backward was over (the update's first allocation,
 * else the rest's end) is gradients: the temporaries are gone by then. */
ol_recent_fixed_t ol_recent_rest_fixed(const ol_recent_t *log, const ol_recent_reading_t *reading,
                                       const uint32_t *live, size_t live_count,
                                       const uint8_t *site_work, size_t site_count)
{
  ol_recent_fixed_t f = {0, 0, 0};
  uint64_t from = reading->rest_from, end = reading->rest_end;
  if (!log || !site_work || from >= end || end > log->n || log->n - from > RING)
    return f;
  uint64_t updated = from; /* the last update's allocation */
  for (uint64_t i = from; i < end; i++)
    if (is_alloc(at(log, i)) && (work_of(at(log, i), site_work, site_count) & OL_RECENT_UPDATE))
      updated = i;
  int64_t level = 0, highest = 0, backward = 0, kept = 0;
  bool updating = false; /* past the highest point, the update has begun */
  for (uint64_t i = from; i < end; i++) {
    const event_t *e = at(log, i);
    uint8_t work = work_of(e, site_work, site_count);
    bool update = is_alloc(e) && (work & OL_RECENT_UPDATE);
    if (is_alloc(e) && is_live(i, live, live_count)) {
      if (i < updated && !(work & (OL_RECENT_BACKWARD | OL_RECENT_STATE)))
        f.held_over += bytes_of(e);
      updating |= update; /* its state, made once */
      continue;
    }
    level += bytes_of(e);
    if (work & OL_RECENT_BACKWARD)
      backward += bytes_of(e);
    if (level > highest) {
      highest = level;
      kept = backward;
      updating = false;
    } else if (!updating && backward < kept) {
      kept = backward;
    }
    updating |= update;
  }
  f.gradients = kept > 0 ? kept : 0;
  return f;
}

/* A weight's 16-bit copy (autocast's, one of each weight a matrix
 * product reads) is half the weight's size: the weights' sizes as their
 * copies', in units, each with how many weights have it, and what the
 * step's events make, hold and have made by the rest's highest point of
 * it. */
typedef struct copy_size {
  uint32_t units, weights;
  uint64_t made, live;
  int64_t net; /* allocations less frees of it, not live, by the highest point */
} copy_size_t;

static int by_units(const void *a, const void *b)
{
  const copy_size_t *x = a, *y = b;
  return (x->units > y->units) - (x->units < y->units);
}

/* Sorts and merges sizes alike, adding their weights; the count left. */
static size_t merged(copy_size_t *c, size_t n)
{
  if (n > 1)
    qsort(c, n, sizeof *c, by_units);
  size_t distinct = 0;
  for (size_t i = 0; i < n; i++) {
    if (distinct && c[distinct - 1].units == c[i].units)
      c[distinct - 1].weights += c[i].weights;
    else
      c[distinct++] = c[i];
  }
  return distinct;
}

/* The distinct copy sizes of the weights of OL_MATRIX_MIN bytes or more
 * (a norm's or a bias's copy weighs nothing and its size is any small
 * tensor's), sorted, less those that are a weight's own size: a network
 * whose widths double (VGG's, ResNet's channels; a grouped attention's
 * keys beside its queries) has weights half another's, and its
 * gradients, an optimizer's state and temporaries make blocks of every
 * weight's size in any precision. Their count into *count; NULL where
 * none is left or no host memory. */
static copy_size_t *copy_sizes_of(const uint64_t *weight_sizes, size_t weights, size_t *count)
{
  copy_size_t *own = weights ? calloc(2 * weights, sizeof *own) : NULL;
  copy_size_t *c = own ? own + weights : NULL;
  size_t owns = 0, n = 0;
  for (size_t w = 0; own && w < weights; w++) {
    own[owns++] = (copy_size_t){.units = units_of(weight_sizes[w]), .weights = 1};
    if (weight_sizes[w] >= OL_MATRIX_MIN)
      c[n++] = (copy_size_t){.units = units_of(weight_sizes[w] / 2), .weights = 1};
  }
  owns = merged(own, owns);
  n = merged(c, n);
  size_t left = 0;
  for (size_t i = 0; i < n; i++)
    if (!bsearch(&c[i], own, owns, sizeof *own, by_units))
      c[left++] = c[i];
  *count = left;
  if (!left) {
    free(own);
    return NULL;
  }
  memmove(own, c, left * sizeof *c); /* the block's start, to be freed */
  return own;
}

/* The events up to the highest point of the course from one to another
 * (course_leaving_out's): the first event past it. */
static uint64_t past_highest(const ol_recent_t *log, uint64_t from, uint64_t end,
                             const uint32_t *live, size_t live_count)
{
  int64_t level = 0, highest = 0;
  uint64_t past = from;
  for (uint64_t i = from; i < end; i++) {
    if (is_alloc(at(log, i)) && is_live(i, live, live_count))
      continue;
    level += bytes_of(at(log, i));
    if (level > highest) {
      highest = level;
      past = i + 1;
    }
  }
  return past;
}

/* Copies counted, each size no more often than weights have it: those
 * the step made, or held at the need's highest point; in weights or in
 * bytes. */
typedef struct copies {
  int64_t weights, bytes;
} copies_t;

static copies_t copies_of(const copy_size_t *c, size_t count, bool held)
{
  copies_t sum = {0, 0};
  for (size_t i = 0; i < count; i++) {
    int64_t n = held ? (int64_t)c[i].live + c[i].net : (int64_t)c[i].made;
    n = n < 0 ? 0 : n > c[i].weights ? c[i].weights : n;
    sum.weights += n;
    sum.bytes += n * ((int64_t)c[i].units << UNIT_SHIFT);
  }
  return sum;
}

/* A copy's size made more than thrice a weight in one step is made by
 * more than autocast (a copy in the forward, another where a checkpointed
 * layer's forward runs again, a 16-bit gradient in the backward): its
 * blocks are not told from activations of that size. */
#define COPIES_A_WEIGHT 3

static bool told_apart(const copy_size_t *c)
{
  return c->made <= (uint64_t)COPIES_A_WEIGHT * c->weights;
}

/* Whether the step cast the weights: the weights left to tell (copy
 * sizes no weight has as its own, made no more than autocast makes them)
 * are two thirds or more of the matrices, and the step made a copy's
 * size for two thirds or more of them, by count and by bytes. An
 * embedding read by a lookup is not cast (a third of a small language
 * model's weights where it has its own head). Activations of a weight's
 * half size by chance match a share: GPT-2 medium at sequence 512 and
 * batch 4 its MLP's two matrices (half its weights by count and bytes),
 * VGG-16 at batch 32 its classifier's first (74% of its weights' bytes,
 * one of them: its 112x112 feature maps are as large), BERT-large at 64
 * x 128 tokens its MLP's (a dropout mask's bytes; its attention's
 * matrices, half the position embedding's size, not told), T5-small at
 * 4 x 64 tokens all of its layers' (hidden states of those sizes, made
 * several times a weight). */
static bool weights_cast(copy_size_t *c, size_t count, size_t matrices)
{
  copies_t all = {0, 0};
  for (size_t i = 0; i < count; i++) {
    if (!told_apart(&c[i])) {
      c[i].weights = 0; /* counted neither way */
      continue;
    }
    all.weights += c[i].weights;
    all.bytes += (int64_t)c[i].weights * ((int64_t)c[i].units << UNIT_SHIFT);
  }
  copies_t made = copies_of(c, count, false);
  return all.weights > 0 && 3 * (uint64_t)all.weights >= 2 * (uint64_t)matrices &&
         3 * made.weights >= 2 * all.weights && 3 * made.bytes >= 2 * all.bytes;
}

/* Whether the weights are fp32, as autocast's are: a norm's weight of a
 * width's bytes a and a square matrix of that width, b = a^2 / 4 (in
 * bf16 or fp16, a^2 / 2: a bf16 model's fp32 temporaries of its hidden
 * states are half its MLP's matrices, and read as its copies; held-out
 * llama1b_second_step). Not where a width has a partner either way
 * (first_step.c layer_width: unsure). weight_sizes sorted. */
static bool fp32_weights(const uint64_t *sorted, size_t weights)
{
  bool four = false;
  for (size_t i = 0; i < weights; i++) {
    uint64_t a = sorted[i], four_b = ol_square_bytes(a, 4), two_b = ol_square_bytes(a, 2);
    if (i && sorted[i - 1] == a)
      continue;
    bool is_four = four_b && bsearch(&four_b, sorted, weights, sizeof *sorted, ascending64);
    bool is_two = two_b && bsearch(&two_b, sorted, weights, sizeof *sorted, ascending64);
    if (is_four && is_two)
      return false;
    four |= is_four;
  }
  return four;
}

/* One step's events to read copies in: [from, to), the highest point of
 * the need before past; the blocks made from held_from on that are live
 * (live: sorted tags) are the step under way's, held now. */
typedef struct copies_span {
  uint64_t from, to, past, held_from;
  const uint32_t *live;
  size_t live_count;
} copies_span_t;

/* The copies held at the span's highest point where the span's step cast
 * the weights (weight_sizes: any order, sorted here), else 0. */
static int64_t copies_in(const ol_recent_t *log, copies_span_t span, uint64_t *weight_sizes,
                         size_t weights)
{
  if (weights > 1)
    qsort(weight_sizes, weights, sizeof *weight_sizes, ascending64);
  if (!fp32_weights(weight_sizes, weights))
    return 0;
  size_t count = 0;
  copy_size_t *c = copy_sizes_of(weight_sizes, weights, &count);
  if (!c)
    return 0;
  for (uint64_t i = span.from; i < span.to; i++) {
    const event_t *e = at(log, i);
    copy_size_t key = {.units = e->units};
    copy_size_t *size = bsearch(&key, c, count, sizeof *c, by_units);
    if (!size)
      continue;
    bool made_live = is_alloc(e) && is_live(i, span.live, span.live_count);
    size->made += is_alloc(e);
    if (i >= span.held_from)
      size->live += made_live;
    else if (!made_live && i < span.past)
      size->net += is_alloc(e) ? 1 : -1;
  }
  size_t matrices = 0;
  for (size_t w = 0; w < weights; w++)
    matrices += weight_sizes[w] >= OL_MATRIX_MIN;
  int64_t held = weights_cast(c, count, matrices) ? copies_of(c, count, true).bytes : 0;
  free(c);
  return held;
}

/* The rest's autocast copies (core.h). The rest runs from the point set
 * beside the request to the end of the step before; with the step under
 * way up to the request, one step's allocations, in which a forward under
 * autocast makes a copy of each fp32 weight it reads (fp32_weights,
 * weights_cast). The copies at the need's highest point are those the
 * step under way holds (live, made since the rest's end) and those the
 * rest made by its highest point, less those it freed: held from the
 * forward through the backward, they do not shrink with the batch. */
int64_t ol_recent_rest_copies(const ol_recent_t *log, const ol_recent_reading_t *reading,
                              const uint32_t *live, size_t live_count, uint64_t *weight_sizes,
                              size_t weights)
{
  uint64_t from = reading->rest_from, end = reading->rest_end;
  if (!log || from >= end || end > log->n || log->n - from > RING)
    return 0;
  copies_span_t span = {from, log->n, past_highest(log, from, end, live, live_count), end,
                        live, live_count};
  return copies_in(log, span, weight_sizes, weights);
}

/* The last finished iteration's copies at its highest point, or that of
 * its work outside the update (core.h): made there and not yet freed,
 * none of them live now (an iteration's copies are gone by its end). */
int64_t ol_recent_iteration_copies(const ol_recent_t *log, uint64_t *weight_sizes,
                                   size_t weights, const ol_recent_highs_t *highs)
{
  if (!holds_two_iterations(log) || log->began[0] >= log->began[1])
    return 0;
  uint64_t from = log->began[0], to = log->began[1];
  copies_span_t span = {from, to, past_highest(log, from, to, NULL, 0), to, NULL, 0};
  if (highs) /* the step between two updates, its copies made in its forward */
    span = (copies_span_t){highs->step_from, highs->update_from, highs->past_work,
                           highs->update_from, NULL, 0};
  return copies_in(log, span, weight_sizes, weights);
}

static uint8_t alloc_work(const ol_recent_t *log, uint64_t i, const uint8_t *site_work,
                          size_t site_count)
{
  const event_t *e = at(log, i);
  return is_alloc(e) ? work_of(e, site_work, site_count) : 0;
}

#define STEP_WORK (OL_RECENT_FORWARD | OL_RECENT_BACKWARD)

/* Looking back from end (exclusive) to oldest: the last allocation of
 * work want, or end where none. */
static uint64_t last_before(const ol_recent_t *log, uint64_t end, uint64_t oldest,
                            const uint8_t *site_work, size_t site_count, uint8_t want)
{
  for (uint64_t i = end; i > oldest; i--)
    if (alloc_work(log, i - 1, site_work, site_count) & want)
      return i - 1;
  return end;
}

/* The step that ran last between two updates (core.h): its first event
 * (a forward's or backward's allocation after the update before), where
 * its own update began (its first allocation of the update's), and that
 * update's end (the next forward's or backward's allocation, or the
 * log's end). false where the log holds no two updates with a step's work
 * between them, the later in the last iteration told. */
typedef struct step_span {
  uint64_t from, update_from, update_to;
} step_span_t;

static bool last_step(const ol_recent_t *log, const uint8_t *site_work, size_t site_count,
                      step_span_t *s)
{
  uint64_t oldest = log->n > RING ? log->n - RING : 0, to = log->began[1];
  uint64_t last = last_before(log, to, log->began[0], site_work, site_count, OL_RECENT_UPDATE);
  if (last == to)
    return false;
  /* back through that update to its first allocation: the step's work
   * before it ends it */
  uint64_t first = last, work = last_before(log, last, oldest, site_work, site_count, STEP_WORK);
  if (work == last)
    return false;
  for (uint64_t i = work + 1; i < last; i++)
    if (alloc_work(log, i, site_work, site_count) & OL_RECENT_UPDATE) {
      first = i;
      break;
    }
  uint64_t before = last_before(log, work, oldest, site_work, site_count, OL_RECENT_UPDATE);
  if (before == work)
    return false;
  s->from = before + 1;
  while (s->from < work && !(alloc_work(log, s->from, site_work, site_count) & STEP_WORK))
    s->from++;
  s->update_from = first;
  s->update_to = last + 1;
  while (s->update_to < log->n &&
         !(alloc_work(log, s->update_to, site_work, site_count) & STEP_WORK))
    s->update_to++;
  return true;
}

/* The last step's highest points, its update apart (core.h). A foreach
 * optimizer (PyTorch's default) makes temporaries as large as the
 * weights at its update: at a small batch that is the step's highest
 * point, and a smaller or larger batch does not move it (held-out
 * llama_small_amp at batch 1: the update 2.02 GiB above the state, its
 * forward and backward 1.76). Read between two updates, not over the
 * iteration told, which may begin mid-step, or be half a step
 * (qwen_small_autocast at batch 1: over such a half its forward and
 * backward read 0.89 GiB above a valley that held the gradients, where
 * the step rose 2.55 GiB from its start). */
bool ol_recent_iteration_highs(const ol_recent_t *log, const uint8_t *site_work,
                               size_t site_count, ol_recent_highs_t *highs)
{
  step_span_t s;
  if (!site_work || !holds_two_iterations(log) || log->began[0] >= log->began[1] ||
      !last_step(log, site_work, site_count, &s))
    return false;
  *highs = (ol_recent_highs_t){.step_from = s.from, .update_from = s.update_from};
  int64_t level = 0;
  for (uint64_t i = s.from; i < log->n; i++) {
    level += bytes_of(at(log, i));
    if (i < s.update_from && level > highs->work) {
      highs->work = level;
      highs->past_work = i + 1;
    } else if (i >= s.update_from && i < s.update_to && level > highs->update)
      highs->update = level;
  }
  highs->now = level;
  return highs->past_work > 0;
}

/* The work its allocations' sites did in the last iteration told (core.h).
 * A whole step runs a forward before its backward, so one whose blocks
 * are all the backward's was one of its layers (account.c
 * iterations_are_layers). */
bool ol_recent_last_work(const ol_recent_t *log, const uint8_t *site_work, size_t site_count,
                         uint8_t *work)
{
  *work = 0;
  if (!log || !site_work || log->ends < 2 || log->began[0] >= log->began[1] ||
      log->n - log->began[0] > RING)
    return false;
  for (uint64_t i = log->began[0]; i < log->began[1]; i++)
    if (is_alloc(at(log, i)))
      *work |= work_of(at(log, i), site_work, site_count);
  return true;
}

/* Where the iteration under way parts from a repeat of the last one. Its
 * allocations are set in order beside the last's, one in 32 may differ;
 * where it has made all the last one made, the next is set beside the
 * last's first again: the boundary of iterations is often told a step
 * late, and the failed one then holds the step before it whole (held-out
 * cnn_teacher_late, gru_longer_late, cnn_eval_late: all of them). */
typedef struct parting {
  uint64_t split; /* this iteration's first event past the repeat; log->n: none */
  uint64_t point; /* the last one's allocation set beside it */
  uint64_t made;  /* allocations repeated */
  bool wrapped;   /* the last one was repeated whole first */
} parting_t;

static parting_t parting_of(const ol_recent_t *log)
{
  uint64_t first = next_alloc(log, log->began[0], log->began[1]);
  parting_t p = {log->n, first, 0, false};
  uint64_t made = 0, differ = 0; /* in this pass over the last one */
  for (uint64_t j = log->began[1]; j < log->n; j++) {
    const event_t *e = at(log, j);
    if (!is_alloc(e))
      continue;
    p.point = next_alloc(log, p.point, log->began[1]);
    if (p.point == log->began[1]) { /* a new pass: its sizes that differ count anew */
      p.point = first;
      p.wrapped = true;
      made = differ = 0;
    }
    bool other = at(log, p.point)->units != e->units;
    if (other && (differ + 1) * MISMATCH_SHARE > made + 1) {
      p.split = j;
      return p;
    }
    p.made++;
    made++;
    differ += other;
    p.point++;
  }
  return p;
}

/* The repeat covered the last iteration's step, rise and fall: it had
 * reached where the last was highest, the last had given back half of
 * that rise at the point set beside the split (or had ended), and this
 * one had made half the frees the last made by then. Not so where a
 * larger input makes more of the same tensors: a longer sequence's
 * unrolled steps go on rising where the last one's turned to its
 * backward. */
static bool repeat_covers_a_step(const ol_recent_t *log, const parting_t *p, course_t whole)
{
  course_t last = course_of(log, log->began[0], p->point);
  if (p->wrapped) /* the last one whole, then its beginning again */
    last = (course_t){whole.highest, whole.level + last.level,
                      whole.allocations + last.allocations, whole.frees + last.frees};
  course_t now = course_of(log, log->began[1], p->split);
  return whole.highest > 0 && last.highest >= whole.highest - whole.highest / MISMATCH_SHARE &&
         last.level * 2 <= whole.highest && now.frees * 2 >= last.frees;
}

/* Whether the allocations past the repeat, and the request, set in order
 * beside the last iteration's from the point on (its first again after
 * its last), are mostly its sizes, or its sizes times one factor: three in
 * four of them at least share a factor of one or more, or its square (a
 * sequence k times longer makes its tokens' tensors k times larger and
 * its attention's scores k * k). That is a step like the last one again,
 * of as large an input or a larger one, not more work: held-out
 * gru_longer_late (a longer sequence's step after a short one's whole:
 * its tokens' and embeddings' tensors 5 times the last's first ones, its
 * cells' the same), corpus late_batch with its sites (a step at 8 times
 * the batch: every tensor 8 times). */
#define LIKE_COMPARED 32

/* Within one in 32 of each other. */
static bool about(double a, double b)
{
  return a >= b * (1 - 1.0 / MISMATCH_SHARE) && a <= b * (1 + 1.0 / MISMATCH_SHARE);
}

static bool like_the_last(const ol_recent_t *log, const parting_t *p, uint64_t request)
{
  double ratio[LIKE_COMPARED];
  size_t n = 0;
  uint64_t first = next_alloc(log, log->began[0], log->began[1]), last = p->point;
  for (uint64_t j = p->split; n < LIKE_COMPARED; j++) {
    if (j < log->n && !is_alloc(at(log, j)))
      continue;
    uint32_t units = j < log->n ? at(log, j)->units : units_of(request);
    ratio[n++] = (double)units / (double)at(log, last)->units;
    last = next_alloc(log, last + 1, log->began[1]);
    last = last == log->began[1] ? first : last;
    if (j >= log->n)
      break; /* the request was the last one set beside */
  }
  for (size_t i = 0; i < n; i++) {
    size_t alike = 0;
    for (size_t k = 0; k < n; k++)
      alike += about(ratio[k], ratio[i]) || about(ratio[k], ratio[i] * ratio[i]);
    if (ratio[i] >= 1 - 1.0 / MISMATCH_SHARE && alike * 4 >= n * 3 && alike >= 2)
      return true;
  }
  return false;
}

/* The iteration under way repeated the last one and then did more: its
 * allocations matched the last's in size and order (one in 32 may
 * differ), half of them at least, through the last one's step
 * (repeat_covers_a_step), and then it made allocations the last did not
 * and not a step like it (like_the_last). What it made since is work the
 * last iteration never did: state made in mid-run (a second optimizer's
 * first step, a model loaded) or a new pass; not a larger input, whose
 * tensors differ in size from its first (held-out optimizer_switch,
 * optim_switch_state and teacher_late without their call sites were read
 * as larger inputs). Half at least: without call sites a varying-length
 * job finds "iterations" of a part of its step, and a longer one's first
 * allocations matched 106 of a short one's 648 (corpus varlen_long). */
bool ol_recent_repeated_then_more(const ol_recent_t *log, uint64_t request,
                                  ol_recent_more_t *more)
{
  *more = (ol_recent_more_t){0};
  if (!holds_two_iterations(log))
    return false;
  course_t whole = course_of(log, log->began[0], log->began[1]); /* the last one's */
  if (whole.allocations == 0)
    return false;
  parting_t p = parting_of(log);
  if (p.split == log->n) /* no allocation past the repeat yet */
    return false;
  if (p.made * 2 < whole.allocations)
    return false; /* less than half the last one repeated: not its work done again */
  if (!repeat_covers_a_step(log, &p, whole) || like_the_last(log, &p, request))
    return false;
  course_t past = course_of(log, p.split, log->n);
  *more = (ol_recent_more_t){past.level, past.allocations, past.frees};
  return true;
}

bool ol_recent_made_and_freed(const ol_recent_t *log, int32_t site)
{
  if (!holds_two_iterations(log) || site < 0)
    return false;
  int64_t made = 0, freed = 0;
  for (uint64_t i = log->began[0]; i < log->began[1]; i++) {
    const event_t *e = at(log, i);
    if (!is_site(e, site))
      continue;
    if (is_alloc(e))
      made++;
    else
      freed++;
  }
  return made > 0 && freed >= made;
}
