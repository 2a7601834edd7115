/* lifecycle.c: when oomlens starts, what it does at fork, on SIGUSR1 and at
 * exit.
 *
 * Nothing happens at load time: the first interposed call starts oomlens
 * (options read, fork handlers, the report signal), because work in a
 * constructor can deadlock inside some host processes, and a process that
 * never touches CUDA should not notice us at all. The signal handler only
 * posts a semaphore; a thread of ours with every signal blocked writes the
 * report, so the job's threads are never interrupted for long and nothing
 * unsafe runs in signal context.
 *
 * A SIGTERM or SIGINT of ours always ends the job, and soon: every wait
 * on its way is bounded (the trace's writer 1 s, metrics 1 s), and a
 * second thread of ours, which takes no lock at all, passes the signal on
 * ENDING_LIMIT_MS after it came whatever the report thread is doing (a
 * lock held by a thread that cannot go on would otherwise hold the
 * report, and the job, forever). A second such signal ends it at once. */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib.h"

enum { NOT_STARTED, ENABLED, DISABLED };

#define ENDING_LIMIT_MS 5000 /* the longest a SIGTERM/SIGINT of ours waits for the report (README) */

static atomic_int state = NOT_STARTED;
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
static bool fork_handlers_installed;
static bool signal_installed;
static atomic_bool forked_child;
static sem_t report_requests;
static sem_t ending_requests; /* posted with an ending signal, for the watchdog */

/* A terminating signal to pass on once its report is written; 0: none. */
static volatile sig_atomic_t ending_signal;

static volatile pid_t reporter_pid; /* the process whose thread writes reports */

/* Hands the signal back to its default action at once (async-signal-safe). */
static void pass_on_now(int sig)
{
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, NULL);
  kill(getpid(), sig);
}

static void on_report_signal(int sig)
{
  int saved = errno;
  if (getpid() != reporter_pid) {
    /* A forked child, before its fork handler restored the defaults: no
     * thread of ours will write anything here. */
    if (sig != SIGUSR1)
      pass_on_now(sig);
  } else if (sig != SIGUSR1 && ending_signal) {
    pass_on_now(sig); /* asked twice: the job ends now */
  } else {
    if (sig != SIGUSR1) {
      ending_signal = sig;
      sem_post(&ending_requests);
    }
    sem_post(&report_requests);
  }
  errno = saved;
}

/* SIGTERM (a scheduler's time limit) or SIGINT: the report first, then the
 * signal's own default action, so the job ends exactly as it would have. */
static void end_with(int sig)
{
  ol_track_oom_settle(-1); /* a failure still waiting was the job's last word */
  ol_metrics_stop(); /* the metrics file's last figures too */
  ol_tracefile_close();
  ol_report_write_all(sig == SIGTERM ? "SIGTERM" : "SIGINT");
  signal(sig, SIG_DFL);
  kill(getpid(), sig);
}

static void *reporter_main(void *arg)
{
  (void)arg;
  for (;;) {
    while (sem_wait(&report_requests) != 0 && errno == EINTR)
      ;
    int sig = ending_signal;
    if (sig) {
      end_with(sig);
    } else {
      ol_track_oom_settle(-1); /* the report diagnoses what waits, and the trace has its line */
      ol_tracefile_flush();
      ol_report_write_all("signal");
    }
  }
  return NULL;
}

static void sleep_ms(unsigned ms)
{
  struct timespec left = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&left, &left) != 0 && errno == EINTR)
    ;
}

/* The watchdog: an ending signal's default action, ENDING_LIMIT_MS after
 * it came, if the report thread has not passed it on by then. It holds
 * and takes no lock, so nothing another thread holds can stop it. */
static void *ender_main(void *arg)
{
  (void)arg;
  while (sem_wait(&ending_requests) != 0)
    if (errno != EINTR)
      return NULL;
  sleep_ms(ENDING_LIMIT_MS);
  pass_on_now(ending_signal);
  return NULL;
}

/* Our threads (reporter, trace writer, metrics) block every signal, so a
 * signal meant for the job is never delivered to one of ours; detached,
 * since nobody joins them. */
bool ol_lifecycle_start_thread(void *(*main_fn)(void *), void *arg)
{
  sigset_t all, old;
  pthread_t thread;
  pthread_attr_t attr;
  sigfillset(&all);
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int err = pthread_create(&thread, &attr, main_fn, arg);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&attr);
  return err == 0;
}

int ol_lifecycle_output_path(const char *pattern, const char *keep_ext, char *out, size_t cap)
{
  return ol_output_path(pattern, (long)getpid(), ol_rank_text(), ol_lifecycle_forked_child(),
                        keep_ext, out, cap);
}

static bool start_reporter(void)
{
  reporter_pid = getpid();
  return ol_lifecycle_start_thread(reporter_main, NULL);
}

/* The ending signals are ours only with their watchdog running. */
static bool start_ender(void)
{
  return sem_init(&ending_requests, 0, 0) == 0 && ol_lifecycle_start_thread(ender_main, NULL);
}

/* SIGUSR1 is ours only if the job left it at its default (which would kill
 * the job); a handler the job installed, or SIG_IGN, is respected. */
static void install_report_signal(void)
{
  struct sigaction current, ours;
  if (sigaction(SIGUSR1, NULL, &current) != 0)
    return;
  if (!signal_installed && current.sa_handler != SIG_DFL) {
    ol_log_verbose("SIGUSR1 already handled by the job; report on signal is off");
    return;
  }
  if (sem_init(&report_requests, 0, 0) != 0 || !start_reporter()) {
    ol_log_warn("cannot start the report thread; SIGUSR1 reports are off");
    return;
  }
  memset(&ours, 0, sizeof ours);
  ours.sa_handler = on_report_signal;
  ours.sa_flags = SA_RESTART;
  sigemptyset(&ours.sa_mask);
  if (sigaction(SIGUSR1, &ours, NULL) == 0)
    signal_installed = true;
  /* The same for the signals that end a job, where the job left them at
   * their default (Python handles SIGINT itself: then it is left alone). */
  if (!start_ender()) {
    ol_log_warn("cannot start the watchdog thread; no report on SIGTERM or SIGINT");
    return;
  }
  static const int ending[] = {SIGTERM, SIGINT};
  for (size_t i = 0; i < sizeof ending / sizeof *ending; i++)
    if (sigaction(ending[i], NULL, &current) == 0 && current.sa_handler == SIG_DFL)
      sigaction(ending[i], &ours, NULL);
}

static void before_fork(void)
{
  ol_track_lock();
}

static void after_fork_in_parent(void)
{
  ol_track_unlock();
}

/* The child has no report thread until it uses CUDA: our handlers would
 * swallow its signals (a SIGTERM would never end it), so it gets the
 * defaults back, and ours again if it starts. */
static void restore_default_signals(void)
{
  static const int ours_only[] = {SIGUSR1, SIGTERM, SIGINT};
  for (size_t i = 0; i < sizeof ours_only / sizeof *ours_only; i++) {
    struct sigaction current;
    if (sigaction(ours_only[i], NULL, &current) == 0 && current.sa_handler == on_report_signal)
      signal(ours_only[i], SIG_DFL);
  }
  signal_installed = false;
  ending_signal = 0;
}

/* The child owns none of the parent's device memory and has none of its
 * threads: forget the parent's records and start again on first use. */
static void after_fork_in_child(void)
{
  ol_track_unlock();
  ol_track_reset();
  ol_metrics_forget();
  ol_tracefile_forget();
  restore_default_signals();
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  start_lock = fresh;
  atomic_store(&forked_child, true);
  atomic_store(&state, NOT_STARTED);
}

static void start(void)
{
  if (!ol_option_bool(OL_OPT_ENABLE)) {
    atomic_store(&state, DISABLED);
    return;
  }
  if (!fork_handlers_installed)
    fork_handlers_installed =
      pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child) == 0;
  if (ol_option_bool(OL_OPT_SIGNAL))
    install_report_signal();
  ol_metrics_start();
  ol_tracefile_start();
  ol_log_verbose("observing CUDA allocations in pid %ld", (long)getpid());
  atomic_store(&state, ENABLED);
}

bool ol_lifecycle_enabled(void)
{
  int now = atomic_load_explicit(&state, memory_order_acquire);
  if (__builtin_expect(now != NOT_STARTED, 1))
    return now == ENABLED;
  pthread_mutex_lock(&start_lock);
  if (atomic_load(&state) == NOT_STARTED)
    start();
  pthread_mutex_unlock(&start_lock);
  return atomic_load(&state) == ENABLED;
}

bool ol_lifecycle_forked_child(void)
{
  return atomic_load(&forked_child);
}

void ol_lifecycle_at_exit(void)
{
  if (atomic_load(&state) != ENABLED)
    return;
  /* A report begun on SIGUSR1 is finished first, if it can be; one that is
   * stuck is not waited for twice. */
  bool reports_free = ol_report_wait();
  /* A failure still waiting for its verdict was the job's last: no retry
   * came (a program that caught its error and ended). Settled before the
   * trace closes, so it has the line. */
  ol_track_oom_settle(-1);
  ol_metrics_stop();
  ol_tracefile_close();
  if (!ol_track_seen_activity())
    return;
  if (reports_free && ol_option_bool(OL_OPT_REPORT_AT_EXIT))
    ol_report_write_all("exit");
}
