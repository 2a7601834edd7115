/* oomlens.c: the command line. `oomlens run -- CMD` starts a job with the
 * library preloaded; later commands (report, replay, merge) read what the
 * library wrote. Every command parses its words with args.c. Exit codes:
 * the job's own for run; 2 for a usage error; 1 when oomlens itself
 * fails; 126/127 when the command cannot be run, as a shell does. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "commands.h"
#include "core.h"

static void print_main_help(FILE *out)
{
  fprintf(out,
          "usage: oomlens [--help | --version] COMMAND [ARGS]\n"
          "\n"
          "Finds out why CUDA jobs run out of memory. Prefix a training command with\n"
          "`oomlens run --` and read the report it leaves behind.\n"
          "\n"
          "commands:\n"
          "  run [--manage] [--capacity SIZE] [--report PATH] [--stacks] [--trace PATH]\n"
          "      [--] CMD [ARGS...]\n"
          "      run CMD with liboomlens.so preloaded (appended to any LD_PRELOAD);\n"
          "      exits with CMD's exit status\n"
          "  replay TRACE [--capacity SIZE] [--policy NAME] [--max-split-size SIZE] [--json]\n"
          "      run a recorded allocation trace through an allocator on a simulated\n"
          "      device: peak reserved, driver calls, whether and where it runs out\n"
          "  export TRACE --format folded|memory-viz|perfetto|rmm-csv [--max-entries N]\n"
          "      [-o OUT]\n"
          "      write a trace as flame graph stacks, PyTorch's memory_viz snapshot,\n"
          "      Perfetto/Chrome JSON or RMM's allocation log\n"
          "  estimate [--params N] [--batch B] [--seq L] [--hidden H] [--layers N] ...\n"
          "      pre-flight estimate of a training job's peak device memory, whether it\n"
          "      fits, the largest batch that does, and what would bring it down\n"
          "  report FILE [--html OUT.html]\n"
          "      print a JSON report (or a trace) as the text report, or write it as\n"
          "      one self-contained HTML page with memory over time\n"
          "  merge [--json] REPORT.json...\n"
          "      the reports of several ranks side by side: peaks, OOMs, which rank\n"
          "      ran out first, how unequal they were\n"
          "\n"
          "Every option takes its value as the next word or after '=' (--capacity=24G);\n"
          "-- ends the options; COMMAND --help lists its own. A SIZE is bytes, or a number\n"
          "with K, M, G or T (powers of 1024), a fraction too: 512M, 24G, 1.5G, 0.5T.\n"
          "\n"
          "environment (read by the library in the job; bad values warn and keep the default):\n");
  ol_options_print(out);
  fprintf(out,
          "  OOMLENS_LIB              (oomlens run) the library to preload, if not the one\n"
          "                           installed beside this program\n");
}

static void print_run_help(FILE *out)
{
  fprintf(out, "usage: oomlens run [--manage] [--capacity SIZE] [--report PATH] [--stacks]\n"
               "                   [--trace PATH] [--batch N] [--] CMD [ARGS...]\n"
               "\n"
               "Runs CMD with liboomlens.so preloaded. The report is written when each\n"
               "process that used CUDA exits, and on SIGUSR1.\n"
               "\n"
               "  --manage        oomlens's allocator serves device memory (sets\n"
               "                  OOMLENS_MANAGE=1 and PYTORCH_NO_CUDA_MEMORY_CACHING=1,\n"
               "                  so that every PyTorch tensor reaches it)\n"
               "  --capacity SIZE make every device look SIZE large (e.g. 24G or 1.5G;\n"
               "                  sets OOMLENS_CAPACITY): does the job fit a smaller card?\n"
               "  --report PATH   where to write the report (sets OOMLENS_REPORT);\n"
               "                  %%p is the pid, %%r the rank\n"
               "  --stacks        record call sites: which code holds the memory at the\n"
               "                  peak (sets OOMLENS_STACKS=1)\n"
               "  --trace PATH    write every allocation event to PATH while the job runs,\n"
               "                  for oomlens export and replay (sets OOMLENS_TRACE);\n"
               "                  %%p is the pid, %%r the rank\n"
               "  --batch N       the job's batch size (sets OOMLENS_BATCH), so that an\n"
               "                  out-of-memory's advice names the batch that fits\n");
}

static bool readable(const char *path)
{
  return access(path, R_OK) == 0;
}

/* The library beside this program: the build tree (tools/ next to src/) or
 * an installed prefix (bin/ next to lib/). */
static bool find_library(char *out, size_t cap)
{
  const char *env = getenv("OOMLENS_LIB");
  if (env && *env) {
    if (!realpath(env, out) || !readable(out)) {
      fprintf(stderr, "oomlens: OOMLENS_LIB=%s: no such library\n", env);
      return false;
    }
    return true;
  }
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash)
      *slash = '\0';
    const char *const relative[] = {"/../src/liboomlens.so", "/../lib/liboomlens.so",
                                    "/liboomlens.so"};
    for (size_t i = 0; i < sizeof relative / sizeof *relative; i++) {
      char candidate[PATH_MAX + 64];
      snprintf(candidate, sizeof candidate, "%s%s", exe, relative[i]);
      if (readable(candidate) && realpath(candidate, out))
        return true;
    }
  }
  snprintf(out, cap, "%s/liboomlens.so", OL_LIBDIR);
  if (readable(out))
    return true;
  fprintf(stderr, "oomlens: cannot find liboomlens.so; set OOMLENS_LIB to its path\n");
  return false;
}

/* Appends the library to LD_PRELOAD unless it is already there. */
static bool add_preload(const char *library)
{
  const char *old = getenv("LD_PRELOAD");
  if (!old || !*old)
    return setenv("LD_PRELOAD", library, 1) == 0;
  if (strstr(old, library))
    return true;
  size_t len = strlen(old) + strlen(library) + 2;
  char *joined = malloc(len);
  if (!joined)
    return false;
  snprintf(joined, len, "%s %s", old, library);
  bool ok = setenv("LD_PRELOAD", joined, 1) == 0;
  free(joined);
  return ok;
}

typedef struct run_args {
  bool manage, stacks;
  const char *capacity, *report, *trace;
  uint64_t batch; /* 0: not given */
} run_args_t;

/* A size kept as written, for OOMLENS_CAPACITY: the library reads it with
 * the same ol_parse_size. */
static bool parse_size_text(const char *text, void *field, const void *data)
{
  uint64_t bytes;
  if (!ol_arg_parse_size(text, &bytes, NULL) || bytes == 0)
    return false;
  *(const char **)field = text;
  return true;
}

static const ol_arg_type_t size_text = {"size", "expected a size above 0 such as 24G or 1.5G",
                                        parse_size_text};

static const ol_opt_t run_opts[] = {
  OL_FLAG("--manage", run_args_t, manage),
  OL_VALUE("--capacity", &size_text, run_args_t, capacity),
  OL_VALUE("--report", &ol_arg_text, run_args_t, report),
  OL_FLAG("--stacks", run_args_t, stacks),
  OL_VALUE("--trace", &ol_arg_text, run_args_t, trace),
  OL_VALUE("--batch", &ol_arg_batch, run_args_t, batch),
  {0},
};

/* The options become the variables the library reads. false if the
 * environment cannot hold them (out of memory). */
static bool set_run_env(const run_args_t *a)
{
  bool ok = true;
  if (a->manage) {
    /* Our pool serves every tensor only if PyTorch's cache is off. */
    ok &= setenv("OOMLENS_MANAGE", "1", 1) == 0;
    ok &= setenv("PYTORCH_NO_CUDA_MEMORY_CACHING", "1", 1) == 0;
  }
  if (a->capacity)
    ok &= setenv("OOMLENS_CAPACITY", a->capacity, 1) == 0;
  if (a->report)
    ok &= setenv("OOMLENS_REPORT", a->report, 1) == 0;
  if (a->stacks)
    ok &= setenv("OOMLENS_STACKS", "1", 1) == 0;
  if (a->trace)
    ok &= setenv("OOMLENS_TRACE", a->trace, 1) == 0;
  if (a->batch) {
    char batch[24];
    snprintf(batch, sizeof batch, "%llu", (unsigned long long)a->batch);
    ok &= setenv("OOMLENS_BATCH", batch, 1) == 0;
  }
  return ok;
}

static int command_run(int argc, char **argv)
{
  static const ol_cmd_t cmd = {"run", run_opts, print_run_help, true};
  run_args_t a = {0};
  int n, status;
  if (!ol_args_take(&cmd, argc, argv, &a, &n, &status))
    return status;
  if (n == 0)
    return ol_args_usage("run", "no command given");
  char library[PATH_MAX];
  if (!find_library(library, sizeof library))
    return OL_EXIT_USAGE; /* OOMLENS_LIB names no library, or none beside us: said above */
  if (!set_run_env(&a) || !add_preload(library)) {
    fprintf(stderr, "oomlens run: cannot set the environment (LD_PRELOAD, OOMLENS_*)\n");
    return OL_EXIT_FAILURE;
  }
  execvp(argv[0], argv);
  int err = errno;
  fprintf(stderr, "oomlens run: %s: %s\n", argv[0], strerror(err));
  return err == ENOENT ? OL_EXIT_NOT_FOUND : OL_EXIT_CANNOT_RUN;
}

typedef struct main_args {
  bool version;
} main_args_t;

static const ol_opt_t main_opts[] = {
  OL_FLAG("--version", main_args_t, version),
  {0},
};

static const struct {
  const char *name;
  int (*run)(int argc, char **argv);
} commands[] = {
  {"run", command_run},         {"replay", ol_cmd_replay}, {"estimate", ol_cmd_estimate},
  {"report", ol_cmd_report},    {"merge", ol_cmd_merge},   {"export", ol_cmd_export},
};

int main(int argc, char **argv)
{
  static const ol_cmd_t cmd = {"", main_opts, print_main_help, true};
  if (argc < 2) {
    print_main_help(stderr);
    return OL_EXIT_USAGE;
  }
  main_args_t a = {0};
  int n, status;
  if (!ol_args_take(&cmd, argc - 1, argv + 1, &a, &n, &status))
    return status;
  if (a.version) {
    printf("oomlens %s\n", OL_VERSION_TEXT);
    return 0;
  }
  if (n == 0)
    return ol_args_usage("", "no command given");
  const char *command = argv[1]; /* the operands are at argv + 1 now */
  if (strcmp(command, "help") == 0) {
    print_main_help(stdout);
    return 0;
  }
  for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
    if (strcmp(command, commands[i].name) == 0)
      return commands[i].run(n - 1, argv + 2);
  return ol_args_usage("", "unknown command '%s'", command);
}
