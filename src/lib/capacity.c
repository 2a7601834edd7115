/* capacity.c: OOMLENS_CAPACITY, a smaller device than the one installed.
 *
 * A user on a large card asks whether the job fits a smaller one: every
 * device then reports that capacity (cudaMemGetInfo and cuMemGetInfo
 * included), and an allocation that would take the device's use past it
 * fails as the driver fails it, with an out-of-memory error. Use counts what
 * others hold on the device (the CUDA context, libraries, other processes:
 * measured from the driver when first needed and at each memory query the
 * job makes) plus the memory this process holds through us. */
#include "lib.h"
#include "prim.h"

static _Atomic int64_t external_bytes[OL_MAX_DEVICES];
static atomic_bool measured[OL_MAX_DEVICES];

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
  atomic_store(&measured[device], true);
}

bool ol_capacity_allows(int device, uint64_t size)
{
  uint64_t cap = capacity();
  if (cap == 0 || !valid(device))
    return true;
  size_t free_bytes, total_bytes;
  if (!atomic_load(&measured[device]) && ol_prim_mem_info(&free_bytes, &total_bytes) == 0)
    note_use(device, free_bytes, total_bytes);
  uint64_t used = (uint64_t)atomic_load(&external_bytes[device]) +
                  (uint64_t)ol_track_reserved_now(device);
  return used <= cap && size <= cap - used;
}

int64_t ol_capacity_outside(int device)
{
  if (capacity() == 0 || !valid(device) || !atomic_load(&measured[device]))
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
