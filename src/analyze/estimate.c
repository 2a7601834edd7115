/* estimate.c: the memory model behind `oomlens estimate`, its calibration
 * from a measurement, and the field guides' remedies re-estimated. Pure:
 * an input struct in, figures out; the command line that fills the input
 * is tools/estimate_cmd.c's, and the messages here name the inputs by
 * what they are, not by a flag.
 *
 * The model. Peak device memory of one training step on one GPU:
 *
 *   total = persistent + max(batch * per_sample, step) + workspace
 *
 * Persistent (bytes per parameter P; ZeRO over G GPUs divides as marked):
 *   weights    fp32 4; fp16/bf16 2; mixed 2: torch.autocast keeps a half
 *              copy of every weight from the forward to the backward (its
 *              cast cache, saved for backward), Megatron/DeepSpeed keep
 *              half weights outright.                        (/G at stage 3)
 *   master     mixed only: the fp32 weights the optimizer updates, 4.
 *                                                            (/G at stage 1+)
 *   gradients  in the weights' dtype: fp32 4, fp16/bf16 2, mixed 4 (AMP's
 *              gradients are the fp32 parameters').          (/G at stage 2+)
 *   optimizer  Adam/AdamW 2 states, momentum 1, SGD 0, each 4 bytes (2 under
 *              pure fp16/bf16, where PyTorch makes states in the parameter's
 *              dtype); 8-bit Adam 2 bytes (two 1-byte states). (/G at 1+)
 * The field guides count P*2 + P*8 (fp16 weights plus Adam) and miss the
 * master copy and the gradients: 10 bytes where mixed AdamW needs 18.
 * Gradients are counted whole although, with zero_grad(set_to_none=True),
 * the activation peak at the start of the backward holds few of them: on
 * GPT-2 this overstates the peak by at most 4P (2% of it).
 *
 * Per sample, a transformer layer keeps for its backward (s = sequence,
 * h = hidden, a = heads; p = compute precision bytes: 4 fp32, 2 otherwise;
 * r = residual stream bytes: 4 under fp32 and mixed, since autocast's adds
 * of half outputs to an fp32 residual give fp32, 2 under pure half):
 *   attention block, per token, times h:
 *     r (LayerNorm input) + p (its output: the QKV matmul's input, a half
 *     copy under autocast) + 3p (Q, K, V) + p (the attention output the
 *     fused kernel keeps) + p (heads merged: the out-projection's input)
 *     + 1 (the residual dropout's mask)               = r + 6p + 1
 *   attention scores, eager only (no flash/SDPA kernel), per layer:
 *     a*s*s*(q + 1 + p): softmax output in q bytes (4 under fp32 and
 *     autocast, which runs softmax in fp32), the dropout mask, the dropout
 *     output cast for the matmul with V. Flash keeps a*s*4 (logsumexp).
 *   MLP block, per token, times h:
 *     r (LayerNorm input) + p (fc1's input) + 4*(g + p) (on the 4h-wide
 *     tensors: the GELU's saved tensors g, fc2's input p) + 1 (mask)
 *     g = p for a fused GELU (its input); for the tanh GELU written as
 *     Python ops (HF's gelu_new: pow, tanh, two multiplies) 4 tensors:
 *     4p, or 12+p under autocast, which runs pow in fp32.
 *   Korthikanti et al. ("Reducing Activation Recomputation", 2022) give
 *   34sbh + 5as^2b for fp16 Megatron; with r=p=2, a fused GELU and the
 *   merged-heads copy this gives 36sbh, the difference being that copy.
 * Embeddings and the final LayerNorm: (1 + r + p) h per token.
 * Logits and loss: 12*s*V, whatever the precision: the backward of the
 * cross entropy holds the fp32 log-softmax output, NLL's fp32 gradient and
 * the log-softmax's fp32 gradient at once, over all layers' activations.
 * (The forward's p*s*V logits + 4*s*V upcast + 4*s*V log-softmax is less.)
 * Full checkpointing keeps each layer's input (r*s*h), recomputes one layer
 * at a time in the backward (one layer's activations), and the logits.
 *
 * Step: foreach Adam/AdamW makes one temporary the size of a state (the
 * square root of the second moments). Measured on the GPT-2 trace's steps:
 * 949 MiB over the bytes between steps = the gradients (4 x 124M) and one
 * fp32 copy of 124M; the gradients are already in persistent.
 *
 * Workspace, outside the allocator (so not in PyTorch's peak allocated):
 * single GPU 512 MiB of CUDA context plus 134532616 bytes of libraries'
 * direct cuMemAlloc measured on a GPT-2 job (docs/measurements.md); several
 * GPUs 1.37 GB, measured on the H200 in a one-process DDP job (context,
 * NCCL, workspaces; MISSION.md). Allocator fragmentation (PyTorch's cache
 * reserved 3-20% over allocated on the traces) is what the headroom covers.
 *
 * Against the traces (docs/measurements.md, scripts/check_estimate.sh):
 * GPT-2 124M mixed-bf16 batch 16 x 1024 with gelu_new 0.4% above the
 * measured 25393780736; fp32 batch 4 3.2% above; small batches up to 11.5%
 * above, the gradients counted at the peak being most of it. */
#include "estimate.h"

#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "replay.h" /* OL_REPLAY_DEFAULT_CAPACITY: the H200's usable memory */

#define CONTEXT_BYTES (UINT64_C(512) << 20)
#define DIRECT_DRIVER_BYTES UINT64_C(134532616)
#define MULTI_GPU_EXTERNAL_BYTES UINT64_C(1370000000)

static const char *const precision_names[OL_PREC_COUNT] = {"fp32", "fp16", "bf16", "mixed-bf16",
                                                           "mixed-fp16"};
static const char *const optimizer_names[OL_OPTIM_COUNT] = {"sgd", "momentum", "adam", "adamw",
                                                            "adam8bit"};

const char *ol_precision_name(ol_precision_t p)
{
  return p < OL_PREC_COUNT ? precision_names[p] : "?";
}

const char *ol_optimizer_name(ol_optimizer_t o)
{
  return o < OL_OPTIM_COUNT ? optimizer_names[o] : "?";
}

void ol_estimate_defaults(ol_estimate_input_t *in)
{
  *in = (ol_estimate_input_t){.batch = 1,
                              .precision = OL_PREC_MIXED_BF16,
                              .optimizer = OL_OPTIM_ADAMW,
                              .gpus = 1,
                              .capacity = OL_REPLAY_DEFAULT_CAPACITY,
                              .headroom = 0.2};
}

static bool is_mixed(ol_precision_t p)
{
  return p == OL_PREC_MIXED_BF16 || p == OL_PREC_MIXED_FP16;
}

static bool is_pure_half(ol_precision_t p)
{
  return p == OL_PREC_FP16 || p == OL_PREC_BF16;
}

static uint64_t compute_bytes(ol_precision_t p)
{
  return p == OL_PREC_FP32 ? 4 : 2;
}

static uint64_t residual_bytes(ol_precision_t p)
{
  return is_pure_half(p) ? 2 : 4;
}

static bool has_shape(const ol_estimate_input_t *in)
{
  return in->hidden && in->layers && in->seq;
}

/* GPT-2's layout: per layer 12h^2 + 13h (QKV, out-proj, two MLP matrices,
 * their biases, two LayerNorms), tied token embeddings V*h, learned
 * positions s*h, a final LayerNorm. 124439808 for GPT-2 small. */
static uint64_t shape_params(const ol_estimate_input_t *in)
{
  uint64_t h = in->hidden;
  return in->layers * (12 * h * h + 13 * h) + in->vocab * h + in->seq * h + 2 * h;
}

static uint64_t optimizer_states(ol_optimizer_t o)
{
  switch (o) {
  case OL_OPTIM_ADAM:
  case OL_OPTIM_ADAMW: return 2;
  case OL_OPTIM_MOMENTUM: return 1;
  default: return 0;
  }
}

static uint64_t optimizer_bytes_per_param(const ol_estimate_input_t *in)
{
  if (in->optimizer == OL_OPTIM_ADAM8BIT)
    return 2;
  return optimizer_states(in->optimizer) * (is_pure_half(in->precision) ? 2 : 4);
}

/* Divides by the GPU count when ZeRO's stage reaches `stage`. */
static uint64_t shard(const ol_estimate_input_t *in, uint64_t bytes, unsigned stage)
{
  return in->zero >= stage ? (bytes + in->gpus - 1) / in->gpus : bytes;
}

static void persistent_terms(const ol_estimate_input_t *in, uint64_t params, ol_estimate_t *e)
{
  ol_precision_t p = in->precision;
  e->weights = shard(in, params * (p == OL_PREC_FP32 ? 4 : 2), 3);
  e->master = is_mixed(p) ? shard(in, params * 4, 1) : 0;
  e->gradients = shard(in, params * (is_pure_half(p) ? 2 : 4), 2);
  e->optimizer = shard(in, params * optimizer_bytes_per_param(in), 1);
  uint64_t temporaries = 0;
  if (in->optimizer == OL_OPTIM_ADAM || in->optimizer == OL_OPTIM_ADAMW)
    temporaries = e->optimizer / 2; /* one temporary the size of one state */
  if (in->offload) {
    e->master = e->optimizer = temporaries = 0;
  }
  e->step_transient = temporaries;
  e->persistent = e->weights + e->master + e->gradients + e->optimizer;
}

/* Bytes per token, in units of h, of one layer's saved activations. */
static uint64_t layer_token_bytes(const ol_estimate_input_t *in)
{
  ol_precision_t prec = in->precision;
  uint64_t p = compute_bytes(prec), r = residual_bytes(prec);
  uint64_t gelu = p;
  if (in->eager_gelu)
    gelu = is_mixed(prec) ? 12 + p : 4 * p;
  uint64_t attention = r + 6 * p + 1;
  uint64_t mlp = r + p + 4 * (gelu + p) + 1;
  return attention + mlp;
}

static uint64_t layer_scores_bytes(const ol_estimate_input_t *in)
{
  uint64_t s = in->seq, a = in->heads;
  if (!in->eager_attention)
    return a * s * 4;
  uint64_t q = is_pure_half(in->precision) ? 2 : 4;
  return a * s * s * (q + 1 + compute_bytes(in->precision));
}

static void activation_terms(const ol_estimate_input_t *in, ol_estimate_t *e)
{
  if (!has_shape(in))
    return;
  uint64_t s = in->seq, h = in->hidden;
  uint64_t p = compute_bytes(in->precision), r = residual_bytes(in->precision);
  uint64_t one_layer = layer_token_bytes(in) * s * h + layer_scores_bytes(in);
  if (in->checkpointing)
    e->layers_per_sample = in->layers * r * s * h + one_layer;
  else
    e->layers_per_sample = in->layers * one_layer;
  e->logits_per_sample = 12 * s * in->vocab;
  e->other_per_sample = (1 + r + p) * s * h;
  e->per_sample = e->layers_per_sample + e->logits_per_sample + e->other_per_sample;
  e->activations_known = true;
}

static uint64_t workspace_bytes(const ol_estimate_input_t *in)
{
  return in->gpus > 1 ? MULTI_GPU_EXTERNAL_BYTES : CONTEXT_BYTES + DIRECT_DRIVER_BYTES;
}

static const char *const problem_words[] = {
#define OL_ESTIMATE_PROBLEM_WORDS(name, words) words,
  OL_ESTIMATE_PROBLEMS(OL_ESTIMATE_PROBLEM_WORDS)
#undef OL_ESTIMATE_PROBLEM_WORDS
};

static ol_estimate_problem_t input_problem(const ol_estimate_input_t *in)
{
  if (!in->params && !has_shape(in))
    return OL_ESTIMATE_no_size;
  if (in->batch == 0 || in->gpus == 0 || in->capacity == 0)
    return OL_ESTIMATE_zero_count;
  if (!(in->headroom >= 0 && in->headroom < 1))
    return OL_ESTIMATE_headroom;
  if (in->zero > 3)
    return OL_ESTIMATE_zero_stage;
  if (in->eager_attention && has_shape(in) && !in->heads)
    return OL_ESTIMATE_no_heads;
  if ((in->from_peak != 0) != (in->at_batch != 0))
    return OL_ESTIMATE_peak_without_batch;
  if (in->from_peak && in->measured_per_sample)
    return OL_ESTIMATE_two_calibrations;
  return OL_ESTIMATE_none;
}

static bool check_input(const ol_estimate_input_t *in, ol_estimate_t *e, ol_error_t *err)
{
  e->problem = input_problem(in);
  if (e->problem != OL_ESTIMATE_none)
    ol_fail(err, OL_EXIT_USAGE, "%s", problem_words[e->problem]);
  return e->problem == OL_ESTIMATE_none;
}

/* Measured figures replace the model's. false if a peak leaves nothing
 * per sample once persistent memory is taken out. */
static bool calibrate(const ol_estimate_input_t *in, ol_estimate_t *e, ol_error_t *err)
{
  if (in->measured_persistent) {
    e->persistent = in->measured_persistent;
    e->calibrated_persistent = true;
  }
  if (in->measured_per_sample) {
    e->per_sample = in->measured_per_sample;
  } else if (in->from_peak) {
    if (in->from_peak <= e->persistent) {
      e->problem = OL_ESTIMATE_peak_not_above_persistent;
      ol_fail(err, OL_EXIT_USAGE, "the measured peak %llu is not above the persistent %llu bytes",
              (unsigned long long)in->from_peak, (unsigned long long)e->persistent);
      return false;
    }
    e->per_sample = (in->from_peak - e->persistent) / in->at_batch;
  } else {
    return true;
  }
  e->calibrated_per_sample = true;
  e->activations_known = true;
  return true;
}

static uint64_t max_of(uint64_t a, uint64_t b)
{
  return a > b ? a : b;
}

static void totals(const ol_estimate_input_t *in, ol_estimate_t *e)
{
  e->activations = e->per_sample * in->batch;
  e->workspace = workspace_bytes(in);
  e->peak_allocated = e->persistent + max_of(e->activations, e->step_transient);
  e->total = e->peak_allocated + e->workspace;
  e->usable = (uint64_t)((double)in->capacity * (1.0 - in->headroom));
  e->fits = e->total <= e->usable;
  uint64_t fixed = e->persistent + e->workspace;
  e->max_batch = 0;
  if (e->per_sample && e->usable >= fixed + e->step_transient)
    e->max_batch = (e->usable - fixed) / e->per_sample;
}

bool ol_estimate(const ol_estimate_input_t *in, ol_estimate_t *out, ol_error_t *err)
{
  *out = (ol_estimate_t){0};
  if (!check_input(in, out, err))
    return false;
  uint64_t params = in->params ? in->params : shape_params(in);
  persistent_terms(in, params, out);
  activation_terms(in, out);
  if (!calibrate(in, out, err))
    return false;
  totals(in, out);
  return true;
}

/* ---- advice ----------------------------------------------------------- */

/* A calibrated figure scaled by the model's ratio alt/base. */
static uint64_t scale(uint64_t measured, uint64_t alt, uint64_t base)
{
  if (!base)
    return measured;
  return (uint64_t)((double)measured * (double)alt / (double)base);
}

/* Estimates the changed job alt. Without calibration the model answers;
 * with it, the measured persistent and per-sample bytes are scaled by how
 * much the model says the change moves them. */
static bool estimate_changed(const ol_estimate_input_t *in, const ol_estimate_t *base,
                             ol_estimate_input_t alt, ol_estimate_t *out)
{
  if (!base->calibrated_persistent && !base->calibrated_per_sample)
    return ol_estimate(&alt, out, NULL);
  ol_estimate_input_t model_in = *in, model_alt = alt;
  model_in.measured_persistent = model_in.measured_per_sample = 0;
  model_in.from_peak = model_in.at_batch = 0;
  model_alt.measured_persistent = model_alt.measured_per_sample = 0;
  model_alt.from_peak = model_alt.at_batch = 0;
  ol_estimate_t m_base, m_alt;
  if (!ol_estimate(&model_in, &m_base, NULL) || !ol_estimate(&model_alt, &m_alt, NULL))
    return false;
  if (base->calibrated_per_sample && !m_base.activations_known && alt.precision != in->precision)
    return false; /* without a shape the model cannot say how activations move */
  alt.from_peak = alt.at_batch = 0;
  alt.measured_persistent = scale(base->persistent, m_alt.persistent, m_base.persistent);
  if (base->calibrated_per_sample)
    alt.measured_per_sample = scale(base->per_sample, m_alt.per_sample, m_base.per_sample);
  return ol_estimate(&alt, out, NULL);
}

static void add_advice(ol_estimate_advice_t *advice, size_t *n, const char *what,
                       const ol_estimate_t *e)
{
  if (*n >= OL_ESTIMATE_MAX_ADVICE)
    return;
  ol_estimate_advice_t *a = &advice[(*n)++];
  snprintf(a->what, sizeof a->what, "%s", what);
  a->total = e->total;
  a->max_batch = e->max_batch;
  a->fits = e->fits;
}

static void try_change(const ol_estimate_input_t *in, const ol_estimate_t *base,
                       ol_estimate_input_t alt, const char *what, ol_estimate_advice_t *advice,
                       size_t *n)
{
  ol_estimate_t e;
  if (estimate_changed(in, base, alt, &e))
    add_advice(advice, n, what, &e);
}

static void advise_accumulation(const ol_estimate_input_t *in, const ol_estimate_t *base,
                                ol_estimate_advice_t *advice, size_t *n)
{
  if (base->max_batch == 0 || base->max_batch >= in->batch)
    return;
  ol_estimate_input_t alt = *in;
  alt.batch = base->max_batch;
  uint64_t steps = (in->batch + alt.batch - 1) / alt.batch;
  char what[160];
  snprintf(what, sizeof what,
           "gradient accumulation: batch %llu x %llu steps (effective %llu >= %llu)",
           (unsigned long long)alt.batch, (unsigned long long)steps,
           (unsigned long long)(alt.batch * steps), (unsigned long long)in->batch);
  try_change(in, base, alt, what, advice, n);
}

static void advise_zero(const ol_estimate_input_t *in, const ol_estimate_t *base,
                        ol_estimate_advice_t *advice, size_t *n)
{
  ol_estimate_input_t alt = *in;
  if (alt.gpus == 1)
    alt.gpus = 8; /* an illustration: one node of 8 */
  char what[160];
  for (unsigned stage = in->zero + 1; stage <= 3; stage += 1) {
    if (stage == 1 && in->optimizer == OL_OPTIM_SGD && !is_mixed(in->precision))
      continue; /* nothing to shard at stage 1 */
    alt.zero = stage;
    snprintf(what, sizeof what, "ZeRO stage %u / FSDP over %llu GPUs", stage,
             (unsigned long long)alt.gpus);
    try_change(in, base, alt, what, advice, n);
  }
}

/* The field guides' combination for large models: mixed precision,
 * checkpointing and ZeRO stage 2 together, where at least two apply. */
static void advise_combined(const ol_estimate_input_t *in, const ol_estimate_t *base,
                            ol_estimate_advice_t *advice, size_t *n)
{
  ol_estimate_input_t alt = *in;
  int changes = 0;
  char what[160] = "together:";
  if (in->precision == OL_PREC_FP32) {
    alt.precision = OL_PREC_MIXED_BF16;
    strcat(what, " mixed precision,");
    changes++;
  }
  if (!in->checkpointing && has_shape(in)) {
    alt.checkpointing = true;
    strcat(what, " checkpointing,");
    changes++;
  }
  if (in->zero < 2) {
    alt.zero = 2;
    alt.gpus = in->gpus > 1 ? in->gpus : 8;
    snprintf(what + strlen(what), sizeof what - strlen(what), " ZeRO stage 2 over %llu GPUs,",
             (unsigned long long)alt.gpus);
    changes++;
  }
  if (changes < 2)
    return;
  what[strlen(what) - 1] = '\0'; /* the last comma */
  try_change(in, base, alt, what, advice, n);
}

size_t ol_estimate_advise(const ol_estimate_input_t *in, const ol_estimate_t *base,
                          ol_estimate_advice_t *advice)
{
  size_t n = 0;
  ol_estimate_input_t alt = *in;
  if (in->precision == OL_PREC_FP32) {
    alt.precision = OL_PREC_MIXED_BF16;
    try_change(in, base, alt, "mixed precision (bf16 autocast, fp32 master weights)", advice,
               &n);
    alt = *in;
  }
  if (!in->checkpointing && has_shape(in)) {
    alt.checkpointing = true;
    try_change(in, base, alt, "activation checkpointing (every layer)", advice, &n);
    alt = *in;
  }
  advise_accumulation(in, base, advice, &n);
  if (in->optimizer == OL_OPTIM_ADAM || in->optimizer == OL_OPTIM_ADAMW) {
    alt.optimizer = OL_OPTIM_ADAM8BIT;
    try_change(in, base, alt, "8-bit Adam (bitsandbytes)", advice, &n);
    alt = *in;
  }
  advise_zero(in, base, advice, &n);
  advise_combined(in, base, advice, &n);
  if (!in->offload && optimizer_states(in->optimizer) + is_mixed(in->precision) > 0) {
    alt.offload = true;
    try_change(in, base, alt, "offload optimizer states to the CPU (ZeRO-Offload)", advice,
               &n);
  }
  return n;
}
