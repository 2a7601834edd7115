/* own_time.c: what oomlens's own work costs the job's threads.
 *
 * The 1% a feature may cost cannot be shown by timing runs against each
 * other on a GPU: runs of one configuration differ by more than that
 * (docs/measurements.md). So the library clocks itself: the time manage
 * mode's pool takes on the calling thread (its allocations and frees, the
 * driver calls and the waits they make: manage.c), and the time the
 * call-site capture takes. A report gives both against the span since the
 * first charge: an upper bound of what each cost the run's speed (a step
 * the GPU bounds hides the CPU's time). The tracking both modes share is
 * not clocked: its cost is counted on the build machine (callgrind).
 *
 * Only paths that cost a microsecond or more are clocked (a sampled stack,
 * a new site, the pool's calls), never observe mode's plain hook; the
 * clock costs tens of nanoseconds. */
#include <stdatomic.h>
#include <time.h>

#include "lib.h"

static atomic_uint_fast64_t spent_ns[OL_OWN_COUNT], first_charge_ns;

uint64_t ol_own_clock_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void ol_own_charge(ol_own_t what, uint64_t since_ns)
{
  uint64_t now = ol_own_clock_ns(), unset = 0;
  atomic_compare_exchange_strong(&first_charge_ns, &unset, since_ns);
  if (now > since_ns)
    atomic_fetch_add_explicit(&spent_ns[what], now - since_ns, memory_order_relaxed);
}

void ol_own_times(ol_report_own_time_t *out)
{
  uint64_t first = atomic_load(&first_charge_ns), now = ol_own_clock_ns();
  *out = (ol_report_own_time_t){
      .known = true,
      .span_us = first && now > first ? (now - first) / 1000 : 0,
      .call_sites_us = atomic_load_explicit(&spent_ns[OL_OWN_CALL_SITES], memory_order_relaxed) / 1000,
      .manage_us = atomic_load_explicit(&spent_ns[OL_OWN_MANAGE], memory_order_relaxed) / 1000};
}
