/* input.c: a command's input made readable more than once (input.h). */
#include "input.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Everything from in to fd; false with errno set. */
static bool copy_all(FILE *in, int fd)
{
  char buf[1 << 16];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, in)) > 0)
    for (size_t done = 0; done < n;) {
      ssize_t w = write(fd, buf + done, n - done);
      if (w < 0 && errno == EINTR)
        continue;
      if (w < 0)
        return false;
      done += (size_t)w;
    }
  if (ferror(in)) {
    errno = errno ? errno : EIO;
    return false;
  }
  return true;
}

const char *ol_input_rereadable(const char *path, char *buf, size_t cap, ol_error_t *err)
{
  struct stat st;
  if (stat(path, &st) != 0 || S_ISREG(st.st_mode))
    return path;
  const char *dir = getenv("TMPDIR");
  char name[4096];
  snprintf(name, sizeof name, "%s/oomlens-input-XXXXXX", dir && *dir ? dir : "/tmp");
  int fd = mkostemp(name, O_CLOEXEC);
  if (fd < 0) {
    ol_fail(err, OL_EXIT_FAILURE, "%s: cannot keep a copy of it to read (%s): %s", path, name,
            strerror(errno));
    return NULL;
  }
  unlink(name); /* no name from now on: gone when the command ends */
  FILE *in = fopen(path, "rb");
  if (!in) {
    ol_fail(err, OL_EXIT_USAGE, "cannot open %s: %s", path, strerror(errno));
    close(fd);
    return NULL;
  }
  errno = 0;
  bool copied = copy_all(in, fd);
  int saved = errno;
  fclose(in);
  if (!copied) {
    ol_fail(err, OL_EXIT_FAILURE, "%s: cannot keep a copy of it to read: %s", path,
            strerror(saved));
    close(fd);
    return NULL;
  }
  snprintf(buf, cap, "/proc/self/fd/%d", fd); /* the fd stays open: the command's to the end */
  return buf;
}
