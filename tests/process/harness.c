/* harness.c: see harness.h. */
#include "harness.h"
#include "check_run.h"

#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char dir[PATH_MAX];

const char *harness_dir(void)
{
  return dir;
}

const char *harness_env(const char *name)
{
  const char *value = getenv(name);
  ck_assert_msg(value && *value, "%s is not set (run the tests with meson test)", name);
  return value;
}

const char *harness_read_text(const char *path)
{
  static char text[65536];
  FILE *f = fopen(path, "r");
  ck_assert_msg(f, "cannot open %s", path);
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = '\0';
  return text;
}

void harness_setup(void)
{
  ol_test_make_dir(dir, sizeof dir, "run");
}

void harness_teardown(void)
{
  if (!ol_test_remove_tree(dir))
    fprintf(stderr, "could not remove %s\n", dir);
}

static void child(bool preload, const char *const env[], const char *const argv[], int out)
{
  char pattern[PATH_MAX + 16];
  snprintf(pattern, sizeof pattern, "%s/r-%%p.txt", dir);
  setenv("OOMLENS_REPORT", pattern, 1);
  setenv("LD_LIBRARY_PATH", harness_env("OOMLENS_TEST_SIMDIR"), 1);
  if (preload)
    setenv("LD_PRELOAD", harness_env("OOMLENS_TEST_LIB"), 1);
  else
    unsetenv("LD_PRELOAD");
  for (size_t i = 0; env && env[i]; i++)
    putenv((char *)env[i]);
  dup2(out, STDOUT_FILENO);
  dup2(out, STDERR_FILENO);
  execvp(argv[0], (char *const *)argv);
  _exit(127);
}

/* The program started with its output (stdout and stderr) on a pipe; the
 * pipe's read end. */
static int start(bool preload, const char *const env[], const char *const argv[], pid_t *pid)
{
  int pipe_fds[2];
  ck_assert_int_eq(pipe(pipe_fds), 0);
  *pid = fork();
  ck_assert_int_ge(*pid, 0);
  if (*pid == 0) {
    close(pipe_fds[0]);
    child(preload, env, argv, pipe_fds[1]);
  }
  close(pipe_fds[1]);
  return pipe_fds[0];
}

void harness_exec(harness_run_t *run, bool preload, const char *const env[],
                  const char *const argv[])
{
  pid_t pid;
  int out = start(preload, env, argv, &pid);
  size_t len = 0;
  ssize_t n;
  char sink[4096];
  while ((n = read(out, len + 1 < sizeof run->out ? run->out + len : sink,
                   len + 1 < sizeof run->out ? sizeof run->out - 1 - len : sizeof sink)) > 0)
    if (len + 1 < sizeof run->out)
      len += (size_t)n;
  close(out);
  run->out[len] = '\0';
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  run->pid = pid;
  run->status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

double harness_now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void harness_spawn(harness_run_t *run, bool preload, const char *const env[],
                   const char *const argv[])
{
  pid_t pid;
  int out = start(preload, env, argv, &pid);
  fcntl(out, F_SETFL, O_NONBLOCK);
  run->pid = pid;
  run->out_fd = out;
  run->out[0] = '\0';
  run->timed_out = false;
}

/* What the program wrote so far, kept as far as it fits. */
static void take_output(harness_run_t *run, size_t *len)
{
  char sink[4096];
  ssize_t n;
  for (;;) {
    bool room = *len + 1 < sizeof run->out;
    n = read(run->out_fd, room ? run->out + *len : sink, room ? sizeof run->out - 1 - *len : sizeof sink);
    if (n <= 0)
      break;
    if (room)
      *len += (size_t)n;
  }
  run->out[*len] = '\0';
}

void harness_finish(harness_run_t *run, double limit_s)
{
  double deadline = harness_now() + limit_s;
  size_t len = 0;
  int status;
  pid_t got;
  while ((got = waitpid(run->pid, &status, WNOHANG)) == 0) {
    take_output(run, &len);
    if (harness_now() > deadline && !run->timed_out) {
      run->timed_out = true;
      kill(run->pid, SIGKILL);
    }
    usleep(2000);
  }
  run->ended_at = harness_now();
  ck_assert_int_eq(got, run->pid);
  take_output(run, &len);
  close(run->out_fd);
  run->status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void harness_play_trace(harness_run_t *run, const char *name, const char *const env[])
{
  char trace[PATH_MAX];
  snprintf(trace, sizeof trace, "%s/%s", harness_env("OOMLENS_TEST_DATA"), name);
  const char *argv[] = {harness_env("OOMLENS_TEST_PLAYER"), trace, NULL};
  harness_exec(run, true, env, argv);
  ck_assert_msg(run->status == 0, "exit %d:\n%s", run->status, run->out);
}

ol_json_t *harness_report(pid_t pid)
{
  char path[PATH_MAX + 32];
  ol_error_t err;
  snprintf(path, sizeof path, "%s/r-%ld.json", dir, (long)pid);
  if (access(path, F_OK) != 0)
    return NULL;
  ol_json_t *root = ol_json_parse_file(path, &err);
  ck_assert_msg(root, "report %s does not parse: %s", path, err.text);
  return root;
}

int harness_count_files(const char *suffix)
{
  int n = 0;
  DIR *d = opendir(dir);
  struct dirent *e;
  size_t slen = strlen(suffix);
  while (d && (e = readdir(d))) {
    size_t len = strlen(e->d_name);
    n += len >= slen && strcmp(e->d_name + len - slen, suffix) == 0;
  }
  if (d)
    closedir(d);
  return n;
}

int64_t harness_int(const ol_json_t *root, const char *path)
{
  int64_t value;
  const ol_json_t *node = ol_json_path(root, path);
  ck_assert_msg(node && ol_json_int64(node, &value), "no integer at %s", path);
  return value;
}
