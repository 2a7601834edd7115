/* symbolize.c: the source file and line of a native frame, and C++ names
 * demangled, for the text of reports and traces (stacks.c names frames).
 *
 * Only ever at report time, never in an allocation hook: it opens and
 * reads ELF and DWARF files. elfutils' libdw.so.1 does the work through
 * its dwfl interface (the process's modules as /proc/self/maps lists them,
 * debug info from the binary itself or from its separate debug file). It
 * is opened at run time, like libunwind: without it, or with
 * OOMLENS_SOURCE_LINES=0, frames simply carry no file:line. We declare the
 * few dwfl types and functions ourselves rather than need libdw's headers
 * to build: they are elfutils' stable ABI (soname libdw.so.1).
 *
 * One dwfl session serves the whole process, under a lock (the trace
 * writer's thread and a report may name frames at once). It learns the
 * modules once and again only when the dynamic linker has loaded more
 * since (dlpi_adds), so a library the job opened late is found; libdw
 * keeps each module's line tables once read, so naming the frames of many
 * sites costs one table read per module plus a search per frame. */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "lib.h"
#include "prim.h"

typedef struct Dwfl dwfl_t;
typedef struct Dwfl_Module dwfl_module_t;
typedef struct Dwfl_Line dwfl_line_t;

/* libdwfl.h's Dwfl_Callbacks: four pointers, filled with libdw's own
 * callbacks and handed back to it; we never call through them. */
typedef struct dwfl_callbacks {
  void *find_elf, *find_debuginfo, *section_address;
  char **debuginfo_path;
} dwfl_callbacks_t;

static struct {
  dwfl_t *(*begin)(const dwfl_callbacks_t *);
  void (*report_begin)(dwfl_t *);
  int (*linux_proc_report)(dwfl_t *, pid_t);
  int (*report_end)(dwfl_t *, void *removed, void *arg);
  dwfl_module_t *(*addrmodule)(dwfl_t *, uint64_t);
  dwfl_line_t *(*module_getsrc)(dwfl_module_t *, uint64_t);
  const char *(*lineinfo)(dwfl_line_t *, uint64_t *, int *, int *, uint64_t *, uint64_t *);
} dw;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static dwfl_callbacks_t callbacks;
static bool usable;
static dwfl_t *session;
static unsigned long long modules_seen; /* dlpi_adds when the modules were listed */

/* The fork child cannot know whether a parent thread held the lock: it
 * starts a fresh lock and session (the old one is left, not freed: it may
 * be half updated). */
static void forget_in_child(void)
{
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  memcpy(&lock, &fresh, sizeof lock);
  session = NULL;
  modules_seen = 0;
}

static bool find_functions(void *lib)
{
  void **slots[] = {(void **)&dw.begin, (void **)&dw.report_begin,
                    (void **)&dw.linux_proc_report, (void **)&dw.report_end,
                    (void **)&dw.addrmodule, (void **)&dw.module_getsrc, (void **)&dw.lineinfo};
  static const char *const names[] = {"dwfl_begin", "dwfl_report_begin",
                                      "dwfl_linux_proc_report", "dwfl_report_end",
                                      "dwfl_addrmodule", "dwfl_module_getsrc", "dwfl_lineinfo"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    if (!(*slots[i] = ol_prim_dlsym(lib, names[i])))
      return false;
  callbacks.find_elf = ol_prim_dlsym(lib, "dwfl_linux_proc_find_elf");
  callbacks.find_debuginfo = ol_prim_dlsym(lib, "dwfl_standard_find_debuginfo");
  callbacks.section_address = ol_prim_dlsym(lib, "dwfl_offline_section_address");
  return callbacks.find_elf && callbacks.find_debuginfo && callbacks.section_address;
}

static void start(void)
{
  if (!ol_option_bool(OL_OPT_SOURCE_LINES))
    return;
  void *lib = ol_prim_open_library("libdw.so.1");
  usable = lib && find_functions(lib);
  if (!usable)
    ol_log_verbose("no libdw.so.1: native frames without file:line");
  pthread_atfork(NULL, NULL, forget_in_child);
}

static int count_loads(struct dl_phdr_info *info, size_t size, void *arg)
{
  if (size < offsetof(struct dl_phdr_info, dlpi_adds) + sizeof info->dlpi_adds)
    return 1; /* a loader without the counter: listed once */
  *(unsigned long long *)arg = info->dlpi_adds;
  return 1; /* the counter is the same in every entry */
}

/* The session, its modules current with what is loaded now; NULL when
 * libdw cannot list them. Under the lock. */
static dwfl_t *current_session(void)
{
  unsigned long long loads = 1;
  dl_iterate_phdr(count_loads, &loads);
  if (session && loads == modules_seen)
    return session;
  if (!session && !(session = dw.begin(&callbacks)))
    return NULL;
  dw.report_begin(session);
  int failed = dw.linux_proc_report(session, getpid());
  dw.report_end(session, NULL, NULL);
  modules_seen = failed ? 0 : loads;
  return session;
}

bool ol_symbolize_line(const void *return_address, char *file, size_t cap, int *line)
{
  pthread_once(&once, start);
  if (!usable || !return_address)
    return false;
  uint64_t pc = (uint64_t)(uintptr_t)return_address - 1; /* inside the call */
  const char *path = NULL;
  pthread_mutex_lock(&lock);
  dwfl_t *dwfl = current_session();
  dwfl_module_t *module = dwfl ? dw.addrmodule(dwfl, pc) : NULL;
  dwfl_line_t *src = module ? dw.module_getsrc(module, pc) : NULL;
  *line = 0;
  if (src)
    path = dw.lineinfo(src, NULL, line, NULL, NULL, NULL);
  if (path && *line > 0) {
    const char *base = strrchr(path, '/');
    snprintf(file, cap, "%s", base && base[1] ? base + 1 : path);
  }
  pthread_mutex_unlock(&lock);
  return path && *line > 0;
}

bool ol_symbolize_demangle(const char *name, char *out, size_t cap)
{
  typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);
  if (!name || strncmp(name, "_Z", 2) != 0)
    return false;
  /* Only a libstdc++ the job already loaded: not worth loading for this. */
  demangle_fn demangle = (demangle_fn)ol_prim_dlsym(RTLD_DEFAULT, "__cxa_demangle");
  int status = -1;
  char *plain = demangle ? demangle(name, NULL, NULL, &status) : NULL;
  bool ok = plain && status == 0;
  if (ok)
    snprintf(out, cap, "%s", plain);
  free(plain);
  return ok;
}
