/* metrics.c: OOMLENS_METRICS, a Prometheus text file kept current.
 *
 * A thread of ours (every signal blocked) rewrites the file every
 * OOMLENS_METRICS_INTERVAL seconds, and once more at exit (or before a
 * SIGTERM/SIGINT of ours ends the job), in the text
 * format node exporter's textfile collector reads: each family's # HELP
 * and # TYPE once, then its samples together, one series per label set, no
 * timestamps (the collector rejects a file that has them), a final newline.
 * The file is replaced whole (temporary file in the same folder, then
 * rename: output_file.c, which also refuses a target that is not a regular
 * file of ours), and the temporary name does not end in .prom, so the
 * collector never reads half a file. A new file is 0666 less the umask:
 * the collector usually runs as another user. Labels pid, rank and device keep
 * the series of several processes apart when their files share a folder.
 *
 * The job's threads never wait for us: the thread holds the tracker's lock
 * only to copy the counters, and exit waits at most a moment for a write in
 * progress before giving up on the final one. A forked child has no thread;
 * it starts its own (and its own file) if it uses CUDA. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib.h"

#define EXIT_WAIT_S 1 /* longest exit waits for a write in progress (README) */

static pthread_mutex_t state_lock = PTHREAD_MUTEX_INITIALIZER; /* held while writing */
static pthread_cond_t wake;
static bool running, stopping;
static char path[PATH_MAX];
static atomic_bool warned;

/* One family: name, type, help, and the device figure it shows. */
typedef struct family {
  const char *name, *type, *help;
  double (*value)(const ol_device_stats_t *dev);
} family_t;

static double allocated_now(const ol_device_stats_t *d)
{
  return (double)d->allocated_bytes[OL_POOL_ALL].current;
}
static double allocated_peak(const ol_device_stats_t *d)
{
  return (double)d->allocated_bytes[OL_POOL_ALL].peak;
}
static double reserved_now(const ol_device_stats_t *d)
{
  return (double)d->reserved_bytes[OL_POOL_ALL].current;
}
static double reserved_peak(const ol_device_stats_t *d)
{
  return (double)d->reserved_bytes[OL_POOL_ALL].peak;
}

/* Reserved memory nobody holds, as a share of reserved (0 with none). */
static double wasted_share(const ol_device_stats_t *d)
{
  double reserved = reserved_now(d), allocated = allocated_now(d);
  return reserved > 0 && reserved > allocated ? (reserved - allocated) / reserved : 0.0;
}

static const family_t families[] = {
  {"oomlens_allocated_bytes", "gauge", "Device memory allocated now, as oomlens sees it.",
   allocated_now},
  {"oomlens_allocated_peak_bytes", "gauge", "Highest device memory allocated so far.",
   allocated_peak},
  {"oomlens_reserved_bytes", "gauge", "Device memory reserved from CUDA now.", reserved_now},
  {"oomlens_reserved_peak_bytes", "gauge", "Highest device memory reserved so far.",
   reserved_peak},
  {"oomlens_wasted_ratio", "gauge",
   "Share of reserved memory not allocated: (reserved - allocated) / reserved.", wasted_share},
};

static void series(ol_buf_t *out, const char *name, long pid, const char *rank, int device)
{
  /* rank holds only [A-Za-z0-9_-] (report_file.c): nothing to escape. */
  ol_buf_printf(out, "%s{pid=\"%ld\",rank=\"%s\",device=\"%d\"", name, pid, rank, device);
}

static void header(ol_buf_t *out, const char *name, const char *type, const char *help)
{
  ol_buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Out-of-memory errors by class; those the diagnosis could not classify
 * (no capacity known) count as "unknown". */
static void oom_counts(ol_buf_t *out, const ol_snapshot_t *snap, long pid, const char *rank)
{
  header(out, "oomlens_ooms_total", "counter", "Out-of-memory errors by diagnosed class.");
  for (int d = 0; d < snap->device_count; d++) {
    const ol_device_stats_t *dev = &snap->devices[d];
    int64_t classified = 0;
    for (int c = 0; c <= OL_OOM_CLASS_COUNT; c++) {
      int64_t n = c < OL_OOM_CLASS_COUNT ? dev->ooms_by_class[c] : dev->num_ooms - classified;
      classified += n;
      series(out, "oomlens_ooms_total", pid, rank, d);
      ol_buf_printf(out, ",class=\"%s\"} %lld\n",
                    c < OL_OOM_CLASS_COUNT ? ol_oom_class_name((ol_oom_class_t)c) : "unknown",
                    (long long)(n > 0 ? n : 0));
    }
  }
}

void ol_metrics_text(ol_buf_t *out, const ol_snapshot_t *snap, long pid, const char *rank)
{
  for (size_t f = 0; f < sizeof families / sizeof *families; f++) {
    header(out, families[f].name, families[f].type, families[f].help);
    for (int d = 0; d < snap->device_count; d++) {
      series(out, families[f].name, pid, rank, d);
      ol_buf_printf(out, "} %.17g\n", families[f].value(&snap->devices[d]));
    }
  }
  oom_counts(out, snap, pid, rank);
}

static void write_now(void)
{
  ol_snapshot_t *snap = malloc(sizeof *snap);
  ol_buf_t text = {0};
  if (snap) {
    ol_track_snapshot(snap);
    ol_metrics_text(&text, snap, (long)getpid(), ol_rank_text());
  }
  ol_error_t err;
  if (!snap || text.failed)
    ol_log_warn_once(&warned, "out of memory for the metrics file %s; not written (said once)",
                     path);
  else if (!ol_output_write_file(path, text.data, text.len, OL_OUTPUT_SHARED, &err))
    ol_log_warn_once(&warned, "cannot write the metrics file: %s (said once)", err.text);
  ol_buf_free(&text);
  free(snap);
}

static struct timespec after_ms(clockid_t clock, uint64_t ms)
{
  struct timespec at;
  clock_gettime(clock, &at);
  at.tv_sec += (time_t)(ms / 1000);
  at.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (at.tv_nsec >= 1000000000L) {
    at.tv_sec++;
    at.tv_nsec -= 1000000000L;
  }
  return at;
}

static void *metrics_main(void *arg)
{
  (void)arg;
  uint64_t interval = ol_option_millis(OL_OPT_METRICS_INTERVAL);
  pthread_mutex_lock(&state_lock);
  for (;;) {
    /* The first write after one interval: at start there is nothing to say. */
    struct timespec next = after_ms(CLOCK_MONOTONIC, interval);
    while (!stopping && pthread_cond_timedwait(&wake, &state_lock, &next) != ETIMEDOUT)
      ;
    if (stopping)
      break;
    write_now();
  }
  pthread_mutex_unlock(&state_lock);
  return NULL;
}

static bool start_thread(void)
{
  pthread_condattr_t cattr;
  pthread_condattr_init(&cattr);
  pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
  int err = pthread_cond_init(&wake, &cattr);
  pthread_condattr_destroy(&cattr);
  if (err != 0)
    return false;
  return ol_lifecycle_start_thread(metrics_main, NULL);
}

void ol_metrics_start(void)
{
  const char *pattern = ol_option_text(OL_OPT_METRICS);
  if (!pattern || !*pattern || running)
    return;
  /* x.prom in a forked child without %p becomes x.<pid>.prom */
  if (ol_lifecycle_output_path(pattern, ".prom", path, sizeof path) != 0) {
    ol_log_warn("OOMLENS_METRICS path is too long; no metrics written");
    return;
  }
  stopping = false;
  running = start_thread();
  if (!running)
    ol_log_warn("cannot start the metrics thread; no metrics written");
}

/* The final write, done here so the file holds the figures at exit; the
 * thread is told to stop and left to end by itself. */
void ol_metrics_stop(void)
{
  if (!running)
    return;
  struct timespec limit = after_ms(CLOCK_REALTIME, EXIT_WAIT_S * 1000);
  if (pthread_mutex_timedlock(&state_lock, &limit) != 0) {
    ol_log_warn("a metrics write is stuck; %s not updated at exit", path);
    return;
  }
  stopping = true;
  running = false;
  pthread_cond_signal(&wake);
  write_now();
  pthread_mutex_unlock(&state_lock);
}

void ol_metrics_forget(void)
{
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  state_lock = fresh;
  running = false;
  stopping = false;
}
