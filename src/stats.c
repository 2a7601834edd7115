/* stats.c: the arithmetic of PyTorch-shaped counters (current, peak, total
 * allocated, total freed), kept in one place so every module agrees. */
#include "ol.h"

void ol_stat_update(ol_stat_t *stat, int64_t delta)
{
  stat->current += delta;
  if (delta > 0)
    stat->allocated += delta;
  else
    stat->freed -= delta;
  if (stat->current > stat->peak)
    stat->peak = stat->current;
}

/* Every counter has an "all" row plus the pool the size falls in, split at
 * PyTorch's small-pool limit so our table reads like theirs. */
void ol_stats_pool_update(ol_stat_t stat[OL_POOL_COUNT], size_t size, int64_t delta)
{
  ol_stat_update(&stat[OL_POOL_ALL], delta);
  ol_stat_update(&stat[size <= OL_SMALL_SIZE ? OL_POOL_SMALL : OL_POOL_LARGE], delta);
}
