/* test_tracker.c: observe mode's counters: current, peak and totals per
 * device and pool, VMM accounting, frees we never saw allocated, and exact
 * counts with 16 threads at once. */
#include <check.h>

#include "check_run.h"
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib.h"

static ol_snapshot_t snap;

static void reset(void)
{
  ol_track_reset();
}

static const ol_device_stats_t *take(int device)
{
  ol_track_snapshot(&snap);
  return &snap.devices[device];
}

START_TEST(alloc_free_counts_and_peaks)
{
  ol_track_alloc(0x1000, 4u << 20, 0, OL_KIND_RUNTIME, 0);
  ol_track_alloc(0x9000000, 512, 0, OL_KIND_RUNTIME, 0);
  ck_assert(ol_track_free(0x1000, OL_KIND_RUNTIME));
  ol_track_alloc(0x2000, 1u << 20, 0, OL_KIND_DRIVER, 0);
  const ol_device_stats_t *d = take(0);
  ck_assert_int_eq(snap.device_count, 1);
  ck_assert_int_eq(d->allocated_bytes[OL_POOL_ALL].current, 512 + (1 << 20));
  ck_assert_int_eq(d->allocated_bytes[OL_POOL_ALL].peak, (4 << 20) + 512);
  ck_assert_int_eq(d->allocated_bytes[OL_POOL_ALL].allocated, (4 << 20) + 512 + (1 << 20));
  ck_assert_int_eq(d->allocated_bytes[OL_POOL_ALL].freed, 4 << 20);
  ck_assert_int_eq(d->allocated_bytes[OL_POOL_LARGE].peak, 4 << 20);
  ck_assert_int_eq(d->allocated_bytes[OL_POOL_SMALL].current, 512 + (1 << 20));
  ck_assert_int_eq(d->allocation[OL_POOL_ALL].current, 2);
  ck_assert_int_eq(d->allocation[OL_POOL_ALL].peak, 2);
  ck_assert_int_eq(d->reserved_bytes[OL_POOL_ALL].current, 512 + (1 << 20));
  ck_assert_int_eq(d->runtime_allocs, 2);
  ck_assert_int_eq(d->driver_allocs, 1);
  ck_assert_int_eq(d->runtime_frees, 1);
}
END_TEST

START_TEST(devices_are_separate)
{
  ol_track_alloc(0x1000, 100, 0, OL_KIND_RUNTIME, 0);
  ol_track_alloc(0x2000, 300, 2, OL_KIND_RUNTIME, 0);
  ol_track_free(0x2000, OL_KIND_RUNTIME);
  ck_assert_int_eq(take(0)->allocated_bytes[OL_POOL_ALL].current, 100);
  ck_assert_int_eq(snap.device_count, 3);
  ck_assert_int_eq(snap.devices[2].allocated_bytes[OL_POOL_ALL].current, 0);
  ck_assert_int_eq(snap.devices[2].allocated_bytes[OL_POOL_ALL].peak, 300);
  ck_assert_int_eq(snap.devices[1].allocated_bytes[OL_POOL_ALL].peak, 0);
}
END_TEST

START_TEST(unknown_free_counted_not_subtracted)
{
  ol_track_alloc(0x1000, 100, 0, OL_KIND_RUNTIME, 0);
  ck_assert(!ol_track_free(0x5000, OL_KIND_RUNTIME));
  const ol_device_stats_t *d = take(0);
  ck_assert_int_eq(d->unknown_frees, 1);
  ck_assert_int_eq(d->allocated_bytes[OL_POOL_ALL].current, 100);
}
END_TEST

/* Bug guard: an address seen allocated twice (its free went by unseen) must
 * not leave a phantom block behind. */
START_TEST(reused_address_replaces_stale_block)
{
  ol_track_alloc(0x1000, 100, 0, OL_KIND_RUNTIME, 0);
  ol_track_alloc(0x1000, 300, 0, OL_KIND_RUNTIME, 0);
  ck_assert_int_eq(take(0)->allocated_bytes[OL_POOL_ALL].current, 300);
  ol_track_free(0x1000, OL_KIND_RUNTIME);
  ck_assert_int_eq(take(0)->allocated_bytes[OL_POOL_ALL].current, 0);
  ck_assert_int_eq(snap.live_records, 0);
}
END_TEST

START_TEST(failed_allocations)
{
  ol_track_failed_alloc(1u << 30, 0, OL_KIND_RUNTIME, true, NULL);
  ol_track_failed_alloc(1u << 20, 0, OL_KIND_DRIVER, false, NULL);
  ck_assert_int_eq(take(0)->num_ooms, 0); /* a failure awaits its verdict (a retry?) */
  ol_track_oom_settle(0);                  /* the allocator gave up */
  const ol_device_stats_t *d = take(0);
  ck_assert_int_eq(d->num_ooms, 1);
  ck_assert_int_eq(d->failed_allocs, 2);
  ck_assert_int_eq(d->last_oom_request, 1 << 30);
  ck_assert_int_eq(d->allocated_bytes[OL_POOL_ALL].allocated, 0);
}
END_TEST

START_TEST(vmm_is_reserved_memory)
{
  const size_t chunk = 2u << 20;
  ol_track_va_reserve(0x100000000, 64 * chunk, 1);
  ol_track_vmm_create(7, chunk, 1);
  ol_track_vmm_create(8, chunk, 1);
  ol_track_vmm_map(0x100000000, chunk, 7);
  ol_track_vmm_map(0x100000000 + chunk, chunk, 8);
  const ol_device_stats_t *d = take(1);
  ck_assert_int_eq(d->reserved_bytes[OL_POOL_ALL].current, 2 * chunk);
  ck_assert_int_eq(d->segment[OL_POOL_ALL].current, 2);
  ck_assert_int_eq(d->allocated_bytes[OL_POOL_ALL].current, 0);
  ck_assert_int_eq(d->vmm_mapped_bytes.current, 2 * chunk);
  ck_assert_int_eq(d->va_reserved_bytes.current, 64 * chunk);
  /* One unmap covering both mappings, then release. */
  ol_track_vmm_unmap(0x100000000, 2 * chunk);
  ol_track_vmm_release(7);
  ol_track_vmm_release(8);
  ol_track_va_free(0x100000000);
  d = take(1);
  ck_assert_int_eq(d->vmm_mapped_bytes.current, 0);
  ck_assert_int_eq(d->vmm_mapped_bytes.peak, 2 * chunk);
  ck_assert_int_eq(d->reserved_bytes[OL_POOL_ALL].current, 0);
  ck_assert_int_eq(d->reserved_bytes[OL_POOL_ALL].peak, 2 * chunk);
  ck_assert_int_eq(d->va_reserved_bytes.current, 0);
  ck_assert_int_eq(d->vmm_creates, 2);
  ck_assert_int_eq(d->vmm_releases, 2);
  ck_assert_int_eq(d->vmm_maps, 2);
}
END_TEST

START_TEST(origins_split_reserved_memory)
{
  ol_track_alloc(0x1000, 300, 0, OL_KIND_RUNTIME, 0);
  ol_track_alloc(0x2000, 200, 0, OL_KIND_DRIVER_ASYNC, 0);
  ol_track_vmm_create(9, 2u << 20, 0);
  ol_track_free(0x2000, OL_KIND_DRIVER_ASYNC);
  const ol_device_stats_t *d = take(0);
  ck_assert_int_eq(d->origin_bytes[OL_ORIGIN_runtime].current, 300);
  ck_assert_int_eq(d->origin_bytes[OL_ORIGIN_driver].current, 0);
  ck_assert_int_eq(d->origin_bytes[OL_ORIGIN_driver].peak, 200);
  ck_assert_int_eq(d->origin_bytes[OL_ORIGIN_vmm].current, 2 << 20);
  ck_assert_int_eq(d->reserved_bytes[OL_POOL_ALL].current, 300 + (2 << 20));
}
END_TEST

START_TEST(reset_forgets_everything)
{
  ol_track_alloc(0x1000, 100, 0, OL_KIND_RUNTIME, 0);
  ck_assert(ol_track_seen_activity());
  ol_track_reset();
  ck_assert(!ol_track_seen_activity());
  ck_assert_int_eq(take(0)->allocated_bytes[OL_POOL_ALL].peak, 0);
  ck_assert_int_eq(snap.device_count, 0);
  ck_assert(!ol_track_free(0x1000, OL_KIND_RUNTIME));
}
END_TEST

#define THREADS 16
#define ROUNDS 5000

static void *churn(void *arg)
{
  uintptr_t base = (uintptr_t)arg << 32;
  for (int i = 0; i < ROUNDS; i++) {
    ol_track_alloc(base + (uintptr_t)i * 4096, 4096, 0, OL_KIND_RUNTIME, 0);
    if (i % 2)
      ol_track_free(base + (uintptr_t)(i - 1) * 4096, OL_KIND_RUNTIME);
  }
  return NULL;
}

START_TEST(exact_under_sixteen_threads)
{
  pthread_t threads[THREADS];
  for (uintptr_t t = 0; t < THREADS; t++)
    pthread_create(&threads[t], NULL, churn, (void *)(t + 1));
  for (int t = 0; t < THREADS; t++)
    pthread_join(threads[t], NULL);
  const ol_device_stats_t *d = take(0);
  ck_assert_int_eq(d->allocation[OL_POOL_ALL].allocated, THREADS * ROUNDS);
  ck_assert_int_eq(d->allocation[OL_POOL_ALL].current, THREADS * ROUNDS / 2);
  ck_assert_int_eq(d->allocated_bytes[OL_POOL_ALL].current, 4096ll * THREADS * ROUNDS / 2);
  ck_assert_int_eq(d->runtime_frees, THREADS * ROUNDS / 2);
  ck_assert_int_eq(snap.live_records, THREADS * ROUNDS / 2);
}
END_TEST

/* Active and requested bytes and active blocks are kept once, as the
 * allocated ones (all we see of a block is all of it), and must read the
 * same in every pool and column. */
START_TEST(active_and_requested_read_as_allocated)
{
  for (uintptr_t i = 0; i < 50; i++)
    ol_track_alloc(0x100000 + i * (4u << 20), i % 2 ? 4096 : (2u << 20), 0, OL_KIND_RUNTIME, 0);
  for (uintptr_t i = 0; i < 50; i += 3)
    ol_track_free(0x100000 + i * (4u << 20), OL_KIND_RUNTIME);
  const ol_device_stats_t *d = take(0);
  for (int pool = 0; pool < OL_POOL_COUNT; pool++) {
    ck_assert_mem_eq(&d->active_bytes[pool], &d->allocated_bytes[pool], sizeof(ol_stat_t));
    ck_assert_mem_eq(&d->requested_bytes[pool], &d->allocated_bytes[pool], sizeof(ol_stat_t));
    ck_assert_mem_eq(&d->active[pool], &d->allocation[pool], sizeof(ol_stat_t));
  }
  ck_assert_int_eq(d->active[OL_POOL_ALL].current, 50 - 17);
  ck_assert_int_eq(d->active_bytes[OL_POOL_SMALL].peak, 25 * 4096);
  ck_assert_int_eq(d->requested_bytes[OL_POOL_LARGE].freed, 9ll * (2 << 20));
}
END_TEST

static void *no_calloc(size_t count, size_t size)
{
  (void)count;
  (void)size;
  return NULL;
}

/* What stderr held while fn ran. */
static void capture_stderr(void (*fn)(void), char *out, size_t cap)
{
  FILE *tmp = tmpfile();
  ck_assert_ptr_nonnull(tmp);
  fflush(stderr);
  int saved = dup(STDERR_FILENO);
  dup2(fileno(tmp), STDERR_FILENO);
  fn();
  dup2(saved, STDERR_FILENO);
  close(saved);
  rewind(tmp);
  size_t n = fread(out, 1, cap - 1, tmp);
  out[n] = '\0';
  fclose(tmp);
}

static void allocate_without_host_memory(void)
{
  ol_track_alloc(0x1000, 4096, 0, OL_KIND_RUNTIME, 0); /* held before memory ran out */
  ol_records_calloc = no_calloc;
  for (uintptr_t i = 0; i < 300; i++) /* past what the first table holds */
    ol_track_alloc(0x100000 + i * 4096, 4096, 0, OL_KIND_RUNTIME, 0);
  ol_track_free(0x1000, OL_KIND_RUNTIME);
  ol_records_calloc = calloc;
}

/* The record table cannot grow: one warning, tracking stops, nothing
 * crashes, and what was counted before stays as it was. */
START_TEST(no_host_memory_stops_tracking_with_one_warning)
{
  char err[4096];
  capture_stderr(allocate_without_host_memory, err, sizeof err);
  const char *first = strstr(err, "tracking stops");
  ck_assert_ptr_nonnull(first);
  ck_assert_ptr_null(strstr(first + 1, "tracking stops"));
  const ol_device_stats_t *d = take(0);
  ck_assert(snap.tracking_failed);
  ck_assert_int_eq(d->allocation[OL_POOL_ALL].allocated, 192); /* the first table's fill */
  ck_assert_int_eq(d->runtime_frees, 0); /* after the failure, nothing more is counted */
  ck_assert_int_eq(snap.live_records, 192);
}
END_TEST

/* The tracker's lock (lock.c) under contention: more threads than cores
 * take it many times, so some spin and some sleep in the kernel, and a
 * non-atomic counter it guards comes out exact. */
static ol_lock_t counter_lock = OL_LOCK_INIT;
static long guarded_counter;

static void *count_under_lock(void *unused)
{
  (void)unused;
  for (int i = 0; i < 200000; i++) {
    ol_lock(&counter_lock);
    long seen = guarded_counter;
    if (i % 1000 == 0)
      sched_yield(); /* held across a yield: the others must wait, some asleep */
    guarded_counter = seen + 1;
    ol_unlock(&counter_lock);
  }
  return NULL;
}

START_TEST(lock_excludes_under_contention)
{
  pthread_t threads[8];
  for (int t = 0; t < 8; t++)
    pthread_create(&threads[t], NULL, count_under_lock, NULL);
  for (int t = 0; t < 8; t++)
    pthread_join(threads[t], NULL);
  ck_assert_int_eq(guarded_counter, 8 * 200000);
  ck_assert_int_eq(atomic_load(&counter_lock.word), 0); /* free, no sleeper left marked */
}
END_TEST

/* A report is one moment: taken while another thread allocates and frees
 * at two call sites, its counters, its timeline and its site lists always
 * agree (the timeline's allocated bytes now, the sites' totals and bytes
 * at the peak against the counters). Taken in three holds of the lock, as
 * it was, the thread's calls fall between them. */
static atomic_bool allocating;

static void site_key(ol_site_key_t *key, uintptr_t frame)
{
  memset(key, 0, sizeof *key);
  key->words[0] = (uintptr_t)1 << 16; /* one native frame, no Python */
  key->words[1] = frame;
  key->count = 2;
}

static void *allocate_and_free(void *unused)
{
  (void)unused;
  enum { LIVE = 64 };
  ol_site_key_t keys[2];
  site_key(&keys[0], 0x1111);
  site_key(&keys[1], 0x2222);
  for (uintptr_t i = 1; atomic_load(&allocating); i++) {
    ol_track_alloc_at(i << 12, 4096 * (1 + i % 3), 0, OL_KIND_RUNTIME, 0, &keys[i % 2], -1);
    if (i > LIVE)
      ol_track_free((i - LIVE) << 12, OL_KIND_RUNTIME);
    if (i % 50000 == 0) /* now and then a new peak */
      ol_track_alloc_at((i << 12) | 1, 8 * 4096 * i / 50000, 0, OL_KIND_RUNTIME, 0, &keys[0],
                        -1);
  }
  return NULL;
}

static int64_t sum_of(const ol_report_sites_t *list)
{
  int64_t sum = 0;
  for (size_t i = 0; i < list->count; i++)
    sum += list->site[i].bytes;
  return sum;
}

START_TEST(report_is_one_moment)
{
  pthread_t thread;
  atomic_store(&allocating, true);
  pthread_create(&thread, NULL, allocate_and_free, NULL);
  int apart = 0, taken = 0;
  while (taken < 1000) {
    ol_report_t r;
    ck_assert_int_eq(ol_report_take(&r, "test"), 0);
    ck_assert(!r.failed);
    if (r.device_count == 0) { /* before the thread's first call */
      ol_report_free(&r);
      continue;
    }
    taken++;
    const ol_report_device_t *d = &r.devices[0];
    const ol_stat_t *allocated = &d->stats.allocated_bytes[OL_POOL_ALL];
    ck_assert(d->has_timeline && d->has_sites);
    apart += d->timeline.allocated_now != allocated->current ||
             sum_of(&d->by_total) != allocated->allocated ||
             sum_of(&d->at_peak) != allocated->peak;
    ol_report_free(&r);
  }
  atomic_store(&allocating, false);
  pthread_join(thread, NULL);
  ck_assert_msg(apart == 0, "%d of %d reports mixed moments", apart, taken);
}
END_TEST

static Suite *tracker_suite(void)
{
  Suite *s = suite_create("tracker");
  TCase *counts = tcase_create("counts");
  tcase_add_checked_fixture(counts, reset, NULL);
  tcase_add_test(counts, alloc_free_counts_and_peaks);
  tcase_add_test(counts, devices_are_separate);
  tcase_add_test(counts, unknown_free_counted_not_subtracted);
  tcase_add_test(counts, reused_address_replaces_stale_block);
  tcase_add_test(counts, failed_allocations);
  tcase_add_test(counts, vmm_is_reserved_memory);
  tcase_add_test(counts, origins_split_reserved_memory);
  tcase_add_test(counts, reset_forgets_everything);
  tcase_add_test(counts, no_host_memory_stops_tracking_with_one_warning);
  tcase_add_test(counts, active_and_requested_read_as_allocated);
  suite_add_tcase(s, counts);
  TCase *threads = tcase_create("threads");
  tcase_add_checked_fixture(threads, reset, NULL);
  tcase_set_timeout(threads, 60);
  tcase_add_test(threads, exact_under_sixteen_threads);
  tcase_add_test(threads, lock_excludes_under_contention);
  tcase_add_test(threads, report_is_one_moment);
  suite_add_tcase(s, threads);
  return s;
}

int main(void)
{
  return ol_run_suite(tracker_suite());
}
