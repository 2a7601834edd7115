/* policy.h: what an allocator looks like to `oomlens replay` and to the
 * benchmarks: a policy serves allocate/free requests on one simulated
 * device of a given capacity and reports its peaks. Three implement it:
 * "oomlens" (our pool, pool.c, on the in-process simulated device),
 * "pytorch" and "pytorch-expandable" (a model of PyTorch's caching
 * allocator, pytorch_model.c), so all three run the same trace. */
#ifndef OL_POLICY_H
#define OL_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ol_policy_options {
  uint64_t capacity;       /* bytes the simulated device holds */
  uint64_t max_split_size; /* blocks at or above it are never split; 0 = no limit */
  bool keep_mapped;        /* oomlens: no trimming (OOMLENS_POOL_TRIM=0); others ignore it */
  uint64_t map_unit;       /* oomlens: granules per physical extent at most (0: the default) */
  bool keep_used;          /* oomlens: OOMLENS_POOL_KEEP_USED=1 */
  bool reuse_held;         /* oomlens: OOMLENS_POOL_REUSE_HELD=1 (replay.c models it) */
} ol_policy_options_t;

/* The driver calls a policy's memory costs on a real device, as the
 * interposer (or PyTorch) makes them: VMM policies create a physical handle
 * per mapping unit (cuMemCreate), map it (cuMemMap and cuMemSetAccess,
 * counted as one map), then unmap and release it; the cudaMalloc policy
 * asks for whole segments. What replay prints per policy, so that a trim
 * policy can be tuned and pinned offline. */
typedef struct ol_policy_calls {
  int64_t creates, maps, unmaps, releases; /* cuMemCreate, cuMemMap, cuMemUnmap, cuMemRelease */
  int64_t mallocs, frees;                  /* cudaMalloc, cudaFree of a segment */
} ol_policy_calls_t;

typedef struct ol_policy_stats {
  int64_t allocated, allocated_peak; /* bytes handed out (as the policy counts them) */
  int64_t reserved, reserved_peak;   /* bytes of device memory the policy holds */
  int64_t largest_free_block;        /* largest block it could hand out without growing */
  int64_t free_reserved;             /* reserved but not allocated */
  int64_t segments;                  /* segments or mapped chunks held now */
  ol_policy_calls_t calls;           /* since the policy was created */
} ol_policy_stats_t;

typedef struct ol_policy ol_policy_t; /* one instance per simulated device */

typedef struct ol_policy_ops {
  const char *name;
  ol_policy_t *(*create)(const ol_policy_options_t *options); /* NULL: out of host memory */
  /* 0 and *addr set, or -1 when the device cannot hold it (an OOM). */
  int (*alloc)(ol_policy_t *policy, uint64_t size, uint64_t stream, uint64_t *addr);
  void (*free)(ol_policy_t *policy, uint64_t addr);
  void (*stats)(const ol_policy_t *policy, ol_policy_stats_t *out);
  void (*destroy)(ol_policy_t *policy);
} ol_policy_ops_t;

/* NULL when no policy has that name. */
const ol_policy_ops_t *ol_policy_find(const char *name);

#endif
