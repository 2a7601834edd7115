/* report.c: the live reports a user attaches to a ticket, written at exit,
 * at a signal and on request.
 *
 * A report is first taken as one snapshot that owns all it shows (core's
 * ol_report_t: the tracker's counters, each device's timeline and a copy
 * of its call sites, all under one hold of the tracker's lock, so they are
 * one moment; the sites are listed and named from the copy after), then
 * rendered by core's one renderer (report_render.c) as text and as JSON.
 * The text and the JSON thus always agree, and `oomlens report` prints a
 * JSON report back through the same code. Here: the snapshot, the files'
 * paths, and publishing them whole. */
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib.h"

void ol_report_stack_namer(ol_buf_t *out, int32_t id, bool json, void *sites)
{
  ol_report_site_name(out, sites, ol_stacks_site_frames, id, json);
}

/* What the call sites are made of in this process (the text report's
 * note; the JSON's "stacks"). */
void ol_report_stacks_now(ol_report_stacks_t *s)
{
  ol_pyframes_status_t py;
  ol_pyframes_status(&py);
  *s = (ol_report_stacks_t){.native = ol_stacks_native_on() && ol_stacks_native_available(),
                            .depth = ol_option_size(OL_OPT_STACK_DEPTH),
                            .sample = ol_stacks_sample_bytes(),
                            .with_python = py.with_python,
                            .without_python = py.without_python,
                            .roles_only = !ol_stacks_native_on()};
  snprintf(s->py_state, sizeof s->py_state, "%s", py.state);
  snprintf(s->py_version, sizeof s->py_version, "%s", py.version);
}

/* The device's site lists and the names of its diagnosis's sites, from
 * the copy of its table taken with its counters (the record's site ids
 * name sites of that copy), then the copy let go. */
static void name_sites(ol_report_t *r, int device, ol_sites_t *sites)
{
  ol_report_device_t *d = &r->devices[device];
  d->stats.batch = (int64_t)ol_option_size(OL_OPT_BATCH);
  ol_report_device_fill(r, d, device, &d->stats, sites, sites ? ol_stacks_site_frames : NULL);
  ol_sites_free(sites);
}

/* /proc/self/cmdline with the NULs turned into spaces, at most 1 KiB. */
static void read_command(char *out, size_t cap)
{
  out[0] = '\0';
  int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return;
  ssize_t n = read(fd, out, cap - 1);
  close(fd);
  if (n <= 0)
    return;
  while (n > 0 && out[n - 1] == '\0')
    n--;
  for (ssize_t i = 0; i < n; i++)
    if (out[i] == '\0')
      out[i] = ' ';
  out[n] = '\0';
}

/* The text and the JSON (with OOMLENS_JSON) as one output: a refused or
 * failed one leaves neither (report_file.c), with one warning. */
static int publish(const char *text_path, const ol_buf_t *text, const ol_buf_t *json)
{
  if (text->failed || (json && json->failed)) {
    ol_log_warn("out of memory while formatting the report %s; not written", text_path);
    return -1;
  }
  ol_error_t err;
  if (!ol_report_files_write(text_path, text, json, &err)) {
    ol_log_warn("cannot write the report: %s", err.text);
    return -1;
  }
  return 0;
}

static int report_path(char *text_path, size_t cap)
{
  return ol_lifecycle_output_path(ol_option_text(OL_OPT_REPORT), NULL, text_path, cap);
}

#define WRITING_WAIT_S 5 /* the longest a report waits for one in progress */

static pthread_mutex_t writing = PTHREAD_MUTEX_INITIALIZER;

/* The right to write a report, waiting at most WRITING_WAIT_S for one in
 * progress (on a signal): one that takes longer is stuck (a slow file
 * system, a lock a stopped thread holds), and exit must not wait on it. */
static bool lock_writing(void)
{
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += WRITING_WAIT_S;
  if (pthread_mutex_timedlock(&writing, &until) == 0)
    return true;
  static atomic_bool said;
  ol_log_warn_once(&said, "a report being written is stuck; the process goes on without it");
  return false;
}

/* Returns once no report is being written, so that a report started (on a
 * signal) is finished before the process goes away; false if it is stuck. */
bool ol_report_wait(void)
{
  if (!lock_writing())
    return false;
  pthread_mutex_unlock(&writing);
  return true;
}

/* The wall clock to the millisecond the JSON shows, so the text's second
 * and the JSON's time are the same moment, also once read back. */
static double now_unix_ms(void)
{
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  return (double)now.tv_sec + (double)(now.tv_nsec / 1000000) / 1e3;
}

/* Host memory running out leaves the model marked failed (r->failed):
 * rendered, it says so, and nothing is published. */
int ol_report_take(ol_report_t *r, const char *reason)
{
  ol_sites_t **sites = calloc(OL_MAX_DEVICES, sizeof *sites);
  char command[1024];
  if (!sites)
    return -1;
  ol_track_report(r, sites); /* the figures: one moment */
  read_command(command, sizeof command);
  ol_report_set_text(r, &r->version, OL_VERSION_TEXT);
  ol_report_set_text(r, &r->mode, ol_manage_on() ? "manage" : "observe");
  ol_report_set_text(r, &r->reason, reason);
  ol_report_set_text(r, &r->rank, ol_rank_text());
  ol_report_set_text(r, &r->command, command);
  r->pid = (long)getpid();
  r->time_unix = now_unix_ms();
  r->has_stacks = ol_stacks_on();
  if (r->has_stacks)
    ol_report_stacks_now(&r->stacks);
  ol_own_times(&r->own_time);
  for (int d = 0; d < r->device_count; d++)
    name_sites(r, d, sites[d]);
  free(sites);
  return 0;
}

int ol_report_write_all(const char *reason)
{
  char text_path[PATH_MAX];
  ol_report_t report;
  ol_track_oom_settle(-1); /* a failure waiting for its verdict: the report diagnoses it */
  if (!lock_writing())
    return -1;
  if (ol_report_take(&report, reason) != 0) {
    pthread_mutex_unlock(&writing);
    return -1;
  }
  int result = -1;
  if (report_path(text_path, sizeof text_path) != 0) {
    ol_log_warn("report path from OOMLENS_REPORT is too long; no report written");
  } else {
    ol_buf_t text = {0}, json = {0};
    bool with_json = ol_option_bool(OL_OPT_JSON);
    ol_report_render_text(&text, &report);
    if (with_json)
      ol_report_render_json(&json, &report);
    result = publish(text_path, &text, with_json ? &json : NULL);
    if (result == 0)
      ol_log_info("report written to %s", text_path);
    ol_buf_free(&text);
    ol_buf_free(&json);
  }
  ol_report_free(&report);
  pthread_mutex_unlock(&writing);
  return result;
}
