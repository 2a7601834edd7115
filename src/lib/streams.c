/* streams.c: which streams and graph captures exist in the process.
 *
 * Manage mode must never hand out memory that work enqueued before its free
 * may still touch. An event on the legacy default stream covers every
 * blocking stream (the legacy stream waits for them), so only the streams
 * created non-blocking need events of their own: this keeps that list. It
 * also counts the captures in progress, during which nothing may be
 * recorded or synchronized. Stream creation is rare; one mutex is enough.
 *
 * It also knows how far each non-blocking stream has got, by marks: a
 * number each stream writes into pinned host memory behind the work it
 * was given (cuStreamWriteValue32), which the CPU then reads from memory.
 * Asking a stream instead (cuStreamQuery) reads the device's state over
 * the bus: 1.35 us a stream while the device is busy on the H200, where a
 * mark costs 0.26 us to enqueue (scripts/gpu/query_probe.py), and cuDNN
 * makes 15 or more streams of its own under PyTorch (a round of queries
 * took 45 us per batch of frees on a Llama-style job: docs/measurements.md). */
#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib.h"
#include "prim.h"

#define MAX_TRACKED 1024

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static void *nonblocking[MAX_TRACKED];
static int nonblocking_count;
static void *blocking[MAX_TRACKED];
static int blocking_count;
static void *capturing[MAX_TRACKED];
static int capturing_count;
static atomic_int captures_active;
static atomic_bool overflowed;
static atomic_bool warned_overflow;

/* Marks, under the lock: nonblocking[i] writes mark_written[i] into
 * mark_words[mark_word[i]] once past the work enqueued before. A stream
 * made after a mark starts at the latest: it had no work before it. */
enum { MARKS_UNTRIED, MARKS_ON, MARKS_OFF };
static int marks_state = MARKS_UNTRIED;
static uint32_t *mark_words; /* MAX_TRACKED words, pinned, never freed */
static uint64_t mark_device; /* their device address */
static int mark_word[MAX_TRACKED];
static uint32_t mark_written[MAX_TRACKED];
static int spare_words[MAX_TRACKED], spare_count;
static uint32_t mark_seq;
static atomic_bool warned_marks;

static int find(void *const *set, int count, void *stream)
{
  for (int i = 0; i < count; i++)
    if (set[i] == stream)
      return i;
  return -1;
}

static bool add(void **set, int *count, void *stream)
{
  if (find(set, *count, stream) >= 0)
    return true;
  if (*count == MAX_TRACKED)
    return false;
  set[(*count)++] = stream;
  return true;
}

static bool drop(void **set, int *count, void *stream)
{
  int i = find(set, *count, stream);
  if (i < 0)
    return false;
  set[i] = set[--*count];
  return true;
}

/* Wrap-safe: the word has reached mark. */
static bool reached(uint32_t word, uint32_t mark)
{
  return (int32_t)(word - mark) >= 0;
}

static uint32_t word_of(int i)
{
  return __atomic_load_n(&mark_words[mark_word[i]], __ATOMIC_ACQUIRE);
}
_Static_assert(MAX_TRACKED <= 65536, "word indices fit in 16 bits (ol_streams_wait_marked)");

/* A word for the stream just added at nonblocking[i], at the latest mark. */
static void give_word(int i)
{
  if (marks_state != MARKS_ON)
    return;
  mark_word[i] = spare_words[--spare_count]; /* as many words as slots */
  mark_written[i] = mark_seq;
  __atomic_store_n(&mark_words[mark_word[i]], mark_seq, __ATOMIC_RELEASE);
}

static bool marks_ready(void)
{
  if (marks_state == MARKS_UNTRIED && ol_prim_has_context()) {
    mark_words = ol_prim_host_words(MAX_TRACKED, &mark_device);
    marks_state = mark_words && ol_option_bool(OL_OPT_STREAM_MARKS) ? MARKS_ON : MARKS_OFF;
    for (int w = MAX_TRACKED - 1; marks_state == MARKS_ON && w >= 0; w--)
      spare_words[spare_count++] = w;
    for (int i = 0; marks_state == MARKS_ON && i < nonblocking_count; i++)
      give_word(i);
  }
  return marks_state == MARKS_ON;
}

static void marks_failed(void)
{
  marks_state = MARKS_OFF;
  ol_log_warn_once(&warned_marks, "a stream refused a mark (cuStreamWriteValue32); manage mode "
                   "asks the streams instead");
}

static uint64_t now_ns(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Spins, then sleeps, until the word has reached mark, for at most max_ns
 * (given up after two seconds on the paths that must wait: a stream's work
 * runs that long only on a broken device). Reads memory only: no lock. */
#define MARK_WAIT_MAX_NS 2000000000ull
static bool wait_reached(const uint32_t *word, uint32_t mark, uint64_t max_ns)
{
  struct timespec nap = {0, 20000};
  uint64_t start = 0;
  for (long spins = 0; !reached(__atomic_load_n(word, __ATOMIC_ACQUIRE), mark); spins++) {
    uint64_t now = now_ns();
    start = start ? start : now;
    if (now - start > max_ns)
      return false;
    if (spins > 1000)
      nanosleep(&nap, NULL);
  }
  return true;
}

/* A stream going away first reaches its last mark: its word may then go to
 * another stream. One that does not in time keeps its word for good. */
static void drop_marked(int i)
{
  if (marks_state != MARKS_ON)
    return;
  if (wait_reached(&mark_words[mark_word[i]], mark_written[i], MARK_WAIT_MAX_NS))
    spare_words[spare_count++] = mark_word[i];
}

/* Removes nonblocking[i], its mark slot moving with the last stream. */
static void drop_nonblocking(int i)
{
  drop_marked(i);
  int last = --nonblocking_count;
  nonblocking[i] = nonblocking[last];
  mark_word[i] = mark_word[last];
  mark_written[i] = mark_written[last];
}

#define CREATIONS_SAID 16 /* verbose: the first streams' creators are said */
static atomic_int creations;

/* Verbose only: which libraries asked for the first streams, so a user can
 * tell why manage mode fences frees (glibc's backtrace, frames named by
 * their shared object). */
static void say_who_created(unsigned int flags, int nth)
{
  void *frames[12];
  char line[512];
  size_t len = 0;
  int n = backtrace(frames, 12);
  for (int i = 2; i < n && len < sizeof line - 64; i++) {
    Dl_info info;
    const char *name = dladdr(frames[i], &info) && info.dli_fname ? info.dli_fname : "?";
    const char *base = strrchr(name, '/');
    len += (size_t)snprintf(line + len, sizeof line - len, " %s", base ? base + 1 : name);
  }
  line[len] = '\0';
  if (nth == 1)
    ol_log_verbose("first stream created (flags %u), from:%s; manage mode now fences the frees "
                   "made while a stream other than the default one has work", flags, line);
  else
    ol_log_verbose("stream %d created (flags %u), from:%s%s", nth, flags, line,
                   nth == CREATIONS_SAID ? " (later ones not said)" : "");
}

void ol_streams_created(void *stream, unsigned int flags)
{
  int nth = atomic_fetch_add_explicit(&creations, 1, memory_order_relaxed) + 1;
  if (ol_option_bool(OL_OPT_VERBOSE) && nth <= CREATIONS_SAID)
    say_who_created(flags, nth);
  pthread_mutex_lock(&lock);
  bool nonblocking_stream = flags & CU_STREAM_NON_BLOCKING;
  int before = nonblocking_count;
  bool kept = nonblocking_stream ? add(nonblocking, &nonblocking_count, stream)
                                 : add(blocking, &blocking_count, stream);
  if (nonblocking_count > before)
    give_word(before);
  if (!kept) {
    atomic_store(&overflowed, true);
    ol_log_warn_once(&warned_overflow, "more than %d streams; manage mode now fences every "
                     "free", MAX_TRACKED);
  }
  pthread_mutex_unlock(&lock);
}

void ol_streams_destroyed(void *stream)
{
  pthread_mutex_lock(&lock);
  int i = find(nonblocking, nonblocking_count, stream);
  if (i >= 0)
    drop_nonblocking(i);
  else
    drop(blocking, &blocking_count, stream);
  pthread_mutex_unlock(&lock);
}

/* True when all work that may still run is in the legacy default stream's
 * order: no capture, no stream of the job's that runs beside it (a blocking
 * stream runs concurrently with other blocking streams), and every
 * non-blocking stream idle. Work queued on the default stream before a free
 * then runs before any work that can touch a reuse of that memory. Libraries
 * create streams they rarely use (cuDNN does, under PyTorch): an idle one
 * costs one query. Not covered, and weaker than cudaFree: new work on an
 * idle non-blocking stream that uses a reused block without first waiting
 * for the default stream. Libraries that run on a stream of their own order
 * it after their caller's stream to read their inputs, which covers them. */
/* True when the process has no stream but the default ones and no capture:
 * then every piece of work is in the legacy default stream's order and a
 * free can go back to the pool at once. Asks the driver nothing, so it is
 * the per-free test; ol_streams_quiet, which queries every non-blocking
 * stream, is for once per batch of frees (a query costs microseconds, tens
 * while the device is busy: measured on the H200, docs/measurements.md). */
bool ol_streams_single(void)
{
  if (atomic_load(&captures_active) > 0 || atomic_load(&overflowed))
    return false;
  pthread_mutex_lock(&lock);
  bool single = blocking_count == 0 && nonblocking_count == 0;
  pthread_mutex_unlock(&lock);
  return single;
}

bool ol_streams_quiet(void)
{
  if (atomic_load(&captures_active) > 0 || atomic_load(&overflowed))
    return false;
  pthread_mutex_lock(&lock);
  bool quiet = blocking_count == 0;
  for (int i = 0; quiet && i < nonblocking_count; i++)
    quiet = ol_prim_stream_idle(nonblocking[i]) == 1;
  pthread_mutex_unlock(&lock);
  return quiet;
}

/* Has every non-blocking stream a mark behind the work it was given so
 * far, with only the legacy stream's order beside them (no blocking
 * stream, no capture)? Then *mark is passed once all the work they had
 * before this call is done, and what was freed before it may be reused:
 * the same promise as ol_streams_quiet's, kept without asking the device.
 * False where marks cannot be had (the caller asks or fences instead). */
bool ol_streams_mark(uint32_t *mark)
{
  if (atomic_load(&captures_active) > 0 || atomic_load(&overflowed))
    return false;
  pthread_mutex_lock(&lock);
  bool marked = blocking_count == 0 && nonblocking_count > 0 && marks_ready();
  if (marked) {
    uint32_t seq = ++mark_seq;
    for (int i = 0; marked && i < nonblocking_count; i++) {
      marked = ol_prim_stream_write_word(nonblocking[i], mark_device +
                                         (uint64_t)mark_word[i] * sizeof(uint32_t), seq) == 0;
      if (marked)
        mark_written[i] = seq;
    }
    if (!marked)
      marks_failed();
    *mark = seq;
  }
  pthread_mutex_unlock(&lock);
  return marked;
}

/* 1: every stream has reached mark; 0: not yet; -1: marks were given up
 * since (a stream refused one), so only a synchronize tells. */
int ol_streams_marked(uint32_t mark)
{
  pthread_mutex_lock(&lock);
  int state = marks_state == MARKS_ON ? 1 : -1;
  for (int i = 0; state == 1 && i < nonblocking_count; i++)
    state = reached(word_of(i), mark) ? 1 : 0;
  pthread_mutex_unlock(&lock);
  return state;
}

/* The words are taken under the lock and waited on without it: the
 * streams' lock is taken by every free (ol_streams_single). A word stays
 * valid once taken: memory never freed, and a stream going away reaches
 * its last mark before its word goes to a stream made later, which starts
 * at the latest mark. */
bool ol_streams_wait_marked(uint32_t mark, uint64_t max_ns)
{
  uint16_t words[MAX_TRACKED];
  pthread_mutex_lock(&lock);
  bool passed = marks_state == MARKS_ON;
  int n = passed ? nonblocking_count : 0;
  for (int i = 0; i < n; i++)
    words[i] = (uint16_t)mark_word[i];
  pthread_mutex_unlock(&lock);
  uint64_t most = max_ns < MARK_WAIT_MAX_NS ? max_ns : MARK_WAIT_MAX_NS;
  for (int i = 0; passed && i < n; i++)
    passed = wait_reached(&mark_words[words[i]], mark, most);
  return passed;
}

/* Copies up to max non-blocking streams into out; returns how many, or -1
 * when we lost count (then only a device synchronize is safe). */
int ol_streams_nonblocking(void **out, int max)
{
  if (atomic_load(&overflowed))
    return -1;
  pthread_mutex_lock(&lock);
  int n = nonblocking_count < max ? nonblocking_count : -1;
  if (n > 0)
    memcpy(out, nonblocking, (size_t)n * sizeof *out);
  pthread_mutex_unlock(&lock);
  return n;
}

void ol_streams_capture_began(void *stream)
{
  pthread_mutex_lock(&lock);
  if (add(capturing, &capturing_count, stream))
    atomic_fetch_add(&captures_active, 1);
  else
    atomic_store(&overflowed, true);
  pthread_mutex_unlock(&lock);
}

void ol_streams_capture_ended(void *stream)
{
  pthread_mutex_lock(&lock);
  if (drop(capturing, &capturing_count, stream))
    atomic_fetch_sub(&captures_active, 1);
  pthread_mutex_unlock(&lock);
}

bool ol_streams_capturing(void)
{
  return atomic_load_explicit(&captures_active, memory_order_acquire) > 0;
}
