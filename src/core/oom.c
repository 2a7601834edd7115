/* oom.c: why an allocation failed, and what to change, with numbers.
 *
 * Automates the diagnosis of the field guides (../shared/seeds): from one
 * record taken at the failure (the request, the device, what this process
 * and others hold, the free blocks, what the memory is by role, and what
 * the allocation stream says outlives iterations) pick the one cause that
 * explains it, in an order where each test rules out what the next would
 * misread:
 *
 *   1. a request larger than the device (nothing else matters);
 *   2. free memory in pieces (enough is free, no block is large enough,
 *      the pieces are more than an allocator's slack and the state alone
 *      leaves room for a batch: else no placement would have fitted it);
 *   3. others' memory (ours would fit without it);
 *   4. growth across iterations, or memory that is not the state kept
 *      across them and grown to a quarter of the device, or a standing
 *      leak warning's growth, or one call site's of no state role grown
 *      by the shortfall (a leak fills the device whatever the batch,
 *      so it is ruled in before the size of the state is weighed);
 *   5. the state alone (weights, gradients, optimizer state) leaves no room
 *      for any batch with the guides' headroom;
 *   6. else the iteration's own memory: activations; but in a first
 *      step whose trained part or optimizer is not seen yet and decides
 *      between 5 and 6, undetermined, with both fixes.
 *
 * What the state is comes from roles (what each call site's frames say the
 * memory is for), else from timing: what outlives iterations, or before
 * any iteration finished, what was allocated before the job's first free.
 * When neither can be known (PyTorch's cache hides its tensors and no
 * frames name them) rules 4-6 cannot be told apart, and the class says so
 * (undetermined) rather than guess. The same record and wording serve the
 * live job and replay. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core.h"

#define HEADROOM_PERCENT 20 /* the guides keep 20-30% free for spikes */
#define PIECES_SHARE 10     /* free pieces worth naming: a tenth of the reserve */

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

/* The record's request and capacity are unsigned (a request of 2^64 - 1
 * is one); the rules' arithmetic is signed and saturating (ol_sat_add):
 * these give them in its range, held at INT64_MAX. The words print the
 * unsigned figures themselves (ol_format_size). */
static int64_t in_range(uint64_t v)
{
  return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
}

static int64_t cap_of(const ol_oom_record_t *r)
{
  return in_range(r->capacity);
}

static int64_t request_of(const ol_oom_record_t *r)
{
  return in_range(r->request);
}

/* a / b rounded up, a >= 0, b >= 1, without the overflow of a + b - 1. */
static int64_t ceil_div(int64_t a, int64_t b)
{
  return a / b + (a % b != 0);
}

/* pct percent of v >= 0, exact and without overflow. */
static int64_t percent_of(int64_t v, int64_t pct)
{
  return v / 100 * pct + v % 100 * pct / 100;
}

static int64_t at_least_zero(int64_t v)
{
  return v > 0 ? v : 0;
}

/* What another GPU library in this process holds: its blocks are among
 * this process's, but it is held elsewhere as much as another process's
 * memory is, and freed or capped there, not by a smaller batch (held-out
 * cupy_pool: 8 GiB of CuPy's beside a GPT-2 step that fits alone, read as
 * activations). What its call sites made (roles.c), and the physical
 * memory made with cuMemCreate in large handles where the framework makes
 * none (held-out jax_external: JAX preallocated 9 GiB of a 12 GiB cap as
 * one handle, read as PyTorch's own reserve: activations). */
static int64_t library_of(const ol_oom_record_t *r)
{
  int64_t sites = r->roles_known ? at_least_zero(r->role_bytes[OL_ROLE_library]) : 0;
  return ol_sat_add(sites, r->vmm_not_framework ? at_least_zero(r->vmm_reserved) : 0);
}

/* What the framework itself holds reserved: this process's less another
 * library's. Under our pool, what the pool counts (its blocks and its free
 * memory): what it mapped toward the request that failed is given back as
 * the request fails, and stays mapped only until the work queued before
 * it has passed, so it is the request's own, not held beside it (held-out
 * varlen_logits_leak: 0.46 GB of an 0.82 GB request's growth read as
 * reserved made the request lack all of itself, more than the 0.62 GB of
 * logits kept, which was then not the cause). */
static int64_t framework_reserved(const ol_oom_record_t *r)
{
  int64_t reserved = r->reserved;
  if (r->managed && r->free_reserved >= 0 && r->allocated >= 0) {
    int64_t pooled = ol_sat_add(r->allocated, r->free_reserved);
    reserved = pooled < reserved ? pooled : reserved;
  }
  return at_least_zero(ol_sat_sub(reserved, library_of(r)));
}

/* What the device offers the framework: all of it less what others hold
 * (the CUDA context and libraries included: they stay whatever we do) and
 * what another library in this process holds. */
static int64_t available(const ol_oom_record_t *r)
{
  return at_least_zero(
    ol_sat_sub(ol_sat_sub(cap_of(r), at_least_zero(r->external)), library_of(r)));
}

/* How much more than the device offers the framework's reserve and the
 * request needed: what a growth must cover to be the cause (<= 0: the
 * request would fit beside the reserve). */
static int64_t lacking_of(const ol_oom_record_t *r)
{
  return ol_sat_sub(ol_sat_add(framework_reserved(r), request_of(r)), available(r));
}

/* ---- what the state is ------------------------------------------------ */

typedef enum state_source {
  STATE_ROLES,      /* weights + gradients + optimizer state, by call site */
  STATE_ITERATIONS, /* what outlives the iterations seen */
  STATE_MADE_SINCE, /* that, and what the iteration under way made past a
                     * repeat of the last one without freeing any */
  STATE_BUILDING,   /* no memory freed yet: all of it is the job's state so far */
  STATE_FIRST_FREE, /* first iteration: what was allocated before the first free */
  STATE_REQUESTED,  /* segments of no known role, the request's own for the state */
  STATE_HIDDEN,     /* nothing to tell it by */
  STATE_SOURCE_COUNT
} state_source_t;

typedef struct state {
  state_source_t source;
  int64_t bytes; /* the state, the request included when it is part of it */
} state_t;

static bool request_is_state(const ol_oom_record_t *r)
{
  return r->request_is_gradient ||
         (r->request_role_known &&
          (r->request_role == OL_ROLE_weights || r->request_role == OL_ROLE_optimizer ||
           r->request_role == OL_ROLE_gradients));
}

/* The gradients a backward was making before any outlived one are state
 * as much as those kept from a step before. Under PyTorch's cache a
 * segment of 2 or 20 MiB packs many small tensors (a weights' segment
 * beside a backward's of that size says nothing), so there only segments
 * made for one tensor count, and the request (held-out ema_state in
 * observe mode: four 256 MiB gradients of four 256 MiB weights, not
 * counted, left the state "fitting" and the class undetermined). */
static int64_t gradients_made(const ol_oom_record_t *r)
{
  return r->segments_only ? r->gradients_made_own_segments : r->gradients_made;
}

static int64_t role_gradients(const ol_oom_record_t *r)
{
  return ol_sat_add(r->role_bytes[OL_ROLE_gradients], gradients_made(r));
}

static int64_t role_state(const ol_oom_record_t *r)
{
  return ol_sat_add(ol_sat_add(r->role_bytes[OL_ROLE_weights], role_gradients(r)),
                    r->role_bytes[OL_ROLE_optimizer]);
}

/* The trained parameters' bytes: those with gradients, no more than the
 * weights (DDP's buckets count as gradients too). */
static int64_t trained_of(const ol_oom_record_t *r)
{
  int64_t w = r->role_bytes[OL_ROLE_weights], g = role_gradients(r);
  return g < w ? g : w;
}

/* Of what was made before the job's first free, the bytes still live (the
 * account counts those freed since); -1 before any free. */
static int64_t before_first_free_live(const ol_oom_record_t *r)
{
  if (r->before_first_free < 0)
    return -1;
  return at_least_zero(ol_sat_sub(r->before_first_free, r->before_first_free_gone));
}

/* In the first backward, before the optimizer's step, the gradients made
 * so far are those of the layers it has reached (the last first): where
 * they are fewer than the weights, the rest may still come, if the job
 * trains them all (sgd_momentum_step_small, replayed at 0.6 of its cap:
 * out with the head's 48 MiB of gradients made of 608 MiB of weights,
 * "cut the memory per sample" where all of them and the momentum would
 * not fit at any batch). */
static int64_t gradients_to_come(const ol_oom_record_t *r)
{
  if (r->iterations > 0 || role_gradients(r) <= 0 || r->role_bytes[OL_ROLE_optimizer] > 0)
    return 0;
  return at_least_zero(ol_sat_sub(r->role_bytes[OL_ROLE_weights], role_gradients(r)));
}

/* The most the job may train: the parameters with gradients and, in the
 * first backward, those whose gradients may still come. */
static int64_t trained_at_most(const ol_oom_record_t *r)
{
  return ol_sat_add(trained_of(r), gradients_to_come(r));
}

/* The request was an optimizer making its state (Adam's moments at its
 * first step): what the state comes to once made is known before it is,
 * its buffers for each trained parameter, the trained parameters being
 * those with gradients (no more than the weights: DDP's buckets count as
 * gradients too). What it adds beyond the optimizer state held now, the
 * request included; 0 for any other request. Held-out
 * optim_switch_state, in observe mode: SGD for 6 steps, then AdamW, whose
 * first step ran out with half its moments made (0.52 of 1.11 GB) and the
 * state held 4 MB short of the guides' 80%: undetermined, where the state
 * it was making needed 2.27 GB of the 2.14 the process could have. */
static int64_t state_being_made(const ol_oom_record_t *r)
{
  if (!r->roles_known || r->request_state_buffers <= 0)
    return 0;
  int64_t trained = trained_of(r);
  int64_t made;
  if (__builtin_mul_overflow((int64_t)r->request_state_buffers, at_least_zero(trained), &made))
    made = INT64_MAX;
  int64_t held = ol_sat_add(r->role_bytes[OL_ROLE_optimizer], request_of(r));
  return at_least_zero(ol_sat_sub(made, held));
}

/* The job's own lines asked, once a backward had made gradients, for a
 * block of a parameter's size: an update the loop writes itself, making
 * its moments (or an average of the weights) one parameter at a time,
 * which no torch/optim frame names (held-out handmade_adam_state: out at
 * the embedding's second moment, 0.44 GiB of copies taken for the
 * iteration's memory, and a job at batch 1 told to cut the memory per
 * sample). Its copies and the request are state, in the first step as at
 * an optimizer's request (own_copies_state). */
static bool own_update_request(const ol_oom_record_t *r)
{
  bool copy = r->segments_only ? r->request_is_copy_own_segment : r->request_is_copy;
  return copy && r->roles_known && r->iterations == 0 && role_gradients(r) > 0;
}

/* Copies of the parameters the job's own lines keep (account.c
 * parameter_copies: blocks of role other of a weight's size, twice or
 * half it: fp32 master copies of 16-bit weights and their gradients, an
 * average of the weights), still held when the optimizer's step asks:
 * they do not shrink with the batch, and count with the state then
 * (held-out master_weights_state: 944 MiB of masters and their gradients,
 * made by the loop's own lines, were taken for the iteration's memory, and
 * a job at batch 1 was told to cut the memory per sample). A tensor of the
 * batch's size the loop made and still holds is not one. Only in the
 * first step: once iterations are found, what outlives them says what is
 * kept, and what the job's own lines keep growing is a leak's
 * (kept_to_blame), not state. At an update the loop writes itself
 * (own_update_request) the request is one more. Before the step, in the
 * forward or the backward, only the copies made at sites that allocated
 * before the first forward began count: those are built with the model
 * (the masters, made before the loop), where one the forward makes may be
 * an activation of a weight's size by chance (master_weights_state
 * replayed at 0.4 of its cap ran out in its first backward with its
 * 495 MiB of masters read as the batch's memory). */
static int64_t own_copies_state(const ol_oom_record_t *r)
{
  if (!r->roles_known || r->iterations > 0)
    return 0;
  bool own = own_update_request(r);
  bool at_step = own || (r->request_role_known && r->request_role == OL_ROLE_optimizer);
  if (!at_step)
    return at_least_zero(r->segments_only ? r->own_copies_early_own_segments
                                          : r->own_copies_early);
  int64_t held = at_least_zero(r->segments_only ? r->own_copies_own_segments : r->own_copies);
  return own ? ol_sat_add(held, request_of(r)) : held;
}

static bool kept_weighs(const ol_oom_record_t *r, int64_t bytes);

/* Without call sites, the iteration under way repeated the last one
 * through its rise and fall and then made allocations the last never
 * made, which hold what the request lacked and a 32nd of the device
 * (recent.c): not a larger input's memory, whose tensors differ in size
 * from the first; work the last iteration did not do. */
static bool more_past_repeat(const ol_oom_record_t *r)
{
  return !r->roles_known && !r->segments_only && r->iterations > 0 &&
         kept_weighs(r, r->past_repeat.held);
}

/* What was made past the repeat without a free, each block still held,
 * is state being built in mid-run (a model loaded beside this one, an
 * optimizer's moments zeroed at its first step: held-out teacher_late's
 * 1.8 GB in 172 allocations, optimizer_switch's Adam 512 MiB in 4), as
 * all a job makes before its first free is (STATE_BUILDING). Not where
 * the request is as large as half of it: the first operation of a larger
 * batch makes its first tensors without a free too (corpus late_batch,
 * with its sites, repeated its last step whole and then made 2.0 GB in 8
 * allocations and asked 2.8 GB). */
static int64_t built_past_repeat(const ol_oom_record_t *r)
{
  if (!more_past_repeat(r) || r->past_repeat.frees > 0 ||
      ol_sat_add(request_of(r), request_of(r)) >= r->past_repeat.held)
    return 0;
  return r->past_repeat.held;
}

/* Under PyTorch's cache we see segments, which hold no one's tensors in
 * particular once freed blocks are reused: only roles (the tensor a segment
 * was made for) say anything of what is in them. */
static state_t state_of(const ol_oom_record_t *r)
{
  int64_t request = request_is_state(r) ? request_of(r) : 0;
  if (r->roles_known)
    return (state_t){STATE_ROLES,
                     ol_sat_add(ol_sat_add(ol_sat_add(role_state(r), request), state_being_made(r)),
                                own_copies_state(r))};
  /* Segments no call site named (expandable segments' cuMemCreate carries
   * none), but the failed request's own site says it was for weights or
   * optimizer state: the job ran out making its state. */
  if (r->segments_only && request_is_state(r))
    return (state_t){STATE_REQUESTED, ol_sat_add(r->reserved, request)};
  if (r->segments_only)
    return (state_t){STATE_HIDDEN, 0};
  if (r->iterations > 0 && built_past_repeat(r) > 0)
    return (state_t){STATE_MADE_SINCE,
                     ol_sat_add(r->persistent, ol_sat_add(built_past_repeat(r), request_of(r)))};
  if (r->iterations > 0)
    return (state_t){STATE_ITERATIONS, r->persistent};
  if (r->before_first_free < 0)
    return (state_t){STATE_BUILDING, ol_sat_add(r->allocated, request_of(r))};
  /* no more of it than is live now: a job that freed part of what it
   * made first no longer holds it (the blocks made then still live, where
   * the account says: held-out video_batch, replayed without its sites,
   * had made 1.60 GB before its first free, 0.81 GB of it the weights) */
  int64_t made = before_first_free_live(r);
  int64_t live = r->allocated < made ? r->allocated : made;
  return (state_t){STATE_FIRST_FREE, at_least_zero(live)};
}

/* A step set beside the one before it by sizes held the weights by
 * timing at the point set beside now, so what it holds more is at most
 * what is allocated beyond them: where more, the repeat began before the
 * weights were all made (held-out sgd_momentum_step without its sites:
 * the first update's momentum buffers, the parameters' sizes in their
 * order, repeat the model's load; "kept 1.39 GiB more" beside 0.61 GiB of
 * weights, where 1.53 GiB was allocated). */
static bool weights_held_then(const ol_oom_record_t *r)
{
  if (r->roles_known || r->step_repeat_held < 0 || r->before_first_free < 0)
    return true;
  return ol_sat_add(before_first_free_live(r), r->step_repeat_held) <= r->allocated;
}

/* Out in its second step, the first having finished (no iteration told
 * yet: one is told once seen whole twice), the step under way set beside
 * the first at the failure, the same sizes in the same order so far
 * (account.c, r->step_rest): the first's course past this point is the
 * rest of this one's, and its need is read, not bounded. The common "out
 * at step 2" (the first update made Adam's moments: gpt2_batch at batch 4
 * under 8.0G and 8.3G on the H100, session 39, both told "at most 3,
 * run at batch 1 to learn more", where 3 fits). */
static bool second_step_read(const ol_oom_record_t *r)
{
  return r->iterations == 0 && r->step_rest > 0 && !r->segments_only && weights_held_then(r);
}

/* ---- the rules, in order ---------------------------------------------- */

static bool state_to_blame(const ol_oom_record_t *r, state_t s);
static ol_batch_figure_t batch_fit(const ol_oom_record_t *r); /* the batch figures, below */

/* What others hold that could be freed or moved: when NVML said what this
 * process holds in all, its own CUDA context and libraries are not among
 * them (they stay whatever the user does: on a 2 GiB cap the context is a
 * quarter of the device while the weights being built are the cause). */
static int64_t others_of(const ol_oom_record_t *r)
{
  int64_t own_context =
    r->self_device_bytes > r->reserved ? ol_sat_sub(r->self_device_bytes, r->reserved) : 0;
  return ol_sat_add(at_least_zero(ol_sat_sub(r->external, own_context)), library_of(r));
}

/* What this process's framework would need with the device to itself
 * (another library's memory in it gone too): what it holds plus the
 * request, or, once an iteration finished, what outlives the
 * iterations plus an iteration's need, if more (on one H200 shared by two
 * ranks, the rank with 4096-token sequences held 4.3 of a 6 GiB cap when
 * its 1 GiB request failed: the request would fit without the other rank,
 * its step would not). */
static int64_t own_need(const ol_oom_record_t *r)
{
  int64_t ours = ol_sat_add(framework_reserved(r), request_of(r));
  int64_t kept = at_least_zero(ol_sat_sub(r->persistent, library_of(r)));
  int64_t iteration = ol_sat_add(kept, r->iteration_need);
  if (r->iterations > 0 && r->iteration_need > 0 && r->persistent >= 0 && iteration > ours)
    return iteration;
  return ours;
}

/* Would this process fit if nobody else held any memory, while others hold
 * a share worth naming? A tenth of the device: a small share outweighs a
 * small request without being what to change (on an 8 GiB device building
 * 10 GB of weights it was the last straw, not the cause). */
static bool others_to_blame(const ol_oom_record_t *r)
{
  int64_t others = others_of(r);
  return others > 0 && own_need(r) <= cap_of(r) && others >= cap_of(r) / 10;
}

/* The allocator's free blocks were searched and none held the request:
 * our pool's and the model's largest block is known; PyTorch's message
 * says only that its cache found none (no_block_held). */
static bool no_block_holds(const ol_oom_record_t *r)
{
  if (r->largest_free_block >= 0)
    return r->largest_free_block < request_of(r);
  return r->no_block_held;
}

/* Where only the framework's word says its free memory is in pieces
 * (PyTorch's message, observe mode), no history says what else grew: a
 * leak's leftovers are pieces too (held-out dataset_cache_leak: samples
 * kept on the device, 611 MiB of 5.36 GiB free at the end, was called
 * fragmentation). Pieces are the cause there from a quarter of the reserve
 * (the held-out servers that ran out in pieces had 36-54% free). */
#define FRAMEWORK_PIECES_SHARE 4

/* Free reserved memory in pieces is the cause when it covers the request
 * and no block does, and when, in one piece, it would change more than
 * this one request:
 *   - it is more than an allocator's ordinary slack: a tenth of what is
 *     reserved (our pool keeps 0.4-1% free at the corpus's OOMs; the
 *     corpus's frag_cache under PyTorch's policy had 30% in pieces);
 *   - the state alone leaves room for a batch (rule 5 does not hold): where
 *     weights, gradients and optimizer state take the device, no allocator
 *     fits the job, however it places the blocks (held-out adam_vit: AdamW's
 *     moments being made, 96% of the device the state's, 33 MiB free in
 *     pieces of a 3.5 GiB reserve, a 16 MiB request: the residue, not the
 *     cause). */
static bool pieces_to_blame(const ol_oom_record_t *r, state_t s)
{
  if (r->free_reserved < 0 || r->free_reserved < request_of(r) || !no_block_holds(r))
    return false;
  int64_t share = r->largest_free_block >= 0 ? PIECES_SHARE : FRAMEWORK_PIECES_SHARE;
  return r->free_reserved >= framework_reserved(r) / share && !state_to_blame(r, s);
}

/* growth a step over steps steps, held in the int64 range. */
static int64_t grown_over(int64_t growth, uint64_t steps)
{
  int64_t gained;
  if (steps > (uint64_t)INT64_MAX || __builtin_mul_overflow(growth, (int64_t)steps, &gained))
    return growth > 0 ? INT64_MAX : INT64_MIN;
  return gained;
}

/* What outlives iterations rose by more than 1% of the device per
 * iteration, over at least three iterations (phases.c), and what it gained
 * over the last GROWTH_SPAN adds up to more than the request: without that
 * growth it would fit. */
#define GROWTH_SPAN 8
static bool growth_to_blame(const ol_oom_record_t *r)
{
  uint64_t seen = r->iterations < GROWTH_SPAN ? r->iterations : GROWTH_SPAN;
  return r->iterations >= 3 && r->growth > cap_of(r) / 100 &&
         grown_over(r->growth, seen - 1) >= request_of(r);
}

/* What was there before the growth: the lower of what outlived the first
 * iteration found (found late, when the repeat was seen late, it is
 * already grown) and what the job held when it first freed memory. */
static int64_t growth_base(const ol_oom_record_t *r)
{
  int64_t base = r->first_persistent;
  if (r->before_first_free >= 0 && (base < 0 || r->before_first_free < base))
    base = r->before_first_free;
  return base;
}

/* What outlives iterations but is not the state (roles say what the state
 * is) has grown to a quarter of what the device offers: kept activations,
 * outputs, caches. It finds the leak however little the iterations found
 * inside one step rise each (a loss kept with its graph makes the finder
 * see the layers' repeat; a KV cache grows a layer at a time); a buffer
 * made once before the loop was there before the growth, so it does not
 * count. */
static bool kept_to_blame(const ol_oom_record_t *r, state_t s)
{
  if (s.source != STATE_ROLES || r->iterations < 2 || growth_base(r) < 0)
    return false;
  int64_t state_held = ol_sat_sub(s.bytes, request_is_state(r) ? request_of(r) : 0);
  int64_t kept = ol_sat_sub(r->persistent, state_held);
  int64_t grew = ol_sat_sub(r->persistent, growth_base(r));
  return kept >= available(r) / 4 && grew >= kept / 2;
}

/* What outlives iterations was still rising when the job ran out, and has
 * risen since the first iteration found by more than the request lacked,
 * steadily (its rate over the iterations covers it too): without that
 * growth it would fit. A slow leak (16 MB a step near a 6.6 GB cap, on the
 * H200: the field guides' "fails mid-training") passes no per-iteration
 * share and is far from a quarter of the device, but adds up to the
 * shortfall. The optimizer's state, made once in the first step, may come
 * after the first iteration found: where roles say what the weights and
 * the optimizer's state are, they are not growth. A rise of less than 0.5%
 * of the device is not told from the allocator's noise. */
static bool shortfall_grown(const ol_oom_record_t *r)
{
  if (r->iterations < OL_LEAK_STREAK + 1 || r->first_persistent < 0 || r->growth <= 0)
    return false;
  int64_t grew = ol_sat_sub(r->persistent, r->first_persistent);
  if (r->roles_known) {
    int64_t kept = ol_sat_sub(ol_sat_sub(r->persistent, r->role_bytes[OL_ROLE_weights]),
                              r->role_bytes[OL_ROLE_optimizer]);
    grew = kept < grew ? kept : grew;
  }
  int64_t lacking = lacking_of(r);
  return grew >= cap_of(r) / OL_LEAK_SHARE && grew >= lacking &&
         grown_over(r->growth, r->iterations - 1) >= lacking;
}

/* A loop may keep a little more across its iterations than its state (a
 * prefetched batch, a scaler's or a scheduler's buffers): what is kept
 * beyond it is weighed from a 32nd of the device (kept_unexplained), and
 * so is a site's one block kept and what a site holds more than at the
 * same point of the iteration before (grower_reading, site_grew_by_shortfall;
 * held_unexplained). */
#define KEPT_BEYOND_SHARE 32

/* Bytes kept beyond what the rules explain are the cause where they cover
 * what the request lacked and are a 32nd of the device or more. */
static bool kept_weighs(const ol_oom_record_t *r, int64_t bytes)
{
  return bytes > 0 && bytes >= lacking_of(r) && bytes >= cap_of(r) / KEPT_BEYOND_SHARE;
}

/* The iteration under way has asked for no more above what outlives the
 * iterations than the most an earlier one needed: it ran out because what
 * outlives them rose, not because it is larger (a longer input's
 * iteration asks for more: held-out varlen_long). */
static int64_t iteration_asked(const ol_oom_record_t *r)
{
  return ol_sat_sub(ol_sat_add(r->allocated, request_of(r)), r->persistent);
}

/* Iterations finished, and the one under way can be set beside them:
 * what the most needed and what outlives them are known. */
static bool beside_finished_iterations(const ol_oom_record_t *r)
{
  return r->iterations > 0 && r->iteration_need > 0 && r->persistent >= 0;
}

/* An iteration's work larger than any that finished: it asked a 32nd more
 * than the most one needed, both above what outlives them (iterations of
 * the same input wobble by a few MB: held-out kept_validation_leak's
 * failed one asked 3.9 MB more than the most an earlier one needed;
 * bucket_batch's first long bucket 7% more). */
static bool work_larger_than_before(const ol_oom_record_t *r)
{
  return ol_sat_sub(iteration_asked(r), r->iteration_need) >= r->iteration_need / 32;
}

static bool iteration_asks_no_more(const ol_oom_record_t *r)
{
  return beside_finished_iterations(r) && !work_larger_than_before(r);
}

/* The call site that grew most across iterations (its memory at their
 * lowest points, sites.c) makes no part of the state, and its growth
 * covers what the request lacked: without it the job would fit. A leak in
 * bursts (a large tensor kept every few steps) gives no steady rise and
 * no warning before it runs the job out, and its kept blocks, of the
 * forward's role, read as a larger input than any before (leaks
 * scripts/corpus_leaks.py gave the corpus's fitted jobs, 144-392 MiB kept
 * every 4th step: 9 of 9 told activations; an iteration of a larger input
 * keeps nothing past it, so no site grows, and where the input was seen
 * growing step by step, a schedule's, what it holds between steps grows
 * with it: not this reading). */
static uint64_t iterations_to_read(const ol_oom_record_t *r)
{
  if (r->grower_reading != OL_GROWER_SINCE_LAST)
    return OL_LEAK_STREAK;
  return r->since_last_by_repeat ? 0 : 2;
}

static bool site_grew_by_shortfall(const ol_oom_record_t *r)
{
  if (!r->roles_known || r->iterations < iterations_to_read(r) || r->grower.id < 0 ||
      ol_role_is_state(r->grower_role) || r->grower_role == OL_ROLE_unknown ||
      r->input_growth > 0)
    return false;
  if (r->grower_reading != OL_GROWER_KEPT && !kept_weighs(r, r->grower.bytes))
    return false;
  if (r->grower_reading == OL_GROWER_ONCE && !iteration_asks_no_more(r) && !r->grower_per_step)
    return false;
  int64_t lacking = lacking_of(r);
  return r->grower.bytes >= cap_of(r) / OL_LEAK_SHARE && r->grower.bytes >= lacking;
}

/* The leak warning stands (phases.c found what outlives iterations
 * rising over a streak of them, and it has not come back), and what
 * outlives them has grown since the warning's first low by at least what
 * the request lacked: without that growth it would fit. The warning is
 * the leak's reading that holds on any device; the others weigh the
 * growth against the device's size (a hundredth a step, a quarter kept),
 * and on a smaller device a leak runs out before it reaches them
 * (held-out sparse_log_leak, hidden states kept every tenth step,
 * replayed at 0.7 of its cap: warned at its 41st iteration, out at
 * about its 325th, and told its work was larger than any before). Only
 * where call sites name roles: without them iterations are found by sizes
 * alone, and a first step's layers that keep their activations can be
 * taken for iterations that leak (held-out fsdp2_batch without its sites:
 * 46 "iterations" of its first forward, a warning, and `leak`). */
static bool warned_growth(const ol_oom_record_t *r)
{
  if (!r->warned || r->iterations == 0 || !r->roles_known)
    return false;
  int64_t grew = ol_sat_sub(r->persistent, r->warned_from);
  int64_t lacking = lacking_of(r);
  return grew > 0 && grew >= lacking;
}

/* Nothing outlives the iterations more each time, but each iteration
 * needed more than the last and made more allocations, steadily
 * (ol_phases_work_growth): the same work once more each iteration, kept
 * until its end (gradient accumulation whose window grows: held-out
 * accum_leak, read as the batch's activations before). The failed one
 * needed what the last did and the rise: that it ran out is the growth's
 * doing where the first of the streak would have fitted. */
static bool work_grown(const ol_oom_record_t *r)
{
  if (r->need_growth <= 0 || r->work_growth <= 0 || r->iteration_need <= 0)
    return false;
  int64_t streak_start = ol_sat_sub(r->iteration_need,
                                    r->need_growth * (OL_WORK_STREAK - 1));
  return ol_sat_add(r->persistent, streak_start) <= available(r);
}

/* The first iteration ran out before its backward had made a gradient
 * (roles say no gradient or optimizer state is held; the backward's
 * temporaries may be: held-out adam_vit replayed at 0.4 of its cap ran
 * out as its backward began, 1.13 GiB of ViT-L weights beside a 1.60 GiB
 * budget, and was told activations), with weights
 * so large that training them all leaves no room for a batch: their
 * gradients alone double them, before Adam's moments (twice the weights
 * more) come at the first step. What the job trains is not seen before
 * its backward, and it decides the class: a LoRA fine-tune trains a small
 * part of large weights, and a smaller batch is its fix; held-out
 * distill_state (a frozen teacher and a student, 1.78 GiB of weights where
 * the process could have 2.47 GiB of a 3 GiB cap) ran out in the
 * teacher's forward, and at any batch would run out at the student's
 * backward or AdamW's first step. Neither is guessed: the class is
 * undetermined, and the advice gives both fixes and what the trained part
 * may weigh (advise_untrained). */
static bool training_unseen(const ol_oom_record_t *r)
{
  /* a second step read from its first (second_step_read): that step's
   * backward was seen */
  if (r->iterations > 0 || !r->roles_known || r->segments_only || role_gradients(r) > 0 ||
      r->role_bytes[OL_ROLE_optimizer] > 0 || second_step_read(r))
    return false;
  int64_t w = r->role_bytes[OL_ROLE_weights];
  return w > 0 && ol_sat_add(w, w) >= percent_of(available(r), 100 - HEADROOM_PERCENT);
}

/* The request was for weights (a load) or an optimizer's state (its
 * first step, whose state is counted whole, state_being_made). */
static bool request_makes_state(const ol_oom_record_t *r)
{
  return r->request_role_known &&
         (r->request_role == OL_ROLE_weights || r->request_role == OL_ROLE_optimizer);
}

/* The first iteration ran out before its optimizer's first step, where
 * no batch fits: the state held and one sample's share of the iteration
 * already exceed what the process can have. Whether the memory per sample
 * or the state is what must change depends on the optimizer, which is not
 * seen before that step: with plain SGD (no state) the state held is all
 * there is and it fits; with Adam, two buffers as large as the trained
 * parameters (those with gradients) take the state past the guides'
 * headroom, and no cut per sample makes the job fit. Neither is guessed
 * (held-out handmade_adam_state, optim_switch_state, sgd_momentum_step and
 * master_weights_state replayed at half their caps ran out in the first
 * backward at batch 1, and were told to cut the memory per sample where
 * the optimizer's state would not fit at any batch). */
static bool optimizer_unseen(const ol_oom_record_t *r, state_t s)
{
  /* a second step read from its first (second_step_read): that step's
   * update was seen, and made no state */
  if (r->iterations > 0 || !r->roles_known || r->segments_only || s.source != STATE_ROLES ||
      r->role_bytes[OL_ROLE_optimizer] > 0 || request_makes_state(r) || second_step_read(r))
    return false;
  int64_t trained = trained_at_most(r);
  if (trained <= 0 || batch_fit(r).fits >= 1)
    return false;
  int64_t held = ol_sat_add(s.bytes, gradients_to_come(r));
  int64_t with_adam = ol_sat_add(held, ol_sat_add(trained, trained));
  return with_adam >= percent_of(available(r), 100 - HEADROOM_PERCENT);
}

/* Without call sites (frames off, not CPython 3.10-3.13, not Python) the
 * state is told by timing alone, and two readings of it cannot be trusted
 * in the first step. Before any free, all the job holds is taken as state
 * being built (weights moved or loaded); but a request as large as half
 * of that may be the first operation of a batch as well as a weight
 * (held-out cnn_infer_batch, replayed without its sites: 7.27 GiB asked
 * beside 7.37 GiB held, before any free, at the first layer of a batch
 * of 2048 images, was told persistent). */
static bool building_or_batch(const ol_oom_record_t *r, state_t s)
{
  return !r->roles_known && s.source == STATE_BUILDING &&
         ol_sat_add(request_of(r), request_of(r)) >= r->allocated;
}

/* The most a training state may weigh for these weights: themselves,
 * their gradients and Adam's two moments. */
static int64_t training_state_at_most(int64_t weights)
{
  int64_t twice = ol_sat_add(weights, weights);
  return ol_sat_add(twice, twice);
}

/* After the first free, what came before it is taken as the weights; the
 * gradients and optimizer state the first step makes are not told from the
 * batch's memory by timing, nor is what the job trains. Where they would
 * take the state past the guides' headroom (up to three times the
 * weights: gradients and Adam's two moments), the class hinges on them,
 * whether a batch fits by the figures or not (timing may have counted the
 * gradients as the batch's) (held-out optimizer_step,
 * adam_vit, ema_state and five more, replayed without their sites: Adam's
 * first step and a first backward ran out and were told activations).
 * So too in a second step told by its sizes (second_step_read): its
 * first update was seen, but what that step kept (step_repeat_held) may
 * be the state it made or tensors kept from step to step, and timing
 * does not tell them apart (held-out peft_lora_leak at 0.3 of its cap,
 * replayed without its sites: its frozen weights by timing, its LoRA's
 * state next to nothing, the graph of the logits it kept 1.38 times the
 * weights; read as state, it was told `activations`). */
static bool step_state_unseen(const ol_oom_record_t *r, state_t s)
{
  if (r->roles_known || r->iterations > 0 || s.source != STATE_FIRST_FREE)
    return false;
  return training_state_at_most(s.bytes) >= percent_of(available(r), 100 - HEADROOM_PERCENT);
}

/* Without call sites, iterations are found by sizes that repeat and what
 * outlives them is told by timing alone: all of it reads as state. A
 * training state is at most four times the weights (taken, by timing, as
 * what the job held when it first freed memory). What outlives the
 * iterations beyond that may be tensors kept from step to step (a leak)
 * or state the weights by timing do not count (fp32 master copies, a
 * second model, buffers made in the loop); where the request would fit
 * without it, the class hinges on which, and is not guessed (held-out
 * reload_leak, grad_stats_leak and eight more leaks, replayed without
 * their sites, were told activations, window32_leak persistent: 0.25 to
 * 3.9 GiB kept beyond four times their weights; every leak of the corpus
 * keeps more than its four times, no job that truly ran out of
 * activations does). */
static int64_t kept_beyond_state(const ol_oom_record_t *r)
{
  if (r->roles_known || r->segments_only || r->iterations == 0 || r->before_first_free < 0)
    return 0;
  return at_least_zero(
    ol_sat_sub(r->persistent, training_state_at_most(before_first_free_live(r))));
}

/* A job trained with Adam keeps its four times exactly (held-out
 * multiscale_batch, out of one step's memory, 2.4 MiB under them), and a
 * loop may keep a little more across its iterations: what is kept beyond
 * the bound counts from a 32nd of the device (KEPT_BEYOND_SHARE; the
 * leaks above kept 7% to 39%). */
static bool kept_unexplained(const ol_oom_record_t *r)
{
  return kept_weighs(r, kept_beyond_state(r));
}

/* Without call sites, the iteration under way made the same sizes as the
 * one before up to the failure (recent.c: no larger input), and holds more
 * than that one held at that point, by what the request lacked and a 32nd
 * of the device: something it made stays. With call sites a site of no
 * state says a kept tensor (rule 4); without them a kept tensor and the
 * gradients that gradient accumulation keeps between micro-steps look
 * alike (held-out kept_validation_leak without its sites: its 823 MB of
 * validation logits, told `activations` as a larger input's). */
static bool held_unexplained(const ol_oom_record_t *r)
{
  return !r->roles_known && !r->segments_only && kept_weighs(r, r->held_since_last);
}

/* Without call sites, state built in mid-run past a repeat of the last
 * step leaves less than the guides' headroom without what outlives the
 * iterations beyond a training state's most (kept_beyond_state): the
 * build is too large whatever that is (held-out cnn_teacher_late without
 * its sites: a ViT-L teacher 813 MB into its .cuda() beside a ResNet-18
 * student, 104 MB kept beyond four times the weights by timing, which
 * alone made it `undetermined`). */
static bool built_past_repeat_to_blame(const ol_oom_record_t *r, state_t s)
{
  return s.source == STATE_MADE_SINCE &&
         ol_sat_sub(s.bytes, kept_beyond_state(r)) >=
           percent_of(available(r), 100 - HEADROOM_PERCENT);
}

/* What the step under way holds more than the step before it held at the
 * same point (a repeat of its sizes), beyond the gradients and Adam's two
 * moments that step may have made for the weights by timing. */
static int64_t step_kept_beyond_state(const ol_oom_record_t *r)
{
  if (r->step_repeat_held < 0 || r->before_first_free < 0)
    return 0;
  int64_t weights = before_first_free_live(r);
  return at_least_zero(
    ol_sat_sub(r->step_repeat_held, ol_sat_sub(training_state_at_most(weights), weights)));
}

static bool kept_past_a_step(const ol_oom_record_t *r)
{
  return kept_weighs(r, step_kept_beyond_state(r));
}

/* A first step swings once (its forward), its optimizer's state maybe
 * once more. */
#define OL_LOOP_SWINGS 3

/* Whether a job that found no iteration is known to be past its first
 * step: it made more allocations than a first step is read from
 * (first_step.c's log), or, in fewer, what it held swung back near its
 * weights and up near its highest, a state's worth of allocations apart,
 * three times or more, and fell back higher since its third swing than
 * before it by what the request lacked and a 32nd of the device (memory
 * kept from step to step, or state made since: held-out
 * varlen_logits_leak without its sites, 13 steps of varying lengths in
 * 7,496 allocations, was read as a first step: `activations`). Where the
 * low points stayed, the step's own memory did not fit, as the first-step
 * reading says (corpus late_batch and gnn_batch: a larger batch, a larger
 * graph, late). Or its allocations repeat a step's worth earlier, a
 * forward's stack and a backward's in that step (recent.c,
 * ol_recent_step_by_sizes), and it holds more than that step held at the
 * same point by more than the gradients and an optimizer's moments made
 * there could weigh (step_kept_beyond_state: corpus cnn_loss_leak and
 * vit_loss_leak without their sites, leaks out at their second and fourth
 * steps whose kept graphs let no iteration be told, were read as a first
 * step's activations; a job that fits on a larger device, out at its
 * second step on a smaller one, holds its first update's moments more,
 * and its step's own memory did not fit beside them, as the first-step
 * reading says). */
static bool past_first_step(const ol_oom_record_t *r)
{
  return r->allocations_made > OL_FIRST_STEP_KEEP || kept_past_a_step(r) ||
         (r->swings >= OL_LOOP_SWINGS && kept_weighs(r, r->swings_kept));
}

/* Without call sites, a job of varying sizes finds no iteration in any
 * number of steps; past its first step, memory kept from step to step (a
 * leak) cannot be told from one step's own (held-out kv_cache, accum_leak
 * and mask_cache_leak, replayed without their sites: no iteration found
 * in 20,000 to 250,000 allocations, told activations). */
static bool loop_unseen(const ol_oom_record_t *r)
{
  return !r->roles_known && !r->segments_only && r->iterations == 0 &&
         r->before_first_free >= 0 && past_first_step(r);
}

/* The state, alone, leaves less than the guides' headroom for any batch;
 * or the job ran out before it freed anything at all (still building its
 * state, as in model.cuda()). */
static bool state_to_blame(const ol_oom_record_t *r, state_t s)
{
  if (s.source == STATE_HIDDEN)
    return false;
  if (s.source == STATE_BUILDING)
    return !building_or_batch(r, s);
  if (s.source == STATE_REQUESTED)
    return true;
  return s.bytes >= percent_of(available(r), 100 - HEADROOM_PERCENT);
}

/* Optimizers made again while the old ones are kept (held-out
 * optimizer_leak: a new AdamW every third step, the old ones in a list,
 * 3.04 GiB of optimizer state for 0.30 GiB of weights when it ran out,
 * the site that makes Adam's moments grown by 1.06 GiB across the
 * iterations; the roles counted all of it as state, and the class was
 * activations). One optimizer makes its state once, at most six times the
 * weights (Adam's two moments are twice them; fp32 master copies of
 * 16-bit weights with their moments, six): beyond that, with the site
 * that makes it grown by twice the weights across iterations (made again
 * more than once), the surplus is kept, and the request would fit
 * without it. */
static int64_t optimizer_surplus(const ol_oom_record_t *r)
{
  if (!r->roles_known || r->grower.id < 0 || r->grower_role != OL_ROLE_optimizer)
    return 0;
  int64_t w = r->role_bytes[OL_ROLE_weights];
  int64_t twice = ol_sat_add(w, w), most = ol_sat_add(twice, ol_sat_add(twice, twice));
  if (w <= 0 || r->grower.bytes < twice || r->role_bytes[OL_ROLE_optimizer] <= most)
    return 0;
  return ol_sat_sub(r->role_bytes[OL_ROLE_optimizer], twice); /* beyond one Adam's */
}

static bool optimizer_regrown(const ol_oom_record_t *r)
{
  int64_t lacking = lacking_of(r);
  int64_t surplus = optimizer_surplus(r);
  return surplus > 0 && surplus >= lacking;
}

/* Rule 4's leak, by any of its seven readings. */
static bool leak_to_blame(const ol_oom_record_t *r, state_t s)
{
  return !r->segments_only &&
         (growth_to_blame(r) || kept_to_blame(r, s) || shortfall_grown(r) || warned_growth(r) ||
          site_grew_by_shortfall(r) || work_grown(r) || optimizer_regrown(r));
}

/* Free memory in pieces and a leak at once: whose doing are the pieces?
 * Our pool gives whole free chunks back and maps them where they are
 * wanted, so what it holds free at an OOM is the rest of chunks that live
 * blocks pin: where what is kept grows, those blocks are the leak's, and
 * removing it is the fix (held-out varlen_leak: a probe list of hidden
 * states, 1.8 GB kept over 63 iterations, left 385 MiB in pieces of at
 * most 3.5 MiB under --manage, and was called fragmentation). Another
 * allocator's free blocks are whole blocks it could not join (shared trace
 * frag under PyTorch's cache: 1.61 GiB free, a block of 903 MiB): its
 * placement is the cause, and the leak is named beside it. */
static bool pieces_are_the_leaks(const ol_oom_record_t *r, state_t s)
{
  /* a kept block pins at most two chunks' rest, mostly less than itself:
   * crumbs beyond what the leak has kept are some other blocks' */
  int64_t base = growth_base(r);
  return r->managed && base >= 0 && ol_sat_sub(r->persistent, base) >= r->free_reserved &&
         leak_to_blame(r, s);
}

/* Under our pool free pieces are the rest of chunks that live blocks pin
 * (pieces_are_the_leaks); where nothing tells whether those blocks are kept
 * from step to step (no call sites and no iteration found past the first
 * step: loop_unseen), the pieces may be a leak's and are not taken as the
 * cause (held-out varlen_leak replayed without its sites: 385 MiB free in
 * pieces of at most 3.5 MiB between the hidden states it kept, in a job of
 * varying lengths where no iteration is found, was called fragmentation). */
static bool pieces_may_be_a_leaks(const ol_oom_record_t *r)
{
  return r->managed && loop_unseen(r);
}

/* Our pool refused a request that one of its free blocks holds twice
 * over, with twice the request free and mapped: the failure is the
 * pool's, not the job's, and no class of the job's memory is true of it
 * (held-out auto_batch_fits under --manage, 2026-12-06: after two OOMs of
 * a batch size search, batch 4, which fits, ran out with a free block of
 * 4.6 GB and 5.5 GB free for a request of 823 MB, and was told
 * activations). A block that only just holds it is the pool's ordinary
 * refusal: its memory is address space, and the granules it would map
 * pass the cap where the free memory mapped elsewhere shares its granules
 * with live blocks (the corpus's metric_leak, gradpenalty_batch and
 * vit_switch_state ran out with a free block 1.03-1.12 times the request). */
static bool pool_failed(const ol_oom_record_t *r)
{
  uint64_t twice = r->request > UINT64_MAX / 2 ? UINT64_MAX : 2 * r->request;
  return r->managed && r->largest_free_block >= 0 && r->free_reserved >= 0 &&
         (uint64_t)r->largest_free_block >= twice && (uint64_t)r->free_reserved >= twice;
}

ol_oom_class_t ol_oom_classify(const ol_oom_record_t *r)
{
  if (r->request > r->capacity) /* unsigned: 2^64 - 1 is the largest request, not -1 */
    return OL_OOM_impossible;
  if (pool_failed(r))
    return OL_OOM_undetermined;
  state_t s = state_of(r);
  if (pieces_to_blame(r, s) && !pieces_are_the_leaks(r, s) && !pieces_may_be_a_leaks(r))
    return OL_OOM_fragmentation;
  if (others_to_blame(r))
    return OL_OOM_external;
  if (leak_to_blame(r, s))
    return OL_OOM_leak;
  if (built_past_repeat_to_blame(r, s)) /* before what is kept: the build alone is too large */
    return OL_OOM_persistent;
  if (kept_unexplained(r) || held_unexplained(r)) /* before the state: by timing, what is
                                                   * kept reads as state */
    return OL_OOM_undetermined;
  if (state_to_blame(r, s))
    return OL_OOM_persistent;
  if (training_unseen(r) || optimizer_unseen(r, s) || building_or_batch(r, s) ||
      step_state_unseen(r, s) || loop_unseen(r) || more_past_repeat(r))
    return OL_OOM_undetermined;
  /* Under the cache the iteration's memory cannot be told from a leak: no
   * free of a tensor is seen, so no iteration is. */
  if (r->segments_only)
    return OL_OOM_undetermined;
  return OL_OOM_activations;
}

/* ---- the words -------------------------------------------------------- */

/* Another library's memory in this process, and how each of those that
 * keep a pool gives it back. */
static void explain_library(ol_buf_t *out, const ol_oom_record_t *r)
{
  if (library_of(r) <= 0)
    return;
  ol_buf_printf(out, " The library keeps its own pool (its call sites are below): CuPy's keeps "
                "what its arrays freed (cupy.get_default_memory_pool().free_all_blocks() gives "
                "it back, set_limit() caps it); JAX preallocates 75%% of the device unless "
                "XLA_PYTHON_CLIENT_PREALLOCATE=false; RAPIDS (RMM) keeps the pool it was told "
                "to make. Free it before the training, or let one allocator serve both.");
}

static const char *size_text(char buf[32], int64_t bytes)
{
  ol_format_bytes(buf, 32, bytes);
  return buf;
}

/* The request and the device, unsigned: never printed negative. */
static const char *size_of(char buf[32], uint64_t bytes)
{
  ol_format_size(buf, 32, bytes);
  return buf;
}

/* What the job's tensors hold at the failure: the allocations less
 * another library's (role library). */
static int64_t held_by_tensors(const ol_oom_record_t *r)
{
  return at_least_zero(ol_sat_sub(r->allocated, library_of(r)));
}

/* The iteration's own memory at the failure, the request included: all
 * that is not the state. */
static int64_t transient_of(const ol_oom_record_t *r)
{
  state_t s = state_of(r); /* holds the request when the request is state */
  if (s.source == STATE_HIDDEN || s.source == STATE_BUILDING || s.source == STATE_REQUESTED)
    return 0;
  return at_least_zero(ol_sat_sub(ol_sat_add(held_by_tensors(r), request_of(r)), s.bytes));
}

/* "weights 1.2 GiB, optimizer state 2.4 GiB, ..." of the roles that hold
 * any memory, in the order of OL_ROLES. */
static void explain_roles(ol_buf_t *out, const ol_oom_record_t *r)
{
  char a[32];
  if (!r->roles_known)
    return;
  ol_buf_printf(out, " %s: ", r->segments_only ? "Segments by what they were made for"
                                               : "The memory by what it is for");
  int shown = 0;
  for (int i = 0; i < OL_ROLE_COUNT; i++) {
    if (r->role_bytes[i] <= 0)
      continue;
    ol_buf_printf(out, "%s%s %s", shown++ ? ", " : "", ol_role_name((ol_role_t)i),
                  size_text(a, r->role_bytes[i]));
  }
  if (!shown)
    ol_buf_printf(out, "nothing live");
  if (r->request_role_known)
    ol_buf_printf(out, "; the request was for %s", ol_role_name(r->request_role));
  if (gradients_made(r) > 0)
    ol_buf_printf(out, "; the backward had made %s of tensors of its parameters' sizes, taken "
                  "as their gradients%s", size_text(a, gradients_made(r)),
                  r->request_is_gradient ? ", and the request is one more" : "");
  else if (r->request_is_gradient)
    ol_buf_printf(out, "; the request, as large as a parameter, is taken as its gradient");
  ol_buf_printf(out, ".");
}

/* How the state was told, when it was not by roles: the reader should
 * know the figure is a timing guess. */
static void explain_state_source(ol_buf_t *out, const ol_oom_record_t *r, state_t s)
{
  char a[32], b[32];
  switch (s.source) {
  case STATE_ITERATIONS:
  case STATE_MADE_SINCE: /* what was made since: advise_persistent says */
    ol_buf_printf(out, " No call site named what the memory is for; by timing, %s outlives "
                  "the %" PRIu64 " iterations seen.", size_text(a, r->persistent), r->iterations);
    break;
  case STATE_FIRST_FREE:
    if (second_step_read(r))
      ol_buf_printf(out, " No call site named what the memory is for; by timing, %s was "
                    "allocated before the job first freed memory, and its first step, told by "
                    "its sizes, kept %s more (taken as its state with it).",
                    size_text(a, s.bytes), size_text(b, at_least_zero(r->step_repeat_held)));
    else
      ol_buf_printf(out, " No call site named what the memory is for, and no iteration "
                    "finished; by timing, %s was allocated before the job first freed memory "
                    "(taken as its state).", size_text(a, s.bytes));
    break;
  default:
    break;
  }
}

/* The batch that fits: the iteration's memory at its peak is taken to
 * scale with the batch (activations do; the state does not), and the
 * allocator's reserve above its allocations to stay as it was (measured on
 * the H200, docs/measurements.md "How an iteration's memory grows with its
 * batch": GPT-2's peak is the state plus 1.777 GB a sample from batch 1 to
 * 5, ResNet-50's the state plus 86.8 MB a sample within 3% from 16 to 80,
 * and the pool's reserve above it 0.08-0.13 GB at every batch, not a
 * share). fits = batch * room / need, in batches when the batch is known,
 * else in per mille of it. */
static int64_t scaled(int64_t unit, int64_t room, int64_t need)
{
  if (need <= 0 || room <= 0)
    return 0;
  double fits = (double)unit * (double)room / (double)need;
  return fits < 9.2e18 ? (int64_t)fits : INT64_MAX; /* the cast of more is undefined */
}

/* What the state and the allocator's reserve leave of offered bytes for
 * the iteration's own memory (its fixed part among it). */
static int64_t left_for_batches(const ol_batch_figure_t *f, int64_t offered)
{
  return at_least_zero(ol_sat_sub(ol_sat_sub(offered, f->state), at_least_zero(f->overhead)));
}

/* ... of the guides' 80% of what the device offers. */
static int64_t room_with_headroom(const ol_batch_figure_t *f)
{
  return left_for_batches(f, percent_of(f->available, 100 - HEADROOM_PERCENT));
}

/* What a figure counts the failed batch as: its samples, or, the batch not
 * known, 1000 (the figures are then per mille of it). */
static int64_t batch_unit(const ol_batch_figure_t *f)
{
  return f->batch > 0 ? f->batch : 1000;
}

/* What of the need a smaller batch shrinks: all but its fixed part. */
static int64_t scaling_need(const ol_batch_figure_t *f)
{
  return at_least_zero(ol_sat_sub(f->need, at_least_zero(f->fixed)));
}

/* The batches a room holds; none where the optimizer's update, as large
 * at any batch, does not fit in it. */
static int64_t fits_in_room(const ol_batch_figure_t *f, int64_t room)
{
  if (f->update > room)
    return 0;
  return scaled(batch_unit(f), ol_sat_sub(room, at_least_zero(f->fixed)), scaling_need(f));
}

void ol_batch_figure_solve(ol_batch_figure_t *f)
{
  f->fits = fits_in_room(f, left_for_batches(f, f->available));
  f->fits_headroom = fits_in_room(f, room_with_headroom(f));
}

/* What a failed first iteration needed at least: what it held plus the
 * request, or, where the forward was inside a stack of like layers
 * (first_step.c), what it holds once the layers not yet run have kept
 * theirs, if more. */
static int64_t first_step_need(const ol_oom_record_t *r, int64_t now)
{
  const ol_first_step_t *fs = &r->first_step;
  if (r->iterations > 0 || r->segments_only || fs->stage != OL_FIRST_STEP_LAYERS)
    return now; /* PyTorch's segments repeat as they like: no layers in them */
  int64_t stack = at_least_zero(ol_sat_sub(fs->stack_end, state_of(r).bytes));
  return stack > now ? stack : now;
}

/* The batch that ran out does not fit: a figure solved from a need that
 * is only a lower bound may round up to it (GPT-2 at batch 6 was told "at
 * most batch 6 fits"), or, in shares of a batch not known, past it ("106%
 * with none"). */
static void below_failed_batch(ol_batch_figure_t *f)
{
  int64_t failed = batch_unit(f);
  f->fits = f->fits < failed ? f->fits : failed - 1;
  f->fits_headroom = f->fits_headroom < f->fits ? f->fits_headroom : f->fits;
}

/* What of a second step's need does not shrink with the batch (account.c,
 * step_fixed): 0 where no second step was read. */
static int64_t step_fixed_of(const ol_oom_record_t *r)
{
  if (!second_step_read(r))
    return 0;
  return ol_sat_add(ol_sat_add(at_least_zero(r->step_fixed.gradients),
                               at_least_zero(r->step_fixed.held_over)),
                    at_least_zero(r->step_fixed.copies));
}

/* A second step read from its first (second_step_read), its figure: the
 * state what it is now (without call sites, what the first step made and
 * kept, step_repeat_held, beside what was made before the first free:
 * Adam's moments, once the class says they are no leak), the need what
 * the step holds now beside it and the first step's rise past this
 * point, less what the first made there and still holds (account.c: its
 * optimizer's state, made once). With call sites, what of that need a
 * smaller batch does not shrink counts with the state (step_fixed_of):
 * the gradients the first step's backward had made at its rest's highest
 * point (held-out VGG-16's classifier's and more, 511 MiB of a 568 MiB
 * rest: 26 where 24 fits, all of it scaled), and what the first made
 * before its update that is held still at no state's site (cuBLAS's
 * workspaces, 156 MiB on held-out ResNet-101: 45 where 44); with or
 * without them, autocast's copies of the weights (0.92 GiB on held-out
 * qwen_small_autocast_accum4: 7 where 6). Not a bound.
 * Under manage mode the
 * pool's reserve above its allocations stays, as a fitting job's figure
 * keeps its peak's: room no tensor of the step could use (held-out
 * llama1b_second_step, 3.006 batches by the room and the need, was told
 * 3 where 3 runs out; 18 MiB of slack makes it 2). Not so at a first
 * step's failure, where the figure is a bound from what was held and the
 * reserve is mostly room a smaller batch's tensors would take (counting
 * it there cut 61 of the corpus's figures at their caps, session 40). */
static ol_batch_figure_t second_step_figure(const ol_oom_record_t *r, state_t s)
{
  bool first_kept = !r->roles_known && s.source == STATE_FIRST_FREE;
  int64_t state = first_kept ? ol_sat_add(s.bytes, at_least_zero(r->step_repeat_held)) : s.bytes;
  int64_t rest = r->step_rest > request_of(r) ? r->step_rest : request_of(r);
  return (ol_batch_figure_t){
    .batch = r->batch, .available = available(r), .state = state,
    .need = at_least_zero(ol_sat_sub(ol_sat_add(held_by_tensors(r), rest), state)),
    .overhead = r->managed ? at_least_zero(r->free_reserved) : 0, .fixed = step_fixed_of(r)};
}

/* The failed iteration needed what it held plus the request, at least;
 * an earlier iteration's need says more only at the same batch and shape,
 * which holds for a fixed-shape loop: take the larger. */
static ol_batch_figure_t failed_iteration_figure(const ol_oom_record_t *r, state_t s)
{
  int64_t now = first_step_need(r, transient_of(r));
  return (ol_batch_figure_t){.batch = r->batch, .available = available(r), .state = s.bytes,
                             .need = r->iteration_need > now ? r->iteration_need : now,
                             .need_is_lower_bound = r->iteration_need <= now};
}

static ol_batch_figure_t batch_fit(const ol_oom_record_t *r)
{
  state_t s = state_of(r);
  ol_batch_figure_t f =
    second_step_read(r) ? second_step_figure(r, s) : failed_iteration_figure(r, s);
  ol_batch_figure_solve(&f);
  below_failed_batch(&f);
  return f;
}

/* The weights, for the optimizer's state that scales with them: by role,
 * else the state by timing (what the load made). */
static int64_t weights_of(const ol_oom_record_t *r)
{
  return r->roles_known ? r->role_bytes[OL_ROLE_weights] : state_of(r).bytes;
}

/* The most the state may add once the first step ends (Adam's moments
 * and kept gradients): three times the weights, held in range. */
static int64_t state_to_come(const ol_oom_record_t *r)
{
  int64_t w = at_least_zero(weights_of(r));
  return ol_sat_add(ol_sat_add(w, w), w);
}

static int64_t twice_of(int64_t bytes)
{
  return ol_sat_add(bytes, bytes);
}

/* Weights in 16 bits (bf16 or fp16, first_step.c's weight_element), or
 * cast to 16 bits by autocast (weights_cast), make logits in 16 bits,
 * and where the job ran out at them, nothing yet shows
 * what the loss does with them: Hugging Face's casts them to fp32 first
 * (held-out qwen_small_bf16_at_head, a Qwen2-0.5B shape in bf16 at batch
 * 15 under 12G, ran out at its 2.17 GiB of logits: "about 7 to 10" where
 * 5 fits, with one or two more logits counted), then makes an fp32
 * log-softmax, and its backward a gradient of each, each twice the
 * logits' size: six times them beside what the step held (the low end); a
 * loss that reads them as they are adds one (the high end). Measured at a
 * fitting batch (session 37; the logits L counted with them): Hugging
 * Face's loss with the outputs dropped held 6 L above the stack's end,
 * kept 7 L; a loop's own that keeps them and casts a shifted copy, 9 L. */
static bool logits_in_16_bits(const ol_first_step_t *fs)
{
  return (fs->weight_element == 2 || fs->weights_cast) && !fs->loss_upcast;
}

/* The logits the loss reads: the largest tensor asked for after the
 * stack (HEAD), or those read ahead of it from the vocabulary and the
 * tokens (LAYERS, first_step.c's logits_ahead; 0 where not told). */
static int64_t head_logits(const ol_first_step_t *fs)
{
  return fs->stage == OL_FIRST_STEP_HEAD ? fs->largest_after : fs->logits_ahead;
}

/* The loss's tensors of the logits' size at its peak, fp32 logits read
 * as they are: the logits, their log-softmax and the gradient of each,
 * four at most (the low end); three where the loss's backward makes one of
 * the gradients in place (GPT-2 in fp32: the peak a sample measured on the
 * H200 is within 1% of what the first step held, out at its log-softmax,
 * plus one logits tensor: the high end). Those asked for before the
 * failure are held already (first_step.c's logits_asks: gpt2_batch ran out
 * at its log-softmax, ddp_batch at its logits, the same model and batch
 * under the same cap; logits read ahead, LAYERS, count one). A loop's own
 * cross-entropy over logits it keeps holds 4 of them too; one that shifts
 * them by a copy first, 5 (GPT-2 recorded at a fitting batch, session
 * 37): counted, six Hugging Face jobs of the corpus went two below their
 * truth, so the low end stays at the loops most jobs run. */
#define LOSS_TENSORS_LOW 4
#define LOSS_TENSORS_HIGH 3

static int64_t loss_tensors_to_come(const ol_first_step_t *fs, bool low)
{
  int64_t more = (low ? LOSS_TENSORS_LOW : LOSS_TENSORS_HIGH) - fs->logits_asks;
  int64_t logits = head_logits(fs), bytes = 0;
  for (int64_t k = 0; k < more; k++)
    bytes = ol_sat_add(bytes, logits);
  return bytes;
}

/* What the rest of the head and the backward add at their peak to what
 * the forward held: the larger of the loss's tensors and what a layer's
 * backward holds at once, the head's being freed before the layers'
 * begins.
 * - The loss reads the largest tensor asked for after the stack (the
 *   logits, or those read ahead) and makes a log-softmax and then a
 *   gradient as large (loss_tensors_to_come); two more fp32 tensors of
 *   twice its size where the tensor was itself an fp32 copy of 16-bit
 *   logits (first_step.c's loss_upcast: copy and log-softmax both held;
 *   GPT-2 with checkpointing under bf16 autocast, bisected: 14 fits at
 *   sequence 1024 under 12G, where one more tensor said 18-20); 16-bit
 *   logits not yet cast (logits_in_16_bits) one more at the high end, the
 *   copy, its log-softmax and their gradient at the low.
 * - A layer's backward: the op that made a layer's largest tensor holds
 *   its gradient and makes its input's, as large for an elementwise op or
 *   a softmax (high: one such gradient; low: two). Its recomputation
 *   under activation checkpointing asks as much. */
static int64_t backward_adds(const ol_first_step_t *fs, bool low)
{
  int64_t logits = head_logits(fs);
  int64_t layer = low ? twice_of(fs->layer_largest) : fs->layer_largest;
  int64_t copy = twice_of(logits); /* an fp32 copy of 16-bit logits */
  int64_t loss = fs->loss_upcast ? copy
                 : !logits_in_16_bits(fs) ? loss_tensors_to_come(fs, low)
                 : low ? ol_sat_add(twice_of(copy), copy) /* the copy, its log-softmax,
                                                            * their gradient */
                       : logits;
  return loss > layer ? loss : layer;
}

/* Whether each layer of the forward kept what a training step keeps for
 * its backward: twice its largest tensor or more (on the corpus's
 * transformers in training, 4 to 8 times). A forward under inference_mode
 * keeps only its key/value cache (held-out infer_lm_batch, GPT-2 scoring
 * text: half its largest), and one under activation checkpointing only
 * its layers' inputs (ckpt_batch: a quarter): where neither backward nor
 * state may come, or the backward recomputes each layer, the rest of the
 * step is not read from the forward (infer_lm_batch read ahead said about
 * 4 to 10 where 18 fit). */
static bool keeps_for_backward(const ol_first_step_t *fs)
{
  return fs->per_layer / 2 >= fs->layer_largest;
}

/* Out inside the stack of a language model in training: its logits to
 * come are read ahead, and the rest of the step estimated from them. */
static bool reads_ahead(const ol_first_step_t *fs)
{
  return fs->stage == OL_FIRST_STEP_LAYERS && fs->logits_ahead > 0 && keeps_for_backward(fs);
}

/* Every layer of the stack had run when the first iteration failed
 * (first_step.c): what is left of the forward is its head and loss, then
 * the backward (backward_adds). That is an estimate, not a bound: a loss
 * may read a smaller tensor, and a backward may make more at once.
 * What the state adds after the first step is not known before it ends:
 * from nothing (plain SGD, gradients set to None by zero_grad: high) to
 * three times the weights (Adam's two moments, and gradients kept across
 * steps by zero_grad(set_to_none=False) or accumulation: low). On GPT-2
 * the measured peak's fixed part was 3.4 times the weights. */
static void estimate_from(const ol_oom_record_t *r, const ol_first_step_t *fs,
                          const ol_batch_figure_t *bound, ol_batch_figure_t *low,
                          ol_batch_figure_t *high)
{
  ol_batch_figure_t f = *bound;
  f.need_is_lower_bound = false;
  if (reads_ahead(fs)) /* held at the head: the stack's end, and the logits */
    f.need = ol_sat_add(f.need, fs->logits_ahead);
  *high = f;
  high->need = ol_sat_add(f.need, backward_adds(fs, false));
  ol_batch_figure_solve(high);
  below_failed_batch(high);
  *low = f;
  low->need = ol_sat_add(f.need, backward_adds(fs, true));
  low->state = ol_sat_add(f.state, state_to_come(r));
  ol_batch_figure_solve(low);
  below_failed_batch(low);
}

/* The first step read with 16-bit weights where the layers' sizes fit
 * them as well as fp32 (first_step.c's element_unsure): logits read ahead
 * at half the bytes, and a loss that may cast them. */
static ol_first_step_t read_as_16_bits(const ol_first_step_t *fs)
{
  ol_first_step_t two = *fs;
  two.weight_element = 2;
  two.element_unsure = false;
  two.logits_ahead = fs->logits_ahead / 2;
  return two;
}

static bool first_step_estimate(const ol_oom_record_t *r, const ol_batch_figure_t *bound,
                                ol_batch_figure_t *low, ol_batch_figure_t *high)
{
  const ol_first_step_t *fs = &r->first_step;
  if (r->iterations > 0 || (fs->stage != OL_FIRST_STEP_HEAD && !reads_ahead(fs)) ||
      r->segments_only || second_step_read(r))
    return false;
  estimate_from(r, fs, bound, low, high);
  if (fs->element_unsure) { /* the range holds both readings */
    ol_first_step_t two = read_as_16_bits(fs);
    ol_batch_figure_t low_two, high_two;
    estimate_from(r, &two, bound, &low_two, &high_two);
    if (low_two.fits < low->fits)
      *low = low_two;
    if (high_two.fits > high->fits)
      *high = high_two;
  }
  /* worth giving when its low end keeps the headroom for a batch (or 1%
   * of it); else the bound is what is said, and what the JSON leads with */
  return low->fits_headroom >= (r->batch > 0 ? 1 : 10);
}

/* A bound is all a failed iteration gives (the rest of it was never asked
 * for); one that finishes gives the figure: say how to get it. The trial
 * is an eighth of the bound with headroom, for it must finish, and one too
 * small still finishes and gives the figure while one too large only runs
 * out again: on the H200's first-step OOMs the bisected batch was 0.14 to
 * 0.85 of the bound with headroom (held-out compiled_batch, under
 * torch.compile, 7 to 10 of 49, where a quarter said 12 and 11 does not
 * fit; frozen_batch 8 of 24, densenet_amp_batch 80 of 245, cnn_infer_batch
 * 708 of 830; docs/diagnosis.md). "First" only where no iteration had
 * finished (held-out accum_leak, out in its eighth, was told its first
 * had not). */
int64_t ol_batch_figure_trial(const ol_batch_figure_t *f)
{
  return f->fits_headroom / 8 > 0 ? f->fits_headroom / 8 : 1;
}

/* The trial must run for some steps: iterations are found as they repeat,
 * and a first step unlike the rest (the optimizer's state made in it)
 * leaves the next ones to show the repeat (bert_batch's trial at batch 2
 * on the H200: no iteration found in 4 steps; its trace made 5 steps
 * long, by one more of its steps, gives "batch 12 fits", the bisected 12). */
#define TRIAL_STEPS 5

/* Call sites name an optimizer's state held while no iteration was told:
 * a step before this one may have finished (its update made the state),
 * which was not set beside this one (held-out resnet50_adam, out early in
 * its second backward beside Adam's moments, was told its first
 * iteration had not finished), or the state was loaded or is being made
 * in this one. Which, is not said. */
static bool state_held_unread(const ol_oom_record_t *r)
{
  return r->roles_known && r->role_bytes[OL_ROLE_optimizer] > 0;
}

/* The iteration that did not finish: the first, where call sites name
 * roles and no optimizer's state is held; without them none may have
 * been found in a job well past its first (iterations are found by
 * sizes that repeat). */
static const char *unfinished_iteration(const ol_oom_record_t *r)
{
  return r->iterations > 0 || !r->roles_known || state_held_unread(r) ? "failed" : "first";
}

static void advise_measuring(ol_buf_t *out, const ol_oom_record_t *r, const ol_batch_figure_t *f)
{
  int64_t trial = ol_batch_figure_trial(f);
  ol_buf_printf(out, "(The %s iteration did not finish, so these are upper bounds, and the "
                "batch that fits may be far below them: run once at batch %" PRId64 " with "
                "--batch %" PRId64 " for %d steps or more, small enough to finish its "
                "iterations, and its report names the batch that fits and the accumulation "
                "steps that keep the effective batch of %" PRId64 ".) ",
                unfinished_iteration(r), trial, trial, TRIAL_STEPS, r->batch);
}

/* One sample's share of what the iteration needed (its part that scales). */
static int64_t one_sample(const ol_batch_figure_t *f)
{
  return f->batch > 0 ? ceil_div(scaling_need(f), f->batch) : 0;
}

/* What a batch of one needs at least: the state with the need's fixed
 * part, the allocator's reserve, one sample; more than the device offers
 * when no batch fits (ol_batch_figure_solve). */
static int64_t state_and_one_sample(const ol_batch_figure_t *f)
{
  int64_t held = ol_sat_add(ol_sat_add(f->state, at_least_zero(f->fixed)),
                            at_least_zero(f->overhead));
  return ol_sat_add(held, one_sample(f));
}

/* No batch fits: what alone exceeds the device, never "batch 0". */
static void advise_no_batch(ol_buf_t *out, const ol_oom_record_t *r, const ol_batch_figure_t *f)
{
  char a[32], b[32], c[32], d[32];
  ol_buf_printf(out, "At batch %" PRId64 ", no batch fits: the state (%s) and one sample's "
                "share of the iteration (%s) already need %s%s, more than the %s this process "
                "can have; cut the memory per sample. ", r->batch,
                size_text(a, ol_sat_add(f->state, at_least_zero(f->fixed))),
                size_text(b, one_sample(f)), f->need_is_lower_bound ? "at least " : "",
                size_text(c, state_and_one_sample(f)), size_text(d, f->available));
}

/* Where the figures are shares of the batch: how to get them in samples,
 * unless the batch was given and the job began again since (a batch size
 * search: explain_restarts says why the shares stand). */
static const char *give_batch(const ol_oom_record_t *r)
{
  return r->batch_given > 0 ? "" : " (give the batch with --batch N for exact figures)";
}

/* A second step that holds the gradients of the one before it, with no
 * optimizer's state made between them: the second micro-step of a
 * gradient accumulation window (held-out gpt2_medium_accum4 and two
 * more, session 44), or plain SGD's second step. */
static bool inside_accumulation(const ol_oom_record_t *r)
{
  return second_step_read(r) && r->gradients_made > 0 && r->roles_known &&
         !state_held_unread(r);
}

/* "batch 5 fits; 4 with 20% headroom; keep the effective batch of 8 with 2
 * accumulation steps of 4" when the batch is known; shares otherwise. */
static void advise_batch(ol_buf_t *out, const ol_oom_record_t *r, const ol_batch_figure_t *f)
{
  const char *bound = f->need_is_lower_bound ? "at most " : "";
  if (r->batch > 0) {
    if (f->fits_headroom >= 1 && f->need_is_lower_bound) {
      /* no accumulation from a bound: steps of its size may not fit */
      ol_buf_printf(out, "At batch %" PRId64 ": %sbatch %" PRId64 " fits on this device, %s%" PRId64
                    " with %d%% headroom. ", r->batch, bound, f->fits, bound, f->fits_headroom,
                    HEADROOM_PERCENT);
      advise_measuring(out, r, f);
    } else if (f->fits_headroom >= 1) {
      int64_t steps = ceil_div(r->batch, f->fits_headroom);
      int64_t micro = ceil_div(r->batch, steps);
      ol_buf_printf(out, "At batch %" PRId64 ": batch %" PRId64 " fits on this device, %" PRId64
                    " with %d%% headroom; keep the effective batch of %" PRId64 " with %" PRId64
                    " accumulation steps of %" PRId64 ". ",
                    r->batch, f->fits, f->fits_headroom, HEADROOM_PERCENT, r->batch, steps, micro);
      if (inside_accumulation(r))
        ol_buf_printf(out, "This step holds the gradients the one before it made, and no "
                      "optimizer's update came between them: where the job accumulates "
                      "gradients already, %" PRId64 " is its micro-batch, and these steps "
                      "multiply its own. ", r->batch);
    } else if (f->fits >= 1) {
      ol_buf_printf(out, "At batch %" PRId64 ": %sbatch %" PRId64 " fits with no headroom, and none "
                    "keeps %d%% free: cut the memory per sample as well. ",
                    r->batch, bound, f->fits, HEADROOM_PERCENT);
    } else {
      advise_no_batch(out, r, f);
    }
    return;
  }
  if (f->fits_headroom >= 10 && f->need_is_lower_bound) {
    ol_buf_printf(out, "At most a batch of %" PRId64 "%% of the current one fits with %d%% "
                  "headroom (%" PRId64 "%% with none); the %s iteration did not finish, so "
                  "these are upper bounds and the batch that fits may be far below them: run "
                  "once at %" PRId64 "%% of it for %d steps or more, small enough to finish its "
                  "iterations, with --batch N, and its report names the batch that fits. ",
                  f->fits_headroom / 10, HEADROOM_PERCENT, f->fits / 10,
                  unfinished_iteration(r),
                  ol_batch_figure_trial(f) / 10 > 0 ? ol_batch_figure_trial(f) / 10 : 1,
                  TRIAL_STEPS);
  } else if (f->fits_headroom >= 10) {
    int64_t steps = ceil_div(1000, f->fits_headroom);
    ol_buf_printf(out, "A batch of %" PRId64 "%% of the current one fits with %d%% headroom "
                  "(%" PRId64 "%% with none): keep the effective batch with gradient accumulation "
                  "over %" PRId64 " steps%s. ",
                  f->fits_headroom / 10, HEADROOM_PERCENT, f->fits / 10, steps, give_batch(r));
  } else {
    ol_buf_printf(out, "Less than 1%% of the current batch fits with %d%% headroom: cut the "
                  "memory per sample. ", HEADROOM_PERCENT);
  }
}

/* Out inside its one stack: the layers still to run, counted in the
 * need, and what comes after them, read ahead (a language model's logits:
 * the estimate, or the bound where its low end keeps no headroom) or
 * never asked for. */
static void explain_inside_the_stack(ol_buf_t *out, const ol_first_step_t *fs, bool estimated)
{
  char a[32], b[32], c[32];
  ol_buf_printf(out, "Its forward had begun %" PRId64 " of the %" PRId64 " layers of its stack, "
                "%s kept each: the layers not yet begun keep %s more, counted in that need",
                fs->layers_done, fs->layers, size_text(a, fs->per_layer), size_text(b, fs->rest));
  if (!reads_ahead(fs)) {
    ol_buf_printf(out, "; what comes after the stack (its head and, if it trains, the loss and "
                  "the backward) was never asked for and is not counted. ");
    return;
  }
  ol_buf_printf(out, ". After the stack its head makes a row of logits over the vocabulary for "
                "each token, %s at this batch (the vocabulary read from the embedding's rows, "
                "the tokens from its output), held with all the forward kept: %s. %s",
                size_text(c, fs->logits_ahead),
                estimated ? "counted in the estimate below with the loss and the backward that "
                            "come after them, which were never asked for"
                          : "with the loss, the backward and the state to come counted at their "
                            "most, no batch keeps the headroom, so the figure below is the bound "
                            "from what the stack holds",
                fs->element_unsure && estimated
                  ? "That is as fp32: the layers' sizes fit fp32 weights and 16-bit ones of "
                    "twice the width alike, whose logits would be half as large, and the range "
                    "below holds both readings. "
                  : "");
}

/* How far the failed first iteration had got in its stack of layers,
 * where first_step.c could tell. */
static void explain_first_step(ol_buf_t *out, const ol_oom_record_t *r, bool estimated)
{
  char a[32], b[32];
  const ol_first_step_t *fs = &r->first_step;
  if (r->iterations > 0)
    return;
  if (fs->stage == OL_FIRST_STEP_LAYERS && fs->stacks > 1)
    ol_buf_printf(out, "The model has two stacks of like layers (an encoder-decoder), %" PRId64
                  " layers in each at least; its forward had begun %" PRId64 " layers of one, "
                  "%s kept each: the %s that at least the layers not yet begun of it keep is "
                  "counted in that need; the other stack's, and what comes after the stacks "
                  "(the head and, if it trains, the loss and the backward), were never asked "
                  "for and are not counted. ", fs->layers, fs->layers_done,
                  size_text(a, fs->per_layer), size_text(b, fs->rest));
  else if (fs->stage == OL_FIRST_STEP_LAYERS)
    explain_inside_the_stack(out, fs, estimated);
  else if (fs->stage == OL_FIRST_STEP_HEAD)
    ol_buf_printf(out, "All %" PRId64 " layers of its stack had run (%s kept each): it failed "
                  "in the head or loss. ", fs->layers, size_text(a, fs->per_layer));
  else if (fs->read) /* else no log of the whole step was kept (or the report predates it) */
    ol_buf_printf(out, "How far the forward had got cannot be told (its layers were not seen "
                  "as one stack of like layers, whose memory repeats), so the rest of the "
                  "step is not counted. ");
}

/* "about batch 5" or "about batch 5 to 6": the estimate's low and high
 * ends (first_step_estimate). */
static void print_about(ol_buf_t *out, int64_t low, int64_t high)
{
  if (low == high)
    ol_buf_printf(out, "%" PRId64, low);
  else
    ol_buf_printf(out, "%" PRId64 " to %" PRId64, low, high);
}

/* The figure the advice leads with: a first step's estimate where there
 * is one (its low end), else the bound or the figure from iterations. */
static const ol_batch_figure_t *lead_of(const ol_first_step_figure_t *f)
{
  return f->estimated ? &f->low : &f->bound;
}

/* The estimate, with what it rests on, and the bound beside it. */
static void advise_estimate(ol_buf_t *out, const ol_oom_record_t *r,
                            const ol_first_step_figure_t *f)
{
  char a[32], b[32];
  const ol_batch_figure_t *low = &f->low;
  if (r->batch > 0) {
    int64_t steps = ceil_div(r->batch, low->fits_headroom);
    ol_buf_printf(out, "At batch %" PRId64 ": about batch ", r->batch);
    print_about(out, low->fits, f->high.fits);
    ol_buf_printf(out, " fits on this device, %" PRId64 " with %d%% headroom (at most %" PRId64
                  " by what the step held); keep the effective batch of %" PRId64 " with %" PRId64
                  " accumulation steps of %" PRId64 ". ", low->fits_headroom, HEADROOM_PERCENT,
                  f->bound.fits, r->batch, steps, ceil_div(r->batch, steps));
  } else { /* per mille of the current batch */
    ol_buf_printf(out, "About a batch of ");
    print_about(out, low->fits / 10, f->high.fits / 10);
    ol_buf_printf(out, "%% of the current one fits, %" PRId64 "%% with %d%% headroom (at most "
                  "%" PRId64 "%% by what the step held): keep the effective batch with gradient "
                  "accumulation over %" PRId64 " steps%s. ", low->fits_headroom / 10,
                  HEADROOM_PERCENT, f->bound.fits / 10, ceil_div(1000, low->fits_headroom),
                  give_batch(r));
  }
  ol_buf_printf(out, "(An estimate: the backward taken to add %s",
                size_text(a, backward_adds(&r->first_step, false)));
  if (logits_in_16_bits(&r->first_step))
    ol_buf_printf(out, " to %s (the logits are in 16 bits, %s: a loss that casts them to "
                  "fp32 first, as Hugging Face's does, makes a copy and a log-softmax twice "
                  "their size, and a gradient of each)",
                  size_text(a, backward_adds(&r->first_step, true)),
                  r->first_step.weights_cast ? "made from autocast's 16-bit copies of the weights"
                                             : "as the weights are");
  else if (backward_adds(&r->first_step, true) != backward_adds(&r->first_step, false))
    ol_buf_printf(out, " to %s (beside the logits, their log-softmax and a gradient of each, "
                  "as large, those not asked for yet; or a layer's largest tensor's gradients, "
                  "one or two at once, where larger)",
                  size_text(a, backward_adds(&r->first_step, true)));
  else
    ol_buf_printf(out, " (a gradient as large as the largest tensor after the layers)");
  ol_buf_printf(out, ", and the state to come from none (SGD) to 3x the weights (Adam's "
                "moments, kept gradients: %s). A run that fits reports the batch that "
                "fits.) ", size_text(b, state_to_come(r)));
}

/* A mid-run OOM whose iterations grew steadily with larger tensors: not
 * a leak (nothing is kept), but the guides' "fails mid-training" rule
 * would say so. What the job changes step by step is the lever. */
static void explain_growing_input(ol_buf_t *out, const ol_oom_record_t *r)
{
  char a[32], b[32];
  ol_buf_printf(out, "Nothing is kept from one iteration to the next, but each of the last %d "
                "needed more than the one before (%s more or so each; %s in the last that "
                "finished, after %" PRIu64 " iterations) with larger tensors each time, as an "
                "input that grows by a schedule makes them (a sequence-length curriculum, a "
                "batch-size schedule): if it does, this iteration's larger input is what did "
                "not fit; cap the schedule below this step's size, or make each step's memory "
                "smaller as below. ",
                OL_WORK_STREAK + 1, size_text(a, r->input_growth),
                size_text(b, r->iteration_need), r->iterations);
}

/* A mid-run OOM in an iteration that needed a 32nd more than any that
 * finished, at the same batch, nothing kept growing and no schedule seen:
 * its input was larger than any before (held-out multiscale_batch: ResNet-50
 * at batch 48 on images of 224-288 for 8 steps, then 320-384; varlen_long:
 * one sequence of 8192 among short ones; bucket_batch, whose first long
 * bucket ran out early in its backward with 7% more than the short ones
 * had needed, which a tenth missed). An iteration that finished needs
 * what it needs: one that needed more and ran out is the one that changed.
 * The batch that ran out had run, so what fits is a matter of this input's
 * size, and the advice says so. */
static void explain_larger_input(ol_buf_t *out, const ol_oom_record_t *r,
                                 const ol_batch_figure_t *bound)
{
  char a[32], b[32];
  if (!beside_finished_iterations(r) || r->input_growth > 0 || !bound->need_is_lower_bound ||
      !work_larger_than_before(r))
    return;
  ol_buf_printf(out, "The %" PRIu64 " iterations before it finished, each needing at most %s of "
                "its own; this one needed at least %s: its work was larger than any before, "
                "from a larger input (a larger batch, as an evaluation's may be, a longer "
                "sequence, a larger image, more objects) or a size the data decides (a mixture "
                "of experts' routing that sends most tokens to one expert), so the figures "
                "below are for work of its size. Cap or bucket the input sizes, or give the "
                "largest inputs a smaller batch; where the data decides the size, cap it (an "
                "expert capacity factor). ", r->iterations,
                size_text(a, r->iteration_need), size_text(b, iteration_asked(r)));
}

/* What of a second step's need a smaller batch does not shrink
 * (second_step_figure counts it with the state). */
static void explain_step_fixed(ol_buf_t *out, const ol_oom_record_t *r)
{
  char a[32], b[32], c[32];
  ol_buf_printf(out, "; %s of what it needed does not shrink with the batch (",
                size_text(a, step_fixed_of(r)));
  const char *sep = "";
  if (r->step_fixed.gradients > 0) {
    ol_buf_printf(out, "the gradients the first's backward had made at its highest point, %s",
                  size_text(b, r->step_fixed.gradients));
    sep = "; ";
  }
  if (r->step_fixed.held_over > 0) {
    ol_buf_printf(out, "%swhat the first made before its update and holds still, of no state's "
                  "call site, %s: a library's workspace, a cache",
                  sep, size_text(c, r->step_fixed.held_over));
    sep = "; ";
  }
  if (r->step_fixed.copies > 0)
    ol_buf_printf(out, "%sautocast's 16-bit copies of the weights, one of each weight its "
                  "forward reads, held to the backward, %s",
                  sep, size_text(c, r->step_fixed.copies));
  ol_buf_printf(out, ") and counts beside the state");
}

/* Which iteration the need is of, where none finished since iterations
 * were told. */
static void explain_unfinished_iteration(ol_buf_t *out, const ol_oom_record_t *r)
{
  char a[32];
  if (r->iterations > 0)
    return;
  if (second_step_read(r)) {
    ol_buf_printf(out, " in its second step, which did not finish: the first finished, and this "
                  "one made the same sizes in the same order up to here, so the first's course "
                  "past this point (it rose %s above what it held here) is counted as the rest "
                  "of this one", size_text(a, r->step_rest));
    if (step_fixed_of(r) > 0)
      explain_step_fixed(out, r);
  } else if (state_held_unread(r))
    ol_buf_printf(out, " in an iteration that did not finish (an optimizer's state is held: "
                  "a step before it may have finished, not set beside this one)");
  else if (r->roles_known)
    ol_buf_printf(out, " in the first iteration, which did not finish");
  else
    ol_buf_printf(out, " in an iteration that did not finish (none was found: without call "
                  "sites, iterations are found by sizes that repeat, and a job whose sizes vary "
                  "finds none)");
}

static void advise_activations(ol_buf_t *out, const ol_oom_record_t *r)
{
  char a[32], b[32], c[32];
  ol_first_step_figure_t f;
  bool estimated = ol_oom_first_step_figure(r, &f);
  const ol_batch_figure_t *lead = lead_of(&f);
  ol_buf_printf(out, "The state (weights, gradients, optimizer state) holds %s and fits; the "
                "iteration's own memory needed %s%s",
                size_text(a, f.bound.state), f.bound.need_is_lower_bound ? "at least " : "",
                size_text(b, f.bound.need));
  explain_unfinished_iteration(out, r);
  ol_buf_printf(out, ", and %s is left for it with %d%% headroom. ",
                size_text(c, room_with_headroom(lead)), HEADROOM_PERCENT);
  if (r->iterations == 0 && !r->segments_only && !second_step_read(r))
    explain_first_step(out, r, estimated);
  if (r->input_growth > 0)
    explain_growing_input(out, r);
  explain_larger_input(out, r, &f.bound);
  if (estimated)
    advise_estimate(out, r, &f);
  else
    advise_batch(out, r, &f.bound);
  /* where no batch fits there is no batch to keep: the cuts are the fix */
  bool none_fits = !estimated && r->batch > 0 && f.bound.fits < 1;
  ol_buf_printf(out, "%s the activations: mixed precision (bf16 halves them, where the job is "
                "not in it yet), activation checkpointing (keeps only layer inputs), shorter "
                "sequences.", none_fits ? "To cut" : "Or keep the batch and cut");
}

/* Other processes that this one started (DataLoader workers, most
 * often: held-out worker_external's four each made a context and a table
 * on the device, 2.1 GiB apiece): what they hold is the job's own doing,
 * and the fix is in its code, not in what else runs on the device. */
static void explain_children(ol_buf_t *out, const ol_oom_record_t *r)
{
  int children = 0;
  for (int i = 0; i < r->other_count; i++)
    if (r->others[i].child)
      ol_buf_printf(out, "%s%u", children++ ? ", " : " Of these, pid ", r->others[i].pid);
  if (children == 0)
    return;
  ol_buf_printf(out, " %s started by this process (DataLoader workers, or processes it "
                "spawned): CUDA used in a child makes a context and a cache of its own there. "
                "Make tensors on the CPU in the Dataset (or the child) and move each batch to "
                "the device in the main process, or load with num_workers=0.",
                children > 1 ? "were" : "was");
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
  if (r->others_unlisted > 0)
    ol_buf_printf(out, "; %d more, %s in all", r->others_unlisted,
                  size_text(a, r->others_unlisted_bytes));
  if (r->other_count)
    ol_buf_printf(out, ".");
  explain_children(out, r);
  if (r->self_device_bytes > r->reserved)
    ol_buf_printf(out, " This process's own CUDA context and libraries hold %s beyond its "
                  "allocations.", size_text(a, r->self_device_bytes - r->reserved));
}

/* No memory of a backward pass at the failure (no gradients, backward
 * temporaries or optimizer state, by role): likely inference, where what
 * grows from one forward to the next is most often a key/value cache, by
 * design (or a job with no autograd at all: the advice says "if"). */
static bool inference_only(const ol_oom_record_t *r)
{
  return r->roles_known && r->role_bytes[OL_ROLE_gradients] == 0 &&
         r->role_bytes[OL_ROLE_backward] == 0 && r->role_bytes[OL_ROLE_optimizer] == 0;
}

/* Growth in inference: memory alone cannot tell a cache that grows with
 * each generated token and goes when the call returns (one request's
 * working set: the field guides' fixes are the length, the batch and the
 * cache) from tensors kept across calls (a leak). Say both, the likelier
 * first. */
static void advise_growing_inference(ol_buf_t *out)
{
  ol_buf_printf(out, "No gradients, backward-pass memory or optimizer state are held: if this "
                "is inference, memory that grows from one forward to the next is most often a "
                "key/value cache growing with each generated token. If it goes when "
                "generation returns, it is one request's working set, not a leak: lower the "
                "batch or the length (max_new_tokens), or use a static or quantized cache, or "
                "a model with fewer key/value heads (GQA/MQA). If it outlives the calls, "
                "something keeps tensors from step to step: outputs kept on the GPU, a cache "
                "never cleared, or a graph: a state carried from step to step (an RNN's hidden "
                "state) without torch.no_grad() or .detach() keeps every step's activations.");
}

/* The site that grew most makes weights: parameters made again and kept
 * (held-out reload_leak: a `copy.deepcopy` of the model every other step,
 * its parameters made in parameter.py's __deepcopy__, 3.69 GiB grown). */
static bool weights_grow(const ol_oom_record_t *r)
{
  return r->grower.id >= 0 && r->grower.bytes > 0 && r->grower_role == OL_ROLE_weights;
}

static void advise_kept_copies(ol_buf_t *out)
{
  ol_buf_printf(out, "What grows most is weights: copies of the model or of its parameters are "
                "kept from step to step (a `copy.deepcopy(model)`, or a new model for each "
                "evaluation or checkpoint, kept in a list or dict on the device). Keep one copy "
                "and replace it, `del` the old one, or keep snapshots on the CPU "
                "(`{k: v.cpu() for k, v in model.state_dict().items()}`).");
}

/* "This iteration made the same allocations as the one before ... and
 * holds X more": by sizes, or by calls where its sizes differed. */
static void same_point_held(ol_buf_t *out, const ol_oom_record_t *r)
{
  char a[32];
  if (r->since_last_by_calls)
    ol_buf_printf(out, "This iteration's call sites made their allocations in the same order as "
                  "in the one before up to where it failed, of other sizes (its input is larger "
                  "or smaller), and they hold %s more in blocks than they held there, each site "
                  "as many blocks as it held then but for that", size_text(a, r->held_since_last));
  else
    ol_buf_printf(out, "This iteration made the same allocations as the one before up to where "
                  "it failed, so its input is no larger, and yet it holds %s more than that one "
                  "held there", size_text(a, r->held_since_last));
}

/* A site's blocks of one age kept since an earlier iteration: with an
 * iteration as small as the earlier ones, a tensor kept once or a cache
 * made once; with a larger one, a step's own tensor (grower_per_step:
 * rule 4 blames no other there). */
static void advise_kept_once(ol_buf_t *out, const ol_oom_record_t *r)
{
  char a[32], b[32], c[32], d[32];
  ol_buf_printf(out, "One call site holds %s it made in an earlier iteration and kept since "
                "(its blocks are %s by their frames, none of the state; named below), ",
                size_text(a, r->grower.bytes), ol_role_name(r->grower_role));
  if (r->grower_per_step && !iteration_asks_no_more(r))
    ol_buf_printf(out, "where it makes blocks every iteration and frees them within it: a tensor "
                  "of its step kept past it. This iteration asked for %s above what outlives the "
                  "iterations, more than the earlier ones needed (at most %s: a larger input), "
                  "but without those blocks this %s request would fit. A tensor kept past its "
                  "step (a loss or logits kept with their graph, an output kept for a metric or "
                  "a list) is a leak that comes back: keep `.item()` or a `.detach().cpu()` copy, "
                  "or `del` it after use; if it is kept on purpose (the best step's output), keep "
                  "it on the CPU. ", size_text(b, iteration_asked(r)),
                  size_text(c, r->iteration_need), size_of(d, r->request));
  else
    ol_buf_printf(out, "and this iteration asked for %s above what outlives the iterations, about "
                  "what the earlier ones needed (at most %s): without those blocks this %s "
                  "request would fit. A tensor kept past its step (a loss or logits kept with "
                  "their graph, an output appended to a list every few steps) is a leak that "
                  "comes back; if it is a cache made once on purpose, free it before the step or "
                  "make room for it. ", size_text(b, iteration_asked(r)),
                  size_text(c, r->iteration_need), size_of(d, r->request));
}

/* The growth as it was found: per iteration, or in all since the first. */
static void advise_leak(ol_buf_t *out, const ol_oom_record_t *r)
{
  char a[32], b[32], c[32], d[32], e[32];
  bool steady = growth_to_blame(r) || kept_to_blame(r, state_of(r)) || shortfall_grown(r);
  if (!steady && optimizer_regrown(r)) {
    ol_buf_printf(out, "The optimizer's state is %s for %s of weights, more than one optimizer "
                  "keeps (Adam's two moments are twice the weights), and the call site that "
                  "makes it grew by %s across the %" PRIu64 " iterations seen: optimizers are "
                  "made again while the old ones are kept (a new one per phase, epoch or "
                  "evaluation, the old one in a list, a scheduler or a closure), each making "
                  "its state anew. Without the %s beyond one optimizer's this %s request would "
                  "fit. ", size_text(a, r->role_bytes[OL_ROLE_optimizer]),
                  size_text(b, r->role_bytes[OL_ROLE_weights]), size_text(c, r->grower.bytes),
                  r->iterations, size_text(d, optimizer_surplus(r)), size_of(e, r->request));
    return;
  }
  if (!steady && warned_growth(r)) {
    ol_buf_printf(out, "What outlives iterations has grown by %s since iteration %" PRIu64
                  " (from %s to %s; about %s a step, as the leak warning said, and it stands); "
                  "without that growth this %s request would fit. ",
                  size_text(a, ol_sat_sub(r->persistent, r->warned_from)), r->warned_since,
                  size_text(b, r->warned_from), size_text(c, r->persistent),
                  size_text(d, r->warned_rate), size_of(e, r->request));
    return;
  }
  if (!steady && site_grew_by_shortfall(r)) {
    if (r->grower_reading == OL_GROWER_SINCE_LAST) {
      same_point_held(out, r);
      ol_buf_printf(out, "; one call site holds %s more (its blocks are %s by their frames, none "
                    "of the state; named below): a tensor the iterations before had freed by now "
                    "is still held. Without it this %s request would fit. A reference kept past "
                    "its use (a loss or logits kept with their graph for a metric or a list, an "
                    "output kept every few steps) is a leak that comes back: keep `.item()` or a "
                    "`.detach().cpu()` copy, or `del` it after use. ",
                    size_text(b, r->grower.bytes), ol_role_name(r->grower_role),
                    size_of(c, r->request));
    } else if (r->grower_reading == OL_GROWER_ONCE)
      advise_kept_once(out, r);
    else
      ol_buf_printf(out, "One call site's memory, kept from step to step, grew by %s across the %"
                    PRIu64 " iterations seen, in steps rather than steadily (its blocks are %s "
                    "by their frames, none of the state; named below); without that growth this "
                    "%s request would fit. ", size_text(a, r->grower.bytes), r->iterations,
                    ol_role_name(r->grower_role), size_of(b, r->request));
    return;
  }
  if (!growth_to_blame(r) && !kept_to_blame(r, state_of(r))) {
    ol_buf_printf(out, "What outlives iterations grew from %s to %s over %" PRIu64 " iterations, "
                  "%s in the last, and was still growing; without that growth this %s request "
                  "would fit. ", size_text(a, r->first_persistent), size_text(b, r->persistent),
                  r->iterations, size_text(c, r->growth), size_of(d, r->request));
    return;
  }
  if (growth_to_blame(r)) {
    ol_buf_printf(out, "What outlives an iteration grew by %s per iteration (now %s, after %" PRIu64
                  " iterations). ", size_text(a, r->growth), size_text(b, r->persistent),
                  r->iterations);
    return;
  }
  ol_buf_printf(out, "What outlives iterations grew from %s to %s over %" PRIu64
                " iterations (the state, weights, gradients and optimizer state, is %s of it). ",
                size_text(a, growth_base(r)), size_text(b, r->persistent), r->iterations,
                size_text(c, role_state(r)));
}

/* The leak is the iterations' own work growing, nothing kept across
 * them (work_grown alone). The batch is not the lever: the same batch
 * fitted the streak's first iteration. What repeats more each time is
 * named as what it most often is, with the case it cannot be told from. */
static void advise_growing_work(ol_buf_t *out, const ol_oom_record_t *r)
{
  char a[32], b[32];
  ol_buf_printf(out, "Nothing is kept from one iteration to the next, but each needs more than "
                "the last: %s more, and %" PRId64 " more allocations, each of the last %d "
                "iterations (%s in the last that finished, after %" PRIu64 " iterations): the "
                "same work once more each time, all of it held until the iteration ends. Most "
                "often gradient accumulation whose micro-steps keep their graphs until a "
                "backward that comes later each time (a loss summed over a window that grows): "
                "call backward on each micro-step's loss (divided by the steps) and step the "
                "optimizer every N micro-steps. A smaller batch only delays it. If the job's "
                "sequences grow by design (a curriculum of an unrolled RNN), it is the longest "
                "one's activations instead.", size_text(a, r->need_growth), r->work_growth,
                OL_WORK_STREAK, size_text(b, r->iteration_need), r->iterations);
}

static void advise_shrinking_state(ol_buf_t *out)
{
  ol_buf_printf(out, "Shrink the state: bf16 weights and gradients halve them; an 8-bit optimizer cuts "
                "Adam's 8 bytes a parameter to 2; ZeRO/FSDP divides it by the number of GPUs; "
                "CPU offload or LoRA move or avoid most of it.");
}

/* The job ran out before any compute, making weights beside weights: a
 * model being moved or a checkpoint being read (roles.c names both
 * weights). */
static bool loading_weights(const ol_oom_record_t *r)
{
  int64_t held = 0;
  for (int i = 0; i < OL_ROLE_COUNT; i++)
    if (i != OL_ROLE_weights && i != OL_ROLE_unknown)
      held = ol_sat_add(held, r->role_bytes[i]);
  return r->roles_known && r->iterations == 0 && held == 0 && r->request_role_known &&
         r->request_role == OL_ROLE_weights;
}

/* The request was the optimizer's update of many tensors at once, whose
 * temporaries (the call site's bytes, the request on top) come beside the
 * state: where the state without them fits, updating one tensor at a time
 * or in one fused kernel is the smaller change (held-out foreach_step:
 * Adam's state, 3.0 GiB, fitted 3.40; the moments' square roots did not). */
static void advise_update_temporaries(ol_buf_t *out, const ol_oom_record_t *r, int64_t state)
{
  char a[32], b[32], c[32];
  int64_t temporaries = ol_sat_add(at_least_zero(r->update_bytes), request_of(r));
  int64_t without = at_least_zero(ol_sat_sub(state, temporaries));
  if (without >= available(r))
    return;
  if (r->request_update_makes_state && r->iterations == 0) {
    /* SGD's first update: its momentum buffers, if it has momentum, are
     * made there, and no update path makes fewer (held-out
     * sgd_momentum_step: told foreach=False would need far less) */
    ol_buf_printf(out, "The request was SGD's update, which in its first step makes a momentum "
                  "buffer as large as each parameter when momentum is on (%s so far with the "
                  "request, if this is that step: no iteration was seen to end): state, which "
                  "foreach=False and fused=True make too. Only what its foreach path holds for "
                  "weight decay or Nesterov (a group of the gradients' size) is temporary; "
                  "without momentum SGD keeps no state. ",
                  size_text(a, temporaries));
    return;
  }
  ol_buf_printf(out, "The request was the optimizer's update itself: PyTorch's foreach update "
                "holds temporaries as large as a group of the state while it runs (%s of them "
                "with the request), and without them the state holds %s of the %s this process "
                "can have. foreach=False updates one tensor at a time, and fused=True (Adam, "
                "AdamW, SGD) in one kernel: either needs far less beside the state. ",
                size_text(a, temporaries), size_text(b, without), size_text(c, available(r)));
}

static void advise_persistent(ol_buf_t *out, const ol_oom_record_t *r)
{
  char a[32], b[32], c[32];
  state_t s = state_of(r);
  if (s.source == STATE_REQUESTED)
    ol_buf_printf(out, "The job ran out making its %s (the failed request's own call site says "
                  "so), holding %s of PyTorch's segments on a %s device: oomlens saw the "
                  "segments, not what is in them, and takes them as its state. ",
                  r->request_role == OL_ROLE_optimizer ? "optimizer state"
                                                       : ol_role_name(r->request_role),
                  size_text(a, s.bytes), size_text(b, cap_of(r)));
  else if (s.source == STATE_BUILDING)
    ol_buf_printf(out, "The job ran out before it freed any memory, while building its state "
                  "(%s so far: weights, as in model.cuda(), or a checkpoint loading) on a %s "
                  "device. ", size_text(a, s.bytes), size_text(b, cap_of(r)));
  else if (s.source == STATE_MADE_SINCE)
    ol_buf_printf(out, "After %" PRIu64 " iterations the job ran out building more state: the "
                  "iteration under way did the last one's work again and then made %s in %" PRIu64
                  " allocations without freeing any (a model loaded beside this one, as a "
                  "teacher; an optimizer's state made at its first step, as when the optimizer "
                  "changes in mid-run; copies of the weights). With what outlives the "
                  "iterations, that comes to %s of the %s this process can have, which leaves "
                  "less than %d%% of it for any batch. ", r->iterations,
                  size_text(a, built_past_repeat(r)), r->past_repeat.allocations,
                  size_text(b, s.bytes), size_text(c, available(r)), HEADROOM_PERCENT);
  else if (s.bytes > available(r))
    ol_buf_printf(out, "Weights, gradients and optimizer state need %s (the request included) "
                  "where this process can have %s. ", size_text(a, s.bytes),
                  size_text(b, available(r)));
  else
    ol_buf_printf(out, "Weights, gradients and optimizer state %s %s of the %s this process "
                  "can have, which leaves less than %d%% of it for any batch. ",
                  s.source == STATE_ROLES && state_being_made(r) > 0 ? "come to" : "hold",
                  size_text(a, s.bytes), size_text(b, available(r)), HEADROOM_PERCENT);
  if (s.source == STATE_ROLES && own_update_request(r))
    ol_buf_printf(out, "The request was the job's own lines making a block of a parameter's size "
                  "(or twice or half it) after the backward had made the gradients: an update "
                  "written in the loop, making its moments or an average of the weights one "
                  "parameter at a time. Counted with the state: %s of such copies, the request "
                  "included, which a smaller batch does not shrink; torch.optim's optimizers "
                  "with fused=True make the same state with no temporaries beside it. ",
                  size_text(a, own_copies_state(r)));
  else if (s.source == STATE_ROLES && own_copies_state(r) > 0)
    ol_buf_printf(out, "Counted with them: %s of copies of the parameters that the job's own "
                  "lines made and still hold %s (blocks of a weight's size, "
                  "or twice or half it, at call sites of no known role: master weights in "
                  "another dtype and their gradients, an average of the weights; named below), "
                  "which a smaller batch does not shrink. ", size_text(a, own_copies_state(r)),
                  r->request_role_known && r->request_role == OL_ROLE_optimizer
                      ? "at the optimizer's step"
                      : "since before the first forward");
  if (s.source == STATE_ROLES && state_being_made(r) > 0)
    ol_buf_printf(out, "The request was the optimizer making its state at its first step (%d "
                  "buffers as large as each trained parameter, as its _init_group makes them): "
                  "%s of it was still to come, and is counted in that. ",
                  r->request_state_buffers, size_text(a, state_being_made(r)));
  if (r->request_is_gradient)
    ol_buf_printf(out, "The backward ran out making a gradient (%s, as large as the parameter it "
                  "is for): every trained parameter's gradient is as large as it. Train fewer "
                  "(freeze them, or LoRA), or give a large embedding sparse gradients "
                  "(sparse=True, with SGD or SparseAdam). ", size_of(a, r->request));
  else if (loading_weights(r))
    ol_buf_printf(out, "Nothing but weights is held, and the request is for weights: if a "
                  "checkpoint is being loaded onto the device beside the model it is for "
                  "(torch.load with map_location on the device), the weights are there twice; "
                  "load it to the CPU (map_location='cpu', or mmap=True with "
                  "load_state_dict(assign=True)). ");
  else if (r->roles_known && r->request_in_update)
    advise_update_temporaries(out, r, s.bytes);
  advise_shrinking_state(out);
}

/* The first forward ran out beside weights too large to train whole
 * (training_unseen): both fixes, and the most the trained part may weigh,
 * its gradients and Adam's two moments being three times its weights
 * beside all the weights, at no batch at all. */
static void advise_untrained(ol_buf_t *out, const ol_oom_record_t *r)
{
  char a[32], b[32], c[32];
  int64_t w = r->role_bytes[OL_ROLE_weights];
  int64_t trained = at_least_zero(ol_sat_sub(available(r), w)) / 3;
  bool backward = r->role_bytes[OL_ROLE_backward] > 0 ||
                  (r->request_role_known && r->request_role == OL_ROLE_backward);
  ol_buf_printf(out, "The first iteration ran out %s, and the weights alone hold %s of the %s "
                "this process can have. Whether the batch or the state must change depends on "
                "how much of them the job trains, which is not seen before its gradients are. If "
                "it trains them all, their gradients alone (%s more) leave less than %d%% of "
                "the device for any batch. ",
                backward ? "as its backward began, before it made any gradient"
                         : "in its forward, before any backward",
                size_text(a, w), size_text(b, available(r)), size_text(c, w), HEADROOM_PERCENT);
  advise_shrinking_state(out);
  ol_buf_printf(out, " If it trains a part (LoRA, a frozen backbone or teacher) or none "
                "(inference), that part's gradients and Adam's moments (three times its "
                "weights) must fit beside all the weights: at most %s of trained weights (%" PRId64
                " million fp32 parameters) at no batch at all; within that, the forward's "
                "activations are what did not fit, and a smaller batch is the fix. ",
                size_text(a, trained), trained / 4 / 1000000);
  ol_first_step_figure_t f;
  ol_oom_first_step_figure(r, &f);
  advise_batch(out, r, &f.bound);
}

/* No batch fits before the optimizer's first step, and whether its state
 * would (optimizer_unseen): both fixes, with what each optimizer makes
 * the state. */
static void advise_optimizer_unseen(ol_buf_t *out, const ol_oom_record_t *r, state_t s)
{
  char a[32], b[32], c[32], d[32], e[32];
  int64_t to_come = gradients_to_come(r), trained = trained_at_most(r);
  int64_t held = ol_sat_add(s.bytes, to_come);
  ol_batch_figure_t f = batch_fit(r);
  ol_buf_printf(out, "The first iteration ran out before its optimizer's first step, and no "
                "batch fits: the state held (%s: weights and the %s of gradients made so far) "
                "and one sample's share of the iteration (%s) already need %s%s, more than the "
                "%s this process can have. Which must change depends on the optimizer, not seen "
                "before that step. With plain SGD (no state), the memory per sample: ",
                size_text(a, s.bytes), size_text(b, trained_of(r)),
                size_text(c, one_sample(&f)), f.need_is_lower_bound ? "at least " : "",
                size_text(d, state_and_one_sample(&f)),
                size_text(e, f.available));
  ol_buf_printf(out, "mixed precision (bf16 halves the activations, where the job is not in it "
                "yet), activation checkpointing (keeps only layer inputs), shorter sequences. ");
  if (to_come > 0)
    ol_buf_printf(out, "The backward had not made every weight's gradient: if the job trains "
                  "them all, %s more are to come. ", size_text(a, to_come));
  ol_buf_printf(out, "With SGD's momentum (one buffer as large as the trained parameters) the "
                "state alone comes to %s, with Adam (two) to %s, where the guides keep it "
                "under %s (%d%%) to leave room for any batch. ",
                size_text(a, ol_sat_add(held, trained)),
                size_text(b, ol_sat_add(held, ol_sat_add(trained, trained))),
                size_text(c, percent_of(available(r), 100 - HEADROOM_PERCENT)),
                100 - HEADROOM_PERCENT);
  advise_shrinking_state(out);
}

/* What would have told the readings apart. */
static void advise_frames(ol_buf_t *out)
{
  ol_buf_printf(out, " Python frames (CPython 3.10 to 3.13, OOMLENS_ROLES=1, the default) name "
                "what each block is for and tell these apart.");
}

/* A second step told by its sizes whose weights by timing, with a
 * training state's three times them more, would leave no batch the
 * guides' headroom (step_state_unseen): what its first step kept is that
 * state or kept tensors. */
static void advise_second_step_unclear(ol_buf_t *out, const ol_oom_record_t *r, state_t s)
{
  char a[32], b[32], c[32], d[32];
  ol_buf_printf(out, "No call site named what the memory is for. Its first step finished (the "
                "step under way repeats its sizes): by timing, the %s made before the job first "
                "freed memory and still held are its weights, and the first step kept %s more. "
                "That is either the state its update made (Adam's two moments are twice the "
                "weights), and the step's own memory ran out beside it, or tensors kept from "
                "step to step (a leak: a loss kept with its graph, outputs appended to a list "
                "without .detach(), evaluation without torch.no_grad()), which a smaller batch "
                "only delays: timing cannot tell which. Weights like these with their "
                "gradients and Adam's moments (%s more) would leave less than %d%% of the %s "
                "this process can have for any batch. ",
                size_text(a, s.bytes), size_text(b, at_least_zero(r->step_repeat_held)),
                size_text(c, ol_sat_add(ol_sat_add(s.bytes, s.bytes), s.bytes)),
                HEADROOM_PERCENT, size_text(d, available(r)));
}

/* The state by timing cannot say in the first step (building_or_batch,
 * step_state_unseen): what was seen, both fixes, and how to see more. */
static void advise_timing_unclear(ol_buf_t *out, const ol_oom_record_t *r, state_t s)
{
  char a[32], b[32], c[32];
  if (s.source == STATE_BUILDING)
    ol_buf_printf(out, "The job ran out before it freed any memory, asking for %s while it held "
                  "%s: a weight or checkpoint tensor that large being loaded, or the first "
                  "operation of a batch that large. No call site says which. If it is loading "
                  "its weights, they do not fit. ", size_of(a, r->request),
                  size_text(b, r->allocated));
  else if (second_step_read(r))
    advise_second_step_unclear(out, r, s);
  else
    ol_buf_printf(out, "No call site named what the memory is for, and no iteration finished: "
                  "by timing, the %s made before the job first freed memory and still held are "
                  "its weights. The gradients and optimizer state its first step makes are not "
                  "told from the batch's memory by timing, and with them (up to three times the "
                  "weights, %s more, with Adam) the state would leave less than %d%% of the %s "
                  "this process can have for any batch, if they are what ran out. ",
                  size_text(a, s.bytes),
                  size_text(b, ol_sat_add(ol_sat_add(s.bytes, s.bytes), s.bytes)),
                  HEADROOM_PERCENT, size_text(c, available(r)));
  advise_shrinking_state(out);
  ol_buf_printf(out, " If it is the batch's memory, a smaller batch is the fix.");
  advise_frames(out);
}

/* What outlives the iterations is more than a training state of the
 * weights by timing comes to (kept_unexplained): both readings and their
 * fixes. */
static void advise_kept_unexplained(ol_buf_t *out, const ol_oom_record_t *r)
{
  char a[32], b[32], c[32], d[32];
  int64_t weights = before_first_free_live(r);
  ol_buf_printf(out, "No call site named what the memory is for; iterations were found by sizes "
                "that repeat (%" PRIu64 " of them). What outlives them is %s: more than a "
                "training state of the %s the job held when it first freed memory comes to "
                "(four times them, %s: the weights, their gradients and Adam's two moments). "
                "The other %s, without which the request would fit, may be tensors kept from "
                "step to step (a leak: a loss kept with its graph, lists of outputs, evaluation "
                "without torch.no_grad()) or state this reading does not count (fp32 master "
                "copies of the weights, a second model or optimizer, buffers made in the loop): "
                "which, timing cannot tell. If it is kept tensors, find what keeps them "
                "(`loss.item()` instead of `loss`); a smaller batch only delays the failure. If "
                "it is state, it is too large for this device. ",
                r->iterations, size_text(a, r->persistent), size_text(b, weights),
                size_text(c, training_state_at_most(weights)), size_text(d, kept_beyond_state(r)));
  advise_shrinking_state(out);
  advise_frames(out);
}

/* What the iteration under way holds more than the one before at the
 * same point, without call sites (held_unexplained): both readings. */
static void advise_held_unexplained(ol_buf_t *out, const ol_oom_record_t *r)
{
  char b[32];
  ol_buf_printf(out, "No call site named what the memory is for; iterations were found by sizes "
                "that repeat (%" PRIu64 " of them). ", r->iterations);
  same_point_held(out, r);
  ol_buf_printf(out, "; without it this %s request would fit. "
                "It may be a tensor kept past its use (a leak: logits or a loss kept with their "
                "graph for a metric or a list, an output kept every few steps; keep `.item()` or "
                "a `.detach().cpu()` copy), under gradient accumulation the gradients kept "
                "between micro-steps (as meant: then the micro-step's memory is the lever, a "
                "smaller micro-batch), or state made in this iteration (gradients and moments "
                "of weights trained from now on, a new optimizer's): which, sizes cannot tell. "
                "A smaller batch only delays a leak.", size_of(b, r->request));
  advise_frames(out);
}

/* The iteration under way did the last one's work and then more
 * (more_past_repeat): both readings and their fixes. */
static void advise_past_repeat(ol_buf_t *out, const ol_oom_record_t *r)
{
  char a[32], b[32];
  ol_buf_printf(out, "No call site named what the memory is for; iterations were found by sizes "
                "that repeat (%" PRIu64 " of them). This iteration made the last one's "
                "allocations in the same sizes and order through its rise and fall, so its "
                "input is no larger, and then %" PRIu64 " allocations the last never made, "
                "which hold %s", r->iterations, r->past_repeat.allocations,
                size_text(a, r->past_repeat.held));
  if (r->past_repeat.frees == 0)
    ol_buf_printf(out, " (it freed nothing since, as state is made)");
  ol_buf_printf(out, "; without them this %s request would fit. It may be state made in mid-run "
                "(an optimizer's moments at its first step, as when the optimizer changes; a "
                "second model loaded; copies of the weights) or the memory of a new pass (an "
                "evaluation, a generation, a second loss): which, sizes cannot tell. If it is "
                "state, it does not fit beside the rest. ", size_of(b, r->request));
  advise_shrinking_state(out);
  ol_buf_printf(out, " If it is a new pass, give it a smaller batch, or run it under "
                "torch.no_grad() where it needs no gradients.");
  advise_frames(out);
}

/* No iteration found past a first step's length (loop_unseen): the three
 * readings and their fixes. */
static void advise_loop_unseen(ol_buf_t *out, const ol_oom_record_t *r)
{
  char a[32], b[32];
  ol_buf_printf(out, "No call site named what the memory is for, and no iteration was found in "
                "the %" PRIu64 " allocations the job made (without call sites iterations are "
                "found by sizes that repeat, and a job whose sizes vary from step to step finds "
                "none)", r->allocations_made);
  if (kept_past_a_step(r))
    ol_buf_printf(out, ", yet its allocations repeat in size and order those of a step before "
                  "(a forward's stack of like layers and a backward's in it), as a second step "
                  "repeats its first, and it held %s more than that step held at the same "
                  "point: more than the gradients and an optimizer's moments made there could "
                  "weigh", size_text(a, r->step_repeat_held));
  else if (r->allocations_made <= OL_FIRST_STEP_KEEP)
    ol_buf_printf(out, ", yet what it held fell back to about what it held when it first "
                  "freed memory and rose again near its highest %" PRIu32 " times, as a loop's "
                  "steps do, and it fell back %s higher before the last of those rises than "
                  "before the third", r->swings, size_text(a, r->swings_kept));
  ol_buf_printf(out, ": the failure is not known to be in its first step. By timing, the %s made "
                "before the job first freed memory and still held are its weights; of the %s "
                "held at the failure, the rest may be one step's own memory (a smaller batch or "
                "shorter inputs are the fix), memory kept from step to step (a leak: a loss kept "
                "with its graph, lists of outputs, a cache that grows; a smaller batch only "
                "delays it) or state made since (gradients, an optimizer's moments): which, "
                "timing cannot tell. torch.cuda.memory_allocated() printed after each step rises "
                "step after step where tensors are kept.",
                size_text(a, before_first_free_live(r)), size_text(b, r->allocated));
  if (pieces_may_be_a_leaks(r) && pieces_to_blame(r, state_of(r)))
    ol_buf_printf(out, " Of the pool's reserve, %s is free in pieces too small for the request: "
                  "they are the rest of chunks that live blocks pin, and blocks kept by a leak "
                  "pin them as well, so the pieces are not taken as the cause.",
                  size_text(a, r->free_reserved));
  advise_frames(out);
}

static void advise_undetermined(ol_buf_t *out, const ol_oom_record_t *r)
{
  char a[32];
  if (pool_failed(r)) {
    ol_buf_printf(out, "oomlens's pool held a free block of %s, which holds the request, and "
                  "did not serve it: this failure is oomlens's own under --manage, not the "
                  "job's memory. Run the job without --manage (PyTorch's cache serves it "
                  "then), and attach this report and its trace (--trace) to a ticket for "
                  "oomlens.", size_text(a, r->largest_free_block));
    return;
  }
  if (kept_unexplained(r)) {
    advise_kept_unexplained(out, r);
    return;
  }
  if (held_unexplained(r)) {
    advise_held_unexplained(out, r);
    return;
  }
  if (loop_unseen(r)) {
    advise_loop_unseen(out, r);
    return;
  }
  if (more_past_repeat(r)) {
    advise_past_repeat(out, r);
    return;
  }
  if (training_unseen(r)) {
    advise_untrained(out, r);
    return;
  }
  if (optimizer_unseen(r, state_of(r))) {
    advise_optimizer_unseen(out, r, state_of(r));
    return;
  }
  if (building_or_batch(r, state_of(r)) || step_state_unseen(r, state_of(r))) {
    advise_timing_unclear(out, r, state_of(r));
    return;
  }
  ol_buf_printf(out, "oomlens saw PyTorch's cached segments, not its tensors, and no call site "
                "said the state alone is too large: whether the iteration's activations or a "
                "leak filled the device cannot be told from here. Run it again under "
                "`oomlens run --manage` (its pool serves every tensor, so iterations, leaks and "
                "the batch that fits can be seen).");
}

static void advise(ol_buf_t *out, const ol_oom_record_t *r, ol_oom_class_t c)
{
  char a[32], b[32], d[32];
  switch (c) {
  case OL_OOM_impossible:
    ol_buf_printf(out, "The request (%s) is larger than the whole device (%s): split the work "
                  "(smaller batch or sequence chunks), shard the tensor across devices, or use "
                  "a larger device.", size_of(a, r->request), size_of(b, r->capacity));
    break;
  case OL_OOM_external:
    ol_buf_printf(out, "Others hold %s of the %s device (", size_text(a, others_of(r)),
                  size_text(b, cap_of(r)));
    if (library_of(r) > 0)
      ol_buf_printf(out, "another GPU library in this process %s, the rest ",
                    size_text(a, library_of(r)));
    ol_buf_printf(out, "other processes, and NCCL and library workspaces: see nvidia-smi); "
                  "this process%s holds %s and would fit without them. Free or move what else "
                  "runs on the device.", library_of(r) > 0 ? "'s framework" : "",
                  size_text(d, framework_reserved(r)));
    explain_library(out, r);
    if (r->iterations == 0) /* what the rest of the step needs was never asked */
      ol_buf_printf(out, " (No iteration had finished: whether the whole step fits alone is "
                    "not known. If it still runs out with the device to itself, its own memory "
                    "is the cause.)");
    explain_outside(out, r);
    break;
  case OL_OOM_fragmentation:
    if (r->largest_free_block >= 0)
      ol_buf_printf(out, "%s is reserved but free, yet the largest free block is %s: the free "
                    "memory is in pieces. ",
                    size_text(a, r->free_reserved), size_text(b, r->largest_free_block));
    else /* PyTorch's own figure, from its message */
      ol_buf_printf(out, "%s of it is reserved but free (PyTorch's own figure, from its error "
                    "message), yet no free block held the request: the free memory is in "
                    "pieces. ", size_text(a, r->free_reserved));
    if (r->managed) /* our pool remaps whole 2 MiB chunks: live blocks pin theirs */
      ol_buf_printf(out, "Small blocks that stay live pin the 2 MiB chunks around them: "
                    "allocate long-lived tensors before the loop (or free them), and keep "
                    "OOMLENS_MAX_SPLIT_SIZE low so large blocks are not carved up.");
    else
      ol_buf_printf(out, "Run under `oomlens run --manage`, or set "
                    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (or max_split_size_mb:128).");
    if (leak_to_blame(r, state_of(r)))
      ol_buf_printf(out, " Besides, what outlives iterations grew from %s to %s over %" PRIu64
                    " iterations: a leak, which runs out under any allocator; find what keeps "
                    "tensors from step to step too.", size_text(a, growth_base(r)),
                    size_text(b, r->persistent), r->iterations);
    break;
  case OL_OOM_leak:
    if (work_grown(r) && !growth_to_blame(r) && !kept_to_blame(r, state_of(r)) &&
        !shortfall_grown(r)) {
      advise_growing_work(out, r);
      break;
    }
    advise_leak(out, r);
    if (pieces_to_blame(r, state_of(r))) /* leak over pieces: pieces_are_the_leaks held */
      ol_buf_printf(out, "Of the pool, %s is free but in pieces of at most %s, between the "
                    "blocks it keeps: they go with the leak. ", size_text(a, r->free_reserved),
                    size_text(b, r->largest_free_block));
    if (weights_grow(r))
      advise_kept_copies(out);
    else if (optimizer_regrown(r))
      ol_buf_printf(out, "Keep one optimizer and change its learning rate in its param_groups "
                    "(or use a scheduler), or drop the old one (`del` it and whatever refers to "
                    "it) before making the next.");
    else if (inference_only(r))
      advise_growing_inference(out);
    else
      ol_buf_printf(out, "Something keeps tensors across steps. Usual causes: a loss kept "
                    "with its graph (`total += loss` instead of `loss.item()`), evaluation "
                    "without `torch.no_grad()`, lists or caches of outputs; in generation, a "
                    "key/value cache that grows with the sequence (cap the length, or "
                    "preallocate a static cache).");
    break;
  case OL_OOM_persistent:
    advise_persistent(out, r);
    break;
  case OL_OOM_undetermined:
    advise_undetermined(out, r);
    break;
  case OL_OOM_activations:
  default:
    advise_activations(out, r);
    break;
  }
}

void ol_oom_note_sites(ol_oom_record_t *r, const ol_sites_t *sites, int32_t unsampled)
{
  int32_t top[OL_OOM_SITES];
  size_t n = sites ? ol_sites_top(sites, OL_SITES_BY_CURRENT, top, OL_OOM_SITES) : 0;
  for (size_t i = 0; i < n; i++)
    r->holders[i] = (ol_oom_site_t){top[i], ol_sites_figures(sites, top[i])->current};
  r->holder_count = (int)n;
  r->grower = (ol_oom_site_t){-1, 0};
  r->grower_reading = OL_GROWER_KEPT;
  int32_t grower = sites ? ol_sites_grew_most(sites, unsampled, OL_SITES_BY_GROWTH) : -1;
  if (grower >= 0) {
    r->grower = (ol_oom_site_t){grower, ol_sites_figure(sites, grower, OL_SITES_BY_GROWTH)};
    r->grower_role = ol_sites_role(sites, grower);
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
    ol_buf_printf(out, r->grower_reading == OL_GROWER_SINCE_LAST
                         ? " Holds more than at the same point of the iteration before (+%s): "
                         : " Grew most across iterations (+%s): ",
                  size_text(a, r->grower.bytes));
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
    ol_buf_printf(out, ", \"bytes\": %" PRId64 ", \"child\": %s}", r->others[i].bytes,
                  r->others[i].child ? "true" : "false");
  }
  ol_buf_printf(out, "], \"external_unlisted\": {\"processes\": %d, \"bytes\": %" PRId64 "}",
                r->others_unlisted, r->others_unlisted_bytes);
  ol_buf_printf(out, ", \"self_device_bytes\": %" PRId64 ", \"framework_limit\": %" PRId64
                ", \"framework_allocated\": %" PRId64 ", \"no_block_held\": %s"
                ", \"vmm_reserved\": %" PRId64 ", \"vmm_not_framework\": %s"
                ", \"request_in_update\": %s, \"update_bytes\": %" PRId64
                ", \"request_state_buffers\": %d, \"state_being_made\": %" PRId64
                ", \"request_update_makes_state\": %s, \"own_copies\": %" PRId64
                ", \"own_copies_own_segments\": %" PRId64 ", \"own_copies_early\": %" PRId64
                ", \"own_copies_early_own_segments\": %" PRId64 ", \"request_is_copy\": %s"
                ", \"request_is_copy_own_segment\": %s, \"growing_site\": ",
                r->self_device_bytes > 0 ? r->self_device_bytes : -1,
                r->framework_limit > 0 ? r->framework_limit : 0,
                r->framework_allocated >= 0 ? r->framework_allocated : -1,
                r->no_block_held ? "true" : "false", at_least_zero(r->vmm_reserved),
                r->vmm_not_framework ? "true" : "false", r->request_in_update ? "true" : "false",
                at_least_zero(r->update_bytes), r->request_state_buffers, state_being_made(r),
                r->request_update_makes_state ? "true" : "false", at_least_zero(r->own_copies),
                at_least_zero(r->own_copies_own_segments), at_least_zero(r->own_copies_early),
                at_least_zero(r->own_copies_early_own_segments), r->request_is_copy ? "true" : "false",
                r->request_is_copy_own_segment ? "true" : "false");
  if (namer && r->grower.id >= 0) {
    ol_buf_printf(out, "{\"site\": ");
    namer(out, r->grower.id, true, arg);
    ol_buf_printf(out, ", \"growth\": %" PRId64 ", \"role\": \"%s\", \"once\": %s"
                  ", \"since_last_iteration\": %s, \"per_step\": %s}", r->grower.bytes,
                  ol_role_name(r->grower_role),
                  r->grower_reading == OL_GROWER_ONCE ? "true" : "false",
                  r->grower_reading == OL_GROWER_SINCE_LAST ? "true" : "false",
                  r->grower_per_step ? "true" : "false");
  } else {
    ol_buf_printf(out, "null");
  }
}

/* Does a site's name say it is attention's softmax: a softmax frame and
 * an attention frame ("attention", "attn") among those the namer gives? */
static bool is_attention_softmax(int32_t id, ol_site_namer_t namer, void *arg)
{
  ol_buf_t name = {0};
  namer(&name, id, false, arg);
  bool found = !name.failed && name.data && strstr(name.data, "softmax") &&
               (strstr(name.data, "attention") || strstr(name.data, "attn"));
  ol_buf_free(&name);
  return found;
}

/* The attention's score matrices made whole (eager attention: softmax over
 * batch x heads x length x length, held-out seq_batch1's 5 of 8.4 GiB at
 * one sequence of 4096), where they hold a quarter of the activations or
 * more: a fused attention never keeps them, which no batch size matches
 * at long sequences. */
static void explain_attention_scores(ol_buf_t *out, const ol_oom_record_t *r,
                                     ol_site_namer_t namer, void *arg)
{
  char a[32];
  int64_t scores = 0;
  for (int i = 0; namer && i < r->holder_count; i++)
    if (is_attention_softmax(r->holders[i].id, namer, arg))
      scores = ol_sat_add(scores, r->holders[i].bytes);
  int64_t activations = r->roles_known ? r->role_bytes[OL_ROLE_activations] : r->allocated;
  if (scores <= 0 || scores < activations / 4)
    return;
  ol_buf_printf(out, " Of the activations, %s is held by attention's softmax (its sites below): "
                "score matrices of "
                "batch x heads x length x length, which grow with the square of the sequence; "
                "a fused attention never keeps them (torch.nn.functional."
                "scaled_dot_product_attention; attn_implementation=\"sdpa\" in Hugging Face, "
                "in place of \"eager\").", size_text(a, scores));
}

/* A job that began again after an OOM it went on from (it dropped what it
 * had loaded and loaded it anew: account.c) is most often a batch size
 * search, which halves its batch each time: the batch the user gave may
 * not be the one it runs now, and nothing seen tells which it is. Its
 * figures are then shares of the batch it ran out at. */
void ol_oom_set_batch(ol_oom_record_t *r, int64_t batch)
{
  r->batch_given = batch > 0 ? batch : 0;
  r->batch = r->restarts > 0 ? 0 : r->batch_given;
}

/* "This process began again ...": why the figures are in shares. */
static void explain_restarts(ol_buf_t *out, const ol_oom_record_t *r)
{
  if (r->restarts <= 0)
    return;
  ol_buf_printf(out, " The job had run out before and gone on: it dropped all it had loaded "
                "and loaded it again (%" PRId64 " time%s), as a batch size search does "
                "(Hugging Face's auto_find_batch_size halves the batch each time); what is "
                "read here is of its last start", r->restarts, r->restarts == 1 ? "" : "s");
  if (r->batch_given > 0)
    ol_buf_printf(out, ", whose batch may no longer be the %" PRId64 " it was given, so the "
                  "figures are shares of the batch it ran out at", r->batch_given);
  ol_buf_printf(out, ".");
}

void ol_oom_explain(ol_buf_t *out, const ol_oom_record_t *r, ol_oom_class_t c,
                    ol_site_namer_t namer, void *arg)
{
  char a[32], b[32], d[32], e[32];
  bool limited = r->framework_limit > 0; /* PyTorch refused at its own limit (capacity is it) */
  ol_buf_printf(out, "out of memory (%s: %s): a request of %s", ol_oom_class_name(c),
                c < OL_OOM_CLASS_COUNT ? meanings[c] : "?", size_of(a, r->request));
  if (limited)
    ol_buf_printf(out, ", refused by PyTorch itself at the %s the job allowed it "
                  "(torch.cuda.set_per_process_memory_fraction), where",
                  size_of(b, (uint64_t)r->framework_limit));
  else
    ol_buf_printf(out, " on a %s device where", size_of(b, r->capacity));
  if (r->segments_only && r->framework_allocated >= 0) /* PyTorch's own count of its tensors */
    ol_buf_printf(out, " this process held %s reserved, %s of it in PyTorch's tensors by its own "
                  "count", size_text(d, r->reserved), size_text(e, r->framework_allocated));
  else
    ol_buf_printf(out, " this process held %s reserved, %s allocated", size_text(d, r->reserved),
                  size_text(e, r->allocated));
  ol_buf_printf(out, "%s", limited ? "; the device was not asked, and the figures below are "
                "against that limit. " : ". ");
  advise(out, r, c);
  if (c == OL_OOM_activations)
    explain_attention_scores(out, r, namer, arg);
  if (limited)
    ol_buf_printf(out, " The limit is the job's own: where nothing else needs the rest of the "
                  "device, a larger fraction is a fix too. (Under `oomlens run --manage` "
                  "PyTorch's cache is off and keeps no fraction: add --capacity %s to hold the "
                  "job to the same limit.)", size_of(a, (uint64_t)r->framework_limit));
  if (c != OL_OOM_impossible)
    explain_roles(out, r);
  if (c == OL_OOM_activations || c == OL_OOM_persistent)
    explain_state_source(out, r, state_of(r));
  if (c != OL_OOM_external && c != OL_OOM_impossible && r->external > 0) {
    ol_buf_printf(out, " Besides, %s of the device is held outside this process's allocations "
                  "(the CUDA context, libraries, other processes).", size_text(a, r->external));
    explain_outside(out, r);
  }
  explain_sites(out, r, c, namer, arg);
  explain_restarts(out, r);
  if (r->segments_only && c != OL_OOM_undetermined)
    ol_buf_printf(out, " (oomlens saw the framework's cached segments, not its tensors: run "
                  "under `oomlens run --manage` to tell weights from activations.)");
}


/* A batch is the lever where the iteration's own memory is the cause
 * (activations) and the batch is known: the figures are then the advice.
 * Elsewhere (the state, a leak, others' memory, pieces) no smaller batch
 * is the fix, and a figure beside that class would say otherwise. */
static bool batch_is_the_lever(const ol_oom_record_t *r, ol_oom_class_t c)
{
  return c == OL_OOM_activations && r->batch > 0;
}

/* "name": n where it is a figure to give (1 or more), else null. */
static void json_batch_count(ol_buf_t *out, const char *name, bool given, int64_t n)
{
  if (given && n >= 1)
    ol_buf_printf(out, ", \"%s\": %" PRId64, name, n);
  else
    ol_buf_printf(out, ", \"%s\": null", name);
}

/* Where no batch fits, what alone takes the device: the state (persistent:
 * weights, gradients and optimizer state take more than the guides'
 * headroom leaves, or were still being made), or the state with one
 * sample's share of the iteration (activations); null elsewhere. */
static void json_no_batch_fits(ol_buf_t *out, const ol_oom_record_t *r, ol_oom_class_t c,
                               const ol_first_step_figure_t *f)
{
  const char *because = NULL;
  int64_t bytes = 0;
  if (c == OL_OOM_persistent) {
    because = "state";
    bytes = state_of(r).bytes;
  } else if ((batch_is_the_lever(r, c) && lead_of(f)->fits < 1) ||
             (c == OL_OOM_undetermined && optimizer_unseen(r, state_of(r)))) {
    because = "state_and_one_sample";
    bytes = state_and_one_sample(&f->bound);
  }
  if (!because) {
    ol_buf_printf(out, ", \"no_batch_fits\": null");
    return;
  }
  ol_buf_printf(out, ", \"no_batch_fits\": {\"because\": \"%s\", \"bytes\": %" PRId64
                ", \"available\": %" PRId64 "}", because, bytes, available(r));
}

/* A first step's shape and figures: the bound beside the estimate, and
 * the estimate's high end (minor 4). */
static void json_first_step(ol_buf_t *out, const ol_oom_record_t *r, bool lever,
                            const ol_first_step_figure_t *f)
{
  const ol_first_step_t *fs = &r->first_step;
  bool estimated = f->estimated && lever;
  ol_buf_printf(out, ", \"batch_figure_is_estimate\": %s", estimated ? "true" : "false");
  json_batch_count(out, "batch_fits_at_most", lever && f->bound.need_is_lower_bound,
                   f->bound.fits);
  json_batch_count(out, "batch_fits_high", estimated, f->high.fits);
  if (r->iterations > 0 || r->segments_only || !fs->read) {
    ol_buf_printf(out, ", \"first_step\": null");
    return;
  }
  ol_buf_printf(out, ", \"first_step\": {\"stage\": \"%s\", \"layers\": %" PRId64
                ", \"layers_done\": %" PRId64 ", \"per_layer\": %" PRId64 ", \"rest\": %" PRId64
                ", \"stack_end\": %" PRId64 ", \"largest_after\": %" PRId64
                ", \"layer_largest\": %" PRId64 ", \"loss_upcast\": %s, \"stacks\": %" PRId64
                ", \"weight_element\": %" PRId64 ", \"element_unsure\": %s"
                ", \"weights_cast\": %s"
                ", \"logits_asks\": %" PRId64 ", \"logits_ahead\": %" PRId64 "}",
                ol_first_step_stage_name(fs->stage), fs->layers,
                fs->layers_done, fs->per_layer, fs->rest, fs->stack_end, fs->largest_after,
                fs->layer_largest, fs->loss_upcast ? "true" : "false", fs->stacks,
                fs->weight_element, fs->element_unsure ? "true" : "false",
                fs->weights_cast ? "true" : "false", fs->logits_asks,
                fs->logits_ahead);
}

/* The state and the batch figures as the paragraph gives them, so a JSON
 * reader need not redo the arithmetic (minor 5: only where the batch is
 * the lever, and never 0; where no batch fits, what alone exceeds the
 * device instead). */
static void json_figures(ol_buf_t *out, const ol_oom_record_t *r, ol_oom_class_t c)
{
  static const char *const sources[] = {
    [STATE_ROLES] = "roles",       [STATE_ITERATIONS] = "iterations",
    [STATE_MADE_SINCE] = "past_repeat", [STATE_BUILDING] = "building",
    [STATE_FIRST_FREE] = "first_free", [STATE_REQUESTED] = "requested",
    [STATE_HIDDEN] = "hidden"};
  _Static_assert(sizeof sources / sizeof sources[0] == STATE_SOURCE_COUNT,
                 "a name for every state source");
  state_t s = state_of(r);
  ol_first_step_figure_t figure;
  ol_oom_first_step_figure(r, &figure);
  const ol_batch_figure_t *lead = lead_of(&figure); /* the figures the advice leads with */
  ol_buf_printf(out, ", \"roles_known\": %s, \"roles\": {", r->roles_known ? "true" : "false");
  for (int i = 0; i < OL_ROLE_COUNT; i++)
    ol_buf_printf(out, "%s\"%s\": %" PRId64, i ? ", " : "", ol_role_name((ol_role_t)i), r->role_bytes[i]);
  ol_buf_printf(out, "}, \"request_role\": ");
  if (r->request_role_known)
    ol_buf_printf(out, "\"%s\"", ol_role_name(r->request_role));
  else
    ol_buf_printf(out, "null");
  ol_buf_printf(out, ", \"gradients_made\": %" PRId64 ", \"gradients_made_own_segments\": %" PRId64
                ", \"request_is_gradient\": %s", r->gradients_made, r->gradients_made_own_segments,
                r->request_is_gradient ? "true" : "false");
  ol_buf_printf(out, ", \"state\": %" PRId64 ", \"state_from\": \"%s\", \"before_first_free\": %" PRId64
                ", \"before_first_free_live\": %" PRId64 ", \"iteration_need\": %" PRId64
                ", \"first_persistent\": %" PRId64 ", \"batch\": %" PRId64,
                s.bytes, sources[s.source], r->before_first_free, before_first_free_live(r),
                r->iteration_need, r->first_persistent, r->batch);
  ol_buf_printf(out, ", \"batch_given\": %" PRId64 ", \"restarts\": %" PRId64, r->batch_given,
                r->restarts);
  bool lever = batch_is_the_lever(r, c);
  ol_buf_printf(out, ", \"batch_is_the_lever\": %s", lever ? "true" : "false");
  json_batch_count(out, "batch_fits", lever, lead->fits);
  json_batch_count(out, "batch_fits_headroom", lever, lead->fits_headroom);
  ol_buf_printf(out, ", \"batch_figure_is_bound\": %s",
                lever && lead->need_is_lower_bound ? "true" : "false");
  json_no_batch_fits(out, r, c, &figure);
  json_first_step(out, r, lever, &figure);
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
                ", \"need_growth_per_iteration\": %" PRId64
                ", \"allocations_growth_per_iteration\": %" PRId64
                ", \"input_growth_per_iteration\": %" PRId64 ", \"allocations_made\": %" PRIu64
                ", \"swings\": %" PRIu32 ", \"swings_kept\": %" PRId64
                ", \"held_since_last_iteration\": %" PRId64 ", \"since_last_by_calls\": %s"
                ", \"since_last_by_repeat\": %s, \"step_repeat_held\": %" PRId64
                ", \"step_rest\": %" PRId64 ", \"step_rest_gradients\": %" PRId64
                ", \"step_held_over\": %" PRId64 ", \"step_cast_copies\": %" PRId64
                ", \"past_repeat\": {\"held\": %" PRId64 ", \"allocations\": %" PRIu64
                ", \"frees\": %" PRIu64 "}, \"segments_only\": %s",
                ol_oom_class_name(c), r->request, r->capacity, r->device_free, r->allocated,
                r->reserved, r->free_reserved, r->largest_free_block, r->external,
                r->persistent, transient_of(r), r->iterations, r->growth, r->need_growth,
                r->work_growth, r->input_growth, r->allocations_made, r->swings, r->swings_kept,
                r->held_since_last,
                r->since_last_by_calls ? "true" : "false",
                r->since_last_by_repeat ? "true" : "false",
                r->step_repeat_held, r->step_rest, r->step_fixed.gradients,
                r->step_fixed.held_over, r->step_fixed.copies, r->past_repeat.held,
                r->past_repeat.allocations, r->past_repeat.frees,
                r->segments_only ? "true" : "false");
  json_figures(out, r, c);
  ol_buf_printf(out, ", \"advice\": ");
  ol_buf_json_string(out, advice.failed ? "" : advice.data);
  json_sites(out, r, namer, arg);
  ol_buf_printf(out, "}");
  ol_buf_free(&advice);
}

bool ol_oom_first_step_figure(const ol_oom_record_t *r, ol_first_step_figure_t *out)
{
  *out = (ol_first_step_figure_t){.bound = batch_fit(r)};
  out->estimated = first_step_estimate(r, &out->bound, &out->low, &out->high);
  return out->estimated;
}

bool ol_oom_batch_figures(const ol_oom_record_t *r, int64_t *fits, int64_t *fits_headroom,
                          bool *is_bound)
{
  ol_first_step_figure_t f;
  ol_oom_first_step_figure(r, &f);
  const ol_batch_figure_t *lead = lead_of(&f);
  *fits = lead->fits;
  *fits_headroom = lead->fits_headroom;
  *is_bound = lead->need_is_lower_bound;
  return r->batch > 0;
}
