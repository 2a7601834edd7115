/* report_view.c: a JSON report or a trace read back into core's report
 * model (report_view.h), which core's renderer prints as the library
 * wrote it.
 *
 * Reading a JSON report is strict (json_fields.c): every figure is checked
 * for presence, kind and range, and the first that fails refuses the file
 * with its path ("r.json: devices[0].stats.allocated_bytes.all.peak:
 * missing"), exit 2: a figure shown is a figure read. What a later minor
 * format added may be absent from an older report (format 1.0 has no
 * timeline, 1.1 no leak warning), and sections the library writes only
 * when it has them (stacks, sites, the timeline) may be absent; anything
 * present is checked all the same. The ranges keep every sum the renderer,
 * the HTML page and merge make (a spread, a ratio, seconds to nanoseconds)
 * from overflowing. What is read is copied into the model, so the parsed
 * tree is freed before anything is printed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "replay.h"
#include "report_view.h"
#include "trace_csv.h"

/* Bytes and counts: a figure above 2^62 is no device's, and four of them
 * still add up without overflow. */
#define FIGURE ((int64_t)1 << 62)
#define BYTES 0, FIGURE
#define SIGNED -FIGURE, FIGURE
#define OR_NONE -1, FIGURE /* -1: not known */
/* Seconds: of the wall clock (up to the year 5138), and into the job (31
 * years: in nanoseconds still far below 2^63). */
#define WALL 0.0, 1e11
#define SPAN 0.0, 1e9

typedef ol_json_at_t at_t;

typedef struct reading {
  ol_report_t *v;
  int minor; /* the report's: what it must have */
} reading_t;

/* A field the report has from format 1.minor on: needed there, else may. */
static int64_t int_since(const reading_t *r, const at_t *obj, const char *key, int minor,
                         int64_t min, int64_t max)
{
  return r->minor >= minor ? ol_json_need_int(obj, key, min, max)
                           : ol_json_may_int(obj, key, min, max, 0);
}

static void read_stat(const at_t *obj, const char *key, ol_stat_t *stat)
{
  at_t s = ol_json_need_object(obj, key);
  stat->current = ol_json_need_int(&s, "current", BYTES);
  stat->peak = ol_json_need_int(&s, "peak", BYTES);
  stat->allocated = ol_json_need_int(&s, "allocated", BYTES);
  stat->freed = ol_json_need_int(&s, "freed", BYTES);
  if (s.node && !s.check->failed && stat->peak < stat->current) {
    at_t peak = ol_json_at_key(&s, "peak");
    ol_json_at_fail(&peak, "%lld is below current %lld", (long long)stat->peak,
                    (long long)stat->current);
  }
}

static const char *const pool_names[OL_POOL_COUNT] = {"all", "large_pool", "small_pool"};

static void read_pools(const at_t *stats, const char *name, ol_stat_t stat[])
{
  at_t field = ol_json_need_object(stats, name);
  for (int p = 0; p < OL_POOL_COUNT; p++)
    read_stat(&field, pool_names[p], &stat[p]);
}

static void read_stats(const reading_t *r, const at_t *dev, ol_device_stats_t *s)
{
  at_t stats = ol_json_need_object(dev, "stats");
#define OL_READ_POOLS(field, title, bytes) read_pools(&stats, #field, s->field);
  OL_STAT_FIELDS(OL_READ_POOLS)
#undef OL_READ_POOLS
  read_stat(&stats, "oversize_allocations", &s->oversize_allocations);
  read_stat(&stats, "oversize_segments", &s->oversize_segments);
  read_stat(&stats, "vmm_mapped_bytes", &s->vmm_mapped_bytes);
  read_stat(&stats, "va_reserved_bytes", &s->va_reserved_bytes);
  read_stat(&stats, "pending_free_bytes", &s->pending_bytes);
  at_t origins = ol_json_need_object(dev, "origins");
#define OL_READ_ORIGIN(name, what) read_stat(&origins, #name, &s->origin_bytes[OL_ORIGIN_##name]);
  OL_ORIGINS(OL_READ_ORIGIN)
#undef OL_READ_ORIGIN
  at_t calls = ol_json_need_object(dev, "calls");
#define OL_READ_CALL(field, what) s->field = ol_json_need_int(&calls, #field, BYTES);
  OL_CALL_FIELDS_1(OL_READ_CALL)
#undef OL_READ_CALL
#define OL_READ_CALL_8(field, what) s->field = int_since(r, &calls, #field, 8, BYTES);
  OL_CALL_FIELDS_8(OL_READ_CALL_8)
#undef OL_READ_CALL_8
#define OL_READ_CALL_9(field, what) s->field = int_since(r, &calls, #field, 9, BYTES);
  OL_CALL_FIELDS_9(OL_READ_CALL_9)
#undef OL_READ_CALL_9
#define OL_READ_CALL_10(field, what) s->field = int_since(r, &calls, #field, 10, BYTES);
  OL_CALL_FIELDS_10(OL_READ_CALL_10)
#undef OL_READ_CALL_10
  s->num_ooms = ol_json_need_int(dev, "num_ooms", BYTES);
  s->recovered_allocs = int_since(r, dev, "recovered_allocs", 2, BYTES);
  s->last_oom_request = ol_json_need_int(dev, "last_oom_request", BYTES);
  at_t mem = ol_json_need_object(dev, "mem_info");
  s->mem_free = ol_json_need_int(&mem, "free", BYTES);
  s->mem_total = ol_json_need_int(&mem, "total", BYTES);
  s->first_oom_unix = r->minor >= 1 ? ol_json_need_number(dev, "first_oom_time_unix", WALL)
                                    : ol_json_may_number(dev, "first_oom_time_unix", WALL, 0);
  s->last_oom_unix = r->minor >= 1 ? ol_json_need_number(dev, "last_oom_time_unix", WALL)
                                   : ol_json_may_number(dev, "last_oom_time_unix", WALL, 0);
  at_t by_class = r->minor >= 1 ? ol_json_need_object(dev, "ooms_by_class")
                                : ol_json_may_object(dev, "ooms_by_class");
  /* A class newer than the report (undetermined came after 1.1) counts none. */
  for (int c = 0; c < OL_OOM_CLASS_COUNT; c++)
    s->ooms_by_class[c] = ol_json_may_int(&by_class, ol_oom_class_name((ol_oom_class_t)c),
                                          BYTES, 0);
}

static bool class_named(const char *name, ol_oom_class_t *out)
{
  for (int c = 0; name && c < OL_OOM_CLASS_COUNT; c++)
    if (strcmp(name, ol_oom_class_name((ol_oom_class_t)c)) == 0) {
      *out = (ol_oom_class_t)c;
      return true;
    }
  return false;
}

/* Who held what was outside this process's allocations (NVML). */
static void read_outside(const at_t *oom, ol_oom_record_t *r)
{
  at_t list = ol_json_may_array(oom, "external_holders");
  size_t n = ol_json_length(list.node);
  r->other_count = 0;
  for (size_t i = 0; i < n && i < OL_OOM_SITES; i++) {
    at_t h = ol_json_at_index(&list, i);
    r->others[i].pid = (uint32_t)ol_json_need_int(&h, "pid", 0, UINT32_MAX);
    r->others[i].bytes = ol_json_need_int(&h, "bytes", BYTES);
    snprintf(r->others[i].name, sizeof r->others[i].name, "%s",
             ol_json_may_string(&h, "name", ""));
    r->others[i].child = ol_json_may_bool(&h, "child", false); /* minor 14 */
    r->other_count++;
  }
  at_t unlisted = ol_json_may_object(oom, "external_unlisted"); /* minor 14 */
  r->others_unlisted = (int)ol_json_may_int(&unlisted, "processes", 0, 1 << 20, 0);
  r->others_unlisted_bytes = ol_json_may_int(&unlisted, "bytes", BYTES, 0);
  r->self_device_bytes = ol_json_may_int(oom, "self_device_bytes", OR_NONE, -1);
  r->framework_limit = ol_json_may_int(oom, "framework_limit", BYTES, 0); /* minor 15 */
  r->framework_allocated = ol_json_may_int(oom, "framework_allocated", OR_NONE, -1); /* 16 */
  r->no_block_held = ol_json_may_bool(oom, "no_block_held", false);              /* minor 16 */
  r->vmm_reserved = ol_json_may_int(oom, "vmm_reserved", BYTES, 0);                /* minor 16 */
  r->vmm_not_framework = ol_json_may_bool(oom, "vmm_not_framework", false);      /* minor 16 */
  r->request_in_update = ol_json_may_bool(oom, "request_in_update", false);      /* minor 17 */
  r->update_bytes = ol_json_may_int(oom, "update_bytes", BYTES, 0);                /* minor 17 */
  r->request_state_buffers = (int)ol_json_may_int(oom, "request_state_buffers", 0, 16, 0); /* 18 */
  r->request_update_makes_state = ol_json_may_bool(oom, "request_update_makes_state", false);
  r->own_copies = ol_json_may_int(oom, "own_copies", BYTES, 0);
  r->own_copies_own_segments = ol_json_may_int(oom, "own_copies_own_segments", BYTES, 0);
  r->own_copies_early = ol_json_may_int(oom, "own_copies_early", BYTES, 0); /* minor 20 */
  r->own_copies_early_own_segments = ol_json_may_int(oom, "own_copies_early_own_segments", BYTES, 0);
  r->request_is_copy = ol_json_may_bool(oom, "request_is_copy", false);
  r->request_is_copy_own_segment = ol_json_may_bool(oom, "request_is_copy_own_segment", false);
}

/* A site named as the library wrote it: its frames joined by
 * OL_FRAME_SEP, split back so the paragraph shows the first few. */
static void read_name(ol_report_t *v, ol_report_frames_t *frames, const char *name)
{
  for (const char *at = name && *name ? name : NULL; at;) {
    const char *sep = strstr(at, OL_FRAME_SEP);
    size_t n = sep ? (size_t)(sep - at) : strlen(at);
    ol_report_frames_add(v, frames, at, n);
    at = sep ? sep + strlen(OL_FRAME_SEP) : NULL;
  }
}

/* The record keeps site ids; here they index the device's own names. */
static void read_oom_sites(const at_t *oom, ol_report_t *v, ol_report_device_t *d)
{
  ol_oom_record_t *r = &d->stats.last_oom;
  at_t sites = ol_json_may_array(oom, "sites"), grower = ol_json_may_object(oom, "growing_site");
  size_t n = ol_json_length(sites.node);
  r->holder_count = 0;
  for (size_t i = 0; i < n && i < OL_OOM_SITES; i++) {
    at_t site = ol_json_at_index(&sites, i);
    r->holders[i] = (ol_oom_site_t){(int32_t)i, ol_json_need_int(&site, "bytes", BYTES)};
    read_name(v, &d->oom_names[i], ol_json_need_string(&site, "site"));
    r->holder_count++;
  }
  r->grower = (ol_oom_site_t){-1, 0};
  const char *grew = ol_json_may_string(&grower, "site", NULL);
  if (grew) {
    r->grower = (ol_oom_site_t){OL_REPORT_GROWER, ol_json_need_int(&grower, "growth", SIGNED)};
    const char *role = ol_json_may_string(&grower, "role", NULL); /* minor 15 */
    if (!role || !ol_role_parse(role, &r->grower_role))
      r->grower_role = OL_ROLE_unknown;
    r->grower_reading = ol_json_may_bool(&grower, "once", false) /* minor 22 */
                          ? OL_GROWER_ONCE
                        : ol_json_may_bool(&grower, "since_last_iteration", false) /* 23 */
                          ? OL_GROWER_SINCE_LAST
                          : OL_GROWER_KEPT;
    r->grower_per_step = ol_json_may_bool(&grower, "per_step", false); /* minor 24 */
    read_name(v, &d->oom_names[OL_REPORT_GROWER], grew);
  }
}

/* What the call sites were made of, as the library wrote it. */
static void read_stacks(const at_t *root, ol_report_t *v)
{
  at_t s = ol_json_may_object(root, "stacks");
  v->has_stacks = s.node != NULL;
  if (!s.node)
    return;
  at_t py = ol_json_need_object(&s, "python");
  v->stacks.native = ol_json_need_bool(&s, "native");
  v->stacks.depth = (uint64_t)ol_json_need_int(&s, "depth", 0, 1000000);
  v->stacks.sample = (uint64_t)ol_json_need_int(&s, "sample_bytes", BYTES);
  snprintf(v->stacks.py_state, sizeof v->stacks.py_state, "%s",
           ol_json_need_string(&py, "state"));
  snprintf(v->stacks.py_version, sizeof v->stacks.py_version, "%s",
           ol_json_need_string(&py, "version"));
  v->stacks.with_python = (uint64_t)ol_json_need_int(&py, "with_frames", BYTES);
  v->stacks.without_python = (uint64_t)ol_json_need_int(&py, "without_frames", BYTES);
  v->stacks.roles_only = ol_json_may_bool(&s, "roles_only", false);
}

static uint64_t micros(const at_t *obj, const char *key)
{
  return (uint64_t)llround(ol_json_need_number(obj, key, 0, 1e9) * 1e6);
}

/* oomlens's own time on the job's threads (format 1.6; absent before). */
static void read_own_time(const at_t *root, ol_report_t *v)
{
  at_t t = ol_json_may_object(root, "own_time");
  if (!t.node)
    return;
  v->own_time = (ol_report_own_time_t){.known = true, .span_us = micros(&t, "span_s"),
                                       .manage_us = micros(&t, "manage_pool_s"),
                                       .call_sites_us = micros(&t, "call_sites_s")};
}

/* One role's bytes of a roles object; "library" came in minor 12, and a
 * report of an earlier minor had none of it. */
static int64_t role_bytes_in(const at_t *roles, ol_role_t role)
{
  if (role == OL_ROLE_library)
    return ol_json_may_int(roles, ol_role_name(role), BYTES, 0);
  return ol_json_need_int(roles, ol_role_name(role), BYTES);
}

/* What the memory was for at the failure, and the request's own role. */
static void read_oom_roles(const at_t *oom, ol_oom_record_t *r)
{
  at_t roles = ol_json_may_object(oom, "roles");
  r->roles_known = ol_json_may_bool(oom, "roles_known", false);
  for (int i = 0; i < OL_ROLE_COUNT; i++)
    r->role_bytes[i] = role_bytes_in(&roles, (ol_role_t)i);
  const char *role = ol_json_may_string(oom, "request_role", NULL);
  r->request_role_known = ol_role_parse(role, &r->request_role);
  /* minor 11; a report of an earlier minor counted no gradients being made */
  r->gradients_made = ol_json_may_int(oom, "gradients_made", BYTES, 0);
  r->gradients_made_own_segments = ol_json_may_int(oom, "gradients_made_own_segments", BYTES, 0);
  r->request_is_gradient = ol_json_may_bool(oom, "request_is_gradient", false);
}

/* oom.past_repeat (minor 26): what the iteration under way did past a
 * repeat of the last one; absent, not known. */
static void read_past_repeat(const at_t *oom, ol_oom_record_t *r)
{
  at_t more = ol_json_may_object(oom, "past_repeat");
  r->past_repeat = (ol_recent_more_t){.held = -1};
  if (!more.node)
    return;
  r->past_repeat.held = ol_json_need_int(&more, "held", SIGNED);
  r->past_repeat.allocations = (uint64_t)ol_json_need_int(&more, "allocations", BYTES);
  r->past_repeat.frees = (uint64_t)ol_json_need_int(&more, "frees", BYTES);
}

/* How far a failed first iteration had got (minor 4; absent or null:
 * not read, as a report of minor 3 said nothing of it). */
static void read_first_step(const at_t *oom, ol_oom_record_t *r)
{
  at_t fs = ol_json_may_object(oom, "first_step");
  r->first_step = (ol_first_step_t){.stage = OL_FIRST_STEP_UNKNOWN};
  if (!fs.node)
    return;
  r->first_step.read = true;
  const char *stage = ol_json_need_string(&fs, "stage");
  if (stage && !ol_first_step_stage_parse(stage, &r->first_step.stage)) {
    at_t named = ol_json_at_key(&fs, "stage");
    ol_json_at_fail(&named, "\"%.40s\" is not a first-step stage this oomlens knows", stage);
    return;
  }
  r->first_step.layers = ol_json_need_int(&fs, "layers", BYTES);
  r->first_step.layers_done = ol_json_need_int(&fs, "layers_done", BYTES);
  r->first_step.per_layer = ol_json_need_int(&fs, "per_layer", BYTES);
  r->first_step.rest = ol_json_need_int(&fs, "rest", BYTES);
  r->first_step.stack_end = ol_json_need_int(&fs, "stack_end", BYTES);
  r->first_step.largest_after = ol_json_need_int(&fs, "largest_after", BYTES);
  r->first_step.layer_largest = ol_json_need_int(&fs, "layer_largest", BYTES);
  /* minor 7; a report of an earlier minor saw no upcast */
  r->first_step.loss_upcast = ol_json_may_bool(&fs, "loss_upcast", false);
  /* minor 29; a report of an earlier minor read one stack */
  r->first_step.stacks = ol_json_may_int(&fs, "stacks", 0, 2, r->first_step.stage ? 1 : 0);
  r->first_step.weight_element = ol_json_may_int(&fs, "weight_element", 0, 4, 0);
  r->first_step.element_unsure = ol_json_may_bool(&fs, "element_unsure", false); /* 31 */
  r->first_step.weights_cast = ol_json_may_bool(&fs, "weights_cast", false);
  /* minor 30; a report of an earlier minor read no logits ahead */
  r->first_step.logits_ahead = ol_json_may_int(&fs, "logits_ahead", 0, INT64_MAX, 0);
  /* an earlier minor's estimate counted what came after the log-softmax */
  r->first_step.logits_asks = ol_json_may_int(&fs, "logits_asks", 0, INT64_MAX, 2);
}

static void read_oom(const at_t *dev, ol_report_t *v, ol_report_device_t *d)
{
  ol_oom_record_t *r = &d->stats.last_oom;
  at_t oom = ol_json_may_object(dev, "oom");
  if (!oom.node)
    return; /* null: no diagnosis */
  const char *name = ol_json_need_string(&oom, "class");
  if (!class_named(name, &d->stats.last_oom_class)) {
    at_t cls = ol_json_at_key(&oom, "class");
    ol_json_at_fail(&cls, "\"%.40s\" is not a class this oomlens knows", name);
    return;
  }
  r->request = (uint64_t)ol_json_need_int(&oom, "request", 0, INT64_MAX);
  r->capacity = (uint64_t)ol_json_need_int(&oom, "capacity", BYTES);
  r->device_free = ol_json_need_int(&oom, "device_free", OR_NONE);
  r->allocated = ol_json_need_int(&oom, "allocated", BYTES);
  r->reserved = ol_json_need_int(&oom, "reserved", BYTES);
  r->free_reserved = ol_json_need_int(&oom, "free_reserved", OR_NONE);
  r->largest_free_block = ol_json_need_int(&oom, "largest_free_block", OR_NONE);
  r->external = ol_json_need_int(&oom, "external", SIGNED);
  r->persistent = ol_json_need_int(&oom, "persistent", SIGNED);
  r->iterations = (uint64_t)ol_json_need_int(&oom, "iterations", BYTES);
  r->growth = ol_json_need_int(&oom, "growth_per_iteration", SIGNED);
  /* minor 7; 0 (not found) in reports of earlier minors */
  r->need_growth = ol_json_may_int(&oom, "need_growth_per_iteration", SIGNED, 0);
  r->input_growth = ol_json_may_int(&oom, "input_growth_per_iteration", SIGNED, 0);
  r->work_growth = ol_json_may_int(&oom, "allocations_growth_per_iteration", SIGNED, 0);
  r->allocations_made = (uint64_t)ol_json_may_int(&oom, "allocations_made", BYTES, 0); /* 21 */
  r->swings = (uint32_t)ol_json_may_int(&oom, "swings", 0, UINT32_MAX, 0); /* 25 */
  r->swings_kept = ol_json_may_int(&oom, "swings_kept", SIGNED, 0);
  r->held_since_last = ol_json_may_int(&oom, "held_since_last_iteration", OR_NONE, -1); /* 23 */
  r->since_last_by_calls = ol_json_may_bool(&oom, "since_last_by_calls", false); /* 24 */
  r->since_last_by_repeat = ol_json_may_bool(&oom, "since_last_by_repeat", false); /* 28 */
  r->step_repeat_held = ol_json_may_int(&oom, "step_repeat_held", OR_NONE, -1); /* 32 */
  r->step_rest = ol_json_may_int(&oom, "step_rest", BYTES, 0); /* 33 */
  r->step_fixed.gradients = ol_json_may_int(&oom, "step_rest_gradients", BYTES, 0); /* 34 */
  r->step_fixed.held_over = ol_json_may_int(&oom, "step_held_over", BYTES, 0);
  r->step_fixed.copies = ol_json_may_int(&oom, "step_cast_copies", BYTES, 0); /* 35 */
  read_past_repeat(&oom, r);
  r->segments_only = ol_json_need_bool(&oom, "segments_only");
  read_oom_roles(&oom, r);
  r->before_first_free = ol_json_may_int(&oom, "before_first_free", OR_NONE, -1);
  int64_t live = ol_json_may_int(&oom, "before_first_free_live", OR_NONE, -1); /* minor 20 */
  r->before_first_free_gone =
    r->before_first_free >= 0 && live >= 0 && live <= r->before_first_free ? r->before_first_free - live
                                                                          : 0;
  r->iteration_need = ol_json_may_int(&oom, "iteration_need", OR_NONE, -1);
  r->first_persistent = ol_json_may_int(&oom, "first_persistent", OR_NONE, -1);
  r->batch = ol_json_may_int(&oom, "batch", BYTES, 0);
  r->batch_given = ol_json_may_int(&oom, "batch_given", BYTES, r->batch); /* 27 */
  r->restarts = ol_json_may_int(&oom, "restarts", OR_NONE, 0);
  read_first_step(&oom, r);
  /* Not in the JSON: a live job's pool served its tensors in manage mode
   * (oom_live.c), which the advice on fragmentation depends on. */
  r->managed = strcmp(v->mode, "manage") == 0;
  read_oom_sites(&oom, v, d);
  read_outside(&oom, r);
  const char *advice = ol_json_may_string(&oom, "advice", NULL);
  if (advice)
    ol_report_set_text(v, &d->advice, advice);
  d->diagnosed = r->capacity > 0;
}

/* A list of points, as long as want. */
static void read_points(const at_t *t, const char *key, int64_t *out, size_t want)
{
  at_t arr = ol_json_need_array(t, key);
  if (arr.node && ol_json_length(arr.node) != want)
    ol_json_at_fail(&arr, "%zu points, where \"allocated\" has %zu", ol_json_length(arr.node),
                    want);
  for (size_t i = 0; arr.node && i < want; i++)
    out[i] = ol_json_need_int_at(&arr, i, BYTES);
}

static uint64_t ns_of(double seconds)
{
  return (uint64_t)(seconds * 1e9); /* seconds within SPAN: below 2^63 ns */
}

/* The timeline back into its struct; times become nanoseconds from 0, and
 * each OOM keeps the wall clock it was written with. */
static void read_timeline(const at_t *dev, ol_report_device_t *d)
{
  ol_timeline_t *tl = &d->timeline;
  at_t t = ol_json_may_object(dev, "timeline");
  if (!t.node)
    return;
  at_t alloc = ol_json_need_array(&t, "allocated"), peak = ol_json_need_object(&t, "peak");
  size_t n = ol_json_length(alloc.node);
  if (n > OL_TIMELINE_POINTS)
    ol_json_at_fail(&alloc, "%zu points, more than the %d a timeline has", n, OL_TIMELINE_POINTS);
  double interval = ol_json_need_number(&t, "interval_s", 1e-9, 1e6);
  ol_timeline_init(tl, 0, ol_json_need_number(&t, "start_unix", WALL));
  if (t.check->failed)
    return;
  tl->width_ns = (uint64_t)(interval * 1e9 + 0.5);
  tl->count = (uint32_t)n;
  read_points(&t, "allocated", tl->allocated, n);
  read_points(&t, "reserved", tl->reserved, n);
  tl->peak_allocated = ol_json_need_int(&peak, "allocated", BYTES);
  tl->peak_reserved = ol_json_need_int(&peak, "reserved", BYTES);
  tl->peak_allocated_ns = ns_of(ol_json_need_number(&peak, "allocated_t", SPAN));
  tl->peak_reserved_ns = ns_of(ol_json_need_number(&peak, "reserved_t", SPAN));
  tl->oom_count = (uint32_t)ol_json_need_int(&t, "num_ooms", 0, UINT32_MAX);
  at_t ooms = ol_json_need_array(&t, "ooms");
  size_t shown = ol_json_length(ooms.node) < OL_TIMELINE_OOMS ? ol_json_length(ooms.node)
                                                              : OL_TIMELINE_OOMS;
  double when[OL_TIMELINE_OOMS];
  for (size_t i = 0; i < shown; i++) {
    at_t oom = ol_json_at_index(&ooms, i);
    tl->ooms[i].t_ns = ns_of(ol_json_need_number(&oom, "t", SPAN));
    tl->ooms[i].request = ol_json_need_int(&oom, "request", BYTES);
    when[i] = ol_json_may_number(&oom, "time_unix", WALL, -1);
  }
  if (t.check->failed)
    return;
  ol_report_device_timeline(d, tl);
  for (size_t i = 0; i < shown; i++)
    if (when[i] >= 0)
      d->oom_time_unix[i] = when[i];
}

/* A list of call sites. */
static void read_sites(const at_t *arr, ol_report_t *v, ol_report_sites_t *list)
{
  size_t n = ol_json_length(arr->node);
  list->site = n ? calloc(n, sizeof *list->site) : NULL;
  if (n && !list->site) {
    v->failed = true;
    return;
  }
  list->count = n;
  for (size_t i = 0; i < n && !arr->check->failed; i++) {
    at_t site = ol_json_at_index(arr, i);
    at_t frames = ol_json_need_array(&site, "frames");
    ol_report_site_t *s = &list->site[i];
    s->bytes = ol_json_need_int(&site, "bytes", BYTES);
    s->allocations = ol_json_need_int(&site, "allocations", BYTES);
    s->stacks = (int)ol_json_may_int(&site, "stacks", 0, INT32_MAX, 1);
    for (size_t f = 0; f < ol_json_length(frames.node); f++) {
      const char *where = ol_json_need_string_at(&frames, f);
      ol_report_frames_add(v, &s->frames, where, strlen(where));
    }
  }
}

/* Format 1.2's leak warning (null, or absent before it: none). */
static void read_leak(const reading_t *r, const at_t *dev, ol_report_device_t *d)
{
  ol_leak_warning_t *w = &d->stats.phases.leak;
  *w = (ol_leak_warning_t){.site = -1};
  at_t leak = ol_json_may_object(dev, "leak_warning");
  if (r->minor >= 2 && !ol_json_get(dev->node, "leak_warning"))
    ol_json_at_fail(&leak, "missing (null when no leak was seen)");
  if (!leak.node)
    return;
  w->fired = true;
  w->growth = ol_json_need_int(&leak, "growth_per_iteration", SIGNED);
  w->since = (uint64_t)ol_json_need_int(&leak, "since_iteration", BYTES);
  w->at = (uint64_t)ol_json_need_int(&leak, "at_iteration", BYTES);
  w->at_s = ol_json_need_number(&leak, "at_s", -1, 1e9);
  w->runs_out_at = ol_json_need_int(&leak, "runs_out_at_iteration", OR_NONE);
  w->runs_out_s = ol_json_need_number(&leak, "runs_out_s", -1, 1e12);
  w->site_growth = ol_json_need_int(&leak, "site_growth", SIGNED);
  /* minor 7; 0 (what outlives iterations grew) in earlier minors */
  w->allocations_growth = ol_json_may_int(&leak, "allocations_growth_per_iteration", SIGNED, 0);
  /* minor 14; null, or absent before it: standing */
  w->withdrawn_at = (uint64_t)ol_json_may_int(&leak, "withdrawn_at_iteration", BYTES, 0);
  const char *because = ol_json_may_string(&leak, "withdrawn_because", NULL); /* minor 16 */
  w->stopped = because && strcmp(because, "stopped") == 0;
  const char *site = ol_json_may_string(&leak, "site", NULL);
  if (site) {
    read_name(r->v, &d->leak_site, site);
    w->site = 0;
  }
}

/* The batch figure (format 1.2) as written: null or absent, none. */
static void read_batch(const reading_t *r, const at_t *dev, ol_report_device_t *d)
{
  at_t b = ol_json_may_object(dev, "batch_figure");
  d->has_batch = b.node != NULL;
  if (!d->has_batch)
    return;
  d->stats.capacity = ol_json_need_int(&b, "capacity", BYTES);
  d->stats.outside = ol_json_need_int(&b, "outside", OR_NONE);
  d->batch = (ol_batch_figure_t){
    .batch = ol_json_need_int(&b, "batch", BYTES),
    .available = ol_json_need_int(&b, "available", SIGNED),
    .state = ol_json_need_int(&b, "state", SIGNED),
    .need = ol_json_need_int(&b, "need", SIGNED),
    .overhead = int_since(r, &b, "overhead", 3, BYTES), /* before 1.3: none counted */
    /* copies (1.36): of need, the same at any batch (report_model.c) */
    .fixed = int_since(r, &b, "copies", 36, BYTES),
    /* update (1.37): the optimizer's update, the job's peak (report_model.c) */
    .update = int_since(r, &b, "update", 37, BYTES),
    .fits = ol_json_need_int(&b, "fits", SIGNED),
    .fits_headroom = ol_json_need_int(&b, "fits_headroom", SIGNED)};
  d->stats.batch = d->batch.batch;
}

/* Memory by role (format 1.2, with the sites); none before it: not known. */
static void read_roles(const at_t *dev, ol_report_device_t *d)
{
  at_t roles = ol_json_may_object(dev, "roles");
  at_t peak = ol_json_need_object(&roles, "at_peak"), now = ol_json_need_object(&roles, "now");
  d->roles_known = ol_json_may_bool(&roles, "known", false);
  for (int i = 0; i < OL_ROLE_COUNT; i++) {
    d->roles_at_peak[i] = role_bytes_in(&peak, (ol_role_t)i);
    d->roles_now[i] = role_bytes_in(&now, (ol_role_t)i);
  }
}

static void read_device(const reading_t *r, const at_t *dev, ol_report_device_t *d)
{
  ol_report_t *v = r->v;
  d->device = (int)ol_json_need_int(dev, "device", 0, OL_MAX_DEVICES - 1);
  read_stats(r, dev, &d->stats);
  read_oom(dev, v, d);
  at_t sites = ol_json_may_object(dev, "sites");
  at_t at_peak = ol_json_need_array(&sites, "at_peak");
  at_t by_total = ol_json_need_array(&sites, "by_total");
  d->has_sites = at_peak.node != NULL;
  read_sites(&at_peak, v, &d->at_peak);
  read_sites(&by_total, v, &d->by_total);
  read_roles(dev, d);
  read_timeline(dev, d);
  read_leak(r, dev, d);
  read_batch(r, dev, d);
}

static int identify(const ol_json_t *root, const char *path, ol_error_t *err)
{
  int64_t format;
  if (!ol_json_int64(ol_json_get(root, "oomlens_report"), &format) ||
      ol_json_kind(ol_json_get(root, "devices")) != OL_JSON_ARRAY) {
    ol_fail(err, OL_EXIT_USAGE, "%s: not an oomlens report (no \"oomlens_report\" format number "
                 "and \"devices\" list)", path);
    return -1;
  }
  if (format != OL_REPORT_FORMAT) {
    ol_fail(err, OL_EXIT_USAGE, "%s: report format %lld; this oomlens reads format %d", path,
                 (long long)format, OL_REPORT_FORMAT);
    return -1;
  }
  return 0;
}

static void read_report(reading_t *r, const at_t *root, const char *path)
{
  ol_report_t *v = r->v;
  at_t devices = ol_json_need_array(root, "devices");
  ol_report_set_text(v, &v->source, path);
  ol_report_set_text(v, &v->version, ol_json_need_string(root, "version"));
  ol_report_set_text(v, &v->mode, ol_json_need_string(root, "mode"));
  ol_report_set_text(v, &v->reason, ol_json_need_string(root, "reason"));
  ol_report_set_text(v, &v->rank, ol_json_need_string(root, "rank"));
  ol_report_set_text(v, &v->command, ol_json_need_string(root, "command"));
  v->pid = (long)ol_json_need_int(root, "pid", 0, INT32_MAX);
  v->time_unix = ol_json_need_number(root, "time_unix", WALL);
  v->tracking_failed = ol_json_need_bool(root, "tracking_failed");
  read_stacks(root, v);
  read_own_time(root, v);
  for (int d = 0; d < v->device_count && !v->failed && !root->check->failed; d++) {
    at_t dev = ol_json_at_index(&devices, (size_t)d);
    if (ol_json_kind(dev.node) != OL_JSON_OBJECT)
      ol_json_at_fail(&dev, "not an object");
    read_device(r, &dev, &v->devices[d]);
  }
}

int ol_view_load_json(ol_report_t *v, const char *path, ol_error_t *err)
{
  ol_report_init(v, 0); /* empty: freeing it after a failed load is harmless */
  ol_json_t *root = ol_json_parse_file(path, err);
  if (!root)
    return -1;
  if (identify(root, path, err) != 0) {
    ol_json_free(root);
    return -1;
  }
  ol_json_check_t check = {path, err, false};
  at_t top = ol_json_at_root(&check, root);
  size_t devices = ol_json_length(ol_json_get(root, "devices"));
  if (devices > OL_MAX_DEVICES) {
    at_t list = ol_json_at_key(&top, "devices");
    ol_json_at_fail(&list, "%zu devices, more than %d", devices, OL_MAX_DEVICES);
  } else if (ol_report_init(v, (int)devices) == 0) {
    reading_t r = {v, (int)ol_json_may_int(&top, "oomlens_report_minor", 0, INT32_MAX, 0)};
    v->minor = r.minor;
    read_report(&r, &top, path);
  }
  ol_json_free(root);
  if (check.failed) {
    ol_report_free(v);
    return -1;
  }
  if (v->failed) {
    ol_fail(err, OL_EXIT_FAILURE, "%s: out of memory", path);
    ol_report_free(v);
    return -1;
  }
  return 0;
}

/* ---- a trace ----------------------------------------------------------- */

/* A trace is counted by an ol_account_t (core/account.c), the model the
 * live tracker counts a job with, so the figures read back from a trace
 * are the ones the job's report had: tensor events drive allocated memory,
 * segment events (PyTorch's cache asking cudaMalloc) reserved memory, and
 * the at-peak sites are exact. A view of a trace is one device: every
 * event counts on device 0. */
/* The recorded job's last OOM, diagnosed as replay diagnoses it: the
 * account's record at the failed attempt the OOM settled on, and the
 * trace's oom_context line for it. */
typedef struct recorded {
  ol_oom_record_t attempt; /* the last failed attempt's, while the account waits */
  bool diagnosed;
  ol_oom_record_t oom;    /* the last OOM the job saw */
  bool has_context;
} recorded_t;

static void settled(recorded_t *rec, const ol_oom_record_t *attempt)
{
  rec->oom = *attempt;
  rec->diagnosed = true;
  rec->has_context = false;
}

/* After each event: an OOM event is a failed attempt (settling an earlier
 * one of another size first, and itself when the recorder marks it
 * final); any other event may settle the waiting one (the account says:
 * its OOM count rose); an oom_context line completes the OOM it follows. */
static void note_recorded(recorded_t *rec, const ol_account_t *a, const ol_trace_event_t *e,
                          uint64_t waited, int64_t ooms_before)
{
  int64_t settled_now = a->devices[0].stats.num_ooms - ooms_before;
  if (e->action == OL_TRACE_OOM) {
    if (settled_now > 0 && waited && waited != e->size)
      settled(rec, &rec->attempt);
    ol_replay_attempt_record(a, e->size, &rec->attempt);
    if (e->oom_final && !a->devices[0].wait.request)
      settled(rec, &rec->attempt);
    return;
  }
  if (settled_now > 0)
    settled(rec, &rec->attempt);
  if (e->action == OL_TRACE_OOM_CONTEXT && rec->diagnosed && !rec->has_context &&
      rec->oom.request == e->size) {
    ol_oom_context_apply(&rec->oom, e->context);
    rec->has_context = true;
  }
}

static bool count_trace(ol_account_t *account, ol_trace_t *trace, recorded_t *rec,
                        ol_error_t *err, int *got)
{
  ol_trace_event_t e;
  while ((*got = ol_trace_next(trace, &e, err)) == 1) {
    e.device = 0;
    if (account->devices[0].capacity == 0) /* the trace's device line, for a leak's projection */
      ol_account_set_capacity(account, 0, ol_trace_capacity(trace, 0));
    if (!account->devices[0].outside_known) /* its outside line, for the batch figure */
      ol_account_set_outside(account, 0, ol_trace_outside(trace, 0));
    uint64_t waited = account->devices[0].wait.request;
    int64_t ooms = account->devices[0].stats.num_ooms;
    if (!ol_account_apply(account, &e, NULL))
      return false;
    note_recorded(rec, account, &e, waited, ooms);
  }
  /* a failure still waiting at the end was the job's last */
  if (ol_account_oom_settle(account, 0))
    settled(rec, &rec->attempt);
  return true;
}

/* The diagnosis the job's report had: without its context the device is
 * the trace's (its device line), nothing known free or held outside. */
static void trace_diagnosis(ol_report_device_t *d, const ol_account_t *account, recorded_t *rec)
{
  if (!rec->diagnosed)
    return;
  if (!rec->has_context)
    rec->oom.capacity = account->devices[0].capacity;
  d->stats.last_oom = rec->oom;
  d->stats.last_oom_class = ol_oom_classify(&rec->oom);
  d->diagnosed = rec->oom.capacity > 0;
}

/* The account's figures into the report's device 0; its sites into the
 * report's lists by the builder the library uses (a trace's keys are
 * frames text). */
static void trace_figures(ol_report_t *v, const ol_account_t *account, recorded_t *rec,
                          int64_t batch)
{
  ol_report_device_t *d = &v->devices[0];
  ol_account_stats(account, 0, &d->stats);
  trace_diagnosis(d, account, rec);
  const ol_sites_t *sites = account->devices[0].sites;
  if (sites && ol_sites_count(sites) > 0)
    ol_report_device_sites(v, d, sites, ol_sites_text_frames);
  if (account->devices[0].timeline)
    ol_report_device_timeline(d, account->devices[0].timeline);
  d->stats.batch = batch;
  ol_report_device_batch(d);
}

int ol_view_load_trace(ol_report_t *v, const char *path, ol_error_t *err)
{
  ol_report_init(v, 0);
  ol_trace_t *trace = ol_trace_open(path, err);
  if (!trace)
    return -1;
  ol_account_t *account = malloc(sizeof *account);
  if (!account || ol_report_init(v, 1) != 0) {
    ol_trace_close(trace);
    free(account);
    ol_fail(err, OL_EXIT_FAILURE, "%s: out of memory", path);
    return -1;
  }
  ol_report_set_text(v, &v->version, OL_VERSION_TEXT);
  ol_report_set_text(v, &v->mode, "trace");
  ol_report_set_text(v, &v->reason, "trace");
  ol_report_set_text(v, &v->rank, "0");
  ol_report_set_text(v, &v->command, path);
  ol_report_set_text(v, &v->source, path);
  ol_account_init(account, OL_ACCOUNT_SITES | OL_ACCOUNT_TIMELINE);
  int got;
  recorded_t rec = {0};
  if (!count_trace(account, trace, &rec, err, &got)) {
    ol_fail(err, OL_EXIT_FAILURE, "%s: out of memory", path);
    got = -1;
  }
  int64_t batch = (int64_t)ol_trace_batch(trace);
  const char *note = got == 0 ? ol_trace_note(trace) : NULL;
  if (note) { /* the report says it, in its reason */
    char reason[256];
    snprintf(reason, sizeof reason, "trace, %s", note);
    ol_report_set_text(v, &v->reason, reason);
  }
  ol_trace_close(trace);
  if (got == 0)
    trace_figures(v, account, &rec, batch);
  ol_account_free(account);
  free(account);
  if (got >= 0 && v->failed)
    ol_fail(err, OL_EXIT_FAILURE, "%s: out of memory", path);
  if (got < 0 || v->failed) {
    ol_report_free(v);
    return -1;
  }
  return 0;
}

/* A JSON report starts with '{' (after any space), gzip'd or not; zlib
 * reads both, as it does traces. */
int ol_view_load(ol_report_t *v, const char *path, ol_error_t *err)
{
  gzFile f = gzopen(path, "rb");
  int first = f ? gzgetc(f) : EOF;
  while (f && (first == ' ' || first == '\n' || first == '\t' || first == '\r'))
    first = gzgetc(f);
  if (f)
    gzclose(f);
  return first == '{' ? ol_view_load_json(v, path, err)
                      : ol_view_load_trace(v, path, err);
}
