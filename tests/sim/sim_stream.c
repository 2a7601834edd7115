/* sim_stream.c - streams whose work completes later, events, graph capture,
 * and the worker thread that runs simulated kernels.
 *
 * Every stream is a FIFO of work items. One worker thread serves them all:
 * a stream's head item starts once what it depends on is done, then lands
 * delay_us later. Streams run independently of each other (a slow kernel on
 * one does not hold up another), except as CUDA orders them:
 *   - the legacy default stream waits for work enqueued before on blocking
 *     streams, and blocking streams wait for earlier legacy work;
 *   - cuStreamWaitEvent waits for the event's last record;
 *   - cuCtxRecordEvent's record passes once all work of the device's
 *     streams enqueued before it is done, and work enqueued after a
 *     cuCtxWaitEvent (or a cuStreamWaitEvent on such a record) starts only
 *     once that work is done (a context wait on a stream-recorded event is
 *     refused: not modelled).
 * Dependencies always point to earlier items, so nothing can deadlock.
 *
 * Kernels run with the lock held, so the memory they touch cannot be
 * unmapped under them; one that finds its memory gone is skipped and
 * counted as a fault instead of crashing the test.
 *
 * Capture: a capturing stream records work instead of running it. Calls
 * CUDA forbids during capture (synchronizing the stream or the device,
 * "unsafe" calls such as cuMemAlloc/cuMemFree under a global-mode capture,
 * legacy-stream work that would depend on a capturing stream) fail, count a
 * violation and invalidate the capture, as in CUDA.
 */
#include "sim_internal.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local CUstreamCaptureMode tls_capture_mode =
    CU_STREAM_CAPTURE_MODE_GLOBAL;

static bool is_blocking(const struct CUstream_st *s)
{
    return s->kind != SIM_STREAM_LEGACY && !(s->flags & CU_STREAM_NON_BLOCKING);
}

/* ---- streams ---- */

static struct CUstream_st *stream_new(sim_stream_kind_t kind, int dev,
                                      unsigned flags, int prio)
{
    struct CUstream_st *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->kind = kind;
    s->dev = dev;
    s->flags = flags;
    s->priority = prio;
    s->next = sim.streams;
    sim.streams = s;
    return s;
}

static void stream_unlink(struct CUstream_st *s)
{
    struct CUstream_st **link = &sim.streams;
    while (*link != s)
        link = &(*link)->next;
    *link = s->next;
}

static struct CUgraph_st *graph_new(void)
{
    struct CUgraph_st *g = calloc(1, sizeof *g);
    if (g) {
        g->next = sim.graphs;
        sim.graphs = g;
    }
    return g;
}

static bool graph_unlink(struct CUgraph_st *g)
{
    for (struct CUgraph_st **link = &sim.graphs; *link; link = &(*link)->next) {
        if (*link == g) {
            *link = g->next;
            return true;
        }
    }
    return false;
}

/* Memory freed with cuMemFreeAsync during the capture. Graphs never run
 * here, so it is released when the capture ends rather than leaked. */
static void release_deferred(struct CUstream_st *s)
{
    while (s->cap_frees) {
        sim_region_t *r = s->cap_frees;
        s->cap_frees = r->deferred_next;
        sim_region_release(r);
    }
}

static void capture_abandon(struct CUstream_st *s)
{
    release_deferred(s);
    if (s->cap_graph && graph_unlink(s->cap_graph))
        free(s->cap_graph);
    s->cap_graph = NULL;
    s->cap = SIM_CAP_NONE;
}

/* As in CUDA, pending work still runs; the worker frees the stream after. */
static void stream_destroy_locked(struct CUstream_st *s)
{
    if (s->cap != SIM_CAP_NONE)
        capture_abandon(s);
    s->destroyed = true;
    if (!s->head) {
        stream_unlink(s);
        free(s);
    }
}

static struct CUstream_st *legacy_stream(int dev)
{
    sim_dev_t *d = &sim.dev[dev];
    if (!d->legacy)
        d->legacy = stream_new(SIM_STREAM_LEGACY, dev, 0, 0);
    return d->legacy;
}

/* ---- per-thread default streams, one per thread and device ---- */

typedef struct ptds_cache {
    uint64_t gen; /* sim.generation when filled: reset empties it */
    struct CUstream_st *s[SIM_MAX_DEVICES];
} ptds_cache_t;

static pthread_key_t ptds_key;
static pthread_once_t ptds_once = PTHREAD_ONCE_INIT;
static bool ptds_key_ok;

static void ptds_thread_exit(void *p)
{
    ptds_cache_t *c = p;
    sim_lock();
    for (int i = 0; c->gen == sim.generation && i < SIM_MAX_DEVICES; i++)
        if (c->s[i])
            stream_destroy_locked(c->s[i]);
    sim_unlock();
    free(c);
}

static void ptds_key_init(void)
{
    ptds_key_ok = pthread_key_create(&ptds_key, ptds_thread_exit) == 0;
}

static struct CUstream_st *ptds_stream(int dev)
{
    pthread_once(&ptds_once, ptds_key_init);
    if (!ptds_key_ok)
        return NULL;
    ptds_cache_t *c = pthread_getspecific(ptds_key);
    if (!c) {
        c = calloc(1, sizeof *c);
        if (!c || pthread_setspecific(ptds_key, c) != 0) {
            free(c);
            return NULL;
        }
        c->gen = sim.generation;
    }
    if (c->gen != sim.generation) {
        memset(c->s, 0, sizeof c->s);
        c->gen = sim.generation;
    }
    if (!c->s[dev])
        c->s[dev] = stream_new(SIM_STREAM_PER_THREAD, dev, 0, 0);
    return c->s[dev];
}

/* A stream handle as the API takes it: 0 is the legacy stream (the
 * per-thread one for _ptsz entry points), CU_STREAM_LEGACY and
 * CU_STREAM_PER_THREAD name theirs; others must be live user streams. */
CUresult sim_stream_resolve(CUstream h, bool ptds, struct CUstream_st **out)
{
    if (!h || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
        int dev;
        CUresult r = sim_current_dev(&dev);
        if (r)
            return r;
        bool pt = h == CU_STREAM_PER_THREAD || (!h && ptds);
        *out = pt ? ptds_stream(dev) : legacy_stream(dev);
        return *out ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUresult r = sim_check_init();
    if (r)
        return r;
    for (struct CUstream_st *s = sim.streams; s; s = s->next) {
        if (s == h && !s->destroyed && s->kind == SIM_STREAM_USER) {
            *out = s;
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_INVALID_HANDLE;
}

/* ---- events ---- */

static struct CUevent_st *event_find(CUevent h)
{
    for (struct CUevent_st *e = sim.events; e; e = e->next)
        if (e == h && !e->destroyed)
            return e;
    return NULL;
}

static void event_unref(struct CUevent_st *e)
{
    if (--e->refs)
        return;
    struct CUevent_st **link = &sim.events;
    while (*link != e)
        link = &(*link)->next;
    *link = e->next;
    free(e);
}

/* ---- work items ---- */

sim_item_t *sim_item_new(sim_work_kind_t kind)
{
    sim_item_t *it = calloc(1, sizeof *it);
    if (it)
        it->kind = kind;
    return it;
}

static void item_free(sim_item_t *it)
{
    if (it->event)
        event_unref(it->event);
    free(it);
}

static bool device_busy(int dev, uint64_t upto, bool legacy_view);

/* A context record passes once the work it captured is done. */
static void event_settle(struct CUevent_st *e)
{
    if (e->ctx_target && e->completed < e->ctx_target &&
        !device_busy(e->dev, e->ctx_upto, false)) {
        e->completed = e->ctx_target;
        e->time_ns = sim_now_ns();
    }
}

static bool event_passed(struct CUevent_st *e, uint64_t target)
{
    event_settle(e);
    return e->completed >= target;
}

/* Did the kernel find its memory live and accessible? Counts a fault if
 * not: a use after free or an overrun by the code under test. */
static bool ranges_ok(const sim_item_t *it)
{
    bool ok = (!it->check_dst || sim_range_accessible(it->dst, it->bytes, true)) &&
              (!it->check_src || sim_range_accessible(it->src, it->bytes, false));
    if (!ok)
        sim.faults++;
    return ok;
}

static bool all_bytes(const unsigned char *p, unsigned char v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != v)
            return false;
    return true;
}

static void execute(sim_item_t *it)
{
    CUresult res = CUDA_SUCCESS;
    switch (it->kind) {
    case SIM_WORK_FILL:
        if (ranges_ok(it))
            memset((void *)it->dst, it->value, it->bytes);
        else
            res = CUDA_ERROR_ILLEGAL_ADDRESS;
        break;
    case SIM_WORK_COPY:
        if (ranges_ok(it))
            memmove((void *)it->dst, (const void *)it->src, it->bytes);
        else
            res = CUDA_ERROR_ILLEGAL_ADDRESS;
        break;
    case SIM_WORK_CHECK:
        if (!ranges_ok(it))
            res = CUDA_ERROR_ILLEGAL_ADDRESS;
        else if (!all_bytes((const unsigned char *)it->src, it->value, it->bytes))
            sim.check_failures++;
        break;
    case SIM_WORK_RELEASE:
        sim_region_release(it->region);
        break;
    case SIM_WORK_RECORD:
        if (it->event->completed < it->target)
            it->event->completed = it->target;
        it->event->time_ns = sim_now_ns();
        break;
    case SIM_WORK_WRITE32: /* host memory the CPU polls, not device memory */
        __atomic_store_n((uint32_t *)it->dst, (uint32_t)it->target, __ATOMIC_RELEASE);
        break;
    case SIM_WORK_SLEEP:
    case SIM_WORK_WAIT:
        break;
    }
    if (it->result)
        *it->result = res;
}

/* ---- the worker ---- */

/* Work enqueued on a blocking stream of dev before seq is unfinished. */
static bool blocking_work_before(int dev, uint64_t seq)
{
    for (struct CUstream_st *t = sim.streams; t; t = t->next)
        if (t->dev == dev && is_blocking(t) && t->head && t->head->seq < seq)
            return true;
    return false;
}

static bool can_start(const struct CUstream_st *s, const sim_item_t *it)
{
    if (it->kind == SIM_WORK_WAIT && !event_passed(it->event, it->target))
        return false;
    if (it->gate_upto && device_busy(s->dev, it->gate_upto, false))
        return false;
    if (s->kind == SIM_STREAM_LEGACY)
        return !blocking_work_before(s->dev, it->seq);
    if (!is_blocking(s))
        return true;
    const struct CUstream_st *l = sim.dev[s->dev].legacy;
    return !l || !l->head || l->head->seq > it->barrier;
}

/* Run what is due on one stream; note when the next item falls due. */
static bool run_stream(struct CUstream_st *s, uint64_t now, uint64_t *next_due)
{
    bool progressed = false;
    while (s->head) {
        sim_item_t *it = s->head;
        if (!it->started) {
            if (!can_start(s, it))
                break;
            it->started = true;
            it->due_ns = now + (uint64_t)it->delay_us * 1000u;
        }
        if (it->due_ns > now) {
            if (it->due_ns < *next_due)
                *next_due = it->due_ns;
            break;
        }
        s->head = it->next;
        if (!s->head)
            s->tail = NULL;
        sim.pending--;
        execute(it);
        item_free(it);
        progressed = true;
    }
    return progressed;
}

static bool run_ready(uint64_t *next_due)
{
    uint64_t now = sim_now_ns();
    bool progressed = false;
    struct CUstream_st **link = &sim.streams;
    while (*link) {
        struct CUstream_st *s = *link;
        progressed |= run_stream(s, now, next_due);
        if (s->destroyed && !s->head) {
            *link = s->next;
            free(s);
            continue;
        }
        link = &s->next;
    }
    return progressed;
}

static void *worker_main(void *arg)
{
    (void)arg;
    sim_lock();
    while (!sim.worker_stop) {
        uint64_t next_due = UINT64_MAX;
        if (run_ready(&next_due)) {
            sim_signal_done();
            continue; /* finished items may unblock other streams */
        }
        sim_wait_work(next_due);
    }
    sim_unlock();
    return NULL;
}

static CUresult worker_ensure(void)
{
    if (sim.worker_running)
        return CUDA_SUCCESS;
    /* Block every signal in the worker: handlers of the process under test
     * (the interposer dumps reports on signals) must not run on it. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int e = pthread_create(&sim.worker, NULL, worker_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e)
        return CUDA_ERROR_OUT_OF_MEMORY;
    sim.worker_running = true;
    sim.worker_stop = false;
    return CUDA_SUCCESS;
}

void sim_worker_stop(void)
{
    sim_lock();
    bool running = sim.worker_running;
    pthread_t t = sim.worker;
    sim.worker_stop = true;
    sim_signal_work();
    sim_unlock();
    if (running)
        pthread_join(t, NULL);
    sim_lock();
    sim.worker_running = false;
    sim.worker_stop = false;
    sim_unlock();
}

void sim_after_fork_child(void)
{
    sim.worker_running = false; /* threads do not survive fork */
    sim.worker_stop = false;
}

/* ---- capture rules ---- */

static CUresult violation(CUresult code)
{
    sim.violations++;
    return code;
}

/* Invalidate active captures on dev (blocking streams only, or all). */
static unsigned invalidate_captures(int dev, bool blocking_only)
{
    unsigned n = 0;
    for (struct CUstream_st *t = sim.streams; t; t = t->next) {
        if (t->dev == dev && t->cap == SIM_CAP_ACTIVE &&
            (!blocking_only || is_blocking(t))) {
            t->cap = SIM_CAP_INVALIDATED;
            n++;
        }
    }
    return n;
}

static bool blocking_capture_active(int dev)
{
    for (struct CUstream_st *t = sim.streams; t; t = t->next)
        if (t->dev == dev && t->cap == SIM_CAP_ACTIVE && is_blocking(t))
            return true;
    return false;
}

/* May work be enqueued on s? Legacy-stream work would have to wait for a
 * capturing blocking stream, which CUDA refuses. */
static CUresult capture_gate(struct CUstream_st *s)
{
    if (s->cap == SIM_CAP_INVALIDATED)
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    if (s->kind == SIM_STREAM_LEGACY && invalidate_captures(s->dev, true))
        return violation(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    return CUDA_SUCCESS;
}

/* Synchronizing or querying s. */
static CUresult sync_gate(struct CUstream_st *s)
{
    if (s->cap == SIM_CAP_ACTIVE) {
        s->cap = SIM_CAP_INVALIDATED;
        return violation(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    }
    return capture_gate(s);
}

CUresult sim_device_sync_check(int dev)
{
    if (invalidate_captures(dev, false))
        return violation(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    return CUDA_SUCCESS;
}

/* CUDA's rule for "potentially unsafe" calls: forbidden while this thread
 * captures in a non-relaxed mode, or, unless this thread's mode says
 * otherwise, while any thread captures in global mode. */
CUresult sim_unsafe_call_check(void)
{
    if (tls_capture_mode == CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_SUCCESS;
    pthread_t self = pthread_self();
    bool bad = false;
    for (struct CUstream_st *s = sim.streams; s; s = s->next) {
        if (s->cap != SIM_CAP_ACTIVE)
            continue;
        bool own = pthread_equal(s->cap_thread, self);
        if ((own && s->cap_mode != CU_STREAM_CAPTURE_MODE_RELAXED) ||
            (!own && tls_capture_mode == CU_STREAM_CAPTURE_MODE_GLOBAL &&
             s->cap_mode == CU_STREAM_CAPTURE_MODE_GLOBAL)) {
            s->cap = SIM_CAP_INVALIDATED;
            bad = true;
        }
    }
    return bad ? violation(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)
               : CUDA_SUCCESS;
}

/* ---- enqueue and wait ---- */

static void capture_item(struct CUstream_st *s, sim_item_t *it)
{
    s->cap_graph->nodes++;
    if (it->kind == SIM_WORK_RELEASE) {
        it->region->deferred_next = s->cap_frees;
        s->cap_frees = it->region;
    }
    item_free(it);
}

/* Takes ownership of `it` whatever happens. */
CUresult sim_enqueue(struct CUstream_st *s, sim_item_t *it)
{
    if (!it)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = capture_gate(s);
    if (!r && s->cap == SIM_CAP_ACTIVE) {
        capture_item(s, it);
        return CUDA_SUCCESS;
    }
    if (!r)
        r = worker_ensure();
    if (r) {
        item_free(it);
        return r;
    }
    it->seq = ++sim.seq;
    uint64_t gate = sim.dev[s->dev].gate_upto;
    if (gate > it->gate_upto && device_busy(s->dev, gate, false))
        it->gate_upto = gate;
    const struct CUstream_st *l = sim.dev[s->dev].legacy;
    if (is_blocking(s) && l)
        it->barrier = l->last_seq;
    s->last_seq = it->seq;
    if (s->tail)
        s->tail->next = it;
    else
        s->head = it;
    s->tail = it;
    sim.pending++;
    sim_signal_work();
    return CUDA_SUCCESS;
}

static bool stream_busy(const struct CUstream_st *s, uint64_t upto)
{
    return s->head && s->head->seq <= upto;
}

/* Unfinished work on dev enqueued up to `upto` (legacy + blocking streams
 * only, for a legacy-stream synchronize). */
static bool device_busy(int dev, uint64_t upto, bool legacy_view)
{
    for (struct CUstream_st *t = sim.streams; t; t = t->next)
        if (t->dev == dev && stream_busy(t, upto) &&
            (!legacy_view || t->kind == SIM_STREAM_LEGACY || is_blocking(t)))
            return true;
    return false;
}

void sim_device_sync(int dev, uint64_t upto)
{
    worker_ensure();
    while (device_busy(dev, upto, false))
        sim_wait_done();
}

/* Enqueue and wait for that item: synchronous copies and memset. */
CUresult sim_run_sync(struct CUstream_st *s, sim_item_t *it)
{
    CUresult res = CUDA_SUCCESS;
    it->result = &res;
    CUresult r = sim_enqueue(s, it);
    if (r)
        return r;
    uint64_t seq = s->last_seq;
    while (stream_busy(s, seq))
        sim_wait_done();
    return res;
}

/* ---- stream API ---- */

static CUresult stream_create(CUstream *ph, unsigned flags, int prio)
{
    sim_lock();
    int dev;
    CUresult r = sim_current_dev(&dev);
    if (!r && (!ph || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING)))
        r = CUDA_ERROR_INVALID_VALUE;
    /* CUDA clamps priorities into [greatest, least] = [-5, 0]. */
    prio = prio > 0 ? 0 : prio < -5 ? -5 : prio;
    struct CUstream_st *s = r ? NULL : stream_new(SIM_STREAM_USER, dev, flags, prio);
    if (!r && !s)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (!r)
        *ph = s;
    sim_unlock();
    return r;
}

CUresult CUDAAPI cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    SIM_CALLED(cuStreamCreate);
    return stream_create(phStream, Flags, 0);
}

CUresult CUDAAPI cuStreamCreateWithPriority(CUstream *phStream,
                                            unsigned int flags, int priority)
{
    SIM_CALLED(cuStreamCreateWithPriority);
    return stream_create(phStream, flags, priority);
}

static CUresult stream_destroy(CUstream h)
{
    sim_lock();
    struct CUstream_st *s = NULL;
    /* Only user streams can be destroyed: resolve rejects 0 and friends
     * by resolving them to built-in streams, caught below. */
    CUresult r = sim_stream_resolve(h, false, &s);
    if (!r && s->kind != SIM_STREAM_USER)
        r = CUDA_ERROR_INVALID_HANDLE;
    if (!r)
        stream_destroy_locked(s);
    sim_unlock();
    return r;
}

CUresult CUDAAPI cuStreamDestroy_v2(CUstream hStream)
{
    SIM_CALLED(cuStreamDestroy_v2);
    return stream_destroy(hStream);
}

CUresult CUDAAPI cuStreamDestroy(CUstream hStream)
{
    SIM_CALLED(cuStreamDestroy);
    return stream_destroy(hStream);
}

static CUresult stream_query(CUstream h, bool ptds)
{
    sim_lock();
    struct CUstream_st *s = NULL;
    CUresult r = sim_stream_resolve(h, ptds, &s);
    if (!r)
        r = sync_gate(s);
    if (!r && s->head)
        r = CUDA_ERROR_NOT_READY;
    sim_unlock();
    return r;
}

CUresult CUDAAPI cuStreamQuery(CUstream hStream)
{
    SIM_CALLED(cuStreamQuery);
    return stream_query(hStream, false);
}

CUresult CUDAAPI cuStreamQuery_ptsz(CUstream hStream)
{
    SIM_CALLED(cuStreamQuery_ptsz);
    return stream_query(hStream, true);
}

/* A legacy-stream synchronize also covers earlier work on blocking streams,
 * which legacy work would have waited for. */
static CUresult stream_sync(CUstream h, bool ptds)
{
    sim_lock();
    struct CUstream_st *s = NULL;
    CUresult r = sim_stream_resolve(h, ptds, &s);
    if (!r)
        r = sync_gate(s);
    if (!r)
        r = worker_ensure();
    if (!r) {
        sim.stream_syncs++;
        uint64_t upto = sim.seq;
        bool legacy = s->kind == SIM_STREAM_LEGACY;
        while (legacy ? device_busy(s->dev, upto, true) : stream_busy(s, upto))
            sim_wait_done();
    }
    sim_unlock();
    return r;
}

CUresult CUDAAPI cuStreamSynchronize(CUstream hStream)
{
    SIM_CALLED(cuStreamSynchronize);
    return stream_sync(hStream, false);
}

CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream hStream)
{
    SIM_CALLED(cuStreamSynchronize_ptsz);
    return stream_sync(hStream, true);
}

static CUresult stream_wait_event(CUstream h, CUevent ev, unsigned flags,
                                  bool ptds)
{
    sim_lock();
    struct CUstream_st *s = NULL;
    CUresult r = sim_stream_resolve(h, ptds, &s);
    struct CUevent_st *e = r ? NULL : event_find(ev);
    if (!r && !e)
        r = CUDA_ERROR_INVALID_HANDLE;
    if (!r && (flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL))
        r = CUDA_ERROR_INVALID_VALUE;
    if (!r) {
        sim_item_t *it = sim_item_new(SIM_WORK_WAIT);
        if (it) {
            it->event = e;
            e->refs++;
            it->target = e->recorded; /* the record at the time of the call */
            if (e->ctx_target && e->ctx_target == e->recorded) { /* a context record */
                it->target = 0;
                it->gate_upto = e->ctx_upto;
            }
        }
        r = sim_enqueue(s, it);
    }
    sim_unlock();
    return r;
}

CUresult CUDAAPI cuStreamWaitEvent(CUstream hStream, CUevent hEvent,
                                   unsigned int Flags)
{
    SIM_CALLED(cuStreamWaitEvent);
    return stream_wait_event(hStream, hEvent, Flags, false);
}

CUresult CUDAAPI cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent,
                                        unsigned int Flags)
{
    SIM_CALLED(cuStreamWaitEvent_ptsz);
    return stream_wait_event(hStream, hEvent, Flags, true);
}

/* ---- stream memory operations and mapped host memory ---- */

/* The value lands at addr once the work enqueued before it on the stream
 * is done, as a stream's memory operation does; addr is host memory from
 * cuMemHostAlloc (its device pointer is its host address here). */
CUresult CUDAAPI cuStreamWriteValue32_v2(CUstream hStream, CUdeviceptr addr,
                                         cuuint32_t value, unsigned int flags)
{
    SIM_CALLED(cuStreamWriteValue32_v2);
    sim_lock();
    struct CUstream_st *s = NULL;
    CUresult r = sim_stream_resolve(hStream, false, &s);
    if (!r && sim.no_stream_mem_ops)
        r = CUDA_ERROR_NOT_SUPPORTED;
    if (!r && (!addr || (addr & 3) || flags & ~(unsigned)CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER))
        r = CUDA_ERROR_INVALID_VALUE;
    /* An idle non-blocking stream runs it at once, as a GPU does in a
     * microsecond or two; waking the worker thread would take longer on a
     * loaded test machine than any real stream takes. */
    bool now = !r && !s->head && s->cap == SIM_CAP_NONE && s->kind == SIM_STREAM_USER &&
               !is_blocking(s);
    if (now)
        __atomic_store_n((uint32_t *)(uintptr_t)addr, value, __ATOMIC_RELEASE);
    if (!r && !now) {
        sim_item_t *it = sim_item_new(SIM_WORK_WRITE32);
        if (it) {
            it->dst = (uintptr_t)addr;
            it->target = value;
        }
        r = sim_enqueue(s, it);
    }
    sim_unlock();
    return r;
}

CUresult CUDAAPI cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    SIM_CALLED(cuMemHostAlloc);
    sim_lock();
    int dev;
    CUresult r = sim_current_dev(&dev);
    if (!r && (!pp || !bytesize))
        r = CUDA_ERROR_INVALID_VALUE;
    if (!r && !(*pp = calloc(1, bytesize)))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    (void)Flags;
    sim_unlock();
    return r;
}

CUresult CUDAAPI cuMemFreeHost(void *p)
{
    SIM_CALLED(cuMemFreeHost);
    free(p);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p,
                                              unsigned int Flags)
{
    SIM_CALLED(cuMemHostGetDevicePointer_v2);
    if (!pdptr || !p || Flags)
        return CUDA_ERROR_INVALID_VALUE;
    *pdptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

/* ---- event API ---- */

CUresult CUDAAPI cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    SIM_CALLED(cuEventCreate);
    const unsigned known = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING |
                           CU_EVENT_INTERPROCESS;
    sim_lock();
    int dev;
    CUresult r = sim_current_dev(&dev);
    if (!r && (!phEvent || (Flags & ~known)))
        r = CUDA_ERROR_INVALID_VALUE;
    if (!r && (Flags & CU_EVENT_INTERPROCESS) && !(Flags & CU_EVENT_DISABLE_TIMING))
        r = CUDA_ERROR_INVALID_VALUE;
    if (!r && sim_event_create_fails())
        r = CUDA_ERROR_OUT_OF_MEMORY;
    struct CUevent_st *e = r ? NULL : calloc(1, sizeof *e);
    if (!r && !e)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (!r) {
        e->flags = Flags;
        e->refs = 1;
        e->dev = dev;
        e->next = sim.events;
        sim.events = e;
        *phEvent = e;
    }
    sim_unlock();
    return r;
}

static CUresult event_record(CUevent ev, CUstream h, bool ptds)
{
    sim_lock();
    struct CUstream_st *s = NULL;
    CUresult r = sim_stream_resolve(h, ptds, &s);
    struct CUevent_st *e = r ? NULL : event_find(ev);
    if (!r && !e)
        r = CUDA_ERROR_INVALID_HANDLE;
    if (!r) {
        /* A record captured into a graph leaves the event as it was. */
        bool captured = s->cap == SIM_CAP_ACTIVE;
        sim_item_t *it = sim_item_new(SIM_WORK_RECORD);
        if (it) {
            it->event = e;
            e->refs++;
            it->target = e->recorded + 1;
        }
        r = sim_enqueue(s, it);
        if (!r && !captured)
            e->recorded++;
    }
    sim_unlock();
    return r;
}

CUresult CUDAAPI cuEventRecord(CUevent hEvent, CUstream hStream)
{
    SIM_CALLED(cuEventRecord);
    return event_record(hEvent, hStream, false);
}

CUresult CUDAAPI cuEventRecord_ptsz(CUevent hEvent, CUstream hStream)
{
    SIM_CALLED(cuEventRecord_ptsz);
    return event_record(hEvent, hStream, true);
}

CUresult CUDAAPI cuEventQuery(CUevent hEvent)
{
    SIM_CALLED(cuEventQuery);
    sim_lock();
    CUresult r = sim_check_init();
    struct CUevent_st *e = r ? NULL : event_find(hEvent);
    if (!r && !e)
        r = CUDA_ERROR_INVALID_HANDLE;
    if (!r && !event_passed(e, e->recorded))
        r = CUDA_ERROR_NOT_READY;
    sim_unlock();
    return r;
}

CUresult CUDAAPI cuEventSynchronize(CUevent hEvent)
{
    SIM_CALLED(cuEventSynchronize);
    sim_lock();
    CUresult r = sim_check_init();
    struct CUevent_st *e = r ? NULL : event_find(hEvent);
    if (!r && !e)
        r = CUDA_ERROR_INVALID_HANDLE;
    if (!r)
        r = worker_ensure();
    if (!r) {
        sim.stream_syncs++;
        uint64_t upto = e->recorded;
        e->refs++; /* a racing cuEventDestroy must not free it under us */
        while (!event_passed(e, upto))
            sim_wait_done();
        event_unref(e);
    }
    sim_unlock();
    return r;
}

/* ---- context events (CUDA 12.5) ---- */

/* hCtx and hEvent of one context, no capture on its device (the driver
 * refuses and invalidates every capture there, as in CUDA). */
static CUresult ctx_event_gate(CUcontext hCtx, CUevent hEvent, struct CUevent_st **out)
{
    CUresult r = sim_check_init();
    if (!r && sim.no_ctx_events)
        r = CUDA_ERROR_NOT_SUPPORTED;
    int dev = -1;
    for (int i = 0; !r && i < sim.ndev; i++)
        if (hCtx == &sim.dev[i].ctx)
            dev = i;
    struct CUevent_st *e = r ? NULL : event_find(hEvent);
    if (!r && (dev < 0 || !e || e->dev != dev))
        r = CUDA_ERROR_INVALID_HANDLE;
    if (!r && invalidate_captures(dev, false))
        r = violation(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    *out = e;
    return r;
}

/* cuCtxRecordEvent (wait false): the event passes once the device's work
 * enqueued so far is done. cuCtxWaitEvent (wait true): work enqueued after
 * starts once the event's record at the time of the call has passed. */
static CUresult ctx_event(CUcontext hCtx, CUevent hEvent, bool wait)
{
    sim_lock();
    struct CUevent_st *e;
    CUresult r = ctx_event_gate(hCtx, hEvent, &e);
    if (!r && !wait)
        r = worker_ensure();
    if (!r && !wait) {
        e->ctx_target = ++e->recorded;
        e->ctx_upto = sim.seq;
        event_settle(e);
    }
    if (!r && wait && e->recorded && e->ctx_target != e->recorded)
        r = CUDA_ERROR_NOT_SUPPORTED; /* a stream record: not modelled */
    /* never recorded: nothing to wait for */
    if (!r && wait && e->recorded && sim.dev[e->dev].gate_upto < e->ctx_upto)
        sim.dev[e->dev].gate_upto = e->ctx_upto;
    sim_unlock();
    return r;
}

CUresult CUDAAPI cuCtxRecordEvent(CUcontext hCtx, CUevent hEvent)
{
    SIM_CALLED(cuCtxRecordEvent);
    return ctx_event(hCtx, hEvent, false);
}

CUresult CUDAAPI cuCtxWaitEvent(CUcontext hCtx, CUevent hEvent)
{
    SIM_CALLED(cuCtxWaitEvent);
    return ctx_event(hCtx, hEvent, true);
}

static CUresult event_destroy(CUevent h)
{
    sim_lock();
    CUresult r = sim_check_init();
    struct CUevent_st *e = r ? NULL : event_find(h);
    if (!r && !e)
        r = CUDA_ERROR_INVALID_HANDLE;
    if (!r) {
        e->destroyed = true;
        event_unref(e);
    }
    sim_unlock();
    return r;
}

CUresult CUDAAPI cuEventDestroy_v2(CUevent hEvent)
{
    SIM_CALLED(cuEventDestroy_v2);
    return event_destroy(hEvent);
}

CUresult CUDAAPI cuEventDestroy(CUevent hEvent)
{
    SIM_CALLED(cuEventDestroy);
    return event_destroy(hEvent);
}

static CUresult elapsed(float *ms, CUevent a_h, CUevent b_h)
{
    sim_lock();
    CUresult r = sim_check_init();
    struct CUevent_st *a = r ? NULL : event_find(a_h);
    struct CUevent_st *b = r ? NULL : event_find(b_h);
    if (!r && !ms)
        r = CUDA_ERROR_INVALID_VALUE;
    if (!r && (!a || !b || ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING) ||
               !a->recorded || !b->recorded))
        r = CUDA_ERROR_INVALID_HANDLE;
    if (!r && (a->completed < a->recorded || b->completed < b->recorded))
        r = CUDA_ERROR_NOT_READY;
    if (!r)
        *ms = (float)((double)(int64_t)(b->time_ns - a->time_ns) / 1e6);
    sim_unlock();
    return r;
}

CUresult CUDAAPI cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart,
                                       CUevent hEnd)
{
    SIM_CALLED(cuEventElapsedTime_v2);
    return elapsed(pMilliseconds, hStart, hEnd);
}

CUresult CUDAAPI cuEventElapsedTime(float *pMilliseconds, CUevent hStart,
                                    CUevent hEnd)
{
    SIM_CALLED(cuEventElapsedTime);
    return elapsed(pMilliseconds, hStart, hEnd);
}

/* ---- capture API ---- */

static bool graph_known(const struct CUgraph_st *g)
{
    for (const struct CUgraph_st *t = sim.graphs; t; t = t->next)
        if (t == g)
            return true;
    return false;
}

/* Into a new graph, or (cuStreamBeginCaptureToGraph) into the caller's. */
static CUresult begin_capture_into(CUstream h, bool ptds, CUstreamCaptureMode mode,
                                   struct CUgraph_st *into)
{
    sim_lock();
    struct CUstream_st *s = NULL;
    struct CUgraph_st *g = into;
    CUresult r = sim_stream_resolve(h, ptds, &s);
    if (!r && into && !graph_known(into))
        r = CUDA_ERROR_INVALID_VALUE;
    if (!r && (unsigned)mode > CU_STREAM_CAPTURE_MODE_RELAXED)
        r = CUDA_ERROR_INVALID_VALUE;
    if (!r && s->kind == SIM_STREAM_LEGACY)
        r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (!r && s->cap != SIM_CAP_NONE)
        r = CUDA_ERROR_ILLEGAL_STATE;
    if (!r && !g && !(g = graph_new()))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (!r) {
        s->cap = SIM_CAP_ACTIVE;
        s->cap_mode = mode;
        s->cap_thread = pthread_self();
        s->cap_id = ++sim.capture_ids;
        s->cap_graph = g;
    }
    sim_unlock();
    return r;
}

static CUresult begin_capture(CUstream h, bool ptds, CUstreamCaptureMode mode)
{
    return begin_capture_into(h, ptds, mode, NULL);
}

/* Dependencies and edge data are not modelled: none may be given. */
static CUresult begin_capture_to_graph(CUstream h, bool ptds, CUgraph graph,
                                       const CUgraphNode *deps, size_t n,
                                       CUstreamCaptureMode mode)
{
    if (!graph || deps || n)
        return CUDA_ERROR_INVALID_VALUE;
    return begin_capture_into(h, ptds, mode, graph);
}

CUresult CUDAAPI cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph,
                                             const CUgraphNode *dependencies,
                                             const CUgraphEdgeData *dependencyData,
                                             size_t numDependencies, CUstreamCaptureMode mode)
{
    SIM_CALLED(cuStreamBeginCaptureToGraph);
    (void)dependencyData;
    return begin_capture_to_graph(hStream, false, hGraph, dependencies, numDependencies, mode);
}

CUresult CUDAAPI cuStreamBeginCaptureToGraph_ptsz(CUstream hStream, CUgraph hGraph,
                                                  const CUgraphNode *dependencies,
                                                  const CUgraphEdgeData *dependencyData,
                                                  size_t numDependencies,
                                                  CUstreamCaptureMode mode)
{
    SIM_CALLED(cuStreamBeginCaptureToGraph_ptsz);
    (void)dependencyData;
    return begin_capture_to_graph(hStream, true, hGraph, dependencies, numDependencies, mode);
}

CUresult CUDAAPI cuStreamBeginCapture_v2(CUstream hStream,
                                         CUstreamCaptureMode mode)
{
    SIM_CALLED(cuStreamBeginCapture_v2);
    return begin_capture(hStream, false, mode);
}

CUresult CUDAAPI cuStreamBeginCapture_v2_ptsz(CUstream hStream,
                                              CUstreamCaptureMode mode)
{
    SIM_CALLED(cuStreamBeginCapture_v2_ptsz);
    return begin_capture(hStream, true, mode);
}

CUresult CUDAAPI cuStreamBeginCapture(CUstream hStream)
{
    SIM_CALLED(cuStreamBeginCapture);
    return begin_capture(hStream, false, CU_STREAM_CAPTURE_MODE_GLOBAL);
}

CUresult CUDAAPI cuStreamBeginCapture_ptsz(CUstream hStream)
{
    SIM_CALLED(cuStreamBeginCapture_ptsz);
    return begin_capture(hStream, true, CU_STREAM_CAPTURE_MODE_GLOBAL);
}

static CUresult end_capture(CUstream h, bool ptds, CUgraph *out)
{
    sim_lock();
    struct CUstream_st *s = NULL;
    CUresult r = sim_stream_resolve(h, ptds, &s);
    if (!r && !out)
        r = CUDA_ERROR_INVALID_VALUE;
    if (!r && s->cap == SIM_CAP_NONE)
        r = CUDA_ERROR_ILLEGAL_STATE;
    if (!r && s->cap_mode != CU_STREAM_CAPTURE_MODE_RELAXED &&
        !pthread_equal(s->cap_thread, pthread_self()))
        r = CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    if (!r) {
        *out = s->cap == SIM_CAP_ACTIVE ? s->cap_graph : NULL;
        if (*out) {
            s->cap_graph = NULL; /* the caller owns it now */
        } else {
            r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
        }
        capture_abandon(s);
    }
    sim_unlock();
    return r;
}

CUresult CUDAAPI cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
    SIM_CALLED(cuStreamEndCapture);
    return end_capture(hStream, false, phGraph);
}

CUresult CUDAAPI cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
{
    SIM_CALLED(cuStreamEndCapture_ptsz);
    return end_capture(hStream, true, phGraph);
}

static CUstreamCaptureStatus capture_status(const struct CUstream_st *s)
{
    switch (s->cap) {
    case SIM_CAP_ACTIVE:
        return CU_STREAM_CAPTURE_STATUS_ACTIVE;
    case SIM_CAP_INVALIDATED:
        return CU_STREAM_CAPTURE_STATUS_INVALIDATED;
    default:
        return CU_STREAM_CAPTURE_STATUS_NONE;
    }
}

typedef struct capture_info {
    CUstreamCaptureStatus *status;
    cuuint64_t *id;
    CUgraph *graph;
    const CUgraphNode **deps;
    const CUgraphEdgeData **edges;
    size_t *ndeps;
} capture_info_t;

/* Nodes are not modelled: the dependency set always reads empty. */
static CUresult capture_info(CUstream h, bool ptds, const capture_info_t *q)
{
    sim_lock();
    struct CUstream_st *s = NULL;
    CUresult r = sim_stream_resolve(h, ptds, &s);
    if (!r && !q->status)
        r = CUDA_ERROR_INVALID_VALUE;
    if (!r && s->kind == SIM_STREAM_LEGACY && blocking_capture_active(s->dev))
        r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    if (!r) {
        bool active = s->cap == SIM_CAP_ACTIVE;
        *q->status = capture_status(s);
        if (q->id && active)
            *q->id = s->cap_id;
        if (q->graph)
            *q->graph = active ? s->cap_graph : NULL;
        if (q->deps)
            *q->deps = NULL;
        if (q->edges)
            *q->edges = NULL;
        if (q->ndeps)
            *q->ndeps = 0;
    }
    sim_unlock();
    return r;
}

CUresult CUDAAPI cuStreamIsCapturing(CUstream hStream,
                                     CUstreamCaptureStatus *captureStatus)
{
    SIM_CALLED(cuStreamIsCapturing);
    return capture_info(hStream, false, &(capture_info_t){.status = captureStatus});
}

CUresult CUDAAPI cuStreamIsCapturing_ptsz(CUstream hStream,
                                          CUstreamCaptureStatus *captureStatus)
{
    SIM_CALLED(cuStreamIsCapturing_ptsz);
    return capture_info(hStream, true, &(capture_info_t){.status = captureStatus});
}

CUresult CUDAAPI cuStreamGetCaptureInfo(CUstream hStream,
                                        CUstreamCaptureStatus *captureStatus_out,
                                        cuuint64_t *id_out)
{
    SIM_CALLED(cuStreamGetCaptureInfo);
    return capture_info(hStream, false,
                        &(capture_info_t){.status = captureStatus_out, .id = id_out});
}

CUresult CUDAAPI cuStreamGetCaptureInfo_v2(
    CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
    cuuint64_t *id_out, CUgraph *graph_out, const CUgraphNode **dependencies_out,
    size_t *numDependencies_out)
{
    SIM_CALLED(cuStreamGetCaptureInfo_v2);
    return capture_info(hStream, false,
                        &(capture_info_t){captureStatus_out, id_out, graph_out,
                                          dependencies_out, NULL,
                                          numDependencies_out});
}

/* The CUDA 13 signature (cuda.h maps cuStreamGetCaptureInfo to it). */
CUresult CUDAAPI cuStreamGetCaptureInfo_v3(
    CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
    cuuint64_t *id_out, CUgraph *graph_out, const CUgraphNode **dependencies_out,
    const CUgraphEdgeData **edgeData_out, size_t *numDependencies_out)
{
    SIM_CALLED(cuStreamGetCaptureInfo_v3);
    return capture_info(hStream, false,
                        &(capture_info_t){captureStatus_out, id_out, graph_out,
                                          dependencies_out, edgeData_out,
                                          numDependencies_out});
}

CUresult CUDAAPI cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
    SIM_CALLED(cuThreadExchangeStreamCaptureMode);
    sim_lock();
    CUresult r = sim_check_init();
    sim_unlock();
    if (!r && (!mode || (unsigned)*mode > CU_STREAM_CAPTURE_MODE_RELAXED))
        r = CUDA_ERROR_INVALID_VALUE;
    if (!r) {
        CUstreamCaptureMode old = tls_capture_mode;
        tls_capture_mode = *mode;
        *mode = old;
    }
    return r;
}

CUresult CUDAAPI cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
    SIM_CALLED(cuGraphCreate);
    sim_lock();
    CUresult r = sim_check_init();
    if (!r && (!phGraph || flags))
        r = CUDA_ERROR_INVALID_VALUE;
    struct CUgraph_st *g = r ? NULL : graph_new();
    if (!r && !g)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (!r)
        *phGraph = g;
    sim_unlock();
    return r;
}

CUresult CUDAAPI cuGraphDestroy(CUgraph hGraph)
{
    SIM_CALLED(cuGraphDestroy);
    sim_lock();
    CUresult r = sim_check_init();
    /* Graphs still being captured into are not the caller's to destroy. */
    for (struct CUstream_st *s = sim.streams; !r && s; s = s->next)
        if (hGraph && s->cap_graph == hGraph)
            r = CUDA_ERROR_INVALID_VALUE;
    if (!r && !(hGraph && graph_unlink(hGraph)))
        r = CUDA_ERROR_INVALID_VALUE;
    if (!r)
        free(hGraph);
    sim_unlock();
    return r;
}

/* ---- test control ---- */

static CUresult launch(CUstream h, sim_item_t *it)
{
    if (!it)
        return CUDA_ERROR_OUT_OF_MEMORY;
    sim_lock();
    struct CUstream_st *s = NULL;
    CUresult r = sim_stream_resolve(h, false, &s);
    if (r)
        item_free(it);
    else
        r = sim_enqueue(s, it);
    sim_unlock();
    return r;
}

static sim_item_t *kernel(sim_work_kind_t kind, uintptr_t dst, uintptr_t src,
                          size_t bytes, unsigned delay_us)
{
    sim_item_t *it = sim_item_new(kind);
    if (it) {
        it->dst = dst;
        it->src = src;
        it->bytes = bytes;
        it->delay_us = delay_us;
        /* Kernels always check: a NULL or stale pointer is a fault. */
        it->check_dst = kind == SIM_WORK_FILL || kind == SIM_WORK_COPY;
        it->check_src = kind == SIM_WORK_COPY || kind == SIM_WORK_CHECK;
    }
    return it;
}

CUresult simcu_launch_fill(CUstream s, CUdeviceptr dst, unsigned char value,
                           size_t bytes, unsigned delay_us)
{
    sim_item_t *it = kernel(SIM_WORK_FILL, (uintptr_t)dst, 0, bytes, delay_us);
    if (it)
        it->value = value;
    return launch(s, it);
}

CUresult simcu_launch_sleep(CUstream s, unsigned delay_us)
{
    return launch(s, kernel(SIM_WORK_SLEEP, 0, 0, 0, delay_us));
}

CUresult simcu_launch_copy(CUstream s, CUdeviceptr dst, CUdeviceptr src,
                           size_t bytes, unsigned delay_us)
{
    return launch(s, kernel(SIM_WORK_COPY, (uintptr_t)dst, (uintptr_t)src,
                            bytes, delay_us));
}

CUresult simcu_launch_check(CUstream s, CUdeviceptr src, unsigned char value,
                            size_t bytes, unsigned delay_us)
{
    sim_item_t *it = kernel(SIM_WORK_CHECK, 0, (uintptr_t)src, bytes, delay_us);
    if (it)
        it->value = value;
    return launch(s, it);
}

size_t simcu_pending_work(void)
{
    sim_lock();
    size_t n = sim.pending;
    sim_unlock();
    return n;
}

void simcu_wait_idle(void)
{
    sim_lock();
    if (worker_ensure() == CUDA_SUCCESS)
        while (sim.pending)
            sim_wait_done();
    sim_unlock();
}

/* simcu_reset and exit: queued work is dropped, not run. */
void sim_stream_free_all(void)
{
    while (sim.streams) {
        struct CUstream_st *s = sim.streams;
        sim.streams = s->next;
        while (s->head) {
            sim_item_t *it = s->head;
            s->head = it->next;
            free(it); /* events go below, whatever their counts */
        }
        free(s);
    }
    for (int i = 0; i < SIM_MAX_DEVICES; i++) {
        sim.dev[i].legacy = NULL;
        sim.dev[i].gate_upto = 0;
    }
    while (sim.events) {
        struct CUevent_st *e = sim.events;
        sim.events = e->next;
        free(e);
    }
    while (sim.graphs) {
        struct CUgraph_st *g = sim.graphs;
        sim.graphs = g->next;
        free(g);
    }
    sim.pending = 0;
    sim.generation++;
    sim_signal_done();
}
