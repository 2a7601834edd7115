/* core.h: the pure core of oomlens, shared by the preloaded library
 * (src/lib) and the offline analysers (src/analyze): options, logging,
 * text buffers and errors, the PyTorch-shaped counters, live-block tables,
 * call sites, iterations, the timeline, the out-of-memory classifier, the
 * trace's vocabulary, the one accounting model over all of them, and the
 * report: its model and its one renderer. Plain C11 and POSIX: nothing
 * here may include a CUDA header (the build compiles src/core without
 * them), nor call into src/lib. Listed under the file that defines it. */
#ifndef OL_CORE_H
#define OL_CORE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define OL_VERSION_TEXT "0.1.0"
#define OL_REPORT_FORMAT 1  /* version of the JSON report's layout */
#define OL_REPORT_MINOR 37  /* fields added without breaking readers of OL_REPORT_FORMAT (2: recovered_allocs, leak_warning; 3: batch_figure.overhead for .fixed; 4: oom.first_step, batch_fits_at_most, batch_fits_high; 5: oom.batch_is_the_lever, oom.no_batch_fits, the batch figures null but where the batch is the lever; 6: own_time; 7: oom.first_step.loss_upcast, oom.need_growth_per_iteration, oom.allocations_growth_per_iteration, leak_warning.allocations_growth_per_iteration; 8: calls.stream_queries, calls.stream_marks, calls.mark_waits; 9: calls.stream_barriers; 10: calls.handle_moves; 11: oom.gradients_made, oom.request_is_gradient; 12: the role "library", oom.gradients_made_own_segments; 13: oom.input_growth_per_iteration; 14: leak_warning.withdrawn_at_iteration, oom.external_holders[].child, oom.external_unlisted; 15: oom.framework_limit, oom.growing_site.role; 16: oom.framework_allocated, oom.no_block_held, oom.vmm_reserved, oom.vmm_not_framework, leak_warning.withdrawn_because; 17: oom.request_in_update, oom.update_bytes; 18: oom.request_state_buffers, oom.state_being_made, oom.request_update_makes_state, oom.own_copies, oom.own_copies_own_segments; 19: oom.request_is_copy, oom.request_is_copy_own_segment; 20: oom.own_copies_early, oom.own_copies_early_own_segments, oom.before_first_free_live; 21: oom.allocations_made; 22: oom.growing_site.once; 23: oom.growing_site.since_last_iteration, oom.held_since_last_iteration; 24: oom.since_last_by_calls, oom.growing_site.per_step; 25: oom.swings, oom.swings_kept; 26: oom.past_repeat; 27: oom.restarts, oom.batch_given; 28: oom.since_last_by_repeat; 29: oom.first_step.stacks, oom.first_step.weight_element, oom.first_step.weights_cast; 30: oom.first_step.logits_ahead, oom.first_step.logits_asks; 31: oom.first_step.element_unsure; 32: oom.step_repeat_held; 33: oom.step_rest; 34: oom.step_rest_gradients, oom.step_held_over; 35: oom.step_cast_copies; 36: devices[].batch_figure.copies; 37: devices[].batch_figure.update) */
#define OL_MAX_DEVICES 64
#define OL_POOL_UNIT_MAX 512 /* chunks one extent may hold: OOMLENS_POOL_UNIT, --map-unit, a trace's pool_unit */
#define OL_SMALL_SIZE (1u << 20) /* PyTorch's small-pool limit, for the same rows */
#define OL_MATRIX_MIN (64 * 1024) /* a weight this large is a matrix, not a norm's or a bias's */
/* The bytes of a square matrix of a layer's width, where a vector of that
 * width (a norm's weight) is a bytes at element bytes an element: for
 * a = D*element, D*D*element = a^2 / element. 0 where a^2 overflows or
 * does not divide: no such matrix. first_step.c reads a layer's element
 * from it, recent.c whether the weights are fp32. */
static inline uint64_t ol_square_bytes(uint64_t a, uint64_t element)
{
  uint64_t square;
  if (element == 0 || __builtin_mul_overflow(a, a, &square) || square % element)
    return 0;
  return square / element;
}
/* The largest size oomlens takes anywhere (options, flags, trace lines):
 * 2^56 bytes (64 PiB) is beyond any device, so a larger one is a typo or a
 * broken file, and sums of sizes below it stay far from overflow. */
#define OL_MAX_BYTES ((uint64_t)1 << 56)

/* ---- log.c ---------------------------------------------------------- */
void ol_log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void ol_log_verbose(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void ol_log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void ol_log_warn_once(atomic_bool *said, const char *fmt, ...)
  __attribute__((format(printf, 2, 3)));

/* ---- options.c ------------------------------------------------------ */
typedef enum ol_option {
  OL_OPT_ENABLE,
  OL_OPT_REPORT,
  OL_OPT_JSON,
  OL_OPT_REPORT_AT_EXIT,
  OL_OPT_SIGNAL,
  OL_OPT_VERBOSE,
  OL_OPT_MANAGE,
  OL_OPT_MAX_SPLIT_SIZE,
  OL_OPT_POOL_TRIM,
  OL_OPT_POOL_KEEP_USED,
  OL_OPT_POOL_REUSE_HELD,
  OL_OPT_POOL_MOVE,
  OL_OPT_POOL_UNIT, /* 1 to OL_POOL_UNIT_MAX */
  OL_OPT_CAPACITY,
  OL_OPT_STACKS,
  OL_OPT_STACK_DEPTH,
  OL_OPT_METRICS,
  OL_OPT_METRICS_INTERVAL,
  OL_OPT_STACK_SAMPLE,
  OL_OPT_PYTHON_FRAMES,
  OL_OPT_TRACE,
  OL_OPT_SOURCE_LINES,
  OL_OPT_BATCH,
  OL_OPT_ROLES,
  OL_OPT_STREAM_MARKS,
  OL_OPT_STREAM_BARRIER,
  OL_OPT_COUNT
} ol_option_t;

/* Options are read on every allocation (stacks on? manage mode?), so the
 * two readers are inline: once loaded, a flag and a load. */
extern long long ol_option_values[OL_OPT_COUNT];
extern atomic_bool ol_options_ready;
void ol_options_load(void); /* once, from the environment */

static inline bool ol_option_bool(ol_option_t opt)
{
  if (!atomic_load_explicit(&ol_options_ready, memory_order_acquire))
    ol_options_load();
  return ol_option_values[opt] != 0;
}

static inline uint64_t ol_option_size(ol_option_t opt)
{
  if (!atomic_load_explicit(&ol_options_ready, memory_order_acquire))
    ol_options_load();
  return (uint64_t)ol_option_values[opt];
}
const char *ol_option_text(ol_option_t opt);
uint64_t ol_option_millis(ol_option_t opt); /* durations */
bool ol_parse_seconds(const char *text, uint64_t *millis);
void ol_options_reload(void); /* tests and the fork child */
void ol_options_print(FILE *out);
bool ol_options_defaults_valid(void);
bool ol_parse_bool(const char *text, bool *out);
bool ol_parse_size(const char *text, uint64_t *out);
bool ol_parse_count(const char *text, uint64_t *out); /* decimal digits alone */

/* ---- buffer.c: growable text for reports ------------------------------ */
typedef struct ol_buf {
  char *data;
  size_t len, cap;
  bool failed; /* an allocation failed: the text is incomplete */
} ol_buf_t;

void ol_buf_printf(ol_buf_t *buf, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ol_buf_json_string(ol_buf_t *buf, const char *text);
void ol_buf_free(ol_buf_t *buf);
/* An array of *cap items of `each` bytes grown to twice its room (`first`
 * when it has none): the array moved, *cap updated; NULL when host memory
 * runs out (the array and *cap as they were). */
void *ol_grow_array(void *items, size_t *cap, size_t each, size_t first);
void ol_format_bytes(char *out, size_t cap, int64_t bytes); /* "1.50 GiB" */
void ol_format_size(char *out, size_t cap, uint64_t bytes);  /* the same, never negative */
/* Exit statuses, one definition for the whole project. The offline code
 * hands its errors back as an ol_error_t carrying one of them, and the
 * command line exits with it: never chosen by reading the message. */
#define OL_EXIT_OK 0
#define OL_EXIT_FAILURE 1 /* our own failure: out of host memory, cannot write the output */
#define OL_EXIT_USAGE 2   /* a bad command line or a bad input file */
/* `oomlens run`: the command could not be run, as a shell says it. */
#define OL_EXIT_CANNOT_RUN 126
#define OL_EXIT_NOT_FOUND 127

typedef struct ol_error {
  int status;     /* OL_EXIT_*: what the error calls for */
  char text[512]; /* one line, naming the file (and line) or the option */
} ol_error_t;

/* Sets *err to status and the formatted message (cut short if need be);
 * err may be NULL, when no one wants the message. */
void ol_fail(ol_error_t *err, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* No error: status OL_EXIT_OK, empty text; NULL is fine. */
void ol_error_clear(ol_error_t *err);

/* ---- lock.c: a mutex of one futex word, its fast paths inline -------- */
typedef struct ol_lock {
  atomic_int word; /* 0 free, 1 held, 2 held with sleepers */
} ol_lock_t;
#define OL_LOCK_INIT {0}

void ol_lock_wait(ol_lock_t *l); /* contended: spin, then sleep */
void ol_lock_wake(ol_lock_t *l);

static inline void ol_lock(ol_lock_t *l)
{
  int expected = 0;
  if (!atomic_compare_exchange_strong_explicit(&l->word, &expected, 1, memory_order_acquire,
                                               memory_order_relaxed))
    ol_lock_wait(l);
}

static inline void ol_unlock(ol_lock_t *l)
{
  if (atomic_exchange_explicit(&l->word, 0, memory_order_release) == 2)
    ol_lock_wake(l);
}

/* ---- records.c: the tracker's tables of live blocks, by key ----------- */
typedef struct ol_record {
  uint64_t key; /* device address, or VMM handle */
  uint64_t size;
  uint64_t stream;
  int32_t device;
  int32_t site; /* call site in the device's table, -1 none */
  uint8_t kind; /* the table's owner says (an account's blocks: an ol_origin_t) */
  bool before_free; /* an account's blocks: made before the device's first free */
  /* An account's blocks: the device's iterations ended when it was made
   * (iteration_ends), modulo 2^16 (a block's age in iterations is read
   * only up to OL_KEPT_AGES, so the wrap costs nothing; it sits in what
   * would be padding). */
  uint16_t made_in;
  /* An account's blocks: the call site the iteration finder tells this
   * block by, + 1 (a trace's own site number: the live job's site id, so a
   * replay finds the job's iterations); 0: the block's site. */
  int32_t signature_plus1;
  /* An account's blocks: the tag of its making in the device's recent
   * log (ol_recent_note), 0 none. */
  uint32_t logged_as;
  uint64_t value; /* a table's other users keep their own here (replay: the policy's address) */
} ol_record_t;

typedef struct ol_records { /* all zero is an empty table */
  ol_record_t *slots;       /* open addressing; key 0 marks an empty slot */
  size_t mask;              /* slots - 1 (a power of two) */
  unsigned shift;           /* 64 - log2(slots): a key's home is its hash >> shift */
  size_t in_slots;
  bool zero_used;           /* the record of key 0 lives here, not in slots */
  ol_record_t zero;
} ol_records_t;

extern void *(*ol_records_calloc)(size_t count, size_t size); /* calloc; tests swap it */
void ol_records_init(ol_records_t *t);
void ol_records_free(ol_records_t *t);
/* A new record for key (zeroed, site -1), valid until the next add or take;
 * NULL when the host has no memory for the table to grow. */
ol_record_t *ol_records_add(ol_records_t *t, uint64_t key);
/* The same, but a record already held for key is replaced in place (the
 * slot reused) after being copied to *old, with *replaced set. */
ol_record_t *ol_records_put(ol_records_t *t, uint64_t key, ol_record_t *old, bool *replaced);
ol_record_t *ol_records_find(ol_records_t *t, uint64_t key);
bool ol_records_take(ol_records_t *t, uint64_t key, ol_record_t *out); /* false: none */
/* Takes every record with first <= key < end, handing each to taken. */
size_t ol_records_take_range(ol_records_t *t, uint64_t first, uint64_t end,
                             void (*taken)(const ol_record_t *rec, void *arg), void *arg);
size_t ol_records_count(const ol_records_t *t);
/* Visits every record, in no particular order; the table must not change
 * meanwhile. */
void ol_records_each(const ol_records_t *t, void (*visit)(const ol_record_t *rec, void *arg),
                     void *arg);

typedef struct ol_sites ol_sites_t; /* sites.c, below */

/* ---- phases.c: iterations found in the allocation stream ------------- */
/* A training loop repeats: the same sizes from the same call sites come
 * back each iteration. phases.c finds the outermost repeat (an allocation
 * whose signature recurs once per iteration, a steady number of
 * allocations apart, over windows that each rise and give some of it back;
 * a longer repeat that holds a shorter one, as a step holds its layers,
 * takes over) and counts iterations from it; ol_phases_t holds what it
 * found (copied with the device's counters), the finder its working state
 * (one per device, in the account, made at the device's first
 * allocation). */
/* Iterations whose low point, need and end are kept: enough for
 * OL_LEAK_RUNS runs of OL_LEAK_PERIOD_MAX iterations, cut at each of its
 * iterations (phases.c kept_every_cut), and the first. */
#define OL_PHASE_VALLEYS 64
#define OL_PHASE_SITE_UNSAMPLED (-2) /* ol_phases_alloc's site: "not sampled" */
/* The "not sampled" site's frames text in a trace (lib/stacks.c writes it,
 * the account knows it by it). */
#define OL_SITE_UNSAMPLED_TEXT "(not sampled: OOMLENS_STACK_SAMPLE)"
#define OL_LEAK_STREAK 3 /* iterations in a row whose low point rose: a leak warning */
#define OL_LEAK_SHARE 200 /* ... adding up to 1/200 of the device (0.5%) */
#define OL_LEAK_BYTES (256ll << 20) /* ... or, capacity unknown, to 256 MiB */
#define OL_LEAK_PERIOD_MAX 16 /* ... or runs of up to this many iterations, */
#define OL_LEAK_RUNS 3       /* ... this many, whose lowest rose at each */
#define OL_KEPT_AGES 64 /* a live block's age in iterations is read up to this (account.c) */

typedef struct ol_leak_warning {
  bool fired;          /* the warning below was given (once per device) */
  uint64_t since;      /* the iteration whose end the growth starts from */
  uint64_t at;         /* the iteration whose end it fired at */
  int64_t growth;      /* bytes per iteration */
  int64_t runs_out_at; /* the iteration that would not fit at this rate; -1 capacity unknown */
  double at_s;         /* seconds from the start when it fired; -1 unknown */
  double runs_out_s;   /* seconds from the start at which it runs out; -1 unknown */
  int32_t site;        /* the call site that grew most (device's sites table), -1 none */
  int64_t site_growth; /* its bytes' growth at iterations' lowest points (sites.c) */
  /* > 0: not what outlives iterations grew, but each iteration's own need
   * (growth, bytes) and its allocations (this many) (ol_phases_work_growth) */
  int64_t allocations_growth;
  int64_t from;          /* the low point the growth started from */
  uint64_t withdrawn_at; /* > 0: the iteration whose low point gave it back */
  bool stopped;          /* ... or by which it had stopped growing (a bound) */
} ol_leak_warning_t;

/* A warning that still holds: fired, and not withdrawn since. */
static inline bool ol_leak_standing(const ol_leak_warning_t *w)
{
  return w->fired && w->withdrawn_at == 0;
}

typedef struct ol_phases { /* all zero is a valid start: nothing found yet */
  uint64_t iterations;     /* iterations seen to end (the next one began) */
  uint64_t period;         /* allocations an iteration makes (as found); 0: no repetition found */
  uint64_t first_known;    /* the first iteration whose low point is in valleys[] */
  int64_t valleys[OL_PHASE_VALLEYS]; /* lowest allocated in each iteration, by its number % */
  int64_t low;             /* lowest allocated since the last iteration ended */
  int64_t need;            /* highest allocated above an iteration's low point, in one that ended */
  bool freed;              /* the job has freed memory */
  int64_t before_first_free; /* allocated when it first did */
  int64_t before_free_live;  /* of the blocks made before it, the bytes still live */
  bool first_low_known;      /* an iteration was found */
  int64_t first_low;         /* what outlived the first iteration found */
  /* The leak watch: iterations in a row whose low point rose (after the
   * first iteration's, which holds the optimizer's state and warmed-up
   * caches), the largest fall between low points seen, the time the
   * counting began (ns on the account's clock, and the iteration then). */
  uint32_t rising;
  int64_t rising_from;     /* the low point the rising run began at */
  int64_t rising_largest;  /* its largest single rise */
  uint64_t rising_since;   /* the iteration it began at */
  int64_t largest_fall;
  uint64_t clock_iteration, clock_ns;
  uint64_t broke_at;       /* an iteration that ended no whole number of periods on: no rise at it */
  /* Since a warning: the iteration and low point from which its growth
   * has stayed below a quarter of the warned rate (phases.c stopped_growing). */
  uint64_t quiet_since;
  int64_t quiet_from;
  /* Each iteration's own need and the finder's allocation count at its
   * end, by its number % OL_PHASE_VALLEYS (known from first_known + 1):
   * whether the iterations' work grows (ol_phases_work_growth). */
  int64_t needs[OL_PHASE_VALLEYS];
  uint64_t ends[OL_PHASE_VALLEYS];
  uint64_t largests[OL_PHASE_VALLEYS]; /* ... and its largest allocation */
  ol_leak_warning_t leak;
} ol_phases_t;

typedef struct ol_phase_finder ol_phase_finder_t; /* phases.c */

void ol_phases_init(ol_phases_t *p);
/* An allocation of size bytes at site (-1 unknown; OL_PHASE_SITE_UNSAMPLED:
 * the capture's "not sampled" site, a miss of the sample for that size: a
 * size missed far more often than taken is named by chance, and none of
 * its signatures becomes the loop's anchor) with allocated bytes
 * at level before it. *finder is made on first use (NULL after: no host
 * memory, and no iterations are found). true: an iteration just ended. */
bool ol_phases_alloc(ol_phases_t *p, ol_phase_finder_t **finder, uint64_t size, int32_t site,
                     int64_t level);
/* A free of bytes that left allocated bytes at level. */
void ol_phases_free(ol_phases_t *p, ol_phase_finder_t *finder, int64_t bytes, int64_t level);
void ol_phase_finder_free(ol_phase_finder_t *finder);
/* Whether the repeat the iterations were counted from has stopped: its
 * anchor has not come back for more periods than a missed occurrence
 * explains (a model's load that casts each layer's weights repeats like a
 * loop, then the training begins). */
bool ol_phases_loop_ended(const ol_phases_t *p, const ol_phase_finder_t *finder);
/* The iterations told make fewer allocations than the state has blocks:
 * no training step's (each gives every parameter a gradient), a pass's
 * layers or an inference's steps. */
bool ol_phases_shorter_than_state(const ol_phases_t *p, const ol_phase_finder_t *finder);
/* How often allocated fell back near what the job held at its first free
 * and rose again near its highest since, each rise a state's worth of
 * allocations after the last (phases.c note_rise): a first step does so
 * once, a loop once a step, whatever its sizes. *kept: how much higher
 * it has fallen back to since than before the third (memory kept from step
 * to step since the first step's state; 0 before a third). */
uint32_t ol_phases_swings(const ol_phases_t *p, const ol_phase_finder_t *finder, int64_t *kept);
/* What outlives iterations: the lowest allocated over the last whole
 * iteration (or since, if lower); 0 when none ended. */
int64_t ol_phases_persistent(const ol_phases_t *p);
/* How much that grows per iteration: the smaller of the last two rises of
 * the low point (a step that warms up once is not growth); 0 when fewer
 * than three low points are known. */
int64_t ol_phases_growth(const ol_phases_t *p);
/* The low point of the last iteration that ended (not what came after it:
 * a job tearing down its model at exit); -1 none ended. */
int64_t ol_phases_last_valley(const ol_phases_t *p);
int64_t ol_phases_before_first_free(const ol_phases_t *p); /* -1: no free yet */
int64_t ol_phases_iteration_need(const ol_phases_t *p);    /* -1: no iteration ended */
/* The last OL_WORK_STREAK iterations each made more allocations and
 * needed more than the one before, by a steady amount: the least rise of
 * each (false, both 0, otherwise). */
#define OL_WORK_STREAK 3
bool ol_phases_work_growth(const ol_phases_t *p, int64_t *need_rise, int64_t *allocs_rise);
/* The last OL_WORK_STREAK + 1 iterations each needed more than the one before,
 * by a steady amount, with a larger largest tensor each time: the input
 * grows (a length curriculum). The least rise (false, 0, otherwise). */
bool ol_phases_input_growth(const ol_phases_t *p, int64_t *need_rise);
/* At an iteration's end: whether the low point has now risen
 * OL_LEAK_STREAK iterations in a row by more than it ever fell, adding up
 * to a share of the device (OL_LEAK_SHARE); if so (and no warning stands)
 * fills p->leak: growth, and with capacity (0 unknown) the iteration that
 * would not fit; now_ns, start_ns (0 unknown) the clock. A standing
 * warning of kept growth is withdrawn when the low point gives most of
 * it back. */
typedef enum { OL_LEAK_QUIET, OL_LEAK_WARNED, OL_LEAK_WITHDRAWN } ol_leak_event_t;
ol_leak_event_t ol_phases_watch_leak(ol_phases_t *p, uint64_t capacity, uint64_t now_ns,
                                     uint64_t start_ns);
/* ol_leak_warning_text (below ol_site_namer_t, in oom.c's part) says it. */

/* ---- oom.c: why an allocation failed, and what to change -------------- */
#define OL_OOM_CLASSES(X)                                                        \
  X(impossible, "the request alone is larger than the device")                  \
  X(external, "memory held elsewhere: other processes, or another library here") \
  X(fragmentation, "enough free reserved memory, but no block large enough")    \
  X(leak, "what the iterations hold grows iteration after iteration")          \
  X(persistent, "weights, gradients and optimizer state do not fit")            \
  X(activations, "memory that lives within one iteration does not fit")         \
  X(undetermined, "what oomlens saw cannot tell which memory did not fit")

typedef enum ol_oom_class {
#define OL_OOM_ENUM(name, what) OL_OOM_##name,
  OL_OOM_CLASSES(OL_OOM_ENUM)
#undef OL_OOM_ENUM
  OL_OOM_CLASS_COUNT
} ol_oom_class_t;

/* What a block of memory is for, from what its call site says (roles.c):
 * the diagnosis rests on what the memory is, not only on when it lives. */
#define OL_ROLES(X)                                                   \
  X(weights, "weights (parameters and buffers)")                      \
  X(gradients, "gradients")                                           \
  X(optimizer, "optimizer state")                                     \
  X(activations, "activations (the forward pass)")                    \
  X(backward, "backward-pass temporaries")                            \
  X(library, "another library's memory in this process (CuPy, JAX...)") \
  X(other, "other (a call site of no known role)")                    \
  X(unknown, "not known (no frames: not sampled, or frames off)")

/* PyTorch's caching allocator packs requests of 1 to 10 MiB into segments
 * of 20 MiB (and smaller ones into 2 MiB); a larger request gets a segment
 * of its own, its size rounded up to 2 MiB. A segment larger than this was
 * made for one tensor. */
#define OL_SHARED_SEGMENT_BYTES (20ull << 20)

typedef enum ol_role {
#define OL_ROLE_ENUM(name, what) OL_ROLE_##name,
  OL_ROLES(OL_ROLE_ENUM)
#undef OL_ROLE_ENUM
  OL_ROLE_COUNT
} ol_role_t;

#define OL_OOM_SITES 3
/* How a site's growth was read (account.c): kept across iterations
 * (what it held at their lowest points rose, or it holds blocks made in
 * two of them or more); blocks of one age, made mid-run; or held more
 * than at the same point of the iteration before, which made the same
 * sizes up to there (recent.c: kept in the iteration that ran out). */
typedef enum ol_grower_reading {
  OL_GROWER_KEPT,
  OL_GROWER_ONCE,
  OL_GROWER_SINCE_LAST,
} ol_grower_reading_t;

typedef struct ol_oom_site {
  int32_t id;
  int64_t bytes;
} ol_oom_site_t;

/* first_step.c: what the first iteration's allocations say of its shape,
 * for a first-step OOM's batch figure. A job whose weights are one stack
 * of like layers (the load's sizes repeat `layers` times) and whose
 * forward repeats a like pattern a layer, each layer keeping per_layer
 * bytes, can be followed: how many of the layers had run when it failed,
 * and so what the rest of the forward keeps at least. layers 0: no such
 * shape was seen (the record's figure stays the upper bound it was). */
typedef enum ol_first_step_stage {
  OL_FIRST_STEP_UNKNOWN, /* no clear stack (not uniform, too short, not kept) */
  OL_FIRST_STEP_LAYERS,  /* it failed inside the stack: layers_done of layers */
  OL_FIRST_STEP_HEAD,    /* every layer had run: it failed after the stack */
} ol_first_step_stage_t;

typedef struct ol_first_step {
  bool read; /* a log of the whole first step was there to read (else: nothing is said) */
  ol_first_step_stage_t stage;
  int64_t layers;      /* the stack's layers, from the weights' repeat (of two stacks, the
                        * fewer: what either has at least) */
  int64_t stacks;      /* stacks of like layers the load made: 1, or 2 (an encoder-decoder) */
  int64_t layers_done; /* LAYERS: begun in the forward; HEAD: all */
  int64_t per_layer;   /* what each layer of the forward kept */
  int64_t rest;        /* LAYERS: what the layers not yet begun keep, at least */
  int64_t stack_end;   /* LAYERS: the allocated bytes when the last layer ends, at least */
  int64_t largest_after; /* HEAD: the largest tensor the forward asked for after the stack */
  int64_t layer_largest; /* the largest tensor a layer asked for */
  int64_t logits_asks;   /* HEAD: the asks of largest_after's size after the stack, the
                          * failed one counted (the logits, then a log-softmax as large);
                          * LAYERS: 1, the logits ahead */
  int64_t logits_ahead;  /* LAYERS: a language model's logits to come after the stack, read
                          * from its vocabulary and tokens (first_step.c); 0: not told */
  bool loss_upcast;      /* HEAD: that largest tensor was made from one half its size
                          * (logits cast to fp32 for the loss) */
  int64_t weight_element; /* the bytes of one element of the layers' weights (4: fp32;
                           * 2: bf16 or fp16, whose logits a loss may cast to fp32); 0 not
                           * known */
  bool element_unsure;    /* weight_element 4, and the layers' sizes fit 2 as well (a
                           * bf16 layer of D by D/2 matrices beside D by D ones): the
                           * estimate's range takes both */
  bool weights_cast;      /* the forward made 16-bit copies of the layers' weights
                           * (autocast): its logits are 16-bit */
} ol_first_step_t;

/* ---- recent.c: a device's last events, to set the iteration under way
 * beside the one before it at the same point ------------------------------ */
typedef struct ol_recent ol_recent_t;
ol_recent_t *ol_recent_new(void); /* NULL: no host memory */
void ol_recent_free(ol_recent_t *log);
/* A block of a site (-1: none) made, or freed. Its tag: the event's
 * number + 1, modulo 2^32 (0: none), which a block made keeps while it
 * lives (ol_record_t.logged_as), so that a reading can leave out what is
 * still live (ol_recent_rest_of_last). */
uint32_t ol_recent_note(ol_recent_t *log, int32_t site, uint64_t size, bool freed);
/* An iteration ended: the next event is the next one's first. */
void ol_recent_iteration_ended(ol_recent_t *log);
/* ... where the finder counted ended iterations so far, of period
 * allocations each (0: not known): found late, two or more at the first
 * end told, the one before began a period back. */
void ol_recent_iteration_ended_after(ol_recent_t *log, uint64_t ended, uint64_t period);
/* The sites of a device's table that name no call site: the sample's
 * "not sampled" one and the one of no frames; -1 none. */
typedef struct ol_recent_sites {
  int32_t unsampled, frameless;
} ol_recent_sites_t;
/* What the iteration under way holds beside the one before it. */
typedef struct ol_recent_reading {
  int64_t held_more; /* what all sites hold more than there */
  bool by_calls;     /* its sizes differ: read by the sites' blocks, not bytes */
  /* The one before's events from there to its end (by sizes; equal: by
   * calls, or there was the next one's beginning), for
   * ol_recent_rest_of_last. */
  uint64_t rest_from, rest_end;
} ol_recent_reading_t;
/* The iteration under way, about to ask for request bytes, beside the
 * one before it at the same point: where it has made the same sizes in
 * the same order so far (one in 32 may differ) and the log holds both,
 * true, with what each site holds more than it did there added to
 * more[site], and what each site has made in this one less what it had
 * made in the last by then added to made[site] (site_count entries
 * each). Where the sizes differ but the same call sites made them in the
 * same order (one in 32 may differ, of 8 or more blocks that carry their
 * site, sites not counted as such), true with reading->by_calls:
 * more[site] counts only a site's blocks more than there (its largest of
 * this iteration at most), made[site] allocations, not bytes. false: not
 * known (log NULL, fewer than two iterations begun, the last one no longer
 * in the log, this one longer or of other sizes and calls). */
bool ol_recent_against_last(const ol_recent_t *log, uint64_t request, ol_recent_sites_t sites,
                            int64_t *more, int64_t *made, size_t site_count,
                            ol_recent_reading_t *reading);
/* A site's work, for ol_recent_step_repeat: a forward's (activations),
 * a backward's (gradients, its temporaries); for ol_recent_rest_fixed an
 * update's (the optimizer's), and the state's (the optimizer's and the
 * weights'). Bits. */
enum { OL_RECENT_FORWARD = 1, OL_RECENT_BACKWARD = 2, OL_RECENT_UPDATE = 4, OL_RECENT_STATE = 8 };
/* Where fewer than two iterations were told: whether the allocations up
 * to the request (about to be made) repeat in size and order those a
 * period earlier, as a second step repeats its first, the period before
 * the step under way (the repeat's last period's worth) having made
 * blocks of a forward's sites and of a backward's (a first step's layers
 * make one kind each), and the repeat blocks of either (site_work[site]:
 * bits, site_count entries): true, with where the two began in began[]
 * (events of the log). */
bool ol_recent_step_repeat(ol_recent_t *log, uint64_t request, const uint8_t *site_work,
                           size_t site_count, uint64_t began[2]);
/* Without call sites (no site's work known), whether the allocations up
 * to the request repeat those a period earlier as a second step repeats
 * its first: the period before the step under way holds two stacks of
 * like layers apart (a forward's and a backward's), where a first step's
 * layers, an inference's forward or an optimizer's update hold one or
 * none: true, with where the two began in began[] (events of the log).
 * false: not so, or not known (two iterations told, no host memory). */
bool ol_recent_step_by_sizes(ol_recent_t *log, uint64_t request, uint64_t began[2]);
/* ol_recent_against_last with the two iterations begun at began[] (an
 * ol_recent_step_repeat's); the log's own are left as they were. */
bool ol_recent_against_step(ol_recent_t *log, const uint64_t began[2], uint64_t request,
                            ol_recent_sites_t sites, int64_t *more, int64_t *made,
                            size_t site_count, ol_recent_reading_t *reading);
/* How far the one before rose above what it held at the same point,
 * from there to its end (the request's like included), leaving out the
 * blocks it made there that are still live (live: their tags, in any
 * order, live_count of them; sorted here): what the rest of a step of the
 * same sizes asks for beside what it holds now. A block made past that point and live still
 * is not made again: the first update's optimizer state, made once
 * (where the weights outweigh the activations, its highest), gradients
 * kept across steps. -1 not known (reading of no rest, the log no longer
 * holding it). */
int64_t ol_recent_rest_of_last(const ol_recent_t *log, const ol_recent_reading_t *reading,
                               uint32_t *live, size_t live_count);
/* What of the rest (ol_recent_rest_of_last) and of what that step made
 * and holds still does not shrink with the batch: the gradients its
 * backward had made at the rest's highest point (held until its update),
 * and what it made before its update that is live now at no state's site
 * nor the backward's (a workspace made once: cuBLAS's at the first
 * matrix product). site_work as ol_recent_step_repeat's (OL_RECENT_UPDATE:
 * the optimizer's sites; OL_RECENT_STATE: its and the weights'), live
 * sorted by ol_recent_rest_of_last; zeros where not known. */
typedef struct ol_recent_fixed {
  int64_t gradients, held_over;
  int64_t copies; /* autocast's copies of the weights (ol_recent_rest_copies) */
} ol_recent_fixed_t;
ol_recent_fixed_t ol_recent_rest_fixed(const ol_recent_t *log, const ol_recent_reading_t *reading,
                                       const uint32_t *live, size_t live_count,
                                       const uint8_t *site_work, size_t site_count);
/* What of the rest (ol_recent_rest_of_last) and of what the step under
 * way holds is autocast's 16-bit copies of fp32 weights, made by the
 * step's forward and held to its backward, whatever the batch: weight_sizes
 * the weights' sizes in bytes (weights of them, any order; sorted here),
 * live sorted by ol_recent_rest_of_last. 0 where the weights are not told
 * fp32, the step made no copy of two thirds of them, or not known. */
int64_t ol_recent_rest_copies(const ol_recent_t *log, const ol_recent_reading_t *reading,
                              const uint32_t *live, size_t live_count, uint64_t *weight_sizes,
                              size_t weights);
/* The highest points of the last step the log holds whole, between the
 * optimizer's updates (OL_RECENT_UPDATE of site_work), the later in the
 * last iteration told; in bytes above where that step began (step_from,
 * its first forward's or backward's allocation): work, its forward's and
 * backward's highest, past_work the event past it; update, the highest of
 * its own update (from update_from to the next step's work); now, the
 * log's last event. */
typedef struct ol_recent_highs {
  int64_t work, update, now;
  uint64_t step_from, update_from, past_work;
} ol_recent_highs_t;
/* false: no such step (no two updates with a step's work between them,
 * the later in the last iteration), fewer than two iterations told, or
 * the log no longer holding them. */
bool ol_recent_iteration_highs(const ol_recent_t *log, const uint8_t *site_work,
                               size_t site_count, ol_recent_highs_t *highs);
/* The same copies in the last iteration that ended, at its highest point,
 * or, highs given (ol_recent_iteration_highs), in highs' step at its
 * work's highest (account.c read_step_copies: the batch figure of a job
 * that fitted); 0 as above, or fewer than two iterations told, or the
 * log no longer holding the last. */
int64_t ol_recent_iteration_copies(const ol_recent_t *log, uint64_t *weight_sizes,
                                   size_t weights, const ol_recent_highs_t *highs);
/* The work bits (site_work's) of the allocations of the last iteration
 * that ended, into work: false where not known (fewer than two ends, the
 * log no longer holding it). */
bool ol_recent_last_work(const ol_recent_t *log, const uint8_t *site_work, size_t site_count,
                         uint8_t *work);
/* What the iteration under way did past a repeat of the last one. */
typedef struct ol_recent_more {
  int64_t held;        /* what the events since add to what is held */
  uint64_t allocations, frees;
} ol_recent_more_t;
/* Whether the iteration under way made the last one's allocations in the
 * same sizes and order (one in 32 may differ; after the last one's end,
 * its beginning again) through its step's rise and fall, and then
 * allocations the last did not make, not a step like it (its sizes, or
 * its sizes times one factor: a larger input's; the request, about to be
 * made, counts among them): true with what it did since in *more. false:
 * not so, or not known (fewer than two iterations begun, the last no
 * longer in the log). */
bool ol_recent_repeated_then_more(const ol_recent_t *log, uint64_t request,
                                  ol_recent_more_t *more);
/* Whether a site made blocks in the last whole iteration and freed as many
 * there: a step's own (a loss, logits), not a cache made once; false where
 * not known (fewer than two iterations begun, the log no longer holds it). */
bool ol_recent_made_and_freed(const ol_recent_t *log, int32_t site);

/* The allocations of a job's first iteration, kept in the order they
 * came (size, and the device's allocated bytes after each), until the
 * first iteration is found or OL_FIRST_STEP_KEEP of them are kept. */
#define OL_FIRST_STEP_KEEP 16384
typedef struct ol_first_step_log {
  size_t count;
  uint64_t size[OL_FIRST_STEP_KEEP];
  int64_t after[OL_FIRST_STEP_KEEP]; /* the device's allocated bytes after it */
  uint8_t role[OL_FIRST_STEP_KEEP];  /* its site's role (roles.c; OL_ROLE_unknown: none
                                      * named): FSDP's parameters gathered for a layer's
                                      * forward are weights, a forward's own asks
                                      * activations */
} ol_first_step_log_t;
ol_first_step_log_t *ol_first_step_log_new(void); /* NULL: no host memory */
void ol_first_step_log_free(ol_first_step_log_t *log);
/* What the log says of the stack, at a failure asking for request bytes
 * while allocated bytes are live (log NULL: unknown). */
void ol_first_step_read(const ol_first_step_log_t *log, uint64_t request, ol_first_step_t *out);
/* The longest stretch where sizes[i] == sizes[i + period], over periods 1
 * to max_period: *start its first index, *covered the elements it spans
 * (the stretch plus one period); the shortest period wins a tie. false: no
 * period repeats at all. For tests too. */
bool ol_first_step_repeat(const uint64_t *sizes, size_t n, size_t max_period, size_t *period,
                          size_t *start, size_t *covered);
/* A stage's name in the report ("unknown", "layers", "head"), and back
 * (false: no stage of that name). */
const char *ol_first_step_stage_name(ol_first_step_stage_t stage);
bool ol_first_step_stage_parse(const char *name, ol_first_step_stage_t *out);

typedef struct ol_oom_record {
  uint64_t request;
  uint64_t capacity;
  int64_t device_free;        /* what the device had free, -1 unknown */
  int64_t allocated;          /* this process, live bytes handed out */
  int64_t reserved;           /* this process, device memory held */
  int64_t free_reserved;      /* reserved but not allocated, -1 unknown */
  int64_t largest_free_block; /* largest block that could be handed out, -1 unknown */
  int64_t external;           /* capacity - free - reserved: others' memory */
  int64_t persistent;         /* what outlives iterations */
  int64_t growth;             /* persistent growth per iteration */
  uint64_t iterations;
  /* Live bytes at the failure by role; roles_known: call sites carried
   * frames that name roles (else every byte is OL_ROLE_unknown). */
  bool roles_known;
  int64_t role_bytes[OL_ROLE_COUNT];
  bool request_role_known; /* what the failed request itself was for */
  ol_role_t request_role;
  /* The request was made by an optimizer's multi-tensor update (roles.c),
   * whose call site held update_bytes at the failure: its temporaries. */
  bool request_in_update;
  int64_t update_bytes;
  /* The request was an optimizer making its state (roles.c state_buffers):
   * it keeps that many buffers as large as each trained parameter once
   * made; 0: not such a request. */
  int request_state_buffers;
  /* The update that made the request was SGD's (roles.c): in its first step
   * it makes the momentum buffers, state that no update path avoids. */
  bool request_update_makes_state;
  /* Where no gradient outlived a backward yet (role_bytes' gradients 0):
   * the backward's live bytes in blocks of a weight's size, taken as the
   * gradients it is making (account.c); request_is_gradient: the request
   * is one more. Counted in role_bytes' backward as well.
   * gradients_made_own_segments: those of them in blocks larger than
   * OL_SHARED_SEGMENT_BYTES, which under PyTorch's cache are segments
   * made for one tensor each. */
  int64_t gradients_made;
  int64_t gradients_made_own_segments;
  /* Live blocks the job's own lines made (role other) of a weight's size,
   * twice it or half it (a copy of a parameter in another dtype: fp32
   * master weights, an average of the weights, their gradients), at most
   * two of a size for each weight of it (account.c); own_copies_own_segments:
   * the same among segments made for one tensor, sizes within their 2 MiB
   * rounding (PyTorch's cache). */
  int64_t own_copies, own_copies_own_segments;
  /* Of them, those made at call sites that allocated before the first
   * forward began (ol_sites_early: the state built with the model, as
   * fp32 masters made beside it), each way. */
  int64_t own_copies_early, own_copies_early_own_segments;
  /* The failed request, of role other, is of a live weight's size, twice
   * it or half it (account.c); _own_segment: the same as own_copies_own_
   * segments tells copies among PyTorch's segments. */
  bool request_is_copy, request_is_copy_own_segment;
  bool request_is_gradient;
  /* Timing, where roles are not known: allocated when the job first freed
   * memory (its state built before any compute), -1 not yet. */
  int64_t before_first_free;
  /* Of the blocks made before that first free, the bytes freed since (the
   * inputs and first temporaries made then): the state by timing is the
   * rest (JSON: before_first_free_live). 0: none, or not known. */
  int64_t before_first_free_gone;
  /* The highest the iteration's own memory (allocated above what outlives
   * iterations) reached in an iteration that finished; -1 none finished. */
  int64_t iteration_need;
  /* The iterations' work grew (ol_phases_work_growth): each needed this
   * much more than the last, and made this many more allocations; 0 not. */
  int64_t need_growth, work_growth;
  /* The input grew (ol_phases_input_growth): each of the last iterations
   * needed this much more than the one before, its tensors larger; 0 not. */
  int64_t input_growth;
  int64_t first_persistent; /* what outlived the first iteration found; -1 none */
  /* Allocations the device had made when it ran out (the one refused not
   * counted; JSON: allocations_made), 0 not known: without call sites, more
   * than a first step is read from (OL_FIRST_STEP_KEEP) with no iteration
   * found says the job is past its first step in a loop of varying sizes. */
  uint64_t allocations_made;
  /* ol_phases_swings at the failure (JSON: swings, swings_kept): without
   * call sites, OL_LOOP_SWINGS or more with no iteration found, and their
   * low points risen by what the request lacked, say the same. */
  uint32_t swings;
  int64_t swings_kept;
  /* A leak warning of kept memory stands (fired, not withdrawn, the growth
   * what outlives iterations: phases.c): warned; the low its growth began
   * from, the iteration of that low and its growth a step (0 where not). */
  bool warned;
  int64_t warned_from;
  uint64_t warned_since;
  int64_t warned_rate;
  int64_t batch; /* the job's batch as the figures may use it (ol_oom_set_batch), 0 unknown */
  int64_t batch_given; /* the batch the user gave (--batch), 0 none */
  int64_t restarts;    /* the job began again after an OOM it went on from (stats.restarts) */
  bool segments_only; /* we saw the framework's segments, not its tensors */
  bool managed;       /* our pool served the tensors (manage mode, replay's oomlens) */
  ol_first_step_t first_step; /* no iteration finished: how far the first one got */
  /* Call sites (ids in the sites table of whoever filled the record), when
   * stacks or trace frames are known: the largest holders at the failure,
   * and the one whose memory grew most across iterations. */
  ol_oom_site_t holders[OL_OOM_SITES];
  int holder_count;
  ol_oom_site_t grower; /* bytes: growth since the first iteration; id -1: none */
  ol_role_t grower_role; /* what the grower's site is for (OL_ROLE_unknown: not known) */
  ol_grower_reading_t grower_reading; /* how the grower's growth was read (account.c) */
  /* What the job holds more than at the same point of the iteration
   * before, where that one made the same sizes so far (recent.c); -1 not
   * known. since_last_by_calls: its sizes differed, and the same call
   * sites made them in the same order: what sites hold in more blocks. */
  int64_t held_since_last;
  bool since_last_by_calls;
  /* ... the iteration before found at the failure, fewer than two having
   * been told: the step under way repeats the one before it (recent.c,
   * ol_recent_step_repeat; the job's second step). */
  bool since_last_by_repeat;
  /* Without call sites and fewer than two iterations told, the
   * allocations repeat a step's worth earlier, two stacks of like layers
   * in it (recent.c, ol_recent_step_by_sizes): what the step under way
   * holds more than that one held at the same point; -1: no such repeat. */
  int64_t step_repeat_held;
  /* Where the step under way was set beside the one before it, found at
   * the failure (since_last_by_repeat, step_repeat_held; the same sizes
   * in the same order so far): how far that one rose above what it held
   * at the same point before it ended (recent.c's rest_of_last): the
   * rest of a step that finished, read for the one that did not; 0 not
   * known (the rest holds the request's like at least: never 0 where
   * read, and a record begun without ol_oom_record_init reads as none). */
  int64_t step_rest;
  /* With roles, what of that step's need does not shrink with the batch
   * (recent.c, ol_recent_rest_fixed): the gradients in its rest, and what
   * it made and holds now (held over: a workspace); zeros: none, or not
   * known. */
  ol_recent_fixed_t step_fixed;
  /* The iteration under way repeated the last one through its rise and
   * fall and then made allocations the last did not (recent.c): what it
   * did since; held -1: not so, or not known. */
  ol_recent_more_t past_repeat;
  /* The grower's site makes and frees blocks every iteration (recent.c):
   * a block of it kept from an earlier one was kept past its step. */
  bool grower_per_step;
  /* Who holds the memory outside ours, per NVML (live jobs): other
   * processes, largest first, and what this process holds in all (its
   * context and libraries included); -1 unknown. */
  struct {
    uint32_t pid;
    int64_t bytes;
    char name[16];
    bool child; /* a process this one started (or one of theirs) */
  } others[OL_OOM_SITES];
  int other_count;
  int others_unlisted;           /* other processes beyond others[] */
  int64_t others_unlisted_bytes; /* ... and what they hold */
  int64_t self_device_bytes;
  /* The framework refused the request at a limit the job set on what it
   * may reserve (PyTorch's set_per_process_memory_fraction), before the
   * device was asked: capacity is then that limit; 0: no such limit. */
  int64_t framework_limit;
  /* The framework's own word at its refusal (PyTorch's message): the
   * tensors it held, -1 unknown; no_block_held: it searched its free
   * reserved memory (free_reserved, its figure) and no block held the
   * request, though how large the largest was it does not say. */
  int64_t framework_allocated;
  bool no_block_held;
  /* Physical memory this process made with cuMemCreate itself (not
   * through our pool) in handles of 32 MiB or more, which PyTorch's
   * expandable segments never make (their pages are 2 or 20 MiB): another
   * library's, such as JAX's preallocation. vmm_not_framework: and the
   * framework makes none at all (PyTorch's cache off, or without
   * expandable segments); both must hold to count it as a library's. */
  int64_t vmm_reserved;
  bool vmm_not_framework;
} ol_oom_record_t;

/* Writes a site's name: text for the paragraph, or a JSON value. */
typedef void (*ol_site_namer_t)(ol_buf_t *out, int32_t id, bool json, void *arg);
/* phases.c: the leak warning as one line (no prefix, no newline) for a
 * device's stderr and a report's text, its site named by namer (NULL: by
 * its number). */
void ol_leak_warning_text(ol_buf_t *out, const ol_leak_warning_t *w, ol_site_namer_t namer,
                          void *arg);
/* ... and that a warning was withdrawn (w->withdrawn_at): given back. */
void ol_leak_withdrawn_text(ol_buf_t *out, const ol_leak_warning_t *w);

ol_oom_class_t ol_oom_classify(const ol_oom_record_t *r);
const char *ol_oom_class_name(ol_oom_class_t c);
const char *ol_oom_class_meaning(ol_oom_class_t c);
void ol_oom_explain(ol_buf_t *out, const ol_oom_record_t *r, ol_oom_class_t c, ol_site_namer_t namer,
                    void *arg); /* namer NULL: no sites named */
void ol_oom_json(ol_buf_t *out, const ol_oom_record_t *r, ol_oom_class_t c, ol_site_namer_t namer,
                 void *arg);
/* The batch that fits, from what one batch needed (oom.c): the same
 * arithmetic for an OOM's advice and for a report of a job that fitted. */
typedef struct ol_batch_figure {
  int64_t batch;     /* the batch the need was measured at; 0 unknown (then per mille) */
  int64_t available; /* the device less what is held outside the allocator */
  int64_t state;     /* what outlives iterations, or the state by roles */
  int64_t need;      /* the iteration's own memory above it, at its peak */
  int64_t overhead;  /* the allocator's reserve above its allocations then: as large at any batch */
  int64_t fixed;     /* of need, what is as large at any batch (autocast's copies of the weights,
                        a second step's gradients): counted beside the state, not scaled */
  int64_t update;    /* above the state, the optimizer's update at its highest, as large at any
                        batch; where above need, the peak a smaller batch keeps (0: not known) */
  bool need_is_lower_bound; /* the iteration did not finish */
  int64_t fits, fits_headroom; /* out: batches (or per mille), with none and 20% free */
} ol_batch_figure_t;

/* A first-step OOM's figures (oom.c): the upper bound (from what the
 * iteration held, and the layers of the forward not yet run where the
 * stack is clear), and where every layer had run, an estimate: with the
 * backward's first gradient as large as the largest tensor after the
 * stack, and what the state adds once the first step ends (optimizer
 * state, kept gradients) from nothing (high) to three times the weights,
 * as Adam's moments and kept gradients (low). */
typedef struct ol_first_step_figure {
  ol_batch_figure_t bound;    /* need_is_lower_bound: "at most" */
  bool estimated;             /* low and high hold an estimate */
  ol_batch_figure_t low, high;
} ol_first_step_figure_t;
/* true: there is an estimate (out->low, out->high) besides the bound,
 * whose low end keeps the headroom for a batch (1% of it when the batch
 * is not known); the advice and the JSON then lead with it. */
bool ol_oom_first_step_figure(const ol_oom_record_t *r, ol_first_step_figure_t *out);
/* The batch the user gave (--batch, OOMLENS_BATCH, replay's --batch) set
 * on a record whose restarts are known (ol_account_oom_figures first): a
 * job that began again after an OOM may run another batch now. */
void ol_oom_set_batch(ol_oom_record_t *r, int64_t batch);
void ol_batch_figure_solve(ol_batch_figure_t *f);
/* Where f is a bound (the failed iteration did not finish), the batch to
 * run once to finish an iteration: a quarter of its figure with headroom. */
int64_t ol_batch_figure_trial(const ol_batch_figure_t *f);

/* The batch figures the advice leads with: the largest batch that fits,
 * and the one that keeps the guides' headroom (in batches when r->batch is
 * known, the return true; else per mille of the current batch); *is_bound:
 * the failed iteration did not finish, so they are upper bounds. A first
 * step's estimate, where there is one, is led with (its low end: not a
 * bound). */
bool ol_oom_batch_figures(const ol_oom_record_t *r, int64_t *fits, int64_t *fits_headroom,
                          bool *is_bound);
/* Fills r->holders and r->grower from a sites table (NULL: none). */
void ol_oom_note_sites(ol_oom_record_t *r, const ol_sites_t *sites, int32_t unsampled);

/* ---- PyTorch-shaped counters (inline here, once stats.c) -------------- */
typedef struct ol_stat {
  int64_t current, peak, allocated, freed;
} ol_stat_t;

enum { OL_POOL_ALL, OL_POOL_LARGE, OL_POOL_SMALL, OL_POOL_COUNT };

/* Where device memory came from. PyTorch's own figures cover only what its
 * allocator asked for (runtime calls, or VMM under expandable segments);
 * libraries and CUDA itself also call the driver directly. */
#define OL_ORIGINS(X)                                                        \
  X(runtime, "cudaMalloc, cudaMallocAsync (the framework's allocator)")      \
  X(driver, "cuMemAlloc called directly (libraries, CUDA internals, CuPy)")  \
  X(vmm, "cuMemCreate physical memory (expandable segments, JAX)")           \
  X(pool, "oomlens's pool (manage mode)")

typedef enum ol_origin {
#define OL_ORIGIN_ENUM(name, what) OL_ORIGIN_##name,
  OL_ORIGINS(OL_ORIGIN_ENUM)
#undef OL_ORIGIN_ENUM
  OL_ORIGIN_COUNT
} ol_origin_t;

/* X(field, row title in the summary, is a byte count) in PyTorch's order. */
#define OL_STAT_FIELDS(X)                               \
  X(allocated_bytes, "Allocated memory", true)          \
  X(active_bytes, "Active memory", true)                \
  X(requested_bytes, "Requested memory", true)          \
  X(reserved_bytes, "GPU reserved memory", true)        \
  X(inactive_split_bytes, "Non-releasable memory", true)\
  X(allocation, "Allocations", false)                   \
  X(active, "Active allocs", false)                     \
  X(segment, "GPU reserved segments", false)            \
  X(inactive_split, "Non-releasable allocs", false)

/* Calls seen, per device: X(field, what it counts). */
#define OL_CALL_FIELDS(X) \
  OL_CALL_FIELDS_1(X) OL_CALL_FIELDS_8(X) OL_CALL_FIELDS_9(X) OL_CALL_FIELDS_10(X)
#define OL_CALL_FIELDS_1(X)                                          \
  X(runtime_allocs, "cudaMalloc and cudaMallocAsync calls the driver served") \
  X(runtime_frees, "cudaFree and cudaFreeAsync calls")               \
  X(driver_allocs, "cuMemAlloc and cuMemAllocAsync calls from outside the runtime") \
  X(driver_frees, "cuMemFree and cuMemFreeAsync calls from outside the runtime")    \
  X(vmm_creates, "cuMemCreate calls")                                \
  X(vmm_releases, "cuMemRelease calls")                              \
  X(vmm_maps, "cuMemMap calls")                                      \
  X(vmm_unmaps, "cuMemUnmap calls")                                  \
  X(failed_allocs, "allocations the driver refused")                 \
  X(managed_allocs, "manage mode: requests oomlens's pool served")   \
  X(manage_fallbacks, "manage mode: requests left to the CUDA driver") \
  X(fence_waits, "manage mode: waits for freed memory to become safe") \
  X(device_syncs, "manage mode: device-wide synchronizations")       \
  X(unknown_frees, "frees of memory allocated before oomlens saw it")
/* ... since report format 1.8 (0 in older reports) */
#define OL_CALL_FIELDS_8(X)                                          \
  X(stream_queries, "manage mode: rounds of asking the other streams if idle") \
  X(stream_marks, "manage mode: marks put behind the other streams' work") \
  X(mark_waits, "manage mode: waits for the other streams to pass a mark")
/* ... since report format 1.9 */
#define OL_CALL_FIELDS_9(X)                                          \
  X(stream_barriers, "manage mode: barriers that order all later work after all earlier work")
/* ... since report format 1.10 */
#define OL_CALL_FIELDS_10(X)                                         \
  X(handle_moves, "manage mode: trimmed memory mapped where wanted before its old place is unmapped")

typedef struct ol_device_stats {
#define OL_STAT_MEMBER(field, title, bytes) ol_stat_t field[OL_POOL_COUNT];
  OL_STAT_FIELDS(OL_STAT_MEMBER)
#undef OL_STAT_MEMBER
  ol_stat_t oversize_allocations, oversize_segments;
  ol_stat_t vmm_mapped_bytes;  /* VMM physical memory mapped into address space */
  ol_stat_t va_reserved_bytes; /* address space reserved (no memory behind it) */
  ol_stat_t origin_bytes[OL_ORIGIN_COUNT]; /* reserved memory by where it came from */
  ol_stat_t pending_bytes; /* manage mode: freed, not yet safe to hand out */
#define OL_CALL_MEMBER(field, what) int64_t field;
  OL_CALL_FIELDS(OL_CALL_MEMBER)
#undef OL_CALL_MEMBER
  int64_t num_ooms;         /* out-of-memory errors the job saw (account.c: a failure settled) */
  int64_t recovered_allocs; /* failed allocations the allocator's retry recovered (not OOMs) */
  uint64_t last_oom_request; /* bytes: unsigned, as the request was */
  ol_phases_t phases;      /* iterations in this device's allocated bytes */
  ol_oom_record_t last_oom; /* the diagnosis of the last out-of-memory */
  ol_oom_class_t last_oom_class;
  int64_t mem_free, mem_total; /* last cuMemGetInfo answer seen, 0 if none */
  int64_t ooms_by_class[OL_OOM_CLASS_COUNT]; /* diagnosed out-of-memory errors */
  /* Times the job dropped what it had loaded after an out-of-memory it
   * went on from, and began again (account.c ol_account_restarted): what
   * is read of iterations and of the first step is the last start's. */
  int64_t restarts;
  double first_oom_unix, last_oom_unix;      /* wall clock of the OOMs, 0 if none */
  /* What the report's batch figure needs beyond the counters (the owner
   * fills them: the live report from the driver and OOMLENS_BATCH, a
   * trace's from its lines): the device's size, what is held outside the
   * allocator (-1 unknown), the job's batch (0 unknown). */
  int64_t capacity, outside, batch;
  /* Of an iteration's need, autocast's copies of the weights (account.c
   * read_step_copies, at the first iteration ends), counted as the same at
   * any batch by the report's batch figure; 0 none or not known. */
  int64_t step_copies;
  /* Of the last step read between two optimizer's updates (an update's
   * temporaries are as large as the weights, beside the gradients), what
   * was allocated as it began (after the update before it), at its
   * forward's and backward's highest, and at its update's: read with
   * step_copies (account.c read_step_highs); 0 where not known. */
  int64_t step_base, step_work_high, step_update_high;
} ol_device_stats_t;

/* a + b, held at INT64_MAX or INT64_MIN rather than overflow: counters
 * that sum sizes over a whole run (a crafted trace's sizes near 2^63)
 * stop at the end of the range instead of turning negative. */
static inline int64_t ol_sat_add(int64_t a, int64_t b)
{
  int64_t sum;
  if (__builtin_expect(__builtin_add_overflow(a, b, &sum), 0))
    return b > 0 ? INT64_MAX : INT64_MIN;
  return sum;
}

static inline int64_t ol_sat_sub(int64_t a, int64_t b)
{
  int64_t diff;
  if (__builtin_expect(__builtin_sub_overflow(a, b, &diff), 0))
    return b < 0 ? INT64_MAX : INT64_MIN;
  return diff;
}

/* Inline: the tracker updates a dozen of these per allocation. Saturating
 * (ol_sat_add): a crafted trace's sizes near 2^63 hold a counter at
 * INT64_MAX rather than overflow it; it costs about 100 instructions of
 * the 3300 a cudaMalloc+cudaFree pair takes (/root/bin/count_pairs.sh). */
static inline void ol_stat_grow(ol_stat_t *stat, int64_t bytes) /* bytes >= 0 */
{
  stat->current = ol_sat_add(stat->current, bytes);
  stat->allocated = ol_sat_add(stat->allocated, bytes);
  if (stat->current > stat->peak)
    stat->peak = stat->current;
}

static inline void ol_stat_shrink(ol_stat_t *stat, int64_t bytes) /* bytes >= 0 */
{
  stat->current = ol_sat_sub(stat->current, bytes);
  stat->freed = ol_sat_add(stat->freed, bytes);
}

static inline void ol_stat_update(ol_stat_t *stat, int64_t delta)
{
  if (delta > 0)
    ol_stat_grow(stat, delta);
  else
    ol_stat_shrink(stat, -delta);
}

/* Every counter has an "all" row plus the pool the size falls in, split at
 * PyTorch's small-pool limit so our table reads like theirs. */
static inline int ol_stats_pool_of(size_t size)
{
  return size <= OL_SMALL_SIZE ? OL_POOL_SMALL : OL_POOL_LARGE;
}

static inline void ol_stats_pool_update(ol_stat_t stat[OL_POOL_COUNT], size_t size, int64_t delta)
{
  ol_stat_update(&stat[OL_POOL_ALL], delta);
  ol_stat_update(&stat[ol_stats_pool_of(size)], delta);
}

/* ---- sites.c: call sites and the bytes they hold -------------------- */
typedef struct ol_site_figures {
  int32_t id;
  int64_t allocations, current, peak, at_peak, total;
  int64_t first_valley, last_valley; /* live at the first and the last iteration's end */
  int64_t first_low, last_low;       /* ... and at their lowest points (sites.c) */
  bool valley_seen;
  bool held_late; /* first_low is the first lowest point at which the site held memory */
} ol_site_figures_t;
typedef enum {
  OL_SITES_BY_AT_PEAK,
  OL_SITES_BY_TOTAL,
  OL_SITES_BY_CURRENT, /* who holds memory now (at an out-of-memory) */
  OL_SITES_BY_GROWTH,  /* last_low - first_low (from 0 where held_late and it grew
                        * again): what grows across iterations */
  OL_SITES_BY_END_GROWTH /* last_valley - first_valley: the same at iterations' ends */
} ol_site_order_t;

ol_sites_t *ol_sites_new(void);
void ol_sites_free(ol_sites_t *sites);
/* A copy that reads as sites does (ids, keys, labels, figures); NULL: no
 * host memory. A report copies the live table under the tracker's lock
 * and names its sites from the copy after. */
ol_sites_t *ol_sites_copy(const ol_sites_t *sites);
int32_t ol_sites_intern(ol_sites_t *sites, const char *key, size_t len); /* -1: no memory */
void ol_sites_add(ol_sites_t *sites, int32_t id, int64_t delta);
/* A request made at site id, served or not: the backward goes on at a
 * backward site's, and an optimizer's after a backward begins the step
 * (what the backward's sites hold then are its gradients); the first at
 * an activation's site begins the first forward (ol_sites_early). A refused
 * request counts: the step it begins is under way when the job runs out
 * there (held-out optimizer_switch replayed at 0.6 of its cap: SGD
 * before, which makes no state, so no step had been marked, and Adam's
 * first request refused read the gradients as the backward's
 * temporaries and the class as activations). */
void ol_sites_requested(ol_sites_t *sites, int32_t id);
/* The site allocated before the first forward began (the first request
 * at a site of role activations, ol_sites_requested): what it made was
 * built with the model, as weights and copies of them are. */
bool ol_sites_early(const ol_sites_t *sites, int32_t id);
/* The process is at a new peak: the figures now are the at-peak figures.
 * O(1) (sites.c says how), so it is marked at every new peak, exactly. */
void ol_sites_mark_peak(ol_sites_t *sites);
/* The live bytes are at a new low of the iteration under way: the figures
 * now are what each site holds there (O(1), as the peak's mark). */
void ol_sites_mark_low(ol_sites_t *sites);
void ol_sites_mark_valley(ol_sites_t *sites, uint64_t iteration); /* iteration just ended */
/* The job began again (ol_account_restarted): no lowest point or
 * iteration marked yet, what each site grew by counted from the new start. */
void ol_sites_restart(ol_sites_t *sites);
size_t ol_sites_count(const ol_sites_t *sites);
const char *ol_sites_key(const ol_sites_t *sites, int32_t id);
const char *ol_sites_key_bytes(const ol_sites_t *sites, int32_t id, size_t *len);
const ol_site_figures_t *ol_sites_figures(const ol_sites_t *sites, int32_t id);
bool ol_sites_set_label(ol_sites_t *sites, int32_t id, const char *text);
const char *ol_sites_label(const ol_sites_t *sites, int32_t id); /* NULL: none */

/* The site whose bytes grew most (> 0) by order (OL_SITES_BY_GROWTH, at
 * iterations' lowest points; OL_SITES_BY_END_GROWTH, at their ends), skip
 * aside: the "not sampled" site, which holds many small tensors of many
 * call sites and names none (held-out fsdp2_leak: "Grew most (+28.38
 * MiB): (not sampled: OOMLENS_STACK_SAMPLE)"); -1 when none grew. */
int32_t ol_sites_grew_most(const ol_sites_t *sites, int32_t skip, ol_site_order_t order);
/* The site's figure that order ranks by (at the peak, in total, now, its growth). */
int64_t ol_sites_figure(const ol_sites_t *sites, int32_t id, ol_site_order_t order);
/* What a site's memory counts as growth from: what it held at the first
 * lowest point counted, 0 where it first held memory at a later one; and
 * INT64_MAX where it never held more at a later lowest point than there
 * (a buffer it always held, or no iteration ended). */
int64_t ol_sites_growth_base(const ol_sites_t *sites, int32_t id);
size_t ol_sites_top(const ol_sites_t *sites, ol_site_order_t order, int32_t *out, size_t max);

/* A site's frames as text, innermost first, at most max, each handed to
 * visit; returns how many. Who made the table knows what its keys are: the
 * library's are stacks (lib/stacks.c), a trace's are frames text. */
typedef void (*ol_frame_visit_fn)(const char *frame, void *arg);
typedef size_t (*ol_site_frames_fn)(const ol_sites_t *sites, int32_t id, size_t max,
                                    ol_frame_visit_fn visit, void *arg);
/* A frame's text, NUL included: a longer one is cut, the library's frames
 * (lib/stacks.c) and a trace's (ol_sites_text_frames) alike. */
#define OL_FRAME_TEXT_MAX 512
/* A trace's site keys: frames joined by ';' (trace_csv.h), an empty frame
 * skipped. The one split of such a key: each frame as it lies in the key
 * (len bytes, not NUL-terminated, never cut), at most max. */
typedef void (*ol_frame_span_fn)(const char *frame, size_t len, void *arg);
size_t ol_sites_text_spans(const ol_sites_t *sites, int32_t id, size_t max,
                           ol_frame_span_fn visit, void *arg);
/* The same frames as text, each cut at OL_FRAME_TEXT_MAX - 1 bytes: the
 * ol_site_frames_fn of a trace's table. */
size_t ol_sites_text_frames(const ol_sites_t *sites, int32_t id, size_t max,
                            ol_frame_visit_fn visit, void *arg);

/* The same split of any such text (a trace event's frames, before they
 * are a site): each frame of the len bytes at text, at most max. */
size_t ol_frames_text_each(const char *text, size_t len, size_t max, ol_frame_span_fn visit,
                           void *arg);

/* Each site's role (roles.c), decided once when it is made: from its
 * frames text by the account for a trace's keys, by the library from its
 * Python lines for its own (OL_ACCOUNT_LIVE_KEYS). A new site's is
 * OL_ROLE_unknown. */
void ol_sites_set_role(ol_sites_t *sites, int32_t id, ol_role_t role);
ol_role_t ol_sites_role(const ol_sites_t *sites, int32_t id);
/* Whether a backward site holds bytes that outlived a backward pass (the
 * gradients ol_sites_role_bytes splits from it): the gradients by frames
 * (DDP's buckets, roles.c) are not these. sites may be NULL. */
bool ol_sites_backward_kept(const ol_sites_t *sites, ol_site_order_t order);
/* The sites' bytes by role at the peak (OL_SITES_BY_AT_PEAK) or now
 * (OL_SITES_BY_CURRENT), into out[]; what total (the allocated bytes then)
 * holds beyond the sites' is unknown (sites off, no host memory to intern
 * one), so the roles sum to it. A backward site's bytes that outlive the
 * backward pass are gradients: what it held when the last optimizer step
 * began (sites.c says how that is seen), else at the last iteration's end;
 * the rest are backward temporaries. Returns whether any site's frames
 * named a role (else all is OL_ROLE_unknown). sites may be NULL. */
bool ol_sites_role_bytes(const ol_sites_t *sites, ol_site_order_t order, int64_t total,
                         int64_t out[OL_ROLE_COUNT]);

/* Frames joined as every report shows them: "inner < outer < ..." in text,
 * a list of strings in JSON. Visitors for an ol_site_frames_fn. */
#define OL_FRAME_SEP " < "
typedef struct ol_frame_join {
  ol_buf_t *out;
  size_t count; /* frames joined so far */
} ol_frame_join_t;
void ol_frame_join_text(const char *frame, void *join);
void ol_frame_join_json(const char *frame, void *join);

/* ---- roles.c: what memory is for, from its call site's frames -------- */
/* One frame's role: OL_ROLE_other for a Python frame ("file:line:function")
 * that names none, OL_ROLE_unknown for a frame that is not Python (native,
 * a note) and names none. The marker "(thread pt_autograd_N)" is backward. */
ol_role_t ol_role_of_frame(const char *frame, size_t len);
/* A site's role from its frames, innermost first: the first frame that
 * names a role; else other if any frame was Python; else unknown. update:
 * a frame was an optimizer's multi-tensor (foreach) update, whose
 * temporaries come beside the state (held-out foreach_step). state_buffers:
 * a frame was an optimizer making its state at its first step (_init_group
 * of torch.optim's Adam family or RMSprop), which keeps that many buffers
 * as large as each trained parameter (0: not such a frame, or not known).
 * update_makes_state: the update was SGD's, which makes its momentum
 * buffers (state) in its first step, beside any temporaries. */
typedef struct ol_role_fold {
  ol_role_t role;
  bool named;
  bool update;
  uint8_t state_buffers;
  bool update_makes_state;
} ol_role_fold_t;
#define OL_ROLE_FOLD_INIT {OL_ROLE_unknown, false, false, 0, false}
void ol_role_fold_add(ol_role_fold_t *fold, const char *frame, size_t len);
/* The same over frames text joined by ';' (a trace's site key). */
ol_role_fold_t ol_role_fold_of_frames(const char *text, size_t len);
ol_role_t ol_role_of_frames(const char *text, size_t len);
/* A site's role and its fold's flags, decided once when it is made, as its
 * role is (ol_sites_set_role); ol_sites_fold reads the rest. */
void ol_sites_set_fold(ol_sites_t *sites, int32_t id, ol_role_fold_t fold);
ol_role_fold_t ol_sites_fold(const ol_sites_t *sites, int32_t id); /* OL_ROLE_FOLD_INIT: none */
const char *ol_role_name(ol_role_t role);    /* "weights", ...; "?" out of range */
const char *ol_role_meaning(ol_role_t role); /* the list's words for it */
bool ol_role_parse(const char *name, ol_role_t *out); /* the role ol_role_name names */
/* Weights, gradients and optimizer state: what a training job keeps by design. */
bool ol_role_is_state(ol_role_t role);
/* Bytes by role as a JSON object of every role ({"weights": N, ...}), and
 * as one line of text: the roles holding bytes, largest first
 * ("weights 474.70 MiB, optimizer 949.40 MiB"; nothing when none). */
void ol_roles_json(ol_buf_t *out, const int64_t bytes[OL_ROLE_COUNT]);
void ol_roles_line(ol_buf_t *out, const int64_t bytes[OL_ROLE_COUNT]);

/* ---- site_groups.c: call sites grouped as a report shows them --------- */
typedef struct ol_site_group {
  int32_t id;          /* one of its sites, to name it */
  int64_t bytes;       /* at the peak or in total, summed over its sites */
  int64_t allocations;
  int sites;           /* distinct stacks that look alike in their first frames */
} ol_site_group_t;
/* The max largest groups of sites sharing their first `frames` frames,
 * largest first; -1 when host memory ran out (then list sites singly). */
long ol_site_groups_top(const ol_sites_t *sites, ol_site_order_t order, size_t frames,
                        ol_site_frames_fn frames_of, ol_site_group_t *out, size_t max);

/* ---- timeline.c: memory over time, bounded ---------------------------- */
#define OL_TIMELINE_POINTS 1024
#define OL_TIMELINE_OOMS 16
#define OL_TIMELINE_FIRST_WIDTH_NS 1000u /* doubles as the job goes on */

typedef struct ol_timeline_oom {
  uint64_t t_ns;
  uint64_t request;
} ol_timeline_oom_t;

typedef struct ol_timeline {
  uint64_t start_ns;  /* monotonic clock at the first point */
  double start_unix;  /* wall clock then */
  uint64_t width_ns;  /* each point covers this long */
  uint32_t count;     /* points in use */
  uint32_t oom_count; /* out-of-memory errors seen (ooms[] keeps the first, and the last) */
  int64_t allocated_now, reserved_now;
  int64_t peak_allocated, peak_reserved;
  uint64_t peak_allocated_ns, peak_reserved_ns;
  int64_t allocated[OL_TIMELINE_POINTS]; /* highest in each point's span */
  int64_t reserved[OL_TIMELINE_POINTS];
  ol_timeline_oom_t ooms[OL_TIMELINE_OOMS];
} ol_timeline_t;

void ol_timeline_init(ol_timeline_t *tl, uint64_t now_ns, double now_unix);
void ol_timeline_note(ol_timeline_t *tl, uint64_t t_ns, int64_t allocated, int64_t reserved);
/* A note known to come before bound_ns, if that alone places it; else false. */
bool ol_timeline_note_before(ol_timeline_t *tl, uint64_t bound_ns, int64_t allocated,
                             int64_t reserved);
void ol_timeline_oom(ol_timeline_t *tl, uint64_t t_ns, uint64_t request);
double ol_timeline_seconds(const ol_timeline_t *tl, uint64_t t_ns); /* since the start */
void ol_timeline_json(ol_buf_t *out, const ol_timeline_t *tl);
/* The same with each kept OOM's wall clock given (NULL: start_unix + t). */
void ol_timeline_json_times(ol_buf_t *out, const ol_timeline_t *tl, const double *oom_unix);
/* ---- report_model.c: one report as data, owning all it shows --------
 * The library snapshots its tables into one (lib/report.c); `oomlens
 * report` reads one back from a JSON report or builds one from a trace
 * (analyze/report_view.c); report_render.c prints any of them, as text and
 * as JSON. Nothing in it points into a live table or a parsed tree, so it
 * can be rendered after the tracker's lock is let go. */
#define OL_REPORT_SITES_SHOWN 5         /* call sites in each list of the text report */
#define OL_REPORT_SITES_KEPT (OL_REPORT_SITES_SHOWN * 4) /* ... and of the JSON */
#define OL_REPORT_FRAMES_SHOWN 6        /* frames of each (a group of stacks: all it has) */
#define OL_REPORT_FRAMES_IN_PARAGRAPH 3 /* frames naming a site in the OOM paragraph */
#define OL_REPORT_GROWER OL_OOM_SITES   /* oom_names[] slot of the growing site */

typedef struct ol_report_frames {
  char **frame; /* innermost first, each owned */
  size_t count;
} ol_report_frames_t;

typedef struct ol_report_site {
  int64_t bytes; /* at the peak, or in total, by the list it is in */
  int64_t allocations;
  int stacks; /* distinct stacks shown as this one entry */
  ol_report_frames_t frames;
} ol_report_site_t;

typedef struct ol_report_sites {
  ol_report_site_t *site; /* largest first */
  size_t count;
} ol_report_sites_t;

/* What the call sites are made of (the text's note, the JSON's "stacks"). */
typedef struct ol_report_stacks {
  bool native;     /* libunwind found */
  uint64_t depth;  /* OOMLENS_STACK_DEPTH */
  uint64_t sample; /* OOMLENS_STACK_SAMPLE, 0: every allocation */
  char py_state[16];   /* ok, off, none (no CPython), unsupported, unreadable */
  char py_version[32]; /* "3.11.7", or "" */
  uint64_t with_python, without_python; /* stacks taken with / without Python frames */
  bool roles_only; /* manage mode's role capture: Python frames only (format 1.2) */
} ol_report_stacks_t;

/* oomlens's own time on the job's threads (format 1.6; known false: an
 * older report): manage mode's pool (its allocations and frees, driver
 * calls and waits), the call-site capture, and the span since the first
 * was clocked. Whole microseconds, so a report read back renders the same
 * shares. */
typedef struct ol_report_own_time {
  bool known;
  uint64_t span_us, call_sites_us, manage_us;
} ol_report_own_time_t;

typedef struct ol_report_device {
  int device;
  ol_device_stats_t stats;
  /* stats.last_oom and last_oom_class hold a diagnosis. Its site ids index
   * oom_names: holders 0..holder_count-1, the grower OL_REPORT_GROWER. */
  bool diagnosed;
  ol_report_frames_t oom_names[OL_OOM_SITES + 1];
  char *advice; /* the advice as a JSON report wrote it; NULL: none read */
  /* stats.phases.leak, when it fired: its site's id is 0, naming leak_site
   * (-1: none). */
  ol_report_frames_t leak_site;
  bool has_sites; /* call sites were recorded (the lists may still be empty) */
  ol_report_sites_t at_peak, by_total;
  /* Memory by role (format 1.2), with the sites: at the peak and now,
   * summing to peak and current allocated; roles_known: some site's
   * frames named a role (else all is unknown). */
  bool roles_known;
  int64_t roles_at_peak[OL_ROLE_COUNT], roles_now[OL_ROLE_COUNT];
  /* A job whose iterations finished with no OOM: the batch that would fit
   * (ol_report_device_batch); has_batch false: none to give. */
  bool has_batch;
  ol_batch_figure_t batch;
  bool has_timeline;
  ol_timeline_t timeline;
  /* Each kept OOM's wall clock, as written: a report read back keeps the
   * figures it printed rather than sums of rounded ones. */
  double oom_time_unix[OL_TIMELINE_OOMS];
} ol_report_device_t;

typedef struct ol_report {
  int format, minor; /* as read; a report rendered is always of OL_REPORT_FORMAT.MINOR */
  char *version, *mode, *reason, *rank, *command; /* mode "trace": built from a trace */
  char *source; /* the file read, NULL for a live report */
  long pid;
  double time_unix;
  bool tracking_failed;
  bool has_stacks; /* call sites were on: the note */
  ol_report_stacks_t stacks;
  ol_report_own_time_t own_time;
  int device_count;
  ol_report_device_t *devices;
  bool failed; /* host memory ran out while building it: not to be written */
} ol_report_t;

int ol_report_init(ol_report_t *r, int device_count); /* 0, or -1 out of memory */
void ol_report_free(ol_report_t *r);
/* Sets *field to an owned copy of text (NULL: ""); false, and r->failed,
 * when out of memory. */
bool ol_report_set_text(ol_report_t *r, char **field, const char *text);
/* Appends a copy of the len bytes at frame; false, and r->failed, when out
 * of memory. */
bool ol_report_frames_add(ol_report_t *r, ol_report_frames_t *frames, const char *frame,
                          size_t len);
/* A table's site as owned frames, at most max; false: out of memory. */
bool ol_report_frames_collect(ol_report_frames_t *frames, const ol_sites_t *sites,
                              ol_site_frames_fn frames_of, int32_t id, size_t max);
void ol_report_frames_free(ol_report_frames_t *frames);
bool ol_report_is_trace(const ol_report_t *r);
/* A device from a tracker's figures (stats may be d's own) and its call
 * sites (sites NULL: none were recorded, and the diagnosis names none). */
void ol_report_device_fill(ol_report_t *r, ol_report_device_t *d, int device,
                           const ol_device_stats_t *stats, const ol_sites_t *sites,
                           ol_site_frames_fn frames_of);
/* A site list from a sites table, at most max entries, largest first: the
 * groups of stacks alike in the frames shown (site_groups.c; singly when
 * that runs out of host memory), a group named by the frames its stacks
 * share, a single stack by all its frames. The report's lists, and replay's
 * peak_sites (every site). false: out of host memory (the list holds what
 * was made). */
bool ol_report_sites_build(ol_report_sites_t *list, const ol_sites_t *sites,
                           ol_site_order_t order, ol_site_frames_fn frames_of, size_t max);
void ol_report_sites_free(ol_report_sites_t *list);
/* The device's site lists, and the names of its diagnosis's sites, from a
 * sites table: the largest groups of stacks alike in the frames shown
 * (site_groups.c; singly when that runs out of host memory). */
void ol_report_device_sites(ol_report_t *r, ol_report_device_t *d, const ol_sites_t *sites,
                            ol_site_frames_fn frames_of);
/* The batch that would fit, from the device's figures (stats: its
 * iterations, capacity, outside, batch; the roles): for a job whose
 * iterations finished and that did not run out (an OOM's diagnosis gives
 * its own). Called once the roles are in. */
void ol_report_device_batch(ol_report_device_t *d);
/* The device's timeline (tl may be d's own), its OOMs' wall clock made. */
void ol_report_device_timeline(ol_report_device_t *d, const ol_timeline_t *tl);

/* ---- report_render.c: the report as text and as JSON ------------------ */
/* The text follows torch.cuda.memory_summary(), one table per device; the
 * JSON holds the same figures under memory_stats() names. A report built
 * from a trace (mode "trace") has its own header. */
void ol_report_render_text(ol_buf_t *out, const ol_report_t *r);
void ol_report_render_json(ol_buf_t *out, const ol_report_t *r);
/* A site named as every report names it: its first
 * OL_REPORT_FRAMES_IN_PARAGRAPH frames in the paragraph's text, the
 * OL_REPORT_FRAMES_SHOWN frames as one JSON string. From a model's names
 * (an ol_site_namer_t; arg: the ol_report_device_t), or from a table. */
void ol_report_oom_namer(ol_buf_t *out, int32_t id, bool json, void *device);
/* The same for the leak warning's site (its leak_site). */
void ol_report_leak_namer(ol_buf_t *out, int32_t id, bool json, void *device);
/* Frames as a report's text shows them, at most max: joined, or "(no
 * frames recorded)" when there are none. */
void ol_report_frames_text(ol_buf_t *out, const ol_report_frames_t *f, size_t max);
void ol_report_site_name(ol_buf_t *out, const ol_sites_t *sites, ol_site_frames_fn frames_of,
                         int32_t id, bool json);
/* ---- report_file.c: where reports go, written whole or not at all ------ */
const char *ol_rank_text(void);
int ol_expand_path(const char *pattern, long pid, const char *rank, char *out, size_t cap);
int ol_output_path(const char *pattern, long pid, const char *rank, bool forked_child,
                   const char *keep_ext, char *out, size_t cap);
int ol_json_path_for(const char *text_path, char *out, size_t cap);
/* The text report and its JSON beside it (json NULL: none) are one
 * output: both targets pass output_file.c's rule before either is
 * written, so a refused one refuses both and nothing is written (no
 * x.json beside a refused x). False with *err ("PATH: why"). */
bool ol_report_files_write(const char *text_path, const ol_buf_t *text, const ol_buf_t *json,
                           ol_error_t *err);

/* ---- output_file.c: every file oomlens writes, never destroying one ---- */
/* A target is written only when it is absent or a regular file of the
 * same user: a path ending in '/', a folder, a symbolic link, a device, a
 * FIFO, a socket, another user's file or one of the command's inputs is
 * refused (err's status OL_EXIT_USAGE) before anything is created. A
 * failed write is OL_EXIT_FAILURE. Messages are "PATH: why". */
#define OL_OUTPUT_PRIVATE 0600 /* a new file's mode (less the umask): the job's reports and trace */
#define OL_OUTPUT_SHARED 0666  /* metrics (read by a collector) and the command line's outputs */
#define OL_OUTPUT_TEMP_MAX (4096 + 64)

/* A whole output being written: a temporary file in the target's folder,
 * published under the target's name only by ol_output_commit. */
typedef struct ol_output {
  const char *target; /* the caller's string, kept until commit or abort */
  int fd;             /* the temporary file; -1 once closed */
  bool keep_mode;     /* the target exists: the result takes its mode */
  unsigned mode;
  char temp[OL_OUTPUT_TEMP_MAX]; /* "" once published or removed */
} ol_output_t;

/* Whether path may be written, inputs (NULL-terminated, may be NULL)
 * being the files the command reads: the check to make before reading
 * anything, so a refused output costs nothing. */
bool ol_output_check(const char *path, const char *const *inputs, ol_error_t *err);
/* new_mode: OL_OUTPUT_PRIVATE or OL_OUTPUT_SHARED, for a target that does
 * not exist yet (an existing one keeps its mode). A write or commit that
 * fails removes the temporary file itself; abort is for the caller that
 * gives up (safe to call twice, and after a failure). */
bool ol_output_begin(ol_output_t *o, const char *path, unsigned new_mode, ol_error_t *err);
bool ol_output_write(ol_output_t *o, const void *data, size_t len, ol_error_t *err);
bool ol_output_commit(ol_output_t *o, ol_error_t *err); /* synced, closed, published */
void ol_output_abort(ol_output_t *o);
bool ol_output_write_file(const char *path, const void *data, size_t len, unsigned new_mode,
                          ol_error_t *err);
/* A stream written in place while the job runs (the trace): a regular
 * file of ours (emptied) or a FIFO with a reader; opening never waits.
 * The fd (blocking writes, close-on-exec), *created when the file is new
 * (the caller removes it if it gives up at once), or -1 with *err. */
int ol_output_open_stream(const char *path, unsigned new_mode, bool *created, ol_error_t *err);


/* ---- trace_actions.c: the trace's vocabulary, an event as read
 * (analyze/trace_csv.c) or written (lib/tracefile.c) ------------------ */
typedef enum ol_trace_action {
  OL_TRACE_ALLOC,          /* a tensor-level allocation */
  OL_TRACE_FREE_REQUESTED, /* the program let go; streams may still use it */
  OL_TRACE_FREE_COMPLETED, /* the memory may be handed out again */
  OL_TRACE_SEGMENT_ALLOC,  /* PyTorch's cache asked cudaMalloc for a segment */
  OL_TRACE_SEGMENT_FREE,
  OL_TRACE_SEGMENT_MAP,    /* expandable segments: pages mapped / unmapped */
  OL_TRACE_SEGMENT_UNMAP,
  OL_TRACE_OOM,            /* the request that failed in the recorded run */
  OL_TRACE_OOM_CONTEXT,    /* our format's oom_context line: the OOM the job saw, settled */
  /* Manage mode's pool lines (given only to a reader that asks for them,
   * ol_trace_want_pool_lines): a freed block the pool keeps out of use
   * behind a fence (pool_held), and the moment it returns (pool_freed). */
  OL_TRACE_POOL_HELD,
  OL_TRACE_POOL_FREED,
  OL_TRACE_ACTION_COUNT
} ol_trace_action_t;

typedef struct ol_trace_event {
  uint64_t time_us;
  ol_trace_action_t action;
  uint64_t addr;
  uint64_t size;
  uint64_t stream;
  const char *frames; /* not NUL-terminated; valid until the next call */
  size_t frames_len;
  int32_t site_plus1; /* our format's site NUMBER + 1 (the live job's site id); 0: none */
  uint64_t line;      /* in the file, counted from 1 (the header is line 1) */
  int device;         /* CUDA device ordinal; 0 in the CSV, which has none */
  /* oom: final (PyTorch's recorder writes one only for an OOM the job saw;
   * ours writes one at every failed attempt, settled as account.c says). */
  bool oom_final;
  /* oom_context: what the job's record had that no event carries (the
   * fields ol_oom_context_apply copies), and the class the job gave it
   * (OL_OOM_CLASS_COUNT: not said); valid until the next call. */
  const ol_oom_record_t *context;
  ol_oom_class_t context_class;
} ol_trace_event_t;

/* The most devices our format names (device ordinals 0 to this - 1). */
#define OL_TRACE_MAX_DEVICES 64

/* ---- framework_oom.c: a framework's own out-of-memory message ---------
 * PyTorch's message when its caching allocator refuses a request: the
 * request, the device ordinal, and the limit the job set on what PyTorch
 * may reserve (set_per_process_memory_fraction's "N allowed"; 0: none
 * said), and what it held then. Sizes as printed, to a hundredth of
 * their unit. */
typedef struct ol_framework_oom {
  uint64_t request;
  uint64_t limit;
  int device;
  /* "Of the allocated memory A is allocated by PyTorch, and F is reserved
   * by PyTorch but unallocated": -1 where the message does not say. */
  int64_t allocated;
  int64_t free_reserved;
} ol_framework_oom_t;
/* false: not such a message (no request or no device in it). */
bool ol_framework_oom_parse(const char *message, ol_framework_oom_t *out);

/* ---- oom_context.c: the trace line of an out-of-memory's context ------
 * `oom_context,DEVICE,key=value ...` (docs/trace-format.md): written by the
 * library when it settles an OOM, read by the trace reader; one list of
 * keys for both. The fields are the record's that no event carries: the
 * device (capacity, free), the memory held outside the allocator (and by
 * whom, per NVML), manage mode's free blocks, what the job's allocator
 * showed us, the batch, and the class the job's diagnosis gave. */
/* The line's words after "oom_context,DEVICE,", no newline. */
void ol_oom_context_text(ol_buf_t *out, const ol_oom_record_t *r, ol_oom_class_t cause);
/* Parses the words (len bytes, not NUL-terminated) into *r (fields not
 * given: unknown, as a record starts) and *cause (OL_OOM_CLASS_COUNT: not
 * given); unknown keys are skipped. false: a known key's value is bad. */
bool ol_oom_context_parse(const char *text, size_t len, ol_oom_record_t *r, ol_oom_class_t *cause);
/* Copies the context's fields into r (the rest of r: the account's). */
void ol_oom_context_apply(ol_oom_record_t *r, const ol_oom_record_t *context);
/* A record before anything is known: nothing free, no sites, -1 unknowns. */
void ol_oom_record_init(ol_oom_record_t *r, uint64_t request);

/* In the library too, which has no zlib:
 * "alloc", "free_completed", ...; "?" out of range. */
const char *ol_trace_action_name(ol_trace_action_t action);
/* The action named by the n bytes at p; false if none. */
bool ol_trace_action_parse(const char *p, size_t n, ol_trace_action_t *out);
/* oom_context and the pool lines: lines of their own, never an event's
 * action (and not counted as events). */
bool ol_trace_action_is_line(ol_trace_action_t action);

/* ---- account.c: one accounting model, live and offline ----------------- */
/* What an event stream means for memory, counted once for everyone: the
 * live tracker holds one account (updated under its lock), replay, export
 * and `oomlens report` on a trace each make one and feed it the trace's
 * events. The same events give the same figures and the same diagnosis. */

/* A block carved out of memory counted already (our pool's chunks, a
 * trace's tensors inside its segments) has no reserved memory of its own. */
#define OL_ORIGIN_NONE OL_ORIGIN_COUNT

enum {
  OL_ACCOUNT_SITES = 1u << 0,        /* a call-site table per device, made at its first site */
  OL_ACCOUNT_SITES_SHARED = 1u << 1, /* one table for all devices, whose peak is theirs together */
  OL_ACCOUNT_TIMELINE = 1u << 2,     /* a timeline per device, made at its first use */
  /* Site keys are not frames text (the library's raw stacks): the owner
   * sets each new site's role; else the account sets it from the key. */
  OL_ACCOUNT_LIVE_KEYS = 1u << 3,
};

/* A failed allocation awaits its verdict (account.c): the same request
 * served next is its allocator's retry after releasing a cache (PyTorch's
 * frees cached segments and asks again): recovered, counted, no OOM. Any
 * other request, or its owner's word (the allocator gave up, the process
 * ends), settles it as an out-of-memory the job saw. */
typedef struct ol_oom_wait {
  uint64_t request;  /* 0: none waits */
  int64_t failures;  /* its failed attempts in a row */
  uint64_t t_ns;     /* the last one's, on the timeline's clock */
  double wall_unix;  /* 0: not known */
} ol_oom_wait_t;

typedef enum ol_oom_verdict {
  OL_VERDICT_NONE,      /* nothing waited, or it waits on */
  OL_VERDICT_RECOVERED, /* the retry was served */
  OL_VERDICT_OOM,       /* it was an out-of-memory the job saw: now counted */
} ol_oom_verdict_t;

typedef struct ol_account_device {
  ol_device_stats_t stats; /* counters, iterations (stats.phases), the last diagnosis */
  ol_oom_wait_t wait;      /* a failed allocation awaiting its verdict */
  ol_sites_t *sites;       /* NULL: none yet, off, or no host memory (shared: device 0's) */
  ol_timeline_t *timeline; /* NULL: none yet, off, or no host memory */
  ol_phase_finder_t *finder; /* iterations' working state; NULL: none yet, or no host memory */
  uint64_t capacity;       /* the device's bytes, for the leak warning's projection; 0 unknown */
  uint64_t last_ns;        /* the clock at the last event noted (ol_account_note) */
  /* The id + 1 of this table's site of no frames (a trace's events that
   * carry none); 0: none. It is no call site to tell iterations by: the
   * live job counted those bytes under no site at all. */
  int32_t frameless_site_plus1;
  /* The id + 1 of this table's "not sampled" site (manage mode's
   * byte-weighted capture counts there what no sample took); 0: none. */
  int32_t unsampled_site_plus1;
  int32_t request_site_plus1; /* the last failed request's call site + 1; 0: none */
  /* The first iteration's allocations (first_step.c), until the log is
   * full; first_step_done: no longer kept (full, or no host memory). */
  ol_first_step_log_t *first_step;
  bool first_step_done;
  uint8_t copies_reads; /* iteration ends that read autocast's copies (account.c) */
  /* The last events (recent.c); NULL: none yet, or recent_off: no host
   * memory for it (asked once). */
  ol_recent_t *recent;
  bool recent_off;
  bool outside_known;     /* what is held outside the allocator, as its owner measured it */
  int64_t outside;
  /* After an out-of-memory the job went on from: the bytes of its load
   * (what it made before its first free) still live below which it has
   * dropped it, to begin again (a batch size search frees its model and
   * makes it anew at a smaller batch); 0: not watched. */
  int64_t restart_below;
  int64_t restart_weights; /* ... and the weights by role then, 0 not known */
  bool restart_pending; /* it has: told at the next allocation (ol_account_restarted) */
  /* Iterations seen to end, counted up at each end and never counted
   * again (stats.phases.iterations goes back where a longer repeat takes
   * over): the blocks' made_in. */
  uint64_t iteration_ends;
} ol_account_device_t;

typedef struct ol_account ol_account_t;
/* Told when a device's leak warning fires or is withdrawn
 * (stats.phases.leak, ol_leak_standing), under the account's owner's
 * lock: the live library prints it. */
typedef void (*ol_account_leak_fn)(ol_account_t *a, int device, void *arg);

struct ol_account { /* ol_account_init before use; no lock: its owner's */
  unsigned flags;
  ol_account_leak_fn on_leak; /* NULL: nobody to tell */
  void *on_leak_arg;
  int device_count;        /* highest device seen + 1 */
  ol_records_t blocks;     /* live blocks by address: size, device, site, stream,
                            * kind (ol_origin_t or OL_ORIGIN_NONE), value (the owner's) */
  int64_t allocated, peak; /* allocated bytes over all devices together */
  ol_account_device_t devices[OL_MAX_DEVICES];
};

/* Device ordinals outside what we keep counters for fold into the last
 * slot rather than being dropped, so totals stay right. Inline: the hot
 * path asks on every call. */
static inline int ol_account_clamp(int device)
{
  if (__builtin_expect((unsigned)device < OL_MAX_DEVICES, 1))
    return device;
  return device < 0 ? 0 : OL_MAX_DEVICES - 1;
}

/* The index a device counts under, counted as seen. */
static inline int ol_account_device(ol_account_t *a, int device)
{
  int d = ol_account_clamp(device);
  if (d >= a->device_count)
    a->device_count = d + 1;
  return d;
}

void ol_account_init(ol_account_t *a, unsigned flags);
void ol_account_free(ol_account_t *a); /* all it holds; then empty, flags kept */
/* The device's call site for key, interned; -1 when sites are off or host
 * memory ran out (the bytes then count under no site). *is_new (may be
 * NULL): the site was first seen now. */
int32_t ol_account_site(ol_account_t *a, int device, const char *key, size_t len, bool *is_new);
/* Site is the capture's "not sampled" one (a trace's is known by its text,
 * OL_SITE_UNSAMPLED_TEXT; the live tracker says so of its key). */
void ol_account_mark_unsampled(ol_account_t *a, int device, int32_t site);
ol_sites_t *ol_account_sites(const ol_account_t *a, int device); /* NULL: none */
/* The device's timeline, made at its first use (with OL_ACCOUNT_TIMELINE)
 * starting at t_ns; NULL: off, or no host memory. */
ol_timeline_t *ol_account_timeline(ol_account_t *a, int device, uint64_t t_ns, double start_unix);
/* The device's memory now (allocated and reserved), noted on its timeline
 * at t_ns, after each change; nothing when it has no timeline. Who counts
 * chooses the time: a trace's event's, or the tracker's clock. Inline:
 * the tracker notes every allocation and free. d: a device index. */
static inline void ol_account_note(ol_account_t *a, int d, uint64_t t_ns)
{
  ol_account_device_t *ad = &a->devices[d];
  ad->last_ns = t_ns; /* the iterations' clock */
  if (ad->timeline)
    ol_timeline_note(ad->timeline, t_ns, ad->stats.allocated_bytes[OL_POOL_ALL].current,
                     ad->stats.reserved_bytes[OL_POOL_ALL].current);
}
/* The same when all that is known of the time is that it comes before
 * bound_ns: true when that alone places the note (ol_timeline_note_before),
 * false when nothing was noted and the precise time is needed. */
static inline bool ol_account_note_before(ol_account_t *a, int d, uint64_t bound_ns)
{
  ol_account_device_t *ad = &a->devices[d];
  if (!ad->timeline ||
      !ol_timeline_note_before(ad->timeline, bound_ns,
                               ad->stats.allocated_bytes[OL_POOL_ALL].current,
                               ad->stats.reserved_bytes[OL_POOL_ALL].current))
    return false;
  ad->last_ns = bound_ns; /* no earlier than the event: close enough for iterations' seconds */
  return true;
}

/* ---- the hot path: the live tracker counts every allocation and free
 * through these two, so they and their helpers are inline (one call frame,
 * the tracker's); the rare paths are in account.c. ---------------------- */
void ol_account_forget(ol_account_t *a, const ol_record_t *stale); /* counted freed */
bool ol_account_unknown_free(ol_account_t *a, int device);         /* false */
/* An iteration of device index d just ended (phases.c said so): the sites
 * note what outlives it, the leak watch looks at its low point. */
void ol_account_iteration_ended(ol_account_t *a, int d);
/* Device index d's first iteration goes on, and its log has no room or
 * is not made yet: made (its allocation just counted logged first), or,
 * once an iteration is found or the log is full, dropped for good. */
void ol_account_first_step(ol_account_t *a, int d, uint64_t size, ol_role_t role);
/* What was left of the load fell under restart_below: a restart where the
 * weights by role went too (cold; called from ol_account_removed). */
void ol_account_load_dropped(ol_account_t *a, int d);
/* The job dropped its load after an out-of-memory it went on from: what
 * is read of its iterations and first step starts again (cold; called
 * from ol_account_alloc at the first allocation after). */
void ol_account_restarted(ol_account_t *a, int d);
/* Device index d has no log of its last events: made, with this block
 * made its first event, or given up for good where the host has no
 * memory for it. */
void ol_account_recent_start(ol_account_t *a, int d, ol_record_t *b);

/* A block's bytes change hands at its site; at a new peak, the sites note
 * who holds it (O(1), sites.c). */
static inline void ol_account_site_bytes(ol_sites_t *sites, int32_t site, int64_t delta, bool peak)
{
  ol_sites_add(sites, site, delta);
  if (peak)
    ol_sites_mark_peak(sites);
}

static inline void ol_account_pools_grow(ol_stat_t stat[OL_POOL_COUNT], int pool, int64_t n)
{
  ol_stat_grow(&stat[OL_POOL_ALL], n);
  ol_stat_grow(&stat[pool], n);
}

static inline void ol_account_pools_shrink(ol_stat_t stat[OL_POOL_COUNT], int pool, int64_t n)
{
  ol_stat_shrink(&stat[OL_POOL_ALL], n);
  ol_stat_shrink(&stat[pool], n);
}

/* Counts of blocks and segments move by one an event: no job or trace has
 * 2^63 events, so they need no saturation (which the byte counters pay
 * for on every event). */
static inline void ol_stat_count_up(ol_stat_t *stat)
{
  stat->current++;
  stat->allocated++;
  if (stat->current > stat->peak)
    stat->peak = stat->current;
}

static inline void ol_stat_count_down(ol_stat_t *stat)
{
  stat->current--;
  stat->freed++;
}

static inline void ol_account_pools_count(ol_stat_t stat[OL_POOL_COUNT], int pool, bool up)
{
  if (up) {
    ol_stat_count_up(&stat[OL_POOL_ALL]);
    ol_stat_count_up(&stat[pool]);
  } else {
    ol_stat_count_down(&stat[OL_POOL_ALL]);
    ol_stat_count_down(&stat[pool]);
  }
}

/* The device index whose entry holds device index d's sites: with one
 * shared table, device 0's. */
static inline int ol_account_sites_index(const ol_account_t *a, int d)
{
  return a->flags & OL_ACCOUNT_SITES_SHARED ? 0 : d;
}

/* The site iterations are told by: none for the site of no frames. */
static inline int32_t ol_account_phase_site(const ol_account_t *a, int d, int32_t site)
{
  return site + 1 == a->devices[ol_account_sites_index(a, d)].frameless_site_plus1 ? -1 : site;
}

/* The "not sampled" site's id, -1 where none was made. */
static inline int32_t ol_account_unsampled_site(const ol_account_t *a, int device)
{
  return a->devices[ol_account_sites_index(a, ol_account_clamp(device))].unsampled_site_plus1 - 1;
}

/* The site of no frames' id, -1 where none was made. */
static inline int32_t ol_account_frameless_site(const ol_account_t *a, int device)
{
  return a->devices[ol_account_sites_index(a, ol_account_clamp(device))].frameless_site_plus1 - 1;
}

/* The "not sampled" site is told to the iteration finder as such
 * (OL_PHASE_SITE_UNSAMPLED): what it counts is the sample's misses. */
static inline bool ol_account_site_unsampled(const ol_account_t *a, int d, int32_t site)
{
  return site >= 0 && site + 1 == a->devices[ol_account_sites_index(a, d)].unsampled_site_plus1;
}

/* Growing and shrinking are written apart: only growth can make a peak. A
 * block with an origin is a segment of reserved memory of its own. d: the
 * block's device index. */
static inline void ol_account_added(ol_account_t *a, ol_record_t *b, int d)
{
  ol_device_stats_t *dev = &a->devices[d].stats;
  int pool = ol_stats_pool_of(b->size);
  int64_t bytes = (int64_t)b->size, peak = dev->allocated_bytes[OL_POOL_ALL].peak;
  int32_t signature = ol_account_site_unsampled(a, d, b->site) ? OL_PHASE_SITE_UNSAMPLED
                     : b->signature_plus1 ? b->signature_plus1 - 1
                                          : ol_account_phase_site(a, d, b->site);
  if (__builtin_expect(ol_phases_alloc(&dev->phases, &a->devices[d].finder, b->size, signature,
                                       dev->allocated_bytes[OL_POOL_ALL].current),
                       0))
    ol_account_iteration_ended(a, d);
  if (__builtin_expect(a->devices[d].recent != NULL, 1))
    b->logged_as = ol_recent_note(a->devices[d].recent, b->site, b->size, false);
  else if (!a->devices[d].recent_off)
    ol_account_recent_start(a, d, b);
  ol_account_pools_grow(dev->allocated_bytes, pool, bytes);
  ol_account_pools_count(dev->allocation, pool, true);
  if (b->before_free)
    dev->phases.before_free_live = ol_sat_add(dev->phases.before_free_live, bytes);
  if (b->kind < OL_ORIGIN_COUNT) {
    ol_stat_grow(&dev->origin_bytes[b->kind], bytes);
    ol_account_pools_grow(dev->reserved_bytes, pool, bytes);
    ol_account_pools_count(dev->segment, pool, true);
  }
  if (__builtin_expect(!a->devices[d].first_step_done, 0)) {
    /* logged inline while there is room: the first step's every allocation */
    ol_first_step_log_t *log = a->devices[d].first_step;
    const ol_sites_t *sites = a->devices[ol_account_sites_index(a, d)].sites;
    ol_role_t role = sites ? ol_sites_role(sites, b->site) : OL_ROLE_unknown;
    if (log && log->count < OL_FIRST_STEP_KEEP) {
      log->size[log->count] = b->size;
      log->role[log->count] = (uint8_t)role;
      log->after[log->count++] = dev->allocated_bytes[OL_POOL_ALL].current;
    } else {
      ol_account_first_step(a, d, b->size, role);
    }
  }
  bool new_peak = dev->allocated_bytes[OL_POOL_ALL].current > peak;
  a->allocated = ol_sat_add(a->allocated, bytes);
  if (a->flags & OL_ACCOUNT_SITES_SHARED) { /* the peak of all devices together */
    new_peak = a->allocated > a->peak;
    d = 0;
  }
  if (a->allocated > a->peak)
    a->peak = a->allocated;
  if (a->devices[d].sites)
    ol_account_site_bytes(a->devices[d].sites, b->site, bytes, new_peak);
}

static inline void ol_account_removed(ol_account_t *a, const ol_record_t *b, int d)
{
  ol_device_stats_t *dev = &a->devices[d].stats;
  int pool = ol_stats_pool_of(b->size);
  int64_t bytes = (int64_t)b->size;
  ol_account_pools_shrink(dev->allocated_bytes, pool, bytes);
  if (b->before_free)
    dev->phases.before_free_live = ol_sat_sub(dev->phases.before_free_live, bytes);
  int64_t low = dev->phases.low;
  ol_phases_free(&dev->phases, a->devices[d].finder, bytes,
                 dev->allocated_bytes[OL_POOL_ALL].current);
  if (a->devices[d].recent)
    ol_recent_note(a->devices[d].recent, b->site, b->size, true);
  bool new_low = dev->phases.low < low;
  ol_account_pools_count(dev->allocation, pool, false);
  if (b->kind < OL_ORIGIN_COUNT) {
    ol_stat_shrink(&dev->origin_bytes[b->kind], bytes);
    ol_account_pools_shrink(dev->reserved_bytes, pool, bytes);
    ol_account_pools_count(dev->segment, pool, false);
  }
  a->allocated = ol_sat_sub(a->allocated, bytes);
  int sites_at = a->flags & OL_ACCOUNT_SITES_SHARED ? 0 : d;
  if (a->devices[sites_at].sites) {
    ol_account_site_bytes(a->devices[sites_at].sites, b->site, -bytes, false);
    if (new_low)
      ol_sites_mark_low(a->devices[sites_at].sites);
  }
  /* after the sites: the weights by role are read without this block */
  if (__builtin_expect(a->devices[d].restart_below > 0, 0) &&
      dev->phases.before_free_live < a->devices[d].restart_below)
    ol_account_load_dropped(a, d);
}

/* A block goes live: block->key its address, kind its origin. A block still
 * live at that address (its free went by unseen) is counted freed first and
 * copied to *stale. The record (valid until the table's next change), or
 * NULL when the host has no memory for the table (nothing counted). */
static inline ol_record_t *ol_account_alloc(ol_account_t *a, const ol_record_t *block,
                                            ol_record_t *stale, bool *replaced)
{
  int d = ol_account_device(a, block->device);
  ol_record_t *rec = ol_records_put(&a->blocks, block->key, stale, replaced);
  if (!rec)
    return NULL;
  if (*replaced) /* its free went by a path we do not see: gone, not a phantom */
    ol_account_forget(a, stale);
  *rec = *block;
  if (__builtin_expect(a->devices[d].restart_pending, 0))
    ol_account_restarted(a, d); /* before the block is read as made before a free or not */
  rec->before_free = !a->devices[d].stats.phases.freed;
  ol_account_added(a, rec, d);
  /* after: the block that ends an iteration is the next one's first */
  rec->made_in = (uint16_t)a->devices[d].iteration_ends;
  return rec;
}

/* The block at addr leaves, copied to *gone; false when none was live there
 * (counted as an unknown free of device). */
static inline bool ol_account_release(ol_account_t *a, uint64_t addr, int device,
                                      ol_record_t *gone)
{
  if (!ol_records_take(&a->blocks, addr, gone))
    return ol_account_unknown_free(a, device);
  ol_account_removed(a, gone, ol_account_clamp(gone->device));
  return true;
}

/* Reserved memory changes by delta bytes in one segment (size picks its
 * pool). Never below zero: a trace may begin after its segments were made. */
void ol_account_reserved(ol_account_t *a, int device, uint64_t size, int64_t delta,
                         ol_origin_t origin);
/* VMM memory mapped into address space (a trace's segment_map and
 * segment_unmap: cuMemMap's mappings, our pool's chunks) changes by delta;
 * never below zero, as reserved memory. */
void ol_account_mapped(ol_account_t *a, int device, int64_t delta);
/* A failed allocation for lack of memory, at t_ns (wall_unix its wall
 * clock, 0 not known, as in a trace): counted a failed allocation, and
 * waiting for its verdict (ol_oom_wait_t). OL_VERDICT_OOM: a different
 * request was waiting, and is now an OOM. */
ol_oom_verdict_t ol_account_oom_at(ol_account_t *a, int device, uint64_t request, uint64_t t_ns,
                                   double wall_unix);
/* A request of size was served on device: the waiting one's retry
 * (recovered), or another (the waiting one was an OOM). Call only when
 * ol_account_waiting: the hot path asks that inline. */
ol_oom_verdict_t ol_account_served(ol_account_t *a, int device, uint64_t size);
/* The waiting failure is an OOM now (its owner knows: the allocator gave
 * up, the process ends, the trace ends): counted (num_ooms, the last
 * request, the wall clocks, the timeline's mark at its last attempt).
 * false: none waited. */
bool ol_account_oom_settle(ol_account_t *a, int device);
static inline bool ol_account_waiting(const ol_account_t *a, int device)
{
  return __builtin_expect(a->devices[ol_account_clamp(device)].wait.request != 0, 0);
}
/* What the device holds outside this allocator (the CUDA context,
 * libraries, other processes), as its owner measured it: for the report's
 * batch figure. */
void ol_account_set_outside(ol_account_t *a, int device, int64_t bytes);
/* The call site of the request that just failed on device (-1: none), so
 * the diagnosis knows what the request itself was for (request_role). */
void ol_account_oom_site(ol_account_t *a, int device, int32_t site);
/* The device's counters as every report shows them, live or from a trace:
 * the account's, with the figures it keeps once (active and requested
 * bytes, active blocks: all equal to allocated) filled in. */
void ol_account_stats(const ol_account_t *a, int device, ol_device_stats_t *out);
/* The device's size in bytes (0 unknown), for the leak warning's
 * projection: the driver's or OOMLENS_CAPACITY live, a trace's device
 * line, replay's --capacity. */
void ol_account_set_capacity(ol_account_t *a, int device, uint64_t bytes);
/* What the account knows of an out-of-memory on device: allocated and
 * reserved now, what outlives iterations and its growth, what the job held
 * when it first freed memory, the iteration's own need, the live bytes by
 * role (roles_known, role_bytes: the bytes of no site count as unknown, so
 * they sum to allocated), and the sites that hold the memory and that grew
 * (ol_oom_note_sites). */
void ol_account_oom_figures(const ol_account_t *a, int device, ol_oom_record_t *r);
/* The device's live bytes by role now (OL_SITES_BY_CURRENT) or at its
 * peak (OL_SITES_BY_AT_PEAK), into out[] (set, not added): the sites'
 * (ol_sites_role_bytes), and what no site holds as unknown. *known: some
 * site's frames named a role. */
void ol_account_role_bytes(const ol_account_t *a, int device, ol_site_order_t order, bool *known,
                           int64_t out[OL_ROLE_COUNT]);

/* What one event did, for readers that show more than the figures. */
typedef struct ol_account_step {
  int32_t site;     /* an alloc's call site, -1 none */
  bool known;       /* a free met a live block */
  ol_record_t gone; /* the block a free took */
} ol_account_step_t;
/* One event of a trace, at its time (the timeline's clock: time_us).
 * false: host memory ran out for the live blocks. step may be NULL. */
bool ol_account_apply(ol_account_t *a, const ol_trace_event_t *ev, ol_account_step_t *step);

#endif
