/* test_recent.c: a device's last events (recent.c): the iteration under
 * way beside the one before at the same point, what each site holds more,
 * by sizes or, where they differ, by calls, and where that is not known
 * (fewer than two iterations begun, other sizes and calls, a longer
 * iteration, one the log no longer holds, a block the sample missed); and
 * whether the iteration under way did the last one's work again and then
 * more (state made in mid-run), not a larger input's. */
#include <check.h>

#include "check_run.h"
#include <string.h>

#include "core.h"

#define MiB (UINT64_C(1) << 20)
#define SITES 4

/* Sites: 0 the input, 1 a layer, 2 a temporary, 3 the loss. */
static ol_recent_t *log_;
static int64_t more[SITES], made[SITES];
static int64_t held, rest; /* rest: the reading's ol_recent_rest_of_last, nothing live */
static bool by_calls;

static void setup(void)
{
  log_ = ol_recent_new();
  ck_assert_ptr_nonnull(log_);
  memset(more, 0, sizeof more);
  memset(made, 0, sizeof made);
  held = rest = 0;
  by_calls = false;
}

static void teardown(void)
{
  ol_recent_free(log_);
}

/* n blocks of a site made and freed at once, a temporary each. */
static void made_and_freed(int32_t site, uint64_t size, int n)
{
  for (int i = 0; i < n; i++) {
    ol_recent_note(log_, site, size, false);
    ol_recent_note(log_, site, size, true);
  }
}

/* One step's events up to its loss and after: the input, two layers with
 * a temporary each, the loss, and their frees (the loss's unless kept).
 * layer: the layers' size (a larger input's are larger). */
static void step_until_loss(uint64_t layer)
{
  ol_recent_note(log_, 0, 4 * MiB, false);
  for (int l = 0; l < 2; l++) {
    ol_recent_note(log_, 1, layer, false);
    made_and_freed(2, 8 * MiB, 1);
  }
  ol_recent_note(log_, 3, 64 * MiB, false);
}

static void step_after_loss(bool keep)
{
  for (int l = 0; l < 2; l++)
    ol_recent_note(log_, 1, 32 * MiB, true);
  if (!keep)
    ol_recent_note(log_, 3, 64 * MiB, true);
  ol_recent_note(log_, 0, 4 * MiB, true);
}

static void steps(int n, bool keep_last)
{
  for (int i = 0; i < n; i++) {
    ol_recent_iteration_ended(log_);
    step_until_loss(32 * MiB);
    step_after_loss(keep_last && i == n - 1);
  }
  ol_recent_iteration_ended(log_);
}

/* Three steps, nothing kept, and the fourth's input, first layer and
 * its temporary: the second layer (32 MiB) is what comes next. */
static void three_steps_and_a_layer(void)
{
  steps(3, false);
  ol_recent_note(log_, 0, 4 * MiB, false);
  ol_recent_note(log_, 1, 32 * MiB, false);
  made_and_freed(2, 8 * MiB, 1);
}

/* unsampled: the sample's "not sampled" site, -1 none (every stack taken). */
static bool against_last_sampled(uint64_t request, int32_t unsampled)
{
  ol_recent_reading_t reading;
  ol_recent_sites_t sites = {unsampled, -1};
  bool known = ol_recent_against_last(log_, request, sites, more, made, SITES, &reading);
  held = reading.held_more;
  rest = ol_recent_rest_of_last(log_, &reading, NULL, 0);
  by_calls = reading.by_calls;
  return known;
}

static bool against_last(uint64_t request)
{
  return against_last_sampled(request, -1);
}

START_TEST(a_kept_loss_is_held_more_at_the_same_point)
{
  steps(3, true);
  ol_recent_note(log_, 0, 4 * MiB, false); /* the next input made, a layer asked for */
  ck_assert(against_last(32 * MiB));
  ck_assert_int_eq(held, 64 * MiB);
  ck_assert_int_eq(more[3], 64 * MiB);
  ck_assert_int_eq(more[0], 0);
  ck_assert_int_eq(more[1], 0);
  /* the last one rose past there by its two layers, a temporary and its
   * loss (the rest of a step, oom.c's second step reads) */
  ck_assert_int_eq(rest, (32 + 32 + 64) * MiB);
  for (int i = 0; i < SITES; i++) /* it made what the last had made by then */
    ck_assert_int_eq(made[i], 0);
}
END_TEST

/* A loader that makes the next batch earlier than the step before did:
 * its site holds more at the same point because it made more (one size
 * moved among many passes the match), where a kept tensor's site made
 * the same and freed less. */
START_TEST(a_batch_made_earlier_is_made_more)
{
  ol_recent_iteration_ended(log_);
  made_and_freed(1, MiB, 63);
  ol_recent_note(log_, 0, 16 * MiB, false);
  ol_recent_iteration_ended(log_);
  ol_recent_note(log_, 0, 16 * MiB, false);
  ol_recent_note(log_, 0, 16 * MiB, true); /* the last one's, used */
  made_and_freed(1, MiB, 62);
  ck_assert(against_last(MiB)); /* two of 64 differ */
  ck_assert_int_eq(more[0], 16 * MiB);
  ck_assert_int_eq(made[0], 16 * MiB);
  ck_assert_int_eq(made[1], -(int64_t)MiB); /* one fewer by then: its place was the batch's */
}
END_TEST

START_TEST(nothing_kept_holds_nothing_more)
{
  three_steps_and_a_layer();
  ck_assert(against_last(32 * MiB)); /* the second layer */
  ck_assert_int_eq(held, 0);
  for (int i = 0; i < SITES; i++)
    ck_assert_int_eq(more[i], 0);
}
END_TEST

/* A request that would begin the next iteration (this one has made all
 * the last one made) is set beside this one's first allocation: what is
 * held more is what this one kept of all it made (the simulated
 * oom_kept_in_step runs out so). */
START_TEST(a_request_that_begins_the_next_iteration)
{
  steps(3, false);
  step_until_loss(32 * MiB);
  step_after_loss(true);
  ck_assert(against_last(4 * MiB)); /* the next input */
  ck_assert_int_eq(held, 64 * MiB);
  ck_assert_int_eq(more[3], 64 * MiB);
  ck_assert(!against_last(8 * MiB)); /* not the size the iterations begin with */
  teardown();
  setup();
  steps(3, false); /* all made, nothing given back: longer, not ended */
  step_until_loss(32 * MiB);
  ck_assert(!against_last(4 * MiB));
}
END_TEST

/* Before two iterations have begun there is none to set beside. */
START_TEST(one_iteration_is_no_measure)
{
  ck_assert(!against_last(32 * MiB));
  ol_recent_iteration_ended(log_);
  step_until_loss(32 * MiB);
  ck_assert(!against_last(32 * MiB));
  ol_recent_reading_t reading;
  ck_assert(!ol_recent_against_last(NULL, 32 * MiB, (ol_recent_sites_t){-1, -1}, more, made, SITES,
                                    &reading));
}
END_TEST

/* The finder tells a repeat once seen whole twice: its first end comes
 * with two iterations ended (ol_recent_iteration_ended_after), and the
 * one before began a period of allocations back; the step under way is
 * set beside it (leak_loss at half its cap, out at its third step). Told
 * with one iteration ended, or no period, there is still none. */
/* A step that keeps its loss, its end told as ended iterations of period
 * allocations each, and the next step's input: whether the step under way
 * is set beside one before it, at the second layer it asks for. */
static bool kept_step_told_after(uint64_t ended, uint64_t period)
{
  step_until_loss(32 * MiB);
  step_after_loss(true);
  ol_recent_iteration_ended_after(log_, ended, period);
  ol_recent_note(log_, 0, 4 * MiB, false);
  return against_last(32 * MiB);
}

START_TEST(a_repeat_found_late_has_the_iteration_before)
{
  step_until_loss(32 * MiB); /* two steps, the second keeps its loss */
  step_after_loss(false);
  ck_assert(kept_step_told_after(2, 6)); /* 6 allocations a step */
  ck_assert_int_eq(held, 64 * MiB);
  ck_assert_int_eq(more[3], 64 * MiB);
  teardown();
  setup();
  ck_assert(!kept_step_told_after(1, 6));
  teardown();
  setup();
  ck_assert(!kept_step_told_after(2, 0));
}
END_TEST

/* ---- a step found at the failure (ol_recent_step_repeat) ----
 * Sites of a training step: 0 the input, 1 a layer's kept activation, 2
 * its temporary, 3 the loss, 4 a gradient (the backward's). */
#define STEP_SITES 5
#define STEP_LAYERS 16
static const uint8_t step_work[STEP_SITES] = {0, OL_RECENT_FORWARD, OL_RECENT_FORWARD,
                                              OL_RECENT_FORWARD, OL_RECENT_BACKWARD};

static void step_forward(int layers)
{
  ol_recent_note(log_, 0, 4 * MiB, false);
  for (int l = 0; l < layers; l++) {
    ol_recent_note(log_, 1, 32 * MiB, false);
    made_and_freed(2, 8 * MiB, 1);
  }
}

/* The loss, then the backward up to `grads` gradients, each layer's
 * activation freed as its gradient is made (kept: none freed, the graph
 * kept with the loss). */
static void step_backward(int grads, bool keep)
{
  ol_recent_note(log_, 3, 64 * MiB, false);
  for (int g = 0; g < grads; g++) {
    ol_recent_note(log_, 4, 16 * MiB, false);
    if (!keep)
      ol_recent_note(log_, 1, 32 * MiB, true);
  }
}

/* A whole step: its gradients set to None after the update. */
static void train_step(bool keep)
{
  step_forward(STEP_LAYERS);
  step_backward(STEP_LAYERS, keep);
  for (int g = 0; g < STEP_LAYERS; g++)
    ol_recent_note(log_, 4, 16 * MiB, true);
  if (!keep)
    ol_recent_note(log_, 3, 64 * MiB, true);
  ol_recent_note(log_, 0, 4 * MiB, true);
}

/* What the step under way, begun at began[1], holds more than the one
 * begun at began[0] held at the same point (kept_layers: the layers'
 * site's share; NULL: not wanted). */
static bool held_since(const uint64_t began[2], uint64_t request, int64_t *held_more,
                       int64_t *kept_layers)
{
  int64_t more_[STEP_SITES] = {0}, made_[STEP_SITES] = {0};
  ol_recent_reading_t reading;
  if (!ol_recent_against_step(log_, began, request, (ol_recent_sites_t){-1, -1}, more_, made_,
                              STEP_SITES, &reading))
    return false;
  *held_more = reading.held_more;
  if (kept_layers)
    *kept_layers = more_[1];
  return true;
}

static bool step_repeat_held(uint64_t request, int64_t *held_more, int64_t *kept_layers)
{
  uint64_t began[2];
  return ol_recent_step_repeat(log_, request, step_work, STEP_SITES, began) &&
         held_since(began, request, held_more, kept_layers);
}

/* A leak out at its second step, in its backward: the first step kept its
 * graph (held-out leak_loss at 0.4 of its cap). The step under way repeats
 * the first from its start, within one period, and holds the first's
 * graph more; the log's own iterations are left as they were (none). */
START_TEST(a_second_step_repeats_the_first)
{
  train_step(true);
  step_forward(STEP_LAYERS);
  step_backward(8, true);
  int64_t held_more = 0, kept_layers = 0;
  ck_assert(step_repeat_held(16 * MiB, &held_more, &kept_layers));
  ck_assert_int_eq(kept_layers, 16 * 32 * MiB);
  ck_assert_int_eq(held_more, 16 * 32 * MiB + 64 * MiB); /* the graph and its loss */
  ck_assert(!against_last(16 * MiB)); /* no iteration was told */
}
END_TEST

/* A leak that keeps most of each step: no iteration is told, and its
 * steps repeat each other exactly further back than one (held-out
 * vit_loss_leak, out at its fourth step). The step under way is the
 * repeat's last period's worth, set beside the one before it. */
START_TEST(steps_that_repeat_further_back_are_read_by_the_last)
{
  for (int i = 0; i < 3; i++)
    train_step(true);
  step_forward(STEP_LAYERS);
  step_backward(8, true);
  int64_t held_more = 0, kept_layers = 0;
  ck_assert(step_repeat_held(16 * MiB, &held_more, &kept_layers));
  ck_assert_int_eq(kept_layers, 16 * 32 * MiB);
  ck_assert_int_eq(held_more, 16 * 32 * MiB + 64 * MiB);
}
END_TEST

/* The first step makes blocks it keeps and no later step makes again: a
 * matrix product's first workspace in its forward (cuBLAS's, kept by
 * PyTorch for good) and the autograd thread's in its backward. They
 * break the repeat of the first step by the second: the second's
 * allocations a period back are shifted by one or two from its own. A
 * size made once in the log is no step's work, and the repeat is read
 * without it. */
static void first_step_with_workspaces(void)
{
  ol_recent_note(log_, 0, 4 * MiB, false);
  for (int l = 0; l < STEP_LAYERS; l++) {
    ol_recent_note(log_, 1, 32 * MiB, false);
    made_and_freed(2, 8 * MiB, 1);
    if (l == 1)
      ol_recent_note(log_, 2, 33 * MiB, false); /* the forward's workspace */
  }
  ol_recent_note(log_, 3, 64 * MiB, false);
  ol_recent_note(log_, 4, 66 * MiB, false); /* the backward's workspace */
  for (int g = 0; g < STEP_LAYERS; g++)
    ol_recent_note(log_, 4, 16 * MiB, false); /* the graph kept with the loss */
  for (int g = 0; g < STEP_LAYERS; g++)
    ol_recent_note(log_, 4, 16 * MiB, true);
  ol_recent_note(log_, 0, 4 * MiB, true);
}

START_TEST(blocks_made_once_in_the_first_step_do_not_break_its_repeat)
{
  first_step_with_workspaces();
  step_forward(STEP_LAYERS);
  step_backward(2, true);
  int64_t held_more = 0, kept_layers = 0;
  ck_assert(step_repeat_held(16 * MiB, &held_more, &kept_layers));
  ck_assert_int_eq(kept_layers, 16 * 32 * MiB);
  ck_assert_int_eq(held_more, 16 * 32 * MiB + 64 * MiB); /* the graph and its loss */
}
END_TEST

/* The request's size made once before it, by the step before (its loss):
 * made twice with the request, it is a step's work, not left out. */
START_TEST(a_request_whose_size_the_step_before_made_once_is_its_repeat)
{
  first_step_with_workspaces();
  step_forward(STEP_LAYERS);
  int64_t held_more = 0, kept_layers = 0;
  ck_assert(step_repeat_held(64 * MiB, &held_more, &kept_layers));
  ck_assert_int_eq(kept_layers, 16 * 32 * MiB);
  /* the graph, its loss, and the backward's workspace made since */
  ck_assert_int_eq(held_more, 16 * 32 * MiB + 64 * MiB + 66 * MiB);
}
END_TEST

/* Nothing kept: the second step holds what the first held there. */
START_TEST(a_second_step_like_the_first_holds_no_more)
{
  train_step(false);
  step_forward(STEP_LAYERS);
  step_backward(8, false);
  int64_t held_more = -1, kept_layers = -1;
  ck_assert(step_repeat_held(16 * MiB, &held_more, &kept_layers));
  ck_assert_int_eq(held_more, 0);
  ck_assert_int_eq(kept_layers, 0);
}
END_TEST

/* A first step's backward: its layers repeat each other further back
 * than one layer (the gradients, one a layer). An inference's second
 * forward repeats its first, but no backward came before it. Neither is a
 * step's repeat. */
START_TEST(a_first_step_s_layers_are_no_step)
{
  step_forward(40);
  ol_recent_note(log_, 3, 64 * MiB, false);
  for (int g = 0; g < 36; g++) { /* each layer's gradient and a temporary of its backward */
    ol_recent_note(log_, 4, 16 * MiB, false);
    ol_recent_note(log_, 4, 4 * MiB, false);
    ol_recent_note(log_, 4, 4 * MiB, true);
    ol_recent_note(log_, 1, 32 * MiB, true);
  }
  ol_recent_note(log_, 4, 16 * MiB, false);
  uint64_t began[2];
  ck_assert(!ol_recent_step_repeat(log_, 4 * MiB, step_work, STEP_SITES, began));
  int64_t held_more, kept_layers;
  teardown();
  setup();
  step_forward(STEP_LAYERS); /* one forward, its output kept */
  ol_recent_note(log_, 3, 64 * MiB, false);
  for (int l = 0; l < STEP_LAYERS; l++)
    ol_recent_note(log_, 1, 32 * MiB, true);
  ol_recent_note(log_, 0, 5 * MiB, false); /* the next one's, out at its output */
  for (int l = 0; l < STEP_LAYERS; l++) {
    ol_recent_note(log_, 1, 32 * MiB, false);
    made_and_freed(2, 8 * MiB, 1);
  }
  ck_assert(!step_repeat_held(64 * MiB, &held_more, &kept_layers));
}
END_TEST

/* The work of the last iteration told: a backward's layers told as
 * iterations made the backward's blocks alone, a step a forward's and a
 * backward's; not known before two ends, nor once the log lost it. */
START_TEST(the_last_iteration_s_work_is_read)
{
  uint8_t work = 0xff;
  ck_assert(!ol_recent_last_work(log_, step_work, STEP_SITES, &work));
  ck_assert_uint_eq(work, 0);
  step_forward(4);
  for (int l = 0; l < 3; l++) { /* three of the backward's layers, each told */
    ol_recent_iteration_ended(log_);
    ol_recent_note(log_, 4, 16 * MiB, false);
    made_and_freed(4, 4 * MiB, 1);
    ol_recent_note(log_, 1, 32 * MiB, true);
  }
  ol_recent_iteration_ended(log_);
  ck_assert(ol_recent_last_work(log_, step_work, STEP_SITES, &work));
  ck_assert_uint_eq(work, OL_RECENT_BACKWARD);
  step_forward(4); /* a whole step told */
  ol_recent_note(log_, 4, 16 * MiB, false);
  ol_recent_iteration_ended(log_);
  ck_assert(ol_recent_last_work(log_, step_work, STEP_SITES, &work));
  ck_assert_uint_eq(work, OL_RECENT_FORWARD | OL_RECENT_BACKWARD);
  for (int i = 0; i < (1 << 18); i++) /* the log keeps 2^18 events */
    ol_recent_note(log_, 1, MiB, (i & 1) != 0);
  ck_assert(!ol_recent_last_work(log_, step_work, STEP_SITES, &work));
  ck_assert(!ol_recent_last_work(NULL, step_work, STEP_SITES, &work));
}
END_TEST

/* A repeat of blocks of the weights' sizes alone (an update's, after a
 * gradient), of sites of neither a forward's nor a backward's work, is no
 * step; nor is one shorter than REPEAT_MIN. Where the log was told two
 * iteration ends the step is read still: the account asks only where it
 * counts fewer than two iterations, and the ends it told may be a first
 * backward's layers, set aside since (held-out gpt2_medium_ckpt, a
 * checkpointed backward's layers told as iterations: its second step was
 * read as the first, "at most 13" where 9 fits). */
START_TEST(a_repeat_of_other_work_is_no_step)
{
  train_step(false);
  for (int g = 0; g < 40; g++) /* an update's blocks: site 0's work is none */
    ol_recent_note(log_, 0, (uint64_t)(g + 1) * MiB, false);
  ol_recent_note(log_, 4, 20 * MiB, false); /* a gradient between */
  for (int g = 0; g < 39; g++) /* the same again */
    ol_recent_note(log_, 0, (uint64_t)(g + 1) * MiB, false);
  int64_t held_more, kept_layers;
  ck_assert(!step_repeat_held(40 * MiB, &held_more, &kept_layers));
  teardown();
  setup();
  train_step(true);
  step_forward(4); /* 9 allocations repeated, the request's included */
  ck_assert(!step_repeat_held(32 * MiB, &held_more, &kept_layers));
  teardown();
  setup();
  steps(2, false);
  train_step(true);
  step_forward(STEP_LAYERS);
  ck_assert(step_repeat_held(64 * MiB, &held_more, &kept_layers));
  ck_assert_int_eq(kept_layers, 16 * 32 * MiB);
  ck_assert_int_eq(held_more, 16 * 32 * MiB + 64 * MiB); /* the graph and its loss */
}
END_TEST

/* ---- a step told by its sizes alone (ol_recent_step_by_sizes) ----
 * Without call sites no site's work is known: a layer's forward asks for
 * an output, a temporary and a kept tensor of three sizes, its backward
 * for a weight's gradient and an input's, and a temporary; none carries
 * a site. */
#define NONE (-1)

static void sized_forward(int layers)
{
  ol_recent_note(log_, NONE, 4 * MiB, false);
  for (int l = 0; l < layers; l++) {
    ol_recent_note(log_, NONE, 32 * MiB, false);
    made_and_freed(NONE, 8 * MiB, 1);
    ol_recent_note(log_, NONE, 12 * MiB, false);
  }
}

/* The loss, then the backward of `layers` layers: each frees its kept
 * tensors unless the graph is kept (a leak's loss summed with its graph). */
static void sized_backward(int layers, bool keep)
{
  ol_recent_note(log_, NONE, 64 * MiB, false);
  for (int l = 0; l < layers; l++) {
    ol_recent_note(log_, NONE, 2 * MiB, false);  /* the weight's gradient */
    ol_recent_note(log_, NONE, 16 * MiB, false); /* the input's */
    made_and_freed(NONE, 6 * MiB, 1);
    ol_recent_note(log_, NONE, 16 * MiB, true);
    if (!keep) {
      ol_recent_note(log_, NONE, 32 * MiB, true);
      ol_recent_note(log_, NONE, 12 * MiB, true);
    }
  }
}

static void sized_step(bool keep)
{
  sized_forward(STEP_LAYERS);
  sized_backward(STEP_LAYERS, keep);
  for (int l = 0; l < STEP_LAYERS; l++) /* the gradients set to None */
    ol_recent_note(log_, NONE, 2 * MiB, true);
  if (!keep)
    ol_recent_note(log_, NONE, 64 * MiB, true);
  ol_recent_note(log_, NONE, 4 * MiB, true);
}

static bool held_past_sized_step(uint64_t request, int64_t *held_more)
{
  uint64_t began[2];
  return ol_recent_step_by_sizes(log_, request, began) &&
         held_since(began, request, held_more, NULL);
}

/* A leak out at its second step: the first kept its graph (corpus
 * cnn_loss_leak without its sites). The step under way repeats the first,
 * whose allocations hold the forward's stack and the backward's, and
 * holds the first's graph more. Steps that keep nothing hold nothing
 * more. */
START_TEST(a_second_step_is_told_by_its_sizes)
{
  sized_step(true);
  sized_forward(STEP_LAYERS);
  sized_backward(8, true);
  int64_t held_more = -1; /* out at the next layer's first gradient */
  ck_assert(held_past_sized_step(2 * MiB, &held_more));
  ck_assert_int_eq(held_more, 16 * (32 + 12) * MiB + 64 * MiB); /* the graph and its loss */
  teardown();
  setup();
  sized_step(false);
  sized_forward(STEP_LAYERS);
  sized_backward(4, false);
  held_more = -1;
  ck_assert(held_past_sized_step(2 * MiB, &held_more));
  ck_assert_int_eq(held_more, 0);
}
END_TEST

/* What the step before went on to hold past the same point (the rest of
 * a step that finished, for one out in its second: gpt2_batch at batch 4
 * under 8G). By roles, out at its loss: the loss (64 MiB) and the first
 * gradient before its layer's activation is freed (16 MiB). By sizes,
 * out at the loss too: the loss, the first layer's two gradients and
 * its temporary (64 + 2 + 16 + 6 MiB). */
START_TEST(a_second_step_reads_the_rest_of_the_first)
{
  uint64_t began[2];
  int64_t more_[STEP_SITES] = {0}, made_[STEP_SITES] = {0};
  ol_recent_reading_t reading;
  train_step(false);
  step_forward(STEP_LAYERS);
  ck_assert(ol_recent_step_repeat(log_, 64 * MiB, step_work, STEP_SITES, began));
  ck_assert(ol_recent_against_step(log_, began, 64 * MiB, (ol_recent_sites_t){-1, -1}, more_,
                                   made_, STEP_SITES, &reading));
  ck_assert_int_eq(reading.held_more, 0);
  ck_assert_int_eq(ol_recent_rest_of_last(log_, &reading, NULL, 0), 64 * MiB + 16 * MiB);
  teardown();
  setup();
  sized_step(false);
  sized_forward(STEP_LAYERS);
  ck_assert(ol_recent_step_by_sizes(log_, 64 * MiB, began));
  ck_assert(ol_recent_against_step(log_, began, 64 * MiB, (ol_recent_sites_t){-1, -1}, more_,
                                   made_, STEP_SITES, &reading));
  ck_assert_int_eq(ol_recent_rest_of_last(log_, &reading, NULL, 0), (64 + 2 + 16 + 6) * MiB);
}
END_TEST

/* A first update that makes the optimizer's state (Adam's two moments a
 * gradient, kept for good) past the step's backward: where the weights
 * outweigh the activations, the first step's highest. The step under way
 * holds that state already and will not make it again: the rest leaves
 * out the blocks made past the point that are live still. Out at the
 * loss: the first rose 64 + 16 MiB by its loss and first gradient, fell
 * 16 MiB a layer through its backward (-192 MiB), then made 512 MiB of
 * state (320 MiB above the point). */
START_TEST(the_rest_leaves_out_what_the_first_made_once)
{
  uint32_t state[2 * STEP_LAYERS];
  uint64_t began[2];
  int64_t more_[STEP_SITES] = {0}, made_[STEP_SITES] = {0};
  ol_recent_reading_t reading;
  step_forward(STEP_LAYERS);
  step_backward(STEP_LAYERS, false);
  for (int m = 0; m < 2 * STEP_LAYERS; m++)
    state[m] = ol_recent_note(log_, 4, 16 * MiB, false);
  for (int g = 0; g < STEP_LAYERS; g++)
    ol_recent_note(log_, 4, 16 * MiB, true);
  ol_recent_note(log_, 3, 64 * MiB, true);
  ol_recent_note(log_, 0, 4 * MiB, true);
  step_forward(STEP_LAYERS);
  ck_assert(ol_recent_step_repeat(log_, 64 * MiB, step_work, STEP_SITES, began));
  ck_assert(ol_recent_against_step(log_, began, 64 * MiB, (ol_recent_sites_t){-1, -1}, more_,
                                   made_, STEP_SITES, &reading));
  ck_assert_int_eq(reading.held_more, 2 * STEP_LAYERS * 16 * MiB);
  ck_assert_int_eq(ol_recent_rest_of_last(log_, &reading, NULL, 0), 320 * MiB);
  ck_assert_int_eq(ol_recent_rest_of_last(log_, &reading, state, 2 * STEP_LAYERS), 80 * MiB);
  /* where only the last two are live still, the rest makes the others */
  ck_assert_int_eq(ol_recent_rest_of_last(log_, &reading, state + 2 * STEP_LAYERS - 2, 2),
                   320 * MiB - 32 * MiB);
}
END_TEST

/* cuBLAS makes its workspaces once a thread: the main thread's in the
 * first forward's first layer, the autograd thread's, of the same sizes,
 * in the first backward; PyTorch keeps them. Made twice and never given
 * back, they are no step's work either: kept in the repeat, they broke it
 * in the first layer, and a second step out at its 11th of 16 layers was
 * set beside the first six layers late (every layer's sizes alike), the
 * rest short of those layers (held-out gpt2_medium at batch 3 under
 * 8136M: 1.0 GB read where 2.15 GB came, batch 2 said to fit where only 1
 * does). Out at layer 11's kept activation: the first made 5 layers more
 * (5 x 32 MiB), its loss (64) and first gradient (16) before it freed
 * anything, the autograd thread's workspaces (live) left out. */
/* A layer of the forward: its kept activation, its workspaces where
 * given (sizes in MiB, kept for good: tags into ws), two temporaries. */
static void layer_with_workspaces(const int *ws_mib, uint32_t *ws)
{
  ol_recent_note(log_, 1, 32 * MiB, false);
  for (int w = 0; ws_mib && w < 2; w++)
    ws[w] = ol_recent_note(log_, 2, (uint64_t)ws_mib[w] * MiB, false);
  made_and_freed(2, 8 * MiB, 1);
  made_and_freed(2, 6 * MiB, 1);
}

/* A first step whose layer `at` makes the main thread's workspaces (tags
 * in live[0..2)) and, where `autograd`, whose backward makes the autograd
 * thread's of the same sizes (live[2..4)); its gradients set to None. */
static void step_with_workspaces(int at, const int *ws_mib, bool autograd, uint32_t *live)
{
  ol_recent_note(log_, 0, 4 * MiB, false);
  for (int l = 0; l < STEP_LAYERS; l++)
    layer_with_workspaces(l == at ? ws_mib : NULL, live);
  ol_recent_note(log_, 3, 64 * MiB, false);
  for (int g = 0; g < STEP_LAYERS; g++) {
    ol_recent_note(log_, 4, 16 * MiB, false);
    for (int w = 0; autograd && g == 0 && w < 2; w++)
      live[2 + w] = ol_recent_note(log_, 4, (uint64_t)ws_mib[w] * MiB, false);
    ol_recent_note(log_, 1, 32 * MiB, true);
  }
  for (int g = 0; g < STEP_LAYERS; g++)
    ol_recent_note(log_, 4, 16 * MiB, true);
  ol_recent_note(log_, 3, 64 * MiB, true);
  ol_recent_note(log_, 0, 4 * MiB, true);
}

/* The second step, out at its 12th layer's kept activation, set beside
 * the first at the failure. */
static void second_step_out_in_its_layers(int64_t *more_, int64_t *made_,
                                          ol_recent_reading_t *reading)
{
  uint64_t began[2];
  ol_recent_note(log_, 0, 4 * MiB, false);
  for (int l = 0; l < 11; l++)
    layer_with_workspaces(NULL, NULL);
  ck_assert(ol_recent_step_repeat(log_, 32 * MiB, step_work, STEP_SITES, began));
  ck_assert(ol_recent_against_step(log_, began, 32 * MiB, (ol_recent_sites_t){-1, -1}, more_,
                                   made_, STEP_SITES, reading));
}

START_TEST(workspaces_made_once_a_thread_do_not_shift_the_steps)
{
  static const int ws_mib[2] = {33, 17};
  uint32_t live[4];
  int64_t more_[STEP_SITES] = {0}, made_[STEP_SITES] = {0};
  ol_recent_reading_t reading;
  step_with_workspaces(0, ws_mib, true, live);
  second_step_out_in_its_layers(more_, made_, &reading);
  ck_assert_int_eq(reading.held_more, (33 + 17) * MiB); /* the autograd thread's, made since */
  ck_assert_int_eq(ol_recent_rest_of_last(log_, &reading, live, 4), (5 * 32 + 64 + 16) * MiB);
}
END_TEST

/* A workspace the first step made past the point (cuBLAS's, at the first
 * matrix product: a CNN's classifier, its last layer) is held more than
 * there, and counts in what the step holds more; but no site kept it:
 * it is not the temporary site's kept tensor (resnet_fits replayed at
 * 0.362 of its cap was told a leak by it: its 96 MiB a 32nd of 2.9 GiB). */
START_TEST(a_workspace_made_past_the_point_is_no_site_s_kept_tensor)
{
  static const int ws_mib[2] = {96, 1};
  uint32_t live[4];
  int64_t more_[STEP_SITES] = {0}, made_[STEP_SITES] = {0};
  ol_recent_reading_t reading;
  step_with_workspaces(STEP_LAYERS - 1, ws_mib, false, live);
  second_step_out_in_its_layers(more_, made_, &reading);
  ck_assert_int_eq(reading.held_more, 97 * MiB);
  ck_assert_int_eq(more_[2], 0);
}
END_TEST

/* A first step whose head and backward make workspaces of sizes other
 * blocks have too (no size made once, none made for good): the main
 * thread's at the head, of the loss's size, the autograd thread's after
 * the fourth gradient, of the input's; after a load of other sizes.
 * Both kept. */
static void step_with_shared_workspaces(void)
{
  for (int w = 0; w < 3; w++)
    ol_recent_note(log_, 0, 2 * MiB, false); /* the load */
  ol_recent_note(log_, 0, 4 * MiB, false);
  for (int l = 0; l < STEP_LAYERS; l++) {
    ol_recent_note(log_, 1, 32 * MiB, false);
    made_and_freed(2, 8 * MiB, 1);
  }
  ol_recent_note(log_, 2, 64 * MiB, false); /* the main thread's workspace */
  ol_recent_note(log_, 3, 64 * MiB, false);
  for (int g = 0; g < STEP_LAYERS; g++) {
    ol_recent_note(log_, 4, 16 * MiB, false);
    if (g == 3)
      ol_recent_note(log_, 4, 4 * MiB, false); /* the autograd thread's */
    ol_recent_note(log_, 1, 32 * MiB, true);
  }
  for (int g = 0; g < STEP_LAYERS; g++)
    ol_recent_note(log_, 4, 16 * MiB, true);
  ol_recent_note(log_, 3, 64 * MiB, true);
  ol_recent_note(log_, 0, 4 * MiB, true);
}

/* Out at the second step's sixth gradient: its allocations back from the
 * request repeat the first's for two only, the autograd thread's
 * workspace between (held-out resnet50_adam, out early in its second
 * backward, read as a first step: "at most"). With the workspaces passed
 * over, the steps are set beside each other: nothing held more (both
 * made before the point), the rest of the first its sixth gradient
 * (what the second made and holds left out, as account.c does). */
START_TEST(workspaces_of_shared_sizes_are_passed_over)
{
  uint32_t live[STEP_LAYERS + 8];
  size_t n = 0;
  step_with_shared_workspaces();
  live[n++] = ol_recent_note(log_, 0, 4 * MiB, false);
  for (int l = 0; l < STEP_LAYERS; l++) {
    uint32_t layer = ol_recent_note(log_, 1, 32 * MiB, false);
    if (l < STEP_LAYERS - 5) /* the last five are freed below */
      live[n++] = layer;
    made_and_freed(2, 8 * MiB, 1);
  }
  live[n++] = ol_recent_note(log_, 3, 64 * MiB, false);
  for (int g = 0; g < 5; g++) {
    live[n++] = ol_recent_note(log_, 4, 16 * MiB, false);
    ol_recent_note(log_, 1, 32 * MiB, true);
  }
  uint64_t began[2];
  int64_t more_[STEP_SITES] = {0}, made_[STEP_SITES] = {0};
  ol_recent_reading_t reading;
  ck_assert(ol_recent_step_repeat(log_, 16 * MiB, step_work, STEP_SITES, began));
  ck_assert(ol_recent_against_step(log_, began, 16 * MiB, (ol_recent_sites_t){-1, -1}, more_,
                                   made_, STEP_SITES, &reading));
  ck_assert_int_eq(reading.held_more, 0);
  ck_assert_int_eq(ol_recent_rest_of_last(log_, &reading, live, n), 16 * MiB);
}
END_TEST

/* What a smaller batch does not shrink in the rest of a first step
 * (ol_recent_rest_fixed). A first step whose backward makes its head's
 * large gradient first (VGG-16's classifier: 472 of its 528 MiB of
 * weights), whose last layer makes a workspace kept for good (cuBLAS's,
 * at the classifier), and whose update (site 5, the optimizer's) makes
 * its state, kept, and a temporary; gradients set to None after. */
#define UPDATE_SITE 5
static const uint8_t update_work[STEP_SITES + 1] = {
  0, OL_RECENT_FORWARD, OL_RECENT_FORWARD, OL_RECENT_FORWARD, OL_RECENT_BACKWARD,
  OL_RECENT_UPDATE | OL_RECENT_STATE};

static uint64_t head_first(int g)
{
  return g == 0 ? 256 * MiB : 16 * MiB;
}

/* live[0]: the workspace, live[1]: the state; temporary: the update
 * makes one beside its state (Adam's foreach), else none (SGD's
 * momentum). A layer makes two temporaries. */
static void step_with_a_large_head(uint32_t *live, bool temporary)
{
  ol_recent_note(log_, 0, 4 * MiB, false);
  for (int l = 0; l < STEP_LAYERS; l++) {
    ol_recent_note(log_, 1, 32 * MiB, false);
    if (l == STEP_LAYERS - 1)
      live[0] = ol_recent_note(log_, 2, 96 * MiB, false);
    made_and_freed(2, 8 * MiB, 1);
    made_and_freed(2, 6 * MiB, 1);
  }
  ol_recent_note(log_, 3, 64 * MiB, false);
  for (int g = 0; g < STEP_LAYERS; g++) {
    ol_recent_note(log_, 4, head_first(g), false);
    ol_recent_note(log_, 1, 32 * MiB, true);
  }
  live[1] = ol_recent_note(log_, UPDATE_SITE, 512 * MiB, false);
  if (temporary)
    made_and_freed(UPDATE_SITE, 8 * MiB, 1);
  for (int g = 0; g < STEP_LAYERS; g++)
    ol_recent_note(log_, 4, head_first(g), true);
  ol_recent_note(log_, 3, 64 * MiB, true);
  ol_recent_note(log_, 0, 4 * MiB, true);
}

/* The second step out at its 13th layer's activation, set beside the
 * first; what it holds (its input and 12 layers) live with the first's
 * workspace and state: the rest of the first rose by its last four
 * layers, its loss and its head's gradient (4 x 32 + 64 + 256 MiB) and
 * fell from there; of that, the head's gradient is no batch's, nor is
 * the workspace the first made (and the second does not). */
static void assert_no_batch_s(bool temporary)
{
  uint32_t live[2 + 1 + STEP_LAYERS];
  size_t n = 2;
  step_with_a_large_head(live, temporary);
  live[n++] = ol_recent_note(log_, 0, 4 * MiB, false);
  for (int l = 0; l < 12; l++) {
    live[n++] = ol_recent_note(log_, 1, 32 * MiB, false);
    made_and_freed(2, 8 * MiB, 1);
    made_and_freed(2, 6 * MiB, 1);
  }
  uint64_t began[2];
  int64_t more_[STEP_SITES + 1] = {0}, made_[STEP_SITES + 1] = {0};
  ol_recent_reading_t reading;
  ck_assert(ol_recent_step_repeat(log_, 32 * MiB, update_work, STEP_SITES + 1, began));
  ck_assert(ol_recent_against_step(log_, began, 32 * MiB, (ol_recent_sites_t){-1, -1}, more_,
                                   made_, STEP_SITES + 1, &reading));
  ck_assert_int_eq(ol_recent_rest_of_last(log_, &reading, live, n), (4 * 32 + 64 + 256) * MiB);
  ol_recent_fixed_t fixed =
    ol_recent_rest_fixed(log_, &reading, live, n, update_work, STEP_SITES + 1);
  ck_assert_int_eq(fixed.gradients, 256 * MiB);
  ck_assert_int_eq(fixed.held_over, 96 * MiB);
  /* without roles, nothing is told */
  fixed = ol_recent_rest_fixed(log_, &reading, live, n, NULL, 0);
  ck_assert_int_eq(fixed.gradients + fixed.held_over, 0);
}

START_TEST(a_head_s_gradients_and_a_workspace_are_no_batch_s)
{
  assert_no_batch_s(true);
}
END_TEST

/* Autocast's copies of the weights (ol_recent_rest_copies). A step under
 * autocast casts each of six 4 MiB weights (1024 x 1024 in fp32, beside
 * norms of 4 KiB: the width's fp32 row) to a 2 MiB copy as its forward
 * reads it and keeps it with the layer's 32 MiB activation to the
 * backward, which makes each weight's 16-bit gradient (2 MiB, freed once
 * cast up) and its fp32 gradient (4 MiB, freed after the update). The
 * second step is out at its fifth layer's copy: it holds four copies, and
 * the rest of the first made two more by its highest point (its last
 * layer's gradient, made beside its loss: 2 x 34 + 64 + 4 MiB above the
 * point), so six copies do not shrink with the batch. */
#define CAST_LAYERS 6
static void autocast_step(uint32_t *live, size_t *n, int layers)
{
  for (int l = 0; l < layers; l++) {
    uint32_t copy = ol_recent_note(log_, 1, 2 * MiB, false);
    uint32_t act = ol_recent_note(log_, 1, 32 * MiB, false);
    made_and_freed(2, 8 * MiB, 1);
    if (live) {
      live[(*n)++] = copy;
      live[(*n)++] = act;
    }
  }
  if (layers < CAST_LAYERS)
    return;
  ol_recent_note(log_, 3, 64 * MiB, false);
  for (int l = CAST_LAYERS - 1; l >= 0; l--) {
    made_and_freed(4, 2 * MiB, 1);
    ol_recent_note(log_, 4, 4 * MiB, false);
    ol_recent_note(log_, 1, 32 * MiB, true);
    ol_recent_note(log_, 1, 2 * MiB, true);
  }
  ol_recent_note(log_, 3, 64 * MiB, true);
  for (int l = 0; l < CAST_LAYERS; l++)
    ol_recent_note(log_, 4, 4 * MiB, true);
}

/* The second step's copies, the weights being those of weights[]. */
static int64_t copies_held(uint64_t *weights, size_t count)
{
  uint32_t live[2 * CAST_LAYERS];
  size_t n = 0;
  ol_recent_iteration_ended(log_);
  autocast_step(NULL, NULL, CAST_LAYERS);
  ol_recent_iteration_ended(log_);
  autocast_step(live, &n, 4);
  int64_t more_[STEP_SITES] = {0}, made_[STEP_SITES] = {0};
  ol_recent_reading_t reading;
  ck_assert(ol_recent_against_last(log_, 2 * MiB, (ol_recent_sites_t){-1, -1}, more_, made_,
                                   STEP_SITES, &reading));
  ck_assert_int_eq(ol_recent_rest_of_last(log_, &reading, live, n), (2 * 34 + 64 + 4) * MiB);
  return ol_recent_rest_copies(log_, &reading, live, n, weights, count);
}

START_TEST(autocast_s_copies_of_the_weights_are_no_batch_s)
{
  /* six matrices and two norms (too small to be told a matrix) */
  uint64_t weights[CAST_LAYERS + 2] = {4 * MiB, 4 * MiB, 4 * MiB, 4 * MiB, 4 * MiB, 4 * MiB,
                                       4096, 4096};
  ck_assert_int_eq(copies_held(weights, CAST_LAYERS + 2), 6 * 2 * MiB);
}
END_TEST

/* ... not where the step made copies of less than two thirds of the
 * weights' bytes: a 48 MiB embedding, read by a lookup, is not cast, and
 * the 2 MiB blocks may be activations of that size by chance; a 10 MiB
 * one leaves seven tenths of the copies' bytes cast. */
START_TEST(copies_of_a_few_weights_are_no_autocast)
{
  uint64_t weights[CAST_LAYERS + 2] = {48 * MiB, 4 * MiB, 4 * MiB, 4 * MiB,
                                       4 * MiB,  4 * MiB, 4 * MiB, 4096};
  ck_assert_int_eq(copies_held(weights, CAST_LAYERS + 2), 0);
  teardown();
  setup();
  uint64_t smaller[CAST_LAYERS + 2] = {10 * MiB, 4 * MiB, 4 * MiB, 4 * MiB,
                                       4 * MiB,  4 * MiB, 4 * MiB, 4096};
  ck_assert_int_eq(copies_held(smaller, CAST_LAYERS + 2), 6 * 2 * MiB);
}
END_TEST

/* ... nor where the weights are not told fp32: a norm of 2 KiB beside
 * 4 MiB matrices (no square of its width in fp32; held-out
 * llama1b_second_step, in bf16, whose fp32 temporaries of its hidden
 * states are half its MLP's matrices), nor with no norm at all (VGG-16's
 * weights: its 112x112 feature maps at batch 32 are half its classifier's
 * first matrix) */
START_TEST(weights_not_told_fp32_have_no_copies)
{
  uint64_t weights[CAST_LAYERS + 1] = {4 * MiB, 4 * MiB, 4 * MiB, 4 * MiB,
                                       4 * MiB, 4 * MiB, 2048};
  ck_assert_int_eq(copies_held(weights, CAST_LAYERS + 1), 0);
  teardown();
  setup();
  ck_assert_int_eq(copies_held(weights, CAST_LAYERS), 0);
}
END_TEST

/* A finished iteration's copies (ol_recent_iteration_copies: a fitted
 * job's batch figure): at its highest point, its last layer's gradient
 * made beside its loss, all six are held; none is read before two
 * iterations are told. */
START_TEST(a_finished_iteration_s_copies_are_read)
{
  uint64_t weights[CAST_LAYERS + 1] = {4 * MiB, 4 * MiB, 4 * MiB, 4 * MiB,
                                       4 * MiB, 4 * MiB, 4096};
  ol_recent_iteration_ended(log_);
  autocast_step(NULL, NULL, CAST_LAYERS);
  ck_assert_int_eq(ol_recent_iteration_copies(log_, weights, CAST_LAYERS + 1, NULL), 0);
  ol_recent_iteration_ended(log_);
  ck_assert_int_eq(ol_recent_iteration_copies(log_, weights, CAST_LAYERS + 1, NULL), 6 * 2 * MiB);
}
END_TEST

/* A step's highest points, its update apart (ol_recent_iteration_highs:
 * a fitted job's batch figure where the update is its peak). A step of
 * four layers keeps a 32 MiB activation each to its backward, which makes
 * each layer's 4 MiB gradient before it frees the layer's activation (its
 * forward and backward highest at 4 x 32 + 4 MiB); its update (site 5, the
 * optimizer's) makes a 256 MiB temporary beside the 16 MiB of gradients,
 * freed with them. Iterations are told two layers into each step's
 * forward, as a finder may: the step read is the whole one between the
 * two updates, the later in the last iteration told. */
static uint32_t step_with_a_large_update(int layers)
{
  uint32_t first = 0;
  for (int l = 0; l < 4; l++) {
    if (l == 2)
      ol_recent_iteration_ended(log_);
    if (l == layers)
      return first;
    uint32_t tag = ol_recent_note(log_, 1, 32 * MiB, false);
    first = first ? first : tag;
  }
  for (int l = 0; l < 4; l++) {
    ol_recent_note(log_, 4, 4 * MiB, false);
    ol_recent_note(log_, 1, 32 * MiB, true);
  }
  made_and_freed(UPDATE_SITE, 256 * MiB, 1);
  for (int l = 0; l < 4; l++)
    ol_recent_note(log_, 4, 4 * MiB, true);
  return first;
}

START_TEST(an_update_s_highest_point_is_told_from_the_step_s)
{
  ol_recent_highs_t h;
  step_with_a_large_update(4);
  step_with_a_large_update(2);
  /* the last iteration told holds the first's update, and the log no
   * update before that step */
  ck_assert(!ol_recent_iteration_highs(log_, update_work, STEP_SITES + 1, &h));
  teardown();
  setup();
  step_with_a_large_update(4);
  step_with_a_large_update(4);
  uint32_t third = step_with_a_large_update(4);
  step_with_a_large_update(2);
  ck_assert(ol_recent_iteration_highs(log_, update_work, STEP_SITES + 1, &h));
  ck_assert_uint_eq(h.step_from, third - 1);
  ck_assert_int_eq(h.work, (4 * 32 + 4) * MiB);
  ck_assert_int_eq(h.update, (256 + 16) * MiB);
  ck_assert_int_eq(h.now, 2 * 32 * MiB); /* the fourth's first two layers */
  /* without roles, nothing is told */
  ck_assert(!ol_recent_iteration_highs(log_, NULL, 0, &h));
}
END_TEST

/* ... nor a size made more than autocast makes it (three a weight in a
 * step): a weight of 16 MiB, whose copy's size (8 MiB) the step's
 * temporaries have, six a step, is not told; the five of 4 MiB are (their
 * copies, six held, counted as five: no more than the weights). */
START_TEST(a_size_made_often_is_no_copy)
{
  uint64_t weights[CAST_LAYERS + 1] = {16 * MiB, 4 * MiB, 4 * MiB, 4 * MiB,
                                       4 * MiB,  4 * MiB, 4096};
  ck_assert_int_eq(copies_held(weights, CAST_LAYERS + 1), 5 * 2 * MiB);
}
END_TEST

/* An update that makes its state and nothing else (SGD's momentum at its
 * first step): the state, live, is where the backward was over, before
 * the gradients are set to None. */
START_TEST(an_update_of_state_alone_ends_the_backward)
{
  assert_no_batch_s(false);
}
END_TEST

/* A network of unlike layers, without call sites: each layer of its own
 * size (a CNN's stages), CNN_LAYERS of them kept by the forward and
 * given back by the backward, each making a gradient of its own size. No
 * stack of like layers in either. */
#define CNN_LAYERS 200

static uint64_t cnn_layer(int l)
{
  return (uint64_t)(l + 8) * MiB;
}

static void cnn_forward(int layers)
{
  for (int l = 0; l < layers; l++)
    ol_recent_note(log_, 1, cnn_layer(l), false);
}

/* The load (a weight of each gradient's size), a whole step, then an
 * evaluation's output kept with its graph (the leak, `kept` bytes)
 * where kept > 0. */
static void cnn_step(uint64_t kept)
{
  for (int l = 0; l < CNN_LAYERS; l++)
    ol_recent_note(log_, 0, cnn_layer(l) + MiB / 2, false);
  ol_recent_note(log_, 0, 3 * MiB, false); /* the input */
  cnn_forward(CNN_LAYERS);
  for (int l = CNN_LAYERS - 1; l >= 0; l--) {
    ol_recent_note(log_, 4, cnn_layer(l) + MiB / 2, false);
    ol_recent_note(log_, 1, cnn_layer(l), true);
  }
  for (int l = 0; l < CNN_LAYERS; l++)
    ol_recent_note(log_, 4, cnn_layer(l) + MiB / 2, true);
  ol_recent_note(log_, 0, 3 * MiB, true);
  if (kept)
    ol_recent_note(log_, 2, kept, false);
}

/* Without call sites, a step of unlike layers is told by what it held:
 * its forward rose by most of what the job rose and its backward gave it
 * back (held-out resnet50_eval_kept and convnext_tiny_eval_kept without
 * their sites, out at their second step: no step was found by sizes,
 * and their leak was read as a first step's `activations`). The second
 * step, out in its forward, holds the evaluation's output more. A first
 * forward's layer of long inputs rises by much and gives its attention's
 * temporary back, but in a few allocations: no step (corpus gpt_neo_batch
 * without its sites, read as one before the count). */
START_TEST(a_step_of_unlike_layers_is_told_by_what_it_held)
{
  uint64_t began[2];
  int64_t more_[STEP_SITES] = {0}, made_[STEP_SITES] = {0};
  ol_recent_reading_t reading;
  cnn_step(2048 * MiB);
  ol_recent_note(log_, 0, 3 * MiB, false);
  cnn_forward(150);
  ck_assert(ol_recent_step_by_sizes(log_, cnn_layer(150), began));
  ck_assert(ol_recent_against_step(log_, began, cnn_layer(150), (ol_recent_sites_t){-1, -1},
                                   more_, made_, STEP_SITES, &reading));
  ck_assert_int_eq(reading.held_more, 2048 * MiB);
  teardown();
  setup();
  ol_recent_note(log_, 0, 3 * MiB, false);
  for (int l = 0; l < 24; l++) {
    ol_recent_note(log_, 1, 32 * MiB, false);
    made_and_freed(2, 2048 * MiB, 1); /* the attention's scores */
  }
  ol_recent_note(log_, 1, 32 * MiB, false);
  ck_assert(!ol_recent_step_by_sizes(log_, 2048 * MiB, began)); /* out at the 25th's scores */
}
END_TEST

/* A first step's forward and backward repeat their layers, one stack
 * each; an inference's second forward repeats its first, one stack. */
START_TEST(one_stack_a_period_is_no_step_by_sizes)
{
  uint64_t began[2];
  sized_forward(40);
  sized_backward(20, false);
  ol_recent_note(log_, NONE, 2 * MiB, false); /* out at the next layer's input's gradient */
  ck_assert(!ol_recent_step_by_sizes(log_, 16 * MiB, began));
  teardown();
  setup();
  sized_forward(STEP_LAYERS);
  ol_recent_note(log_, NONE, 64 * MiB, false);
  for (int l = 0; l < STEP_LAYERS; l++) {
    ol_recent_note(log_, NONE, 32 * MiB, true);
    ol_recent_note(log_, NONE, 12 * MiB, true);
  }
  ol_recent_note(log_, NONE, 64 * MiB, true);
  sized_forward(12);
  ol_recent_note(log_, NONE, 32 * MiB, false);
  ck_assert(!ol_recent_step_by_sizes(log_, 8 * MiB, began));
  ck_assert(!ol_recent_step_by_sizes(NULL, 8 * MiB, began));
}
END_TEST

/* A compiled layer asks for one size many times over (a buffer a head):
 * two such runs in a layer are no forward's stack and backward's (corpus
 * compiled_batch at 0.7 of its cap without its sites, out in its first
 * step, was read as past it). */
START_TEST(runs_of_one_size_in_a_layer_are_no_stacks)
{
  ol_recent_note(log_, NONE, 4 * MiB, false);
  for (int l = 0; l < 12; l++) {
    ol_recent_note(log_, NONE, 32 * MiB, false);
    for (int h = 0; h < 12; h++)
      ol_recent_note(log_, NONE, 24 * MiB, false);
    ol_recent_note(log_, NONE, 12 * MiB, false);
    for (int h = 0; h < 12; h++)
      ol_recent_note(log_, NONE, 20 * MiB, false);
    made_and_freed(NONE, 8 * MiB, 1);
  }
  ol_recent_note(log_, NONE, 32 * MiB, false);
  uint64_t began[2]; /* out at the next layer's second ask */
  ck_assert(!ol_recent_step_by_sizes(log_, 24 * MiB, began));
}
END_TEST

/* A larger input's layers: more than one size in 32 differs. */
START_TEST(other_sizes_are_no_measure)
{
  steps(3, false);
  ol_recent_note(log_, 0, 4 * MiB, false);
  ol_recent_note(log_, 1, 48 * MiB, false);
  ck_assert(!against_last(8 * MiB));
}
END_TEST

/* The request alone differs, the fourth of four: more than one in 32. */
START_TEST(another_request_is_no_measure)
{
  three_steps_and_a_layer();
  ck_assert(!against_last(16 * MiB));
}
END_TEST

/* One size in 32 may differ: a workspace made once, a bucket; more, and
 * the calls are compared instead. */
START_TEST(one_size_in_32_may_differ)
{
  ol_recent_iteration_ended(log_);
  made_and_freed(1, MiB, 50);
  ol_recent_iteration_ended(log_);
  made_and_freed(1, MiB, 20);
  made_and_freed(1, 2 * MiB, 1);
  made_and_freed(1, MiB, 18);
  ck_assert(against_last(MiB)); /* one of 40 */
  ck_assert_int_eq(held, 0);
  ol_recent_note(log_, 1, 3 * MiB, false);
  ck_assert(against_last(MiB)); /* two of 41: by calls, the same site's */
  ck_assert(by_calls);
  ck_assert_int_eq(held, 3 * MiB); /* the site holds one block more than then */
  ck_assert_int_eq(more[1], 3 * MiB);
}
END_TEST

/* This iteration has made more allocations than the last did in all. */
START_TEST(a_longer_iteration_is_no_measure)
{
  steps(3, false);
  for (int i = 0; i < 7; i++)
    ol_recent_note(log_, 2, 8 * MiB, false);
  ck_assert(!against_last(8 * MiB));
}
END_TEST

/* Iterations longer than the log keeps: the last one's beginning is
 * overwritten. */
START_TEST(an_iteration_the_log_lost_is_no_measure)
{
  for (int it = 0; it < 3; it++) {
    ol_recent_iteration_ended(log_);
    made_and_freed(2, 8 * MiB, 100000);
  }
  ol_recent_note(log_, 2, 8 * MiB, false);
  ck_assert(!against_last(8 * MiB));
}
END_TEST

/* A site beyond the caller's table, or none, counts in the total only. */
START_TEST(sites_beyond_the_table_count_in_the_total)
{
  ol_recent_iteration_ended(log_);
  made_and_freed(1, MiB, 2);
  ol_recent_note(log_, 1, MiB, false);
  ol_recent_iteration_ended(log_);
  ol_recent_note(log_, 7, MiB, false);
  ol_recent_note(log_, -1, MiB, false);
  ck_assert(against_last(MiB));
  ck_assert_int_eq(held, 3 * MiB); /* the last one's third, and these two */
  ck_assert_int_eq(more[1], MiB);
  ck_assert_int_eq(more[0] + more[2] + more[3], 0);
}
END_TEST

/* ---- by calls: iterations of other sizes -------------------------------- */

static uint64_t scaled(uint64_t size, int eighths)
{
  return size * (uint64_t)eighths / 8;
}

/* A step's first allocations at a size of eighths/8: its input, then
 * layers (kept for the backward) with a temporary each. */
static void scaled_begin(int eighths, int layers)
{
  ol_recent_note(log_, 0, scaled(4 * MiB, eighths), false);
  for (int l = 0; l < layers; l++) {
    ol_recent_note(log_, 1, scaled(32 * MiB, eighths), false);
    made_and_freed(2, scaled(24 * MiB, eighths), 1);
  }
}

/* A whole step of 8 layers and a loss; what is kept is not freed. */
static void scaled_step(int eighths, bool keep_loss, bool keep_input)
{
  ol_recent_iteration_ended(log_);
  scaled_begin(eighths, 8);
  ol_recent_note(log_, 3, scaled(64 * MiB, eighths), false);
  for (int l = 0; l < 8; l++)
    ol_recent_note(log_, 1, scaled(32 * MiB, eighths), true);
  if (!keep_loss)
    ol_recent_note(log_, 3, scaled(64 * MiB, eighths), true);
  if (!keep_input)
    ol_recent_note(log_, 0, scaled(4 * MiB, eighths), true);
}

/* Steps of growing sizes (a curriculum), the third keeping its loss, and
 * the fourth's input and four layers: the fifth layer is asked for. */
static void growing_steps(bool keep_loss, bool keep_input)
{
  scaled_step(8, false, false);
  scaled_step(9, false, false);
  scaled_step(10, keep_loss, keep_input);
  ol_recent_iteration_ended(log_);
  scaled_begin(11, 4);
}

START_TEST(a_kept_loss_is_read_by_calls_where_sizes_differ)
{
  growing_steps(true, false);
  ck_assert(against_last(scaled(32 * MiB, 11)));
  ck_assert(by_calls);
  ck_assert_int_eq(more[3], scaled(64 * MiB, 10)); /* one block more, of its size */
  ck_assert_int_eq(held, scaled(64 * MiB, 10));
  ck_assert_int_eq(more[0] + more[1] + more[2], 0); /* as many blocks as then, larger */
  ck_assert_int_eq(made[3], 0);
  ck_assert_int_eq(made[1], 0); /* allocations, not bytes */
}
END_TEST

START_TEST(sizes_that_differ_hold_nothing_more_by_calls)
{
  growing_steps(false, false);
  ck_assert(against_last(scaled(32 * MiB, 11)));
  ck_assert(by_calls);
  ck_assert_int_eq(held, 0);
  ck_assert_int_eq(rest, -1); /* the bytes tell nothing */
  for (int i = 0; i < SITES; i++)
    ck_assert_int_eq(more[i], 0);
}
END_TEST

/* Under a sample of stacks, a site's small blocks may be the "not
 * sampled" site's in one iteration and its own in the next: only sites
 * whose blocks are all large enough to be sampled surely are counted. */
START_TEST(small_blocks_are_counted_only_without_a_sample)
{
  growing_steps(false, true);
  ck_assert(against_last(scaled(32 * MiB, 11)));
  ck_assert_int_eq(more[0], scaled(4 * MiB, 11)); /* every stack taken: one block more */
  memset(more, 0, sizeof more);
  ck_assert(against_last_sampled(scaled(32 * MiB, 11), 7)); /* a sample, its site unused here */
  ck_assert(by_calls);
  ck_assert_int_eq(more[0], 0);
  ck_assert_int_eq(held, 0);
}
END_TEST

/* A block large enough to carry its site was missed by the sample (the
 * temporaries are the "not sampled" site's): a site's count may be one
 * short, so nothing is read. */
START_TEST(a_large_block_the_sample_missed_is_no_measure)
{
  growing_steps(true, false);
  ck_assert(!against_last_sampled(scaled(32 * MiB, 11), 2));
  ck_assert(by_calls);
}
END_TEST

/* Three growing steps, the third keeping its loss, and the fourth begun. */
static void three_growing_steps(void)
{
  scaled_step(8, false, false);
  scaled_step(9, false, false);
  scaled_step(10, true, false);
  ol_recent_iteration_ended(log_);
}

/* Other sizes from other call sites: not the same calls. */
START_TEST(other_calls_are_no_measure)
{
  three_growing_steps();
  ol_recent_note(log_, 0, scaled(4 * MiB, 11), false);
  for (int l = 0; l < 4; l++) {
    ol_recent_note(log_, 1, scaled(32 * MiB, 11), false);
    made_and_freed(3, scaled(24 * MiB, 11), 1); /* the temporaries: another site */
  }
  ck_assert(!against_last(scaled(32 * MiB, 11)));
}
END_TEST

/* Too few blocks to set the sites side by side: a step's beginning. */
START_TEST(a_few_calls_are_no_measure)
{
  three_growing_steps();
  scaled_begin(11, 3); /* 7 allocations set side by side */
  ck_assert(!against_last(scaled(32 * MiB, 11)));
}
END_TEST

/* ---- a site's blocks made and freed within the last iteration --------- */

START_TEST(a_step_s_site_makes_and_frees_its_blocks)
{
  growing_steps(false, false);
  ck_assert(ol_recent_made_and_freed(log_, 3)); /* the loss: made and freed each step */
  ck_assert(ol_recent_made_and_freed(log_, 2)); /* the temporaries */
  teardown();
  setup();
  growing_steps(true, false); /* the last whole step kept its loss */
  ck_assert(!ol_recent_made_and_freed(log_, 3));
}
END_TEST

/* A cache made once mid-run (site 5 here): made and kept in its step, and
 * none made in the steps after. Not known: no site, no log, fewer than
 * two iterations begun. */
START_TEST(a_cache_made_once_is_not_a_step_s)
{
  ck_assert(!ol_recent_made_and_freed(log_, 3));
  steps(2, false);
  step_until_loss(32 * MiB);
  ol_recent_note(log_, 5, 512 * MiB, false);
  step_after_loss(false);
  ol_recent_iteration_ended(log_);
  ck_assert(!ol_recent_made_and_freed(log_, 5)); /* made in the last step, kept */
  steps(1, false);
  ck_assert(!ol_recent_made_and_freed(log_, 5)); /* none made in the last step */
  ck_assert(ol_recent_made_and_freed(log_, 3));
  ck_assert(!ol_recent_made_and_freed(log_, -1));
  ck_assert(!ol_recent_made_and_freed(NULL, 3));
}
END_TEST

/* ---- past a repeat of the last iteration ------------------------------ */

static ol_recent_more_t past;

static bool repeated_then_more(uint64_t request)
{
  return ol_recent_repeated_then_more(log_, request, &past);
}

/* Three steps, then a fourth that made and freed all the last one did
 * and then an optimizer's first moments (site 4, as large as the layers,
 * no free among them): more past a repeat. */
START_TEST(state_made_past_a_repeat_is_more)
{
  steps(3, false);
  step_until_loss(32 * MiB);
  step_after_loss(false);
  ol_recent_note(log_, 4, 32 * MiB, false);
  ol_recent_note(log_, 4, 32 * MiB, false);
  ck_assert(repeated_then_more(32 * MiB));
  ck_assert_int_eq(past.held, 64 * MiB);
  ck_assert_uint_eq(past.allocations, 2);
  ck_assert_uint_eq(past.frees, 0);
}
END_TEST

/* The same step done again with nothing after it is no more work, nor a
 * step whose sizes differed from its first allocation (a larger input). */
START_TEST(a_step_like_the_last_is_no_more)
{
  steps(3, false);
  step_until_loss(32 * MiB);
  ck_assert(!repeated_then_more(32 * MiB));
  teardown();
  setup();
  steps(3, false);
  ol_recent_note(log_, 0, 8 * MiB, false); /* twice the input */
  ol_recent_note(log_, 1, 64 * MiB, false);
  ck_assert(!repeated_then_more(16 * MiB));
}
END_TEST

/* What comes past a repeat that had not reached the last one's highest
 * point (its loss: input and layers are 68 MiB of 132) is no more work
 * shown: the step itself may be what differs. */
START_TEST(a_repeat_short_of_the_highest_is_no_measure)
{
  steps(3, false);
  ol_recent_note(log_, 0, 4 * MiB, false);
  for (int l = 0; l < 2; l++) {
    ol_recent_note(log_, 1, 32 * MiB, false);
    made_and_freed(2, 8 * MiB, 1);
  }
  ol_recent_note(log_, 4, 256 * MiB, false); /* where the loss came */
  ck_assert(!repeated_then_more(32 * MiB));
}
END_TEST

/* The boundary of iterations told late: a whole step like the last, then
 * a step of 8 times the batch, each tensor 8 times the last's first ones:
 * a larger input, not more work (corpus late_batch with its sites). */
START_TEST(a_larger_step_after_a_repeat_is_no_more)
{
  steps(3, false);
  step_until_loss(32 * MiB);
  step_after_loss(false);
  ol_recent_note(log_, 0, 32 * MiB, false);
  ol_recent_note(log_, 1, 256 * MiB, false);
  ck_assert(!repeated_then_more(64 * MiB)); /* the temporary, 8 times */
  ck_assert(repeated_then_more(4 * MiB)); /* another size: work the last never did */
}
END_TEST

/* The boundary of iterations told a step late: the one under way holds
 * the last step whole, then a longer sequence's step whose first tensors
 * (tokens, embeddings) are 5 times the last's first ones and whose cells'
 * are the same sizes: a step like the last, not more work (held-out
 * gru_longer_late); so is a transformer's step 4 times longer, its
 * attention's scores 16 times; a model loaded after the whole step is
 * more. */
START_TEST(a_longer_step_after_a_whole_repeat_is_no_more)
{
  for (int step = 0; step < 4; step++) {
    ol_recent_iteration_ended(log_);
    ol_recent_note(log_, 0, MiB, false);
    ol_recent_note(log_, 0, 4 * MiB, false);
    for (int t = 0; t < 8; t++)
      ol_recent_note(log_, 1, 16 * MiB, false);
    made_and_freed(2, 8 * MiB, 1);
    for (int t = 0; t < 8; t++)
      ol_recent_note(log_, 1, 16 * MiB, true);
    ol_recent_note(log_, 0, 4 * MiB, true);
    ol_recent_note(log_, 0, MiB, true);
    if (step == 2)
      ol_recent_iteration_ended(log_); /* then none until the failure: told late */
  }
  ol_recent_note(log_, 0, 5 * MiB, false);
  ol_recent_note(log_, 0, 20 * MiB, false);
  for (int t = 0; t < 12; t++)
    ol_recent_note(log_, 1, 16 * MiB, false);
  ck_assert(!repeated_then_more(16 * MiB));
  teardown();
  setup();
  steps(3, false);
  step_until_loss(32 * MiB);
  step_after_loss(false); /* a step whole, its end not told */
  ol_recent_note(log_, 0, 16 * MiB, false); /* a sequence 4 times longer: the input */
  for (int l = 0; l < 2; l++) {
    ol_recent_note(log_, 1, 128 * MiB, false); /* a layer's tokens, 4 times */
    made_and_freed(2, 128 * MiB, 1);           /* its scores, 16 times the temporary's */
  }
  ck_assert(!repeated_then_more(256 * MiB)); /* the loss, 4 times */
  teardown();
  setup();
  steps(3, false);
  step_until_loss(32 * MiB);
  step_after_loss(false);
  for (int i = 0; i < 6; i++) /* a teacher's weights */
    ol_recent_note(log_, 4, (uint64_t)(3 + 2 * i) * MiB, false);
  ck_assert(repeated_then_more(7 * MiB));
  ck_assert_int_eq(past.held, 48 * MiB);
  ck_assert_uint_eq(past.allocations, 6);
}
END_TEST

/* More of the same tensors where the last step's ended, none freed yet
 * (a step of more like blocks), or where the last one turned to its
 * backward (a longer sequence's unrolled steps): a larger input, not more
 * work, though its sizes are the last one's. */
START_TEST(more_of_the_same_tensors_is_no_more)
{
  for (int step = 0; step < 4; step++) {
    ol_recent_iteration_ended(log_);
    for (int i = 0; i < 4 + step; i++)
      ol_recent_note(log_, 1, 32 * MiB, false);
    for (int i = 0; i < 4 + step; i++)
      ol_recent_note(log_, 1, 32 * MiB, true);
  }
  ol_recent_iteration_ended(log_);
  for (int i = 0; i < 8; i++)
    ol_recent_note(log_, 1, 32 * MiB, false);
  ck_assert(!repeated_then_more(32 * MiB));
  teardown();
  setup();
  for (int step = 0; step < 3; step++) { /* 4 unrolled steps, a backward's temporary */
    ol_recent_iteration_ended(log_);
    for (int t = 0; t < 4; t++)
      ol_recent_note(log_, 1, 16 * MiB, false);
    made_and_freed(2, 8 * MiB, 1);
    for (int t = 0; t < 4; t++)
      ol_recent_note(log_, 1, 16 * MiB, true);
  }
  ol_recent_iteration_ended(log_);
  for (int t = 0; t < 6; t++) /* 6 unrolled steps */
    ol_recent_note(log_, 1, 16 * MiB, false);
  ck_assert(!repeated_then_more(16 * MiB));
}
END_TEST

/* A whole iteration ended before the one under way, or nothing to set it
 * beside. */
START_TEST(more_past_a_repeat_needs_two_iterations)
{
  ck_assert(!ol_recent_repeated_then_more(NULL, MiB, &past));
  steps(0, false); /* the first one begun, none ended */
  step_until_loss(32 * MiB);
  ol_recent_note(log_, 4, 32 * MiB, false);
  ck_assert(!repeated_then_more(32 * MiB));
}
END_TEST

static Suite *recent_suite(void)
{
  Suite *s = suite_create("recent");
  TCase *tc = tcase_create("against_last");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, a_kept_loss_is_held_more_at_the_same_point);
  tcase_add_test(tc, nothing_kept_holds_nothing_more);
  tcase_add_test(tc, a_batch_made_earlier_is_made_more);
  tcase_add_test(tc, one_iteration_is_no_measure);
  tcase_add_test(tc, a_repeat_found_late_has_the_iteration_before);
  tcase_add_test(tc, a_second_step_repeats_the_first);
  tcase_add_test(tc, steps_that_repeat_further_back_are_read_by_the_last);
  tcase_add_test(tc, a_second_step_like_the_first_holds_no_more);
  tcase_add_test(tc, blocks_made_once_in_the_first_step_do_not_break_its_repeat);
  tcase_add_test(tc, a_request_whose_size_the_step_before_made_once_is_its_repeat);
  tcase_add_test(tc, a_first_step_s_layers_are_no_step);
  tcase_add_test(tc, a_repeat_of_other_work_is_no_step);
  tcase_add_test(tc, a_second_step_is_told_by_its_sizes);
  tcase_add_test(tc, a_second_step_reads_the_rest_of_the_first);
  tcase_add_test(tc, the_rest_leaves_out_what_the_first_made_once);
  tcase_add_test(tc, workspaces_made_once_a_thread_do_not_shift_the_steps);
  tcase_add_test(tc, a_workspace_made_past_the_point_is_no_site_s_kept_tensor);
  tcase_add_test(tc, workspaces_of_shared_sizes_are_passed_over);
  tcase_add_test(tc, a_step_of_unlike_layers_is_told_by_what_it_held);
  tcase_add_test(tc, a_head_s_gradients_and_a_workspace_are_no_batch_s);
  tcase_add_test(tc, an_update_of_state_alone_ends_the_backward);
  tcase_add_test(tc, autocast_s_copies_of_the_weights_are_no_batch_s);
  tcase_add_test(tc, copies_of_a_few_weights_are_no_autocast);
  tcase_add_test(tc, weights_not_told_fp32_have_no_copies);
  tcase_add_test(tc, a_size_made_often_is_no_copy);
  tcase_add_test(tc, a_finished_iteration_s_copies_are_read);
  tcase_add_test(tc, an_update_s_highest_point_is_told_from_the_step_s);
  tcase_add_test(tc, the_last_iteration_s_work_is_read);
  tcase_add_test(tc, one_stack_a_period_is_no_step_by_sizes);
  tcase_add_test(tc, runs_of_one_size_in_a_layer_are_no_stacks);
  tcase_add_test(tc, a_request_that_begins_the_next_iteration);
  tcase_add_test(tc, other_sizes_are_no_measure);
  tcase_add_test(tc, another_request_is_no_measure);
  tcase_add_test(tc, one_size_in_32_may_differ);
  tcase_add_test(tc, a_longer_iteration_is_no_measure);
  tcase_add_test(tc, an_iteration_the_log_lost_is_no_measure);
  tcase_add_test(tc, sites_beyond_the_table_count_in_the_total);
  tcase_add_test(tc, a_kept_loss_is_read_by_calls_where_sizes_differ);
  tcase_add_test(tc, sizes_that_differ_hold_nothing_more_by_calls);
  tcase_add_test(tc, small_blocks_are_counted_only_without_a_sample);
  tcase_add_test(tc, a_large_block_the_sample_missed_is_no_measure);
  tcase_add_test(tc, other_calls_are_no_measure);
  tcase_add_test(tc, a_few_calls_are_no_measure);
  tcase_add_test(tc, a_step_s_site_makes_and_frees_its_blocks);
  tcase_add_test(tc, a_cache_made_once_is_not_a_step_s);
  suite_add_tcase(s, tc);
  tc = tcase_create("past_a_repeat");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, state_made_past_a_repeat_is_more);
  tcase_add_test(tc, a_step_like_the_last_is_no_more);
  tcase_add_test(tc, a_repeat_short_of_the_highest_is_no_measure);
  tcase_add_test(tc, a_larger_step_after_a_repeat_is_no_more);
  tcase_add_test(tc, more_of_the_same_tensors_is_no_more);
  tcase_add_test(tc, a_longer_step_after_a_whole_repeat_is_no_more);
  tcase_add_test(tc, more_past_a_repeat_needs_two_iterations);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  return ol_run_suite(recent_suite());
}
