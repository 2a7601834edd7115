/* simdev.h: an in-process simulated device behind the pool's backend
 * interface, for replay and benchmarks: address space is handed out as
 * numbers with no host memory behind it, and mapping fails once the mapped
 * bytes would pass the capacity. It checks every call it gets (inside a
 * reserved range, never mapping twice or unmapping what is not mapped) and
 * counts the ones that break those rules, so tests can assert none did. */
#ifndef OL_SIMDEV_H
#define OL_SIMDEV_H

#include <stdint.h>

#include "pool.h"

typedef struct ol_simdev ol_simdev_t;

typedef struct ol_simdev_counts {
  uint64_t reserve_calls, unreserve_calls, map_calls, unmap_calls;
  uint64_t failed_maps;           /* refused for capacity or injected */
  uint64_t mapped, mapped_peak;   /* bytes */
  uint64_t reserved_va;           /* bytes of address space reserved now */
  uint64_t misuse;                /* calls that broke the backend's rules */
} ol_simdev_counts_t;

/* NULL when out of host memory or granularity is not a power of two. */
ol_simdev_t *ol_simdev_create(uint64_t capacity, uint64_t granularity);
void ol_simdev_destroy(ol_simdev_t *dev);
/* The backend that drives dev (ctx is dev). */
void ol_simdev_backend(ol_simdev_t *dev, ol_backend_t *out);
void ol_simdev_counts(const ol_simdev_t *dev, ol_simdev_counts_t *out);
/* The next n map calls fail, whatever the capacity (0 stops it). */
void ol_simdev_fail_maps(ol_simdev_t *dev, uint64_t n);
/* Later reserve calls fail while set: address space running out. */
void ol_simdev_fail_reserves(ol_simdev_t *dev, bool fail);
void ol_simdev_set_capacity(ol_simdev_t *dev, uint64_t capacity);
/* Whether the granule at addr is mapped (false outside any range). */
bool ol_simdev_is_mapped(const ol_simdev_t *dev, uint64_t addr);

#endif
