/* first_step.c: how far a job's first iteration had got when it ran out.
 *
 * A first-step OOM shows only part of what the step needs: what it held
 * when it failed. The rest of it was never asked for, so the batch figure
 * from it is an upper bound (oom.c). Where the allocation stream shows the
 * shape of the model, more can be said: a model built as one stack of
 * like layers (GPT-2, BERT, Llama, ViT: the same blocks, each made of the
 * same tensors) makes its weights in a pattern of sizes that repeats once
 * a layer at load, and its forward asks for a pattern that repeats once a
 * layer too, each layer keeping the same bytes for the backward. From how
 * many layers the forward had begun, the layers still to run are known,
 * and what they will keep; and when every layer had run, what is left of
 * the forward is its head and loss.
 *
 * Only what repeats exactly is read: the load's sizes (what was allocated
 * before the job's first free) must repeat three times or more over a
 * third of the load's bytes or more, the forward's repeat must keep the
 * same bytes each layer (within 1%), and neither it nor what follows the
 * stack may be making the weights' gradients (the backward has begun,
 * makes_gradients). A model whose layers differ
 * (ResNet's stages shrink their activations as they widen their weights),
 * a load that frees as it goes, or a first step longer than the log keeps
 * gives OL_FIRST_STEP_UNKNOWN, and the figure stays the bound it was: the
 * rest of a forward of unlike layers cannot be told from its beginning.
 *
 * The log is kept by the account (account.c) until an iteration is
 * found; it costs the hot path one predictable branch afterwards. */
#include <stdlib.h>
#include <string.h>

#include "core.h"

#define MAX_PERIOD 2048     /* allocations a layer: more than any model's layer asks for */
#define MIN_LAYERS 3        /* a stack: fewer repeats are not told from chance */
#define LOAD_SHARE 3        /* the stack holds a third of the load's bytes or more */
#define SAME_KEPT_PER_MILLE 10 /* each layer keeps the same bytes, within 1% */

static const char *const stage_names[] = {
  [OL_FIRST_STEP_UNKNOWN] = "unknown", [OL_FIRST_STEP_LAYERS] = "layers",
  [OL_FIRST_STEP_HEAD] = "head"};
#define STAGES (sizeof stage_names / sizeof *stage_names)

const char *ol_first_step_stage_name(ol_first_step_stage_t stage)
{
  return (unsigned)stage < STAGES ? stage_names[stage] : "unknown";
}

bool ol_first_step_stage_parse(const char *name, ol_first_step_stage_t *out)
{
  for (size_t i = 0; i < STAGES; i++)
    if (strcmp(name, stage_names[i]) == 0) {
      *out = (ol_first_step_stage_t)i;
      return true;
    }
  return false;
}

ol_first_step_log_t *ol_first_step_log_new(void)
{
  return calloc(1, sizeof(ol_first_step_log_t));
}

void ol_first_step_log_free(ol_first_step_log_t *log)
{
  free(log);
}

bool ol_first_step_repeat(const uint64_t *sizes, size_t n, size_t max_period, size_t *period,
                          size_t *start, size_t *covered)
{
  size_t best = 0;
  for (size_t p = 1; p <= max_period && 2 * p <= n; p++) {
    size_t run = 0;
    for (size_t i = 0; i + p < n; i++) {
      run = sizes[i] == sizes[i + p] ? run + 1 : 0;
      if (run >= p && run + p > best) { /* two copies at least */
        best = run + p;
        *period = p;
        *start = i + 1 - run;
      }
    }
  }
  *covered = best;
  return best > 0;
}

/* The device's allocated bytes just before the i-th logged allocation. */
static int64_t before(const ol_first_step_log_t *log, size_t i)
{
  return ol_sat_sub(log->after[i], (int64_t)log->size[i]);
}

/* The first allocation that came after a free: the load is what came
 * before it. 0: nothing was freed yet. */
static size_t first_after_free(const ol_first_step_log_t *log)
{
  for (size_t i = 1; i < log->count; i++)
    if (before(log, i) < log->after[i - 1])
      return i;
  return 0;
}

static uint64_t sum_of(const uint64_t *sizes, size_t from, size_t to)
{
  uint64_t sum = 0;
  for (size_t i = from; i < to; i++)
    sum = sum + sizes[i] < sum ? UINT64_MAX : sum + sizes[i];
  return sum;
}

/* The layers of the stack the weights were made in: the repeats, to the
 * nearest (a tensor or two alike at its ends, as a final norm like the
 * layers' own, match by chance), and those seen whole (what the bound
 * counts on); 0 when the load is not one stack of like layers. stacks: 2
 * where the load made a second stack of other layers beside it (an
 * encoder-decoder), whose forward runs one stack after the other; whole
 * is then the fewer layers of the two, what either has at least. */
typedef struct stack {
  int64_t layers, whole, stacks;
  size_t start, period, covered; /* one layer's weights: the load's sizes from start */
} stack_shape_t;

/* Another stack's share of the load: an encoder's weights beside its
 * decoder's are some two fifths of the model (T5, Whisper); a run of
 * like biases or norms outside the layers is far less. */
#define OTHER_STACK_SHARE 16

/* The longest repeat of the log's sizes in [from, to) as a stack: three
 * whole repeats or more of min_period tensors a layer or more, holding
 * a share-th of load_bytes or more; layers 0 where none. */
static stack_shape_t stack_in(const ol_first_step_log_t *log, size_t from, size_t to,
                              uint64_t load_bytes, uint64_t share, size_t min_period)
{
  size_t period, start, covered;
  if (to <= from ||
      !ol_first_step_repeat(log->size + from, to - from, MAX_PERIOD, &period, &start, &covered))
    return (stack_shape_t){.layers = 0};
  stack_shape_t s = {(int64_t)((covered + period / 2) / period), (int64_t)(covered / period), 1,
                     from + start, period, covered};
  if (period < min_period || s.whole < MIN_LAYERS ||
      sum_of(log->size, s.start, s.start + covered) < load_bytes / share)
    return (stack_shape_t){.layers = 0};
  return s;
}

/* The layers' width: the bytes of one element of their weights, 4 (fp32)
 * or 2 (bf16 or fp16), and of one row of the width (D elements), where a
 * layer holds a tensor of its width (a norm's weight, a bias) and a square
 * one of its width by its width (an attention's projection): a^2 = w * b
 * for sizes a = D*w and b = D*D*w. fp32 is taken where both fit (a width
 * read as fp32 is how it was before this was read), and said to be
 * unsure: a bf16 layer whose keys and values are D by D/2 (half as many
 * heads as its queries: Gemma's shapes) holds a tensor of a^2/4 bytes
 * beside its D by D ones of a^2/2, as an fp32 layer of D/2 by D matrices
 * would; the row's bytes are the same either way. Read as fp32 alone,
 * held-out gemma2_softcap_bf16 and gemma3_bf16 (bf16) had their truths in
 * range (5 to 7 where 6 fit, 6 to 8 where 7): the logits read at 4 bytes
 * are the size of a loss's fp32 copy of 16-bit ones; the 16-bit reading
 * adds the high end of a loss that keeps them 16-bit (oom.c's
 * read_as_16_bits). element 0 where none fits. A pair
 * alike by chance would take a layer of D*w bytes with one of exactly
 * D*D*w besides. */
typedef struct width {
  int64_t element;
  uint64_t row;
  bool unsure; /* element 4, and 2 fits too */
} width_t;

static width_t layer_width(const ol_first_step_log_t *log, stack_shape_t stack)
{
  width_t four = {0, 0, false}, two = {0, 0, false};
  for (size_t i = stack.start; i < stack.start + stack.period; i++)
    for (size_t j = stack.start; j < stack.start + stack.period; j++) {
      uint64_t a = log->size[i], b = log->size[j];
      if (b == 0)
        continue;
      if (b == ol_square_bytes(a, 4) && four.element == 0)
        four = (width_t){4, a, false};
      if (b == ol_square_bytes(a, 2) && two.element == 0)
        two = (width_t){2, a, false};
    }
  four.unsure = four.element != 0 && two.element != 0 && two.row == four.row;
  return four.element ? four : two;
}

static int64_t in_range(uint64_t bytes)
{
  return bytes > INT64_MAX ? INT64_MAX : (int64_t)bytes;
}

static int64_t times(int64_t count, int64_t bytes) /* both >= 0, held at INT64_MAX */
{
  int64_t product;
  return __builtin_mul_overflow(count, bytes, &product) ? INT64_MAX : product;
}

/* The forward's repeat: where it starts, its period and span, in the
 * forward's own indices (the failed request last). */
typedef struct repeat {
  size_t period, start, covered;
} repeat_t;

/* The forward's asks: sizes, and the role each was made for. */
typedef struct asks {
  const uint64_t *sizes;
  const uint8_t *roles;
} asks_t;

/* Whether the forward asked for 16-bit copies of the layers' fp32
 * weights, as autocast makes one of each weight a matrix product reads
 * (and keeps them through its region): three quarters or more of a
 * layer's weights of OL_MATRIX_MIN or more (core.h) have an ask of half their size in
 * one layer of the forward's repeat, each ask matched once. Its logits are
 * then 16-bit too, whatever the weights (held-out ckpt_batch, GPT-2 under
 * bf16 autocast: each layer's four matrices asked for at half their size
 * in each layer). Activations of those sizes by chance read so as well:
 * GPT-2 medium in fp32 (held-out gpt2_medium_batch, sequence 512) asks
 * each layer for two tensors of its MLP matrices' half size, and one of
 * its projection's half size before its layers (the position
 * embedding's); read anywhere after the load, three of its four
 * matrices had a half, and its logits read ahead at half their size. */
static bool weights_cast_to_16_bits(const ol_first_step_log_t *log, stack_shape_t stack,
                                    const uint64_t *sizes, repeat_t r)
{
  bool used[MAX_PERIOD] = {false};
  size_t matrices = 0, cast = 0;
  for (size_t w = stack.start; w < stack.start + stack.period; w++) {
    if (log->size[w] < OL_MATRIX_MIN)
      continue;
    matrices++;
    for (size_t i = r.start; i < r.start + r.period && i - r.start < MAX_PERIOD; i++)
      if (!used[i - r.start] && sizes[i] * 2 == log->size[w]) {
        used[i - r.start] = true;
        cast++;
        break;
      }
  }
  return matrices > 0 && cast * 4 >= matrices * 3;
}

/* A first step can run out in its backward, whose layers repeat too
 * (from the last), and where weights outweigh activations (a large model
 * at a small batch) each raises what is held, as a forward's layer does.
 * A backward's layer makes a gradient of each of its weights: asks [from,
 * to) for three quarters or more of a layer's weight sizes, and of its
 * weights' bytes, are taken to be that. (One size alike is a chance:
 * GPT-2's hidden states at batch 3 and sequence 1024 are as large as its
 * MLP's weight.) What is made as weights is not a gradient: FSDP gathers
 * each layer's parameters for its forward, every size of the layer's
 * weights (held-out fsdp2_batch: its forward was read as a backward and
 * not read at all). Its small ones are not sampled and have no role, so
 * the bytes decide. */
static bool makes_gradients(asks_t asks, size_t from, size_t to, const ol_first_step_log_t *log,
                            stack_shape_t stack)
{
  bool used[MAX_PERIOD] = {false};
  size_t matched = 0;
  uint64_t matched_bytes = 0, layer_bytes = 0;
  for (size_t w = stack.start; w < stack.start + stack.period; w++) {
    layer_bytes += log->size[w];
    for (size_t i = from; i < to && i - from < MAX_PERIOD; i++)
      if (!used[i - from] && asks.roles[i] != OL_ROLE_weights && asks.sizes[i] == log->size[w]) {
        used[i - from] = true;
        matched++;
        matched_bytes += log->size[w];
        break;
      }
  }
  return matched * 4 >= stack.period * 3 && matched_bytes / 3 >= layer_bytes / 4;
}

/* The largest tensor a layer asked for: its backward asks for a
 * gradient as large (softmax's, of attention's probabilities), as does
 * its recomputation under activation checkpointing. */
static uint64_t largest_in(const uint64_t *sizes, size_t from, size_t to)
{
  uint64_t most = 0;
  for (size_t i = from; i < to; i++)
    most = sizes[i] > most ? sizes[i] : most;
  return most;
}

/* Whether largest, the largest tensor in sizes[from, to) (largest_in),
 * came after one of half its size: logits of 16 bits cast to fp32 for the
 * loss (Hugging Face's loss under autocast or bf16 weights), whose
 * log-softmax is then a second fp32 tensor as large, held with the copy
 * into the backward. */
static bool upcast_before(const uint64_t *sizes, size_t from, size_t to, uint64_t largest)
{
  for (size_t i = from; i < to && sizes[i] != largest; i++)
    if (sizes[i] * 2 == largest)
      return true;
  return false;
}

/* Whether the asks after the stack, sizes[end, n), run the forward again
 * (a siamese encoder's second input: its embedding, then its layers, as
 * the first pass's): a stretch of them alike, in order, to one of the log
 * before the stack's end, TAIL_RUN asks long, or at least TAIL_LEAST
 * ending at the request (the pass has just begun). Then the forward was
 * not at its head. The stretch may begin past what the first pass did
 * after its stack (BERT's pooler: held-out siamese_bert was read as at
 * its head, its second pass not counted), and the log is read from its
 * start, for the forward's first asks may be the load's last (it ends at
 * the first free, in the embedding). A head may repeat a few sizes by
 * chance (BERT's masked-LM head asks for three hidden states in a row, as
 * its layers do): the figure is then the bound, not an estimate, which
 * costs precision, never truth. A second pass on inputs of other shapes
 * (a query shorter than its document) asks for other sizes and is not
 * told. */
#define TAIL_RUN 8
#define TAIL_LEAST 3
#define TAIL_SCAN 64 /* where in the tail a pass may begin: what follows a stack before
                      * the next pass is its pooler or norm, a few asks (a cold path's bound) */

static bool seen_before(const ol_first_step_log_t *log, size_t before, const uint64_t *run,
                        size_t len)
{
  for (size_t at = 0; at + len <= before; at++)
    if (memcmp(log->size + at, run, len * sizeof *run) == 0)
      return true;
  return false;
}

static bool forward_again(const ol_first_step_log_t *log, size_t load, const uint64_t *sizes,
                          size_t end, size_t n)
{
  for (size_t at = end; at + TAIL_LEAST <= n && at < end + TAIL_SCAN; at++) {
    size_t len = n - at < TAIL_RUN ? n - at : TAIL_RUN;
    if (seen_before(log, load + end, sizes + at, len))
      return true;
  }
  return false;
}

/* The head, read ahead while the forward is inside the stack: the head
 * and the loss come after the stack, where the figure was only a bound
 * (held-out llama1b_bf16_batch, Llama 3.2-1B's shape in bf16 out in its
 * 15th of 16 layers: at most 26 where 10 fit, its 3.3 GiB of logits never
 * asked for). A language model's logits are a row of the vocabulary a
 * token, each read from the log, none guessed:
 * - the vocabulary: the embedding, the largest tensor made before the
 *   stack, is rows of the layers' width, more of them than twice the
 *   width (a ViT's positions are fewer);
 * - the tokens: the forward's first ask as large as a square of the width
 *   that a call site names as the forward's (its embedding's output, in
 *   the weights' element: rows of the width, one a token);
 * - the head: what the load made between the stack and the forward
 *   (asked_after_stack, logits_ahead).
 * The logits are in the weights' element, or 16 bits where autocast cast
 * the weights (weights_cast). Where no call site names the forward (frames
 * off) its first ask is not told from a weight, and nothing is read. */
#define VOCAB_WIDTHS 2 /* a vocabulary is more rows than twice the width */
#define TOKEN_BYTES 8  /* an input's ids, labels or mask: int64 at most, a token */

static size_t forward_first(const ol_first_step_log_t *log, size_t from, uint64_t square)
{
  for (size_t i = from; i < log->count; i++)
    if (log->size[i] >= square && log->role[i] == OL_ROLE_activations)
      return i;
  return log->count;
}

/* What was asked between the stack and the forward's first ask: a
 * matrix of the embedding's size or a bias of a row of the vocabulary (a
 * head that makes logits: untied, or a masked LM's), matrices of fewer
 * rows than twice the width (a pooler, square; a classifier's, a label a
 * row), the tokens' int64 ids, and anything else (other). Tensors under
 * two rows of the width (norms, biases), a token's ids or mask (8 bytes a
 * token or fewer) and what a call site names as other than weights (the
 * job's inputs moved in) are no head's. */
typedef struct after_stack {
  bool vocabulary_head, ids, other;
  int64_t matrices;
} after_stack_t;

static after_stack_t asked_after_stack(const ol_first_step_log_t *log, size_t from, size_t to,
                                       uint64_t embedding, uint64_t bias, uint64_t row,
                                       uint64_t width, uint64_t tokens)
{
  after_stack_t a = {false, false, false, 0};
  for (size_t i = from; i < to; i++) {
    uint64_t s = log->size[i];
    a.ids = a.ids || s == tokens * TOKEN_BYTES;
    if (log->role[i] != OL_ROLE_weights && log->role[i] != OL_ROLE_unknown)
      continue; /* the job's input (its images, its labels), named by its site: no weights */
    if (s == embedding || s == bias)
      a.vocabulary_head = true;
    else if (s < 2 * row || (s % tokens == 0 && s / tokens <= TOKEN_BYTES))
      continue;
    else if (s % row == 0 && s / row < VOCAB_WIDTHS * width)
      a.matrices++;
    else
      a.other = true;
  }
  return a;
}

/* The layers' width in elements (0: not known). */
static uint64_t width_of(width_t w)
{
  return w.element > 0 ? w.row / (uint64_t)w.element : 0;
}

/* The embedding of a vocabulary beside a stack: the largest tensor made
 * before it, rows of the layers' width, more than twice the width of them
 * (a ViT's positions are fewer); 0 where there is none. */
static uint64_t vocabulary_embedding(const ol_first_step_log_t *log, stack_shape_t stack,
                                     width_t w)
{
  uint64_t width = width_of(w), embedding = largest_in(log->size, 0, stack.start);
  if (width == 0 || embedding % w.row != 0 || embedding / w.row <= VOCAB_WIDTHS * width)
    return 0;
  return embedding;
}

/* The bytes of the load that are a vocabulary's, beside a candidate
 * stack: the embedding (vocabulary_embedding) and a head of its size made
 * after it (untied). */
static uint64_t vocabulary_bytes(const ol_first_step_log_t *log, size_t load,
                                 stack_shape_t stack)
{
  uint64_t embedding = vocabulary_embedding(log, stack, layer_width(log, stack));
  if (embedding == 0)
    return 0;
  uint64_t bytes = embedding;
  for (size_t i = stack.start + stack.covered; i < load && bytes == embedding; i++)
    bytes += log->size[i] == embedding ? embedding : 0;
  return bytes;
}

/* The load's stack, and whether a second stack of other layers (two
 * tensors a layer or more, a sixteenth of the load) lies beside it. A
 * small model's vocabulary may outweigh its layers (held-out
 * llama_vocab_batch, 8 layers of 512 beside 128,256 tokens, embedding and
 * head untied: its layers 16% of the load, and it was not read): the
 * stack's share is then of the load less the vocabulary's tensors. */
static stack_shape_t stack_layers(const ol_first_step_log_t *log, size_t load)
{
  uint64_t load_bytes = sum_of(log->size, 0, load);
  stack_shape_t s = stack_in(log, 0, load, load_bytes, LOAD_SHARE, 1);
  if (s.layers == 0) {
    stack_shape_t any = stack_in(log, 0, load, 0, LOAD_SHARE, 1);
    if (any.layers > 0)
      s = stack_in(log, 0, load, load_bytes - vocabulary_bytes(log, load, any), LOAD_SHARE, 1);
  }
  if (s.layers == 0)
    return s;
  int64_t before = stack_in(log, 0, s.start, load_bytes, OTHER_STACK_SHARE, 2).whole;
  int64_t after =
    stack_in(log, s.start + s.covered, load, load_bytes, OTHER_STACK_SHARE, 2).whole;
  int64_t other = before > after ? before : after;
  if (other > 0) {
    s.stacks = 2;
    s.whole = other < s.whole ? other : s.whole;
    s.layers = s.whole;
  }
  return s;
}

/* A language model's logits, where the embedding is a vocabulary, the
 * tokens are confirmed by an ask of their int64 ids (an embedding of
 * another width than the layers', as OPT-350m's projected one, would make
 * its output's rows not the tokens), and a head of the vocabulary was made
 * after the stack, or none at all (tied). Pooler or classifier matrices
 * without it are another head, whose figure is not read ahead (a ViT's
 * classifier, held-out vit_bf16_batch: out in its 4th of 12 layers, a
 * classifier's estimate from the stack's end said 162 to 180 where 154
 * fit); as many matrices as layers or more are a LoRA's adapters (two for
 * each layer adapted, made after the model), not a head. 0: not told. */
static int64_t logits_ahead(const ol_first_step_log_t *log, stack_shape_t stack, width_t w,
                            bool cast)
{
  uint64_t width = width_of(w), square, logits;
  uint64_t embedding = vocabulary_embedding(log, stack, w);
  if (embedding == 0 || __builtin_mul_overflow(w.row, width, &square))
    return 0;
  size_t after = stack.start + stack.covered, first = forward_first(log, after, square);
  if (first == log->count || log->size[first] % w.row != 0)
    return 0;
  uint64_t vocab = embedding / w.row;
  uint64_t tokens = log->size[first] / w.row, element = cast ? 2 : (uint64_t)w.element;
  after_stack_t a = asked_after_stack(log, after, first, embedding, vocab * (uint64_t)w.element,
                                      w.row, width, tokens);
  bool adapters = a.matrices >= stack.layers;
  if (!a.ids || (!a.vocabulary_head && (a.other || (a.matrices > 0 && !adapters))) ||
      __builtin_mul_overflow(tokens, vocab, &logits) ||
      __builtin_mul_overflow(logits, element, &logits))
    return 0;
  return in_range(logits);
}

static uint64_t layer_largest(const uint64_t *sizes, repeat_t r)
{
  return largest_in(sizes, r.start, r.start + r.covered);
}

/* What the k-th whole repeat of the forward kept: the rise of allocated
 * bytes from its start to the next one's. */
static int64_t kept_by_repeat(const ol_first_step_log_t *log, size_t offset, repeat_t r, size_t k)
{
  size_t at = r.start + k * r.period;
  return before(log, offset + at + r.period) - before(log, offset + at);
}

/* The layers one period of the forward's repeat runs. Layers alike in
 * their weights may differ in a small ask by kind, alternating (Gemma 2's
 * sliding-window and global attention: one ask more in every other
 * layer), so that the forward repeats every k layers where the load
 * repeats every one (held-out gemma2_softcap_bf16, out in its 12th of 16
 * layers, was read as 6 of 16 begun, each keeping two layers' bytes: the
 * rest of its stack counted 9 such "layers" where 3 were left, "about 4
 * to 7" where 6 fit). A layer's tensors, its asks of a LAYER_TENSOR_SHARE
 * of the period's largest or more, then run k times alike in one period:
 * k of them (the most that divide it, so the shortest run; 1 where none
 * does). A stack whose weights alternate too repeats every two layers in
 * both, and its forward's layers, unlike, make no two runs alike. */
#define LAYER_TENSOR_SHARE 64
#define MAX_LAYERS_A_PERIOD 8

typedef struct layering {
  size_t k;       /* layers a period */
  uint64_t least; /* a layer's tensor: this many bytes or more */
  size_t run;     /* a layer's tensors (of one period's: k runs of run) */
} layering_t;

/* A layer's tensors asked in sizes[from, to). */
static size_t tensors_in(const uint64_t *sizes, uint64_t least, size_t from, size_t to)
{
  size_t count = 0;
  for (size_t i = from; i < to; i++)
    count += sizes[i] >= least;
  return count;
}

/* The next ask at or after i, before end, of a layer's tensor (end: none). */
static size_t next_tensor(const uint64_t *sizes, uint64_t least, size_t i, size_t end)
{
  while (i < end && sizes[i] < least)
    i++;
  return i;
}

/* Whether the period's tensors repeat themselves run tensors later, all
 * through it: runs alike. */
static bool runs_alike(const uint64_t *sizes, repeat_t r, uint64_t least, size_t run)
{
  size_t end = r.start + r.period, lead = next_tensor(sizes, least, r.start, end), lag = lead;
  for (size_t k = 0; k < run; k++)
    lead = next_tensor(sizes, least, lead + 1, end);
  for (; lead < end; lead = next_tensor(sizes, least, lead + 1, end)) {
    if (sizes[lead] != sizes[lag])
      return false;
    lag = next_tensor(sizes, least, lag + 1, end);
  }
  return true;
}

static layering_t layers_a_period(const uint64_t *sizes, repeat_t r, int64_t layers)
{
  uint64_t least = largest_in(sizes, r.start, r.start + r.period) / LAYER_TENSOR_SHARE;
  size_t m = tensors_in(sizes, least, r.start, r.start + r.period);
  for (size_t k = MAX_LAYERS_A_PERIOD; k >= 2; k--)
    if (m % k == 0 && m / k >= 2 && (int64_t)k <= layers && runs_alike(sizes, r, least, m / k))
      return (layering_t){k, least, m / k};
  return (layering_t){1, least, m};
}

/* The layers whose every tensor was asked between the forward's repeat's
 * start and its ask at: whole periods, and the layers of the next one
 * counted by their tensors (a layer of a kind asks for more than another,
 * so its asks are not a period's k-th). */
static int64_t layers_to(const uint64_t *sizes, repeat_t r, layering_t lay, size_t at)
{
  size_t periods = (at - r.start) / r.period, from = r.start + periods * r.period;
  return (int64_t)(periods * lay.k + (lay.k > 1 ? tensors_in(sizes, lay.least, from, at) / lay.run
                                                 : 0));
}

/* The layers the forward's repeat covers, to the nearest: whole periods,
 * and the rest rounded as layers_to counts it (by a period's share where
 * it is one layer, by tensors where it runs k). */
static int64_t layers_seen(const uint64_t *sizes, repeat_t r, layering_t lay)
{
  size_t periods = r.covered / r.period, past = r.start + periods * r.period;
  size_t rest = lay.k > 1
                  ? (tensors_in(sizes, lay.least, past, r.start + r.covered) + lay.run / 2) /
                      lay.run
                  : (r.covered % r.period + r.period / 2) / r.period;
  return (int64_t)(periods * lay.k + rest);
}

/* The ask that begins the forward's layer-th layer from the repeat's
 * start (0: the repeat's start): its period's start, and the first
 * tensor of its run there; n (past the last ask) where that tensor was
 * not asked yet (the failed request was the layer's first, smaller ask). */
static size_t layer_begins(const uint64_t *sizes, size_t n, repeat_t r, layering_t lay,
                           size_t layer)
{
  size_t at = r.start + layer / lay.k * r.period, runs = layer % lay.k;
  for (size_t tensors = 0; runs > 0 && at < n; at++)
    if (sizes[at] >= lay.least && tensors++ == runs * lay.run)
      break;
  return at < n ? at : n;
}

/* What each layer of the forward kept: the same for the layers seen last
 * (within 1%), the least of them, as long as at least two and half of
 * those seen whole agree; -1 otherwise. The first ones may differ: a
 * stack's first layer keeps, or frees, what is made once at its entry
 * (held-out llama_gqa_batch, a Llama in bf16: its first layer seen kept
 * one 64 MiB hidden state more than the three after it, alike to the byte,
 * and the forward was not read), and where the repeat is seen from
 * another point of the layer than its start, the second may too. */
static int64_t kept_per_layer(const ol_first_step_log_t *log, size_t offset, repeat_t r,
                              size_t logged)
{
  size_t whole = 0;
  while (r.start + (whole + 1) * r.period < logged &&
         r.start + (whole + 1) * r.period < r.start + r.covered)
    whole++;
  if (whole < 2)
    return -1;
  int64_t least = kept_by_repeat(log, offset, r, whole - 1), most = least;
  size_t agree = 1;
  for (size_t k = whole - 1; k-- > 0; agree++) {
    int64_t kept = kept_by_repeat(log, offset, r, k);
    int64_t low = kept < least ? kept : least, high = kept > most ? kept : most;
    if (high - low > high / 1000 * SAME_KEPT_PER_MILLE)
      break;
    least = low;
    most = high;
  }
  if (agree < 2 || 2 * agree < whole || least <= 0)
    return -1;
  return least;
}

void ol_first_step_read(const ol_first_step_log_t *log, uint64_t request, ol_first_step_t *out)
{
  *out = (ol_first_step_t){.stage = OL_FIRST_STEP_UNKNOWN};
  if (!log || log->count == OL_FIRST_STEP_KEEP) /* it may have missed the failure's stretch */
    return;
  out->read = true;
  size_t load = first_after_free(log);
  stack_shape_t stack = load ? stack_layers(log, load) : (stack_shape_t){.layers = 0};
  int64_t layers = stack.layers;
  if (layers == 0)
    return;
  /* The forward, the failed request appended as its last ask. */
  size_t n = log->count - load + 1;
  uint64_t *sizes = malloc(n * sizeof *sizes);
  uint8_t *roles = malloc(n * sizeof *roles);
  if (!sizes || !roles) {
    free(sizes);
    free(roles);
    return;
  }
  for (size_t i = 0; i + 1 < n; i++) {
    sizes[i] = log->size[load + i];
    roles[i] = log->role[load + i];
  }
  sizes[n - 1] = request;
  roles[n - 1] = OL_ROLE_unknown;
  asks_t asks = {sizes, roles};
  repeat_t r;
  bool found = ol_first_step_repeat(sizes, n, MAX_PERIOD, &r.period, &r.start, &r.covered) &&
               !makes_gradients(asks, r.start, r.start + r.period, log, stack);
  int64_t kept = found ? kept_per_layer(log, load, r, n - 1) : -1;
  if (kept <= 0) {
    free(sizes);
    free(roles);
    return;
  }
  layering_t lay = layers_a_period(sizes, r, layers);
  int64_t per_layer = kept / (int64_t)lay.k;
  int64_t seen = layers_seen(sizes, r, lay);
  size_t end = r.start + r.covered;
  if (end < n && seen == layers && stack.stacks == 1 && !forward_again(log, load, sizes, end, n) &&
      !makes_gradients(asks, end, n, log, stack)) {
    /* the stack ended, then the head asked (and not yet the backward) */
    uint64_t largest = largest_in(sizes, end, n);
    width_t w = layer_width(log, stack);
    int64_t asks_of_largest = 0;
    for (size_t i = end; i < n; i++)
      asks_of_largest += sizes[i] == largest;
    *out = (ol_first_step_t){.read = true, .stage = OL_FIRST_STEP_HEAD, .layers = layers,
                             .stacks = 1, .layers_done = layers, .per_layer = per_layer,
                             .largest_after = in_range(largest),
                             .logits_asks = asks_of_largest,
                             .layer_largest = in_range(layer_largest(sizes, r)),
                             .loss_upcast = upcast_before(sizes, end, n, largest),
                             .weight_element = w.element, .element_unsure = w.unsure,
                             .weights_cast = weights_cast_to_16_bits(log, stack, sizes, r)};
  } else if (end == n) { /* the request itself was a layer's */
    /* Layers begun: the repeats begun in the run, and one more for each
     * period's worth before it (a first layer unlike the rest, the
     * embedding): that many may have begun before the run was seen. The
     * run may begin inside the first layer (its first asks unlike the
     * rest's: a rotary table, a mask made there), so where the stack has
     * fewer layers than that count, it was in its last (held-out
     * qwen_bf16_batch, out in its 24th of 24 layers: 24 begun in the run
     * and one period before it, and its forward was not read). */
    int64_t begun = layers_to(sizes, r, lay, n - 1) + 1;
    int64_t before_run = (int64_t)((r.start * lay.k + r.period - 1) / r.period);
    int64_t left = stack.whole - begun - before_run;
    if (left < 0 && begun <= stack.whole && stack.stacks == 1)
      left = 0; /* (of two stacks, which one the run is in is not known) */
    size_t at = load + layer_begins(sizes, n, r, lay, (size_t)(begun - 1)); /* the last begun */
    int64_t current = at < log->count ? before(log, at) : log->after[log->count - 1];
    width_t w = layer_width(log, stack);
    bool cast = weights_cast_to_16_bits(log, stack, sizes, r);
    if (left >= 0)
      *out = (ol_first_step_t){
        .read = true, .stage = OL_FIRST_STEP_LAYERS, .layers = layers, .stacks = stack.stacks,
        .layers_done = begun,
        .per_layer = per_layer, .rest = times(left, per_layer),
        .stack_end = ol_sat_add(ol_sat_add(current, per_layer), times(left, per_layer)),
        .layer_largest = in_range(layer_largest(sizes, r)), .weight_element = w.element,
        .element_unsure = w.unsure, .weights_cast = cast,
        .logits_ahead = stack.stacks == 1 ? logits_ahead(log, stack, w, cast) : 0,
        .logits_asks = 1};
  }
  free(sizes);
  free(roles);
}
