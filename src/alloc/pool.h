/* pool.h: manage mode's device-memory allocator: an expandable-segment pool
 * over an abstract virtual-memory backend (the real driver's VMM calls, the
 * simulated CUDA of the tests, or simdev.c's in-process device).
 *
 * Single-threaded by contract: no call into one pool may run concurrently
 * with another call into the same pool. The interposer holds a per-device
 * lock around every call; replay and the benchmarks run on one thread.
 *
 * The pool knows nothing of streams or CUDA: the caller decides when a freed
 * block can no longer be touched by earlier work, and only then calls
 * ol_pool_free. */
#ifndef OL_POOL_H
#define OL_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy.h"

typedef struct ol_backend {
  void *ctx;
  uint64_t granularity; /* physical mapping unit (2 MiB on the GPUs we target) */
  /* Reserve size bytes of address space (size a multiple of granularity),
   * aligned to granularity. 0 on success, -1 on failure. */
  int (*reserve)(void *ctx, uint64_t size, uint64_t *base);
  void (*unreserve)(void *ctx, uint64_t base, uint64_t size);
  /* Back [addr, addr+size) with one physical allocation (an extent); both
   * multiples of granularity, inside a reserved range. 0 on success, -1
   * when the device is out of memory (or any other failure). */
  int (*map)(void *ctx, uint64_t addr, uint64_t size);
  void (*unmap)(void *ctx, uint64_t addr, uint64_t size);
} ol_backend_t;
/* What the pool asks of a backend beyond the comments above:
 * - map is called only on granules that are not mapped; unmap exactly on
 *   one earlier map's range, whole (an extent: cuMemUnmap cannot unmap part
 *   of one mapping), so one physical allocation per map call is right.
 *   Extents hold at most config.map_unit granules and never cross a
 *   multiple of it from the range's base.
 * - a failed map leaves nothing mapped in the range it was given.
 * - unreserve is called only on a range with nothing mapped in it. */

typedef struct ol_pool ol_pool_t;

typedef struct ol_pool_config {
  /* Bytes of address space to reserve at creation (rounded up to the
   * granularity): the device's capacity, rounded up, is enough. The pool
   * reserves further ranges when one is too fragmented or too small for a
   * request; blocks never span two ranges. */
  uint64_t address_space;
  /* Blocks at or above it are never split; 0 = no limit. See pool.c's
   * "Max split size" for the exact rule. */
  uint64_t max_split_size;
  /* Host memory for the pool's bookkeeping; NULL: realloc. Tests inject
   * failures through it; a failure makes the call return -1 with the pool
   * unchanged. */
  void *(*host_realloc)(void *ptr, size_t size);
  /* Never unmap free memory to stay near peak allocated; unmap only when the
   * device is full. For jobs whose frees return when the device passes a
   * fence: the layout then shifts from step to step and trimming remapped
   * gigabytes a step on an H200 (OOMLENS_POOL_TRIM=0 in manage mode). */
  bool keep_mapped;
  /* Granules one physical extent may hold (0 or 1: one per granule). A
   * larger unit makes one driver call of what were many: each call costs
   * about the same whatever its size (H200, docs/measurements.md), but a
   * free extent can be given back only whole, when no live block shares it. */
  uint64_t map_unit;
  /* The memory the pool may come to hold at most (the device, or what
   * OOMLENS_CAPACITY allows); 0: unknown. Near it, free memory is given
   * back whenever the pool grows, however recently it was used. */
  uint64_t capacity;
  /* Trims spare free memory the job used of late, once it has come back to
   * memory earlier trims unmapped (pool.c's "trimming only when memory is
   * wanted"): fewer remaps on jobs whose layout shifts, more reserved. */
  bool keep_used;
} ol_pool_config_t;

#define OL_POOL_ALIGN 512u /* every size is rounded up to it, as PyTorch does */
/* An oversize request takes a free block at most this much larger than it
 * (PyTorch's kLargeBuffer). */
#define OL_POOL_OVERSIZE_SLACK (20ull << 20)

/* NULL when the backend refuses the first range, the granularity is not a
 * power of two at least OL_POOL_ALIGN, or host memory runs out. */
ol_pool_t *ol_pool_create(const ol_backend_t *backend, const ol_pool_config_t *config);
/* Unmaps and unreserves everything, live blocks included. */
void ol_pool_destroy(ol_pool_t *pool);

/* Serves size bytes (rounded up to OL_POOL_ALIGN; 0 counts as 512 and gets
 * a unique block like any other) at an address aligned to OL_POOL_ALIGN.
 * 0 and *addr set, or -1 when it cannot be served even after releasing all
 * free memory, or when bookkeeping memory runs out (the pool is unchanged). */
int ol_pool_alloc(ol_pool_t *pool, uint64_t size, uint64_t *addr);
/* -1 if addr is not the start of a live block of this pool. */
int ol_pool_free(ol_pool_t *pool, uint64_t addr);
/* addr lies inside one of the pool's reserved ranges. */
bool ol_pool_owns(const ol_pool_t *pool, uint64_t addr);
/* Bytes handed out for the live block at addr (the rounded request, or a
 * whole oversize block), 0 if addr does not start a live block. */
uint64_t ol_pool_block_size(const ol_pool_t *pool, uint64_t addr);
/* Unmaps granules that lie wholly inside free blocks, highest addresses
 * first, until at least want bytes are released (UINT64_MAX: all of them).
 * Returns the bytes released. */
uint64_t ol_pool_release(ol_pool_t *pool, uint64_t want);
/* allocated: bytes handed out; reserved: bytes mapped; segments: granules
 * mapped; largest_free_block: the largest free range it could hand out
 * without mapping. */
void ol_pool_stats(const ol_pool_t *pool, ol_policy_stats_t *out);

/* Counters beyond the policy's, for tests, benchmarks and reports. */
typedef struct ol_pool_counts {
  uint64_t map_calls, unmap_calls;     /* extents mapped and unmapped: physical allocations */
  uint64_t mapped_bytes, unmapped_bytes; /* totals over the pool's life */
  uint64_t ranges;                     /* address ranges reserved now */
  uint64_t free_blocks, live_blocks;
  uint64_t release_scans;              /* automatic releases (hysteresis) */
  uint64_t remapped_bytes;             /* mapped again soon after a trim unmapped them: churn */
} ol_pool_counts_t;
void ol_pool_counts(const ol_pool_t *pool, ol_pool_counts_t *out);
/* For tests: walks every structure (O(n)) and says whether all agree:
 * block lists, size bins and their trees, the address hash, the mapped
 * granules under live blocks, and the totals. */
bool ol_pool_check(const ol_pool_t *pool);

#endif
