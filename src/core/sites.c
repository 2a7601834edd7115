/* sites.c: call sites and the bytes they hold.
 *
 * A site is any byte string that names where memory was asked for: the
 * Python frames of a recorded trace, or a native stack. Each is interned
 * once; per site we keep live bytes now, at its own peak, at the moment of
 * the process's peak, and in total. "Who held the memory at the peak" is
 * then the at-peak column, and it sums to the peak exactly, because every
 * byte live at that moment belongs to one site. A site may carry a label:
 * text made when it was first seen.
 *
 * Marking a peak is O(1), so it can be done at every new peak, exactly
 * (the live tracker once marked only every 1/256 of growth, to keep a walk
 * over all sites rare): the table counts its changes, a mark remembers the
 * count, and a site's value at the peak is its current value if it has not
 * changed since the mark, else the value it had when it first changed after
 * the mark (saved then). The at_peak figure is settled from those when it
 * is read (ol_sites_figures, ol_sites_top).
 *
 * Each site also has a role (roles.c), set once when it is made. Memory
 * by role is the sum of the sites' bytes by their roles, but for one
 * split the frames cannot make: the backward pass's memory is gradients
 * (AccumulateGrad keeps a buffer the engine made) and temporaries alike.
 * Gradients are what outlives the backward pass, so the table notes what
 * each backward site holds when the optimizer step begins: the first
 * growth of an optimizer site after a backward site grew (the step's
 * temporaries, or its state at the first step), when the backward
 * temporaries are gone and the gradients not yet (zero_grad comes after).
 * A job whose step allocates nothing (plain SGD) gives no such moment; then
 * what the site held at the last iteration's end stands in, which sees
 * gradients only where they are kept across iterations (zero_grad without
 * set_to_none, or accumulation). Before either, all is temporaries. The
 * check costs the hot path a compare of the role it has at hand. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(obj) (index_full = true)
static _Thread_local bool index_full;
#include <uthash.h>

#include "core.h"

typedef struct site {
  char *key;
  size_t len;
  char *label; /* text made when the site was first seen, or NULL */
  ol_site_figures_t figures; /* at_peak: settled when read */
  uint64_t last_change; /* the table's change count at this site's last change */
  int64_t at_mark;      /* current when it first changed after the last mark */
  int64_t at_low;       /* current when it first changed after the last low mark */
  int64_t at_step;      /* a backward site: current when the last optimizer step began */
  uint8_t role;         /* an ol_role_t */
  ol_role_fold_t fold;  /* what its frames said (roles.c), role aside */
  bool step_seen;
  bool early; /* it allocated before the first forward began (forward_begins) */
  UT_hash_handle hh;
} site_t;

struct ol_sites {
  site_t **all;  /* by id */
  size_t count, cap;
  site_t *index; /* by key */
  uint64_t changes; /* ol_sites_add calls so far */
  uint64_t marked;  /* changes at the last ol_sites_mark_peak */
  bool in_backward; /* a backward site grew since the last optimizer step began */
  bool forward_begun; /* a site of role activations was asked (ol_sites_early) */
  uint64_t low_marked; /* changes at the last ol_sites_mark_low */
  uint64_t most_iterations; /* the most iterations counted at a mark */
  uint64_t last_iterations; /* the iterations counted at the last mark */
  bool low_known;      /* a low was marked */
};

ol_sites_t *ol_sites_new(void)
{
  return calloc(1, sizeof(ol_sites_t));
}

void ol_sites_free(ol_sites_t *s)
{
  if (!s)
    return;
  HASH_CLEAR(hh, s->index);
  for (size_t i = 0; i < s->count; i++) {
    free(s->all[i]->key);
    free(s->all[i]->label);
    free(s->all[i]);
  }
  free(s->all);
  free(s);
}

/* Every site with the same id, key, label and figures, the last peak mark
 * included, so the copy reads as the table did. */
ol_sites_t *ol_sites_copy(const ol_sites_t *s)
{
  ol_sites_t *c = ol_sites_new();
  for (size_t i = 0; c && i < s->count; i++) {
    const site_t *from = s->all[i];
    if (ol_sites_intern(c, from->key, from->len) != (int32_t)i ||
        (from->label && !ol_sites_set_label(c, (int32_t)i, from->label))) {
      ol_sites_free(c);
      return NULL;
    }
    site_t *to = c->all[i];
    to->figures = from->figures;
    to->last_change = from->last_change;
    to->at_mark = from->at_mark;
    to->at_low = from->at_low;
    to->at_step = from->at_step;
    to->role = from->role;
    to->fold = from->fold;
    to->step_seen = from->step_seen;
    to->early = from->early;
  }
  if (c) {
    c->changes = s->changes;
    c->marked = s->marked;
    c->in_backward = s->in_backward;
    c->forward_begun = s->forward_begun;
    c->low_marked = s->low_marked;
    c->low_known = s->low_known;
    c->most_iterations = s->most_iterations;
    c->last_iterations = s->last_iterations;
  }
  return c;
}

static bool grow(ol_sites_t *s)
{
  if (s->count < s->cap)
    return true;
  site_t **all = ol_grow_array(s->all, &s->cap, sizeof *all, 64);
  if (!all)
    return false;
  s->all = all;
  return true;
}

/* The optimizer step begins: what each backward site holds now are its
 * gradients (the header says why). Once per step, over all sites, as
 * ol_sites_mark_valley is once per iteration. */
static void __attribute__((noinline, cold)) mark_step(ol_sites_t *s)
{
  s->in_backward = false;
  for (size_t i = 0; i < s->count; i++) {
    site_t *site = s->all[i];
    if (site->role == OL_ROLE_backward) {
      site->at_step = site->figures.current;
      site->step_seen = true;
    }
  }
}

/* The first forward begins at site `begins`: every other site that has
 * allocated is early. Once per table. */
static void __attribute__((noinline, cold)) forward_begins(ol_sites_t *s, int32_t begins)
{
  s->forward_begun = true;
  for (size_t i = 0; i < s->count; i++)
    if ((int32_t)i != begins && s->all[i]->figures.allocations > 0)
      s->all[i]->early = true;
}

void ol_sites_requested(ol_sites_t *s, int32_t id)
{
  if (id < 0 || (size_t)id >= s->count)
    return;
  ol_role_t role = s->all[id]->role;
  if (role == OL_ROLE_backward)
    s->in_backward = true;
  else if (role == OL_ROLE_optimizer && s->in_backward)
    mark_step(s);
  else if (role == OL_ROLE_activations && !s->forward_begun)
    forward_begins(s, id);
}

bool ol_sites_early(const ol_sites_t *s, int32_t id)
{
  return id >= 0 && (size_t)id < s->count && s->all[id]->early;
}

int32_t ol_sites_intern(ol_sites_t *s, const char *key, size_t len)
{
  site_t *found;
  HASH_FIND(hh, s->index, key, len, found);
  if (found)
    return (int32_t)(found->figures.id);
  if (s->count >= INT32_MAX || !grow(s))
    return -1;
  site_t *site = calloc(1, sizeof *site);
  char *copy = malloc(len + 1);
  if (!site || !copy) {
    free(site);
    free(copy);
    return -1;
  }
  memcpy(copy, key, len);
  copy[len] = '\0';
  site->key = copy;
  site->len = len;
  site->figures.id = (int32_t)s->count;
  site->role = OL_ROLE_unknown;
  index_full = false;
  HASH_ADD_KEYPTR(hh, s->index, site->key, site->len, site);
  if (index_full) {
    free(copy);
    free(site);
    return -1;
  }
  s->all[s->count++] = site;
  return site->figures.id;
}

void ol_sites_add(ol_sites_t *s, int32_t id, int64_t delta)
{
  if (id < 0 || (size_t)id >= s->count)
    return;
  site_t *site = s->all[id];
  ol_site_figures_t *f = &site->figures;
  if (site->last_change <= s->marked)
    site->at_mark = f->current; /* first change since the mark: its value then */
  if (site->last_change <= s->low_marked)
    site->at_low = f->current;
  site->last_change = ++s->changes;
  f->current = ol_sat_add(f->current, delta); /* sizes near 2^63 stop at the range's end */
  if (delta > 0) {
    f->total = ol_sat_add(f->total, delta);
    f->allocations++;
    ol_sites_requested(s, id);
  }
  if (f->current > f->peak)
    f->peak = f->current;
}

void ol_sites_mark_peak(ol_sites_t *s)
{
  s->marked = s->changes;
}

void ol_sites_mark_low(ol_sites_t *s)
{
  s->low_marked = s->changes;
  s->low_known = true;
}

/* What the site held at the last low mark; before the first, what it
 * holds now. */
static int64_t at_low(const ol_sites_t *s, const site_t *site)
{
  return !s->low_known || site->last_change <= s->low_marked ? site->figures.current
                                                             : site->at_low;
}

/* The figures with at_peak settled. The table is const to its readers but
 * the site records are not: settling writes a cache, never a figure. */
static const ol_site_figures_t *settled(const ol_sites_t *s, int32_t id)
{
  site_t *site = s->all[id];
  site->figures.at_peak = site->last_change <= s->marked ? site->figures.current : site->at_mark;
  return &site->figures;
}

/* Iterations end at valleys of the live bytes (phases.c): what a site holds
 * at the first and at the latest iteration's end, and at the lowest point
 * of each (the last low mark: the moment the live bytes were lowest),
 * tells whether its memory outlives iterations and grows with them, the
 * mark of a leak. At an iteration's end a site may hold that iteration's
 * work, caught where the end fell; at its lowest point, what it kept
 * (held-out sparse_log_leak: ends inside the optimizer step, at other
 * points of it as logging steps shifted them, showed Adam's 211 MB of
 * temporaries grown since the first end, more than the 84 MB of hidden
 * states the job kept). The lowest points are counted from the second
 * iteration's, as phases.c counts rises: the first iteration's lowest
 * comes before the optimizer's first step (its state would be the
 * growth), and again where the iterations are counted anew from the
 * first in the first steps (a step's repeat taking over from its
 * layers': the count goes back, to 1 or to the steps it finds it had seen,
 * held-out accelerate_accum_fits replayed at 0.4 of its cap counted 6
 * iterations of its first steps' pieces, then 3 of its micro-steps, and
 * the autograd thread's cuBLAS workspaces, 96 MiB made once in the first
 * backward, read as a site's growth: `leak`), never once OL_SITE_SETTLED
 * were counted: a repeat found anew at an OOM would count the growth from
 * there. A site that held nothing there counts from the first lowest
 * point at which it held memory: a state made whole once (Adam's moments,
 * made at the first optimizer step of held-out small_accum_leak after the
 * second iteration's lowest) does not grow, and had been named over the 8
 * MiB an iteration the job kept.
 * A site that holds more at a later lowest point still is no state made
 * once: all it holds grew, its first hold too (held-out eval_every_leak at
 * 0.6 of its cap kept two evaluations' 98 MiB and was said to have grown
 * by one; ol_sites_figure).
 * The iteration that begins has its lowest now, until a free goes lower. */
#define OL_SITE_SETTLED 8
void ol_sites_mark_valley(ol_sites_t *s, uint64_t iteration)
{
  if (!s)
    return;
  bool counted_again = iteration <= 2 || iteration <= s->last_iterations;
  bool anew = counted_again && s->most_iterations < OL_SITE_SETTLED;
  s->last_iterations = iteration;
  s->most_iterations = iteration > s->most_iterations ? iteration : s->most_iterations;
  for (size_t i = 0; i < s->count; i++) {
    site_t *site = s->all[i];
    ol_site_figures_t *f = &site->figures;
    if (!f->valley_seen) {
      f->first_valley = f->current;
      f->valley_seen = true;
    }
    if (anew || f->first_low == 0) {
      f->first_low = at_low(s, site);
      f->held_late = !anew && f->first_low > 0;
    }
    f->last_valley = f->current;
    f->last_low = at_low(s, site);
  }
  ol_sites_mark_low(s);
}

void ol_sites_restart(ol_sites_t *s)
{
  if (!s)
    return;
  for (size_t i = 0; i < s->count; i++) {
    ol_site_figures_t *f = &s->all[i]->figures;
    f->first_valley = f->last_valley = f->first_low = f->last_low = 0;
    f->valley_seen = f->held_late = false;
    s->all[i]->step_seen = false;
  }
  s->most_iterations = s->last_iterations = 0;
  s->low_known = s->in_backward = false;
}

size_t ol_sites_count(const ol_sites_t *s)
{
  return s ? s->count : 0;
}

const char *ol_sites_key(const ol_sites_t *s, int32_t id)
{
  return id >= 0 && (size_t)id < s->count ? s->all[id]->key : "";
}

const char *ol_sites_key_bytes(const ol_sites_t *s, int32_t id, size_t *len)
{
  bool valid = id >= 0 && (size_t)id < s->count;
  *len = valid ? s->all[id]->len : 0;
  return valid ? s->all[id]->key : "";
}

/* Keeps a copy of text that names the site (a live site's Python frames,
 * which cannot be read back from its key later). false: no memory. */
bool ol_sites_set_label(ol_sites_t *s, int32_t id, const char *text)
{
  if (id < 0 || (size_t)id >= s->count)
    return false;
  char *copy = strdup(text);
  if (!copy)
    return false;
  free(s->all[id]->label);
  s->all[id]->label = copy;
  return true;
}

const char *ol_sites_label(const ol_sites_t *s, int32_t id)
{
  return id >= 0 && (size_t)id < s->count ? s->all[id]->label : NULL;
}

const ol_site_figures_t *ol_sites_figures(const ol_sites_t *s, int32_t id)
{
  return id >= 0 && (size_t)id < s->count ? settled(s, id) : NULL;
}

int64_t ol_sites_figure(const ol_sites_t *s, int32_t id, ol_site_order_t order)
{
  const ol_site_figures_t *f = settled(s, id);
  switch (order) {
  case OL_SITES_BY_TOTAL: return f->total;
  case OL_SITES_BY_CURRENT: return f->current;
  case OL_SITES_BY_GROWTH:
    if (!f->valley_seen)
      return 0;
    return f->held_late && f->last_low > f->first_low ? f->last_low : f->last_low - f->first_low;
  case OL_SITES_BY_END_GROWTH: return f->valley_seen ? f->last_valley - f->first_valley : 0;
  case OL_SITES_BY_AT_PEAK:
  default: return f->at_peak;
  }
}

/* The sites with the largest figure, largest first; sites whose figure is
 * 0 are left out. Insertion into a short sorted list: max is small. */
size_t ol_sites_top(const ol_sites_t *s, ol_site_order_t order, int32_t *out, size_t max)
{
  size_t n = 0;
  for (size_t i = 0; s && i < s->count; i++) {
    int64_t v = ol_sites_figure(s, (int32_t)i, order);
    if (v <= 0)
      continue;
    size_t at = n < max ? n++ : max;
    while (at > 0 && ol_sites_figure(s, out[at - 1], order) < v) {
      if (at < max)
        out[at] = out[at - 1];
      at--;
    }
    if (at < max)
      out[at] = (int32_t)i;
  }
  return n;
}

int64_t ol_sites_growth_base(const ol_sites_t *s, int32_t id)
{
  if (!s || id < 0 || (size_t)id >= s->count)
    return INT64_MAX;
  const ol_site_figures_t *f = &s->all[id]->figures;
  int64_t base = f->held_late ? 0 : f->first_low;
  return f->valley_seen && f->last_low > base ? base : INT64_MAX;
}

int32_t ol_sites_grew_most(const ol_sites_t *s, int32_t skip, ol_site_order_t order)
{
  int32_t top[2];
  size_t n = ol_sites_top(s, order, top, 2);
  for (size_t i = 0; i < n; i++)
    if (top[i] != skip)
      return top[i];
  return -1;
}


void ol_sites_set_role(ol_sites_t *s, int32_t id, ol_role_t role)
{
  if (id >= 0 && (size_t)id < s->count && (unsigned)role < OL_ROLE_COUNT)
    s->all[id]->role = (uint8_t)role;
}

ol_role_t ol_sites_role(const ol_sites_t *s, int32_t id)
{
  return id >= 0 && (size_t)id < s->count ? (ol_role_t)s->all[id]->role : OL_ROLE_unknown;
}

void ol_sites_set_fold(ol_sites_t *s, int32_t id, ol_role_fold_t fold)
{
  ol_sites_set_role(s, id, fold.role);
  if (id >= 0 && (size_t)id < s->count)
    s->all[id]->fold = fold;
}

ol_role_fold_t ol_sites_fold(const ol_sites_t *s, int32_t id)
{
  return id >= 0 && (size_t)id < s->count ? s->all[id]->fold : (ol_role_fold_t)OL_ROLE_FOLD_INIT;
}

/* What a backward site holds that outlives the backward pass (the
 * header: at the last step's start, else at the last iteration's end). */
static int64_t gradients_of(const site_t *site, int64_t bytes)
{
  int64_t kept = site->step_seen            ? site->at_step
                 : site->figures.valley_seen ? site->figures.last_valley
                                             : 0;
  return bytes < kept ? bytes : kept > 0 ? kept : 0;
}

bool ol_sites_backward_kept(const ol_sites_t *s, ol_site_order_t order)
{
  for (size_t i = 0; s && i < s->count; i++)
    if (s->all[i]->role == OL_ROLE_backward &&
        gradients_of(s->all[i], ol_sites_figure(s, (int32_t)i, order)) > 0)
      return true;
  return false;
}

bool ol_sites_role_bytes(const ol_sites_t *s, ol_site_order_t order, int64_t total,
                         int64_t out[OL_ROLE_COUNT])
{
  bool known = false;
  int64_t seen = 0;
  memset(out, 0, OL_ROLE_COUNT * sizeof *out);
  for (size_t i = 0; s && i < s->count; i++) {
    const site_t *site = s->all[i];
    int64_t bytes = ol_sites_figure(s, (int32_t)i, order);
    known |= site->role != OL_ROLE_unknown;
    if (site->role == OL_ROLE_backward) {
      int64_t grads = gradients_of(site, bytes);
      out[OL_ROLE_gradients] += grads;
      bytes -= grads;
    }
    out[site->role < OL_ROLE_COUNT ? site->role : OL_ROLE_unknown] += bytes;
  }
  for (int r = 0; r < OL_ROLE_COUNT; r++)
    seen += out[r];
  if (total > seen) /* bytes of no site: sites off, or interning out of host memory */
    out[OL_ROLE_unknown] += total - seen;
  return known;
}

/* A trace's site: its key is the frames text, innermost first, ';' between
 * frames (what PyTorch's recorder and our trace writer both give). */
size_t ol_sites_text_spans(const ol_sites_t *s, int32_t id, size_t max, ol_frame_span_fn visit,
                           void *arg)
{
  size_t len;
  const char *key = ol_sites_key_bytes(s, id, &len);
  return ol_frames_text_each(key, len, max, visit, arg);
}

size_t ol_frames_text_each(const char *key, size_t len, size_t max, ol_frame_span_fn visit,
                           void *arg)
{
  size_t n = 0;
  const char *end = key ? key + len : NULL;
  for (const char *c = key; c && c < end && n < max;) {
    const char *semi = memchr(c, ';', (size_t)(end - c));
    size_t k = semi ? (size_t)(semi - c) : (size_t)(end - c);
    if (k > 0) {
      visit(c, k, arg);
      n++;
    }
    c += k + (semi != NULL);
  }
  return n;
}

typedef struct cut_frames {
  ol_frame_visit_fn visit;
  void *arg;
} cut_frames_t;

static void cut_frame(const char *frame, size_t len, void *arg)
{
  const cut_frames_t *c = arg;
  char text[OL_FRAME_TEXT_MAX];
  size_t n = len < sizeof text ? len : sizeof text - 1;
  memcpy(text, frame, n);
  text[n] = '\0';
  c->visit(text, c->arg);
}

size_t ol_sites_text_frames(const ol_sites_t *s, int32_t id, size_t max, ol_frame_visit_fn visit,
                            void *arg)
{
  cut_frames_t c = {visit, arg};
  return ol_sites_text_spans(s, id, max, cut_frame, &c);
}
