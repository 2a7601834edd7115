/* replay.h: running a recorded trace through an allocation policy on a
 * simulated device (`oomlens replay`, the model checks, the benchmarks).
 *
 * Only the tensor-level events drive the policy: `alloc` allocates,
 * `free_completed` frees (trace addresses are mapped to the policy's), and
 * `oom`, the request that failed in the recorded run, is tried as an
 * allocation and released at once if it succeeds. The first allocation the
 * policy cannot serve is the replay's out-of-memory: the policy stops
 * there. The account reads on to the trace's end, for the out-of-memory
 * the recorded job saw (a failure settled as core/account.c settles one
 * live, and the trace's oom_context line): its diagnosis is the job's.
 * Segment events count as the job's reserved memory; the policy makes its
 * own. */
#ifndef OL_REPLAY_H
#define OL_REPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core.h"
#include "policy.h"

/* 139.8 GiB, an H200's usable memory: 139.8 * 2^30 = 150109106995.2, rounded down. */
#define OL_REPLAY_DEFAULT_CAPACITY UINT64_C(150109106995)

typedef struct ol_replay_oom {
  uint64_t event_index; /* among the trace's events, from 0 */
  uint64_t line;        /* in the trace file */
  uint64_t size;        /* the request that failed */
  bool recorded;        /* it was the trace's own `oom` event */
  ol_policy_stats_t stats; /* the policy's state when it failed */
  ol_oom_record_t record;  /* what the diagnosis saw */
  ol_oom_class_t cause;    /* and concluded */
} ol_replay_oom_t;

/* The out-of-memory the recorded job saw, diagnosed as the job's report
 * diagnosed it: the account's figures at its last failed attempt (the
 * trace's events, counted as the live tracker counts them) and, from the
 * trace's oom_context line, what no event carries (the device's capacity
 * and free memory, what was held outside the allocator and by whom, the
 * pool's free blocks, the class the job gave). */
typedef struct ol_replay_recorded {
  uint64_t line;         /* the last failed attempt's oom event */
  uint64_t size;         /* the request */
  bool has_context;      /* an oom_context line said what the device held */
  ol_oom_record_t record;
  ol_oom_class_t cause;     /* this build's class for it */
  ol_oom_class_t job_cause; /* the job's, as its line said; OL_OOM_CLASS_COUNT: not said */
} ol_replay_recorded_t;

/* The record a trace's account gives at a recorded failed attempt on its
 * device 0 (what the job's own record held, but for its oom_context
 * line): the figures, and the sites that hold memory but the trace's site
 * of no frames. Replay's, and `oomlens report` of a trace's. */
void ol_replay_attempt_record(const ol_account_t *a, uint64_t request, ol_oom_record_t *out);

typedef struct ol_replay_result {
  uint64_t events;        /* events read (all actions), up to where the replay stopped */
  uint64_t allocs, frees; /* served by the policy */
  uint64_t unknown_frees; /* free_completed of an address never allocated: skipped */
  uint64_t zero_allocs;   /* alloc of 0 bytes: nothing to allocate */
  uint64_t trace_ooms;    /* `oom` events met */
  /* Our pool on a trace of manage mode, following the live pool: frees it
   * held behind a fence (pool_held lines), and allocations it left to the
   * driver (served by neither pool). */
  uint64_t held_frees, driver_allocs;
  /* Peak of the live bytes the job held, as the report of its trace and
   * every export count it: the requests it was refused are not in it (the
   * policy's stats.allocated_peak counts them, served for an instant). */
  int64_t peak_requested;
  ol_policy_stats_t stats;  /* the policy's at the trace's end, or where it stopped */
  bool oom;
  ol_replay_oom_t oom_at; /* set when oom */
  /* The recorded job's own OOMs (its allocator's retries recovered are
   * not OOMs: recovered_allocs): the last of them diagnosed, when any.
   * Where the policy is refused what the job was refused and the job went
   * on (it asked for memory again), the replay goes on with it, oom_at
   * then the policy's last refusal; where the job ended there, or the
   * policy is refused what the job was served, the replay stops and
   * reads on only for the job's verdict on its waiting failure. */
  uint64_t recorded_ooms, recovered_allocs;
  bool recorded;
  ol_replay_recorded_t recorded_oom; /* set when recorded */
  /* The trace's call sites (its frames strings): bytes live at the peak of
   * requested bytes, per site; NULL if host memory ran out for them. The
   * account's device 0 table. */
  ol_sites_t *sites;
  /* What the trace asked for, counted as the live tracker counts a job
   * (core/account.c): device 0 holds the figures (all events count there),
   * its value of a live block is the policy's address. */
  ol_account_t *account;
  /* The policy's driver calls (stats.calls, cumulative) at the end of each
   * iteration the account found, [0] at the end of the first; NULL, 0 when
   * none ended (or host memory ran out for them: then no steady state). */
  ol_policy_calls_t *calls_at;
  uint64_t calls_count;
  char note[200]; /* the trace's ol_trace_note (cut short...); "" for a whole trace */
} ol_replay_result_t;

/* The driver calls of the iterations after warm-up: the last half of the
 * iterations the account found (at least one ended past the first), summed
 * and the worst one, by the total of its calls. Zero iterations when the
 * trace has too few. */
typedef struct ol_replay_steady {
  uint64_t iterations, of;    /* iterations counted, of the ones found */
  ol_policy_calls_t calls;    /* their sum */
  ol_policy_calls_t worst;    /* the one iteration that made the most calls */
} ol_replay_steady_t;
void ol_replay_steady(const ol_replay_result_t *result, ol_replay_steady_t *out);
/* Every driver call of c added up. */
int64_t ol_policy_calls_total(const ol_policy_calls_t *c);

/* Frees what a replay result holds (its account and sites). */
void ol_replay_result_free(ol_replay_result_t *result);

/* Replays the trace at path through ops on a device with the given options.
 * 0: it ran (out of memory or not, see result->oom). -1: the trace could
 * not be read or is malformed (err->status OL_EXIT_USAGE), or host memory
 * ran out (OL_EXIT_FAILURE); a one-line message naming the file (and
 * line) is in err->text. */
int ol_replay_file(const char *path, const ol_policy_ops_t *ops,
                   const ol_policy_options_t *options, ol_replay_result_t *result,
                   ol_error_t *err);

/* What the command line adds: one device of a trace that has several, and
 * progress on a terminal. */
typedef struct ol_replay_extras {
  int device; /* only this device's events; -1: all */
  uint64_t batch; /* the recorded job's batch, for the diagnosis's batch figures; 0: unknown */
  /* Every event as if it had no call site (a job without Python frames,
   * OOMLENS_ROLES=0, a C++ job): the diagnosis by timing alone. */
  bool no_sites;
  void (*progress)(double fraction, void *arg); /* NULL: none */
  void *progress_arg;
} ol_replay_extras_t;

int ol_replay_file_with(const char *path, const ol_policy_ops_t *ops,
                        const ol_policy_options_t *options, const ol_replay_extras_t *extras,
                        ol_replay_result_t *result, ol_error_t *err);

#endif
