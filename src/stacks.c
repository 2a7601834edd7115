/* stacks.c: native call stacks, as call sites.
 *
 * Where did the job ask for this memory? libunwind (opened at run time, so
 * a machine without it just has no stacks) walks the stack at each
 * allocation; frames inside oomlens itself are dropped so a site starts at
 * the caller; the depth is bounded (OOMLENS_STACK_DEPTH), because
 * unwinding is the cost of a profiler. Frames are raw return addresses:
 * names are looked up only when a report is written. */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "ol.h"

#define MAX_SEGMENTS 8

typedef struct range {
  uintptr_t lo, hi;
} range_t;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int (*backtrace_fn)(void **, int);
static range_t own[MAX_SEGMENTS];
static int own_count;

/* Our own executable segments, to tell our frames from the job's. */
static int find_own(struct dl_phdr_info *info, size_t size, void *arg)
{
  (void)size;
  uintptr_t probe = (uintptr_t)arg;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
    if (ph->p_type == PT_LOAD && probe >= lo && probe < hi) {
      for (int j = 0; j < info->dlpi_phnum && own_count < MAX_SEGMENTS; j++) {
        const ElfW(Phdr) *seg = &info->dlpi_phdr[j];
        if (seg->p_type == PT_LOAD && (seg->p_flags & PF_X))
          own[own_count++] = (range_t){info->dlpi_addr + seg->p_vaddr,
                                       info->dlpi_addr + seg->p_vaddr + seg->p_memsz};
      }
      return 1;
    }
  }
  return 0;
}

static void start(void)
{
  backtrace_fn = (int (*)(void **, int))ol_prim_unwinder();
  dl_iterate_phdr(find_own, (void *)(uintptr_t)&start);
  if (!backtrace_fn)
    ol_log_verbose("no libunwind.so.8: call sites are off");
}

static bool ours(uintptr_t pc)
{
  for (int i = 0; i < own_count; i++)
    if (pc >= own[i].lo && pc < own[i].hi)
      return true;
  return false;
}

bool ol_stacks_on(void)
{
  return ol_option_bool(OL_OPT_STACKS);
}

/* The caller's frames, innermost first, at most max; 0 when stacks are off
 * or cannot be taken. */
int ol_stacks_capture(void **frames, int max)
{
  void *raw[OL_STACK_MAX + 16];
  pthread_once(&once, start);
  if (!backtrace_fn)
    return 0;
  int depth = (int)ol_option_size(OL_OPT_STACK_DEPTH);
  if (depth > max)
    depth = max;
  int n = backtrace_fn(raw, depth + 16 < (int)(sizeof raw / sizeof *raw) ? depth + 16
                                                                      : (int)(sizeof raw / sizeof *raw));
  int first = 0;
  while (first < n && ours((uintptr_t)raw[first]))
    first++;
  int kept = n - first < depth ? n - first : depth;
  memcpy(frames, raw + first, (size_t)(kept > 0 ? kept : 0) * sizeof *frames);
  return kept > 0 ? kept : 0;
}

/* "libfoo.so+0x1a2b function" for a return address; the address minus one
 * lies in the call instruction, so the function is the caller's. */
void ol_stacks_describe(const void *frame, char *out, size_t cap)
{
  Dl_info info;
  uintptr_t pc = (uintptr_t)frame - 1;
  if (!dladdr((void *)pc, &info) || !info.dli_fname) {
    snprintf(out, cap, "0x%llx", (unsigned long long)(uintptr_t)frame);
    return;
  }
  const char *base = strrchr(info.dli_fname, '/');
  base = base ? base + 1 : info.dli_fname;
  unsigned long long offset = (unsigned long long)(pc - (uintptr_t)info.dli_fbase);
  if (info.dli_sname)
    snprintf(out, cap, "%s+0x%llx %s", *base ? base : "?", offset, info.dli_sname);
  else
    snprintf(out, cap, "%s+0x%llx", *base ? base : "?", offset);
}
