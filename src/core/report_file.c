/* report_file.c: where reports go and how they reach the disk.
 *
 * A report is written whole or not at all: into a new temporary file beside
 * the target (O_EXCL|O_NOFOLLOW, mode 0600, so a planted link is never
 * followed), synced, then renamed over the target. rename() replaces a link
 * at the target itself rather than writing through it. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core.h"

/* The rank from the launcher's environment; only safe characters, so a
 * strange value cannot steer the path elsewhere. */
const char *ol_rank_text(void)
{
  static const char *const vars[] = {"RANK", "LOCAL_RANK"};
  for (size_t i = 0; i < 2; i++) {
    const char *value = getenv(vars[i]);
    if (!value || !*value || strlen(value) > 16)
      continue;
    bool safe = true;
    for (const char *c = value; *c; c++)
      if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z')
            || *c == '_' || *c == '-'))
        safe = false;
    if (safe)
      return value;
  }
  return "0";
}

/* %p: pid, %r: rank, %%: a percent sign; any other % is kept as it is.
 * Returns 0, or -1 when the result does not fit. */
int ol_expand_path(const char *pattern, long pid, const char *rank, char *out, size_t cap)
{
  size_t len = 0;
  for (const char *c = pattern; *c; c++) {
    char piece[32];
    const char *add = piece;
    if (c[0] == '%' && c[1] == 'p') {
      snprintf(piece, sizeof piece, "%ld", pid);
      c++;
    } else if (c[0] == '%' && c[1] == 'r') {
      add = rank;
      c++;
    } else if (c[0] == '%' && c[1] == '%') {
      piece[0] = '%', piece[1] = '\0';
      c++;
    } else {
      piece[0] = *c, piece[1] = '\0';
    }
    size_t n = strlen(add);
    if (len + n + 1 > cap)
      return -1;
    memcpy(out + len, add, n);
    len += n;
  }
  if (cap == 0)
    return -1;
  out[len] = '\0';
  return 0;
}

/* Where a process writes a file named by an OOMLENS_* pattern. A forked
 * child must never write over its parent's file: when the pattern has no
 * %p, the child's pid is added, before keep_ext if the name ends with it
 * (x.prom -> x.<pid>.prom, still a file the collector reads), else at the
 * end (x.txt -> x.txt.<pid>). 0, or -1 when the path does not fit. */
int ol_output_path(const char *pattern, long pid, const char *rank, bool forked_child,
                   const char *keep_ext, char *out, size_t cap)
{
  if (ol_expand_path(pattern, pid, rank, out, cap) != 0)
    return -1;
  if (!forked_child || strstr(pattern, "%p"))
    return 0;
  size_t len = strlen(out), ext = keep_ext ? strlen(keep_ext) : 0;
  size_t stem = ext && len >= ext && strcmp(out + len - ext, keep_ext) == 0 ? len - ext : len;
  char tail[32];
  snprintf(tail, sizeof tail, "%s", out + stem);
  int n = snprintf(out + stem, cap - stem, ".%ld%s", pid, tail);
  return n < 0 || (size_t)n >= cap - stem ? -1 : 0;
}

/* The JSON report sits beside the text one: x.txt gives x.json, anything
 * else gets .json appended. */
int ol_json_path_for(const char *text_path, char *out, size_t cap)
{
  size_t len = strlen(text_path);
  size_t stem = len >= 4 && strcmp(text_path + len - 4, ".txt") == 0 ? len - 4 : len;
  if (stem + sizeof ".json" > cap)
    return -1;
  memcpy(out, text_path, stem);
  memcpy(out + stem, ".json", sizeof ".json");
  return 0;
}

static int write_all(int fd, const char *data, size_t len)
{
  while (len > 0) {
    ssize_t n = write(fd, data, len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return -1;
    data += n;
    len -= (size_t)n;
  }
  return 0;
}

static int open_temporary(const char *path, char *tmp, size_t cap)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  for (int attempt = 0; attempt < 8; attempt++) {
    int n = snprintf(tmp, cap, "%s.tmp.%ld.%ld", path, (long)getpid(),
                     (long)(ts.tv_nsec + attempt) % 1000000);
    if (n < 0 || (size_t)n >= cap) {
      errno = ENAMETOOLONG;
      return -1;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0 || errno != EEXIST)
      return fd;
  }
  return -1;
}

/* 0, or the errno of what failed (the temporary file is then gone). */
static int write_atomic(const char *path, const char *data, size_t len)
{
  char tmp[4096 + 64];
  int fd = open_temporary(path, tmp, sizeof tmp);
  if (fd < 0)
    return errno ? -errno : -EIO;
  int failed = write_all(fd, data, len) != 0 || fsync(fd) != 0;
  int saved = errno;
  failed |= close(fd) != 0;
  if (!failed && rename(tmp, path) != 0) {
    saved = errno;
    failed = 1;
  }
  if (failed) {
    unlink(tmp);
    return saved ? saved : EIO;
  }
  return 0;
}

int ol_write_file_atomic(const char *path, const char *data, size_t len)
{
  int err = write_atomic(path, data, len);
  if (err < 0)
    ol_log_warn("cannot create a report beside %s: %s", path, strerror(-err));
  else if (err > 0)
    ol_log_warn("cannot write the report %s: %s", path, strerror(err));
  return err ? -1 : 0;
}

int ol_write_file_atomic_quiet(const char *path, const char *data, size_t len)
{
  int err = write_atomic(path, data, len);
  return err < 0 ? -err : err;
}
