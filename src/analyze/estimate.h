/* estimate.h: `oomlens estimate`, a pre-flight estimate of a training job's
 * peak device memory from its shape (parameters, batch, sequence, hidden
 * size, layers, precision, optimizer, checkpointing, ZeRO), optionally
 * calibrated from one measurement. The model and its derivation are in the
 * comment at the top of estimate.c. Pure arithmetic: no CUDA, no I/O, no
 * command line (tools/estimate_cmd.c parses that). */
#ifndef OL_ESTIMATE_H
#define OL_ESTIMATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ol_error ol_error_t; /* core.h */

typedef enum ol_precision {
  OL_PREC_FP32,
  OL_PREC_FP16,
  OL_PREC_BF16,
  OL_PREC_MIXED_BF16, /* fp32 master weights, bf16 compute (torch.autocast) */
  OL_PREC_MIXED_FP16,
  OL_PREC_COUNT
} ol_precision_t;

typedef enum ol_optimizer {
  OL_OPTIM_SGD,
  OL_OPTIM_MOMENTUM,
  OL_OPTIM_ADAM,
  OL_OPTIM_ADAMW,
  OL_OPTIM_ADAM8BIT,
  OL_OPTIM_COUNT
} ol_optimizer_t;

/* What is known about the job. 0 means "not given" for every count. */
typedef struct ol_estimate_input {
  uint64_t params; /* 0: derived from the transformer's shape */
  uint64_t batch, seq, hidden, layers, heads, vocab;
  ol_precision_t precision;
  ol_optimizer_t optimizer;
  bool checkpointing;   /* full activation checkpointing, one per layer */
  bool eager_attention; /* attention scores kept (no flash / SDPA kernel) */
  bool eager_gelu;      /* tanh GELU written as Python ops (HF gelu_new) */
  bool offload;         /* optimizer states (and master weights) on the CPU */
  unsigned zero;        /* ZeRO stage 0-3 */
  uint64_t gpus;        /* >= 1 */
  uint64_t capacity;    /* device bytes */
  double headroom;      /* fraction of capacity kept free, 0 <= h < 1 */
  /* Calibration, 0 = not given. */
  uint64_t measured_persistent, measured_per_sample;
  uint64_t from_peak, at_batch;
} ol_estimate_input_t;

/* What can keep an input from giving an estimate: X(name, the model's
 * words). The model names no flags; the command line words each problem
 * in its own flags (tools/estimate_cmd.c). */
#define OL_ESTIMATE_PROBLEMS(X)                                                          \
  X(none, "")                                                                             \
  X(no_size, "give the parameter count, or the shape (hidden size, layers, sequence length)") \
  X(zero_count, "batch, gpus and capacity must be at least 1")                           \
  X(headroom, "headroom must be at least 0 and less than 1")                             \
  X(zero_stage, "ZeRO stage must be 0, 1, 2 or 3")                                       \
  X(no_heads, "eager attention needs the number of heads")                               \
  X(peak_without_batch, "a measured peak and the batch it was measured at go together")   \
  X(two_calibrations, "give the measured per-sample bytes or a measured peak, not both") \
  X(peak_not_above_persistent, "the measured peak is not above the persistent memory")

typedef enum ol_estimate_problem {
#define OL_ESTIMATE_PROBLEM_ENUM(name, words) OL_ESTIMATE_##name,
  OL_ESTIMATE_PROBLEMS(OL_ESTIMATE_PROBLEM_ENUM)
#undef OL_ESTIMATE_PROBLEM_ENUM
} ol_estimate_problem_t;

typedef struct ol_estimate {
  /* Persistent, per GPU after ZeRO sharding. */
  uint64_t weights, master, gradients, optimizer, persistent;
  /* Per sample: transformer layers, the logits and loss, embeddings. */
  uint64_t layers_per_sample, logits_per_sample, other_per_sample, per_sample;
  uint64_t activations;    /* per_sample * batch */
  uint64_t step_transient; /* optimizer step temporaries */
  uint64_t workspace;      /* outside the allocator: context, library workspaces */
  uint64_t peak_allocated; /* what torch.cuda.max_memory_allocated would say */
  uint64_t total;          /* peak_allocated + workspace: device memory needed */
  uint64_t usable;         /* capacity less headroom */
  bool fits;
  bool activations_known; /* a shape or a calibration gave per-sample bytes */
  uint64_t max_batch;     /* largest batch with total <= usable; 0 if none */
  bool calibrated_persistent, calibrated_per_sample;
  ol_estimate_problem_t problem; /* why there is no estimate, if there is none */
} ol_estimate_t;

/* Default input: batch 1, mixed-bf16, AdamW, flash attention, one GPU,
 * 139.8 GiB (the H200 here), 20% headroom. */
void ol_estimate_defaults(ol_estimate_input_t *in);

/* Fills out from in. false with the error in err (status OL_EXIT_USAGE;
 * NULL: not wanted) and out->problem set when the input cannot give an
 * estimate (no parameter count and no shape, headroom out of range, a
 * calibration larger than its peak...). */
bool ol_estimate(const ol_estimate_input_t *in, ol_estimate_t *out, ol_error_t *err);

/* One line of advice: a change the field guides suggest, and where it
 * would bring the estimate. */
typedef struct ol_estimate_advice {
  char what[160];
  uint64_t total, max_batch;
  bool fits;
} ol_estimate_advice_t;

#define OL_ESTIMATE_MAX_ADVICE 10

/* The field guides' remedies that apply to in, each estimated: mixed
 * precision, checkpointing, gradient accumulation, an 8-bit optimizer,
 * ZeRO, offload. A calibrated estimate scales its measured terms by the
 * model's ratio between the changed and the unchanged job. Returns how
 * many it wrote (at most OL_ESTIMATE_MAX_ADVICE). */
size_t ol_estimate_advise(const ol_estimate_input_t *in, const ol_estimate_t *base,
                          ol_estimate_advice_t *advice);

const char *ol_precision_name(ol_precision_t p);
const char *ol_optimizer_name(ol_optimizer_t o);

#endif
