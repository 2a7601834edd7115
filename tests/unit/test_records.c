/* test_records.c: the tracker's open-addressed record tables (records.c):
 * a long random churn checked against a plain model, growth, keys that
 * all want the same slot (clusters that wrap the array's end), key 0,
 * taking a range, and a host with no memory for the table to grow. */
#include <check.h>

#include "check_run.h"
#include <stdlib.h>

#include "core.h"

static ol_records_t table;

static void setup(void)
{
  ol_records_init(&table);
}

static void teardown(void)
{
  ol_records_free(&table);
  ol_records_calloc = calloc;
}

static uint64_t size_of_key(uint64_t key)
{
  return key * 3 + 1;
}

static ol_record_t *add(uint64_t key)
{
  ol_record_t *rec = ol_records_add(&table, key);
  ck_assert_ptr_nonnull(rec);
  ck_assert_int_eq(rec->site, -1);
  rec->size = size_of_key(key);
  return rec;
}

static void assert_holds(uint64_t key)
{
  ol_record_t *rec = ol_records_find(&table, key);
  ck_assert_ptr_nonnull(rec);
  ck_assert_uint_eq(rec->key, key);
  ck_assert_uint_eq(rec->size, size_of_key(key));
}

/* ---- against a model -------------------------------------------------- */

#define UNIVERSE 3000 /* small, so keys come back and collide */
#define OPS 300000

START_TEST(random_churn_matches_a_model)
{
  static int live[UNIVERSE]; /* records held per key (the same key may be added twice) */
  size_t total = 0;
  srand(7);
  for (int op = 0; op < OPS; op++) {
    uint64_t key = (uint64_t)(rand() % UNIVERSE) * 512 + (1ull << 40); /* aligned, as addresses */
    int k = (int)((key - (1ull << 40)) / 512);
    if (rand() % 3 != 0 || live[k] == 2) {
      ol_record_t rec;
      bool took = ol_records_take(&table, key, &rec);
      ck_assert_int_eq(took, live[k] > 0);
      if (took) {
        ck_assert_uint_eq(rec.size, size_of_key(key));
        live[k]--;
        total--;
      }
    } else {
      add(key);
      live[k]++;
      total++;
    }
    ck_assert_uint_eq(ol_records_count(&table), total);
  }
  for (int k = 0; k < UNIVERSE; k++) {
    uint64_t key = (uint64_t)k * 512 + (1ull << 40);
    if (live[k])
      assert_holds(key);
    else
      ck_assert_ptr_null(ol_records_find(&table, key));
  }
}
END_TEST

START_TEST(grows_and_keeps_everything)
{
  enum { N = 100000 };
  for (uint64_t i = 1; i <= N; i++)
    add(i << 21); /* 2 MiB apart: only high bits differ */
  ck_assert_uint_eq(ol_records_count(&table), N);
  ck_assert_uint_ge(table.mask + 1, (size_t)N * 4 / 3);
  for (uint64_t i = 1; i <= N; i++)
    assert_holds(i << 21);
  ck_assert_ptr_null(ol_records_find(&table, ((uint64_t)N + 1) << 21));
  ol_record_t rec;
  for (uint64_t i = 1; i <= N; i++)
    ck_assert(ol_records_take(&table, i << 21, &rec));
  ck_assert_uint_eq(ol_records_count(&table), 0);
  ck_assert(!ol_records_take(&table, 1 << 21, &rec));
}
END_TEST

/* ---- collisions -------------------------------------------------------- */

/* Keys whose home in a table of 256 slots is `home`, found by trying
 * (records.c's hash: multiply by 2^64/phi, keep the top 8 bits). */
static int keys_homed_at(size_t home, uint64_t *keys, int want)
{
  int n = 0;
  for (uint64_t k = 1; n < want; k++)
    if ((size_t)((k * 0x9E3779B97F4A7C15ull) >> 56) == home)
      keys[n++] = k;
  return n;
}

START_TEST(one_cluster_wrapping_the_end)
{
  uint64_t keys[40];
  keys_homed_at(250, keys, 40); /* 40 keys from slot 250 on: the cluster wraps to slot 33 */
  for (int i = 0; i < 40; i++)
    add(keys[i]);
  ck_assert_uint_eq(table.mask + 1, 256); /* no growth: all 40 share one run */
  ck_assert_uint_eq(table.slots[250].key, keys[0]);
  ck_assert_uint_eq(table.slots[5].key, keys[11]); /* past the end, from slot 0 on */
  /* take from the front, the middle and across the wrap; the rest stay reachable */
  int order[] = {0, 20, 6, 5, 7, 39, 11, 1};
  ol_record_t rec;
  for (size_t t = 0; t < sizeof order / sizeof *order; t++) {
    ck_assert(ol_records_take(&table, keys[order[t]], &rec));
    ck_assert_uint_eq(rec.key, keys[order[t]]);
    for (int i = 0; i < 40; i++) {
      bool taken = false;
      for (size_t u = 0; u <= t; u++)
        taken |= order[u] == i;
      if (taken)
        ck_assert_ptr_null(ol_records_find(&table, keys[i]));
      else
        assert_holds(keys[i]);
    }
  }
  ck_assert_uint_eq(ol_records_count(&table), 32);
}
END_TEST

START_TEST(key_zero_has_its_own_slot)
{
  add(0);
  add(512);
  assert_holds(0);
  ck_assert_uint_eq(ol_records_count(&table), 2);
  ck_assert_ptr_null(ol_records_add(&table, 0)); /* a second: refused, not lost */
  ol_record_t rec;
  ck_assert(ol_records_take(&table, 0, &rec));
  ck_assert_uint_eq(rec.size, 1);
  ck_assert(!ol_records_take(&table, 0, &rec));
  assert_holds(512);
}
END_TEST

/* Every record once, key 0's included, after growth and removals. */
static void sum_seen(const ol_record_t *rec, void *arg)
{
  uint64_t *sums = arg;
  sums[0]++;
  sums[1] += rec->key;
  ck_assert_uint_eq(rec->size, size_of_key(rec->key));
}

START_TEST(each_visits_every_record_once)
{
  uint64_t want[2] = {0, 0};
  add(0);
  want[0]++;
  for (uint64_t k = 4096; k < 4096 + 5000 * 512; k += 512) {
    add(k);
    want[0]++;
    want[1] += k;
  }
  ol_record_t rec;
  for (uint64_t k = 4096; k < 4096 + 5000 * 512; k += 7 * 512) {
    ck_assert(ol_records_take(&table, k, &rec));
    want[0]--;
    want[1] -= k;
  }
  uint64_t seen[2] = {0, 0};
  ol_records_each(&table, sum_seen, seen);
  ck_assert_uint_eq(seen[0], want[0]);
  ck_assert_uint_eq(seen[1], want[1]);
  ck_assert_uint_eq(seen[0], ol_records_count(&table));
}
END_TEST

static void count_taken(const ol_record_t *rec, void *arg)
{
  ck_assert_uint_ge(rec->key, 1000);
  ck_assert_uint_lt(rec->key, 2000);
  (*(int *)arg)++;
}

START_TEST(take_range_takes_exactly_the_range)
{
  for (uint64_t k = 1; k < 3000; k++)
    add(k);
  int taken = 0;
  ck_assert_uint_eq(ol_records_take_range(&table, 1000, 2000, count_taken, &taken), 1000);
  ck_assert_int_eq(taken, 1000);
  for (uint64_t k = 1; k < 3000; k++) {
    if (k >= 1000 && k < 2000)
      ck_assert_ptr_null(ol_records_find(&table, k));
    else
      assert_holds(k);
  }
}
END_TEST

/* An allocation at an address still held: the old record comes back and
 * its slot is reused, so the table holds one record for the key. */
START_TEST(put_replaces_a_record_of_the_same_key)
{
  bool replaced;
  ol_record_t old;
  for (uint64_t k = 1; k <= 500; k++)
    add(k * 4096);
  ol_record_t *rec = ol_records_put(&table, 77 * 4096, &old, &replaced);
  ck_assert(replaced);
  ck_assert_uint_eq(old.size, size_of_key(77 * 4096));
  ck_assert_int_eq(rec->site, -1);
  rec->size = 5;
  ck_assert_uint_eq(ol_records_count(&table), 500);
  ck_assert_uint_eq(ol_records_find(&table, 77 * 4096)->size, 5);
  ck_assert_ptr_nonnull(ol_records_put(&table, 501 * 4096, &old, &replaced));
  ck_assert(!replaced);
  ck_assert_uint_eq(ol_records_count(&table), 501);
  ck_assert_ptr_nonnull(ol_records_put(&table, 0, &old, &replaced));
  ck_assert(!replaced);
  ck_assert_ptr_nonnull(ol_records_put(&table, 0, &old, &replaced));
  ck_assert(replaced);
  ck_assert_uint_eq(ol_records_count(&table), 502);
  ol_record_t taken;
  ck_assert(ol_records_take(&table, 77 * 4096, &taken));
  ck_assert(!ol_records_take(&table, 77 * 4096, &taken)); /* one record, not two */
}
END_TEST

/* ---- no host memory -------------------------------------------------- */

static int callocs_left;

static void *calloc_running_out(size_t count, size_t size)
{
  return callocs_left-- > 0 ? calloc(count, size) : NULL;
}

START_TEST(no_memory_to_grow_fails_the_add_and_keeps_the_table)
{
  ol_records_calloc = calloc_running_out;
  callocs_left = 0;
  ck_assert_ptr_null(ol_records_add(&table, 512)); /* not even the first array */
  ck_assert_uint_eq(ol_records_count(&table), 0);
  callocs_left = 1;
  int fit = 0;
  ol_record_t *rec;
  while ((rec = ol_records_add(&table, (uint64_t)(fit + 1) * 512)))
    rec->size = size_of_key(rec->key), fit++;
  ck_assert_int_eq(fit, 192); /* 3/4 of the first 256 slots, then growth fails */
  ck_assert_uint_eq(ol_records_count(&table), 192);
  for (int i = 1; i <= fit; i++)
    assert_holds((uint64_t)i * 512);
  ol_records_calloc = calloc; /* memory again: growth resumes */
  add(193 * 512);
  ck_assert_uint_eq(table.mask + 1, 512);
  for (int i = 1; i <= 193; i++)
    assert_holds((uint64_t)i * 512);
}
END_TEST

static Suite *records_suite(void)
{
  Suite *s = suite_create("records");
  TCase *tc = tcase_create("table");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, random_churn_matches_a_model);
  tcase_add_test(tc, grows_and_keeps_everything);
  tcase_add_test(tc, one_cluster_wrapping_the_end);
  tcase_add_test(tc, key_zero_has_its_own_slot);
  tcase_add_test(tc, take_range_takes_exactly_the_range);
  tcase_add_test(tc, each_visits_every_record_once);
  tcase_add_test(tc, put_replaces_a_record_of_the_same_key);
  tcase_add_test(tc, no_memory_to_grow_fails_the_add_and_keeps_the_table);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  return ol_run_suite(records_suite());
}
