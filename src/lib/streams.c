/* streams.c: which streams and graph captures exist in the process.
 *
 * Manage mode must never hand out memory that work enqueued before its free
 * may still touch. An event on the legacy default stream covers every
 * blocking stream (the legacy stream waits for them), so only the streams
 * created non-blocking need events of their own: this keeps that list. It
 * also counts the captures in progress, during which nothing may be
 * recorded or synchronized. Stream creation is rare; one mutex is enough. */
#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
  bool kept = flags & CU_STREAM_NON_BLOCKING ? add(nonblocking, &nonblocking_count, stream)
                                             : add(blocking, &blocking_count, stream);
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
  if (!drop(nonblocking, &nonblocking_count, stream))
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
