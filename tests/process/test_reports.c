/* test_reports.c: reports read back. `oomlens report` prints a JSON report
 * as text and as a self-contained HTML page (escaped, no network, rendered
 * by headless Chromium into a picture that is not blank); `oomlens merge`
 * puts ranks side by side (who ran out first, how unequal); files that are
 * not ours are refused with exit status 2. The fixtures in
 * data/reports/ were written by the library on the simulated CUDA (see
 * data/reports/README.md). */
#include <check.h>
#include <dirent.h>

#include "check_run.h"
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "harness.h"
#include "report_view.h"

#define MiB (1ll << 20)

/* A few at once stay valid: one command line may name several. */
static const char *fixture(const char *name)
{
  static char paths[4][PATH_MAX];
  static unsigned next;
  char *path = paths[next++ % 4];
  snprintf(path, PATH_MAX, "%s/reports/%s", harness_env("OOMLENS_TEST_DATA"), name);
  return path;
}

static void cli(harness_run_t *run, const char *const args[])
{
  const char *argv[16] = {harness_env("OOMLENS_TEST_CLI")};
  for (int i = 0; args[i]; i++)
    argv[i + 1] = args[i];
  harness_exec(run, false, NULL, argv);
}

static int count_of(const char *text, const char *what)
{
  int n = 0;
  for (const char *at = text; (at = strstr(at, what)); at += strlen(what))
    n++;
  return n;
}

static char *html_of(const char *fixture_name, const char *out_name)
{
  char out[PATH_MAX + 32];
  snprintf(out, sizeof out, "%s/%s", harness_dir(), out_name);
  char in[PATH_MAX];
  snprintf(in, sizeof in, "%s", fixture_name[0] == '/' ? fixture_name : fixture(fixture_name));
  harness_run_t run;
  cli(&run, (const char *[]){"report", in, "--html", out, NULL});
  ck_assert_msg(run.status == 0, "exit %d:\n%s", run.status, run.out);
  return ol_test_read_file(out, NULL);
}

START_TEST(text_report_from_json)
{
  harness_run_t run;
  cli(&run, (const char *[]){"report", fixture("rank1.json"), NULL});
  ck_assert_msg(run.status == 0, "exit %d:\n%s", run.status, run.out);
  ck_assert_ptr_nonnull(strstr(run.out, "pid 1001, rank 1, written at exit"));
  ck_assert_ptr_nonnull(strstr(run.out, "| oomlens CUDA memory summary, device ID 0"));
  ck_assert_ptr_nonnull(strstr(run.out, "| Allocated memory      |   1.00 GiB |   1.00 GiB |   3.50 GiB |"));
  ck_assert_ptr_nonnull(strstr(run.out, "out of memory (activations: "));
  ck_assert_ptr_nonnull(strstr(run.out, "Call sites holding memory at the peak:\n  768.00 MiB"));
}
END_TEST

/* Call sites come from user code and the command line from the user:
 * nothing of theirs may become markup. */
START_TEST(html_escapes_what_the_report_holds)
{
  char *html = html_of("evil.json", "evil.html");
  ck_assert_ptr_nonnull(strstr(html, "&lt;script&gt;alert(&quot;pwned&quot;)&lt;/script&gt;"));
  ck_assert_ptr_nonnull(strstr(html, "&lt;img src=x onerror=alert(1)&gt; &amp; co"));
  ck_assert_ptr_nonnull(strstr(html, "--tag &quot;&lt;b&gt;bold&lt;/b&gt;&quot; &amp; echo &#39;x&#39;"));
  ck_assert_ptr_nonnull(strstr(html, "rank 1&lt;i&gt;"));
  ck_assert_ptr_null(strstr(html, "<script>alert"));
  ck_assert_ptr_null(strstr(html, "<img"));
  ck_assert_ptr_null(strstr(html, "<b>bold"));
  ck_assert_ptr_null(strstr(html, "<i>"));
  /* Ours only: the chart's numbers and the hover script. */
  ck_assert_int_eq(count_of(html, "<script"), 2);
  free(html);
}
END_TEST

/* The figures, the chart, the diagnosis and nothing fetched from anywhere. */
START_TEST(html_holds_the_figures_and_nothing_external)
{
  char *html = html_of("rank1.json", "rank1.html");
  ck_assert_ptr_nonnull(strstr(html, "<svg class=\"chart\""));
  ck_assert_ptr_nonnull(strstr(html, "OOM (32.00 MiB)"));
  ck_assert_ptr_nonnull(strstr(html, "peak allocated 1.00 GiB"));
  ck_assert_ptr_nonnull(strstr(html, "<span class=\"badge\">activations</span>"));
  ck_assert_ptr_nonnull(strstr(html, "a batch about 70% of the current one fits"));
  ck_assert_ptr_nonnull(strstr(html, "<td>768.00 MiB</td><td>75.0%</td><td>104</td>"));
  ck_assert_ptr_nonnull(strstr(html, "<td class=\"l\">Allocated memory</td><td>1.00 GiB</td>"
                                     "<td>1.00 GiB</td><td>3.50 GiB</td>"));
  ck_assert_ptr_nonnull(strstr(html, "default-src 'none'"));
  ck_assert_ptr_null(strstr(html, "http:"));
  ck_assert_ptr_null(strstr(html, "https:"));
  ck_assert_ptr_null(strstr(html, " src="));
  ck_assert_ptr_null(strstr(html, "href="));
  ck_assert_ptr_null(strstr(html, "@import"));
  ck_assert_ptr_null(strstr(html, "url("));
  free(html);
}
END_TEST

START_TEST(format_1_0_still_reads)
{
  harness_run_t run;
  cli(&run, (const char *[]){"report", fixture("format_1_0.json"), NULL});
  ck_assert_msg(run.status == 0, "exit %d:\n%s", run.status, run.out);
  ck_assert_ptr_nonnull(strstr(run.out, "out of memory (activations: "));
  char *html = html_of("format_1_0.json", "old.html");
  ck_assert_ptr_nonnull(strstr(html, "This report has no timeline"));
  ck_assert_ptr_nonnull(strstr(html, "<span class=\"badge\">activations</span>"));
  ck_assert_ptr_null(strstr(html, "<svg class=\"chart\""));
  free(html);
}
END_TEST

static void write_file(const char *name, const char *text, char *path, size_t cap)
{
  snprintf(path, cap, "%s/%s", harness_dir(), name);
  ol_test_write_file(path, text);
}

typedef struct {
  const char *name, *content, *message;
} bad_case_t;

static const bad_case_t bad_files[] = {
  {"other.json", "{\"foo\": 1}\n", "not an oomlens report"},
  {"list.json", "{\"oomlens_report\": 1, \"devices\": 3}\n", "not an oomlens report"},
  {"newer.json", "{\"oomlens_report\": 2, \"devices\": []}\n", "report format 2; this oomlens reads format 1"},
  {"broken.json", "{\"oomlens_report\": 1,\n", "line 2"},
  {"text.txt", "hello\n", "unknown trace format"},
  {NULL, NULL, "cannot open"},
};

START_TEST(not_ours_exits_2)
{
  const bad_case_t *c = &bad_files[_i];
  char path[PATH_MAX + 32];
  if (c->name)
    write_file(c->name, c->content, path, sizeof path);
  else
    snprintf(path, sizeof path, "%s/missing.json", harness_dir());
  harness_run_t run;
  cli(&run, (const char *[]){"report", path, NULL});
  ck_assert_msg(run.status == 2 && strstr(run.out, c->message), "report %s: exit %d\n%s", path,
                run.status, run.out);
  if (strstr(path, ".json")) {
    cli(&run, (const char *[]){"merge", fixture("rank0.json"), path, NULL});
    ck_assert_msg(run.status == 2 && strstr(run.out, c->message), "merge %s: exit %d\n%s", path,
                  run.status, run.out);
    ck_assert_ptr_null(strstr(run.out, "rank ")); /* no half table */
  }
}
END_TEST

START_TEST(usage_errors)
{
  harness_run_t run;
  cli(&run, (const char *[]){"report", NULL});
  ck_assert_int_eq(run.status, 2);
  cli(&run, (const char *[]){"report", fixture("rank0.json"), "--html", NULL});
  ck_assert_int_eq(run.status, 2);
  cli(&run, (const char *[]){"report", "--bogus", NULL});
  ck_assert_int_eq(run.status, 2);
  cli(&run, (const char *[]){"merge", NULL});
  ck_assert_int_eq(run.status, 2);
  cli(&run, (const char *[]){"merge", "--bogus", fixture("rank0.json"), NULL});
  ck_assert_int_eq(run.status, 2);
  cli(&run, (const char *[]){"report", "--help", NULL});
  ck_assert_int_eq(run.status, 0);
  ck_assert_ptr_nonnull(strstr(run.out, "usage: oomlens report FILE [--html OUT.html]"));
  cli(&run, (const char *[]){"merge", "--help", NULL});
  ck_assert_int_eq(run.status, 0);
  ck_assert_ptr_nonnull(strstr(run.out, "usage: oomlens merge"));
}
END_TEST

/* --html=OUT as well as --html OUT; a page that cannot be written is our
 * own failure (exit 1), a file that is not a report the input's (exit 2). */
START_TEST(html_equals_and_status)
{
  char out[PATH_MAX + 32], arg[PATH_MAX + 40];
  snprintf(out, sizeof out, "%s/eq.html", harness_dir());
  snprintf(arg, sizeof arg, "--html=%s", out);
  harness_run_t run;
  cli(&run, (const char *[]){"report", arg, fixture("rank1.json"), NULL});
  ck_assert_msg(run.status == 0, "exit %d:\n%s", run.status, run.out);
  ck_assert_int_eq(access(out, F_OK), 0);
  snprintf(arg, sizeof arg, "--html=%s/no/dir/x.html", harness_dir());
  cli(&run, (const char *[]){"report", fixture("rank1.json"), arg, NULL});
  ck_assert_msg(run.status == 1, "exit %d:\n%s", run.status, run.out);
  ck_assert_msg(strstr(run.out, "oomlens report: ")
                  && strstr(run.out, "/no/dir/x.html: cannot create a temporary file in its folder"),
                "%s", run.out);
  cli(&run, (const char *[]){"report", "--html=", fixture("rank1.json"), NULL});
  ck_assert_int_eq(run.status, 2);
  ck_assert_ptr_nonnull(strstr(run.out, "bad value '' for --html"));
  cli(&run, (const char *[]){"merge", "--json=yes", fixture("rank1.json"), NULL});
  ck_assert_int_eq(run.status, 2);
  ck_assert_ptr_nonnull(strstr(run.out, "unknown option --json=yes"));
}
END_TEST

/* Rank 2 ran out 0.25 s before rank 1 (the fixtures' first_oom_time_unix);
 * rank 0 peaked at 144 MiB, the others at 1 GiB. */
START_TEST(merge_table)
{
  harness_run_t run;
  cli(&run, (const char *[]){"merge", fixture("rank1.json"), fixture("rank2.json"),
                             fixture("rank0.json"), NULL});
  ck_assert_msg(run.status == 0, "exit %d:\n%s", run.status, run.out);
  const char *r0 = strstr(run.out, "\n0      1000"), *r1 = strstr(run.out, "\n1      1001"),
             *r2 = strstr(run.out, "\n2      1002");
  ck_assert_msg(r0 && r1 && r2 && r0 < r1 && r1 < r2, "rows in rank order:\n%s", run.out);
  ck_assert_ptr_nonnull(strstr(r1, "1.00 GiB        1.00 GiB      1  activations    +0.250 s"));
  ck_assert_ptr_nonnull(strstr(r2, "1  leak           +0.000 s  (first)"));
  ck_assert_ptr_nonnull(strstr(run.out, "Ran out first: rank 2 (pid 1002, device 0, leak) at "
                                        "2026-11-29 "));
  ck_assert_ptr_nonnull(strstr(run.out, "0.250 s before rank 1 (device 0). 2 of 3 ran out."));
  ck_assert_ptr_nonnull(strstr(run.out, "Peak allocated: largest 1.00 GiB (rank 1, device 0), "
                                        "smallest 144.00 MiB (rank 0, device 0): 7.11x, "
                                        "spread 880.00 MiB"));
}
END_TEST

START_TEST(merge_json)
{
  harness_run_t run;
  cli(&run, (const char *[]){"merge", "--json", fixture("rank0.json"), fixture("rank1.json"),
                             fixture("rank2.json"), NULL});
  ck_assert_msg(run.status == 0, "exit %d:\n%s", run.status, run.out);
  char err[256];
  ol_json_t *j = ol_json_parse(run.out, strlen(run.out), err, sizeof err);
  ck_assert_msg(j, "%s\n%s", err, run.out);
  ck_assert_int_eq(harness_int(j, "oomlens_merge"), 1);
  ck_assert_uint_eq(ol_json_length(ol_json_get(j, "rows")), 3);
  ck_assert_str_eq(ol_json_string(ol_json_path(j, "rows[1].oom_class")), "activations");
  ck_assert_int_eq(ol_json_kind(ol_json_path(j, "rows[0].oom_class")), OL_JSON_NULL);
  ck_assert_int_eq(harness_int(j, "rows[2].peak_reserved"), 1024 * MiB);
  ck_assert_int_eq(harness_int(j, "ran_out"), 2);
  ck_assert_str_eq(ol_json_string(ol_json_path(j, "first_oom.rank")), "2");
  ck_assert(fabs(ol_json_number(ol_json_path(j, "first_oom.lead_s")) - 0.25) < 1e-6);
  ck_assert_int_eq(harness_int(j, "imbalance.peak_allocated.max"), 1024 * MiB);
  ck_assert_int_eq(harness_int(j, "imbalance.peak_allocated.min"), 144 * MiB);
  ck_assert_int_eq(harness_int(j, "imbalance.peak_allocated.spread"), 880 * MiB);
  ck_assert(fabs(ol_json_number(ol_json_path(j, "imbalance.peak_allocated.ratio")) - 64.0 / 9) <
            1e-5);
  ck_assert_str_eq(ol_json_string(ol_json_path(j, "imbalance.peak_allocated.min_rank")), "0");
  ol_json_free(j);
}
END_TEST

START_TEST(merge_without_oom_times)
{
  harness_run_t run;
  cli(&run, (const char *[]){"merge", fixture("rank0.json"), fixture("format_1_0.json"), NULL});
  ck_assert_msg(run.status == 0, "exit %d:\n%s", run.status, run.out);
  ck_assert_ptr_nonnull(strstr(run.out, "1 of 2 ran out; the reports carry no OOM times"));
}
END_TEST

/* A recorded trace: allocated from its tensors, reserved from PyTorch's
 * segments, and the call sites at the peak from its frames; the largest is
 * what `oomlens replay` finds for the same trace (4831838208 bytes). */
START_TEST(report_from_a_trace)
{
  char path[PATH_MAX];
  ol_error_t err;
  snprintf(path, sizeof path, "%s/oom_activations.csv.gz", harness_env("OOMLENS_TEST_DATA"));
  ol_report_t v;
  ck_assert_msg(ol_view_load(&v, path, &err) == 0, "%s", err.text);
  const ol_report_device_t *d = &v.devices[0];
  ck_assert_int_eq(d->stats.allocated_bytes[OL_POOL_ALL].peak, 12482133056ll);
  ck_assert_int_gt(d->stats.reserved_bytes[OL_POOL_ALL].peak, 12482133056ll);
  ck_assert_int_eq(d->stats.num_ooms, 1);
  ck_assert(d->has_timeline && d->timeline.oom_count == 1);
  ck_assert_int_eq(d->timeline.peak_allocated, 12482133056ll);
  ck_assert_uint_gt(d->at_peak.count, 0);
  ck_assert_int_eq(d->at_peak.site[0].bytes, 4831838208ll);
  ck_assert_uint_gt(d->at_peak.site[0].frames.count, 0);
  ck_assert_str_eq(d->at_peak.site[0].frames.frame[0], "activations.py:66:forward");
  int64_t sum = 0;
  for (size_t i = 0; i < d->at_peak.count; i++)
    sum += d->at_peak.site[i].bytes;
  ck_assert_int_le(sum, 12482133056ll);
  ol_report_free(&v);
}
END_TEST

/* ---- the page in a browser ---------------------------------------------- */

typedef struct image {
  uint32_t width, height;
  unsigned char *rgb; /* width * height * 3 */
} image_t;

static uint32_t be32(const unsigned char *p)
{
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int paeth(int a, int b, int c)
{
  int p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
  return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

/* 8-bit RGB or RGBA, not interlaced: what Chromium writes. */
static void png_decode(const unsigned char *png, size_t len, image_t *img)
{
  ck_assert(len > 8 && memcmp(png, "\x89PNG\r\n\x1a\n", 8) == 0);
  unsigned char *idat = malloc(len), *raw = NULL;
  size_t idat_len = 0;
  unsigned depth = 0, type = 0;
  for (size_t at = 8; at + 12 <= len;) {
    uint32_t n = be32(png + at);
    const unsigned char *kind = png + at + 4, *data = png + at + 8;
    ck_assert(at + 12 + n <= len);
    if (!memcmp(kind, "IHDR", 4)) {
      img->width = be32(data);
      img->height = be32(data + 4);
      depth = data[8];
      type = data[9];
      ck_assert_msg(depth == 8 && (type == 2 || type == 6) && data[12] == 0,
                    "PNG depth %u type %u interlace %u", depth, type, data[12]);
    } else if (!memcmp(kind, "IDAT", 4)) {
      memcpy(idat + idat_len, data, n);
      idat_len += n;
    }
    at += 12 + n;
  }
  size_t bpp = type == 6 ? 4 : 3, stride = img->width * bpp;
  uLongf raw_len = (uLongf)(stride + 1) * img->height;
  raw = malloc(raw_len);
  ck_assert_int_eq(uncompress(raw, &raw_len, idat, idat_len), Z_OK);
  ck_assert_uint_eq(raw_len, (stride + 1) * img->height);
  img->rgb = malloc((size_t)img->width * img->height * 3);
  unsigned char *prev = calloc(stride, 1), *cur = malloc(stride);
  for (uint32_t y = 0; y < img->height; y++) {
    const unsigned char *row = raw + y * (stride + 1);
    for (size_t x = 0; x < stride; x++) {
      int a = x >= bpp ? cur[x - bpp] : 0, b = prev[x], c = x >= bpp ? prev[x - bpp] : 0;
      int pred = row[0] == 1 ? a : row[0] == 2 ? b : row[0] == 3 ? (a + b) / 2
               : row[0] == 4 ? paeth(a, b, c) : 0;
      cur[x] = (unsigned char)(row[1 + x] + pred);
    }
    for (uint32_t x = 0; x < img->width; x++)
      memcpy(img->rgb + ((size_t)y * img->width + x) * 3, cur + x * bpp, 3);
    memcpy(prev, cur, stride);
  }
  free(prev);
  free(cur);
  free(raw);
  free(idat);
}

/* Pixels within a small distance of the colour 0xRRGGBB. */
static size_t pixels_near(const image_t *img, uint32_t colour)
{
  int r = colour >> 16, g = (colour >> 8) & 255, b = colour & 255;
  size_t n = 0;
  for (size_t i = 0; i < (size_t)img->width * img->height; i++) {
    const unsigned char *p = img->rgb + i * 3;
    n += abs(p[0] - r) + abs(p[1] - g) + abs(p[2] - b) <= 24;
  }
  return n;
}

static size_t colours(const image_t *img)
{
  unsigned char *seen = calloc(1 << 21, 1); /* 2^24 bits */
  size_t n = 0;
  for (size_t i = 0; i < (size_t)img->width * img->height; i++) {
    const unsigned char *p = img->rgb + i * 3;
    uint32_t c = (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
    if (!(seen[c >> 3] & (1 << (c & 7)))) {
      seen[c >> 3] |= (unsigned char)(1 << (c & 7));
      n++;
    }
  }
  free(seen);
  return n;
}

static const char *chromium(void)
{
  static char found[PATH_MAX];
  const char *names[] = {"chromium", "chromium-browser", "google-chrome"};
  const char *path = getenv("PATH");
  for (size_t i = 0; i < 3; i++) {
    for (const char *dir = path; dir && *dir;) {
      const char *colon = strchr(dir, ':');
      size_t n = colon ? (size_t)(colon - dir) : strlen(dir);
      snprintf(found, sizeof found, "%.*s/%s", (int)n, dir, names[i]);
      if (access(found, X_OK) == 0)
        return found;
      dir = colon ? colon + 1 : NULL;
    }
  }
  ck_abort_msg("no chromium on PATH: scripts/setup.sh installs it (apt-get install chromium)");
  return NULL;
}

/* A trace's page: the rows a trace cannot give read n/a, not 0 B; one OOM
 * is "1 out-of-memory error"; the peak's label sits above its point (it
 * lay over the line beside it); a print stylesheet enlarges the chart's
 * text. */
START_TEST(html_of_a_trace)
{
  char trace[PATH_MAX];
  snprintf(trace, sizeof trace, "%s/oom_activations.csv.gz", harness_env("OOMLENS_TEST_DATA"));
  char *html = html_of(trace, "lacks.html");
  ck_assert_ptr_nonnull(strstr(html, "Active memory</td><td>n/a</td><td>n/a</td>"));
  ck_assert_ptr_nonnull(strstr(html, "Requested memory</td><td>n/a</td>"));
  ck_assert_ptr_nonnull(strstr(html, "Active allocs</td><td>n/a</td>"));
  ck_assert_ptr_nonnull(strstr(html, "GPU reserved memory</td><td>"));
  ck_assert_ptr_null(strstr(html, "GPU reserved memory</td><td>n/a"));
  ck_assert_ptr_nonnull(strstr(html, "from large pool</td><td>n/a</td>"));
  ck_assert_ptr_nonnull(strstr(html, "<span>out-of-memory error</span>"));
  ck_assert_ptr_null(strstr(html, "1 out-of-memory errors"));
  ck_assert_ptr_nonnull(strstr(html, "@media print{"));
  double cy = 0, ty = 0;
  const char *circle = strstr(html, "<circle cx=\"");
  const char *label = strstr(html, "<text class=\"peak\" x=\"");
  ck_assert(circle && label);
  ck_assert_int_eq(sscanf(strstr(circle, "cy=\"") + 4, "%lf", &cy), 1);
  ck_assert_int_eq(sscanf(strstr(label, " y=\"") + 4, "%lf", &ty), 1);
  ck_assert_msg(ty < cy - 4, "label at y %.1f, peak at %.1f", ty, cy);
  free(html);
  html = html_of("rank1.json", "rank1.html"); /* a job's report has them all */
  ck_assert_ptr_null(strstr(html, "n/a"));
  free(html);
}
END_TEST

/* A trace given through a pipe: each command opens its input more than
 * once (report looks for a JSON report's '{' first, replay reads the
 * device's size first, export probes the trace), and a pipe gives its
 * bytes once: report and replay said "unknown trace format" or "empty
 * file" of a good trace. Each now reads a copy kept in a temporary file
 * with no name (TMPDIR is left empty), and names the input as given. */
START_TEST(a_trace_through_a_pipe)
{
  char trace[PATH_MAX], cmd[3 * PATH_MAX], tmpdir[PATH_MAX], env_tmp[PATH_MAX + 8];
  snprintf(trace, sizeof trace, "%s/oom_activations.csv.gz", harness_env("OOMLENS_TEST_DATA"));
  snprintf(tmpdir, sizeof tmpdir, "%s/tmp", harness_dir());
  ck_assert_int_eq(mkdir(tmpdir, 0700), 0);
  snprintf(env_tmp, sizeof env_tmp, "TMPDIR=%s", tmpdir);
  const char *const env[] = {env_tmp, NULL};
  static const char *const commands[] = {"report /dev/stdin", "replay /dev/stdin",
                                         "export /dev/stdin --format perfetto"};
  static const char *const says[] = {"the recorded trace /dev/stdin", "trace:            /dev/stdin",
                                     "\"traceEvents\""};
  for (int i = 0; i < 3; i++) {
    snprintf(cmd, sizeof cmd, "cat '%s' | '%s' %s", trace, harness_env("OOMLENS_TEST_CLI"),
             commands[i]);
    harness_run_t run;
    harness_exec(&run, false, env, (const char *[]){"/bin/sh", "-c", cmd, NULL});
    ck_assert_msg(run.status == 0 && strstr(run.out, says[i]), "%s: %d %s", commands[i], run.status,
                  run.out);
  }
  DIR *d = opendir(tmpdir);
  ck_assert_ptr_nonnull(d);
  struct dirent *e;
  int left = 0;
  while ((e = readdir(d)))
    left += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
  closedir(d);
  ck_assert_int_eq(left, 0);
}
END_TEST

/* The page of a recorded trace rendered by headless Chromium: the chart's
 * colours (reserved area, allocated line, the OOM's red line) are on the
 * picture, which is the window's size and far from blank. */
START_TEST(page_renders_in_chromium)
{
  char trace[PATH_MAX], html[PATH_MAX + 32], png[PATH_MAX + 32], url[PATH_MAX + 64],
    shot[PATH_MAX + 64], profile[PATH_MAX + 64];
  snprintf(trace, sizeof trace, "%s/oom_activations.csv.gz", harness_env("OOMLENS_TEST_DATA"));
  free(html_of(trace, "trace.html"));
  snprintf(html, sizeof html, "%s/trace.html", harness_dir());
  snprintf(png, sizeof png, "%s/trace.png", harness_dir());
  snprintf(url, sizeof url, "file://%s", html);
  snprintf(shot, sizeof shot, "--screenshot=%s", png);
  snprintf(profile, sizeof profile, "--user-data-dir=%s/profile", harness_dir());
  const char *argv[] = {chromium(), "--headless", "--no-sandbox", "--disable-gpu",
                        "--hide-scrollbars", "--no-first-run", profile,
                        "--window-size=1000,800", shot, url, NULL};
  harness_run_t run;
  harness_exec(&run, false, NULL, argv);
  ck_assert_msg(run.status == 0 && access(png, F_OK) == 0, "chromium exit %d:\n%s", run.status,
                run.out);
  size_t len;
  unsigned char *data = (unsigned char *)ol_test_read_file(png, &len);
  image_t img = {0};
  png_decode(data, len, &img);
  ck_assert_uint_eq(img.width, 1000);
  ck_assert_uint_eq(img.height, 800);
  size_t distinct = colours(&img), reserved = pixels_near(&img, 0xc6dbef),
         allocated = pixels_near(&img, 0x08519c), oom = pixels_near(&img, 0xd62728),
         white = pixels_near(&img, 0xffffff);
  ck_assert_msg(distinct > 200, "%zu colours", distinct);
  ck_assert_msg(reserved > 5000, "%zu pixels of the reserved area", reserved);
  ck_assert_msg(allocated > 500, "%zu pixels of the allocated line", allocated);
  ck_assert_msg(oom > 300, "%zu pixels of OOM red", oom);
  ck_assert_msg(white < (size_t)img.width * img.height * 9 / 10, "%zu white pixels", white);
  free(img.rgb);
  free(data);
}
END_TEST

/* The hover read-out: a mouse move over the middle of the chart shows that
 * point's figures (a probe script appended to the page moves the mouse and
 * leaves only the read-out in the DOM Chromium dumps). */
START_TEST(hover_reads_out_a_point)
{
  char html[PATH_MAX + 32], url[PATH_MAX + 64], profile[PATH_MAX + 64];
  char *page = html_of("rank1.json", "hover.html");
  snprintf(html, sizeof html, "%s/hover.html", harness_dir());
  FILE *f = fopen(html, "w");
  ck_assert_ptr_nonnull(f);
  char *end = strstr(page, "</body>");
  ck_assert_ptr_nonnull(end);
  fprintf(f, "%.*s<script>var s=document.querySelector('svg.chart'),b=s.getBoundingClientRect();"
          "s.dispatchEvent(new MouseEvent('mousemove',{clientX:b.left+b.width/2,clientY:b.top+9}));"
          "document.body.textContent='TIP['+s.querySelector('.tip').textContent+']';</script>"
          "</body></html>\n", (int)(end - page), page);
  fclose(f);
  /* The axis's unit, which the read-out must speak (it spoke seconds over
   * an axis in ms). */
  const char *unit = strstr(page, "\"un\":\"");
  ck_assert_ptr_nonnull(unit);
  char want[32];
  snprintf(want, sizeof want, " %.*s: allocated ", (int)strcspn(unit + 6, "\""), unit + 6);
  free(page);
  snprintf(url, sizeof url, "file://%s", html);
  snprintf(profile, sizeof profile, "--user-data-dir=%s/profile", harness_dir());
  const char *argv[] = {chromium(), "--headless", "--no-sandbox", "--disable-gpu",
                        "--no-first-run", profile, "--window-size=1000,800", "--dump-dom", url,
                        NULL};
  harness_run_t run;
  harness_exec(&run, false, NULL, argv);
  ck_assert_msg(run.status == 0, "chromium exit %d:\n%s", run.status, run.out);
  const char *tip = strstr(run.out, "TIP[");
  ck_assert_msg(tip, "%s", run.out);
  ck_assert_msg(strstr(tip, want) && strstr(tip, "iB, reserved ") &&
                  !strstr(tip, "TIP[]"), "%s", tip);
}
END_TEST


/* ---- strict reading (issue 15) ------------------------------------------ */

/* rank1.json with the value of the first `"key": ` after `after` (NULL:
 * from the top) replaced by value, or with that key renamed (value NULL):
 * the file's path. */
static const char *mutated(const char *after, const char *key, const char *value)
{
  static char path[PATH_MAX + 32];
  char *text = ol_test_read_file(fixture("rank1.json"), NULL);
  char needle[96];
  snprintf(needle, sizeof needle, "\"%s\": ", key);
  char *from = after ? strstr(text, after) : text;
  ck_assert_ptr_nonnull(from);
  char *at = strstr(from, needle);
  ck_assert_msg(at != NULL, "no %s in rank1.json", needle);
  char *end = at + strlen(needle);
  if (value) {
    if (*end == '{' || *end == '[') { /* a whole object or list: to its match */
      int depth = 0;
      do
        depth += (*end == '{' || *end == '[') - (*end == '}' || *end == ']');
      while (*++end && depth > 0);
    } else {
      end += strcspn(end, ",}]\n");
    }
  } else {
    at[1] = 'x'; /* "stats" becomes "xtats": the key is gone */
    end = at;
  }
  snprintf(path, sizeof path, "%s/mutated.json", harness_dir());
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fwrite(text, 1, (size_t)(at - text), f);
  fputs(value ? needle : "", f);
  fputs(value ? value : "", f);
  fputs(end, f);
  fclose(f);
  free(text);
  return path;
}

typedef struct {
  const char *after, *key, *value; /* as mutated() takes them */
  const char *message;             /* after "FILE: " */
} strict_case_t;

/* Before the fix each of these read as 0 B (or -5 B, or 0 s) with exit 0
 * in report and merge, and the timeline's times overflowed their cast. */
static const strict_case_t strict_cases[] = {
  {NULL, "stats", NULL, "devices[0].stats: missing"},
  {"\"allocated_bytes\"", "peak", NULL, "devices[0].stats.allocated_bytes.all.peak: missing"},
  {"\"allocated_bytes\"", "peak", "\"big\"",
   "devices[0].stats.allocated_bytes.all.peak: \"big\" is not an integer"},
  {"\"allocated_bytes\"", "peak", "-5", "devices[0].stats.allocated_bytes.all.peak: -5 is out of range"},
  {"\"allocated_bytes\"", "peak", "9223372036854775808",
   "devices[0].stats.allocated_bytes.all.peak: 9.2233720368547758e+18 is not an integer"},
  {"\"allocated_bytes\"", "peak", "12", "devices[0].stats.allocated_bytes.all.peak: 12 is below current"},
  {"\"reserved_bytes\"", "peak", "1.5", "devices[0].stats.reserved_bytes.all.peak: 1.5 is not an integer"},
  {NULL, "num_ooms", "true", "devices[0].num_ooms: true or false, not an integer"},
  {NULL, "mem_info", "[]", "devices[0].mem_info: a list, not an object"},
  {NULL, "pid", "-1", "pid: -1 is out of range"},
  {NULL, "time_unix", "1e300", "time_unix: 1.0000000000000001e+300 is out of range"},
  {"\"timeline\"", "allocated_t", "1.1e19", "devices[0].timeline.peak.allocated_t: 1.1e+19 is out of range"},
  {"\"timeline\"", "allocated_t", "-1e9", "devices[0].timeline.peak.allocated_t: -1000000000 is out of range"},
  {"\"timeline\"", "interval_s", "-1", "devices[0].timeline.interval_s: -1 is out of range"},
  {"\"timeline\"", "reserved", "[1, 2]", "devices[0].timeline.reserved: 2 points, where \"allocated\" has"},
  {"\"oom\"", "class", "\"sideways\"", "devices[0].oom.class: \"sideways\" is not a class this oomlens knows"},
  {"\"oom\"", "request", "\"1G\"", "devices[0].oom.request: \"1G\" is not an integer"},
  {"\"at_peak\"", "bytes", "null", "devices[0].sites.at_peak[0].bytes: null, not an integer"},
};

START_TEST(strict_figures_exit_2)
{
  const strict_case_t *c = &strict_cases[_i];
  const char *path = mutated(c->after, c->key, c->value);
  char want[PATH_MAX + 200];
  snprintf(want, sizeof want, "%s: %s", path, c->message);
  static const char *const how[][3] = {{"report", NULL}, {"report", "--html", "x.html"},
                                       {"merge", NULL}, {"merge", "--json", NULL}};
  for (size_t i = 0; i < sizeof how / sizeof *how; i++) {
    harness_run_t run;
    const char *argv[6] = {how[i][0]};
    int n = 1;
    char html[PATH_MAX + 32];
    snprintf(html, sizeof html, "%s/x.html", harness_dir());
    for (int k = 1; k < 3 && how[i][k]; k++)
      argv[n++] = strcmp(how[i][k], "x.html") == 0 ? html : how[i][k];
    if (strcmp(how[i][0], "merge") == 0)
      argv[n++] = fixture("rank0.json");
    argv[n++] = path;
    cli(&run, argv);
    ck_assert_msg(run.status == 2 && strstr(run.out, want), "%s: exit %d, want '%s' in:\n%s",
                  how[i][0], run.status, want, run.out);
    ck_assert_ptr_null(strstr(run.out, "rank ")); /* nothing printed */
  }
}
END_TEST

/* The fixtures themselves read: the checks refuse only what is wrong. */
START_TEST(strict_reads_every_fixture)
{
  static const char *const names[] = {"rank0.json", "rank1.json", "rank2.json", "evil.json",
                                      "format_1_0.json"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    ol_report_t v;
    ol_error_t err;
    ck_assert_msg(ol_view_load_json(&v, fixture(names[i]), &err) == 0, "%s", err.text);
    ck_assert_int_gt(v.devices[0].stats.allocated_bytes[OL_POOL_ALL].peak, 0);
    ol_report_free(&v);
  }
}
END_TEST

/* Before: merge of a gzip'd report said "expected a value, found byte
 * 0x1F". Now a gzip'd report reads as report reads a gzip'd trace. */
START_TEST(merge_reads_gzip)
{
  char *text = ol_test_read_file(fixture("rank1.json"), NULL);
  char path[PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/rank1.json.gz", harness_dir());
  gzFile gz = gzopen(path, "wb");
  ck_assert_ptr_nonnull(gz);
  ck_assert_int_eq(gzputs(gz, text), (int)strlen(text));
  gzclose(gz);
  free(text);
  harness_run_t run;
  cli(&run, (const char *[]){"merge", "--json", fixture("rank0.json"), path, NULL});
  ck_assert_msg(run.status == 0, "exit %d:\n%s", run.status, run.out);
  ck_assert_ptr_nonnull(strstr(run.out, "\"reports\": 2"));
  cli(&run, (const char *[]){"report", path, NULL});
  ck_assert_msg(run.status == 0 && strstr(run.out, "activations"), "exit %d:\n%s", run.status,
                run.out);
  /* cut short: refused, saying so */
  truncate(path, 200);
  cli(&run, (const char *[]){"merge", path, NULL});
  ck_assert_msg(run.status == 2 && strstr(run.out, "a gzip'd file that does not inflate"),
                "exit %d:\n%s", run.status, run.out);
}
END_TEST

/* The inputs scripts/fuzz_cli.sh found (tests/data/fuzz_cli/, each with
 * a .txt saying what it found and the command): a report is refused with
 * the field named, exit 2, by report, report --html and merge alike; a
 * trace is read or refused (0 or 2), never a crash. Under the sanitizer
 * pass a finding's undefined behaviour would end the command. */
static void run_finding(const char *path, bool report)
{
  char html[PATH_MAX + 32];
  snprintf(html, sizeof html, "%s/finding.html", harness_dir());
  const char *const report_runs[][5] = {{"report", path}, {"report", path, "--html", html},
                                        {"merge", path}, {"merge", "--json", path}};
  const char *const trace_runs[][7] = {
    {"replay", path, "--policy", "oomlens"}, {"replay", path, "--policy", "pytorch"},
    {"replay", path, "--policy", "pytorch-expandable"},
    {"export", path, "--format", "folded", "-o", html},
    {"export", path, "--format", "memory-viz", "-o", html},
    {"export", path, "--format", "perfetto", "-o", html},
    {"export", path, "--format", "rmm-csv", "-o", html}, {"report", path}};
  size_t n = report ? sizeof report_runs / sizeof *report_runs
                    : sizeof trace_runs / sizeof *trace_runs;
  for (size_t i = 0; i < n; i++) {
    harness_run_t run;
    cli(&run, report ? report_runs[i] : trace_runs[i]);
    if (report)
      ck_assert_msg(run.status == 2 && strstr(run.out, path), "%s %s: exit %d:\n%s",
                    report_runs[i][0], path, run.status, run.out);
    else
      ck_assert_msg(run.status == 0 || run.status == 2, "%s %s: exit %d:\n%s", trace_runs[i][0],
                    path, run.status, run.out);
    unlink(html);
  }
}

START_TEST(fuzz_findings_stay_fixed)
{
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/fuzz_cli", harness_env("OOMLENS_TEST_DATA"));
  DIR *d = opendir(dir);
  ck_assert_ptr_nonnull(d);
  int seen = 0;
  for (struct dirent *e; (e = readdir(d));) {
    size_t len = strlen(e->d_name);
    bool json = len > 5 && strcmp(e->d_name + len - 5, ".json") == 0;
    bool trace = len > 6 && strcmp(e->d_name + len - 6, ".trace") == 0;
    if (!json && !trace)
      continue;
    char path[2 * PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    run_finding(path, json);
    seen++;
  }
  closedir(d);
  ck_assert_int_gt(seen, 0);
}
END_TEST

static Suite *reports_suite(void)
{
  Suite *s = suite_create("reports");
  TCase *report = tcase_create("report");
  tcase_add_checked_fixture(report, harness_setup, harness_teardown);
  tcase_set_timeout(report, 60);
  tcase_add_test(report, text_report_from_json);
  tcase_add_test(report, html_escapes_what_the_report_holds);
  tcase_add_test(report, html_holds_the_figures_and_nothing_external);
  tcase_add_test(report, format_1_0_still_reads);
  tcase_add_loop_test(report, not_ours_exits_2, 0, sizeof bad_files / sizeof *bad_files);
  tcase_add_test(report, usage_errors);
  tcase_add_test(report, html_equals_and_status);
  tcase_add_test(report, report_from_a_trace);
  tcase_add_test(report, html_of_a_trace);
  tcase_add_test(report, a_trace_through_a_pipe);
  tcase_add_loop_test(report, strict_figures_exit_2, 0, sizeof strict_cases / sizeof *strict_cases);
  tcase_add_test(report, strict_reads_every_fixture);
  tcase_add_test(report, fuzz_findings_stay_fixed);
  suite_add_tcase(s, report);
  TCase *merge = tcase_create("merge");
  tcase_add_checked_fixture(merge, harness_setup, harness_teardown);
  tcase_set_timeout(merge, 60);
  tcase_add_test(merge, merge_table);
  tcase_add_test(merge, merge_json);
  tcase_add_test(merge, merge_without_oom_times);
  tcase_add_test(merge, merge_reads_gzip);
  suite_add_tcase(s, merge);
  TCase *browser = tcase_create("browser");
  tcase_add_checked_fixture(browser, harness_setup, harness_teardown);
  tcase_set_timeout(browser, 120);
  tcase_add_test(browser, page_renders_in_chromium);
  tcase_add_test(browser, hover_reads_out_a_point);
  suite_add_tcase(s, browser);
  return s;
}

int main(void)
{
  return ol_run_suite(reports_suite());
}
