/* buffer.c: growable text for reports. An allocation failure marks the
 * buffer failed instead of aborting, and the writer then refuses to publish
 * a half-written report. Also the offline code's error (ol_error_t): a
 * message and the exit status it calls for. And the doubling of a growable
 * array, one rule for every table that grows an item at a time. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

void *ol_grow_array(void *items, size_t *cap, size_t each, size_t first)
{
  size_t want = *cap ? *cap * 2 : first;
  if (want < *cap || (each && want > SIZE_MAX / each))
    return NULL;
  void *grown = realloc(items, want * each);
  if (grown)
    *cap = want;
  return grown;
}

static bool reserve(ol_buf_t *buf, size_t extra)
{
  if (buf->failed)
    return false;
  if (buf->len + extra + 1 <= buf->cap)
    return true;
  size_t cap = buf->cap ? buf->cap : 4096;
  while (cap < buf->len + extra + 1)
    cap *= 2;
  char *data = realloc(buf->data, cap);
  if (!data) {
    buf->failed = true;
    return false;
  }
  buf->data = data;
  buf->cap = cap;
  return true;
}

void ol_buf_printf(ol_buf_t *buf, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0 || !reserve(buf, (size_t)n))
    return;
  va_start(ap, fmt);
  vsnprintf(buf->data + buf->len, buf->cap - buf->len, fmt, ap);
  va_end(ap);
  buf->len += (size_t)n;
}

void ol_buf_json_string(ol_buf_t *buf, const char *text)
{
  ol_buf_printf(buf, "\"");
  for (const unsigned char *c = (const unsigned char *)text; c && *c; c++) {
    if (*c == '"' || *c == '\\')
      ol_buf_printf(buf, "\\%c", *c);
    else if (*c < 0x20 || *c == 0x7f)
      ol_buf_printf(buf, "\\u%04x", *c);
    else
      ol_buf_printf(buf, "%c", *c);
  }
  ol_buf_printf(buf, "\"");
}

void ol_buf_free(ol_buf_t *buf)
{
  free(buf->data);
  memset(buf, 0, sizeof *buf);
}

void ol_fail(ol_error_t *err, int status, const char *fmt, ...)
{
  if (!err)
    return;
  err->status = status;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->text, sizeof err->text, fmt, ap);
  va_end(ap);
}

/* Binary units up to EiB: 2^64 - 1 bytes is "16.00 EiB". */
static void format_magnitude(char *out, size_t cap, const char *sign, uint64_t bytes)
{
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = (double)bytes;
  size_t unit = 0;
  while (unit + 1 < sizeof units / sizeof *units && value >= 1024.0) {
    value /= 1024.0;
    unit++;
  }
  if (unit == 0)
    snprintf(out, cap, "%s%llu B", sign, (unsigned long long)bytes);
  else
    snprintf(out, cap, "%s%.2f %s", sign, value, units[unit]);
}

void ol_format_size(char *out, size_t cap, uint64_t bytes)
{
  format_magnitude(out, cap, "", bytes);
}

void ol_format_bytes(char *out, size_t cap, int64_t bytes)
{
  /* the magnitude of INT64_MIN is 2^63, which uint64_t holds */
  uint64_t magnitude = bytes < 0 ? 0 - (uint64_t)bytes : (uint64_t)bytes;
  format_magnitude(out, cap, bytes < 0 ? "-" : "", magnitude);
}

/* The one way frames are joined, in text and in JSON. */
void ol_frame_join_text(const char *frame, void *join)
{
  ol_frame_join_t *j = join;
  ol_buf_printf(j->out, "%s%s", j->count++ ? OL_FRAME_SEP : "", frame);
}

void ol_frame_join_json(const char *frame, void *join)
{
  ol_frame_join_t *j = join;
  ol_buf_printf(j->out, "%s", j->count++ ? ", " : "");
  ol_buf_json_string(j->out, frame);
}

void ol_error_clear(ol_error_t *err)
{
  if (err) {
    err->status = OL_EXIT_OK;
    err->text[0] = '\0';
  }
}
