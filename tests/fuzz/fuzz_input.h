/* fuzz_input.h: the fuzzer's input as a file the readers open by path, an
 * in-memory file (memfd) named through /proc/self/fd, for the targets that
 * read files (fuzz_trace_csv.c, fuzz_report.c). */
#ifndef OL_FUZZ_INPUT_H
#define OL_FUZZ_INPUT_H

#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

/* The input's descriptor, its path in path (cap bytes); -1 when it cannot
 * be made. The caller closes it. */
static inline int fuzz_input_file(const uint8_t *data, size_t size, const char *name, char *path,
                                  size_t cap)
{
  int fd = memfd_create(name, 0);
  if (fd < 0)
    return -1;
  if (write(fd, data, size) != (ssize_t)size) {
    close(fd);
    return -1;
  }
  snprintf(path, cap, "/proc/self/fd/%d", fd);
  return fd;
}

#endif
