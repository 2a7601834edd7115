/* lib.h: the preloaded library's modules (src/lib), on top of core.h.
 * Only src/lib includes this; the offline tools never link it (a test
 * checks tools/oomlens for its symbols). What calls the real CUDA is
 * prim.h's, and what the exported hooks do is hooks.h's. */
#ifndef OL_LIB_H
#define OL_LIB_H

#include "core.h"

typedef struct ol_site_key ol_site_key_t; /* stacks.c, below */

/* The tracker's counters for every device at one moment (tracker.c). */
typedef struct ol_snapshot {
  int device_count; /* highest device seen + 1 */
  ol_device_stats_t devices[OL_MAX_DEVICES];
  int64_t live_records;
  bool tracking_failed;
} ol_snapshot_t;

/* ---- tracker.c: observe mode's record of what is live ------------------ */
typedef enum ol_kind {
  OL_KIND_RUNTIME,       /* cudaMalloc */
  OL_KIND_RUNTIME_ASYNC, /* cudaMallocAsync */
  OL_KIND_DRIVER,        /* cuMemAlloc called directly */
  OL_KIND_DRIVER_ASYNC,  /* cuMemAllocAsync called directly */
  OL_KIND_VMM,           /* cuMemCreate */
  OL_KIND_MANAGED,       /* served by our pool: allocated, not reserved */
} ol_kind_t;


void ol_track_alloc(uintptr_t addr, size_t size, int device, ol_kind_t kind, uintptr_t stream);
/* The same, with its call site: site (>= 0) if the caller knows its id,
 * else the key to intern (NULL: none). Returns the site id used, or -1. */
int32_t ol_track_alloc_at(uintptr_t addr, size_t size, int device, ol_kind_t kind,
                          uintptr_t stream, const ol_site_key_t *key, int32_t site);
/* The device's call sites, visited under the lock (the OOM paragraph). */
bool ol_track_sites(int device, void (*visit)(const ol_sites_t *sites, void *arg), void *arg); /* false: no sites */
bool ol_track_free(uintptr_t addr, ol_kind_t kind);
/* A refused allocation; key (NULL: none) the failed request's call site,
 * which the diagnosis and the trace's oom event carry. */
void ol_track_failed_alloc(size_t size, int device, ol_kind_t kind, bool out_of_memory,
                           const ol_site_key_t *key);
/* The framework refused a request itself (PyTorch at its memory fraction):
 * counted as a failed request, as the trace's oom event; false where it
 * follows a failed allocation call of ours with no call served between
 * (that refusal was seen, and diagnosed, already). */
bool ol_track_framework_refusal(size_t size, int device);
void ol_track_oom_figures(int device, ol_oom_record_t *record); /* ours: allocated, reserved, phases */
/* A failed allocation's diagnosis, made from its figures (oom_live.c): kept
 * until the account settles the failure (the next request that is not its
 * retry, ol_track_oom_settle), then the device's diagnosis, its paragraph
 * and its trace line; dropped when the retry is served. */
void ol_track_oom_pending(int device, const ol_oom_record_t *record, ol_oom_class_t cause);
/* The device's waiting failure (-1: every device's) is an OOM the job saw
 * now: its allocator gave up (PyTorch asks cudaMemGetInfo for its error
 * message), or a report or the process's end comes first. */
void ol_track_oom_settle(int device);
/* Whether a failure on device waits for its verdict. */
bool ol_track_oom_waiting(int device);
/* A failure still waiting on device: amend changes its record (under the
 * tracker's lock) and it is classified again. Nothing waiting: nothing. */
void ol_track_oom_amend(int device, void (*amend)(ol_oom_record_t *r, const void *arg),
                        const void *arg);
void ol_track_vmm_create(uint64_t handle, size_t size, int device);
void ol_track_vmm_release(uint64_t handle);
void ol_track_vmm_map(uintptr_t addr, size_t size, uint64_t handle);
void ol_track_vmm_unmap(uintptr_t addr, size_t size);
void ol_track_va_reserve(uintptr_t addr, size_t size, int device);
void ol_track_va_free(uintptr_t addr);
void ol_track_mem_info(int device, size_t free_bytes, size_t total_bytes);
/* manage mode's reserved memory: a chunk at addr mapped (delta > 0) or unmapped */
void ol_track_pool_mapped(int device, uint64_t addr, int64_t delta);
int64_t ol_track_reserved_now(int device);
void ol_track_pending(int device, int64_t delta);     /* freed, waiting for a fence */
/* A freed block of the pool's at addr kept out of use (held) or given back
 * to the pool: for the trace (pool_held / pool_freed), which replay follows */
void ol_track_pool_held(int device, uint64_t addr, bool held);
void ol_track_fence_wait(int device);
void ol_track_stream_query(int device);
void ol_track_stream_mark(int device);
void ol_track_stream_barrier(int device);
void ol_track_handle_move(int device);
void ol_track_mark_wait(int device);
void ol_track_device_sync(int device);
void ol_track_manage_fallback(int device);
bool ol_track_seen_activity(void);
void ol_track_snapshot(ol_snapshot_t *out);
void ol_track_reset(void);
void ol_track_lock(void);
void ol_track_unlock(void);

/* tracker.c: a copy of the device's timeline; false if it has none. */
bool ol_track_timeline(int device, ol_timeline_t *out);
/* tracker.c: a report's figures as one moment (one hold of the lock): r
 * made (ol_report_init) with each device's counters and timeline, and a
 * copy of each device's call sites in sites[d] (NULL: none), which the
 * caller names into r and frees (ol_sites_free). */
void ol_track_report(ol_report_t *r, ol_sites_t *sites[OL_MAX_DEVICES]);


/* ---- streams.c: non-blocking streams and captures in progress ---------- */
void ol_streams_created(void *stream, unsigned int flags);
void ol_streams_destroyed(void *stream);
int ol_streams_nonblocking(void **out, int max);
void ol_streams_capture_began(void *stream);
void ol_streams_capture_ended(void *stream);
bool ol_streams_capturing(void);
bool ol_streams_single(void); /* no stream but the defaults: no driver call */
bool ol_streams_quiet(void);  /* ... or every other stream idle: queries each */
/* A mark behind every non-blocking stream's work (no query); false: none */
bool ol_streams_mark(uint32_t *mark);
int ol_streams_marked(uint32_t mark);       /* 1 every stream past it, 0 not, -1 unknown */
bool ol_streams_wait_marked(uint32_t mark, uint64_t max_ns); /* ... waiting: false after it */

/* ---- capacity.c: OOMLENS_CAPACITY, a smaller device ------------------- */
bool ol_capacity_allows(int device, uint64_t size);
void ol_capacity_clamp(int device, size_t *free_bytes, size_t *total_bytes);
/* What others held when OOMLENS_CAPACITY first measured them; -1: not
 * measured (no capacity set, or not yet). */
int64_t ol_capacity_outside(int device);

/* ---- pyframes.c: the Python frames of the allocating thread ----------- */
typedef struct ol_pyframes_status { /* what the report's note says of Python frames */
  const char *state;   /* ok, off, none (no CPython), unsupported, unreadable */
  const char *version; /* "3.11.7", or "" */
  uint64_t with_python, without_python; /* allocations captured with / without frames */
} ol_pyframes_status_t;

/* Up to max frames as (code object, where) word pairs: the innermost and
 * the first of the job's own code; 0 without Python on this thread. */
int ol_pyframes_capture(uintptr_t *pairs, int max);
/* "file:line:function"; only on the capturing thread, during its hook. */
void ol_pyframes_describe(uintptr_t code, uint64_t where, char *out, size_t cap);
void ol_pyframes_status(ol_pyframes_status_t *out);
bool ol_pyframes_in_interpreter(uintptr_t pc); /* a native frame inside CPython */
bool ol_pyframes_available(void); /* a CPython whose frames we can read runs here */

/* ---- stacks.c: call stacks, as call-site keys ------------------------- */
#define OL_STACK_MAX 64
#define OL_PY_FRAMES_MAX 4
/* A live call site's key: a header word (Python frame count in bits 0-15,
 * native count in 16-31, bit 32 "not sampled", bits 33-47 an autograd
 * thread's number + 1), two words per Python frame
 * (code object, first line << 32 | code unit), then native return
 * addresses, innermost first. Its bytes are what ol_sites_intern gets. */
#define OL_SITE_WORDS (1 + 2 * OL_PY_FRAMES_MAX + OL_STACK_MAX)
struct ol_site_key {
  uintptr_t words[OL_SITE_WORDS];
  size_t count; /* words used */
  uint64_t hash;
};

/* Call sites are taken: OOMLENS_STACKS, or manage mode's role capture
 * (OOMLENS_ROLES); native frames only with OOMLENS_STACKS. */
bool ol_stacks_on(void);
bool ol_stacks_native_on(void);
/* Call sites are taken now: configured on, and not paused by the job
 * (oomlens_capture). ol_stacks_set_paused returns whether it was paused. */
bool ol_stacks_capturing(void);
bool ol_stacks_set_paused(bool paused);
/* The sampling mean in bytes (0: every allocation): OOMLENS_STACK_SAMPLE,
 * or 1 MiB for the role capture when that is 0. */
uint64_t ol_stacks_sample_bytes(void);
/* A new live site's role (core/roles.c) from its key and label, on the
 * capturing thread: what the rule gives the frames its trace line carries
 * (the label's Python frames a line each, then the thread's marker). */
ol_role_fold_t ol_stacks_role(const void *key, size_t len, const char *label);
bool ol_stacks_native_available(void);
int ol_stacks_capture(void **frames, int max);
void ol_stacks_site_key(size_t size, ol_site_key_t *key); /* sampling decided here */
/* Whether a key is the "not sampled" bucket's (its site counts what no sample took). */
bool ol_stacks_key_unsampled(const void *key, size_t len);
void ol_stacks_request_key(ol_site_key_t *key);           /* a failed request's: always */
/* ---- own_time.c: oomlens's own time on the job's threads ------------- */
typedef enum ol_own { OL_OWN_CALL_SITES, OL_OWN_MANAGE, OL_OWN_COUNT } ol_own_t;
uint64_t ol_own_clock_ns(void);                       /* monotonic */
void ol_own_charge(ol_own_t what, uint64_t since_ns); /* the time since a reading */
void ol_own_times(ol_report_own_time_t *out);         /* totals, and the span since the first */
int32_t ol_stacks_cached_site(int device, const ol_site_key_t *key); /* -1: not cached */
void ol_stacks_cache_site(int device, const ol_site_key_t *key, int32_t site);
void ol_stacks_forget_sites(void); /* site ids cached by threads are stale */
void ol_stacks_label(const void *key, size_t len, ol_buf_t *out);
/* A live site as one line of trace text: the frames ol_stacks_site_frames
 * gives (the label's, then the native ones), joined by ';', a ';' in a
 * frame written ':' (no table needed: the trace writer's thread formats it). */
void ol_stacks_key_text(const void *key, size_t len, const char *label, ol_buf_t *out);
void ol_stacks_describe(const void *frame, char *out, size_t cap);
/* A live site's frames as text (Python, then native), at most max. */
size_t ol_stacks_site_frames(const ol_sites_t *sites, int32_t id, size_t max,
                             void (*visit)(const char *frame, void *arg), void *arg);

/* ---- symbolize.c: source lines of native frames, at report time ------ */
/* The source file (its base name) and line of the call at a return
 * address, where the binary or its separate debug file has DWARF line
 * info and libdw.so.1 can be opened; false otherwise (and always with
 * OOMLENS_SOURCE_LINES=0). Not for the allocation hooks: it reads files. */
bool ol_symbolize_line(const void *return_address, char *file, size_t cap, int *line);
/* A C++ symbol demangled into out when libstdc++ is loaded; false leaves
 * the name as it was. */
bool ol_symbolize_demangle(const char *name, char *out, size_t cap);

/* ---- tracefile.c: OOMLENS_TRACE, every event into a file ---------------
 * Events and sites are recorded under the tracker's lock, so they are in
 * its order; a site is recorded the first time it is interned. */
void ol_tracefile_start(void);           /* at start: opens OOMLENS_TRACE if set */
int ol_tracefile_open(const char *path); /* 0, or -1 with a warning */
bool ol_tracefile_on(void);     /* open: the hooks hand us their events */
bool ol_tracefile_taking(void); /* events kept; false once tracing stopped early */
uint64_t ol_tracefile_dropped(void); /* events since tracing stopped early, not kept */
/* A new site: its key, and the text of its Python frames (ol_stacks_label,
 * made on the capturing thread; NULL: none). */
void ol_tracefile_site(int device, int32_t site, const void *key, size_t len, const char *label);
void ol_tracefile_event(ol_trace_action_t action, uint64_t addr, uint64_t size, uint64_t stream,
                        int32_t site, int device);
/* An out-of-memory the job saw, settled: its oom_context line (what no
 * event carries: oom_context.c), after its last oom event. */
void ol_tracefile_oom_context(int device, const ol_oom_record_t *r, ol_oom_class_t cause);
/* What the device held outside the allocator at the job's first allocation
 * (the CUDA context, libraries, other processes): an outside line. */
void ol_tracefile_outside(int device, int64_t bytes);
/* Manage mode: a freed block of the pool's kept out of use behind a fence
 * (held), or given back to the pool (pool_held / pool_freed lines). */
void ol_tracefile_pool(int device, uint64_t addr, bool held);
/* Each waits for the writer at most CLOSE_WAIT_MS (1 s), never blocking a hook. */
void ol_tracefile_flush(void);  /* all so far on disk (SIGUSR1) */
void ol_tracefile_close(void);  /* all on disk, end line, closed (exit, SIGTERM) */
void ol_tracefile_forget(void); /* a forked child drops its parent's trace */

/* ---- oom_live.c: the diagnosis at a live job's failed allocation ------ */
/* framework_limit: the framework refused the request at a limit of its own
 * (ol_track_framework_refusal), the figures are against it; 0: the device
 * or the pool refused. */
void ol_oom_at_failure(int device, uint64_t request, uint64_t framework_limit);
/* PyTorch's allocator as its environment sets it, read as PyTorch reads
 * it: its cache turned off (PYTORCH_NO_CUDA_MEMORY_CACHING=1, as --manage
 * sets), its cudaMallocAsync backend asked for. */
bool ol_pytorch_cache_off(void);
bool ol_pytorch_async_backend(void);
/* The framework's error after the device refused: its own figures (what
 * its cache held, free and in use) complete the failure's record, and the
 * failure is settled. */
void ol_oom_framework_word(int device, const ol_framework_oom_t *oom);
/* Whether the framework's own error will follow a refusal with its word
 * (PyTorch's caching allocator, its cache on): the failure then waits for
 * it rather than settle when the allocator asks what is free. */
bool ol_oom_framework_will_say(void);
/* A settled OOM's paragraph on stderr (a few per process), its sites
 * named from the live table; called by the tracker under its lock. */
void ol_oom_paragraph(int device, const ol_oom_record_t *r, ol_oom_class_t cause,
                      const ol_sites_t *sites);

/* ---- manage.c: our pool serves the requests -------------------------- */
bool ol_manage_on(void);
bool ol_manage_alloc(int device, uint64_t size, uint64_t *addr);
bool ol_manage_free(uint64_t addr);
bool ol_manage_alloc_async(int device, uint64_t size, void *stream, bool per_thread_api,
                           uint64_t *addr);
/* per_thread_api: the call came through a _ptsz entry point, where stream
 * 0 is the calling thread's per-thread default stream */
bool ol_manage_free_async(uint64_t addr, void *stream, bool per_thread_api);
void ol_manage_stream_destroyed(void *stream);
/* A CUDA graph capture began: where PyTorch's cache is off (as --manage
 * sets), PyTorch cannot capture, and the job is told why, once. */
void ol_manage_capture_began(void);
bool ol_manage_free_blocks(int device, int64_t *free_reserved, int64_t *largest);
/* Gives the pool's free memory back to the device after the driver refused
 * a request of the job's; true when some was, and a retry may succeed. */
bool ol_manage_release_free(int device);

/* ---- lifecycle.c: start, fork, signals, exit --------------------------- */
bool ol_lifecycle_enabled(void); /* starts oomlens on first call */
bool ol_lifecycle_forked_child(void);
/* A detached thread of ours, every signal blocked in it; false if none. */
bool ol_lifecycle_start_thread(void *(*main_fn)(void *), void *arg);
/* A file named by an OOMLENS_* pattern for this process: %p, %r, and a
 * forked child's own name (ol_output_path); 0, or -1 if too long. */
int ol_lifecycle_output_path(const char *pattern, const char *keep_ext, char *out, size_t cap);
void ol_lifecycle_at_exit(void);

/* ---- report.c: the live report, written at exit, at a signal, on request */

/* A live site named as reports name it (an ol_site_namer_t; arg: the
 * device's sites table, held under the tracker's lock). */
void ol_report_stack_namer(ol_buf_t *out, int32_t id, bool json, void *sites);
void ol_report_stacks_now(ol_report_stacks_t *stacks);
/* The live report as one snapshot, as written (r->failed: out of host
 * memory); 0, or -1 when not even that could be made. */
int ol_report_take(ol_report_t *r, const char *reason);
int ol_report_write_all(const char *reason); /* 0 when every file was written */
bool ol_report_wait(void); /* until no report is being written (at most 5 s: false) */

/* ---- metrics.c: OOMLENS_METRICS, a Prometheus textfile kept current ---- */
void ol_metrics_start(void);       /* at start, when OOMLENS_METRICS is set */
void ol_metrics_stop(void);        /* at exit: the final write */
void ol_metrics_forget(void);      /* a forked child: no thread, nothing held */
void ol_metrics_text(ol_buf_t *out, const ol_snapshot_t *snap, long pid, const char *rank);


#endif
