/* harness.h: running a program under liboomlens.so on the simulated CUDA
 * and reading back its JSON report, for the tests that exercise whole
 * processes. Paths come from the environment meson gives each test. */
#ifndef OL_TEST_HARNESS_H
#define OL_TEST_HARNESS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "json.h"
#include "core.h"

typedef struct harness_run {
  int status;  /* exit status, or 128 + signal */
  pid_t pid;
  char out[16384]; /* stdout and stderr, as much as fits */
  int out_fd;      /* harness_spawn's end of the output pipe */
  bool timed_out;  /* harness_finish killed it at its limit */
  double ended_at; /* harness_finish: when it ended */
} harness_run_t;

const char *harness_dir(void); /* a fresh temporary folder per test */
void harness_setup(void);
void harness_teardown(void);
/* Runs argv with LD_PRELOAD=liboomlens.so (unless preload is false), the
 * simulated driver on LD_LIBRARY_PATH, OOMLENS_REPORT=<dir>/r-%p.txt, and
 * the NULL-terminated "NAME=VALUE" list env on top. */
void harness_exec(harness_run_t *run, bool preload, const char *const env[],
                  const char *const argv[]);
/* The same started in the background (harness_spawn), then waited for at
 * most limit_s seconds (harness_finish): a program still running then is
 * killed with SIGKILL and run->timed_out is set, so that a program that
 * hangs fails its test instead of hanging the suite. run->ended_at is
 * when it ended (CLOCK_MONOTONIC seconds). */
void harness_spawn(harness_run_t *run, bool preload, const char *const env[],
                   const char *const argv[]);
void harness_finish(harness_run_t *run, double limit_s);
double harness_now(void); /* CLOCK_MONOTONIC seconds */
const char *harness_env(const char *name); /* fails the test if unset */
/* A small file's text (up to 64 KiB) in a buffer of the harness's, valid
 * until the next call; fails the test when the file cannot be opened. */
const char *harness_read_text(const char *path);
/* Plays tests/data/NAME under the library (tests/progs/trace_player), env
 * on top; the run must succeed. */
void harness_play_trace(harness_run_t *run, const char *name, const char *const env[]);
ol_json_t *harness_report(pid_t pid);      /* NULL if no report */
int harness_count_files(const char *suffix);
int64_t harness_int(const ol_json_t *root, const char *path);

#endif
