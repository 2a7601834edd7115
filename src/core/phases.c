/* phases.c: iterations found in the allocation stream itself (core.h,
 * "phases.c").
 *
 * A training loop repeats: the same sizes from the same call sites come
 * back each iteration, in the same order. Memory climbs through the
 * forward pass, falls through the backward pass and the optimizer step, and
 * comes back to about what outlives the iteration (weights, gradients,
 * optimizer state). We find iterations from the repeat, not from the size
 * of the swing (an earlier zigzag wanted a swing of a tenth of the highest
 * total, and missed the iterations of a leak or of a large model, whose
 * churn is small against what they keep). No framework hook: the same code
 * reads a live job and a recorded trace.
 *
 * Each allocation has signatures: with a call site, its size and site,
 * and its site alone (a variable-length job changes sizes each step, not
 * sites); without one, its size and whether memory fell since the
 * allocation before (the first allocation after a free marks a low point
 * even when every size is alike; before the job's first free, every
 * allocation counts as one, since the first step starts after a load that
 * frees nothing). A small direct-mapped table keeps, per signature, where it
 * last occurred (counted in allocations) and the gap before that. A
 * signature that comes back a steady number of allocations apart is a
 * candidate, and a window between two of its occurrences is an iteration
 * when it is shaped like one:
 *   - the window starts at its low point (a backward pass's layers start
 *     high and end low: they are not iterations);
 *   - it ends within half its rise of where it began: it gives back more
 *     than it keeps (a forward pass's layers keep what they save for the
 *     backward pass: they are not iterations, even in the first step,
 *     before any iteration has been seen; a leak keeps less than it frees);
 *     but for a signature's first window, which may keep the optimizer's
 *     state, made in the first step;
 *   - it rises at least a quarter as high as the job has risen above its
 *     start since it first freed memory (a loop inside the optimizer's step
 *     repeats too, but small against the step);
 *   - it spans at least MIN_PERIOD allocations (a job of malloc/free pairs
 *     is no training loop).
 * Two such windows in a row, of steady gaps, make the signature the anchor:
 * from then on each of its occurrences ends an iteration, and the steady
 * run before it is counted back. A longer repeat of the same shape later
 * takes over (a loop of layers was the anchor only while nothing else
 * repeated). The level's history needed to judge windows that have passed
 * is kept coarse: the lowest and highest allocated per BLOCK allocations,
 * over the last BLOCKS blocks. Per event the work is constant: two table
 * probes and a block update; a window is read back only when a candidate
 * is steady and longer than the anchor (backing off when its windows keep
 * failing). A stream that never repeats (inference of shapes that vary)
 * finds no iterations, and says so: iterations 0, period 0.
 *
 * Under manage mode's byte-weighted capture a small tensor's site is named
 * only when a sample takes it: per size, the finder counts how often the
 * sample missed it (it came at the "not sampled" site) and took it. The
 * signatures of a size missed more than twice as often as taken recur by
 * chance, and none of them becomes the anchor; an anchor missed in more
 * periods than it was seen in is given up (a site that is not known as the
 * "not sampled" one can still name a small tensor by chance).
 *
 * What is not known: until a repeat is seen twice, nothing is an
 * iteration (an out-of-memory error in the first two steps reads as the
 * first); a forward pass whose layers free most of what they make
 * (activation checkpointing) repeats like iterations until the pass ends;
 * without call sites, a job whose every size changes (a variable-length
 * one) shows no repeat. */
#include <stdlib.h>
#include <string.h>

#include "core.h"

#define SLOTS 1024u       /* candidate signatures, in sets of two */
#define BLOCK_SHIFT 4     /* the level's history: one block per 16 allocations */
#define BLOCKS 4096u      /* ... over the last 65536 allocations */
#define MIN_PERIOD 8      /* allocations an iteration makes at least */
#define STEADY_SHARE 4    /* two gaps agree within a quarter of the longer */
#define EXACT_SHARE 16    /* ... and nearly exactly, within a sixteenth */
#define EXACT_WINDOWS 3   /* nearly exact windows in a row a longer repeat needs ... */
#define SWITCH_SHARE 3    /* a repeat 3/2 as long as the anchor's takes over */
#define KEEP_STEADY 4     /* a steady signature keeps its slot against this many others */
#define FAILS_BEFORE_BACKOFF 4
#define MISSED_MAX 4      /* an anchor's gap of up to 4 periods counts them all */
#define SITES 256u        /* sites whose recent sizes are kept, direct-mapped */
#define SITE_SIZES 4      /* ... the last 4 distinct sizes of each */
#define UNSAMPLED_SIZES 1024u /* sizes whose sampling is counted, direct-mapped */

typedef struct slot {
  uint64_t sig;       /* 0: empty */
  uint64_t last;      /* allocation number of its last occurrence */
  int64_t level;      /* allocated just before it */
  uint64_t gap;       /* allocations between its last two occurrences; 0: seen once */
  uint32_t run;       /* windows in a row whose gap agreed with the one before */
  uint8_t cycles;     /* windows in a row shaped like an iteration */
  uint8_t fails;      /* windows in a row that were not */
  uint8_t misses;     /* signatures that wanted this slot since it last occurred */
  uint8_t exact;      /* windows in a row whose gap agreed within 1/EXACT_SHARE */
  int64_t prev_low, prev_high; /* the last window shaped like an iteration */
} slot_t;

struct ol_phase_finder {
  uint64_t n;         /* allocations so far */
  bool fell;          /* memory was freed since the last allocation */
  int64_t highest;    /* highest allocated since the first free */
  uint64_t live;      /* blocks allocated and not freed */
  uint64_t fewest_live; /* the fewest live since the first free: the state's blocks, at most */
  uint64_t anchor;    /* the signature iterations are counted by; 0: none */
  uint64_t anchor_last;
  uint64_t anchor_broke; /* allocation number at which the anchor last came late; 0: never */
  uint32_t anchor_hits, anchor_misses; /* its occurrences, and the periods it was not seen in */
  uint64_t size_now;     /* the size of the allocation being read */
  int64_t window_high; /* highest allocated since the anchor's last occurrence */
  uint64_t window_largest; /* the largest allocation since then (the anchor's included) */
  int64_t block_low[BLOCKS], block_high[BLOCKS];
  slot_t slots[SLOTS];
  struct { int32_t site; uint32_t next; uint64_t sizes[SITE_SIZES]; } sites[SITES];
  /* Sizes seen with a site or at the "not sampled" one, direct-mapped (a
   * size seen missed keeps its slot against one only taken): how often the
   * capture's sample missed each and took it. */
  struct { uint64_t size_plus1; uint32_t missed, taken; } unsampled[UNSAMPLED_SIZES];
  /* Swings of the whole (note_fall, note_rise): how often allocated fell
   * back near where it stood at the first free and rose again near its
   * highest since; whether it has fallen since the last rise; the
   * allocation count at the last rise. */
  uint32_t swings;
  bool swing_low;
  uint64_t swing_at;
  /* The lowest allocated since the last rise (valley_known: a free came
   * since), and the valleys before the third swing (the first step's
   * state made by then) and before the latest. */
  bool valley_known;
  int64_t valley, swing_base, swing_last;
};

void ol_phases_init(ol_phases_t *p)
{
  memset(p, 0, sizeof *p);
}

void ol_phase_finder_free(ol_phase_finder_t *f)
{
  free(f);
}

/* ---- signatures and the level's history ------------------------------- */

#define NO_SIZE UINT64_MAX
#define NEW_SIZE (UINT64_MAX - 1)

/* Whether site has not made this size among its last few: a shape that
 * grows (a cache extended a token at a time) or changes (a new sequence
 * length) shows first where the loop starts over. */
static bool new_size_at(ol_phase_finder_t *f, int32_t site, uint64_t size)
{
  __typeof__(f->sites[0]) *e = &f->sites[(uint32_t)site & (SITES - 1)];
  if (e->site != site + 1) {
    memset(e, 0, sizeof *e);
    e->site = site + 1;
  }
  for (int i = 0; i < SITE_SIZES; i++)
    if (e->sizes[i] == size)
      return false;
  bool known = e->next > 0;
  e->sizes[e->next++ % SITE_SIZES] = size;
  return known;
}

static uint64_t signature(uint64_t size, int32_t site, bool fell)
{
  uint64_t h = size * 0x9E3779B97F4A7C15ull;
  h ^= ((uint64_t)(uint32_t)site << 1 | fell) * 0xC2B2AE3D27D4EB4Full;
  h ^= h >> 29;
  return h | 1; /* never 0, the empty slot */
}

static bool agree_within(uint64_t a, uint64_t b, uint64_t share)
{
  uint64_t longer = a > b ? a : b, diff = a > b ? a - b : b - a;
  return diff * share <= longer;
}

static bool agree(uint64_t a, uint64_t b)
{
  return agree_within(a, b, STEADY_SHARE);
}

static int64_t *block_low(ol_phase_finder_t *f, uint64_t n)
{
  return &f->block_low[(n >> BLOCK_SHIFT) & (BLOCKS - 1)];
}

static int64_t *block_high(ol_phase_finder_t *f, uint64_t n)
{
  return &f->block_high[(n >> BLOCK_SHIFT) & (BLOCKS - 1)];
}

/* Allocation n takes the level from level to top. A block starts at its
 * first allocation; frees after it lower the block's low (ol_phases_free). */
static void note_level(ol_phase_finder_t *f, uint64_t n, int64_t level, int64_t top)
{
  int64_t *high = block_high(f, n);
  if ((n & ((1u << BLOCK_SHIFT) - 1)) == 0) {
    *block_low(f, n) = level;
    *high = top;
  } else if (top > *high) {
    *high = top;
  }
}

/* Lowest and highest allocated from allocation `from` (level before it:
 * start) to now, block by block. A block that began before `from` holds
 * events of the window before it, left out: the window's first few events
 * are then not read, which a window of a whole iteration can spare. */
static void window_range(const ol_phase_finder_t *f, uint64_t from, int64_t start, int64_t *low,
                         int64_t *high)
{
  const uint64_t mask = (1u << BLOCK_SHIFT) - 1;
  uint64_t first = (from >> BLOCK_SHIFT) + ((from & mask) != 0), last = (f->n - 1) >> BLOCK_SHIFT;
  *low = *high = start;
  for (uint64_t b = first; b <= last; b++) {
    uint64_t i = b & (BLOCKS - 1);
    if (f->block_low[i] < *low)
      *low = f->block_low[i];
    if (f->block_high[i] > *high)
      *high = f->block_high[i];
  }
}

/* ---- iterations --------------------------------------------------------- */

static int64_t *valley(ol_phases_t *p, uint64_t iteration)
{
  return &p->valleys[iteration % OL_PHASE_VALLEYS];
}

static bool valley_known(const ol_phases_t *p, uint64_t iteration)
{
  return iteration >= 1 && iteration >= p->first_known && iteration <= p->iterations &&
         p->iterations - iteration < OL_PHASE_VALLEYS;
}

static int64_t valley_of(const ol_phases_t *p, uint64_t iteration)
{
  return p->valleys[iteration % OL_PHASE_VALLEYS];
}

/* An iteration's own need: its highest above what it left for the next
 * (the first step's optimizer state is then the next's to keep, not its
 * own need), or above its lowest if that is higher. */
static int64_t need_of(int64_t low, int64_t high, int64_t end)
{
  return high - (end > low ? end : low);
}

static void note_need(ol_phases_t *p, int64_t low, int64_t high, int64_t end)
{
  if (need_of(low, high, end) > p->need)
    p->need = need_of(low, high, end);
}

/* Iteration p->iterations + 1 ended at level end, with its lowest at low,
 * at the finder's allocation count at, its largest allocation largest. */
static void end_iteration(ol_phases_t *p, int64_t low, int64_t high, int64_t end, uint64_t at,
                          uint64_t largest)
{
  p->iterations++;
  *valley(p, p->iterations) = low;
  note_need(p, low, high, end);
  p->needs[p->iterations % OL_PHASE_VALLEYS] = need_of(low, high, end);
  p->ends[p->iterations % OL_PHASE_VALLEYS] = at;
  p->largests[p->iterations % OL_PHASE_VALLEYS] = largest;
}

/* The fewest allocations a window that keeps memory must make: as many as
 * the fewest blocks live since the job first freed memory (its state:
 * the parameters, at least, live all along). A training step gives each
 * parameter a gradient; the layers of one pass make fewer, and a pass
 * whose layers each keep something (a checkpointed forward keeps each
 * layer's input, a backward that keeps its graph each layer's gradients)
 * would read as iterations that leak. */
static uint64_t fewest_keeping(const ol_phase_finder_t *f)
{
  return f->fewest_live;
}

/* The window that ended now, from the slot's last occurrence, is shaped
 * like an iteration (the file's comment says why each test). */
static bool shaped_like_iteration(const ol_phase_finder_t *f, const slot_t *s, int64_t level,
                                  int64_t low, int64_t high, uint64_t gap)
{
  int64_t start = s->level, rise = high - start, kept = level - start;
  if (rise <= 0 || (start - low) * 10 > rise)
    return false;
  if (64 * kept > rise && gap < fewest_keeping(f))
    return false;
  /* A signature's first window may keep more: the first step makes the
   * optimizer's state. The next window must not (a first forward pass's
   * layers keep as much each time). */
  bool first = s->gap == 0;
  if (kept < 0 ? 2 * -kept > rise : !first && 4 * kept > 3 * rise)
    return false;
  return 4 * rise >= f->highest - start;
}

/* The slot's signature becomes the anchor: its steady run of windows is
 * counted back as iterations, the last two (whose low points we know) the
 * newest. */
static void adopt(ol_phases_t *p, ol_phase_finder_t *f, const slot_t *s, uint64_t gap,
                  int64_t level, int64_t low, int64_t high)
{
  f->anchor = s->sig;
  f->anchor_last = f->n;
  f->anchor_broke = 0;
  f->anchor_hits = f->anchor_misses = 0;
  f->window_high = level;
  p->period = gap;
  p->iterations = (uint64_t)s->run; /* the run's windows but the newest */
  p->first_known = p->iterations;
  p->need = 0;
  *valley(p, p->iterations) = s->prev_low;
  if (!p->first_low_known) { /* kept when a longer repeat takes over: still the first */
    p->first_low_known = true;
    p->first_low = s->prev_low;
  }
  note_need(p, s->prev_low, s->prev_high, s->level);
  end_iteration(p, low, high, level, f->n, f->window_largest);
  f->window_largest = 0;
  p->low = level;
  p->rising = 0;
  p->largest_fall = 0;
  p->clock_ns = 0;
}

/* How many periods a gap of the anchor spans: 1, or 2 to MISSED_MAX when
 * it is that whole number of periods (its occurrences in between were not
 * seen: a sampled call site names a small allocation only some of the
 * time); 0 when it is neither. */
static uint64_t periods_in(uint64_t gap, uint64_t period)
{
  if (agree(gap, period))
    return 1;
  uint64_t k = (gap + period / 2) / period;
  return k >= 2 && k <= MISSED_MAX && agree(gap, k * period) ? k : 0;
}

/* How many periods the anchor was missed in over a gap of whole periods,
 * of any number (within a quarter of one period); 0 for a gap of one, or
 * of no whole number (a repeat broken by the rest of a longer one). */
static uint64_t periods_missed(uint64_t gap, uint64_t period)
{
  uint64_t k = (gap + period / 2) / period;
  uint64_t off = gap > k * period ? gap - k * period : k * period - gap;
  return k >= 2 && 4 * off <= period ? k - 1 : 0;
}

/* The anchor's record of presence. Under byte-weighted sampling (manage
 * mode's default) a small tensor's site is named only when it is sampled
 * (a 256 KiB one about a time in five), so a signature with that site
 * recurs by chance; a few chance recurrences a period apart can make it
 * the anchor (held-out dict_leak: an LSTM's 256 KiB tensor, then gaps of
 * 5 and 7 steps, read as breaks, and a repeat of 7 steps taken for the
 * step). An anchor missed in more periods than it was seen in is given
 * up: a signature seen every iteration (a tensor large enough to be
 * always sampled) then takes its place, its steady run counted back. */
static void count_misses(ol_phase_finder_t *f, uint64_t gap, uint64_t period)
{
  f->anchor_hits++;
  f->anchor_misses += (uint32_t)periods_missed(gap, period);
  if (f->anchor_misses > f->anchor_hits)
    f->anchor = 0;
}

/* An occurrence of the anchor: the iteration ends, unless it came too soon
 * to be the next one's start (then it is inside an iteration). A gap of
 * whole periods ends that many (their own low points were not seen: each
 * gets the window's); any other is a break of the anchor's repeat. */
static bool anchor_seen(ol_phases_t *p, ol_phase_finder_t *f, int64_t level)
{
  uint64_t gap = f->n - f->anchor_last;
  if (2 * gap < p->period)
    return false;
  uint64_t periods = periods_in(gap, p->period);
  if (periods != 1 && gap > p->period)
    f->anchor_broke = f->n; /* an inner repeat: the rest of a longer one came between */
  int64_t low = p->low < level ? p->low : level;
  for (uint64_t i = periods > 1 ? periods : 1; i > 0; i--)
    end_iteration(p, low, f->window_high, level, f->n, f->window_largest);
  if (periods == 0) /* not a whole number of periods: this low point is not an iteration's */
    p->broke_at = p->iterations;
  p->low = level;
  f->window_high = level;
  f->window_largest = 0;
  f->anchor_last = f->n;
  count_misses(f, gap, p->period);
  return true;
}

/* Whether the anchor's repeat broke in the window that began at
 * allocation `since`: the anchor came late in it, or is late now (the rest
 * of a longer repeat came between its occurrences: a layer's repeat breaks
 * once a step). */
static bool anchor_broke_since(const ol_phases_t *p, const ol_phase_finder_t *f, uint64_t since)
{
  uint64_t late = f->n - f->anchor_last;
  return f->anchor_broke > since || (late > p->period && !agree(late, p->period));
}

/* Whether the slot's repeat, `gap` allocations, may take over from the
 * anchor: it is longer, and holds the anchor's inside it. Either the
 * anchor broke in its last window, or, where the anchor kept its period
 * (a token's repeat runs on from one call of generate to the next, the
 * call adding an allocation or two), it came back nearly exactly for
 * EXACT_WINDOWS windows and is no whole number of the anchor's periods
 * (a signature of every other step adds nothing to the step's). A step's
 * own anchor keeps its period, and a longer signature that recurs by
 * chance (a size drawn at random again) is not that steady: neither takes
 * its place. */
static bool takes_over(const ol_phases_t *p, const ol_phase_finder_t *f, const slot_t *s,
                       uint64_t gap)
{
  if (SWITCH_SHARE * p->period > 2 * gap)
    return false;
  if (anchor_broke_since(p, f, s->last))
    return true;
  return s->exact + 1 >= EXACT_WINDOWS && gap % p->period != 0;
}

/* Whether the window the slot just closed is worth reading back: a gap
 * long enough, steady (or the signature's first), longer than the
 * anchor's, still in the history, and not a signature whose windows keep
 * failing (then one in 16). */
static bool worth_a_look(const ol_phases_t *p, const ol_phase_finder_t *f, const slot_t *s,
                         uint64_t gap, bool steady)
{
  if (gap < MIN_PERIOD || !p->freed || (!steady && s->gap != 0))
    return false;
  if (f->anchor && !takes_over(p, f, s, gap))
    return false;
  if (gap >= (uint64_t)(BLOCKS - 1) << BLOCK_SHIFT)
    return false;
  return s->fails < FAILS_BEFORE_BACKOFF || s->run % 16 == 0;
}

/* How much a slot is worth keeping: one that recurred steadily most, then
 * one seen twice, then the one seen longest ago (a signature of a whole
 * iteration recurs only an iteration later, past many others). */
static bool worth_more(const slot_t *a, const slot_t *b)
{
  if ((a->run > 0) != (b->run > 0))
    return a->run > 0;
  if ((a->gap != 0) != (b->gap != 0))
    return a->gap != 0;
  return a->last > b->last;
}

/* sig's slot, or the one of its set it may take (its sig differs then);
 * NULL: both are kept against it. Two ways a set: a signature that
 * recurs once an iteration, seen once so far, survives the iteration's
 * other signatures more often than in one. A steady one keeps its place
 * against KEEP_STEADY others. */
static slot_t *find_slot(ol_phase_finder_t *f, uint64_t sig)
{
  slot_t *set = &f->slots[(sig >> 40) & (SLOTS - 2)];
  if (set[0].sig == sig || !set[0].sig)
    return &set[0];
  if (set[1].sig == sig || !set[1].sig)
    return &set[1];
  slot_t *victim = worth_more(&set[0], &set[1]) ? &set[1] : &set[0];
  if (victim->run > 0 && ++victim->misses < KEEP_STEADY)
    return NULL;
  return victim;
}

/* The "not sampled" site, as a site to tell allocations by: one bucket of
 * its own, as the live site id it stands for was. */
#define UNSAMPLED_AS_SITE (INT32_MAX - 1)

typedef __typeof__(((ol_phase_finder_t *)0)->unsampled[0]) sampling_t;

/* The size's entry of the sampling counts (it may hold another size). */
static sampling_t *sampling_of(ol_phase_finder_t *f, uint64_t size)
{
  return &f->unsampled[(size * 0x9E3779B97F4A7C15ull) >> 54 & (UNSAMPLED_SIZES - 1)];
}

/* Counts, per size, how often the capture's sample missed it (it came at
 * the "not sampled" site) and took it (it came with a site). */
static int32_t note_sampling(ol_phase_finder_t *f, uint64_t size, int32_t site)
{
  sampling_t *e = sampling_of(f, size);
  if (site == -1)
    return site;
  bool missed = site == OL_PHASE_SITE_UNSAMPLED;
  if (e->size_plus1 != size + 1) {
    if (!missed && e->size_plus1)
      return site; /* a size seen missed keeps its slot against one only taken */
    *e = (sampling_t){.size_plus1 = size + 1};
  }
  if (missed)
    e->missed++;
  else
    e->taken++;
  if (e->taken >= 1u << 30) { /* a share, kept in range */
    e->taken /= 2;
    e->missed /= 2;
  }
  return missed ? UNSAMPLED_AS_SITE : site;
}

/* Whether the allocation being read is of a size the sample misses more
 * than twice as often as it takes: a site names it by chance (a 256 KiB
 * tensor about a time in five under manage mode's 1 MiB mean), so its
 * signatures recur by chance, and a few chance recurrences a period apart
 * could make one the anchor (held-out dict_leak). Such a signature is not
 * adopted; a size taken as often as not stays fit to be one (corpus
 * varlen_long's iterations are told by a 1.5 MiB tensor the sample missed
 * about half the time: an anchor's gap of whole periods allows for it). */
static bool sampled_by_chance(ol_phase_finder_t *f)
{
  const sampling_t *e = sampling_of(f, f->size_now);
  return e->size_plus1 == f->size_now + 1 && e->missed >= 4 && e->missed > 2ull * e->taken;
}

/* Signature sig occurs at allocation f->n, level allocated before it.
 * true: an iteration ended. */
static bool occurs(ol_phases_t *p, ol_phase_finder_t *f, uint64_t sig, int64_t level)
{
  if (sig == f->anchor)
    return anchor_seen(p, f, level);
  slot_t *s = find_slot(f, sig);
  if (!s)
    return false;
  if (s->sig != sig) {
    *s = (slot_t){.sig = sig, .last = f->n, .level = level};
    return false;
  }
  s->misses = 0;
  uint64_t gap = f->n - s->last;
  bool steady = s->gap != 0 && gap >= MIN_PERIOD && agree(gap, s->gap);
  s->run = steady ? s->run + 1 : 0;
  bool exact = steady && agree_within(gap, s->gap, EXACT_SHARE);
  s->exact = exact ? (uint8_t)(s->exact < UINT8_MAX ? s->exact + 1 : s->exact) : 0;
  bool ended = false;
  if (worth_a_look(p, f, s, gap, steady)) {
    int64_t low, high;
    window_range(f, s->last, s->level, &low, &high);
    if (shaped_like_iteration(f, s, level, low, high, gap)) {
      s->fails = 0;
      if (++s->cycles >= 2 && steady && !sampled_by_chance(f)) {
        adopt(p, f, s, gap, level, low, high);
        ended = true;
      }
      s->prev_low = low;
      s->prev_high = high;
    } else {
      s->cycles = 0;
      if (s->fails < UINT8_MAX)
        s->fails++;
    }
  } else {
    s->cycles = 0; /* two windows in a row, each read back */
  }
  s->gap = gap;
  s->last = f->n;
  s->level = level;
  return ended;
}

/* ---- swings of the whole ------------------------------------------------ */

/* Without call sites a job whose sizes vary from step to step finds no
 * iteration by sizes (every size that does not vary, a gradient's or an
 * update's, comes several times a step at gaps that are not steady), and
 * its failure would be read as a first step's. What a step does to the
 * whole still shows: allocated falls back near what the job held at its
 * first free (its weights) and rises again near the highest it has
 * reached. A first step does that once (its forward); an inference
 * pass's layers do it often, but a few allocations apart, where a
 * training step makes at least a block for each block of its state (its
 * gradients), as an iteration that keeps memory must (fewest_keeping). A
 * quarter of the way from the first free's level to the highest is near. */
static int64_t above_first_free(const ol_phases_t *p, int64_t level)
{
  return ol_sat_sub(level, p->before_first_free);
}

static void note_fall(const ol_phases_t *p, ol_phase_finder_t *f, int64_t level)
{
  if (above_first_free(p, level) <= above_first_free(p, f->highest) / 4)
    f->swing_low = true;
  if (!f->valley_known || level < f->valley)
    f->valley = level;
  f->valley_known = true;
}

/* A swing counts a state's worth of allocations after the last rise; what
 * the job fell back to before it is kept from the third on. */
static void count_swing(ol_phase_finder_t *f)
{
  if (f->swings == UINT32_MAX)
    return;
  f->swings++;
  if (f->swings == 3)
    f->swing_base = f->valley;
  f->swing_last = f->valley;
}

static void note_rise(const ol_phases_t *p, ol_phase_finder_t *f, int64_t top)
{
  int64_t span = above_first_free(p, f->highest);
  if (!f->swing_low || span <= 0 || above_first_free(p, top) < span - span / 4)
    return;
  if (f->n - f->swing_at >= fewest_keeping(f))
    count_swing(f);
  f->swing_low = false;
  f->valley_known = false;
  f->swing_at = f->n;
}

/* The low point now: where the job fell back since its last rise, once
 * it has fallen half-way to where it stood at its first free (a step that
 * rose and failed before it fell back is mid-step: the low before its rise
 * stands); else the low before the latest swing. A leak raises the lows
 * past the quarter a swing needs, so the steps after it may swing no more:
 * the low since then says what they kept. */
static int64_t low_now(const ol_phases_t *p, const ol_phase_finder_t *f)
{
  if (f->valley_known && above_first_free(p, f->valley) <= above_first_free(p, f->highest) / 2)
    return f->valley;
  return f->swing_last;
}

uint32_t ol_phases_swings(const ol_phases_t *p, const ol_phase_finder_t *f, int64_t *kept)
{
  *kept = f && f->swings >= 3 ? ol_sat_sub(low_now(p, f), f->swing_base) : 0;
  return f ? f->swings : 0;
}

bool ol_phases_alloc(ol_phases_t *p, ol_phase_finder_t **finder, uint64_t size, int32_t site,
                     int64_t level)
{
  ol_phase_finder_t *f = *finder;
  if (__builtin_expect(!f, 0)) {
    f = *finder = calloc(1, sizeof *f); /* none: no host memory, no iterations found (yet) */
    if (!f)
      return false;
  }
  int64_t top = ol_sat_add(level, size > INT64_MAX ? INT64_MAX : (int64_t)size); /* no overflow */
  if (p->freed && top > f->highest)
    f->highest = top;
  if (top > f->window_high)
    f->window_high = top;
  if (size > f->window_largest)
    f->window_largest = size;
  bool ended;
  site = note_sampling(f, size, site);
  f->size_now = size;
  if (site >= 0) /* the site tells allocations apart */
    ended = occurs(p, f, signature(size, site, false), level) |
            occurs(p, f, signature(NO_SIZE, site, false), level) |
            (new_size_at(f, site, size) &&
             occurs(p, f, signature(NEW_SIZE, site, false), level));
  else /* before the first free, every allocation may start an iteration */
    ended = occurs(p, f, signature(size, -1, f->fell || !p->freed), level);
  note_level(f, f->n, level, top);
  if (p->freed)
    note_rise(p, f, top);
  f->n++;
  f->live++;
  f->fell = false;
  return ended;
}

void ol_phases_free(ol_phases_t *p, ol_phase_finder_t *f, int64_t bytes, int64_t level)
{
  if (level < p->low)
    p->low = level;
  if (!p->freed) {
    p->freed = true;
    p->before_first_free = level + bytes;
    if (f) {
      f->highest = level + bytes;
      f->fewest_live = f->live;
    }
  }
  if (!f)
    return;
  if (f->live > 0) /* a block allocated before the finder was made is not counted */
    f->live--;
  if (f->live < f->fewest_live)
    f->fewest_live = f->live;
  f->fell = true;
  note_fall(p, f, level);
  if (f->n > 0) {
    int64_t *low = block_low(f, f->n - 1);
    if (level < *low)
      *low = level;
  }
}

/* ---- what was found ----------------------------------------------------- */

int64_t ol_phases_last_valley(const ol_phases_t *p)
{
  return p->iterations ? valley_of(p, p->iterations) : -1;
}

int64_t ol_phases_persistent(const ol_phases_t *p)
{
  if (p->iterations == 0)
    return 0;
  int64_t last = valley_of(p, p->iterations);
  return p->low < last ? p->low : last;
}

int64_t ol_phases_growth(const ol_phases_t *p)
{
  uint64_t i = p->iterations;
  if (i < 3 || !valley_known(p, i - 2))
    return 0;
  int64_t newer = valley_of(p, i) - valley_of(p, i - 1);
  int64_t older = valley_of(p, i - 1) - valley_of(p, i - 2);
  return newer < older ? newer : older;
}

int64_t ol_phases_before_first_free(const ol_phases_t *p)
{
  return p->freed ? p->before_first_free : -1;
}

int64_t ol_phases_iteration_need(const ol_phases_t *p)
{
  return p->iterations ? p->need : -1;
}

/* A rise that is steady: each at least a twentieth of where the streak
 * began, and none more than twice another (a loop that does one more
 * micro-step's work each iteration; random lengths rise and fall). */
static bool steady_rises(const int64_t *v, int n, int64_t *least)
{
  int64_t lo = INT64_MAX, hi = 0;
  for (int i = 1; i < n; i++) {
    int64_t rise = v[i] - v[i - 1];
    if (rise <= 0 || rise < v[0] / 20)
      return false;
    lo = rise < lo ? rise : lo;
    hi = rise > hi ? rise : hi;
  }
  *least = lo;
  return hi <= 2 * lo;
}

/* The last OL_WORK_STREAK + 1 iterations' ends, largest tensors and
 * needs, newest first, in the ring and after the anchor was adopted; how
 * many were found. An occurrence of the anchor that ended several
 * iterations at once (its gap read as whole periods: a window grown to
 * about twice the first) is one end. An iteration that ended no whole
 * number of periods on (broke_at) is what growing work looks like: the
 * gap grows with the work. */
static int last_ends(const ol_phases_t *p, uint64_t *ends, uint64_t *largests, int64_t *needs)
{
  int n = 0;
  for (uint64_t it = p->iterations; n <= OL_WORK_STREAK && it > p->first_known &&
                                    p->iterations - it < OL_PHASE_VALLEYS; it--) {
    uint64_t end = p->ends[it % OL_PHASE_VALLEYS];
    if (n > 0 && end == ends[n - 1])
      continue;
    ends[n] = end;
    largests[n] = p->largests[it % OL_PHASE_VALLEYS];
    needs[n++] = p->needs[it % OL_PHASE_VALLEYS];
  }
  return n;
}

/* Gradient accumulation whose window grows (held-out accum_leak: the k-th
 * window's k micro-steps keep their graphs until its one backward) leaves
 * nothing outliving its iterations, yet each iteration needs more than the
 * last, and makes more allocations: the same work, once more each time,
 * its tensors no larger (the largest the same in each). Lengths that vary
 * change what an iteration needs but not how many allocations it makes;
 * lengths that grow by a curriculum make even an unrolled loop's tensors
 * larger (its logits, its inputs), so its largest grows. */
bool ol_phases_work_growth(const ol_phases_t *p, int64_t *need_rise, int64_t *allocs_rise)
{
  *need_rise = *allocs_rise = 0;
  uint64_t ends[OL_WORK_STREAK + 1], largests[OL_WORK_STREAK + 1];
  int64_t needs[OL_WORK_STREAK + 1];
  if (last_ends(p, ends, largests, needs) <= OL_WORK_STREAK)
    return false;
  for (int i = 1; i < OL_WORK_STREAK; i++)
    if (largests[i] != largests[0])
      return false; /* larger tensors: a longer input, not more of the same work */
  int64_t streak_needs[OL_WORK_STREAK], counts[OL_WORK_STREAK];
  for (int i = 0; i < OL_WORK_STREAK; i++) { /* oldest first */
    streak_needs[i] = needs[OL_WORK_STREAK - 1 - i];
    counts[i] = (int64_t)(ends[OL_WORK_STREAK - 1 - i] - ends[OL_WORK_STREAK - i]);
  }
  int64_t need, count;
  if (!steady_rises(streak_needs, OL_WORK_STREAK, &need) ||
      !steady_rises(counts, OL_WORK_STREAK, &count))
    return false;
  *need_rise = need;
  *allocs_rise = count;
  return true;
}

/* A length curriculum or a batch that grows by a schedule (held-out
 * seq_growth_batch: 64 tokens more each step, out mid-run): nothing
 * outlives the iterations, but each of the last OL_WORK_STREAK + 1
 * needed more than the one before, steadily, and its largest tensor was
 * larger each time. (Growing work with tensors of the same size is
 * ol_phases_work_growth's; lengths drawn at random rise and fall.) */
bool ol_phases_input_growth(const ol_phases_t *p, int64_t *need_rise)
{
  *need_rise = 0;
  uint64_t ends[OL_WORK_STREAK + 1], largests[OL_WORK_STREAK + 1];
  int64_t needs[OL_WORK_STREAK + 1];
  if (last_ends(p, ends, largests, needs) <= OL_WORK_STREAK)
    return false;
  /* all four: three rises, so that lengths drawn at random rarely pass
   * (one order in 24, and then only with steady rises) */
  int64_t streak_needs[OL_WORK_STREAK + 1];
  for (int i = 0; i <= OL_WORK_STREAK; i++) { /* oldest first */
    streak_needs[i] = needs[OL_WORK_STREAK - i];
    if (i > 0 && largests[OL_WORK_STREAK - i] <= largests[OL_WORK_STREAK + 1 - i])
      return false;
  }
  return steady_rises(streak_needs, OL_WORK_STREAK + 1, need_rise);
}

/* ---- the leak watch ------------------------------------------------------ */

/* The iteration at which the low point plus the iteration's own need no
 * longer fits in capacity, at growth a step; -1 unknown. */
static int64_t runs_out_at(const ol_phases_t *p, uint64_t capacity, int64_t growth)
{
  if (capacity == 0 || growth <= 0)
    return -1;
  int64_t headroom = (int64_t)capacity - (valley_of(p, p->iterations) + p->need);
  int64_t left = headroom <= 0 ? 1 : (headroom + growth - 1) / growth;
  return (int64_t)p->iterations + left;
}

static void clock_the_warning(ol_phases_t *p, uint64_t now_ns, uint64_t start_ns)
{
  ol_leak_warning_t *w = &p->leak;
  w->at_s = w->runs_out_s = -1;
  if (start_ns == 0 || now_ns < start_ns)
    return;
  w->at_s = (double)(now_ns - start_ns) / 1e9;
  uint64_t counted = p->iterations - p->clock_iteration;
  if (w->runs_out_at < 0 || counted == 0 || p->clock_ns == 0 || now_ns < p->clock_ns)
    return;
  double per_iteration = (double)(now_ns - p->clock_ns) / 1e9 / (double)counted;
  w->runs_out_s = w->at_s + per_iteration * (double)(w->runs_out_at - (int64_t)p->iterations);
}

/* A warning of kept growth is withdrawn once the low point falls back to
 * within a quarter of the growth it warned of: the memory was given back,
 * not kept (held-out serve_fits: each `generate` call's key/value cache
 * grows a decode step at a time, 1.1 MiB a token, and is freed when the
 * call returns; a job that fitted was warned of a leak at a larger call).
 * The fall is the largest yet, so only a larger growth warns again. */
static bool given_back(ol_phases_t *p, uint64_t i)
{
  ol_leak_warning_t *w = &p->leak;
  if (!ol_leak_standing(w) || w->allocations_growth > 0 || w->at <= w->since)
    return false;
  int64_t warned = w->growth * (int64_t)(w->at - w->since);
  if (valley_of(p, i) > w->from + warned / 4)
    return false;
  w->withdrawn_at = i;
  return true;
}

/* A warning of kept growth is withdrawn too once the growth has stopped:
 * for as many iterations as the warned run lasted (16 at least) the low
 * point rose by less than a quarter of the warned rate (held-out
 * cache_fits: features cached by item, 64 MiB a step at first and less as
 * the catalogue of 4000 filled, 3.9 GiB at most under an 8 GiB cap, was
 * warned of at 126 MiB an iteration as running out at iteration 50, and
 * ran its 400 steps). It was an eighth for twice the run until session
 * 26: cache_fits's trace without its call sites ended with its cache
 * filling by a sixth of the warned rate and the warning standing; with
 * them it was withdrawn one iteration before the end. A leak in bursts
 * rises by more than that within the window at each burst (burst_leak:
 * every 4th step), which starts it again. A growth that comes back warns
 * again. */
#define STOPPED_SHARE 4 /* a growth under 1/STOPPED_SHARE of the warned rate has stopped */
static bool stopped_growing(ol_phases_t *p, uint64_t i)
{
  ol_leak_warning_t *w = &p->leak;
  if (!ol_leak_standing(w) || w->allocations_growth > 0 || w->growth <= 0)
    return false;
  /* the first iteration since the warning, or the iterations were
   * counted again from a new repeat (found anew, they start over) */
  if (p->quiet_since < w->at || p->quiet_since > i || w->at > i) {
    p->quiet_since = i;
    p->quiet_from = valley_of(p, i);
    return false;
  }
  /* measured from the lowest since: a low point that stood high for one
   * iteration (one that ended inside a forward pass) is not where the
   * memory kept stands (held-out sparse_log_leak: 545 MiB above it once,
   * and the leak's next 58 iterations, under it, read as quiet) */
  if (valley_of(p, i) < p->quiet_from)
    p->quiet_from = valley_of(p, i);
  uint64_t quiet = i - p->quiet_since;
  int64_t allowed = w->growth / STOPPED_SHARE * (int64_t)(quiet < 1u << 20 ? quiet : 1u << 20);
  if (valley_of(p, i) - p->quiet_from > allowed) {
    p->quiet_since = i; /* still growing: the quiet stretch starts here */
    p->quiet_from = valley_of(p, i);
    return false;
  }
  uint64_t span = w->at - w->since;
  if (quiet < (span > 16 ? span : 16))
    return false;
  w->withdrawn_at = i;
  w->stopped = true;
  return true;
}

/* A rise worth a warning is well beyond what the low point was seen to
 * fall by: a low point that wobbles at random (a prefetched batch of
 * varying size kept across the iteration's end) rises three times in a row
 * now and then, by about what it falls by. */
static bool beyond_wobble(int64_t grown, int64_t fall)
{
  return grown > fall + fall / 2;
}

/* Whether memory kept that grew by grown, at rate a step, while the low
 * point (or the runs' lows) fell by fall at most, is worth a warning: a
 * share of the device (a variable-length job's low point drifts by a few
 * MiB; an iteration found inside a larger one rises by a fraction of the
 * leak each), beyond the wobble, and, after a warning was withdrawn,
 * beyond what withdrew it: a growth given back is only warned of again
 * when larger than the largest fall yet; one that stopped, when it grows
 * again faster than it was found to have stopped, a quarter of its warned
 * rate (held-out cache_fits: a catalogue cache still filling by 7 MiB an
 * iteration when the warning of its 60 was withdrawn). */
static bool worth_warning(const ol_phases_t *p, uint64_t capacity, int64_t grown, int64_t rate,
                          int64_t fall)
{
  const ol_leak_warning_t *w = &p->leak;
  bool given_back = w->withdrawn_at > 0 && !w->stopped, stopped = w->withdrawn_at > 0 && w->stopped;
  return grown >= (capacity ? (int64_t)(capacity / OL_LEAK_SHARE) : OL_LEAK_BYTES) &&
         beyond_wobble(grown, fall) && !(given_back && grown <= p->largest_fall) &&
         !(stopped && STOPPED_SHARE * rate <= w->growth);
}

/* The warning of memory kept that grew by growth an iteration from low
 * point from, since iteration since. */
static void warn_kept(ol_phases_t *p, uint64_t since, int64_t growth, int64_t from,
                      uint64_t capacity, uint64_t now_ns, uint64_t start_ns)
{
  ol_leak_warning_t *w = &p->leak;
  *w = (ol_leak_warning_t){.fired = true, .since = since, .at = p->iterations, .growth = growth,
                           .from = from, .site = -1};
  w->runs_out_at = runs_out_at(p, capacity, w->growth);
  clock_the_warning(p, now_ns, start_ns);
}

/* Two rises in a row, alike within a ninth, each keeping half of what an
 * iteration needs of its own or more (a step's graph kept whole), warn
 * where three are wanted otherwise when at that rate the device runs out
 * within URGENT_STEPS more iterations: a leak that fast runs the job out
 * before a third rise (the live leak_loss on an H100, 2026-12-06:
 * iterations told at its second step, out in its fifth, 1.27 GiB kept a
 * step where a step needs 0.92 GiB, on a 12G cap). A window that fills
 * for two steps and is given back keeps less of a step (gradient
 * accumulation's: accum_fits, 475 MiB a micro-step that needs 3.3 GiB),
 * and a slower growth (rolling_ckpt_fits) is not urgent: they wait for
 * the third as before. */
#define URGENT_STEPS 3
static bool fast_and_alike(const ol_phases_t *p, uint64_t capacity, int64_t grown)
{
  if (p->rising != OL_LEAK_STREAK - 1 || 16 * p->rising_largest > 9 * grown)
    return false;
  int64_t rate = grown / (int64_t)(p->iterations - p->rising_since);
  int64_t out = runs_out_at(p, capacity, rate);
  return 2 * rate >= p->need && out >= 0 && out <= (int64_t)p->iterations + URGENT_STEPS;
}

static bool watch_kept(ol_phases_t *p, uint64_t capacity, uint64_t now_ns, uint64_t start_ns)
{
  uint64_t i = p->iterations;
  if (p->clock_ns == 0) { /* the rate is counted from the first iteration we see end */
    p->clock_ns = now_ns;
    p->clock_iteration = i;
  }
  /* The first iteration's rise is the optimizer's state and caches
   * warming up, never a leak: rises count from the second on. */
  if (i < 3 || !valley_known(p, i - 1))
    return false;
  int64_t rise = valley_of(p, i) - valley_of(p, i - 1);
  bool withdrawn = given_back(p, i) || stopped_growing(p, i); /* even where the iteration broke */
  if (p->broke_at == i && !withdrawn) {
    /* its low point is not one iteration's: a rising run starts again */
    p->rising = 0;
    return false;
  }
  if (rise <= 0 || withdrawn) {
    p->rising = 0;
    if (-rise > p->largest_fall)
      p->largest_fall = -rise;
    return false;
  }
  if (p->rising++ == 0) {
    p->rising_from = valley_of(p, i - 1);
    p->rising_since = i - 1;
    p->rising_largest = 0;
  }
  if (rise > p->rising_largest)
    p->rising_largest = rise;
  int64_t grown = valley_of(p, i) - p->rising_from;
  bool fast = fast_and_alike(p, capacity, grown);
  if (ol_leak_standing(&p->leak) || (p->rising < OL_LEAK_STREAK && !fast))
    return false;
  int64_t rate = grown / (int64_t)(i - p->rising_since);
  if (!worth_warning(p, capacity, grown, rate, p->largest_fall))
    return false;
  /* ... and no one rise makes most of it: a leak keeps about as much each
   * iteration, while state made once (the optimizer's, at its first step,
   * when the iterations found are a step's layers) is one jump. */
  if (2 * p->rising_largest > grown && !fast)
    return false;
  warn_kept(p, p->rising_since, rate, p->rising_from, capacity, now_ns, start_ns);
  return true;
}

/* The lowest low point of the k iterations that end at iteration end. */
static int64_t lowest_of_run(const ol_phases_t *p, uint64_t end, uint64_t k)
{
  int64_t lowest = INT64_MAX;
  for (uint64_t it = end + 1 - k; it <= end; it++)
    lowest = valley_of(p, it) < lowest ? valley_of(p, it) : lowest;
  return lowest;
}

/* Memory kept once every k iterations (held-out accum_logits_leak: each
 * window of 4 micro-steps kept its last logits, 196 MiB, while the
 * gradients the window holds came and went with it, so the low point rose
 * and fell each window and no streak of rises ever began; optimizer_leak:
 * a new AdamW's moments every third step, 625 MiB, out of memory at its
 * 13th; sparse_log_leak: hidden states every 10th step): split the last
 * iterations into OL_LEAK_RUNS runs of k; each run's lowest low point rose
 * above the last run's, the rises alike (none over one and a half times
 * another: a run that kept nothing but bytes of noise, with k shorter than
 * the leak's period, fails, and so does the optimizer's state made at an
 * accumulation window's end, 509 MiB beside a window's 196), none of them
 * the first iteration (the optimizer's state at a plain step). Runs of one
 * are watch_kept's streak of rises; runs of k need fewer rises, each
 * spanning k iterations, to warn as early. An iteration that broke (ended
 * no whole number of periods on: a logging step that allocates more) may
 * stand among them: its low point spans more than one iteration, and a
 * run's lowest is still what the job could not give back. A fall inside a
 * run does not start the runs over (a window's gradients, freed at its
 * end, fall by more than a small leak keeps); a fall between runs is
 * weighed against what they add up to (run_lows_fell). */
static bool kept_every(const ol_phases_t *p, uint64_t i, uint64_t k, int64_t *from,
                       int64_t *grown)
{
  uint64_t span = OL_LEAK_RUNS * k;
  if (i < span + 1 || !valley_known(p, i + 1 - span))
    return false;
  int64_t last = lowest_of_run(p, i - (OL_LEAK_RUNS - 1) * k, k), largest = 0, least = INT64_MAX;
  *from = last;
  for (uint64_t run = OL_LEAK_RUNS - 1; run-- > 0;) { /* oldest first */
    int64_t low = lowest_of_run(p, i - run * k, k);
    largest = low - last > largest ? low - last : largest;
    least = low - last < least ? low - last : least;
    last = low;
  }
  *grown = last - *from;
  return least > 0 && 2 * largest <= 3 * least;
}

/* The largest fall from one run of k iterations' lowest low point to the
 * next run's, at any cut, among the iterations kept up to iteration i:
 * what a run low wobbles by (a leak's run lows never fall). */
static int64_t run_lows_fell(const ol_phases_t *p, uint64_t i, uint64_t k)
{
  int64_t fell = 0;
  for (uint64_t end = i; end >= 2 * k + 1 && valley_known(p, end + 1 - 2 * k); end--) {
    int64_t drop = lowest_of_run(p, end - k, k) - lowest_of_run(p, end, k);
    fell = drop > fell ? drop : fell;
  }
  return fell;
}

/* The runs of k show kept memory wherever they are cut: at each of the
 * k last iterations. A k that is not the period (nor a multiple of it)
 * shows it only where its runs happen to fall right (runs of 3 over
 * accum_logits_leak's period of 4 rose by a window's 196 MiB each, for
 * one cut: 65 MiB an iteration where it kept 49). */
static bool kept_every_cut(const ol_phases_t *p, uint64_t i, uint64_t k, int64_t *from,
                           int64_t *grown)
{
  for (uint64_t cut = k; cut-- > 1;) {
    int64_t f, g;
    if (i < cut || !kept_every(p, i - cut, k, &f, &g))
      return false;
  }
  return kept_every(p, i, k, from, grown);
}

/* Kept memory that rises once every k iterations, k from 2 to
 * OL_LEAK_PERIOD_MAX, the smallest that shows it, by a share of the device
 * over the runs: warned as the streak is, at the runs' rate. */
static bool watch_kept_every(ol_phases_t *p, uint64_t capacity, uint64_t now_ns,
                             uint64_t start_ns)
{
  uint64_t i = p->iterations;
  if (ol_leak_standing(&p->leak))
    return false;
  for (uint64_t k = 2; k <= OL_LEAK_PERIOD_MAX; k++) {
    int64_t from, grown;
    uint64_t over = (OL_LEAK_RUNS - 1) * k;
    if (kept_every_cut(p, i, k, &from, &grown) &&
        worth_warning(p, capacity, grown, grown / (int64_t)over, run_lows_fell(p, i, k))) {
      warn_kept(p, i - over, grown / (int64_t)over, from, capacity, now_ns, start_ns);
      return true;
    }
  }
  return false;
}

/* The iterations' own work grows (ol_phases_work_growth) by a share of the
 * device over the streak: warned as a leak is, with the need's rise as the
 * rate (gradient accumulation whose window grows keeps nothing across
 * iterations, so the low points never rise). */
static bool watch_work(ol_phases_t *p, uint64_t capacity, uint64_t now_ns, uint64_t start_ns)
{
  int64_t need_rise, allocs_rise;
  if (ol_leak_standing(&p->leak) || !ol_phases_work_growth(p, &need_rise, &allocs_rise))
    return false;
  int64_t grown = need_rise * (OL_WORK_STREAK - 1);
  if (grown < (capacity ? (int64_t)(capacity / OL_LEAK_SHARE) : OL_LEAK_BYTES))
    return false;
  ol_leak_warning_t *w = &p->leak;
  *w = (ol_leak_warning_t){.fired = true, .since = p->iterations - OL_WORK_STREAK,
                           .at = p->iterations, .growth = need_rise,
                           .allocations_growth = allocs_rise, .site = -1};
  w->runs_out_at = runs_out_at(p, capacity, need_rise);
  clock_the_warning(p, now_ns, start_ns);
  return true;
}

ol_leak_event_t ol_phases_watch_leak(ol_phases_t *p, uint64_t capacity, uint64_t now_ns,
                                     uint64_t start_ns)
{
  uint64_t withdrawn = p->leak.withdrawn_at;
  if (watch_kept(p, capacity, now_ns, start_ns) ||
      watch_kept_every(p, capacity, now_ns, start_ns) ||
      watch_work(p, capacity, now_ns, start_ns))
    return OL_LEAK_WARNED;
  return p->leak.withdrawn_at != withdrawn ? OL_LEAK_WITHDRAWN : OL_LEAK_QUIET;
}

void ol_leak_warning_text(ol_buf_t *out, const ol_leak_warning_t *w, ol_site_namer_t namer,
                          void *arg)
{
  char growth[32];
  ol_format_bytes(growth, sizeof growth, w->growth);
  if (w->allocations_growth > 0)
    ol_buf_printf(out, "each iteration needs %s more than the last and makes %lld more "
                  "allocations, since iteration %llu (the same work once more each time, held "
                  "to the iteration's end)", growth, (long long)w->allocations_growth,
                  (unsigned long long)w->since);
  else
    ol_buf_printf(out, "memory that outlives iterations grows by %s per iteration since "
                  "iteration %llu", growth, (unsigned long long)w->since);
  if (w->site >= 0) {
    ol_buf_printf(out, " (site ");
    if (namer)
      namer(out, w->site, false, arg);
    else
      ol_buf_printf(out, "%d", (int)w->site);
    ol_buf_printf(out, ")");
  }
  if (w->runs_out_at < 0) {
    ol_buf_printf(out, ": the device's capacity is not known, so not when it runs out");
    return;
  }
  ol_buf_printf(out, ": the device runs out at about iteration %lld", (long long)w->runs_out_at);
  if (w->runs_out_s >= 0 && w->at_s >= 0)
    ol_buf_printf(out, ", in about %.*f s at this rate", w->runs_out_s - w->at_s < 10 ? 1 : 0,
                  w->runs_out_s - w->at_s);
}

void ol_leak_withdrawn_text(ol_buf_t *out, const ol_leak_warning_t *w)
{
  char growth[32];
  ol_format_bytes(growth, sizeof growth, w->growth);
  if (w->stopped) {
    ol_buf_printf(out, "the growth warned of at iteration %llu (%s per iteration since iteration "
                  "%llu) had stopped by iteration %llu: memory that fills up to a bound (a "
                  "cache), not kept without end", (unsigned long long)w->at, growth,
                  (unsigned long long)w->since, (unsigned long long)w->withdrawn_at);
    return;
  }
  ol_buf_printf(out, "the growth warned of at iteration %llu (%s per iteration since iteration "
                "%llu) was given back by iteration %llu: memory held for a while (a cache, or "
                "one request's working set), not kept", (unsigned long long)w->at, growth,
                (unsigned long long)w->since, (unsigned long long)w->withdrawn_at);
}

bool ol_phases_shorter_than_state(const ol_phases_t *p, const ol_phase_finder_t *f)
{
  return f && p->iterations > 0 && p->period > 0 && p->period < fewest_keeping(f);
}

bool ol_phases_loop_ended(const ol_phases_t *p, const ol_phase_finder_t *f)
{
  return f && p->iterations > 0 && p->period > 0 &&
         f->n - f->anchor_last > (MISSED_MAX + 1) * p->period;
}
