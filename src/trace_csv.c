/* trace_csv.c: the streaming reader of CSV allocation traces (trace_csv.h).
 * zlib's gz* functions read gzip'd and plain files alike, so one path
 * serves both. Lines are cut out of a fixed buffer refilled by gzread:
 * memory stays constant however long the trace is, and the buffer never
 * holds more than a few lines' worth of bytes. */
#include "trace_csv.h"
#include "ol.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define BUF_SIZE (4 * OL_TRACE_MAX_LINE)
#define HEADER_COLUMNS "time_us,action,addr,size,stream,frames"

struct ol_trace {
  gzFile file;
  char *path;
  uint64_t line;     /* number of the line last handed out */
  size_t start, end; /* unread bytes are buf[start, end) */
  bool eof;
  char buf[BUF_SIZE];
};

/* Names with their lengths, so that matching compares lengths first. */
#define ACTION(name) {name, sizeof name - 1}
static const struct {
  const char *name;
  size_t len;
} actions[OL_TRACE_ACTION_COUNT] = {
  [OL_TRACE_ALLOC] = ACTION("alloc"),
  [OL_TRACE_FREE_REQUESTED] = ACTION("free_requested"),
  [OL_TRACE_FREE_COMPLETED] = ACTION("free_completed"),
  [OL_TRACE_SEGMENT_ALLOC] = ACTION("segment_alloc"),
  [OL_TRACE_SEGMENT_FREE] = ACTION("segment_free"),
  [OL_TRACE_SEGMENT_MAP] = ACTION("segment_map"),
  [OL_TRACE_SEGMENT_UNMAP] = ACTION("segment_unmap"),
  [OL_TRACE_OOM] = ACTION("oom"),
};
#undef ACTION

const char *ol_trace_action_name(ol_trace_action_t action)
{
  return (unsigned)action < OL_TRACE_ACTION_COUNT ? actions[action].name : "?";
}

/* Moves the unread bytes to the front and reads more after them. */
static int refill(ol_trace_t *t)
{
  if (t->start > 0) {
    memmove(t->buf, t->buf + t->start, t->end - t->start);
    t->end -= t->start;
    t->start = 0;
  }
  int n = gzread(t->file, t->buf + t->end, (unsigned)(BUF_SIZE - t->end));
  if (n < 0)
    return -1;
  if (n == 0) {
    /* zlib reports a gzip stream cut short only here, as Z_BUF_ERROR. */
    int errnum;
    gzerror(t->file, &errnum);
    if (errnum != Z_OK)
      return -1;
    t->eof = true;
  }
  t->end += (size_t)n;
  return 0;
}

/* The next line without its newline (and without a '\r' before it).
 * 1: *line and *len set; 0: end of file; -1: error, message in err. */
static int next_line(ol_trace_t *t, const char **line, size_t *len, char *err, size_t cap)
{
  for (;;) {
    char *nl = memchr(t->buf + t->start, '\n', t->end - t->start);
    size_t have = nl ? (size_t)(nl - (t->buf + t->start)) : t->end - t->start;
    if (have > OL_TRACE_MAX_LINE) {
      ol_set_error(err, cap, "%s:%llu: line longer than %d bytes", t->path,
          (unsigned long long)t->line + 1, OL_TRACE_MAX_LINE);
      return -1;
    }
    if (nl || (t->eof && have > 0)) {
      *line = t->buf + t->start;
      *len = have;
      t->start += have + (nl != NULL);
      t->line++;
      if (*len > 0 && (*line)[*len - 1] == '\r')
        (*len)--;
      return 1;
    }
    if (t->eof)
      return 0;
    if (refill(t) < 0) {
      int errnum;
      const char *what = gzerror(t->file, &errnum);
      /* zlib's message starts with the path, which ours already gives. */
      size_t plen = strlen(t->path);
      if (strncmp(what, t->path, plen) == 0 && strncmp(what + plen, ": ", 2) == 0)
        what += plen + 2;
      ol_set_error(err, cap, "%s:%llu: cannot read: %s", t->path, (unsigned long long)t->line + 1,
          errnum == Z_ERRNO ? strerror(errno) : what);
      return -1;
    }
  }
}

/* The header names our columns, possibly after spaces: "# time_us,...". */
static bool is_csv_header(const char *line, size_t len)
{
  if (len == 0 || line[0] != '#')
    return false;
  size_t i = 1;
  while (i < len && (line[i] == ' ' || line[i] == '\t'))
    i++;
  size_t want = strlen(HEADER_COLUMNS);
  return len - i >= want && memcmp(line + i, HEADER_COLUMNS, want) == 0;
}

static ol_trace_t *fail_open(ol_trace_t *t)
{
  ol_trace_close(t);
  return NULL;
}

ol_trace_t *ol_trace_open(const char *path, char *err, size_t cap)
{
  ol_set_error(err, cap, "%s", "");
  ol_trace_t *t = calloc(1, sizeof *t);
  if (!t || !(t->path = strdup(path))) {
    ol_set_error(err, cap, "%s: out of host memory", path);
    free(t);
    return NULL;
  }
  errno = 0; /* gzopen fails without errno only when zlib runs out of memory */
  t->file = gzopen(path, "rb");
  if (!t->file) {
    ol_set_error(err, cap, "cannot open %s: %s", path, errno ? strerror(errno) : "out of host memory");
    return fail_open(t);
  }
  const char *line;
  size_t len;
  int got = next_line(t, &line, &len, err, cap);
  if (got < 0)
    return fail_open(t);
  if (got == 0) {
    ol_set_error(err, cap, "%s: empty file, not a trace", path);
    return fail_open(t);
  }
  if (!is_csv_header(line, len)) {
    ol_set_error(err, cap, "%s:1: unknown trace format (expected the header '# %s')", path,
        HEADER_COLUMNS);
    return fail_open(t);
  }
  return t;
}

void ol_trace_close(ol_trace_t *t)
{
  if (!t)
    return;
  if (t->file)
    gzclose(t->file);
  free(t->path);
  free(t);
}

/* ---- fields ---------------------------------------------------------- */

typedef struct field {
  const char *p;
  size_t n;
} field_t;

/* Up to 19 digits cannot overflow, so only a 20-digit number is checked. */
static bool parse_decimal(field_t f, uint64_t *out)
{
  if (f.n == 0 || f.n > 20)
    return false;
  uint64_t v = 0;
  size_t fast = f.n < 19 ? f.n : 19;
  for (size_t i = 0; i < fast; i++) {
    unsigned d = (unsigned)((unsigned char)f.p[i] - '0');
    if (d > 9)
      return false;
    v = v * 10 + d;
  }
  if (f.n == 20) {
    unsigned d = (unsigned)((unsigned char)f.p[19] - '0');
    if (d > 9 || v > (UINT64_MAX - d) / 10)
      return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

static bool all_digits(field_t f)
{
  for (size_t i = 0; i < f.n; i++)
    if ((unsigned)((unsigned char)f.p[i] - '0') > 9)
      return false;
  return f.n > 0;
}

static int hex_digit(char c)
{
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

/* "0x" then 1 to 16 hex digits. */
static bool parse_hex(field_t f, uint64_t *out)
{
  if (f.n < 3 || f.p[0] != '0' || (f.p[1] != 'x' && f.p[1] != 'X') || f.n - 2 > 16)
    return false;
  uint64_t v = 0;
  for (size_t i = 2; i < f.n; i++) {
    int d = hex_digit(f.p[i]);
    if (d < 0)
      return false;
    v = v << 4 | (uint64_t)d;
  }
  *out = v;
  return true;
}

static bool parse_action(field_t f, ol_trace_action_t *out)
{
  for (int a = 0; a < OL_TRACE_ACTION_COUNT; a++) {
    if (actions[a].len == f.n && memcmp(actions[a].name, f.p, f.n) == 0) {
      *out = (ol_trace_action_t)a;
      return true;
    }
  }
  return false;
}

/* Splits at the first five commas; the sixth field (frames) is the rest of
 * the line, commas and all. Returns how many fields were found. */
static int split_fields(const char *line, size_t len, field_t fields[6])
{
  const char *p = line, *end = line + len;
  for (int count = 0; count < 5; count++) {
    const char *comma = memchr(p, ',', (size_t)(end - p));
    if (!comma)
      return count + 1;
    fields[count] = (field_t){p, (size_t)(comma - p)};
    p = comma + 1;
  }
  fields[5] = (field_t){p, (size_t)(end - p)};
  return 6;
}

/* A shortened copy of a field for messages, so a huge field cannot flood them. */
static const char *shown(field_t f, char *out, size_t cap)
{
  size_t n = f.n < cap - 4 ? f.n : cap - 4;
  for (size_t i = 0; i < n; i++)
    out[i] = (f.p[i] >= 32 && f.p[i] < 127) ? f.p[i] : '?';
  strcpy(out + n, f.n > n ? "..." : "");
  return out;
}

static int parse_event(ol_trace_t *t, const char *line, size_t len, ol_trace_event_t *ev,
                       char *err, size_t cap)
{
  field_t f[6];
  char tmp[40];
  unsigned long long at = (unsigned long long)t->line;
  int count = split_fields(line, len, f);
  if (count < 6) {
    ol_set_error(err, cap, "%s:%llu: missing fields: %d of 6 (%s)", t->path, at, count, HEADER_COLUMNS);
    return -1;
  }
  if (!parse_decimal(f[0], &ev->time_us)) {
    ol_set_error(err, cap, "%s:%llu: time_us '%s' is not a decimal number", t->path, at,
        shown(f[0], tmp, sizeof tmp));
    return -1;
  }
  if (!parse_action(f[1], &ev->action)) {
    ol_set_error(err, cap, "%s:%llu: bad action '%s'", t->path, at, shown(f[1], tmp, sizeof tmp));
    return -1;
  }
  if (!parse_hex(f[2], &ev->addr)) {
    ol_set_error(err, cap, "%s:%llu: addr '%s' is not a hex address (0x...)", t->path, at,
        shown(f[2], tmp, sizeof tmp));
    return -1;
  }
  if (!parse_decimal(f[3], &ev->size) || ev->size > INT64_MAX) {
    ol_set_error(err, cap, "%s:%llu: size '%s' %s", t->path, at, shown(f[3], tmp, sizeof tmp),
        all_digits(f[3]) ? "overflows (more than 2^63-1 bytes)" : "is not a decimal number");
    return -1;
  }
  if (!parse_decimal(f[4], &ev->stream)) {
    ol_set_error(err, cap, "%s:%llu: stream '%s' is not a decimal number", t->path, at,
        shown(f[4], tmp, sizeof tmp));
    return -1;
  }
  ev->frames = f[5].p;
  ev->frames_len = f[5].n;
  ev->line = t->line;
  return 1;
}

int ol_trace_next(ol_trace_t *t, ol_trace_event_t *ev, char *err, size_t cap)
{
  for (;;) {
    const char *line;
    size_t len;
    int got = next_line(t, &line, &len, err, cap);
    if (got <= 0)
      return got;
    /* Blank lines and later '#' comments carry no event. */
    if (len == 0 || line[0] == '#')
      continue;
    return parse_event(t, line, len, ev, err, cap);
  }
}
