/* oom.c: why an allocation failed, and what to change, with numbers.
 *
 * Automates the diagnosis of the field guides (../shared/seeds): from one
 * record taken at the failure (the request, the device, what this process
 * and others hold, the free blocks, and what the allocation stream says
 * outlives iterations) pick the one cause that explains it, in an order
 * where each test rules out what the next would misread: a request larger
 * than the device; free memory in pieces; others' memory; growth across
 * iterations; state that alone does not fit; else the iteration's own
 * memory. The same record and wording serve the live job and replay. */
#include <inttypes.h>
#include <stdio.h>

#include "core.h"

#define HEADROOM_PERCENT 20 /* the guides keep 20-30% free for spikes */

static const char *const names[OL_OOM_CLASS_COUNT] = {
#define OL_OOM_NAME(name, what) #name,
  OL_OOM_CLASSES(OL_OOM_NAME)
#undef OL_OOM_NAME
};

static const char *const meanings[OL_OOM_CLASS_COUNT] = {
#define OL_OOM_WHAT(name, what) what,
  OL_OOM_CLASSES(OL_OOM_WHAT)
#undef OL_OOM_WHAT
};

const char *ol_oom_class_name(ol_oom_class_t c)
{
  return c < OL_OOM_CLASS_COUNT ? names[c] : "?";
}

const char *ol_oom_class_meaning(ol_oom_class_t c)
{
  return c < OL_OOM_CLASS_COUNT ? meanings[c] : "?";
}

static int64_t cap_of(const ol_oom_record_t *r)
{
  return (int64_t)r->capacity;
}

/* Would this process's memory plus the request fit if nobody else held
 * any, while others hold a share worth naming? A tenth of the device: the
 * CUDA context alone takes ~0.5 GiB, which outweighs any small request but
 * is not what to change (on an 8 GiB device building 10 GB of weights it
 * was the last straw, not the cause). */
static bool others_to_blame(const ol_oom_record_t *r)
{
  int64_t ours = r->reserved + (int64_t)r->request;
  return r->external > 0 && ours <= cap_of(r) && r->external >= cap_of(r) / 10;
}

static bool pieces_to_blame(const ol_oom_record_t *r)
{
  return r->free_reserved >= 0 && r->largest_free_block >= 0 &&
         r->free_reserved >= (int64_t)r->request &&
         r->largest_free_block < (int64_t)r->request;
}

/* Valleys that rise by more than 1% of the device per iteration, over at
 * least three iterations, and add up to more than the request. */
static bool growth_to_blame(const ol_oom_record_t *r)
{
  return r->iterations >= 3 && r->growth > cap_of(r) / 100 &&
         r->growth * (int64_t)(r->iterations < OL_PHASE_VALLEYS ? r->iterations - 1
                                                                : OL_PHASE_VALLEYS - 1) >=
           (int64_t)r->request;
}

/* No iteration finished (the job failed building its state, as in
 * model.cuda()), or what outlives iterations fills most of the device. */
static bool state_to_blame(const ol_oom_record_t *r)
{
  return r->iterations == 0 || r->persistent >= cap_of(r) * (100 - HEADROOM_PERCENT) / 100;
}

ol_oom_class_t ol_oom_classify(const ol_oom_record_t *r)
{
  if ((int64_t)r->request > cap_of(r))
    return OL_OOM_impossible;
  if (pieces_to_blame(r))
    return OL_OOM_fragmentation;
  if (others_to_blame(r))
    return OL_OOM_external;
  if (growth_to_blame(r))
    return OL_OOM_leak;
  if (state_to_blame(r))
    return OL_OOM_persistent;
  return OL_OOM_activations;
}

static const char *size_text(char buf[32], int64_t bytes)
{
  ol_format_bytes(buf, 32, bytes);
  return buf;
}

/* The iteration's own memory at the failure, the request included. */
static int64_t transient_of(const ol_oom_record_t *r)
{
  int64_t t = r->allocated + (int64_t)r->request - r->persistent;
  return t > 0 ? t : 0;
}

static void advise_activations(ol_buf_t *out, const ol_oom_record_t *r)
{
  char a[32], b[32], c[32];
  int64_t room = cap_of(r) * (100 - HEADROOM_PERCENT) / 100 - r->persistent -
                 (r->external > 0 ? r->external : 0);
  int64_t transient = transient_of(r);
  int percent = transient > 0 && room > 0 ? (int)(room * 100 / transient) : 0;
  ol_buf_printf(out,
                "%s outlives the iteration; the iteration itself needed at least %s. With %d%% "
                "headroom %s is left for it: a batch about %d%% of the current one fits (keep "
                "the effective batch with gradient accumulation over %d steps). Or keep the "
                "batch and cut the activations: mixed precision (bf16 halves them), activation "
                "checkpointing (keeps only layer inputs), shorter sequences.",
                size_text(a, r->persistent), size_text(b, transient), HEADROOM_PERCENT,
                size_text(c, room > 0 ? room : 0), percent,
                percent > 0 ? (100 + percent - 1) / percent : 0);
}

/* Who holds what is outside ours, when NVML told: other processes, and
 * this process's own context and libraries beyond its allocations. */
static void explain_outside(ol_buf_t *out, const ol_oom_record_t *r)
{
  char a[32];
  for (int i = 0; i < r->other_count; i++) {
    ol_buf_printf(out, i ? "; " : " Held by other processes: ");
    ol_buf_printf(out, "pid %u%s%s%s ", r->others[i].pid, r->others[i].name[0] ? " (" : "",
                  r->others[i].name, r->others[i].name[0] ? ")" : "");
    ol_buf_printf(out, "%s", r->others[i].bytes >= 0 ? size_text(a, r->others[i].bytes) : "(size not given)");
  }
  if (r->other_count)
    ol_buf_printf(out, ".");
  if (r->self_device_bytes > r->reserved)
    ol_buf_printf(out, " This process's own CUDA context and libraries hold %s beyond its "
                  "allocations.", size_text(a, r->self_device_bytes - r->reserved));
}

static void advise(ol_buf_t *out, const ol_oom_record_t *r, ol_oom_class_t c)
{
  char a[32], b[32], d[32];
  switch (c) {
  case OL_OOM_impossible:
    ol_buf_printf(out, "The request (%s) is larger than the whole device (%s): split the work "
                  "(smaller batch or sequence chunks), shard the tensor across devices, or use "
                  "a larger device.", size_text(a, (int64_t)r->request),
                  size_text(b, cap_of(r)));
    break;
  case OL_OOM_external:
    ol_buf_printf(out, "Others hold %s of the %s device (the CUDA context, NCCL and library "
                  "workspaces, other processes: see nvidia-smi); this process holds %s and "
                  "would fit without them. Free or move what else runs on the device.",
                  size_text(a, r->external), size_text(b, cap_of(r)),
                  size_text(d, r->reserved));
    explain_outside(out, r);
    break;
  case OL_OOM_fragmentation:
    ol_buf_printf(out, "%s is reserved but free, yet the largest free block is %s: the free "
                  "memory is in pieces. ",
                  size_text(a, r->free_reserved), size_text(b, r->largest_free_block));
    if (r->managed) /* our pool remaps whole 2 MiB chunks: live blocks pin theirs */
      ol_buf_printf(out, "Small blocks that stay live pin the 2 MiB chunks around them: "
                    "allocate long-lived tensors before the loop (or free them), and keep "
                    "OOMLENS_MAX_SPLIT_SIZE low so large blocks are not carved up.");
    else
      ol_buf_printf(out, "Run under `oomlens run --manage`, or set "
                    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (or max_split_size_mb:128).");
    break;
  case OL_OOM_leak:
    ol_buf_printf(out, "What outlives an iteration grew by %s per iteration (now %s): something "
                  "keeps tensors across steps. Usual causes: a loss kept with its graph "
                  "(`total += loss` instead of `loss.item()`), evaluation without "
                  "`torch.no_grad()`, lists or caches of outputs.",
                  size_text(a, r->growth), size_text(b, r->persistent));
    break;
  case OL_OOM_persistent:
    ol_buf_printf(out, "%s is held before any iteration frees memory (weights, gradients, "
                  "optimizer state) on a %s device. Shrink it: bf16 weights and gradients "
                  "halve them; an 8-bit optimizer cuts Adam's 8 bytes a parameter to 2; "
                  "ZeRO/FSDP divides it by the number of GPUs; CPU offload or LoRA move or "
                  "avoid most of it.",
                  size_text(a, r->iterations ? r->persistent : r->allocated),
                  size_text(b, cap_of(r)));
    break;
  case OL_OOM_activations:
  default:
    advise_activations(out, r);
    break;
  }
}

void ol_oom_note_sites(ol_oom_record_t *r, const ol_sites_t *sites)
{
  int32_t top[OL_OOM_SITES], grower;
  size_t n = sites ? ol_sites_top(sites, OL_SITES_BY_CURRENT, top, OL_OOM_SITES) : 0;
  for (size_t i = 0; i < n; i++)
    r->holders[i] = (ol_oom_site_t){top[i], ol_sites_figures(sites, top[i])->current};
  r->holder_count = (int)n;
  r->grower = (ol_oom_site_t){-1, 0};
  if (sites && ol_sites_top(sites, OL_SITES_BY_GROWTH, &grower, 1) == 1) {
    const ol_site_figures_t *f = ol_sites_figures(sites, grower);
    r->grower = (ol_oom_site_t){grower, f->last_valley - f->first_valley};
  }
}

/* "Held at the failure by A (3.00 GiB), B (1.00 GiB)"; for a leak, first
 * the site that grew most across iterations, since that is the line to fix. */
static void explain_sites(ol_buf_t *out, const ol_oom_record_t *r, ol_oom_class_t c,
                          ol_site_namer_t namer, void *arg)
{
  char a[32];
  if (!namer)
    return;
  if (c == OL_OOM_leak && r->grower.id >= 0) {
    ol_buf_printf(out, " Grew most across iterations (+%s): ", size_text(a, r->grower.bytes));
    namer(out, r->grower.id, false, arg);
    ol_buf_printf(out, ".");
  }
  for (int i = 0; i < r->holder_count; i++) {
    ol_buf_printf(out, i ? "; " : " Held at the failure by: ");
    namer(out, r->holders[i].id, false, arg);
    ol_buf_printf(out, " (%s)", size_text(a, r->holders[i].bytes));
  }
  if (r->holder_count)
    ol_buf_printf(out, ".");
}

static void json_sites(ol_buf_t *out, const ol_oom_record_t *r, ol_site_namer_t namer, void *arg)
{
  ol_buf_printf(out, ", \"sites\": [");
  for (int i = 0; namer && i < r->holder_count; i++) {
    ol_buf_printf(out, "%s{\"site\": ", i ? ", " : "");
    namer(out, r->holders[i].id, true, arg);
    ol_buf_printf(out, ", \"bytes\": %" PRId64 "}", r->holders[i].bytes);
  }
  ol_buf_printf(out, "], \"external_holders\": [");
  for (int i = 0; i < r->other_count; i++) {
    ol_buf_printf(out, "%s{\"pid\": %u, \"name\": ", i ? ", " : "", r->others[i].pid);
    ol_buf_json_string(out, r->others[i].name);
    ol_buf_printf(out, ", \"bytes\": %" PRId64 "}", r->others[i].bytes);
  }
  ol_buf_printf(out, "], \"self_device_bytes\": %" PRId64 ", \"growing_site\": ",
                r->self_device_bytes > 0 ? r->self_device_bytes : -1);
  if (namer && r->grower.id >= 0) {
    ol_buf_printf(out, "{\"site\": ");
    namer(out, r->grower.id, true, arg);
    ol_buf_printf(out, ", \"growth\": %" PRId64 "}", r->grower.bytes);
  } else {
    ol_buf_printf(out, "null");
  }
}

void ol_oom_explain(ol_buf_t *out, const ol_oom_record_t *r, ol_oom_class_t c,
                    ol_site_namer_t namer, void *arg)
{
  char a[32], b[32], d[32], e[32];
  ol_buf_printf(out, "out of memory (%s: %s): a request of %s on a %s device where this "
                "process held %s reserved, %s allocated. ",
                ol_oom_class_name(c), c < OL_OOM_CLASS_COUNT ? meanings[c] : "?",
                size_text(a, (int64_t)r->request), size_text(b, cap_of(r)),
                size_text(d, r->reserved), size_text(e, r->allocated));
  advise(out, r, c);
  if (c != OL_OOM_external && c != OL_OOM_impossible && r->external > 0) {
    ol_buf_printf(out, " Besides, %s of the device is held outside this process's allocations "
                  "(the CUDA context, libraries, other processes).", size_text(a, r->external));
    explain_outside(out, r);
  }
  explain_sites(out, r, c, namer, arg);
  if (r->segments_only)
    ol_buf_printf(out, " (oomlens saw the framework's cached segments, not its tensors: run "
                  "under `oomlens run --manage` to tell weights from activations.)");
}

void ol_oom_json(ol_buf_t *out, const ol_oom_record_t *r, ol_oom_class_t c,
                 ol_site_namer_t namer, void *arg)
{
  ol_buf_t advice = {0};
  advise(&advice, r, c);
  ol_buf_printf(out, "{\"class\": \"%s\", \"request\": %" PRIu64 ", \"capacity\": %" PRIu64
                ", \"device_free\": %" PRId64 ", \"allocated\": %" PRId64
                ", \"reserved\": %" PRId64 ", \"free_reserved\": %" PRId64
                ", \"largest_free_block\": %" PRId64 ", \"external\": %" PRId64
                ", \"persistent\": %" PRId64 ", \"transient\": %" PRId64
                ", \"iterations\": %" PRIu64 ", \"growth_per_iteration\": %" PRId64
                ", \"segments_only\": %s, \"advice\": ",
                ol_oom_class_name(c), r->request, r->capacity, r->device_free, r->allocated,
                r->reserved, r->free_reserved, r->largest_free_block, r->external,
                r->persistent, transient_of(r), r->iterations, r->growth,
                r->segments_only ? "true" : "false");
  ol_buf_json_string(out, advice.failed ? "" : advice.data);
  json_sites(out, r, namer, arg);
  ol_buf_printf(out, "}");
  ol_buf_free(&advice);
}
