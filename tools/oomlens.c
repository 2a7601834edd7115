/* oomlens.c: the command line. `oomlens run -- CMD` starts a job with the
 * library preloaded; later commands (report, replay, merge) read what the
 * library wrote. Exit codes: the job's own for run; 2 for a usage error;
 * 126/127 when the command cannot be run, as a shell does. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"

#define EXIT_USAGE 2

int ol_cmd_replay(int argc, char **argv); /* replay_cmd.c */
int ol_cmd_estimate(int argc, char **argv); /* estimate_cmd.c */
int ol_cmd_report(int argc, char **argv);   /* report_cmd.c */
int ol_cmd_merge(int argc, char **argv);    /* merge_cmd.c */
int ol_cmd_export(int argc, char **argv);   /* export_cmd.c */

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
          "      device: peak reserved memory, and whether and where it runs out\n"
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
          "environment (read by the library in the job; bad values warn and keep the default):\n");
  ol_options_print(out);
  fprintf(out,
          "  OOMLENS_LIB              (oomlens run) the library to preload, if not the one\n"
          "                           installed beside this program\n");
}

static void print_run_help(FILE *out)
{
  fprintf(out, "usage: oomlens run [--manage] [--capacity SIZE] [--report PATH] [--stacks]\n"
               "                   [--trace PATH] [--] CMD [ARGS...]\n"
               "\n"
               "Runs CMD with liboomlens.so preloaded. The report is written when each\n"
               "process that used CUDA exits, and on SIGUSR1.\n"
               "\n"
               "  --manage        oomlens's allocator serves device memory (sets\n"
               "                  OOMLENS_MANAGE=1 and PYTORCH_NO_CUDA_MEMORY_CACHING=1,\n"
               "                  so that every PyTorch tensor reaches it)\n"
               "  --capacity SIZE make every device look SIZE large (e.g. 24G; sets\n"
               "                  OOMLENS_CAPACITY): does the job fit a smaller card?\n"
               "  --report PATH   where to write the report (sets OOMLENS_REPORT);\n"
               "                  %%p is the pid, %%r the rank\n"
               "  --stacks        record call sites: which code holds the memory at the\n"
               "                  peak (sets OOMLENS_STACKS=1)\n"
               "  --trace PATH    write every allocation event to PATH while the job runs,\n"
               "                  for oomlens export and replay (sets OOMLENS_TRACE);\n"
               "                  %%p is the pid, %%r the rank\n");
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

static int command_run(int argc, char **argv)
{
  int i = 0;
  while (i < argc && argv[i][0] == '-') {
    if (strcmp(argv[i], "--") == 0) {
      i++;
      break;
    }
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      print_run_help(stdout);
      return 0;
    }
    if (strcmp(argv[i], "--manage") == 0) {
      /* Our pool serves every tensor only if PyTorch's cache is off. */
      setenv("OOMLENS_MANAGE", "1", 1);
      setenv("PYTORCH_NO_CUDA_MEMORY_CACHING", "1", 1);
      i++;
      continue;
    }
    if (strcmp(argv[i], "--capacity") == 0 && i + 1 < argc) {
      uint64_t bytes;
      if (!ol_parse_size(argv[i + 1], &bytes) || bytes == 0) {
        fprintf(stderr, "oomlens run: --capacity %s: expected a size such as 24G\n", argv[i + 1]);
        return EXIT_USAGE;
      }
      setenv("OOMLENS_CAPACITY", argv[i + 1], 1);
      i += 2;
      continue;
    }
    if (strcmp(argv[i], "--report") == 0 && i + 1 < argc) {
      setenv("OOMLENS_REPORT", argv[i + 1], 1);
      i += 2;
      continue;
    }
    if (strcmp(argv[i], "--stacks") == 0) {
      setenv("OOMLENS_STACKS", "1", 1);
      i++;
      continue;
    }
    if (strcmp(argv[i], "--trace") == 0 && i + 1 < argc && argv[i + 1][0]) {
      setenv("OOMLENS_TRACE", argv[i + 1], 1);
      i += 2;
      continue;
    }
    fprintf(stderr, "oomlens run: unknown option %s\n", argv[i]);
    print_run_help(stderr);
    return EXIT_USAGE;
  }
  if (i >= argc) {
    fprintf(stderr, "oomlens run: no command given\n");
    print_run_help(stderr);
    return EXIT_USAGE;
  }
  char library[PATH_MAX];
  if (!find_library(library, sizeof library))
    return EXIT_USAGE;
  if (!add_preload(library)) {
    fprintf(stderr, "oomlens run: cannot set LD_PRELOAD\n");
    return EXIT_USAGE;
  }
  execvp(argv[i], argv + i);
  int err = errno;
  fprintf(stderr, "oomlens run: %s: %s\n", argv[i], strerror(err));
  return err == ENOENT ? 127 : 126;
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    print_main_help(stderr);
    return EXIT_USAGE;
  }
  const char *command = argv[1];
  if (strcmp(command, "--help") == 0 || strcmp(command, "-h") == 0 ||
      strcmp(command, "help") == 0) {
    print_main_help(stdout);
    return 0;
  }
  if (strcmp(command, "--version") == 0) {
    printf("oomlens %s\n", OL_VERSION_TEXT);
    return 0;
  }
  if (strcmp(command, "run") == 0)
    return command_run(argc - 2, argv + 2);
  if (strcmp(command, "replay") == 0) return ol_cmd_replay(argc - 2, argv + 2);
  if (strcmp(command, "estimate") == 0) return ol_cmd_estimate(argc - 2, argv + 2);
  if (strcmp(command, "report") == 0) return ol_cmd_report(argc - 2, argv + 2);
  if (strcmp(command, "merge") == 0) return ol_cmd_merge(argc - 2, argv + 2);
  if (strcmp(command, "export") == 0) return ol_cmd_export(argc - 2, argv + 2);
  fprintf(stderr, "oomlens: unknown command '%s' (see oomlens --help)\n", command);
  return EXIT_USAGE;
}
