/* test_first_step.c: a first-step OOM's batch figure from how far the
 * forward had got (core/first_step.c, core/oom.c).
 *
 * The corpus holds two first-step OOMs; these are the jobs it does not
 * hold: synthetic training steps fed through an account as a trace's
 * events, built like a real one (weights made layer by layer at load; a
 * forward whose layers each keep tensors for the backward and free their
 * temporaries; a head and loss; a backward that begins with the gradient
 * of what the loss read and frees each layer's tensors as it goes back,
 * making the weights' gradients; an optimizer whose state is made at the
 * first step's end; a second step). The truth is found as the corpus's
 * is, by bisection: the largest batch whose two steps fit the device.
 * Each case runs out at a chosen allocation of a larger batch, and the
 * figure must say what it claims: the bound is never below the truth, an
 * estimate is within one of it. Models whose layers differ, stacks too
 * short to be one, and loads that free as they go must keep the bound
 * and say the forward's progress is not known. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "core.h"

#define KiB ((uint64_t)1 << 10)
#define MiB ((uint64_t)1 << 20)
#define MAX_PER_LAYER 12
#define MAX_LAYERS 64
#define LM_ROW (2 * KiB) /* language_model's: a row of its width, 512 in fp32 */
#define LM_VOCAB 8192
#define LM_TOKENS 512

typedef struct model {
  int layers;
  uint64_t embed;                    /* the embedding's weights */
  uint64_t weights[MAX_PER_LAYER];   /* each layer's tensors, made at load */
  int weight_count;
  uint64_t kept[MAX_PER_LAYER];      /* a sample's tensors a layer keeps for the backward */
  int kept_count;
  uint64_t temp;                     /* a sample's temporary in each layer */
  uint64_t head;                     /* a sample's logits (the loss reads them) */
  int adam;                          /* optimizer state: this many copies of the weights */
  bool shrink;                       /* layer l keeps 1/(l+1) of the first's (unlike layers) */
  bool load_frees;                   /* each layer's weights made, cast, and the first freed */
  bool upcast;                       /* the logits made in 16 bits, the loss reads an fp32 copy */
  bool carry;                        /* each layer makes its output anew and frees its input's
                                        (not the first's): the first layer keeps one more */
  bool gather;                       /* FSDP: each layer's weights gathered for its forward
                                        (and, on the autograd thread, its backward), freed
                                        after it; the load's weights and the forward's
                                        gathers carry frames (the small gathers are not
                                        sampled) */
  bool autocast;                     /* each layer's forward asks for a 16-bit copy of each of
                                        its weights of 1 MiB or more, kept to the loss's end */
  int passes;                        /* the stack run this many times a forward, each on an
                                        input of its own (a siamese encoder's two); 0: once */
  uint64_t head_weights[6];          /* made at load after the stack: an untied head's matrix,
                                        a masked LM's transform and bias, a pooler... */
  int head_weight_count;
  int adapters;                      /* a LoRA's matrices of rank 8, made after the model */
  bool first_layer_tables;           /* the first layer asks for two tables the others do not
                                        (a rotary table, a mask), kept to the step's end */
  uint64_t side_input;               /* a sample's other input, moved in by the job's own
                                        call site before its forward (0: none) */
  uint64_t ids;                      /* a sample's input ids (0: 4 KiB, int64 ids of 512
                                        tokens) */
  int alternate;                     /* every alternate-th layer asks for a small temporary
                                        the others do not (a sliding window's mask, Gemma 2's
                                        every other layer): the forward repeats every
                                        alternate layers; 0: none */
  bool embed_frames;                 /* the embedding's output asked with a forward's frames
                                        (the tokens: first_step.c's logits_ahead) */
  const struct model *decoder;       /* a second stack run after this one (an
                                        encoder-decoder's): its layers, weights, kept and
                                        temporary; its weights made at load after these */
} model_t;

/* The job as an account sees it, allocation by allocation. */
typedef struct job {
  ol_account_t a;
  uint64_t t, next_addr;
  int64_t allocs, fail_at; /* fail the fail_at-th allocation (-1: never) */
  bool failed;
  uint64_t failed_size;
  int64_t capacity;        /* what fails it: allocated + request past it */
  int64_t logits_at, layer_at[MAX_LAYERS], backward_at[MAX_LAYERS]; /* the first step's */
} job_t;

static void job_init(job_t *j, int64_t fail_at)
{
  memset(j, 0, sizeof *j);
  ol_account_init(&j->a, OL_ACCOUNT_SITES);
  j->next_addr = 0x100000;
  j->fail_at = fail_at;
}

static void event_at(job_t *j, ol_trace_action_t action, uint64_t addr, uint64_t size,
                     const char *frames)
{
  ol_trace_event_t ev = {.time_us = ++j->t, .action = action, .addr = addr, .size = size,
                         .frames = frames, .frames_len = frames ? strlen(frames) : 0};
  ck_assert(ol_account_apply(&j->a, &ev, NULL));
}

static void event(job_t *j, ol_trace_action_t action, uint64_t addr, uint64_t size)
{
  event_at(j, action, addr, size, NULL);
}

/* 0 once the job has failed: nothing more is asked. frames: the call
 * site's (NULL: none). */
static uint64_t take_at(job_t *j, uint64_t size, const char *frames)
{
  if (j->failed)
    return 0;
  if (j->allocs++ == j->fail_at) {
    j->failed = true;
    j->failed_size = size;
    j->capacity = j->a.devices[0].stats.allocated_bytes[OL_POOL_ALL].current + (int64_t)size - 1;
    event_at(j, OL_TRACE_OOM, 0, size, frames);
    return 0;
  }
  uint64_t addr = j->next_addr;
  j->next_addr += size + 4096;
  event_at(j, OL_TRACE_ALLOC, addr, size, frames);
  return addr;
}

static uint64_t take(job_t *j, uint64_t size)
{
  return take_at(j, size, NULL);
}

static void give(job_t *j, uint64_t addr, uint64_t size)
{
  if (addr && !j->failed)
    event(j, OL_TRACE_FREE_COMPLETED, addr, size);
}

static const char moved_frames[] = "module.py:1097:<lambda>;module.py:965:_apply;train.py:9:main";

/* FSDP's gather of one layer's weights: a tensor of each weight's size,
 * those of 1 MiB or more with its frames (in the forward) or the autograd
 * thread's marker (in the backward), the rest not sampled. */
static void gather(job_t *j, const model_t *m, bool backward, uint64_t *out)
{
  static const char forward_frames[] =
    "torch/distributed/fsdp/_fully_shard/_fsdp_param.py:477:init_all_gather_outputs;"
    "torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py:378:wait_for_unshard;"
    "train.py:20:step";
  for (int i = 0; i < m->weight_count; i++)
    out[i] = take_at(j, m->weights[i],
                     backward ? "(thread pt_autograd_0)"
                     : m->weights[i] >= MiB ? forward_frames
                                            : "(not sampled: OOMLENS_STACK_SAMPLE)");
}

static void scatter(job_t *j, const model_t *m, const uint64_t *gathered)
{
  for (int i = 0; i < m->weight_count; i++)
    give(j, gathered[i], m->weights[i]);
}

static int passes_of(const model_t *m)
{
  return m->passes > 1 ? m->passes : 1;
}

/* The layers a forward runs: the stack's in each pass, then the
 * decoder's. */
static int all_layers(const model_t *m)
{
  return m->layers * passes_of(m) + (m->decoder ? m->decoder->layers : 0);
}

/* The stack whose layer the g-th the forward runs is, and its index
 * there. */
static const model_t *stack_of(const model_t *m, int g, int *l)
{
  int first = m->layers * passes_of(m);
  *l = g < first ? g % m->layers : g - first;
  return g < first ? m : m->decoder;
}

static uint64_t kept_size(const model_t *m, int layer, int i, int64_t batch)
{
  uint64_t bytes = m->kept[i] * (uint64_t)batch;
  return m->shrink ? bytes / (uint64_t)(layer + 1) : bytes;
}

static uint64_t weights_total(const model_t *m)
{
  uint64_t w = m->embed;
  for (int i = 0; i < m->head_weight_count; i++)
    w += m->head_weights[i];
  w += (uint64_t)m->adapters * 8 * LM_ROW;
  for (const model_t *s = m; s; s = s->decoder)
    for (int i = 0; i < s->weight_count; i++)
      w += s->weights[i] * (uint64_t)s->layers;
  return w;
}

static void load(job_t *j, const model_t *m)
{
  const char *frames = m->gather || m->embed_frames ? moved_frames : NULL;
  take_at(j, m->embed, frames);
  for (int l = 0; l < m->layers; l++)
    for (int i = 0; i < m->weight_count; i++) {
      if (!m->load_frees) {
        take_at(j, m->weights[i], frames);
        continue;
      }
      uint64_t wide = take(j, m->weights[i] * 2); /* made wide, cast, the wide one freed */
      take(j, m->weights[i]);
      give(j, wide, m->weights[i] * 2);
    }
  for (int i = 0; i < m->head_weight_count; i++)
    take_at(j, m->head_weights[i], frames);
  for (int i = 0; i < m->adapters; i++)
    take_at(j, 8 * LM_ROW, frames);
  if (m->decoder)
    for (int l = 0; l < m->decoder->layers; l++)
      for (int i = 0; i < m->decoder->weight_count; i++)
        take(j, m->decoder->weights[i]);
}

/* One training step: forward, loss, backward, the optimizer's step (its
 * state made at the first), zero_grad. */
static void step(job_t *j, const model_t *m, int64_t batch, bool first)
{
  static uint64_t kept[MAX_LAYERS][MAX_PER_LAYER], casts[MAX_LAYERS][MAX_PER_LAYER];
  uint64_t b = (uint64_t)batch;
  uint64_t ids = m->ids ? m->ids : 4 * KiB;
  uint64_t input = take(j, ids * b);
  uint64_t side = m->side_input ? take_at(j, m->side_input * b, "train.py:20:step") : 0;
  give(j, take(j, ids * b), ids * b); /* the embedding's temporary */
  static const char embedding_frames[] =
    "torch/nn/functional.py:2567:embedding;torch/nn/modules/sparse.py:189:forward;train.py:14:step";
  uint64_t hidden = take_at(j, m->kept[0] * b, m->embed_frames ? embedding_frames : NULL);
  uint64_t carried = 0;
  uint64_t gathered[MAX_PER_LAYER];
  uint64_t inputs[4] = {0}, hiddens[4] = {0}, pooled[4] = {0}, tables[2] = {0};
  for (int g = 0; g < all_layers(m); g++) {
    int l;
    const model_t *s = stack_of(m, g, &l);
    if (s == m && l == 0 && g > 0) { /* another pass: the last one's pooled output (BERT's
                                      * pooler), then its own input's embedding, as the first */
      pooled[g / m->layers] = take(j, 16 * KiB * b);
      inputs[g / m->layers] = take(j, 4 * KiB * b);
      give(j, take(j, 4 * KiB * b), 4 * KiB * b);
      hiddens[g / m->layers] = take(j, m->kept[0] * b);
    }
    if (first)
      j->layer_at[g] = j->allocs;
    if (s->gather)
      gather(j, s, false, gathered);
    for (int i = 0; s->autocast && i < s->weight_count; i++)
      casts[g][i] = s->weights[i] >= MiB ? take(j, s->weights[i] / 2) : 0;
    if (g == 0 && m->first_layer_tables) /* a rotary table and a mask, made in the first */
      tables[0] = take(j, 2 * KiB * b), tables[1] = take(j, 3 * KiB * b);
    if (s->alternate && l % s->alternate == s->alternate - 1)
      give(j, take(j, 512), 512);
    for (int i = 0; i < s->kept_count; i++) {
      kept[g][i] = take(j, kept_size(s, l, i, batch));
      if (i == 0)
        give(j, take(j, s->temp * b), s->temp * b);
    }
    if (s->gather)
      scatter(j, s, gathered);
    if (m->carry) {
      uint64_t out = take(j, m->kept[0] * b);
      if (carried)
        give(j, carried, m->kept[0] * b);
      carried = out;
    }
  }
  if (carried)
    give(j, carried, m->kept[0] * b);
  /* under autocast the head's logits are half the size, and the loss
   * casts them to fp32 first: the copy, then its log-softmax */
  uint64_t logits16 = m->upcast ? take(j, m->head / 2 * b) : 0;
  if (first)
    j->logits_at = j->allocs;
  uint64_t logits = take(j, m->head * b);
  uint64_t log_probs = take(j, m->head * b);
  /* backward: the loss's gradient first, all the forward kept still live;
   * then each layer's, from the last: the gradient of its largest tensor
   * and a temporary while its own tensors are live, its weights'
   * gradients made, its tensors freed */
  for (int g = 0; m->autocast && g < all_layers(m); g++) { /* the autocast region ends */
    int l;
    const model_t *s = stack_of(m, g, &l);
    for (int i = 0; i < s->weight_count; i++)
      if (s->weights[i] >= MiB)
        give(j, casts[g][i], s->weights[i] / 2);
  }
  uint64_t grad = take(j, m->head * b);
  give(j, log_probs, m->head * b);
  give(j, logits, m->head * b);
  give(j, grad, m->head * b);
  if (m->upcast)
    give(j, logits16, m->head / 2 * b);
  uint64_t grads[MAX_LAYERS][MAX_PER_LAYER];
  for (int g = all_layers(m) - 1; g >= 0; g--) {
    int l;
    const model_t *s = stack_of(m, g, &l);
    if (first)
      j->backward_at[g] = j->allocs;
    uint64_t largest = 0;
    for (int i = 0; i < s->kept_count; i++)
      largest = kept_size(s, l, i, batch) > largest ? kept_size(s, l, i, batch) : largest;
    if (s->gather)
      gather(j, s, true, gathered);
    uint64_t layer_grad = take(j, largest);
    give(j, take(j, s->temp * b), s->temp * b);
    for (int i = 0; i < s->weight_count; i++)
      grads[g][i] = take(j, s->weights[i]);
    if (s->gather)
      scatter(j, s, gathered);
    for (int i = 0; i < s->kept_count; i++)
      give(j, kept[g][i], kept_size(s, l, i, batch));
    give(j, layer_grad, largest);
  }
  give(j, hidden, m->kept[0] * b);
  give(j, input, ids * b);
  give(j, side, m->side_input * b);
  give(j, tables[0], 2 * KiB * b);
  give(j, tables[1], 3 * KiB * b);
  for (int p = 1; p < passes_of(m); p++) {
    give(j, hiddens[p], m->kept[0] * b);
    give(j, pooled[p], 16 * KiB * b);
    give(j, inputs[p], 4 * KiB * b);
  }
  for (int n = 0; first && n < m->adam; n++)
    take(j, weights_total(m));
  for (int g = 0; g < all_layers(m); g++) {
    int l;
    const model_t *s = stack_of(m, g, &l);
    for (int i = 0; i < s->weight_count; i++)
      give(j, grads[g][i], s->weights[i]);
  }
}

static void run(job_t *j, const model_t *m, int64_t batch)
{
  load(j, m);
  step(j, m, batch, true);
  step(j, m, batch, false);
}

static int64_t peak_at(const model_t *m, int64_t batch)
{
  job_t j;
  job_init(&j, -1);
  run(&j, m, batch);
  int64_t peak = j.a.devices[0].stats.allocated_bytes[OL_POOL_ALL].peak;
  ol_account_free(&j.a);
  return peak;
}

/* The largest batch whose two steps fit: the bisection's truth. */
static int64_t truth_of(const model_t *m, int64_t capacity, int64_t below)
{
  int64_t fits = 0;
  for (int64_t b = 1; b < below && peak_at(m, b) <= capacity; b++)
    fits = b;
  return fits;
}

/* The job at batch, run out at its allocation where(j) (an index a dry
 * run found), diagnosed as the live job and replay would. */
typedef int64_t (*where_fn)(const job_t *dry, const model_t *m);

typedef struct outcome {
  ol_oom_record_t record;
  ol_first_step_figure_t figure;
  int64_t truth;
} outcome_t;

static outcome_t run_out_as(const model_t *m, int64_t batch, where_fn where, const char *cls)
{
  job_t dry, j;
  job_init(&dry, -1);
  run(&dry, m, batch);
  job_init(&j, where(&dry, m));
  ol_account_free(&dry.a);
  run(&j, m, batch);
  ck_assert(j.failed);
  outcome_t o;
  ol_oom_record_init(&o.record, j.failed_size);
  o.record.capacity = (uint64_t)j.capacity;
  o.record.external = 0;
  o.record.batch = batch;
  ol_account_oom_figures(&j.a, 0, &o.record);
  ck_assert_int_eq(o.record.iterations, 0);
  ck_assert_str_eq(ol_oom_class_name(ol_oom_classify(&o.record)), cls);
  ol_oom_first_step_figure(&o.record, &o.figure);
  o.truth = truth_of(m, j.capacity, batch);
  ol_account_free(&j.a);
  return o;
}

static outcome_t run_out(const model_t *m, int64_t batch, where_fn where)
{
  return run_out_as(m, batch, where, "activations");
}

/* At the fp32 copy of 16-bit logits: its log-softmax not yet asked. */
static int64_t at_logits(const job_t *dry, const model_t *m)
{
  (void)m;
  return dry->logits_at;
}

static int64_t at_log_probs(const job_t *dry, const model_t *m)
{
  (void)m;
  return dry->logits_at + 1;
}

static int64_t in_a_third_of_the_stack(const job_t *dry, const model_t *m)
{
  return dry->layer_at[m->layers / 3] + 1;
}

static int64_t at_a_layers_start(const job_t *dry, const model_t *m)
{
  return dry->layer_at[m->layers / 2];
}

static int64_t in_the_backward(const job_t *dry, const model_t *m)
{
  return dry->backward_at[m->layers / 2] + 2;
}

static int64_t in_the_second_layer(const job_t *dry, const model_t *m)
{
  (void)m;
  return dry->layer_at[1] + 2;
}

/* The bound is never below the truth; a bound that counts the layers not
 * yet run is tighter than what was held alone. */
static void check_bound(const outcome_t *o)
{
  ck_assert(o->figure.bound.need_is_lower_bound);
  ck_assert_msg(o->truth <= o->figure.bound.fits, "at most %lld by the figure, %lld fits",
                (long long)o->figure.bound.fits, (long long)o->truth);
}

static void check_estimate(const outcome_t *o)
{
  const ol_first_step_figure_t *f = &o->figure;
  ck_assert_msg(o->truth >= 1, "no batch fits: the case says nothing");
  ck_assert(f->estimated);
  ck_assert_msg(f->low.fits <= o->truth + 1 && o->truth <= f->high.fits + 1 &&
                  f->low.fits_headroom <= o->truth,
                "about %lld to %lld (%lld with headroom) by the figure, %lld fits",
                (long long)f->low.fits, (long long)f->high.fits,
                (long long)f->low.fits_headroom, (long long)o->truth);
}

/* A transformer-like stack: like layers, a large head. */
static model_t stack(int layers, int adam)
{
  return (model_t){.layers = layers, .embed = 40 * MiB,
                   .weights = {3 * KiB, 3 * KiB, 7 * MiB, 9 * KiB, 2 * MiB, 3 * KiB,
                               9 * MiB, 9 * MiB},
                   .weight_count = 8,
                   .kept = {3 * MiB, 9 * MiB, 3 * MiB, 12 * MiB, 12 * MiB},
                   .kept_count = 5, .temp = 6 * MiB, .head = 24 * MiB, .adam = adam};
}

/* The same with a classifier's head (a few logits a sample): the
 * backward's peak is then a layer's, not the head's. */
static model_t classifier(int layers, int adam)
{
  model_t m = stack(layers, adam);
  m.head = 64 * KiB;
  return m;
}

/* An encoder-decoder: a stack of like layers, then a second of other
 * layers (cross-attention beside self-attention) over fewer positions. */
static model_t encoder_decoder(int layers, const model_t *decoder)
{
  model_t m = stack(layers, 2);
  m.decoder = decoder;
  return m;
}

static model_t decoder_stack(int layers)
{
  return (model_t){.layers = layers,
                   .weights = {3 * KiB, 3 * KiB, 7 * MiB, 9 * KiB, 2 * MiB, 3 * KiB, 7 * MiB,
                               2 * MiB, 9 * MiB, 5 * MiB},
                   .weight_count = 10,
                   .kept = {1 * MiB, 3 * MiB, 1 * MiB, 4 * MiB, 4 * MiB, 5 * MiB},
                   .kept_count = 6, .temp = 2 * MiB};
}

/* Past the first stack the forward runs (its decoder's, or its second
 * pass's layers): in the first layer after it, and in the third. */
static int64_t just_past_the_stack(const job_t *dry, const model_t *m)
{
  return dry->layer_at[m->layers] + 1;
}

static int64_t three_layers_past_the_stack(const job_t *dry, const model_t *m)
{
  return dry->layer_at[m->layers + 2] + 2;
}

/* Run out at each of wheres, the step is not read as at its head: the
 * figure is the bound, and it holds. */
static void check_past_the_stack(const model_t *m, int64_t batch, const where_fn *wheres,
                                 size_t count, size_t case_index)
{
  for (size_t w = 0; w < count; w++) {
    outcome_t o = run_out(m, batch, wheres[w]);
    ck_assert_msg(o.record.first_step.stage != OL_FIRST_STEP_HEAD,
                  "case %zu at %zu: read as the head", case_index, w);
    ck_assert(!o.figure.estimated);
    check_bound(&o);
  }
}

/* Where the load made two stacks of unlike layers (an encoder-decoder:
 * T5, BART, Whisper), the end of the first the forward ran is not the
 * end of the forward: the decoder's layers come after it. Read as the
 * head, the figure was an estimate that left the decoder out (fits above
 * the truth). Inside the first stack the layers not yet run of it are
 * still counted in the bound; past it, the bound is what was held. */
START_TEST(after_an_encoders_stack_its_decoder_is_still_to_come)
{
  static const struct {
    int encoder, decoder;
    int64_t batch;
  } cases[] = {{12, 12, 48}, {6, 6, 64}, {12, 6, 48}, {6, 12, 64}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    model_t dec = decoder_stack(cases[i].decoder);
    model_t m = encoder_decoder(cases[i].encoder, &dec);
    const where_fn past_it[] = {just_past_the_stack, three_layers_past_the_stack, at_log_probs};
    check_past_the_stack(&m, cases[i].batch, past_it, sizeof past_it / sizeof *past_it, i);
    /* inside the encoder: its layers not yet run are counted where the
     * fewer layers of the two stacks leave some (12 and 12, 6 and 6) */
    outcome_t o = run_out(&m, cases[i].batch, in_a_third_of_the_stack);
    check_bound(&o);
    if (cases[i].encoder > cases[i].decoder)
      continue;
    ck_assert_int_eq(o.record.first_step.stage, OL_FIRST_STEP_LAYERS);
    ck_assert_int_eq(o.record.first_step.stacks, 2);
    ck_assert(o.record.first_step.rest > 0);
    ol_buf_t text = {0};
    ol_oom_explain(&text, &o.record, OL_OOM_activations, NULL, NULL);
    ck_assert_msg(strstr(text.data, "two stacks of like layers (an encoder-decoder)"), "%s",
                  text.data);
    ol_buf_free(&text);
  }
}
END_TEST

/* A siamese encoder runs its stack twice a forward, once on each input:
 * the end of the first pass is not the end of the forward, and the
 * layers of the second pass, which repeat the stack's, say so. */
START_TEST(a_second_pass_of_the_stack_is_no_head)
{
  static const struct {
    int layers;
    int64_t batch;
  } cases[] = {{12, 24}, {6, 40}, {24, 12}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    model_t m = classifier(cases[i].layers, 2);
    m.passes = 2;
    const where_fn in_it[] = {just_past_the_stack, three_layers_past_the_stack};
    check_past_the_stack(&m, cases[i].batch, in_it, sizeof in_it / sizeof *in_it, i);
  }
}
END_TEST

/* Stacks run out after their layers: 4 to 48 layers, with and without
 * Adam's state, at batches 7 to 40. */
typedef struct stack_case {
  int layers, adam;
  int64_t batch;
} stack_case_t;

static const stack_case_t stacks_at_head[] = {{12, 2, 8}, {24, 2, 7}, {6, 0, 40}, {48, 2, 12}};

START_TEST(after_the_stack_the_figure_is_an_estimate_within_one)
{
  static const struct {
    int layers, adam;
    int64_t batch;
  } cases[] = {{12, 2, 8}, {24, 2, 7}, {6, 0, 40}, {32, 1, 6}, {4, 2, 100}, {48, 2, 12}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    for (int head = 0; head < 2; head++) {
      model_t m = head ? classifier(cases[i].layers, cases[i].adam)
                       : stack(cases[i].layers, cases[i].adam);
      outcome_t o = run_out(&m, cases[i].batch, at_log_probs);
      ck_assert_int_eq(o.record.first_step.stage, OL_FIRST_STEP_HEAD);
      ck_assert_int_eq(o.record.first_step.layers, cases[i].layers);
      ck_assert(!o.record.first_step.loss_upcast);
      check_bound(&o);
      check_estimate(&o);
    }
  }
}
END_TEST

/* Out at its fp32 logits or at their log-softmax, the step needed the
 * same: the estimate counts the loss's tensors from those asked already
 * (first_step.c's logits_asks). It counted two more beside what was held
 * either way, one tensor short at the logits (the corpus's ddp_batch, out
 * at its logits, was about 5 to 6 where gpt2_batch, the same model, batch
 * and cap out at its log-softmax, was 5 to 6 with a logits tensor more
 * held). */
START_TEST(out_at_the_logits_or_their_log_softmax_the_estimate_is_the_same)
{
  for (size_t i = 0; i < sizeof stacks_at_head / sizeof *stacks_at_head; i++) {
    const stack_case_t *c = &stacks_at_head[i];
    model_t m = stack(c->layers, c->adam);
    m.head = 64 * MiB; /* a large vocabulary: the loss's tensors are the peak */
    outcome_t at = run_out(&m, c->batch, at_logits);
    outcome_t after = run_out(&m, c->batch, at_log_probs);
    ck_assert_int_eq(at.record.first_step.logits_asks, 1);
    ck_assert_int_eq(after.record.first_step.logits_asks, 2);
    /* the same step, on the device each ran out on: the need the same */
    ck_assert_int_eq(at.figure.low.need, after.figure.low.need);
    ck_assert_int_eq(at.figure.high.need, after.figure.high.need);
    check_estimate(&at);
    check_estimate(&after);
  }
}
END_TEST

/* Logits made in 16 bits and cast to fp32 for the loss (autocast, bf16
 * weights): the job runs out at the copy, before its log-softmax, so one
 * more tensor of the copy's size is still to come before the backward's.
 * Read as plain fp32 logits the estimate was too high (held-out
 * ckpt_batch on the H200: 18-20 where 14 fit). */
START_TEST(a_loss_that_casts_16_bit_logits_counts_the_copy_and_its_log_softmax)
{
  static const struct {
    int layers, adam;
    int64_t batch;
  } cases[] = {{12, 2, 8}, {24, 2, 7}, {6, 0, 40}, {32, 1, 6}, {48, 2, 12}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    model_t m = stack(cases[i].layers, cases[i].adam);
    m.upcast = true;
    m.head = 64 * MiB; /* a large vocabulary: the loss's tensors are the peak */
    outcome_t o = run_out(&m, cases[i].batch, at_logits);
    ck_assert_int_eq(o.record.first_step.stage, OL_FIRST_STEP_HEAD);
    ck_assert(o.record.first_step.loss_upcast);
    check_bound(&o);
    check_estimate(&o);
  }
}
END_TEST

/* At the 16-bit logits themselves: where only a loss's fp32 copy of
 * them was to tell the upcast (a_loss_that_casts_16_bit_logits...), a job
 * out at the logits had one or two more logits counted, where the copy,
 * its log-softmax and their gradient, each twice the logits' size, are to
 * come (held-out qwen_small_bf16_at_head on an H100: "about 7 to 10"
 * where 5 fits). Weights in 16 bits say the logits are: a layer's width
 * in bytes (its norm) squared is twice its square projection's bytes. */
static int64_t at_16_bit_logits(const job_t *dry, const model_t *m)
{
  (void)m;
  return dry->logits_at - 1;
}

/* The estimate's words name the 16 bits and the sizes in their places:
 * "to 13.04 GiB (the logits are in 16 bits, as the weights are: ..." (the
 * first build of these words swapped the two). */
static void check_words_of_16_bits(const ol_oom_record_t *r, const char *why)
{
  ol_buf_t text = {0};
  ol_oom_explain(&text, r, OL_OOM_activations, NULL, NULL);
  char want[160];
  snprintf(want, sizeof want, "iB (the logits are in 16 bits, %s: a loss that casts", why);
  ck_assert_msg(strstr(text.data, want), "%s", text.data);
  ol_buf_free(&text);
}

START_TEST(logits_of_16_bit_weights_count_the_loss_s_fp32_copy)
{
  static const struct {
    int layers, adam;
    int64_t batch;
  } cases[] = {{12, 2, 8}, {24, 2, 7}, {6, 0, 40}, {32, 1, 6}, {48, 2, 12}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    model_t m = stack(cases[i].layers, cases[i].adam);
    m.weights[2] = 3 * KiB * 3 * KiB / 2; /* width 1536 in bf16: its norm 3 KiB, D x D */
    m.upcast = true;
    m.head = 64 * MiB;
    outcome_t o = run_out(&m, cases[i].batch, at_16_bit_logits);
    ck_assert_int_eq(o.record.first_step.stage, OL_FIRST_STEP_HEAD);
    ck_assert_int_eq(o.record.first_step.weight_element, 2);
    ck_assert(!o.record.first_step.loss_upcast);
    check_bound(&o);
    check_estimate(&o);
    check_words_of_16_bits(&o.record, "as the weights are");
  }
  /* fp32 weights (no square of the width's bytes) read no 16 bits */
  model_t fp32 = stack(12, 2);
  outcome_t o = run_out(&fp32, 8, at_log_probs);
  ck_assert_int_ne(o.record.first_step.weight_element, 2);
  ck_assert(!o.record.first_step.weights_cast);
}
END_TEST

/* fp32 weights under autocast: its matrix products read 16-bit copies
 * of the weights, which the forward asks for at half their size, and the
 * logits come in 16 bits as under 16-bit weights. */
START_TEST(logits_under_autocast_count_the_loss_s_fp32_copy)
{
  for (size_t i = 0; i < sizeof stacks_at_head / sizeof *stacks_at_head; i++) {
    const stack_case_t *c = &stacks_at_head[i];
    model_t m = stack(c->layers, c->adam);
    m.autocast = true;
    m.upcast = true;
    m.head = 64 * MiB;
    outcome_t o = run_out(&m, c->batch, at_16_bit_logits);
    ck_assert_int_eq(o.record.first_step.stage, OL_FIRST_STEP_HEAD);
    ck_assert(o.record.first_step.weights_cast);
    ck_assert_int_ne(o.record.first_step.weight_element, 2);
    check_bound(&o);
    check_estimate(&o);
    check_words_of_16_bits(&o.record, "made from autocast's 16-bit copies of the weights");
  }
}
END_TEST

START_TEST(inside_the_stack_the_rest_of_it_is_counted_in_the_bound)
{
  static const struct {
    int layers;
    int64_t batch;
  } cases[] = {{12, 16}, {24, 9}, {36, 40}, {9, 64}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    model_t m = stack(cases[i].layers, 2);
    outcome_t at_start = run_out(&m, cases[i].batch, at_a_layers_start);
    ck_assert_int_eq(at_start.record.first_step.stage, OL_FIRST_STEP_LAYERS);
    check_bound(&at_start);
    outcome_t o = run_out(&m, cases[i].batch, in_a_third_of_the_stack);
    ck_assert_int_eq(o.record.first_step.stage, OL_FIRST_STEP_LAYERS);
    ck_assert_int_eq(o.record.first_step.layers, cases[i].layers);
    ck_assert_msg(o.truth >= 1, "no batch fits: the case says nothing");
    ck_assert(o.record.first_step.rest > 0);
    check_bound(&o);
    ck_assert(!o.figure.estimated);
    /* tighter than what the step held alone */
    ol_oom_record_t held = o.record;
    held.first_step.stage = OL_FIRST_STEP_UNKNOWN;
    ol_first_step_figure_t plain;
    ol_oom_first_step_figure(&held, &plain);
    ck_assert_int_lt(o.figure.bound.fits, plain.bound.fits);
  }
}
END_TEST

/* A language model of width 512 in fp32 (a row of its width 2 KiB, a
 * square 1 MiB), a vocabulary of 8192 (its embedding 16 MiB), 512 tokens a
 * sample: each layer a norm, an attention's projections (one of them
 * square) and an MLP; each sample's hidden state 1 MiB, its logits 16 MiB
 * (a token's row of the vocabulary), its ids 4 KiB (8 bytes a token). The
 * embedding's output is asked with a forward's frames, as a live job's
 * sampled call site names it. The head is the embedding (tied). */

static model_t language_model(int layers, int adam)
{
  return (model_t){.layers = layers, .embed = LM_VOCAB * LM_ROW,
                   .weights = {LM_ROW, LM_ROW, 3 * MiB, 3 * LM_ROW, 1 * MiB, LM_ROW, LM_ROW,
                               LM_ROW, 4 * MiB, 4 * LM_ROW, 4 * MiB, LM_ROW},
                   .weight_count = 12,
                   .kept = {LM_TOKENS * LM_ROW, 3 * MiB, 1 * MiB, 4 * MiB, 4 * MiB},
                   .kept_count = 5, .temp = 2 * MiB,
                   .head = (uint64_t)LM_TOKENS * LM_VOCAB * 4, .adam = adam,
                   .embed_frames = true};
}

static const stack_case_t lms_inside[] = {{12, 2, 64}, {24, 2, 48}, {6, 0, 96}, {32, 1, 40},
                                          {16, 2, 80}};

/* Run out inside the stack of a language model, in a third of it and at
 * the start of its middle layer: its logits are read ahead, and the
 * figure is an estimate within one of the truth, where it was a bound
 * (held-out llama1b_bf16_batch: at most 26 where 10 fit). */
static void check_read_ahead(const model_t *m, int64_t batch, where_fn where)
{
  outcome_t o = run_out(m, batch, where);
  ck_assert_int_eq(o.record.first_step.stage, OL_FIRST_STEP_LAYERS);
  ck_assert_int_eq(o.record.first_step.logits_ahead, (int64_t)m->head * batch);
  check_bound(&o);
  check_estimate(&o);
  ck_assert_int_lt(o.figure.low.fits, o.figure.bound.fits);
  ol_buf_t text = {0}, json = {0};
  ol_oom_explain(&text, &o.record, OL_OOM_activations, NULL, NULL);
  ck_assert_msg(strstr(text.data, "After the stack its head makes a row of logits over the "
                                  "vocabulary for each token"), "%s", text.data);
  ck_assert_ptr_nonnull(strstr(text.data, "about batch"));
  ol_oom_json(&json, &o.record, OL_OOM_activations, NULL, NULL);
  char want[64];
  snprintf(want, sizeof want, "\"logits_ahead\": %lld", (long long)m->head * (long long)batch);
  ck_assert_msg(strstr(json.data, want), "%s", json.data);
  ol_buf_free(&text);
  ol_buf_free(&json);
}

START_TEST(inside_a_language_model_s_stack_its_logits_are_read_ahead)
{
  for (size_t i = 0; i < sizeof lms_inside / sizeof *lms_inside; i++) {
    const stack_case_t *c = &lms_inside[i];
    model_t tied = language_model(c->layers, c->adam);
    check_read_ahead(&tied, c->batch, in_a_third_of_the_stack);
    check_read_ahead(&tied, c->batch, at_a_layers_start);
    model_t untied = tied; /* its own head's matrix, as large as the embedding */
    untied.head_weights[0] = LM_ROW;
    untied.head_weights[1] = untied.embed;
    untied.head_weight_count = 2;
    check_read_ahead(&untied, c->batch, in_a_third_of_the_stack);
    model_t masked = tied; /* a masked LM: a transform, a norm, the decoder's bias */
    masked.head_weights[0] = 1 * MiB;
    masked.head_weights[1] = LM_ROW;
    masked.head_weights[2] = LM_ROW;
    masked.head_weights[3] = LM_ROW;
    masked.head_weights[4] = LM_VOCAB * 4;
    masked.head_weight_count = 5;
    check_read_ahead(&masked, c->batch, in_a_third_of_the_stack);
    model_t lora = untied; /* two adapters of rank 8 for each layer, made after the model */
    lora.adapters = 2 * c->layers;
    check_read_ahead(&lora, c->batch, in_a_third_of_the_stack);
    lora = tied;
    lora.adapters = 2 * c->layers;
    check_read_ahead(&lora, c->batch, in_a_third_of_the_stack);
    model_t side = tied; /* another input moved in before the forward, named by its site */
    side.side_input = 20 * KiB; /* 40 bytes a token: no ids or mask */
    check_read_ahead(&side, c->batch, in_a_third_of_the_stack);
  }
}
END_TEST

/* A layer whose sizes fit 16-bit weights as well as fp32: beside its
 * square projection of D by D fp32 (a^2/4 bytes for a row of a bytes) a
 * matrix of a^2/2, as a bf16 layer of twice the width holds its D by D
 * projections beside keys and values of D by D/2 (held-out
 * gemma2_softcap_bf16 and gemma3_bf16). The figure is read as fp32 (the
 * logits at its element) and said unsure; its range reaches the 16-bit
 * reading's high end, holds the truth, and the words say why it is
 * wide. */
START_TEST(a_layer_that_fits_16_bit_weights_too_widens_the_range)
{
  for (size_t i = 0; i < sizeof lms_inside / sizeof *lms_inside; i += 2) {
    const stack_case_t *c = &lms_inside[i];
    model_t sure = language_model(c->layers, c->adam);
    model_t unsure = sure;
    unsure.weights[2] = 2 * MiB; /* the projections' matrix: a^2/2 bytes */
    outcome_t o = run_out(&unsure, c->batch, in_a_third_of_the_stack);
    ck_assert_int_eq(o.record.first_step.weight_element, 4);
    ck_assert(o.record.first_step.element_unsure);
    check_read_ahead(&unsure, c->batch, in_a_third_of_the_stack);
    outcome_t s = run_out(&sure, c->batch, in_a_third_of_the_stack);
    ck_assert(!s.record.first_step.element_unsure);
    ck_assert_int_gt(o.figure.high.fits, s.figure.high.fits);
    ol_buf_t json = {0}, text = {0};
    ol_oom_json(&json, &o.record, OL_OOM_activations, NULL, NULL);
    ck_assert_msg(strstr(json.data, "\"element_unsure\": true"), "%s", json.data);
    ol_oom_explain(&text, &o.record, OL_OOM_activations, NULL, NULL);
    ck_assert_msg(strstr(text.data, "the range below holds both readings"), "%s", text.data);
    ol_buf_free(&json);
    ol_buf_free(&text);
    ol_oom_explain(&text, &s.record, OL_OOM_activations, NULL, NULL);
    ck_assert_ptr_null(strstr(text.data, "both readings"));
    ol_buf_free(&text);
  }
}
END_TEST

/* Out in the stack's last layer: every layer begun, none left, the
 * logits read ahead (where: a point in that layer). */
static void check_out_in_the_last_layer(const model_t *m, int64_t batch, where_fn where)
{
  outcome_t o = run_out(m, batch, where);
  ck_assert_int_eq(o.record.first_step.stage, OL_FIRST_STEP_LAYERS);
  ck_assert_int_eq(o.record.first_step.layers_done, m->layers);
  ck_assert_int_eq(o.record.first_step.rest, 0);
  check_bound(&o);
  check_read_ahead(m, batch, where);
}

/* Layers alike in their weights whose forwards differ by a small ask
 * every other layer, or every third (a sliding window's mask): the
 * forward repeats every two or three layers where the load repeats every
 * one, and its layers are counted as layers, not as periods (held-out
 * gemma2_softcap_bf16, out in its 12th of 16 layers, was read as 6 of 16
 * begun, each keeping two layers' bytes: "about 4 to 7", at most 9,
 * where 6 fit). Inside the stack and at its head. */
static int64_t at_the_last_layers_start(const job_t *dry, const model_t *m)
{
  return dry->layer_at[m->layers - 1];
}

static const stack_case_t lms_alternating[] = {{24, 2, 48}, {16, 2, 80}};

START_TEST(layers_whose_forwards_alternate_are_counted_as_layers)
{
  for (int alternate = 2; alternate <= 3; alternate++)
    for (size_t i = 0; i < sizeof lms_alternating / sizeof *lms_alternating; i++) {
      const stack_case_t *c = &lms_alternating[i];
      int read_from = 2 * alternate + 1; /* two periods run before the failure are read */
      model_t m = language_model(c->layers, c->adam);
      m.alternate = alternate;
      check_out_in_the_last_layer(&m, c->batch, at_the_last_layers_start);
      outcome_t o;
      if (c->layers / 2 >= read_from) {
        o = run_out(&m, c->batch, at_a_layers_start);
        ck_assert_int_eq(o.record.first_step.stage, OL_FIRST_STEP_LAYERS);
        ck_assert_int_eq(o.record.first_step.layers_done, c->layers / 2 + 1);
        check_read_ahead(&m, c->batch, at_a_layers_start);
      }
      if (c->layers / 3 >= read_from)
        check_read_ahead(&m, c->batch, in_a_third_of_the_stack);
      o = run_out(&m, c->batch, at_logits);
      ck_assert_int_eq(o.record.first_step.stage, OL_FIRST_STEP_HEAD);
      check_estimate(&o);
    }
}
END_TEST

/* A first layer whose first asks differ from the rest's (a rotary table
 * and a mask made there): the forward's repeat begins inside it, a
 * period's worth of asks after the forward's start, and the layer it
 * runs out in is counted one more than the stack has where it is the
 * last (held-out qwen_bf16_batch, out in its 24th of 24 layers: its
 * forward was not read, at most 15 where 5 fit; now read, its logits
 * ahead). */
static int64_t in_the_last_layer(const job_t *dry, const model_t *m)
{
  return dry->layer_at[m->layers - 1] + 3;
}

START_TEST(out_in_the_last_layer_after_a_first_unlike_the_rest)
{
  for (size_t i = 0; i < sizeof lms_inside / sizeof *lms_inside; i++) {
    const stack_case_t *c = &lms_inside[i];
    model_t m = language_model(c->layers, c->adam);
    m.first_layer_tables = true;
    check_out_in_the_last_layer(&m, c->batch, in_the_last_layer);
    check_read_ahead(&m, c->batch, in_a_third_of_the_stack);
  }
}
END_TEST

/* Read ahead, a figure whose low end keeps no batch with headroom (the
 * state to come counted at three times weights that outweigh the batch's
 * memory: a LoRA's frozen model, held-out lora_batch) is the bound, and
 * the words say so, not that an estimate follows. */
START_TEST(read_ahead_without_an_estimate_says_the_bound_is_given)
{
  model_t m = language_model(12, 2);
  m.weights[8] *= 16; /* its MLP's matrices, 64 MiB each: the norm and the square kept */
  m.weights[10] *= 16;
  /* the state to come may outweigh the device: the class waits for it
   * (undetermined); the paragraph of activations, as lora_batch's, is
   * asked for all the same */
  outcome_t o = run_out_as(&m, 16, in_a_third_of_the_stack, "undetermined");
  ck_assert_int_gt(o.record.first_step.logits_ahead, 0);
  ck_assert(!o.figure.estimated);
  check_bound(&o);
  ol_buf_t text = {0};
  ol_oom_explain(&text, &o.record, OL_OOM_activations, NULL, NULL);
  ck_assert_msg(strstr(text.data, "no batch keeps the headroom, so the figure below is the "
                                  "bound"), "%s", text.data);
  ck_assert_ptr_null(strstr(text.data, "counted in the estimate below"));
  ol_buf_free(&text);
}
END_TEST

/* A small model beside a large vocabulary: its embedding and untied head
 * outweigh its layers (held-out llama_vocab_batch: 8 layers of 512 beside
 * 128,256 tokens, its layers 16% of the load, and it was not read). The
 * stack's share is of the load less the vocabulary's tensors: read inside
 * its stack and at its logits. */
START_TEST(a_vocabulary_that_outweighs_the_layers_is_left_out_of_the_stack_s_share)
{
  model_t m = language_model(6, 2);
  m.embed *= 8; /* 65,536 tokens: 128 MiB, and the head as much again */
  m.head *= 8;
  m.head_weights[0] = LM_ROW;
  m.head_weights[1] = m.embed;
  m.head_weight_count = 2;
  check_read_ahead(&m, 512, in_a_third_of_the_stack);
  outcome_t o = run_out(&m, 16, at_log_probs);
  ck_assert_int_eq(o.record.first_step.stage, OL_FIRST_STEP_HEAD);
  check_bound(&o);
  check_estimate(&o);
}
END_TEST

/* Where the head is not a vocabulary's, or the tokens are not told,
 * nothing is read ahead and the figure stays the bound: a pooler and a
 * classifier after the stack (BERT's), a classifier's matrix alone
 * (GPT-2's for sequences), an embedding too narrow to be a vocabulary (a
 * ViT's positions), the embedding's output without frames (a job whose
 * frames are off), no ask of the tokens' int64 ids, a few narrow
 * matrices after the stack. */
START_TEST(a_head_of_another_kind_is_not_read_ahead)
{
  for (int kind = 0; kind < 6; kind++) {
    model_t m = language_model(12, 2);
    if (kind == 0) {
      m.head_weights[0] = 1 * MiB; /* a pooler, square */
      m.head_weights[1] = LM_ROW;
      m.head_weights[2] = 2 * LM_ROW; /* a classifier of two labels */
      m.head_weight_count = 3;
    } else if (kind == 1) {
      m.head_weights[0] = 5 * LM_ROW; /* five labels, no bias */
      m.head_weight_count = 1;
    } else if (kind == 2) {
      m.embed = 1024 * LM_ROW; /* twice the width: positions, not a vocabulary */
    } else if (kind == 3) {
      m.embed_frames = false;
    } else if (kind == 4) {
      m.ids = 2 * KiB; /* no int64 ids of the tokens read: the tokens not confirmed */
    } else {
      m.adapters = 4; /* fewer narrow matrices than layers: a classifier's, not adapters */
    }
    /* batch 12: 6144 tokens, of whose 8 bytes or fewer no adapter is a multiple */
    outcome_t o = run_out(&m, 12, in_a_third_of_the_stack);
    ck_assert_int_eq(o.record.first_step.stage, OL_FIRST_STEP_LAYERS);
    ck_assert_msg(o.record.first_step.logits_ahead == 0, "kind %d: %lld read ahead", kind,
                  (long long)o.record.first_step.logits_ahead);
    ck_assert(!o.figure.estimated);
    check_bound(&o);
  }
}
END_TEST

/* FSDP gathers each layer's weights for its forward: every size of the
 * layer's weights asked for in the forward's repeat, which was read as a
 * backward making gradients, and the forward not at all (held-out
 * fsdp2_batch on the H200: stage unknown, "at most 7" where 5 fits).
 * What was made as weights is not a gradient; the small gathers, not
 * sampled, weigh too little to make one. */
START_TEST(a_forward_that_gathers_its_weights_is_read)
{
  for (size_t i = 0; i < sizeof stacks_at_head / sizeof *stacks_at_head; i++) {
    const stack_case_t *c = &stacks_at_head[i];
    model_t m = stack(c->layers, c->adam);
    m.gather = true;
    outcome_t o = run_out(&m, c->batch, at_log_probs);
    ck_assert_int_eq(o.record.first_step.stage, OL_FIRST_STEP_HEAD);
    ck_assert_int_eq(o.record.first_step.layers, c->layers);
    check_bound(&o);
    check_estimate(&o);
  }
}
END_TEST

/* A stack whose first layer keeps one tensor more than the rest (each
 * layer's output made anew, its input's freed, but the first's input is
 * the embedding's, kept): the layers after the first are read (held-out
 * llama_gqa_batch, whose forward was not read for it: stage unknown). */
START_TEST(a_first_layer_that_keeps_more_is_left_out)
{
  model_t m = stack(12, 2);
  m.carry = true;
  outcome_t o = run_out(&m, 16, in_a_third_of_the_stack);
  ck_assert_int_eq(o.record.first_step.stage, OL_FIRST_STEP_LAYERS);
  ck_assert_int_eq(o.record.first_step.layers, 12);
  check_bound(&o);
}
END_TEST

/* Layers whose memory differs (a CNN's stages), a stack of two, a load
 * that frees as it goes, a failure before two layers were seen whole:
 * nothing is extrapolated, the bound is what was held, and it says so. */
START_TEST(unclear_shapes_keep_the_bound)
{
  model_t shrinking = stack(16, 1), short_stack = stack(2, 2), freeing = stack(12, 2);
  shrinking.shrink = true;
  freeing.load_frees = true;
  model_t early = stack(12, 2);
  /* weights that outweigh a sample's activations: the backward's layers,
   * each making its gradients, raise what is held as a forward's would */
  model_t heavy = stack(12, 0);
  for (int i = 0; i < heavy.weight_count; i++)
    heavy.weights[i] *= 16;
  /* Where the weights made before the first free (0.50 GB of 1.73 GB,
   * the embedding's most of it) with the gradients and Adam's moments a
   * first step may make, which timing does not tell from the batch's
   * memory, would leave no room for a batch, the class is not guessed without call sites (oom.c step_state_unseen);
   * the bound is given all the same. */
  const struct {
    const model_t *m;
    where_fn where;
    int64_t batch;
    const char *cls;
  } cases[] = {{&shrinking, in_a_third_of_the_stack, 12, "undetermined"},
               {&shrinking, at_log_probs, 12, "activations"},
               {&short_stack, at_log_probs, 12, "activations"},
               {&freeing, at_log_probs, 12, "activations"},
               {&early, in_the_second_layer, 80, "activations"},
               {&heavy, in_the_backward, 2, "undetermined"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    outcome_t o = run_out_as(cases[i].m, cases[i].batch, cases[i].where, cases[i].cls);
    ck_assert_msg(o.record.first_step.stage == OL_FIRST_STEP_UNKNOWN, "case %zu: stage %d", i,
                  (int)o.record.first_step.stage);
    ck_assert(!o.figure.estimated);
    check_bound(&o);
    ol_buf_t text = {0};
    ol_oom_explain(&text, &o.record, OL_OOM_activations, NULL, NULL);
    ck_assert_ptr_nonnull(strstr(text.data, "How far the forward had got cannot be told"));
    ck_assert_ptr_nonnull(strstr(text.data, "at most batch"));
    ol_buf_free(&text);
  }
}
END_TEST

/* Under PyTorch's cache the sizes are its segments', which repeat as its
 * cache likes: no stack is read from them, whatever the record holds. */
START_TEST(segments_read_no_stack)
{
  model_t m = stack(12, 2);
  outcome_t o = run_out(&m, 16, in_a_third_of_the_stack);
  ck_assert_int_eq(o.record.first_step.stage, OL_FIRST_STEP_LAYERS);
  ol_oom_record_t segments = o.record, held = o.record;
  segments.segments_only = true;
  held.first_step.stage = OL_FIRST_STEP_UNKNOWN;
  held.segments_only = true;
  ol_first_step_figure_t with, without;
  ol_oom_first_step_figure(&segments, &with);
  ol_oom_first_step_figure(&held, &without);
  ck_assert_int_eq(with.bound.fits, without.bound.fits);
  ol_buf_t json = {0};
  ol_oom_json(&json, &segments, OL_OOM_undetermined, NULL, NULL);
  ck_assert_ptr_nonnull(strstr(json.data, "\"first_step\": null"));
  ol_buf_free(&json);
}
END_TEST

/* The words say what the figure is: an estimate with its bound, or the
 * bound with the layers it counted; the JSON carries both. */
START_TEST(the_words_and_json_say_what_the_figure_is)
{
  model_t m = stack(12, 2);
  outcome_t o = run_out(&m, 8, at_log_probs);
  ol_buf_t text = {0}, json = {0};
  ol_oom_explain(&text, &o.record, OL_OOM_activations, NULL, NULL);
  ck_assert_ptr_nonnull(strstr(text.data, "All 12 layers of its stack"));
  ck_assert_ptr_nonnull(strstr(text.data, "about batch"));
  ck_assert_ptr_nonnull(strstr(text.data, "by what the step held"));
  ck_assert_ptr_null(strstr(text.data, " 0%"));
  ck_assert_ptr_null(strstr(text.data, " 0 steps"));
  ol_oom_json(&json, &o.record, OL_OOM_activations, NULL, NULL);
  ck_assert_ptr_nonnull(strstr(json.data, "\"batch_figure_is_estimate\": true"));
  ck_assert_ptr_nonnull(strstr(json.data, "\"batch_figure_is_bound\": false"));
  ck_assert_ptr_nonnull(strstr(json.data, "\"stage\": \"head\""));
  ol_buf_free(&text);
  ol_buf_free(&json);
  o.record.batch = 0; /* not given: shares of the current batch */
  text = (ol_buf_t){0};
  ol_oom_explain(&text, &o.record, OL_OOM_activations, NULL, NULL);
  ck_assert_ptr_nonnull(strstr(text.data, "About a batch of "));
  ck_assert_ptr_nonnull(strstr(text.data, "% of the current one fits"));
  ck_assert_ptr_null(strstr(text.data, " 0%"));
  ol_buf_free(&text);
  /* no log of the step read (a report from before, a step longer than
   * the log): nothing said of how far it got */
  o.record.first_step = (ol_first_step_t){.stage = OL_FIRST_STEP_UNKNOWN};
  o.record.batch = 8;
  text = (ol_buf_t){0};
  ol_oom_explain(&text, &o.record, OL_OOM_activations, NULL, NULL);
  ck_assert_ptr_null(strstr(text.data, "How far the forward"));
  ck_assert_ptr_nonnull(strstr(text.data, "at most batch"));
  ol_buf_free(&text);
  o = run_out(&m, 16, in_a_third_of_the_stack);
  text = (ol_buf_t){0};
  ol_oom_explain(&text, &o.record, OL_OOM_activations, NULL, NULL);
  ck_assert_ptr_nonnull(strstr(text.data, "of the 12 layers of its stack"));
  ck_assert_ptr_nonnull(strstr(text.data, "at most batch"));
  /* a stack's step may be inference (held-out infer_lm_batch, each layer
   * keeping its key/value cache): no loss or backward is said to come */
  ck_assert_msg(strstr(text.data, "what comes after the stack (its head and, if it trains, the "
                                  "loss and the backward) was never asked for"),
                "%s", text.data);
  ol_buf_free(&text);
}
END_TEST

/* The repeat finder, on sequences whose answer is plain. */
START_TEST(repeat_finder)
{
  static const struct {
    uint64_t s[16];
    size_t n, period, start, covered;
    bool found;
  } cases[] = {
    {{1, 2, 3, 1, 2, 3, 1, 2, 3}, 9, 3, 0, 9, true},
    {{9, 1, 2, 1, 2, 1, 2, 7}, 8, 2, 1, 6, true},
    {{5, 5, 5, 5}, 4, 1, 0, 4, true},
    {{1, 2, 3, 4, 5}, 5, 0, 0, 0, false},
    {{1, 2, 3, 1, 2, 4}, 6, 0, 0, 0, false},           /* one element alike is no repeat */
    {{4, 1, 2, 1, 2, 3, 1, 2, 3, 1, 2, 3}, 12, 3, 3, 9, true}, /* the longer span wins */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    size_t period = 0, start = 0, covered = 0;
    bool found = ol_first_step_repeat(cases[i].s, cases[i].n, 8, &period, &start, &covered);
    ck_assert_msg(found == cases[i].found, "case %zu", i);
    if (!found)
      continue;
    ck_assert_msg(period == cases[i].period && start == cases[i].start &&
                    covered == cases[i].covered,
                  "case %zu: period %zu start %zu covered %zu", i, period, start, covered);
  }
}
END_TEST

static Suite *first_step_suite(void)
{
  Suite *s = suite_create("first_step");
  TCase *t = tcase_create("figure");
  tcase_set_timeout(t, 120);
  tcase_add_test(t, repeat_finder);
  tcase_add_test(t, after_the_stack_the_figure_is_an_estimate_within_one);
  tcase_add_test(t, after_an_encoders_stack_its_decoder_is_still_to_come);
  tcase_add_test(t, a_second_pass_of_the_stack_is_no_head);
  tcase_add_test(t, out_at_the_logits_or_their_log_softmax_the_estimate_is_the_same);
  tcase_add_test(t, a_loss_that_casts_16_bit_logits_counts_the_copy_and_its_log_softmax);
  tcase_add_test(t, logits_of_16_bit_weights_count_the_loss_s_fp32_copy);
  tcase_add_test(t, logits_under_autocast_count_the_loss_s_fp32_copy);
  tcase_add_test(t, inside_the_stack_the_rest_of_it_is_counted_in_the_bound);
  tcase_add_test(t, inside_a_language_model_s_stack_its_logits_are_read_ahead);
  tcase_add_test(t, a_head_of_another_kind_is_not_read_ahead);
  tcase_add_test(t, a_layer_that_fits_16_bit_weights_too_widens_the_range);
  tcase_add_test(t, layers_whose_forwards_alternate_are_counted_as_layers);
  tcase_add_test(t, out_in_the_last_layer_after_a_first_unlike_the_rest);
  tcase_add_test(t, read_ahead_without_an_estimate_says_the_bound_is_given);
  tcase_add_test(t, a_vocabulary_that_outweighs_the_layers_is_left_out_of_the_stack_s_share);
  tcase_add_test(t, a_first_layer_that_keeps_more_is_left_out);
  tcase_add_test(t, a_forward_that_gathers_its_weights_is_read);
  tcase_add_test(t, unclear_shapes_keep_the_bound);
  tcase_add_test(t, the_words_and_json_say_what_the_figure_is);
  tcase_add_test(t, segments_read_no_stack);
  suite_add_tcase(s, t);
  return s;
}

int main(void)
{
  return ol_run_suite(first_step_suite());
}
