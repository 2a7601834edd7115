/* tracefile.c: OOMLENS_TRACE, every allocation event written to a file
 * while the job runs (docs/trace-format.md).
 *
 * The hook side only copies a small binary record into the chunk being
 * filled, under the tracker's lock (so events are in the tracker's order)
 * and our own short mutex: no formatting, no system call. A writer thread
 * of ours turns full chunks into text lines and writes them; it also
 * hands in a partly filled chunk once a second, so a quiet job's trace is
 * on disk within a second. A call site is defined once, before the first
 * event that refers to it: the hook copies its key bytes the first time
 * the tracker interns it, and the writer names its frames (dladdr) with no
 * lock of the tracker held.
 *
 * Nothing the writer does can hold up the job: no lock of ours is held
 * across a system call that may block (open, write), and the hooks never
 * wait for the writer. Memory is bounded: CHUNKS chunks, allocated when
 * the trace opens. When every chunk is full (a reader that stopped
 * reading, a disk that cannot keep up) or a write fails, tracing stops
 * with one warning and the job goes on; later events are counted, not
 * kept (a trace with holes in it would replay to wrong figures), and the
 * file keeps what was written and ends with a line saying how many were
 * dropped and why. At exit and on SIGTERM/SIGINT the trace is closed (all
 * written, then an end line) and SIGUSR1 writes out everything so far,
 * each waiting at most CLOSE_WAIT_MS for the writer: a writer stuck in
 * write() is left behind, and that trace ends without its end line (its
 * reader says it was cut). The writer puts its file in non-blocking mode,
 * so that a FIFO's write returns rather than blocks, and waits for room
 * in slices, so it notices it was left behind. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib.h"
#include "prim.h"

#define CHUNK_BYTES (256u * 1024)
#define CHUNKS 16                 /* 4 MiB in all */
#define PERIOD_MS 1000            /* a partly filled chunk goes out after this */
#define CLOSE_WAIT_MS 1000        /* flush and close wait at most this long (README) */
#define ROOM_POLL_MS 100          /* a writer waiting for room looks up this often */
#define MAX_KEY (CHUNK_BYTES / 4) /* longer site keys are cut (never in practice) */
#define OUT_BYTES (64u * 1024)

enum { REC_EVENT = 1, REC_SITE, REC_DEVICE, REC_LINE };

typedef struct event_rec {
  uint8_t type, action;
  int16_t device;
  int32_t site;
  uint64_t time_us, addr, size, stream;
} event_rec_t;

typedef struct site_rec { /* followed by len key bytes, then label_len label bytes, padded to 8 */
  uint8_t type;
  int16_t device;
  int32_t site;
  uint32_t len;
  uint32_t label_len;
} site_rec_t;

typedef struct device_rec {
  uint8_t type;
  int16_t device;
  uint64_t capacity;
} device_rec_t;

typedef struct line_rec { /* followed by len bytes of a whole line's text, no newline */
  uint8_t type;
  uint32_t len;
} line_rec_t;

typedef struct chunk {
  size_t used;
  char data[CHUNK_BYTES];
} chunk_t;

static struct {
  pthread_mutex_t lock;
  pthread_cond_t writer_wake; /* a chunk is full, or a flush or close is asked */
  pthread_cond_t done;        /* a chunk was written, or the file closed */
  atomic_bool on;             /* the trace is open: the hooks call us */
  atomic_bool taking;         /* events are kept (false once tracing stopped) */
  atomic_bool abandoned;      /* close gave up waiting for a stuck writer */
  atomic_uint_fast64_t dropped; /* events after tracing stopped, not kept */
  bool open, opening, closing, closed;
  int fd;
  char path[PATH_MAX];
  chunk_t *chunks[CHUNKS];
  int filling;           /* chunk being filled, -1 none */
  int spare[CHUNKS], spare_count;
  int full[CHUNKS], full_head, full_count;
  uint64_t handed, written; /* chunks given to the writer, and written by it */
  uint64_t start_ns;
  uint64_t events;
  bool created;      /* the file is ours: opening made it */
  dev_t dev;         /* and which file it is, to remove that one only */
  ino_t ino;
  bool device_seen[OL_MAX_DEVICES];
  const char *stopped; /* why tracing stopped early, NULL if it did not */
} tf = {
  .lock = PTHREAD_MUTEX_INITIALIZER,
  .writer_wake = PTHREAD_COND_INITIALIZER,
  .done = PTHREAD_COND_INITIALIZER,
  .fd = -1,
  .filling = -1,
};

static atomic_bool warned;

static uint64_t monotonic_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static struct timespec deadline_in(unsigned ms)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += ms / 1000;
  ts.tv_nsec += (long)(ms % 1000) * 1000000;
  if (ts.tv_nsec >= 1000000000) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000;
  }
  return ts;
}

bool ol_tracefile_on(void)
{
  return atomic_load_explicit(&tf.on, memory_order_relaxed);
}

bool ol_tracefile_taking(void)
{
  return atomic_load_explicit(&tf.taking, memory_order_relaxed);
}

uint64_t ol_tracefile_dropped(void)
{
  return atomic_load(&tf.dropped);
}

/* Tracing stops; the job goes on. Called with tf.lock held. */
static void stop_tracing(const char *why)
{
  atomic_store(&tf.taking, false);
  if (!tf.stopped)
    tf.stopped = why;
  ol_log_warn_once(&warned, "trace %s: %s; tracing stops, the job continues", tf.path, why);
}

/* ---- the hook side ----------------------------------------------------- */

static void hand_over(void)
{
  if (tf.filling < 0 || tf.chunks[tf.filling]->used == 0)
    return;
  tf.full[(tf.full_head + tf.full_count) % CHUNKS] = tf.filling;
  tf.full_count++;
  tf.handed++;
  tf.filling = -1;
  pthread_cond_signal(&tf.writer_wake);
}

/* A spare chunk to fill, never waiting: the hook holds the tracker's
 * lock, so a wait here would be every job thread's. None spare means the
 * writer is CHUNKS chunks behind. */
static bool take_spare(void)
{
  if (tf.spare_count == 0 && atomic_load(&tf.taking))
    stop_tracing("the disk cannot keep up with the job's allocations");
  if (tf.spare_count == 0 || !atomic_load(&tf.taking))
    return false;
  tf.filling = tf.spare[--tf.spare_count];
  tf.chunks[tf.filling]->used = 0;
  return true;
}

/* Room for n bytes in the chunk being filled; NULL when tracing stopped. */
static void *reserve(size_t n)
{
  n = (n + 7) & ~(size_t)7;
  chunk_t *c = tf.filling >= 0 ? tf.chunks[tf.filling] : NULL;
  if (!c || c->used + n > CHUNK_BYTES) {
    hand_over();
    if (!take_spare())
      return NULL;
    c = tf.chunks[tf.filling];
  }
  void *at = c->data + c->used;
  c->used += n;
  return at;
}

static int clamp_device(int device)
{
  return device < 0 ? 0 : device >= OL_MAX_DEVICES ? OL_MAX_DEVICES - 1 : device;
}

/* The device's size as the job sees it (OOMLENS_CAPACITY included). */
static uint64_t device_capacity(int device)
{
  uint64_t total = ol_prim_device_total_memory(device);
  uint64_t cap = ol_option_size(OL_OPT_CAPACITY);
  return cap && (total == 0 || cap < total) ? cap : total;
}

static void note_device(int device)
{
  if (tf.device_seen[device])
    return;
  device_rec_t *rec = reserve(sizeof *rec);
  if (!rec)
    return;
  tf.device_seen[device] = true;
  *rec = (device_rec_t){.type = REC_DEVICE, .device = (int16_t)device,
                        .capacity = device_capacity(device)};
}

void ol_tracefile_site(int device, int32_t site, const void *key, size_t len, const char *label)
{
  if (!ol_tracefile_taking() || site < 0)
    return;
  size_t label_len = label ? strlen(label) : 0;
  if (len > MAX_KEY)
    len = 0; /* cut keys would misread: the site is written without frames */
  if (label_len > MAX_KEY)
    label_len = MAX_KEY;
  pthread_mutex_lock(&tf.lock);
  site_rec_t *rec = atomic_load(&tf.taking) ? reserve(sizeof *rec + len + label_len) : NULL;
  if (rec) {
    *rec = (site_rec_t){.type = REC_SITE, .device = (int16_t)clamp_device(device), .site = site,
                        .len = (uint32_t)len, .label_len = (uint32_t)label_len};
    if (len) /* key and label may be NULL when empty: memcpy must not see them */
      memcpy(rec + 1, key, len);
    if (label_len)
      memcpy((char *)(rec + 1) + len, label, label_len);
  }
  pthread_mutex_unlock(&tf.lock);
}

void ol_tracefile_event(ol_trace_action_t action, uint64_t addr, uint64_t size, uint64_t stream,
                        int32_t site, int device)
{
  if (!ol_tracefile_on())
    return;
  if (!ol_tracefile_taking()) {
    atomic_fetch_add_explicit(&tf.dropped, 1, memory_order_relaxed);
    return;
  }
  uint64_t now = monotonic_ns();
  device = clamp_device(device);
  pthread_mutex_lock(&tf.lock);
  if (atomic_load(&tf.taking))
    note_device(device);
  /* read again: note_device's record may have found no room and stopped tracing */
  event_rec_t *rec = atomic_load(&tf.taking) ? reserve(sizeof *rec) : NULL;
  if (rec) {
    *rec = (event_rec_t){.type = REC_EVENT, .action = (uint8_t)action, .device = (int16_t)device,
                         .site = site, .time_us = (now - tf.start_ns) / 1000, .addr = addr,
                         .size = size, .stream = stream};
    tf.events++;
  } else {
    atomic_fetch_add_explicit(&tf.dropped, 1, memory_order_relaxed);
  }
  pthread_mutex_unlock(&tf.lock);
}

/* Manage mode's pool kept a freed block out of use (held) or took it
 * back: a pool_held or pool_freed line, in the events' order, so that
 * replay hands the block to its pool when the live pool got it. Kept as an
 * event's record (formatted by the writer, not on the hook's thread), but
 * not an event: the end line's count leaves it out. */
void ol_tracefile_pool(int device, uint64_t addr, bool held)
{
  if (!ol_tracefile_taking())
    return;
  pthread_mutex_lock(&tf.lock);
  event_rec_t *rec = atomic_load(&tf.taking) ? reserve(sizeof *rec) : NULL;
  if (rec)
    *rec = (event_rec_t){.type = REC_EVENT,
                         .action = (uint8_t)(held ? OL_TRACE_POOL_HELD : OL_TRACE_POOL_FREED),
                         .device = (int16_t)clamp_device(device), .site = -1, .addr = addr};
  pthread_mutex_unlock(&tf.lock);
}

/* A line of text, formatted by the caller (an out-of-memory is rare: it
 * may format on the hook's thread), in the events' order. */
static void trace_line(const char *text, size_t len)
{
  if (!ol_tracefile_taking() || len > MAX_KEY)
    return;
  pthread_mutex_lock(&tf.lock);
  line_rec_t *rec = atomic_load(&tf.taking) ? reserve(sizeof *rec + len) : NULL;
  if (rec) {
    *rec = (line_rec_t){.type = REC_LINE, .len = (uint32_t)len};
    memcpy(rec + 1, text, len);
  }
  pthread_mutex_unlock(&tf.lock);
}

void ol_tracefile_oom_context(int device, const ol_oom_record_t *r, ol_oom_class_t cause)
{
  if (!ol_tracefile_on())
    return;
  ol_buf_t text = {0};
  ol_buf_printf(&text, "oom_context,%d,", clamp_device(device));
  ol_oom_context_text(&text, r, cause);
  if (!text.failed && text.data)
    trace_line(text.data, text.len);
  ol_buf_free(&text);
}

void ol_tracefile_outside(int device, int64_t bytes)
{
  if (!ol_tracefile_on() || bytes < 0)
    return;
  char line[64];
  int n = snprintf(line, sizeof line, "outside,%d,%lld", clamp_device(device), (long long)bytes);
  if (n > 0 && (size_t)n < sizeof line)
    trace_line(line, (size_t)n);
}

/* ---- the writer thread ------------------------------------------------- */

typedef struct out {
  size_t len;
  bool failed;
  char data[OUT_BYTES];
} out_t;

static void write_failed(out_t *o, const char *why)
{
  pthread_mutex_lock(&tf.lock);
  stop_tracing(why);
  pthread_mutex_unlock(&tf.lock);
  o->failed = true;
}

/* A full pipe (a reader that is slow or stopped): waits for room in
 * slices, until there is some or close gave up on us. No lock held. */
static bool room_came(void)
{
  struct pollfd p = {.fd = tf.fd, .events = POLLOUT};
  while (!atomic_load(&tf.abandoned)) {
    int n = poll(&p, 1, ROOM_POLL_MS);
    if (n > 0)
      return true; /* room, or an error the next write reports */
    if (n < 0 && errno != EINTR)
      return false;
  }
  return false;
}

static void write_out(out_t *o)
{
  const char *p = o->data;
  size_t left = o->len;
  while (left > 0 && !o->failed) {
    ssize_t n = write(tf.fd, p, left);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!room_came())
        write_failed(o, "the reader stopped reading");
      continue;
    }
    if (n <= 0) {
      write_failed(o, n < 0 ? strerror(errno) : "nothing written");
      break;
    }
    p += n;
    left -= (size_t)n;
  }
  o->len = 0;
}

static void put(out_t *o, const char *text, size_t n)
{
  while (n > 0) {
    if (o->len == OUT_BYTES)
      write_out(o);
    size_t room = OUT_BYTES - o->len, take = n < room ? n : room;
    memcpy(o->data + o->len, text, take);
    o->len += take;
    text += take;
    n -= take;
  }
}

/* Decimal or hex digits of v, then sep: the writer's whole formatting. */
static void put_number(out_t *o, uint64_t v, bool hex, char sep)
{
  char digits[24];
  int n = sizeof digits;
  digits[--n] = sep;
  unsigned base = hex ? 16 : 10;
  do {
    digits[--n] = "0123456789abcdef"[v % base];
    v /= base;
  } while (v);
  if (hex) {
    digits[--n] = 'x';
    digits[--n] = '0';
  }
  put(o, digits + n, sizeof digits - (size_t)n);
}

static void put_text(out_t *o, const char *text)
{
  put(o, text, strlen(text));
}

/* "pool_held,DEVICE,ADDR" (or pool_freed): a line of its own. */
static void format_pool_line(out_t *o, const event_rec_t *r)
{
  put_text(o, ol_trace_action_name((ol_trace_action_t)r->action));
  put(o, ",", 1);
  put_number(o, (uint64_t)r->device, false, ',');
  put_number(o, r->addr, true, '\n');
}

static void format_event(out_t *o, const event_rec_t *r)
{
  if (r->action == OL_TRACE_POOL_HELD || r->action == OL_TRACE_POOL_FREED) {
    format_pool_line(o, r);
    return;
  }
  put_number(o, r->time_us, false, ',');
  put_text(o, ol_trace_action_name((ol_trace_action_t)r->action));
  put(o, ",", 1);
  put_number(o, r->addr, true, ',');
  put_number(o, r->size, false, ',');
  put_number(o, r->stream, false, ',');
  if (r->site >= 0)
    put_number(o, (uint64_t)r->site, false, ',');
  else
    put(o, ",", 1);
  put_number(o, (uint64_t)r->device, false, '\n');
}

/* A site's frames, named now; a line break inside a name would end the
 * line, so control characters become '?'. */
static void format_site(out_t *o, const site_rec_t *r)
{
  ol_buf_t text = {0};
  char *label = strndup((const char *)(r + 1) + r->len, r->label_len);
  ol_stacks_key_text(r + 1, r->len, label, &text);
  free(label);
  for (size_t i = 0; i < text.len; i++)
    if ((unsigned char)text.data[i] < 0x20)
      text.data[i] = '?';
  put_text(o, "site,");
  put_number(o, (uint64_t)r->device, false, ',');
  put_number(o, (uint64_t)r->site, false, ',');
  if (text.len)
    put(o, text.data, text.len);
  put(o, "\n", 1);
  ol_buf_free(&text);
}

static void format_chunk(out_t *o, const chunk_t *c)
{
  size_t at = 0;
  while (at < c->used) {
    const char *p = c->data + at;
    size_t n;
    if (*p == REC_EVENT) {
      format_event(o, (const event_rec_t *)p);
      n = sizeof(event_rec_t);
    } else if (*p == REC_SITE) {
      const site_rec_t *s = (const site_rec_t *)p;
      format_site(o, s);
      n = sizeof *s + s->len + s->label_len;
    } else if (*p == REC_LINE) {
      const line_rec_t *l = (const line_rec_t *)p;
      put(o, (const char *)(l + 1), l->len);
      put(o, "\n", 1);
      n = sizeof *l + l->len;
    } else {
      const device_rec_t *d = (const device_rec_t *)p;
      put_text(o, "device,");
      put_number(o, (uint64_t)d->device, false, ',');
      put_number(o, d->capacity, false, '\n');
      n = sizeof *d;
    }
    at += (n + 7) & ~(size_t)7;
  }
}

static void write_end(out_t *o)
{
  char line[192], dropped[48] = "";
  if (tf.stopped)
    snprintf(dropped, sizeof dropped, " dropped=%llu", (unsigned long long)ol_tracefile_dropped());
  snprintf(line, sizeof line, "# end events=%llu%s%s%s\n", (unsigned long long)tf.events, dropped,
           tf.stopped ? " incomplete: " : "", tf.stopped ? tf.stopped : "");
  put_text(o, line);
  write_out(o);
  close(tf.fd);
  tf.fd = -1;
}

/* Called with tf.lock held; returns with it held. */
static void write_chunk(out_t *o, int index)
{
  pthread_mutex_unlock(&tf.lock);
  if (!o->failed) { /* what was taken is written, even after tracing stopped */
    format_chunk(o, tf.chunks[index]);
    write_out(o);
  }
  pthread_mutex_lock(&tf.lock);
  tf.spare[tf.spare_count++] = index;
  tf.written++;
  pthread_cond_broadcast(&tf.done);
}

/* Non-blocking writes: a FIFO's full pipe returns EAGAIN (room_came
 * waits for it) rather than holding the writer where nobody can tell it
 * to give up. A regular file ignores the flag. */
static void writes_never_block(int fd)
{
  int flags = fcntl(fd, F_GETFL);
  if (flags >= 0 && !(flags & O_NONBLOCK))
    fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

static void *writer_main(void *arg)
{
  out_t *o = arg;
  writes_never_block(tf.fd);
  pthread_mutex_lock(&tf.lock);
  for (;;) {
    if (tf.full_count > 0) {
      int index = tf.full[tf.full_head];
      tf.full_head = (tf.full_head + 1) % CHUNKS;
      tf.full_count--;
      write_chunk(o, index);
      continue;
    }
    if (tf.closing)
      break;
    struct timespec until = deadline_in(PERIOD_MS);
    if (pthread_cond_timedwait(&tf.writer_wake, &tf.lock, &until) == ETIMEDOUT)
      hand_over(); /* a quiet job's events reach the disk too */
  }
  pthread_mutex_unlock(&tf.lock); /* a failed write takes it to stop tracing */
  write_end(o);
  pthread_mutex_lock(&tf.lock);
  tf.closed = true;
  pthread_cond_broadcast(&tf.done);
  pthread_mutex_unlock(&tf.lock);
  free(o);
  return NULL;
}

/* ---- opening, flushing, closing --------------------------------------- */

static bool start_writer(void)
{
  out_t *o = malloc(sizeof *o);
  if (!o)
    return false;
  o->len = 0;
  o->failed = false;
  bool started = ol_lifecycle_start_thread(writer_main, o);
  if (!started)
    free(o);
  return started;
}

static void free_chunks(void)
{
  for (int i = 0; i < CHUNKS; i++) {
    free(tf.chunks[i]);
    tf.chunks[i] = NULL;
  }
}

static bool allocate_chunks(void)
{
  tf.spare_count = 0;
  for (int i = 0; i < CHUNKS; i++) {
    if (!(tf.chunks[i] = malloc(sizeof(chunk_t)))) {
      free_chunks();
      return false;
    }
    tf.spare[tf.spare_count++] = i;
  }
  return true;
}

static bool write_header(int fd)
{
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  char header[256], batch[32] = "", unit[32] = "";
  if (ol_option_size(OL_OPT_BATCH))
    snprintf(batch, sizeof batch, " batch=%llu", (unsigned long long)ol_option_size(OL_OPT_BATCH));
  /* manage=1: replay leaves to the driver what the pool left to it;
   * pool_unit=N: and maps in the extents the live pool did */
  if (ol_manage_on())
    snprintf(unit, sizeof unit, " manage=1 pool_unit=%llu",
             (unsigned long long)ol_option_size(OL_OPT_POOL_UNIT));
  int n = snprintf(header, sizeof header,
                   "# oomlens-trace 2 pid=%ld rank=%s start_unix_us=%llu stacks=%d%s%s\n"
                   "# time_us,action,addr,size,stream,site,device\n",
                   (long)getpid(), ol_rank_text(),
                   (unsigned long long)now.tv_sec * 1000000ull + (unsigned long long)now.tv_nsec / 1000,
                   ol_stacks_on() ? 1 : 0, batch, unit);
  return n > 0 && write(fd, header, (size_t)n) == n;
}

/* Whether this caller opens the trace: claimed under the lock, so that
 * the open and the header's write run with no lock held (one that blocks
 * holds up its caller only, never a signal's report or another hook). */
static bool claim_opening(void)
{
  pthread_mutex_lock(&tf.lock);
  bool mine = !tf.open && !tf.opening;
  if (mine)
    tf.opening = true;
  pthread_mutex_unlock(&tf.lock);
  return mine;
}

/* The trace taken from now on, its writer started; false if it could not
 * start (then nothing is taken). */
static bool publish_open(void)
{
  pthread_mutex_lock(&tf.lock);
  tf.start_ns = monotonic_ns();
  tf.open = true;
  atomic_store(&tf.taking, true);
  atomic_store(&tf.on, true);
  bool started = start_writer();
  if (!started) {
    atomic_store(&tf.on, false);
    atomic_store(&tf.taking, false);
    tf.open = false;
    free_chunks();
  }
  tf.opening = false;
  pthread_mutex_unlock(&tf.lock);
  return started;
}

/* Which file the trace is, and whether opening made it. */
static bool note_file(int fd, bool created)
{
  struct stat st;
  if (fstat(fd, &st) != 0)
    return false;
  tf.created = created;
  tf.dev = st.st_dev;
  tf.ino = st.st_ino;
  return true;
}

/* A trace that took no event, in a file its opening made, is removed at
 * its close, as a process that saw no activity writes no report: every
 * program a job starts inherits OOMLENS_TRACE, and the ones that never
 * allocate (torch.compile's compile workers, a data loader's workers:
 * held-out compiled_batch on the H200 left a header-only PATH.<pid>) would
 * each leave a file of a header and an end line. Only that file: not if
 * something else is at the path now. */
static void remove_if_empty(void)
{
  struct stat st;
  if (!tf.created || tf.events != 0 || ol_tracefile_dropped() != 0)
    return;
  if (lstat(tf.path, &st) == 0 && S_ISREG(st.st_mode) && st.st_dev == tf.dev &&
      st.st_ino == tf.ino)
    unlink(tf.path);
}

int ol_tracefile_open(const char *path)
{
  if (!claim_opening())
    return -1;
  int rc = -1;
  snprintf(tf.path, sizeof tf.path, "%s", path);
  /* In place, never waiting, never over anything but a regular file of
   * ours or a FIFO (output_file.c): a job killed early keeps its trace. */
  ol_error_t err;
  bool created = false;
  tf.fd = ol_output_open_stream(path, OL_OUTPUT_PRIVATE, &created, &err);
  if (tf.fd < 0) {
    ol_log_warn("cannot write the trace: %s; no trace is written", err.text);
  } else if (!note_file(tf.fd, created) || !write_header(tf.fd) || !allocate_chunks()) {
    ol_log_warn("cannot start the trace %s: %s; no trace is written", path, strerror(errno));
  } else if (publish_open()) {
    return 0;
  } else {
    ol_log_warn("cannot start the trace writer thread; no trace is written");
  }
  if (tf.fd >= 0) {
    close(tf.fd);
    tf.fd = -1;
    if (created)
      unlink(path); /* ours, holding at most its header: no trace, no file */
  }
  pthread_mutex_lock(&tf.lock);
  tf.opening = false;
  pthread_mutex_unlock(&tf.lock);
  return rc;
}

/* The pid in the header of the trace at path, if a regular file there
 * begins with one; 0 otherwise. */
static long trace_writer_of(const char *path)
{
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return 0;
  struct stat st;
  char line[96];
  ssize_t n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? read(fd, line, sizeof line - 1) : 0;
  close(fd);
  if (n <= 0)
    return 0;
  line[n] = '\0';
  long pid = 0;
  return sscanf(line, "# oomlens-trace %*d pid=%ld", &pid) == 1 ? pid : 0;
}

static bool process_alive(long pid)
{
  return pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
}

/* OOMLENS_TRACE's pattern; a forked child's own name if it has no %p, and
 * so for any process whose path is a trace another live process writes: a
 * program the job starts inherits OOMLENS_TRACE (torch.compile's compile
 * workers did, held-out compiled_batch on the H200), and opening the same
 * path emptied the job's trace under its writer, which went on past a hole. */
void ol_tracefile_start(void)
{
  const char *pattern = ol_option_text(OL_OPT_TRACE);
  if (!pattern || !*pattern)
    return;
  char path[PATH_MAX];
  if (ol_lifecycle_output_path(pattern, NULL, path, sizeof path) != 0) {
    ol_log_warn("trace path from OOMLENS_TRACE is too long; no trace is written");
    return;
  }
  long writer = trace_writer_of(path);
  if (writer && writer != (long)getpid() && process_alive(writer)) {
    char own[PATH_MAX];
    if (ol_output_path(pattern, (long)getpid(), ol_rank_text(), true, NULL, own, sizeof own) != 0 ||
        strcmp(own, path) == 0) {
      ol_log_warn("trace %s is written by pid %ld; no trace is written", path, writer);
      return;
    }
    ol_log_info("trace %s is written by pid %ld; this process writes %s", path, writer, own);
    snprintf(path, sizeof path, "%s", own);
  }
  ol_tracefile_open(path);
}

/* Waits (tf.lock held, and let go while waiting) until the writer has
 * written everything handed over so far, or closed the file, or
 * CLOSE_WAIT_MS went by; false in the last case. */
static bool wait_written(bool for_close)
{
  uint64_t target = tf.handed;
  struct timespec until = deadline_in(CLOSE_WAIT_MS);
  while (for_close ? !tf.closed : tf.written < target && !tf.closed)
    if (pthread_cond_timedwait(&tf.done, &tf.lock, &until) == ETIMEDOUT)
      return false;
  return true;
}

/* Close could not wait for the writer (stuck in a write a reader does not
 * take, or on a slow file system): the job goes on to its end without it,
 * and the writer gives up at its next look. */
static void leave_writer_behind(void)
{
  static atomic_bool said;
  atomic_store(&tf.abandoned, true);
  ol_log_warn_once(&said, "trace %s: the writer is stuck; the trace ends without its end line",
                   tf.path);
}

void ol_tracefile_flush(void)
{
  pthread_mutex_lock(&tf.lock);
  if (tf.open && !tf.closing) {
    hand_over();
    wait_written(false);
  }
  pthread_mutex_unlock(&tf.lock);
}

void ol_tracefile_close(void)
{
  pthread_mutex_lock(&tf.lock);
  if (tf.open && !tf.closing) {
    atomic_store(&tf.on, false); /* events after this one are not the trace's */
    atomic_store(&tf.taking, false);
    hand_over();
    tf.closing = true;
    pthread_cond_signal(&tf.writer_wake);
    if (!wait_written(true))
      leave_writer_behind();
    else
      remove_if_empty();
  }
  pthread_mutex_unlock(&tf.lock);
}

/* A forked child: the parent's trace and writer are not ours. The parent
 * writes what it had buffered; the child starts its own trace if it uses
 * CUDA. The writer may have held our lock at the fork: a fresh one. */
void ol_tracefile_forget(void)
{
  pthread_mutex_t fresh_lock = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t fresh_cond = PTHREAD_COND_INITIALIZER;
  tf.lock = fresh_lock;
  tf.writer_wake = fresh_cond;
  tf.done = fresh_cond;
  if (tf.fd >= 0)
    close(tf.fd);
  free_chunks();
  atomic_store(&tf.on, false);
  atomic_store(&tf.taking, false);
  atomic_store(&tf.abandoned, false);
  atomic_store(&tf.dropped, 0);
  tf.fd = -1;
  tf.open = tf.opening = tf.closing = tf.closed = false;
  tf.filling = -1;
  tf.spare_count = tf.full_count = tf.full_head = 0;
  tf.handed = tf.written = tf.events = 0;
  tf.stopped = NULL;
  memset(tf.device_seen, 0, sizeof tf.device_seen);
}
