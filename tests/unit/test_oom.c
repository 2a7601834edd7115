/* test_oom.c: the out-of-memory diagnosis: each class from a record built
 * by hand, and the three recorded OOM traces replayed at their caps
 * (iterations found in allocation streams: test_phases.c). */
#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "check_run.h"
#include "core.h"
#include "replay.h"

#define GiB (1ll << 30)
#define MiB (1ll << 20)

typedef struct {
  const char *what;
  ol_oom_record_t record;
  ol_oom_class_t expected;
} class_case_t;

#define NOT_TIMED .before_first_free = -1, .iteration_need = -1, .first_persistent = -1 /* no free seen, none finished */
#define DEVICE16 .capacity = 16 * GiB, .device_free = 0
#define BASE DEVICE16, NOT_TIMED
#define NO_BLOCKS .free_reserved = -1, .largest_free_block = -1 /* not known */
/* Roles known: weights W, gradients G, optimizer state O, activations A. */
#define ROLES(w, g, o, a)                                                               \
  .roles_known = true, .role_bytes = {[OL_ROLE_weights] = (w), [OL_ROLE_gradients] = (g), \
                                      [OL_ROLE_optimizer] = (o), [OL_ROLE_activations] = (a)}

#define VARLEN_LEAK .capacity = 4 * GiB, .reserved = 3640655872, .free_reserved = 404223488, \
  VARLEN_LEAK_REST
#define VARLEN_LEAK_REST                                                                 \
  .device_free = 1245184, .request = 128256000, .allocated = 3213355380,                 \
  .largest_free_block = 3670016, .external = 653066240, .self_device_bytes = 4284481536, \
  .iterations = 63, .persistent = 1907502912, .growth = 19176640,                        \
  .before_first_free = 71129568, .iteration_need = 1510584160,                           \
  .first_persistent = 68931968, ROLES(67764224, 100663296, 129236992, 2881769120),       \
  .request_role_known = true, .request_role = OL_ROLE_backward, .batch = 8
/* varlen_leak replayed without its call sites: no iteration found in its
 * 24,095 allocations, 68.9 MB made before its first free still held */
#define VARLEN_LEAK_UNSEEN                                                                \
  .capacity = 4 * GiB, .reserved = 3640655872, .free_reserved = 404223488,               \
  .device_free = 1245184, .request = 128256000, .allocated = 3213355380,                 \
  .largest_free_block = 3670016, .external = 653066240, .self_device_bytes = 4284481536, \
  .iterations = 0, .persistent = 0, .before_first_free = 71129568,                       \
  .before_first_free_gone = 2206176, .iteration_need = -1, .first_persistent = -1,      \
  .allocations_made = 24095, .swings = 1, .batch = 8
/* 11 iterations, nothing rising steadily, and one call site of role grown
 * by grew bytes (scripts/corpus_leaks.py's kept blocks every 4th step), a
 * request of req bytes of the forward's; the most an earlier iteration
 * needed is need, and reading says how the growth was read (account.c:
 * across iterations, one block kept from an earlier one, or held more
 * than at the same point of the one before) */
#define GREW_BY_SITE(req, role, need, grew, reading)                                         \
  GREW_BY_SITE_HELD(req, role, need, grew, reading, 15 * GiB + 512 * MiB, -1)
/* ... where this process held reserved bytes, free of them in the pool
 * (-1: not known) */
#define GREW_BY_SITE_HELD(req, role, need, grew, reading, reserved_, free_)                 \
  DEVICE16, .free_reserved = (free_), .largest_free_block = -1, .request = (req),           \
  .reserved = (reserved_), .allocated = 15 * GiB + 512 * MiB, .iterations = 11,            \
  .persistent = 7 * GiB, .growth = 0,                                                        \
  .first_persistent = 5 * GiB, .before_first_free = 2 * GiB, .iteration_need = (need),      \
  ROLES(2 * GiB, 2 * GiB, 2 * GiB, 9 * GiB + 512 * MiB), .grower = {.id = 4, .bytes = (grew)}, \
  .grower_role = (role), .grower_reading = (reading), .request_role_known = true,           \
  .request_role = OL_ROLE_activations
#define GREW_IN_STEPS(req, role) GREW_BY_SITE(req, role, 8 * GiB, 1 * GiB, OL_GROWER_KEPT)
/* the iteration under way asked 9.50 GiB above the 7 GiB kept */
#define GREW_ONCE(need) GREW_BY_SITE(1 * GiB, OL_ROLE_activations, need, 1 * GiB, OL_GROWER_ONCE)
/* a step's 1 GiB kept; a request of 1.5 GiB, 512 MiB mapped toward it
 * beside the 15.5 GiB held */
#define KEPT_BESIDE_GROWTH                                                                  \
  GREW_BY_SITE_HELD(1 * GiB + 512 * MiB, OL_ROLE_activations, 8 * GiB, 1 * GiB,              \
                    OL_GROWER_ONCE, 16 * GiB, 0),                                            \
  .grower_per_step = true
/* a request of 600 MiB lacks 88 MiB; a 32nd of the device is 512 MiB */
#define GREW_SINCE_LAST(grew)                                                                \
  GREW_BY_SITE(600 * MiB, OL_ROLE_activations, 8 * GiB, grew, OL_GROWER_SINCE_LAST),         \
  .held_since_last = (grew) + 64 * MiB

/* Without call sites, 8 iterations, what outlives them kept (by timing,
 * before_first_free the weights), an earlier one needing 2 GiB, and the
 * iteration under way past a repeat of the last one (held -1: not so) */
#define PAST_REPEAT(req, kept, before, held, allocs, frees)                                 \
  DEVICE16, NO_BLOCKS, .request = (req), .reserved = 15 * GiB + 512 * MiB,                  \
  .allocated = 15 * GiB + 512 * MiB, .iterations = 8, .persistent = (kept), .growth = 0,     \
  .first_persistent = (kept), .before_first_free = (before), .iteration_need = 2 * GiB,     \
  .held_since_last = -1, .past_repeat = {(held), (allocs), (frees)}

static const class_case_t class_cases[] = {
  {"request larger than the device", {BASE, NO_BLOCKS, .request = 20 * GiB, .reserved = 1 * GiB},
   OL_OOM_impossible},
  {"free memory in pieces",
   {BASE, .request = 1 * GiB, .reserved = 15 * GiB, .allocated = 13 * GiB,
    .free_reserved = 2 * GiB, .largest_free_block = 512 * MiB, .iterations = 4,
    .persistent = 3 * GiB}, OL_OOM_fragmentation},
  /* Held-out adam_vit on the H200 (ViT-L/16 under a 4G cap, --manage):
   * AdamW's moments being made at the first step, the state 96% of what
   * the device offers; 33 MiB of the pool free in pieces (its ordinary
   * slack, 0.9% of the reserve) covered the 16 MiB request and no block
   * did. It was called fragmentation; defragmenting would serve this
   * request, never the rest of the moments. */
  {"the pool's slack in pieces while the state fills the device",
   {.capacity = 4 * GiB, .device_free = 0, .request = 16 * MiB, .reserved = 3741319168,
    .allocated = 3704724820, .free_reserved = 34494464, .largest_free_block = 3227648,
    .external = 528 * MiB, .self_device_bytes = 4399824896, .iterations = 0,
    .before_first_free = 1219543724,
    .iteration_need = -1, .first_persistent = -1,
    ROLES(1211813888, 1316675584, 1060700160, 100663296), .request_role_known = true,
    .request_role = OL_ROLE_optimizer, .batch = 1}, OL_OOM_persistent},
  {"1% of the reserve in pieces is slack, not the cause of an iteration too large",
   {BASE, .request = 16 * MiB, .reserved = 15 * GiB, .allocated = 15 * GiB - 150 * MiB,
    .free_reserved = 150 * MiB, .largest_free_block = 8 * MiB, .iterations = 3,
    .persistent = 3 * GiB}, OL_OOM_activations},
  /* Held-out varlen_leak under --manage (4G): each step's hidden states
   * kept on the device for a probe; the pool's free memory at the OOM is
   * the rest of the chunks those kept blocks pin. */
  {"our pool's pieces between the blocks a leak keeps",
   {VARLEN_LEAK, .managed = true}, OL_OOM_leak},
  {"another allocator's pieces beside a leak",
   {VARLEN_LEAK, .managed = false}, OL_OOM_fragmentation},
  /* The same replayed without its call sites: its lengths vary, so no
   * iteration is found, and nothing tells whether the blocks that pin the
   * pieces are kept from step to step. It was called fragmentation. */
  {"our pool's pieces where no iteration tells a leak",
   {VARLEN_LEAK_UNSEEN, .managed = true}, OL_OOM_undetermined},
  {"another allocator's pieces where no iteration tells a leak",
   {VARLEN_LEAK_UNSEEN, .managed = false}, OL_OOM_fragmentation},
  {"our pool's pieces beyond what a leak has kept",
   {VARLEN_LEAK_REST, .managed = true, .capacity = 8 * GiB, .reserved = 5113355380,
    .free_reserved = 1900000000},
   OL_OOM_fragmentation},
  /* Held-out auto_batch_fits under --manage (H200, 12G): after two OOMs
   * of its batch size search, batch 4 ran out with a free block of the
   * pool's larger than the request; told activations before */
  {"our pool refused a request one of its free blocks holds",
   {.capacity = 12 * GiB, .device_free = -1, .request = 823410688, .reserved = 12232687616,
    .allocated = 6060000000, .free_reserved = 5463925248, .largest_free_block = 4624616448,
    .external = 650969088, .iterations = 0, .before_first_free = 500 * MiB,
    .iteration_need = -1, ROLES(492555264, 0, 0, 5567444736), .request_role_known = true,
    .request_role = OL_ROLE_activations, .managed = true, .restarts = 2, .batch_given = 16},
   OL_OOM_undetermined},
  {"another process holds most of the device",
   {BASE, NO_BLOCKS, .request = 2 * GiB, .reserved = 6 * GiB, .allocated = 6 * GiB, .external = 9 * GiB,
    .iterations = 3, .persistent = 2 * GiB}, OL_OOM_external},
  {"what outlives iterations grows",
   {BASE, NO_BLOCKS, .request = 1 * GiB, .reserved = 15 * GiB, .allocated = 15 * GiB, .iterations = 8,
    .persistent = 12 * GiB, .growth = 1 * GiB}, OL_OOM_leak},
  /* Held-out generate_batch (GPT-2 `generate` at batch 96, 4G): the KV
   * cache grew 6.75 MiB a decode step; no gradients or optimizer state. */
  {"inference whose memory grows each forward",
   {BASE, NO_BLOCKS, .request = 82 * MiB, .reserved = 15 * GiB, .allocated = 15 * GiB,
    .iterations = 90, .persistent = 13 * GiB, .growth = 200 * MiB,
    ROLES(1 * GiB, 0, 0, 14 * GiB)}, OL_OOM_leak},
  {"weights alone, no iteration yet",
   {BASE, NO_BLOCKS, .request = 1 * GiB, .reserved = 15 * GiB, .allocated = 15 * GiB,
    .iterations = 0},
   OL_OOM_persistent},
  {"state fills the device after iterations",
   {BASE, NO_BLOCKS, .request = 1 * GiB, .reserved = 15 * GiB, .allocated = 15 * GiB, .iterations = 5,
    .persistent = 14 * GiB}, OL_OOM_persistent},
  {"the iteration's own memory",
   {BASE, NO_BLOCKS, .request = 2 * GiB, .reserved = 15 * GiB, .allocated = 15 * GiB, .iterations = 3,
    .persistent = 3 * GiB}, OL_OOM_activations},
  /* Seen on the H200 (docs/measurements.md): oom_params under --capacity 8G;
   * the CUDA context's 527 MiB outweighed a 64 MiB request, but the weights
   * would not fit without it either. */
  {"the CUDA context on a small device while weights are built",
   {.capacity = 8 * GiB, .device_free = 0, NO_BLOCKS, NOT_TIMED, .request = 64 * MiB,
    .reserved = 7640 * MiB, .allocated = 7640 * MiB, .external = 527 * MiB, .iterations = 0},
   OL_OOM_persistent},
  /* The most common OOM (issue 12): GPT-2 124M under a 12G cap, batch 6,
   * out in its first forward. Nothing was freed before weights were
   * built, activations fill the rest: not the state's fault. */
  {"first step, weights small, activations fill the device",
   {.capacity = 12 * GiB, .device_free = 0, NO_BLOCKS, .request = 256 * MiB,
    .reserved = 11 * GiB, .allocated = 11 * GiB, .iterations = 0,
    .before_first_free = 500 * MiB, .iteration_need = -1,
    ROLES(500 * MiB, 0, 0, 10 * GiB + 524 * MiB), .request_role_known = true,
    .request_role = OL_ROLE_activations, .batch = 6}, OL_OOM_activations},
  /* The same at half the batch, after a batch size search dropped its
   * model and loaded it again (the user gave --batch 12, its first) */
  {"first step of a job that began again after an OOM, at a batch not known",
   {.capacity = 12 * GiB, .device_free = 0, NO_BLOCKS, .request = 256 * MiB,
    .reserved = 11 * GiB, .allocated = 11 * GiB, .iterations = 0,
    .before_first_free = 500 * MiB, .iteration_need = -1,
    ROLES(500 * MiB, 0, 0, 10 * GiB + 524 * MiB), .request_role_known = true,
    .request_role = OL_ROLE_activations, .batch = 0, .batch_given = 12, .restarts = 1},
   OL_OOM_activations},
  {"first step, no frames: by timing, before the first free",
   {.capacity = 12 * GiB, .device_free = 0, NO_BLOCKS, .request = 256 * MiB,
    .reserved = 11 * GiB, .allocated = 11 * GiB, .iterations = 0,
    .before_first_free = 500 * MiB, .iteration_need = -1}, OL_OOM_activations},
  {"weights, gradients and Adam state by role fill the device",
   {BASE, NO_BLOCKS, .request = 1 * GiB, .reserved = 15 * GiB, .allocated = 14 * GiB,
    .iterations = 1, ROLES(4 * GiB, 4 * GiB, 6 * GiB, 0), .request_role_known = true,
    .request_role = OL_ROLE_optimizer}, OL_OOM_persistent},
  {"a model too large to load, by role",
   {BASE, NO_BLOCKS, .request = 1 * GiB, .reserved = 15 * GiB, .allocated = 15 * GiB,
    ROLES(15 * GiB, 0, 0, 0), .request_role_known = true, .request_role = OL_ROLE_weights},
   OL_OOM_persistent},
  {"PyTorch's cache hides the tensors: not told",
   {BASE, NO_BLOCKS, .request = 1 * GiB, .reserved = 15 * GiB, .allocated = 15 * GiB,
    .segments_only = true}, OL_OOM_undetermined},
  {"PyTorch's cache, but segments made for weights fill the device",
   {BASE, NO_BLOCKS, .request = 1 * GiB, .reserved = 15 * GiB, .allocated = 15 * GiB,
    .segments_only = true, ROLES(15 * GiB, 0, 0, 0), .request_role_known = true,
    .request_role = OL_ROLE_weights}, OL_OOM_persistent},
  {"PyTorch's cache, segments of activations: not told from a leak",
   {BASE, NO_BLOCKS, .request = 1 * GiB, .reserved = 15 * GiB, .allocated = 15 * GiB,
    .segments_only = true, ROLES(1 * GiB, 0, 2 * GiB, 12 * GiB), .request_role_known = true,
    .request_role = OL_ROLE_activations}, OL_OOM_undetermined},
  {"a kept loss: what outlives iterations grows, by roles too",
   {BASE, NO_BLOCKS, .request = 1 * GiB, .reserved = 15 * GiB, .allocated = 15 * GiB,
    .iterations = 4, .persistent = 9 * GiB, .growth = 2 * GiB,
    ROLES(1 * GiB, 1 * GiB, 2 * GiB, 11 * GiB)}, OL_OOM_leak},
  /* Seen on the H200 (weights_load of the corpus): 3.2 GB of weights made
   * under a 2 GiB cap; the 529 MiB outside our allocations is this
   * process's own CUDA context (NVML says so), not someone else's. */
  {"our own CUDA context is not others' memory",
   {.capacity = 2 * GiB, .device_free = 0, NO_BLOCKS, .request = 256 * MiB,
    .reserved = 1280 * MiB, .allocated = 1280 * MiB, .external = 529 * MiB,
    .self_device_bytes = 1800 * MiB, .before_first_free = -1, .iteration_need = -1,
    ROLES(1280 * MiB, 0, 0, 0), .request_role_known = true, .request_role = OL_ROLE_weights},
   OL_OOM_persistent},
  {"another process holds the device, NVML names it",
   {.capacity = 12 * GiB, .device_free = 0, NO_BLOCKS, .request = 1 * GiB,
    .reserved = 3 * GiB, .allocated = 3 * GiB, .external = 8 * GiB + 520 * MiB,
    .self_device_bytes = 3 * GiB + 520 * MiB, .before_first_free = 500 * MiB,
    .iteration_need = -1, .other_count = 1,
    .others = {{.pid = 4242, .bytes = 8 * GiB, .name = "python3"}}}, OL_OOM_external},
  /* Jobs of kinds the corpus does not have, to pin what the rules mean. */
  /* Large weights, out in the first forward: a LoRA fine-tune (a smaller
   * batch is the fix) cannot be told from a full one or a distillation
   * (the state is) before the backward shows what is trained. */
  {"LoRA or a full fine-tune: large weights, out in the first forward",
   {DEVICE16, NO_BLOCKS, .request = 1 * GiB, .reserved = 15 * GiB, .allocated = 15 * GiB,
    .before_first_free = 11 * GiB, .iteration_need = -1, .first_persistent = -1,
    ROLES(11 * GiB, 0, 0, 4 * GiB), .request_role_known = true,
    .request_role = OL_ROLE_activations}, OL_OOM_undetermined},
  {"LoRA in its first backward: its gradients show it trains a part",
   {DEVICE16, NO_BLOCKS, .request = 1 * GiB, .reserved = 15 * GiB, .allocated = 15 * GiB,
    .before_first_free = 11 * GiB, .iteration_need = -1, .first_persistent = -1,
    ROLES(11 * GiB, 64 * MiB, 0, 4 * GiB - 64 * MiB), .request_role_known = true,
    .request_role = OL_ROLE_activations}, OL_OOM_activations},
  {"large weights, out as the first backward began, before any gradient: undetermined",
   {DEVICE16, NO_BLOCKS, .request = 1 * GiB, .reserved = 15 * GiB, .allocated = 15 * GiB,
    .before_first_free = 11 * GiB, .iteration_need = -1, .first_persistent = -1,
    ROLES(11 * GiB, 0, 0, 3 * GiB + 512 * MiB), .role_bytes[OL_ROLE_backward] = 512 * MiB,
    .request_role_known = true, .request_role = OL_ROLE_backward}, OL_OOM_undetermined},
  /* Out in the first backward at batch 1, all gradients made: the state
   * and one sample do not fit, and with Adam's moments (10 GiB more) the
   * state alone would not either; with SGD it fits. */
  {"no batch fits before the optimizer's first step, nor Adam's state: undetermined",
   {DEVICE16, NO_BLOCKS, .request = 1 * GiB, .reserved = 15 * GiB, .allocated = 15 * GiB,
    .before_first_free = 5 * GiB, .iteration_need = -1, .first_persistent = -1,
    ROLES(5 * GiB, 0, 0, 5 * GiB), .role_bytes[OL_ROLE_backward] = 5 * GiB,
    .gradients_made = 5 * GiB, .request_role_known = true, .request_role = OL_ROLE_backward,
    .batch = 1}, OL_OOM_undetermined},
  /* Out in the first backward with 1 GiB of gradients made of 6 GiB of
   * weights: with the rest to come (5 GiB) and Adam's moments (12 GiB)
   * the state would not fit; with what the backward had made, it would. */
  {"no batch fits in the first backward, all the gradients and Adam's state would not: "
   "undetermined",
   {DEVICE16, NO_BLOCKS, .request = 1 * GiB, .reserved = 15 * GiB, .allocated = 15 * GiB,
    .before_first_free = 6 * GiB, .iteration_need = -1, .first_persistent = -1,
    ROLES(6 * GiB, 0, 0, 7 * GiB), .role_bytes[OL_ROLE_backward] = 1 * GiB,
    .gradients_made = 1 * GiB, .request_role_known = true, .request_role = OL_ROLE_backward,
    .batch = 1}, OL_OOM_undetermined},
  {"no batch fits before the optimizer's first step, Adam's state would: activations",
   {DEVICE16, NO_BLOCKS, .request = 1 * GiB, .reserved = 15 * GiB, .allocated = 15 * GiB,
    .before_first_free = 1 * GiB, .iteration_need = -1, .first_persistent = -1,
    ROLES(1 * GiB, 0, 0, 12 * GiB), .role_bytes[OL_ROLE_backward] = 1 * GiB,
    .gradients_made = 1 * GiB, .request_role_known = true, .request_role = OL_ROLE_backward,
    .batch = 1}, OL_OOM_activations},
  {"a batch fits before the optimizer's first step: activations, its figure a bound",
   {DEVICE16, NO_BLOCKS, .request = 512 * MiB, .reserved = 15 * GiB, .allocated = 15 * GiB,
    .before_first_free = 5 * GiB, .iteration_need = -1, .first_persistent = -1,
    ROLES(5 * GiB, 0, 0, 5 * GiB), .role_bytes[OL_ROLE_backward] = 5 * GiB,
    .gradients_made = 5 * GiB, .request_role_known = true, .request_role = OL_ROLE_backward,
    .batch = 8}, OL_OOM_activations},
  {"weights of 35% of the device, out in the first forward: activations",
   {DEVICE16, NO_BLOCKS, .request = 1 * GiB, .reserved = 15 * GiB, .allocated = 15 * GiB,
    .before_first_free = 5 * GiB + 512 * MiB, .iteration_need = -1, .first_persistent = -1,
    ROLES(5 * GiB + 512 * MiB, 0, 0, 9 * GiB + 512 * MiB), .request_role_known = true,
    .request_role = OL_ROLE_activations}, OL_OOM_activations},
  /* What outlives iterations rose by 2 GiB since a standing leak warning's
   * low, and the request lacked 512 MiB: on a device too small for the
   * other readings (no step rose by a hundredth, a quarter is not kept
   * beyond the state), the warning's growth is the cause. */
  {"a standing leak warning's growth covers what the request lacked: leak",
   {DEVICE16, NO_BLOCKS, .request = 1 * GiB, .reserved = 15 * GiB + 512 * MiB,
    .allocated = 15 * GiB + 512 * MiB, .iterations = 50, .persistent = 9 * GiB, .growth = 0,
    .first_persistent = 7 * GiB, .before_first_free = 2 * GiB, .iteration_need = 6 * GiB,
    ROLES(2 * GiB, 2 * GiB, 4 * GiB, 6 * GiB), .warned = true, .warned_from = 7 * GiB, .warned_since = 10,
    .warned_rate = 50 * MiB, .request_role_known = true,
    .request_role = OL_ROLE_activations}, OL_OOM_leak},
  {"a standing warning without call sites (iterations by sizes alone): activations",
   {DEVICE16, NO_BLOCKS, .request = 1 * GiB, .reserved = 15 * GiB + 512 * MiB,
    .allocated = 15 * GiB + 512 * MiB, .iterations = 50, .persistent = 9 * GiB, .growth = 0,
    .first_persistent = 7 * GiB, .before_first_free = 3 * GiB, .iteration_need = 6 * GiB,
    .warned = true, .warned_from = 7 * GiB, .warned_since = 10, .warned_rate = 50 * MiB},
   OL_OOM_activations},
  /* Without call sites, an iteration that made the same sizes as the one
   * before (no larger input) and holds 768 MiB more than it did at that
   * point, where the request lacked 512 MiB: a kept tensor, gradients kept
   * between micro-steps or state made in it, which sizes cannot tell
   * (held-out kept_validation_leak without its sites: `activations`).
   * Where the iteration before is no measure (other sizes), the larger
   * input's reading stands. */
  {"without call sites, the same sizes holding more than the step before: undetermined",
   {DEVICE16, NO_BLOCKS, .request = 1 * GiB, .reserved = 15 * GiB + 512 * MiB,
    .allocated = 15 * GiB + 512 * MiB, .iterations = 8, .persistent = 9 * GiB, .growth = 0,
    .first_persistent = 9 * GiB, .before_first_free = 3 * GiB, .iteration_need = 6 * GiB,
    .held_since_last = 768 * MiB}, OL_OOM_undetermined},
  {"without call sites, other sizes than the step before: activations",
   {DEVICE16, NO_BLOCKS, .request = 1 * GiB, .reserved = 15 * GiB + 512 * MiB,
    .allocated = 15 * GiB + 512 * MiB, .iterations = 8, .persistent = 9 * GiB, .growth = 0,
    .first_persistent = 9 * GiB, .before_first_free = 3 * GiB, .iteration_need = 6 * GiB,
    .held_since_last = -1}, OL_OOM_activations},
  /* Without call sites, the iteration under way did the last one's work
   * again in the same sizes through its rise and fall, then made 2 GiB
   * in allocations the last never made (recent.c): not a larger input's
   * memory; state made in mid-run or a new pass, which sizes cannot tell
   * (held-out optimizer_switch and optim_switch_state without their
   * sites: `activations`, "a larger input"). Made without a free, as a
   * model loaded beside this one is, it counts as state; where the
   * request is as large as half of it, it may be the first operation of a
   * larger batch. */
  {"without call sites, more past a repeat of the last step: undetermined",
   {PAST_REPEAT(1 * GiB, 5 * GiB, 3 * GiB, 2 * GiB, 40, 10)}, OL_OOM_undetermined},
  {"without call sites, nothing past a repeat, more than any step before: activations",
   {PAST_REPEAT(1 * GiB, 5 * GiB, 3 * GiB, -1, 0, 0)}, OL_OOM_activations},
  {"without call sites, state made past a repeat without a free, too large: persistent",
   {PAST_REPEAT(256 * MiB, 5 * GiB, 3 * GiB, 8 * GiB, 300, 0)}, OL_OOM_persistent},
  {"without call sites, made past a repeat without a free, leaving room: undetermined",
   {PAST_REPEAT(256 * MiB, 5 * GiB, 3 * GiB, 2 * GiB, 300, 0)}, OL_OOM_undetermined},
  /* ... where what outlives the iterations is beyond four times the
   * weights by timing too (kept_unexplained's `undetermined`), the state
   * built past the repeat with the rest, that excess aside, still leaves
   * no room: the build is too large (held-out cnn_teacher_late). */
  {"without call sites, built past a repeat beside an unexplained excess: persistent",
   {PAST_REPEAT(256 * MiB, 5 * GiB, 1 * GiB, 9 * GiB, 300, 0)}, OL_OOM_persistent},
  {"without call sites, built past a repeat, too small without the excess: undetermined",
   {PAST_REPEAT(256 * MiB, 8 * GiB, 1 * GiB, 3 * GiB, 300, 0)}, OL_OOM_undetermined},
  {"without call sites, past a repeat a request as large as half of what was made: "
   "undetermined",
   {PAST_REPEAT(5 * GiB, 1 * GiB, 1 * GiB, 8 * GiB, 8, 0)}, OL_OOM_undetermined},
  /* Without call sites, what outlives the iterations is all state by
   * timing; beyond four times the weights by timing (a training state's
   * most), by more than the request lacked, it may be kept tensors. */
  {"no call sites, kept beyond four times the weights, the shortfall in it: undetermined",
   {DEVICE16, NO_BLOCKS, .request = 1 * GiB, .reserved = 15 * GiB + 512 * MiB,
    .allocated = 15 * GiB + 512 * MiB, .iterations = 50, .persistent = 9 * GiB, .growth = 0,
    .first_persistent = 7 * GiB, .before_first_free = 2 * GiB, .iteration_need = 6 * GiB},
   OL_OOM_undetermined},
  {"no call sites, kept beyond four times the weights by less than the shortfall: activations",
   {DEVICE16, NO_BLOCKS, .request = 2 * GiB, .reserved = 15 * GiB + 512 * MiB,
    .allocated = 15 * GiB + 512 * MiB, .iterations = 50, .persistent = 9 * GiB, .growth = 0,
    .first_persistent = 7 * GiB, .before_first_free = 2 * GiB, .iteration_need = 6 * GiB},
   OL_OOM_activations},
  {"no call sites, kept beyond four times the weights by less than a 32nd of the device: "
   "activations",
   {DEVICE16, NO_BLOCKS, .request = 256 * MiB, .reserved = 16 * GiB - 128 * MiB,
    .allocated = 16 * GiB - 128 * MiB, .iterations = 50, .persistent = 8 * GiB + 256 * MiB,
    .growth = 0, .first_persistent = 8 * GiB, .before_first_free = 2 * GiB,
    .iteration_need = 6 * GiB}, OL_OOM_activations},
  {"no call sites, kept state as large as the device: undetermined, not persistent",
   {DEVICE16, NO_BLOCKS, .request = 1 * GiB, .reserved = 15 * GiB + 512 * MiB,
    .allocated = 15 * GiB + 512 * MiB, .iterations = 50, .persistent = 14 * GiB, .growth = 0,
    .first_persistent = 7 * GiB, .before_first_free = 2 * GiB, .iteration_need = 1 * GiB},
   OL_OOM_undetermined},
  /* Without call sites a job of varying sizes finds no iteration: past a
   * first step's length (the log first_step.c reads), the failure is not
   * known to be in the first step. */
  {"no call sites, no iteration in more allocations than a first step is read from: undetermined",
   {.capacity = 12 * GiB, .device_free = 0, NO_BLOCKS, .request = 256 * MiB,
    .reserved = 11 * GiB, .allocated = 11 * GiB, .iterations = 0,
    .before_first_free = 500 * MiB, .iteration_need = -1,
    .allocations_made = OL_FIRST_STEP_KEEP + 1}, OL_OOM_undetermined},
  {"no call sites, no iteration within a first step's length: activations",
   {.capacity = 12 * GiB, .device_free = 0, NO_BLOCKS, .request = 256 * MiB,
    .reserved = 11 * GiB, .allocated = 11 * GiB, .iterations = 0,
    .before_first_free = 500 * MiB, .iteration_need = -1,
    .allocations_made = OL_FIRST_STEP_KEEP}, OL_OOM_activations},
  /* ... or within it, where what it held swung back near its weights and
   * up again three times (held-out varlen_logits_leak without its sites:
   * 13 steps in 7,496 allocations, 6 swings, was `activations`) */
  {"no call sites, no iteration, swings within a first step's length, low points risen: undetermined",
   {.capacity = 12 * GiB, .device_free = 0, NO_BLOCKS, .request = 256 * MiB,
    .reserved = 11 * GiB, .allocated = 11 * GiB, .iterations = 0,
    .before_first_free = 500 * MiB, .iteration_need = -1, .allocations_made = 7496,
    .swings = 4, .swings_kept = 512 * MiB}, OL_OOM_undetermined},
  /* the low points stayed: the step's own memory (corpus late_batch) */
  {"no call sites, no iteration, swings whose low points stayed: activations",
   {.capacity = 12 * GiB, .device_free = 0, NO_BLOCKS, .request = 256 * MiB,
    .reserved = 11 * GiB, .allocated = 11 * GiB, .iterations = 0,
    .before_first_free = 500 * MiB, .iteration_need = -1, .allocations_made = 7496,
    .swings = 6, .swings_kept = 8 * MiB}, OL_OOM_activations},
  {"no call sites, no iteration, one swing: activations",
   {.capacity = 12 * GiB, .device_free = 0, NO_BLOCKS, .request = 256 * MiB,
    .reserved = 11 * GiB, .allocated = 11 * GiB, .iterations = 0,
    .before_first_free = 500 * MiB, .iteration_need = -1, .allocations_made = 7496,
    .swings = 1}, OL_OOM_activations},
  /* ... or where its sizes repeat a step's, a forward's stack and a
   * backward's in it, and it holds more than that step held there by more
   * than the gradients and Adam's moments of 500 MiB of weights (1.5 GiB)
   * could weigh (corpus cnn_loss_leak without its sites: 5.2 GiB more, a
   * kept graph, was `activations`); by less, the first update's state may
   * be all it holds more, and the step's own memory did not fit beside it */
  {"no call sites, no iteration, a step's repeat by sizes holding more than its state: undetermined",
   {.capacity = 12 * GiB, .device_free = 0, NO_BLOCKS, .request = 256 * MiB,
    .reserved = 11 * GiB, .allocated = 11 * GiB, .iterations = 0,
    .before_first_free = 500 * MiB, .iteration_need = -1, .allocations_made = 1760,
    .swings = 1, .step_repeat_held = 1500 * MiB + 640 * MiB}, OL_OOM_undetermined},
  {"no call sites, no iteration, a step's repeat by sizes holding its state more: activations",
   {.capacity = 12 * GiB, .device_free = 0, NO_BLOCKS, .request = 256 * MiB,
    .reserved = 11 * GiB, .allocated = 11 * GiB, .iterations = 0,
    .before_first_free = 500 * MiB, .iteration_need = -1, .allocations_made = 1760,
    .swings = 1, .step_repeat_held = 1500 * MiB}, OL_OOM_activations},
  {"the same growth with no warning standing: activations",
   {DEVICE16, NO_BLOCKS, .request = 1 * GiB, .reserved = 15 * GiB + 512 * MiB,
    .allocated = 15 * GiB + 512 * MiB, .iterations = 50, .persistent = 9 * GiB, .growth = 0,
    .first_persistent = 7 * GiB, .before_first_free = 2 * GiB, .iteration_need = 6 * GiB,
    ROLES(2 * GiB, 2 * GiB, 4 * GiB, 6 * GiB),
    .request_role_known = true, .request_role = OL_ROLE_activations}, OL_OOM_activations},
  /* Without call sites, the state by timing: what was made before the
   * first free and is still live is the weights. 4 GiB of them, with the
   * gradients and Adam's moments a first step may make (12 GiB more, not
   * told from the batch's memory by timing), leave no room: the class is
   * not guessed; 2 GiB (8 GiB with them) leave room: the batch's. */
  {"no call sites, weights that with a first step's state leave no room: undetermined",
   {DEVICE16, NO_BLOCKS, .request = 2 * GiB, .reserved = 14 * GiB, .allocated = 14 * GiB,
    .before_first_free = 5 * GiB, .before_first_free_gone = 1 * GiB, .iteration_need = -1,
    .first_persistent = -1},
   OL_OOM_undetermined},
  {"no call sites, weights that leave room with a first step's state: activations",
   {DEVICE16, NO_BLOCKS, .request = 2 * GiB, .reserved = 14 * GiB, .allocated = 14 * GiB,
    .before_first_free = 5 * GiB, .before_first_free_gone = 3 * GiB, .iteration_need = -1,
    .first_persistent = -1},
   OL_OOM_activations},
  /* Before any free, a request as large as half of all held may be a
   * weight being loaded or a batch's first operation; a smaller one is
   * the state being built. */
  {"no call sites, no free yet, a request as large as half of all held: undetermined",
   {DEVICE16, NO_BLOCKS, .request = 5 * GiB, .reserved = 12 * GiB, .allocated = 10 * GiB,
    .before_first_free = -1, .iteration_need = -1, .first_persistent = -1},
   OL_OOM_undetermined},
  {"no call sites, no free yet, a weight's request: persistent",
   {DEVICE16, NO_BLOCKS, .request = 1 * GiB, .reserved = 15 * GiB + 512 * MiB,
    .allocated = 15 * GiB + 512 * MiB, .before_first_free = -1, .iteration_need = -1,
    .first_persistent = -1}, OL_OOM_persistent},
  /* A large tensor kept every 4th step (scripts/corpus_leaks.py on
   * ddp_fits): no steady rise, no warning, the kept blocks read as a
   * larger input; but one site of the forward's grew across iterations by
   * more than the request lacked. The same site of the state is no leak. */
  {"a site of no state role grew by the shortfall in steps: leak",
   {GREW_IN_STEPS(1 * GiB, OL_ROLE_activations)}, OL_OOM_leak},
  /* One block of the forward's kept from mid-run (a loss kept every 4th
   * step, out before the second: corpus_leaks.py --midway's ddp_fits and
   * fsdp2_fits), where the iteration under way asked no more than earlier
   * ones needed: the block is what no longer fits. Where it asked more, a
   * larger input is (held-out varlen_long: a block made once early sits
   * beside its long sequence's activations). */
  {"one block kept from mid-run, the iteration no larger than before: leak",
   {GREW_ONCE(10 * GiB)}, OL_OOM_leak},
  {"one block kept from mid-run, the iteration larger than before: activations",
   {GREW_ONCE(8 * GiB)}, OL_OOM_activations},
  /* its site makes and frees blocks every iteration: a step's own tensor
   * kept past its step, whatever the iteration under way asks */
  {"a step's block kept from mid-run, the iteration larger than before: leak",
   {GREW_ONCE(8 * GiB), .grower_per_step = true}, OL_OOM_leak},
  /* Under our pool, what it mapped toward the failed request (retiring
   * behind a fence as the request fails) is no memory held beside it:
   * held-out varlen_logits_leak's 0.46 GB of an 0.82 GB request's growth
   * made the request lack all of itself, more than the 0.62 GB of logits
   * kept (activations). Another allocator's reserve is what it holds. */
  {"a step's block kept, the pool's growth toward the request not held: leak",
   {KEPT_BESIDE_GROWTH, .managed = true}, OL_OOM_leak},
  {"a step's block kept, less than a framework's reserve lacks: activations",
   {KEPT_BESIDE_GROWTH}, OL_OOM_activations},
  /* iterations of one input wobble: held-out kept_validation_leak's failed
   * one asked 3.9 MB (0.16%) more than the most an earlier one needed */
  {"one block kept from mid-run, the iteration within a 32nd of before: leak",
   {GREW_ONCE(9 * GiB + 256 * MiB)}, OL_OOM_leak},
  /* A tensor kept in the iteration that runs out, where it made the same
   * sizes as the one before (corpus_leaks.py --once's ddp_fits: a 392 MiB
   * loss kept at its 10th step, out in that step's backward): the
   * iteration asks more than before by the kept block itself, and is no
   * larger input. Less than a 32nd of the device is not told from a
   * block freed a little later than the step before freed it. */
  {"held more than at the same point of the iteration before: leak",
   {GREW_SINCE_LAST(600 * MiB)}, OL_OOM_leak},
  {"held more blocks than at the same point of an iteration of other sizes: leak",
   {GREW_SINCE_LAST(600 * MiB), .since_last_by_calls = true}, OL_OOM_leak},
  {"held a little more than at the same point before: activations",
   {GREW_SINCE_LAST(400 * MiB)}, OL_OOM_activations},
  {"the site that grew is the optimizer's: not this leak",
   {GREW_IN_STEPS(1 * GiB, OL_ROLE_optimizer)}, OL_OOM_activations},
  {"a site of no state role grew by less than the shortfall: activations",
   {GREW_IN_STEPS(2 * GiB, OL_ROLE_activations)}, OL_OOM_activations},
  {"a buffer made once before the loop is no leak",
   {DEVICE16, NO_BLOCKS, .request = 2 * GiB, .reserved = 15 * GiB, .allocated = 15 * GiB,
    .iterations = 6, .persistent = 8 * GiB, .growth = 0, .first_persistent = 8 * GiB,
    .before_first_free = 8 * GiB, .iteration_need = 5 * GiB, ROLES(1 * GiB, 0, 1 * GiB, 6 * GiB),
    .request_role_known = true, .request_role = OL_ROLE_activations}, OL_OOM_activations},
  {"kept memory that grew since the loop began is a leak, found late or not",
   {DEVICE16, NO_BLOCKS, .request = 2 * GiB, .reserved = 15 * GiB, .allocated = 15 * GiB,
    .iterations = 2, .persistent = 9 * GiB, .growth = 0, .first_persistent = 8 * GiB,
    .before_first_free = 1 * GiB, .iteration_need = 5 * GiB, ROLES(1 * GiB, 0, 0, 13 * GiB),
    .request_role_known = true, .request_role = OL_ROLE_activations}, OL_OOM_leak},
  {"no frames, first iteration: the state by timing is the memory before the first free",
   {DEVICE16, NO_BLOCKS, .request = 4 * GiB, .reserved = 14 * GiB, .allocated = 14 * GiB,
    .iterations = 0, .before_first_free = 13 * GiB + 512 * MiB, .iteration_need = -1,
    .first_persistent = -1}, OL_OOM_persistent},
  /* Expandable segments in observe mode: cuMemCreate's segments carry no
   * site, but the failed request's own does (weights, at model.cuda()). */
  {"segments of no role, the request for weights",
   {BASE, NO_BLOCKS, .request = 1 * GiB, .reserved = 15 * GiB, .allocated = 15 * GiB,
    .segments_only = true, .request_role_known = true, .request_role = OL_ROLE_weights},
   OL_OOM_persistent},
  {"segments of no role, the request for activations: not told",
   {BASE, NO_BLOCKS, .request = 1 * GiB, .reserved = 15 * GiB, .allocated = 15 * GiB,
    .segments_only = true, .request_role_known = true, .request_role = OL_ROLE_activations},
   OL_OOM_undetermined},
  /* Seen on the H200: a rank with long sequences beside another rank on
   * one device; the request fits without the other, the step does not. */
  {"others hold memory, but an iteration alone needs more than the device",
   {DEVICE16, NO_BLOCKS, .request = 1 * GiB, .reserved = 6 * GiB, .allocated = 6 * GiB,
    .external = 4 * GiB, .iterations = 3, .persistent = 2 * GiB, .iteration_need = 15 * GiB,
    .before_first_free = 2 * GiB, .first_persistent = 2 * GiB}, OL_OOM_activations},
  /* The field guides' "fails mid-training": a few MB kept a step, hours
   * of it. No per-iteration share, not yet a quarter of the device, but
   * what was kept since the first iteration covers what the request lacked. */
  {"a slow leak adds up to what the request lacks",
   {DEVICE16, NO_BLOCKS, .request = 256 * MiB, .reserved = 15 * GiB + 900 * MiB,
    .allocated = 15 * GiB + 900 * MiB, .iterations = 200, .persistent = 6 * GiB,
    .first_persistent = 4 * GiB, .growth = 10 * MiB, .before_first_free = 1 * GiB,
    .iteration_need = 9 * GiB, ROLES(1 * GiB, 1 * GiB, 2 * GiB, 11 * GiB),
    .request_role_known = true, .request_role = OL_ROLE_activations}, OL_OOM_leak},
  {"the optimizer's state made after the first iteration found is not growth",
   {DEVICE16, NO_BLOCKS, .request = 1 * GiB + 512 * MiB, .reserved = 15 * GiB,
    .allocated = 15 * GiB, .iterations = 6, .persistent = 4 * GiB + 100 * MiB,
    .first_persistent = 1 * GiB + 100 * MiB, .growth = 200 * MiB, .before_first_free = 1 * GiB,
    .iteration_need = 9 * GiB, ROLES(1 * GiB, 0, 3 * GiB, 11 * GiB), .request_role_known = true,
    .request_role = OL_ROLE_activations}, OL_OOM_activations},
  {"a larger batch mid-training, what is kept barely rose",
   {DEVICE16, NO_BLOCKS, .request = 6 * GiB, .reserved = 12 * GiB, .allocated = 12 * GiB,
    .iterations = 50, .persistent = 4 * GiB + 50 * MiB, .first_persistent = 4 * GiB,
    .growth = 1 * MiB, .before_first_free = 1 * GiB, .iteration_need = 5 * GiB,
    ROLES(1 * GiB, 1 * GiB, 2 * GiB, 8 * GiB), .request_role_known = true,
    .request_role = OL_ROLE_activations}, OL_OOM_activations},
  {"kept memory that rose early and then stopped is no leak",
   {DEVICE16, NO_BLOCKS, .request = 2 * GiB, .reserved = 15 * GiB, .allocated = 15 * GiB,
    .iterations = 50, .persistent = 6 * GiB, .first_persistent = 4 * GiB, .growth = 0,
    .before_first_free = 1 * GiB, .iteration_need = 9 * GiB,
    ROLES(1 * GiB, 1 * GiB, 2 * GiB, 11 * GiB), .request_role_known = true,
    .request_role = OL_ROLE_activations}, OL_OOM_activations},
  {"small external share is not the cause",
   {BASE, NO_BLOCKS, .request = 2 * GiB, .reserved = 14 * GiB, .allocated = 14 * GiB, .external = 512 * MiB,
    .iterations = 3, .persistent = 3 * GiB}, OL_OOM_activations},
};

START_TEST(each_class_from_its_record)
{
  const class_case_t *c = &class_cases[_i];
  ol_oom_class_t got = ol_oom_classify(&c->record);
  ck_assert_msg(got == c->expected, "%s: got %s, expected %s", c->what, ol_oom_class_name(got),
                ol_oom_class_name(c->expected));
  ol_buf_t text = {0}, json = {0};
  ol_oom_explain(&text, &c->record, got, NULL, NULL);
  ol_oom_json(&json, &c->record, got, NULL, NULL);
  ck_assert_ptr_nonnull(strstr(text.data, ol_oom_class_name(got)));
  ck_assert_ptr_nonnull(strstr(json.data, "\"advice\": \""));
  /* Never a figure that tells nothing (issue 12: "a batch about 0%"). */
  ck_assert_ptr_null(strstr(text.data, " 0%"));
  ck_assert_ptr_null(strstr(text.data, " 0 steps"));
  ck_assert_ptr_null(strstr(text.data, "batch 0 "));
  /* The figures printed with the class agree with it: a batch figure
   * only where the batch is the lever (held-out adam_vit, persistent,
   * carried "batch_fits": 1, "batch_fits_headroom": 0), and never 0. */
  ck_assert_ptr_null(strstr(json.data, "\"batch_fits\": 0,"));
  ck_assert_ptr_null(strstr(json.data, "\"batch_fits_headroom\": 0,"));
  if (got != OL_OOM_activations)
    ck_assert_msg(strstr(json.data, "\"batch_fits\": null, \"batch_fits_headroom\": null") &&
                    strstr(json.data, "\"batch_fits_at_most\": null"),
                  "%s: %s", c->what, json.data);
  ol_buf_free(&text);
  ol_buf_free(&json);
}
END_TEST

static char *advice_of(const ol_oom_record_t *r, ol_oom_class_t c, ol_buf_t *text)
{
  *text = (ol_buf_t){0};
  ol_oom_explain(text, r, c, NULL, NULL);
  return text->data;
}

static const ol_oom_record_t *case_named(const char *what);
static void explain_named(const char *what, ol_buf_t *text);

/* Growth with no backward pass anywhere (inference): the likelier cause
 * first, a KV cache that grows by design, and what to change; a leak as
 * the other reading, not the training causes (a kept loss). Growth in a
 * training job keeps the training causes. */
START_TEST(growth_in_inference_names_the_cache_first)
{
  ol_buf_t text;
  const ol_oom_record_t *inference = case_named("inference whose memory grows each forward");
  const char *said = advice_of(inference, OL_OOM_leak, &text);
  ck_assert_msg(strstr(said, "if this is inference") && strstr(said, "max_new_tokens") &&
                    strstr(said, "If it outlives the calls"), "%s", said);
  /* a graph kept by a state carried without no_grad (held-out
   * stream_state_leak) was not among the causes named */
  ck_assert_msg(strstr(said, "a state carried from step to step"), "%s", said);
  ck_assert_msg(!strstr(said, "total += loss"), "%s", said);
  ol_buf_free(&text);
  said = advice_of(case_named("what outlives iterations grows"), OL_OOM_leak, &text);
  ck_assert_msg(strstr(said, "total += loss") && !strstr(said, "if this is inference"), "%s", said);
  ol_buf_free(&text);
}
END_TEST

static void test_namer(ol_buf_t *out, int32_t id, bool json, void *arg)
{
  (void)arg;
  ol_buf_printf(out, json ? "\"site %d\"" : "site %d", (int)id);
}

/* A leak whose most grown site makes weights is kept copies of the model
 * (held-out reload_leak: `copy.deepcopy` every other step, told the usual
 * causes of kept losses and outputs); grown activations are not, and
 * neither is a site of no known role. */
START_TEST(grown_weights_are_kept_copies)
{
  ol_oom_record_t r = *case_named("what outlives iterations grows");
  r.grower = (ol_oom_site_t){.id = 3, .bytes = 3 * GiB};
  r.grower_role = OL_ROLE_weights;
  ol_buf_t text;
  const char *said = advice_of(&r, OL_OOM_leak, &text);
  ck_assert_msg(strstr(said, "What grows most is weights") && strstr(said, "copy.deepcopy") &&
                    !strstr(said, "total += loss"), "%s", said);
  ol_buf_free(&text);
  ol_buf_t json = {0};
  ol_oom_json(&json, &r, OL_OOM_leak, test_namer, NULL);
  ck_assert_msg(
    strstr(json.data, "\"growth\": 3221225472, \"role\": \"weights\", \"once\": false, "
                      "\"since_last_iteration\": false, \"per_step\": false}"), "%s",
    json.data);
  ol_buf_free(&json);
  static const ol_role_t others[] = {OL_ROLE_activations, OL_ROLE_unknown};
  for (size_t i = 0; i < sizeof others / sizeof *others; i++) {
    r.grower_role = others[i];
    said = advice_of(&r, OL_OOM_leak, &text);
    ck_assert_msg(!strstr(said, "What grows most is weights") && strstr(said, "total += loss"),
                  "%s", said);
    ol_buf_free(&text);
  }
}
END_TEST

/* Tensors the autograd thread keeps step after step (a hook's list) in a
 * job whose optimizer keeps no state (plain SGD), grown across steps by
 * less than the weights: a leak. Session 43 guarded it off (a first
 * backward's layers told as iterations grew so); the accounting now
 * tells those layers from steps (account.c iterations_are_layers), and
 * the classes read a backward grower as any other. */
START_TEST(a_backward_s_kept_tensors_without_state_are_a_leak)
{
  ol_oom_record_t r = *case_named("a site of no state role grew by the shortfall in steps: leak");
  r.grower_role = OL_ROLE_backward;
  ck_assert_int_eq(ol_oom_classify(&r), OL_OOM_leak);
  r.role_bytes[OL_ROLE_optimizer] = 0;
  ck_assert_int_lt(r.grower.bytes, r.role_bytes[OL_ROLE_weights]);
  ck_assert_int_eq(ol_oom_classify(&r), OL_OOM_leak);
}
END_TEST

/* Optimizers made again while the old ones are kept (held-out
 * optimizer_leak: roles counted 3.04 GiB of optimizer state for 0.30 GiB
 * of weights as state, and the class was activations): a leak when the
 * state is beyond what one optimizer keeps and its site grew by twice the
 * weights across iterations; one optimizer made late (a switch to Adam
 * mid-run), or a state of six times the weights (fp32 master copies of
 * 16-bit weights), is not. */
START_TEST(optimizers_made_again_are_a_leak)
{
  ol_oom_record_t r;
  ol_oom_record_init(&r, 392 * MiB);
  r.capacity = 6 * GiB;
  r.device_free = 0;
  r.reserved = r.allocated = 5 * GiB + 400 * MiB;
  r.free_reserved = 100 * MiB;
  r.largest_free_block = 20 * MiB;
  r.iterations = 4;
  r.persistent = 3 * GiB;
  r.first_persistent = r.before_first_free = 330 * MiB;
  r.iteration_need = 1900 * MiB;
  r.roles_known = true;
  r.role_bytes[OL_ROLE_weights] = 312 * MiB;
  r.role_bytes[OL_ROLE_gradients] = 96 * MiB;
  r.role_bytes[OL_ROLE_optimizer] = 3112 * MiB;
  r.role_bytes[OL_ROLE_activations] = 1600 * MiB;
  r.grower = (ol_oom_site_t){.id = 2, .bytes = 1085 * MiB};
  r.grower_role = OL_ROLE_optimizer;
  ck_assert_int_eq(ol_oom_classify(&r), OL_OOM_leak);
  ol_buf_t text;
  const char *said = advice_of(&r, OL_OOM_leak, &text);
  ck_assert_msg(strstr(said, "The optimizer's state is 3.04 GiB for 312.00 MiB of weights") &&
                  strstr(said, "Without the 2.43 GiB beyond one optimizer's this 392.00 MiB "
                               "request would fit") &&
                  strstr(said, "param_groups") && !strstr(said, "total += loss"), "%s", said);
  ol_buf_free(&text);
  ol_oom_record_t once = r; /* made once, late: twice the weights grew */
  once.role_bytes[OL_ROLE_optimizer] = 624 * MiB;
  once.grower.bytes = 624 * MiB;
  once.persistent = 1100 * MiB; /* nothing else kept either */
  ck_assert_int_ne(ol_oom_classify(&once), OL_OOM_leak);
  ol_oom_record_t master = r; /* six times the weights: one optimizer's most */
  master.role_bytes[OL_ROLE_optimizer] = 6 * 312 * MiB;
  ck_assert_int_ne(ol_oom_classify(&master), OL_OOM_leak);
  ol_oom_record_t slow = r; /* its site grew by less than twice the weights */
  slow.grower.bytes = 600 * MiB;
  ck_assert_int_ne(ol_oom_classify(&slow), OL_OOM_leak);
}
END_TEST

static const ol_oom_record_t *case_named(const char *what)
{
  for (size_t i = 0; i < sizeof class_cases / sizeof *class_cases; i++)
    if (strcmp(class_cases[i].what, what) == 0)
      return &class_cases[i].record;
  ck_abort_msg("no case %s", what);
  return NULL;
}

/* The words for the case named what, appended to text (the caller frees it). */
static void explain_named(const char *what, ol_buf_t *text)
{
  const ol_oom_record_t *r = case_named(what);
  ol_oom_explain(text, r, ol_oom_classify(r), NULL, NULL);
}

/* GPT-2 at batch 6 out in its first forward (the first case above): the
 * state is 500 MiB of a 12 GiB device, 9.3 GiB is left with 20% headroom
 * and 11.5 GiB with none; the iteration needed at least 10.75 GiB (what it
 * held plus the request), so at most 6 * 11.5 / 10.75 = 6.4 fits with none
 * and 6 * 9.3 / 10.75 = 5.2 with headroom: upper bounds, said as such,
 * and below the batch that ran out (it was "at most batch 6 fits"). No
 * accumulation is advised from a bound (steps of 5 may not fit either);
 * the trial that finishes an iteration is a quarter of the bound. */
START_TEST(batch_figures_in_batches)
{
  const ol_oom_record_t *r = case_named("first step, weights small, activations fill the device");
  ck_assert_int_eq(r->batch, 6);
  int64_t fits, fits_headroom;
  bool bound;
  ck_assert(ol_oom_batch_figures(r, &fits, &fits_headroom, &bound));
  ck_assert(bound);
  ck_assert_int_eq(fits, 5);
  ck_assert_int_eq(fits_headroom, 5);
  ol_buf_t text = {0};
  ol_oom_explain(&text, r, ol_oom_classify(r), NULL, NULL);
  ck_assert_ptr_nonnull(strstr(text.data, "at most batch 5 fits on this device, at most 5 with "
                                          "20% headroom. "));
  ck_assert_ptr_null(strstr(text.data, "accumulation steps of"));
  ck_assert_ptr_nonnull(strstr(text.data, "in the first iteration, which did not finish"));
  /* ... and how to get the figure: one run long enough to find its
   * iterations (bert_batch's trial found none in 4 steps) */
  ck_assert_ptr_nonnull(strstr(text.data, "run once at batch 1 with --batch 1 for 5 steps or "
                                          "more, small enough to finish its iterations, and its "
                                          "report names the batch that fits and the accumulation "
                                          "steps that keep the effective batch of 6"));
  ck_assert_ptr_nonnull(strstr(text.data, "weights 500.00 MiB"));
  ol_buf_free(&text);
}
END_TEST

/* The same failure with an optimizer's state held (a step before may have
 * finished, its second not set beside it: held-out resnet50_adam at
 * 8f8c55e, out early in its second backward beside Adam's moments, was
 * told its first iteration had not finished). */
START_TEST(an_optimizer_s_state_held_is_no_first_iteration)
{
  ol_oom_record_t r = *case_named("first step, weights small, activations fill the device");
  r.role_bytes[OL_ROLE_optimizer] = 64 << 20;
  ck_assert_int_eq(ol_oom_classify(&r), OL_OOM_activations);
  ol_buf_t text = {0};
  ol_oom_explain(&text, &r, ol_oom_classify(&r), NULL, NULL);
  ck_assert_ptr_null(strstr(text.data, "first iteration"));
  ck_assert_ptr_nonnull(strstr(text.data, "in an iteration that did not finish (an optimizer's "
                                          "state is held"));
  ck_assert_ptr_nonnull(strstr(text.data, "(The failed iteration did not finish"));
  ol_buf_free(&text);
}
END_TEST

/* GPT-2 at batch 4 out in its second step under 8G (gpt2_batch, session
 * 39: its first update made Adam's moments, 939 MiB, and the step's own
 * memory no longer fits beside them): the step under way was set beside
 * the first at the failure, and the first rose step_rest above what it
 * held there before it ended. Its need is a figure, not a bound: the
 * state of 1974 MiB (weights, the gradients made so far, the moments)
 * leaves 6218 MiB of 8 GiB, 4579.6 with 20% headroom; the step needs what
 * it holds beside the state (7600 - 1974) and the rest (785 MiB), 6411
 * MiB: 4 * 6218 / 6411 = 3.9, 4 * 4579.6 / 6411 = 2.9; batch 3 fits (live:
 * 3 fits), 2 with headroom, and accumulation is advised. */
static ol_oom_record_t second_step(int64_t rest)
{
  return (ol_oom_record_t){.capacity = 8 * GiB, .device_free = 0, NO_BLOCKS,
                           .request = 785 * MiB, .reserved = 7600 * MiB,
                           .allocated = 7600 * MiB, .iterations = 0,
                           .before_first_free = 469 * MiB, .iteration_need = -1,
                           ROLES(469 * MiB, 566 * MiB, 939 * MiB, 5000 * MiB),
                           .request_role_known = true, .request_role = OL_ROLE_backward,
                           .since_last_by_repeat = true, .held_since_last = 939 * MiB,
                           .step_repeat_held = -1, .step_rest = rest, .batch = 4};
}

/* The batch too large for the step, and the figures, not bounds. */
static void assert_second_step_figure(const ol_oom_record_t *r, int64_t fits_want,
                                      int64_t headroom_want)
{
  int64_t fits, fits_headroom;
  bool bound;
  ck_assert_int_eq(ol_oom_classify(r), OL_OOM_activations);
  ck_assert(ol_oom_batch_figures(r, &fits, &fits_headroom, &bound));
  ck_assert(!bound);
  ck_assert_int_eq(fits, fits_want);
  ck_assert_int_eq(fits_headroom, headroom_want);
}

START_TEST(a_second_step_is_read_from_the_first)
{
  ol_oom_record_t r = second_step(785 * MiB);
  assert_second_step_figure(&r, 3, 2);
  int64_t fits, fits_headroom;
  bool bound;
  ol_buf_t text = {0};
  ol_oom_explain(&text, &r, ol_oom_classify(&r), NULL, NULL);
  ck_assert_ptr_nonnull(strstr(text.data, "needed 6.26 GiB in its second step, which did not "
                                          "finish: the first finished"));
  ck_assert_ptr_nonnull(strstr(text.data, "(it rose 785.00 MiB above what it held here)"));
  ck_assert_ptr_nonnull(strstr(text.data, "batch 3 fits on this device, 2 with 20% headroom; "
                                          "keep the effective batch of 4 with 2 accumulation "
                                          "steps of 2"));
  ck_assert_ptr_null(strstr(text.data, "first iteration"));
  ck_assert_ptr_null(strstr(text.data, "in an iteration that did not finish"));
  ck_assert_ptr_null(strstr(text.data, "run once at batch"));
  ck_assert_ptr_null(strstr(text.data, "micro-batch")); /* Adam's state held: an update came */
  ol_buf_free(&text);
  /* the second micro-step of an accumulation window: the first's
   * gradients held, no state made (held-out gpt2_medium_accum4) */
  ol_oom_record_t accum = second_step(785 * MiB);
  accum.role_bytes[OL_ROLE_backward] += accum.role_bytes[OL_ROLE_optimizer];
  accum.role_bytes[OL_ROLE_optimizer] = 0;
  accum.gradients_made = 469 * MiB;
  ol_buf_t within = {0};
  ol_oom_explain(&within, &accum, ol_oom_classify(&accum), NULL, NULL);
  ck_assert_msg(strstr(within.data, "accumulation steps of 2. This step holds the gradients the "
                                    "one before it made, and no optimizer's update came "
                                    "between them: where the job accumulates gradients already, "
                                    "4 is its micro-batch"), "%s", within.data);
  ol_buf_free(&within);
  /* the rest of the first counts: 3 GiB of it past here (a loss's
   * tensors still to come) is 8698 MiB a step, 2 fits */
  r = second_step(3 * GiB);
  ck_assert(ol_oom_batch_figures(&r, &fits, &fits_headroom, &bound));
  ck_assert_int_eq(fits, 2);
  /* plain SGD (no optimizer state) whose second step's rest leaves no
   * batch that fits: its first step finished, so its optimizer's first
   * step was seen and made nothing; not "ran out before its optimizer's
   * first step" (optimizer_unseen), the step's own memory */
  r = second_step(13 * GiB);
  r.role_bytes[OL_ROLE_weights] = r.role_bytes[OL_ROLE_gradients] = 2 * GiB;
  r.role_bytes[OL_ROLE_optimizer] = 0; /* Adam's 4 GiB would not fit beside them */
  r.held_since_last = 0;
  ck_assert_int_eq(ol_oom_classify(&r), OL_OOM_activations);
  ck_assert(ol_oom_batch_figures(&r, &fits, &fits_headroom, &bound));
  ck_assert_int_lt(fits, 1);
  /* ... and weights whose gradients and state could not fit, none held
   * in its forward: its first step's backward was seen (it trains), not
   * "whether it trains is not seen yet" (training_unseen) */
  r = second_step(785 * MiB);
  r.role_bytes[OL_ROLE_weights] = 3584 * MiB;
  r.role_bytes[OL_ROLE_gradients] = r.role_bytes[OL_ROLE_optimizer] = 0;
  r.request_role = OL_ROLE_activations;
  r.held_since_last = 0;
  ck_assert_int_eq(ol_oom_classify(&r), OL_OOM_activations);
  /* no step set beside it: the first step's bound, as before */
  r = second_step(0);
  r.since_last_by_repeat = false;
  r.held_since_last = -1;
  ck_assert(ol_oom_batch_figures(&r, &fits, &fits_headroom, &bound));
  ck_assert(bound);
  ck_assert_int_eq(fits, 3);
}
END_TEST

/* What of a second step's need a smaller batch does not shrink counts
 * with the state (recent.c ol_recent_rest_fixed: held-out VGG-16, whose
 * first backward had made 511 MiB of its classifier's gradients at its
 * rest's highest point, was told 26 where 24 fits, all of it scaled). At
 * batch 32: 32 * 6218 / 6411 = 31.04, 32 * 4579.6 / 6411 = 22.9; with
 * 1000 MiB of gradients and a 400 MiB workspace that do not shrink,
 * 32 * (6218 - 1400) / (6411 - 1400) = 30.8, 32 * 3179.6 / 5011 = 20.3. */
START_TEST(what_a_second_step_needs_whatever_its_batch_is_state)
{
  ol_oom_record_t r = second_step(785 * MiB);
  r.batch = 32;
  assert_second_step_figure(&r, 31, 22);
  r.step_fixed = (ol_recent_fixed_t){1000 * MiB, 400 * MiB, 0};
  assert_second_step_figure(&r, 30, 20);
  ol_buf_t text = {0};
  ol_oom_explain(&text, &r, ol_oom_classify(&r), NULL, NULL);
  /* the state and the step's need as before, the part that does not
   * shrink named within the need */
  ck_assert_ptr_nonnull(strstr(text.data, "holds 1.93 GiB and fits; the iteration's own memory "
                                          "needed 6.26 GiB in its second step"));
  ck_assert_ptr_nonnull(strstr(text.data, "; 1.37 GiB of what it needed does not shrink with "
                                          "the batch (the gradients the first's backward had "
                                          "made at its highest point, 1000.00 MiB; what the "
                                          "first made before its update and holds still"));
  ck_assert_ptr_nonnull(strstr(text.data, "batch 30 fits on this device, 20 with 20% headroom"));
  ol_buf_free(&text);
  /* not where no step was set beside this one (a bound, read as before) */
  r.since_last_by_repeat = false;
  r.held_since_last = -1;
  r.step_rest = 0;
  text = (ol_buf_t){0};
  ol_oom_explain(&text, &r, ol_oom_classify(&r), NULL, NULL);
  ck_assert_ptr_null(strstr(text.data, "does not shrink"));
  ol_buf_free(&text);
}
END_TEST

/* ... autocast's copies of the weights too (recent.c
 * ol_recent_rest_copies: held-out qwen_small_autocast_accum4, 0.92 GiB of
 * copies, was told 7 where 6 fits): the same 1400 MiB as copies. */
START_TEST(autocast_s_copies_in_a_second_step_are_state)
{
  ol_oom_record_t r = second_step(785 * MiB);
  r.batch = 32;
  r.step_fixed = (ol_recent_fixed_t){0, 0, 1400 * MiB};
  assert_second_step_figure(&r, 30, 20);
  ol_buf_t text = {0};
  ol_oom_explain(&text, &r, ol_oom_classify(&r), NULL, NULL);
  ck_assert_ptr_nonnull(strstr(text.data, "; 1.37 GiB of what it needed does not shrink with "
                                          "the batch (autocast's 16-bit copies of the weights, "
                                          "one of each weight its forward reads, held to the "
                                          "backward, 1.37 GiB) and counts beside the state"));
  ol_buf_free(&text);
}
END_TEST

/* A step that fits with its figure at the edge: the rest of 2650 MiB makes
 * the step need 8276 MiB, 4 * 6218 / 8276 = 3.005: batch 3 needs all but
 * 5 MiB of the device. Under manage mode the pool held 20 MiB above its
 * allocations at the failure, room no tensor of the step could use; it
 * stays, as a fitting job's figure keeps its peak's (held-out Llama
 * 3.2-1B's shape at batch 4 under 12711M: 3.006, batch 3 runs out live,
 * 2 fits): 4 * 6198 / 8276 = 2.996, batch 2. */
START_TEST(a_second_step_s_figure_keeps_the_pool_s_slack)
{
  ol_oom_record_t r = second_step(2650 * MiB);
  assert_second_step_figure(&r, 3, 2);
  r.managed = true;
  r.reserved = 7620 * MiB;
  r.free_reserved = 20 * MiB;
  assert_second_step_figure(&r, 2, 2);
  r.managed = false; /* PyTorch's cache: its segments' free room is not the pool's */
  assert_second_step_figure(&r, 3, 2);
}
END_TEST

/* ... without call sites, the step found by its sizes: what the first
 * step kept (step_repeat_held, the moments, within three times the 469
 * MiB made before the first free) is state beside those weights, 1415
 * MiB; the step needs 7600 + 785 - 1415 = 6970 MiB: 4 * 6777 / 6970 =
 * 3.9, 4 * 5138.6 / 6970 = 2.9. */
static ol_oom_record_t second_step_by_sizes(int64_t weights, int64_t kept)
{
  return (ol_oom_record_t){.capacity = 8 * GiB, .device_free = 0, NO_BLOCKS,
                           .request = 785 * MiB, .reserved = 7600 * MiB, .allocated = 7600 * MiB,
                           .iterations = 0, .before_first_free = weights, .iteration_need = -1,
                           .allocations_made = 1876, .swings = 2, .held_since_last = -1,
                           .step_repeat_held = kept, .step_rest = 785 * MiB, .batch = 4};
}

START_TEST(a_second_step_told_by_its_sizes_is_read_from_the_first)
{
  ol_oom_record_t r = second_step_by_sizes(469 * MiB, 946 * MiB);
  assert_second_step_figure(&r, 3, 2);
  ol_buf_t text = {0};
  ol_oom_explain(&text, &r, ol_oom_classify(&r), NULL, NULL);
  ck_assert_ptr_nonnull(strstr(text.data, "holds 1.38 GiB and fits"));
  ck_assert_ptr_nonnull(strstr(text.data, "its first step, told by its sizes, kept 946.00 MiB "
                                          "more (taken as its state with it)"));
  ol_buf_free(&text);
}
END_TEST

/* ... weights that outweigh the step's activations: 1700 MiB made
 * before the first free, whose gradients and Adam's moments would take a
 * state of four times them past the guides' headroom (step_state_unseen).
 * Its first update was seen, and the first step kept 3400 MiB, which may
 * be the moments or tensors kept from step to step (a leak): the class
 * hinges on which, in a second step's words, not a first step's. Where it
 * held more than the weights could leave (allocated 6000 MiB beside 1700
 * + 5000: the repeat began before the weights were made, as the first
 * update's buffers repeat the load's: sgd_momentum_step without its
 * sites), it is no second step: a first step's words. */
START_TEST(a_weights_heavy_second_step_by_sizes)
{
  ol_oom_record_t r = second_step_by_sizes(1700 * MiB, 3400 * MiB);
  ck_assert_int_eq(ol_oom_classify(&r), OL_OOM_undetermined);
  ol_buf_t text = {0};
  ol_oom_explain(&text, &r, OL_OOM_undetermined, NULL, NULL);
  ck_assert_msg(strstr(text.data, "Its first step finished (the step under way repeats its "
                                  "sizes): by timing, the 1.66 GiB made before the job first "
                                  "freed memory and still held are its weights, and the first "
                                  "step kept 3.32 GiB more") &&
                  !strstr(text.data, "no iteration finished"),
                "%s", text.data);
  ol_buf_free(&text);
  r.allocated = r.reserved = 6000 * MiB;
  r.step_repeat_held = 5000 * MiB;
  ck_assert_int_eq(ol_oom_classify(&r), OL_OOM_undetermined);
  ol_oom_explain(&text, &r, OL_OOM_undetermined, NULL, NULL);
  ck_assert_msg(strstr(text.data, "no iteration finished") &&
                  !strstr(text.data, "Its first step finished"),
                "%s", text.data);
  ol_buf_free(&text);
}
END_TEST

/* Iterations finished at this batch, then one needed far more, with
 * nothing kept growing (held-out multiscale_batch: larger images from its
 * ninth step): the paragraph says its input was larger than any before,
 * and that the figures are for inputs of its size; so too 7% more (held-out
 * bucket_batch: its first bucket of long sequences ran out early in its
 * backward, 5.21 GiB against the 4.86 GiB of the short ones, and a tenth
 * was asked for then). Within a 32nd of the most a finished iteration
 * needed, it says nothing of the kind. */
START_TEST(an_iteration_larger_than_any_before)
{
  ol_oom_record_t r = {.capacity = 8 * GiB, .device_free = 0, NO_BLOCKS, .request = 512 * MiB,
                       .reserved = 7 * GiB, .allocated = 7 * GiB, .iterations = 8,
                       .persistent = 1 * GiB, .before_first_free = 1 * GiB,
                       .first_persistent = 1 * GiB, .iteration_need = 4 * GiB, .batch = 48};
  ck_assert_int_eq(ol_oom_classify(&r), OL_OOM_activations);
  ol_buf_t text = {0};
  ol_oom_explain(&text, &r, OL_OOM_activations, NULL, NULL);
  ck_assert_msg(strstr(text.data, "The 8 iterations before it finished, each needing at most "
                                  "4.00 GiB of its own; this one needed at least 6.50 GiB: its "
                                  "work was larger than any before") &&
                  strstr(text.data, "a size the data decides (a mixture of experts' routing"),
                "%s", text.data);
  ol_buf_free(&text);
  r.iteration_need = 6 * GiB + 80 * MiB; /* 6.50 is 7% more */
  ol_buf_t more = {0};
  ol_oom_explain(&more, &r, OL_OOM_activations, NULL, NULL);
  ck_assert_msg(strstr(more.data, "its work was larger than any before"), "%s", more.data);
  ol_buf_free(&more);
  r.iteration_need = 6 * GiB + 400 * MiB; /* 6.50 is within a 32nd of it */
  ol_buf_t same = {0};
  ol_oom_explain(&same, &r, OL_OOM_activations, NULL, NULL);
  ck_assert_ptr_null(strstr(same.data, "larger than any before"));
  ol_buf_free(&same);
}
END_TEST

/* The iterations' need is read above what outlives them (their lowest
 * points), and so is the failed one's when set beside them: the state
 * by roles, less than that, would count what the lowest points hold
 * beyond it as this iteration's (vit_switch_state replayed at half its
 * cap, plain SGD: 523 MiB outlived its steps, 421 MiB was weights and
 * gradients, and a step of the same size, out in the pool's slack, was
 * told "593 MiB where at most 495 before: larger than any before"). */
START_TEST(an_iteration_of_the_same_size_is_not_called_larger)
{
  ol_oom_record_t r = {.capacity = 1096 * MiB, .device_free = 0, NO_BLOCKS, .request = 9 * MiB,
                       .reserved = 1085 * MiB, .allocated = 1005 * MiB, .iterations = 3,
                       .persistent = 523 * MiB, .before_first_free = 325 * MiB,
                       .first_persistent = 523 * MiB, .iteration_need = 495 * MiB, .batch = 4};
  r.roles_known = true;
  r.role_bytes[OL_ROLE_weights] = 325 * MiB;
  r.role_bytes[OL_ROLE_gradients] = 96 * MiB;
  r.role_bytes[OL_ROLE_activations] = 524 * MiB;
  r.role_bytes[OL_ROLE_backward] = 23 * MiB;
  r.role_bytes[OL_ROLE_unknown] = 37 * MiB;
  ck_assert_int_eq(ol_oom_classify(&r), OL_OOM_activations);
  ol_buf_t text = {0};
  ol_oom_explain(&text, &r, OL_OOM_activations, NULL, NULL);
  ck_assert_msg(strstr(text.data, "needed at least") &&
                  !strstr(text.data, "larger than any before"), "%s", text.data);
  ol_buf_free(&text);
  r.allocated = 1040 * MiB; /* 526 MiB above what outlives them: 6% more */
  r.capacity = 1130 * MiB;
  r.reserved = 1120 * MiB;
  ol_buf_t more = {0};
  ol_oom_explain(&more, &r, OL_OOM_activations, NULL, NULL);
  ck_assert_msg(strstr(more.data, "this one needed at least 526.00 MiB: its work was larger "
                                  "than any before"), "%s", more.data);
  ol_buf_free(&more);
}
END_TEST

/* An iteration that finished says what the iteration needs, so the figure
 * is no bound; no batch: shares of the current one. */
START_TEST(batch_figures_from_a_finished_iteration)
{
  ol_oom_record_t r = {.capacity = 10 * GiB, .device_free = 0, NO_BLOCKS, .request = 1 * GiB,
                       .reserved = 9 * GiB, .allocated = 9 * GiB, .iterations = 5,
                       .persistent = 2 * GiB, .before_first_free = 2 * GiB,
                       .iteration_need = 12 * GiB};
  ck_assert_int_eq(ol_oom_classify(&r), OL_OOM_activations);
  int64_t fits, fits_headroom;
  bool bound;
  ck_assert(!ol_oom_batch_figures(&r, &fits, &fits_headroom, &bound));
  ck_assert(!bound);
  ck_assert_int_eq(fits, 666);          /* 8 GiB of room for 12 GiB: 2/3 of the batch */
  ck_assert_int_eq(fits_headroom, 500); /* 6 GiB with 20% headroom: half */
  ol_buf_t text = {0};
  ol_oom_explain(&text, &r, OL_OOM_activations, NULL, NULL);
  ck_assert_ptr_nonnull(strstr(text.data, "A batch of 50% of the current one fits with 20% "
                                          "headroom (66% with none): keep the effective batch "
                                          "with gradient accumulation over 2 steps"));
  ck_assert_ptr_nonnull(strstr(text.data, "by timing, 2.00 GiB outlives the 5 iterations seen"));
  r.batch = 8;
  ck_assert(ol_oom_batch_figures(&r, &fits, &fits_headroom, &bound));
  ck_assert_int_eq(fits, 5);
  ck_assert_int_eq(fits_headroom, 4);
  ol_buf_free(&text);
}
END_TEST

/* Out in an iteration that needed more than the ones that finished (held-out
 * accum_leak: seven found, the eighth ran out): its need is a bound, and the
 * words say the failed iteration did not finish, not the first. */
START_TEST(a_later_iteration_that_failed_is_not_called_the_first)
{
  ol_oom_record_t r = {.capacity = 10 * GiB, .device_free = 0, NO_BLOCKS, .request = 1 * GiB,
                       .reserved = 9 * GiB, .allocated = 9 * GiB, .iterations = 7,
                       .persistent = 1 * GiB, .before_first_free = 1 * GiB,
                       .iteration_need = 3 * GiB, .batch = 4};
  ck_assert_int_eq(ol_oom_classify(&r), OL_OOM_activations);
  int64_t fits, fits_headroom;
  bool bound;
  ck_assert(ol_oom_batch_figures(&r, &fits, &fits_headroom, &bound));
  ck_assert(bound);
  ol_buf_t text = {0};
  ol_oom_explain(&text, &r, OL_OOM_activations, NULL, NULL);
  ck_assert_msg(strstr(text.data, "(The failed iteration did not finish, so these are upper "
                                  "bounds") && !strstr(text.data, "first iteration"),
                "%s", text.data);
  ol_buf_free(&text);
}
END_TEST

/* The figure from a job that fitted, on what the H200 measured
 * (docs/measurements.md, "How an iteration's memory grows with its
 * batch"): each run's peak allocated and reserved under `oomlens run
 * --manage --capacity CAP --batch B`, what outlived its iterations and what
 * was held outside. Bisected under the same caps, GPT-2 fits at 5 and not
 * at 6 (it ran out 24 MB short), ResNet-50 at 86 (87 in an earlier run)
 * and not at 88. The figure is within one from every batch but ResNet-50's
 * 16, where a part of some 40 MB that does not scale weighs as two
 * samples (84): never above the truth by more than one. */
typedef struct {
  int64_t batch, peak_allocated, peak_reserved, lowest, highest;
} measured_run_t;

static void check_measured(const char *job, const measured_run_t *m, int64_t available,
                           int64_t state)
{
  ol_batch_figure_t f = {.batch = m->batch, .available = available, .state = state,
                         .need = m->peak_allocated - state,
                         .overhead = m->peak_reserved - m->peak_allocated};
  ol_batch_figure_solve(&f);
  ck_assert_msg(f.fits >= m->lowest && f.fits <= m->highest && f.fits_headroom < f.fits,
                "%s from batch %lld: %lld fits, %lld with headroom", job, (long long)m->batch,
                (long long)f.fits, (long long)f.fits_headroom);
}

START_TEST(batch_figure_on_measured_runs)
{
  static const measured_run_t gpt2[] = {
    {1, 3472700424, 3481272320, 4, 6},  {2, 5249475592, 5263851520, 4, 6},
    {3, 7026250760, 7046430720, 4, 6},  {4, 8803025928, 8852078592, 4, 6},
    {5, 10579801096, 10647240704, 4, 6}};
  static const measured_run_t resnet[] = {
    {16, 1841765656, 1923088384, 84, 84}, {32, 3195805096, 3307208704, 85, 88},
    {64, 5964832408, 6071255040, 85, 88}, {80, 7352098584, 7480541184, 85, 88}};
  const int64_t outside = 552402944; /* the CUDA context, in both */
  for (size_t i = 0; i < sizeof gpt2 / sizeof *gpt2; i++)
    check_measured("GPT-2", &gpt2[i], 12 * GiB - outside, 1695933440);
  for (size_t i = 0; i < sizeof resnet / sizeof *resnet; i++)
    check_measured("ResNet-50", &resnet[i], 8 * GiB - outside, 407359216);
}
END_TEST

/* Others' memory blamed before any iteration finished: the words say what
 * is not known (whether the step fits alone), and name the other process. */
START_TEST(external_in_the_first_iteration_says_what_is_not_known)
{
  ol_oom_record_t r = {DEVICE16, NO_BLOCKS, .request = 1 * GiB, .reserved = 4 * GiB,
                       .allocated = 4 * GiB, .external = 9 * GiB, .iterations = 0,
                       .before_first_free = 2 * GiB, .iteration_need = -1, .other_count = 1,
                       .others = {{.pid = 4242, .bytes = 8 * GiB, .name = "python3"}}};
  ck_assert_int_eq(ol_oom_classify(&r), OL_OOM_external);
  ol_buf_t text = {0};
  ol_oom_explain(&text, &r, OL_OOM_external, NULL, NULL);
  ck_assert_ptr_nonnull(strstr(text.data, "whether the whole step fits alone is not known"));
  ck_assert_ptr_nonnull(strstr(text.data, "pid 4242 (python3)"));
  r.iterations = 4, r.persistent = 2 * GiB, r.iteration_need = 3 * GiB;
  ol_buf_free(&text);
  ol_oom_explain(&text, &r, OL_OOM_external, NULL, NULL);
  ck_assert_ptr_null(strstr(text.data, "not known"));
  ol_buf_free(&text);
}
END_TEST

/* The state leaves less than one sample's share: no batch fits, and the
 * advice says so rather than "batch 0", and offers no batch to keep. */
START_TEST(no_batch_fits_is_said)
{
  ol_oom_record_t r = {.capacity = 10 * GiB, .device_free = 0, NO_BLOCKS, .request = 2 * GiB,
                       .reserved = 9 * GiB, .allocated = 9 * GiB, .iterations = 0,
                       .before_first_free = 7 * GiB, .iteration_need = -1, .batch = 1,
                       ROLES(2 * GiB, 2 * GiB, 3 * GiB, 2 * GiB)};
  ck_assert_int_eq(ol_oom_classify(&r), OL_OOM_activations);
  ol_buf_t text = {0}, json = {0};
  ol_oom_explain(&text, &r, OL_OOM_activations, NULL, NULL);
  ck_assert_ptr_nonnull(strstr(text.data, "no batch fits"));
  /* no batch to keep (held-out seq_batch1 was told "Or keep the batch") */
  ck_assert_msg(strstr(text.data, "To cut the activations: mixed precision") &&
                  !strstr(text.data, "Or keep the batch"), "%s", text.data);
  /* what alone exceeds the device: the state and one sample (at least
   * the 2 GiB held above the state, plus the request) */
  ck_assert_msg(strstr(text.data, "the state (7.00 GiB) and one sample's share of the "
                                  "iteration (4.00 GiB) already need at least 11.00 GiB"),
                "%s", text.data);
  ol_oom_json(&json, &r, OL_OOM_activations, NULL, NULL);
  ck_assert_msg(strstr(json.data, "\"batch_fits\": null, \"batch_fits_headroom\": null") &&
                  strstr(json.data, "\"no_batch_fits\": {\"because\": \"state_and_one_sample\", "
                                    "\"bytes\": 11811160064, \"available\": 10737418240}"),
                "%s", json.data);
  ol_buf_free(&text);
  ol_buf_free(&json);
}
END_TEST

/* Large weights out in the first forward (held-out distill_state): both
 * fixes, and the most the trained part may weigh: (16 - 11) / 3 GiB. */
START_TEST(large_weights_in_the_first_forward_give_both_fixes)
{
  ol_buf_t text = {0};
  explain_named("LoRA or a full fine-tune: large weights, out in the first forward", &text);
  ck_assert_msg(strstr(text.data, "the weights alone hold 11.00 GiB of the 16.00 GiB") &&
                  strstr(text.data, "If it trains them all, their gradients alone (11.00 GiB "
                                    "more)") &&
                  strstr(text.data, "Shrink the state:") &&
                  strstr(text.data, "at most 1.67 GiB of trained weights (447 million fp32 "
                                    "parameters)"), "%s", text.data);
  ol_buf_free(&text);
}
END_TEST

/* No batch fits before the optimizer's first step, nor would Adam's
 * state: both fixes, with what momentum and Adam make the state, and the
 * JSON says what alone exceeds the device. */
START_TEST(no_batch_before_the_optimizer_gives_both_fixes)
{
  const ol_oom_record_t *r = case_named("no batch fits before the optimizer's first step, nor "
                                        "Adam's state: undetermined");
  ol_buf_t text = {0};
  ol_oom_explain(&text, r, ol_oom_classify(r), NULL, NULL);
  ck_assert_msg(strstr(text.data, "the state held (10.00 GiB: weights and the 5.00 GiB of "
                                  "gradients made so far) and one sample's share of the "
                                  "iteration (6.00 GiB) already need at least 16.00 GiB") &&
                  strstr(text.data, "With plain SGD (no state), the memory per sample") &&
                  strstr(text.data, "the state alone comes to 15.00 GiB, with Adam (two) to "
                                    "20.00 GiB, where the guides keep it under 12.80 GiB") &&
                  strstr(text.data, "Shrink the state:"), "%s", text.data);
  ol_buf_free(&text);
  ol_buf_t json = {0};
  ol_oom_json(&json, r, OL_OOM_undetermined, NULL, NULL);
  ck_assert_msg(strstr(json.data, "\"no_batch_fits\": {\"because\": \"state_and_one_sample\""),
                "%s", json.data);
  ol_buf_free(&json);
  /* in the first backward, the gradients still to come counted */
  ol_buf_t partial = {0};
  explain_named("no batch fits in the first backward, all the gradients and Adam's state would "
                "not: undetermined", &partial);
  ck_assert_msg(strstr(partial.data, "the state held (7.00 GiB: weights and the 1.00 GiB of "
                                     "gradients made so far)") &&
                  strstr(partial.data, "if the job trains them all, 5.00 GiB more are to come") &&
                  strstr(partial.data, "the state alone comes to 18.00 GiB, with Adam (two) to "
                                       "24.00 GiB"), "%s", partial.data);
  ol_buf_free(&partial);
}
END_TEST

/* The leak found by its standing warning says how much grew since when,
 * at what rate. */
START_TEST(a_leak_by_its_warning_says_what_grew)
{
  ol_buf_t text = {0};
  explain_named("a standing leak warning's growth covers what the request lacked: leak", &text);
  ck_assert_msg(strstr(text.data, "has grown by 2.00 GiB since iteration 10 (from 7.00 GiB to "
                                  "9.00 GiB; about 50.00 MiB a step, as the leak warning said"),
                "%s", text.data);
  ol_buf_free(&text);
}
END_TEST

/* Without call sites the first step's state by timing cannot say: both
 * fixes, and how to see more. */
START_TEST(a_first_step_without_call_sites_gives_both_fixes)
{
  ol_buf_t text = {0};
  explain_named("no call sites, weights that with a first step's state leave no room: "
                "undetermined", &text);
  ck_assert_msg(strstr(text.data, "by timing, the 4.00 GiB made before the job first freed "
                                  "memory and still held are its weights") &&
                  strstr(text.data, "(up to three times the weights, 12.00 GiB more, with Adam)") &&
                  strstr(text.data, "Shrink the state:") &&
                  strstr(text.data, "a smaller batch is the fix"), "%s", text.data);
  ol_buf_free(&text);
  explain_named("no call sites, no free yet, a request as large as half of all held: "
                "undetermined", &text);
  ck_assert_msg(strstr(text.data, "asking for 5.00 GiB while it held 10.00 GiB"), "%s",
                text.data);
  ol_buf_free(&text);
}
END_TEST

/* The leak found by the site that grew in steps says so, and names the
 * site's role. */
START_TEST(a_leak_in_steps_says_what_grew)
{
  ol_buf_t text = {0};
  explain_named("a site of no state role grew by the shortfall in steps: leak", &text);
  ck_assert_msg(strstr(text.data, "One call site's memory, kept from step to step, grew by "
                                  "1.00 GiB across the 11 iterations seen, in steps rather than "
                                  "steadily (its blocks are activations by their frames"),
                "%s", text.data);
  ol_buf_free(&text);
}
END_TEST

/* A leak of one block kept says what the block is and that the
 * iteration was no larger than the earlier ones. */
START_TEST(a_leak_of_one_kept_block_says_so)
{
  ol_buf_t text = {0};
  explain_named("one block kept from mid-run, the iteration no larger than before: leak", &text);
  ck_assert_msg(strstr(text.data, "One call site holds 1.00 GiB it made in an earlier iteration "
                                  "and kept since (its blocks are activations by their frames") &&
                  strstr(text.data, "this iteration asked for 9.50 GiB above what outlives the "
                                    "iterations, about what the earlier ones needed (at most "
                                    "10.00 GiB)"),
                "%s", text.data);
  ol_buf_free(&text);
}
END_TEST

/* Without call sites, more past a repeat of the last step: the paragraph
 * says the input is no larger and gives both readings and their fixes;
 * made without a free and too large with the state, it is state being
 * built; the JSON carries what was made past the repeat. */
START_TEST(more_past_a_repeat_says_both_readings)
{
  ol_buf_t text = {0};
  explain_named("without call sites, more past a repeat of the last step: undetermined", &text);
  ck_assert_msg(strstr(text.data, "through its rise and fall, so its input is no larger, and "
                                  "then 40 allocations the last never made, which hold 2.00 GiB;") &&
                  strstr(text.data, "state made in mid-run") && strstr(text.data, "a new pass") &&
                  strstr(text.data, "Shrink the state") && strstr(text.data, "torch.no_grad()"),
                "%s", text.data);
  ol_buf_free(&text);
  const char *built = "without call sites, state made past a repeat without a free, too large: "
                      "persistent";
  explain_named(built, &text);
  ck_assert_msg(strstr(text.data, "After 8 iterations the job ran out building more state") &&
                  strstr(text.data, "made 8.00 GiB in 300 allocations without freeing any") &&
                  strstr(text.data, "that comes to 13.25 GiB"),
                "%s", text.data);
  ol_buf_free(&text);
  ol_buf_t json = {0};
  ol_oom_json(&json, case_named(built), OL_OOM_persistent, test_namer, NULL);
  ck_assert_msg(strstr(json.data, "\"past_repeat\": {\"held\": 8589934592, \"allocations\": 300, "
                                  "\"frees\": 0}") &&
                  strstr(json.data, "\"state_from\": \"past_repeat\""),
                "%s", json.data);
  ol_buf_free(&json);
}
END_TEST

/* The JSON names each way the state was told, the last of them too (a
 * source added to the list once shifted every name after it, and the
 * last was read past the end of the names). */
START_TEST(the_json_names_where_the_state_is_from)
{
  static const struct {
    const char *name, *from;
  } told[] = {
    {"first step, no frames: by timing, before the first free", "first_free"},
    {"PyTorch's cache hides the tensors: not told", "hidden"},
    {"a model too large to load, by role", "roles"},
    {"without call sites, more past a repeat of the last step: undetermined", "iterations"},
  };
  for (size_t i = 0; i < sizeof told / sizeof told[0]; i++) {
    const ol_oom_record_t *r = case_named(told[i].name);
    ol_buf_t json = {0};
    ol_oom_json(&json, r, ol_oom_classify(r), test_namer, NULL);
    char want[64];
    snprintf(want, sizeof want, "\"state_from\": \"%s\"", told[i].from);
    ck_assert_msg(strstr(json.data, want), "%s: %s", told[i].name, json.data);
    ol_buf_free(&json);
  }
}
END_TEST

/* Our pool's own failure is said as such, with what to do. */
START_TEST(the_pool_s_own_failure_is_said)
{
  ol_buf_t text = {0};
  explain_named("our pool refused a request one of its free blocks holds", &text);
  ck_assert_msg(strstr(text.data, "free block of 4.31 GiB") &&
                  strstr(text.data, "oomlens's own under --manage"), "%s", text.data);
  ol_buf_free(&text);
}
END_TEST

/* A job that began again after an OOM (a batch size search): the figures
 * are shares, the paragraph says why, and does not ask for --batch, which
 * was given; the JSON carries both. */
START_TEST(a_job_begun_again_gives_shares_of_its_batch)
{
  const char *name = "first step of a job that began again after an OOM, at a batch not known";
  ol_buf_t text = {0};
  explain_named(name, &text);
  ck_assert_msg(strstr(text.data, "loaded it again (1 time)") &&
                  strstr(text.data, "may no longer be the 12 it was given") &&
                  strstr(text.data, "% of the current one") &&
                  !strstr(text.data, "give the batch with --batch N") &&
                  strstr(text.data, "(99% with none)"), /* never more than the batch that failed */
                "%s", text.data);
  ol_buf_free(&text);
  const ol_oom_record_t *r = case_named(name);
  ol_buf_t json = {0};
  ol_oom_json(&json, r, ol_oom_classify(r), test_namer, NULL);
  ck_assert_msg(strstr(json.data, "\"batch\": 0, ") &&
                  strstr(json.data, "\"batch_given\": 12, \"restarts\": 1"), "%s", json.data);
  ol_buf_free(&json);
}
END_TEST

/* A step's own tensor kept from mid-run, out at a larger iteration: the
 * paragraph says the iteration asked more and the block still decides it;
 * the JSON marks the site as a step's. */
START_TEST(a_step_s_block_kept_out_at_a_larger_iteration_says_so)
{
  const char *name = "a step's block kept from mid-run, the iteration larger than before: leak";
  ol_buf_t text = {0};
  explain_named(name, &text);
  ck_assert_msg(strstr(text.data, "where it makes blocks every iteration and frees them within it: "
                                  "a tensor of its step kept past it") &&
                  strstr(text.data, "more than the earlier ones needed (at most 8.00 GiB: a larger "
                                    "input), but without those blocks this 1.00 GiB request "
                                    "would fit") &&
                  !strstr(text.data, "about what the earlier ones needed"),
                "%s", text.data);
  ol_buf_free(&text);
  ol_buf_t json = {0};
  ol_oom_json(&json, case_named(name), OL_OOM_leak, test_namer, NULL);
  ck_assert_msg(strstr(json.data, "\"once\": true, \"since_last_iteration\": false, "
                                  "\"per_step\": true}"),
                "%s", json.data);
  ol_buf_free(&json);
}
END_TEST

/* A tensor kept in the iteration that ran out: what the iteration holds
 * more than the one before at the same point, the site's part, and where
 * the fix is; the JSON marks the reading. */
START_TEST(a_tensor_kept_since_the_last_iteration_says_so)
{
  ol_buf_t text = {0};
  explain_named("held more than at the same point of the iteration before: leak", &text);
  ck_assert_msg(strstr(text.data, "made the same allocations as the one before up to where it "
                                  "failed, so its input is no larger, and yet it holds 664.00 MiB "
                                  "more than that one held there; one call site holds 600.00 MiB "
                                  "more") &&
                  strstr(text.data, "`.item()`") && !strstr(text.data, "One call site holds"),
                "%s", text.data);
  ol_buf_free(&text);
  ol_buf_t json = {0};
  ol_oom_json(&json, case_named("held more than at the same point of the iteration before: leak"),
              OL_OOM_leak, test_namer, NULL);
  ck_assert_msg(strstr(json.data, "\"held_since_last_iteration\": 696254464") &&
                  strstr(json.data,
                         "\"once\": false, \"since_last_iteration\": true, \"per_step\": false}"),
                "%s", json.data);
  ol_buf_free(&json);
}
END_TEST

/* Read by calls (the iteration's sizes differed from the last one's): the
 * paragraph does not say the input is no larger, and the JSON marks it. */
START_TEST(a_tensor_kept_in_an_iteration_of_other_sizes_says_so)
{
  const char *name = "held more blocks than at the same point of an iteration of other sizes: leak";
  ol_buf_t text = {0};
  explain_named(name, &text);
  ck_assert_msg(strstr(text.data, "This iteration's call sites made their allocations in the same "
                                  "order as in the one before up to where it failed, of other "
                                  "sizes (its input is larger or smaller), and they hold 664.00 "
                                  "MiB more in blocks") &&
                  strstr(text.data, "one call site holds 600.00 MiB more") &&
                  !strstr(text.data, "no larger"),
                "%s", text.data);
  ol_buf_free(&text);
  ol_buf_t json = {0};
  ol_oom_json(&json, case_named(name), OL_OOM_leak, test_namer, NULL);
  ck_assert_msg(strstr(json.data, "\"since_last_by_calls\": true"), "%s", json.data);
  ol_buf_free(&json);
}
END_TEST

/* Without call sites, what the iteration holds more than the one before
 * at the same point is said with the three things it may be. */
START_TEST(held_more_without_call_sites_says_what_it_may_be)
{
  ol_buf_t text = {0};
  explain_named("without call sites, the same sizes holding more than the step before: "
                "undetermined", &text);
  ck_assert_msg(strstr(text.data, "so its input is no larger, and yet it holds 768.00 MiB more "
                                  "than that one held there") &&
                  strstr(text.data, "a tensor kept past its use") &&
                  strstr(text.data, "gradients kept between micro-steps") &&
                  strstr(text.data, "state made in this iteration"),
                "%s", text.data);
  ol_buf_free(&text);
}
END_TEST

/* Without call sites, iterations are found by sizes that repeat: "no
 * iteration found" is not "the first one did not finish" (a job of
 * varying sizes finds none in any number of steps: held-out kv_cache
 * replayed without its sites was told its first iteration had not). */
START_TEST(no_iteration_found_without_call_sites_is_not_the_first)
{
  ol_buf_t text = {0};
  explain_named("first step, no frames: by timing, before the first free", &text);
  ck_assert_msg(strstr(text.data, "in an iteration that did not finish (none was found: without "
                                  "call sites") &&
                  !strstr(text.data, "first iteration"), "%s", text.data);
  ol_buf_free(&text);
  explain_named("no call sites, no iteration, swings within a first step's length, low points "
                "risen: undetermined", &text);
  ck_assert_msg(strstr(text.data, "no iteration was found in the 7496 allocations the job made") &&
                  strstr(text.data, "rose again near its highest 4 times, as a loop's steps do, "
                                    "and it fell back 512.00 MiB higher before the last") &&
                  strstr(text.data, "not known to be in its first step"), "%s", text.data);
  ol_buf_free(&text);
}
END_TEST

/* Without call sites, the kept memory beyond a training state and the
 * loop not seen say what timing cannot tell, and both fixes. */
START_TEST(kept_or_state_without_call_sites_says_both)
{
  ol_buf_t text = {0};
  explain_named("no call sites, kept beyond four times the weights, the shortfall in it: "
                "undetermined", &text);
  ck_assert_msg(strstr(text.data, "What outlives them is 9.00 GiB: more than a training state of "
                                  "the 2.00 GiB the job held when it first freed memory comes to "
                                  "(four times them, 8.00 GiB") &&
                  strstr(text.data, "The other 1.00 GiB, without which the request would fit") &&
                  strstr(text.data, "find what keeps them") &&
                  strstr(text.data, "Shrink the state:"), "%s", text.data);
  ol_buf_free(&text);
  explain_named("no call sites, no iteration in more allocations than a first step is read "
                "from: undetermined", &text);
  ck_assert_msg(strstr(text.data, "no iteration was found in the 16385 allocations the job "
                                  "made") &&
                  strstr(text.data, "the 500.00 MiB made before the job first freed memory") &&
                  strstr(text.data, "a smaller batch or shorter inputs are the fix") &&
                  !strstr(text.data, "first iteration"), "%s", text.data);
  ol_buf_free(&text);
}
END_TEST

/* Persistent: no batch figure, and what alone takes the device is the
 * state (the weights being made, here). */
START_TEST(persistent_names_the_state_not_a_batch)
{
  ol_oom_record_t r = {BASE, NO_BLOCKS, .request = 1 * GiB, .reserved = 15 * GiB,
                       .allocated = 15 * GiB, ROLES(15 * GiB, 0, 0, 0),
                       .request_role_known = true, .request_role = OL_ROLE_weights, .batch = 4};
  ck_assert_int_eq(ol_oom_classify(&r), OL_OOM_persistent);
  ol_buf_t json = {0};
  ol_oom_json(&json, &r, OL_OOM_persistent, NULL, NULL);
  ck_assert_msg(strstr(json.data, "\"batch_is_the_lever\": false, \"batch_fits\": null") &&
                  strstr(json.data, "\"no_batch_fits\": {\"because\": \"state\", \"bytes\": "
                                    "17179869184, \"available\": 17179869184}"),
                "%s", json.data);
  ol_buf_free(&json);
}
END_TEST

/* Held-out foreach_step on the H200: Adam's state (3 GiB on a 16 GiB
 * device here: 3 + 3 + 6) fits, and its foreach update's temporaries
 * (the moments' square roots) do not: persistent, with the update one
 * tensor at a time or fused as the smaller change; not said where the
 * state without them does not fit either, nor for a request made
 * elsewhere. */
START_TEST(an_update_s_temporaries_are_said)
{
  ol_oom_record_t r = {BASE, NO_BLOCKS, .request = 1 * GiB, .reserved = 16 * GiB,
                       .allocated = 16 * GiB, ROLES(3 * GiB, 3 * GiB, 9 * GiB, 0),
                       .request_role_known = true, .request_role = OL_ROLE_optimizer,
                       .request_in_update = true, .update_bytes = 3 * GiB};
  ck_assert_int_eq(ol_oom_classify(&r), OL_OOM_persistent);
  ol_buf_t text = {0};
  ol_oom_explain(&text, &r, OL_OOM_persistent, NULL, NULL);
  ck_assert_msg(strstr(text.data, "The request was the optimizer's update itself") &&
                  strstr(text.data, "(4.00 GiB of them with the request), and without them the "
                                    "state holds 12.00 GiB of the 16.00 GiB") &&
                  strstr(text.data, "foreach=False"),
                "%s", text.data);
  ol_buf_free(&text);
  r.update_bytes = 0; /* the state without the request alone: 15 of 16 still said */
  r.role_bytes[OL_ROLE_optimizer] = 17 * GiB; /* the state alone does not fit */
  r.allocated = r.reserved = 23 * GiB;
  ol_oom_explain(&text, &r, OL_OOM_persistent, NULL, NULL);
  ck_assert_msg(!strstr(text.data, "update itself"), "%s", text.data);
  ol_buf_free(&text);
  r.role_bytes[OL_ROLE_optimizer] = 9 * GiB;
  r.allocated = r.reserved = 16 * GiB;
  r.request_in_update = false;
  ol_oom_explain(&text, &r, OL_OOM_persistent, NULL, NULL);
  ck_assert_msg(!strstr(text.data, "update itself"), "%s", text.data);
  ol_buf_free(&text);
  ol_buf_t json = {0};
  r.request_in_update = true;
  r.update_bytes = 3 * GiB;
  ol_oom_json(&json, &r, OL_OOM_persistent, NULL, NULL);
  ck_assert_msg(strstr(json.data, "\"request_in_update\": true, \"update_bytes\": 3221225472"),
                "%s", json.data);
  ol_buf_free(&json);
}
END_TEST

/* Held-out master_weights_state under --manage on the H200: a bf16
 * GPT-2 whose loop keeps fp32 masters and their gradients by its own
 * lines (944 MiB of role other, 906 MiB of it in blocks of twice a
 * weight's size), out in AdamW's first step: it was `activations`, "no
 * batch fits ... cut the memory per sample", at batch 1. The copies of
 * the parameters the job's own lines hold at the optimizer's step count
 * with the state, and are said; not at a forward's request, not after
 * the first step, and not memory of role other that is no copy of a
 * parameter (a batch's tensor the loop keeps). */
START_TEST(the_job_s_own_tensors_at_the_step_are_state)
{
  ol_oom_record_t r = {NO_BLOCKS, .capacity = 3006477107, .device_free = 0,
                       .request = 9 * MiB, .reserved = 2338324480, .allocated = 2319747080,
                       .external = 667746304, .self_device_bytes = 2996830208,
                       .before_first_free = 574953984, .iteration_need = -1,
                       .first_persistent = -1, .batch = 1, .roles_known = true,
                       .role_bytes = {[OL_ROLE_weights] = 241165824,
                                      [OL_ROLE_gradients] = 100663296,
                                      [OL_ROLE_optimizer] = 857708544,
                                      [OL_ROLE_activations] = 101711872,
                                      [OL_ROLE_other] = 989838336, [OL_ROLE_unknown] = 28659208},
                       .request_role_known = true, .request_role = OL_ROLE_optimizer,
                       .own_copies = 950507520, .own_copies_own_segments = 308779008};
  ck_assert_int_eq(ol_oom_classify(&r), OL_OOM_persistent);
  ol_buf_t text = {0};
  ol_oom_explain(&text, &r, OL_OOM_persistent, NULL, NULL);
  ck_assert_msg(strstr(text.data, "Counted with them: 906.47 MiB of copies of the parameters that "
                                  "the job's own lines made and still hold at the optimizer's "
                                  "step"),
                "%s", text.data);
  ol_buf_free(&text);
  ol_buf_t json = {0};
  ol_oom_json(&json, &r, OL_OOM_persistent, NULL, NULL);
  ck_assert_msg(strstr(json.data, "\"own_copies\": 950507520, \"own_copies_own_segments\": "
                                  "308779008"),
                "%s", json.data);
  ol_buf_free(&json);
  r.own_copies = 0; /* the same bytes of role other, none of a parameter's size */
  ck_assert_int_ne(ol_oom_classify(&r), OL_OOM_persistent);
  /* under PyTorch's cache only copies in segments of their own count */
  r.segments_only = true;
  r.own_copies = 950507520;
  r.own_copies_own_segments = 0;
  ol_oom_explain(&text, &r, ol_oom_classify(&r), NULL, NULL);
  ck_assert_msg(!strstr(text.data, "Counted with them"), "%s", text.data);
  ol_buf_free(&text);
  ck_assert_int_ne(ol_oom_classify(&r), OL_OOM_persistent);
  r.own_copies = 0;
  r.own_copies_own_segments = 950507520;
  ck_assert_int_eq(ol_oom_classify(&r), OL_OOM_persistent);
  r.segments_only = false;
  r.own_copies = 950507520;
  r.own_copies_own_segments = 308779008;
  r.request_role = OL_ROLE_activations;
  ck_assert_int_ne(ol_oom_classify(&r), OL_OOM_persistent);
  ol_oom_explain(&text, &r, ol_oom_classify(&r), NULL, NULL);
  ck_assert_msg(!strstr(text.data, "Counted with them"), "%s", text.data);
  ol_buf_free(&text);
  /* at a forward's request, the copies made before the first forward
   * began (the masters, built with the model) are state all the same */
  r.own_copies_early = 950507520;
  ck_assert_int_eq(ol_oom_classify(&r), OL_OOM_persistent);
  ol_oom_explain(&text, &r, OL_OOM_persistent, NULL, NULL);
  ck_assert_msg(strstr(text.data, "made and still hold since before the first forward"), "%s",
                text.data);
  ol_buf_free(&text);
  r.own_copies_early = 0;
  /* after the first step what outlives iterations says what is kept: the
   * job's own memory is not taken for state then (a leak of it stays one) */
  r.request_role = OL_ROLE_optimizer;
  r.iterations = 3;
  r.persistent = 2 * GiB;
  ol_oom_explain(&text, &r, ol_oom_classify(&r), NULL, NULL);
  ck_assert_msg(!strstr(text.data, "Counted with them"), "%s", text.data);
  ol_buf_free(&text);
}
END_TEST

/* Held-out handmade_adam_state on the H200: an Adam the training loop
 * writes itself ran out making a moment of the embedding's size after the
 * first backward (two moments and a temporary of 147 MiB held, role other:
 * no torch/optim frame), and was read as the iteration's memory: at batch
 * 1, "cut the memory per sample". A request of the job's own lines of a
 * parameter's size once the backward made gradients is the update making
 * state: its copies and the request count with it. Not before a backward,
 * not after the first step, not a request of no parameter's size, and
 * under PyTorch's cache only as a segment of one tensor. */
START_TEST(an_update_the_loop_writes_makes_state)
{
  ol_oom_record_t r = {NO_BLOCKS, .capacity = 2362232013, .device_free = 2084045,
                       .request = 154389504, .reserved = 1709178880, .allocated = 1661327360,
                       .external = 650969088, .self_device_bytes = 2350907392,
                       .before_first_free = 498155520, .iteration_need = -1,
                       .first_persistent = -1, .batch = 1, .roles_known = true,
                       .role_bytes = {[OL_ROLE_weights] = 494128128,
                                      [OL_ROLE_activations] = 100663296,
                                      [OL_ROLE_backward] = 595580928,
                                      [OL_ROLE_other] = 463168512, [OL_ROLE_unknown] = 7786496},
                       .gradients_made = 491768832, .gradients_made_own_segments = 154389504,
                       .request_role_known = true, .request_role = OL_ROLE_other,
                       .own_copies = 308779008, .own_copies_own_segments = 308779008,
                       .request_is_copy = true, .request_is_copy_own_segment = true};
  ck_assert_int_eq(ol_oom_classify(&r), OL_OOM_persistent);
  ol_buf_t text = {0};
  ol_oom_explain(&text, &r, OL_OOM_persistent, NULL, NULL);
  ck_assert_msg(strstr(text.data, "The request was the job's own lines making a block of a "
                                  "parameter's size (or twice or half it) after the backward had "
                                  "made the gradients") &&
                    strstr(text.data, "Counted with the state: 441.71 MiB of such copies, the "
                                      "request included"),
                "%s", text.data);
  ck_assert_msg(!strstr(text.data, "Counted with them"), "%s", text.data);
  ol_buf_free(&text);
  ol_buf_t json = {0};
  ol_oom_json(&json, &r, OL_OOM_persistent, NULL, NULL);
  ck_assert_msg(strstr(json.data, "\"request_is_copy\": true, \"request_is_copy_own_segment\": "
                                  "true"),
                "%s", json.data);
  ol_buf_free(&json);
  r.request_is_copy = false; /* a request of no parameter's size: the iteration's */
  ck_assert_int_ne(ol_oom_classify(&r), OL_OOM_persistent);
  r.request_is_copy = true;
  r.gradients_made = r.gradients_made_own_segments = 0; /* before any backward */
  r.role_bytes[OL_ROLE_backward] = 0;
  ck_assert_int_ne(ol_oom_classify(&r), OL_OOM_persistent);
  r.gradients_made = 491768832;
  r.gradients_made_own_segments = 154389504;
  r.role_bytes[OL_ROLE_backward] = 595580928;
  r.iterations = 3; /* after the first step: what outlives iterations tells */
  r.persistent = 1 * GiB;
  r.iteration_need = 600 * MiB;
  ol_oom_explain(&text, &r, ol_oom_classify(&r), NULL, NULL);
  ck_assert_msg(!strstr(text.data, "the job's own lines making a block"), "%s", text.data);
  ol_buf_free(&text);
  r.iterations = 0;
  r.persistent = 0;
  r.iteration_need = -1;
  r.segments_only = true; /* PyTorch's cache: only a segment made for one tensor */
  r.request_is_copy_own_segment = false;
  ol_oom_explain(&text, &r, ol_oom_classify(&r), NULL, NULL);
  ck_assert_msg(!strstr(text.data, "the job's own lines making a block"), "%s", text.data);
  ol_buf_free(&text);
}
END_TEST

/* Held-out sgd_momentum_step on the H200 (SGD, momentum 0.9): its first
 * update ran out making the momentum buffers (144 MiB of 612 made) and
 * was told that foreach=False or fused=True would need far less beside
 * the state; they make the same buffers. In SGD's first step the advice
 * says so; once a step has finished its update's allocations are
 * temporaries again (weight decay's), and the foreach advice stands. */
START_TEST(sgd_s_first_update_makes_state)
{
  ol_oom_record_t r = {NOT_TIMED, NO_BLOCKS, .capacity = 2308544921, .device_free = 0,
                       .request = 16 * MiB, .reserved = 1614807040, .allocated = 1604321280,
                       .external = 650969088, .self_device_bytes = 2256535552,
                       ROLES(612 * MiB, 708 * MiB, 144 * MiB, 97 * MiB),
                       .request_role_known = true, .request_role = OL_ROLE_optimizer,
                       .request_in_update = true, .update_bytes = 144 * MiB,
                       .request_update_makes_state = true};
  ck_assert_int_eq(ol_oom_classify(&r), OL_OOM_persistent);
  ol_buf_t text = {0};
  ol_oom_explain(&text, &r, OL_OOM_persistent, NULL, NULL);
  ck_assert_msg(strstr(text.data, "The request was SGD's update, which in its first step makes a "
                                  "momentum buffer as large as each parameter when momentum is "
                                  "on (160.00 MiB so far with the request, if this is that step: "
                                  "no iteration was seen to end): state, which foreach=False and "
                                  "fused=True make too.") &&
                  !strstr(text.data, "either needs far less"),
                "%s", text.data);
  ol_buf_free(&text);
  r.iterations = 2;
  r.persistent = 1320 * MiB;
  ol_oom_explain(&text, &r, OL_OOM_persistent, NULL, NULL);
  ck_assert_msg(!strstr(text.data, "SGD's update") && strstr(text.data, "either needs far less"),
                "%s", text.data);
  ol_buf_free(&text);
  ol_buf_t json = {0};
  ol_oom_json(&json, &r, OL_OOM_persistent, NULL, NULL);
  ck_assert_msg(strstr(json.data, "\"request_update_makes_state\": true"), "%s", json.data);
  ol_buf_free(&json);
}
END_TEST

/* Held-out optim_switch_state in observe mode on the H200: SGD for 6 steps,
 * then AdamW, whose first step ran out making its moments with half of
 * them made (524 of 1,112 MB). The state held (1.707 GB with the request)
 * was 4 MB short of 80% of the 2.139 GB the process could have:
 * undetermined, before the state the request was making was counted
 * whole. Its two buffers for each trained parameter (the weights, 556 MB,
 * fewer than the gradients' segments) make it 2.27 GB: persistent, and the
 * paragraph says what was still to come. An optimizer whose first step
 * is not known to make per-parameter buffers (SGD, 0) stays undetermined,
 * and so does the same request while another optimizer's state (a kept
 * old one) already holds more than this one's would come to. */
START_TEST(the_state_an_optimizer_is_making_counts_whole)
{
  ol_oom_record_t r = {NOT_TIMED, NO_BLOCKS, .capacity = 2791728742, .device_free = 7956070,
                       .request = 20971520, .reserved = 2130970624, .allocated = 2130970624,
                       .external = 652802048, .self_device_bytes = 2774532096,
                       .framework_allocated = 1879048192,
                       .segments_only = true,
                       ROLES(555745280, 606076928, 524288000, 444596224),
                       .request_role_known = true, .request_role = OL_ROLE_optimizer};
  ck_assert_int_eq(ol_oom_classify(&r), OL_OOM_undetermined); /* nothing says what is to come */
  r.request_state_buffers = 2;
  ck_assert_int_eq(ol_oom_classify(&r), OL_OOM_persistent);
  ol_buf_t text = {0};
  ol_oom_explain(&text, &r, OL_OOM_persistent, NULL, NULL);
  ck_assert_msg(strstr(text.data, "need 2.12 GiB (the request included) where this process can "
                                  "have 1.99 GiB") &&
                  strstr(text.data, "making its state at its first step (2 buffers as large as "
                                    "each trained parameter") &&
                  strstr(text.data, "540.00 MiB of it was still to come"),
                "%s", text.data);
  ol_buf_free(&text);
  ol_buf_t json = {0};
  ol_oom_json(&json, &r, OL_OOM_persistent, NULL, NULL);
  ck_assert_msg(strstr(json.data, "\"request_state_buffers\": 2, \"state_being_made\": 566231040"),
                "%s", json.data);
  ol_buf_free(&json);
  r.request_state_buffers = 0;
  ck_assert_int_eq(ol_oom_classify(&r), OL_OOM_undetermined);
  r.request_state_buffers = 2;
  r.role_bytes[OL_ROLE_optimizer] = 1200000000; /* more than this one's moments: others' */
  r.role_bytes[OL_ROLE_activations] = 0;
  ol_oom_explain(&text, &r, OL_OOM_persistent, NULL, NULL);
  ck_assert_msg(!strstr(text.data, "still to come"), "%s", text.data);
  ol_buf_free(&text);
}
END_TEST

/* A first backward out asking for a gradient as large as its weight
 * (held-out embed_grads): the weights and that gradient are the state,
 * and they do not fit; the same request not known as a gradient is the
 * iteration's memory. Under PyTorch's cache the gradients counted from
 * segments of weights' sizes are not taken (a segment packs many small
 * tensors), the request still is. */
START_TEST(a_gradient_that_does_not_fit_is_the_state)
{
  ol_oom_record_t r = {BASE, NO_BLOCKS, .request = 7 * GiB, .reserved = 8 * GiB,
                       .allocated = 8 * GiB, ROLES(7 * GiB, 0, 0, 512 << 20),
                       .request_role_known = true, .request_role = OL_ROLE_backward,
                       .request_is_gradient = true};
  r.role_bytes[OL_ROLE_backward] = 512 << 20;
  ck_assert_int_eq(ol_oom_classify(&r), OL_OOM_persistent);
  ol_buf_t text = {0};
  ol_oom_explain(&text, &r, OL_OOM_persistent, NULL, NULL);
  ck_assert_msg(strstr(text.data, "The backward ran out making a gradient (7.00 GiB"), "%s",
                text.data);
  ol_buf_free(&text);
  /* not known as a gradient, and none made yet: what the job trains is
   * not seen, and 7 GiB of weights trained whole leave no room */
  r.request_is_gradient = false;
  ck_assert_int_eq(ol_oom_classify(&r), OL_OOM_undetermined);
  /* gradients being made, the request not one of them */
  r.request = 1 * GiB;
  r.gradients_made = 6 * GiB; /* 13 of 16 GiB: past the 80% */
  r.role_bytes[OL_ROLE_backward] = 6 * GiB;
  r.allocated = r.reserved = 14 * GiB;
  ck_assert_int_eq(ol_oom_classify(&r), OL_OOM_persistent);
  r.segments_only = true;
  ck_assert_int_eq(ol_oom_classify(&r), OL_OOM_undetermined);
}
END_TEST

/* Held-out ema_state in observe mode on the H200: four 256 MiB weights,
 * their deep-copied average (2 GiB of weights), and the first backward's
 * four 256 MiB gradients, each a segment of its own, then AdamW's first
 * moment refused under a 4G cap. Not counting the gradients left the
 * state "fitting" and the class undetermined. */
START_TEST(gradients_in_their_own_segments_are_the_state)
{
  ol_oom_record_t r = {.capacity = 4 * GiB, .device_free = 207 * MiB, NOT_TIMED, NO_BLOCKS,
                       .request = 256 * MiB, .reserved = 3426 * MiB, .allocated = 3426 * MiB,
                       .external = 622 * MiB, .self_device_bytes = 4040 * MiB,
                       .segments_only = true,
                       ROLES(2050 * MiB, 0, 0, 96 * MiB), .request_role_known = true,
                       .request_role = OL_ROLE_optimizer, .gradients_made = 1 * GiB,
                       .gradients_made_own_segments = 1 * GiB};
  r.role_bytes[OL_ROLE_backward] = 1120 * MiB;
  ck_assert_int_eq(ol_oom_classify(&r), OL_OOM_persistent);
  /* gradients of 20 MiB or less share segments with other tensors: not told */
  r.gradients_made_own_segments = 0;
  ck_assert_int_eq(ol_oom_classify(&r), OL_OOM_undetermined);
}
END_TEST

/* Held-out cupy_pool on the H200: CuPy's pool kept the 8 GiB its arrays
 * freed, then a GPT-2 step that fits alone ran out under a 12G cap. Read
 * as activations ("at most batch 1 fits") before the role "library". */
START_TEST(another_librarys_pool_is_held_elsewhere)
{
  ol_oom_record_t r = {.capacity = 12 * GiB, .device_free = 200 * MiB, NO_BLOCKS,
                       .iteration_need = -1, .first_persistent = -1,
                       .request = 393 * MiB, .reserved = 11660 * MiB, .allocated = 11366 * MiB,
                       .external = 620 * MiB, .self_device_bytes = 12280 * MiB,
                       .before_first_free = 9 * GiB, .managed = true,
                       ROLES(472 * MiB, 0, 0, 2689 * MiB), .request_role_known = true,
                       .request_role = OL_ROLE_activations, .batch = 2};
  r.role_bytes[OL_ROLE_library] = 8 * GiB;
  ck_assert_int_eq(ol_oom_classify(&r), OL_OOM_external);
  ol_buf_t text = {0};
  ol_oom_explain(&text, &r, OL_OOM_external, NULL, NULL);
  ck_assert_msg(strstr(text.data, "Others hold 8.00 GiB"), "%s", text.data);
  ck_assert_msg(strstr(text.data, "another GPU library in this process 8.00 GiB"), "%s",
                text.data);
  ck_assert_msg(strstr(text.data, "free_all_blocks()"), "%s", text.data);
  ol_buf_free(&text);
  r.segments_only = true; /* PyTorch's cache: its segments beside CuPy's own blocks */
  r.managed = false;
  ck_assert_int_eq(ol_oom_classify(&r), OL_OOM_external);
  /* the same memory with no library's frames: the job's own */
  r.segments_only = false;
  r.managed = true;
  r.role_bytes[OL_ROLE_other] = r.role_bytes[OL_ROLE_library];
  r.role_bytes[OL_ROLE_library] = 0;
  ck_assert_int_eq(ol_oom_classify(&r), OL_OOM_activations);
}
END_TEST

typedef struct {
  const char *trace, *policy;
  uint64_t capacity;
  ol_oom_class_t expected;
} trace_case_t;

/* The causes are known by construction (tests/data/README.md). */
static const trace_case_t trace_cases[] = {
  {"oom_params.csv.gz", "pytorch", 8ull << 30, OL_OOM_persistent},
  {"oom_params.csv.gz", "oomlens", 8ull << 30, OL_OOM_persistent},
  {"oom_activations.csv.gz", "pytorch", 12ull << 30, OL_OOM_activations},
  {"oom_activations.csv.gz", "oomlens", 12ull << 30, OL_OOM_activations},
  {"frag.csv.gz", "pytorch", 6ull << 30, OL_OOM_fragmentation},
};

START_TEST(recorded_ooms_at_their_caps)
{
  const trace_case_t *c = &trace_cases[_i];
  char path[PATH_MAX];
  ol_error_t err;
  snprintf(path, sizeof path, "%s/%s", OL_TEST_DATA_DIR, c->trace);
  ol_policy_options_t options = {.capacity = c->capacity};
  ol_replay_result_t result;
  ck_assert_int_eq(ol_replay_file(path, ol_policy_find(c->policy), &options, &result, &err), 0);
  ck_assert_msg(result.oom, "%s under %s did not run out", c->trace, c->policy);
  ck_assert_msg(result.oom_at.cause == c->expected, "%s under %s: %s, expected %s", c->trace,
                c->policy, ol_oom_class_name(result.oom_at.cause),
                ol_oom_class_name(c->expected));
  /* The largest holders at the failure, largest first, within what was
   * allocated; the traces name the job's frames. */
  const ol_oom_record_t *r = &result.oom_at.record;
  ck_assert_int_gt(r->holder_count, 0);
  int64_t held = 0;
  for (int i = 0; i < r->holder_count; i++) {
    ck_assert(i == 0 || r->holders[i].bytes <= r->holders[i - 1].bytes);
    ck_assert_ptr_nonnull(strstr(ol_sites_key(result.sites, r->holders[i].id), "workloads.py:"));
    held += r->holders[i].bytes;
  }
  ck_assert_int_le(held, r->allocated);
  ol_replay_result_free(&result);
}
END_TEST

/* Who held the peak: every byte live at the peak belongs to one site, so
 * the sites' at-peak bytes sum to the peak exactly. */
static const char *const sited_traces[] = {"gpt2.csv.gz", "resnet50.csv.gz", "frag.csv.gz",
                                           "oom_activations.csv.gz"};

START_TEST(peak_sites_sum_to_the_peak)
{
  char path[PATH_MAX];
  ol_error_t err;
  snprintf(path, sizeof path, "%s/%s", OL_TEST_DATA_DIR, sited_traces[_i]);
  ol_policy_options_t options = {.capacity = 150109106995ull};
  ol_replay_result_t result;
  ck_assert_int_eq(ol_replay_file(path, ol_policy_find("oomlens"), &options, &result, &err), 0);
  ck_assert_ptr_nonnull(result.sites);
  size_t n = ol_sites_count(result.sites);
  int64_t sum = 0;
  for (size_t i = 0; i < n; i++)
    sum += ol_sites_figures(result.sites, (int32_t)i)->at_peak;
  ck_assert_int_eq(sum, result.peak_requested);
  int32_t top[1];
  ck_assert_uint_eq(ol_sites_top(result.sites, OL_SITES_BY_AT_PEAK, top, 1), 1);
  if (strcmp(sited_traces[_i], "gpt2.csv.gz") == 0) /* GELU activations, 7.88 GiB */
    ck_assert_ptr_nonnull(strstr(ol_sites_key(result.sites, top[0]), "activations.py:66:forward"));
  ol_replay_result_free(&result);
}
END_TEST

START_TEST(sites_table_orders_and_interns)
{
  ol_sites_t *s = ol_sites_new();
  int32_t a = ol_sites_intern(s, "a.py:1:f", 8), b = ol_sites_intern(s, "b.py:2:g", 8);
  ck_assert_int_eq(ol_sites_intern(s, "a.py:1:f", 8), a);
  ck_assert_int_ne(a, b);
  ol_sites_add(s, a, 100);
  ol_sites_add(s, b, 300);
  ol_sites_mark_peak(s);
  ol_sites_add(s, b, -300);
  ol_sites_add(s, a, 1000);
  int32_t top[2];
  ck_assert_uint_eq(ol_sites_top(s, OL_SITES_BY_AT_PEAK, top, 2), 2);
  ck_assert_int_eq(top[0], b);
  ck_assert_uint_eq(ol_sites_top(s, OL_SITES_BY_TOTAL, top, 2), 2);
  ck_assert_int_eq(top[0], a);
  ck_assert_int_eq(ol_sites_figures(s, a)->peak, 1100);
  ck_assert_int_eq(ol_sites_figures(s, b)->allocations, 1);
  /* Now a holds 1100, b nothing; across two iterations a grows by 500. */
  ck_assert_uint_eq(ol_sites_top(s, OL_SITES_BY_CURRENT, top, 2), 1);
  ck_assert_int_eq(top[0], a);
  ol_sites_mark_valley(s, 2);
  ol_sites_add(s, a, 500);
  ol_sites_add(s, b, 50);
  ol_sites_mark_valley(s, 3); /* kept: held at the next iteration's lowest too */
  ol_sites_mark_valley(s, 4);
  /* b first held memory at 3's lowest: its growth counts from there */
  ck_assert_uint_eq(ol_sites_top(s, OL_SITES_BY_GROWTH, top, 2), 1);
  ol_sites_add(s, b, 50);
  ol_sites_mark_valley(s, 5);
  ol_sites_mark_valley(s, 6); /* no lower point marked: the lowest was when 6 began */
  ck_assert_uint_eq(ol_sites_top(s, OL_SITES_BY_GROWTH, top, 2), 2);
  ck_assert_int_eq(top[0], a);
  /* b held more at a later lowest point: no state made once, all it
   * holds grew (a_site_that_grows_again_grew_from_nothing) */
  ck_assert_int_eq(ol_sites_figure(s, b, OL_SITES_BY_GROWTH), 100);
  ck_assert_int_eq(ol_sites_figures(s, a)->last_valley - ol_sites_figures(s, a)->first_valley, 500);
  ol_sites_free(s);
}
END_TEST

/* Held-out small_accum_leak: Adam's moments, made whole at the first
 * window's optimizer step after the iteration the growth counts from,
 * were named as the leak's site over the 8 MiB an iteration the job kept.
 * A site that first holds memory at a later lowest point counts its
 * growth from there: a state made once does not grow. */
START_TEST(state_made_once_is_not_growth)
{
  ol_sites_t *s = ol_sites_new();
  int32_t kept = ol_sites_intern(s, "job.py:9:kept", 13), moments = ol_sites_intern(s, "adam.py:1:m", 11);
  ol_sites_add(s, kept, 8);
  ol_sites_mark_valley(s, 2);
  ol_sites_add(s, moments, 300); /* the first optimizer step */
  for (uint64_t i = 3; i <= 12; i++) {
    ol_sites_add(s, kept, 8);
    ol_sites_mark_valley(s, i);
  }
  int32_t top;
  ck_assert_uint_eq(ol_sites_top(s, OL_SITES_BY_GROWTH, &top, 1), 1);
  ck_assert_int_eq(top, kept);
  /* no lower point marked in between: each iteration's lowest is where it
   * began, so the last lowest holds 9 of the 10 later additions */
  ck_assert_int_eq(ol_sites_figure(s, kept, OL_SITES_BY_GROWTH), 72);
  ck_assert_int_eq(ol_sites_figure(s, moments, OL_SITES_BY_GROWTH), 0);
  ol_sites_free(s);
}
END_TEST

/* Iterations first to last end, one after another, with no lower point
 * marked between them. */
static void iterations_end(ol_sites_t *s, uint64_t first, uint64_t last)
{
  for (uint64_t i = first; i <= last; i++)
    ol_sites_mark_valley(s, i);
}

/* A site that first holds memory at a later lowest point and holds more at
 * a later one still is no state made once: all it holds grew (held-out
 * eval_every_leak replayed at 0.6 of its cap kept two evaluations' 98 MiB
 * and was said to have grown by one of them). */
START_TEST(a_site_that_grows_again_grew_from_nothing)
{
  ol_sites_t *s = ol_sites_new();
  int32_t kept = ol_sites_intern(s, "job.py:9:kept", 13), other = ol_sites_intern(s, "o", 1);
  ol_sites_add(s, other, 8);
  iterations_end(s, 2, 3);
  ol_sites_add(s, kept, 98); /* the first evaluation's */
  iterations_end(s, 4, 5);
  ck_assert_int_eq(ol_sites_figure(s, kept, OL_SITES_BY_GROWTH), 0);
  ol_sites_add(s, kept, 98); /* the second's */
  iterations_end(s, 6, 7);
  ck_assert_int_eq(ol_sites_figure(s, kept, OL_SITES_BY_GROWTH), 196);
  ol_sites_free(s);
}
END_TEST

/* Held-out accelerate_accum_fits replayed at 0.4 of its cap: the finder
 * counted 6 iterations of its first steps' pieces, then, the micro-step's
 * repeat taking over, counted again from 3 (the micro-steps it found it
 * had seen), not from 1. The autograd thread's cuBLAS workspaces (96 MiB,
 * made once in the first backward, between the first count's lowest
 * points) were its growth, and the job was told `leak`. A count that goes
 * back, to any number, counts growth from there; one that goes on keeps
 * its first lowest point. */
START_TEST(growth_counts_from_a_count_that_goes_back)
{
  ol_sites_t *s = ol_sites_new();
  int32_t workspace = ol_sites_intern(s, "(thread autograd)", 17), kept = ol_sites_intern(s, "k", 1);
  ol_sites_add(s, workspace, 4);
  ol_sites_add(s, kept, 4);
  ol_sites_mark_valley(s, 2);
  ol_sites_add(s, workspace, 96); /* made once, early */
  ol_sites_mark_valley(s, 3);
  iterations_end(s, 5, 6);
  ol_sites_mark_valley(s, 3); /* counted again, from 3 */
  ol_sites_add(s, kept, 10);
  iterations_end(s, 4, 5);
  ck_assert_int_eq(ol_sites_figure(s, workspace, OL_SITES_BY_GROWTH), 0);
  ck_assert_int_eq(ol_sites_figure(s, kept, OL_SITES_BY_GROWTH), 10);
  int32_t top;
  ck_assert_uint_eq(ol_sites_top(s, OL_SITES_BY_GROWTH, &top, 1), 1);
  ck_assert_int_eq(top, kept);
  /* once the count has settled, a count that goes back keeps the first
   * lowest point: a repeat found anew at an OOM would hide the growth */
  iterations_end(s, 6, 10);
  ol_sites_add(s, workspace, 50);
  iterations_end(s, 4, 5);
  ck_assert_int_eq(ol_sites_figure(s, workspace, OL_SITES_BY_GROWTH), 50);
  ol_sites_free(s);
}
END_TEST

/* The "not sampled" site holds many small tensors of many call sites: it
 * grew most in held-out fsdp2_leak (a kept graph's activations, each
 * small), and the paragraph named it ("Grew most (+28.38 MiB): (not
 * sampled: OOMLENS_STACK_SAMPLE)"). The site that grew most of those that
 * name a call site is named; none where only it grew. */
START_TEST(the_unsampled_site_is_not_the_grower)
{
  ol_sites_t *s = ol_sites_new();
  int32_t unsampled = ol_sites_intern(s, "(not sampled: OOMLENS_STACK_SAMPLE)", 35);
  int32_t kept = ol_sites_intern(s, "job.py:9:kept", 13);
  ol_sites_mark_valley(s, 1);
  for (uint64_t i = 2; i <= 6; i++) {
    ol_sites_add(s, unsampled, 100);
    ol_sites_add(s, kept, 30);
    ol_sites_mark_valley(s, i);
  }
  ol_oom_record_t r = {BASE, NO_BLOCKS, .request = 1 * GiB};
  ol_oom_note_sites(&r, s, unsampled);
  ck_assert_int_eq(r.grower.id, kept);
  ck_assert_int_eq(r.grower.bytes, ol_sites_figure(s, kept, OL_SITES_BY_GROWTH));
  ck_assert_int_gt(r.grower.bytes, 0);
  ck_assert_int_eq(ol_sites_grew_most(s, unsampled, OL_SITES_BY_GROWTH), kept);
  /* no site to skip: it grew most */
  ck_assert_int_eq(ol_sites_grew_most(s, -1, OL_SITES_BY_GROWTH), unsampled);
  ol_sites_t *only = ol_sites_new();
  int32_t alone = ol_sites_intern(only, "(not sampled: OOMLENS_STACK_SAMPLE)", 35);
  ol_sites_mark_valley(only, 1);
  ol_sites_add(only, alone, 100);
  ol_sites_mark_valley(only, 2);
  ck_assert_int_eq(ol_sites_grew_most(only, alone, OL_SITES_BY_GROWTH), -1);
  ol_sites_free(only);
  ol_sites_free(s);
}
END_TEST

/* ---- sizes at the end of the range ------------------------------------ */

typedef struct {
  uint64_t request;
  const char *said; /* how the request reads */
} huge_case_t;

static const huge_case_t huge_cases[] = {
  {UINT64_MAX, "a request of 16.00 EiB on a 16.00 GiB device"},
  {(uint64_t)1 << 63, "a request of 8.00 EiB on a 16.00 GiB device"},
  {((uint64_t)1 << 63) + 1, "a request of 8.00 EiB on a 16.00 GiB device"},
};

/* A request past any device is impossible, its size printed as it is.
 * Was: SIZE_MAX read as -1 ("persistent: a request of -1 B"), 2^63 as
 * "-8192.00 PiB". */
START_TEST(request_past_int64_is_impossible)
{
  const huge_case_t *c = &huge_cases[_i];
  ol_oom_record_t r = {BASE, NO_BLOCKS, .request = c->request, .reserved = 1 * GiB,
                       .allocated = 1 * GiB};
  ol_oom_class_t got = ol_oom_classify(&r);
  ck_assert_str_eq(ol_oom_class_name(got), "impossible");
  ol_buf_t text = {0};
  ol_oom_explain(&text, &r, got, NULL, NULL);
  ck_assert_msg(strstr(text.data, c->said), "%s", text.data);
  ck_assert_msg(!strstr(text.data, "-"), "a negative figure: %s", text.data);
  ol_buf_free(&text);
}
END_TEST

/* Figures at the ends of int64 (a crafted trace or report): every class's
 * rules and words run without a signed overflow or an out-of-range cast
 * (the sanitizer build stops at one; were: transient_of, the headroom's
 * percent, the growth times the iterations, the batch's double). */
START_TEST(extreme_figures_do_not_overflow)
{
  ol_oom_record_t r = {.capacity = UINT64_MAX, .device_free = INT64_MAX, .request = UINT64_MAX - 1,
                       .allocated = INT64_MAX, .reserved = INT64_MAX,
                       .free_reserved = INT64_MAX, .largest_free_block = 0,
                       .external = INT64_MIN, .persistent = INT64_MIN, .growth = INT64_MAX,
                       .iterations = 5, .before_first_free = INT64_MAX,
                       .iteration_need = 1, .first_persistent = INT64_MAX, .batch = INT64_MAX,
                       .self_device_bytes = INT64_MAX,
                       ROLES(INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX)};
  for (int variant = 0; variant < 4; variant++) {
    r.roles_known = variant & 1;
    r.persistent = variant & 2 ? INT64_MAX : INT64_MIN;
    for (int c = 0; c < OL_OOM_CLASS_COUNT; c++) {
      ol_buf_t text = {0}, json = {0};
      ol_oom_explain(&text, &r, (ol_oom_class_t)c, NULL, NULL);
      ol_oom_json(&json, &r, (ol_oom_class_t)c, NULL, NULL);
      ck_assert(!text.failed && !json.failed);
      ck_assert_ptr_nonnull(strstr(json.data, "\"request\": 18446744073709551614"));
      ol_buf_free(&text);
      ol_buf_free(&json);
    }
    ck_assert_int_lt(ol_oom_classify(&r), OL_OOM_CLASS_COUNT);
  }
}
END_TEST

/* PyTorch's message at its memory fraction, as the H200 printed it
 * (held-out fraction_batch, torch 2.11): the request, the device and the
 * limit, to a hundredth of their unit; without "allowed" no limit; and
 * what is not such a message is refused. */
START_TEST(pytorch_messages_are_read)
{
  ol_framework_oom_t m;
  ck_assert(ol_framework_oom_parse(
    "CUDA out of memory. Tried to allocate 1.54 GiB. GPU 0 has a total capacity of 12.00 GiB of "
    "which 2.13 GiB is free. Including non-PyTorch memory, this process has 9.86 GiB memory in "
    "use. 10.00 GiB allowed; Of the allocated memory 9.13 GiB is allocated by PyTorch, and 63.40 "
    "MiB is reserved by PyTorch but unallocated.", &m));
  ck_assert_uint_eq(m.request, (uint64_t)(1.54 * 1073741824.0 + 0.5));
  ck_assert_uint_eq(m.limit, 10ull << 30);
  ck_assert_int_eq(m.device, 0);
  ck_assert_int_eq(m.allocated, (int64_t)(9.13 * 1073741824.0 + 0.5));
  ck_assert_int_eq(m.free_reserved, (int64_t)(63.40 * 1048576.0 + 0.5));
  ck_assert(ol_framework_oom_parse("CUDA out of memory. Tried to allocate 20.00 MiB. GPU 3 has a "
                                   "total capacity of 79.25 GiB of which 4.00 MiB is free.", &m));
  ck_assert_uint_eq(m.request, 20ull << 20);
  ck_assert_uint_eq(m.limit, 0);
  ck_assert_int_eq(m.device, 3);
  ck_assert_int_eq(m.allocated, -1); /* not said */
  ck_assert_int_eq(m.free_reserved, -1);
  /* with CUDA graphs' private pools named between, and nothing free */
  ck_assert(ol_framework_oom_parse(
    "CUDA out of memory. Tried to allocate 2.00 MiB. GPU 0 has a total capacity of 8.00 GiB of "
    "which 0 bytes is free. Of the allocated memory 7.50 GiB is allocated by PyTorch, with 1.00 "
    "GiB allocated in private pools (e.g., CUDA Graphs), and 0 bytes is reserved by PyTorch but "
    "unallocated.", &m));
  ck_assert_int_eq(m.allocated, (int64_t)(7.5 * 1073741824.0));
  ck_assert_int_eq(m.free_reserved, 0);
  ck_assert(ol_framework_oom_parse("CUDA out of memory. Tried to allocate 512 bytes. GPU 1 has ... "
                                   "768.00 KiB allowed; ...", &m));
  ck_assert_uint_eq(m.request, 512);
  ck_assert_uint_eq(m.limit, 768ull << 10);
  /* the phrase at the message's start: nothing read before it */
  ck_assert(ol_framework_oom_parse(" is allocated by PyTorch; out of memory. Tried to allocate "
                                   "2.00 MiB. GPU 0", &m));
  ck_assert_int_eq(m.allocated, -1);
  ck_assert(!ol_framework_oom_parse(NULL, &m));
  ck_assert(!ol_framework_oom_parse("CUDA error: out of memory", &m));
  ck_assert(!ol_framework_oom_parse("out of memory. Tried to allocate lots. GPU 0", &m));
  ck_assert(!ol_framework_oom_parse("out of memory. Tried to allocate 2.00 GiB on the GPU", &m));
}
END_TEST

/* Under PyTorch's cache (segments only) its own figures decide: free
 * reserved memory that covers the request, none of it in a block that
 * holds it, is fragmentation; a little free is not (the iteration's or a
 * leak's memory, hidden: undetermined). Text and JSON say whose figures. */
START_TEST(pytorch_s_own_figures_tell_pieces)
{
  ol_oom_record_t r;
  ol_oom_record_init(&r, 1450 * MiB);
  r.capacity = 8 * GiB;
  r.reserved = r.allocated = 7800 * MiB;
  r.device_free = 392 * MiB;
  r.segments_only = true;
  r.free_reserved = 3676 * MiB;
  r.framework_allocated = 4124 * MiB;
  r.no_block_held = true;
  ck_assert_int_eq(ol_oom_classify(&r), OL_OOM_fragmentation);
  ol_buf_t text = {0};
  ol_oom_explain(&text, &r, OL_OOM_fragmentation, NULL, NULL);
  ck_assert_msg(strstr(text.data, "held 7.62 GiB reserved, 4.03 GiB of it in PyTorch's tensors "
                                  "by its own count. 3.59 GiB of it is reserved but free "
                                  "(PyTorch's own figure"), "%s", text.data);
  ck_assert_msg(strstr(text.data, "expandable_segments:True"), "%s", text.data);
  ol_buf_free(&text);
  ol_buf_t json = {0};
  ol_oom_json(&json, &r, OL_OOM_fragmentation, NULL, NULL);
  ck_assert_msg(strstr(json.data, "\"framework_allocated\": 4324327424") &&
                  strstr(json.data, "\"no_block_held\": true"), "%s", json.data);
  ol_buf_free(&json);
  r.free_reserved = 60 * MiB; /* a slack, not the cause */
  ck_assert_int_eq(ol_oom_classify(&r), OL_OOM_undetermined);
  r.free_reserved = 1200 * MiB; /* 15%: a leak's leftovers as much as pieces */
  ck_assert_int_eq(ol_oom_classify(&r), OL_OOM_undetermined);
  r.free_reserved = 3676 * MiB;
  r.no_block_held = false; /* no word on the blocks: not told */
  ck_assert_int_eq(ol_oom_classify(&r), OL_OOM_undetermined);
}
END_TEST

/* A record refused at a framework's limit says so, with the fix of
 * raising it and of holding --manage to it, in text and JSON. */
START_TEST(a_framework_limit_is_said)
{
  ol_oom_record_t r;
  ol_oom_record_init(&r, 256 * MiB);
  r.capacity = GiB;
  r.framework_limit = GiB;
  r.reserved = r.allocated = 900 * MiB;
  r.device_free = 124 * MiB;
  r.segments_only = true;
  ol_buf_t text = {0};
  ol_oom_explain(&text, &r, ol_oom_classify(&r), NULL, NULL);
  ck_assert_msg(strstr(text.data, "a request of 256.00 MiB, refused by PyTorch itself at the 1.00 "
                                  "GiB the job allowed it"), "%s", text.data);
  ck_assert_msg(strstr(text.data, "add --capacity 1.00 GiB"), "%s", text.data);
  ol_buf_free(&text);
  ol_buf_t json = {0};
  ol_oom_json(&json, &r, ol_oom_classify(&r), NULL, NULL);
  ck_assert_msg(strstr(json.data, "\"framework_limit\": 1073741824"), "%s", json.data);
  ol_buf_free(&json);
}
END_TEST

/* Site names for the records below, by id. */
static const char *const attention_sites[] = {
  "torch/nn/functional.py:2161:softmax < transformers/models/llama/modeling_llama.py:208:"
  "eager_attention_forward < transformers/models/llama/modeling_llama.py:268:forward",
  "torch/nn/functional.py:3504:cross_entropy < torch/nn/functional.py:2250:log_softmax < "
  "train.py:40:step",
  "transformers/models/llama/modeling_llama.py:206:eager_attention_forward < "
  "torch/nn/modules/module.py:1790:_call_impl",
};

static void attention_namer(ol_buf_t *out, int32_t id, bool json, void *arg)
{
  (void)arg;
  ol_buf_printf(out, json ? "\"%s\"" : "%s", attention_sites[id]);
}

/* Eager attention's softmax holding a quarter of the activations or more
 * (held-out seq_batch1: 5 of 8.4 GiB at one sequence of 4096) is named,
 * with the fused attention that never keeps it; a loss's log_softmax, or
 * attention without a softmax, is not. */
START_TEST(attention_scores_are_named)
{
  ol_oom_record_t r = {.capacity = 10 * GiB, .device_free = 0, NO_BLOCKS, .request = GiB,
                       .reserved = 9 * GiB, .allocated = 8 * GiB, .before_first_free = 300 * MiB,
                       .first_persistent = -1, .iteration_need = -1, .batch = 1,
                       .roles_known = true, .holder_count = 2};
  r.role_bytes[OL_ROLE_weights] = 300 * MiB;
  r.role_bytes[OL_ROLE_activations] = 8 * GiB - 300 * MiB;
  r.holders[0] = (ol_oom_site_t){.id = 0, .bytes = 5 * GiB};
  r.holders[1] = (ol_oom_site_t){.id = 2, .bytes = 2 * GiB};
  ck_assert_int_eq(ol_oom_classify(&r), OL_OOM_activations);
  ol_buf_t text = {0};
  ol_oom_explain(&text, &r, OL_OOM_activations, attention_namer, NULL);
  ck_assert_msg(strstr(text.data, "Of the activations, 5.00 GiB is held by attention's softmax"),
                "%s", text.data);
  ck_assert_msg(strstr(text.data, "attn_implementation=\"sdpa\""), "%s", text.data);
  ol_buf_free(&text);
  r.holders[0].id = 1; /* the loss's log_softmax */
  ol_buf_t loss = {0};
  ol_oom_explain(&loss, &r, OL_OOM_activations, attention_namer, NULL);
  ck_assert_ptr_null(strstr(loss.data, "attention's softmax"));
  ol_buf_free(&loss);
  r.holders[0] = (ol_oom_site_t){.id = 0, .bytes = GiB}; /* under a quarter */
  ol_buf_t small = {0};
  ol_oom_explain(&small, &r, OL_OOM_activations, attention_namer, NULL);
  ck_assert_ptr_null(strstr(small.data, "attention's softmax"));
  ol_buf_free(&small);
}
END_TEST

static Suite *oom_suite(void)
{
  Suite *s = suite_create("oom");
  TCase *classes = tcase_create("classes");
  tcase_add_test(classes, growth_in_inference_names_the_cache_first);
  tcase_add_test(classes, grown_weights_are_kept_copies);
  tcase_add_test(classes, a_backward_s_kept_tensors_without_state_are_a_leak);
  tcase_add_test(classes, optimizers_made_again_are_a_leak);
  tcase_add_test(classes, pytorch_messages_are_read);
  tcase_add_test(classes, a_framework_limit_is_said);
  tcase_add_test(classes, pytorch_s_own_figures_tell_pieces);
  tcase_add_test(classes, attention_scores_are_named);
  tcase_add_loop_test(classes, each_class_from_its_record, 0,
                      sizeof class_cases / sizeof *class_cases);
  tcase_add_test(classes, batch_figures_in_batches);
  tcase_add_test(classes, an_optimizer_s_state_held_is_no_first_iteration);
  tcase_add_test(classes, a_second_step_is_read_from_the_first);
  tcase_add_test(classes, what_a_second_step_needs_whatever_its_batch_is_state);
  tcase_add_test(classes, autocast_s_copies_in_a_second_step_are_state);
  tcase_add_test(classes, a_second_step_s_figure_keeps_the_pool_s_slack);
  tcase_add_test(classes, a_second_step_told_by_its_sizes_is_read_from_the_first);
  tcase_add_test(classes, a_weights_heavy_second_step_by_sizes);
  tcase_add_test(classes, batch_figures_from_a_finished_iteration);
  tcase_add_test(classes, an_iteration_larger_than_any_before);
  tcase_add_test(classes, an_iteration_of_the_same_size_is_not_called_larger);
  tcase_add_test(classes, a_later_iteration_that_failed_is_not_called_the_first);
  tcase_add_test(classes, batch_figure_on_measured_runs);
  tcase_add_test(classes, external_in_the_first_iteration_says_what_is_not_known);
  tcase_add_test(classes, no_batch_fits_is_said);
  tcase_add_test(classes, persistent_names_the_state_not_a_batch);
  tcase_add_test(classes, large_weights_in_the_first_forward_give_both_fixes);
  tcase_add_test(classes, no_batch_before_the_optimizer_gives_both_fixes);
  tcase_add_test(classes, a_leak_by_its_warning_says_what_grew);
  tcase_add_test(classes, a_leak_in_steps_says_what_grew);
  tcase_add_test(classes, a_leak_of_one_kept_block_says_so);
  tcase_add_test(classes, a_step_s_block_kept_out_at_a_larger_iteration_says_so);
  tcase_add_test(classes, a_job_begun_again_gives_shares_of_its_batch);
  tcase_add_test(classes, the_pool_s_own_failure_is_said);
  tcase_add_test(classes, more_past_a_repeat_says_both_readings);
  tcase_add_test(classes, the_json_names_where_the_state_is_from);
  tcase_add_test(classes, a_tensor_kept_since_the_last_iteration_says_so);
  tcase_add_test(classes, a_tensor_kept_in_an_iteration_of_other_sizes_says_so);
  tcase_add_test(classes, held_more_without_call_sites_says_what_it_may_be);
  tcase_add_test(classes, no_iteration_found_without_call_sites_is_not_the_first);
  tcase_add_test(classes, kept_or_state_without_call_sites_says_both);
  tcase_add_test(classes, a_first_step_without_call_sites_gives_both_fixes);
  tcase_add_test(classes, a_gradient_that_does_not_fit_is_the_state);
  tcase_add_test(classes, an_update_s_temporaries_are_said);
  tcase_add_test(classes, the_state_an_optimizer_is_making_counts_whole);
  tcase_add_test(classes, sgd_s_first_update_makes_state);
  tcase_add_test(classes, the_job_s_own_tensors_at_the_step_are_state);
  tcase_add_test(classes, an_update_the_loop_writes_makes_state);
  tcase_add_test(classes, gradients_in_their_own_segments_are_the_state);
  tcase_add_test(classes, another_librarys_pool_is_held_elsewhere);
  tcase_add_loop_test(classes, request_past_int64_is_impossible, 0,
                      sizeof huge_cases / sizeof *huge_cases);
  tcase_add_test(classes, extreme_figures_do_not_overflow);
  suite_add_tcase(s, classes);
  TCase *traces = tcase_create("traces");
  tcase_set_timeout(traces, 60);
  tcase_add_loop_test(traces, recorded_ooms_at_their_caps, 0,
                      sizeof trace_cases / sizeof *trace_cases);
  tcase_add_loop_test(traces, peak_sites_sum_to_the_peak, 0,
                      sizeof sited_traces / sizeof *sited_traces);
  tcase_add_test(traces, sites_table_orders_and_interns);
  tcase_add_test(traces, state_made_once_is_not_growth);
  tcase_add_test(traces, a_site_that_grows_again_grew_from_nothing);
  tcase_add_test(traces, growth_counts_from_a_count_that_goes_back);
  tcase_add_test(traces, the_unsampled_site_is_not_the_grower);
  suite_add_tcase(s, traces);
  return s;
}

int main(void)
{
  return ol_run_suite(oom_suite());
}
