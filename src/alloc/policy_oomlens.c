/* policy_oomlens.c: the "oomlens" replay policy (our pool on the
 * in-process simulated device) and the table behind ol_policy_find. */
#include <stdlib.h>
#include <string.h>

#include "policy.h"
#include "pool.h"
#include "pytorch_model.h"
#include "simdev.h"

#define SIM_GRANULARITY (2ull << 20) /* VMM granularity of the GPUs we target */
/* The pool and the simulated device keep a bit per granule of each range:
 * a device of more than 2^24 granules (32 TiB at 2 MiB; none is near) is
 * simulated with granules as many times larger as keep it at 2^24, so that
 * their tables stay within 2 MiB a range for any --capacity. Its figures
 * are then rounded to those granules. */
#define MAX_GRANULES ((uint64_t)1 << 24)
#define MAX_CAPACITY ((uint64_t)1 << 60) /* 1 EiB: larger is modelled as this */

struct ol_policy {
  ol_simdev_t *dev;
  ol_pool_t *pool;
  uint64_t capacity;
};

static uint64_t granularity_for(uint64_t capacity)
{
  uint64_t gran = SIM_GRANULARITY;
  while (capacity / gran > MAX_GRANULES)
    gran *= 2;
  return gran;
}

static void oomlens_destroy(ol_policy_t *policy)
{
  if (!policy)
    return;
  ol_pool_destroy(policy->pool);
  ol_simdev_destroy(policy->dev);
  free(policy);
}

static ol_policy_t *oomlens_create(const ol_policy_options_t *options)
{
  ol_policy_t *policy = calloc(1, sizeof *policy);
  if (!policy)
    return NULL;
  uint64_t capacity = options->capacity < MAX_CAPACITY ? options->capacity : MAX_CAPACITY;
  uint64_t gran = granularity_for(capacity);
  policy->capacity = capacity;
  policy->dev = ol_simdev_create(capacity, gran);
  if (!policy->dev) {
    oomlens_destroy(policy);
    return NULL;
  }
  ol_backend_t backend;
  ol_simdev_backend(policy->dev, &backend);
  /* address space of the device's size, as the interposer reserves: the
   * pool adds ranges should fragmentation ever use it all up */
  uint64_t space = (capacity + gran - 1) & ~(gran - 1);
  ol_pool_config_t config = {
    .address_space = space ? space : gran,
    .max_split_size = options->max_split_size,
    .keep_mapped = options->keep_mapped,
    .map_unit = options->map_unit,
    .capacity = capacity,
    .keep_used = options->keep_used,
  };
  policy->pool = ol_pool_create(&backend, &config);
  if (!policy->pool) {
    oomlens_destroy(policy);
    return NULL;
  }
  return policy;
}

static int oomlens_alloc(ol_policy_t *policy, uint64_t size, uint64_t stream, uint64_t *addr)
{
  (void)stream; /* the pool is stream-blind: replay frees only completed blocks */
  if (size > policy->capacity)
    return -1; /* the device cannot hold it, and no rounding of it can wrap */
  return ol_pool_alloc(policy->pool, size, addr);
}

static void oomlens_free(ol_policy_t *policy, uint64_t addr)
{
  ol_pool_free(policy->pool, addr);
}

static void oomlens_stats(const ol_policy_t *policy, ol_policy_stats_t *out)
{
  ol_pool_stats(policy->pool, out);
}

static const ol_policy_ops_t oomlens_ops = {
  .name = "oomlens",
  .create = oomlens_create,
  .alloc = oomlens_alloc,
  .free = oomlens_free,
  .stats = oomlens_stats,
  .destroy = oomlens_destroy,
};

/* Every policy replay knows. The model of PyTorch's caching allocator
 * (pytorch_model.c: ol_policy_pytorch, ol_policy_pytorch_expandable) is
 * added here by its author once it exists. */
static const ol_policy_ops_t *const policies[] = {
  &oomlens_ops,
  &ol_policy_pytorch,
  &ol_policy_pytorch_expandable,
};

const ol_policy_ops_t *ol_policy_find(const char *name)
{
  for (size_t i = 0; i < sizeof policies / sizeof policies[0]; i++)
    if (strcmp(policies[i]->name, name) == 0)
      return policies[i];
  return NULL;
}
