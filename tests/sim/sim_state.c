/* sim_state.c - global state of the simulated driver: the one lock and its
 * condition variables, the SIMCU_* environment, capacity accounting, the
 * counters tests read, reset, and fork/exit handling.
 */
#include "sim_internal.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

sim_state_t sim;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* The condition variables: done (some work item completed) and work (new
 * work for the worker). A forked child cannot reuse its parent's, whose
 * waiters it does not have, nor re-initialize them (undefined): it takes
 * the next unused pair. */
#define CV_SLOTS 8
static pthread_cond_t cv_slots[CV_SLOTS][2];
static unsigned cv_slot;
#define done_cv (cv_slots[cv_slot % CV_SLOTS][0])
#define work_cv (cv_slots[cv_slot % CV_SLOTS][1])

static pthread_once_t once = PTHREAD_ONCE_INIT;
static atomic_ulong calls[SIM_FN_COUNT];

#define DEFAULT_CAPACITY ((uint64_t)8 << 30)

/* ---- environment ---- */

static void warn_env(const char *name, const char *val)
{
    fprintf(stderr, "simcu: warning: ignoring %s=%s (bad value)\n", name, val);
}

bool sim_parse_size(const char *s, uint64_t *out)
{
    if (!s || !isdigit((unsigned char)*s))
        return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return false;
    unsigned shift = 0;
    const char *units = "KMGT";
    const char *u = *end ? strchr(units, toupper((unsigned char)*end)) : NULL;
    if (u) {
        shift = 10u * (unsigned)(u - units + 1);
        end++;
        /* Accept 8G, 8GB and 8GiB alike: all mean powers of 1024 here. */
        if (strcasecmp(end, "b") == 0 || strcasecmp(end, "ib") == 0)
            end += strlen(end);
    }
    if (*end)
        return false;
    if (shift && v > (UINT64_MAX >> shift))
        return false;
    *out = (uint64_t)v << shift;
    return true;
}

static uint64_t env_size(const char *name, uint64_t def)
{
    const char *v = getenv(name);
    uint64_t out;
    if (!v || !*v)
        return def;
    if (sim_parse_size(v, &out) && out <= SIZE_MAX)
        return out;
    warn_env(name, v);
    return def;
}

static unsigned long env_ulong(const char *name, unsigned long def,
                               unsigned long max)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return def;
    char *end;
    errno = 0;
    unsigned long n = strtoul(v, &end, 10);
    if (errno || *end || !isdigit((unsigned char)*v) || n > max) {
        warn_env(name, v);
        return def;
    }
    return n;
}

static bool env_bool(const char *name, bool def)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return def;
    static const char *const yes[] = {"1", "true", "yes", "on"};
    static const char *const no[] = {"0", "false", "no", "off"};
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++) {
        if (strcasecmp(v, yes[i]) == 0)
            return true;
        if (strcasecmp(v, no[i]) == 0)
            return false;
    }
    warn_env(name, v);
    return def;
}

static void read_env(void)
{
    sim.ndev = (int)env_ulong("SIMCU_DEVICES", 1, SIM_MAX_DEVICES);
    size_t cap = (size_t)env_size("SIMCU_CAPACITY", DEFAULT_CAPACITY);
    size_t ext = (size_t)env_size("SIMCU_EXTERNAL", 0);
    for (int i = 0; i < SIM_MAX_DEVICES; i++) {
        sim.dev[i].capacity = cap;
        sim.dev[i].external = ext;
        sim.dev[i].peak = ext;
    }
    sim.no_vmm = env_bool("SIMCU_NO_VMM", false);
    sim.no_stream_mem_ops = env_bool("SIMCU_NO_STREAM_MEM_OPS", false);
    sim.no_ctx_events = env_bool("SIMCU_NO_CTX_EVENTS", false);
    sim.fail_at = env_ulong("SIMCU_FAIL_ALLOC", 0, ULONG_MAX);
    sim.fail_event_at = env_ulong("SIMCU_FAIL_EVENT", 0, ULONG_MAX);
    sim.fail_error = (CUresult)env_ulong("SIMCU_FAIL_ERROR", CUDA_ERROR_OUT_OF_MEMORY, 100000);
    if (sim.fail_error == CUDA_SUCCESS)
        sim.fail_error = CUDA_ERROR_OUT_OF_MEMORY;
    sim.driver_version =
        (int)env_ulong("SIMCU_DRIVER_VERSION", SIM_DRIVER_VERSION, 100000);
}

/* ---- lock, fork, exit ---- */

static void fork_prepare(void)
{
    pthread_mutex_lock(&lock);
}

static void fork_parent(void)
{
    pthread_mutex_unlock(&lock);
}

/* Delays are measured on the monotonic clock, so waits use it too. */
static void init_cvs(void)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&done_cv, &a);
    pthread_cond_init(&work_cv, &a);
    pthread_condattr_destroy(&a);
}

/* The child has only the forking thread: no worker, no waiters. Pending work
 * stays queued and a new worker picks it up at the next enqueue. */
static void fork_child(void)
{
    pthread_mutex_unlock(&lock);
    cv_slot++;
    init_cvs();
    sim_after_fork_child();
}

/* At exit only the worker thread stops: memory stays as it was, as with
 * the real driver, for atexit handlers (an interposer writing its report)
 * that still query it. A later enqueue would start a worker again. Run
 * from atexit rather than a destructor so it comes before sanitizers'
 * exit-time leak checks, which dislike running threads. */
static void sim_at_exit(void)
{
    sim_worker_stop();
}

static void global_init(void)
{
    init_cvs();
    for (int i = 0; i < SIM_MAX_DEVICES; i++) {
        sim.dev[i].ctx.dev = i;
        sim.dev[i].memfd = -1;
    }
    sim.next_id = 1;
    read_env();
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    atexit(sim_at_exit);
}

void sim_lock(void)
{
    pthread_once(&once, global_init);
    pthread_mutex_lock(&lock);
}

void sim_unlock(void)
{
    pthread_mutex_unlock(&lock);
}

uint64_t sim_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void wait_until(pthread_cond_t *cv, uint64_t deadline_ns)
{
    if (deadline_ns == UINT64_MAX) {
        pthread_cond_wait(cv, &lock);
        return;
    }
    struct timespec ts = {
        .tv_sec = (time_t)(deadline_ns / 1000000000u),
        .tv_nsec = (long)(deadline_ns % 1000000000u),
    };
    pthread_cond_timedwait(cv, &lock, &ts);
}

void sim_wait_done(void)
{
    wait_until(&done_cv, UINT64_MAX);
}

void sim_signal_done(void)
{
    pthread_cond_broadcast(&done_cv);
}

void sim_signal_work(void)
{
    pthread_cond_signal(&work_cv);
}

void sim_wait_work(uint64_t deadline_ns)
{
    wait_until(&work_cv, deadline_ns);
}

/* ---- accounting ---- */

void sim_count_call(int fn)
{
    atomic_fetch_add_explicit(&calls[fn], 1, memory_order_relaxed);
}

unsigned long sim_call_count_at(int fn)
{
    return atomic_load_explicit(&calls[fn], memory_order_relaxed);
}

/* Make room for `need` elements in a dynamic array: returns the (possibly
 * moved) array, or NULL when out of memory with `arr` left as it was. */
void *sim_grow(void *arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return arr;
    size_t n = *cap ? *cap * 2 : 16;
    while (n < need)
        n *= 2;
    void *p = realloc(arr, n * elem);
    if (p)
        *cap = n;
    return p;
}

bool sim_dev_valid(int dev)
{
    return dev >= 0 && dev < sim.ndev;
}

static size_t sat_add(size_t a, size_t b)
{
    return a > SIZE_MAX - b ? SIZE_MAX : a + b;
}

CUresult sim_charge(int dev, size_t bytes)
{
    sim_dev_t *d = &sim.dev[dev];
    size_t in_use = sat_add(d->external, d->used);
    if (bytes > d->capacity || in_use > d->capacity - bytes)
        return CUDA_ERROR_OUT_OF_MEMORY;
    d->used += bytes;
    if (in_use + bytes > d->peak)
        d->peak = in_use + bytes;
    return CUDA_SUCCESS;
}

void sim_uncharge(int dev, size_t bytes)
{
    sim.dev[dev].used -= bytes;
}

/* Counts every allocation call; true for the one SIMCU_FAIL_ALLOC picked. */
bool sim_alloc_call_fails(void)
{
    sim.alloc_calls++;
    return sim.fail_at != 0 && sim.alloc_calls == sim.fail_at;
}

/* Counts every event creation; true for the one SIMCU_FAIL_EVENT picked
 * (host memory short: the driver's refusal, not an old driver's). */
bool sim_event_create_fails(void)
{
    sim.event_creates++;
    return sim.fail_event_at != 0 && sim.event_creates == sim.fail_event_at;
}

CUresult sim_injected_error(void)
{
    return sim.fail_error;
}

/* ---- reset ---- */

static void reset_locked(void)
{
    sim_stream_free_all(); /* first: queued items point at memory */
    sim_vmm_free_all();
    sim_mem_free_all();
    sim.alloc_calls = 0;
    sim.event_creates = 0;
    sim.syncs = sim.stream_syncs = sim.violations = 0;
    sim.faults = sim.check_failures = 0;
    for (int i = 0; i < SIM_MAX_DEVICES; i++)
        sim.dev[i].used = 0;
    for (int i = 0; i < SIM_FN_COUNT; i++)
        atomic_store(&calls[i], 0);
    read_env();
}

void simcu_reset(void)
{
    sim_lock();
    reset_locked();
    sim_unlock();
}

void simcu_uninit(void)
{
    sim_lock();
    reset_locked();
    sim.initialized = false;
    sim_unlock();
}

/* ---- test-control getters and setters ---- */

int simcu_device_count(void)
{
    sim_lock();
    int n = sim.ndev;
    sim_unlock();
    return n;
}

size_t simcu_capacity(int dev)
{
    sim_lock();
    size_t v = sim_dev_valid(dev) ? sim.dev[dev].capacity : 0;
    sim_unlock();
    return v;
}

void simcu_set_capacity(int dev, size_t bytes)
{
    sim_lock();
    if (sim_dev_valid(dev))
        sim.dev[dev].capacity = bytes;
    sim_unlock();
}

void simcu_set_external(int dev, size_t bytes)
{
    sim_lock();
    if (sim_dev_valid(dev)) {
        sim_dev_t *d = &sim.dev[dev];
        d->external = bytes;
        if (sat_add(d->external, d->used) > d->peak)
            d->peak = sat_add(d->external, d->used);
    }
    sim_unlock();
}

void simcu_fail_alloc_at(unsigned long n)
{
    sim_lock();
    sim.fail_at = n ? sim.alloc_calls + n : 0;
    sim_unlock();
}

void simcu_fail_alloc_error(CUresult err)
{
    sim_lock();
    sim.fail_error = err == CUDA_SUCCESS ? CUDA_ERROR_OUT_OF_MEMORY : err;
    sim_unlock();
}

size_t simcu_used_bytes(int dev)
{
    sim_lock();
    size_t v = 0;
    if (sim_dev_valid(dev))
        v = sat_add(sim.dev[dev].external, sim.dev[dev].used);
    sim_unlock();
    return v;
}

size_t simcu_external_bytes(int dev)
{
    sim_lock();
    size_t v = sim_dev_valid(dev) ? sim.dev[dev].external : 0;
    sim_unlock();
    return v;
}

size_t simcu_peak_used_bytes(int dev)
{
    sim_lock();
    size_t v = sim_dev_valid(dev) ? sim.dev[dev].peak : 0;
    sim_unlock();
    return v;
}

size_t simcu_live_allocations(void)
{
    sim_lock();
    size_t n = sim.n_handles;
    for (size_t i = 0; i < sim.n_regions; i++)
        n += sim.regions[i]->kind == SIM_REGION_ALLOC;
    sim_unlock();
    return n;
}

size_t simcu_live_reservations(void)
{
    sim_lock();
    size_t n = sim.n_resv;
    sim_unlock();
    return n;
}

/* One getter per counter; each reads under the lock. */
#define SIM_COUNTER_GETTER(fn, field) \
    unsigned long fn(void) \
    { \
        sim_lock(); \
        unsigned long v = sim.field; \
        sim_unlock(); \
        return v; \
    }
SIM_COUNTER_GETTER(simcu_alloc_calls, alloc_calls)
SIM_COUNTER_GETTER(simcu_sync_count, syncs)
SIM_COUNTER_GETTER(simcu_stream_sync_count, stream_syncs)
SIM_COUNTER_GETTER(simcu_capture_violations, violations)
SIM_COUNTER_GETTER(simcu_fault_count, faults)
SIM_COUNTER_GETTER(simcu_check_failures, check_failures)
