/* log.c: the one way oomlens talks to the user's terminal.
 *
 * Every line is formatted into a fixed stack buffer and written with a single
 * write(2): no stdio, no malloc, so it is usable from hook context and never
 * interleaves mid-line with the job's own output. Warnings are capped so a
 * repeating failure cannot flood a training log. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#include "core.h"

#define OL_MAX_WARNINGS 32

static atomic_int warnings_left = OL_MAX_WARNINGS;

static void emit(const char *prefix, const char *fmt, va_list ap)
{
  char line[1024];
  int n = snprintf(line, sizeof line, "oomlens: %s", prefix);
  if (n < 0)
    return;
  int m = vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
  if (m < 0)
    return;
  size_t len = (size_t)n + (size_t)m;
  if (len > sizeof line - 2)
    len = sizeof line - 2;
  line[len++] = '\n';
  ssize_t ignored = write(STDERR_FILENO, line, len);
  (void)ignored;
}

void ol_log_info(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  emit("", fmt, ap);
  va_end(ap);
}

void ol_log_verbose(const char *fmt, ...)
{
  if (!ol_option_bool(OL_OPT_VERBOSE))
    return;
  va_list ap;
  va_start(ap, fmt);
  emit("", fmt, ap);
  va_end(ap);
}

void ol_log_warn(const char *fmt, ...)
{
  int left = atomic_fetch_sub(&warnings_left, 1);
  if (left <= 0)
    return;
  va_list ap;
  va_start(ap, fmt);
  emit("warning: ", fmt, ap);
  va_end(ap);
  if (left == 1)
    ol_log_info("warning: further warnings suppressed");
}

void ol_log_warn_once(atomic_bool *said, const char *fmt, ...)
{
  if (atomic_exchange(said, true))
    return;
  int left = atomic_fetch_sub(&warnings_left, 1);
  if (left <= 0)
    return;
  va_list ap;
  va_start(ap, fmt);
  emit("warning: ", fmt, ap);
  va_end(ap);
}
