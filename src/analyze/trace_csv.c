/* trace_csv.c: the streaming reader of allocation traces (trace_csv.h):
 * PyTorch's CSV and oomlens's own format, plain, gzip'd or xz'd. The file
 * is opened and read once, front to back (its first bytes tell how it is
 * compressed), so a pipe serves as well as a file: `oomlens report
 * /dev/stdin`, or a process substitution. Lines are cut out of a fixed
 * buffer refilled from the decoder: memory stays constant however long
 * the trace is, and the buffer never holds more than a few lines' worth of
 * bytes. Our format's call sites are kept once each, by device and number,
 * so that every event can hand out its frames text. */
#include "trace_csv.h"
#include "core.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <lzma.h>
#include <zlib.h>

#define BUF_SIZE (4 * OL_TRACE_MAX_LINE)
#define HEADER_COLUMNS "time_us,action,addr,size,stream,frames"
#define OUR_MAGIC "# oomlens-trace "
#define OUR_VERSION 2   /* 2: oom_context lines, and the skip rule for named lines */
#define OUR_OLDEST 1    /* version 1 is version 2 without oom_context lines */
#define OUR_COLUMNS "time_us,action,addr,size,stream,site,device"
#define MAX_SITES_PER_DEVICE (1u << 24)

typedef struct site_text {
  char *text;
  size_t len;
} site_text_t;

typedef struct site_table {
  site_text_t *sites; /* by number, defined in order 0, 1, 2, ... */
  size_t count, cap;
} site_table_t;

/* The file's bytes, decoded: plain, gzip (zlib's inflate, members one
 * after another as gzip allows) or xz (liblzma: the corpus keeps its
 * traces in xz, about 40% smaller than gzip; the GPU machine's copy of the
 * tree holds 64 MiB, and gzip'd traces had filled it). Read through one
 * FILE from its start: nothing is read twice. */
typedef enum { SOURCE_PLAIN, SOURCE_GZIP, SOURCE_XZ } source_kind_t;

typedef struct source {
  FILE *file;
  source_kind_t kind;
  z_stream z;         /* SOURCE_GZIP */
  lzma_stream lz;     /* SOURCE_XZ */
  bool done;          /* the data ended */
  bool failed;        /* it cannot be read further (said at the next read) */
  int err;            /* errno of a failed read, 0 none */
  int zret;           /* zlib's last answer (Z_OK, Z_STREAM_END when fine) */
  lzma_ret lret;      /* liblzma's last answer (LZMA_OK, LZMA_STREAM_END when fine) */
  uint64_t total_in;  /* bytes of the file consumed */
  size_t at, len;     /* unread input: in[at, len) */
  uint8_t in[1 << 16];
} source_t;

struct ol_trace {
  source_t *src;
  char *path;
  uint64_t line;     /* number of the line last handed out */
  size_t start, end; /* unread bytes are buf[start, end) */
  bool eof;
  ol_trace_format_t format;
  long pid;
  uint64_t start_unix_us;
  uint64_t batch; /* the header's batch= (OOMLENS_BATCH); 0 none */
  bool managed;    /* the header's manage=1: our pool served the job's tensors */
  uint64_t pool_unit; /* the header's pool_unit=N (OOMLENS_POOL_UNIT), 0 if none */
  bool pool_lines; /* pool_held and pool_freed lines are handed out (replay) */
  uint64_t file_size;
  uint64_t capacity[OL_TRACE_MAX_DEVICES];
  int64_t outside_plus1[OL_TRACE_MAX_DEVICES]; /* an outside line's bytes + 1; 0: none */
  site_table_t sites[OL_TRACE_MAX_DEVICES];
  ol_oom_record_t context; /* the last oom_context line's, handed out by pointer */
  uint64_t last_time_us;   /* the last event's time: an oom_context line's */
  uint64_t devices_seen;   /* bit d: an event of device d was read */
  uint64_t sizes_read;     /* every event's size added up, at most OL_TRACE_MAX_TOTAL */
  bool ended;              /* our format's "# end" line was read */
  bool at_end;             /* ol_trace_next said 0: read to the end */
  bool unterminated;       /* the line handed out last had no newline: the file's last */
  bool cut;                /* a last line cut short was dropped */
  uint64_t cut_line;       /* its number */
  char incomplete[96];     /* the end line's "incomplete: REASON", "" none */
  char note[200];          /* ol_trace_note's text */
  char buf[BUF_SIZE];
};

static const uint8_t XZ_MAGIC[6] = {0xFD, '7', 'z', 'X', 'Z', 0x00};
static const uint8_t GZIP_MAGIC[2] = {0x1f, 0x8b};

/* More of the file into in[] when all of it was used; false at the file's
 * end or on a read error (src->err). */
static bool source_fill(source_t *src)
{
  if (src->at < src->len)
    return true;
  src->at = src->len = 0;
  if (feof(src->file))
    return false;
  src->len = fread(src->in, 1, sizeof src->in, src->file);
  if (ferror(src->file)) {
    src->err = errno ? errno : EIO;
    return false;
  }
  return src->len > 0;
}

/* The first bytes already read start with magic. */
static bool starts_with_magic(const source_t *src, const uint8_t *magic, size_t n)
{
  return src->len - src->at >= n && memcmp(src->in + src->at, magic, n) == 0;
}

/* The file open, its kind read from its first bytes (read into in[], not
 * lost: a pipe is read once). NULL with errno set where it cannot be opened
 * or read, errno 0 where host memory ran out. */
static source_t *source_open(const char *path)
{
  source_t *src = calloc(1, sizeof *src);
  if (!src)
    return NULL;
  lzma_stream init = LZMA_STREAM_INIT;
  src->lz = init;
  if (!(src->file = fopen(path, "rb"))) {
    int saved = errno;
    free(src);
    errno = saved;
    return NULL;
  }
  /* the magic numbers: the first block read holds them, but for a file
   * shorter than them */
  while (src->len < sizeof XZ_MAGIC && !feof(src->file) && !ferror(src->file))
    src->len += fread(src->in + src->len, 1, sizeof src->in - src->len, src->file);
  int saved = ferror(src->file) ? (errno ? errno : EIO) : 0;
  bool ready = !saved;
  if (ready && starts_with_magic(src, XZ_MAGIC, sizeof XZ_MAGIC)) {
    src->kind = SOURCE_XZ;
    ready = lzma_stream_decoder(&src->lz, UINT64_MAX, LZMA_CONCATENATED) == LZMA_OK;
  } else if (ready && starts_with_magic(src, GZIP_MAGIC, sizeof GZIP_MAGIC)) {
    src->kind = SOURCE_GZIP;
    ready = inflateInit2(&src->z, 16 + MAX_WBITS) == Z_OK;
  }
  if (ready)
    return src;
  if (src->kind == SOURCE_XZ)
    lzma_end(&src->lz);
  fclose(src->file);
  free(src);
  errno = saved; /* 0: the decoder found no host memory */
  return NULL;
}

static void source_close(source_t *src)
{
  if (src->kind == SOURCE_XZ)
    lzma_end(&src->lz);
  else if (src->kind == SOURCE_GZIP)
    inflateEnd(&src->z);
  fclose(src->file);
  free(src);
}

/* A decoder took the unread input but `left` bytes of it. */
static void source_used(source_t *src, size_t left)
{
  size_t used = (src->len - src->at) - left;
  src->at += used;
  src->total_in += used;
}

static int plain_read(source_t *src, char *out, size_t room)
{
  size_t n = 0;
  while (n < room && source_fill(src)) {
    size_t take = src->len - src->at < room - n ? src->len - src->at : room - n;
    memcpy(out + n, src->in + src->at, take);
    src->at += take;
    n += take;
  }
  src->total_in += n;
  return src->err ? -1 : (int)n;
}

/* A gzip member ended: another may follow (gzip allows several, as zlib's
 * gzread reads them); anything else after it is not read, as gzread
 * ignores it. */
static void gzip_member_ended(source_t *src)
{
  if (source_fill(src) && starts_with_magic(src, GZIP_MAGIC, sizeof GZIP_MAGIC) &&
      inflateReset(&src->z) == Z_OK)
    return;
  src->done = true;
}

/* The data stops here: what this read made is handed out, the failure at
 * the next read (a trace cut short gives its whole lines first, as zlib's
 * gzread did). Data found corrupt is not handed out: what was decoded of
 * it is not known good (its checksum comes at its end). */
static int made_or_failed(source_t *src, size_t made, bool corrupt)
{
  src->failed = true;
  return made > 0 && !corrupt ? (int)made : -1;
}

static int gzip_read(source_t *src, char *out, size_t room)
{
  if (src->failed)
    return -1;
  src->z.next_out = (Bytef *)out;
  src->z.avail_out = (uInt)room;
  while (src->z.avail_out > 0 && !src->done) {
    bool more = source_fill(src);
    if (src->err)
      return made_or_failed(src, room - src->z.avail_out, false);
    src->z.next_in = src->in + src->at;
    src->z.avail_in = (uInt)(src->len - src->at);
    src->zret = inflate(&src->z, Z_NO_FLUSH);
    source_used(src, src->z.avail_in);
    if (src->zret == Z_STREAM_END)
      gzip_member_ended(src);
    else if (src->zret == Z_BUF_ERROR && !more) /* the input ended inside the stream */
      return made_or_failed(src, room - src->z.avail_out, false);
    else if (src->zret != Z_OK && src->zret != Z_BUF_ERROR)
      return made_or_failed(src, room - src->z.avail_out, true);
  }
  return (int)(room - src->z.avail_out);
}

static int xz_read(source_t *src, char *out, size_t room)
{
  if (src->failed)
    return -1;
  src->lz.next_out = (uint8_t *)out;
  src->lz.avail_out = room;
  while (src->lz.avail_out > 0 && !src->done) {
    bool more = source_fill(src);
    if (src->err)
      return made_or_failed(src, room - src->lz.avail_out, false);
    src->lz.next_in = src->in + src->at;
    src->lz.avail_in = src->len - src->at;
    /* at the input's end: finish, which says LZMA_BUF_ERROR where the
     * stream was cut short */
    src->lret = lzma_code(&src->lz, more ? LZMA_RUN : LZMA_FINISH);
    source_used(src, src->lz.avail_in);
    if (src->lret == LZMA_STREAM_END)
      src->done = true;
    else if (src->lret != LZMA_OK)
      return made_or_failed(src, room - src->lz.avail_out, src->lret != LZMA_BUF_ERROR);
  }
  return (int)(room - src->lz.avail_out);
}

/* Up to room bytes of the file's text into out: how many, 0 at its end,
 * -1 when it cannot be read or is not whole (source_error says why). */
static int source_read(source_t *src, char *out, size_t room)
{
  switch (src->kind) {
  case SOURCE_GZIP: return gzip_read(src, out, room);
  case SOURCE_XZ: return xz_read(src, out, room);
  default: return plain_read(src, out, room);
  }
}

static bool source_out_of_memory(const source_t *src)
{
  return (src->kind == SOURCE_XZ && src->lret == LZMA_MEM_ERROR) ||
         (src->kind == SOURCE_GZIP && src->zret == Z_MEM_ERROR);
}

static const char *source_error(const source_t *src)
{
  if (src->err)
    return strerror(src->err);
  if (source_out_of_memory(src))
    return "out of host memory";
  if (src->kind == SOURCE_GZIP)
    return src->zret == Z_BUF_ERROR ? "the gzip data ends before its stream does (cut short)"
                                    : "the gzip data is corrupt";
  switch (src->lret) {
  case LZMA_BUF_ERROR: return "the xz data ends before its stream does (cut short)";
  case LZMA_DATA_ERROR: return "the xz data is corrupt";
  case LZMA_FORMAT_ERROR: return "not an xz stream";
  default: return "the xz data cannot be read";
  }
}

/* A read that failed, said with the line it was reading: -1. */
static int read_failed(const ol_trace_t *t, ol_error_t *err)
{
  unsigned long long at = (unsigned long long)t->line + 1;
  ol_fail(err, source_out_of_memory(t->src) ? OL_EXIT_FAILURE : OL_EXIT_USAGE,
          "%s:%llu: cannot read: %s", t->path, at, source_error(t->src));
  return -1;
}

/* Moves the unread bytes to the front and reads more after them. */
static int refill(ol_trace_t *t)
{
  if (t->start > 0) {
    memmove(t->buf, t->buf + t->start, t->end - t->start);
    t->end -= t->start;
    t->start = 0;
  }
  int n = source_read(t->src, t->buf + t->end, BUF_SIZE - t->end);
  if (n < 0)
    return -1;
  t->eof = n == 0;
  t->end += (size_t)n;
  return 0;
}

/* The next line without its newline (and without a '\r' before it).
 * 1: *line and *len set; 0: end of file; -1: error, message in err. */
static int next_line(ol_trace_t *t, const char **line, size_t *len, ol_error_t *err)
{
  for (;;) {
    char *nl = memchr(t->buf + t->start, '\n', t->end - t->start);
    size_t have = nl ? (size_t)(nl - (t->buf + t->start)) : t->end - t->start;
    if (have > OL_TRACE_MAX_LINE) {
      ol_fail(err, OL_EXIT_USAGE, "%s:%llu: line longer than %d bytes", t->path,
          (unsigned long long)t->line + 1, OL_TRACE_MAX_LINE);
      return -1;
    }
    if (nl || (t->eof && have > 0)) {
      *line = t->buf + t->start;
      *len = have;
      t->start += have + (nl != NULL);
      t->line++;
      t->unterminated = nl == NULL;
      if (*len > 0 && (*line)[*len - 1] == '\r')
        (*len)--;
      return 1;
    }
    if (t->eof)
      return 0;
    if (refill(t) < 0)
      return read_failed(t, err);
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

static bool starts_with(const char *line, size_t len, const char *prefix)
{
  size_t n = strlen(prefix);
  return len >= n && memcmp(line, prefix, n) == 0;
}

/* "# oomlens-trace 1 pid=42 rank=0 start_unix_us=..." : the version must
 * be ours; the key=value words we know are kept, others are skipped. */
static bool parse_our_header(ol_trace_t *t, const char *line, size_t len, ol_error_t *err)
{
  const char *p = line + strlen(OUR_MAGIC), *end = line + len;
  unsigned long version = 0;
  while (p < end && *p >= '0' && *p <= '9' && version < 1000)
    version = version * 10 + (unsigned long)(*p++ - '0');
  if (version < OUR_OLDEST || version > OUR_VERSION || (p < end && *p != ' ')) {
    ol_fail(err, OL_EXIT_USAGE,
            "%s:1: oomlens trace version not supported (this reader knows %d to %d)", t->path,
            OUR_OLDEST, OUR_VERSION);
    return false;
  }
  while (p < end) {
    while (p < end && *p == ' ')
      p++;
    const char *word = p;
    while (p < end && *p != ' ')
      p++;
    char text[64];
    size_t n = (size_t)(p - word) < sizeof text - 1 ? (size_t)(p - word) : sizeof text - 1;
    memcpy(text, word, n);
    text[n] = '\0';
    unsigned long long value;
    if (sscanf(text, "pid=%llu", &value) == 1)
      t->pid = (long)value;
    else if (sscanf(text, "start_unix_us=%llu", &value) == 1)
      t->start_unix_us = value;
    else if (sscanf(text, "batch=%llu", &value) == 1)
      t->batch = value;
    else if (strcmp(text, "manage=1") == 0)
      t->managed = true;
    else if (sscanf(text, "pool_unit=%llu", &value) == 1 && value >= 1 &&
             value <= OL_POOL_UNIT_MAX)
      t->pool_unit = value;
  }
  return true;
}

static ol_trace_t *fail_open(ol_trace_t *t)
{
  ol_trace_close(t);
  return NULL;
}

ol_trace_t *ol_trace_open(const char *path, ol_error_t *err)
{
  ol_error_clear(err);
  ol_trace_t *t = calloc(1, sizeof *t);
  if (!t || !(t->path = strdup(path))) {
    ol_fail(err, OL_EXIT_FAILURE, "%s: out of host memory", path);
    free(t);
    return NULL;
  }
  errno = 0;
  if (!(t->src = source_open(path))) {
    ol_fail(err, errno ? OL_EXIT_USAGE : OL_EXIT_FAILURE, "cannot open %s: %s", path,
            errno ? strerror(errno) : "out of host memory");
    return fail_open(t);
  }
  const char *line;
  size_t len;
  int got = next_line(t, &line, &len, err);
  if (got < 0)
    return fail_open(t);
  if (got == 0) {
    ol_fail(err, OL_EXIT_USAGE, "%s: empty file, not a trace", path);
    return fail_open(t);
  }
  struct stat st;
  if (stat(path, &st) == 0)
    t->file_size = (uint64_t)st.st_size;
  if (starts_with(line, len, OUR_MAGIC)) {
    t->format = OL_TRACE_FORMAT_OOMLENS;
    if (!parse_our_header(t, line, len, err))
      return fail_open(t);
    return t;
  }
  if (!is_csv_header(line, len)) {
    ol_fail(err, OL_EXIT_USAGE, "%s:1: unknown trace format (expected the header '# %s' or '%s1')",
        path, HEADER_COLUMNS, OUR_MAGIC);
    return fail_open(t);
  }
  return t;
}

ol_trace_format_t ol_trace_format(const ol_trace_t *t)
{
  return t->format;
}

long ol_trace_pid(const ol_trace_t *t)
{
  return t->pid;
}

uint64_t ol_trace_batch(const ol_trace_t *t)
{
  return t->batch;
}

bool ol_trace_managed(const ol_trace_t *t)
{
  return t->managed;
}

uint64_t ol_trace_pool_unit(const ol_trace_t *t)
{
  return t->pool_unit;
}

void ol_trace_want_pool_lines(ol_trace_t *t)
{
  t->pool_lines = true;
}

uint64_t ol_trace_start_unix_us(const ol_trace_t *t)
{
  return t->start_unix_us;
}

uint64_t ol_trace_capacity(const ol_trace_t *t, int device)
{
  return device >= 0 && device < OL_TRACE_MAX_DEVICES ? t->capacity[device] : 0;
}

double ol_trace_progress(ol_trace_t *t)
{
  if (t->file_size == 0)
    return 0;
  int64_t at = t->src ? (int64_t)t->src->total_in : 0;
  double f = at > 0 ? (double)at / (double)t->file_size : 0;
  return f > 1 ? 1 : f;
}

void ol_trace_close(ol_trace_t *t)
{
  if (!t)
    return;
  if (t->src)
    source_close(t->src);
  for (int d = 0; d < OL_TRACE_MAX_DEVICES; d++) {
    for (size_t i = 0; i < t->sites[d].count; i++)
      free(t->sites[d].sites[i].text);
    free(t->sites[d].sites);
  }
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

/* Bounds that keep every sum and product of the readers' arithmetic far
 * from overflow (sizes added up over millions of events, times turned into
 * nanoseconds), set where no real trace comes near: a size above 2^56
 * bytes (64 PiB) or a time past 2^53 us (285 years: the CSV counts from 1970) is a broken line. */
#define BYTES_RANGE "is out of range (more than 2^56 bytes)"
#define TIME_RANGE "is out of range (more than 2^53 us)"

static bool parse_bytes(field_t f, uint64_t *out)
{
  return parse_decimal(f, out) && *out <= OL_TRACE_MAX_BYTES;
}

static bool parse_time(field_t f, uint64_t *out)
{
  return parse_decimal(f, out) && *out <= OL_TRACE_MAX_TIME_US;
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

/* An event's action: oom_context and the pool lines name lines of their
 * own, not events. */
static bool parse_action(field_t f, ol_trace_action_t *out)
{
  return ol_trace_action_parse(f.p, f.n, out) && !ol_trace_action_is_line(*out);
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
                       ol_error_t *err)
{
  field_t f[6];
  char tmp[40];
  unsigned long long at = (unsigned long long)t->line;
  int count = split_fields(line, len, f);
  if (count < 6) {
    ol_fail(err, OL_EXIT_USAGE, "%s:%llu: missing fields: %d of 6 (%s)", t->path, at, count,
            HEADER_COLUMNS);
    return -1;
  }
  if (!parse_time(f[0], &ev->time_us)) {
    ol_fail(err, OL_EXIT_USAGE, "%s:%llu: time_us '%s' %s", t->path, at,
        shown(f[0], tmp, sizeof tmp), all_digits(f[0]) ? TIME_RANGE : "is not a decimal number");
    return -1;
  }
  if (!parse_action(f[1], &ev->action)) {
    ol_fail(err, OL_EXIT_USAGE, "%s:%llu: bad action '%s'", t->path, at,
            shown(f[1], tmp, sizeof tmp));
    return -1;
  }
  if (!parse_hex(f[2], &ev->addr)) {
    ol_fail(err, OL_EXIT_USAGE, "%s:%llu: addr '%s' is not a hex address (0x...)", t->path, at,
        shown(f[2], tmp, sizeof tmp));
    return -1;
  }
  if (!parse_bytes(f[3], &ev->size)) {
    ol_fail(err, OL_EXIT_USAGE, "%s:%llu: size '%s' %s", t->path, at, shown(f[3], tmp, sizeof tmp),
        all_digits(f[3]) ? BYTES_RANGE : "is not a decimal number");
    return -1;
  }
  if (!parse_decimal(f[4], &ev->stream)) {
    ol_fail(err, OL_EXIT_USAGE, "%s:%llu: stream '%s' is not a decimal number", t->path, at,
        shown(f[4], tmp, sizeof tmp));
    return -1;
  }
  ev->frames = f[5].p;
  ev->frames_len = f[5].n;
  ev->site_plus1 = 0; /* the recorder's frames are text: no live site behind them */
  ev->line = t->line;
  ev->device = 0;
  ev->oom_final = true; /* the recorder writes an oom only where the job got its error */
  ev->context = NULL;
  t->devices_seen |= 1; /* the CSV's one device */
  return 1;
}

/* ---- oomlens's own format ---------------------------------------------- */

/* Splits at every comma, at most max fields; the last field keeps any
 * further commas. Returns how many fields were found. */
static int split_n(const char *line, size_t len, field_t *fields, int max)
{
  const char *p = line, *end = line + len;
  int count = 0;
  while (count < max - 1) {
    const char *comma = memchr(p, ',', (size_t)(end - p));
    if (!comma)
      break;
    fields[count++] = (field_t){p, (size_t)(comma - p)};
    p = comma + 1;
  }
  fields[count++] = (field_t){p, (size_t)(end - p)};
  return count;
}

static bool parse_device(field_t f, int *out)
{
  uint64_t d;
  if (!parse_decimal(f, &d) || d >= OL_TRACE_MAX_DEVICES)
    return false;
  *out = (int)d;
  return true;
}

static bool add_site(site_table_t *table, field_t text)
{
  if (table->count == table->cap) {
    site_text_t *grown = ol_grow_array(table->sites, &table->cap, sizeof *grown, 64);
    if (!grown)
      return false;
    table->sites = grown;
  }
  char *copy = malloc(text.n + 1);
  if (!copy)
    return false;
  memcpy(copy, text.p, text.n);
  copy[text.n] = '\0';
  table->sites[table->count++] = (site_text_t){copy, text.n};
  return true;
}

/* "site,DEVICE,NUMBER,FRAMES": numbers go 0, 1, 2, ... per device. */
static int parse_site_line(ol_trace_t *t, const char *line, size_t len, ol_error_t *err)
{
  field_t f[4];
  char tmp[40];
  unsigned long long at = (unsigned long long)t->line;
  int device;
  uint64_t id;
  if (split_n(line, len, f, 4) < 4) {
    ol_fail(err, OL_EXIT_USAGE, "%s:%llu: a site line is site,DEVICE,NUMBER,FRAMES", t->path, at);
    return -1;
  }
  if (!parse_device(f[1], &device)) {
    ol_fail(err, OL_EXIT_USAGE, "%s:%llu: device '%s' is not a number below %d", t->path, at,
        shown(f[1], tmp, sizeof tmp), OL_TRACE_MAX_DEVICES);
    return -1;
  }
  site_table_t *table = &t->sites[device];
  if (!parse_decimal(f[2], &id) || id != table->count || id >= MAX_SITES_PER_DEVICE) {
    ol_fail(err, OL_EXIT_USAGE, "%s:%llu: site '%s' out of order (device %d's next site is %zu)",
        t->path, at, shown(f[2], tmp, sizeof tmp), device, table->count);
    return -1;
  }
  if (!add_site(table, f[3])) {
    ol_fail(err, OL_EXIT_FAILURE, "%s:%llu: out of host memory", t->path, at);
    return -1;
  }
  return 0;
}

/* "device,DEVICE,CAPACITY" */
static int parse_device_line(ol_trace_t *t, const char *line, size_t len, ol_error_t *err)
{
  field_t f[4];
  char tmp[40];
  int device;
  uint64_t bytes;
  unsigned long long at = (unsigned long long)t->line;
  if (split_n(line, len, f, 4) != 3) {
    ol_fail(err, OL_EXIT_USAGE, "%s:%llu: a device line is device,DEVICE,CAPACITY", t->path, at);
    return -1;
  }
  if (!parse_device(f[1], &device)) {
    ol_fail(err, OL_EXIT_USAGE, "%s:%llu: bad device line (device '%s')", t->path, at,
        shown(f[1], tmp, sizeof tmp));
    return -1;
  }
  if (!parse_bytes(f[2], &bytes)) {
    ol_fail(err, OL_EXIT_USAGE, "%s:%llu: device capacity '%s' %s", t->path, at,
        shown(f[2], tmp, sizeof tmp), all_digits(f[2]) ? BYTES_RANGE : "is not a decimal number");
    return -1;
  }
  t->capacity[device] = bytes;
  return 0;
}

/* "outside,DEVICE,BYTES": what the device held outside the allocator at
 * the job's first allocation. */
static int parse_outside_line(ol_trace_t *t, const char *line, size_t len, ol_error_t *err)
{
  field_t f[4];
  int device;
  uint64_t bytes;
  if (split_n(line, len, f, 4) != 3 || !parse_device(f[1], &device) ||
      !parse_bytes(f[2], &bytes)) {
    ol_fail(err, OL_EXIT_USAGE, "%s:%llu: an outside line is outside,DEVICE,BYTES", t->path,
            (unsigned long long)t->line);
    return -1;
  }
  t->outside_plus1[device] = (int64_t)bytes + 1;
  return 0;
}

int64_t ol_trace_outside(const ol_trace_t *t, int device)
{
  return device >= 0 && device < OL_TRACE_MAX_DEVICES ? t->outside_plus1[device] - 1 : -1;
}

/* The site column: empty for none, else a site defined earlier. */
static int resolve_site(ol_trace_t *t, field_t f, int device, ol_trace_event_t *ev, ol_error_t *err)
{
  char tmp[40];
  uint64_t id;
  ev->frames = "";
  ev->frames_len = 0;
  ev->site_plus1 = 0;
  if (f.n == 0)
    return 0;
  const site_table_t *table = &t->sites[device];
  if (!parse_decimal(f, &id) || id >= table->count) {
    ol_fail(err, OL_EXIT_USAGE, "%s:%llu: site '%s' of device %d is not defined", t->path,
        (unsigned long long)t->line, shown(f, tmp, sizeof tmp), device);
    return -1;
  }
  ev->frames = table->sites[id].text;
  ev->frames_len = table->sites[id].len;
  ev->site_plus1 = (int32_t)id + 1;
  return 0;
}

/* "time_us,action,addr,size,stream,site,device" */
static int parse_our_event(ol_trace_t *t, const char *line, size_t len, ol_trace_event_t *ev,
                           ol_error_t *err)
{
  field_t f[8];
  char tmp[40];
  unsigned long long at = (unsigned long long)t->line;
  int count = split_n(line, len, f, 8);
  if (count != 7) {
    ol_fail(err, OL_EXIT_USAGE, "%s:%llu: %d fields, expected 7 (%s)", t->path, at, count,
            OUR_COLUMNS);
    return -1;
  }
  /* The first five columns are the CSV's, parsed as it parses them. */
  static const char *const names[] = {"time_us", "action", "addr", "size", "stream"};
  bool ok[5] = {
    parse_time(f[0], &ev->time_us),
    parse_action(f[1], &ev->action),
    parse_hex(f[2], &ev->addr),
    parse_bytes(f[3], &ev->size),
    parse_decimal(f[4], &ev->stream),
  };
  const char *range[5] = {TIME_RANGE, NULL, NULL, BYTES_RANGE, NULL};
  for (int i = 0; i < 5; i++) {
    if (!ok[i]) {
      bool out_of_range = range[i] && all_digits(f[i]) && f[i].n <= 20;
      ol_fail(err, OL_EXIT_USAGE, "%s:%llu: bad %s '%s'%s%s", t->path, at, names[i],
          shown(f[i], tmp, sizeof tmp), out_of_range ? ": " : "", out_of_range ? range[i] : "");
      return -1;
    }
  }
  if (!parse_device(f[6], &ev->device)) {
    ol_fail(err, OL_EXIT_USAGE, "%s:%llu: device '%s' is not a number below %d", t->path, at,
        shown(f[6], tmp, sizeof tmp), OL_TRACE_MAX_DEVICES);
    return -1;
  }
  if (resolve_site(t, f[5], ev->device, ev, err) < 0)
    return -1;
  t->devices_seen |= (uint64_t)1 << ev->device;
  ev->line = t->line;
  ev->oom_final = false; /* each failed attempt: account.c settles which the job saw */
  ev->context = NULL;
  t->last_time_us = ev->time_us;
  return 1;
}

/* A named line read as an event of its own: at the time of the event
 * before it, on no stream, with no call site. */
static void named_line_event(const ol_trace_t *t, ol_trace_action_t action, uint64_t addr,
                             uint64_t size, ol_trace_event_t *ev)
{
  ev->action = action;
  ev->time_us = t->last_time_us;
  ev->addr = addr;
  ev->size = size;
  ev->stream = 0;
  ev->frames = "";
  ev->frames_len = 0;
  ev->site_plus1 = 0;
  ev->line = t->line;
  ev->oom_final = false;
  ev->context = NULL;
}

/* "oom_context,DEVICE,WORDS" (oom_context.c's words): an event of its own,
 * at the time of the event before it, its size the request. */
static int parse_context_line(ol_trace_t *t, const char *line, size_t len, ol_trace_event_t *ev,
                              ol_error_t *err)
{
  field_t f[3];
  char tmp[40];
  unsigned long long at = (unsigned long long)t->line;
  if (split_n(line, len, f, 3) != 3) {
    ol_fail(err, OL_EXIT_USAGE, "%s:%llu: an oom_context line is oom_context,DEVICE,WORDS",
            t->path, at);
    return -1;
  }
  if (!parse_device(f[1], &ev->device)) {
    ol_fail(err, OL_EXIT_USAGE, "%s:%llu: device '%s' is not a number below %d", t->path, at,
            shown(f[1], tmp, sizeof tmp), OL_TRACE_MAX_DEVICES);
    return -1;
  }
  if (!ol_oom_context_parse(f[2].p, f[2].n, &t->context, &ev->context_class)) {
    ol_fail(err, OL_EXIT_USAGE, "%s:%llu: bad oom_context words '%s'", t->path, at,
            shown(f[2], tmp, sizeof tmp));
    return -1;
  }
  named_line_event(t, OL_TRACE_OOM_CONTEXT, 0, t->context.request, ev);
  ev->context = &t->context;
  return 1;
}

/* "pool_held,DEVICE,ADDR" or "pool_freed,DEVICE,ADDR": manage mode's pool
 * kept a freed block out of use, or took it back. An event of its own for
 * a reader that asked (at the time of the event before it, no size), else
 * skipped like any named line. */
static int parse_pool_line(ol_trace_t *t, const char *line, size_t len, ol_trace_action_t action,
                           ol_trace_event_t *ev, ol_error_t *err)
{
  field_t f[4];
  if (!t->pool_lines)
    return 0;
  if (split_n(line, len, f, 4) != 3 || !parse_device(f[1], &ev->device) ||
      !parse_hex(f[2], &ev->addr)) {
    ol_fail(err, OL_EXIT_USAGE, "%s:%llu: a %s line is %s,DEVICE,ADDR", t->path,
            (unsigned long long)t->line, ol_trace_action_name(action),
            ol_trace_action_name(action));
    return -1;
  }
  named_line_event(t, action, ev->addr, 0, ev);
  return 1;
}

/* A line named by a lowercase word (site, device, oom_context, ...), as
 * against an event, which starts with its time's digits. */
static bool is_named_line(const char *line, size_t len)
{
  return len > 0 && line[0] >= 'a' && line[0] <= 'z';
}

/* 1 an event, 0 a definition line (read on), -1 an error. */
static int parse_our_line(ol_trace_t *t, const char *line, size_t len, ol_trace_event_t *ev,
                          ol_error_t *err)
{
  if (starts_with(line, len, "site,"))
    return parse_site_line(t, line, len, err);
  if (starts_with(line, len, "device,"))
    return parse_device_line(t, line, len, err);
  if (starts_with(line, len, "oom_context,"))
    return parse_context_line(t, line, len, ev, err);
  if (starts_with(line, len, "outside,"))
    return parse_outside_line(t, line, len, err);
  if (starts_with(line, len, "pool_held,"))
    return parse_pool_line(t, line, len, OL_TRACE_POOL_HELD, ev, err);
  if (starts_with(line, len, "pool_freed,"))
    return parse_pool_line(t, line, len, OL_TRACE_POOL_FREED, ev, err);
  if (is_named_line(line, len))
    return 0; /* a line of a later minor addition: skipped (docs/trace-format.md) */
  return parse_our_event(t, line, len, ev, err);
}

/* "# end events=N" or "# end events=N incomplete: REASON": the writer
 * closed the trace, whole or stopped early. */
static void read_comment(ol_trace_t *t, const char *line, size_t len)
{
  static const char end[] = "# end events=", incomplete[] = " incomplete: ";
  if (t->format != OL_TRACE_FORMAT_OOMLENS || !starts_with(line, len, end))
    return;
  t->ended = true;
  const char *why = memmem(line, len, incomplete, strlen(incomplete));
  if (why) {
    why += strlen(incomplete);
    size_t n = (size_t)(line + len - why);
    snprintf(t->incomplete, sizeof t->incomplete, "%.*s", (int)(n < 80 ? n : 80), why);
  }
}

/* The file's last line had no newline and does not read: the disk filled
 * or the job died while it was being written. Every line before it is
 * whole; this one is dropped. Ours always ends its lines, so an
 * unterminated last line of our format is cut whether it reads or not. */
static int cut_short(ol_trace_t *t, ol_error_t *err)
{
  t->cut = true;
  t->cut_line = t->line;
  t->at_end = true;
  ol_error_clear(err);
  return 0;
}

/* Each size is at most 2^56, and all of them together at most 2^62: then
 * no total made of them (bytes allocated and freed, a call site's, live
 * bytes at any moment) can overflow in any reader, and the live path pays
 * nothing for it. */
static int count_size(ol_trace_t *t, const ol_trace_event_t *ev, ol_error_t *err)
{
  if (ev->size > OL_TRACE_MAX_BYTES) { /* an oom_context line's request: its words' number */
    ol_fail(err, OL_EXIT_USAGE, "%s:%llu: request %llu is out of range (more than 2^56 bytes)",
            t->path, (unsigned long long)ev->line, (unsigned long long)ev->size);
    return -1;
  }
  t->sizes_read += ev->size; /* at most 2^62 + 2^56: no wrap */
  if (t->sizes_read <= OL_TRACE_MAX_TOTAL)
    return 1;
  ol_fail(err, OL_EXIT_USAGE, "%s:%llu: the sizes of the trace's events add up to more than "
          "2^62 bytes (4 EiB), more than any run allocates", t->path,
          (unsigned long long)ev->line);
  return -1;
}

int ol_trace_next(ol_trace_t *t, ol_trace_event_t *ev, ol_error_t *err)
{
  for (;;) {
    const char *line;
    size_t len;
    int got = next_line(t, &line, &len, err);
    t->at_end = got == 0;
    if (got <= 0)
      return got;
    if (t->unterminated && t->format == OL_TRACE_FORMAT_OOMLENS)
      return cut_short(t, err);
    /* Blank lines and later '#' comments carry no event. */
    if (len == 0 || line[0] == '#') {
      read_comment(t, line, len);
      continue;
    }
    int got_event = t->format == OL_TRACE_FORMAT_CSV ? parse_event(t, line, len, ev, err)
                                                     : parse_our_line(t, line, len, ev, err);
    if (got_event < 0 && t->unterminated && (!err || err->status == OL_EXIT_USAGE))
      return cut_short(t, err);
    if (got_event > 0)
      return count_size(t, ev, err);
    if (got_event < 0)
      return got_event;
  }
}

const char *ol_trace_note(ol_trace_t *t)
{
  if (!t->at_end) /* a reader that stopped early (replay at its OOM) knows nothing of the end */
    return NULL;
  if (t->cut)
    snprintf(t->note, sizeof t->note, "cut short: line %llu ends without its newline (the disk "
             "filled, or the job was killed while writing it); read up to line %llu",
             (unsigned long long)t->cut_line, (unsigned long long)t->cut_line - 1);
  else if (t->format == OL_TRACE_FORMAT_OOMLENS && !t->ended)
    snprintf(t->note, sizeof t->note, "cut short: no end line (the job was killed or crashed, "
             "or the disk filled); read its %llu lines", (unsigned long long)t->line);
  else if (t->incomplete[0])
    snprintf(t->note, sizeof t->note, "incomplete: tracing stopped early (%s)", t->incomplete);
  else
    return NULL;
  return t->note;
}

int ol_trace_check_device(const ol_trace_t *t, int device, ol_error_t *err)
{
  if (device < 0 || device >= OL_TRACE_MAX_DEVICES || t->devices_seen & (uint64_t)1 << device)
    return 0;
  char list[OL_TRACE_MAX_DEVICES * 4] = "";
  size_t n = 0;
  for (int d = 0; d < OL_TRACE_MAX_DEVICES; d++)
    if (t->devices_seen & (uint64_t)1 << d)
      n += (size_t)snprintf(list + n, sizeof list - n, "%s%d", n ? ", " : "", d);
  ol_fail(err, OL_EXIT_USAGE, "%s: no event of device %d (%s%s)", t->path, device,
          n ? "its events are on device " : "it has no events", list);
  return -1;
}

int ol_trace_finish(ol_trace_t *t, int device, char *note, size_t cap, ol_error_t *err)
{
  const char *said = ol_trace_note(t);
  if (cap)
    snprintf(note, cap, "%s", said ? said : "");
  return ol_trace_check_device(t, device, err);
}
