/* estimate.c: the memory model behind `oomlens estimate`, its calibration
 * from a measurement, the field guides' remedies re-estimated, and the
 * parsing of its command line (here, not in tools/, so the tests reach it).
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

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ol.h"
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

static bool check_input(const ol_estimate_input_t *in, ol_error_t *err)
{
  if (!in->params && !has_shape(in)) {
    ol_fail(err, OL_EXIT_USAGE, "give --params, or the shape (--hidden, --layers, --seq)");
    return false;
  }
  if (in->batch == 0 || in->gpus == 0 || in->capacity == 0) {
    ol_fail(err, OL_EXIT_USAGE, "batch, gpus and capacity must be at least 1");
    return false;
  }
  if (!(in->headroom >= 0 && in->headroom < 1)) {
    ol_fail(err, OL_EXIT_USAGE, "headroom must be at least 0 and less than 1");
    return false;
  }
  if (in->zero > 3) {
    ol_fail(err, OL_EXIT_USAGE, "ZeRO stage must be 0, 1, 2 or 3");
    return false;
  }
  if (in->eager_attention && has_shape(in) && !in->heads) {
    ol_fail(err, OL_EXIT_USAGE, "eager attention needs --heads");
    return false;
  }
  if ((in->from_peak != 0) != (in->at_batch != 0)) {
    ol_fail(err, OL_EXIT_USAGE, "--from-peak and --at-batch go together");
    return false;
  }
  if (in->from_peak && in->measured_per_sample) {
    ol_fail(err, OL_EXIT_USAGE, "give --measured-per-sample or --from-peak, not both");
    return false;
  }
  return true;
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
      ol_fail(err, OL_EXIT_USAGE, "--from-peak %llu is not above the persistent %llu bytes",
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
  if (!check_input(in, err))
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

/* ---- parsing ----------------------------------------------------------- */

/* Digits with an optional fraction, then the rest in *end. */
static bool parse_decimal(const char *text, double *value, const char **end)
{
  if (!isdigit((unsigned char)text[0]))
    return false;
  const char *p = text;
  while (isdigit((unsigned char)*p))
    p++;
  if (*p == '.') {
    p++;
    if (!isdigit((unsigned char)*p))
      return false;
    while (isdigit((unsigned char)*p))
      p++;
  }
  errno = 0;
  *value = strtod(text, NULL);
  *end = p;
  return errno == 0 && isfinite(*value);
}

/* value * multiplier as a whole number that fits in 63 bits. */
static bool whole(double value, double multiplier, uint64_t *out)
{
  double v = value * multiplier;
  if (v >= 9.2e18)
    return false;
  double rounded = floor(v + 0.5);
  if (fabs(v - rounded) > 1e-6 * (v > 1 ? v : 1))
    return false; /* "1.5" items, "0.3K": not a whole count */
  *out = (uint64_t)rounded;
  return true;
}

bool ol_estimate_parse_count(const char *text, uint64_t *out)
{
  double value;
  const char *end;
  if (!text || !parse_decimal(text, &value, &end))
    return false;
  double multiplier = 1;
  switch (*end) {
  case 'k': case 'K': multiplier = 1e3; end++; break;
  case 'm': case 'M': multiplier = 1e6; end++; break;
  case 'b': case 'B': multiplier = 1e9; end++; break;
  default: break;
  }
  return *end == '\0' && whole(value, multiplier, out);
}

bool ol_estimate_parse_bytes(const char *text, uint64_t *out)
{
  if (!text)
    return false;
  if (ol_parse_size(text, out))
    return true;
  double value;
  const char *end;
  if (!parse_decimal(text, &value, &end))
    return false;
  static const char suffixes[] = "KMGT";
  const char *s = *end ? strchr(suffixes, toupper((unsigned char)*end)) : NULL;
  if (!s)
    return false;
  end++;
  if (*end && strcasecmp(end, "ib") != 0 && strcasecmp(end, "b") != 0)
    return false;
  double v = ldexp(value, 10 * (int)(s - suffixes + 1));
  if (v >= 9.2e18)
    return false;
  *out = (uint64_t)floor(v + 0.5);
  return true;
}

static bool parse_name(const char *text, const char *const *names, int count, int *out)
{
  for (int i = 0; i < count; i++) {
    if (strcmp(text, names[i]) == 0) {
      *out = i;
      return true;
    }
  }
  return false;
}

static bool parse_headroom(const char *text, double *out)
{
  char *end;
  errno = 0;
  double v = strtod(text, &end);
  if (end == text || errno)
    return false;
  if (*end == '%') {
    v /= 100;
    end++;
  }
  if (*end || !(v >= 0 && v < 1))
    return false;
  *out = v;
  return true;
}

typedef enum { ARG_COUNT, ARG_BYTES, ARG_OTHER } arg_kind_t;

typedef struct count_flag {
  const char *name;
  arg_kind_t kind;
  size_t offset; /* of the uint64_t in ol_estimate_input_t */
} count_flag_t;

#define FLAG(name, kind, field) {name, kind, offsetof(ol_estimate_input_t, field)}
static const count_flag_t number_flags[] = {
  FLAG("--params", ARG_COUNT, params),
  FLAG("--batch", ARG_COUNT, batch),
  FLAG("--seq", ARG_COUNT, seq),
  FLAG("--hidden", ARG_COUNT, hidden),
  FLAG("--layers", ARG_COUNT, layers),
  FLAG("--heads", ARG_COUNT, heads),
  FLAG("--vocab", ARG_COUNT, vocab),
  FLAG("--gpus", ARG_COUNT, gpus),
  FLAG("--at-batch", ARG_COUNT, at_batch),
  FLAG("--capacity", ARG_BYTES, capacity),
  FLAG("--measured-persistent", ARG_BYTES, measured_persistent),
  FLAG("--measured-per-sample", ARG_BYTES, measured_per_sample),
  FLAG("--from-peak", ARG_BYTES, from_peak),
};
#undef FLAG

static const count_flag_t *number_flag(const char *name)
{
  for (size_t i = 0; i < sizeof number_flags / sizeof *number_flags; i++)
    if (strcmp(name, number_flags[i].name) == 0)
      return &number_flags[i];
  return NULL;
}

static bool set_number(ol_estimate_input_t *in, const count_flag_t *f, const char *value)
{
  uint64_t v;
  bool ok = f->kind == ARG_COUNT ? ol_estimate_parse_count(value, &v)
                                 : ol_estimate_parse_bytes(value, &v);
  if (!ok)
    return false;
  *(uint64_t *)((char *)in + f->offset) = v;
  return true;
}

static const char *const checkpoint_names[] = {"none", "full"};
static const char *const attention_names[] = {"flash", "eager"};
static const char *const gelu_names[] = {"fused", "eager"};
static const char *const zero_names[] = {"0", "1", "2", "3"};

static const char *const choice_flags[] = {"--precision", "--optimizer", "--checkpointing",
                                           "--attention", "--gelu", "--zero", "--headroom"};

static bool known_option(const char *name)
{
  int unused;
  return number_flag(name) ||
         parse_name(name, choice_flags, sizeof choice_flags / sizeof *choice_flags, &unused);
}

/* The options that take a word from a list. true if name is one. */
static bool set_choice(ol_estimate_input_t *in, const char *name, const char *value, bool *ok)
{
  int v = 0;
  if (strcmp(name, "--precision") == 0) {
    *ok = parse_name(value, precision_names, OL_PREC_COUNT, &v);
    in->precision = (ol_precision_t)v;
  } else if (strcmp(name, "--optimizer") == 0) {
    *ok = parse_name(value, optimizer_names, OL_OPTIM_COUNT, &v);
    in->optimizer = (ol_optimizer_t)v;
  } else if (strcmp(name, "--checkpointing") == 0) {
    *ok = parse_name(value, checkpoint_names, 2, &v);
    in->checkpointing = v;
  } else if (strcmp(name, "--attention") == 0) {
    *ok = parse_name(value, attention_names, 2, &v);
    in->eager_attention = v;
  } else if (strcmp(name, "--gelu") == 0) {
    *ok = parse_name(value, gelu_names, 2, &v);
    in->eager_gelu = v;
  } else if (strcmp(name, "--zero") == 0) {
    *ok = parse_name(value, zero_names, 4, &v);
    in->zero = (unsigned)v;
  } else if (strcmp(name, "--headroom") == 0) {
    *ok = parse_headroom(value, &in->headroom);
  } else {
    return false;
  }
  return true;
}

/* Applies one "--name value". 0, or -1 with a message. */
static int set_option(ol_estimate_input_t *in, const char *name, const char *value,
                      ol_error_t *err)
{
  bool ok = false;
  const count_flag_t *f = number_flag(name);
  if (f)
    ok = set_number(in, f, value);
  else if (!set_choice(in, name, value, &ok)) {
    ol_fail(err, OL_EXIT_USAGE, "unknown option %s", name);
    return -1;
  }
  if (!ok) {
    ol_fail(err, OL_EXIT_USAGE, "bad value '%s' for %s", value, name);
    return -1;
  }
  return 0;
}

int ol_estimate_parse_args(int argc, char **argv, ol_estimate_args_t *args, ol_error_t *err)
{
  *args = (ol_estimate_args_t){0};
  ol_estimate_defaults(&args->in);
  for (int i = 0; i < argc; i++) {
    char name[48];
    const char *arg = argv[i];
    const char *value = i + 1 < argc ? argv[i + 1] : NULL;
    bool inline_value = ol_split_option(&arg, &value, name, sizeof name);
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
      args->help = true;
      return 0;
    }
    if (strcmp(arg, "--json") == 0 && !inline_value) {
      args->json = true;
      continue;
    }
    if (strcmp(arg, "--offload") == 0 && !inline_value) {
      args->in.offload = true;
      continue;
    }
    if (strncmp(arg, "--", 2) != 0) {
      ol_fail(err, OL_EXIT_USAGE, "unexpected argument '%s'", arg);
      return -1;
    }
    if (!known_option(arg)) {
      ol_fail(err, OL_EXIT_USAGE, "unknown option %s", arg);
      return -1;
    }
    if (!value) {
      ol_fail(err, OL_EXIT_USAGE, "%s needs a value", arg);
      return -1;
    }
    i += !inline_value;
    if (set_option(&args->in, arg, value, err))
      return -1;
  }
  return 0;
}
