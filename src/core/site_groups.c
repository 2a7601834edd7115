/* site_groups.c: call sites as a report shows them.
 *
 * A site is one distinct stack; a report shows a site by its first few
 * frames. On PyTorch many stacks share those frames and differ deeper in
 * native code (the same Python line reaching the allocator through
 * different operators), so a report listing sites would show one line
 * several times, each with a share of its bytes. Here sites are grouped by
 * the text the report shows, their figures summed, and the largest groups
 * picked. Report time only: every site is named once (dladdr), never on the
 * allocation path. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(obj) (table_full = true)
static _Thread_local bool table_full;
#include <uthash.h>

#include "core.h"

typedef struct group {
  char *text;
  ol_site_group_t figures;
  UT_hash_handle hh;
} group_t;

static bool add_to_group(group_t **table, const char *text, int32_t id, int64_t figure,
                         int64_t allocations)
{
  group_t *g;
  HASH_FIND_STR(*table, text, g);
  if (!g) {
    g = calloc(1, sizeof *g);
    if (!g || !(g->text = strdup(text))) {
      free(g);
      return false;
    }
    g->figures.id = id;
    table_full = false;
    HASH_ADD_KEYPTR(hh, *table, g->text, strlen(g->text), g);
    if (table_full) {
      free(g->text);
      free(g);
      return false;
    }
  }
  g->figures.bytes += figure;
  g->figures.allocations += allocations;
  g->figures.sites++;
  return true;
}

static int larger_first(const void *a, const void *b)
{
  const ol_site_group_t *x = a, *y = b;
  return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : (x->id > y->id) - (x->id < y->id);
}

static void clear(group_t **table)
{
  group_t *g, *next;
  HASH_ITER(hh, *table, g, next) {
    HASH_DEL(*table, g);
    free(g->text);
    free(g);
  }
}

/* Keeps the max largest groups of the table in out, largest first. */
static size_t pick_largest(group_t *table, ol_site_group_t *out, size_t max)
{
  size_t n = 0;
  for (group_t *g = table; g; g = g->hh.next) {
    size_t at = n < max ? n++ : max;
    while (at > 0 && larger_first(&g->figures, &out[at - 1]) < 0) {
      if (at < max)
        out[at] = out[at - 1];
      at--;
    }
    if (at < max)
      out[at] = g->figures;
  }
  return n;
}

long ol_site_groups_top(const ol_sites_t *sites, ol_site_order_t order, size_t frames,
                        ol_site_frames_fn frames_of, ol_site_group_t *out, size_t max)
{
  group_t *table = NULL;
  ol_buf_t text = {0};
  bool ok = true;
  for (size_t i = 0; ok && i < ol_sites_count(sites); i++) {
    const ol_site_figures_t *f = ol_sites_figures(sites, (int32_t)i);
    int64_t figure = ol_sites_figure(sites, (int32_t)i, order);
    if (figure <= 0)
      continue;
    text.len = 0;
    ol_frame_join_t j = {&text, 0};
    ol_buf_printf(&text, "%s", "");
    frames_of(sites, (int32_t)i, frames, ol_frame_join_text, &j);
    ok = !text.failed && add_to_group(&table, text.data, (int32_t)i, figure,
                                      f->allocations);
  }
  long n = ok ? (long)pick_largest(table, out, max) : -1;
  clear(&table);
  ol_buf_free(&text);
  return n;
}
