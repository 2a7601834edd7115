/* ol.h: internal interfaces shared across oomlens's modules, listed under
 * the file that defines them. Nothing here is exported from the library. */
#ifndef OL_H
#define OL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cuda_abi.h"
#include "trace_csv.h"

#define OL_VERSION_TEXT "0.1.0"
#define OL_REPORT_FORMAT 1  /* version of the JSON report's layout */
#define OL_REPORT_MINOR 1   /* fields added without breaking readers of OL_REPORT_FORMAT */
#define OL_MAX_DEVICES 64
#define OL_SMALL_SIZE (1u << 20) /* PyTorch's small-pool limit, for the same rows */

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
  OL_OPT_CAPACITY,
  OL_OPT_STACKS,
  OL_OPT_STACK_DEPTH,
  OL_OPT_METRICS,
  OL_OPT_METRICS_INTERVAL,
  OL_OPT_STACK_SAMPLE,
  OL_OPT_PYTHON_FRAMES,
  OL_OPT_TRACE,
  OL_OPT_SOURCE_LINES,
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

/* ---- prim.c: the only code that calls into the real CUDA -------------- */
void *ol_prim_dlsym(void *handle, const char *name); /* glibc's dlsym */
void *ol_prim_dlopen_loaded(const char *path); /* glibc's dlopen, RTLD_NOLOAD */
void ol_prim_dlclose(void *handle);            /* glibc's dlclose */
void *ol_prim_real(ol_fn_t fn);                       /* NULL if unavailable */
bool ol_prim_driver_available(void);
bool ol_prim_opening_driver(void);
int ol_prim_fn_of(const void *real_fn); /* which interposed function, or -1 */
int ol_prim_fn_by_name(const char *name);
const char *ol_prim_name(ol_fn_t fn);
int ol_prim_current_device_driver(void);
int ol_prim_current_device_runtime(void);

#define OL_REAL(name) ((ol_pfn_##name)ol_prim_real(OL_FN_##name))

/* Manage mode's own use of the driver; return 0 on success, -1 out of
 * memory (vmm_map) or failure, -2 another failure. */
uint64_t ol_prim_vmm_granularity(int device); /* 0: no VMM on this device */
int ol_prim_vmm_reserve(uint64_t size, uint64_t alignment, uint64_t *base);
void ol_prim_vmm_unreserve(uint64_t base, uint64_t size);
int ol_prim_vmm_map(int device, uint64_t addr, uint64_t size, uint64_t *handle);
void ol_prim_vmm_unmap(uint64_t addr, uint64_t size, uint64_t handle);
void *ol_prim_event_create(void);
int ol_prim_event_record(void *event, void *stream);
int ol_prim_event_done(void *event); /* 1 done, 0 pending, -1 error */
int ol_prim_event_wait(void *event);
void ol_prim_event_destroy(void *event);
int ol_prim_device_synchronize(void);
int ol_prim_stream_idle(void *stream); /* 1 idle, 0 busy, -1 error */
int ol_prim_mem_info(size_t *free_bytes, size_t *total_bytes); /* current device; 0 ok */
typedef struct ol_gpu_process {
  uint32_t pid;
  int64_t bytes; /* -1: not available */
} ol_gpu_process_t;
int ol_prim_device_processes(int device, ol_gpu_process_t *out, int max); /* -1: no NVML */
void *ol_prim_unwinder(void); /* libunwind's unw_backtrace, NULL without libunwind.so.8 */
void *ol_prim_python_symbol(const char *name); /* from the loaded CPython, or NULL */
void *ol_prim_open_library(const char *soname); /* dlopen, local; NULL if absent */
uint64_t ol_prim_device_total_memory(int device); /* 0 if unknown */
bool ol_prim_has_context(void);                   /* a CUDA context is current */

typedef struct ol_buf ol_buf_t;     /* buffer.c, below */
typedef struct ol_sites ol_sites_t; /* sites.c, below */
typedef struct ol_site_key ol_site_key_t; /* stacks.c, below */

/* ---- phases.c: iterations found in the allocation stream ------------- */
#define OL_PHASE_VALLEYS 8
typedef struct ol_phases { /* all zero is a valid start */
  bool falling;
  int64_t extreme;  /* highest since the last valley, or lowest since the last peak */
  int64_t highest;  /* highest total ever seen */
  uint64_t iterations;
  int64_t valleys[OL_PHASE_VALLEYS]; /* persistent bytes after the last iterations */
} ol_phases_t;

void ol_phases_init(ol_phases_t *p);
void ol_phases_note(ol_phases_t *p, int64_t allocated);
int64_t ol_phases_persistent(const ol_phases_t *p);
int64_t ol_phases_growth(const ol_phases_t *p);

/* ---- oom.c: why an allocation failed, and what to change -------------- */
#define OL_OOM_CLASSES(X)                                                        \
  X(impossible, "the request alone is larger than the device")                  \
  X(external, "memory held outside this process's allocations")                 \
  X(fragmentation, "enough free reserved memory, but no block large enough")    \
  X(leak, "memory that outlives iterations grows iteration after iteration")    \
  X(persistent, "weights, gradients and optimizer state do not fit")            \
  X(activations, "memory that lives within one iteration does not fit")

typedef enum ol_oom_class {
#define OL_OOM_ENUM(name, what) OL_OOM_##name,
  OL_OOM_CLASSES(OL_OOM_ENUM)
#undef OL_OOM_ENUM
  OL_OOM_CLASS_COUNT
} ol_oom_class_t;

#define OL_OOM_SITES 3
typedef struct ol_oom_site {
  int32_t id;
  int64_t bytes;
} ol_oom_site_t;

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
  bool segments_only; /* we saw the framework's segments, not its tensors */
  bool managed;       /* our pool served the tensors (manage mode, replay's oomlens) */
  /* Call sites (ids in the sites table of whoever filled the record), when
   * stacks or trace frames are known: the largest holders at the failure,
   * and the one whose memory grew most across iterations. */
  ol_oom_site_t holders[OL_OOM_SITES];
  int holder_count;
  ol_oom_site_t grower; /* bytes: growth since the first iteration; id -1: none */
  /* Who holds the memory outside ours, per NVML (live jobs): other
   * processes, largest first, and what this process holds in all (its
   * context and libraries included); -1 unknown. */
  struct {
    uint32_t pid;
    int64_t bytes;
    char name[16];
  } others[OL_OOM_SITES];
  int other_count;
  int64_t self_device_bytes;
} ol_oom_record_t;

/* Writes a site's name: text for the paragraph, or a JSON value. */
typedef void (*ol_site_namer_t)(ol_buf_t *out, int32_t id, bool json, void *arg);

ol_oom_class_t ol_oom_classify(const ol_oom_record_t *r);
const char *ol_oom_class_name(ol_oom_class_t c);
const char *ol_oom_class_meaning(ol_oom_class_t c);
void ol_oom_explain(ol_buf_t *out, const ol_oom_record_t *r, ol_oom_class_t c, ol_site_namer_t namer,
                    void *arg); /* namer NULL: no sites named */
void ol_oom_json(ol_buf_t *out, const ol_oom_record_t *r, ol_oom_class_t c, ol_site_namer_t namer,
                 void *arg);
/* Fills r->holders and r->grower from a sites table (NULL: none). */
void ol_oom_note_sites(ol_oom_record_t *r, const ol_sites_t *sites);

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
#define OL_CALL_FIELDS(X)                                            \
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
  int64_t num_ooms;
  int64_t last_oom_request;
  ol_phases_t phases;      /* iterations in this device's allocated bytes */
  ol_oom_record_t last_oom; /* the diagnosis of the last out-of-memory */
  ol_oom_class_t last_oom_class;
  int64_t mem_free, mem_total; /* last cuMemGetInfo answer seen, 0 if none */
  int64_t ooms_by_class[OL_OOM_CLASS_COUNT]; /* diagnosed out-of-memory errors */
  double first_oom_unix, last_oom_unix;      /* wall clock of the OOMs, 0 if none */
} ol_device_stats_t;

/* Inline: the tracker updates a dozen of these per allocation. */
static inline void ol_stat_grow(ol_stat_t *stat, int64_t bytes) /* bytes >= 0 */
{
  stat->current += bytes;
  stat->allocated += bytes;
  if (stat->current > stat->peak)
    stat->peak = stat->current;
}

static inline void ol_stat_shrink(ol_stat_t *stat, int64_t bytes) /* bytes >= 0 */
{
  stat->current -= bytes;
  stat->freed += bytes;
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

/* ---- tracker.c: observe mode's record of what is live ------------------ */
typedef enum ol_kind {
  OL_KIND_RUNTIME,       /* cudaMalloc */
  OL_KIND_RUNTIME_ASYNC, /* cudaMallocAsync */
  OL_KIND_DRIVER,        /* cuMemAlloc called directly */
  OL_KIND_DRIVER_ASYNC,  /* cuMemAllocAsync called directly */
  OL_KIND_VMM,           /* cuMemCreate */
  OL_KIND_MANAGED,       /* served by our pool: allocated, not reserved */
} ol_kind_t;

typedef struct ol_snapshot {
  int device_count; /* highest device seen + 1 */
  ol_device_stats_t devices[OL_MAX_DEVICES];
  int64_t live_records;
  bool tracking_failed;
} ol_snapshot_t;

void ol_track_alloc(uintptr_t addr, size_t size, int device, ol_kind_t kind, uintptr_t stream);
/* The same, with its call site: site (>= 0) if the caller knows its id,
 * else the key to intern (NULL: none). Returns the site id used, or -1. */
int32_t ol_track_alloc_at(uintptr_t addr, size_t size, int device, ol_kind_t kind,
                          uintptr_t stream, const ol_site_key_t *key, int32_t site);
/* The device's call sites (for reports: copied under the lock by the caller). */
bool ol_track_sites(int device, void (*visit)(const ol_sites_t *sites, void *arg), void *arg); /* false: no sites */
bool ol_track_free(uintptr_t addr, ol_kind_t kind);
void ol_track_failed_alloc(size_t size, int device, ol_kind_t kind, bool out_of_memory);
void ol_track_oom_figures(int device, ol_oom_record_t *record); /* ours: allocated, reserved, phases */
void ol_track_oom_diagnosis(int device, const ol_oom_record_t *record, ol_oom_class_t cause);
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
void ol_track_fence_wait(int device);
void ol_track_device_sync(int device);
void ol_track_manage_fallback(int device);
bool ol_track_seen_activity(void);
void ol_track_snapshot(ol_snapshot_t *out);
void ol_track_reset(void);
void ol_track_lock(void);
void ol_track_unlock(void);

/* ---- streams.c: non-blocking streams and captures in progress ---------- */
void ol_streams_created(void *stream, unsigned int flags);
void ol_streams_destroyed(void *stream);
int ol_streams_nonblocking(void **out, int max);
void ol_streams_capture_began(void *stream);
void ol_streams_capture_ended(void *stream);
bool ol_streams_capturing(void);
bool ol_streams_single(void); /* no stream but the defaults: no driver call */
bool ol_streams_quiet(void);  /* ... or every other stream idle: queries each */

/* ---- capacity.c: OOMLENS_CAPACITY, a smaller device ------------------- */
bool ol_capacity_allows(int device, uint64_t size);
void ol_capacity_clamp(int device, size_t *free_bytes, size_t *total_bytes);

/* ---- sites.c: call sites and the bytes they hold -------------------- */
typedef struct ol_site_figures {
  int32_t id;
  int64_t allocations, current, peak, at_peak, total;
  int64_t first_valley, last_valley; /* live at the first and the last iteration's end */
  bool valley_seen;
} ol_site_figures_t;
typedef enum {
  OL_SITES_BY_AT_PEAK,
  OL_SITES_BY_TOTAL,
  OL_SITES_BY_CURRENT, /* who holds memory now (at an out-of-memory) */
  OL_SITES_BY_GROWTH   /* last_valley - first_valley: what grows across iterations */
} ol_site_order_t;

ol_sites_t *ol_sites_new(void);
void ol_sites_free(ol_sites_t *sites);
int32_t ol_sites_intern(ol_sites_t *sites, const char *key, size_t len); /* -1: no memory */
void ol_sites_add(ol_sites_t *sites, int32_t id, int64_t delta);
void ol_sites_mark_peak(ol_sites_t *sites); /* the process is at a new peak */
void ol_sites_mark_valley(ol_sites_t *sites); /* an iteration just ended */
size_t ol_sites_count(const ol_sites_t *sites);
const char *ol_sites_key(const ol_sites_t *sites, int32_t id);
const char *ol_sites_key_bytes(const ol_sites_t *sites, int32_t id, size_t *len);
const ol_site_figures_t *ol_sites_figures(const ol_sites_t *sites, int32_t id);
bool ol_sites_set_label(ol_sites_t *sites, int32_t id, const char *text);
const char *ol_sites_label(const ol_sites_t *sites, int32_t id); /* NULL: none */

size_t ol_sites_top(const ol_sites_t *sites, ol_site_order_t order, int32_t *out, size_t max);

/* ---- pyframes.c: the Python frames of the allocating thread ----------- */
typedef struct ol_pyframes_status {
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

/* ---- stacks.c: call stacks, as call-site keys ------------------------- */
#define OL_STACK_MAX 64
#define OL_PY_FRAMES_MAX 4
/* A live call site's key: a header word (Python frame count in bits 0-15,
 * native count in 16-31, bit 32 "not sampled"), two words per Python frame
 * (code object, first line << 32 | code unit), then native return
 * addresses, innermost first. Its bytes are what ol_sites_intern gets. */
#define OL_SITE_WORDS (1 + 2 * OL_PY_FRAMES_MAX + OL_STACK_MAX)
struct ol_site_key {
  uintptr_t words[OL_SITE_WORDS];
  size_t count; /* words used */
  uint64_t hash;
};

bool ol_stacks_on(void);
bool ol_stacks_native_available(void);
int ol_stacks_capture(void **frames, int max);
void ol_stacks_site_key(size_t size, ol_site_key_t *key); /* sampling decided here */
int32_t ol_stacks_cached_site(int device, const ol_site_key_t *key); /* -1: not cached */
void ol_stacks_cache_site(int device, const ol_site_key_t *key, int32_t site);
void ol_stacks_forget_sites(void); /* site ids cached by threads are stale */
void ol_stacks_label(const void *key, size_t len, ol_buf_t *out);
/* A live site as one line of trace text: its Python frames (the label)
 * then its native frames, innermost first, joined by ';' (no table needed:
 * the trace writer's thread formats it). */
void ol_stacks_key_text(const void *key, size_t len, const char *label, ol_buf_t *out);
#define OL_FRAME_TEXT_MAX 512 /* a native frame's text, demangled name and line included */
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
                        ol_site_group_t *out, size_t max);

/* ---- tracefile.c: OOMLENS_TRACE, every event into a file ---------------
 * Events and sites are recorded under the tracker's lock, so they are in
 * its order; a site is recorded the first time it is interned. */
void ol_tracefile_start(void);           /* at start: opens OOMLENS_TRACE if set */
int ol_tracefile_open(const char *path); /* 0, or -1 with a warning */
bool ol_tracefile_on(void);
/* A new site: its key, and the text of its Python frames (ol_stacks_label,
 * made on the capturing thread; NULL: none). */
void ol_tracefile_site(int device, int32_t site, const void *key, size_t len, const char *label);
void ol_tracefile_event(ol_trace_action_t action, uint64_t addr, uint64_t size, uint64_t stream,
                        int32_t site, int device);
void ol_tracefile_flush(void);  /* all so far on disk (SIGUSR1) */
void ol_tracefile_close(void);  /* all on disk, end line, closed (exit, SIGTERM) */
void ol_tracefile_forget(void); /* a forked child drops its parent's trace */

/* ---- progress.c: percent done on a terminal (replay, export) ---------- */
typedef struct ol_progress {
  const char *what;
  bool on; /* stderr is a terminal */
  int shown;
  double last;
} ol_progress_t;

void ol_progress_start(ol_progress_t *p, const char *what);
void ol_progress_show(double fraction, void *p); /* fits ol_export_options_t.progress */
void ol_progress_end(ol_progress_t *p);

/* ---- oom_live.c: the diagnosis at a live job's failed allocation ------ */
void ol_oom_at_failure(int device, uint64_t request);

/* ---- manage.c: our pool serves the requests -------------------------- */
bool ol_manage_on(void);
bool ol_manage_alloc(int device, uint64_t size, uint64_t *addr);
bool ol_manage_free(uint64_t addr);
bool ol_manage_alloc_async(int device, uint64_t size, void *stream, uint64_t *addr);
bool ol_manage_free_async(uint64_t addr, void *stream);
void ol_manage_stream_destroyed(void *stream);
bool ol_manage_free_blocks(int device, int64_t *free_reserved, int64_t *largest);

/* ---- intercept.c: what each hook does ---------------------------------- */
#define OL_HANDLER_DECL(name, ret, params, args) ret ol_on_##name params;
OL_INTERPOSED_FNS(OL_HANDLER_DECL)
#undef OL_HANDLER_DECL
void *ol_on_dlsym(void *handle, const char *name, const void *caller);
/* The shim's table: hook address for each interposed function. */
void ol_intercept_install(void *const hooks[OL_FN_COUNT]);
void *ol_intercept_wrap(void *real_fn);

/* ---- lifecycle.c: start, fork, signals, exit --------------------------- */
bool ol_lifecycle_enabled(void); /* starts oomlens on first call */
bool ol_lifecycle_forked_child(void);
void ol_lifecycle_at_exit(void);

/* ---- buffer.c: growable text for reports ------------------------------ */
typedef struct ol_buf {
  char *data;
  size_t len, cap;
  bool failed; /* an allocation failed: the text is incomplete */
} ol_buf_t;

void ol_buf_printf(ol_buf_t *buf, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ol_buf_json_string(ol_buf_t *buf, const char *text);
void ol_buf_free(ol_buf_t *buf);
/* Exit statuses, one definition for the whole project. The offline code
 * hands its errors back as an ol_error_t carrying one of them, and the
 * command line exits with it: never chosen by reading the message. */
#define OL_EXIT_OK 0
#define OL_EXIT_FAILURE 1 /* our own failure: out of host memory, cannot write the output */
#define OL_EXIT_USAGE 2   /* a bad command line or a bad input file */

typedef struct ol_error {
  int status;     /* OL_EXIT_*: what the error calls for */
  char text[512]; /* one line, naming the file (and line) or the option */
} ol_error_t;

/* Sets *err to status and the formatted message (cut short if need be);
 * err may be NULL, when no one wants the message. */
void ol_fail(ol_error_t *err, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* No error: status OL_EXIT_OK, empty text; NULL is fine. */
void ol_error_clear(ol_error_t *err);

/* ---- report.c: memory_summary text and JSON ---------------------------- */
typedef struct ol_report_context {
  const char *reason; /* "exit", "signal", "request" */
  long pid;
  const char *rank;
  const char *command;
  double time_unix;
} ol_report_context_t;

void ol_report_text(ol_buf_t *out, const ol_snapshot_t *snap, const ol_report_context_t *ctx);
void ol_report_json(ol_buf_t *out, const ol_snapshot_t *snap, const ol_report_context_t *ctx);
/* A native site named by its frames (an ol_site_namer_t; arg: the sites table). */
void ol_report_site_name(ol_buf_t *out, int32_t id, bool json, void *sites);
#define OL_REPORT_SITES_SHOWN 5  /* call sites in each list of the text report */
#define OL_REPORT_FRAMES_SHOWN 6 /* frames of each */
/* The text report's pieces, for `oomlens report` to print a JSON report
 * back exactly as the library wrote it. */
typedef struct ol_report_stacks {
  bool native;     /* libunwind found */
  uint64_t sample; /* OOMLENS_STACK_SAMPLE, 0: every allocation */
  ol_pyframes_status_t py;
} ol_report_stacks_t;
void ol_report_stacks_now(ol_report_stacks_t *stacks);
void ol_report_text_stacks_note(ol_buf_t *out, const ol_report_stacks_t *stacks);
/* stacks NULL: call sites were off, no note. */
void ol_report_text_header(ol_buf_t *out, const ol_report_context_t *ctx, const char *version,
                           const char *mode, bool tracking_failed, int device_count,
                           const ol_report_stacks_t *stacks);
void ol_report_text_device(ol_buf_t *out, int device, const ol_device_stats_t *dev);
void ol_report_text_origins(ol_buf_t *out, const ol_device_stats_t *dev);
void ol_report_text_sites_title(ol_buf_t *out, bool by_total);
void ol_report_text_site_figures(ol_buf_t *out, int64_t bytes, int64_t allocations);
/* namer NULL: the out-of-memory paragraph names no sites. */
void ol_report_text_calls(ol_buf_t *out, const ol_device_stats_t *dev, ol_site_namer_t namer,
                          void *arg);
void ol_format_bytes(char *out, size_t cap, int64_t bytes);
int ol_report_write_all(const char *reason); /* 0 when every file was written */
void ol_report_wait(void);                   /* until no report is being written */

/* ---- report_file.c: where reports go, written whole or not at all ------ */
const char *ol_rank_text(void);
int ol_expand_path(const char *pattern, long pid, const char *rank, char *out, size_t cap);
int ol_json_path_for(const char *text_path, char *out, size_t cap);
int ol_write_file_atomic(const char *path, const char *data, size_t len);
int ol_write_file_atomic_quiet(const char *path, const char *data, size_t len); /* 0 or errno */

/* ---- timeline.c: memory over time, bounded ---------------------------- */
#define OL_TIMELINE_POINTS 1024
#define OL_TIMELINE_OOMS 16
#define OL_TIMELINE_FIRST_WIDTH_NS 1000u /* doubles as the job goes on */

typedef struct ol_timeline_oom {
  uint64_t t_ns;
  int64_t request;
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
void ol_timeline_oom(ol_timeline_t *tl, uint64_t t_ns, int64_t request);
double ol_timeline_seconds(const ol_timeline_t *tl, uint64_t t_ns); /* since the start */
void ol_timeline_json(ol_buf_t *out, const ol_timeline_t *tl);
/* tracker.c: a copy of the device's timeline; false if it has none. */
bool ol_track_timeline(int device, ol_timeline_t *out);

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
  uint8_t kind; /* ol_kind_t */
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

/* ---- metrics.c: OOMLENS_METRICS, a Prometheus textfile kept current ---- */
void ol_metrics_start(void);       /* at start, when OOMLENS_METRICS is set */
void ol_metrics_stop(void);        /* at exit: the final write */
void ol_metrics_forget(void);      /* a forked child: no thread, nothing held */
void ol_metrics_text(ol_buf_t *out, const ol_snapshot_t *snap, long pid, const char *rank);
int ol_metrics_path_for(const char *pattern, long pid, const char *rank, bool child, char *out,
                        size_t cap);

#endif
