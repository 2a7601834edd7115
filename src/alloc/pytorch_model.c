/* pytorch_model.c: the "pytorch" and "pytorch-expandable" policies, a model
 * of PyTorch's caching allocator (see pytorch_model.h for what it covers).
 * The rules follow c10/cuda/CUDACachingAllocator.cpp of torch 2.x; each is
 * restated in a comment where it is applied. Written from a reading of
 * that file's behaviour, not from its code.
 *
 * Data: blocks are the pieces of a segment, doubly linked in address order.
 * Each pool keeps its free blocks in an array sorted by (stream, size,
 * address), so best fit is a binary search; expandable segments also keep
 * their unmapped address ranges sorted by (stream, address). Free lists stay
 * short (hundreds of blocks), so a sorted array beats a tree here. Live
 * blocks are found by address through uthash. Block records come from slabs
 * and are recycled, so the hot path allocates no host memory once warm.
 *
 * This model serves offline replay only: if the host itself runs out of
 * memory the process stops with a message rather than guess. */
#include "pytorch_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define uthash_fatal(msg) host_out_of_memory()
#include <uthash.h>

#define NO_LIMIT UINT64_MAX
#define VA_START ((uint64_t)0x7f0000000000)
#define MAX_VA_DEVICE ((uint64_t)1 << 50)
/* The largest device modelled (1 EiB, 2^60; no device comes near): a larger
 * --capacity is modelled as this, so that no size the model computes
 * (rounded up, 9/8 of it, a segment's end) can pass 2^64. */
#define MAX_CAPACITY ((uint64_t)1 << 60)
#define SLAB_BLOCKS 1024

typedef struct pool pool_t;
typedef struct segment segment_t;

typedef struct block {
  uint64_t ptr, size, stream;
  struct block *prev, *next; /* neighbours in the same segment */
  pool_t *pool;
  segment_t *es;  /* the expandable segment it lies in, or NULL */
  bool allocated;
  bool mapped;    /* false only for unmapped ranges of expandable segments */
  UT_hash_handle hh; /* in the live table while allocated */
} block_t;

/* Blocks sorted by (stream, size, ptr) or, for unmapped ranges, (stream, ptr). */
typedef struct block_set {
  block_t **v;
  size_t n, cap;
  bool by_size;
} block_set_t;

struct pool {
  block_set_t blocks;   /* free, mapped */
  block_set_t unmapped; /* expandable segments' address space without pages */
  bool is_small;
};

/* An expandable segment: a reserved address range mapped page by page. */
struct segment {
  uint64_t base, size, page;
  segment_t *next_segment;
};

typedef struct slab {
  struct slab *next;
  block_t blocks[SLAB_BLOCKS];
} slab_t;

struct ol_policy {
  uint64_t capacity, max_split;
  bool expandable;
  pool_t small, large;
  block_t *live;      /* allocated blocks by ptr, and the sentinel */
  /* Always in the live table, so that uthash never frees and reallocates
   * its buckets when the last live block goes (an alloc/free pair would
   * otherwise cost two host mallocs). Its address 0 is never handed out. */
  block_t sentinel;
  block_t *spare;     /* recycled records, linked through next */
  slab_t *slabs;
  segment_t *segments;
  uint64_t next_va;
  int64_t allocated, allocated_peak, reserved, reserved_peak, segment_count;
  ol_policy_calls_t calls;
  block_t **scratch;  /* release_blocks' list of expandable blocks */
  size_t scratch_cap;
};

static void host_out_of_memory(void) __attribute__((noreturn));
static void host_out_of_memory(void)
{
  fputs("oomlens: out of host memory in the PyTorch allocator model\n", stderr);
  exit(1);
}

static void *grow(void *p, size_t *cap, size_t elem)
{
  size_t want = *cap ? *cap * 2 : 64;
  void *q = realloc(p, want * elem);
  if (!q)
    host_out_of_memory();
  *cap = want;
  return q;
}

/* ---- PyTorch's size rules -------------------------------------------- */

/* round_size(): at least 512 B, then up to a multiple of 512 B (the
 * roundup_power2_divisions option is not modelled: off by default). */
uint64_t ol_pt_round_size(uint64_t size)
{
  if (size < OL_PT_MIN_BLOCK)
    return OL_PT_MIN_BLOCK;
  return (size + OL_PT_MIN_BLOCK - 1) / OL_PT_MIN_BLOCK * OL_PT_MIN_BLOCK;
}

/* get_allocation_size(): what one cudaMalloc asks for a rounded request.
 * Small requests share 2 MiB segments, 1-10 MiB ones share 20 MiB
 * segments, larger ones get their size rounded up to 2 MiB. */
uint64_t ol_pt_segment_size(uint64_t size)
{
  if (size <= OL_PT_SMALL_SIZE)
    return OL_PT_SMALL_BUFFER;
  if (size < OL_PT_MIN_LARGE_ALLOC)
    return OL_PT_LARGE_BUFFER;
  return (size + OL_PT_ROUND_LARGE - 1) / OL_PT_ROUND_LARGE * OL_PT_ROUND_LARGE;
}

/* ---- block records ----------------------------------------------------- */

static block_t *new_block(ol_policy_t *m, uint64_t ptr, uint64_t size, uint64_t stream,
                          pool_t *pool)
{
  if (!m->spare) {
    slab_t *slab = malloc(sizeof *slab);
    if (!slab)
      host_out_of_memory();
    slab->next = m->slabs;
    m->slabs = slab;
    for (size_t i = 0; i < SLAB_BLOCKS; i++) {
      slab->blocks[i].next = m->spare;
      m->spare = &slab->blocks[i];
    }
  }
  block_t *b = m->spare;
  m->spare = b->next;
  *b = (block_t){.ptr = ptr, .size = size, .stream = stream, .pool = pool, .mapped = true};
  return b;
}

static void drop_block(ol_policy_t *m, block_t *b)
{
  b->next = m->spare;
  m->spare = b;
}

/* ---- sorted block sets ------------------------------------------------- */

/* <0, 0, >0 as block b sorts before, at, after the key. */
static int compare(const block_set_t *set, const block_t *b, uint64_t stream, uint64_t size,
                   uint64_t ptr)
{
  if (b->stream != stream)
    return b->stream < stream ? -1 : 1;
  if (set->by_size && b->size != size)
    return b->size < size ? -1 : 1;
  if (b->ptr != ptr)
    return b->ptr < ptr ? -1 : 1;
  return 0;
}

/* Index of the first block not before the key. */
static size_t lower_bound(const block_set_t *set, uint64_t stream, uint64_t size, uint64_t ptr)
{
  size_t lo = 0, hi = set->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (compare(set, set->v[mid], stream, size, ptr) < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static void set_insert(block_set_t *set, block_t *b)
{
  if (set->n == set->cap)
    set->v = grow(set->v, &set->cap, sizeof *set->v);
  size_t i = lower_bound(set, b->stream, b->size, b->ptr);
  memmove(set->v + i + 1, set->v + i, (set->n - i) * sizeof *set->v);
  set->v[i] = b;
  set->n++;
}

static void set_erase_at(block_set_t *set, size_t i)
{
  memmove(set->v + i, set->v + i + 1, (set->n - i - 1) * sizeof *set->v);
  set->n--;
}

static void set_erase(block_set_t *set, block_t *b)
{
  size_t i = lower_bound(set, b->stream, b->size, b->ptr);
  if (i < set->n && set->v[i] == b)
    set_erase_at(set, i);
}

/* ---- accounting --------------------------------------------------------- */

/* Expandable segments map page by page, one handle each (segments counts
 * pages then); the default asks cudaMalloc for one segment. */
static void reserve(ol_policy_t *m, uint64_t bytes, int64_t segments)
{
  if (m->expandable) {
    m->calls.creates += segments;
    m->calls.maps += segments;
  } else {
    m->calls.mallocs++;
  }
  m->reserved += (int64_t)bytes;
  m->segment_count += segments;
  if (m->reserved > m->reserved_peak)
    m->reserved_peak = m->reserved;
}

static void unreserve(ol_policy_t *m, uint64_t bytes, int64_t segments)
{
  if (m->expandable) {
    m->calls.unmaps += segments;
    m->calls.releases += segments;
  } else {
    m->calls.frees++;
  }
  m->reserved -= (int64_t)bytes;
  m->segment_count -= segments;
}

/* The cudaMalloc (or cuMemCreate) cap: reserved memory never passes the
 * capacity, as set_per_process_memory_fraction's check does. */
static bool fits(const ol_policy_t *m, uint64_t bytes)
{
  return (uint64_t)m->reserved <= m->capacity && bytes <= m->capacity - (uint64_t)m->reserved;
}

/* Segments start 2 MiB aligned, as cudaMalloc's large allocations do.
 * Addresses are never reused, so a trace of more than 2^64 - VA_START
 * bytes of segments (16 EiB: only a crafted one) starts again at VA_START
 * rather than wrap through zero; a segment still held from the first
 * round could then share an address with a new one, which mixes up the
 * two blocks' figures, never the model's memory. */
static uint64_t take_va(ol_policy_t *m, uint64_t size)
{
  uint64_t bytes = (size + OL_PT_ROUND_LARGE - 1) / OL_PT_ROUND_LARGE * OL_PT_ROUND_LARGE;
  if (bytes > UINT64_MAX - m->next_va)
    m->next_va = VA_START;
  uint64_t ptr = m->next_va;
  m->next_va += bytes;
  return ptr;
}

/* ---- merging and splitting --------------------------------------------- */

static void splice(block_t *b, block_t *before, block_t *after)
{
  b->prev = before;
  b->next = after;
  if (before)
    before->next = b;
  if (after)
    after->prev = b;
}

/* try_merge_blocks(): dst absorbs a free neighbour of the same kind (mapped
 * or not). dst is in no set while this runs, since its key changes. */
static void try_merge(ol_policy_t *m, block_t *dst, block_t *src)
{
  if (!src || src->allocated || src->mapped != dst->mapped)
    return;
  set_erase(src->mapped ? &src->pool->blocks : &src->pool->unmapped, src);
  if (dst->prev == src) {
    dst->ptr = src->ptr;
    dst->prev = src->prev;
    if (dst->prev)
      dst->prev->next = dst;
  } else {
    dst->next = src->next;
    if (dst->next)
      dst->next->prev = dst;
  }
  dst->size += src->size;
  drop_block(m, src);
}

/* should_split(): the small pool, and every pool under expandable
 * segments, splits off any remainder of 512 B or more; the large pool
 * splits only below max_split_size and for a remainder over 1 MiB. */
static bool should_split(const ol_policy_t *m, const block_t *b, uint64_t size)
{
  uint64_t remaining = b->size - size;
  if (b->pool->is_small || m->expandable)
    return remaining >= OL_PT_MIN_BLOCK;
  return size < m->max_split && remaining > OL_PT_SMALL_SIZE;
}

/* alloc_found_block(): the front of the block is handed out, the rest
 * goes back to the pool. */
static block_t *take_block(ol_policy_t *m, block_t *b, uint64_t size)
{
  if (should_split(m, b, size)) {
    block_t *front = new_block(m, b->ptr, size, b->stream, b->pool);
    front->es = b->es;
    splice(front, b->prev, b);
    b->ptr += size;
    b->size -= size;
    set_insert(&b->pool->blocks, b);
    b = front;
  }
  b->allocated = true;
  HASH_ADD(hh, m->live, ptr, sizeof b->ptr, b);
  m->allocated += (int64_t)b->size;
  if (m->allocated > m->allocated_peak)
    m->allocated_peak = m->allocated;
  return b;
}

/* ---- best fit ---------------------------------------------------------- */

/* What a free block of an expandable segment could grow to: itself plus
 * the unmapped range right after it. */
static uint64_t expandable_size(const block_t *b)
{
  return b->size + (b->next && !b->next->mapped ? b->next->size : 0);
}

/* get_free_block(): the smallest free block of the stream that fits, by
 * (size, address). Under expandable segments a block that could grow is
 * passed over for a later one that could grow less. max_split_size: a
 * request below it never takes a block at or above it; a request at or
 * above it takes a cached block only if that is less than 20 MiB larger.
 * Either refusal ends the search (the caller makes a new segment). */
static block_t *get_free_block(ol_policy_t *m, pool_t *pool, uint64_t size, uint64_t stream)
{
  block_set_t *set = &pool->blocks;
  size_t i = lower_bound(set, stream, size, 0);
  if (i == set->n || set->v[i]->stream != stream)
    return NULL;
  if (set->v[i]->es) {
    while (set->v[i]->es && i + 1 < set->n && set->v[i + 1]->stream == stream &&
           expandable_size(set->v[i + 1]) < expandable_size(set->v[i]))
      i++;
  }
  block_t *b = set->v[i];
  if (size < m->max_split && b->size >= m->max_split)
    return NULL;
  if (size >= m->max_split && b->size >= size + OL_PT_LARGE_BUFFER)
    return NULL;
  set_erase_at(set, i);
  return b;
}

/* ---- expandable segments ------------------------------------------------ */

static uint64_t page_of(const pool_t *pool)
{
  return pool->is_small ? OL_PT_SMALL_BUFFER : OL_PT_LARGE_BUFFER;
}

/* A new segment reserves address space for 9/8 of the device, as PyTorch
 * does, all of it unmapped. Capacities past 1 PiB reserve as for 1 PiB, so
 * that simulated addresses last; a request larger than that (on such a
 * device) gets a segment its own size, where PyTorch's 9/8 would hold it. */
static block_t *new_segment(ol_policy_t *m, pool_t *pool, uint64_t size, uint64_t stream)
{
  segment_t *es = malloc(sizeof *es);
  if (!es)
    host_out_of_memory();
  es->page = page_of(pool);
  uint64_t device = m->capacity < MAX_VA_DEVICE ? m->capacity : MAX_VA_DEVICE;
  uint64_t want = device + device / 8;
  if (want < size)
    want = size; /* at most MAX_CAPACITY: no overflow below */
  es->size = (want / es->page + 1) * es->page;
  es->base = take_va(m, es->size);
  es->next_segment = m->segments;
  m->segments = es;
  block_t *b = new_block(m, es->base, es->size, stream, pool);
  b->es = es;
  b->mapped = false;
  set_insert(&pool->unmapped, b);
  return b;
}

static bool allocatable(const block_t *b)
{
  return b && !b->allocated;
}

/* Whether free and unmapped blocks from b on add up to size. */
static bool has_room(const block_t *b, uint64_t size)
{
  uint64_t bytes = 0;
  while (bytes < size && allocatable(b)) {
    bytes += b->size;
    b = b->next;
  }
  return bytes >= size;
}

/* find_expandable_block(): the lowest unmapped range of the stream (with
 * the free block just before it) that has room, or a new segment. */
static block_t *find_expandable(ol_policy_t *m, pool_t *pool, uint64_t size, uint64_t stream)
{
  block_set_t *set = &pool->unmapped;
  for (size_t i = lower_bound(set, stream, 0, 0); i < set->n && set->v[i]->stream == stream;
       i++) {
    block_t *c = set->v[i];
    if (allocatable(c->prev))
      c = c->prev;
    if (has_room(c, size))
      return c;
  }
  return new_segment(m, pool, size, stream);
}

/* map_block(): maps whole pages at the front of an unmapped range to cover
 * size bytes; false when the device cannot hold them. */
static bool map_block(ol_policy_t *m, block_t *b, uint64_t size)
{
  uint64_t page = b->es->page;
  uint64_t pages = (size + page - 1) / page;
  uint64_t bytes = pages * page;
  if (!fits(m, bytes))
    return false;
  pool_t *pool = b->pool;
  set_erase(&pool->unmapped, b);
  b->mapped = true;
  if (bytes < b->size) {
    block_t *rest = new_block(m, b->ptr + bytes, b->size - bytes, b->stream, pool);
    rest->es = b->es;
    rest->mapped = false;
    splice(rest, b, b->next);
    set_insert(&pool->unmapped, rest);
    b->size = bytes;
  }
  try_merge(m, b, b->prev);
  try_merge(m, b, b->next);
  set_insert(&pool->blocks, b);
  reserve(m, bytes, (int64_t)pages);
  return true;
}

/* try_allocate_expandable_block(): maps pages until one free block of the
 * stream holds size bytes. */
static block_t *alloc_expandable(ol_policy_t *m, pool_t *pool, uint64_t size, uint64_t stream)
{
  block_t *c = find_expandable(m, pool, size, stream);
  if (!c->mapped && !map_block(m, c, c->size < size ? c->size : size))
    return NULL;
  while (c->size < size) {
    block_t *next = c->next; /* unmapped: free neighbours are always merged */
    uint64_t need = size - c->size;
    if (!map_block(m, next, next->size < need ? next->size : need))
      return NULL;
    c = next; /* it absorbed c */
  }
  set_erase(&pool->blocks, c);
  return c;
}

/* unmap_block(): gives back the pages wholly inside a free block. */
static void unmap_block(ol_policy_t *m, block_t *b)
{
  segment_t *es = b->es;
  uint64_t first = (b->ptr - es->base + es->page - 1) / es->page;
  uint64_t last = (b->ptr + b->size - es->base) / es->page;
  if (first >= last)
    return;
  pool_t *pool = b->pool;
  set_erase(&pool->blocks, b);
  uint64_t start = es->base + first * es->page, bytes = (last - first) * es->page;
  if (start > b->ptr) {
    block_t *before = new_block(m, b->ptr, start - b->ptr, b->stream, pool);
    before->es = es;
    splice(before, b->prev, b);
    set_insert(&pool->blocks, before);
  }
  if (b->ptr + b->size > start + bytes) {
    block_t *after = new_block(m, start + bytes, b->ptr + b->size - start - bytes, b->stream, pool);
    after->es = es;
    splice(after, b, b->next);
    set_insert(&pool->blocks, after);
  }
  b->ptr = start;
  b->size = bytes;
  b->mapped = false;
  try_merge(m, b, b->prev);
  try_merge(m, b, b->next);
  set_insert(&pool->unmapped, b);
  unreserve(m, bytes, (int64_t)(last - first));
}

static void release_segment(ol_policy_t *m, block_t *b)
{
  set_erase(&b->pool->unmapped, b);
  segment_t **link = &m->segments;
  while (*link && *link != b->es)
    link = &(*link)->next_segment;
  if (*link) {
    *link = b->es->next_segment;
    free(b->es);
  }
  drop_block(m, b);
}

/* ---- segments and their release ---------------------------------------- */

/* alloc_block(): a new cudaMalloc'd segment, or pages mapped onto an
 * expandable one. The cap is checked against the segment size first, as
 * PyTorch checks its memory fraction before calling the driver. */
static block_t *alloc_block(ol_policy_t *m, pool_t *pool, uint64_t size, uint64_t stream)
{
  uint64_t alloc_size = ol_pt_segment_size(size);
  if (!fits(m, alloc_size))
    return NULL;
  if (m->expandable)
    return alloc_expandable(m, pool, size, stream);
  block_t *b = new_block(m, take_va(m, alloc_size), alloc_size, stream, pool);
  reserve(m, alloc_size, 1);
  return b;
}

static void release_block(ol_policy_t *m, size_t index, block_set_t *set)
{
  block_t *b = set->v[index];
  set_erase_at(set, index);
  unreserve(m, b->size, 1);
  drop_block(m, b);
}

static bool whole_segment(const block_t *b)
{
  return !b->prev && !b->next;
}

/* release_available_cached_blocks(): with max_split_size set, frees the
 * smallest cached oversize segment that covers the request, else the
 * largest ones until they add up to it. Split blocks are skipped: only a
 * whole segment can be given back. */
static bool release_available(ol_policy_t *m, pool_t *pool, uint64_t size, uint64_t stream)
{
  if (m->max_split == NO_LIMIT || m->expandable)
    return false;
  block_set_t *set = &pool->blocks;
  uint64_t key = size < m->max_split ? m->max_split : size;
  size_t i = lower_bound(set, stream, key, 0);
  if (i < set->n && set->v[i]->stream == stream) {
    if (!whole_segment(set->v[i]))
      return false;
    release_block(m, i, set);
    return true;
  }
  uint64_t released = 0;
  while (i > 0 && released < key) {
    block_t *b = set->v[--i];
    if (b->size < m->max_split || b->stream != stream || !whole_segment(b))
      break;
    released += b->size;
    release_block(m, i, set);
  }
  return released >= key;
}

/* release_blocks(): frees every whole cached segment of the pool and
 * unmaps the free pages of expandable ones (dropping a segment that ends
 * up all unmapped). */
static void release_blocks(ol_policy_t *m, pool_t *pool)
{
  block_set_t *set = &pool->blocks;
  size_t listed = 0;
  for (size_t i = set->n; i-- > 0;) {
    block_t *b = set->v[i];
    if (b->es) {
      if (listed == m->scratch_cap)
        m->scratch = grow(m->scratch, &m->scratch_cap, sizeof *m->scratch);
      m->scratch[listed++] = b;
    } else if (whole_segment(b)) {
      release_block(m, i, set);
    }
  }
  for (size_t k = 0; k < listed; k++) {
    block_t *b = m->scratch[k];
    unmap_block(m, b);
    if (!b->mapped && whole_segment(b))
      release_segment(m, b);
  }
}

/* release_cached_blocks(): what PyTorch does before its last try. */
static void release_cached(ol_policy_t *m)
{
  release_blocks(m, &m->large);
  release_blocks(m, &m->small);
}

/* ---- the policy --------------------------------------------------------- */

static int model_alloc(ol_policy_t *m, uint64_t request, uint64_t stream, uint64_t *addr)
{
  if (request > m->capacity)
    return -1; /* and the rounding below cannot overflow */
  uint64_t size = ol_pt_round_size(request);
  pool_t *pool = size <= OL_PT_SMALL_SIZE ? &m->small : &m->large;
  block_t *b = get_free_block(m, pool, size, stream);
  if (!b)
    b = alloc_block(m, pool, size, stream);
  if (!b && release_available(m, pool, size, stream))
    b = alloc_block(m, pool, size, stream);
  if (!b) {
    release_cached(m);
    b = alloc_block(m, pool, size, stream);
  }
  if (!b)
    return -1;
  *addr = take_block(m, b, size)->ptr;
  return 0;
}

/* free_block(): the block merges with free neighbours and goes back to its
 * pool; segments stay cached until a failed allocation releases them. */
static void model_free(ol_policy_t *m, uint64_t addr)
{
  block_t *b;
  HASH_FIND(hh, m->live, &addr, sizeof addr, b);
  if (!b || b == &m->sentinel)
    return;
  HASH_DEL(m->live, b);
  b->allocated = false;
  m->allocated -= (int64_t)b->size;
  try_merge(m, b, b->prev);
  try_merge(m, b, b->next);
  set_insert(&b->pool->blocks, b);
}

static uint64_t largest_in(const block_set_t *set)
{
  uint64_t largest = 0;
  for (size_t i = 0; i < set->n; i++)
    if (set->v[i]->size > largest)
      largest = set->v[i]->size;
  return largest;
}

static void model_stats(const ol_policy_t *m, ol_policy_stats_t *out)
{
  uint64_t small = largest_in(&m->small.blocks), large = largest_in(&m->large.blocks);
  *out = (ol_policy_stats_t){
    .allocated = m->allocated,
    .allocated_peak = m->allocated_peak,
    .reserved = m->reserved,
    .reserved_peak = m->reserved_peak,
    .largest_free_block = (int64_t)(small > large ? small : large),
    .free_reserved = m->reserved - m->allocated,
    .segments = m->segment_count,
    .calls = m->calls,
  };
}

static ol_policy_t *create(const ol_policy_options_t *options, bool expandable)
{
  ol_policy_t *m = calloc(1, sizeof *m);
  if (!m)
    return NULL;
  m->capacity = options->capacity < MAX_CAPACITY ? options->capacity : MAX_CAPACITY;
  m->max_split = options->max_split_size ? options->max_split_size : NO_LIMIT;
  m->expandable = expandable;
  m->small = (pool_t){.blocks.by_size = true, .is_small = true};
  m->large = (pool_t){.blocks.by_size = true};
  m->next_va = VA_START;
  HASH_ADD(hh, m->live, ptr, sizeof m->sentinel.ptr, &m->sentinel);
  return m;
}

static ol_policy_t *create_default(const ol_policy_options_t *options)
{
  return create(options, false);
}

static ol_policy_t *create_expandable(const ol_policy_options_t *options)
{
  return create(options, true);
}

static void model_destroy(ol_policy_t *m)
{
  if (!m)
    return;
  HASH_CLEAR(hh, m->live);
  pool_t *pools[] = {&m->small, &m->large};
  for (size_t i = 0; i < 2; i++) {
    free(pools[i]->blocks.v);
    free(pools[i]->unmapped.v);
  }
  while (m->segments) {
    segment_t *next = m->segments->next_segment;
    free(m->segments);
    m->segments = next;
  }
  while (m->slabs) {
    slab_t *next = m->slabs->next;
    free(m->slabs);
    m->slabs = next;
  }
  free(m->scratch);
  free(m);
}

const ol_policy_ops_t ol_policy_pytorch = {
  .name = "pytorch",
  .create = create_default,
  .alloc = model_alloc,
  .free = model_free,
  .stats = model_stats,
  .destroy = model_destroy,
};

const ol_policy_ops_t ol_policy_pytorch_expandable = {
  .name = "pytorch-expandable",
  .create = create_expandable,
  .alloc = model_alloc,
  .free = model_free,
  .stats = model_stats,
  .destroy = model_destroy,
};
