/* capacity.c: OOMLENS_CAPACITY, a smaller device than the one installed.
 *
 * A user on a large card asks whether the job fits a smaller one: every
 * device then reports that capacity (cudaMemGetInfo and cuMemGetInfo
 * included), and an allocation that would take the device's use past it
 * fails as the driver fails it, with an out-of-memory error. Use counts what
 * others hold on the device (the CUDA context, libraries, other processes:
 * measured from the driver when first needed, again when the last measure
 * is older than REMEASURE_NS, before any refusal, and at each memory query
 * the job makes) plus the memory this process holds through us. A process
 * that arrives mid-training takes its share of the smaller device as it
 * would of a real one: measured once, it went unseen while the job never
 * asked the driver what was free (held-out external_late on the H200: an
 * 8 GiB newcomer under a 12G cap, and the job fitted). */
#include "lib.h"
#include "prim.h"

/* A measure costs one cuMemGetInfo (microseconds); at most one per this
 * interval on the allocations that reach the driver (the pool's growth,
 * the framework's segments) costs nothing a job can see. */
#define REMEASURE_NS 10000000ull /* 10 ms */

static _Atomic int64_t external_bytes[OL_MAX_DEVICES];
static _Atomic uint64_t measured_ns[OL_MAX_DEVICES]; /* 0: never measured */

static uint64_t capacity(void)
{
  return ol_option_size(OL_OPT_CAPACITY);
}

static bool valid(int device)
{
  return device >= 0 && device < OL_MAX_DEVICES;
}

static void note_use(int device, size_t free_bytes, size_t total_bytes)
{
  int64_t used = (int64_t)(total_bytes - free_bytes);
  int64_t others = used - ol_track_reserved_now(device);
  atomic_store(&external_bytes[device], others > 0 ? others : 0);
  atomic_store(&measured_ns[device], ol_own_clock_ns());
}

static void measure(int device)
{
  size_t free_bytes, total_bytes;
  if (ol_prim_mem_info(&free_bytes, &total_bytes) == 0)
    note_use(device, free_bytes, total_bytes);
}

static bool measured(int device)
{
  return atomic_load(&measured_ns[device]) != 0;
}

static bool stale(int device)
{
  return !measured(device) ||
         ol_own_clock_ns() - atomic_load(&measured_ns[device]) >= REMEASURE_NS;
}

static bool fits(int device, uint64_t cap, uint64_t size)
{
  uint64_t used = (uint64_t)atomic_load(&external_bytes[device]) +
                  (uint64_t)ol_track_reserved_now(device);
  return used <= cap && size <= cap - used;
}

bool ol_capacity_allows(int device, uint64_t size)
{
  uint64_t cap = capacity();
  if (cap == 0 || !valid(device))
    return true;
  bool measured_now = stale(device);
  if (measured_now)
    measure(device);
  if (fits(device, cap, size))
    return true;
  if (measured_now)
    return false;
  measure(device); /* never refuse on an old figure: the other process may have gone */
  return fits(device, cap, size);
}

int64_t ol_capacity_outside(int device)
{
  if (capacity() == 0 || !valid(device) || !measured(device))
    return -1;
  return atomic_load(&external_bytes[device]);
}

void ol_capacity_clamp(int device, size_t *free_bytes, size_t *total_bytes)
{
  uint64_t cap = capacity();
  if (cap == 0 || !valid(device) || *total_bytes <= cap)
    return;
  note_use(device, *free_bytes, *total_bytes);
  size_t used = *total_bytes - *free_bytes;
  *total_bytes = cap;
  *free_bytes = used < cap ? cap - used : 0;
}
