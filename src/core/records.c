/* records.c: the tracker's tables of live blocks, keyed by address (or VMM
 * handle).
 *
 * Open addressing with linear probing, the records stored in the slots
 * themselves: an add or a take is a multiply, a shift and, almost always,
 * one or two cache lines; nothing is malloc'd per record (the hash table
 * this replaced malloc'd its buckets again each time the table went from
 * empty to one entry). Removal shifts the following entries back
 * (backward-shift deletion), so there are no tombstones and lookups never
 * slow down with churn. Key 0 marks an empty slot; a record whose key is 0
 * lives in a slot of its own beside the array. The same key may be added
 * twice (the second is found after the first is taken), as the tracker's
 * old table allowed; or put, which replaces a record of the same key in the
 * one probe (an allocation at an address still live). The table grows (doubles) at 3/4 full; if the host has
 * no memory for that, the add fails and the table stays as it was. It
 * never shrinks: what it holds is bounded by the most blocks ever live at
 * once. Not thread-safe: the tracker's lock guards it. */
#include <stdlib.h>
#include <string.h>

#include "core.h"

#define FIRST_SLOTS 256
#define HASH_MULTIPLIER 0x9E3779B97F4A7C15ull /* 2^64 / golden ratio: spreads aligned addresses */

void *(*ol_records_calloc)(size_t count, size_t size) = calloc;

void ol_records_init(ol_records_t *t)
{
  memset(t, 0, sizeof *t);
}

void ol_records_free(ol_records_t *t)
{
  free(t->slots);
  ol_records_init(t);
}

static size_t home_of(const ol_records_t *t, uint64_t key)
{
  return (size_t)((key * HASH_MULTIPLIER) >> t->shift);
}

static size_t capacity_of(const ol_records_t *t)
{
  return t->slots ? t->mask + 1 : 0;
}

/* Moves every record into a table of `slots` slots (a power of two). */
static bool rehash(ol_records_t *t, size_t slots)
{
  ol_record_t *fresh = ol_records_calloc(slots, sizeof *fresh);
  if (!fresh)
    return false;
  ol_records_t grown = *t;
  grown.slots = fresh;
  grown.mask = slots - 1;
  grown.shift = 64;
  for (size_t s = slots; s > 1; s >>= 1)
    grown.shift--;
  for (size_t i = 0; i < capacity_of(t); i++) {
    if (t->slots[i].key == 0)
      continue;
    size_t j = home_of(&grown, t->slots[i].key);
    while (fresh[j].key != 0)
      j = (j + 1) & grown.mask;
    fresh[j] = t->slots[i];
  }
  free(t->slots);
  *t = grown;
  return true;
}

static bool __attribute__((noinline)) grow(ol_records_t *t)
{
  size_t cap = capacity_of(t);
  return rehash(t, cap ? 2 * cap : FIRST_SLOTS);
}

/* At most 3/4 full after the add; an empty table (no slots) has no room. */
static inline bool room_for_one_more(ol_records_t *t)
{
  return (t->slots && 4 * (t->in_slots + 1) <= 3 * (t->mask + 1)) || grow(t);
}

ol_record_t *ol_records_add(ol_records_t *t, uint64_t key)
{
  ol_record_t *rec;
  if (key == 0) {
    if (t->zero_used) /* a second record of key 0: no room to keep both */
      return NULL;
    t->zero_used = true;
    rec = &t->zero;
  } else {
    if (!room_for_one_more(t))
      return NULL;
    size_t i = home_of(t, key);
    while (t->slots[i].key != 0)
      i = (i + 1) & t->mask;
    t->in_slots++;
    rec = &t->slots[i];
  }
  *rec = (ol_record_t){.key = key, .site = -1};
  return rec;
}

ol_record_t *ol_records_put(ol_records_t *t, uint64_t key, ol_record_t *old, bool *replaced)
{
  ol_record_t *rec;
  *replaced = false;
  if (key == 0) {
    if (t->zero_used) {
      *old = t->zero;
      *replaced = true;
    }
    t->zero_used = true;
    rec = &t->zero;
  } else {
    if (!room_for_one_more(t))
      return NULL;
    size_t i = home_of(t, key);
    for (; t->slots[i].key != 0; i = (i + 1) & t->mask) {
      if (t->slots[i].key == key) {
        *old = t->slots[i];
        *replaced = true;
        break;
      }
    }
    if (!*replaced)
      t->in_slots++;
    rec = &t->slots[i];
  }
  *rec = (ol_record_t){.key = key, .site = -1};
  return rec;
}

/* The slot holding key, or SIZE_MAX. */
static size_t slot_of(const ol_records_t *t, uint64_t key)
{
  if (!t->slots)
    return SIZE_MAX;
  for (size_t i = home_of(t, key);; i = (i + 1) & t->mask) {
    if (t->slots[i].key == key)
      return i;
    if (t->slots[i].key == 0)
      return SIZE_MAX;
  }
}

ol_record_t *ol_records_find(ol_records_t *t, uint64_t key)
{
  if (key == 0)
    return t->zero_used ? &t->zero : NULL;
  size_t i = slot_of(t, key);
  return i == SIZE_MAX ? NULL : &t->slots[i];
}

/* Empties slot i and pulls back the entries after it that may sit there
 * (those whose home is not cyclically within (i, j]), so that every
 * entry stays reachable from its home without crossing an empty slot. */
static void remove_slot(ol_records_t *t, size_t i)
{
  size_t j = i;
  for (;;) {
    j = (j + 1) & t->mask;
    if (t->slots[j].key == 0)
      break;
    size_t home = home_of(t, t->slots[j].key);
    bool home_in_gap = i <= j ? (home > i && home <= j) : (home > i || home <= j);
    if (home_in_gap)
      continue;
    t->slots[i] = t->slots[j];
    i = j;
  }
  t->slots[i].key = 0;
  t->in_slots--;
}

bool ol_records_take(ol_records_t *t, uint64_t key, ol_record_t *out)
{
  if (key == 0) {
    if (!t->zero_used)
      return false;
    *out = t->zero;
    t->zero_used = false;
    return true;
  }
  size_t i = slot_of(t, key);
  if (i == SIZE_MAX)
    return false;
  *out = t->slots[i];
  remove_slot(t, i);
  return true;
}

/* A removal can pull an entry from after slot i into slot i (or, at the
 * array's end, one from its start into the last slot), so slot i is looked
 * at again before moving on: every entry is seen at least once. */
size_t ol_records_take_range(ol_records_t *t, uint64_t first, uint64_t end,
                             void (*taken)(const ol_record_t *rec, void *arg), void *arg)
{
  size_t n = 0;
  ol_record_t rec;
  if (t->zero_used && first == 0 && end > 0 && ol_records_take(t, 0, &rec)) {
    taken(&rec, arg);
    n++;
  }
  for (size_t i = 0; i < capacity_of(t);) {
    uint64_t key = t->slots[i].key;
    if (key == 0 || key < first || key >= end) {
      i++;
      continue;
    }
    rec = t->slots[i];
    remove_slot(t, i);
    taken(&rec, arg);
    n++;
  }
  return n;
}

size_t ol_records_count(const ol_records_t *t)
{
  return t->in_slots + (t->zero_used ? 1 : 0);
}

void ol_records_each(const ol_records_t *t, void (*visit)(const ol_record_t *rec, void *arg),
                     void *arg)
{
  if (t->zero_used)
    visit(&t->zero, arg);
  for (size_t i = 0; t->slots && i <= t->mask; i++)
    if (t->slots[i].key != 0)
      visit(&t->slots[i], arg);
}
