/* report_model.c: one report as data (core.h's ol_report_t), and how a
 * device's part of it is built from a table of call sites.
 *
 * The model owns every string and list it shows: whoever builds it (the
 * library under its tracker's lock, `oomlens report` from a parsed JSON
 * tree or a trace) lets go of its sources before it is rendered, and
 * report_render.c prints any model the same way. The site lists are made
 * here, once, as the library has always shown them: stacks alike in the
 * frames shown are one entry (on PyTorch one Python line reaches the
 * allocator by several native paths), a group named by the frames shown, a
 * single stack by all its frames. */
#include <stdlib.h>
#include <string.h>

#include "core.h"

int ol_report_init(ol_report_t *r, int device_count)
{
  *r = (ol_report_t){.format = OL_REPORT_FORMAT, .minor = OL_REPORT_MINOR};
  if (device_count <= 0)
    return 0;
  r->devices = calloc((size_t)device_count, sizeof *r->devices);
  if (!r->devices) {
    r->failed = true;
    return -1;
  }
  r->device_count = device_count;
  for (int d = 0; d < device_count; d++) {
    r->devices[d].device = d;
    r->devices[d].stats.last_oom.grower.id = -1;
  }
  return 0;
}

void ol_report_sites_free(ol_report_sites_t *list)
{
  for (size_t i = 0; i < list->count; i++)
    ol_report_frames_free(&list->site[i].frames);
  free(list->site);
  *list = (ol_report_sites_t){0};
}

static void device_free(ol_report_device_t *d)
{
  for (int i = 0; i <= OL_REPORT_GROWER; i++)
    ol_report_frames_free(&d->oom_names[i]);
  ol_report_frames_free(&d->leak_site);
  free(d->advice);
  ol_report_sites_free(&d->at_peak);
  ol_report_sites_free(&d->by_total);
}

void ol_report_free(ol_report_t *r)
{
  char *texts[] = {r->version, r->mode, r->reason, r->rank, r->command, r->source};
  for (size_t i = 0; i < sizeof texts / sizeof *texts; i++)
    free(texts[i]);
  for (int d = 0; d < r->device_count; d++)
    device_free(&r->devices[d]);
  free(r->devices);
  *r = (ol_report_t){0};
}

bool ol_report_set_text(ol_report_t *r, char **field, const char *text)
{
  char *copy = strdup(text ? text : "");
  if (!copy) {
    r->failed = true;
    return false;
  }
  free(*field);
  *field = copy;
  return true;
}

static bool frames_push(ol_report_frames_t *f, const char *frame, size_t len)
{
  char *copy = malloc(len + 1);
  char **grown = copy ? realloc(f->frame, (f->count + 1) * sizeof *grown) : NULL;
  if (!grown) {
    free(copy);
    return false;
  }
  memcpy(copy, frame, len);
  copy[len] = '\0';
  f->frame = grown;
  f->frame[f->count++] = copy;
  return true;
}

bool ol_report_frames_add(ol_report_t *r, ol_report_frames_t *frames, const char *frame,
                          size_t len)
{
  if (frames_push(frames, frame, len))
    return true;
  r->failed = true;
  return false;
}

void ol_report_frames_free(ol_report_frames_t *f)
{
  for (size_t i = 0; i < f->count; i++)
    free(f->frame[i]);
  free(f->frame);
  *f = (ol_report_frames_t){0};
}

typedef struct collect {
  ol_report_frames_t *frames;
  bool ok;
} collect_t;

static void collect_frame(const char *frame, void *arg)
{
  collect_t *c = arg;
  c->ok = c->ok && frames_push(c->frames, frame, strlen(frame));
}

bool ol_report_frames_collect(ol_report_frames_t *frames, const ol_sites_t *sites,
                              ol_site_frames_fn frames_of, int32_t id, size_t max)
{
  collect_t c = {frames, true};
  frames_of(sites, id, max, collect_frame, &c);
  return c.ok;
}

bool ol_report_is_trace(const ol_report_t *r)
{
  return r->mode && strcmp(r->mode, "trace") == 0;
}

/* The largest entries, groups of stacks alike in the frames shown; singly
 * if grouping ran out of host memory. -1: no memory even for that. */
static long top_groups(const ol_sites_t *sites, ol_site_order_t order,
                       ol_site_frames_fn frames_of, ol_site_group_t *out, size_t max)
{
  long n = ol_site_groups_top(sites, order, OL_REPORT_FRAMES_SHOWN, frames_of, out, max);
  if (n >= 0)
    return n;
  int32_t *top = malloc(max * sizeof *top);
  if (!top)
    return -1;
  size_t singly = ol_sites_top(sites, order, top, max);
  for (size_t i = 0; i < singly && i < max; i++)
    out[i] = (ol_site_group_t){top[i], ol_sites_figure(sites, top[i], order),
                               ol_sites_figures(sites, top[i])->allocations, 1};
  free(top);
  return (long)(singly < max ? singly : max);
}

/* A group of several stacks is named by the frames they share; a single
 * stack keeps all its frames (the JSON lists them, the text shows the
 * first few). */
bool ol_report_sites_build(ol_report_sites_t *list, const ol_sites_t *sites,
                           ol_site_order_t order, ol_site_frames_fn frames_of, size_t max)
{
  ol_report_sites_free(list);
  if (max == 0)
    return true;
  ol_site_group_t *top = malloc(max * sizeof *top);
  long n = top ? top_groups(sites, order, frames_of, top, max) : -1;
  list->site = n > 0 ? calloc((size_t)n, sizeof *list->site) : NULL;
  bool ok = n == 0 || list->site;
  for (long i = 0; list->site && i < n; i++) {
    ol_report_site_t *s = &list->site[i];
    *s = (ol_report_site_t){.bytes = top[i].bytes, .allocations = top[i].allocations,
                            .stacks = top[i].sites};
    ok &= ol_report_frames_collect(&s->frames, sites, frames_of, top[i].id,
                                   top[i].sites > 1 ? OL_REPORT_FRAMES_SHOWN : SIZE_MAX);
    list->count++;
  }
  free(top);
  return ok;
}

static void site_list(ol_report_t *r, ol_report_sites_t *list, const ol_sites_t *sites,
                      ol_site_order_t order, ol_site_frames_fn frames_of)
{
  if (!ol_report_sites_build(list, sites, order, frames_of, OL_REPORT_SITES_KEPT))
    r->failed = true;
}

/* The record's site ids become slots of the device's own names. */
static void name_site(ol_report_t *r, ol_report_device_t *d, ol_oom_site_t *site, int slot,
                      const ol_sites_t *sites, ol_site_frames_fn frames_of)
{
  ol_report_frames_free(&d->oom_names[slot]);
  if (!ol_report_frames_collect(&d->oom_names[slot], sites, frames_of, site->id,
                                OL_REPORT_FRAMES_SHOWN))
    r->failed = true;
  site->id = slot;
}

static void unnamed(ol_oom_record_t *rec)
{
  rec->holder_count = 0;
  rec->grower = (ol_oom_site_t){-1, 0};
}

/* The leak warning's site, named as the diagnosis's are. */
static void name_leak_site(ol_report_t *r, ol_report_device_t *d, const ol_sites_t *sites,
                           ol_site_frames_fn frames_of)
{
  ol_leak_warning_t *w = &d->stats.phases.leak;
  if (!w->fired || w->site < 0)
    return;
  ol_report_frames_free(&d->leak_site);
  if (!ol_report_frames_collect(&d->leak_site, sites, frames_of, w->site, OL_REPORT_FRAMES_SHOWN))
    r->failed = true;
  w->site = 0;
}

/* Memory by role from the same table as the lists: a report's rows are
 * the sums the OOM record's role_bytes is made of (ol_sites_role_bytes). */
static void device_roles(ol_report_device_t *d, const ol_sites_t *sites)
{
  const ol_stat_t *allocated = &d->stats.allocated_bytes[OL_POOL_ALL];
  d->roles_known = ol_sites_role_bytes(sites, OL_SITES_BY_AT_PEAK, allocated->peak,
                                       d->roles_at_peak);
  ol_sites_role_bytes(sites, OL_SITES_BY_CURRENT, allocated->current, d->roles_now);
}

void ol_report_device_sites(ol_report_t *r, ol_report_device_t *d, const ol_sites_t *sites,
                            ol_site_frames_fn frames_of)
{
  d->has_sites = true;
  site_list(r, &d->at_peak, sites, OL_SITES_BY_AT_PEAK, frames_of);
  site_list(r, &d->by_total, sites, OL_SITES_BY_TOTAL, frames_of);
  name_leak_site(r, d, sites, frames_of);
  device_roles(d, sites);
  ol_oom_record_t *rec = &d->stats.last_oom;
  if (!d->diagnosed) {
    unnamed(rec);
    return;
  }
  for (int i = 0; i < rec->holder_count; i++)
    name_site(r, d, &rec->holders[i], i, sites, frames_of);
  if (rec->grower.id >= 0)
    name_site(r, d, &rec->grower, OL_REPORT_GROWER, sites, frames_of);
}

void ol_report_device_fill(ol_report_t *r, ol_report_device_t *d, int device,
                           const ol_device_stats_t *stats, const ol_sites_t *sites,
                           ol_site_frames_fn frames_of)
{
  d->device = device;
  if (stats != &d->stats)
    d->stats = *stats;
  d->diagnosed = stats->num_ooms > 0 && stats->last_oom.capacity > 0;
  if (sites) {
    ol_report_device_sites(r, d, sites, frames_of);
  } else {
    unnamed(&d->stats.last_oom);
    d->stats.phases.leak.site = -1;
  }
  ol_report_device_batch(d);
}

/* What the job's highest moment held above what outlives iterations: what
 * must fit at another batch. The iterations found may have missed it (the
 * first step's, before the finder anchored, was 0.2-0.6 GB above their
 * need on ResNet-50), so the larger of the two. No part of it is taken as
 * fixed but autocast's copies of the weights (ol_report_device_batch):
 * the gradients made in each step were, but a site's role at the peak
 * mixes them with backward temporaries that scale, and GPT-2's and
 * ResNet-50's peaks (fp32) rose with the batch from the state with no
 * other fixed part. */
static int64_t peak_need(const ol_device_stats_t *s, int64_t state)
{
  int64_t need = ol_phases_iteration_need(&s->phases);
  int64_t above = s->allocated_bytes[OL_POOL_ALL].peak - state;
  return above > need ? above : need;
}

/* The reserve the allocator kept above its allocations at their peak (the
 * pool's chunks; zero where the allocations are the segments, as under
 * PyTorch's cache in observe mode). */
static int64_t reserve_overhead(const ol_device_stats_t *s)
{
  int64_t over = s->reserved_bytes[OL_POOL_ALL].peak - s->allocated_bytes[OL_POOL_ALL].peak;
  return over > 0 ? over : 0;
}

/* Where the job's peak was its optimizer's update (account.c
 * read_step_highs: the job's peak within a 64th of what that step's
 * update held at its highest), the update's need, as large at any batch,
 * and, into *state and *peak, what the step began with and what its
 * forward and backward needed above that, which scales: all three read
 * off one step (the valley of iterations told mid-step may hold its
 * gradients: qwen_small_autocast at batch 1, 7.39 GiB where its steps
 * began at 5.71). 0, and *state and *peak as they were, where not so (a
 * first step's peak above the update's is not the update's). */
static int64_t update_need(const ol_device_stats_t *s, int64_t *state, int64_t *peak)
{
  int64_t base = s->step_base, update = s->step_update_high, work = s->step_work_high;
  int64_t job_peak = s->allocated_bytes[OL_POOL_ALL].peak;
  if (base <= 0 || work <= base || update <= work || job_peak > ol_sat_add(update, update / 64))
    return 0;
  *state = base;
  *peak = work - base;
  return update - base;
}

void ol_report_device_batch(ol_report_device_t *d)
{
  const ol_device_stats_t *s = &d->stats;
  int64_t need = ol_phases_iteration_need(&s->phases);
  d->has_batch = s->num_ooms == 0 && need > 0 && s->capacity > 0;
  if (!d->has_batch)
    return;
  int64_t state = ol_phases_last_valley(&s->phases);
  int64_t peak = peak_need(s, state);
  int64_t update = update_need(s, &state, &peak);
  /* autocast's copies of the weights, held at the peak whatever the
   * batch, count beside the state (as a second step's do: oom.c) */
  int64_t copies = s->step_copies > 0 && s->step_copies < peak ? s->step_copies : 0;
  d->batch = (ol_batch_figure_t){
    .batch = s->batch,
    .available = s->capacity - (s->outside > 0 ? s->outside : 0),
    .state = state,
    .need = peak,
    .overhead = reserve_overhead(s),
    .fixed = copies,
    .update = update,
  };
  ol_batch_figure_solve(&d->batch);
}

void ol_report_device_timeline(ol_report_device_t *d, const ol_timeline_t *tl)
{
  if (tl != &d->timeline)
    d->timeline = *tl;
  d->has_timeline = true;
  uint32_t kept = tl->oom_count < OL_TIMELINE_OOMS ? tl->oom_count : OL_TIMELINE_OOMS;
  for (uint32_t i = 0; i < kept; i++)
    d->oom_time_unix[i] = tl->start_unix + ol_timeline_seconds(tl, tl->ooms[i].t_ns);
}
