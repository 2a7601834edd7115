/* pool.c: manage mode's allocator. One pool per device serves blocks out of
 * large reserved address ranges, maps physical granules as its footprint
 * grows and unmaps granules that lie wholly in free memory when the mapped
 * but unused memory passes a bound (see "Release policy").
 *
 * Data structures, all in arrays grown through the host allocator, so that
 * no call on the hot path allocates host memory:
 * - block records (blk_t): every block, free or live, in address order per
 *   range (prev/next), with a list of spare records;
 * - free blocks, segregated into size bins (exact below 32 KiB, then 32
 *   bins per power of two); each bin is a treap keyed by (size, address),
 *   and a two-level bitmap finds the next non-empty bin. Best fit is the
 *   lower bound in the request's bin, else the smallest block of the next
 *   non-empty bin: the exact smallest free block that fits, ties to the
 *   lowest address, in O(log n). The block is used from its start. When
 *   that would need granules mapped, up to 64 candidates are weighed by
 *   the mapping they need (see choose());
 * - live blocks: an open-addressing hash from address to record;
 * - per range, one bit per granule: mapped or not, and one more marking
 *   the first granule of each physical extent. A block's new granules are
 *   mapped in extents of up to config.map_unit granules, a backend call
 *   each, cut at multiples of the unit; an extent is unmapped only whole,
 *   once no live block touches it.
 *
 * Max split size (M = config.max_split_size, 0 = off), after PyTorch's
 * max_split_size_mb: a free block of M bytes or more is "oversize" and is
 * never split. A request below M is served from the best-fitting free block
 * below M; a request of M or more takes the best-fitting free block only
 * if it is at most OL_POOL_OVERSIZE_SLACK larger, and then takes it whole.
 * Otherwise the request is carved from a range's frontier: its last free
 * block, the address space never handed out since that end of the range
 * was last free, which plays the part of PyTorch's new segment and is
 * always split. Should no frontier (or new range) fit, or the device run
 * out of memory under this rule, the plain best fit is split rather than
 * fail a request the device could serve. */
#include "pool.h"

#include <stdlib.h>
#include <string.h>

#define NIL UINT32_MAX
#define SUB_BITS 5           /* 32 bins per power of two */
#define EXACT_UNITS 64       /* sizes below 64 * 512 B have a bin each */
#define NBINS (EXACT_UNITS + (64 - 6) * (1 << SUB_BITS))
#define NBIN_WORDS ((NBINS + 63) / 64)
#define MAX_RANGES 4096
#define CANDIDATES 64 /* blocks weighed when the best fit needs mapping */
#define UNMAPPED (1ull << 63) /* used_at: the clock when the granule was unmapped */
/* A granule mapped again within this many allocated peaks' worth of
 * requests after a trim unmapped it counts as churn (see note_remap). */
#define REMAP_HORIZON 16

/* 40 bytes; what a tree search reads comes first. */
typedef struct blk {
  uint64_t size, addr;
  uint32_t child[2];    /* treap children (left, right) while free; child[0] links spares */
  uint32_t parent;      /* treap parent while free, NIL at the root */
  uint32_t prev, next;  /* address order within the range; NIL at its ends */
  uint16_t range;
  uint8_t free;
} blk_t;

typedef struct range {
  uint64_t base, size;
  uint64_t *mapped;      /* one bit per granule */
  uint64_t *starts;      /* one bit per granule: the first of a physical extent */
  uint64_t *used_at;     /* per granule: the pool's clock when a live block last left it
                          * (config.keep_used only; NULL otherwise) */
  uint32_t head, tail;   /* first and last block */
  uint64_t top;          /* granules at or above it are unmapped */
} range_t;

struct ol_pool {
  ol_backend_t be;
  uint64_t gran;
  unsigned shift; /* log2(gran) */
  uint64_t address_space, max_split;
  uint64_t unit; /* granules per physical extent at most (config.map_unit) */
  void *(*host_realloc)(void *ptr, size_t size);

  blk_t *blk;
  uint32_t nblk, cap_blk, spare, nspare;

  uint32_t root[NBINS];
  uint32_t first[NBINS]; /* each bin's smallest block: best fit without a descent */
  uint64_t binmap[NBIN_WORDS];
  uint64_t binsum; /* bit w: binmap[w] is not zero */

  uint32_t *hslot; /* live records by address, NIL: empty */
  uint32_t hbits, hcount;

  range_t *ranges;
  uint32_t nranges, cap_ranges;

  uint64_t allocated, allocated_peak, reserved, reserved_peak;
  uint64_t retry_at; /* no automatic release scan below this footprint */
  uint64_t clock;    /* bytes handed out over the pool's life: its sense of time */
  uint64_t keep_for; /* free memory used less than this long ago is not trimmed */
  uint64_t remap_recent, remap_since, remap_gap; /* see note_remap */
  uint64_t peak_clock; /* the clock when allocated_peak last rose */
  uint64_t capacity; /* config.capacity: near it, free memory of any age goes */
  bool keep_mapped;  /* config: no automatic release at all */
  bool keep_used;    /* config: trims spare what was used within keep_for */
  ol_pool_counts_t counts;
};

/* ---- host memory ------------------------------------------------------ */

static void *host_grow(ol_pool_t *p, void *ptr, size_t count, size_t each)
{
  if (count != 0 && each > SIZE_MAX / count)
    return NULL;
  return p->host_realloc(ptr, count * each);
}

static void host_free(ol_pool_t *p, void *ptr)
{
  if (ptr)
    p->host_realloc(ptr, 0);
}

/* realloc(ptr, 0) frees in glibc but is not promised to by C11. */
static void *default_realloc(void *ptr, size_t size)
{
  if (size == 0) {
    free(ptr);
    return NULL;
  }
  return realloc(ptr, size);
}

/* ---- bit helpers ------------------------------------------------------ */

static bool bit_get(const uint64_t *bits, uint64_t i)
{
  return (bits[i >> 6] >> (i & 63)) & 1;
}

static void bits_set(uint64_t *bits, uint64_t lo, uint64_t hi, bool on)
{
  for (uint64_t i = lo; i < hi;) {
    uint64_t w = i >> 6, b = i & 63, n = 64 - b;
    if (n > hi - i)
      n = hi - i;
    uint64_t mask = (n == 64 ? ~0ull : ((1ull << n) - 1)) << b;
    bits[w] = on ? bits[w] | mask : bits[w] & ~mask;
    i += n;
  }
}

/* First index in [lo, hi) whose bit equals want, or hi. */
static uint64_t bit_next(const uint64_t *bits, uint64_t lo, uint64_t hi, bool want)
{
  uint64_t i = lo;
  while (i < hi) {
    uint64_t word = want ? bits[i >> 6] : ~bits[i >> 6];
    word &= ~0ull << (i & 63);
    if (word) {
      uint64_t found = (i & ~63ull) + (uint64_t)__builtin_ctzll(word);
      return found < hi ? found : hi;
    }
    i = (i & ~63ull) + 64;
  }
  return hi;
}

/* Last index in [lo, hi) whose bit equals want, or UINT64_MAX. */
static uint64_t bit_prev(const uint64_t *bits, uint64_t lo, uint64_t hi, bool want)
{
  uint64_t i = hi;
  while (i > lo) {
    uint64_t top = i - 1;
    uint64_t word = want ? bits[top >> 6] : ~bits[top >> 6];
    unsigned b = top & 63;
    word &= b == 63 ? ~0ull : ((1ull << (b + 1)) - 1);
    if (word) {
      uint64_t found = (top & ~63ull) + 63 - (uint64_t)__builtin_clzll(word);
      return found >= lo ? found : UINT64_MAX;
    }
    i = top & ~63ull;
  }
  return UINT64_MAX;
}

/* ---- size bins -------------------------------------------------------- */

static uint32_t bin_of(uint64_t size)
{
  uint64_t u = size / OL_POOL_ALIGN;
  if (u < EXACT_UNITS)
    return (uint32_t)u;
  unsigned f = 63 - (unsigned)__builtin_clzll(u); /* >= 6 */
  return EXACT_UNITS + (f - 6) * (1u << SUB_BITS) +
         (uint32_t)((u >> (f - SUB_BITS)) & ((1u << SUB_BITS) - 1));
}

static void bin_mark(ol_pool_t *p, uint32_t bin, bool nonempty)
{
  uint32_t w = bin >> 6;
  if (nonempty)
    p->binmap[w] |= 1ull << (bin & 63);
  else
    p->binmap[w] &= ~(1ull << (bin & 63));
  if (p->binmap[w])
    p->binsum |= 1ull << w;
  else
    p->binsum &= ~(1ull << w);
}

/* First non-empty bin at or above bin, or NIL. */
static uint32_t bin_next(const ol_pool_t *p, uint32_t bin)
{
  if (bin >= NBINS)
    return NIL;
  uint32_t w = bin >> 6;
  uint64_t word = p->binmap[w] & (~0ull << (bin & 63));
  if (word)
    return w * 64 + (uint32_t)__builtin_ctzll(word);
  uint64_t sum = w + 1 < 64 ? p->binsum & (~0ull << (w + 1)) : 0;
  if (!sum)
    return NIL;
  w = (uint32_t)__builtin_ctzll(sum);
  return w * 64 + (uint32_t)__builtin_ctzll(p->binmap[w]);
}

/* ---- treap of free blocks, keyed by (size, addr) ----------------------- */

/* A record's treap priority: a hash of its number, random enough to keep
 * the trees shallow, and read from no memory. */
static uint32_t prio(uint32_t x)
{
  x *= 0x9E3779B1u;
  return x ^ (x >> 15);
}

/* The descents below branch on each level's comparison: measured, the
 * branch-free forms were slower here (they serialise the loads that a
 * predicted branch lets the processor start early). */
static bool key_less(const blk_t *a, const blk_t *b)
{
  return a->size < b->size || (a->size == b->size && a->addr < b->addr);
}

/* Splits tree t into the nodes below x (*l, under node lp) and above it
 * (*r, under rp). Parent links let an erase start at the node itself
 * instead of searching down from the root. */
static void treap_split(blk_t *B, uint32_t t, const blk_t *x, uint32_t *l, uint32_t lp,
                        uint32_t *r, uint32_t rp)
{
  while (t != NIL) {
    if (key_less(&B[t], x)) {
      *l = t;
      B[t].parent = lp;
      lp = t;
      l = &B[t].child[1];
      t = B[t].child[1];
    } else {
      *r = t;
      B[t].parent = rp;
      rp = t;
      r = &B[t].child[0];
      t = B[t].child[0];
    }
  }
  *l = *r = NIL;
}

/* Joins a and b, every key of a below every key of b, under parent. */
static uint32_t treap_merge(blk_t *B, uint32_t a, uint32_t b, uint32_t parent)
{
  uint32_t root = NIL, *link = &root;
  while (a != NIL && b != NIL) {
    if (prio(a) > prio(b)) {
      *link = a;
      B[a].parent = parent;
      parent = a;
      link = &B[a].child[1];
      a = B[a].child[1];
    } else {
      *link = b;
      B[b].parent = parent;
      parent = b;
      link = &B[b].child[0];
      b = B[b].child[0];
    }
  }
  *link = a != NIL ? a : b;
  if (*link != NIL)
    B[*link].parent = parent;
  return root;
}

static void treap_insert(blk_t *B, uint32_t *root, uint32_t x)
{
  uint32_t *link = root, parent = NIL;
  while (*link != NIL && prio(*link) >= prio(x)) {
    parent = *link;
    link = key_less(&B[x], &B[parent]) ? &B[parent].child[0] : &B[parent].child[1];
  }
  treap_split(B, *link, &B[x], &B[x].child[0], x, &B[x].child[1], x);
  B[x].parent = parent;
  *link = x;
}

static void treap_erase(blk_t *B, uint32_t *root, uint32_t x)
{
  uint32_t parent = B[x].parent;
  uint32_t *link = parent == NIL ? root : &B[parent].child[B[parent].child[1] == x];
  *link = treap_merge(B, B[x].child[0], B[x].child[1], parent);
}

/* Smallest key at or above (size, 0), or NIL. */
static uint32_t treap_lower_bound(const blk_t *B, uint32_t t, uint64_t size)
{
  uint32_t best = NIL;
  while (t != NIL) {
    if (B[t].size >= size) {
      best = t;
      t = B[t].child[0];
    } else {
      t = B[t].child[1];
    }
  }
  return best;
}

static uint32_t treap_first(const blk_t *B, uint32_t t)
{
  while (B[t].child[0] != NIL)
    t = B[t].child[0];
  return t;
}

/* x's neighbour in key order within its tree: dir 0 the one below, 1 the
 * one above; NIL if none. */
static uint32_t treap_neighbour(const blk_t *B, uint32_t x, int dir)
{
  uint32_t t = B[x].child[dir];
  if (t != NIL) {
    while (B[t].child[!dir] != NIL)
      t = B[t].child[!dir];
    return t;
  }
  uint32_t parent = B[x].parent;
  while (parent != NIL && B[parent].child[dir] == x) {
    x = parent;
    parent = B[x].parent;
  }
  return parent;
}

/* Whether free block x can take the key (size, addr) where it stands:
 * same bin, and still between its neighbours. Then a split or a merge
 * needs no erase and insert: an allocate+free pair at the edge of a free
 * block touches the tree only to find it. */
static bool rekey_in_place(const ol_pool_t *p, uint32_t x, uint64_t size, uint64_t addr)
{
  const blk_t *B = p->blk;
  if (bin_of(size) != bin_of(B[x].size))
    return false;
  blk_t key = {.size = size, .addr = addr};
  int dir = key_less(&key, &B[x]) ? 0 : 1;
  uint32_t n = treap_neighbour(B, x, dir);
  return n == NIL || (dir ? key_less(&key, &B[n]) : key_less(&B[n], &key));
}

/* ---- free blocks ------------------------------------------------------ */

static void free_insert(ol_pool_t *p, uint32_t x)
{
  uint32_t bin = bin_of(p->blk[x].size);
  p->blk[x].free = 1;
  p->blk[x].child[0] = p->blk[x].child[1] = NIL;
  if (p->root[bin] == NIL)
    bin_mark(p, bin, true);
  treap_insert(p->blk, &p->root[bin], x);
  if (p->first[bin] == NIL || key_less(&p->blk[x], &p->blk[p->first[bin]]))
    p->first[bin] = x;
  p->counts.free_blocks++;
}

static void free_remove(ol_pool_t *p, uint32_t x)
{
  uint32_t bin = bin_of(p->blk[x].size);
  if (p->first[bin] == x)
    p->first[bin] = treap_neighbour(p->blk, x, 1);
  treap_erase(p->blk, &p->root[bin], x);
  if (p->root[bin] == NIL)
    bin_mark(p, bin, false);
  p->blk[x].free = 0;
  p->counts.free_blocks--;
}

/* The smallest free block of at least size bytes, lowest address first. */
static uint32_t best_fit(const ol_pool_t *p, uint64_t size)
{
  uint32_t bin = bin_of(size);
  uint32_t x = p->first[bin];
  if (x != NIL) {
    if (p->blk[x].size >= size)
      return x; /* the whole bin fits: its smallest */
    x = treap_lower_bound(p->blk, p->root[bin], size);
    if (x != NIL)
      return x;
  }
  bin = bin_next(p, bin + 1);
  return bin == NIL ? NIL : p->first[bin];
}

/* The free block after x in (size, address) order, or NIL. */
static uint32_t next_in_order(const ol_pool_t *p, uint32_t x)
{
  const blk_t *B = p->blk;
  uint32_t bin = bin_of(B[x].size), best = NIL;
  for (uint32_t t = p->root[bin]; t != NIL;) {
    if (key_less(&B[x], &B[t])) {
      best = t;
      t = B[t].child[0];
    } else {
      t = B[t].child[1];
    }
  }
  if (best != NIL)
    return best;
  bin = bin_next(p, bin + 1);
  return bin == NIL ? NIL : p->first[bin];
}

/* ---- records ---------------------------------------------------------- */


/* At least n spare records, so that what follows cannot fail. */
static int reserve_records(ol_pool_t *p, uint32_t n)
{
  if (p->nspare >= n)
    return 0;
  uint32_t cap = p->cap_blk ? p->cap_blk * 2 : 256;
  if (cap >= NIL || cap < p->cap_blk)
    return -1;
  blk_t *grown = host_grow(p, p->blk, cap, sizeof *grown);
  if (!grown)
    return -1;
  p->blk = grown;
  for (uint32_t i = p->cap_blk; i < cap; i++) {
    grown[i].child[0] = p->spare;
    p->spare = i;
  }
  p->nspare += cap - p->cap_blk;
  p->cap_blk = cap;
  return 0;
}

static uint32_t record_take(ol_pool_t *p)
{
  uint32_t x = p->spare;
  p->spare = p->blk[x].child[0];
  p->nspare--;
  return x;
}

static void record_put(ol_pool_t *p, uint32_t x)
{
  p->blk[x].child[0] = p->spare;
  p->spare = x;
  p->nspare++;
}

/* ---- live blocks: address -> record ----------------------------------- */

/* Slots hold record numbers only (the address is in the record, which the
 * caller reads next anyway): 4 bytes a slot keeps the table in L1 cache
 * for a few thousand live blocks. */

static uint32_t hash_slot(const ol_pool_t *p, uint64_t addr)
{
  return (uint32_t)(((addr >> 9) * 0x9E3779B97F4A7C15ull) >> (64 - p->hbits));
}

static void hash_put(ol_pool_t *p, uint32_t x)
{
  uint32_t mask = (1u << p->hbits) - 1, i = hash_slot(p, p->blk[x].addr);
  while (p->hslot[i] != NIL)
    i = (i + 1) & mask;
  p->hslot[i] = x;
  p->hcount++;
}

/* Room for one more entry at a load of at most 1/2. */
static int hash_reserve(ol_pool_t *p)
{
  if (p->hslot && (uint64_t)(p->hcount + 1) * 2 <= (1ull << p->hbits))
    return 0;
  uint32_t bits = p->hslot ? p->hbits + 1 : 10;
  if (bits > 31)
    return -1;
  uint32_t *slots = host_grow(p, NULL, 1ull << bits, sizeof *slots);
  if (!slots)
    return -1;
  uint32_t *old = p->hslot, old_n = p->hslot ? 1u << p->hbits : 0;
  memset(slots, 0xff, (sizeof *slots) << bits); /* NIL everywhere */
  p->hslot = slots;
  p->hbits = bits;
  p->hcount = 0;
  for (uint32_t i = 0; i < old_n; i++)
    if (old[i] != NIL)
      hash_put(p, old[i]);
  host_free(p, old);
  return 0;
}

static uint32_t hash_find(const ol_pool_t *p, uint64_t addr, uint32_t *slot)
{
  if (!p->hslot)
    return NIL;
  uint32_t mask = (1u << p->hbits) - 1, i = hash_slot(p, addr);
  for (; p->hslot[i] != NIL; i = (i + 1) & mask) {
    if (p->blk[p->hslot[i]].addr == addr) {
      *slot = i;
      return p->hslot[i];
    }
  }
  return NIL;
}

/* Linear probing: delete by shifting later members of the cluster back. */
static void hash_delete(ol_pool_t *p, uint32_t i)
{
  uint32_t mask = (1u << p->hbits) - 1;
  for (uint32_t j = (i + 1) & mask; p->hslot[j] != NIL; j = (j + 1) & mask) {
    uint32_t home = hash_slot(p, p->blk[p->hslot[j]].addr);
    /* j's entry may fill hole i unless its home lies in (i, j] cyclically */
    bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
    if (!stays) {
      p->hslot[i] = p->hslot[j];
      i = j;
    }
  }
  p->hslot[i] = NIL;
  p->hcount--;
}

/* ---- ranges and mapping ----------------------------------------------- */

static range_t *range_of(const ol_pool_t *p, uint32_t x)
{
  return &p->ranges[p->blk[x].range];
}

static uint64_t round_up(uint64_t v, uint64_t unit)
{
  return (v + unit - 1) & ~(unit - 1);
}

/* Reserves a range of at least size bytes, all of it one free block. */
static uint32_t range_add(ol_pool_t *p, uint64_t size)
{
  if (p->nranges == MAX_RANGES || reserve_records(p, 1) != 0)
    return NIL;
  if (p->nranges == p->cap_ranges) {
    uint32_t cap = p->cap_ranges ? p->cap_ranges * 2 : 4;
    range_t *grown = host_grow(p, p->ranges, cap, sizeof *grown);
    if (!grown)
      return NIL;
    p->ranges = grown;
    p->cap_ranges = cap;
  }
  range_t *r = &p->ranges[p->nranges];
  *r = (range_t){.size = size};
  uint64_t granules = size >> p->shift;
  size_t words = (granules + 63) / 64;
  r->mapped = host_grow(p, NULL, words, sizeof *r->mapped);
  r->starts = r->mapped ? host_grow(p, NULL, words, sizeof *r->starts) : NULL;
  size_t stamps = p->keep_used ? (granules ? granules : 1) : 0;
  r->used_at = r->starts && stamps ? host_grow(p, NULL, stamps, sizeof *r->used_at) : NULL;
  if (!r->starts || (stamps && !r->used_at) || p->be.reserve(p->be.ctx, size, &r->base) != 0) {
    host_free(p, r->mapped);
    host_free(p, r->starts);
    host_free(p, r->used_at);
    return NIL;
  }
  memset(r->mapped, 0, words * sizeof *r->mapped);
  memset(r->starts, 0, words * sizeof *r->starts);
  if (stamps)
    memset(r->used_at, 0, stamps * sizeof *r->used_at);
  uint32_t x = record_take(p);
  p->blk[x] = (blk_t){.addr = r->base, .size = size, .prev = NIL, .next = NIL,
                      .range = (uint16_t)p->nranges};
  r->head = r->tail = x;
  p->nranges++;
  p->counts.ranges++;
  free_insert(p, x);
  return x;
}

static uint64_t trim_slack(const ol_pool_t *p, uint64_t peak)
{
  return peak / 64 > 4 * p->gran ? peak / 64 : 4 * p->gran;
}

/* A granule unmapped at clock `then` is mapped again now. If that came
 * soon, and the job has reached no new peak since, trimming it was a
 * mistake the job pays for twice (~100 us a chunk). Once such returns add
 * up to a slack (halved every horizon, so that a rare one never adds up),
 * free memory stays mapped until it has gone unused for twice the longest
 * return seen. */
static void note_remap(ol_pool_t *p, uint64_t then)
{
  uint64_t gap = p->clock - then, horizon = p->allocated_peak * REMAP_HORIZON;
  if (gap > horizon || then < p->peak_clock)
    return; /* long ago, or the job has grown since: not churn */
  p->counts.remapped_bytes += p->gran;
  if (p->clock - p->remap_since > horizon) { /* a new period: what came before counts half */
    p->remap_recent /= 2;
    p->remap_since = p->clock;
  }
  p->remap_recent += p->gran;
  if (gap > p->remap_gap)
    p->remap_gap = gap;
  if (p->remap_recent >= trim_slack(p, p->allocated_peak) && p->keep_for < 2 * p->remap_gap)
    p->keep_for = 2 * p->remap_gap;
}

/* Granules [g0, g1) are now one physical extent. */
static void map_done(ol_pool_t *p, range_t *r, uint64_t g0, uint64_t g1)
{
  bits_set(r->mapped, g0, g1, true);
  bits_set(r->starts, g0, g0 + 1, true);
  for (uint64_t g = g0; r->used_at && g < g1; g++) {
    if (r->used_at[g] & UNMAPPED)
      note_remap(p, r->used_at[g] & ~UNMAPPED);
    r->used_at[g] = p->clock;
  }
  if (g1 > r->top)
    r->top = g1;
  p->reserved += (g1 - g0) << p->shift;
  if (p->reserved > p->reserved_peak)
    p->reserved_peak = p->reserved;
  p->counts.map_calls++;
  p->counts.mapped_bytes += (g1 - g0) << p->shift;
}

/* The extent that begins at granule s ends at the next extent's start or at
 * the first unmapped granule; no extent is longer than the unit. */
static uint64_t extent_end(const ol_pool_t *p, const range_t *r, uint64_t s)
{
  uint64_t limit = s + p->unit < r->top ? s + p->unit : r->top;
  uint64_t next = bit_next(r->starts, s + 1, limit, true);
  return bit_next(r->mapped, s + 1, next, false);
}

/* The first granule of the extent that holds mapped granule g. */
static uint64_t extent_start(const ol_pool_t *p, const range_t *r, uint64_t g)
{
  uint64_t lo = g + 1 > p->unit ? g + 1 - p->unit : 0;
  return bit_prev(r->starts, lo, g + 1, true);
}

/* Unmaps [g0, g1), extents extents side by side, whole: one backend call
 * (the backend gives back each extent's allocation). */
static void unmap_extents(ol_pool_t *p, range_t *r, uint64_t g0, uint64_t g1, uint64_t extents)
{
  p->be.unmap(p->be.ctx, r->base + (g0 << p->shift), (g1 - g0) << p->shift);
  bits_set(r->mapped, g0, g1, false);
  bits_set(r->starts, g0, g1, false);
  if (g1 >= r->top) {
    uint64_t last = g0 ? bit_prev(r->mapped, 0, g0, true) : UINT64_MAX;
    r->top = last == UINT64_MAX ? 0 : last + 1;
  }
  for (uint64_t g = g0; r->used_at && g < g1; g++)
    r->used_at[g] = p->clock | UNMAPPED;
  p->reserved -= (g1 - g0) << p->shift;
  p->counts.unmap_calls += extents;
  p->counts.unmapped_bytes += (g1 - g0) << p->shift;
}

/* Granules [*g0, *g1) lying wholly inside block x. */
static bool whole_granules(const ol_pool_t *p, uint32_t x, uint64_t *g0, uint64_t *g1)
{
  const range_t *r = range_of(p, x);
  uint64_t lo = p->blk[x].addr - r->base, hi = lo + p->blk[x].size;
  *g0 = round_up(lo, p->gran) >> p->shift;
  *g1 = hi >> p->shift;
  return *g0 < *g1;
}

/* Without -mpopcnt __builtin_popcountll is a libgcc call. */
static uint64_t popcount64(uint64_t v)
{
  v = v - ((v >> 1) & 0x5555555555555555ull);
  v = (v & 0x3333333333333333ull) + ((v >> 2) & 0x3333333333333333ull);
  v = (v + (v >> 4)) & 0x0f0f0f0f0f0f0f0full;
  return (v * 0x0101010101010101ull) >> 56;
}

static uint64_t count_clear(const uint64_t *bits, uint64_t lo, uint64_t hi)
{
  uint64_t n = 0;
  for (uint64_t i = lo; i < hi;) {
    uint64_t b = i & 63, take = 64 - b < hi - i ? 64 - b : hi - i;
    uint64_t mask = (take == 64 ? ~0ull : ((1ull << take) - 1)) << b;
    n += popcount64(~bits[i >> 6] & mask);
    i += take;
  }
  return n;
}

/* Granules to map for size bytes at addr in r. */
static uint64_t new_granules(const ol_pool_t *p, const range_t *r, uint64_t addr, uint64_t size)
{
  uint64_t lo = addr - r->base;
  uint64_t g0 = lo >> p->shift, g1 = ((lo + size - 1) >> p->shift) + 1;
  if (g1 <= r->top && bit_next(r->mapped, g0, g1, false) == g1)
    return 0; /* the common case, without counting */
  return count_clear(r->mapped, g0, g1);
}

/* Where in free block x to put size bytes: its start, unless that needs
 * mapping and a mapped run inside x holds the whole request, then the
 * start of that run. Returns the granules left to map at *at. */
static uint64_t fit_in(const ol_pool_t *p, uint32_t x, uint64_t size, uint64_t *at)
{
  const blk_t *b = &p->blk[x];
  const range_t *r = range_of(p, x);
  *at = b->addr;
  uint64_t need = new_granules(p, r, b->addr, size);
  if (need == 0 || b->size == size)
    return need;
  uint64_t lo = b->addr - r->base, hi = lo + b->size;
  uint64_t end = ((hi - 1) >> p->shift) + 1;
  if (end > r->top)
    end = r->top; /* nothing mapped above: the frontier's scan stays short */
  for (uint64_t a = bit_next(r->mapped, lo >> p->shift, end, true); a < end;) {
    uint64_t e = bit_next(r->mapped, a, end, false);
    uint64_t from = a << p->shift > lo ? a << p->shift : lo;
    uint64_t to = e << p->shift < hi ? e << p->shift : hi;
    if (to - from >= size) {
      *at = r->base + from;
      return 0;
    }
    a = bit_next(r->mapped, e, end, true);
  }
  return need;
}

/* Whether every granule of [g0, g1) was last left by a live block before
 * the clock read `before`. */
static bool unused_since(const range_t *r, uint64_t g0, uint64_t g1, uint64_t before)
{
  if (before == UINT64_MAX || !r->used_at)
    return true; /* any free memory may go (stamps are kept with config.keep_used only) */
  for (uint64_t g = g0; g < g1; g++)
    if (r->used_at[g] >= before)
      return false;
  return true;
}

/* Unmaps the extents wholly inside free block x, highest first, until want
 * bytes are gone (the last extent may take it past want); returns the bytes
 * released. An extent that a live block shares stays, and so does one that
 * a live block left at or after the clock read `before`. */
static uint64_t release_block(ol_pool_t *p, uint32_t x, uint64_t want, uint64_t before)
{
  uint64_t g0, g1, done = 0;
  range_t *r = range_of(p, x);
  if (!whole_granules(p, x, &g0, &g1))
    return 0;
  if (g1 > r->top)
    g1 = r->top;
  while (done < want) {
    uint64_t top = bit_prev(r->mapped, g0, g1, true);
    if (top == UINT64_MAX)
      break;
    uint64_t s = extent_start(p, r, top);
    if (s < g0)
      break; /* it reaches below the block, and holds all that is mapped below */
    uint64_t e = extent_end(p, r, s), n = 1;
    if (e > g1 || !unused_since(r, s, e, before)) { /* shared, or used of late */
      g1 = s;
      continue;
    }
    /* the extents right below, while they are wanted: one call for all */
    while (done + ((e - s) << p->shift) < want && s > g0 && bit_get(r->mapped, s - 1)) {
      uint64_t below = extent_start(p, r, s - 1);
      if (below < g0 || !unused_since(r, below, s, before))
        break;
      s = below;
      n++;
    }
    unmap_extents(p, r, s, e, n);
    done += (e - s) << p->shift;
    g1 = s;
  }
  return done;
}

/* Releases free memory that no live block has used since the clock read
 * `before`, highest addresses first, until want bytes are gone. */
static uint64_t release_unused(ol_pool_t *p, uint64_t want, uint64_t before)
{
  uint64_t done = 0;
  for (uint32_t i = p->nranges; i-- > 0 && done < want;) {
    for (uint32_t x = p->ranges[i].tail; x != NIL && done < want; x = p->blk[x].prev)
      if (p->blk[x].free)
        done += release_block(p, x, want - done, before);
  }
  return done;
}

uint64_t ol_pool_release(ol_pool_t *p, uint64_t want)
{
  return release_unused(p, want, UINT64_MAX);
}

/* Release policy. Mapping costs ~50 us and unmapping ~48 us per 2 MiB on an
 * H200, so free memory stays mapped (cached) as long as the mapped total is
 * within a slack of the peak allocated so far: a training job, whose
 * allocated memory rises to about the same peak every iteration, then maps
 * nothing after its first iterations. Only when growing would take the
 * mapped total past peak + slack (slack = peak/64, at least 4 granules) and
 * past the highest total mapped so far (growing back to it costs no peak)
 * are free granules unmapped first, down to peak + slack/2: so peak
 * reserved stays within ~1.6% of peak allocated unless the live blocks
 * themselves straddle more. After a scan, the next one waits until another
 * slack/2 is mapped, so that a footprint the scans cannot shrink costs no
 * O(n) walk per allocation. Before reporting out of memory, everything
 * free goes.
 *
 * With config.keep_used, trimming only when memory is wanted (not the
 * default: see below): a job whose layout shifts from step
 * to step (a sequence length drawn per step) needs its free memory mapped
 * in other places each step, and a trim then unmaps what a later step maps
 * again: on a Llama-style job ~800 chunks a step, each paid twice. Once the
 * pool has seen that happen to more than a slack's worth of chunks (since
 * the job last reached a new peak: growth is not churn), a trim leaves free
 * memory that a live block left less than twice the longest such return
 * ago (keep_for, on the pool's clock of bytes handed out), and the
 * footprint grows instead. Near config.capacity (its last sixteenth) that
 * exemption and the one for the highest total go: memory is wanted. On the
 * recorded traces this removes the live Llama-style job's steady unmaps
 * (1442 an iteration to 4) for 1.13x reserved instead of 1.008x, but where
 * best fit drifts it costs memory without stopping the churn (ResNet-50
 * with a max split size: 1.42x, still ~2900 maps an iteration), so it is
 * an option until a placement keeps a step's layout (docs/measurements.md,
 * 2026-12-02 session 8). */
static void trim_before_growing(ol_pool_t *p, uint64_t need, uint64_t new_peak)
{
  if (p->keep_mapped)
    return;
  uint64_t slack = trim_slack(p, new_peak);
  uint64_t after = p->reserved + need;
  bool near_full = p->keep_used && p->capacity && after > p->capacity - p->capacity / 16;
  uint64_t bound = new_peak + slack;
  if (!near_full && bound < p->reserved_peak)
    bound = p->reserved_peak;
  if (after <= bound || after <= p->retry_at)
    return;
  uint64_t before = UINT64_MAX; /* any free memory may go */
  if (p->keep_used && !near_full && p->keep_for)
    before = p->clock > p->keep_for ? p->clock - p->keep_for : 0;
  if (before)
    release_unused(p, after - (bound - slack / 2), before);
  p->counts.release_scans++;
  p->retry_at = p->reserved + need + slack / 2;
}

/* Maps granules [g0, g1) of r run by run; on a failure releases all free
 * memory and tries that run once more. */
static int map_runs(ol_pool_t *p, range_t *r, uint64_t g0, uint64_t g1)
{
  bool released = false;
  for (uint64_t a = bit_next(r->mapped, g0, g1, false); a < g1;) {
    uint64_t unit_end = (a / p->unit + 1) * p->unit; /* extents never cross a unit */
    uint64_t b = bit_next(r->mapped, a, unit_end < g1 ? unit_end : g1, true);
    if (p->be.map(p->be.ctx, r->base + (a << p->shift), (b - a) << p->shift) != 0) {
      if (released)
        return -1;
      ol_pool_release(p, UINT64_MAX);
      released = true;
      continue;
    }
    map_done(p, r, a, b);
    a = bit_next(r->mapped, b, g1, false);
  }
  return 0;
}

/* Makes every granule that live block x touches mapped. */
static int back_block(ol_pool_t *p, uint32_t x)
{
  range_t *r = range_of(p, x);
  uint64_t lo = p->blk[x].addr - r->base, hi = lo + p->blk[x].size;
  uint64_t g0 = lo >> p->shift, g1 = ((hi - 1) >> p->shift) + 1;
  if (g1 - g0 == 1 && bit_get(r->mapped, g0))
    return 0; /* the hot path: inside one mapped granule */
  uint64_t need = 0;
  for (uint64_t a = bit_next(r->mapped, g0, g1, false); a < g1;) {
    uint64_t b = bit_next(r->mapped, a, g1, true);
    need += (b - a) << p->shift;
    a = bit_next(r->mapped, b, g1, false);
  }
  if (need == 0)
    return 0;
  uint64_t new_peak = p->allocated + p->blk[x].size;
  if (new_peak < p->allocated_peak)
    new_peak = p->allocated_peak;
  trim_before_growing(p, need, new_peak);
  return map_runs(p, r, g0, g1);
}

/* ---- carving and coalescing ------------------------------------------- */

/* Splits free-list-less block x at offset bytes: x keeps the low part, a
 * new record the high part, which is returned (not in any bin). */
static uint32_t split_off(ol_pool_t *p, uint32_t x, uint64_t offset)
{
  uint32_t y = record_take(p);
  blk_t *b = &p->blk[x];
  p->blk[y] = (blk_t){.addr = b->addr + offset, .size = b->size - offset, .prev = x,
                      .next = b->next, .range = b->range};
  if (b->next != NIL)
    p->blk[b->next].prev = y;
  else
    range_of(p, x)->tail = y;
  b->next = y;
  b->size = offset;
  return y;
}

/* Takes size bytes at at out of free block x: what lies below and above
 * stays free, unless whole is set (then at is x's start and x is taken
 * whole). Returns the live record, not yet in the hash. */
static uint32_t carve(ol_pool_t *p, uint32_t x, uint64_t at, uint64_t size, bool whole)
{
  blk_t *b = &p->blk[x];
  if (!whole && at == b->addr && b->size > size &&
      rekey_in_place(p, x, b->size - size, b->addr + size)) {
    /* x stays in its tree as the rest; the live block is a new record */
    uint32_t z = record_take(p);
    b = &p->blk[x];
    p->blk[z] = (blk_t){.addr = b->addr, .size = size, .prev = b->prev, .next = x,
                        .range = b->range};
    if (b->prev != NIL)
      p->blk[b->prev].next = z;
    else
      range_of(p, x)->head = z;
    b->prev = z;
    b->addr += size;
    b->size -= size;
    return z;
  }
  free_remove(p, x);
  if (at > p->blk[x].addr) {
    uint32_t low = x;
    x = split_off(p, low, at - p->blk[low].addr);
    free_insert(p, low);
  }
  if (!whole && p->blk[x].size > size)
    free_insert(p, split_off(p, x, size));
  return x;
}

/* Unlinks y, x's next neighbour, whose bytes x has taken. */
static void join_next_record(ol_pool_t *p, uint32_t x, uint32_t y)
{
  p->blk[x].next = p->blk[y].next;
  if (p->blk[y].next != NIL)
    p->blk[p->blk[y].next].prev = x;
  else
    range_of(p, x)->tail = x;
  record_put(p, y);
}

/* x takes in its next neighbour, already out of the bins. */
static void join_next(ol_pool_t *p, uint32_t x)
{
  uint32_t y = p->blk[x].next;
  p->blk[x].size += p->blk[y].size;
  join_next_record(p, x, y);
}

/* Live block x becomes free, merged at once with free neighbours. */
static void coalesce(ol_pool_t *p, uint32_t x)
{
  uint32_t next = p->blk[x].next, prev = p->blk[x].prev;
  bool next_free = next != NIL && p->blk[next].free;
  bool prev_free = prev != NIL && p->blk[prev].free;
  if (next_free && !prev_free &&
      rekey_in_place(p, next, p->blk[next].size + p->blk[x].size, p->blk[x].addr)) {
    /* the free block above grows down over x where it stands */
    blk_t *n = &p->blk[next];
    n->addr = p->blk[x].addr;
    n->size += p->blk[x].size;
    n->prev = prev;
    if (prev != NIL)
      p->blk[prev].next = next;
    else
      range_of(p, x)->head = next;
    record_put(p, x);
    return;
  }
  if (prev_free && !next_free &&
      rekey_in_place(p, prev, p->blk[prev].size + p->blk[x].size, p->blk[prev].addr)) {
    p->blk[prev].size += p->blk[x].size;
    join_next_record(p, prev, x);
    return;
  }
  if (next_free) {
    free_remove(p, next);
    join_next(p, x);
  }
  if (prev != NIL && p->blk[prev].free) {
    free_remove(p, prev);
    join_next(p, prev);
    x = prev;
  }
  free_insert(p, x);
}

/* ---- choosing a block ------------------------------------------------- */

static bool is_frontier(const ol_pool_t *p, uint32_t x)
{
  return p->blk[x].next == NIL;
}

/* The smallest frontier that holds size bytes, lowest range first. */
static uint32_t frontier_fit(const ol_pool_t *p, uint64_t size)
{
  uint32_t best = NIL;
  for (uint32_t i = 0; i < p->nranges; i++) {
    uint32_t t = p->ranges[i].tail;
    if (p->blk[t].free && p->blk[t].size >= size &&
        (best == NIL || p->blk[t].size < p->blk[best].size))
      best = t;
  }
  return best;
}

static uint32_t grow_range(ol_pool_t *p, uint64_t size)
{
  uint64_t want = round_up(size, p->gran);
  if (want < size)
    return NIL;
  if (want < p->address_space)
    want = p->address_space;
  return range_add(p, want);
}

/* Whether the max-split rule lets block x serve size bytes, and whole. */
static bool rule_allows(const ol_pool_t *p, uint32_t x, uint64_t size, bool with_rule,
                        bool *whole)
{
  *whole = false;
  if (p->max_split == 0 || !with_rule || is_frontier(p, x) || p->blk[x].size < p->max_split)
    return true;
  if (size >= p->max_split && p->blk[x].size - size <= OL_POOL_OVERSIZE_SLACK) {
    *whole = true;
    return true;
  }
  return false;
}

/* Picks the free block for a request, where in it (*at) and whether to
 * take it whole; with_rule false: the max-split rule set aside.
 *
 * Best fit, amended for the cost of mapping. When the best fit would need
 * granules mapped, the next few candidates in (size, address) order and
 * the frontiers are weighed too, each at its start or, if that needs
 * mapping, at the start of a mapped run inside it that holds the request;
 * the candidate needing the fewest new granules wins, the best fit on a
 * tie. Without this, a training step that frees a large tensor in one
 * place and asks for it again where a slightly smaller hole is unmapped
 * ping-pongs: on the gpt2 trace, 1.5 GiB unmapped and mapped again every
 * step (~75 ms of driver time a step). Only the slow path pays: the first
 * candidate that needs no mapping ends the search, and the best fit is
 * that candidate nearly always. Why 64 (CANDIDATES): with 4, a job whose
 * sequence length changes every step (tests/data/llama_varlen) went on
 * mapping and unmapping at every length not seen for a while, 18518
 * granules mapped and 11093 unmapped in 16 steps; with 64 it maps 9774,
 * unmaps 2407, and nothing after its fifth step (more changed nothing). */
static uint32_t choose(ol_pool_t *p, uint64_t size, bool with_rule, bool *whole, uint64_t *at,
                       bool *mapped)
{
  *mapped = false;
  uint32_t best = NIL, seen[CANDIDATES];
  int nseen = 0;
  uint64_t best_need = UINT64_MAX, where;
  uint32_t x = best_fit(p, size);
  for (int i = 0; x != NIL && i < CANDIDATES; i++, x = next_in_order(p, x)) {
    bool w;
    seen[nseen++] = x;
    if (!rule_allows(p, x, size, with_rule, &w))
      continue;
    uint64_t need = w ? new_granules(p, range_of(p, x), p->blk[x].addr, p->blk[x].size)
                      : fit_in(p, x, size, &where);
    if (need < best_need) {
      best = x;
      best_need = need;
      *whole = w;
      *at = w ? p->blk[x].addr : where;
    }
    if (need == 0) {
      *mapped = true; /* the hot path: mapped memory, nothing to weigh */
      return best;
    }
  }
  /* a frontier that still has mapped memory (what the last step freed at
   * the top) is a candidate too, though the largest block */
  for (uint32_t i = 0; i < p->nranges && best_need != 0; i++) {
    uint32_t t = p->ranges[i].tail;
    bool w, again = false;
    for (int k = 0; k < nseen; k++)
      again |= seen[k] == t;
    if (again || !p->blk[t].free || p->blk[t].size < size ||
        !rule_allows(p, t, size, with_rule, &w))
      continue;
    uint64_t need = fit_in(p, t, size, &where);
    if (need < best_need) {
      best = t;
      best_need = need;
      *whole = false;
      *at = where;
    }
  }
  if (best != NIL)
    return best;
  *whole = false;
  x = p->max_split && with_rule ? frontier_fit(p, size) : NIL;
  if (x == NIL)
    x = grow_range(p, size);
  if (x == NIL)
    x = best_fit(p, size); /* last resort: split an oversize block */
  if (x != NIL)
    *at = p->blk[x].addr;
  return x;
}

/* Chooses, carves and maps a block: its record, or NIL with the pool as it
 * was (less what was released on the way). */
static uint32_t place(ol_pool_t *p, uint64_t size, bool with_rule)
{
  bool whole = false, mapped = false;
  uint64_t at = 0;
  uint32_t x = choose(p, size, with_rule, &whole, &at, &mapped);
  if (x == NIL)
    return NIL;
  x = carve(p, x, at, size, whole);
  if (!mapped && back_block(p, x) != 0) {
    coalesce(p, x);
    ol_pool_release(p, UINT64_MAX); /* what the failed attempt mapped */
    return NIL;
  }
  return x;
}

/* ---- the API ---------------------------------------------------------- */

static uint64_t round_size(uint64_t size)
{
  if (size == 0)
    return OL_POOL_ALIGN;
  return (size + OL_POOL_ALIGN - 1) & ~(uint64_t)(OL_POOL_ALIGN - 1);
}

int ol_pool_alloc(ol_pool_t *p, uint64_t size, uint64_t *addr)
{
  if (size > UINT64_MAX - OL_POOL_ALIGN)
    return -1;
  size = round_size(size);
  /* a new range needs a record, a carve two (below and above); then
   * nothing below fails for want of host memory */
  if (reserve_records(p, 3) != 0 || hash_reserve(p) != 0)
    return -1;
  uint32_t x = place(p, size, true);
  /* out of memory under the max-split rule (a whole oversize block, or a
   * frontier that shares no granule): the plain best fit may still fit */
  if (x == NIL && p->max_split)
    x = place(p, size, false);
  if (x == NIL)
    return -1;
  const blk_t *b = &p->blk[x];
  hash_put(p, x);
  p->clock += b->size;
  p->allocated += b->size;
  if (p->allocated > p->allocated_peak) {
    p->allocated_peak = p->allocated;
    p->peak_clock = p->clock;
  }
  p->counts.live_blocks++;
  *addr = b->addr;
  return 0;
}

/* Live block x leaves its granules now: they count as used until now. */
static void stamp_used(ol_pool_t *p, uint32_t x)
{
  range_t *r = range_of(p, x);
  if (!r->used_at)
    return; /* not kept: the free hook does no work for an option that is off */
  uint64_t lo = p->blk[x].addr - r->base, hi = lo + p->blk[x].size;
  for (uint64_t g = lo >> p->shift; g <= (hi - 1) >> p->shift; g++)
    r->used_at[g] = p->clock;
}

int ol_pool_free(ol_pool_t *p, uint64_t addr)
{
  uint32_t slot, x = hash_find(p, addr, &slot);
  if (x == NIL)
    return -1;
  hash_delete(p, slot);
  stamp_used(p, x);
  p->allocated -= p->blk[x].size;
  p->counts.live_blocks--;
  coalesce(p, x);
  return 0;
}

bool ol_pool_owns(const ol_pool_t *p, uint64_t addr)
{
  for (uint32_t i = 0; i < p->nranges; i++)
    if (addr - p->ranges[i].base < p->ranges[i].size)
      return true;
  return false;
}

uint64_t ol_pool_block_size(const ol_pool_t *p, uint64_t addr)
{
  uint32_t slot, x = hash_find(p, addr, &slot);
  return x == NIL ? 0 : p->blk[x].size;
}

/* The longest part of free block x inside mapped granules. */
static uint64_t largest_mapped_part(const ol_pool_t *p, uint32_t x)
{
  const range_t *r = range_of(p, x);
  uint64_t lo = p->blk[x].addr - r->base, hi = lo + p->blk[x].size, best = 0;
  uint64_t g1 = ((hi - 1) >> p->shift) + 1;
  if (g1 > r->top)
    g1 = r->top; /* nothing mapped above */
  for (uint64_t a = bit_next(r->mapped, lo >> p->shift, g1, true); a < g1;) {
    uint64_t b = bit_next(r->mapped, a, g1, false);
    uint64_t s = a << p->shift, e = b << p->shift;
    s = s > lo ? s : lo;
    e = e < hi ? e : hi;
    if (e - s > best)
      best = e - s;
    a = bit_next(r->mapped, b, g1, true);
  }
  return best;
}

void ol_pool_stats(const ol_pool_t *p, ol_policy_stats_t *out)
{
  uint64_t largest = 0;
  for (uint32_t i = 0; i < p->nranges; i++) {
    for (uint32_t x = p->ranges[i].head; x != NIL; x = p->blk[x].next) {
      if (p->blk[x].free) {
        uint64_t m = largest_mapped_part(p, x);
        largest = m > largest ? m : largest;
      }
    }
  }
  *out = (ol_policy_stats_t){
    .allocated = (int64_t)p->allocated,
    .allocated_peak = (int64_t)p->allocated_peak,
    .reserved = (int64_t)p->reserved,
    .reserved_peak = (int64_t)p->reserved_peak,
    .largest_free_block = (int64_t)largest,
    .free_reserved = (int64_t)(p->reserved - p->allocated),
    .segments = (int64_t)(p->reserved >> p->shift),
    /* one physical handle per extent (pool.h's backend contract) */
    .calls = {.creates = (int64_t)p->counts.map_calls,
              .maps = (int64_t)p->counts.map_calls,
              .unmaps = (int64_t)p->counts.unmap_calls,
              .releases = (int64_t)p->counts.unmap_calls},
  };
}

/* ---- self-check, for tests ------------------------------------------- */

/* Nodes in treap t, or -1 if it breaks an invariant: key order, heap order
 * of priorities, parent links, bin membership, the free flag. */
static long check_treap(const ol_pool_t *p, uint32_t t, uint32_t parent, uint32_t bin,
                        const blk_t *lo, const blk_t *hi)
{
  if (t == NIL)
    return 0;
  const blk_t *b = &p->blk[t];
  if (b->parent != parent || !b->free || bin_of(b->size) != bin ||
      (lo && !key_less(lo, b)) || (hi && !key_less(b, hi)) ||
      (parent != NIL && prio(t) > prio(parent)))
    return -1;
  long l = check_treap(p, b->child[0], t, bin, lo, b);
  long r = check_treap(p, b->child[1], t, bin, b, hi);
  return l < 0 || r < 0 ? -1 : l + r + 1;
}

/* Every mapped run is cut into extents of at most a unit, none crossing a
 * unit's boundary, and every extent starts on a mapped granule. */
static bool check_extents(const ol_pool_t *p, const range_t *r)
{
  uint64_t n = r->size >> p->shift;
  for (uint64_t g = bit_next(r->starts, 0, n, true); g < n; g = bit_next(r->starts, g + 1, n, true))
    if (!bit_get(r->mapped, g))
      return false;
  for (uint64_t a = bit_next(r->mapped, 0, n, true); a < n;) {
    uint64_t b = bit_next(r->mapped, a, n, false);
    for (uint64_t s = a; s < b;) {
      uint64_t e = s < r->top ? extent_end(p, r, s) : s + 1;
      if (!bit_get(r->starts, s) || e - s > p->unit || (e - 1) / p->unit != s / p->unit)
        return false;
      s = e;
    }
    a = bit_next(r->mapped, b, n, true);
  }
  return true;
}

/* Walks one range's blocks: contiguous, linked both ways, no two free
 * neighbours, every granule a live block touches mapped. */
static bool check_range(const ol_pool_t *p, uint32_t i, long *nfree, long *nlive,
                        uint64_t *live_bytes)
{
  const range_t *r = &p->ranges[i];
  uint64_t at = r->base;
  uint32_t prev = NIL;
  for (uint32_t x = r->head; x != NIL; prev = x, x = p->blk[x].next) {
    const blk_t *b = &p->blk[x];
    if (b->addr != at || b->prev != prev || b->range != i || b->size == 0 ||
        (b->free && prev != NIL && p->blk[prev].free))
      return false;
    uint64_t lo = b->addr - r->base, g1 = ((lo + b->size - 1) >> p->shift) + 1;
    if (!b->free && (g1 > r->top || bit_next(r->mapped, lo >> p->shift, g1, false) != g1))
      return false;
    *nfree += b->free;
    *nlive += !b->free;
    *live_bytes += b->free ? 0 : b->size;
    at += b->size;
  }
  return prev == r->tail && at == r->base + r->size &&
         (r->top == 0 || bit_get(r->mapped, r->top - 1)) && check_extents(p, r);
}

bool ol_pool_check(const ol_pool_t *p)
{
  long nfree = 0, nlive = 0, in_bins = 0;
  uint64_t live_bytes = 0, mapped = 0;
  for (uint32_t i = 0; i < p->nranges; i++) {
    if (!check_range(p, i, &nfree, &nlive, &live_bytes))
      return false;
    uint64_t n = p->ranges[i].size >> p->shift;
    mapped += (n - count_clear(p->ranges[i].mapped, 0, n)) << p->shift;
  }
  for (uint32_t bin = 0; bin < NBINS; bin++) {
    bool marked = (p->binmap[bin >> 6] >> (bin & 63)) & 1;
    long n = check_treap(p, p->root[bin], NIL, bin, NULL, NULL);
    if (n < 0 || marked != (n > 0) ||
        p->first[bin] != (n ? treap_first(p->blk, p->root[bin]) : NIL))
      return false;
    in_bins += n;
  }
  return in_bins == nfree && (uint64_t)nfree == p->counts.free_blocks &&
         (uint64_t)nlive == p->counts.live_blocks && nlive == (long)p->hcount &&
         live_bytes == p->allocated && mapped == p->reserved;
}

void ol_pool_counts(const ol_pool_t *p, ol_pool_counts_t *out)
{
  *out = p->counts;
}

ol_pool_t *ol_pool_create(const ol_backend_t *backend, const ol_pool_config_t *config)
{
  uint64_t g = backend->granularity;
  if (g < OL_POOL_ALIGN || (g & (g - 1)) || !backend->reserve || !backend->unreserve ||
      !backend->map || !backend->unmap)
    return NULL;
  void *(*host)(void *, size_t) = config->host_realloc ? config->host_realloc : default_realloc;
  ol_pool_t *p = host(NULL, sizeof *p);
  if (!p)
    return NULL;
  memset(p, 0, sizeof *p);
  p->be = *backend;
  p->gran = g;
  p->shift = (unsigned)__builtin_ctzll(g);
  p->address_space = round_up(config->address_space, g);
  p->max_split = config->max_split_size;
  p->unit = config->map_unit ? config->map_unit : 1;
  p->keep_mapped = config->keep_mapped;
  p->capacity = config->capacity;
  p->keep_used = config->keep_used;
  p->host_realloc = host;
  p->spare = NIL;
  for (uint32_t i = 0; i < NBINS; i++)
    p->root[i] = p->first[i] = NIL;
  if (p->address_space && range_add(p, p->address_space) == NIL) {
    ol_pool_destroy(p);
    return NULL;
  }
  return p;
}

void ol_pool_destroy(ol_pool_t *p)
{
  if (!p)
    return;
  for (uint32_t i = 0; i < p->nranges; i++) {
    range_t *r = &p->ranges[i];
    while (r->top > 0) {
      uint64_t s = extent_start(p, r, r->top - 1);
      unmap_extents(p, r, s, extent_end(p, r, s), 1);
    }
    p->be.unreserve(p->be.ctx, r->base, r->size);
    host_free(p, r->mapped);
    host_free(p, r->starts);
    host_free(p, r->used_at);
  }
  host_free(p, p->ranges);
  host_free(p, p->blk);
  host_free(p, p->hslot);
  host_free(p, p);
}
