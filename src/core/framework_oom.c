/* framework_oom.c: what a framework's own out-of-memory message says.
 *
 * PyTorch can refuse a request without asking the device: under
 * torch.cuda.set_per_process_memory_fraction its caching allocator stops
 * at "N allowed" and raises c10::OutOfMemoryError though no cudaMalloc
 * failed, so no hook of ours saw a failure. The library sees the exception
 * thrown (lib/intercept.c) and hands its message here. The message is
 * PyTorch's (c10/cuda/CUDACachingAllocator.cpp): "CUDA out of memory.
 * Tried to allocate 1.54 GiB. GPU 0 has a total capacity of ... 10.00 GiB
 * allowed; ...", sizes as its format_size prints them (bytes, or KiB, MiB,
 * GiB with two decimals), so a size read back is within half a hundredth
 * of its unit. When the device refused (a cudaMalloc of ours failed) the
 * same message says what PyTorch's cache held: "Of the allocated memory
 * 3.96 GiB is allocated by PyTorch, and 3.76 GiB is reserved by PyTorch but
 * unallocated", which no hook of ours can see (the cache's free blocks are
 * inside its segments). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

/* A size as format_size prints it, starting at text: "1.54 GiB",
 * "512 bytes". 0: not a size. */
static uint64_t printed_size(const char *text)
{
  char *end;
  double value = strtod(text, &end);
  if (end == text || !(value >= 0) || value > 1e15 || *end != ' ')
    return 0;
  static const struct {
    const char *unit;
    double scale;
  } units[] = {{"bytes", 1}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0},
               {"TiB", 1099511627776.0}};
  for (size_t i = 0; i < sizeof units / sizeof *units; i++)
    if (strncmp(end + 1, units[i].unit, strlen(units[i].unit)) == 0)
      return (uint64_t)llround(value * units[i].scale);
  return 0;
}

/* The size printed just before the word at `word` (" 10.00 GiB allowed"):
 * back over the unit and the number. 0: none. */
static uint64_t size_before(const char *text, const char *word)
{
  const char *p = word;
  int spaces = 0;
  while (p > text && spaces < 2) { /* the number's start: two spaces back */
    p--;
    if (*p == ' ')
      spaces++;
  }
  if (spaces == 2)
    p++;
  return printed_size(p);
}

/* The size printed before phrase, -1 where the phrase or its size is not
 * there ("0 bytes" is a size). */
static int64_t said_size(const char *message, const char *phrase)
{
  const char *at = strstr(message, phrase);
  if (!at)
    return -1;
  uint64_t size = size_before(message, at);
  size_t unit = strlen(" bytes"); /* 0 is a size only as "0 bytes" */
  if (size == 0 && ((size_t)(at - message) < unit || strncmp(at - unit, " bytes", unit) != 0))
    return -1;
  return size > INT64_MAX ? -1 : (int64_t)size;
}

bool ol_framework_oom_parse(const char *message, ol_framework_oom_t *out)
{
  memset(out, 0, sizeof *out);
  out->allocated = out->free_reserved = -1;
  if (!message || !strstr(message, "out of memory"))
    return false;
  const char *tried = strstr(message, "Tried to allocate ");
  if (!tried)
    return false;
  out->request = printed_size(tried + strlen("Tried to allocate "));
  const char *gpu = strstr(message, "GPU ");
  char *end = NULL;
  long device = gpu ? strtol(gpu + 4, &end, 10) : -1;
  out->device = gpu && end != gpu + 4 && device >= 0 && device < OL_MAX_DEVICES ? (int)device : -1;
  const char *allowed = strstr(message, " allowed;");
  out->limit = allowed ? size_before(message, allowed) : 0;
  out->allocated = said_size(message, " is allocated by PyTorch");
  out->free_reserved = said_size(message, " is reserved by PyTorch but unallocated");
  return out->request > 0 && out->device >= 0;
}
