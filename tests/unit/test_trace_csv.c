/* test_trace_csv.c: the trace reader: good lines field by field, gzip'd,
 * xz and plain input, empty and header-only files, every malformed case with its
 * line number in the message, and a long trace streamed through. */
#include <check.h>

#include "check_run.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <lzma.h>
#include <zlib.h>

#include "core.h"
#include "trace_csv.h"

#define HEADER "# time_us,action,addr,size,stream,frames\n"

static char dir[OL_TEST_DIR_MAX];
static char path[512];

static void setup(void)
{
  ol_test_make_dir(dir, sizeof dir, "trace");
}

/* Every file a test wrote goes (a test may write both t.csv and t.csv.gz),
 * and the folder with them. */
static void teardown(void)
{
  ck_assert(ol_test_remove_tree(dir));
}

/* Writes text to a fresh file, gzip'd when gz; returns its path. */
static const char *write_trace(const char *text, bool gz)
{
  snprintf(path, sizeof path, "%s/t.csv%s", dir, gz ? ".gz" : "");
  if (gz) {
    gzFile f = gzopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    if (*text)
      ck_assert_int_eq(gzwrite(f, text, (unsigned)strlen(text)), (int)strlen(text));
    gzclose(f);
  } else {
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
  }
  return path;
}

static const char good_text[] =
  HEADER
  "100,alloc,0x7f0000000000,512,0,a.py:1:f;b.py:2:g\n"
  "\n"
  "101,free_requested,0x7f0000000000,512,0,\n"
  "# a comment line\n"
  "102,free_completed,0X7F0000000000,512,7,frames, with, commas\r\n"
  "103,segment_alloc,0x0,2097152,18446744073709551615,x\n"
  "104,segment_free,0xffffffffffffffff,2097152,0,\n"
  "105,segment_map,0x10,20971520,0,\n"
  "106,segment_unmap,0x10,20971520,0,\n"
  "107,oom,0x0,72057594037927936,0,last line without newline";

typedef struct {
  uint64_t time_us;
  ol_trace_action_t action;
  uint64_t addr, size, stream;
  const char *frames;
  uint64_t line;
} want_t;

static const want_t good_events[] = {
  {100, OL_TRACE_ALLOC, 0x7f0000000000, 512, 0, "a.py:1:f;b.py:2:g", 2},
  {101, OL_TRACE_FREE_REQUESTED, 0x7f0000000000, 512, 0, "", 4},
  {102, OL_TRACE_FREE_COMPLETED, 0x7f0000000000, 512, 7, "frames, with, commas", 6},
  {103, OL_TRACE_SEGMENT_ALLOC, 0, 2097152, UINT64_MAX, "x", 7},
  {104, OL_TRACE_SEGMENT_FREE, UINT64_MAX, 2097152, 0, "", 8},
  {105, OL_TRACE_SEGMENT_MAP, 0x10, 20971520, 0, "", 9},
  {106, OL_TRACE_SEGMENT_UNMAP, 0x10, 20971520, 0, "", 10},
  {107, OL_TRACE_OOM, 0, OL_TRACE_MAX_BYTES, 0, "last line without newline", 11},
};

/* Writes text xz-compressed (as the corpus keeps its traces), its first
 * keep thousandths only and the byte at flip, if any, inverted: its path. */
static const char *write_xz(const char *text, size_t keep, long flip)
{
  size_t len = strlen(text), cap = lzma_stream_buffer_bound(len), out = 0;
  uint8_t *buf = malloc(cap);
  ck_assert_ptr_nonnull(buf);
  ck_assert_int_eq(lzma_easy_buffer_encode(6, LZMA_CHECK_CRC64, NULL, (const uint8_t *)text, len,
                                           buf, &out, cap),
                   LZMA_OK);
  size_t kept = out * keep / 1000;
  if (flip >= 0 && (size_t)flip < out)
    buf[flip] ^= 0xff;
  snprintf(path, sizeof path, "%s/t.csv.xz", dir);
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(fwrite(buf, 1, kept, f), kept);
  fclose(f);
  free(buf);
  return path;
}

static void check_good_at(const char *file)
{
  ol_error_t err;
  ol_trace_t *t = ol_trace_open(file, &err);
  ck_assert_msg(t != NULL, "%s", err.text);
  ol_trace_event_t ev;
  size_t n = sizeof good_events / sizeof *good_events;
  for (size_t i = 0; i < n; i++) {
    const want_t *w = &good_events[i];
    ck_assert_int_eq(ol_trace_next(t, &ev, &err), 1);
    ck_assert_uint_eq(ev.time_us, w->time_us);
    ck_assert_int_eq(ev.action, w->action);
    ck_assert_uint_eq(ev.addr, w->addr);
    ck_assert_uint_eq(ev.size, w->size);
    ck_assert_uint_eq(ev.stream, w->stream);
    ck_assert_uint_eq(ev.frames_len, strlen(w->frames));
    ck_assert(memcmp(ev.frames, w->frames, ev.frames_len) == 0);
    ck_assert_uint_eq(ev.line, w->line);
  }
  ck_assert_int_eq(ol_trace_next(t, &ev, &err), 0);
  ck_assert_int_eq(ol_trace_next(t, &ev, &err), 0);
  ol_trace_close(t);
}

static void check_good(bool gz)
{
  check_good_at(write_trace(good_text, gz));
}

START_TEST(good_xz)
{
  check_good_at(write_xz(good_text, 1000, -1));
}
END_TEST

/* A pipe is read once, front to back: `oomlens report /dev/stdin`, or a
 * process substitution. Its first bytes, read to tell its compression,
 * are its trace's first bytes (before, the file was opened once for the
 * xz magic and again to read it: through a pipe the trace began part way
 * in, "unknown trace format", or was "empty"). */
typedef struct {
  char from[600], fifo[600];
} pipe_feed_t;

static void *feed_pipe(void *arg)
{
  const pipe_feed_t *p = arg;
  FILE *in = fopen(p->from, "rb"), *out = fopen(p->fifo, "wb");
  char buf[4096];
  size_t n;
  while (in && out && (n = fread(buf, 1, sizeof buf, in)) > 0)
    fwrite(buf, 1, n, out);
  if (in)
    fclose(in);
  if (out)
    fclose(out);
  return NULL;
}

static void check_good_through_a_pipe(const char *file)
{
  pipe_feed_t p;
  snprintf(p.from, sizeof p.from, "%s", file);
  snprintf(p.fifo, sizeof p.fifo, "%s/pipe", dir);
  unlink(p.fifo);
  ck_assert_int_eq(mkfifo(p.fifo, 0600), 0);
  pthread_t writer;
  ck_assert_int_eq(pthread_create(&writer, NULL, feed_pipe, &p), 0);
  check_good_at(p.fifo);
  pthread_join(writer, NULL);
}

START_TEST(good_through_a_pipe)
{
  check_good_through_a_pipe(write_trace(good_text, false));
  check_good_through_a_pipe(write_trace(good_text, true));
  check_good_through_a_pipe(write_xz(good_text, 1000, -1));
}
END_TEST

/* gzip allows members one after another (`cat a.gz b.gz`), as zlib's
 * gzread reads them: the trace is all of them. */
START_TEST(gzip_members_one_after_another)
{
  size_t half = strlen(good_text) / 2;
  while (good_text[half - 1] != '\n')
    half++;
  snprintf(path, sizeof path, "%s/t.csv.gz", dir);
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  for (int part = 0; part < 2; part++) {
    const char *text = part ? good_text + half : good_text;
    size_t len = part ? strlen(good_text) - half : half;
    char member[600];
    snprintf(member, sizeof member, "%s/m%d.gz", dir, part);
    gzFile g = gzopen(member, "wb");
    ck_assert_ptr_nonnull(g);
    ck_assert_int_eq(gzwrite(g, text, (unsigned)len), (int)len);
    gzclose(g);
    FILE *m = fopen(member, "rb");
    char buf[4096];
    size_t n;
    while (m && (n = fread(buf, 1, sizeof buf, m)) > 0)
      fwrite(buf, 1, n, f);
    fclose(m);
  }
  fclose(f);
  check_good_at(path);
}
END_TEST

/* An xz stream cut short, or with a byte changed, is a read error that
 * says so, not a crash nor a trace that ends early. */
START_TEST(bad_xz)
{
  char *text = malloc(1 << 20);
  ck_assert_ptr_nonnull(text);
  size_t at = (size_t)snprintf(text, 1 << 20, HEADER);
  for (int i = 0; i < 20000 && at < (1 << 20) - 64; i++)
    at += (size_t)snprintf(text + at, (1 << 20) - at, "%d,alloc,0x%x,%d,0,some.py:%d:frame\n", i,
                           i * 512, 512 + i, i);
  static const struct {
    size_t keep;
    long flip;
  } bad[] = {{500, -1}, {1000, 3000}}; /* half of it; a byte changed */
  for (size_t b = 0; b < sizeof bad / sizeof *bad; b++) {
    ol_error_t err;
    /* the reader fills its buffer at once: a small trace fails at its open */
    ol_trace_t *t = ol_trace_open(write_xz(text, bad[b].keep, bad[b].flip), &err);
    ol_trace_event_t ev;
    int got = t ? 1 : -1;
    while (got == 1)
      got = ol_trace_next(t, &ev, &err);
    ck_assert_int_eq(got, -1);
    ck_assert_msg(strstr(err.text, "cannot read: the xz data"), "%zu: %s", b, err.text);
    ol_trace_close(t);
  }
  free(text);
}
END_TEST

START_TEST(good_plain)
{
  check_good(false);
}
END_TEST

START_TEST(good_gzip)
{
  check_good(true);
}
END_TEST

START_TEST(header_only)
{
  ol_error_t err;
  for (int gz = 0; gz < 2; gz++) {
    ol_trace_t *t = ol_trace_open(write_trace(HEADER, gz), &err);
    ck_assert_msg(t != NULL, "%s", err.text);
    ol_trace_event_t ev;
    ck_assert_int_eq(ol_trace_next(t, &ev, &err), 0);
    ol_trace_close(t);
  }
}
END_TEST

typedef struct {
  const char *text;    /* whole file */
  const char *message; /* expected after "PATH" */
} open_case_t;

static const open_case_t open_cases[] = {
  {"", ": empty file, not a trace"},
  {"\n", ":1: unknown trace format"},
  {"time_us,action,addr,size,stream,frames\n", ":1: unknown trace format"},
  {"# time_us,action\n", ":1: unknown trace format"},
  {"100,alloc,0x1,512,0,\n", ":1: unknown trace format"},
};

START_TEST(open_table)
{
  const open_case_t *c = &open_cases[_i];
  for (int gz = 0; gz < 2; gz++) {
    char want[600];
    ol_error_t err;
    const char *p = write_trace(c->text, gz);
    ck_assert_ptr_null(ol_trace_open(p, &err));
    snprintf(want, sizeof want, "%s%s", p, c->message);
    ck_assert_msg(strncmp(err.text, want, strlen(want)) == 0, "case %d gz %d: '%s'", _i, gz,
                  err.text);
    ck_assert_int_eq(err.status, OL_EXIT_USAGE); /* a bad input file */
  }
}
END_TEST

typedef struct {
  const char *line;    /* the event line, put on line 3 after a good one */
  const char *message; /* expected after "PATH:3: " */
} bad_case_t;

static const bad_case_t bad_cases[] = {
  {"1,allocate,0x1,512,0,", "bad action 'allocate'"},
  {"1,,0x1,512,0,", "bad action ''"},
  {"1,ALLOC,0x1,512,0,", "bad action 'ALLOC'"},
  {"x1,alloc,0x1,512,0,", "time_us 'x1' is not a decimal number"},
  {"-1,alloc,0x1,512,0,", "time_us '-1' is not a decimal number"},
  {"18446744073709551616,alloc,0x1,512,0,", "time_us '18446744073709551616' is out of range"},
  {"9007199254740993,alloc,0x1,512,0,", "time_us '9007199254740993' is out of range (more than 2^53"},
  {",alloc,0x1,512,0,", "time_us '' is not a decimal number"},
  {"1,alloc,0x1,512,0", "missing fields: 5 of 6"},
  {"1,alloc,0x1", "missing fields: 3 of 6"},
  {"garbage", "missing fields: 1 of 6"},
  {"1,alloc,1000,512,0,", "addr '1000' is not a hex address"},
  {"1,alloc,0x,512,0,", "addr '0x' is not a hex address"},
  {"1,alloc,0x12g4,512,0,", "addr '0x12g4' is not a hex address"},
  {"1,alloc,0x11111111111111111,512,0,", "addr '0x11111111111111111' is not a hex"},
  {"1,alloc, 0x1,512,0,", "addr ' 0x1' is not a hex address"},
  {"1,alloc,0x1,99999999999999999999,0,", "size '99999999999999999999' is out of range"},
  {"1,alloc,0x1,9223372036854775808,0,", "size '9223372036854775808' is out of range"},
  /* issue 15: above 2^56 a size is refused with its line, so no sum overflows */
  {"1,alloc,0x1,72057594037927937,0,", "size '72057594037927937' is out of range (more than 2^56 bytes)"},
  {"1,alloc,0x1,12.5,0,", "size '12.5' is not a decimal number"},
  {"1,alloc,0x1,,0,", "size '' is not a decimal number"},
  {"1,alloc,0x1,-512,0,", "size '-512' is not a decimal number"},
  {"1,alloc,0x1,512,s,", "stream 's' is not a decimal number"},
  {"1,alloc,0x1,512,,", "stream '' is not a decimal number"},
};

/* A trace whose first event reads and whose line `line` (c's) is refused
 * with c's message, as text and gzip'd alike. */
static void refused_at(const char *text, int line, const bad_case_t *c)
{
  char want[700];
  ol_error_t err;
  for (int gz = 0; gz < 2; gz++) {
    const char *p = write_trace(text, gz);
    ol_trace_t *t = ol_trace_open(p, &err);
    ck_assert_msg(t != NULL, "%s", err.text);
    ol_trace_event_t ev;
    ck_assert_int_eq(ol_trace_next(t, &ev, &err), 1);
    ck_assert_int_eq(ol_trace_next(t, &ev, &err), -1);
    snprintf(want, sizeof want, "%s:%d: %s", p, line, c->message);
    ck_assert_msg(strncmp(err.text, want, strlen(want)) == 0, "want '%s', got '%s'", want,
                  err.text);
    ck_assert_int_eq(err.status, OL_EXIT_USAGE);
    ol_trace_close(t);
  }
}

START_TEST(bad_table)
{
  const bad_case_t *c = &bad_cases[_i];
  char text[512];
  snprintf(text, sizeof text, HEADER "1,alloc,0x1,512,0,\n%s\n4,alloc,0x2,512,0,\n", c->line);
  refused_at(text, 3, c);
}
END_TEST

/* A line exactly at the bound is read; one byte more is refused. */
START_TEST(line_bound)
{
  const char *prefix = "1,alloc,0x1,512,0,";
  size_t size = strlen(HEADER) + 2 * (OL_TRACE_MAX_LINE + 2) + 8;
  char *text = malloc(size);
  ol_error_t err;
  ck_assert_ptr_nonnull(text);
  for (int over = 0; over < 2; over++) {
    size_t len = OL_TRACE_MAX_LINE + (size_t)over;
    strcpy(text, HEADER);
    char *line = text + strlen(text);
    memset(line, 'f', len);
    memcpy(line, prefix, strlen(prefix));
    strcpy(line + len, "\n");
    ol_trace_t *t = ol_trace_open(write_trace(text, true), &err);
    ck_assert_ptr_nonnull(t);
    ol_trace_event_t ev;
    int got = ol_trace_next(t, &ev, &err);
    if (!over) {
      ck_assert_int_eq(got, 1);
      ck_assert_uint_eq(ev.frames_len, len - strlen(prefix));
    } else {
      ck_assert_int_eq(got, -1);
      ck_assert_msg(strstr(err.text, ":2: line longer than 65536 bytes") != NULL, "%s",
                    err.text);
    }
    ol_trace_close(t);
  }
  free(text);
}
END_TEST

START_TEST(missing_file)
{
  ol_error_t err;
  ck_assert_ptr_null(ol_trace_open("/nonexistent/trace.csv.gz", &err));
  ck_assert_str_eq(err.text, "cannot open /nonexistent/trace.csv.gz: No such file or directory");
  ck_assert_int_eq(err.status, OL_EXIT_USAGE);
}
END_TEST

/* A gzip stream cut short is a read error, reported, not a crash. */
START_TEST(truncated_gzip)
{
  ol_error_t err;
  snprintf(path, sizeof path, "%s/t.csv.gz", dir);
  gzFile f = gzopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  gzputs(f, HEADER);
  for (int i = 0; i < 20000; i++)
    gzprintf(f, "%d,alloc,0x%x,%d,0,some.py:%d:frame\n", i, i * 512, 512 + i, i);
  gzclose(f);
  ck_assert_int_eq(truncate(path, 4000), 0);
  ol_trace_t *t = ol_trace_open(path, &err);
  ck_assert_msg(t != NULL, "%s", err.text);
  ol_trace_event_t ev;
  int got;
  while ((got = ol_trace_next(t, &ev, &err)) == 1)
    ;
  ck_assert_int_eq(got, -1);
  ck_assert_msg(strstr(err.text, "cannot read") != NULL, "%s", err.text);
  ol_trace_close(t);
}
END_TEST

/* Many events through the fixed buffer: every one comes back in order. */
START_TEST(long_trace)
{
  const int n = 300000;
  ol_error_t err;
  snprintf(path, sizeof path, "%s/t.csv.gz", dir);
  gzFile f = gzopen(path, "wb1");
  ck_assert_ptr_nonnull(f);
  gzputs(f, HEADER);
  for (int i = 0; i < n; i++)
    gzprintf(f, "%d,%s,0x%x,%d,0,f.py:%d:g\n", i, i % 2 ? "free_completed" : "alloc",
             (i / 2) * 512, 512 * (1 + i / 2), i);
  gzclose(f);
  ol_trace_t *t = ol_trace_open(path, &err);
  ck_assert_ptr_nonnull(t);
  ol_trace_event_t ev;
  int count = 0;
  while (ol_trace_next(t, &ev, &err) == 1) {
    /* Check records every assertion it passes: test first. */
    if (ev.time_us != (uint64_t)count || ev.size != 512u * (1u + (unsigned)count / 2) ||
        ev.line != (uint64_t)count + 2)
      ck_abort_msg("event %d read back wrong", count);
    count++;
  }
  ck_assert_int_eq(count, n);
  ol_trace_close(t);
}
END_TEST

START_TEST(action_names)
{
  ck_assert_str_eq(ol_trace_action_name(OL_TRACE_ALLOC), "alloc");
  ck_assert_str_eq(ol_trace_action_name(OL_TRACE_OOM), "oom");
  ck_assert_str_eq(ol_trace_action_name(OL_TRACE_ACTION_COUNT), "?");
}
END_TEST

/* ---- oomlens's own format ------------------------------------------- */

#define OUR_HEADER "# oomlens-trace 1 pid=4242 rank=3 start_unix_us=1700000000000000 stacks=1\n" \
                   "# time_us,action,addr,size,stream,site,device\n"

static const char our_text[] =
  OUR_HEADER
  "device,0,85899345920\n"
  "site,0,0,a.py:1:f;b.py:2:g\n"
  "10,segment_alloc,0x7f0000000000,2097152,0,0,0\n"
  "11,alloc,0x7f0000000000,512,0,0,0\n"
  "site,0,1,lib.so+0x10 fn, with a comma\n"
  "device,1,1000\n"
  "site,1,0,other.py:3:h\n"
  "12,alloc,0x7e0000000000,1024,7,0,1\n"
  "13,alloc,0x7f0000000200,512,0,1,0\n"
  "# a comment\n"
  "14,free_requested,0x7f0000000000,512,0,,0\n"
  "15,oom,0x0,4096,0,,1\n"
  "# end events=6\n";

typedef struct {
  uint64_t time_us;
  ol_trace_action_t action;
  uint64_t addr, size, stream;
  const char *frames;
  uint64_t line;
  int device;
} our_want_t;

static const our_want_t our_events[] = {
  {10, OL_TRACE_SEGMENT_ALLOC, 0x7f0000000000, 2097152, 0, "a.py:1:f;b.py:2:g", 5, 0},
  {11, OL_TRACE_ALLOC, 0x7f0000000000, 512, 0, "a.py:1:f;b.py:2:g", 6, 0},
  {12, OL_TRACE_ALLOC, 0x7e0000000000, 1024, 7, "other.py:3:h", 10, 1},
  {13, OL_TRACE_ALLOC, 0x7f0000000200, 512, 0, "lib.so+0x10 fn, with a comma", 11, 0},
  {14, OL_TRACE_FREE_REQUESTED, 0x7f0000000000, 512, 0, "", 13, 0},
  {15, OL_TRACE_OOM, 0, 4096, 0, "", 14, 1},
};

/* Every event with its frames resolved from the site lines and its
 * device; the header's and device lines' figures kept. */
START_TEST(ours_good)
{
  for (int gz = 0; gz < 2; gz++) {
    ol_error_t err;
    ol_trace_t *t = ol_trace_open(write_trace(our_text, gz), &err);
    ck_assert_msg(t != NULL, "%s", err.text);
    ck_assert_int_eq(ol_trace_format(t), OL_TRACE_FORMAT_OOMLENS);
    ck_assert_int_eq(ol_trace_pid(t), 4242);
    ck_assert_uint_eq(ol_trace_start_unix_us(t), 1700000000000000ull);
    ol_trace_event_t ev;
    for (size_t i = 0; i < sizeof our_events / sizeof *our_events; i++) {
      const our_want_t *w = &our_events[i];
      ck_assert_int_eq(ol_trace_next(t, &ev, &err), 1);
      ck_assert_uint_eq(ev.time_us, w->time_us);
      ck_assert_int_eq(ev.action, w->action);
      ck_assert_uint_eq(ev.addr, w->addr);
      ck_assert_uint_eq(ev.size, w->size);
      ck_assert_uint_eq(ev.stream, w->stream);
      ck_assert_uint_eq(ev.frames_len, strlen(w->frames));
      ck_assert(memcmp(ev.frames, w->frames, ev.frames_len) == 0);
      ck_assert_uint_eq(ev.line, w->line);
      ck_assert_int_eq(ev.device, w->device);
    }
    ck_assert_int_eq(ol_trace_next(t, &ev, &err), 0);
    ck_assert_uint_eq(ol_trace_capacity(t, 0), 85899345920ull);
    ck_assert_uint_eq(ol_trace_capacity(t, 1), 1000);
    ck_assert_uint_eq(ol_trace_capacity(t, 2), 0);
    ck_assert(ol_trace_progress(t) > 0.99);
    ol_trace_close(t);
  }
}
END_TEST

/* Version 2: an oom_context line reads as an event of its own carrying the
 * record's context (the words ol_oom_context_text writes, read back), and
 * a named line this reader does not know is skipped. */
START_TEST(ours_context_line)
{
  ol_oom_record_t r;
  ol_oom_record_init(&r, 4096);
  r.capacity = 1ull << 33;
  r.device_free = 0;
  r.external = 600ll << 20;
  r.free_reserved = 2048;
  r.largest_free_block = 1024;
  r.self_device_bytes = 1ll << 30;
  r.managed = true;
  r.other_count = 2;
  r.others[0].pid = 4242;
  r.others[0].bytes = 500ll << 20;
  snprintf(r.others[0].name, sizeof r.others[0].name, "py thon,;x");
  r.others[1].pid = 77;
  r.others[1].bytes = -1;
  ol_buf_t words = {0};
  ol_oom_context_text(&words, &r, OL_OOM_external);
  char text[2048];
  snprintf(text, sizeof text,
           "# oomlens-trace 2 pid=1\n15,oom,0x0,4096,0,,1\nlater_kind,1,whatever=2\n"
           "oom_context,1,%s later_key=7\n16,alloc,0x10,512,0,,1\n", words.data);
  ol_buf_free(&words);
  ol_error_t err;
  ol_trace_t *t = ol_trace_open(write_trace(text, false), &err);
  ck_assert_msg(t != NULL, "%s", err.text);
  ol_trace_event_t ev;
  ck_assert_int_eq(ol_trace_next(t, &ev, &err), 1);
  ck_assert_int_eq(ev.action, OL_TRACE_OOM);
  ck_assert(!ev.oom_final); /* ours: each attempt, settled by account.c */
  ck_assert_int_eq(ol_trace_next(t, &ev, &err), 1);
  ck_assert_int_eq(ev.action, OL_TRACE_OOM_CONTEXT);
  ck_assert_int_eq(ev.device, 1);
  ck_assert_uint_eq(ev.time_us, 15);
  ck_assert_uint_eq(ev.size, 4096);
  ck_assert_uint_eq(ev.line, 4);
  ck_assert_int_eq(ev.context_class, OL_OOM_external);
  const ol_oom_record_t *c = ev.context;
  ck_assert_uint_eq(c->capacity, 1ull << 33);
  ck_assert_int_eq(c->device_free, 0);
  ck_assert_int_eq(c->external, 600ll << 20);
  ck_assert_int_eq(c->free_reserved, 2048);
  ck_assert_int_eq(c->largest_free_block, 1024);
  ck_assert_int_eq(c->self_device_bytes, 1ll << 30);
  ck_assert(c->managed && !c->segments_only);
  ck_assert_int_eq(c->other_count, 2);
  ck_assert_uint_eq(c->others[0].pid, 4242);
  ck_assert_int_eq(c->others[0].bytes, 500ll << 20);
  ck_assert_str_eq(c->others[0].name, "py_thon__x"); /* one word, whatever the name */
  ck_assert_int_eq(c->others[1].bytes, -1);
  ck_assert_str_eq(c->others[1].name, "");
  ck_assert_int_eq(ol_trace_next(t, &ev, &err), 1);
  ck_assert_int_eq(ev.action, OL_TRACE_ALLOC);
  ck_assert_int_eq(ol_trace_next(t, &ev, &err), 0);
  ol_trace_close(t);
}
END_TEST

START_TEST(csv_is_csv)
{
  ol_error_t err;
  ol_trace_t *t = ol_trace_open(write_trace(good_text, false), &err);
  ck_assert_ptr_nonnull(t);
  ck_assert_int_eq(ol_trace_format(t), OL_TRACE_FORMAT_CSV);
  ck_assert_int_eq(ol_trace_pid(t), 0);
  ol_trace_event_t ev;
  ck_assert_int_eq(ol_trace_next(t, &ev, &err), 1);
  ck_assert_int_eq(ev.device, 0);
  ol_trace_close(t);
}
END_TEST

static const open_case_t our_open_cases[] = {
  {"# oomlens-trace 3 pid=1\n", ":1: oomlens trace version not supported"},
  {"# oomlens-trace 0 pid=1\n", ":1: oomlens trace version not supported"},
  {"# oomlens-trace x\n", ":1: oomlens trace version not supported"},
  {"# oomlens-trace 10\n", ":1: oomlens trace version not supported"},
};

START_TEST(ours_open_table)
{
  const open_case_t *c = &our_open_cases[_i];
  char want[600];
  ol_error_t err;
  const char *p = write_trace(c->text, false);
  ck_assert_ptr_null(ol_trace_open(p, &err));
  snprintf(want, sizeof want, "%s%s", p, c->message);
  ck_assert_msg(strncmp(err.text, want, strlen(want)) == 0, "case %d: '%s'", _i, err.text);
}
END_TEST

/* Each bad line comes on line 5, after a site and an event that are good. */
static const bad_case_t our_bad_cases[] = {
  {"2,alloc,0x1,512,0,1,0", "site '1' of device 0 is not defined"},
  {"2,alloc,0x1,512,0,0,1", "site '0' of device 1 is not defined"},
  {"2,alloc,0x1,512,0,x,0", "site 'x' of device 0 is not defined"},
  {"2,alloc,0x1,512,0,0,64", "device '64' is not a number below 64"},
  {"2,alloc,0x1,512,0,0,", "device '' is not a number below 64"},
  {"2,alloc,0x1,512,0,0", "6 fields, expected 7"},
  {"2,alloc,0x1,512,0,0,0,extra", "8 fields, expected 7"},
  {"2,allocate,0x1,512,0,,0", "bad action 'allocate'"},
  {"1x,alloc,0x1,512,0,,0", "bad time_us '1x'"},
  {"2,oom_context,0x0,512,0,,0", "bad action 'oom_context'"},
  {"oom_context,0", "an oom_context line is oom_context,DEVICE,WORDS"},
  {"oom_context,64,request=1", "device '64' is not a number below 64"},
  {"oom_context,0,capacity=12x", "bad oom_context words 'capacity=12x'"},
  {"oom_context,0,class=sideways", "bad oom_context words 'class=sideways'"},
  {"2,alloc,1,512,0,,0", "bad addr '1'"},
  {"2,alloc,0x1,9223372036854775808,0,,0", "bad size '9223372036854775808'"},
  {"2,alloc,0x1,72057594037927937,0,,0", "bad size '72057594037927937': is out of range (more than 2^56"},
  {"9007199254740993,alloc,0x1,512,0,,0", "bad time_us '9007199254740993': is out of range"},
  {"device,0,72057594037927937", "device capacity '72057594037927937' is out of range"},
  {"outside,0,72057594037927937", "an outside line is outside,DEVICE,BYTES"},
  {"2,alloc,0x1,512,-1,,0", "bad stream '-1'"},
  {"site,0,0,again", "site '0' out of order (device 0's next site is 1)"},
  {"site,0,2,skipped one", "site '2' out of order (device 0's next site is 1)"},
  {"site,99,0,x", "device '99' is not a number below 64"},
  {"site,0,1", "a site line is site,DEVICE,NUMBER,FRAMES"},
  {"device,0", "a device line is device,DEVICE,CAPACITY"},
  {"device,0,12,3", "a device line is device,DEVICE,CAPACITY"},
  {"device,x,12", "bad device line (device 'x')"},
};

START_TEST(ours_bad_table)
{
  const bad_case_t *c = &our_bad_cases[_i];
  char text[512];
  snprintf(text, sizeof text, OUR_HEADER "site,0,0,a.py:1:f\n1,alloc,0x1,512,0,0,0\n%s\n"
           "4,alloc,0x2,512,0,,0\n", c->line);
  refused_at(text, 5, c);
}
END_TEST


/* Manage mode's pool lines: skipped by every reader but one that asks
 * (replay), which gets them as events of their own at the time of the
 * event before; the header's manage=1 is kept. As an event's action they
 * are refused, like oom_context. */
START_TEST(ours_pool_lines)
{
  static const char text[] = "# oomlens-trace 2 pid=1 manage=1\n7,free_completed,0x10,512,0,,1\n"
                             "pool_held,1,0x10\npool_freed,1,0x10\n8,alloc,0x20,512,0,,1\n";
  const char *file = write_trace(text, false);
  ol_error_t err;
  ol_trace_event_t ev;
  for (int asked = 0; asked < 2; asked++) {
    ol_trace_t *t = ol_trace_open(file, &err);
    ck_assert_msg(t != NULL, "%s", err.text);
    ck_assert(ol_trace_managed(t));
    if (asked)
      ol_trace_want_pool_lines(t);
    ck_assert_int_eq(ol_trace_next(t, &ev, &err), 1);
    ck_assert_int_eq(ev.action, OL_TRACE_FREE_COMPLETED);
    for (int i = 0; asked && i < 2; i++) {
      ck_assert_int_eq(ol_trace_next(t, &ev, &err), 1);
      ck_assert_int_eq(ev.action, i == 0 ? OL_TRACE_POOL_HELD : OL_TRACE_POOL_FREED);
      ck_assert_int_eq(ev.device, 1);
      ck_assert_uint_eq(ev.addr, 0x10);
      ck_assert_uint_eq(ev.time_us, 7);
      ck_assert_uint_eq(ev.size, 0);
    }
    ck_assert_int_eq(ol_trace_next(t, &ev, &err), 1);
    ck_assert_int_eq(ev.action, OL_TRACE_ALLOC);
    ck_assert_int_eq(ol_trace_next(t, &ev, &err), 0);
    ol_trace_close(t);
  }
  ol_trace_t *t = ol_trace_open(write_trace("# oomlens-trace 2 pid=1\npool_held,0\n", false), &err);
  ck_assert_msg(t != NULL, "%s", err.text);
  ck_assert(!ol_trace_managed(t));
  ol_trace_want_pool_lines(t);
  ck_assert_int_eq(ol_trace_next(t, &ev, &err), -1);
  ck_assert_msg(strstr(err.text, "t.csv:2: a pool_held line is pool_held,DEVICE,ADDR"), "%s",
                err.text);
  ol_trace_close(t);
  t = ol_trace_open(write_trace("# oomlens-trace 2 pid=1\n5,pool_freed,0x1,0,0,,0\n", false),
                    &err);
  ck_assert_msg(t != NULL, "%s", err.text);
  ck_assert_int_eq(ol_trace_next(t, &ev, &err), -1);
  ck_assert_msg(strstr(err.text, "bad action 'pool_freed'"), "%s", err.text);
  ol_trace_close(t);
}
END_TEST

/* ---- a trace cut short, and --device (issue 15) ------------------------ */

/* Reads every event; returns how many, with the note (NULL: whole) and the
 * last event's line. */
static int read_all(const char *text, const char **note, uint64_t *last_line, ol_trace_t **out)
{
  ol_error_t err;
  ol_trace_t *t = ol_trace_open(write_trace(text, false), &err);
  ck_assert_msg(t != NULL, "%s", err.text);
  ol_trace_event_t ev;
  int n = 0, got;
  while ((got = ol_trace_next(t, &ev, &err)) == 1) {
    n++;
    *last_line = ev.line;
  }
  ck_assert_msg(got == 0, "refused: %s", err.text);
  *note = ol_trace_note(t);
  *out = t;
  return n;
}

#define OUR_EVENTS OUR_HEADER "site,0,0,a.py:1:f\n1,alloc,0x1,512,0,0,0\n2,alloc,0x2,512,0,,0\n"

/* Before: a trace without its end line was read with no word of it. */
START_TEST(ours_without_end_line_is_noted)
{
  const char *note;
  uint64_t line = 0;
  ol_trace_t *t;
  ck_assert_int_eq(read_all(OUR_EVENTS, &note, &line, &t), 2);
  ck_assert_ptr_nonnull(note);
  ck_assert_msg(strstr(note, "cut short: no end line") && strstr(note, "read its 5 lines"),
                "%s", note);
  ol_trace_close(t);
  ck_assert_int_eq(read_all(OUR_EVENTS "# end events=2\n", &note, &line, &t), 2);
  ck_assert_ptr_null(note);
  ol_trace_close(t);
  ck_assert_int_eq(read_all(OUR_EVENTS "# end events=2 incomplete: disk full\n", &note, &line, &t),
                   2);
  ck_assert_str_eq(note, "incomplete: tracing stopped early (disk full)");
  ol_trace_close(t);
}
END_TEST

/* Before: a trace cut in the middle of a line (a full disk) was refused
 * whole at that line. Now it is read up to its last whole line. */
START_TEST(cut_mid_line_reads_the_whole_lines)
{
  static const char *const cut[] = {
    OUR_EVENTS "3,alloc,0x3,51",    /* reads as a line, but ours always ends its lines */
    OUR_EVENTS "3,alloc,0x3,512,0", /* does not read */
    OUR_EVENTS "3,al",
  };
  for (size_t i = 0; i < sizeof cut / sizeof *cut; i++) {
    const char *note;
    uint64_t line = 0;
    ol_trace_t *t;
    ck_assert_int_eq(read_all(cut[i], &note, &line, &t), 2);
    ck_assert_uint_eq(line, 5);
    ck_assert_ptr_nonnull(note);
    ck_assert_msg(strstr(note, "line 6 ends without its newline") &&
                  strstr(note, "read up to line 5"), "%zu: %s", i, note);
    ol_trace_close(t);
  }
  /* The CSV: a last line that does not read is cut; one that reads is kept. */
  const char *note;
  uint64_t line = 0;
  ol_trace_t *t;
  ck_assert_int_eq(read_all(HEADER "1,alloc,0x1,512,0,\n2,alloc,0x2,5", &note, &line, &t), 1);
  ck_assert_ptr_nonnull(strstr(note, "line 3 ends without its newline"));
  ol_trace_close(t);
  ck_assert_int_eq(read_all(HEADER "1,alloc,0x1,512,0,\n2,alloc,0x2,5,0,", &note, &line, &t), 2);
  ck_assert_ptr_null(note);
  ol_trace_close(t);
}
END_TEST

/* Before: --device 7 on a trace without it gave 0 events and exit 0. */
START_TEST(device_without_events_is_an_error)
{
  const char *note;
  uint64_t line = 0;
  ol_trace_t *t;
  ol_error_t err;
  read_all(our_text, &note, &line, &t);
  ck_assert_int_eq(ol_trace_check_device(t, 0, &err), 0);
  ck_assert_int_eq(ol_trace_check_device(t, 1, &err), 0);
  ck_assert_int_eq(ol_trace_check_device(t, -1, &err), 0);
  ck_assert_int_eq(ol_trace_check_device(t, 7, &err), -1);
  ck_assert_int_eq(err.status, OL_EXIT_USAGE);
  ck_assert_msg(strstr(err.text, "t.csv: no event of device 7 (its events are on device 0, 1)"),
                "%s", err.text);
  ol_trace_close(t);
  read_all(HEADER, &note, &line, &t);
  ck_assert_int_eq(ol_trace_check_device(t, 0, &err), -1);
  ck_assert_ptr_nonnull(strstr(err.text, "no event of device 0 (it has no events)"));
  ol_trace_close(t);
}
END_TEST

/* Before: 128 events of 2^56 bytes overflowed the totals of every reader
 * (export, report: signed overflow in the account's counters and the call
 * sites' bytes). All the sizes together may not pass 2^62; an oom_context
 * request is bounded as an event's size is. */
START_TEST(sizes_add_up_to_at_most_2_62)
{
  static char text[64 * 1024];
  size_t n = (size_t)snprintf(text, sizeof text, "%s", HEADER);
  for (int i = 0; i < 70; i++)
    n += (size_t)snprintf(text + n, sizeof text - n, "%d,alloc,0x10,72057594037927936,0,\n", i);
  ol_error_t err;
  ol_trace_t *t = ol_trace_open(write_trace(text, false), &err);
  ck_assert_ptr_nonnull(t);
  ol_trace_event_t ev;
  int got, events = 0;
  while ((got = ol_trace_next(t, &ev, &err)) == 1)
    events++;
  ck_assert_int_eq(got, -1);
  ck_assert_int_eq(events, 64); /* 64 x 2^56 = 2^62, the 65th passes it */
  ck_assert_msg(strstr(err.text, "t.csv:66: the sizes of the trace's events add up to more than "
                                 "2^62 bytes"), "%s", err.text);
  ol_trace_close(t);
  t = ol_trace_open(write_trace(OUR_HEADER "oom_context,0,request=1152921504606846976\n", false),
                    &err);
  ck_assert_ptr_nonnull(t);
  ck_assert_int_eq(ol_trace_next(t, &ev, &err), -1);
  ck_assert_msg(strstr(err.text, "t.csv:3: request 1152921504606846976 is out of range"), "%s",
                err.text);
  ol_trace_close(t);
}
END_TEST

static Suite *trace_suite(void)
{
  Suite *s = suite_create("trace_csv");
  TCase *good = tcase_create("good");
  tcase_add_checked_fixture(good, setup, teardown);
  tcase_add_test(good, good_plain);
  tcase_add_test(good, good_gzip);
  tcase_add_test(good, good_xz);
  tcase_add_test(good, good_through_a_pipe);
  tcase_add_test(good, gzip_members_one_after_another);
  tcase_add_test(good, header_only);
  tcase_add_test(good, long_trace);
  tcase_add_test(good, action_names);
  tcase_add_test(good, ours_good);
  tcase_add_test(good, ours_context_line);
  tcase_add_test(good, ours_pool_lines);
  tcase_add_test(good, csv_is_csv);
  suite_add_tcase(s, good);
  TCase *bad = tcase_create("malformed");
  tcase_add_checked_fixture(bad, setup, teardown);
  /* bad_xz compresses a megabyte twice: over check's 4 s on a loaded
   * machine (it timed out beside a CI run, session 33) */
  tcase_set_timeout(bad, 30);
  tcase_add_loop_test(bad, open_table, 0, sizeof open_cases / sizeof *open_cases);
  tcase_add_loop_test(bad, bad_table, 0, sizeof bad_cases / sizeof *bad_cases);
  tcase_add_test(bad, line_bound);
  tcase_add_test(bad, missing_file);
  tcase_add_test(bad, truncated_gzip);
  tcase_add_test(bad, bad_xz);
  tcase_add_loop_test(bad, ours_open_table, 0, sizeof our_open_cases / sizeof *our_open_cases);
  tcase_add_loop_test(bad, ours_bad_table, 0, sizeof our_bad_cases / sizeof *our_bad_cases);
  tcase_add_test(bad, ours_without_end_line_is_noted);
  tcase_add_test(bad, cut_mid_line_reads_the_whole_lines);
  tcase_add_test(bad, device_without_events_is_an_error);
  tcase_add_test(bad, sizes_add_up_to_at_most_2_62);
  suite_add_tcase(s, bad);
  return s;
}

int main(void)
{
  return ol_run_suite(trace_suite());
}
