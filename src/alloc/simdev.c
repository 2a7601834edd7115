/* simdev.c: the in-process simulated device (see simdev.h). Each reserved
 * range keeps a bit per granule so that every map and unmap is checked
 * against what is already mapped. */
#include "simdev.h"

#include <stdbool.h>
#include <stdlib.h>

/* Far from zero and from anything else, so a stray use stands out. */
#define SIM_FIRST_BASE 0x100000000000ull

typedef struct sim_range {
  uint64_t base, size;
  uint64_t *bits;
  uint64_t mapped; /* granules */
} sim_range_t;

struct ol_simdev {
  uint64_t capacity, gran, next_base;
  sim_range_t *ranges;
  size_t nranges, cap;
  uint64_t fail_maps;
  bool fail_reserves;
  ol_simdev_counts_t counts;
};

static sim_range_t *find_range(const ol_simdev_t *d, uint64_t addr, uint64_t size)
{
  for (size_t i = 0; i < d->nranges; i++) {
    sim_range_t *r = &d->ranges[i];
    if (addr >= r->base && addr - r->base < r->size && size <= r->size - (addr - r->base))
      return r;
  }
  return NULL;
}

/* The bits of word w that fall in [g0, g1). */
static uint64_t word_mask(uint64_t w, uint64_t g0, uint64_t g1)
{
  uint64_t lo = w * 64 > g0 ? 0 : g0 - w * 64;
  uint64_t hi = g1 - w * 64 >= 64 ? 64 : g1 - w * 64;
  uint64_t upto = hi == 64 ? ~0ull : (1ull << hi) - 1;
  return upto & ~((1ull << lo) - 1);
}

/* Whether every granule of [g0, g1) in r has its bit equal to on. */
static bool all_bits(const sim_range_t *r, uint64_t g0, uint64_t g1, bool on)
{
  for (uint64_t w = g0 / 64; w * 64 < g1; w++) {
    uint64_t m = word_mask(w, g0, g1);
    if ((r->bits[w] & m) != (on ? m : 0))
      return false;
  }
  return true;
}

static void set_bits(sim_range_t *r, uint64_t g0, uint64_t g1, bool on)
{
  for (uint64_t w = g0 / 64; w * 64 < g1; w++) {
    uint64_t m = word_mask(w, g0, g1);
    r->bits[w] = on ? r->bits[w] | m : r->bits[w] & ~m;
  }
}

static int sim_reserve(void *ctx, uint64_t size, uint64_t *base)
{
  ol_simdev_t *d = ctx;
  d->counts.reserve_calls++;
  if (d->fail_reserves || size == 0 || size % d->gran)
    return -1;
  if (d->nranges == d->cap) {
    size_t cap = d->cap ? d->cap * 2 : 4;
    sim_range_t *grown = realloc(d->ranges, cap * sizeof *grown);
    if (!grown)
      return -1;
    d->ranges = grown;
    d->cap = cap;
  }
  uint64_t granules = size / d->gran;
  uint64_t *bits = calloc((granules + 63) / 64, sizeof *bits);
  if (!bits)
    return -1;
  /* a granule of unreserved space between ranges, so that no two ranges
   * look contiguous */
  d->ranges[d->nranges++] = (sim_range_t){.base = d->next_base, .size = size, .bits = bits};
  *base = d->next_base;
  d->next_base += size + d->gran;
  d->counts.reserved_va += size;
  return 0;
}

static void sim_unreserve(void *ctx, uint64_t base, uint64_t size)
{
  ol_simdev_t *d = ctx;
  d->counts.unreserve_calls++;
  for (size_t i = 0; i < d->nranges; i++) {
    sim_range_t *r = &d->ranges[i];
    if (r->base != base || r->size != size)
      continue;
    if (r->mapped)
      d->counts.misuse++;
    d->counts.mapped -= r->mapped * d->gran;
    d->counts.reserved_va -= size;
    free(r->bits);
    d->ranges[i] = d->ranges[--d->nranges];
    return;
  }
  d->counts.misuse++;
}

static int sim_map(void *ctx, uint64_t addr, uint64_t size)
{
  ol_simdev_t *d = ctx;
  d->counts.map_calls++;
  sim_range_t *r = find_range(d, addr, size);
  if (!r || size == 0 || addr % d->gran || size % d->gran) {
    d->counts.misuse++;
    return -1;
  }
  uint64_t g0 = (addr - r->base) / d->gran, g1 = g0 + size / d->gran;
  if (!all_bits(r, g0, g1, false)) {
    d->counts.misuse++;
    return -1;
  }
  if (d->fail_maps || size > d->capacity || d->counts.mapped > d->capacity - size) {
    if (d->fail_maps)
      d->fail_maps--;
    d->counts.failed_maps++;
    return -1;
  }
  set_bits(r, g0, g1, true);
  r->mapped += g1 - g0;
  d->counts.mapped += size;
  if (d->counts.mapped > d->counts.mapped_peak)
    d->counts.mapped_peak = d->counts.mapped;
  return 0;
}

static void sim_unmap(void *ctx, uint64_t addr, uint64_t size)
{
  ol_simdev_t *d = ctx;
  d->counts.unmap_calls++;
  sim_range_t *r = find_range(d, addr, size);
  if (!r || size == 0 || addr % d->gran || size % d->gran) {
    d->counts.misuse++;
    return;
  }
  uint64_t g0 = (addr - r->base) / d->gran, g1 = g0 + size / d->gran;
  if (!all_bits(r, g0, g1, true)) {
    d->counts.misuse++;
    return;
  }
  set_bits(r, g0, g1, false);
  r->mapped -= g1 - g0;
  d->counts.mapped -= size;
}

ol_simdev_t *ol_simdev_create(uint64_t capacity, uint64_t granularity)
{
  if (granularity == 0 || (granularity & (granularity - 1)))
    return NULL;
  ol_simdev_t *d = calloc(1, sizeof *d);
  if (!d)
    return NULL;
  d->capacity = capacity;
  d->gran = granularity;
  d->next_base = SIM_FIRST_BASE;
  return d;
}

void ol_simdev_destroy(ol_simdev_t *d)
{
  if (!d)
    return;
  for (size_t i = 0; i < d->nranges; i++)
    free(d->ranges[i].bits);
  free(d->ranges);
  free(d);
}

void ol_simdev_backend(ol_simdev_t *d, ol_backend_t *out)
{
  *out = (ol_backend_t){.ctx = d, .granularity = d->gran, .reserve = sim_reserve,
                        .unreserve = sim_unreserve, .map = sim_map, .unmap = sim_unmap};
}

void ol_simdev_counts(const ol_simdev_t *d, ol_simdev_counts_t *out)
{
  *out = d->counts;
}

void ol_simdev_fail_maps(ol_simdev_t *d, uint64_t n)
{
  d->fail_maps = n;
}

void ol_simdev_fail_reserves(ol_simdev_t *d, bool fail)
{
  d->fail_reserves = fail;
}

void ol_simdev_set_capacity(ol_simdev_t *d, uint64_t capacity)
{
  d->capacity = capacity;
}

bool ol_simdev_is_mapped(const ol_simdev_t *d, uint64_t addr)
{
  sim_range_t *r = find_range(d, addr, 1);
  if (!r)
    return false;
  uint64_t g = (addr - r->base) / d->gran;
  return (r->bits[g / 64] >> (g % 64)) & 1;
}
