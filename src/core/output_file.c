/* output_file.c: every file oomlens writes, and the one rule that keeps
 * each of them from destroying anything of the user's.
 *
 * The library's reports and metrics, the trace, and the command line's
 * outputs (export -o, report --html) all go through here. A target is
 * written only when it is absent or a regular file of the same user; a
 * path ending in '/', a folder, a symbolic link (not followed, not
 * replaced), a device, a FIFO or a socket is refused, and so is a file
 * that is one of the command's own inputs. Refusals are decided before
 * anything is created.
 *
 * A whole output (everything but the trace) is written into a new
 * temporary file in the target's own folder (O_EXCL, so nothing is
 * reused), synced, then published: linked to the target's name when the
 * target is absent (link() never replaces, so nothing that appeared
 * meanwhile is lost), renamed over it when it is a regular file of ours.
 * On any error the temporary file goes and the target is as it was. The
 * one window left: a regular file of ours seen at the last look and
 * swapped for something else before the rename.
 *
 * The trace is a stream, written while the job runs (a job killed before
 * its end must still leave what it traced), so it is opened in place:
 * O_NONBLOCK so that opening can never wait (a FIFO without a reader is
 * refused, not waited on), O_NOFOLLOW, and checked again with fstat once
 * open. A FIFO is allowed there (a stream's natural reader, and writing
 * into one destroys nothing); an existing regular file of ours is
 * truncated only after that check. */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core.h"

static bool refuse(ol_error_t *err, const char *path, const char *why)
{
  ol_fail(err, OL_EXIT_USAGE, "%s: %s", path, why);
  return false;
}

static bool failed(ol_error_t *err, const char *path, const char *what, int error)
{
  ol_fail(err, OL_EXIT_FAILURE, "%s: %s: %s", path, what, strerror(error));
  return false;
}

/* What a target that is not a regular file is, in the refusal's words. */
static const char *not_regular(mode_t mode)
{
  if (S_ISDIR(mode))
    return "is a folder, not a file; refused";
  if (S_ISLNK(mode))
    return "is a symbolic link; refused (not followed, not replaced)";
  if (S_ISCHR(mode) || S_ISBLK(mode))
    return "is a device, not a regular file; refused";
  if (S_ISFIFO(mode))
    return "is a FIFO, not a regular file; refused";
  if (S_ISSOCK(mode))
    return "is a socket, not a regular file; refused";
  return "is not a regular file; refused";
}

/* Whether st (an existing target) may be written: a regular file of ours,
 * or a FIFO when fifo_ok (the trace). */
static bool acceptable(const char *path, const struct stat *st, bool fifo_ok, ol_error_t *err)
{
  if (!S_ISREG(st->st_mode) && !(fifo_ok && S_ISFIFO(st->st_mode)))
    return refuse(err, path, not_regular(st->st_mode));
  if (st->st_uid != geteuid()) {
    char why[96];
    snprintf(why, sizeof why, "belongs to another user (uid %ld); refused", (long)st->st_uid);
    return refuse(err, path, why);
  }
  return true;
}

/* The target as it is now: *present and its lstat, or a refusal. */
static bool inspect(const char *path, struct stat *st, bool *present, bool fifo_ok,
                    ol_error_t *err)
{
  size_t len = strlen(path);
  if (len == 0)
    return refuse(err, "''", "an empty path names no file; refused");
  if (path[len - 1] == '/')
    return refuse(err, path, "ends with '/': names a folder, not a file; refused");
  *present = lstat(path, st) == 0;
  if (!*present && errno != ENOENT)
    return failed(err, path, "cannot look at it", errno);
  return !*present || acceptable(path, st, fifo_ok, err);
}

/* An output naming one of the command's inputs (the same file, by any
 * name or link) would destroy what the command reads. */
static bool is_input(const char *path, const struct stat *target, const char *const *inputs,
                     ol_error_t *err)
{
  for (size_t i = 0; inputs && inputs[i]; i++) {
    struct stat in;
    if (stat(inputs[i], &in) == 0 && in.st_dev == target->st_dev && in.st_ino == target->st_ino) {
      char why[160];
      snprintf(why, sizeof why, "is this command's input (%.100s); refused", inputs[i]);
      refuse(err, path, why);
      return true;
    }
  }
  return false;
}

bool ol_output_check(const char *path, const char *const *inputs, ol_error_t *err)
{
  struct stat st;
  bool present;
  if (!inspect(path, &st, &present, false, err))
    return false;
  return !present || !is_input(path, &st, inputs, err);
}

/* ---- whole outputs: a temporary file, then published ------------------ */

/* <target's folder>/.oomlens-<pid>-<n>.tmp: short whatever the target's
 * name (a name near NAME_MAX still gets one), never ending in the
 * target's extension (a collector reading *.prom never reads half a
 * file), and saying whose it is if a killed process leaves it. */
static bool temp_name(ol_output_t *o, unsigned n)
{
  const char *slash = strrchr(o->target, '/');
  size_t folder = slash ? (size_t)(slash - o->target) + 1 : 0;
  if (folder >= sizeof o->temp)
    return false;
  memcpy(o->temp, o->target, folder);
  int len = snprintf(o->temp + folder, sizeof o->temp - folder, ".oomlens-%ld-%u.tmp",
                     (long)getpid(), n);
  return len > 0 && (size_t)len < sizeof o->temp - folder;
}

static bool create_temp(ol_output_t *o, unsigned new_mode, ol_error_t *err)
{
  static atomic_uint counter;
  for (int attempt = 0; attempt < 16; attempt++) {
    if (!temp_name(o, atomic_fetch_add(&counter, 1)))
      return failed(err, o->target, "cannot name a temporary file beside it", ENAMETOOLONG);
    o->fd = open(o->temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, new_mode);
    if (o->fd >= 0)
      return true;
    if (errno != EEXIST)
      break;
  }
  int error = errno;
  o->temp[0] = '\0';
  return failed(err, o->target, "cannot create a temporary file in its folder", error);
}

bool ol_output_begin(ol_output_t *o, const char *path, unsigned new_mode, ol_error_t *err)
{
  *o = (ol_output_t){.target = path, .fd = -1};
  struct stat st;
  bool present;
  if (!inspect(path, &st, &present, false, err))
    return false;
  o->keep_mode = present;
  o->mode = present ? (unsigned)(st.st_mode & 0777) : 0;
  return create_temp(o, new_mode, err);
}

void ol_output_abort(ol_output_t *o)
{
  if (o->fd >= 0)
    close(o->fd);
  o->fd = -1;
  if (o->temp[0])
    unlink(o->temp);
  o->temp[0] = '\0';
}

/* A failure of ours: the temporary file goes, the target stays. */
static bool abandon(ol_output_t *o, ol_error_t *err, const char *what, int error)
{
  ol_output_abort(o);
  return failed(err, o->target, what, error ? error : EIO);
}

bool ol_output_write(ol_output_t *o, const void *data, size_t len, ol_error_t *err)
{
  const char *p = data;
  while (len > 0) {
    ssize_t n = write(o->fd, p, len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) /* 0 for a regular file: no room */
      return abandon(o, err, "cannot write", n < 0 ? errno : ENOSPC);
    p += n;
    len -= (size_t)n;
  }
  return true;
}

/* The temporary file under the target's name, by the rule as it stands
 * now: absent, a link (which fails rather than replace anything that
 * appeared meanwhile; a file system without links gets a rename); a
 * regular file of ours, a rename over it; anything else, refused. */
static bool publish(ol_output_t *o, ol_error_t *err)
{
  for (int attempt = 0; attempt < 4; attempt++) {
    struct stat st;
    bool present;
    if (!inspect(o->target, &st, &present, false, err))
      return false;
    if (!present && link(o->temp, o->target) == 0) {
      unlink(o->temp);
      o->temp[0] = '\0';
      return true;
    }
    if (!present && errno == EEXIST)
      continue; /* appeared: look again */
    if (rename(o->temp, o->target) == 0) {
      o->temp[0] = '\0';
      return true;
    }
    return failed(err, o->target, "cannot rename the temporary file over it", errno);
  }
  return failed(err, o->target, "keeps changing while written; left as it is", EAGAIN);
}

bool ol_output_commit(ol_output_t *o, ol_error_t *err)
{
  if (o->keep_mode && fchmod(o->fd, o->mode) != 0)
    return abandon(o, err, "cannot give the new file the old one's mode", errno);
  if (fsync(o->fd) != 0)
    return abandon(o, err, "cannot write", errno);
  int fd = o->fd;
  o->fd = -1;
  if (close(fd) != 0)
    return abandon(o, err, "cannot write", errno);
  bool ok = publish(o, err);
  ol_output_abort(o); /* the temporary file, when not published */
  return ok;
}

bool ol_output_write_file(const char *path, const void *data, size_t len, unsigned new_mode,
                          ol_error_t *err)
{
  ol_output_t o;
  return ol_output_begin(&o, path, new_mode, err) && ol_output_write(&o, data, len, err)
         && ol_output_commit(&o, err);
}

/* ---- the trace: a stream, written in place ----------------------------- */

static bool same_file(const struct stat *a, const struct stat *b)
{
  return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* The file just opened is what inspect() allowed (a regular file of ours
 * or a FIFO; the one seen before when there was one), else refused. */
static bool opened_is_allowed(const char *path, int fd, const struct stat *before, bool present,
                              ol_error_t *err)
{
  struct stat now;
  if (fstat(fd, &now) != 0)
    return failed(err, path, "cannot look at it", errno);
  if (!acceptable(path, &now, true, err))
    return false;
  if (present && !same_file(before, &now))
    return refuse(err, path, "was replaced while being opened; refused");
  return true;
}

/* A regular file is emptied, only once it is known to be ours. */
static bool empty_if_regular(const char *path, int fd, ol_error_t *err)
{
  struct stat st;
  if (fstat(fd, &st) != 0)
    return failed(err, path, "cannot look at it", errno);
  if (S_ISREG(st.st_mode) && st.st_size > 0 && ftruncate(fd, 0) != 0)
    return failed(err, path, "cannot empty it", errno);
  return true;
}

/* The fd, -1 with *err set, or -2 when the target appeared between the
 * look and the open (look again). */
static int open_stream_once(const char *path, unsigned new_mode, bool *created, ol_error_t *err)
{
  struct stat before;
  bool present;
  if (!inspect(path, &before, &present, true, err))
    return -1;
  int flags = O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | (present ? 0 : O_EXCL);
  int fd = open(path, flags, new_mode);
  if (fd < 0 && errno == EEXIST)
    return -2;
  if (fd < 0 && errno == ENXIO)
    return refuse(err, path, "is a FIFO no one reads; refused (never waited on)"), -1;
  if (fd < 0)
    return failed(err, path, "cannot create it", errno), -1;
  if (!opened_is_allowed(path, fd, &before, present, err) || !empty_if_regular(path, fd, err)) {
    close(fd);
    return -1;
  }
  /* Opening never waited; writes behave as on any file (the writer's
   * own business). */
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0)
    fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  *created = !present;
  return fd;
}

int ol_output_open_stream(const char *path, unsigned new_mode, bool *created, ol_error_t *err)
{
  for (int attempt = 0; attempt < 4; attempt++) {
    int fd = open_stream_once(path, new_mode, created, err);
    if (fd != -2)
      return fd;
  }
  return failed(err, path, "keeps changing while opened; left as it is", EAGAIN), -1;
}
